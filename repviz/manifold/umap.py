"""UMAP (McInnes, Healy & Melville 2018) through umap-learn, on repviz's own kNN graph.

umap-learn is a well-kept library with its own numba kernels; this wraps it rather than rewriting it. What repviz
adds: the neighbours come from :func:`repviz.neighbors.knn` (exact, or NN-descent from 50,000 points), handed to
umap-learn as ``precomputed_knn``, so UMAP sees the same graph as the other methods and the quality scores, and
``transform`` finds the neighbours of new points with :func:`repviz.neighbors.kneighbors`. umap-learn is an
optional extra (``pip install ".[umap]"`` in the checkout): importing this module without it raises one line
saying so, and umap-learn itself is loaded at the first ``fit`` (seconds: it imports TensorFlow, where installed,
for its ParametricUMAP; its layout kernels compile at the first fit of a process, 10-50 s on a busy 2-core
machine).

umap-learn is reproducible only on one thread: with ``random_state`` set, its stochastic gradient descent runs
serially (``n_jobs`` is then 1; umap-learn would override it and warn). ``random_state=None`` runs on
``n_jobs`` threads and differs from run to run.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings

import numpy as np

from .._validation import ARRAY_LIKE, NONE, RANDOM_STATE, Interval, Options, check_array
from ..neighbors import KNN_METHODS, kneighbors, knn
from ..version import install_hint
from ._base import Estimator, rng_from

#: What a user without umap-learn is told (by this module's import, and so by every entry point that resolves
#: the "umap" method).
INSTALL_HINT = f"UMAP needs umap-learn, which is not installed: {install_hint('umap')}"

if importlib.util.find_spec("umap") is None:
    raise ImportError(INSTALL_HINT)

#: Input metrics: those of :func:`repviz.neighbors.knn` that umap-learn also knows by name.
UMAP_METRICS = ("euclidean", "cosine", "manhattan", "chebyshev")


class _NeighbourIndex:
    """What umap-learn's ``transform`` asks of a search index (``query``), answered by exact
    :func:`repviz.neighbors.kneighbors` among the fitted points (umap-learn keeps them; nothing is copied)."""

    _angular_trees = False

    def __init__(self, data: np.ndarray, metric: str):
        self._raw_data, self.metric = data, metric

    def query(self, X, k: int, epsilon: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        idx, dist = kneighbors(np.asarray(X, dtype=np.float32), self._raw_data, k, metric=self.metric)
        return idx.astype(np.int32), dist.astype(np.float32)


def self_first_knn(X: np.ndarray, n_neighbors: int, metric: str, method: str,
                   random_state) -> tuple[np.ndarray, np.ndarray]:
    """umap-learn's ``precomputed_knn`` format from :func:`repviz.neighbors.knn`: each point's ``n_neighbors``
    nearest points with itself first (distance 0), int32 indices and float32 distances."""
    n = X.shape[0]
    idx, dist = knn(X, n_neighbors - 1, metric=metric, method=method, random_state=random_state)
    idx = np.hstack([np.arange(n)[:, None], idx]).astype(np.int32)
    dist = np.hstack([np.zeros((n, 1), np.float32), dist]).astype(np.float32)
    return idx, dist


def square_rotation(Y: np.ndarray, steps: int = 40) -> np.ndarray:
    """The rotation R (2 x 2) that gives the centred 2-D layout Y @ R the same range on both axes. The difference
    of the ranges changes sign over a quarter turn (at 90 degrees the axes swap), so bisection finds an angle."""
    def gap(theta: float) -> float:
        c, s = np.cos(theta), np.sin(theta)
        return float(np.ptp(Y @ [c, s]) - np.ptp(Y @ [-s, c]))

    lo, hi = 0.0, np.pi / 2
    if gap(lo) > 0:
        lo, hi = hi, lo
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    c, s = np.cos(lo), np.sin(lo)
    return np.array([[c, -s], [s, c]])


def _import_umap() -> None:
    """Import umap-learn, paid by a fit or a placement only, without the TensorFlow it imports for its
    ParametricUMAP where TensorFlow is installed (seconds, 0.7 GB and TensorFlow's start-up lines in a process
    that does not train), unless TensorFlow is loaded already. ``umap.parametric_umap`` stays importable."""
    if "umap" in sys.modules or "tensorflow" in sys.modules:
        return
    sys.modules["umap.parametric_umap"] = None  # umap's __init__ catches the ImportError this raises
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ImportWarning)
            import umap  # noqa: F401
    finally:
        del sys.modules["umap.parametric_umap"]


class UMAP(Estimator):
    """Uniform Manifold Approximation and Projection, by umap-learn on repviz's kNN graph.

    Parameters
    ----------
    n_components : int, default=2
    n_neighbors : int, default=15
        Neighbours per point, the point itself included (umap-learn's convention); lowered to n_samples with a
        warning on fewer points.
    min_dist, spread, learning_rate, negative_sample_rate, repulsion_strength, set_op_mix_ratio,
    local_connectivity :
        As in umap-learn (defaults 0.1, 1, 1, 5, 1, 1, 1).
    n_epochs : int or None, default=None
        Epochs of the layout's optimisation; None: umap-learn's (500 below 10,000 points, else 200).
    metric : {"euclidean", "cosine", "manhattan", "chebyshev"}, default="euclidean"
    init : {"spectral", "pca", "random"} or array of shape (n_samples, n_components), default="spectral"
        An array is a start of one's own (e.g. the previous snapshot's layout). umap-learn rescales each axis of
        a start to [0, 10]; a 2-D start is first rotated so that its two axes span the same range
        (:func:`square_rotation`), so that this rescaling is a uniform scale and distorts nothing, and the result
        is rotated and scaled back: points that do not move keep their coordinates.
    neighbors : {"auto", "exact", "nndescent"}, default="auto"
        kNN method of :func:`repviz.neighbors.knn`.
    n_jobs : int or None, default=None
        Threads of umap-learn without ``random_state`` (None: 1, -1: all); 1 with it (see the module docstring).
    random_state : int or None, default=None
    verbose : int, default=0

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
    umap_ : umap.UMAP
        The fitted umap-learn estimator (its ``graph_``, ``transform``).
    n_neighbors_ : int
        The neighbours used.

    Memory: umap-learn keeps the fitted data (for ``transform``) and the fuzzy graph, O(n d + n k).
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, closed="left")],
        "n_neighbors": [Interval(int, 2, None, closed="left")],
        "min_dist": [Interval(float, 0, None, closed="left")],
        "spread": [Interval(float, 0, None, closed="neither")],
        "learning_rate": [Interval(float, 0, None, closed="neither")],
        "negative_sample_rate": [Interval(int, 1, None, closed="left")],
        "repulsion_strength": [Interval(float, 0, None, closed="left")],
        "set_op_mix_ratio": [Interval(float, 0, 1, closed="both")],
        "local_connectivity": [Interval(float, 0, None, closed="neither")],
        "n_epochs": [NONE, Interval(int, 1, None, closed="left")],
        "metric": [Options(*UMAP_METRICS)],
        "init": [Options("spectral", "pca", "random"), ARRAY_LIKE],
        "neighbors": [Options(*KNN_METHODS)],
        "n_jobs": [NONE, Interval(int, None, None, closed="neither")],
        "random_state": [RANDOM_STATE],
        "verbose": [Interval(int, 0, None, closed="left")],
    }

    def __init__(self, n_components: int = 2, *, n_neighbors: int = 15, min_dist: float = 0.1,
                 spread: float = 1.0, learning_rate: float = 1.0, negative_sample_rate: int = 5,
                 repulsion_strength: float = 1.0, set_op_mix_ratio: float = 1.0, local_connectivity: float = 1.0,
                 n_epochs: int | None = None, metric: str = "euclidean", init="spectral", neighbors: str = "auto",
                 n_jobs: int | None = None, random_state: int | None = None, verbose: int = 0):
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.min_dist = min_dist
        self.spread = spread
        self.learning_rate = learning_rate
        self.negative_sample_rate = negative_sample_rate
        self.repulsion_strength = repulsion_strength
        self.set_op_mix_ratio = set_op_mix_ratio
        self.local_connectivity = local_connectivity
        self.n_epochs = n_epochs
        self.metric = metric
        self.init = init
        self.neighbors = neighbors
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y=None):
        """Compute the embedding of X (n_samples, n_features); returns self. ``y`` is ignored."""
        _import_umap()
        import umap

        self._validate_params()
        X = check_array(X, "UMAP", min_samples=3)
        n = X.shape[0]
        k = self.n_neighbors
        if k > n:
            warnings.warn(f"n_neighbors ({k}) is larger than n_samples ({n}); using {n} instead.", UserWarning,
                          stacklevel=2)
            k = n
        seed = self.random_state
        if seed is not None and not isinstance(seed, (int, np.integer)):
            seed = int(rng_from(seed).integers(2**31 - 1))
        idx, dist = self_first_knn(X, k, self.metric, self.neighbors, seed)
        init = self.init if isinstance(self.init, str) else np.array(self.init, dtype=np.float32)
        if not isinstance(init, str) and init.shape != (n, self.n_components):
            raise ValueError(f"init has shape {init.shape}; it must be (n_samples, n_components) = "
                             f"{(n, self.n_components)}")
        if not isinstance(init, str):
            centre = init.mean(axis=0)
            rotation = square_rotation(init - centre) if self.n_components == 2 else np.eye(self.n_components)
            start = init = ((init - centre) @ rotation).astype(np.float32)
        threads = 1 if seed is not None or self.n_jobs is None else self.n_jobs
        model = umap.UMAP(n_neighbors=k, n_components=self.n_components, metric=self.metric,
                          n_epochs=self.n_epochs, learning_rate=float(self.learning_rate), init=init,
                          min_dist=float(self.min_dist), spread=float(self.spread),
                          set_op_mix_ratio=float(self.set_op_mix_ratio),
                          local_connectivity=float(self.local_connectivity),
                          repulsion_strength=float(self.repulsion_strength),
                          negative_sample_rate=int(self.negative_sample_rate), random_state=seed, n_jobs=threads,
                          precomputed_knn=(idx, dist, _NeighbourIndex(X, self.metric)), verbose=bool(self.verbose))
        with warnings.catch_warnings():
            # the index is ours, not pynndescent's: umap-learn warns that its own transform would be unavailable
            warnings.filterwarnings("ignore", message=r"precomputed_knn\[2\]", category=UserWarning)
            Y = model.fit_transform(X)
        if not np.isfinite(Y).all():
            raise FloatingPointError("UMAP returned non-finite coordinates (points without neighbours in the graph)")
        if not isinstance(init, str):  # undo umap-learn's rescaling of the start to [0, 10] per axis
            lo, span = start.min(axis=0), np.ptp(start, axis=0)
            Y = (lo + Y * (np.where(span > 0, span, 10.0) / 10.0)) @ rotation.T + centre
        self.umap_, self.n_neighbors_ = model, k
        self.embedding_ = np.asarray(Y, dtype=np.float32)
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        """Place new points (m, n_features) into the fitted layout, which does not move (:func:`place`, umap-learn's
        ``transform``), float32 (m, n_components). The layout is ``embedding_``: a fit started from an array lands
        the new points where its returned coordinates are, not in umap-learn's rescaled copy of them."""
        self._check_fitted()
        X = check_array(X, "UMAP.transform")
        return place(X, self.umap_._raw_data, self.embedding_, **self._placing_params(), n_neighbors=self.n_neighbors_)

    def _placing_params(self) -> dict:
        return {name: getattr(self, name) for name in _PLACING}


