"""Probe subsets: which probe points a snapshot holds, and the points that several snapshots share.

A snapshot may store a subset of its run's probe (``ActivationLogger(batch_probe=...)``); its rows are positions into
the probe (:meth:`repviz.store.Run.rows`). Whatever compares snapshots (chains, alignment, meta-SNE, similarity)
compares them on the points they have in common: :func:`common_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def common_rows(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The probe positions present in every one of ``rows`` (each increasing), and for each, where they lie in it.

    Returns ``(common, where)``: ``snapshot_i[where[i]]`` are the rows of the common points, in the same order for
    every snapshot.
    """
    if not rows:
        return np.zeros(0, dtype=np.int64), []
    common = np.asarray(rows[0], dtype=np.int64)
    for r in rows[1:]:
        common = np.intersect1d(common, r, assume_unique=True)
    return common, [np.searchsorted(r, common) for r in rows]


def stratified_subset(n: int, size: int, labels: np.ndarray | None = None,
                      random_state: int | np.random.Generator | None = 0) -> np.ndarray:
    """``size`` increasing positions out of ``n``, drawn at random, each class represented in proportion to its
    count (largest remainders) when ``labels`` are given; every position when ``size >= n``."""
    if size >= n:
        return np.arange(n)
    if size < 1:
        raise ValueError(f"a probe subset needs at least 1 point; got {size}")
    rng = np.random.default_rng(random_state)
    if labels is None:
        return np.sort(rng.choice(n, size, replace=False))
    labels = np.asarray(labels)
    keys = labels.reshape(len(labels), -1)
    classes, codes = np.unique(keys, axis=0, return_inverse=True) if keys.shape[1] > 1 else \
        np.unique(keys[:, 0], return_inverse=True)
    codes = codes.reshape(-1)
    counts = np.bincount(codes, minlength=len(classes))
    share = counts * (size / n)
    take = np.floor(share).astype(np.int64)
    extra = size - take.sum()
    take[np.argsort(-(share - take), kind="stable")[:extra]] += 1
    picked = [rng.choice(np.flatnonzero(codes == c), k, replace=False) for c, k in enumerate(take) if k]
    return np.sort(np.concatenate(picked))
