"""Multidimensional scaling: classical (Torgerson) MDS, metric MDS by SMACOF, and Sammon's mapping.

``classical_mds`` (full spectrum, for small matrices such as meta-SNE's) and ``torgerson`` (partial
eigensolver, for large n) share ``double_centre``; Isomap embeds its geodesics with ``torgerson``. The iterative
methods run numba kernels over the rows of a dense distance matrix (float32; float64 for MDS and ClassicalMDS of
float64 input): O(n² k) time per iteration and O(n²) memory, refused above the dense-memory budget.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh
from scipy.optimize import isotonic_regression

from .._jit import njit
from .._kernels import sq_dist
from .._rows import run_rows
from .._validation import (
    ARRAY_LIKE,
    BOOLEAN,
    INTEGER,
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    Rule,
    check_array,
    check_distance_matrix,
    rescaled,
)
from ..neighbors import METRIC_RULES, block_rows, distances, resolve_metric
from ._base import Estimator, check_dense_memory, rng_from
from ._eigen import SOLVERS, eigsolve, fix_signs
from ._graph import distance_rows
from .pca import principal_axes

__all__ = ["classical_mds", "fix_signs", "torgerson", "ClassicalMDS", "MDS", "Sammon"]


def double_centre(D2: np.ndarray) -> np.ndarray:
    """B = -1/2 H D² H in place on the squared distances ``D2`` (row/column means accumulated in float64)."""
    col = D2.mean(axis=0, dtype=np.float64)
    total = col.mean()
    # D2 is symmetric, so row means equal column means: B_ij = -1/2 (D2_ij - m_i - m_j + m)
    D2 -= col.astype(D2.dtype)[None, :]
    D2 -= (col - total).astype(D2.dtype)[:, None]
    D2 *= -0.5
    return D2


def torgerson(B: np.ndarray, n_components: int, *, solver: str = "auto", tol: float = 0.0,
              max_iter: int | None = None, random_state=None, owner: str = "ClassicalMDS"):
    """Top ``n_components`` eigenpairs of the double-centred matrix ``B`` as coordinates V sqrt(lambda).

    Uses the shared partial eigensolver (ARPACK above 1,000 points): time O(n² k × iterations), no extra n×n
    copy. Returns float64 coordinates (signs by :func:`fix_signs`) and the eigenvalues.
    """
    w, V = eigsolve(B, n_components, largest=True, solver=solver, tol=tol, max_iter=max_iter,
                    random_state=random_state, owner=owner)
    return V * np.sqrt(np.clip(w, 0, None)), w


def classical_mds(D, n_components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Torgerson's classical MDS of a distance matrix.

    Double-centres the squared distances, B = -1/2 H D² H, and returns the top eigenvectors scaled by the square
    roots of their eigenvalues. For Euclidean distances this recovers the points up to rotation and translation.
    Time O(n² k) with a partial dense eigensolver, memory O(n²).

    Parameters
    ----------
    D : array of shape (n, n)
        Symmetric distances.
    n_components : int, default=2

    Returns
    -------
    Y : float64 array (n, n_components)
        Coordinates; columns follow :func:`fix_signs`.
    eigenvalues : float64 array (n,)
        All eigenvalues of B in decreasing order (negative ones say how non-Euclidean D is); the variance
        explained by the embedding is ``eigenvalues[:k].clip(0).sum() / eigenvalues.clip(0).sum()``.
    """
    D = check_array(D, "classical_mds", dtype=np.float64, name="D")
    check_distance_matrix(D, "classical_mds", symmetric=True, precomputed=False)
    n = D.shape[0]
    if not 1 <= n_components <= n:
        raise ValueError(f"n_components ({n_components}) must be in [1, n_samples ({n})]")
    w, V = eigh(double_centre(D ** 2))
    w, V = w[::-1], V[:, ::-1]
    top = np.sqrt(np.clip(w[:n_components], 0, None))
    return fix_signs(V[:, :n_components] * top), w


