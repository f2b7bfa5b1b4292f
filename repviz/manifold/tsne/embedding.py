"""The t-SNE embedding object: a layout with everything that continues its optimisation (after openTSNE's
``TSNEEmbedding``).

:class:`TSNEEmbedding` holds the affinities, the descent state (momentum update, gains, iterations, KL) and the
repulsion, so that each :meth:`~TSNEEmbedding.optimize` call resumes where the last one stopped. A fit is one
embedding optimised twice (early exaggeration, then the main phase); continuing a layout on new data is a
policy of such calls (:func:`~.continuation.continue_tsne`). The layout it hands out is a plain array.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..._validation import Interval, Options, check_param
from ._threads import NumbaThreads, thread_count
from .affinity import Affinities
from .optimize import DescentState, KLObjective, gradient_descent, make_repulsion, relabel, spatial_order

#: method="auto" outside 2-D t-SNE with dof = 1: the exact gradient up to this many points.
EXACT_MAX_N = 1000
#: Iterations between the KL evaluations that report progress and decide convergence (``tol``).
KL_EVERY = 25

_OPTIMIZE_CONSTRAINTS = {
    "n_iter": [Interval(int, 0, None, closed="left")],
    "exaggeration": [Interval(float, 0, None, closed="neither")],
    "momentum": [Interval(float, 0, 1, closed="left")],
    "learning_rate": [Options("auto"), Interval(float, 0, None, closed="neither")],
    "tol": [Interval(float, 0, None, closed="left")],
}


def auto_learning_rate(n_samples: int, exaggeration: float = 1.0) -> float:
    """t-SNE's ``learning_rate="auto"``: n_samples / exaggeration (openTSNE's rule; Belkina et al. 2019), at least
    min(200, n_samples / 1.5), in the convention of :func:`~repviz.manifold.tsne.optimize.gradient_descent`.

    FIt-SNE's floor of 200 helps early exaggeration of a few thousand points, but a floor above n / 1.5 leaves
    worse layouts of smaller data; from 300 points on the rule is FIt-SNE's (figures in docs/MEASUREMENTS.md,
    ``benchmarks/bench_tsne_lr.py``)."""
    return max(n_samples / exaggeration, min(200.0, n_samples / 1.5))


def resolve_method(method: str, n_samples: int, n_components: int, dof: float) -> str:
    """The gradient method that ``method`` names for this problem (the rules of TSNE's ``method``): "auto" stays
    "auto" in 2-D with dof = 1 (:class:`~repviz.manifold.tsne.optimize.AutoRepulsion`), else becomes "exact"
    up to :data:`EXACT_MAX_N` points and "fft" (2-D) or "barnes_hut" (1-3 components) above. Raises
    ``ValueError`` for a method that cannot serve ``n_components`` or ``dof``."""
    if method == "auto" and n_components == 2 and float(dof) == 1.0:
        return "auto"
    if method == "auto":
        if n_samples <= EXACT_MAX_N:
            return "exact"
        return "fft" if n_components == 2 else "barnes_hut" if n_components <= 3 else "exact"
    if method == "direct" and (n_components != 2 or float(dof) != 1.0):
        raise ValueError(f"method='direct' supports n_components=2 with dof=1 only; got n_components="
                         f"{n_components}, dof={dof}. Use method='exact' (any dimension and dof).")
    if method == "fft" and n_components != 2:
        raise ValueError(f"method='fft' supports n_components=2 only; got n_components={n_components}. "
                         f"Use method='barnes_hut' (1-3 components) or 'exact'.")
    if method == "barnes_hut" and n_components > 3:
        raise ValueError(f"method='barnes_hut' supports n_components <= 3 ('n_components' should be at most 3 for "
                         f"its quad- or oct-tree); got {n_components}. Use method='exact'.")
    return method


class TSNEEmbedding:
    """A t-SNE layout with its affinities, descent state and repulsion: :meth:`optimize` runs gradient descent
    from where the previous call stopped (momentum and gains carried over), as :class:`~repviz.manifold.TSNE`'s
    two phases do.

    Parameters
    ----------
    layout : array of shape (n_samples, n_components)
        The start, used as given (copied to float64). t-SNE expects a small one at first (see
        :func:`repviz.manifold.tsne.init.rescale`); an earlier layout continues at its own scale.
    affinities : Affinities
        P of the data (:meth:`TSNE.prepare_affinities <repviz.manifold.TSNE.prepare_affinities>`); never modified.
    method, angle, n_jobs :
        As in :class:`~repviz.manifold.TSNE` (``method`` is resolved by :func:`resolve_method`).
    dof : float, default=1
        As in :class:`~repviz.manifold.TSNE`; 0 is SNE's Gaussian kernel.

    Attributes
    ----------
    affinities : Affinities
        The affinities given.
    dof, angle, n_jobs :
        As given.
    layout, n_iter, kl_divergence, method, stopped_by :
        Properties, see each. :meth:`copy` makes an independent embedding to go on from.

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import TSNE
    >>> from repviz.manifold.tsne import TSNEEmbedding
    >>> X = np.random.default_rng(0).normal(size=(200, 10))
    >>> affinities = TSNE(perplexity=10, random_state=0).prepare_affinities(X)
    >>> start = np.random.default_rng(0).normal(size=(200, 2)) * 1e-4
    >>> embedding = TSNEEmbedding(start, affinities).optimize(100, exaggeration=12, momentum=0.5)
    >>> embedding.optimize(150).n_iter
    250
    """

    def __init__(self, layout, affinities: Affinities, *, method: str = "auto", dof: float = 1.0,
                 angle: float = 0.5, n_jobs: int | None = None):
        Y = np.array(layout, dtype=np.float64, order="C")
        n = affinities.n_samples
        if Y.ndim != 2 or Y.shape[0] != n:
            raise ValueError(f"layout has shape {Y.shape}; the affinities need (n_samples, n_components) with "
                             f"n_samples = {n}")
        if not np.isfinite(Y).all():
            raise ValueError("layout contains NaN or infinity")
        self.affinities = affinities
        self.dof, self.angle, self.n_jobs = float(dof), float(angle), n_jobs
        self._method = resolve_method(method, n, Y.shape[1], self.dof)
        self._repulsion = make_repulsion(self._method, n, Y.shape[1], self.dof, theta=self.angle,
                                         n_threads=thread_count(n_jobs))
        # the working layout with its points in the order ``_order`` of the input's (see optimize)
        self._Y, self._order = Y, np.arange(n)
        self._state: DescentState | None = None
        self._objective: KLObjective | None = None

    @property
    def layout(self) -> np.ndarray:
        """The current positions, float64 (n_samples, n_components) in the affinities' order: a plain array,
        a copy."""
        return self._in_input_order(self._Y)

    @property
    def n_iter(self) -> int:
        """Iterations run so far, over every :meth:`optimize` call."""
        return 0 if self._state is None else self._state.n_iter

    @property
    def stopped_by(self) -> str | None:
        """The rule that stopped the last :meth:`optimize` call early ("tol", "n_iter_without_progress",
        "min_grad_norm"), or None."""
        return None if self._state is None else self._state.stopped_by

    @property
    def kl_divergence(self) -> float:
        """KL(P || Q) of the current layout: the descent's last evaluation, or evaluated now before the first
        iteration (with an approximate repulsion, Q's normalisation is the approximate one)."""
        if self._state is not None:
            return self._state.kl
        with NumbaThreads(self.n_jobs):
            return KLObjective(self.affinities.P, self._repulsion, self.dof)(self._Y)[0]

    @property
    def method(self) -> str:
        """The gradient method; for "auto" in 2-D, the repulsion methods used so far ("direct", "fft" or
        "fft+direct")."""
        counts = getattr(self._repulsion, "counts", None)
        if self._method != "auto" or counts is None:
            return self._method
        return "+".join(name for name in ("fft", "direct") if counts[name]) or "direct"

    def optimize(self, n_iter: int, *, exaggeration: float = 1.0, momentum: float = 0.8, learning_rate="auto",
                 tol: float = 0.0, progress: Callable[[int, float], None] | None = None,
                 n_iter_without_progress: int | None = None, min_grad_norm: float = 0.0) -> TSNEEmbedding:
        """Run ``n_iter`` more iterations of gradient descent (momentum, adaptive gains) on this embedding, in
        place, from the state the last call left; returns self.

        Parameters
        ----------
        n_iter : int
            Iterations to run (at most, with ``tol``); 0 changes nothing.
        exaggeration : float, default=1
            Factor on the attractive forces (12 in TSNE's early phase; P itself is never scaled).
        momentum : float, default=0.8
            Weight of the previous update in each step.
        learning_rate : float or "auto", default="auto"
            Step size in the convention of bhtsne, FIt-SNE and openTSNE (see TSNE's ``learning_rate``);
            "auto": :func:`auto_learning_rate` of n_samples and ``exaggeration``.
        tol : float, default=0
            Convergence tolerance, as TSNE's ``tol`` (the KL divergence is evaluated every 25 iterations of this
            call); 0 runs every iteration.
        progress : callable or None, default=None
            ``progress(n_iter, kl_divergence)`` at each evaluation of the KL divergence, ``n_iter`` counted over
            every call.
        n_iter_without_progress, min_grad_norm : int or None, float
            scikit-learn's stopping rules, as TSNE's (see
            :func:`~repviz.manifold.tsne.optimize.gradient_descent`); None and 0 never stop.
        """
        for name, value in (("n_iter", n_iter), ("exaggeration", exaggeration), ("momentum", momentum),
                            ("learning_rate", learning_rate), ("tol", tol)):
            check_param(value, _OPTIMIZE_CONSTRAINTS[name], name, "TSNEEmbedding.optimize")
        if not n_iter:
            return self
        n = self.affinities.n_samples
        rate = auto_learning_rate(n, exaggeration) if learning_rate == "auto" else float(learning_rate)
        with NumbaThreads(self.n_jobs):
            if self._objective is None or self._method != "exact":
                self._relabel()
            self._state = gradient_descent(
                self._Y, self._objective, n_iter, learning_rate=rate, momentum=momentum,
                exaggeration=exaggeration, state=self._state, tol=tol, kl_every=KL_EVERY,
                n_iter_without_progress=n_iter_without_progress, min_grad_norm=min_grad_norm,
                progress=None if progress is None else (lambda state: progress(state.n_iter, state.kl)))
        return self

    def copy(self) -> TSNEEmbedding:
        """An independent embedding with this one's layout and descent state (iterations and KL included),
        sharing its affinities; it relabels its points afresh from their input order."""
        twin = TSNEEmbedding(self.layout, self.affinities, method=self._method, dof=self.dof, angle=self.angle,
                             n_jobs=self.n_jobs)
        if self._state is not None:
            s = self._state
            twin._state = DescentState(self._in_input_order(s.update), self._in_input_order(s.gains), s.n_iter,
                                       s.kl, s.stopped_by)
        return twin

    def _relabel(self) -> None:
        """With an approximate repulsion, relabel the points in Z-order of the current layout (P and the descent
        state alike), so that neighbours in P sit close in memory and the attractive loop hits the cache (at
        70,000 points it runs about twice as fast). ``layout`` hands the points back in their input order."""
        P = self.affinities.P
        if self._method != "exact":
            perm = spatial_order(self._Y)
            self._Y, self._order = np.ascontiguousarray(self._Y[perm]), self._order[perm]
            if self._state is not None:
                self._state.update, self._state.gains = self._state.update[perm], self._state.gains[perm]
            P = relabel(P, self._order)
        self._objective = KLObjective(P, self._repulsion, self.dof)

    def _in_input_order(self, a: np.ndarray) -> np.ndarray:
        out = np.empty_like(a)
        out[self._order] = a
        return out
