"""Embed every layer of every run at every snapshot: aligned, cached, resumable, in parallel.

One call, :func:`embed_logdir`, serves the CLI (``repviz embed``), Python and the TensorBoard plugin. It is two
steps that can be called apart: :func:`repviz.planning.plan_embeddings` reads the store and returns a
:class:`~repviz.planning.Plan` (the chains left to compute, what is cached, what is known to fail), and
:func:`execute` carries a plan out with an executor (:mod:`repviz.executors`): here, in worker processes, or on a
cluster. The methods and their cache keys are in :mod:`repviz.methods`, one chain's work in :mod:`repviz.chains`.

Alignment (``align=``)
    ``"snapshots"`` (default): the snapshots of one layer form a chain, so that consecutive pictures differ only
    by what the network changed. Methods that accept an initial layout (t-SNE, SMACOF MDS, Sammon, the elastic
    embedding, UMAP) start snapshot k from the stored embedding of snapshot k−1 and continue the optimisation with
    the policy of the method's registration (:mod:`repviz.methods`; t-SNE's is
    :mod:`repviz.manifold.tsne.continuation`). Snapshot 0 gets the method's own initialisation (PCA for t-SNE). The
    other methods are computed independently, then rotated/reflected onto snapshot k−1 by orthogonal Procrustes
    (:func:`repviz.align.align_to`; distances are untouched).
    ``"layers"``: the same, along the layers of one snapshot (layer l continues from layer l−1).
    ``"none"``: every representation on its own.

Probe subsets
    A snapshot of a subset of the probe (``ActivationLogger(batch_probe=...)``, :meth:`repviz.store.Run.rows`) is
    embedded as it is stored: one row per stored row, in that order (the sidecar's ``rows`` names the subset). Two
    consecutive snapshots of a chain are linked through the probe points both hold: a continuation starts them
    where they were and every other point at the mean position of its 5 nearest shared points in its own
    representation (:func:`repviz.chains.carry_layout`); Procrustes is fitted on the shared points and moves all.
    The sidecar's ``common_points`` says how many were shared; with fewer than 3 the snapshot starts afresh.

Cache
    Results live in the store under ``embeddings/<method>-<hash>/<layer>/<step>.npy``; the hash covers the method,
    every parameter that changes the result (the estimator's full ``get_params()`` except ``n_jobs``/``verbose``),
    the alignment mode and the continuation parameters. The sidecar records the CRC32 of the activations it was
    computed from and the representation it was aligned to. A stored embedding is reused only if both still
    match; the first one that does not (source rewritten, chain changed) is recomputed with everything after it in
    its chain. Every file is written atomically as soon as it is computed, so a run killed by Ctrl-C or SIGKILL
    resumes from the last stored snapshot, and running the same command twice computes nothing. Each key's
    ``method.json`` also lists the requests (method, user parameters, alignment, repviz version) that resolved to
    it, so a repeated request finds its key without importing the numerical code.

Parallelism
    Chains are sequential (k needs k−1); the executor's workers take whole chains, across runs, layers and
    methods. :class:`~repviz.executors.LocalExecutor` (``jobs`` spawned worker processes, each with
    ``max(1, cores // jobs)`` numba/BLAS threads, so the machine is never oversubscribed; Ctrl-C stops them at
    once, what they stored is kept) or :class:`repviz.distributed.DaskExecutor` (one Dask task per chain on a
    cluster), storing the same files, so either can resume the other's work.

Failures
    A representation that cannot be embedded (NaN or infinite values after divergence, a method error) is reported
    in :attr:`EmbedResult.failed` and skipped; the chain continues from the last good snapshot. One that is the
    same for every probe point (a dead layer, marked by capture or found on reading) is not a failure: it is left
    out and listed in :attr:`EmbedResult.constant`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from .chains import lost_chain
from .executors import Executor, LocalExecutor, check_jobs
from .methods import DEFAULT_METHOD
from .planning import Plan, plan_embeddings, run_rest
from .progress import ProgressCallback, TerminalProgress, fan_out, report
from .store import DamagedFileError, LogDir, Run, open_logdir


@dataclass
class EmbedResult:
    """What :func:`embed_logdir` did: counts, failures, the representations left out as constant, the cache key
    of each method and a summary."""

    computed: int
    cached: int
    failed: list[dict]
    keys: dict[str, str]
    rows: list[dict]
    seconds: float
    constant: list[dict] = field(default_factory=list)

    @classmethod
    def from_plan(cls, plan: Plan, results: Iterable[dict], seconds: float) -> EmbedResult:
        """The outcome of ``plan`` given what its tasks returned (:func:`repviz.chains.run_chain`; summary read
        from the store)."""
        outcomes = plan.failed + list(results)
        failed = sorted((r for r in outcomes if r["status"] == "failed"), key=_where)
        constant = sorted((r for r in outcomes if r["status"] == "constant"), key=_where)
        rows = []
        for run in plan.runs:
            for layer in plan.layers[run.name]:
                for name, key in plan.keys.items():
                    stored = [s for s in run.embeddings.steps(key, layer) if plan.steps is None or s in plan.steps]
                    last = stored[-1] if stored else None
                    scores = {} if last is None else _scores(run, key, layer, last)
                    rows.append({"run": run.name, "layer": layer, "method": name, "key": key,
                                 "n_embedded": len(stored), "last_step": last, "scores": scores})
        return cls(sum(r["status"] == "computed" for r in outcomes), plan.cached, failed, dict(plan.keys), rows,
                   seconds, constant)

    def failure_lines(self) -> list[str]:
        """One line per run, layer, method and reason: which snapshots were skipped and why."""
        groups: dict[tuple, list[int]] = {}
        for f in self.failed:
            groups.setdefault((f["run"], f["layer"], f["method"], f["error"]), []).append(f["step"])
        return [f"run {run!r} layer {layer!r} ({method}) at step(s) {', '.join(map(str, steps))}: "
                f"{error.removeprefix('RepresentationError: ')}"
                for (run, layer, method, error), steps in groups.items()]

    def constant_line(self) -> str:
        """One line naming the representations left out as constant (empty when none)."""
        if not self.constant:
            return ""
        steps: dict[tuple, list[int]] = {}
        for c in self.constant:
            steps.setdefault((c["run"], c["layer"]), []).append(c["step"])
        where = [f"{run!r}/{layer!r} at step(s) {', '.join(map(str, sorted(set(s))))}"
                 for (run, layer), s in list(steps.items())[:5]]
        more = f"; ... ({len(steps)} layers in all)" if len(steps) > 5 else ""
        return (f"left out {len(self.constant)} constant representation(s), the same for every probe point (e.g. "
                f"a dead ReLU layer; nothing to embed): {'; '.join(where)}{more}")

    def table(self) -> str:
        """The summary: per run, layer and method, the last snapshot's quality scores."""
        head = ("run", "layer", "method", "snapshots", "last step", "trust", "kNN kept", "10-NN acc")
        lines = [head]
        for r in self.rows:
            s = r.get("scores") or {}
            lines.append((r["run"], r["layer"], r["method"], str(r["n_embedded"]),
                          "-" if r["last_step"] is None else str(r["last_step"]),
                          *(f"{s[k]:.3f}" if k in s else "-"
                            for k in ("trustworthiness", "knn_preservation", "knn_accuracy"))))
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        text = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                for row in lines]
        constant = f", {len(self.constant)} constant (left out)" if self.constant else ""
        total = (f"{self.computed} computed, {self.cached} cached, {len(self.failed)} failed{constant} "
                 f"in {self.seconds:.1f} s")
        return "\n".join(text + [total])