def _dissimilarities(X, metric, owner: str, metric_params: dict | None = None,
                     dtype=np.float32) -> tuple[np.ndarray, float]:
    """Dense (n, n) dissimilarities of ``dtype`` from data (any metric of :mod:`repviz.neighbors`) or a precomputed
    matrix (refused unless symmetric with a zero diagonal, as scikit-learn and TSNE do), after the memory check,
    divided by ``scale`` (see :func:`repviz._validation.rescaled`; 1 for a callable metric, whose scaling is
    unknown), and ``scale``: the embedding of these is multiplied by it."""
    metric, params = resolve_metric(metric, metric_params)
    X = check_array(X, owner, min_samples=2, dtype=dtype)
    X, scale = (X, 1.0) if callable(metric) else rescaled(X, metric)
    n = X.shape[0]
    check_dense_memory(X.dtype.itemsize * n * n, owner, f"a dense {n}×{n} distance matrix",
                       "Subsample the points, or use PCA / Isomap(n_landmarks=...) for large n.")
    if metric == "precomputed":
        check_distance_matrix(X, owner, symmetric=True, zero_diagonal=True)
        return X, scale
    D = np.empty((n, n), dtype=X.dtype)
    step = block_rows(n, 64 << 20)
    for s in range(0, n, step):
        rows = np.arange(s, min(n, s + step))
        D[rows] = (distance_rows(X, rows, metric) if metric in ("euclidean", "cosine")
                   else distances(X[rows], X, metric, params))
    np.fill_diagonal(D, 0)
    return D, scale


_METRICS = ("euclidean", "cosine", "precomputed")
_METRIC_DOC = """metric : str or callable, default="euclidean"
        A metric of :mod:`repviz.neighbors` ("euclidean", "cosine", "manhattan", "chebyshev", "minkowski",
        "mahalanobis", ...) or a callable on two rows (slow: scipy calls it once per pair), or "precomputed": ``X``
        is a symmetric (n, n) matrix with a zero diagonal.
    metric_params : dict or None, default=None
        Arguments of the metric: {"p": ...} for minkowski, {"V": ...} or {"VI": ...} for mahalanobis."""


