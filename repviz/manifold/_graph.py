"""Neighbourhood graphs for the graph-based methods, and the rule that connects a disconnected one.

A kNN graph of tightly clustered activations often falls apart into several components; Isomap then has
infinite geodesics and a Laplacian has one zero eigenvalue per component. ``connect_components`` adds edges by
Borůvka's rule: each round, every component gains the single shortest edge (in the input metric) from any of
its points to a point of another component, until one component remains. These are exactly the merges
single-linkage clustering would make, so the added edges are the shortest possible bridges. It warns with the
number of components found and suggests a larger ``n_neighbors``; with ``connect=False`` it raises instead.
Methods that turn distances into affinities give each bridge at least the smallest affinity of the data's own
edges (a heat kernel of a long bridge would underflow to zero).
Cost: O(n² d) time per round (at most log2(components) rounds), O(block) memory.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..neighbors import _block_rows, check_n_neighbors, knn
from ._base import check_array, check_precomputed

_BLOCK_BYTES = 64 << 20


def distance_rows(X: np.ndarray, rows: np.ndarray, metric: str, sq: np.ndarray | None = None) -> np.ndarray:
    """Distances (float64, in ``knn``'s units for ``metric``) from the points ``rows`` to every point."""
    if metric == "precomputed":
        return np.asarray(X[rows], dtype=np.float64)
    Xf = X.astype(np.float64, copy=False)
    if metric == "cosine":
        norms = np.linalg.norm(Xf, axis=1)
        norms[norms == 0] = 1
        Xf = Xf / norms[:, None]
    if sq is None:
        sq = np.einsum("ij,ij->i", Xf, Xf)
    D = Xf[rows] @ Xf.T
    D *= -2
    D += sq[rows, None]
    D += sq[None, :]
    np.maximum(D, 0, out=D)
    if metric == "euclidean":
        np.sqrt(D, out=D)
    elif metric == "cosine":
        D *= 0.5
    return D


def knn_graph(X: np.ndarray, n_neighbors: int, metric: str, *, method: str = "exact", random_state=None):
    """Symmetric kNN graph (CSR, edge weight = distance; an edge exists if either end lists the other)."""
    ind, dist = knn(X, n_neighbors, metric=metric, method=method, random_state=random_state)
    return symmetrize(ind, dist, X.shape[0]), ind, dist


def symmetrize(ind: np.ndarray, dist: np.ndarray, n: int) -> sp.csr_matrix:
    k = ind.shape[1]
    # zero-distance neighbours (duplicates) would vanish from a sparse matrix; keep them as tiny positive edges
    w = np.maximum(dist.astype(np.float64).ravel(), 1e-12)
    G = sp.csr_matrix((w, ind.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))
    return G.maximum(G.T).tocsr()


def radius_graph(X: np.ndarray, radius: float, metric: str) -> sp.csr_matrix:
    """Graph of all pairs closer than ``radius``. Time O(n² d), memory O(block + edges)."""
    n = X.shape[0]
    rows_per = _block_rows(n, _BLOCK_BYTES)
    data, cols, counts = [], [], []
    for s in range(0, n, rows_per):
        rows = np.arange(s, min(n, s + rows_per))
        D = distance_rows(X, rows, metric)
        D[np.arange(len(rows)), rows] = np.inf
        r, c = np.nonzero(D <= radius)
        data.append(np.maximum(D[r, c], 1e-12))
        cols.append(c)
        counts.append(np.bincount(r, minlength=len(rows)))
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
    G = sp.csr_matrix((np.concatenate(data), np.concatenate(cols), indptr), shape=(n, n))
    return G.maximum(G.T).tocsr()


def connect_components(G: sp.csr_matrix, X: np.ndarray, metric: str, *, connect: bool, owner: str,
                       hint: str = "n_neighbors", stacklevel: int = 3) -> sp.csr_matrix:
    """Return ``G`` with bridging edges added by Borůvka's rule (see the module docstring), or raise."""
    n_comp, labels = connected_components(G, directed=False)
    if n_comp == 1:
        return G
    if not connect:
        raise ValueError(f"The neighbourhood graph of {owner} has {n_comp} connected components. Increase "
                         f"{hint}, or pass connect=True to join them by their shortest bridging edges.")
    warnings.warn(f"The neighbourhood graph of {owner} has {n_comp} connected components; joining them by "
                  f"their {n_comp - 1} shortest bridging edges (Borůvka's rule). Increase {hint} if the "
                  f"components should be connected by the data itself.", stacklevel=stacklevel)
    n = X.shape[0]
    sq = None
    if metric != "precomputed":
        Xf = X.astype(np.float64)
        if metric == "cosine":
            norms = np.linalg.norm(Xf, axis=1)
            Xf = Xf / np.where(norms == 0, 1, norms)[:, None]
            metric_rows = "sqeuclidean"
        else:
            metric_rows = metric
        sq = np.einsum("ij,ij->i", Xf, Xf)
    else:
        Xf, metric_rows = X, metric
    new_r, new_c, new_w = [], [], []
    rows_per = _block_rows(n, _BLOCK_BYTES)
    while n_comp > 1:
        best_d = np.full(n, np.inf)
        best_j = np.zeros(n, dtype=np.int64)
        for s in range(0, n, rows_per):
            rows = np.arange(s, min(n, s + rows_per))
            D = distance_rows(Xf, rows, metric_rows, sq)
            D[labels[rows][:, None] == labels[None, :]] = np.inf
            best_j[rows] = np.argmin(D, axis=1)
            best_d[rows] = D[np.arange(len(rows)), best_j[rows]]
        if metric == "cosine":
            best_d *= 0.5
        for c in range(n_comp):
            members = np.flatnonzero(labels == c)
            i = members[np.argmin(best_d[members])]
            new_r.append(i), new_c.append(best_j[i]), new_w.append(max(best_d[i], 1e-12))
        bridge = sp.csr_matrix((new_w, (new_r, new_c)), shape=(n, n))
        n_comp, labels = connected_components(G + bridge + bridge.T, directed=False)
    bridge = sp.csr_matrix((new_w, (new_r, new_c)), shape=(n, n))
    return G.maximum(bridge).maximum(bridge.T).tocsr()


def neighbour_graph(est, X) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix, sp.csr_matrix]:
    """For an estimator with n_neighbors, n_components, metric, neighbors_method, connect and random_state:
    validated input, kNN lists, their symmetric distance graph with components joined, and the bridges.
    Sets ``est.n_connected_components_`` (components before joining)."""
    owner = type(est).__name__
    X = check_array(X, owner, min_samples=2)
    n = X.shape[0]
    if est.metric == "precomputed":
        check_precomputed(X, owner)
    k = check_n_neighbors(est.n_neighbors, n, owner)
    if est.n_components >= n:
        raise ValueError(f"n_components ({est.n_components}) must be less than n_samples ({n}) in {owner}.")
    ind, dist = knn(X, k, metric=est.metric, method=est.neighbors_method, random_state=est.random_state)
    G = symmetrize(ind, dist, n)
    est.n_connected_components_ = int(connected_components(G, directed=False)[0])
    joined = connect_components(G, X, est.metric, connect=est.connect, owner=owner, stacklevel=4)
    bridges = (joined - G).tocsr()
    bridges.eliminate_zeros()
    return X, ind, joined, bridges
