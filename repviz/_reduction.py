"""The seeded random reductions that :class:`repviz.ActivationLogger` applies to wide layers, as plain arrays.

Both keep pairwise distances in expectation (``E ||R x||^2 = ||x||^2``), which is what every embedding and
meta-SNE use. The logger applies them on the backend; the numpy forms here define them, and serve tests and
``benchmarks/bench_reduction.py``.

- **Count sketch** (the default; Charikar, Chen & Farach-Colton 2002; as a Johnson-Lindenstrauss transform,
  Clarkson & Woodruff 2013): every input column is added, with a random sign, to one of ``dim`` output columns.
  Its variance, ``Var ||R x||^2 = (2 / dim) (||x||^4 - sum x_i^4)``, is never above the Gaussian projection's
  ``(2 / dim) ||x||^4``, while it costs one pass over the row (``in_width`` additions, no multiply-add per
  output column) and a plan of two arrays of ``dim * ceil(in_width / dim)`` entries instead of an
  ``in_width x dim`` matrix. Columns go to shuffled slots of a ``(dim, ceil(in_width / dim))`` grid, so every
  output column sums nearly the same number of inputs and the backend computes it with a gather, a product and
  a sum over the last axis.
- **Gaussian projection**: what runs recorded before the count sketch used (``"random_projection"`` in their
  manifest); kept so that such runs continue with the same reduction when training resumes.
"""

from __future__ import annotations

import numpy as np

COUNT_SKETCH = "count_sketch"
GAUSSIAN = "random_projection"


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


def gaussian_matrix(in_width: int, dim: int, seed) -> np.ndarray:
    """The Gaussian projection ``in_width -> dim`` of ``seed``: (in_width, dim) float32 scaled by
    ``1 / sqrt(dim)``, exactly as runs recorded before the count sketch drew it."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((in_width, dim), dtype=np.float32)
    matrix /= np.float32(np.sqrt(dim))
    return matrix
