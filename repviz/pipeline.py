"""Embed every layer of every run at every snapshot: aligned, cached, resumable, in parallel.

One call, :func:`embed_logdir`, serves the CLI (``repviz embed``), Python and the TensorBoard plugin. It is two
steps that can be called apart: :func:`plan_embeddings` reads the store and returns a :class:`Plan` (the
:class:`ChainTask` s left to compute, what is cached, what is known to fail), and :func:`execute` carries a plan
out, here or in worker processes; another executor (a cluster) runs the same tasks with :func:`run_chain`.

Alignment (``align=``)
    ``"snapshots"`` (default): the snapshots of one layer form a chain, so that consecutive pictures differ only
    by what the network changed. Methods that accept an initial layout (t-SNE, SMACOF MDS, Sammon, the elastic
    embedding) start snapshot k from the stored embedding of snapshot k−1 and continue the optimisation with the
    method's *continuation* parameters. For t-SNE: the previous layout at its own scale (``rescale_init=False``,
    not shrunk to std 1e-4 like a PCA start), no early exaggeration (the clusters are already formed), at
    ``learning_rate="auto"``, which without exaggeration is n (the rate of t-SNE's main phase). It races two
    starts for 30 iterations (``neighbour_start=120``): the previous layout as it is, and the same with every
    point moved to the P-weighted mean of its new neighbours' positions there (at 4n: that layout is contracted
    and re-expands), which lets points whose neighbourhood changed jump to it instead of crawling there. If the
    moved start has the lower KL divergence by then, it goes on to 120 iterations in all; otherwise the previous
    layout runs for at most 300, stopping once the KL divergence's change over the last 25 iterations,
    extrapolated over the iterations left, is below 0.5 % (``tol=5e-3``: a snapshot that barely changed costs
    30 + 50 iterations). On the demo's and ``bench_pipeline.py``'s chains the final KL is a median 4 % below that
    of 300 plain iterations from the previous layout, at half the time or less
    (``benchmarks/bench_continuation.py``). Snapshot 0 gets the method's own
    initialisation (PCA for t-SNE). The other methods (PCA, classical MDS, Isomap, LLE,
    spectral, diffusion maps, kernel PCA, force-directed, LDA, whitening, ICA, SFA, autoencoder) are computed
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
    Chains are sequential (k needs k−1); ``jobs`` worker processes (:class:`repviz.workers.WorkerPool`: spawned,
    not forked, so no numba/BLAS thread pool is copied mid-flight) take whole chains, across runs, layers and
    methods. Each worker gets ``max(1, cores // jobs)`` numba/BLAS threads, so the machine is never
    oversubscribed. Ctrl-C stops the workers at once; what they stored is kept. With ``client=`` (a Dask client)
    the same chains run as Dask tasks on a cluster instead (:mod:`repviz.distributed`), storing the same files.

Failures
    A representation that cannot be embedded (a dead layer whose activations are all equal, NaN or infinite values
    after divergence, a method error) is reported in :attr:`EmbedResult.failed` and skipped; the chain continues
    from the last good snapshot.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from . import __version__
from ._validation import Interval, Rule, check_option, check_param, unset_alias
from .align import align_to
from .progress import ProgressCallback, TerminalProgress, fan_out, report
from .store import NotFoundError, Run, checksum, open_logdir
from .workers import THREAD_VARIABLES, WorkerDied, WorkerPool

#: Bumped when the pipeline's output for the same inputs and parameters changes; part of every cache key.
PIPELINE_VERSION = 1

ALIGN_MODES = ("snapshots", "layers", "none")

# Parameters that change speed or logging, never the result: left out of the cache key.
_NOT_HASHED = frozenset({"n_jobs", "verbose"})

#: jobs=-1: one worker per core
_ALL_CORES = Rule(lambda v: isinstance(v, int) and not isinstance(v, bool) and v == -1, "-1")


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
    check_option(align, ("init", "procrustes"), "align", "register_method")
    if continuation and align != "init":
        raise ValueError(f"continuation parameters apply to align='init' methods only; {name!r} has align={align!r}")
    method = Method(name, target, align, dict(defaults or {}), dict(continuation or {}), supervised)
    METHODS[name] = method
    return method


# t-SNE continuing from the previous snapshot (the scheme in the module docstring). On a converged MLP this moves
# points ~10x less than independent fits; a lower learning rate would move them even less but follow real changes
# of the representation more slowly.
register_method("tsne", "repviz.manifold:TSNE", align="init", defaults={"random_state": 0},
                continuation={"rescale_init": False, "early_exaggeration_iter": 0, "max_iter": 300, "tol": 5e-3,
                              "neighbour_start": 120})
# Iterative stress minimisers continue from the previous layout as it is.
register_method("mds", "repviz.manifold:MDS", align="init", defaults={"random_state": 0})
register_method("sammon", "repviz.manifold:Sammon", align="init", defaults={"random_state": 0})
for _name, _target in (("pca", "PCA"), ("cmds", "ClassicalMDS"), ("isomap", "Isomap"),
                       ("lle", "LocallyLinearEmbedding"), ("spectral", "SpectralEmbedding"),
                       ("diffusion", "DiffusionMap"), ("kpca", "KernelPCA"), ("force", "ForceDirectedLayout")):
    register_method(_name, f"repviz.manifold:{_target}", align="procrustes", defaults={"random_state": 0})
register_method("lda", "repviz.manifold:LinearDiscriminantAnalysis", align="procrustes",
                defaults={"n_components": 2}, supervised=True)
# The elastic embedding continues from the previous layout as it is, with fewer iterations (it starts near a
# minimum). The other new methods are fitted anew and rotated onto the previous snapshot. SFA reads the probe
# points in their stored order as its sequence.
register_method("ee", "repviz.manifold:ElasticEmbedding", align="init", defaults={"random_state": 0},
                continuation={"max_iter": 100})
for _name, _target in (("ica", "FastICA"), ("sfa", "SlowFeatureAnalysis"), ("autoencoder", "AutoencoderEmbedding")):
    register_method(_name, f"repviz.manifold:{_target}", align="procrustes",
                    defaults={"random_state": 0, "n_components": 2})
register_method("whiten", "repviz.manifold:Whitening", align="procrustes", defaults={"n_components": 2})


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
        # a deprecated keyword left unset changes nothing (and must not change the key when it is removed)
        hashed = {k: v for k, v in self.params.items() if k not in _NOT_HASHED and not unset_alias(v)}
        return {"method": self.method.name, "params": hashed, "align": self.align, "default": self.default,
                "continuation": self.method.continuation if self.chain_align == "init" else {},
                "pipeline_version": PIPELINE_VERSION}


def _scalar(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.generic))


def _check_method(name: str, align: str) -> None:
    check_option(align, ALIGN_MODES, "align", "embed_logdir")
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
        if k not in _NOT_HASHED and not (_scalar(v) or (isinstance(v, (tuple, list)) and all(map(_scalar, v)))):
            raise ValueError(f"the {k!r} parameter of {name!r} must be a number, string, bool, None or a tuple of "
                             f"those for the pipeline to cache results by it; got a {type(v).__name__}")
    # "default" is a property of the values, not of how they were given: whiten=False spelled out is the default.
    defaults = {**accepted, **{k: v for k, v in method.defaults.items() if k in accepted}}
    default = align == "snapshots" and all(_canonical(full[k]) == _canonical(defaults[k])
                                           for k in full if k not in _NOT_HASHED)
    return Resolved(method, full, align, default=default)


# --------------------------------------------------------------------------------------------------------------
# One chain of representations (runs in a worker process or inline)
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChainTask:
    """One chain of representations to embed in order (each continues from the one before): a worker's unit.

    Attributes
    ----------
    run : Run
        The run (pickled as a reference, so a worker process reopens it from the store).
    resolved : Resolved
        The method and its full parameters; ``resolved.key`` names the results.
    items : tuple of (layer, step)
        The representations to compute, in chain order.
    init_from : (layer, step) or None
        The stored embedding that precedes ``items[0]`` in the chain (None: the chain starts here).
    score_sample : int or None
        Query points for the quality scores (see :func:`embed_logdir`).
    threads : int
        Threads for the estimator (``n_jobs=None`` parameters become this); set by the executor.
    """

    run: Run
    resolved: Resolved
    items: tuple[tuple[str, int], ...]
    init_from: tuple[str, int] | None = None
    score_sample: int | None = 1000
    threads: int = 1


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


def _damaged(run: Run, record: dict) -> RepresentationError | None:
    """The error of a snapshot whose file no longer matches its record (known from its header and size)."""
    if run.record_intact(record):
        return None
    return RepresentationError("the activations file is truncated or does not hold the shape and dtype recorded "
                               "when it was captured (replaced or damaged); record the snapshot again")


def _representation(run: Run, layer: str, step: int) -> tuple[np.ndarray, str]:
    """The activations as a float32 matrix and the checksum of the file they came from (read whole, not mapped:
    every byte is used, and a memory map's page faults cost 15 ms per 2 MB here, against 1 ms for one read)."""
    record = run.record(layer, step)
    if error := _nonfinite(record):
        raise error
    stored = run.read_array(record, mmap=False)
    if checksum(stored) != record["crc32"]:
        raise RepresentationError("the activations file does not match the checksum recorded when it was captured "
                                  "(corrupted, or replaced by hand); record the snapshot again")
    X = np.asarray(stored, dtype=np.float32)
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
         threads: int) -> tuple[np.ndarray, dict]:
    if resolved.method.supervised and labels is None:
        raise RepresentationError(f"{resolved.method.name} needs the probe labels, and this run stored none")
    params = dict(resolved.params)
    if resolved.chain_align == "init" and previous is not None:
        params.update(resolved.method.continuation, init=np.array(previous, dtype=np.float32))
    if "n_jobs" in params and params["n_jobs"] is None:
        params["n_jobs"] = threads
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


