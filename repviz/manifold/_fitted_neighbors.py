"""The neighbour search over a graph estimator's training points, kept after ``fit`` as its ``nbrs_``.

scikit-learn's Isomap and LocallyLinearEmbedding keep a fitted ``NearestNeighbors`` in ``nbrs_``; code written
for them reads its parameters (``nbrs_.n_neighbors``) or asks it for neighbours. :class:`FittedNeighbors` offers
that interface (``kneighbors``, ``kneighbors_graph``, ``radius_neighbors_graph``) on repviz's own exact search
(:mod:`repviz.neighbors`), and is what ``transform`` uses to find a new point's neighbours among the fitted ones.
The estimators rescale X by a power of two before fitting (:func:`repviz._validation.rescaled`); the object
holds the rescaled points and answers in the units of the data the user passed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..neighbors import block_rows, check_data, distances, kneighbors, knn
from ._graph import radius_graph

_BLOCK_BYTES = 64 << 20
_MODES = ("connectivity", "distance")


class FittedNeighbors:
    """Exact neighbours among fitted points, with scikit-learn's ``NearestNeighbors`` interface.

    Parameters
    ----------
    X : array or sparse matrix (n_samples, n_features), or (n_samples, n_samples) with ``metric="precomputed"``
        The fitted points divided by ``scale`` (as the estimator holds them).
    n_neighbors, radius : int or None, float or None
        The estimator's: the defaults of :meth:`kneighbors` and :meth:`radius_neighbors_graph`.
    metric, metric_params :
        The metric as :func:`repviz.neighbors.resolve_metric` resolves it, and its arguments.
    scale : float, default=1
        What X was divided by: queries are divided by it, distances and radii are in the user's units.

    Attributes
    ----------
    n_neighbors, radius, metric, metric_params : as given.
    n_samples_fit_ : int
    n_features_in_ : int
    """

    def __init__(self, X, *, n_neighbors: int | None, radius: float | None, metric, metric_params: dict | None,
                 scale: float = 1.0):
        self.n_neighbors, self.radius = n_neighbors, radius
        self.metric, self.metric_params = metric, metric_params
        self.n_samples_fit_, self.n_features_in_ = X.shape
        self._X, self._scale = X, float(scale)

    def __repr__(self) -> str:
        return (f"FittedNeighbors(n_neighbors={self.n_neighbors}, radius={self.radius}, metric={self.metric!r}, "
                f"n_samples_fit_={self.n_samples_fit_})")

    def kneighbors(self, X=None, n_neighbors: int | None = None, return_distance: bool = True):
        """The ``n_neighbors`` nearest fitted points of each row of ``X`` (None: of each fitted point, itself
        excluded), sorted by distance. Returns (distances, indices) as scikit-learn's, or indices only."""
        k = self._k(n_neighbors)
        dtype = self._X.dtype
        if X is None:
            ind, dist = knn(self._X, k, metric=self.metric, metric_params=self.metric_params, dtype=dtype)
        else:
            ind, dist = kneighbors(self._query(X), self._X, k, metric=self.metric, metric_params=self.metric_params,
                                   dtype=dtype)
        dist = np.asarray(dist, dtype=dtype) * dtype.type(self._scale)
        return (dist, ind) if return_distance else ind

    def kneighbors_graph(self, X=None, n_neighbors: int | None = None, mode: str = "connectivity") -> sp.csr_matrix:
        """CSR (queries × fitted points) of each query's ``n_neighbors`` nearest fitted points: ones
        (``mode="connectivity"``) or distances (``mode="distance"``)."""
        _check_mode(mode)
        dist, ind = self.kneighbors(X, n_neighbors)
        m, k = ind.shape
        data = dist.ravel() if mode == "distance" else np.ones(ind.size, dtype=dist.dtype)
        return sp.csr_matrix((data, ind.ravel(), np.arange(0, m * k + 1, k)), shape=(m, self.n_samples_fit_))

    def radius_neighbors_graph(self, X=None, radius: float | None = None, mode: str = "connectivity"
                               ) -> sp.csr_matrix:
        """CSR (queries × fitted points) of the fitted points within ``radius`` of each query (None: of each
        fitted point, itself excluded); with a sparse precomputed graph, only its stored entries are candidates.
        Time O(m n d), memory O(block + edges)."""
        _check_mode(mode)
        radius = self.radius if radius is None else radius
        if radius is None:
            raise ValueError("radius_neighbors_graph needs a radius: pass radius=..., or fit with one.")
        r = radius / self._scale
        n = self.n_samples_fit_
        if X is None:
            graph = radius_graph(self._X, r, self.metric, self.metric_params)
        else:
            Q = self._query(X)
            step = block_rows(n, _BLOCK_BYTES)
            graph = sp.vstack([self._within(Q[s:s + step], r) for s in range(0, Q.shape[0], step)]).tocsr()
        graph.data = graph.data * self._scale if mode == "distance" else np.ones_like(graph.data)
        return graph

    def _within(self, rows, r: float) -> sp.csr_matrix:
        n = self.n_samples_fit_
        if self.metric == "precomputed" and sp.issparse(rows):
            C = rows.tocoo()
            keep = C.data <= r  # stored entries only: the graph's candidate edges
            i, j, d = C.row[keep], C.col[keep], C.data[keep]
        else:
            D = rows if self.metric == "precomputed" else distances(rows, self._X, self.metric, self.metric_params)
            i, j = np.nonzero(D <= r)
            d = D[i, j]
        return sp.csr_matrix((d, (i, j)), shape=(rows.shape[0], n))  # explicit zeros are kept

    def _k(self, n_neighbors: int | None) -> int:
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        if k is None:
            raise ValueError("kneighbors needs n_neighbors: pass n_neighbors=..., or fit with n_neighbors.")
        return k

    def _query(self, X):
        expected = self.n_samples_fit_ if self.metric == "precomputed" else self.n_features_in_
        Q = check_data(X, "kneighbors", dtype=self._X.dtype)
        if Q.shape[1] != expected:
            what = "distances to the fitted points" if self.metric == "precomputed" else "features"
            raise ValueError(f"X has {Q.shape[1]} columns, but these neighbours were fitted with {expected} "
                             f"{what}; pass (n_queries, {expected}).")
        return Q / Q.dtype.type(self._scale) if self._scale != 1.0 else Q


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}; got {mode!r}.")