def _where(result: dict) -> tuple:
    return result["run"], result["layer"], result["step"]


def _scores(run: Run, key: str, layer: str, step: int) -> dict:
    """The quality scores stored with an embedding ({} when its sidecar is damaged: it is computed again next
    time)."""
    try:
        return run.embeddings.info(key, layer, step).get("scores", {})
    except DamagedFileError:
        return {}


def execute(plan: Plan, executor: Executor | None = None, *, progress: ProgressCallback | None = None
            ) -> EmbedResult:
    """Compute what ``plan`` lists, storing every embedding as soon as it is computed.

    Parameters
    ----------
    plan : Plan
        From :func:`~repviz.planning.plan_embeddings`.
    executor : Executor, optional
        Where the chains run (:mod:`repviz.executors`); default ``LocalExecutor()``, this process on every core.
        ``LocalExecutor(jobs)`` spawns worker processes; ``repviz.distributed.DaskExecutor(client)`` runs one
        Dask task per chain on a cluster.
    progress : callable, optional
        Receives ``("embed", done, total, "")`` events (:mod:`repviz.progress`).

    Returns
    -------
    EmbedResult

    Ctrl-C (or any error) stops the workers at once; what they stored is kept, and planning again resumes from
    there. A worker that dies (e.g. killed by the out-of-memory killer) is replaced: what its chain stored counts,
    the rest of the chain is reported failed, and the other chains go on.
    """
    start = time.perf_counter()
    executor = LocalExecutor() if executor is None else executor
    plan.write_method_notes()
    counted = 0

    def advance(n: int = 1) -> None:
        nonlocal counted
        counted = min(plan.total, counted + n)
        report(progress, "embed", counted, plan.total)

    report(progress, "embed", 0, plan.total)
    results = [r for chain in executor.map(run_rest, plan.tasks, advance, lost_chain) for r in chain]
    return EmbedResult.from_plan(plan, results, time.perf_counter() - start)