def run_chain(task: ChainTask, advance: Callable[[int], None]) -> list[dict]:
    """Embed the items of ``task`` in order, storing each as soon as it is computed; ``advance(1)`` after each."""
    run, resolved = task.run, task.resolved
    labels = _labels(run)
    previous = None if task.init_from is None else np.array(run.read_embedding(resolved.key, *task.init_from))
    previous_ref = None if task.init_from is None else list(task.init_from)
    results = []
    for layer, step in task.items:
        start = time.perf_counter()
        try:
            X, crc32 = _representation(run, layer, step)
            Y, diagnostics = _fit(resolved, X, labels, previous, task.threads)
            scores = _scores(X, Y, labels, task.score_sample)
        except Exception as e:  # one failing representation must not stop the others; it is reported
            results.append(_failure(run.name, layer, step, resolved.method.name, e))
            advance(1)
            continue
        seconds = time.perf_counter() - start
        info = {"method": resolved.method.name, "key": resolved.key, "params": resolved.describe()["params"],
                "align": resolved.align, "init_from": previous_ref,
                "source": {"layer": layer, "step": step, "crc32": crc32},
                "scores": scores, "seconds": round(seconds, 3), **diagnostics}
        run.write_embedding(resolved.key, layer, step, Y, info)
        previous, previous_ref = Y, [layer, step]
        results.append({"run": run.name, "layer": layer, "step": step, "method": resolved.method.name,
                        "status": "computed", "seconds": seconds})
        advance(1)
    return results



