"""Layer-by-layer similarity from a log directory: the layers of two runs at one snapshot, or one layer's
snapshots, as a labelled :class:`SimilarityMatrix`; values cached in the log directory and computed only when new.

>>> from repviz.similarity import similarity, similarity_over_training   # doctest: +SKIP
>>> m = similarity("logs", runs=("relu/seed0", "relu/seed1"), measure="cka", debiased=True)   # doctest: +SKIP
>>> print(m.table()); m.layer_identification()   # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..executors import Executor
from ..progress import ProgressCallback
from ..store import LogDir, open_logdir
from .cache import SimilarityCache, cache_artifacts, measure_params
from .options import AUTO_EXACT_PROBES, KERNELS, RBF_SIGMA
from .registry import DEFAULT_MEASURE
from .result import SimilarityMatrix
from .sources import Selection, Stored, between_runs, over_training

# CKA's defaults, shared by the three entry points (see :func:`similarity` for what they mean).
_DEFAULTS = {"measure": DEFAULT_MEASURE, "kernel": KERNELS[0], "debiased": True, "sigma": RBF_SIGMA, "batch_size": None,
             "random_state": 0}


def _open(logdir: LogDir | str | os.PathLike) -> LogDir:
    return logdir if isinstance(logdir, LogDir) else open_logdir(logdir)


def _prepared(logdir: LogDir | str | os.PathLike, executor: Executor | None) -> LogDir:
    """The log directory, as the executor's workers see it (checked) when there is one."""
    logdir = _open(logdir)
    return logdir if executor is None else executor.prepare(logdir)


def _probe_note(selection: Selection) -> str:
    """On which probe points the values compare the representations (all of them, or those every one holds)."""
    if len(selection.ids) < selection.n_probe:
        count = len({r.key for r in selection.rows + selection.cols})
        return (f"compared on the {len(selection.ids):,} probe points common to all {count} representations "
                f"(of {selection.n_probe:,})")
    runs = list(dict.fromkeys(r.key.run for r in selection.rows + selection.cols))
    who = f"both runs {runs[0]!r} and {runs[1]!r} hold" if len(runs) > 1 else f"of run {runs[0]!r}"
    return f"compared on the {len(selection.ids):,} probes {who}"


