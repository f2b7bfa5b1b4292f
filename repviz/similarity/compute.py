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

from ..executors import Executor
from ..meta.bank import VectorBank
from ..meta.distances import DEFAULT_MAX_PROBES, add_vectors, vector_id
from ..meta.sources import Representation
from ..meta.tasks import add_vectors_with, gram_with
from ..meta.vectors import vector_length
from ..progress import ProgressCallback
from ..store import LogDir
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
    X = np.asarray(rep.load())
    return X.reshape(len(X), -1)


def from_measures(selection: Selection, missing: np.ndarray, cache: SimilarityCache, measure: str, params: dict,
                  progress: ProgressCallback | None = None) -> int:
    """Compute the ``missing`` entries (a boolean mask over the selection) with the measures, into ``cache``;
    returns how many pairs of representations were missing."""
    reps = {r.identity: r for r in selection.rows + selection.cols}
    pairs = _missing_pairs(selection, missing)
    rows, cols = covering(pairs, list(reps))
    A = [_activations(reps[i]) for i in rows]
    B = None if rows == cols else [_activations(reps[i]) for i in cols]
    try:
        block = get_measure(measure).compute(A, B, params, len(selection.ids), progress)
    except ValueError as e:  # the measures call the representations reps_a[i], reps_b[j]: name them
        names = {f"reps_a[{k}]": reps[i].label for k, i in enumerate(rows)}
        names |= {f"reps_b[{k}]": reps[i].label for k, i in enumerate(cols if B is not None else [])}
        raise ValueError(re.sub(r"reps_[ab]\[\d+\]", lambda m: names.get(m.group(0), m.group(0)), str(e))) from e
    cache.put([reps[i] for i in rows], [reps[i] for i in cols], block)
    return len(pairs)


def from_bank(logdir: LogDir, selection: Selection, missing: np.ndarray, cache: SimilarityCache, transform: str,
              progress: ProgressCallback | None = None, executor: Executor | None = None) -> int:
    """Fill the ``missing`` entries from the meta bank of ``transform`` (vectors built and banked for the
    representations it lacks; with ``executor``, vectors and Gram blocks as its tasks, :mod:`repviz.meta.tasks`);
    returns how many vectors were built (0 when the bank was warm)."""
    reps = {r.identity: r for r in selection.rows + selection.cols}
    need = [reps[i] for i in dict.fromkeys(i for pair in _missing_pairs(selection, missing) for i in pair)]
    n = len(selection.ids)
    bank = VectorBank(logdir.vector_cache(transform, selection.probe_id), vector_length(n, transform))
    banked = [Representation(tuple(r.key), r.checksum, r.stored, where=r.where) for r in need]
    vids = [vector_id(rep, transform) for rep in banked]
    built = sum(v not in bank for v in vids)
    if executor is None:
        add_vectors(banked, {transform: bank}, None, progress)
    else:
        _, skipped = add_vectors_with(executor, logdir, banked, {transform: bank}, None, progress)
        if skipped:  # as add_vectors without skip_invalid: the first one that cannot be compared, named
            raise ValueError(skipped[0][1])
    chord2 = bank.sq_chords(vids, progress, None if executor is None else gram_with(executor, bank))
    cache.put(need, need, 1.0 - chord2 / 2.0)
    return built