# --------------------------------------------------------------------------------------------------------------
# Planning: what is cached, what to compute
# --------------------------------------------------------------------------------------------------------------

def _select_names(names: Iterable[str] | None, have: Iterable[str], what: str, where: str) -> list[str]:
    have = list(have)
    if names is None:
        return have
    names = list(names)
    for n in names:
        if n not in have:
            raise NotFoundError(f"{what} {n!r} is not in {where}; it has: {', '.join(map(repr, have)) or 'none'}")
    return names


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


class _Todo(NamedTuple):
    """The part of one chain left to compute, and the stored embedding it continues from."""

    run: Run
    items: list[tuple[str, int]]
    init_from: tuple[str, int] | None


@dataclass
class _CacheWalk:
    """What the store holds for the chains of one method key: counts, failures known without computing, and
    what is left to compute."""

    cached: int = 0
    failed: list[dict] = field(default_factory=list)
    todo: list[_Todo] = field(default_factory=list)

    def add_chain(self, run: Run, key: str, method: str, items: list[tuple[str, int]],
                  previous: tuple[str, int] | None = None) -> None:
        """Walk one chain through the cache up to the first representation to compute; ``previous`` is the
        stored embedding the chain continues from (None: it starts with ``items[0]``)."""
        for i, (layer, step) in enumerate(items):
            record = run.record(layer, step)
            if run.embedding_intact(key, layer, step, record["shape"][0]):
                info = run.embedding_info(key, layer, step)
                if (info.get("source", {}).get("crc32") == record["crc32"] and run.record_intact(record)
                        and info.get("init_from") == (None if previous is None else list(previous))):
                    previous = (layer, step)
                    self.cached += 1
                    continue
            if error := _nonfinite(record) or _damaged(run, record):  # fails the same way every time
                self.failed.append(_failure(run.name, layer, step, method, error))
                continue
            self.todo.append(_Todo(run, items[i:], previous))
            return


