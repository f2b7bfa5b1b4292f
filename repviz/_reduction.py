"""The seeded random reduction that :class:`repviz.ActivationLogger` applies to wide layers, as plain arrays.

It keeps pairwise distances in expectation (``E ||R x||^2 = ||x||^2``), which is what every embedding and
meta-SNE use. The numpy forms here define it and serve tests and ``benchmarks/bench_reduction.py``; the logger
applies the count sketch with :func:`apply_count_sketch` (one pass over each row, on a few threads: about 4x less
time than the same sketch as TensorFlow ops, which transpose, gather, scale and sum the whole block in turn).

- **Count sketch** (the default; Charikar, Chen & Farach-Colton 2002; as a Johnson-Lindenstrauss transform,
  Clarkson & Woodruff 2013): every input column is added, with a random sign, to one of ``dim`` output columns.
  Its variance, ``Var ||R x||^2 = (2 / dim) (||x||^4 - sum x_i^4)``, is never above the Gaussian projection's
  ``(2 / dim) ||x||^4``, while it costs one pass over the row (``in_width`` additions, no multiply-add per
  output column) and a plan of two arrays of ``dim * ceil(in_width / dim)`` entries instead of an
  ``in_width x dim`` matrix. Columns go to shuffled slots of a ``(dim, ceil(in_width / dim))`` grid, so every
  output column sums nearly the same number of inputs and the backend computes it with a gather, a product and
  a sum over the last axis.
- **Gaussian projection** (:func:`gaussian_matrix`): the dense transform the sketch is measured against in
  ``benchmarks/bench_reduction.py``.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

COUNT_SKETCH = "count_sketch"


def count_sketch_plan(in_width: int, dim: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """The count sketch ``in_width -> dim`` of ``seed`` (an int or a list of ints, for numpy's ``default_rng``).

    Returns ``index`` (int32) and ``signs`` (float32), both of length ``dim * m`` with ``m = ceil(in_width / dim)``:
    output column ``g`` is ``sum(signs[s] * x[index[s]] for s in range(g * m, (g + 1) * m))``. Each input column
    fills exactly one slot; the slots left over have sign 0.
    """
    m = -(-int(in_width) // int(dim))
    rng = np.random.default_rng(seed)
    slots = rng.permutation(dim * m)[:in_width]
    index = np.zeros(dim * m, dtype=np.int32)
    signs = np.zeros(dim * m, dtype=np.float32)
    index[slots] = np.arange(in_width, dtype=np.int32)
    signs[slots] = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=in_width)
    return index, signs


def count_sketch(x: np.ndarray, index: np.ndarray, signs: np.ndarray, dim: int) -> np.ndarray:
    """Apply a :func:`count_sketch_plan` of ``dim`` output columns to the rows of ``x`` (n, in_width); returns
    (n, dim) float32."""
    x = np.asarray(x, dtype=np.float32).reshape(len(x), -1)
    return (x[:, index] * signs).reshape(len(x), dim, -1).sum(axis=2)


def count_sketch_columns(index: np.ndarray, signs: np.ndarray, in_width: int, dim: int) -> tuple[np.ndarray,
                                                                                              np.ndarray]:
    """The plan of :func:`count_sketch_plan` per input column: ``bucket`` (int32, the output column each input
    column is added to) and ``sign`` (float32), both of length ``in_width``."""
    m = index.shape[0] // dim
    filled = np.flatnonzero(signs)
    bucket = np.empty(in_width, dtype=np.int32)
    sign = np.empty(in_width, dtype=np.float32)
    bucket[index[filled]] = filled // m
    sign[index[filled]] = signs[filled]
    return bucket, sign


def apply_count_sketch(x: np.ndarray, bucket: np.ndarray, sign: np.ndarray, out: np.ndarray,
                       threads: int | None = None) -> None:
    """``out[:] = count_sketch(x, ...)`` for float32 ``x`` (n, in_width) and ``out`` (n, dim), from the plan of
    :func:`count_sketch_columns`: one pass over each row, rows on ``threads`` threads (None:
    ``numba.get_num_threads()``; 1: the calling thread alone). The sums run over the input columns in order, so
    the result does not depend on the thread count. numba is imported by the first call, not with this module: a
    process that sketches nothing (every layer narrow enough) does not carry the compiler."""
    from ._rows import run_rows
    from ._sketch_kernel import sketch_rows

    x = np.ascontiguousarray(x, dtype=np.float32).view()
    x.flags.writeable = False  # one compiled form: backend tensors come as read-only views
    run_rows(sketch_rows, x.shape[0], x, bucket, sign, out, threads=threads)


@functools.cache
def load_sketch_kernel() -> threading.Thread:
    """Load :func:`apply_count_sketch`'s compiled kernel on a daemon thread and return it (join it before the
    first sketch); once per process, later calls return the same thread. Importing numba and its first call in a
    process cost about 0.5 s even from its cache; loaded when the logger plans a layer that needs the sketch,
    meanwhile the capture's forward pass is traced."""
    def load() -> None:
        apply_count_sketch(np.zeros((1, 1), np.float32), np.zeros(1, np.int32), np.ones(1, np.float32),
                           np.empty((1, 1), np.float32))

    thread = threading.Thread(target=load, name="repviz-sketch-load", daemon=True)
    thread.start()
    return thread


def gaussian_matrix(in_width: int, dim: int, seed) -> np.ndarray:
    """The Gaussian projection ``in_width -> dim`` of ``seed``: (in_width, dim) float32 scaled by
    ``1 / sqrt(dim)``, exactly as runs recorded before the count sketch drew it."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((in_width, dim), dtype=np.float32)
    matrix /= np.float32(np.sqrt(dim))
    return matrix