def _matrix(logdir: LogDir, selection: Selection, options: dict, compute: bool,
            progress: ProgressCallback | None, executor: Executor | None = None) -> SimilarityMatrix | None:
    options = {**_DEFAULTS, **options}
    measure = options["measure"]
    unknown = sorted(set(options) - set(_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown}; the options are {sorted(_DEFAULTS)}")
    params = measure_params(measure, options["kernel"], options["debiased"], options["sigma"],
                            options["batch_size"], options["random_state"], len(selection.ids))
    cache = SimilarityCache(cache_artifacts(logdir, measure, params), {"measure": measure, **params})
    values = cache.get(selection.rows, selection.cols)
    missing = np.isnan(values) & _comparable(selection.rows, cache)[:, None] & _comparable(selection.cols, cache)
    computed, cached = 0, int(np.isfinite(values).sum())
    notes = [_probe_note(selection)]
    if "batch_size" in params:
        n, b = len(selection.ids), params["batch_size"]
        auto = f", automatic above {AUTO_EXACT_PROBES:,} probes" if options["batch_size"] is None else ""
        notes.append(f"minibatch CKA, {-(-n // b)} batches of about {n / -(-n // b):,.0f} probes "
                     f"(seed {params['random_state']}{auto})")
    if missing.any():
        if not compute:
            return None
        from . import compute as work

        transform = work.bank_transform(measure, params, len(selection.ids))
        if transform is not None:
            built = work.from_bank(logdir, selection, missing, cache, transform, progress, executor)
            source = f" from the meta bank's {transform!r} vectors (CKA = 1 - chord²/2; {built} built now)"
        else:
            work.from_measures(selection, missing, cache, measure, params, progress)
            source = ""
        cache.save()
        values = cache.get(selection.rows, selection.cols)
        computed = int((missing & np.isfinite(values)).sum())  # not those found not comparable meanwhile
        notes.append(f"computed {computed:,} value(s) now{source}, read {cached:,} from the cache")
    else:
        notes.append(f"read all {cached:,} values from the cache, computed none now")
    left_out = {r.key: r.left_out or cache.left_out[r.identity] for r in selection.rows + selection.cols
                if r.left_out or r.identity in cache.left_out}
    if left_out:  # holes: their rows and columns are empty, whatever another matrix cached
        values[[r.key in left_out for r in selection.rows], :] = np.nan
        values[:, [c.key in left_out for c in selection.cols]] = np.nan
    unit = selection.rows[0].run.manifest.get("step_unit", "step")
    return SimilarityMatrix(values, [r.key for r in selection.rows], [c.key for c in selection.cols], measure,
                            params, notes, unit if isinstance(unit, str) else "step", left_out, computed, cached)


def _comparable(reps: list[Stored], cache: SimilarityCache) -> np.ndarray:
    """Which of ``reps`` can be compared: neither ruled out by its record nor found not comparable before."""
    return np.array([not r.left_out and r.identity not in cache.left_out for r in reps], dtype=bool)


def similarity(logdir: LogDir | str | os.PathLike, runs: str | Sequence[str], step: int | None = None, *,
               layers: Sequence[str] | None = None, measure: str = "cka", kernel: str = "linear",
               debiased: bool = True, sigma: float = RBF_SIGMA, batch_size: int | None = None,
               random_state: int = 0, progress: ProgressCallback | None = None,
               executor: Executor | None = None, probe_check: bool = True) -> SimilarityMatrix:
    """The layers of run A (rows) against the layers of run B (columns) at one snapshot.

    Parameters
    ----------
    logdir : path or LogDir
    runs : str or (str, str)
        Two runs, or one (compared with itself: the diagonal is 1 for CKA, 0 for Procrustes). Both must hold
        the same probe ids and, where capture stored their digest, the same probe inputs (else
        :class:`~repviz.similarity.sources.ProbeMismatchError`, one line naming both; see ``probe_check``).
        Snapshots of a subset of the probe (``ActivationLogger(batch_probe=...)``) are compared with the others
        on the probe points every representation of the matrix holds; the notes say how many.
    step : int or None, default=None
        The snapshot; None: the latest one that every chosen layer of both runs has.
    layers : list of str or None, default=None
        Which layers (each run's in model order); None: all.
    measure : {"cka", "procrustes"}, default="cka"
        Centred kernel alignment (Kornblith et al. 2019; a similarity in [0, 1], debiased values may dip below
        0) or the orthogonal Procrustes shape distance (Williams et al. 2021; 0 = the same up to rotation,
        translation and scale).
    kernel : {"linear", "rbf"}, default="linear"
        CKA only: dot products, or a Gaussian exp(-d²/(2 (sigma · median d)²)).
    debiased : bool, default=True
        CKA only: the unbiased HSIC estimator (Song et al. 2007), whose value for independent representations
        is near 0 at any probe count; the biased one rises with width / probes.
    sigma : float, default=0.8
        RBF CKA only: the bandwidth as a fraction of the median probe distance.
    batch_size : int or None, default=None
        CKA only: minibatch CKA over batches of this many probes (Nguyen et al. 2021: unbiased HSIC summed over
        the batches), for probe sets too large for one n × n Gram matrix; None: all probes at once up to 2,048,
        batches of 1,024 above (``repviz.similarity.options.AUTO_*``), which the notes say.
    random_state : int, default=0
        Seeds the minibatches.
    progress : callable or None
        ``(stage, done, total, message)`` events (:mod:`repviz.progress`) while values are computed.
    executor : Executor or None
        Where the meta bank's vectors and Gram blocks are computed (:mod:`repviz.executors`, e.g. a
        ``repviz.distributed.DaskExecutor`` on a cluster that sees the log directory); the other measures
        compute in this process.
    probe_check : bool, default=True
        Refuse runs recorded on different probe inputs; False when their inputs correspond though their values
        differ (the same examples preprocessed differently). Not part of the values' cache identity.

    Returns
    -------
    SimilarityMatrix
        Values are cached under ``<logdir>/plugins/repviz-meta/similarity-*``: a second call computes nothing;
        a new snapshot or run adds only its pairs. Linear CKA up to 3,000 probes comes from the meta bank's
        vectors (shared with ``MetaSNE(transform="cka")``).
    """
    logdir = _prepared(logdir, executor)
    options = dict(measure=measure, kernel=kernel, debiased=debiased, sigma=sigma, batch_size=batch_size,
                   random_state=random_state)
    return _matrix(logdir, between_runs(logdir, runs, step, layers, probe_check), options, True, progress,
                   executor)


def similarity_over_training(logdir: LogDir | str | os.PathLike, run: str, layer: str,
                             steps: Sequence[int] | None = None, *, measure: str = "cka", kernel: str = "linear",
                             debiased: bool = True, sigma: float = RBF_SIGMA, batch_size: int | None = None,
                             random_state: int = 0, progress: ProgressCallback | None = None,
                             executor: Executor | None = None) -> SimilarityMatrix:
    """The snapshots ``steps`` (None: all) of one layer against each other: how training moved it. The options
    are those of :func:`similarity`."""
    logdir = _prepared(logdir, executor)
    options = dict(measure=measure, kernel=kernel, debiased=debiased, sigma=sigma, batch_size=batch_size,
                   random_state=random_state)
    return _matrix(logdir, over_training(logdir, run, layer, steps), options, True, progress, executor)


def cached_similarity(logdir: LogDir | str | os.PathLike, runs: str | Sequence[str], step: int | None = None, *,
                      layer: str | None = None, layers: Sequence[str] | None = None,
                      steps: Sequence[int] | None = None, probe_check: bool = True,
                      **options) -> SimilarityMatrix | None:
    """The matrix of :func:`similarity` (or, with ``layer``, of :func:`similarity_over_training` for ``runs``'
    first run) if every value is cached already, else None; never computes (what a server answers at once
    while a background job computes the rest). ``options``: ``measure``, ``kernel``, ``debiased``, ``sigma``,
    ``batch_size``, ``random_state``; ``probe_check`` as there."""
    logdir = _open(logdir)
    if layer is not None:
        run = runs if isinstance(runs, str) else runs[0]
        return _matrix(logdir, over_training(logdir, run, layer, steps), options, False, None)
    return _matrix(logdir, between_runs(logdir, runs, step, layers, probe_check), options, False, None)