def resume(task: ChainTask) -> tuple[ChainTask | None, list[dict]]:
    """What is left of ``task`` once what the store already holds is skipped: the task for the rest (None if
    nothing is left) and the results of the representations skipped.

    A task run a second time (a cluster retrying it after its worker died) so continues from the last snapshot
    the first attempt stored, which counts as computed.
    """
    key, method = task.resolved.key, task.resolved.method.name
    walk = _CacheWalk()
    walk.add_chain(task.run, key, method, list(task.items), task.init_from)
    todo = walk.todo[0] if walk.todo else None
    left = () if todo is None else tuple(todo.items)
    done = [{"run": task.run.name, "layer": layer, "step": step, "method": method, "status": "computed",
             "seconds": float("nan")} for layer, step in task.items[:len(task.items) - len(left)]
            if task.run.has_embedding(key, layer, step)]
    rest = None if todo is None else replace(task, items=left, init_from=todo.init_from)
    return rest, done + walk.failed


def _walk(runs: list[Run], run_chains: dict[str, list], key: str, method: str) -> _CacheWalk:
    walk = _CacheWalk()
    for run in runs:
        for items in run_chains[run.name]:
            walk.add_chain(run, key, method, items)
    return walk


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


@dataclass(frozen=True)
class MethodNote:
    """A method key's description (``method.json``) to write into a run before anything is computed under it."""

    run: Run
    key: str
    description: dict


@dataclass
class Plan:
    """What embedding a log directory takes: the chains to compute and what is known without computing.

    Built by :func:`plan_embeddings`, which only reads the store. :func:`execute` carries it out; another executor
    (a cluster) calls :meth:`write_method_notes`, then :func:`run_chain` on every task, then
    :meth:`EmbedResult.from_plan`.

    Attributes
    ----------
    runs : list of Run
        The selected runs.
    layers : dict
        Run name -> the layers it embeds, in model order (the rows of the summary).
    steps : tuple of int or None
        The selected snapshots (None: all).
    keys : dict
        Method name -> the key its results are stored under.
    tasks : list of ChainTask
        What to compute, longest and slowest chains first (so the last worker is not left alone with a long
        t-SNE chain). Empty when everything is stored.
    cached : int
        Representations already stored and valid.
    failed : list of dict
        Representations known to fail without computing (non-finite activations).
    notes : list of MethodNote
        Method descriptions to write first.
    """

    runs: list[Run]
    layers: dict[str, list[str]]
    steps: tuple[int, ...] | None
    keys: dict[str, str]
    tasks: list[ChainTask]
    cached: int
    failed: list[dict]
    notes: list[MethodNote]

    @property
    def total(self) -> int:
        """Representations to compute."""
        return sum(len(task.items) for task in self.tasks)

    def write_method_notes(self) -> None:
        """Describe every method key in the runs it will store results in, so readers find it by name."""
        for note in self.notes:
            note.run.write_embedding_method(note.key, note.description)


