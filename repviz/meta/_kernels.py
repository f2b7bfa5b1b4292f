"""Numba kernels that turn a probe Gram matrix (or sampled probe pairs) into condensed pair vectors.

The condensed order is scipy's ``squareform``: pair (i, j), i < j, sits at ``i*n - i*(i+1)/2 + j - i - 1``.
The condensed kernels are serial on purpose: they stream memory at a few ms per 2 million pairs, less than
waking a thread team costs on a busy machine (measured: 20 ms per parallel region with 2 threads under load).
The sampled-pair kernels do O(width) arithmetic per pair and run in parallel, visiting the pairs in the order
``order`` (:attr:`repviz.meta.vectors.PairSample.order`) and writing each result at its pair's place.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .._jit import njit
from .._kernels import sq_dist


@njit(cache=True, fastmath=True, inline="always")
def _row_start(i, n):
    return i * n - (i * (i + 1)) // 2


@njit(cache=True, fastmath=True)
def condensed_dists(G, diag, half_power, out):
    """(d²)^half_power of the upper triangle (half_power 1, 0.5 or 0.25) from the Gram matrix of centred rows.

    d² = G_ii + G_jj - 2 G_ij (``diag`` = G's diagonal, contiguous so the inner loop streams) is clipped at 0,
    since rounding can make it slightly negative. One loop per exponent keeps the inner loop branch-free.
    """
    n = G.shape[0]
    for i in range(n - 1):
        k0 = _row_start(i, n) - i - 1
        gii = diag[i]
        if half_power == 1.0:
            for j in range(i + 1, n):
                out[k0 + j] = max(gii + diag[j] - 2.0 * G[i, j], 0.0)
        elif half_power == 0.5:
            for j in range(i + 1, n):
                out[k0 + j] = np.sqrt(max(gii + diag[j] - 2.0 * G[i, j], 0.0))
        else:
            for j in range(i + 1, n):
                out[k0 + j] = np.sqrt(np.sqrt(max(gii + diag[j] - 2.0 * G[i, j], 0.0)))


@njit(cache=True, fastmath=True)
def _centred_row(K, r, grand, scale, i, out):
    n = K.shape[0]
    k0 = _row_start(i, n) - i - 1
    for j in range(i + 1, n):
        out[k0 + j] = scale * (K[i, j] - r[i] - r[j] + grand)


@njit(cache=True, fastmath=True)
def condensed_centred(K, r, grand, scale, out):
    """``scale * (K_ij - r_i - r_j + grand)`` for i < j: the upper triangle of H K H given K's row means ``r``.

    With ``r = 0`` and ``grand = 0`` it copies the scaled upper triangle of K.
    """
    for i in range(K.shape[0] - 1):
        _centred_row(K, r, grand, scale, i, out)


@njit(cache=True, fastmath=True, parallel=True)
def pair_sq_dists(X, I, J, order, out):
    """||x_I - x_J||² of sampled pairs, from differences (no cancellation)."""
    for q in prange(order.shape[0]):
        p = order[q]
        out[p] = sq_dist(X, I[p], X, J[p])


@njit(cache=True, fastmath=True, parallel=True)
def pair_dots(X, I, J, order, out):
    """Dot products x_I · x_J of sampled pairs."""
    for q in prange(order.shape[0]):
        p = order[q]
        i, j = I[p], J[p]
        s = 0.0
        for c in range(X.shape[1]):
            s += X[i, c] * X[j, c]
        out[p] = s


@njit(cache=True, fastmath=True, parallel=True)
def pair_sq_dists_dots(X, I, J, order, d2, dots):
    """Squared distances (from differences) and dot products of sampled pairs in one pass: at 50,000 probes the
    pairs' rows come from all over X, so reading them, not the arithmetic, is the cost (half of it for both)."""
    for q in prange(order.shape[0]):
        p = order[q]
        i, j = I[p], J[p]
        s = 0.0
        t = 0.0
        for c in range(X.shape[1]):
            a = X[i, c]
            b = X[j, c]
            u = a - b
            s += u * u
            t += a * b
        d2[p] = s
        dots[p] = t


@njit(cache=True, fastmath=True)
def sum_squares(v):
    """Σ v², accumulated in float64."""
    s = 0.0
    for k in range(v.shape[0]):
        x = np.float64(v[k])
        s += x * x
    return s


@njit(cache=True, fastmath=True, parallel=True)
def cross_dots(A, B, out):
    """out (k, R) += A Bᵀ for float32 A (k, c) and B (R, c), each product and sum in float64.

    The incremental path of the Gram matrix: a few new vectors against every stored one. Products of float32
    numbers are exact in float64, so this equals converting B to float64 and calling dgemm, without writing
    the float64 copy of B (which costs more than the arithmetic when k is small).
    """
    k, c = A.shape
    for r in prange(B.shape[0]):
        for i in range(k):
            s = 0.0
            for t in range(c):
                s += np.float64(A[i, t]) * np.float64(B[r, t])
            out[i, r] += s
