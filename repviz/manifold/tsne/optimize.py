"""Objective functions and gradient descent of t-SNE / SNE.

Every objective has one signature, ``objective(Y, exaggeration=..., compute_kl=...) -> (kl, grad)``, where
``grad`` is the exact derivative of KL(P || Q) with respect to Y (the attractive part multiplied by
``exaggeration``; P itself is never scaled) and ``kl`` is the divergence of the un-exaggerated P, or NaN when not
requested. They differ only in how the repulsive sum over all pairs is computed: exactly (O(n²)), by Barnes-Hut
or by FFT-accelerated interpolation (2-D), so each can be tested against the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..._jit import njit
from ..._rows import run_rows
from . import _kernels
from ._bh import BHRepulsion
from ._fft import FFTRepulsion


class ExactRepulsion:
    """Repulsive sums over all pairs in float64, O(n²) time, O(n) memory: the reference the others are tested
    against, and the repulsion of method="exact"."""

    def __init__(self, dof: float):
        self.dof = float(dof)

    def __call__(self, Y, rep) -> float:
        z_rows = np.empty(Y.shape[0])
        run_rows(_kernels.exact_repulsive, Y.shape[0], Y, self.dof, rep, z_rows)
        return float(z_rows.sum())


class DirectRepulsion:
    """2-D t-SNE (dof = 1): the same sums over all pairs in vectorised float32, about 9x faster than
    :class:`ExactRepulsion` (relative error about 1e-6, far below the approximate methods')."""

    def __init__(self, n_samples: int):
        self.x = np.empty(n_samples, dtype=np.float32)
        self.y = np.empty(n_samples, dtype=np.float32)
        self.z_rows = np.empty(n_samples)

    def __call__(self, Y, rep) -> float:
        self.x[:] = Y[:, 0]
        self.y[:] = Y[:, 1]
        _kernels.direct_repulsive_2d(self.x, self.y, rep, self.z_rows)
        return float(self.z_rows.sum())


# Cost model of one repulsion call, single-threaded, measured on MNIST-sized layouts on an AVX-512 machine: the
# direct sums take about 0.18 ns per pair; the FFT about 4 ns per (2G)² log2(2G) for a grid of G nodes per side (its
# locate/spread/gather are O(n) and small beside it). Both scale alike with threads, so only their ratio counts; a
# CPU with narrower vectors makes the direct sums relatively dearer and moves the best crossover; the constants are
# fixed, so every machine makes the same choice and gets the same embedding.
_DIRECT_NS_PER_PAIR = 0.18
_FFT_NS_PER_GRID_TERM = 4.0


class AutoRepulsion:
    """2-D t-SNE: at every call, direct sums over all pairs or FFT interpolation, whichever the cost model says is
    cheaper at this layout's extent. The FFT grid grows with the extent (boxes at most one unit wide), so a small
    probe set is cheapest summed directly once the layout has expanded, while a compact layout (early
    exaggeration) of a few thousand points is cheapest on the FFT's minimum grid. The choice depends only on n
    and the layout, never on timings, so a fit stays deterministic. ``counts`` records the calls of each."""

    def __init__(self, n_samples: int, *, n_interp: int = 3, min_boxes: int = 50, n_threads: int = 1):
        self.direct = DirectRepulsion(n_samples)
        self.fft = FFTRepulsion(n_samples, 1.0, n_interp=n_interp, min_boxes=min_boxes, workers=n_threads)
        self.direct_ns = _DIRECT_NS_PER_PAIR * float(n_samples) ** 2
        self.counts = {"direct": 0, "fft": 0}
        # the grid only grows with the extent: below the FFT's cost on its smallest grid, direct sums always win
        self.always_direct = self._cheaper_direct(self.fft.grid_size(0.0))

    def _cheaper_direct(self, n_grid: int) -> bool:
        return self.direct_ns < _FFT_NS_PER_GRID_TERM * (2 * n_grid) ** 2 * np.log2(2 * n_grid)

    def prefers_direct(self, Y: np.ndarray) -> bool:
        return self.always_direct or self._cheaper_direct(self.fft.grid_size(float(Y.max() - Y.min())))

    def __call__(self, Y, rep) -> float:
        name = "direct" if self.prefers_direct(Y) else "fft"
        self.counts[name] += 1
        return (self.direct if name == "direct" else self.fft)(Y, rep)


def make_repulsion(method: str, n_samples: int, n_components: int, dof: float, *, theta: float = 0.5,
                   n_interp: int = 3, min_boxes: int = 50, n_threads: int = 1):
    """The repulsion callable for ``method`` in {"exact", "direct", "barnes_hut", "fft", "auto"} ("direct" and
    "auto": 2-D with dof = 1 only): ``repulsion(Y, rep) -> Z`` fills rep[i] = sum_j f_ij (y_i - y_j) and returns
    Z = sum_{i != j} w_ij."""
    if method == "exact":
        return ExactRepulsion(dof)
    if method == "direct":
        return DirectRepulsion(n_samples)
    if method == "barnes_hut":
        return BHRepulsion(n_samples, n_components, dof, theta)
    if method == "auto":
        return AutoRepulsion(n_samples, n_interp=n_interp, min_boxes=min_boxes, n_threads=n_threads)
    return FFTRepulsion(n_samples, dof, n_interp=n_interp, min_boxes=min_boxes, workers=n_threads)


class KLObjective:
    """KL(P || Q) and its gradient for a fixed sparse P and a repulsion method; reuses its buffers.

    The divergence is sum p log p (fixed, computed once) + sum p (-log w) + (sum p) log Z. The kernels write the
    argument of -log w for each non-zero of P and numpy takes the logarithms, vectorised: about 10x cheaper than
    a scalar log per non-zero inside the kernel, so that a convergence check costs under half a gradient."""

    def __init__(self, P: sp.csr_matrix, repulsion: Callable, dof: float = 1.0):
        self.indptr, self.indices, self.data = P.indptr, P.indices, P.data
        self.repulsion, self.dof = repulsion, float(dof)
        self._log_args = np.empty(P.nnz)
        self._p = None  # P in float64, with its sum and sum p log p, on the first request for the divergence

    def _divergence(self, z: float) -> float:
        if self._p is None:
            self._p = self.data.astype(np.float64)
            self._p_sum = float(self._p.sum())  # 1 up to float32 rounding, which would show at log Z's scale
            self._entropy = float(np.einsum("i,i->", self._p, np.log(np.where(self._p > 0, self._p, 1.0))))
        args = self._log_args
        if self.dof > 0:  # Student-t: -log w = dof * log(1 + d² / dof); Gaussian: -log w = d², as written
            np.log(args, out=args)
        scale = self.dof if self.dof > 0 else 1.0
        return self._entropy + scale * float(np.einsum("i,i->", self._p, args)) + self._p_sum * float(np.log(z))

    def __call__(self, Y: np.ndarray, *, exaggeration: float = 1.0, compute_kl: bool = True):
        n, dim = Y.shape
        attr = np.empty((n, dim))
        rep = np.empty((n, dim))
        if dim == 2 and self.dof == 1.0:
            _kernels.attractive_2d(self.indptr, self.indices, self.data, Y, float(exaggeration), attr,
                                   self._log_args, bool(compute_kl))
        else:
            _kernels.attractive(self.indptr, self.indices, self.data, Y, float(exaggeration), self.dof, attr,
                                self._log_args, bool(compute_kl))
        z = self.repulsion(Y, rep)
        grad = np.empty((n, dim))
        _kernels.combine(attr, rep, 1.0 / z, grad)
        kl = self._divergence(z) if compute_kl else float("nan")
        return kl, grad


@dataclass
class DescentState:
    """What gradient descent carries between phases (and between calls, to continue a fit)."""
    update: np.ndarray
    gains: np.ndarray
    n_iter: int = 0
    kl: float = float("nan")
    #: The rule that stopped the last call early ("tol", "n_iter_without_progress", "min_grad_norm"), or None.
    stopped_by: str | None = None


def gradient_descent(Y: np.ndarray, objective: Callable, n_iter: int, *, learning_rate: float, momentum: float,
                     exaggeration: float = 1.0, min_gain: float = 0.01, state: DescentState | None = None,
                     kl_every: int = 25, tol: float = 0.0, progress: Callable | None = None,
                     n_iter_without_progress: int | None = None, min_grad_norm: float = 0.0) -> DescentState:
    """Run up to ``n_iter`` steps on Y in place: momentum, adaptive gains, re-centring.

    ``learning_rate`` follows the convention of bhtsne, FIt-SNE and openTSNE, whose gradient omits the factor 4
    of the exact KL derivative: the step is ``learning_rate / 4 * gains * grad``. (scikit-learn's learning_rate
    multiplies the exact gradient, so its value for the same step is 4x smaller.) The KL divergence is evaluated
    every ``kl_every`` iterations and after the last; ``progress(state)`` is called at those points, and at a stop
    with the divergence of the layout returned (its last report is ``state.kl``). (An
    iteration that evaluates it computes its gradient in another loop of the attractive kernel, which may round
    differently; ``kl_every`` does not depend on ``tol``, so that ``tol`` only ever stops, never steers.)

    Convergence: with ``tol`` > 0 the descent stops at an evaluation where the KL's relative change since the
    previous one, ``kl_every`` iterations earlier, extrapolated over the iterations left (at least one window),
    is below ``tol`` (``state.stopped_by`` is then "tol"). For a KL that falls ever more slowly, as it does, the
    iterations left could lower it by at most about ``tol``: a layout that barely moves stops after two
    evaluations, one still moving runs on. scikit-learn's rules stop it too (``state.stopped_by`` names the rule):
    ``n_iter_without_progress``, at an evaluation more than that many iterations after the one with the lowest
    KL of this call; ``min_grad_norm``, after a step whose gradient (the exact derivative, 4x the one here) has
    a norm at most that. None and 0 never stop.
    """
    if state is None:
        state = DescentState(np.zeros_like(Y), np.ones_like(Y))
    state.stopped_by = None
    step = learning_rate / 4.0
    previous = float("nan")
    best_kl, best_it = float("inf"), 0
    for it in range(n_iter):
        last = it == n_iter - 1
        want_kl = last or (it + 1) % kl_every == 0
        kl, grad = objective(Y, exaggeration=exaggeration, compute_kl=want_kl and not last)
        small = min_grad_norm > 0 and 4.0 * np.sqrt(np.vdot(grad, grad)) <= min_grad_norm  # before the step uses it
        _kernels.descent_step(Y, grad, state.update, state.gains, step, momentum, min_gain)
        state.n_iter += 1
        if last:  # the divergence of the layout returned, not of the one before the step
            kl = objective(Y, exaggeration=exaggeration, compute_kl=True)[0]
        if small:
            state.stopped_by = "min_grad_norm"
        elif want_kl:
            windows_left = max(1.0, (n_iter - it - 1) / kl_every)
            stalled = kl >= best_kl and n_iter_without_progress is not None and it - best_it > n_iter_without_progress
            if kl < best_kl:
                best_kl, best_it = kl, it
            if stalled:
                state.stopped_by = "n_iter_without_progress"
            elif tol > 0 and abs(previous - kl) * windows_left < tol * abs(kl):
                state.stopped_by = "tol"
            previous = kl
        if want_kl or small:
            if state.stopped_by and not last:  # a stop reports the divergence of the layout returned, too
                kl = objective(Y, exaggeration=exaggeration, compute_kl=True)[0]
            state.kl = kl
            if progress is not None:
                progress(state)
            if state.stopped_by:
                break
    return state


def spatial_order(Y: np.ndarray) -> np.ndarray:
    """Permutation sorting the points along a Z-order (Morton) curve of their coordinates: points close in Y get
    close labels. Neighbours in P are close in a t-SNE layout, so relabelling by this order makes the attractive
    loop's reads of Y[j] hit the cache."""
    n, dim = Y.shape
    bits = 63 // dim
    lo, span = Y.min(axis=0), np.ptp(Y, axis=0)
    q = ((Y - lo) / np.where(span > 0, span, 1) * ((1 << bits) - 1)).astype(np.uint64)
    code = np.zeros(n, dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for d in range(dim):
            code = (code << np.uint64(1)) | ((q[:, d] >> np.uint64(b)) & np.uint64(1))
    return np.argsort(code, kind="stable")


@njit(cache=True)
def _relabel_csr(indptr, indices, data, order, inverse):
    """CSR of P[order][:, order]."""
    n = indptr.shape[0] - 1
    new_indptr = np.empty(n + 1, dtype=indptr.dtype)
    new_indices = np.empty_like(indices)
    new_data = np.empty_like(data)
    new_indptr[0] = 0
    for i in range(n):
        r = order[i]
        start = new_indptr[i]
        for e in range(indptr[r], indptr[r + 1]):
            new_indices[start + e - indptr[r]] = inverse[indices[e]]
            new_data[start + e - indptr[r]] = data[e]
        new_indptr[i + 1] = start + indptr[r + 1] - indptr[r]
    return new_indptr, new_indices, new_data


def relabel(P: sp.csr_matrix, order: np.ndarray) -> sp.csr_matrix:
    """P with its points relabelled: row and column i of the result are row and column order[i] of P."""
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.shape[0])
    indptr, indices, data = _relabel_csr(P.indptr, P.indices, P.data, order, inverse)
    return sp.csr_matrix((data, indices, indptr), shape=P.shape)


def warm_kernels() -> dict[str, float]:
    """Compile the kernels that a tiny warm-up input does not reach (the FFT repulsion, which larger probe sets
    use): seconds per kernel. The warm-up policy of the pipeline's ``"tsne"`` method (:mod:`repviz.warmup`)."""
    start = time.perf_counter()
    Y = np.random.default_rng(0).normal(size=(60, 2))
    make_repulsion("fft", 60, 2, 1.0)(Y, np.empty_like(Y))
    return {"fft": time.perf_counter() - start}
