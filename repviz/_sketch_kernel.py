"""The count sketch's row kernel (:func:`repviz._reduction.apply_count_sketch`), in a module of its own so that
numba is imported only by a process that sketches a layer."""

from __future__ import annotations

from ._jit import njit


@njit(cache=True, nogil=True)
def sketch_rows(start, stop, x, bucket, sign, out):
    """Rows four at a time (they share each column's bucket and sign, which halves the loads per value), then the
    rest one by one."""
    out[start:stop] = 0.0
    r = start
    while r + 4 <= stop:
        o0, o1, o2, o3 = out[r], out[r + 1], out[r + 2], out[r + 3]
        for i in range(x.shape[1]):
            b, s = bucket[i], sign[i]
            o0[b] += s * x[r, i]
            o1[b] += s * x[r + 1, i]
            o2[b] += s * x[r + 2, i]
            o3[b] += s * x[r + 3, i]
        r += 4
    for q in range(r, stop):
        row = out[q]
        for i in range(x.shape[1]):
            row[bucket[i]] += sign[i] * x[q, i]