class ClassicalMDS(Estimator):
    """Classical (Torgerson) MDS: the coordinates whose inner products best match -1/2 H D² H.

    With ``metric="euclidean"`` on data this equals PCA scores, and is computed that way: time O(n d²), memory
    O(n d). Other metrics or a precomputed matrix build the n×n double-centred matrix (memory 8 n² bytes) and
    take its top eigenpairs with the shared partial eigensolver (time O(n² k) per iteration). Float64 input is
    computed in float64, float32 input in float32 (the dissimilarities then take half the memory).

    Parameters
    ----------
    n_components : int, default=2
    {metric}
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"}, default="auto"
        See :func:`repviz.manifold._eigen.eigsolve`.
    random_state : int, Generator or None, default=None
        Seeds the iterative eigensolver's start vector.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
        Columns signed so that their largest-magnitude entry is positive.
    eigenvalues_ : ndarray (n_components,)
    explained_variance_ratio_ : ndarray (n_components,)
        Each eigenvalue over trace(B) (for Euclidean distances, the share of the total variance).
    dissimilarity_matrix_ : ndarray (n_samples, n_samples), float32 for float32 input, else float64
        The dissimilarities embedded. Euclidean data are embedded as PCA scores, without them: they are computed
        on first access then (time O(n² d), memory 4 n² bytes).
    """

    _float64_numerics = True
    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "metric": METRIC_RULES,
        "metric_params": [NONE, Rule(lambda v: isinstance(v, dict), "a dict")],
        "eigen_solver": [Options(*SOLVERS)],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, metric="euclidean", metric_params=None, eigen_solver="auto",
                 random_state=None):
        self.n_components = n_components
        self.metric = metric
        self.metric_params = metric_params
        self.eigen_solver = eigen_solver
        self.random_state = random_state

    def fit(self, X, y=None):
        """Embed the rows of ``X`` (or the points of a precomputed distance matrix)."""
        self._validate_params()
        k = self.n_components
        dtype = self._numerics_dtype(X)
        if resolve_metric(self.metric, self.metric_params)[0] == "euclidean":
            X = check_array(X, "ClassicalMDS", min_samples=2, dtype=dtype)
            n = X.shape[0]
            if k > min(X.shape):
                raise ValueError(f"n_components ({k}) must be at most min(n_samples, n_features) "
                                 f"({min(X.shape)}) for Euclidean classical MDS of data.")
            solver = "full" if self.eigen_solver == "dense" else "auto"
            mean, w, V, total, _, _ = principal_axes(X, k, solver, 10, "auto", self.random_state)
            Y = (X.astype(np.float64) - mean) @ V.T
            w, trace = w * (n - 1), total * (n - 1)
            self._fit_X, self._dissimilarity_matrix = X, None
        else:
            D, scale = _dissimilarities(X, self.metric, "ClassicalMDS", self.metric_params, dtype)
            n = D.shape[0]
            if k >= n:
                raise ValueError(f"n_components ({k}) must be less than n_samples ({n}) in ClassicalMDS.")
            B = double_centre(D.astype(np.float64) ** 2)
            trace = float(np.trace(B)) * scale**2
            Y, w = torgerson(B, k, solver=self.eigen_solver, random_state=self.random_state)
            Y, w = Y * scale, w * scale**2
            if scale != 1.0:  # D is then the fit's own rescaled copy, never the caller's matrix
                D *= D.dtype.type(scale)
            self._fit_X, self._dissimilarity_matrix = None, D
        self.embedding_ = fix_signs(Y).astype(dtype)
        self.eigenvalues_ = w
        self.explained_variance_ratio_ = w / trace if trace > 0 else np.zeros_like(w)
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    @property
    def dissimilarity_matrix_(self) -> np.ndarray:
        self._check_fitted()
        if self._dissimilarity_matrix is None:
            D, scale = _dissimilarities(self._fit_X, "euclidean", "ClassicalMDS", dtype=self._fit_X.dtype)
            self._dissimilarity_matrix = D * D.dtype.type(scale) if scale != 1.0 else D
        self._dissimilarity_matrix = self._as_fitted_dtype(self._dissimilarity_matrix)
        return self._dissimilarity_matrix


@njit(cache=True, nogil=True, fastmath=True)
def _guttman_rows(start, stop, delta, Y, Y_new, sums):  # pragma: no cover - compiled
    """Rows ``start:stop`` of one SMACOF step without forming B(Y): Y_new_i = (1/n) sum_j delta_ij / d_ij
    (Y_i - Y_j); ``sums[i]``: the row's raw stress sum_j (d_ij - delta_ij)² and sum_j d_ij²."""
    n, k = Y.shape
    for i in range(start, stop):
        for c in range(k):
            Y_new[i, c] = 0.0
        s = 0.0
        q = 0.0
        for j in range(n):
            if j == i:
                continue
            d2 = sq_dist(Y, i, Y, j)
            d = np.sqrt(d2)
            r = delta[i, j] - d
            s += r * r
            q += d2
            if d > 1e-12:
                ratio = delta[i, j] / d
                for c in range(k):
                    Y_new[i, c] += ratio * (Y[i, c] - Y[j, c])
        for c in range(k):
            Y_new[i, c] /= n
        sums[i, 0] = s
        sums[i, 1] = q


def _guttman_transform(delta: np.ndarray, Y: np.ndarray, Y_new: np.ndarray) -> tuple[float, float]:
    """One SMACOF step from ``Y`` into ``Y_new`` (rows on numba's threads); returns the raw stress
    sum_{i<j} (d_ij - delta_ij)² of ``Y`` and sum_{i<j} d_ij²."""
    sums = np.empty((len(Y), 2))
    run_rows(_guttman_rows, len(Y), delta, Y, Y_new, sums)
    stress, sq = sums.sum(axis=0)
    return 0.5 * stress, 0.5 * sq


