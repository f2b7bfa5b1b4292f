"""MetaSNE: one point per representation (run, layer, snapshot), placed by the distances between them.

Results are saved in the log directory as an :class:`~repviz.store.Artifacts` directory
``<logdir>/plugins/repviz-meta/<name>/`` holding::

    coords.npy      (R, n_components) float32   the map
    distances.npy   (R, R) float64              distances between representations (chord or angle)
    result.json     keys [[run, layer, step], ...] in row order, parameters, explained_variance, robustness,
                    n_probe (the probe points compared), n_probe_total, n_pairs, notes (one line each: the
                    points compared, the pair sample, snapshots of a subset left out), the representations left
                    out and why

The vectors behind them are cached next to it, one :class:`~repviz.meta.bank.VectorBank` per transform, set of
compared probe points and pair sample (named by :meth:`~repviz.store.LogDir.vector_cache`), so a later call embeds
new snapshots without recomputing old ones, and a map over another subset of the probe never reuses them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence

import numpy as np

from .._validation import NONE, Interval, Options, validate_params
from ..chains import CONSTANT
from ..executors import Executor
from ..progress import ProgressCallback
from ..store import LogDir, checksum, open_logdir, temporary_artifacts
from .bank import VectorBank
from .distances import (
    DEFAULT_MAX_PROBES,
    add_vectors,
    from_sq_chords,
    pair_sample,
    rank_correlation,
    vector_id,
)
from .embedding import embed
from .options import EMBEDDINGS, METRICS, SUBSETS, TRANSFORMS
from .result import MetaResult
from .sources import compared_rows, from_arrays, from_logdir, input_representation, warn_skipped
from .tasks import add_vectors_with, gram_with
from .vectors import vector_length


class MetaSNE:
    """Embed the space of representations (Olah 2015, "Visualizing Representations").

    Every representation (a layer at a snapshot of a run, the raw input, or any array of probe activations)
    becomes one unit vector built from its probe pairwise distances; the distances between those vectors are
    embedded jointly, so layers, networks and training paths share one map.

    Parameters
    ----------
    transform : {"dist", "sqrt", "rank", "cka", "rbf_cka"}, default="dist"
        What each vector holds: probe distances (Olah), their square roots (close pairs weigh more), their
        centred ranks (RSA; cosine = Spearman), the centred linear Gram (cosine = linear CKA) or the centred RBF
        Gram (kernel CKA, median-distance bandwidth). See :mod:`repviz.meta.vectors`.
    metric : {"chord", "angle"}, default="chord"
        Distance between unit vectors: sqrt(2 - 2 cos) or arccos(cos). Both are metrics.
    embedding : {"mds", "smacof", "tsne"}, default="mds"
        Classical MDS (deterministic; ``explained_variance`` says how much the map shows), SMACOF metric MDS
        started from it, or t-SNE on the precomputed distances started from it (meta-SNE proper).
    n_components : int, default=2
    perplexity : float or "auto", default="auto"
        t-SNE only; "auto" is min(30, (R - 1) / 3) for R representations.
    max_probes : int, default=3000 (``repviz.meta.distances.DEFAULT_MAX_PROBES``)
        Above this many compared probes, every vector holds the same seeded random subset of ``n_pairs`` probe
        pairs instead of all n(n - 1)/2: memory and time per vector stay bounded and nothing holds an n × n
        array (at 50,000 probes, 4.5 million of 1.25 billion pairs). The result's ``info["notes"]`` says so.
    n_pairs : int or None, default=None
        Size of that subset; None: as many pairs as ``max_probes`` probes have (4.5 million).
    subsets : {"common", "whole"}, default="common"
        Snapshots that hold a subset of the probe (``ActivationLogger(batch_probe=...)``): "common" compares
        every representation on the probe points all of them hold (batch snapshots of 1,000 points among
        whole-probe ones: all on those 1,000, so the batch-resolution training path shares the map); "whole"
        leaves the subset snapshots out and compares the rest on the whole probe. ``info["notes"]`` says which
        points were compared ("compared on the 1,000 probe points common to all 65 representations (of 50,000)").
    robustness : bool, default=False
        Also compute the "dist" and "cka" distances and report their Spearman correlation
        (``result.robustness``): near 1 means the map does not hinge on the choice of transform. Costs a second
        set of vectors.
    cache : bool, default=True
        With a log directory, keep vectors and distances in it so later calls only add what is new.
    block_bytes : int, default=256 MiB
        Memory for one column block when accumulating the R×R Gram matrix.
    random_state : int, default=0
        Seeds the pair subset and the t-SNE/SMACOF refinements.
    progress : callable or None
        Receives ``(stage, done, total, message)`` events (:mod:`repviz.progress`) while vectors and distances
        are computed.

    Notes
    -----
    Time: O(n² · width) per representation for its vector (one float32 GEMM), O(R² · n²) for the distances
    (float64, column blocks read from disk), O(R³) for MDS. Memory: O(n²) for one vector plus one column block;
    the vectors (4 · n²/2 bytes each) stay on disk. Unlike scikit-learn estimators, :meth:`fit` returns a
    :class:`MetaResult` rather than ``self``: the result is what gets saved, reloaded and served.

    References
    ----------
    Olah (2015), "Visualizing Representations: Deep Learning and Human Beings".
    Kornblith, Norouzi, Lee & Hinton (2019), "Similarity of Neural Network Representations Revisited".

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> reps = [rng.normal(size=(60, 5)) for _ in range(6)]
    >>> result = MetaSNE().fit(reps)
    >>> result.coords.shape, result.distances.shape
    ((6, 2), (6, 6))
    """

    def __init__(self, transform: str = "dist", metric: str = "chord", embedding: str = "mds", *,
                 n_components: int = 2, perplexity: float | str = "auto", max_probes: int = DEFAULT_MAX_PROBES,
                 n_pairs: int | None = None, subsets: str = "common", robustness: bool = False, cache: bool = True,
                 block_bytes: int = 256 << 20, random_state: int = 0, progress: ProgressCallback | None = None):
        self.transform = transform
        self.metric = metric
        self.embedding = embedding
        self.n_components = n_components
        self.perplexity = perplexity
        self.max_probes = max_probes
        self.n_pairs = n_pairs
        self.subsets = subsets
        self.robustness = robustness
        self.cache = cache
        self.block_bytes = block_bytes
        self.random_state = random_state
        self.progress = progress

    _parameter_constraints = {
        "transform": [Options(*TRANSFORMS)],
        "metric": [Options(*METRICS)],
        "embedding": [Options(*EMBEDDINGS)],
        "n_components": [Interval(int, 1, None, "left")],
        "max_probes": [Interval(int, 3, None, "left")],
        "n_pairs": [Interval(int, 1, None, "left"), NONE],
        "subsets": [Options(*SUBSETS)],
        "perplexity": [Interval(float, 0, None, "neither"), Options("auto")],
    }

    def _validate_params(self) -> None:
        validate_params(vars(self), self._parameter_constraints, "MetaSNE")

    def _bank(self, transform: str, n: int, pairs, logdir: LogDir | None, probe_id: str,
              scratch: contextlib.ExitStack) -> VectorBank:
        """The vector bank of one transform: cached in the log directory (one per set of compared probe points
        and pair sample), else in a temporary directory that ``scratch`` deletes."""
        if logdir is None:
            art = scratch.enter_context(temporary_artifacts("repviz-meta-"))
        else:
            n_pairs, seed = (None, None) if pairs is None else (len(pairs), pairs.random_state)
            art = logdir.vector_cache(transform, probe_id, n_pairs, seed)
        return VectorBank(art, vector_length(n, transform, pairs), block_bytes=self.block_bytes)

    def fit(self, source, *, runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
            inputs=None, executor: Executor | None = None, probe_check: bool = True) -> MetaResult:
        """Compute the distances between all representations of ``source`` and embed them jointly.

        Parameters
        ----------
        source : log directory (path or :class:`~repviz.store.LogDir`), list of arrays, or mapping
            A log directory contributes every stored (run, layer, step) of the selected ``runs`` and ``layers``
            (default all; all runs must share one probe set; snapshots of a probe subset as ``subsets`` says).
            Arrays (n_probe, ...) are keyed ("", "<index or name>", 0); a mapping may use (run, layer, step)
            tuples as keys.
        runs, layers : list of str, optional
            Log directory only: which runs and layers to compare.
        probe_check : bool, default=True
            Log directory only: refuse runs recorded on different probe inputs (the digests stored at capture
            differ; :class:`~repviz.meta.sources.ProbeMismatchError`, one line naming both). False when their
            inputs correspond though their values differ (the same examples preprocessed differently).
        inputs : array (n_probe, ...), optional
            The raw probe inputs, added as the landmark representation ``("<input>", "input", 0)``.
        executor : Executor, optional
            Compute the vectors (one task per representation) and the Gram matrix (one task per pair of vector
            blocks) with this executor (:mod:`repviz.executors`, e.g. ``repviz.distributed.DaskExecutor(client)``
            on a cluster; :mod:`repviz.meta.tasks`); the R×R matrix is assembled here. Needs a log directory
            that every worker sees at the same path (checked first) and ``cache=True`` (the workers write the
            vectors into it). Same distances as without it up to summation order.

        Returns
        -------
        MetaResult
        """
        self._validate_params()
        t0 = time.perf_counter()
        if executor is not None and not (isinstance(source, (str, os.PathLike, LogDir)) and self.cache):
            raise ValueError("fit(executor=...) computes from a log directory that the workers share, with "
                             "cache=True (they write the vectors into it); with arrays or cache=False, leave "
                             "executor out")
        if isinstance(source, (str, os.PathLike, LogDir)):
            logdir = source if isinstance(source, LogDir) else open_logdir(source)
            if executor is not None:
                logdir = executor.prepare(logdir)
            reps, ids = from_logdir(logdir, runs, layers, probe_check)
        else:
            if runs is not None or layers is not None:
                raise ValueError("runs= and layers= select from a log directory; with arrays, pass only the ones "
                                 "to compare")
            logdir, reps = None, from_arrays(source)
            ids = np.arange(len(reps[0].load()))
        constant = [(r, CONSTANT) for r in reps if r.constant]  # left out, known without reading
        reps = [r for r in reps if not r.constant]
        if inputs is not None:
            reps.append(input_representation(inputs, len(ids)))
        reps, compared = compared_rows(reps, len(ids), self.subsets)
        n = len(compared.positions)
        probe_id = checksum(np.asarray(ids)[compared.positions]) if logdir is not None else ""
        transforms = list(dict.fromkeys([self.transform] + (["dist", "cka"] if self.robustness else [])))
        pairs = pair_sample(n, self.max_probes, self.n_pairs, self.random_state)
        seconds = {}
        with contextlib.ExitStack() as scratch:
            banks = {t: self._bank(t, n, pairs, logdir if self.cache else None, probe_id, scratch)
                     for t in transforms}
            if executor is None:
                kept, skipped = add_vectors(reps, banks, pairs, self.progress, skip_invalid=logdir is not None)
            else:
                kept, skipped = add_vectors_with(executor, logdir, reps, banks, pairs, self.progress)
            seconds["vectors"] = time.perf_counter() - t0
            chords = {t: bank.sq_chords([vector_id(r, t) for r in kept], self.progress,
                                        None if executor is None else gram_with(executor, bank))
                      for t, bank in banks.items()}
            del banks  # the chords are the banks' own matrices: from here on they are this function's alone
        skipped = constant + skipped
        warn_skipped(skipped)
        # the distances overwrite their squared chords and the others go before the embedding: R x R matrices
        # are the memory of a large map (README: about 5 at the peak)
        robustness = rank_correlation(chords["dist"], chords["cka"]) if self.robustness else None
        D = from_sq_chords(chords.pop(self.transform), self.metric, overwrite=True)
        chords.clear()
        seconds["distances"] = time.perf_counter() - t0 - seconds["vectors"]
        coords, info = embed(D, self.embedding, self.n_components, self.perplexity, self.random_state)
        seconds["embedding"] = time.perf_counter() - t0 - seconds["vectors"] - seconds["distances"]
        seconds["total"] = time.perf_counter() - t0
        params = {k: v for k, v in vars(self).items() if k != "progress"}
        notes = compared.notes(self.subsets) + ([] if pairs is None else [
            f"pair sample: each vector holds {len(pairs):,} of the {pairs.n_total:,} probe pairs (seed "
            f"{pairs.random_state}), automatic above max_probes={self.max_probes:,} probes"])
        return MetaResult(
            keys=[r.key for r in kept], coords=coords.astype(np.float32), distances=D, params=params,
            explained_variance=info.pop("explained_variance"), robustness=robustness,
            info={**info, "n_probe": n, "n_probe_total": compared.n_probe,
                  "n_pairs": None if pairs is None else len(pairs), "notes": notes,
                  "left_out": [{"key": list(r.key), "reason": why} for r, why in skipped], "seconds": seconds})