def plan_embeddings(logdir, methods: Sequence[str] = ("tsne",), params: dict[str, dict] | None = None, *,
                    runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
                    steps: Sequence[int] | None = None, align: str = "snapshots",
                    score_sample: int | None = 1000) -> Plan:
    """Check a request and find what the store holds and what is left to compute; nothing is written.

    The parameters are those of :func:`embed_logdir`. A request seen before finds its key in ``method.json``, so a
    fully cached plan never imports the numerical code (about a second); anything to compute goes through
    :func:`resolve`, which validates the parameters and hashes them.
    """
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    if not methods:
        raise ValueError("no method given; pass e.g. methods=['tsne']")
    params = dict(params or {})
    stray = sorted(set(params) - set(methods))
    if stray:
        raise ValueError(f"parameters given for method {stray[0]!r}, which is not among the methods to run "
                         f"({', '.join(methods)})")
    for name in methods:
        _check_method(name, align)
    log = open_logdir(logdir) if not hasattr(logdir, "runs") else logdir
    if not log.runs:
        raise NotFoundError(f"{str(log.path)!r} holds no repviz runs (no */plugins/repviz/manifest.json)")
    run_names = _select_names(runs, log.runs, "run", repr(str(log.path)))
    selected_runs = [log.run(n) for n in run_names]
    if layers is not None:
        _select_names(layers, dict.fromkeys(lay for run in selected_runs for lay in run.layers), "layer",
                f"run(s) {', '.join(map(repr, run_names))}")
    run_chains = {run.name: _chains_of(run, run.layers if layers is None else
                                       [lay for lay in layers if lay in run.layers], steps, align)
                  for run in selected_runs}

    tasks: list[ChainTask] = []
    notes: list[MethodNote] = []
    failed: list[dict] = []
    cached = 0
    keys: dict[str, str] = {}
    for name in dict.fromkeys(methods):
        request = _request_id(name, params.get(name), align)
        key = _known_key(selected_runs, request)
        walk = None if key is None else _walk(selected_runs, run_chains, key, name)
        if walk is None or walk.todo:
            resolved = resolve(name, params.get(name), align)
            if resolved.key != key:
                key, walk = resolved.key, _walk(selected_runs, run_chains, resolved.key, name)
            for run in selected_runs:
                todo = [t for t in walk.todo if t.run is run]
                info = run.embedding_method(key)
                if todo or request not in info.get("requests", []):
                    requests = sorted({*info.get("requests", []), request})
                    notes.append(MethodNote(run, key, {**resolved.describe(), "requests": requests}))
                tasks += [ChainTask(run, resolved, tuple(t.items), t.init_from, score_sample) for t in todo]
        keys[name] = key
        cached += walk.cached
        failed += walk.failed
    tasks.sort(key=lambda t: (t.resolved.chain_align == "init", len(t.items)), reverse=True)
    layers_of = {run.name: list(dict.fromkeys(lay for chain in run_chains[run.name] for lay, _ in chain))
                 for run in selected_runs}
    return Plan(selected_runs, layers_of, None if steps is None else tuple(steps), keys, tasks, cached, failed,
                notes)


# --------------------------------------------------------------------------------------------------------------
# Execution and the entry point
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

    @classmethod
    def from_plan(cls, plan: Plan, results: Iterable[dict], seconds: float) -> EmbedResult:
        """The outcome of ``plan`` given what :func:`run_chain` returned for its tasks (summary read from the
        store)."""
        results = list(results)
        failed = plan.failed + [r for r in results if r["status"] == "failed"]
        rows = []
        for run in plan.runs:
            for layer in plan.layers[run.name]:
                for name, key in plan.keys.items():
                    stored = [s for s in run.embedding_steps(key, layer) if plan.steps is None or s in plan.steps]
                    last = stored[-1] if stored else None
                    scores = {} if last is None else run.embedding_info(key, layer, last).get("scores", {})
                    rows.append({"run": run.name, "layer": layer, "method": name, "key": key,
                                 "n_embedded": len(stored), "last_step": last, "scores": scores})
        return cls(sum(r["status"] == "computed" for r in results), plan.cached,
                   sorted(failed, key=lambda f: (f["run"], f["layer"], f["step"])), dict(plan.keys), rows, seconds)

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


def _check_jobs(jobs: int, owner: str) -> None:
    check_param(jobs, [Interval(int, 1, None, "left"), _ALL_CORES], "jobs", owner)


def _lost_chain(death: WorkerDied) -> list[dict]:
    """The results of a chain whose worker died: what it stored counts as computed, the rest as failed."""
    task: ChainTask = death.task
    key, method = task.resolved.key, task.resolved.method.name
    return [{"run": task.run.name, "layer": layer, "step": step, "method": method, "status": "computed",
             "seconds": float("nan")} if task.run.has_embedding(key, layer, step)
            else _failure(task.run.name, layer, step, method, death) for layer, step in task.items]