def embed_logdir(logdir, methods: Sequence[str] = (DEFAULT_METHOD,), params: dict[str, dict] | None = None, *,
                 runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
                 steps: Sequence[int] | None = None, align: str = "snapshots", jobs: int = 1,
                 score_sample: int | None = 1000, progress: bool | None = None,
                 on_progress: ProgressCallback | None = None, executor: Executor | None = None) -> EmbedResult:
    """Embed every selected layer of every selected run at every snapshot, skipping what is already stored.

    Parameters
    ----------
    logdir : path or LogDir
        A log directory written by ``repviz.ActivationLogger``.
    methods : sequence of str, default=("tsne",)
        Names in :data:`METHODS`: "tsne", "pca", "cmds" (classical MDS), "mds" (SMACOF), "sammon", "isomap",
        "lle", "spectral", "diffusion", "kpca" (kernel PCA), "force" (force-directed), "lda" (uses the labels).
    params : dict of dict, optional
        Per-method estimator parameters, e.g. ``{"tsne": {"perplexity": 50}}``. Each combination is cached under
        its own key.
    runs, layers : sequence of str, optional
        Restrict to these runs / layers (default: all). A layer must exist in at least one selected run.
    steps : sequence of int, optional
        Restrict to these snapshots (they then form the alignment chain).
    align : {"snapshots", "layers", "none"}, default="snapshots"
        What each embedding is aligned to; see the module docstring.
    jobs : int, default=1
        Worker processes (``LocalExecutor(jobs)``); -1 for one per core. Parallelism is across chains (run x layer
        x method for ``align="snapshots"``), each worker using ``cores // jobs`` threads. Workers are spawned, so a
        script calling this with ``jobs > 1`` needs the usual ``if __name__ == "__main__":`` guard.
    score_sample : int or None, default=1000
        Quality scores use this many query points (all neighbours still searched among all points); None: all.
        Exact scores cost O(n²) time per embedding. Not part of the cache key (it changes no embedding).
    progress : bool or None, default=None
        Show a progress line with ETA on stderr; None: only on an interactive terminal outside CI.
    on_progress : callable, optional
        Also receives ``(stage, done, total, message)`` events (:mod:`repviz.progress`), e.g. a
        :class:`~repviz.progress.ProgressState` that a server polls.
    executor : Executor, optional
        Where the chains run instead of ``LocalExecutor(jobs)`` (then leave ``jobs`` at 1), e.g.
        ``repviz.distributed.DaskExecutor(client)`` (the dask extra: ``pip install ".[dask]"`` in the checkout): the
        log directory must be on storage every worker sees at the same path (checked first); the workers store the
        results exactly as a local run would, so either can resume the other's work.

    Returns
    -------
    EmbedResult
        Counts, failures (each: run, layer, step, method, error) and ``table()``, the summary of quality scores.

    Cost: one embedding per (run, layer, snapshot, method) not already stored; cached ones cost a sidecar read.

    This is ``execute(plan_embeddings(logdir, ...), executor, progress=...)`` with a terminal progress line;
    call the two apart to inspect or ship the plan (:class:`~repviz.planning.Plan`).
    """
    start = time.perf_counter()
    check_jobs(jobs, "embed_logdir")
    if executor is None:
        executor = LocalExecutor(jobs)
    elif jobs != 1:
        raise ValueError(f"jobs={jobs} and executor= both choose where the chains run; with an executor, it does "
                         f"(leave jobs=1)")
    log = logdir if isinstance(logdir, LogDir) else open_logdir(logdir)
    plan = plan_embeddings(executor.prepare(log), methods, params, runs=runs, layers=layers, steps=steps, align=align,
                           score_sample=score_sample)
    bar = TerminalProgress("repviz embed", enabled=progress)
    try:
        result = execute(plan, executor, progress=fan_out(bar, on_progress))
    finally:
        bar.close()
    return replace(result, seconds=time.perf_counter() - start)
