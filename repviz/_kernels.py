"""Numba leaf kernels shared by the numeric modules (neighbours, manifold methods, meta-SNE).

They are inlined into their callers at numba's IR level (``inline="always"``), so they cost no call and take
the caller's ``fastmath`` and ``parallel`` settings; a caller compiled for float32 or float64 arrays, writable
or read-only, gets its own specialisation.
"""

from ._jit import njit


@njit(inline="always", cache=True, fastmath=True)
def sq_dist(A, i, B, j):  # pragma: no cover - compiled
    """Squared Euclidean distance between row ``i`` of ``A`` and row ``j`` of ``B``, accumulated in float64."""
    d2 = 0.0
    for f in range(A.shape[1]):
        t = A[i, f] - B[j, f]
        d2 += t * t
    return d2