def execute(plan: Plan, *, jobs: int = 1, progress: ProgressCallback | None = None, client=None) -> EmbedResult:
    """Compute what ``plan`` lists, storing every embedding as soon as it is computed.

    Parameters
    ----------
    plan : Plan
        From :func:`plan_embeddings`.
    jobs : int, default=1
        Worker processes (spawned); -1 for one per core. Each worker takes whole chains and gets
        ``max(1, cores // workers)`` numba/BLAS threads, so the machine is never oversubscribed. With 1, the
        chains run in this process.
    progress : callable, optional
        Receives ``("embed", done, total, "")`` events (:mod:`repviz.progress`).
    client : dask.distributed.Client, optional
        Run the chains as tasks on this Dask cluster instead (:func:`repviz.distributed.run_chains`; ``jobs``
        must then stay 1): same results, stored by the workers in the same places.

    Returns
    -------
    EmbedResult

    Ctrl-C (or any error) stops the workers at once; what they stored is kept, and planning again resumes from
    there. Workers end with this process however it ends. A worker that dies (e.g. killed by the out-of-memory
    killer) is replaced: the rest of its chain is reported failed and the other chains go on.
    """
    start = time.perf_counter()
    _check_jobs(jobs, "execute")
    if client is not None:
        from .distributed import run_chains  # dask is an optional extra

        if jobs != 1:
            raise ValueError(f"jobs={jobs} and client= both choose where the chains run; with a Dask client, "
                             f"the cluster's workers do (leave jobs=1)")
        plan.write_method_notes()
        return EmbedResult.from_plan(plan, run_chains(client, plan, progress), time.perf_counter() - start)
    plan.write_method_notes()
    cores = _cores()
    workers = max(1, min(cores if jobs == -1 else jobs, len(plan.tasks)))
    tasks = [replace(task, threads=max(1, cores // workers)) for task in plan.tasks]
    counted = 0

    def advance(n: int = 1) -> None:
        nonlocal counted
        counted += n
        report(progress, "embed", counted, plan.total)

    report(progress, "embed", 0, plan.total)
    if workers == 1:
        results = [r for task in tasks for r in run_chain(task, advance)]
    else:
        env = {name: str(tasks[0].threads) for name in THREAD_VARIABLES}
        with WorkerPool(run_chain, workers, env=env) as pool:
            results = [r for chain_results in pool.run(tasks, advance, on_death=_lost_chain)
                       for r in chain_results]
    return EmbedResult.from_plan(plan, results, time.perf_counter() - start)

def embed_logdir(logdir, methods: Sequence[str] = ("tsne",), params: dict[str, dict] | None = None, *,
                 runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
                 steps: Sequence[int] | None = None, align: str = "snapshots", jobs: int = 1,
                 score_sample: int | None = 1000, progress: bool | None = None,
                 on_progress: ProgressCallback | None = None, client=None) -> EmbedResult:
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
    client : dask.distributed.Client, optional
        Run one Dask task per chain on this cluster instead of local processes (``pip install "repviz[dask]"``).
        The log directory must be on storage every worker sees at the same path (checked first); the workers
        store the results exactly as a local run would, so either can resume the other's work.

    Returns
    -------
    EmbedResult
        Counts, failures (each: run, layer, step, method, error) and ``table()``, the summary of quality scores.

    Cost: one embedding per (run, layer, snapshot, method) not already stored; cached ones cost a sidecar read.

    This is ``execute(plan_embeddings(logdir, ...), jobs=jobs, progress=...)`` with a terminal progress line;
    call the two apart to inspect or ship the plan (:class:`Plan`).
    """
    start = time.perf_counter()
    _check_jobs(jobs, "embed_logdir")
    if client is not None:
        from .distributed import check_workers_see, shared_logdir

        logdir = shared_logdir(logdir)
        check_workers_see(client, logdir)
    plan = plan_embeddings(logdir, methods, params, runs=runs, layers=layers, steps=steps, align=align,
                           score_sample=score_sample)
    bar = TerminalProgress("repviz embed", enabled=progress)
    try:
        result = execute(plan, jobs=jobs, progress=fan_out(bar, on_progress), client=client)
    finally:
        bar.close()
    return replace(result, seconds=time.perf_counter() - start)
