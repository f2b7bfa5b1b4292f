"""Force-directed layout of the kNN graph (Fruchterman & Reingold 1991), the picture of MNIST in Olah's 2014
"Visualizing MNIST" post: neighbours pull together like springs, all points push apart.

Attraction d²/K acts along each graph edge; the all-pairs repulsion K²/d is estimated from ``n_negative`` random
points per point per iteration (scaled up to all n - 1), as LargeVis and UMAP do, so one iteration costs
O(n (k + n_negative)) instead of O(n²). Moves are capped by a temperature that cools linearly to zero. The kernel
is serial with its own seeded generator, so a random_state always gives the same layout.
"""

from __future__ import annotations

import numpy as np

from .._jit import njit
from .._kernels import sq_dist
from .._validation import BOOLEAN, RANDOM_STATE, Interval, Options
from ..neighbors import KNN_METHODS
from ._base import Estimator
from ._graph import graph_of
from .pca import PCA


@njit(cache=True, fastmath=True)
def _layout(Y, indptr, indices, n_iter, n_negative, seed):  # pragma: no cover - compiled
    """Fruchterman-Reingold iterations in place on ``Y`` with ideal edge length K = 1."""
    np.random.seed(seed)
    n, dim = Y.shape
    disp = np.empty((n, dim))
    scale = (n - 1) / n_negative
    t0 = 0.1 * np.sqrt(n)
    for it in range(n_iter):
        temperature = t0 * (1.0 - it / n_iter)
        disp[:] = 0.0
        for i in range(n):
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                d2 = sq_dist(Y, i, Y, j)
                d = np.sqrt(d2)
                for c in range(dim):
                    disp[i, c] -= (Y[i, c] - Y[j, c]) * d  # d²/K along the unit vector
            for _ in range(n_negative):
                j = np.random.randint(n)
                if j == i:
                    continue
                d2 = 1e-9 + sq_dist(Y, i, Y, j)
                for c in range(dim):
                    disp[i, c] += scale * (Y[i, c] - Y[j, c]) / d2  # K²/d along the unit vector
        for i in range(n):
            norm = 0.0
            for c in range(dim):
                norm += disp[i, c] * disp[i, c]
            norm = np.sqrt(norm)
            step = min(norm, temperature) / max(norm, 1e-12)
            for c in range(dim):
                Y[i, c] += disp[i, c] * step


class ForceDirectedLayout(Estimator):
    """Spring layout of the symmetric kNN graph.

    Cost: kNN as in :func:`repviz.neighbors.knn`; O(n_iter n (k + n_negative)) time, O(n k) memory.

    Parameters
    ----------
    n_components : int, default=2
    n_neighbors : int, default=10
    n_iter : int, default=300
    n_negative : int, default=10
        Random points sampled per point and iteration to estimate the repulsion.
    init : {"pca", "random"}, default="pca"
        Starting positions, scaled to the layout's natural size sqrt(n).
    metric : {"euclidean", "cosine", "precomputed"}, default="euclidean"
    neighbors : {"exact", "nndescent", "auto"}, default="exact"
        Neighbour search, passed to :func:`repviz.neighbors.knn` as ``method`` (the same option as TSNE's).
    connect : bool, default=True
        Join a disconnected graph by its shortest bridging edges (with a warning), else raise; without it
        separate components would drift apart indefinitely.
    random_state : int, Generator or None, default=None
        Seeds the repulsion samples (and the "random" start).

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
    n_connected_components_ : int
        Components of the kNN graph before joining.
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "n_neighbors": [Interval(int, 1, None, "left")],
        "n_iter": [Interval(int, 1, None, "left")],
        "n_negative": [Interval(int, 1, None, "left")],
        "init": [Options("pca", "random")],
        "metric": [Options("euclidean", "cosine", "precomputed")],
        "neighbors": [Options(*KNN_METHODS)],
        "connect": [BOOLEAN],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, n_neighbors=10, n_iter=300, n_negative=10, init="pca",
                 metric="euclidean", neighbors="exact", connect=True, random_state=None):
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.n_iter = n_iter
        self.n_negative = n_negative
        self.init = init
        self.metric = metric
        self.neighbors = neighbors
        self.connect = connect
        self.random_state = random_state

    def fit(self, X, y=None):
        """Lay out the kNN graph of ``X`` (or of a precomputed distance matrix)."""
        self._validate_params()
        X, nbrs, _ = graph_of(self, X)  # the layout does not depend on the input's scale
        G = nbrs.graph
        n = X.shape[0]
        rng = np.random.default_rng(self.random_state)
        if self.init == "pca" and self.metric != "precomputed" and min(X.shape) >= self.n_components:
            Y = PCA(self.n_components, random_state=0).fit_transform(X).astype(np.float64)
        else:
            Y = rng.standard_normal((n, self.n_components))
        Y *= np.sqrt(n) / 4 / max(float(Y.std()), 1e-12)
        _layout(Y, G.indptr.astype(np.int64), G.indices.astype(np.int64), self.n_iter, self.n_negative,
                int(rng.integers(2**31 - 1)))
        self.embedding_ = (Y - Y.mean(axis=0)).astype(np.float32)
        self.n_connected_components_ = nbrs.n_components
        self.n_features_in_ = X.shape[1]
        return self
