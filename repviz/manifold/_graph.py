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
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._validation import check_n_components, check_n_neighbors, rescaled
from ..neighbors import GRAM_METRICS, block_rows, check_data, distances, knn
from ._eigen import check_connected

_BLOCK_BYTES = 64 << 20


def distance_rows(X: np.ndarray, rows: np.ndarray, metric: str, sq: np.ndarray | None = None,
                  metric_params: dict | None = None) -> np.ndarray:
    """Distances (float64, in ``knn``'s units for ``metric``) from the points ``rows`` to every point."""
    if metric == "precomputed":
        return np.asarray(X[rows], dtype=np.float64)
    if sp.issparse(X) or metric not in GRAM_METRICS:  # sparse X, other metrics: repviz.neighbors.distances
        return distances(X[rows], X, metric, metric_params)
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


def knn_graph(X: np.ndarray, n_neighbors: int, metric: str, *, method: str = "exact", random_state=None,
              metric_params: dict | None = None):
    """Symmetric kNN graph (CSR, edge weight = distance, as exact as ``X``'s dtype allows; an edge exists if
    either end lists the other)."""
    ind, dist = knn(X, n_neighbors, metric=metric, method=method, random_state=random_state,
                    metric_params=metric_params, dtype=X.dtype)
    return symmetrize(ind, dist, X.shape[0]), ind, dist


def symmetrize(ind: np.ndarray, dist: np.ndarray, n: int) -> sp.csr_matrix:
    k = ind.shape[1]
    # zero-distance neighbours (duplicates) would vanish from a sparse matrix; keep them as tiny positive edges
    w = np.maximum(dist.astype(np.float64).ravel(), 1e-12)
    G = sp.csr_matrix((w, ind.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))
    return G.maximum(G.T).tocsr()


def radius_graph(X: np.ndarray, radius: float, metric: str, metric_params: dict | None = None) -> sp.csr_matrix:
    """Graph of all pairs closer than ``radius`` (for a sparse precomputed graph: its stored entries that
    are). Time O(n² d), memory O(block + edges)."""
    n = X.shape[0]
    if metric == "precomputed" and sp.issparse(X):
        G = sp.coo_matrix(X)
        keep = (G.row != G.col) & (G.data <= radius)
        G = sp.csr_matrix((np.maximum(G.data[keep], 1e-12), (G.row[keep], G.col[keep])), shape=(n, n))
        return G.maximum(G.T).tocsr()
    rows_per = block_rows(n, _BLOCK_BYTES)
    data, cols, counts = [], [], []
    for s in range(0, n, rows_per):
        rows = np.arange(s, min(n, s + rows_per))
        D = distance_rows(X, rows, metric, metric_params=metric_params)
        D[np.arange(len(rows)), rows] = np.inf
        r, c = np.nonzero(D <= radius)
        data.append(np.maximum(D[r, c], 1e-12))
        cols.append(c)
        counts.append(np.bincount(r, minlength=len(rows)))
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
    G = sp.csr_matrix((np.concatenate(data), np.concatenate(cols), indptr), shape=(n, n))
    return G.maximum(G.T).tocsr()


def connect_components(G: sp.csr_matrix, X: np.ndarray, metric: str, *, connect: bool | None, owner: str,
                       hint: str = "n_neighbors", stacklevel: int = 3,
                       metric_params: dict | None = None) -> sp.csr_matrix:
    """Return ``G`` with bridging edges added by Borůvka's rule (see the module docstring), or raise
    (``connect`` False or None, as in :func:`neighbor_graph`)."""
    n_comp, labels = connected_components(G, directed=False)
    if n_comp == 1:
        return G
    if connect is None:
        check_connected(G, owner)
    if metric == "precomputed" and sp.issparse(X):
        raise RuntimeError(f"The precomputed neighbour graph of {owner} has {n_comp} connected components; the "
                           f"distances that would join them are not in a sparse graph. Build it with more "
                           f"neighbours (until the number of connected components is 1), or pass the dense "
                           f"distance matrix.")
    if not connect:
        raise ValueError(f"The neighbourhood graph of {owner} has {n_comp} connected components. Increase "
                         f"{hint}, or pass connect=True to join them by their shortest bridging edges.")
    warnings.warn(f"The neighbourhood graph of {owner} has {n_comp} connected components; joining them by "
                  f"their {n_comp - 1} shortest bridging edges (Borůvka's rule). Increase {hint} if the "
                  f"components should be connected by the data itself (the number of connected components of "
                  f"its graph is then 1).", stacklevel=stacklevel)
    n = X.shape[0]
    sq = None
    if metric in GRAM_METRICS and not sp.issparse(X):
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
    rows_per = block_rows(n, _BLOCK_BYTES)
    while n_comp > 1:
        best_d = np.full(n, np.inf)
        best_j = np.zeros(n, dtype=np.int64)
        for s in range(0, n, rows_per):
            rows = np.arange(s, min(n, s + rows_per))
            D = distance_rows(Xf, rows, metric_rows, sq, metric_params)
            D[labels[rows][:, None] == labels[None, :]] = np.inf
            best_j[rows] = np.argmin(D, axis=1)
            best_d[rows] = D[np.arange(len(rows)), best_j[rows]]
        if metric == "cosine" and metric_rows == "sqeuclidean":
            best_d *= 0.5
        for c in range(n_comp):
            members = np.flatnonzero(labels == c)
            i = members[np.argmin(best_d[members])]
            new_r.append(i), new_c.append(best_j[i]), new_w.append(max(best_d[i], 1e-12))
        bridge = sp.csr_matrix((new_w, (new_r, new_c)), shape=(n, n))
        n_comp, labels = connected_components(G + bridge + bridge.T, directed=False)
    bridge = sp.csr_matrix((new_w, (new_r, new_c)), shape=(n, n))
    return G.maximum(bridge).maximum(bridge.T).tocsr()