#: The parameters of :class:`UMAP` that :func:`place` takes too.
_PLACING = ("min_dist", "spread", "learning_rate", "negative_sample_rate", "repulsion_strength",
            "local_connectivity", "n_epochs", "metric", "random_state")


def place(X_new, X_fit, Y_fit, *, n_neighbors: int = 15, min_dist: float = 0.1, spread: float = 1.0,
          learning_rate: float = 1.0, negative_sample_rate: int = 5, repulsion_strength: float = 1.0,
          local_connectivity: float = 1.0, n_epochs: int | None = None, metric: str = "euclidean",
          random_state=None) -> np.ndarray:
    """Positions of the new points ``X_new`` in the fixed UMAP layout ``Y_fit`` of ``X_fit``, as umap-learn's
    ``UMAP.transform`` computes them, from the arrays alone (a stored layout needs no fitted model): each new
    point's fuzzy memberships to its ``n_neighbors`` nearest fitted points (:func:`repviz.neighbors.kneighbors`),
    a start at their weighted mean, then n_epochs / 3 epochs (100 for ``n_epochs=None`` up to 10,000 new points,
    else 30) of umap-learn's layout optimisation that move only the new points. The other parameters are
    :class:`UMAP`'s, as the layout was fitted. Float32 (m, n_components)."""
    import scipy.sparse as sp

    _import_umap()
    from umap.layouts import optimize_layout_euclidean
    from umap.umap_ import (
        compute_membership_strengths,
        find_ab_params,
        init_graph_transform,
        make_epochs_per_sample,
        smooth_knn_dist,
    )

    X_fit, Y_fit = np.asarray(X_fit, dtype=np.float32), np.ascontiguousarray(Y_fit, dtype=np.float32)
    X_new = check_array(X_new, "UMAP place")
    if metric not in UMAP_METRICS:
        raise ValueError(f"The 'metric' parameter of UMAP place must be one of {UMAP_METRICS}. Got {metric!r} "
                         "instead.")
    k = min(int(n_neighbors), len(X_fit))
    idx, dist = kneighbors(X_new, X_fit, k, metric=metric)
    dist = np.ascontiguousarray(dist, dtype=np.float32)
    sigmas, rhos = smooth_knn_dist(dist, float(k), local_connectivity=max(0.0, float(local_connectivity) - 1.0))
    rows, cols, vals, _ = compute_membership_strengths(idx.astype(np.int32), dist, sigmas, rhos, bipartite=True)
    graph = sp.coo_matrix((vals, (rows, cols)), shape=(len(X_new), len(X_fit)))
    csr = graph.tocsr()
    csr.eliminate_zeros()
    start = init_graph_transform(csr, Y_fit)
    epochs = (100 if len(X_new) <= 10_000 else 30) if n_epochs is None else max(1, int(n_epochs // 3))
    graph.data[graph.data < graph.data.max() / float(epochs)] = 0.0
    graph.eliminate_zeros()
    a, b = find_ab_params(float(spread), float(min_dist))
    seed = 42 if random_state is None else int(rng_from(random_state).integers(2**31 - 1))
    rng_state = np.random.RandomState(seed).randint(np.iinfo(np.int32).min, np.iinfo(np.int32).max, 3)
    Y = optimize_layout_euclidean(np.ascontiguousarray(start, dtype=np.float32), Y_fit.copy(), graph.row, graph.col,
                                  epochs, len(X_fit), make_epochs_per_sample(graph.data, epochs), a, b,
                                  rng_state.astype(np.int64), float(repulsion_strength), float(learning_rate) / 4.0,
                                  int(negative_sample_rate), parallel=random_state is None)
    return np.asarray(Y, dtype=np.float32)


def place_into_layout(params: dict, X_fit, Y_fit, X_new) -> tuple[np.ndarray, dict]:
    """The placement policy of the pipeline's ``"umap"`` method (:mod:`repviz.placement`): :func:`place` against
    the stored layout ``Y_fit`` of ``X_fit``, with its UMAP parameters ``params``. Returns the coordinates and how
    they were placed."""
    coords = place(X_new, X_fit, Y_fit, **{k: params[k] for k in ("n_neighbors", *_PLACING) if k in params})
    return coords, {"transform": "umap: umap-learn's transform against the fixed layout"}
