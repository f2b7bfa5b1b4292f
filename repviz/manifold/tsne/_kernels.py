"""numba kernels shared by every t-SNE gradient: perplexity calibration, attractive forces, exact repulsion and
the gradient-descent step.

The O(n) kernels of every iteration loop with ``prange`` over rows; the calibration, run once per fit, and the
exact O(n²) repulsion are serial over a range of rows for :func:`repviz._rows.run_rows` (they compile in a
quarter to a half of the time). Each writes only its rows'
outputs (per-row partial sums are added up afterwards in a fixed order), so results do not depend on the number
of threads.

The Student-t kernel with ``dof`` = alpha degrees of freedom is w = (1 + d²/alpha)^-alpha (alpha = 1: t-SNE's
Cauchy kernel; alpha < 1: heavier tails, Kobak et al. 2019). ``dof <= 0`` selects the Gaussian kernel
w = exp(-d²) of symmetric SNE.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._jit import njit
from ..._kernels import sq_dist

_PERPLEXITY_TOL = 1e-8  # on the entropy in nats; keeps the perplexity within ~1e-6 of its target
_PERPLEXITY_MAX_ITER = 200


@njit(cache=True, nogil=True, fastmath=False)
def conditional_p(start, stop, sqdist, perplexity, out, betas):
    """Row-normalised Gaussian affinities with each row's precision solved for the target perplexity, for rows
    start..stop (serial, for :func:`repviz._rows.run_rows`: it runs once per fit).

    ``sqdist`` (n, k) float64 squared distances to the k neighbours; fills ``out`` (n, k) and the precision
    (beta) of each row in ``betas``. Distances are shifted by the row minimum so exp never underflows to 0/0.
    The entropy H(beta) = log Z + beta E[d] falls with beta at the rate beta Var[d]: Newton steps on it, kept
    inside the bracket of betas already seen too low and too high (a bisection step where Newton's would leave
    it), converge in about 7 evaluations where bisection took 30-50 (the tolerance is 1e-8 nats). A row whose
    entropy cannot come down to the target (more than ``perplexity`` neighbours tied at its nearest distance)
    stops once every other weight has underflowed.
    """
    k = sqdist.shape[1]
    target = np.log(perplexity)
    for i in range(start, stop):
        dmin = sqdist[i, 0]
        for j in range(k):
            dmin = min(dmin, sqdist[i, j])
        beta, lo, hi = 1.0, 0.0, np.inf
        for _ in range(_PERPLEXITY_MAX_ITER):
            total, m1, m2 = 0.0, 0.0, 0.0
            for j in range(k):
                d = sqdist[i, j] - dmin
                e = np.exp(-beta * d)
                out[i, j] = e
                total += e
                m1 += e * d
                m2 += e * d * d
            mean = m1 / total
            diff = np.log(total) + beta * mean - target
            if abs(diff) <= _PERPLEXITY_TOL or (diff > 0 and m1 == 0.0):
                break
            if diff > 0:  # too flat: raise the precision
                lo = beta
            else:
                hi = beta
            slope = beta * (m2 / total - mean * mean)  # -dH/dbeta
            newton = beta + diff / slope if slope > 0 else -1.0
            if lo < newton < hi:
                beta = newton
            else:
                beta = beta * 2.0 if hi == np.inf else 0.5 * (lo + hi)
        for j in range(k):
            out[i, j] /= total
        betas[i] = beta


@njit(inline="always")
def kernel_weight(d2, dof):
    """Kernel value w(d²) and the factor f with dw/d(y_i) = -2 f (y_i - y_j) (so f = w^(1+1/dof), or w for SNE)."""
    if dof <= 0.0:
        w = np.exp(-d2)
        return w, w
    if dof == 1.0:
        w = 1.0 / (1.0 + d2)
        return w, w * w
    base = 1.0 + d2 / dof
    w = base ** (-dof)
    return w, w / base


@njit(parallel=True, cache=True, fastmath=True)
def attractive_2d(indptr, indices, pdata, Y, exaggeration, out, log_args, compute_kl):
    """:func:`attractive` for 2-D t-SNE (dof = 1), the hot loop of large fits, in its own kernel so that a fit
    compiles only the form it runs: f / w = w = 1 / (1 + d²)."""
    for i in prange(Y.shape[0]):
        yi0 = Y[i, 0]
        yi1 = Y[i, 1]
        a0 = 0.0
        a1 = 0.0
        if compute_kl:
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                d0 = yi0 - Y[j, 0]
                d1 = yi1 - Y[j, 1]
                base = 1.0 + d0 * d0 + d1 * d1
                log_args[e] = base
                q = pdata[e] / base
                a0 += q * d0
                a1 += q * d1
        else:  # the same loop without the store, the hot loop of every iteration
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                d0 = yi0 - Y[j, 0]
                d1 = yi1 - Y[j, 1]
                q = pdata[e] / (1.0 + d0 * d0 + d1 * d1)
                a0 += q * d0
                a1 += q * d1
        out[i, 0] = exaggeration * a0
        out[i, 1] = exaggeration * a1


@njit(parallel=True, cache=True, fastmath=True)
def attractive(indptr, indices, pdata, Y, exaggeration, dof, out, log_args, compute_kl):
    """out[i] = exaggeration * sum_j p_ij * (f_ij / w_ij) (y_i - y_j); with ``compute_kl`` also, for each
    non-zero e = (i, j) of P, log_args[e] = 1 + d²/dof (Student-t: -log w = dof * log of it) or d² (Gaussian:
    -log w itself), from which the caller takes the KL divergence with numpy's vectorised log."""
    dim = Y.shape[1]
    for i in prange(Y.shape[0]):
        for d in range(dim):
            out[i, d] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            d2 = sq_dist(Y, i, Y, j)
            w, f = kernel_weight(d2, dof)
            c = exaggeration * pdata[e] * f / w
            for d in range(dim):
                out[i, d] += c * (Y[i, d] - Y[j, d])
            if compute_kl:
                log_args[e] = d2 if dof <= 0.0 else 1.0 + d2 / dof