@dataclass(frozen=True)
class NeighbourGraph:
    """A neighbourhood graph as :func:`neighbor_graph` returns it.

    Attributes
    ----------
    graph : csr_matrix (n, n)
        Symmetric, edge weight = distance (an edge exists if either end lists the other), components joined.
    bridges : csr_matrix (n, n)
        The edges added to join the components (empty when the graph was connected).
    n_components : int
        Connected components before joining.
    indices, distances : arrays (n, k), or None for a radius graph
        The kNN lists the graph was built from (as :func:`repviz.neighbors.knn` returns them).
    """

    graph: sp.csr_matrix
    bridges: sp.csr_matrix
    n_components: int
    indices: np.ndarray | None = None
    distances: np.ndarray | None = None


def neighbor_graph(X: np.ndarray, *, owner: str, metric: str, n_neighbors: int | None = None,
                    radius: float | None = None, neighbors: str = "exact", connect: bool | None = True,
                    random_state=None, stacklevel: int = 4, metric_params: dict | None = None) -> NeighbourGraph:
    """The one neighbourhood graph of the graph-based methods: kNN (``n_neighbors``) or radius graph of the
    validated ``X``, its disconnected components joined by :func:`connect_components` (``connect=True``) or
    refused (``False``: the message offers ``connect=True``; ``None``: the method cannot join components).
    ``stacklevel`` points the warning at the caller's caller (the user's ``fit``)."""
    n = X.shape[0]
    if n_neighbors is not None:
        k = check_n_neighbors(n_neighbors, n, owner)
        G, ind, dist = knn_graph(X, k, metric, method=neighbors, random_state=random_state,
                                 metric_params=metric_params)
        hint = "n_neighbors"
    else:
        G, ind, dist = radius_graph(X, radius, metric, metric_params), None, None
        hint = "radius"
    n_comp = int(connected_components(G, directed=False)[0])
    joined = connect_components(G, X, metric, connect=connect, owner=owner, hint=hint,
                                stacklevel=stacklevel, metric_params=metric_params)
    bridges = (joined - G).tocsr()
    bridges.eliminate_zeros()
    return NeighbourGraph(joined, bridges, n_comp, ind, dist)


def check_graph_input(X, owner: str, metric: str, n_components: int):
    """Validated input of a graph-based method: a finite 2-D float32 array or scipy sparse matrix of at least 2
    points (a square, non-negative matrix or sparse neighbour graph for ``metric="precomputed"``) with more points
    than ``n_components``."""
    X = check_data(X, owner, min_samples=2, dtype=np.float32, metric=metric)
    check_n_components(n_components, X.shape[0], owner)
    return X


def graph_of(est, X, **overrides) -> tuple[np.ndarray, NeighbourGraph, float]:
    """Validated input, its kNN graph and the scale it was divided by (see :func:`repviz._validation.rescaled`;
    the graph's distances are in those units; 1 for sparse input) for an estimator with the parameters
    n_components, n_neighbors, metric, neighbors, connect and random_state (reads them, or takes them from
    ``overrides``; sets nothing on ``est``)."""
    owner = type(est).__name__
    p = {name: overrides.get(name, getattr(est, name)) for name in ("n_components", "n_neighbors", "metric",
                                                                     "neighbors", "connect", "random_state")}
    X = check_graph_input(X, owner, p["metric"], p["n_components"])
    X, scale = (X, 1.0) if sp.issparse(X) else rescaled(X, p["metric"])
    return X, neighbor_graph(X, owner=owner, metric=p["metric"], n_neighbors=p["n_neighbors"],
                              neighbors=p["neighbors"], connect=p["connect"],
                              random_state=p["random_state"], stacklevel=5), scale
