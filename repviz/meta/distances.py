"""Distances between representations: vectors into banks, one float64 Gram, chord or angle.

``chord`` = ||v̂_X - v̂_Y|| = sqrt(2 - 2 cos) and ``angle`` = arccos(cos) are both metrics on the unit sphere
(d(X, X) = 0, symmetric, triangle inequality). The angle is computed as 2·arcsin(chord / 2), which stays
accurate where cos is close to 1.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.spatial.distance import squareform

from .._validation import check_option
from ..progress import ProgressCallback, report
from ..store import temporary_artifacts
from .bank import VectorBank
from .options import DEFAULT_MAX_PROBES, METRICS, TRANSFORMS
from .sources import Representation, from_arrays
from .vectors import PairSample, probe_pairs, representation_vectors, vector_length


def pair_sample(n: int, max_probes: int, n_pairs: int | None, random_state: int) -> PairSample | None:
    """None (all pairs) up to ``max_probes`` probes; above, a seeded subset of ``n_pairs`` pairs (default: as
    many as ``max_probes`` probes have)."""
    if n <= max_probes:
        return None
    return probe_pairs(n, n_pairs or max_probes * (max_probes - 1) // 2, random_state)


def vector_id(rep: Representation, transform: str) -> str:
    """File-system-safe cache id of one representation's vector: its key, data checksum and transform."""
    blob = json.dumps([list(rep.key), rep.checksum, transform]).encode()
    return hashlib.sha1(blob).hexdigest()[:24]


def add_vectors(reps: list[Representation], banks: Mapping[str, VectorBank], pairs: PairSample | None,
                progress: ProgressCallback | None = None, skip_invalid: bool = False
                ) -> tuple[list[Representation], list[tuple[Representation, str]]]:
    """Bank the vector of every representation for every transform (``banks[transform]``), building only the
    ones not banked yet (one pass over each representation's data for all transforms).

    With ``skip_invalid``, representations whose vectors cannot be built (non-finite values, all probes
    coinciding) are left out and returned with the reason; otherwise they raise ``ValueError``.
    Returns (the representations kept, the ones left out).
    """
    kept, skipped = [], []
    for i, rep in enumerate(reps):
        todo = [t for t, bank in banks.items() if vector_id(rep, t) not in bank]
        if todo:
            try:
                vectors = representation_vectors(rep.compared(), todo, pairs, name=rep.label)
            except ValueError as e:
                if not skip_invalid:
                    raise
                skipped.append((rep, str(e)))
                continue
            for t in todo:
                banks[t].add(vector_id(rep, t), vectors[t], {"key": list(rep.key), "checksum": rep.checksum})
        kept.append(rep)
        report(progress, "vectors", i + 1, len(reps))
    return kept, skipped


def from_sq_chords(chord2: np.ndarray, metric: str, *, overwrite: bool = False) -> np.ndarray:
    """Chord or angle distances from squared chords; with ``overwrite``, computed in ``chord2`` itself (no
    R × R temporary)."""
    chord = np.maximum(chord2, 0.0, out=chord2 if overwrite else None)
    np.sqrt(chord, out=chord)
    if metric == "chord":
        return chord
    chord /= 2.0
    np.clip(chord, 0.0, 1.0, out=chord)
    np.arcsin(chord, out=chord)
    chord *= 2.0
    return chord


def rank_correlation(D1: np.ndarray, D2: np.ndarray) -> float:
    """Spearman correlation of the off-diagonal entries of two distance matrices over the same items (Pearson
    of their average ranks, one matrix's upper triangle at a time: about 1.5 R × R float64 besides them)."""
    if len(D1) * (len(D1) - 1) // 2 < 2:
        return float("nan")
    a = _average_ranks(squareform(D1, checks=False))
    a -= a.mean()
    b = _average_ranks(squareform(D2, checks=False))
    b -= b.mean()
    return float(np.dot(a, b) / np.sqrt(np.dot(a, a) * np.dot(b, b)))


def _average_ranks(v: np.ndarray) -> np.ndarray:
    """The ranks (1-based, ties averaged, as ``scipy.stats.rankdata``) of ``v``, which is sorted in place: one
    index array and the ranks besides it, where ``rankdata`` takes about six arrays of its size."""
    order = np.argsort(v)
    v.sort()
    tied = v[1:] == v[:-1]
    if tied.any():  # each run of equal values gets the mean of its positions
        first = np.flatnonzero(np.concatenate([[True], ~tied]))
        size = np.diff(np.append(first, len(v)))
        v[...] = np.repeat(first + (size + 1) / 2.0, size)
    else:
        v.fill(1.0)
        np.cumsum(v, out=v)
    ranks = np.empty_like(v)
    ranks[order] = v
    return ranks


def representation_distances(representations: Sequence[np.ndarray] | Mapping, *, transform: str = "dist",
                             metric: str = "chord", max_probes: int = DEFAULT_MAX_PROBES,
                             n_pairs: int | None = None, random_state: int = 0) -> np.ndarray:
    """Distances between representations of the same probes (R, R) float64.

    Parameters
    ----------
    representations : list of arrays (n_probe, ...) or mapping of them
        Activations of the same probes, in the same order; widths may differ.
    transform : {"dist", "sqrt", "rank", "cka", "rbf_cka"}, default="dist"
        How a representation becomes a vector; see :mod:`repviz.meta.vectors`.
    metric : {"chord", "angle"}, default="chord"
        sqrt(2 - 2 cos) or arccos(cos) between the unit vectors; with ``"cka"`` the cosine is linear CKA.
    max_probes : int, default=3000
        Above this many probes, a seeded random subset of ``n_pairs`` probe pairs stands for all of them.
    n_pairs : int or None
        Size of that subset; default: the pairs of ``max_probes`` probes.
    random_state : int, default=0
        Seed of the pair subset.

    Time O(R n² width) for the vectors plus O(R² n²) for the distances; memory O(n²) plus one column block;
    the vectors live in a temporary directory while this runs.

    Examples
    --------
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(50, 8))
    >>> D = representation_distances([X, 3 * X + 1, rng.normal(size=(50, 4))])
    >>> bool(D[0, 1] < 1e-6 < D[0, 2])
    True
    """
    check_option(transform, TRANSFORMS, "transform", "representation_distances")
    check_option(metric, METRICS, "metric", "representation_distances")
    reps = from_arrays(representations)
    pairs = pair_sample(len(reps[0].load()), max_probes, n_pairs, random_state)
    with temporary_artifacts("repviz-meta-") as scratch:
        bank = VectorBank(scratch, vector_length(len(reps[0].load()), transform, pairs))
        add_vectors(reps, {transform: bank}, pairs)
        chord2 = bank.sq_chords([vector_id(r, transform) for r in reps])
    return from_sq_chords(chord2, metric)
