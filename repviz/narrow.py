"""Representations narrower than an embedding: a 1-wide layer (a sigmoid output, a regression head) has fewer
columns than a method's ``n_components``, and nothing to reduce.

Every method lays such a representation out the same way (:func:`narrow_layout`): its own centred values on the
first axes, so the picture is the representation itself, exactly; a 1-wide one gets a second axis of strips, one
per class (a seeded jitter within each strip, the same at every snapshot, so an animation moves the points only
along the values), or one strip without labels. The embedding's metadata says ``one_dimensional`` (or ``narrow``),
and the layout is not aligned to the previous snapshot (there is nothing to rotate: the axis is the values).
"""

from __future__ import annotations

import numpy as np

_MAX_STRIPS = 50  # more label values than this (a regression target): one strip
_JITTER = 0.35  # half the height of a strip, in strip spacings


def narrow_layout(X: np.ndarray, labels: np.ndarray | None, n_components: int, random_state: int = 0
                  ) -> np.ndarray:
    """(n, n_components) float32 coordinates of ``X`` (n, w) with ``w < n_components``: the centred values,
    then for ``w == 1`` a strip per class of ``labels`` (integer labels with at most 50 values, else one
    strip), spaced so that all the strips together are 0.6 times the spread of the values; zeros after."""
    X = np.asarray(X, dtype=np.float64)
    n, width = X.shape
    Y = np.zeros((n, n_components), np.float32)
    Y[:, :width] = X - X.mean(axis=0)
    if width == 1 and n_components > 1:
        codes = np.zeros(n, np.int64)
        if labels is not None and np.asarray(labels).dtype.kind in "iub":
            values, inverse = np.unique(np.asarray(labels).reshape(n), return_inverse=True)
            codes = inverse if len(values) <= _MAX_STRIPS else codes
        strips = int(codes.max()) + 1
        jitter = np.random.default_rng(random_state).uniform(-_JITTER, _JITTER, n)
        spacing = 0.6 * max(float(np.ptp(X[:, 0])), 1e-12) / strips
        Y[:, 1] = (codes - (strips - 1) / 2 + jitter) * spacing
    return Y
