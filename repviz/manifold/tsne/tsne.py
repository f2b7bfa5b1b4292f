"""The TSNE and SNE estimators: validation, then the phases of a fit with timings and progress output: kNN and
affinities (:meth:`~TSNE.prepare_affinities`), initialisation (:meth:`~TSNE.prepare_embedding`), early
exaggeration and the main phase (two :meth:`TSNEEmbedding.optimize <repviz.manifold.tsne.TSNEEmbedding.optimize>`
calls)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ..._validation import (
    ARRAY_LIKE,
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    Rule,
    check_array,
    check_distance_matrix,
    param_error,
    rescaled,
)
from ...neighbors import FLOAT_DTYPES, GRAM_METRICS, METRIC_RULES, check_data, knn, resolve_metric
from ...progress import ProgressCallback, TerminalProgress, fan_out, report
from .._base import Estimator, rng_from
from .._eigen import fix_signs
from . import init as _init
from ._threads import NumbaThreads
from .affinity import Affinities, conditional_affinities, n_neighbors_for, symmetrize_conditional
from .embedding import TSNEEmbedding, auto_learning_rate, resolve_method

_MDS_INIT_MAX_N = 5000  # init="pca" with precomputed distances: classical MDS (O(n³)) up to this many points


def _one_blas_thread() -> threadpool_limits:
    """BLAS on one thread for a block: a threaded BLAS splits the sums of a matrix product (the exact kNN's
    distances, PCA's covariance and eigensolver) by its thread count, so their last bits, and so every layout
    after them (t-SNE is chaotic), would depend on the cores of the machine and its ``OMP_NUM_THREADS``."""
    return threadpool_limits(1, user_api="blas")


def _sparse_pca(X: sp.csr_matrix, n_components: int) -> np.ndarray:
    """:func:`repviz.manifold.tsne.init.pca` of sparse X without densifying it: the d x d covariance from
    X^T X - n mean mean^T (time O(nnz d + d³), memory O(d²), as the dense path)."""
    n = X.shape[0]
    mean = np.asarray(X.mean(axis=0), dtype=np.float64).ravel()
    cov = np.asarray((X.T @ X).toarray(), dtype=np.float64) - n * np.outer(mean, mean)
    top = np.linalg.eigh(cov)[1][:, ::-1][:, :n_components]
    Y = np.asarray(X @ top) - mean @ top
    if Y.shape[1] < n_components:  # fewer features than components: pad with zeros
        Y = np.hstack([Y, np.zeros((n, n_components - Y.shape[1]))])
    return fix_signs(Y)


class _Log:
    """Phase timings, printed with verbose >= 1, and the iterations reported through the progress protocol
    of :mod:`repviz.progress` (stage "optimise", done/total iterations, the KL as message) to ``progress``
    and, with verbose = 1, to a :class:`~repviz.progress.TerminalProgress` line; verbose >= 2 prints each KL
    evaluation instead, in scikit-learn's words ("Iteration 50: error = ..."). Lines start with ``[name]``
    (scikit-learn's "[t-SNE]" for TSNE)."""

    def __init__(self, name: str, verbose: int, total_iter: int, progress: ProgressCallback | None):
        self.name, self.verbose, self.total = name, verbose, total_iter
        self.timings: dict[str, float] = {}
        self._terminal = TerminalProgress(name) if verbose == 1 else None
        self._progress = fan_out(progress, self._terminal)
        self._last_report = time.perf_counter()

    def say(self, line: str, level: int = 1) -> None:
        """Print ``[name] line`` at verbose >= ``level``."""
        if self.verbose >= level:
            if self._terminal is not None:
                self._terminal.close()  # end the progress line first
            print(f"[{self.name}] {line}", flush=True)

    def phase(self, name: str, seconds: float, detail: str = "") -> None:
        self.timings[name] = seconds
        self.say(f"{name}: {seconds:.2f} s{(' (' + detail + ')') if detail else ''}")

    def iteration(self, n_iter: int, kl: float) -> None:
        report(self._progress, "optimise", n_iter, self.total, f"KL {kl:.4f}")
        now = time.perf_counter()
        self.say(f"Iteration {n_iter}: error = {kl:.7f}, {now - self._last_report:.3f} s since the last report", 2)
        self._last_report = now


_COMMON_CONSTRAINTS = {
    "n_components": [Interval(int, 1, None, closed="left")],
    "perplexity": [Interval(float, 0, None, closed="neither")],
    "early_exaggeration": [Interval(float, 0, None, closed="neither")],
    "early_exaggeration_iter": [Interval(int, 0, None, closed="left")],
    "learning_rate": [Options("auto"), Interval(float, 0, None, closed="neither")],
    "max_iter": [Interval(int, 1, None, closed="left")],
    "tol": [Interval(float, 0, None, closed="left")],
    "early_momentum": [Interval(float, 0, 1, closed="left")],
    "momentum": [Interval(float, 0, 1, closed="left")],
    "metric": METRIC_RULES,
    "metric_params": [Rule(lambda v: isinstance(v, dict), "a dict"), NONE],
    "n_iter_without_progress": [NONE, Interval(int, -1, None, closed="left")],
    "min_grad_norm": [Interval(float, 0, None, closed="left")],
    "init": [Options("pca", "random"), ARRAY_LIKE],
    "neighbors": [Options("auto", "exact", "nndescent")],
    "n_jobs": [NONE, Interval(int, None, None, closed="neither")],
    "random_state": [RANDOM_STATE],
    "verbose": [Interval(int, 0, None, closed="left")],
}


class _BaseSNE(Estimator):
    """The fit shared by TSNE and SNE; subclasses define ``_kernel_dof`` (the embedding kernel),
    ``_resolve_method`` (the gradient methods they allow) and ``_auto_learning_rate``."""

    #: Float32 outputs whatever the input, as scikit-learn's TSNE returns (its tests assert it).
    _preserves_dtype = ("float32",)

    def _check_input(self, X) -> tuple[np.ndarray, bool, float]:
        """X (dense, or a scipy sparse matrix) checked and rescaled, whether all its points are identical (with
        a warning), and what X was divided by."""
        owner = type(self).__name__
        metric = resolve_metric(self.metric, self.metric_params)[0]
        # float64 data stays float64 for scipy's cdist metrics (their distances are computed in float64 anyway),
        # so P equals P of the same distances precomputed; the Euclidean-type metrics use float32 as always
        dtype = np.float32 if metric in GRAM_METRICS + ("precomputed",) else FLOAT_DTYPES
        X = check_data(X, owner, min_samples=2, dtype=dtype, metric=metric)
        scale = 1.0
        if sp.issparse(X):
            if metric == "precomputed" and self._resolve_method(X.shape[0]) == "exact":
                raise TypeError(f"{owner} with method='exact' needs every distance, not a sparse neighbour graph; "
                                f"pass the dense distance matrix or use method='auto'.")
            first = X[np.zeros(X.shape[0], dtype=np.int64)]  # row 0, n times
            identical = not X.data.any() if metric == "precomputed" else (X - first).count_nonzero() == 0
        else:
            if metric == "precomputed":
                check_distance_matrix(X, owner, symmetric=True)
            if not callable(metric):  # P is calibrated by perplexity: the scale of X does not matter
                X, scale = rescaled(X, metric)
            identical = bool(np.all(X == X[0])) if metric != "precomputed" else bool(np.all(X == 0))
        if identical:
            warnings.warn(f"All {X.shape[0]} points of X are identical: every affinity is equal and the embedding "
                          f"is random noise with no structure.", UserWarning, stacklevel=4)
        return X, identical, scale

    def _effective_perplexity(self, n: int) -> float:
        perplexity = float(self.perplexity)
        limit = (n - 1) / 3.0
        if perplexity > limit:
            warnings.warn(f"perplexity ({perplexity:g}) is too large for n_samples ({n}): calibrating it needs "
                          f"3 * perplexity neighbours, at most n_samples - 1. Using perplexity {limit:g} instead; "
                          f"pass a smaller perplexity to silence this warning.", UserWarning, stacklevel=5)
            perplexity = limit
        return perplexity

    def _affinities(self, X: np.ndarray, knn_seed: int, log: _Log, scale: float,
                    seeds: np.ndarray | None = None) -> Affinities:
        n = X.shape[0]
        method = self._resolve_method(n)
        perplexity = self._effective_perplexity(n)
        with NumbaThreads(self.n_jobs), _one_blas_thread():
            t = time.perf_counter()
            k = n - 1 if method == "exact" else n_neighbors_for(perplexity, n)
            knn_method = "exact" if method == "exact" else self.neighbors
            metric, params = resolve_metric(self.metric, self.metric_params)
            log.say(f"Computing {k} nearest neighbors...")
            idx, dist = knn(X, k, metric=metric, method=knn_method, random_state=knn_seed, metric_params=params,
                            seeds=seeds)
            log.phase("kNN", time.perf_counter() - t, f"k={k}, {knn_method}" + (", seeded" if seeds is not None
                                                                                 else ""))
            t = time.perf_counter()
            cond, betas = conditional_affinities(dist, perplexity)
            P = symmetrize_conditional(idx, cond)
            log.phase("affinities", time.perf_counter() - t, f"perplexity {perplexity:g}, {P.nnz} non-zeros")
            log.say(f"Computed conditional probabilities in {time.perf_counter() - t:.3f}s", 2)
            # scikit-learn's summary of the Gaussians' widths: sigma of the mean precision
            log.say(f"Mean sigma: {scale * float(np.sqrt(1.0 / np.mean(betas))):f}", 2)
        return Affinities(P, perplexity, k, self.metric, knn_method, X.shape[1],
                          None if method == "exact" else idx.astype(np.int32))

    def _initial_layout(self, X: np.ndarray | None, n: int, identical: bool, rng: np.random.Generator):
        k = self.n_components
        if not isinstance(self.init, str):
            Y0 = np.array(self.init, dtype=np.float64)
            if Y0.shape != (n, k):
                raise ValueError(f"init has shape {Y0.shape}; it must be (n_samples, n_components) = {(n, k)}")
            if not np.isfinite(Y0).all():
                raise ValueError("init contains NaN or infinity")
            return _init.rescale(Y0)
        if self.init == "random" or identical:
            return _init.random(n, k, rng)
        if X is None:
            raise param_error("init", type(self).__name__, "'random' or an array-like when X is precomputed "
                              "Affinities (PCA needs the data)", self.init)
        if sp.issparse(X) and self.metric == "precomputed":
            raise param_error("init", type(self).__name__, "'random' or an array-like with a sparse neighbour "
                              "graph (classical MDS needs every distance)", self.init)
        if sp.issparse(X):
            return _init.rescale(_sparse_pca(X, k))
        if self.metric == "precomputed":
            if n > _MDS_INIT_MAX_N:
                warnings.warn(f"init='pca' with metric='precomputed' needs classical MDS, O(n³) time; with "
                              f"n_samples = {n} > {_MDS_INIT_MAX_N} random initialisation is used instead.",
                              UserWarning, stacklevel=4)
                return _init.random(n, k, rng)
            return _init.rescale(_init.mds(X, k))
        return _init.rescale(_init.pca(X, k))

    def prepare_affinities(self, X, *, seeds: np.ndarray | None = None) -> Affinities:
        """The affinities P of X as :meth:`fit` computes them (from ``perplexity``, ``metric``, ``neighbors``,
        ``method`` and ``random_state``). Pass them to :meth:`fit` in place of X, of this estimator or of
        another (another ``init`` or ``random_state``, say), to skip the kNN search and the calibration; the
        fit is then the same as from X.

        Parameters
        ----------
        X : array of shape (n_samples, n_features), or (n_samples, n_samples) with ``metric="precomputed"``
        seeds : int array (n_samples, m) or None
            Candidate neighbours for the approximate kNN search to start from, e.g. the ``knn_indices`` of the
            affinities of the same points at an earlier snapshot (see :func:`repviz.neighbors.knn`).
        """
        self._validate_params()
        X, _, scale = self._check_input(X)
        knn_seed = int(rng_from(self.random_state).integers(2**31 - 1))
        return self._affinities(X, knn_seed, _Log(self._log_name, self.verbose, self.max_iter, None), scale,
                                seeds)

    def prepare_embedding(self, X) -> TSNEEmbedding:
        """The :class:`~repviz.manifold.tsne.TSNEEmbedding` that :meth:`fit` optimises, before its first
        iteration: the affinities of X (or X itself, precomputed :class:`~repviz.manifold.tsne.Affinities`), the
        initial layout of ``init`` and the gradient method. To run the phases yourself.

        Parameters
        ----------
        X : array or Affinities
            As in :meth:`fit`.
        """
        self._validate_params()
        return self._prepare(X, _Log(self._log_name, self.verbose, self.max_iter, None))

    def _prepare(self, X, log: _Log) -> TSNEEmbedding:
        rng = rng_from(self.random_state)
        knn_seed = int(rng.integers(2**31 - 1))  # drawn with precomputed affinities too: random init stays the same
        if isinstance(X, Affinities):
            affinities, data, identical = X, None, False
        else:
            data, identical, scale = self._check_input(X)
            affinities = self._affinities(data, knn_seed, log, scale)
        n = affinities.n_samples
        t = time.perf_counter()
        with _one_blas_thread():
            Y = self._initial_layout(data, n, identical, rng)
        log.phase("initialisation", time.perf_counter() - t)
        return TSNEEmbedding(Y, affinities, method=self._resolve_method(n), dof=self._kernel_dof(),
                             angle=float(getattr(self, "angle", 0.5)), n_jobs=self.n_jobs)

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Compute the embedding of X; returns self.

        Parameters
        ----------
        X : array of shape (n_samples, n_features), or (n_samples, n_samples) with ``metric="precomputed"``, or
            :class:`~repviz.manifold.tsne.Affinities`
            The data, or affinities from :meth:`prepare_affinities` (``perplexity``, ``metric`` and ``neighbors``
            are then theirs; ``init`` must be "random" or an array).
        y : ignored
        progress : callable or None, default=None
            A callable of :mod:`repviz.progress`; receives ("optimise", iterations done, max_iter, "KL ...") as
            the optimisation goes (every 25 iterations and at the end of each phase).
        """
        self._validate_params()
        log = _Log(self._log_name, self.verbose, self.max_iter, progress)
        embedding = self._prepare(X, log)
        n = embedding.affinities.n_samples
        ee_iter = min(self.early_exaggeration_iter, self.max_iter)
        auto = self.learning_rate == "auto"
        lr_ee = self._auto_learning_rate(n, self.early_exaggeration) if auto else float(self.learning_rate)
        lr = self._auto_learning_rate(n, 1.0) if auto else float(self.learning_rate)
        for name, n_iter, exaggeration, momentum, rate in (
                ("early exaggeration", ee_iter, self.early_exaggeration, self.early_momentum, lr_ee),
                ("optimisation", self.max_iter - ee_iter, 1.0, self.momentum, lr)):
            t = time.perf_counter()
            # convergence is checked without exaggeration only (clusters form slowly under it)
            embedding.optimize(n_iter, exaggeration=exaggeration, momentum=momentum, learning_rate=rate,
                               tol=float(self.tol) if exaggeration == 1.0 else 0.0, progress=log.iteration,
                               n_iter_without_progress=(self.n_iter_without_progress if name == "optimisation"
                                                        else None),
                               min_grad_norm=float(self.min_grad_norm))
            self._say_stop(log, embedding)
            log.phase(name, time.perf_counter() - t, f"{n_iter} iterations" + (
                f", KL {embedding.kl_divergence:.4f}" if name == "optimisation" else ""))
        Y = embedding.layout
        if not np.isfinite(Y).all():
            raise FloatingPointError(f"{type(self).__name__} diverged (non-finite coordinates); lower "
                                     f"learning_rate ({lr:g}) or early_exaggeration ({self.early_exaggeration:g})")
        self.embedding_ = Y.astype(np.float32)
        self.kl_divergence_ = embedding.kl_divergence
        self.n_iter_ = embedding.n_iter - 1  # scikit-learn's convention: the index of the last iteration
        self.learning_rate_ = lr
        self.early_learning_rate_ = lr_ee
        self.perplexity_ = embedding.affinities.perplexity
        self.method_ = embedding.method
        self.affinities_ = embedding.affinities.P
        self.knn_indices_ = embedding.affinities.knn_indices
        self.n_features_in_ = embedding.affinities.n_features
        self.timings_ = log.timings
        # what transform places new points against (None from precomputed affinities or distances)
        self.training_data_ = None if isinstance(X, Affinities) or self.metric == "precomputed" else \
            check_data(X, type(self).__name__, dtype=np.float32)
        return self

    def _say_stop(self, log: _Log, embedding: TSNEEmbedding) -> None:
        """With verbose >= 2, why a phase stopped early, in scikit-learn's words."""
        reasons = {"n_iter_without_progress": f"did not make any progress during the last "
                                              f"{self.n_iter_without_progress} episodes",
                   "min_grad_norm": f"gradient norm at most min_grad_norm ({self.min_grad_norm:g})",
                   "tol": f"the KL divergence changes by less than tol ({self.tol:g})"}
        if embedding.stopped_by is not None:
            log.say(f"Iteration {embedding.n_iter}: {reasons[embedding.stopped_by]}. Finished.", 2)


_SHARED_DOC = """
    Parameters
    ----------
    n_components : int, default=2
        Dimension of the embedding.
    perplexity : float, default=30
        Effective number of neighbours each point's Gaussian covers (typical 5-50); each point's affinities use
        its 3 * perplexity nearest neighbours. If 3 * perplexity > n_samples - 1 it is lowered to
        (n_samples - 1) / 3 with a warning.
    early_exaggeration : float, default=12
        Factor on the attractive forces during the first ``early_exaggeration_iter`` iterations (clusters form
        first, then spread). P itself is never modified.
    early_exaggeration_iter : int, default=250
        Iterations of the exaggerated phase, counted within ``max_iter``. 0 skips it (a start that already has
        its clusters, such as an earlier layout).
    learning_rate : float or "auto", default="auto"
        Step size in the convention of bhtsne, FIt-SNE and openTSNE (their gradient omits the factor 4 of the
        exact derivative; scikit-learn's learning_rate for the same step is 4x smaller). "auto" uses
        n_samples / exaggeration in each phase, as openTSNE: n / 12 during early exaggeration (Belkina et al.
        2019; Kobak & Berens 2019), then n, which at a fixed iteration budget reaches a lower KL than n / 12
        throughout (on MNIST 20k after 250 + 500 iterations: 2.07 vs 2.15). For TSNE at least min(200, n / 1.5):
        FIt-SNE's floor of 200 where it helps early exaggeration (300-2,400 points), never above n / 1.5, as a
        larger step leaves worse layouts of small data (see :func:`~repviz.manifold.tsne.embedding.
        auto_learning_rate`); n / 12 in both phases for SNE. Resolved in ``early_learning_rate_`` and
        ``learning_rate_``. (scikit-learn's "auto", max(n / 12 / 4, 50) in its convention, is 4x smaller.)
    max_iter : int, default=750
        Total iterations, early exaggeration included (at most, with ``tol``).
    tol : float, default=0
        Convergence tolerance after early exaggeration. The KL divergence is evaluated every 25 iterations; the
        optimisation stops when its relative change over the last 25, extrapolated over the iterations left, is
        below ``tol``, so that running on could have lowered it by about ``tol`` at most (the KL falls ever more
        slowly). 0 runs every iteration (as bhtsne, FIt-SNE and openTSNE do). Useful when continuing from an
        earlier layout: one that barely changed stops after 50 iterations; the pipeline's aligned chains use
        5e-3 (see ``n_iter_``).
    early_momentum : float, default=0.5
        Momentum during early exaggeration (0.5 as bhtsne, FIt-SNE and scikit-learn; openTSNE uses 0.8).
    momentum : float, default=0.8
        Momentum after early exaggeration.
    n_iter_without_progress : int or None, default=None
        scikit-learn's rule: stop the main phase at a KL evaluation (every 25 iterations) more than this many
        iterations after its lowest KL. None runs on (scikit-learn's default is 300).
    min_grad_norm : float, default=0
        scikit-learn's rule: stop a phase after a step whose gradient norm (of the exact KL derivative) is at most
        this. 0 runs on (scikit-learn's default is 1e-7).
    metric : str or callable, default="euclidean"
        Input distances: "euclidean", "cosine", "sqeuclidean", "manhattan" ("l1", "cityblock"), "chebyshev",
        "minkowski" (``p`` in ``metric_params``, default 2), "mahalanobis" (``V`` or ``VI`` in
        ``metric_params``), a callable of two 1-D arrays, or "precomputed". Euclidean, cosine and sqeuclidean
        distances come from matrix products (fast; sparse X stays sparse); the other names from scipy's cdist,
        several times slower, and a callable is called once per pair from Python: about 1 µs each, minutes for
        10,000 points. "precomputed": X is a square, symmetric, non-negative distance matrix, or a sparse
        neighbour graph (scikit-learn's ``KNeighborsTransformer(n_neighbors=k, mode="distance")``, k at least
        3 * perplexity; then ``init="random"``). Distances are squared inside the Gaussian whatever the metric
        (as scikit-learn 1.9 does).
    metric_params : dict or None, default=None
        Arguments of the metric (see :func:`repviz.neighbors.knn`).
    init : {"pca", "random"} or array of shape (n_samples, n_components), default="pca"
        "pca": the first principal components (classical MDS of the distances when precomputed; dense input
        only, as in scikit-learn: sparse X needs "random" or an array), scaled to
        standard deviation 1e-4. An array: a start of your own (e.g. an earlier embedding, to keep views
        aligned), centred and rescaled the same way. To go on from a layout at its own scale, optimise a
        :class:`~repviz.manifold.tsne.TSNEEmbedding` of it (:func:`~.continuation.continue_tsne` is the pipeline's
        way).
    neighbors : {"auto", "exact", "nndescent"}, default="auto"
        kNN method of :func:`repviz.neighbors.knn` (the exact gradient always uses all points).
    n_jobs : int or None, default=None
        numba threads (None: 1, -1: all). Results do not depend on it.
    random_state : int or None, default=None
        Seed of random initialisation and of approximate nearest neighbours. Fits are deterministic for a given
        random_state whatever ``n_jobs``.
    verbose : int, default=0
        1 prints each phase with its time, and a progress line with ETA during the optimisation (on stderr, on
        an interactive terminal only; see :class:`repviz.progress.TerminalProgress`). 2 prints, in place of
        the progress line, the mean sigma of the affinities, each KL evaluation ("Iteration 50: error = ...")
        and why a phase stopped early, in scikit-learn's words, on stdout. Lines start with "[t-SNE]" ("[SNE]"
        for SNE). To follow the optimisation programmatically, pass ``progress=`` to :meth:`fit`.
"""


class TSNE(_BaseSNE):
    __doc__ = """t-distributed Stochastic Neighbor Embedding (van der Maaten & Hinton 2008).

    Affinities come from a kNN graph (k = 3 * perplexity); the repulsive forces are computed exactly (O(n²) per
    iteration), by Barnes-Hut (O(n log n), 1-3 components) or by FFT-accelerated interpolation (O(n), 2
    components; Linderman et al. 2019). Memory is O(n * perplexity).

    A fit is :meth:`prepare_embedding` (kNN, affinities, initial layout) and two
    :meth:`TSNEEmbedding.optimize <repviz.manifold.tsne.TSNEEmbedding.optimize>` calls (early exaggeration, then
    the main phase). ``fit`` also takes the affinities of :meth:`prepare_affinities` in place of X, to reuse them.
    """ + _SHARED_DOC + """    method : {"auto", "direct", "fft", "barnes_hut", "exact"}, default="auto"
        Gradient method. "direct": the repulsion summed over all pairs, O(n²) per iteration but vectorised
        (float32, about 1.5 ms per iteration at 5,000 points on two cores): exact, and the fastest for probe-set
        sizes. "fft": interpolation on a grid that grows with the layout's extent (O(n) + grid). "auto" (2-D,
        dof = 1): at every iteration whichever of the two a cost model says is cheaper for n and the layout's
        current extent (direct up to a few thousand points, FFT for large n, and for a compact layout such as
        during early exaggeration); the choice depends on the data only, never on timings. Outside 2-D t-SNE
        "auto" is exact up to 1,000 points, then "barnes_hut" (1 or 3 components) or "fft". "exact" also uses all
        n - 1 neighbours for the affinities (as scikit-learn's exact method); the others use 3 * perplexity.
    angle : float, default=0.5
        Barnes-Hut's opening angle theta (cell width / distance), used by method="barnes_hut" only: smaller is
        more accurate and slower, 0 opens every cell (exact, O(n²)). The exact, direct and FFT methods ignore it
        (FFT's accuracy is set by its grid), so angle=0 with method="exact" is accepted as in scikit-learn.
    dof : float, default=1
        Degrees of freedom alpha of the Student-t kernel (1 + d²/alpha)^-alpha; alpha < 1 gives heavier tails
        and finer clusters (Kobak et al. 2019).

    Attributes
    ----------
    embedding_ : float32 array (n_samples, n_components)
    kl_divergence_ : float
        KL(P || Q) after the last iteration (with approximate methods, Q's normalisation is the approximate one).
    n_iter_ : int
        scikit-learn's convention: the index of the last iteration run, counting from 0 (one less than the
        iterations run, which ``TSNEEmbedding.n_iter`` counts).
    early_learning_rate_, learning_rate_, perplexity_ : the resolved values used.
    method_ : str
        The method used; with "auto" in 2-D, the repulsion methods it chose: "direct", "fft" or "fft+direct".
    affinities_ : scipy.sparse.csr_matrix, the joint P (:meth:`prepare_affinities` gives it with what built it).
    knn_indices_ : int32 array (n_samples, n_neighbors) or None
        The kNN graph P was calibrated on (None with the exact gradient).
    timings_ : dict of seconds per phase ("kNN" and "affinities" unless X was precomputed affinities,
        "initialisation", "early exaggeration", "optimisation").

    See Also
    --------
    SNE : the symmetric SNE with a Gaussian kernel in the embedding.
    repviz.manifold.tsne.TSNEEmbedding : a layout that further ``optimize`` calls continue.

    References
    ----------
    Kobak & Berens (2019), "The art of using t-SNE for single-cell transcriptomics".
    Belkina et al. (2019), "Automated optimized parameters for t-SNE".
    Linderman et al. (2019), "Fast interpolation-based t-SNE for improved visualization of single-cell RNA-seq".
    Kobak, Linderman et al. (2019), "Heavy-tailed kernels reveal a finer cluster structure in t-SNE".

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import TSNE
    >>> X = np.random.default_rng(0).normal(size=(200, 10))
    >>> TSNE(perplexity=10, random_state=0).fit_transform(X).shape
    (200, 2)
    >>> affinities = TSNE(perplexity=10).prepare_affinities(X)  # once, for several fits
    >>> [TSNE(init="random", random_state=seed).fit(affinities).n_iter_ for seed in (0, 1)]
    [749, 749]
    """

    _log_name = "t-SNE"  # scikit-learn's prefix of the verbose lines
    _accepts_sparse = True
    _parameter_constraints = {**_COMMON_CONSTRAINTS,
                              "method": [Options("auto", "direct", "exact", "barnes_hut", "fft")],
                              "angle": [Interval(float, 0, 1, closed="both")],
                              "dof": [Interval(float, 0, None, closed="neither")]}

    def __init__(self, n_components: int = 2, *, perplexity: float = 30.0, early_exaggeration: float = 12.0,
                 early_exaggeration_iter: int = 250, learning_rate="auto", max_iter: int = 750,
                 tol: float = 0.0, n_iter_without_progress: int | None = None, min_grad_norm: float = 0.0,
                 early_momentum: float = 0.5, momentum: float = 0.8, metric="euclidean",
                 metric_params: dict | None = None, init="pca",
                 method: str = "auto", angle: float = 0.5, dof: float = 1.0, neighbors: str = "auto",
                 n_jobs: int | None = None, random_state: int | None = None, verbose: int = 0):
        self.n_components = n_components
        self.perplexity = perplexity
        self.early_exaggeration = early_exaggeration
        self.early_exaggeration_iter = early_exaggeration_iter
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_without_progress = n_iter_without_progress
        self.min_grad_norm = min_grad_norm
        self.early_momentum = early_momentum
        self.momentum = momentum
        self.metric = metric
        self.metric_params = metric_params
        self.init = init
        self.method = method
        self.angle = angle
        self.dof = dof
        self.neighbors = neighbors
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def transform(self, X, *, perplexity: float = 5.0, n_iter: int = 250) -> np.ndarray:
        """Place new points into the fitted layout, which does not move: each by gradient descent on its own
        affinities to its nearest fitted points, from their weighted mean (openTSNE's ``transform`` and defaults;
        :func:`repviz.manifold.tsne.transform.place`). Float32 (m, n_components). A point equal to a fitted one
        (at distance 0; for a repeated point the first) gets that point's position back, as umap-learn's
        transform returns ``embedding_`` for the training data, so that ``fit(X).transform(X)`` equals
        ``fit_transform(X)`` (scikit-learn's transformer contract).

        X : array (m, n_features), or (m, n_samples) distances to the fitted points with ``metric="precomputed"``.
        The fit keeps its data for this (``training_data_``, n_samples x n_features float32).
        """
        self._check_fitted()
        X = check_array(X, "TSNE.transform")
        if self.metric == "precomputed":
            if X.shape[1] != self.embedding_.shape[0]:
                raise ValueError(f"With metric='precomputed', transform expects distances to the "
                                 f"{self.embedding_.shape[0]} fitted points; got shape {X.shape}.")
        elif self.training_data_ is None:
            raise ValueError("this TSNE was fitted from precomputed affinities and kept no data to place new "
                             "points against; fit it on the data itself to transform")
        from .transform import place

        return place(X, self.training_data_, self.embedding_, perplexity=perplexity, n_iter=n_iter,
                     dof=float(self.dof), metric=self.metric, keep_copies=True)

    def _kernel_dof(self) -> float:
        return float(self.dof)

    def _auto_learning_rate(self, n: int, exaggeration: float) -> float:
        return auto_learning_rate(n, exaggeration)

    def _resolve_method(self, n: int) -> str:
        return resolve_method(self.method, n, self.n_components, self.dof)


class SNE(_BaseSNE):
    __doc__ = """Symmetric Stochastic Neighbor Embedding (Gaussian kernel in the embedding; van der Maaten &
    Hinton 2008, section 3.1): t-SNE's predecessor, kept for teaching and comparison (it shows the crowding
    problem the Student-t kernel solves). Same affinities and optimiser as :class:`TSNE`; the gradient is exact,
    O(n²) time per iteration, so it suits a few thousand points at most.
    """ + _SHARED_DOC + """
    Attributes
    ----------
    embedding_, kl_divergence_, n_iter_, early_learning_rate_, learning_rate_, perplexity_, method_,
    affinities_, knn_indices_, timings_ :
        as in :class:`TSNE`.

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import SNE
    >>> X = np.random.default_rng(0).normal(size=(100, 5))
    >>> SNE(perplexity=10, random_state=0).fit_transform(X).shape
    (100, 2)
    """

    _log_name = "SNE"
    _accepts_sparse = True
    _parameter_constraints = _COMMON_CONSTRAINTS

    def __init__(self, n_components: int = 2, *, perplexity: float = 30.0, early_exaggeration: float = 12.0,
                 early_exaggeration_iter: int = 250, learning_rate="auto", max_iter: int = 750,
                 tol: float = 0.0, n_iter_without_progress: int | None = None, min_grad_norm: float = 0.0,
                 early_momentum: float = 0.5, momentum: float = 0.8, metric="euclidean",
                 metric_params: dict | None = None, init="pca",
                 neighbors: str = "auto", n_jobs: int | None = None, random_state: int | None = None,
                 verbose: int = 0):
        self.n_components = n_components
        self.perplexity = perplexity
        self.early_exaggeration = early_exaggeration
        self.early_exaggeration_iter = early_exaggeration_iter
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_without_progress = n_iter_without_progress
        self.min_grad_norm = min_grad_norm
        self.early_momentum = early_momentum
        self.momentum = momentum
        self.metric = metric
        self.metric_params = metric_params
        self.init = init
        self.neighbors = neighbors
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _kernel_dof(self) -> float:
        return 0.0  # the Gaussian kernel (see _kernels.kernel_weight)

    def _auto_learning_rate(self, n: int, exaggeration: float) -> float:
        # n / 12 in both phases and no floor: the Gaussian kernel's attraction grows linearly with distance, so
        # larger steps diverge
        return n / 12.0

    def _resolve_method(self, n: int) -> str:
        return "exact"
