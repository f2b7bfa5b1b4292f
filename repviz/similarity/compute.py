"""The values a similarity matrix still lacks, computed from the meta bank or by the measures, into the cache.

- **From the meta bank** (:class:`repviz.meta.bank.VectorBank`): linear CKA is the cosine of two centred Gram
  matrices, which is what the meta bank's ``cka`` vectors (biased HSIC) and ``ucka`` vectors (U-centred, the
  unbiased HSIC of Song et al. 2007) hold, so CKA = 1 - chord²/2 of the banked chord distances. Up to the bank's
  ``max_probes`` probes, the bank shared with ``MetaSNE(transform="cka")`` (``logdir.vector_cache``) gives the
  matrix without computing a Gram matrix again for any representation it holds.
- **By the measures** (:attr:`Measure.compute <repviz.similarity.registry.Measure.compute>`) otherwise (RBF CKA,
  minibatch CKA, Procrustes, more probes): only for the missing pairs, as one block whose rows are a small set of
  representations covering every missing pair (a new snapshot: one row against all).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..chains import CONSTANT, ConstantError, RepresentationError
from ..executors import Executor
from ..meta.bank import VectorBank
from ..meta.distances import DEFAULT_MAX_PROBES, add_vectors, vector_id
from ..meta.sources import Representation
from ..meta.tasks import add_vectors_with, gram_with
from ..meta.vectors import vector_length
from ..progress import ProgressCallback
from ..store import LogDir, NotFoundError, constant_rows
from .cache import SimilarityCache
from .registry import get_measure
from .sources import Selection, Stored


def bank_transform(measure: str, params: dict, n_probe: int, max_probes: int = DEFAULT_MAX_PROBES) -> str | None:
    """The meta bank transform that gives these values exactly, or None (they are computed by the measures)."""
    return get_measure(measure).bank(params, n_probe, max_probes)


def covering(missing: set[tuple[str, str]], order: Sequence[str]) -> tuple[list[str], list[str]]:
    """Rows and columns of one block that holds every pair of ``missing`` (unordered identity pairs, (a, a) for a
    diagonal entry): a greedy vertex cover as rows (highest count of missing pairs first) and, as columns, the
    other end of each pair. Both in the order of ``order``."""
    left, rows = set(missing), set()
    while left:
        count: dict[str, int] = {}
        for a, b in left:
            count[a] = count.get(a, 0) + 1
            if b != a:
                count[b] = count.get(b, 0) + 1
        pick = max(order, key=lambda r: count.get(r, 0))
        rows.add(pick)
        left = {p for p in left if pick not in p}
    cols = {b if a in rows else a for a, b in missing}
    return [r for r in order if r in rows], [c for c in order if c in cols]


def _missing_pairs(selection: Selection, missing: np.ndarray) -> set[tuple[str, str]]:
    ids_r = [r.identity for r in selection.rows]
    ids_c = [c.identity for c in selection.cols]
    return {tuple(sorted((ids_r[i], ids_c[j]))) for i, j in zip(*np.nonzero(missing))}


def _activations(rep: Stored) -> np.ndarray:
    """The compared rows of ``rep`` as (n, width), refused as :class:`~repviz.chains.RepresentationError` when they
    cannot be compared: non-finite, or constant (:class:`~repviz.chains.ConstantError`)."""
    X = np.asarray(rep.load())
    X = X.reshape(len(X), -1)
    if not np.isfinite(X).all():
        raise RepresentationError("non-finite values (NaN or infinity) in the activations")
    if constant_rows(X):
        raise ConstantError(CONSTANT)
    return X


def from_measures(selection: Selection, missing: np.ndarray, cache: SimilarityCache, measure: str, params: dict,
                  progress: ProgressCallback | None = None) -> int:
    """Compute the ``missing`` entries (a boolean mask over the selection) with the measures, into ``cache``;
    returns how many pairs of representations were missing. A representation that cannot be read or compared is
    left out, its reason kept in ``cache.left_out``."""
    reps = {r.identity: r for r in selection.rows + selection.cols}
    pairs = _missing_pairs(selection, missing)
    loaded = {}
    for i in dict.fromkeys(i for pair in pairs for i in pair):
        try:
            loaded[i] = _activations(reps[i])
        except (ValueError, NotFoundError) as e:  # unreadable, damaged, constant: a hole, not a failed matrix
            cache.left_out[i] = str(e)
    count = len(pairs)
    pairs = {p for p in pairs if p[0] in loaded and p[1] in loaded}
    if not pairs:
        return count
    rows, cols = covering(pairs, list(reps))
    A = [loaded[i] for i in rows]
    B = None if rows == cols else [loaded[i] for i in cols]
    try:
        block = get_measure(measure).compute(A, B, params, len(selection.ids), progress)
    except ValueError as e:  # the measures call the representations reps_a[i], reps_b[j]: name them
        names = {f"reps_a[{k}]": reps[i].label for k, i in enumerate(rows)}
        names |= {f"reps_b[{k}]": reps[i].label for k, i in enumerate(cols if B is not None else [])}
        raise ValueError(re.sub(r"reps_[ab]\[\d+\]", lambda m: names.get(m.group(0), m.group(0)), str(e))) from e
    cache.put([reps[i] for i in rows], [reps[i] for i in cols], block)
    return count


def from_bank(logdir: LogDir, selection: Selection, missing: np.ndarray, cache: SimilarityCache, transform: str,
              progress: ProgressCallback | None = None, executor: Executor | None = None) -> int:
    """Fill the ``missing`` entries from the meta bank of ``transform`` (vectors built and banked for the
    representations it lacks; with ``executor``, vectors and Gram blocks as its tasks, :mod:`repviz.meta.tasks`);
    returns how many vectors were built (0 when the bank was warm). A representation whose vector cannot be built
    (constant, non-finite, unreadable) is left out, its reason kept in ``cache.left_out``."""
    reps = {r.identity: r for r in selection.rows + selection.cols}
    need = [reps[i] for i in dict.fromkeys(i for pair in _missing_pairs(selection, missing) for i in pair)]
    n = len(selection.ids)
    bank = VectorBank(logdir.vector_cache(transform, selection.probe_id), vector_length(n, transform))
    banked = [Representation(tuple(r.key), r.checksum, r.stored, where=r.where) for r in need]
    built = sum(vector_id(rep, transform) not in bank for rep in banked)
    if executor is None:
        _, skipped = add_vectors(banked, {transform: bank}, None, progress, skip_invalid=True)
    else:
        _, skipped = add_vectors_with(executor, logdir, banked, {transform: bank}, None, progress)
    of = {rep.key: r for rep, r in zip(banked, need)}
    cache.left_out.update({of[rep.key].identity: why for rep, why in skipped})
    kept = [(rep, r) for rep, r in zip(banked, need) if r.identity not in cache.left_out]
    if kept:
        chord2 = bank.sq_chords([vector_id(rep, transform) for rep, _ in kept], progress,
                                None if executor is None else gram_with(executor, bank))
        cache.put([r for _, r in kept], [r for _, r in kept], 1.0 - chord2 / 2.0)
    return built