class MDS(Estimator):
    """Multidimensional scaling by SMACOF (de Leeuw 1977): metric, or non-metric (Kruskal 1964).

    Metric MDS minimises the raw stress sum_{i<j} (||y_i - y_j|| - delta_ij)² by Guttman transforms, each of which
    never increases it. Non-metric MDS (``metric_mds=False``) fits the distances to disparities, the monotone
    (isotonic) regression of the distances on the order of the dissimilarities, rescaled so that
    sum_{i<j} disparity² = n(n - 1) / 2; pairs of dissimilarity 0 are treated as missing, as in scikit-learn.
    The default start, classical MDS, makes the result deterministic and usually close to the optimum.
    Time O(n² k) per iteration (non-metric: plus O(n²) for the regression, after one O(n² log n) sort), memory
    O(n²) (4 n² bytes for the dissimilarities of float32 input, 8 n² of float64 input, which is computed in
    float64; non-metric: about 4 (k + 3) n² bytes more).

    Parameters
    ----------
    n_components : int, default=2
    metric_mds : bool, default=True
        False: non-metric MDS (only the order of the dissimilarities counts).
    n_init : int, default=1
        Runs from different random starts (``init="random"``), the one of lowest stress kept; a fixed start
        (classical MDS or an array) is run once.
    init : {"classical_mds", "random"}, ndarray (n_samples, n_components) or None, default="classical_mds"
        Starting configuration: classical MDS of the dissimilarities (None means the same), uniform random
        coordinates spread as the dissimilarities are, or an array. An ``init`` array given to ``fit`` or
        ``fit_transform`` takes precedence.
    max_iter : int, default=300
        Iterations per run.
    verbose : int, default=0
        Print the stress at every iteration if > 0.
    eps : float, default=1e-6
        Stop when the decrease of the stress in one iteration falls below ``eps`` times sum_{i<j} d_ij², the
        squared distances of the embedding (scikit-learn's criterion: independent of the scale of the data).
    n_jobs : None
        Accepted for scikit-learn compatibility; the Guttman transform runs on numba's threads.
    random_state : int, Generator or None, default=None
        Seeds the random starts and the eigensolver of the classical start.
    {metric}
    normalized_stress : bool or "auto", default="auto"
        Report Kruskal's stress-1 in ``stress_`` instead of the raw stress; "auto": True for non-metric MDS.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
    stress_ : float
        Raw stress at the end (against the disparities for non-metric MDS), or stress-1 with
        ``normalized_stress``.
    normalized_stress_ : float
        Kruskal's stress-1, sqrt(stress / sum_{i<j} d_ij²) with d the distances of the embedding.
    dissimilarity_matrix_ : ndarray (n_samples, n_samples), float32 for float32 input, else float64
        Kept as scikit-learn keeps it (4 n² bytes while the estimator lives).
    n_iter_ : int
        Iterations of the run kept.
    """

    _float64_numerics = True
    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "metric_mds": [BOOLEAN],
        "n_init": [Interval(int, 1, None, "left")],
        "init": [NONE, Options("classical_mds", "random"), ARRAY_LIKE],
        "max_iter": [Interval(int, 1, None, "left")],
        "verbose": [Interval(int, 0, None, "left"), BOOLEAN],
        "eps": [Interval(float, 0, None, "left")],
        "n_jobs": [NONE, INTEGER],
        "random_state": [RANDOM_STATE],
        "metric": METRIC_RULES,
        "metric_params": ClassicalMDS._parameter_constraints["metric_params"],
        "normalized_stress": [BOOLEAN, Options("auto")],
    }

    def __init__(self, n_components=2, *, metric_mds=True, n_init=1, init="classical_mds", max_iter=300,
                 verbose=0, eps=1e-6, n_jobs=None, random_state=None, metric="euclidean", metric_params=None,
                 normalized_stress="auto"):
        self.n_components = n_components
        self.metric_mds = metric_mds
        self.n_init = n_init
        self.init = init
        self.max_iter = max_iter
        self.verbose = verbose
        self.eps = eps
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.metric = metric
        self.metric_params = metric_params
        self.normalized_stress = normalized_stress

    def fit(self, X, y=None, init=None):
        """Embed the rows of ``X`` (or the points of a precomputed distance matrix); ``init``: an array
        (n_samples, n_components) to start from instead of the ``init`` parameter."""
        self._validate_params()
        delta, scale = _dissimilarities(X, self.metric, "MDS", self.metric_params, self._numerics_dtype(X))
        start = self.init if init is None else np.asarray(init)
        rng = rng_from(self.random_state)
        runs = self.n_init if isinstance(start, str) and start == "random" else 1
        order = None if self.metric_mds else _pair_order(delta)
        best = None
        for _ in range(runs):
            Y0 = _start(self, delta, scale, start, rng)
            run = self._optimize(delta, Y0, order)
            if best is None or run[1] < best[1]:
                best = run
        Y, stress, stress1, self.n_iter_ = best
        normalized = (not self.metric_mds) if self.normalized_stress == "auto" else self.normalized_stress
        self.embedding_ = (Y * scale).astype(delta.dtype)
        self.normalized_stress_ = stress1
        self.stress_ = stress1 if normalized else stress * scale**2
        if scale != 1:  # then delta is our own copy (rescaled): scale it back in place, no second n × n array
            delta *= delta.dtype.type(scale)
        self.dissimilarity_matrix_ = delta
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def _optimize(self, delta, Y, order):
        """One SMACOF run from ``Y``: (Y, raw stress, stress-1, iterations). Each Guttman transform returns the
        stress of the configuration it starts from, so convergence is judged one step behind, at no extra cost."""
        Y_new = np.empty_like(Y)
        target = delta if order is None else _disparities(delta, None, order)
        old = None
        it = 0
        for it in range(1, self.max_iter + 1):
            stress, sq = _guttman_transform(target, Y, Y_new)
            Y, Y_new = Y_new, Y
            if order is not None:
                target = _disparities(delta, Y, order)
            if self.verbose:
                print(f"[MDS] iteration {it}, stress {stress:.6g}")
            if old is not None and old - stress < self.eps * sq:
                break
            old = stress
        Y = Y.astype(delta.dtype)  # the stress reported is that of the configuration returned, in its dtype
        if Y.dtype == np.float64:
            stress, sq = _gram_stress(target, Y)
        else:
            stress, sq = _guttman_transform(target, Y.astype(np.float64), Y_new)
        return Y, float(stress), float(np.sqrt(stress / sq)) if sq > 0 else 0.0, it


