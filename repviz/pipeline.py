"""Embed every layer of every run at every snapshot: aligned, cached, resumable, in parallel.

One call, :func:`embed_logdir`, serves the CLI (``repviz embed``), Python and the TensorBoard plugin.

Alignment (``align=``)
    ``"snapshots"`` (default): the snapshots of one layer form a chain, so that consecutive pictures differ only
    by what the network changed. Methods that accept an initial layout (t-SNE, SMACOF MDS, Sammon) start
    snapshot k from the stored embedding of snapshot k−1 and continue the optimisation with the method's
    *continuation* parameters. For t-SNE: the previous layout at its own scale (``rescale_init=False``, not shrunk
    to std 1e-4 like a PCA start), no early exaggeration (the clusters are already formed), 300 iterations at
    ``learning_rate="auto"``, which without exaggeration is n (the rate of t-SNE's main phase). Snapshot 0 gets
    the method's own initialisation (PCA for t-SNE). The other methods
    (PCA, classical MDS, Isomap, LLE, spectral, diffusion maps, kernel PCA, force-directed, LDA) are computed
    independently, then rotated/reflected onto snapshot k−1 by orthogonal Procrustes
    (:func:`repviz.align.align_to`; distances are untouched).
    ``"layers"``: the same, along the layers of one snapshot (layer l continues from layer l−1).
    ``"none"``: every representation on its own.

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
    Chains are sequential (k needs k−1); ``jobs`` worker processes (spawned, not forked, so no numba/BLAS thread
    pool is copied mid-flight) take whole chains, across runs, layers and methods. Each worker gets
    ``max(1, cores // jobs)`` numba/BLAS threads, so the machine is never oversubscribed.

Failures
    A representation that cannot be embedded (a dead layer whose activations are all equal, NaN or infinite values
    after divergence, a method error) is reported in :attr:`EmbedResult.failed` and skipped; the chain continues
    from the last good snapshot.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cached_property
from queue import Empty
from typing import Any

import numpy as np

from . import __version__
from .align import align_to
from .progress import ProgressCallback, TerminalProgress, fan_out, report
from .store import NotFoundError, Run, load_array, open_logdir

#: Bumped when the pipeline's output for the same inputs and parameters changes; part of every cache key.
PIPELINE_VERSION = 1

ALIGN_MODES = ("snapshots", "layers", "none")

# Parameters that change speed or logging, never the result: left out of the cache key.
_NOT_HASHED = frozenset({"n_jobs", "verbose"})


@dataclass(frozen=True)
class Method:
    """How the pipeline runs one manifold method.

    Attributes
    ----------
    name : str
        What users type (``--method tsne``).
    target : str
        ``"module:Class"`` of a scikit-learn-style estimator, imported only when the method is used.
    align : {"init", "procrustes"}
        "init": the estimator accepts ``init=`` an earlier embedding and continues from it;
        "procrustes": results are rotated onto the previous one after fitting.
    defaults : dict
        Pipeline defaults that override the estimator's (e.g. ``random_state=0`` so runs are reproducible).
    continuation : dict
        Parameters used instead of the defaults when continuing from an earlier embedding ("init" only).
    supervised : bool
        The estimator is fitted with the probe labels as ``y`` (e.g. LDA).
    """

    name: str
    target: str
    align: str
    defaults: dict = field(default_factory=dict)
    continuation: dict = field(default_factory=dict)
    supervised: bool = False

    def estimator_class(self) -> type:
        module, _, attr = self.target.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"method {self.name!r} is not available: cannot import {self.target} ({e})") from e


#: The registered methods, by name. Extend with :func:`register_method`.
METHODS: dict[str, Method] = {}


def register_method(name: str, target: str, *, align: str, defaults: dict | None = None,
                    continuation: dict | None = None, supervised: bool = False) -> Method:
    """Make an estimator available to the pipeline (and to ``repviz embed --method NAME``).

    ``target`` is ``"module:Class"``, imported lazily; the class follows scikit-learn's conventions
    (``get_params``, ``fit_transform``).
    """
    if align not in ("init", "procrustes"):
        raise ValueError(f"The 'align' parameter of register_method must be a str among {{'init', 'procrustes'}}. "
                         f"Got {align!r} instead.")
    if continuation and align != "init":
        raise ValueError(f"continuation parameters apply to align='init' methods only; {name!r} has align={align!r}")
    method = Method(name, target, align, dict(defaults or {}), dict(continuation or {}), supervised)
    METHODS[name] = method
    return method


# t-SNE continuing from the previous snapshot (the scheme in the module docstring). On a converged MLP this moves
# points ~10x less than independent fits; a lower learning rate would move them even less but follow real changes
# of the representation more slowly.
register_method("tsne", "repviz.manifold:TSNE", align="init", defaults={"random_state": 0},
                continuation={"rescale_init": False, "early_exaggeration_iter": 0, "max_iter": 300})
# Iterative stress minimisers continue from the previous layout as it is.
register_method("mds", "repviz.manifold:MDS", align="init", defaults={"random_state": 0})
register_method("sammon", "repviz.manifold:Sammon", align="init", defaults={"random_state": 0})
for _name, _target in (("pca", "PCA"), ("cmds", "ClassicalMDS"), ("isomap", "Isomap"),
                       ("lle", "LocallyLinearEmbedding"), ("spectral", "SpectralEmbedding"),
                       ("diffusion", "DiffusionMap"), ("kpca", "KernelPCA"), ("force", "ForceDirectedLayout")):
    register_method(_name, f"repviz.manifold:{_target}", align="procrustes", defaults={"random_state": 0})
register_method("lda", "repviz.manifold:LinearDiscriminantAnalysis", align="procrustes",
                defaults={"n_components": 2}, supervised=True)


# --------------------------------------------------------------------------------------------------------------
# Parameters and cache keys
# --------------------------------------------------------------------------------------------------------------

def params_hash(obj: Any) -> str:
    """A stable 10-hex-digit hash of JSON-able ``obj`` (key order and int/float spelling of whole numbers do
    not matter; the same on every machine and Python version)."""
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    return obj


@dataclass(frozen=True)
class Resolved:
    """One method with its full parameters, ready to run; ``key`` names its results in the store."""

    method: Method
    params: dict  # every estimator parameter, as passed to it
    align: str
    default: bool  # pipeline defaults (no user parameters, align="snapshots"): what `run.embedding(...)` prefers

    @cached_property
    def key(self) -> str:
        """``<method>-<hash>``: the hash covers what changes the result (see the module docstring)."""
        return f"{self.method.name}-{params_hash({k: v for k, v in self.describe().items() if k != 'default'})}"

    @property
    def chain_align(self) -> str | None:
        """How each representation is tied to the previous one in its chain ("init", "procrustes" or None)."""
        return None if self.align == "none" else self.method.align

    def describe(self) -> dict:
        hashed = {k: v for k, v in self.params.items() if k not in _NOT_HASHED}
        return {"method": self.method.name, "params": hashed, "align": self.align, "default": self.default,
                "continuation": self.method.continuation if self.chain_align == "init" else {},
                "pipeline_version": PIPELINE_VERSION}


def _check_method(name: str, align: str) -> None:
    if align not in ALIGN_MODES:
        raise ValueError(f"The 'align' parameter of embed_logdir must be a str among "
                         f"{{{', '.join(map(repr, ALIGN_MODES))}}}. Got {align!r} instead.")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}")


def resolve(name: str, params: dict | None = None, align: str = "snapshots") -> Resolved:
    """Check a method name and user parameters, merge in the defaults, and compute the cache key.

    Raises ``ValueError`` with one clear line for an unknown method, an unknown parameter, an invalid value, or a
    parameter the alignment sets itself.
    """
    _check_method(name, align)
    method = METHODS[name]
    cls = method.estimator_class()
    accepted = cls().get_params()
    params = dict(params or {})
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r} for method {name!r}; it accepts: "
                         f"{', '.join(sorted(accepted))}")
    if method.align == "init" and align != "none" and "init" in params:
        raise ValueError(f"the 'init' parameter of {name!r} is set by the pipeline to continue from the previous "
                         f"embedding (align={align!r}); pass align='none' to choose the initialisation yourself")
    full = {**accepted, **{k: v for k, v in method.defaults.items() if k in accepted}, **params}
    estimator = cls(**full)
    if hasattr(estimator, "_validate_params"):
        estimator._validate_params()
    for k, v in full.items():
        if k not in _NOT_HASHED and not (v is None or isinstance(v, (bool, int, float, str, np.generic))):
            raise ValueError(f"the {k!r} parameter of {name!r} must be a number, string, bool or None for the "
                             f"pipeline to cache results by it; got a {type(v).__name__}")
    # "default" is a property of the values, not of how they were given: whiten=False spelled out is the default.
    defaults = {**accepted, **{k: v for k, v in method.defaults.items() if k in accepted}}
    default = align == "snapshots" and all(_canonical(full[k]) == _canonical(defaults[k])
                                           for k in full if k not in _NOT_HASHED)
    return Resolved(method, full, align, default=default)


# --------------------------------------------------------------------------------------------------------------
# One chain of representations (runs in a worker process or inline)
# --------------------------------------------------------------------------------------------------------------

@dataclass
class _Chain:
    run_root: str
    run_name: str
    resolved: Resolved
    items: list[tuple[str, int]]          # (layer, step) to compute, in chain order
    init_from: tuple[str, int] | None     # stored embedding that precedes items[0] in the chain
    score_sample: int | None
    n_jobs: int = 1                       # threads for the estimator (cores / worker processes)


class RepresentationError(ValueError):
    """A representation that cannot be embedded (dead layer, non-finite values)."""


def _nonfinite(record: dict) -> RepresentationError | None:
    """The error of a snapshot whose record counts non-finite values (known without reading the array)."""
    if not record.get("nonfinite"):
        return None
    return RepresentationError(f"{record['nonfinite']} non-finite value(s) (NaN or infinity) in the activations")


def _failure(run: str, layer: str, step: int, method: str, error: Exception) -> dict:
    return {"run": run, "layer": layer, "step": step, "method": method, "status": "failed",
            "error": f"{type(error).__name__}: {error}"}


def _representation(run: Run, layer: str, step: int) -> tuple[np.ndarray, str]:
    """The activations as a float32 matrix and the checksum of the file they came from."""
    record = run.record(layer, step)
    if error := _nonfinite(record):
        raise error
    X = np.asarray(load_array(run.root / record["file"]), dtype=np.float32)
    X = X.reshape(X.shape[0], -1)
    if not np.isfinite(X).all():
        raise RepresentationError("non-finite values (NaN or infinity) in the activations")
    if X.shape[0] < 3:
        raise RepresentationError(f"only {X.shape[0]} probe point(s); at least 3 are needed")
    if not np.ptp(X, axis=0).any():
        raise RepresentationError("all probe points have the same activations (a dead layer, e.g. every ReLU "
                                  "unit off); there is nothing to embed")
    return X, record["crc32"]


def _labels(run: Run) -> np.ndarray | None:
    labels = run.probe.labels
    if labels is None:
        return None
    labels = np.asarray(labels)
    return labels.argmax(axis=1) if labels.ndim == 2 else labels.reshape(len(labels))


def _fit(resolved: Resolved, X: np.ndarray, labels: np.ndarray | None, previous: np.ndarray | None,
         n_jobs: int) -> tuple[np.ndarray, dict]:
    if resolved.method.supervised and labels is None:
        raise RepresentationError(f"{resolved.method.name} needs the probe labels, and this run stored none")
    params = dict(resolved.params)
    if resolved.chain_align == "init" and previous is not None:
        params.update(resolved.method.continuation, init=np.array(previous, dtype=np.float32))
    if "n_jobs" in params and params["n_jobs"] is None:
        params["n_jobs"] = n_jobs
    estimator = resolved.method.estimator_class()(**params)
    Y = np.asarray(estimator.fit_transform(X, labels if resolved.method.supervised else None), dtype=np.float32)
    if not np.isfinite(Y).all():
        raise RepresentationError(f"{resolved.method.name} returned non-finite coordinates")
    if resolved.chain_align == "procrustes" and previous is not None:
        Y = align_to(Y, previous)
    diagnostics = {}
    for attr in ("n_iter_", "kl_divergence_"):
        value = getattr(estimator, attr, None)
        if isinstance(value, (int, float, np.integer, np.floating)):
            diagnostics[attr.rstrip("_")] = value.item() if isinstance(value, np.generic) else value
    return Y, diagnostics


def _scores(X: np.ndarray, Y: np.ndarray, labels: np.ndarray | None, sample: int | None) -> dict:
    from .metrics import quality_scores  # here, not at the top: a fully cached job never loads numba

    k = min(10, (X.shape[0] - 1) // 2)
    if k < 1:
        return {}
    return quality_scores(X, Y, labels, n_neighbors=k, max_exact=sample)


def _run_chain(chain: _Chain, report: Callable[[int], None]) -> list[dict]:
    run = Run(chain.run_root, chain.run_name)
    resolved = chain.resolved
    labels = _labels(run)
    previous = None if chain.init_from is None else np.array(run.read_embedding(resolved.key, *chain.init_from))
    previous_ref = None if chain.init_from is None else list(chain.init_from)
    results = []
    for layer, step in chain.items:
        start = time.perf_counter()
        try:
            X, crc32 = _representation(run, layer, step)
            Y, diagnostics = _fit(resolved, X, labels, previous, chain.n_jobs)
            scores = _scores(X, Y, labels, chain.score_sample)
        except Exception as e:  # one failing representation must not stop the others; it is reported
            results.append(_failure(chain.run_name, layer, step, resolved.method.name, e))
            report(1)
            continue
        seconds = time.perf_counter() - start
        info = {"method": resolved.method.name, "key": resolved.key, "params": resolved.describe()["params"],
                "align": resolved.align, "init_from": previous_ref,
                "source": {"layer": layer, "step": step, "crc32": crc32},
                "scores": scores, "seconds": round(seconds, 3), **diagnostics}
        run.write_embedding(resolved.key, layer, step, Y, info)
        previous, previous_ref = Y, [layer, step]
        results.append({"run": chain.run_name, "layer": layer, "step": step, "method": resolved.method.name,
                        "status": "computed", "seconds": seconds})
        report(1)
    return results


# Worker-process state: the queue on which it reports finished representations.
_WORKER_QUEUE = None


def _init_worker(queue) -> None:
    global _WORKER_QUEUE
    _WORKER_QUEUE = queue


def _run_chain_in_worker(chain: _Chain) -> list[dict]:
    return _run_chain(chain, _WORKER_QUEUE.put)


# --------------------------------------------------------------------------------------------------------------
# Planning: what is cached, what to compute
# --------------------------------------------------------------------------------------------------------------

def _chains_of(run: Run, layers: list[str], steps: Sequence[int] | None, align: str) -> list[list[tuple[str, int]]]:
    def steps_of(layer: str) -> list[int]:
        have = run.steps(layer)
        if steps is None:
            return have
        for s in steps:
            if s not in have:
                run.record(layer, s)  # raises NotFoundError naming the steps the layer has
        return sorted(set(steps))

    per_layer = {layer: steps_of(layer) for layer in layers}
    if align == "snapshots":
        return [[(layer, s) for s in per_layer[layer]] for layer in layers]
    if align == "layers":
        all_steps = sorted({s for ss in per_layer.values() for s in ss})
        return [[(layer, s) for layer in layers if s in per_layer[layer]] for s in all_steps]
    return [[(layer, s)] for layer in layers for s in per_layer[layer]]


def _plan_chain(run: Run, key: str, method: str,
                items: list[tuple[str, int]]) -> tuple[int, list[dict], int, tuple | None]:
    """Walk a chain through the cache. Returns (first index to compute, failures known without computing,
    number cached, the stored representation preceding the first to compute)."""
    previous = None
    known_failures, cached = [], 0
    for i, (layer, step) in enumerate(items):
        record = run.record(layer, step)
        if run.has_embedding(key, layer, step):
            info = run.embedding_info(key, layer, step)
            if (info.get("source", {}).get("crc32") == record["crc32"]
                    and info.get("init_from") == (None if previous is None else list(previous))):
                previous = (layer, step)
                cached += 1
                continue
        if error := _nonfinite(record):  # fails the same way every time; not a reason to recompute the rest
            known_failures.append(_failure(run.name, layer, step, method, error))
            continue
        return i, known_failures, cached, previous
    return len(items), known_failures, cached, previous


def _plan(runs: list[Run], run_chains: dict[str, list], key: str, method: str) -> tuple[int, list[dict], list]:
    """Plan every chain of one method: (number cached, known failures, [(run, items to compute, previous)])."""
    cached, failed, todo = 0, [], []
    for run in runs:
        for items in run_chains[run.name]:
            first, known, n_cached, previous = _plan_chain(run, key, method, items)
            cached += n_cached
            failed += known
            if first < len(items):
                todo.append((run, items[first:], previous))
    return cached, failed, todo


def _request_id(name: str, params: dict | None, align: str) -> str:
    """A hash of what the user asked for (not of what it resolves to), valid for this version of repviz."""
    return params_hash({"method": name, "params": dict(params or {}), "align": align,
                        "repviz_version": __version__, "pipeline_version": PIPELINE_VERSION})


def _known_key(runs: list[Run], request: str) -> str | None:
    """The key every run recorded for ``request`` (None if any run has not seen it)."""
    keys = set()
    for run in runs:
        found = [k for k in run.embedding_keys() if request in run.embedding_method(k).get("requests", [])]
        if len(found) != 1:
            return None
        keys.add(found[0])
    return keys.pop() if len(keys) == 1 else None


# --------------------------------------------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------------------------------------------

@dataclass
class EmbedResult:
    """What :func:`embed_logdir` did: counts, failures, the cache key of each method and a summary."""

    computed: int
    cached: int
    failed: list[dict]
    keys: dict[str, str]
    rows: list[dict]
    seconds: float

    def failure_lines(self) -> list[str]:
        """One line per run, layer, method and reason: which snapshots were skipped and why."""
        groups: dict[tuple, list[int]] = {}
        for f in self.failed:
            groups.setdefault((f["run"], f["layer"], f["method"], f["error"]), []).append(f["step"])
        return [f"run {run!r} layer {layer!r} ({method}) at step(s) {', '.join(map(str, steps))}: "
                f"{error.removeprefix('RepresentationError: ')}"
                for (run, layer, method, error), steps in groups.items()]

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
        total = (f"{self.computed} computed, {self.cached} cached, {len(self.failed)} failed "
                 f"in {self.seconds:.1f} s")
        return "\n".join(text + [total])


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@contextlib.contextmanager
def _thread_env(threads: int):
    """Thread counts that spawned workers inherit (read by numba and BLAS when they load, so set before)."""
    names = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    old = {k: os.environ.get(k) for k in names}
    os.environ.update({k: str(threads) for k in names})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _execute(chains: list[_Chain], workers: int, progress: ProgressCallback | None) -> list[dict]:
    total = sum(len(c.items) for c in chains)
    counted = 0

    def advance(n: int = 1) -> None:
        nonlocal counted
        counted += n
        report(progress, "embed", counted, total)

    report(progress, "embed", 0, total)
    if workers == 1:
        return [r for chain in chains for r in _run_chain(chain, advance)]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    results: list[dict] = []
    with _thread_env(chains[0].n_jobs):
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                   initializer=_init_worker, initargs=(queue,))
        pending = {pool.submit(_run_chain_in_worker, chain) for chain in chains}  # spawns the workers here
    try:
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            with contextlib.suppress(Empty):
                while True:
                    advance(queue.get_nowait())
            for future in done:
                results.extend(future.result())
    except BaseException:
        # Ctrl-C or an error: stop the workers now, not after their current chain (what they stored is kept).
        # The executor has no public way to do this.
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def _select(names: Iterable[str] | None, have: Iterable[str], what: str, where: str) -> list[str]:
    have = list(have)
    if names is None:
        return have
    names = list(names)
    for n in names:
        if n not in have:
            raise NotFoundError(f"{what} {n!r} is not in {where}; it has: {', '.join(map(repr, have)) or 'none'}")
    return names


def embed_logdir(logdir, methods: Sequence[str] = ("tsne",), params: dict[str, dict] | None = None, *,
                 runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
                 steps: Sequence[int] | None = None, align: str = "snapshots", jobs: int = 1,
                 score_sample: int | None = 1000, progress: bool | None = None,
                 on_progress: ProgressCallback | None = None) -> EmbedResult:
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
        Worker processes; -1 for one per core. Parallelism is across chains (run x layer x method for
        ``align="snapshots"``), each worker using ``cores // jobs`` threads. Workers are spawned, so a script
        calling this with ``jobs > 1`` needs the usual ``if __name__ == "__main__":`` guard.
    score_sample : int or None, default=1000
        Quality scores use this many query points (all neighbours still searched among all points); None: all.
        Exact scores cost O(n²) time per embedding. Not part of the cache key (it changes no embedding).
    progress : bool or None, default=None
        Show a progress line with ETA on stderr; None: only on an interactive terminal outside CI.
    on_progress : callable, optional
        Also receives ``(stage, done, total, message)`` events (:mod:`repviz.progress`), e.g. a
        :class:`~repviz.progress.ProgressState` that a server polls.

    Returns
    -------
    EmbedResult
        Counts, failures (each: run, layer, step, method, error) and ``table()``, the summary of quality scores.

    Cost: one embedding per (run, layer, snapshot, method) not already stored; cached ones cost a sidecar read.
    """
    start = time.perf_counter()
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    if not methods:
        raise ValueError("no method given; pass e.g. methods=['tsne']")
    params = dict(params or {})
    stray = sorted(set(params) - set(methods))
    if stray:
        raise ValueError(f"parameters given for method {stray[0]!r}, which is not among the methods to run "
                         f"({', '.join(methods)})")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not (jobs >= 1 or jobs == -1):
        raise ValueError(f"The 'jobs' parameter of embed_logdir must be an int in the range [1, inf) or -1. "
                         f"Got {jobs!r} instead.")
    for name in methods:
        _check_method(name, align)
    log = open_logdir(logdir) if not hasattr(logdir, "runs") else logdir
    if not log.runs:
        raise NotFoundError(f"{str(log.path)!r} holds no repviz runs (no */plugins/repviz/manifest.json)")
    run_names = _select(runs, log.runs, "run", repr(str(log.path)))
    selected_runs = [log.run(n) for n in run_names]
    if layers is not None:
        _select(layers, dict.fromkeys(lay for run in selected_runs for lay in run.layers), "layer",
                f"run(s) {', '.join(map(repr, run_names))}")
    run_chains = {run.name: _chains_of(run, run.layers if layers is None else
                                       [lay for lay in layers if lay in run.layers], steps, align)
                  for run in selected_runs}

    chains: list[_Chain] = []
    failed: list[dict] = []
    cached = 0
    keys: dict[str, str] = {}
    for name in dict.fromkeys(methods):
        request = _request_id(name, params.get(name), align)
        # A request seen before names its key in method.json: a fully cached job never imports the numerical
        # code (about a second). Anything to compute goes through resolve(), which validates and hashes.
        key = _known_key(selected_runs, request)
        plan = None if key is None else _plan(selected_runs, run_chains, key, name)
        if plan is None or plan[2]:
            resolved = resolve(name, params.get(name), align)
            if resolved.key != key:
                key, plan = resolved.key, _plan(selected_runs, run_chains, resolved.key, name)
            for run in selected_runs:
                todo = [(items, previous) for r, items, previous in plan[2] if r is run]
                info = run.embedding_method(key)
                if todo or request not in info.get("requests", []):
                    requests = sorted({*info.get("requests", []), request})
                    run.write_embedding_method(key, {**resolved.describe(), "requests": requests})
                chains += [_Chain(str(run.root), run.name, resolved, items, previous, score_sample)
                           for items, previous in todo]
        keys[name] = key
        cached += plan[0]
        failed += plan[1]

    # longest and slowest chains first, so the last worker is not left alone with a long t-SNE chain
    chains.sort(key=lambda c: (c.resolved.chain_align == "init", len(c.items)), reverse=True)
    cores = _cores()
    workers = max(1, min(cores if jobs == -1 else jobs, len(chains)))
    for chain in chains:
        chain.n_jobs = max(1, cores // workers)
    bar = TerminalProgress("repviz embed", enabled=progress)
    try:
        results = _execute(chains, workers, fan_out(bar, on_progress))
    finally:
        bar.close()
    failed += [r for r in results if r["status"] == "failed"]
    computed = sum(r["status"] == "computed" for r in results)

    rows = []
    for run in selected_runs:
        for layer in dict.fromkeys(lay for chain in run_chains[run.name] for lay, _ in chain):
            for name, key in keys.items():
                stored = [s for s in run.embedding_steps(key, layer) if steps is None or s in steps]
                last = stored[-1] if stored else None
                scores = {} if last is None else run.embedding_info(key, layer, last).get("scores", {})
                rows.append({"run": run.name, "layer": layer, "method": name, "key": key,
                             "n_embedded": len(stored), "last_step": last, "scores": scores})
    return EmbedResult(computed, cached, sorted(failed, key=lambda f: (f["run"], f["layer"], f["step"])),
                       keys, rows, time.perf_counter() - start)