#: Squared distance beyond which a Gaussian kernel term, exp(-d²) < 2e-22, is skipped in the exact sums.
_GAUSS_CUTOFF = 50.0


@njit(parallel=True, cache=True, fastmath=True)
def direct_repulsive_2d(x, y, out, z_rows):
    """2-D t-SNE (dof = 1) over all pairs: out[i] = sum_j w_ij² (y_i - y_j), z_rows[i] = sum_{j != i} w_ij.

    ``x`` and ``y`` are the two coordinates as separate float32 arrays: the inner loop is a float32 reduction
    that LLVM vectorises 8 lanes wide (about 9x the float64 loop over (n, 2) rows; relative error about 1e-6).
    The self term is masked to 0 by a select (a branch, or a loop split at i, stops the vectorisation), so its
    w = 1 never swamps the tiny w of a wide layout.
    """
    n = x.shape[0]
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for i in prange(n):
        xi = x[i]
        yi = y[i]
        z = zero
        r0 = zero
        r1 = zero
        for j in range(n):
            d0 = xi - x[j]
            d1 = yi - y[j]
            q = one / (one + d0 * d0 + d1 * d1)
            q = q if j != i else zero
            z += q
            q2 = q * q
            r0 += q2 * d0
            r1 += q2 * d1
        out[i, 0] = r0
        out[i, 1] = r1
        z_rows[i] = z


@njit(cache=True, nogil=True, fastmath=True)
def exact_repulsive(start, stop, Y, dof, out, z_rows):  # pragma: no cover - compiled
    """out[i] = sum_{j != i} f_ij (y_i - y_j) and z_rows[i] = sum_{j != i} w_ij for the rows ``start:stop``, over
    all pairs: O(n²) in all, in float64 (the reference; :func:`direct_repulsive_2d` is the fast float32 form for
    2-D t-SNE). Serial, for :func:`repviz._rows.run_rows`: each call is O(n²) work, worth a thread pool's hand-off."""
    n, dim = Y.shape
    if dim == 2 and dof == 1.0:  # t-SNE in 2-D: a branch-free loop (j = i adds w = 1, no force)
        for i in range(start, stop):
            yi0 = Y[i, 0]
            yi1 = Y[i, 1]
            z, r0, r1 = 0.0, 0.0, 0.0
            for j in range(n):
                d0 = yi0 - Y[j, 0]
                d1 = yi1 - Y[j, 1]
                q = 1.0 / (1.0 + d0 * d0 + d1 * d1)
                z += q
                r0 += q * q * d0
                r1 += q * q * d1
            out[i, 0] = r0
            out[i, 1] = r1
            z_rows[i] = z - 1.0
        return
    if dim == 2 and dof <= 0.0:  # the Gaussian kernel of SNE and the elastic embedding
        for i in range(start, stop):
            yi0 = Y[i, 0]
            yi1 = Y[i, 1]
            z, r0, r1 = 0.0, 0.0, 0.0
            for j in range(n):
                d0 = yi0 - Y[j, 0]
                d1 = yi1 - Y[j, 1]
                d2 = d0 * d0 + d1 * d1
                if d2 > _GAUSS_CUTOFF:  # exp is the whole cost, and most pairs of a spread layout are this far
                    continue
                q = np.exp(-d2)
                z += q
                r0 += q * d0
                r1 += q * d1
            out[i, 0] = r0
            out[i, 1] = r1
            z_rows[i] = z - 1.0
        return
    for i in range(start, stop):
        for d in range(dim):
            out[i, d] = 0.0
        z = 0.0
        for j in range(n):
            if j == i:
                continue
            d2 = sq_dist(Y, i, Y, j)
            w, f = kernel_weight(d2, dof)
            z += w
            for d in range(dim):
                out[i, d] += f * (Y[i, d] - Y[j, d])
        z_rows[i] = z


@njit(cache=True, fastmath=True)
def combine(attr, rep, inv_z, grad):
    """grad = 4 (attr - rep / Z): the exact derivative of the KL divergence (serial: cheaper than a thread wake-up)."""
    n, dim = attr.shape
    for i in range(n):
        for d in range(dim):
            grad[i, d] = 4.0 * (attr[i, d] - rep[i, d] * inv_z)


@njit(cache=True, fastmath=True)
def descent_step(Y, grad, update, gains, step, momentum, min_gain):
    """One step of gradient descent with momentum and Jacobs' adaptive gains, then re-centre Y on the origin.

    gains grow by 0.2 where the gradient opposes the last update and shrink by x0.8 (+min_gain) where it agrees.
    """
    n, dim = Y.shape
    for d in range(dim):
        mean = 0.0
        for i in range(n):
            g = grad[i, d]
            u = update[i, d]
            if (g > 0) - (g < 0) != (u > 0) - (u < 0):
                gains[i, d] += 0.2
            else:
                gains[i, d] = gains[i, d] * 0.8 + min_gain
            u = momentum * u - step * gains[i, d] * g
            update[i, d] = u
            Y[i, d] += u
            mean += Y[i, d]
        mean /= n
        for i in range(n):
            Y[i, d] -= mean
