"""Isomap (Tenenbaum, de Silva & Langford 2000): classical MDS of geodesic distances on a neighbourhood graph.

Geodesics come from a numba Dijkstra (binary heap) that reuses the rows already computed as exact shortcuts
(see ``_all_geodesics``), writing float32 distances straight into the matrix
that is then squared and double-centred in place, so the full method holds one n×n float32 array. The top eigenvectors come from the shared partial eigensolver. With
``n_landmarks`` it runs landmark Isomap (de Silva & Tenenbaum 2003): geodesics from m landmarks only, classical
MDS of the landmarks, then distance-based triangulation of every point; memory O(m n).
"""

from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange
from scipy.sparse.csgraph import connected_components

from ._base import (NONE, RANDOM_STATE, BOOLEAN, Estimator, Interval, Options, check_array, check_dense_memory,
                    check_precomputed, rng_from)
from ._eigen import SOLVERS, fix_signs
from ._graph import connect_components, knn_graph, radius_graph
from .mds import double_centre, torgerson
from ..neighbors import check_n_neighbors


_MAX_HUBS = 32  # measured on MNIST kNN graphs: 16-64 hubs per source halve the CPU time of plain Dijkstra


@njit(cache=True, fastmath=True)
def _heap_push(keys, vals, size, key, val):  # pragma: no cover - compiled
    i = size
    keys[i] = key
    vals[i] = val
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= keys[i]:
            break
        keys[i], keys[parent] = keys[parent], keys[i]
        vals[i], vals[parent] = vals[parent], vals[i]
        i = parent
    return size + 1


