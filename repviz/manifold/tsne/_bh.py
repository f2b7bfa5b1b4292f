"""Repulsive forces by the Barnes-Hut approximation (van der Maaten 2014) for 1-, 2- and 3-D embeddings.

A 2^dim-ary space-partitioning tree (binary tree, quadtree, octree) is built serially by insertion; every cell
keeps its point count and centre of mass. Each point then walks the tree (``prange`` over points, each writing
only its own outputs) and treats a cell as one mass at its centre when width / distance < theta.
Time O(n log n) per call; memory O(n) nodes.

Exactly coincident points share one leaf (a cell is never split to separate them), so duplicates cannot make
the tree infinitely deep; below ``_MAX_DEPTH`` levels a leaf accepts any point.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._jit import njit
from ..._kernels import sq_dist
from ._kernels import kernel_weight

_MAX_DEPTH = 48


@njit(cache=True)
def _build(Y, children, center, half, mass, com, leaf_point):
    """Insert all points; returns the node count, or -1 when the node arrays are too small."""
    n, dim = Y.shape
    n_child = 1 << dim
    lo = np.empty(dim)
    hi = np.empty(dim)
    for d in range(dim):
        lo[d] = hi[d] = Y[0, d]
    for i in range(1, n):
        for d in range(dim):
            lo[d] = min(lo[d], Y[i, d])
            hi[d] = max(hi[d], Y[i, d])
    width = 0.0
    for d in range(dim):
        width = max(width, hi[d] - lo[d])
    width = max(width, 1e-12) * (0.5 + 1e-6)
    n_nodes = 1
    for c in range(n_child):
        children[0, c] = -1
    for d in range(dim):
        center[0, d] = 0.5 * (lo[d] + hi[d])
        com[0, d] = 0.0
    half[0] = width
    mass[0] = 0.0
    leaf_point[0] = -1
    for i in range(n):
        node = 0
        depth = 0
        while True:
            if children[node, 0] == -2 or mass[node] == 0.0:  # leaf (-2 marks a leaf holding points) or empty
                if mass[node] == 0.0:
                    leaf_point[node] = i
                    children[node, 0] = -2
                    mass[node] = 1.0
                    for d in range(dim):
                        com[node, d] = Y[i, d]
                    break
                j = leaf_point[node]
                same = True
                for d in range(dim):
                    if Y[i, d] != Y[j, d]:
                        same = False
                if same or depth >= _MAX_DEPTH:
                    for d in range(dim):
                        com[node, d] = (com[node, d] * mass[node] + Y[i, d]) / (mass[node] + 1.0)
                    mass[node] += 1.0
                    break
                # split: the leaf's points (all at Y[j]) move into one child; the node becomes internal
                if n_nodes + n_child > children.shape[0]:
                    return -1
                for c in range(n_child):
                    children[node, c] = -1
                q = 0
                for d in range(dim):
                    if Y[j, d] > center[node, d]:
                        q |= 1 << d
                child = n_nodes
                n_nodes += 1
                children[node, q] = child
                children[child, 0] = -2
                for c in range(1, n_child):
                    children[child, c] = -1
                for d in range(dim):
                    off = 0.5 * half[node] if (q >> d) & 1 else -0.5 * half[node]
                    center[child, d] = center[node, d] + off
                    com[child, d] = com[node, d]
                half[child] = 0.5 * half[node]
                mass[child] = mass[node]
                leaf_point[child] = j
                leaf_point[node] = -1
            # internal node: add the point, descend
            for d in range(dim):
                com[node, d] = (com[node, d] * mass[node] + Y[i, d]) / (mass[node] + 1.0)
            mass[node] += 1.0
            q = 0
            for d in range(dim):
                if Y[i, d] > center[node, d]:
                    q |= 1 << d
            child = children[node, q]
            if child == -1:
                if n_nodes >= children.shape[0]:
                    return -1
                child = n_nodes
                n_nodes += 1
                children[node, q] = child
                for c in range(n_child):
                    children[child, c] = -1
                for d in range(dim):
                    off = 0.5 * half[node] if (q >> d) & 1 else -0.5 * half[node]
                    center[child, d] = center[node, d] + off
                half[child] = 0.5 * half[node]
                mass[child] = 0.0
                leaf_point[child] = -1
            node = child
            depth += 1
    return n_nodes


@njit(parallel=True, cache=True, fastmath=True)
def _traverse(Y, children, half, mass, com, theta, dof, rep, z_rows):
    n, dim = Y.shape
    n_child = children.shape[1]
    theta2 = theta * theta
    for i in prange(n):
        stack = np.empty(_MAX_DEPTH * n_child + 8, dtype=np.int64)
        top = 0
        stack[top] = 0
        top += 1
        z = 0.0
        for d in range(dim):
            rep[i, d] = 0.0
        while top > 0:
            top -= 1
            node = stack[top]
            m = mass[node]
            if m == 0.0:
                continue
            d2 = sq_dist(Y, i, com, node)
            is_leaf = children[node, 0] == -2
            width = 2.0 * half[node]
            if is_leaf or width * width < theta2 * d2:
                if is_leaf and d2 == 0.0:
                    z += m - 1.0  # coincident points (and the point itself): w(0) = 1, no force
                    continue
                w, f = kernel_weight(d2, dof)
                z += m * w
                for d in range(dim):
                    rep[i, d] += m * f * (Y[i, d] - com[node, d])
            else:
                for c in range(n_child):
                    if children[node, c] >= 0:
                        stack[top] = children[node, c]
                        top += 1
        z_rows[i] = z


class BHRepulsion:
    """Repulsion callable ``(Y, rep) -> Z`` by Barnes-Hut; keeps the tree buffers between calls."""

    def __init__(self, n_samples: int, dim: int, dof: float, theta: float = 0.5):
        self.dim, self.dof, self.theta = dim, float(dof), float(theta)
        self._alloc(4 * n_samples + 64)

    def _alloc(self, capacity: int) -> None:
        self.children = np.empty((capacity, 1 << self.dim), dtype=np.int64)
        self.center = np.empty((capacity, self.dim))
        self.half = np.empty(capacity)
        self.mass = np.empty(capacity)
        self.com = np.empty((capacity, self.dim))
        self.leaf_point = np.empty(capacity, dtype=np.int64)

    def __call__(self, Y: np.ndarray, rep: np.ndarray) -> float:
        while _build(Y, self.children, self.center, self.half, self.mass, self.com, self.leaf_point) < 0:
            self._alloc(2 * self.children.shape[0])
        z_rows = np.empty(Y.shape[0])
        _traverse(Y, self.children, self.half, self.mass, self.com, self.theta, self.dof, rep, z_rows)
        return float(z_rows.sum())