def _gram_stress(target: np.ndarray, Y: np.ndarray) -> tuple[float, float]:
    """Raw stress sum_{i<j} (d_ij - target_ij)² and sum_{i<j} d_ij² of the float64 layout ``Y``, with d computed
    as scikit-learn's ``euclidean_distances`` computes it (Gram identity, zero diagonal), block by block: a float64
    ``stress_`` then equals what a user recomputes from ``embedding_`` with it, even for a near-perfect layout,
    whose stress is rounding noise that differs between formulas."""
    n = Y.shape[0]
    sq = np.einsum("ij,ij->i", Y, Y)
    stress = total = 0.0
    step = block_rows(n, 64 << 20)
    for s in range(0, n, step):
        rows = np.arange(s, min(n, s + step))
        d = -2 * (Y[rows] @ Y.T)
        d += sq[rows, None]
        d += sq[None, :]
        np.maximum(d, 0, out=d)
        d[np.arange(len(rows)), rows] = 0
        np.sqrt(d, out=d)
        stress += float(np.square(d - target[rows]).sum())
        total += float(np.square(d).sum())
    return 0.5 * stress, 0.5 * total


def _pair_order(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For non-metric MDS: the pairs i < j of non-zero dissimilarity (row and column indices, int32) sorted by it,
    and the tie groups (start of each run of equal dissimilarities, and its length)."""
    i, j = np.triu_indices(delta.shape[0], 1)
    i, j = i.astype(np.int32), j.astype(np.int32)
    values = delta[i, j]
    keep = np.flatnonzero(values != 0)
    order = keep[np.argsort(values[keep], kind="stable")]
    i, j, values = i[order], j[order], values[order]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return i, j, starts, np.diff(np.r_[starts, len(values)])


def _disparities(delta: np.ndarray, Y: np.ndarray | None, order) -> np.ndarray:
    """Symmetric disparities (delta's dtype, zero for the missing pairs): the isotonic regression of the distances
    of ``Y`` on the order of ``delta`` (tied dissimilarities pooled, as scikit-learn's IsotonicRegression does), or
    ``delta`` itself when ``Y`` is None (the first iteration), scaled so that sum_{i<j} disparity² = n(n - 1) / 2."""
    n = delta.shape[0]
    i, j, starts, counts = order
    if Y is None:
        values = delta[i, j].astype(np.float64)
    else:
        d = np.sqrt(np.square(Y[i] - Y[j]).sum(axis=1))
        means = np.add.reduceat(d, starts) / counts if len(d) else d
        values = np.repeat(isotonic_regression(means, weights=counts).x, counts)
    total = float(np.square(values).sum())
    if total > 0:
        values *= np.sqrt(n * (n - 1) / 2 / total)
    D = np.zeros_like(delta)
    D[i, j] = values
    D[j, i] = values
    return D


def _start(est, delta: np.ndarray, scale: float, init=None, rng=None) -> np.ndarray:
    """Starting configuration of MDS / Sammon, in the units of ``delta`` (divided by ``scale``): the array
    ``init`` (divided by ``scale``), uniform random coordinates with the spread of ``delta`` ("random", drawn
    from ``rng``), else classical MDS of ``delta``."""
    n, k = delta.shape[0], est.n_components
    if k >= n:
        raise ValueError(f"n_components ({k}) must be less than n_samples ({n}) in {type(est).__name__}.")
    if isinstance(init, str) and init == "random":
        spread = float(np.sqrt(np.mean(np.square(delta, dtype=np.float64)))) or 1.0
        return rng.uniform(0, spread, (n, k))
    if init is not None and not isinstance(init, str):
        Y = np.array(init, dtype=np.float64)
        if Y.shape != (n, k):
            raise ValueError(f"init must have shape (n_samples, n_components) = {(n, k)}; got {Y.shape}.")
        return Y / scale
    B = double_centre(delta.astype(np.float64) ** 2)
    Y, _ = torgerson(B, k, random_state=est.random_state, owner=type(est).__name__)
    return np.ascontiguousarray(Y)


@njit(cache=True, nogil=True, fastmath=True)
def _sammon_error_rows(start, stop, delta, Y, rows):  # pragma: no cover - compiled
    """``rows[i]`` = sum_{j != i, delta_ij > 0} (delta_ij - d_ij)² / delta_ij for the rows ``start:stop``."""
    n = Y.shape[0]
    for i in range(start, stop):
        e = 0.0
        for j in range(n):
            dl = delta[i, j]
            if j == i or dl <= 0:
                continue
            r = dl - np.sqrt(sq_dist(Y, i, Y, j))
            e += r * r / dl
        rows[i] = e


def _sammon_error(delta: np.ndarray, Y: np.ndarray) -> float:
    """sum_{i != j, delta_ij > 0} (delta_ij - d_ij)² / delta_ij (twice Sammon's sum over pairs, unscaled)."""
    rows = np.empty(len(Y))
    run_rows(_sammon_error_rows, len(Y), delta, Y, rows)
    return float(rows.sum())


@njit(cache=True, nogil=True, fastmath=True)
def _sammon_newton_rows(start, stop, delta, Y, step):  # pragma: no cover - compiled
    """Sammon's pseudo-Newton step, -(dE/dy) / |d²E/dy²| per coordinate, for the rows ``start:stop`` of ``step``.

    ``g`` accumulates -1/2 dE/dy_i = sum_j (1/delta_ij - 1/d_ij)(y_j - y_i) and ``h`` the matching half
    second derivative, so the step is g / |h|."""
    n, k = Y.shape
    g = np.empty(k)
    h = np.empty(k)
    for i in range(start, stop):
        g[:] = 0.0
        h[:] = 0.0
        for j in range(n):
            dl = delta[i, j]
            if j == i or dl <= 0:
                continue
            d = max(np.sqrt(sq_dist(Y, i, Y, j)), 1e-12)
            a = 1.0 / dl - 1.0 / d   # derivative weight of the pair
            b = 1.0 / (d * d * d)
            for c in range(k):
                diff = Y[j, c] - Y[i, c]
                g[c] += a * diff
                h[c] += b * diff * diff - a
        for c in range(k):
            step[i, c] = g[c] / max(abs(h[c]), 1e-12)


def _sammon_newton_step(delta: np.ndarray, Y: np.ndarray, step: np.ndarray) -> None:
    """Sammon's pseudo-Newton step for every point, written into ``step`` (rows on numba's threads)."""
    run_rows(_sammon_newton_rows, len(Y), delta, Y, step)


class Sammon(Estimator):
    """Sammon's mapping (Sammon 1969): MDS that weights each pair by 1 / delta_ij, so small distances count more.

    Minimises E = (1 / sum_{i<j} delta_ij) sum_{i<j} (delta_ij - d_ij)² / delta_ij with Sammon's diagonal
    Newton step, halving the step until E decreases (the safeguarded form of Cawley's implementation).
    Pairs at distance zero (duplicate points) carry no weight. Starts from classical MDS. Time O(n² k) per
    iteration, memory O(n²).

    Parameters
    ----------
    n_components : int, default=2
    metric : {"euclidean", "cosine", "precomputed"}, default="euclidean"
    max_iter : int, default=200
    tol : float, default=1e-9
        Stop when the relative decrease of E in one iteration falls below ``tol``.
    max_halves : int, default=20
        Step halvings tried before stopping.
    init : ndarray (n_samples, n_components) or None, default=None
    random_state : int, Generator or None, default=None
        Seeds the eigensolver of the classical start.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
    stress_ : float
        Sammon's error E at the end.
    n_iter_ : int
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "metric": [Options(*_METRICS)],
        "max_iter": [Interval(int, 1, None, "left")],
        "tol": [Interval(float, 0, None, "left")],
        "max_halves": [Interval(int, 1, None, "left")],
        "init": [NONE, ARRAY_LIKE],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, metric="euclidean", max_iter=200, tol=1e-9, max_halves=20, init=None,
                 random_state=None):
        self.n_components = n_components
        self.metric = metric
        self.max_iter = max_iter
        self.tol = tol
        self.max_halves = max_halves
        self.init = init
        self.random_state = random_state

    def fit(self, X, y=None):
        """Embed the rows of ``X`` (or the points of a precomputed distance matrix) by Sammon's mapping."""
        self._validate_params()
        delta, scale = _dissimilarities(X, self.metric, "Sammon")
        total = 0.5 * float(delta.sum(dtype=np.float64))
        if total <= 0:
            raise ValueError("Sammon needs at least two distinct points; all dissimilarities are zero.")
        Y = _start(self, delta, scale, self.init)
        E = _sammon_error(delta, Y)
        step = np.empty_like(Y)
        it = 0
        for it in range(1, self.max_iter + 1):  # noqa: B007 (the count after the loop is n_iter_)
            _sammon_newton_step(delta, Y, step)
            for _ in range(self.max_halves):
                Y_try = Y + step
                E_try = _sammon_error(delta, Y_try)
                if E_try < E:
                    break
                step *= 0.5
            else:
                break  # no decrease along the step: at a (local) minimum
            done = E - E_try <= self.tol * E
            Y, E = Y_try, E_try
            if done:
                break
        self.embedding_ = fix_signs((Y - Y.mean(axis=0)) * scale).astype(np.float32)
        self.stress_ = 0.5 * E / total
        self.n_iter_ = it
        self.n_features_in_ = np.asarray(X).shape[1]
        return self


ClassicalMDS.__doc__ = ClassicalMDS.__doc__.replace("{metric}", _METRIC_DOC)
MDS.__doc__ = MDS.__doc__.replace("{metric}", _METRIC_DOC)