@njit(cache=True, fastmath=True)
def _heap_pop(keys, vals, size):  # pragma: no cover - compiled
    """Remove the root; the caller reads keys[0], vals[0] before calling."""
    size -= 1
    keys[0] = keys[size]
    vals[0] = vals[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and keys[left + 1] < keys[left]:
            child = left + 1
        if keys[i] <= keys[child]:
            break
        keys[i], keys[child] = keys[child], keys[i]
        vals[i], vals[child] = vals[child], vals[i]
        i = child
    return size


@njit(cache=True, fastmath=True)
def _dijkstra(indptr, indices, weights, src, dist, keys, vals):  # pragma: no cover - compiled
    """Dijkstra from ``src`` with lazy deletion. ``dist`` holds upper bounds on entry (inf, or bounds that obey
    the triangle inequality along edges); a node is pushed only when a path beats its bound, so nodes whose
    bound is already exact cost nothing."""
    dist[src] = 0.0
    size = _heap_push(keys, vals, 0, 0.0, src)
    while size > 0:
        d = keys[0]
        u = vals[0]
        size = _heap_pop(keys, vals, size)
        if d > dist[u]:
            continue
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            nd = d + weights[e]
            if nd < dist[v]:
                dist[v] = nd
                size = _heap_push(keys, vals, size, nd, v)


@njit(cache=True, parallel=True, fastmath=True)
def _all_geodesics(indptr, indices, weights, order, n_chunks, max_hubs, out):  # pragma: no cover - compiled
    """out[s] = geodesic distances from s, for every s, reusing the rows already finished ("hubs").

    Sources are taken in ``order`` (a fixed random permutation, so finished rows are spread over the whole
    graph), split into ``n_chunks`` contiguous runs, one per thread; a thread only reads rows it wrote. In the
    Dijkstra from s, a settled hub h has its exact distance d_h, and d_h + D[h, v] bounds every v; the bound is
    exact for each v whose shortest path passes through h, and also covers everything beyond such v, so nodes
    reached through a hub are never expanded. Only nodes whose shortest path avoids every hub are explored, a
    region that shrinks quickly as rows are finished. The bounds obey the triangle inequality along edges,
    which keeps the pruning exact. Each hub costs a pass over a row (memory-bound), so at most ``max_hubs`` are
    used per source; further finished nodes are expanded like any other.
    """
    n = indptr.shape[0] - 1
    cap = indices.shape[0] + n + 1
    for c in prange(n_chunks):
        done = np.zeros(n, dtype=np.bool_)
        dist = np.empty(n)
        keys = np.empty(cap)
        vals = np.empty(cap, dtype=np.int64)
        for p in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            s = order[p]
            dist[:] = np.inf
            dist[s] = 0.0
            size = _heap_push(keys, vals, 0, 0.0, s)
            hubs = 0
            while size > 0:
                d = keys[0]
                u = vals[0]
                size = _heap_pop(keys, vals, size)
                if d > dist[u]:
                    continue  # stale entry, or lowered by a hub (whose row covers everything beyond u)
                if done[u] and u != s and hubs < max_hubs:
                    hubs += 1
                    row = out[u]  # geodesics are symmetric: D[u, v] = D[v, u]
                    for v in range(n):
                        dist[v] = min(dist[v], d + row[v])
                    continue
                for e in range(indptr[u], indptr[u + 1]):
                    v = indices[e]
                    nd = d + weights[e]
                    if nd < dist[v]:
                        dist[v] = nd
                        size = _heap_push(keys, vals, size, nd, v)
            for v in range(n):
                out[s, v] = dist[v]
            done[s] = True


@njit(cache=True, parallel=True)
def _landmark_geodesics(indptr, indices, weights, sources, out):  # pragma: no cover - compiled
    """out[r] = geodesic distances from sources[r] (plain Dijkstra per landmark)."""
    n = indptr.shape[0] - 1
    cap = indices.shape[0] + n + 1
    for r in prange(sources.shape[0]):
        dist = np.full(n, np.inf)
        _dijkstra(indptr, indices, weights, sources[r], dist, np.empty(cap), np.empty(cap, dtype=np.int64))
        for v in range(n):
            out[r, v] = dist[v]


@njit(cache=True, parallel=True, fastmath=True)
def _square_inplace(A):  # pragma: no cover - compiled
    for i in prange(A.shape[0]):
        for j in range(A.shape[1]):
            A[i, j] = A[i, j] * A[i, j]


class Isomap(Estimator):
    """Isomap embedding: geodesic distances along a kNN (or radius) graph, embedded by classical MDS.

    Cost: kNN graph as in :func:`repviz.neighbors.knn`; Dijkstra from every point O(n (E + n) log n) time;
    the n×n float32 geodesic matrix (4 n² bytes, refused above the dense-memory budget with a pointer to
    ``n_landmarks``) and a partial eigensolve O(n² k × iterations). Landmark Isomap: O(m (E + n) log n) time,
    O(m n) memory. A disconnected graph is joined by its shortest bridging edges with a warning
    (``connect=True``, see :mod:`repviz.manifold._graph`) or refused (``connect=False``).

    Parameters
    ----------
    n_neighbors : int or None, default=5
        Neighbours per point of the kNN graph; None when ``radius`` is used.
    radius : float or None, default=None
        Connect all pairs closer than this instead (then pass ``n_neighbors=None``).
    n_components : int, default=2
    metric : {"euclidean", "cosine", "precomputed"}, default="euclidean"
        Edge lengths; "precomputed" takes an (n, n) distance matrix as ``X``.
    n_landmarks : int or None, default=None
        Landmark Isomap with this many randomly drawn landmarks (a few hundred suffice for smooth manifolds).
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"}, default="auto"
    tol : float, default=0
        Eigensolver tolerance (0: machine precision).
    max_iter : int or None, default=None
    neighbors_method : str, default="exact"
        Passed to :func:`repviz.neighbors.knn` as ``method``.
    connect : bool, default=True
    random_state : int, Generator or None, default=None
        Seeds the landmark draw and the eigensolver's start vector.

    Attributes
    ----------
    embedding_ : float32 ndarray (n_samples, n_components)
        Columns signed so their largest-magnitude entry is positive.
    eigenvalues_ : ndarray (n_components,)
    n_connected_components_ : int
        Components of the graph before connecting.
    landmarks_ : int ndarray (n_landmarks,) or None

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import Isomap
    >>> t = np.linspace(0, 3, 200)
    >>> Isomap(n_neighbors=5).fit_transform(np.c_[np.cos(t), np.sin(t), t]).shape
    (200, 2)
    """

    _parameter_constraints = {
        "n_neighbors": [Interval(int, 1, None, "left"), NONE],
        "radius": [Interval(float, 0, None, "neither"), NONE],
        "n_components": [Interval(int, 1, None, "left")],
        "metric": [Options("euclidean", "cosine", "precomputed")],
        "n_landmarks": [Interval(int, 2, None, "left"), NONE],
        "eigen_solver": [Options(*SOLVERS)],
        "tol": [Interval(float, 0, None, "left")],
        "max_iter": [Interval(int, 1, None, "left"), NONE],
        "neighbors_method": [Options("exact", "nndescent", "auto")],
        "connect": [BOOLEAN],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, *, n_neighbors=5, radius=None, n_components=2, metric="euclidean", n_landmarks=None,
                 eigen_solver="auto", tol=0.0, max_iter=None, neighbors_method="exact", connect=True,
                 random_state=None):
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.n_components = n_components
        self.metric = metric
        self.n_landmarks = n_landmarks
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.neighbors_method = neighbors_method
        self.connect = connect
        self.random_state = random_state

    def fit(self, X, y=None):
        """Build the graph, compute geodesics and embed them."""
        self._validate_params()
        if (self.n_neighbors is None) == (self.radius is None):
            raise ValueError("Both n_neighbors and radius are provided (or neither). Use "
                             "Isomap(radius=..., n_neighbors=None) for a radius graph, or "
                             "Isomap(n_neighbors=..., radius=None) for a kNN graph.")
        X = check_array(X, "Isomap", min_samples=2)
        n = X.shape[0]
        if self.metric == "precomputed":
            check_precomputed(X, "Isomap")
        k = self.n_components
        m = n if self.n_landmarks is None else self.n_landmarks
        if m > n:
            raise ValueError(f"n_landmarks ({m}) must be at most n_samples ({n}).")
        if k >= m:
            raise ValueError(f"n_components ({k}) must be less than the number of points embedded by classical "
                             f"MDS ({m}: n_landmarks, or n_samples).")
        check_dense_memory(4.0 * m * n, "Isomap", f"a {m}×{n} float32 geodesic-distance matrix",
                           "Use Isomap(n_landmarks=1000), whose memory is O(n_landmarks × n_samples).")
        if self.n_neighbors is not None:
            check_n_neighbors(self.n_neighbors, n, "Isomap")
            G = knn_graph(X, self.n_neighbors, self.metric, method=self.neighbors_method,
                          random_state=self.random_state)[0]
            hint = "n_neighbors"
        else:
            G = radius_graph(X, self.radius, self.metric)
            hint = "radius"
        self.n_connected_components_ = connected_components(G, directed=False)[0]
        G = connect_components(G, X, self.metric, connect=self.connect, owner="Isomap", hint=hint)
        indptr, indices = G.indptr.astype(np.int64), G.indices.astype(np.int64)
        weights = G.data.astype(np.float64)
        if self.n_landmarks is None:
            self.landmarks_ = None
            B = np.empty((n, n), dtype=np.float32)
            order = np.random.default_rng(0).permutation(n).astype(np.int64)  # fixed: results are reproducible
            _all_geodesics(indptr, indices, weights, order, numba.get_num_threads(), _MAX_HUBS, B)
            _square_inplace(B)
            Y, w = torgerson(double_centre(B), k, solver=self.eigen_solver, tol=self.tol, max_iter=self.max_iter,
                             random_state=self.random_state, owner="Isomap")
            del B
        else:
            landmarks = np.sort(rng_from(self.random_state).choice(n, size=m, replace=False))
            D2 = np.empty((m, n), dtype=np.float32)
            _landmark_geodesics(indptr, indices, weights, landmarks.astype(np.int64), D2)
            _square_inplace(D2)
            Y, w = _landmark_mds(D2, landmarks, k, self)
            self.landmarks_ = landmarks
        self.embedding_ = fix_signs(Y).astype(np.float32)
        self.eigenvalues_ = w
        self.n_features_in_ = X.shape[1]
        return self


def _landmark_mds(D2: np.ndarray, landmarks: np.ndarray, k: int, est: Isomap) -> tuple[np.ndarray, np.ndarray]:
    """Landmark MDS: classical MDS of the landmarks, then y_a = -1/2 L# (delta_a - mean delta) for every point."""
    D2_ll = D2[:, landmarks].astype(np.float64)
    D2_ll = 0.5 * (D2_ll + D2_ll.T)
    mean_sq = D2_ll.mean(axis=1)
    L, w = torgerson(double_centre(D2_ll.copy()), k, solver=est.eigen_solver, tol=est.tol,
                     max_iter=est.max_iter, random_state=est.random_state, owner="Isomap")
    if (w <= 0).any():
        raise ValueError(f"Landmark Isomap found only {(w > 0).sum()} positive eigenvalues for {k} components; "
                         f"use more landmarks (n_landmarks) or fewer components.")
    pinv = L / w  # columns v_j / sqrt(lambda_j), since L = V sqrt(lambda)
    Y = -0.5 * ((D2.astype(np.float64) - mean_sq[:, None]).T @ pinv)
    return Y, w
