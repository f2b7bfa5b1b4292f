"""Isomap (Tenenbaum, de Silva & Langford 2000): classical MDS of geodesic distances on a neighbourhood graph.

Geodesics come from a numba Dijkstra (binary heap) that reuses the rows already computed as exact shortcuts
(see ``_geodesic_batch``), writing the distances straight into the matrix that is then squared and
double-centred in place, so the full method holds one n×n array besides ``dist_matrix_``: float32 for float32
input, float64 (twice the memory, scikit-learn's precision) for float64 input. The top eigenvectors come from the
shared partial eigensolver. With
``n_landmarks`` it runs landmark Isomap (de Silva & Tenenbaum 2003): geodesics from m landmarks only, classical
MDS of the landmarks, then distance-based triangulation of every point; memory O(m n).

New points (``transform``) are placed as scikit-learn places them: their geodesic distances run through their
neighbours among the fitted points (d(x, j) = min over neighbours a of d(x, a) + D[a, j]), and the kernel-PCA
projection of those distances, -1/2 (g² - mean over points of D²) V / sqrt(lambda), is the same
triangulation that landmark Isomap applies to every point.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from .._jit import njit
from .._rows import run_rows
from .._validation import (
    BOOLEAN,
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    Rule,
    check_n_features,
    rescaled,
)
from ..neighbors import KNN_METHODS, METRIC_RULES, check_data, resolve_metric
from ._base import Estimator, check_dense_memory, rng_from
from ._eigen import SOLVERS, fix_signs
from ._fitted_neighbors import FittedNeighbors
from ._graph import neighbor_graph
from .mds import double_centre, torgerson

_MAX_HUBS = 32  # measured on MNIST kNN graphs: 16-64 hubs per source halve the CPU time of plain Dijkstra
_BATCH = 256    # sources per parallel batch; rows of earlier batches serve as hubs


@njit(cache=True, fastmath=True)
def _heap_push(heap, size, key):  # pragma: no cover - compiled
    """4-ary min-heap of packed uint64 keys."""
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if heap[parent] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return size + 1


@njit(cache=True, fastmath=True)
def _heap_pop(heap, size):  # pragma: no cover - compiled
    """Remove the root (the caller reads heap[0] first)."""
    size -= 1
    key = heap[size]
    i = 0
    while True:
        child = 4 * i + 1
        if child >= size:
            break
        best = child
        for j in range(child + 1, min(child + 4, size)):
            if heap[j] < heap[best]:
                best = j
        if key <= heap[best]:
            break
        heap[i] = heap[best]
        i = best
    heap[i] = key
    return size


@njit(cache=True, nogil=True, fastmath=True)
def _geodesic_batch(start_slot, stop_slot, indptr, indices, weights, sources, rows, done, max_hubs, dist, heaps,
                    fbuf, out):  # pragma: no cover
    """out[rows[r]] = geodesic distances from sources[r], by Dijkstra reusing finished rows ("hubs").

    The heap holds one uint64 per entry: the float32 bit pattern of the tentative distance (non-negative
    floats order like their bit patterns) above the node index, so one integer comparison orders entries and
    the heap is half the size of (float64, int64) pairs. Distances themselves stay float64 in ``dist``; an
    entry whose float32 key is above its node's current distance is stale and skipped.

    Hubs: in the Dijkstra from s, a settled node h whose row is finished (``done``; only rows of earlier
    batches, so none is being written) has its exact distance d_h, and d_h + D[h, v] bounds every v. The bound
    is exact for each v whose shortest path passes through h and also covers everything beyond such v, so
    nodes reached through a hub are never expanded; only nodes whose shortest path avoids every hub are
    explored, a region that shrinks quickly as rows are finished. The bounds obey the triangle inequality along
    edges, which keeps the pruning exact. A hub costs a pass over a row (memory-bound), so at most
    ``max_hubs`` are used per source. Slot t (one per thread, slots start_slot..stop_slot here; see
    :func:`repviz._rows.run_rows`) owns dist[t], heaps[t], fbuf[t] and takes sources t, t + n_slots, ...
    """
    n = indptr.shape[0] - 1
    n_threads = dist.shape[0]
    for t in range(start_slot, stop_slot):
        dt, heap, f = dist[t], heaps[t], fbuf[t]
        bits = f.view(np.uint32)
        for r in range(t, sources.shape[0], n_threads):
            s = sources[r]
            dt[:] = np.inf
            dt[s] = 0.0
            size = _heap_push(heap, 0, np.uint64(s))
            hubs = 0
            while size > 0:
                key = heap[0]
                size = _heap_pop(heap, size)
                u = np.int64(key & np.uint64(0xFFFFFFFF))
                d = dt[u]
                f[0] = np.float32(d)
                if np.uint64(bits[0]) < (key >> np.uint64(32)):
                    continue  # stale entry, or lowered by a hub (whose row covers everything beyond u)
                if done[u] and u != s and hubs < max_hubs:
                    hubs += 1
                    row = out[u]  # geodesics are symmetric: D[u, v] = D[v, u]
                    for v in range(n):
                        dt[v] = min(dt[v], d + row[v])
                    continue
                for e in range(indptr[u], indptr[u + 1]):
                    v = indices[e]
                    nd = d + weights[e]
                    if nd < dt[v]:
                        dt[v] = nd
                        f[0] = np.float32(nd)
                        size = _heap_push(heap, size, (np.uint64(bits[0]) << np.uint64(32)) | np.uint64(v))
            row_out = out[rows[r]]
            for v in range(n):
                row_out[v] = dt[v]


@njit(cache=True)
def _independent_last(indptr, indices, perm):  # pragma: no cover - compiled
    """``perm`` reordered so that a greedy independent set (no two members adjacent) comes last: every neighbour
    of such a source is finished before it, so its row is the minimum over neighbour rows (all hubs) and it
    needs no search at all."""
    n = perm.shape[0]
    blocked = np.zeros(n, dtype=np.bool_)
    last = np.zeros(n, dtype=np.bool_)
    for v in perm:
        if not blocked[v]:
            last[v] = True
            for e in range(indptr[v], indptr[v + 1]):
                blocked[indices[e]] = True
    out = np.empty(n, dtype=np.int64)
    j = 0
    for flag in (False, True):
        for v in perm:
            if last[v] == flag:
                out[j] = v
                j += 1
    return out


def _geodesics(G, sources: np.ndarray, out: np.ndarray, *, reuse: bool) -> None:
    """Geodesic distances from ``sources`` into the rows of ``out`` (float32 or float64). With ``reuse`` (all nodes as
    sources, out[s] the row of node s), rows finished in earlier batches serve as hubs for later ones."""
    n = G.shape[0]
    if n >= 2**32:
        raise ValueError(f"Isomap supports at most 2**32 - 1 points; got {n}.")
    indptr, indices = G.indptr.astype(np.int64), G.indices.astype(np.int64)
    weights = G.data.astype(np.float64)
    n_threads = numba.get_num_threads()
    # each successful relaxation pushes once; entries tied in float32 may be re-expanded, hence the margin
    dist = np.empty((n_threads, n))
    heaps = np.empty((n_threads, 2 * indices.shape[0] + n + 1), dtype=np.uint64)
    fbuf = np.empty((n_threads, 1), dtype=np.float32)
    done = np.zeros(n, dtype=np.bool_)
    rows = sources if reuse else np.arange(len(sources), dtype=np.int64)
    for start in range(0, len(sources), _BATCH):
        batch = slice(start, start + _BATCH)
        run_rows(_geodesic_batch, n_threads, indptr, indices, weights, sources[batch], rows[batch], done,
                 _MAX_HUBS if reuse else 0, dist, heaps, fbuf, out)
        if reuse:
            done[sources[batch]] = True


@njit(cache=True, nogil=True)
def _through_neighbours(start, stop, indptr, indices, weights, DT, out):  # pragma: no cover - compiled
    """out[q, r] = min over the neighbours a of query q of weights[a] + DT[a, r] for the queries ``start:stop``:
    geodesic distances of new points to the reference points (columns of DT, whose rows are the fitted points)."""
    for q in range(start, stop):
        for r in range(out.shape[1]):
            out[q, r] = np.inf
        for e in range(indptr[q], indptr[q + 1]):
            a = indices[e]
            d = weights[e]
            for r in range(out.shape[1]):
                out[q, r] = min(out[q, r], d + DT[a, r])


class Isomap(Estimator):
    """Isomap embedding: geodesic distances along a kNN (or radius) graph, embedded by classical MDS.

    Cost: kNN graph as in :func:`repviz.neighbors.knn`; Dijkstra from every point O(n (E + n) log n) time;
    the n×n geodesic matrix ``dist_matrix_`` and its squared, double-centred copy (8 n² bytes for float32 input,
    16 n² for float64; refused above the dense-memory budget with a pointer to ``n_landmarks``) and a partial
    eigensolve O(n² k × iterations). Landmark Isomap: O(m (E + n) log n) time, O(m n) memory. A disconnected
    graph is joined by its shortest bridging edges with a warning (``connect=True``, see
    :mod:`repviz.manifold._graph`) or refused (``connect=False``; a sparse precomputed graph, whose joining
    distances are unknown, is always refused).

    Parameters
    ----------
    n_neighbors : int or None, default=5
        Neighbours per point of the kNN graph; None when ``radius`` is used.
    radius : float or None, default=None
        Connect all pairs closer than this instead (then pass ``n_neighbors=None``).
    n_components : int, default=2
    metric : str or callable, default="euclidean"
        Edge lengths: "euclidean", "cosine", "manhattan", "chebyshev", "minkowski", "mahalanobis" (see
        :func:`repviz.neighbors.knn`; the non-Euclidean ones are computed by scipy's cdist, slower, and a callable
        of two 1-D arrays far slower, once per pair in Python), or "precomputed": ``X`` is an (n, n) distance
        matrix, or a sparse neighbour graph (e.g. scikit-learn's ``KNeighborsTransformer(mode="distance")``)
        whose stored entries are the candidate edges.
    p : float, default=2
        Power of the "minkowski" metric (scikit-learn's parameter; ``metric_params["p"]`` wins).
    metric_params : dict or None, default=None
        Arguments of the metric (``V`` or ``VI`` of "mahalanobis", keywords of a callable).
    n_landmarks : int or None, default=None
        Landmark Isomap with this many randomly drawn landmarks (a few hundred suffice for smooth manifolds).
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"}, default="auto"
    tol : float, default=0
        Eigensolver tolerance (0: machine precision).
    max_iter : int or None, default=None
    path_method : {"auto", "FW", "D"}, default="auto"
        Accepted for scikit-learn's API: every value gives the same (exact) geodesics, which repviz always
        computes by its Dijkstra (see ``_geodesic_batch``); Floyd-Warshall would take O(n³).
    neighbors_algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default="auto"
        Accepted for scikit-learn's API: all find the exact neighbours, as repviz's blocked search does; an
        approximate search is ``neighbors="nndescent"``.
    neighbors : {"exact", "nndescent", "auto"}, default="exact"
        Neighbour search, passed to :func:`repviz.neighbors.knn` as ``method`` (the same option as TSNE's).
    connect : bool, default=True
    random_state : int, Generator or None, default=None
        Seeds the landmark draw and the eigensolver's start vector.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
        Columns signed so their largest-magnitude entry is positive.
    eigenvalues_ : ndarray (n_components,)
    dist_matrix_ : ndarray (n_samples, n_samples), or (n_landmarks, n_samples) for landmark Isomap
        Geodesic distances on the graph (float32 for float32 input, else float64, computed in that dtype).
    n_connected_components_ : int
        Components of the graph before connecting.
    landmarks_ : int ndarray (n_landmarks,) or None
    nbrs_ : FittedNeighbors
        The neighbour search over the fitted points (scikit-learn's ``NearestNeighbors`` interface:
        ``n_neighbors``, ``radius``, ``kneighbors``, ``kneighbors_graph``, ``radius_neighbors_graph``).

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import Isomap
    >>> t = np.linspace(0, 3, 200)
    >>> X = np.c_[np.cos(t), np.sin(t), t]
    >>> iso = Isomap(n_neighbors=5).fit(X)
    >>> iso.embedding_.shape, iso.transform(X[:3] + 0.01).shape
    ((200, 2), (3, 2))
    """

    _float64_numerics = True
    _accepts_sparse = True
    _parameter_constraints = {
        "n_neighbors": [Interval(int, 1, None, "left"), NONE],
        "radius": [Interval(float, 0, None, "neither"), NONE],
        "n_components": [Interval(int, 1, None, "left")],
        "metric": METRIC_RULES,
        "p": [Interval(float, 0, None, "neither")],
        "metric_params": [Rule(lambda v: isinstance(v, dict), "a dict"), NONE],
        "n_landmarks": [Interval(int, 2, None, "left"), NONE],
        "eigen_solver": [Options(*SOLVERS)],
        "tol": [Interval(float, 0, None, "left")],
        "max_iter": [Interval(int, 1, None, "left"), NONE],
        "path_method": [Options("auto", "FW", "D")],
        "neighbors_algorithm": [Options("auto", "brute", "kd_tree", "ball_tree")],
        "neighbors": [Options(*KNN_METHODS)],
        "connect": [BOOLEAN],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, *, n_neighbors=5, radius=None, n_components=2, metric="euclidean", p=2, metric_params=None,
                 n_landmarks=None, eigen_solver="auto", tol=0.0, max_iter=None, path_method="auto",
                 neighbors_algorithm="auto", neighbors="exact", connect=True, random_state=None):
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.n_components = n_components
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.n_landmarks = n_landmarks
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.path_method = path_method
        self.neighbors_algorithm = neighbors_algorithm
        self.neighbors = neighbors
        self.connect = connect
        self.random_state = random_state

    def fit(self, X, y=None):
        """Build the graph, compute geodesics and embed them. ``X``: (n_samples, n_features) array or sparse
        matrix, or with ``metric="precomputed"`` a square distance matrix or sparse neighbour graph."""
        self._validate_params()
        if (self.n_neighbors is None) == (self.radius is None):
            raise ValueError("Both n_neighbors and radius are provided (or neither). Use "
                             "Isomap(radius=..., n_neighbors=None) for a radius graph, or "
                             "Isomap(n_neighbors=..., radius=None) for a kNN graph.")
        metric, params = resolve_metric(self.metric, self.metric_params, self.p)
        dtype = self._numerics_dtype(X)
        X = check_data(X, "Isomap", min_samples=2, dtype=dtype, metric=metric)
        n = X.shape[0]
        # geodesics scale with X: the embedding is multiplied back (not for sparse input or a callable metric)
        X, scale = (X, 1.0) if sp.issparse(X) or callable(metric) else rescaled(X, metric)
        k = self.n_components
        m = n if self.n_landmarks is None else self.n_landmarks
        if m > n:
            raise ValueError(f"n_landmarks ({m}) must be at most n_samples ({n}).")
        if k >= m:
            raise ValueError(f"n_components ({k}) must be less than the number of points embedded by classical "
                             f"MDS ({m}: n_landmarks, or n_samples).")
        check_dense_memory(2.0 * dtype.itemsize * m * n, "Isomap", f"two {m}×{n} {dtype.name} geodesic-distance "
                           f"matrices", "Use Isomap(n_landmarks=1000), whose memory is O(n_landmarks × n_samples)"
                           + (", or pass float32 data (half the memory)." if dtype == np.float64 else "."))
        nbrs = neighbor_graph(X, owner="Isomap", metric=metric, n_neighbors=self.n_neighbors,
                               radius=None if self.radius is None else self.radius / scale,
                               neighbors=self.neighbors, connect=self.connect,
                               random_state=self.random_state, metric_params=params)
        G = nbrs.graph
        if self.n_landmarks is None:
            self.landmarks_ = None
            B = np.empty((n, n), dtype=dtype)
            perm = np.random.default_rng(0).permutation(n).astype(np.int64)  # fixed: results are reproducible
            _geodesics(G, _independent_last(G.indptr.astype(np.int64), G.indices.astype(np.int64), perm), B,
                       reuse=True)
            self.dist_matrix_ = B * dtype.type(scale)
            np.square(B, out=B)
            mean_sq = B.mean(axis=0, dtype=np.float64)
            Y, w = torgerson(double_centre(B), k, solver=self.eigen_solver, tol=self.tol, max_iter=self.max_iter,
                             random_state=self.random_state, owner="Isomap")
            del B
            proj = Y / np.where(w > 0, w, np.inf)  # V / sqrt(lambda); a null direction projects to 0
        else:
            landmarks = np.sort(rng_from(self.random_state).choice(n, size=m, replace=False))
            D2 = np.empty((m, n), dtype=dtype)
            _geodesics(G, landmarks.astype(np.int64), D2, reuse=False)
            self.dist_matrix_ = D2 * dtype.type(scale)
            np.square(D2, out=D2)
            Y, w, mean_sq, proj = _landmark_mds(D2, landmarks, k, self)
            self.landmarks_ = landmarks
        embedding = fix_signs(Y * scale)
        signs = np.where(np.sum(embedding * Y, axis=0) < 0, -1.0, 1.0)
        self.embedding_ = embedding.astype(dtype)
        self.eigenvalues_ = w * scale**2
        self.n_connected_components_ = nbrs.n_components
        self.n_features_in_ = X.shape[1]
        # what transform needs, in the units of X: mean squared geodesic per reference point, projection
        self._mean_sq, self._proj = mean_sq * scale**2, proj * signs / scale
        self.nbrs_ = FittedNeighbors(X, n_neighbors=self.n_neighbors, radius=self.radius, metric=metric,
                                     metric_params=params, scale=scale)
        return self

    def transform(self, X) -> np.ndarray:
        """Place new points: their geodesic distances to the fitted points run through their ``n_neighbors``
        nearest fitted points (or those within ``radius``), then the kernel-PCA projection of the fit (see the
        module docstring); the fitted points themselves get their ``embedding_`` back. ``X``: (m, n_features),
        or with ``metric="precomputed"`` the (m, n_samples) distances to the fitted points (dense or a sparse
        graph). Time O(m n (d + k)), memory O(m n)."""
        self._check_fitted()
        dtype = self.dist_matrix_.dtype  # the fit's numerics
        Q = check_data(X, "Isomap", dtype=dtype)
        n = self.nbrs_.n_samples_fit_
        if self.nbrs_.metric == "precomputed":
            if Q.shape[1] != n:
                raise ValueError(f"With metric='precomputed', Isomap.transform expects distances to the {n} fitted "
                                 f"points (shape (n_queries, {n})); got shape {Q.shape}.")
        else:
            check_n_features(self, Q)
        graph = self._query_graph(Q)
        DT = self.dist_matrix_ if self.landmarks_ is None else np.ascontiguousarray(self.dist_matrix_.T)
        g = np.empty((Q.shape[0], DT.shape[1]))
        run_rows(_through_neighbours, len(g), graph.indptr.astype(np.int64), graph.indices.astype(np.int64),
                 graph.data.astype(np.float64), DT, g)
        np.square(g, out=g)
        g -= self._mean_sq
        return (-0.5 * g @ self._proj).astype(dtype)

    def _query_graph(self, Q) -> sp.csr_matrix:
        """CSR (queries × fitted points) of the distances to each query's neighbours (kNN, or within radius)."""
        if self.n_neighbors is not None:
            return self.nbrs_.kneighbors_graph(Q, mode="distance")
        graph = self.nbrs_.radius_neighbors_graph(Q, mode="distance")
        lonely = np.flatnonzero(np.diff(graph.indptr) == 0)
        if lonely.size:
            raise ValueError(f"{lonely.size} new point(s) (the first: row {lonely[0]}) have no fitted point within "
                             f"radius ({self.radius:g}); Isomap cannot place them. Use a larger radius, or "
                             f"n_neighbors.")
        return graph

    def reconstruction_error(self) -> float:
        """scikit-learn's reconstruction error: ||K(D) - K(embedding)||_F / n_samples, with K(D) = -1/2 H D² H
        the kernel of the geodesics, computed as sqrt(||K(D)||² - sum of the kept eigenvalues²) / n. Time and
        memory O(n²) (a float64 copy of ``dist_matrix_``)."""
        self._check_fitted()
        if self.landmarks_ is not None:
            raise ValueError("reconstruction_error needs the full geodesic matrix; landmark Isomap keeps only "
                             "the landmarks' rows. Fit without n_landmarks to compute it.")
        K = double_centre(np.square(self.dist_matrix_.astype(np.float64)))
        return float(np.sqrt(max(np.sum(K**2) - np.sum(self.eigenvalues_**2), 0.0)) / K.shape[0])


def _landmark_mds(D2: np.ndarray, landmarks: np.ndarray, k: int, est: Isomap) -> tuple:
    """Landmark MDS: classical MDS of the landmarks, then y_a = -1/2 L# (delta_a - mean delta) for every point.
    Returns the coordinates, eigenvalues, mean delta and L# (what places a new point the same way)."""
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
    return Y, w, mean_sq, pinv
