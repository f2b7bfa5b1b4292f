"""The TSNE and SNE estimators: validation, the phases of a fit (kNN, affinities, initialisation, early
exaggeration, optimisation) with timings, threads and progress output."""

from __future__ import annotations

import time
import warnings

import numba
import numpy as np

from ..._validation import (
    ARRAY_LIKE,
    BOOLEAN,
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    check_array,
    check_distance_matrix,
    rescaled,
)
from ...neighbors import knn
from ...progress import ProgressCallback, TerminalProgress, fan_out, report
from .._base import Estimator, rng_from
from . import init as _init
from .affinity import joint_affinities, n_neighbors_for
from .optimize import KLObjective, gradient_descent, make_repulsion, relabel, spatial_order

_EXACT_MAX_N = 1000  # method="auto" outside 2-D t-SNE: exact gradient up to this many points
_KL_EVERY = 25  # iterations between the KL evaluations that report progress and decide convergence (``tol``)
_MDS_INIT_MAX_N = 5000  # init="pca" with precomputed distances: classical MDS (O(n³)) up to this many points
_NEIGHBOUR_START_ITER = 30  # neighbour_start: iterations from the neighbour-mean start before it is judged
_NEIGHBOUR_START_RATE = 4.0  # neighbour_start: factor on the learning rate from that start (a contracted layout)


class _Threads:
    """Set numba's thread count for the duration of a fit and restore it afterwards (even on error)."""

    def __init__(self, n_jobs):
        limit = numba.config.NUMBA_NUM_THREADS
        if n_jobs is None:
            self.n = 1
        elif n_jobs < 0:
            self.n = max(1, limit + 1 + n_jobs)
        else:
            self.n = max(1, min(int(n_jobs), limit))  # n_jobs=0 runs on one thread

    def __enter__(self):
        self._old = numba.get_num_threads()
        numba.set_num_threads(self.n)
        return self.n

    def __exit__(self, *exc):
        numba.set_num_threads(self._old)
        return False


def _used_method(method: str, repulsion) -> str:
    """The resolved method; for "auto", the repulsion methods it used ("direct", "fft" or "fft+direct")."""
    counts = getattr(repulsion, "counts", None)
    if method != "auto" or counts is None:
        return method
    return "+".join(name for name in ("fft", "direct") if counts[name]) or "direct"


class _Log:
    """Phase timings, printed with verbose >= 1, and the iterations reported through the progress protocol
    of :mod:`repviz.progress` (stage "optimise", done/total iterations, the KL as message) to ``progress``
    and, with verbose >= 1, to a :class:`~repviz.progress.TerminalProgress` line."""

    def __init__(self, owner: str, verbose: int, total_iter: int, progress: ProgressCallback | None):
        self.owner, self.verbose, self.total = owner, verbose, total_iter
        self.timings: dict[str, float] = {}
        self._terminal = TerminalProgress(owner) if verbose else None
        self._progress = fan_out(progress, self._terminal)

    def phase(self, name: str, seconds: float, detail: str = "") -> None:
        self.timings[name] = seconds
        if self.verbose:
            self._terminal.close()  # end the progress line first
            print(f"[{self.owner}] {name}: {seconds:.2f} s{(' (' + detail + ')') if detail else ''}", flush=True)

    def iteration(self, state) -> None:
        report(self._progress, "optimise", state.n_iter, self.total, f"KL {state.kl:.4f}")


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
    "neighbour_start": [NONE, Interval(int, 1, None, closed="left")],
    "metric": [Options("euclidean", "cosine", "precomputed")],
    "init": [Options("pca", "random"), ARRAY_LIKE],
    "rescale_init": [Options("auto"), BOOLEAN],
    "neighbors": [Options("auto", "exact", "nndescent")],
    "n_jobs": [NONE, Interval(int, None, None, closed="neither")],
    "random_state": [RANDOM_STATE],
    "verbose": [Interval(int, 0, None, closed="left")],
}


class _BaseSNE(Estimator):
    """The fit shared by TSNE and SNE; subclasses define ``_kernel_dof`` (the embedding kernel),
    ``_resolve_method`` (the gradient methods they allow) and ``_auto_learning_rate``."""

    def _check_input(self, X) -> np.ndarray:
        owner = type(self).__name__
        X = check_array(X, owner, min_samples=2)
        if self.metric == "precomputed":
            check_distance_matrix(X, owner, symmetric=True)
        return rescaled(X, self.metric)[0]  # P is calibrated by perplexity: the scale of X does not matter

    def _effective_perplexity(self, n: int) -> float:
        perplexity = float(self.perplexity)
        limit = (n - 1) / 3.0
        if perplexity > limit:
            warnings.warn(f"perplexity ({perplexity:g}) is too large for n_samples ({n}): calibrating it needs "
                          f"3 * perplexity neighbours, at most n_samples - 1. Using perplexity {limit:g} instead; "
                          f"pass a smaller perplexity to silence this warning.", UserWarning, stacklevel=3)
            perplexity = limit
        return perplexity

    def _initial_embedding(self, X, n: int, identical: bool, rng: np.random.Generator):
        k = self.n_components
        if not isinstance(self.init, str):
            Y0 = np.array(self.init, dtype=np.float64)
            if Y0.shape != (n, k):
                raise ValueError(f"init has shape {Y0.shape}; it must be (n_samples, n_components) = {(n, k)}")
            if not np.isfinite(Y0).all():
                raise ValueError("init contains NaN or infinity")
            rescale = True if self.rescale_init == "auto" else bool(self.rescale_init)
            return _init.rescale(Y0) if rescale else Y0 - Y0.mean(axis=0)
        if self.init == "random" or identical:
            return _init.random(n, k, rng)
        if self.metric == "precomputed":
            if n > _MDS_INIT_MAX_N:
                warnings.warn(f"init='pca' with metric='precomputed' needs classical MDS, O(n³) time; with "
                              f"n_samples = {n} > {_MDS_INIT_MAX_N} random initialisation is used instead.",
                              UserWarning, stacklevel=3)
                return _init.random(n, k, rng)
            return _init.rescale(_init.mds(X, k))
        return _init.rescale(_init.pca(X, k))

    def fit(self, X, y=None, *, progress: ProgressCallback | None = None):
        """Compute the embedding of X (or of the distance matrix X with ``metric="precomputed"``); returns self.

        ``progress``, a callable of :mod:`repviz.progress`, receives ("optimise", iterations done, max_iter,
        "KL ...") as the optimisation goes (every 25 iterations and at the end of each phase)."""
        self._validate_params()
        owner = type(self).__name__
        X = self._check_input(X)
        n = X.shape[0]
        self.n_features_in_ = X.shape[1]
        method = self._resolve_method(n)
        perplexity = self._effective_perplexity(n)
        identical = bool(np.all(X == X[0])) if self.metric != "precomputed" else bool(np.all(X == 0))
        if identical:
            warnings.warn(f"All {n} points of X are identical: every affinity is equal and the embedding is random "
                          f"noise with no structure.", UserWarning, stacklevel=2)
        ee_iter = min(self.early_exaggeration_iter, self.max_iter)
        rng = rng_from(self.random_state)
        knn_seed = int(rng.integers(2**31 - 1))
        log = _Log(owner, self.verbose, self.max_iter, progress)
        with _Threads(self.n_jobs) as n_threads:
            t = time.perf_counter()
            k = n - 1 if method == "exact" else n_neighbors_for(perplexity, n)
            knn_method = "exact" if method == "exact" else self.neighbors
            idx, dist = knn(X, k, metric=self.metric, method=knn_method, random_state=knn_seed)
            log.phase("kNN", time.perf_counter() - t, f"k={k}, {knn_method}")
            t = time.perf_counter()
            P = joint_affinities(idx, dist, perplexity)
            log.phase("affinities", time.perf_counter() - t, f"perplexity {perplexity:g}, {P.nnz} non-zeros")
            t = time.perf_counter()
            Y = np.ascontiguousarray(self._initial_embedding(X, n, identical, rng))
            log.phase("initialisation", time.perf_counter() - t)
            auto = self.learning_rate == "auto"
            lr_ee = self._auto_learning_rate(n, self.early_exaggeration) if auto else float(self.learning_rate)
            lr = self._auto_learning_rate(n, 1.0) if auto else float(self.learning_rate)
            state, budget, rate, self.start_ = None, self.max_iter - ee_iter, lr, "init"
            if self.neighbour_start is not None:
                state, Y, budget, rate, self.start_ = self._neighbour_start(Y, P, method, lr, n_threads, log)
            phases = [("early exaggeration", ee_iter, lr_ee, self.early_momentum, self.early_exaggeration),
                      ("optimisation", budget, rate, self.momentum, 1.0)]
            state, Y, method = self._descend(Y, P, method, phases, n_threads, log, state)
        if not np.isfinite(Y).all():
            raise FloatingPointError(f"{owner} diverged (non-finite coordinates); lower learning_rate "
                                     f"({rate:g}) or early_exaggeration ({self.early_exaggeration:g})")
        self.embedding_ = Y.astype(np.float32)
        self.kl_divergence_ = state.kl
        self.n_iter_ = state.n_iter
        self.learning_rate_ = rate
        self.early_learning_rate_ = lr_ee
        self.perplexity_ = perplexity
        self.method_ = method
        self.affinities_ = P
        self.timings_ = log.timings
        return self

    def _neighbour_start(self, Y, P, method, lr, n_threads, log):
        """The race of ``neighbour_start``: (state, layout, iterations left, learning rate, name of the start
        kept)."""
        if isinstance(self.init, str) or self.early_exaggeration_iter:
            raise ValueError("neighbour_start continues from an earlier layout: it needs an array init and "
                             f"early_exaggeration_iter=0 (got init={self.init!r:.40}, early_exaggeration_iter="
                             f"{self.early_exaggeration_iter})")
        t = time.perf_counter()
        mass = np.asarray(P.sum(axis=1)).ravel()
        moved = np.where(mass[:, None] > 0, (P @ Y) / np.where(mass > 0, mass, 1.0)[:, None], Y)
        repulsion = make_repulsion(method, Y.shape[0], self.n_components, self._kernel_dof(), n_threads=n_threads)
        kl_init = KLObjective(P, repulsion, self._kernel_dof())(Y)[0]
        race, rate = min(_NEIGHBOUR_START_ITER, self.neighbour_start), _NEIGHBOUR_START_RATE * lr
        state, moved, _ = self._descend(moved, P, method, [("neighbour start", race, rate, self.momentum, 1.0)],
                                        n_threads, _Log(type(self).__name__, 0, race, None))
        keep = state.kl < kl_init
        log.phase("neighbour start", time.perf_counter() - t,
                  f"KL {state.kl:.4f} after {race} iterations against {kl_init:.4f} at init: "
                  + ("kept" if keep else "dropped"))
        if keep:
            return state, moved, self.neighbour_start - race, rate, "neighbours"
        return None, Y, self.max_iter, lr, "init"

    def _descend(self, Y, P, method, phases, n_threads, log, state=None):
        """Gradient descent through the phases (name, iterations, learning rate, momentum, exaggeration), from
        ``state`` (the momentum and gains of an earlier descent of this Y) if given.

        With an approximate gradient the points are first relabelled in Z-order of the current layout (P
        alike), so that neighbours in P sit close in memory and the attractive loop hits the cache (at 70,000
        points it runs about twice as fast); the original labels are restored at the end, the state's too.
        """
        dof = self._kernel_dof()
        repulsion = make_repulsion(method, Y.shape[0], self.n_components, dof,
                                   theta=float(getattr(self, "angle", 0.5)), n_threads=n_threads)
        order = np.arange(Y.shape[0])
        objective = None
        for name, n_iter, rate, momentum, exaggeration in phases:
            t = time.perf_counter()
            if n_iter and (objective is None or method != "exact"):
                perm = spatial_order(Y) if method != "exact" else order
                Y, order = np.ascontiguousarray(Y[perm]), order[perm]
                if state is not None:
                    state.update, state.gains = state.update[perm], state.gains[perm]
                objective = KLObjective(relabel(P, order) if method != "exact" else P, repulsion, dof)
            if n_iter:
                # convergence is checked after early exaggeration only (clusters form slowly before it)
                tol = float(self.tol) if exaggeration == 1.0 else 0.0
                state = gradient_descent(Y, objective, n_iter, learning_rate=rate, momentum=momentum,
                                         exaggeration=exaggeration, state=state, progress=log.iteration,
                                         tol=tol, kl_every=_KL_EVERY)
            log.phase(name, time.perf_counter() - t, f"{n_iter} iterations" + (
                f", KL {state.kl:.4f}" if name == "optimisation" and state is not None else ""))
        out = np.empty_like(Y)
        out[order] = Y
        if state is not None:
            for name in ("update", "gains"):
                restored = np.empty_like(Y)
                restored[order] = getattr(state, name)
                setattr(state, name, restored)
        return state, out, _used_method(method, repulsion)


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
        Iterations of the exaggerated phase, counted within ``max_iter``. Set 0 to continue from an earlier
        embedding passed as ``init`` (with ``rescale_init=False``).
    learning_rate : float or "auto", default="auto"
        Step size in the convention of bhtsne, FIt-SNE and openTSNE (their gradient omits the factor 4 of the
        exact derivative; scikit-learn's learning_rate for the same step is 4x smaller). "auto" uses
        n_samples / exaggeration in each phase, as openTSNE: n / 12 during early exaggeration (Belkina et al.
        2019; Kobak & Berens 2019), then n, which at a fixed iteration budget reaches a lower KL than n / 12
        throughout (on MNIST 20k after 250 + 500 iterations: 2.07 vs 2.15); at least 200 (as FIt-SNE) for TSNE,
        n / 12 in both phases for SNE. Resolved in ``early_learning_rate_`` and ``learning_rate_``.
    max_iter : int, default=750
        Total iterations, early exaggeration included (at most, with ``tol``).
    tol : float, default=0
        Convergence tolerance after early exaggeration. The KL divergence is evaluated every 25 iterations; the
        optimisation stops when its relative change over the last 25, extrapolated over the iterations left, is
        below ``tol``, so that running on could have lowered it by about ``tol`` at most (the KL falls ever more
        slowly). 0 runs every iteration (as bhtsne, FIt-SNE and openTSNE do). Useful when continuing from an
        earlier layout (``init=``): a layout that barely changed stops after 50 iterations; the pipeline's
        aligned chains use 5e-3 (see ``n_iter_``).
    early_momentum : float, default=0.5
        Momentum during early exaggeration (0.5 as bhtsne, FIt-SNE and scikit-learn; openTSNE uses 0.8).
    momentum : float, default=0.8
        Momentum after early exaggeration.
    neighbour_start : int or None, default=None
        For a continuation (an array ``init`` and ``early_exaggeration_iter=0``): also start from ``init`` with
        every point moved to the P-weighted mean of its neighbours' positions there, and run 30 iterations at 4x
        the learning rate (that layout is contracted: it re-expands). If the KL divergence is then below that of
        ``init`` as it is, go on from there at that rate (``learning_rate_`` then reports it) for at most
        ``neighbour_start`` iterations in all; otherwise restart from ``init`` at the plain rate for ``max_iter``
        (the 30 iterations are then spent outside it). Where the neighbourhoods changed, points jump to their
        new neighbours instead of crawling there through the points in between (a one-step exaggeration), and
        the descent needs far fewer iterations: on 39 continuations of real and synthetic chains (1,000-2,000
        points), 120 such iterations ended a median 5 % below the KL divergence of 300 plain ones from ``init``
        (at most 2 % above). Where they did not change, the layout that was already good is kept. ``start_``
        tells which start was kept. The pipeline's aligned chains use 120.
    metric : {"euclidean", "cosine", "precomputed"}, default="euclidean"
        Input distances. "precomputed": X is a square, symmetric, non-negative distance matrix. Distances are
        squared inside the Gaussian whatever the metric.
    init : {"pca", "random"} or array of shape (n_samples, n_components), default="pca"
        "pca": the first principal components (classical MDS of the distances when precomputed), scaled to
        standard deviation 1e-4. An array: an earlier embedding (e.g. of the previous epoch, to keep the views
        aligned), rescaled the same way unless ``rescale_init=False``.
    rescale_init : "auto" or bool, default="auto"
        Whether an array ``init`` is rescaled to standard deviation 1e-4 ("auto": yes).
    neighbors : {"auto", "exact", "nndescent"}, default="auto"
        kNN method of :func:`repviz.neighbors.knn` (the exact gradient always uses all points).
    n_jobs : int or None, default=None
        numba threads (None: 1, -1: all). Results do not depend on it.
    random_state : int or None, default=None
        Seed of random initialisation and of approximate nearest neighbours. Fits are deterministic for a given
        random_state whatever ``n_jobs``.
    verbose : int, default=0
        1 prints each phase with its time, and a progress line with ETA during the optimisation (on stderr, on
        an interactive terminal only; see :class:`repviz.progress.TerminalProgress`). To follow the
        optimisation programmatically, pass ``progress=`` to :meth:`fit`.
"""


class TSNE(_BaseSNE):
    __doc__ = """t-distributed Stochastic Neighbor Embedding (van der Maaten & Hinton 2008).

    Affinities come from a kNN graph (k = 3 * perplexity); the repulsive forces are computed exactly (O(n²) per
    iteration), by Barnes-Hut (O(n log n), 1-3 components) or by FFT-accelerated interpolation (O(n), 2
    components; Linderman et al. 2019). Memory is O(n * perplexity).
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
        Barnes-Hut's opening angle theta (cell width / distance): smaller is more accurate and slower.
    dof : float, default=1
        Degrees of freedom alpha of the Student-t kernel (1 + d²/alpha)^-alpha; alpha < 1 gives heavier tails
        and finer clusters (Kobak et al. 2019).

    Attributes
    ----------
    embedding_ : float32 array (n_samples, n_components)
    kl_divergence_ : float
        KL(P || Q) after the last iteration (with approximate methods, Q's normalisation is the approximate one).
    n_iter_ : int
        Iterations of the returned layout's descent.
    start_ : str
        "neighbours" if ``neighbour_start`` kept the neighbour-mean start, else "init".
    early_learning_rate_, learning_rate_, perplexity_ : the resolved values used.
    method_ : str
        The method used; with "auto" in 2-D, the repulsion methods it chose: "direct", "fft" or "fft+direct".
    affinities_ : scipy.sparse.csr_matrix, the joint P.
    timings_ : dict of seconds per phase ("kNN", "affinities", "initialisation", "neighbour start" if run,
        "early exaggeration", "optimisation").

    See Also
    --------
    SNE : the symmetric SNE with a Gaussian kernel in the embedding.

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
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS,
                              "method": [Options("auto", "direct", "exact", "barnes_hut", "fft")],
                              "angle": [Interval(float, 0, 1, closed="right")],
                              "dof": [Interval(float, 0, None, closed="neither")]}

    def __init__(self, n_components: int = 2, *, perplexity: float = 30.0, early_exaggeration: float = 12.0,
                 early_exaggeration_iter: int = 250, learning_rate="auto", max_iter: int = 750,
                 tol: float = 0.0, early_momentum: float = 0.5, momentum: float = 0.8,
                 neighbour_start: int | None = None, metric: str = "euclidean",
                 init="pca", rescale_init="auto",
                 method: str = "auto", angle: float = 0.5, dof: float = 1.0, neighbors: str = "auto",
                 n_jobs: int | None = None, random_state: int | None = None, verbose: int = 0):
        self.n_components = n_components
        self.perplexity = perplexity
        self.early_exaggeration = early_exaggeration
        self.early_exaggeration_iter = early_exaggeration_iter
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.early_momentum = early_momentum
        self.momentum = momentum
        self.neighbour_start = neighbour_start
        self.metric = metric
        self.init = init
        self.rescale_init = rescale_init
        self.method = method
        self.angle = angle
        self.dof = dof
        self.neighbors = neighbors
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _kernel_dof(self) -> float:
        return float(self.dof)

    def _auto_learning_rate(self, n: int, exaggeration: float) -> float:
        return max(n / exaggeration, 200.0)

    def _resolve_method(self, n: int) -> str:
        method = self.method
        if method == "auto" and self.n_components == 2 and float(self.dof) == 1.0:
            return "auto"
        if method == "auto":
            if n <= _EXACT_MAX_N:
                return "exact"
            return "fft" if self.n_components == 2 else "barnes_hut" if self.n_components <= 3 else "exact"
        if method == "direct" and (self.n_components != 2 or float(self.dof) != 1.0):
            raise ValueError(f"method='direct' supports n_components=2 with dof=1 only; got n_components="
                             f"{self.n_components}, dof={self.dof}. Use method='exact' (any dimension and dof).")
        if method == "fft" and self.n_components != 2:
            raise ValueError(f"method='fft' supports n_components=2 only; got n_components={self.n_components}. "
                             f"Use method='barnes_hut' (1-3 components) or 'exact'.")
        if method == "barnes_hut" and self.n_components > 3:
            raise ValueError(f"method='barnes_hut' supports n_components <= 3; got {self.n_components}. "
                             f"Use method='exact'.")
        return method


class SNE(_BaseSNE):
    __doc__ = """Symmetric Stochastic Neighbor Embedding (Gaussian kernel in the embedding; van der Maaten &
    Hinton 2008, section 3.1): t-SNE's predecessor, kept for teaching and comparison (it shows the crowding
    problem the Student-t kernel solves). Same affinities and optimiser as :class:`TSNE`; the gradient is exact,
    O(n²) time per iteration, so it suits a few thousand points at most.
    """ + _SHARED_DOC + """
    Attributes
    ----------
    embedding_, kl_divergence_, n_iter_, start_, early_learning_rate_, learning_rate_, perplexity_, method_,
    affinities_, timings_ :
        as in :class:`TSNE`.

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import SNE
    >>> X = np.random.default_rng(0).normal(size=(100, 5))
    >>> SNE(perplexity=10, random_state=0).fit_transform(X).shape
    (100, 2)
    """

    _parameter_constraints = _COMMON_CONSTRAINTS

    def __init__(self, n_components: int = 2, *, perplexity: float = 30.0, early_exaggeration: float = 12.0,
                 early_exaggeration_iter: int = 250, learning_rate="auto", max_iter: int = 750,
                 tol: float = 0.0, early_momentum: float = 0.5, momentum: float = 0.8,
                 neighbour_start: int | None = None, metric: str = "euclidean",
                 init="pca", rescale_init="auto",
                 neighbors: str = "auto", n_jobs: int | None = None, random_state: int | None = None,
                 verbose: int = 0):
        self.n_components = n_components
        self.perplexity = perplexity
        self.early_exaggeration = early_exaggeration
        self.early_exaggeration_iter = early_exaggeration_iter
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.early_momentum = early_momentum
        self.momentum = momentum
        self.neighbour_start = neighbour_start
        self.metric = metric
        self.init = init
        self.rescale_init = rescale_init
        self.neighbors = neighbors
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _kernel_dof(self) -> float:
        return 0.0  # the Gaussian kernel (see _kernels._weight)

    def _auto_learning_rate(self, n: int, exaggeration: float) -> float:
        # n / 12 in both phases and no floor: the Gaussian kernel's attraction grows linearly with distance, so
        # larger steps diverge
        return n / 12.0

    def _resolve_method(self, n: int) -> str:
        return "exact"
