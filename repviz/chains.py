"""One chain of representations embedded in order, each continuing from the one before: an executor's task.

:func:`run_chain` reads each representation from the store (checked against the checksum recorded at capture),
fits the method, aligns the result to the previous one (continuation or Procrustes, see :mod:`repviz.pipeline`),
scores it and stores it at once, so a chain stopped at any point resumes from its last stored snapshot. A
representation that cannot be embedded is reported (:func:`failure`) and skipped; the chain goes on from the last
good one.

A snapshot may hold a subset of the probe (:meth:`repviz.store.Run.rows`); its embedding has one row per stored
row, in the same order. Consecutive snapshots of different subsets are linked through the points they share
(:func:`repviz.subsets.common_rows`): a continuation starts those points where they were and the others near
their nearest shared neighbours (:func:`carry_layout`), Procrustes is fitted on the shared points
only, and the sidecar records the rows (``rows``, the activation record's subset file) and how many points were
shared (``common_points``). With fewer than 3 shared points the snapshot starts afresh.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .align import align_to
from .methods import Resolved
from .narrow import narrow_layout
from .store import NEIGHBOR_GRAPH, Run, checksum, constant_rows
from .subsets import common_rows
from .targets import class_labels


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
        Query points for the quality scores (see :func:`repviz.pipeline.embed_logdir`).
    """

    run: Run
    resolved: Resolved
    items: tuple[tuple[str, int], ...]
    init_from: tuple[str, int] | None = None
    score_sample: int | None = 1000


class RepresentationError(ValueError):
    """A representation that cannot be embedded (dead layer, non-finite values)."""


class ConstantError(RepresentationError):
    """A representation that is the same for every probe point (a dead ReLU layer, an output that does not depend
    on the input): nothing to embed or compare. Left out, not failed: the network is what it is."""


#: Why a constant representation is left out, as the CLI, the API and the tab say it.
CONSTANT = "constant: every probe point has the same activations (e.g. a dead ReLU layer)"


def carry_layout(previous, X, rows: np.ndarray, n_neighbors: int = 5, random_state: int = 0) -> np.ndarray:
    """A start layout for every row of ``X`` from ``previous``, the layout of its rows ``rows`` in another
    snapshot (in that order): how a chain continues onto a snapshot of another probe subset.

    The points in both keep their previous positions; every other point starts at the mean previous position of
    its ``n_neighbors`` nearest common points in ``X`` (its own representation), plus a jitter of 1e-4 of the
    layout's standard deviation (seeded) so that points placed at one mean do not coincide. Float32, (len(X), k).
    """
    from .neighbors import kneighbors  # here: the plugin reads through this module and never loads numba

    previous = np.asarray(previous, dtype=np.float32)
    rows = np.asarray(rows, dtype=np.int64)
    if previous.ndim != 2 or len(previous) != len(rows) or not len(rows):
        raise ValueError(f"previous must hold one position per common row ({len(rows)}); got shape {previous.shape}")
    start = np.empty((len(X), previous.shape[1]), np.float32)
    start[rows] = previous
    new = np.setdiff1d(np.arange(len(X)), rows)
    if len(new):
        X = np.asarray(X, dtype=np.float32)
        ind, _ = kneighbors(X[new], X[rows], min(n_neighbors, len(rows)))
        jitter = np.random.default_rng(random_state).normal(scale=1e-4 * float(previous.std()) or 1e-4,
                                                            size=(len(new), previous.shape[1]))
        start[new] = previous[ind].mean(axis=1) + jitter
    return start


def nonfinite(record: dict) -> RepresentationError | None:
    """The error of a snapshot whose record counts non-finite values (known without reading the array)."""
    if not record.get("nonfinite"):
        return None
    return RepresentationError(f"{record['nonfinite']} non-finite value(s) (NaN or infinity) in the activations")


def constant(record: dict) -> ConstantError | None:
    """The error of a snapshot that capture found constant over the probe (its record says so)."""
    return ConstantError(CONSTANT) if record.get("constant") is True else None


def failure(run: str, layer: str, step: int, method: str, error: Exception) -> dict:
    """The result of a representation that could not be embedded: status ``"constant"`` for a constant one (left
    out), else ``"failed"``."""
    return {"run": run, "layer": layer, "step": step, "method": method,
            "status": "constant" if isinstance(error, ConstantError) else "failed",
            "error": f"{type(error).__name__}: {error}"}


def damaged(run: Run, record: dict) -> RepresentationError | None:
    """The error of a snapshot whose file no longer matches its record (known from its header and size)."""
    if run.record_intact(record):
        return None
    return RepresentationError(f"the activations file {str(run.record_path(record))!r} is truncated or does not "
                               "hold the shape and dtype recorded when it was captured (replaced or damaged); "
                               "record the snapshot again")


def verified_activations(run: Run, layer: str, step: int, mmap: bool = False) -> np.ndarray:
    """The stored activations of (layer, step), checked against the checksum recorded at capture:
    :class:`RepresentationError` if they differ (a flipped bit, a file replaced by hand). What ``repviz embed``,
    ``repviz meta`` and the similarity matrices read. Read whole by default (every byte is used, and a memory
    map's page faults cost 15 ms per 2 MB here, against 1 ms for one read); ``mmap=True`` for readers that take
    the rows in blocks (minibatch CKA), so that memory stays bounded by the page cache."""
    record = run.record(layer, step)
    stored = run.read_array(record, mmap=mmap)
    if checksum(stored) != record["crc32"]:
        raise RepresentationError(f"the activations file {str(run.record_path(record))!r} does not match the "
                                  "checksum recorded when it was captured (corrupted, or replaced by hand); record "
                                  "the snapshot again")
    return stored


def _representation(run: Run, layer: str, step: int) -> tuple[np.ndarray, str]:
    """The activations as a float32 matrix (:func:`verified_activations`) and the checksum of their file."""
    record = run.record(layer, step)
    if error := nonfinite(record) or constant(record):
        raise error
    stored = verified_activations(run, layer, step)
    X = np.asarray(stored, dtype=np.float32)
    X = X.reshape(X.shape[0], -1)
    if not np.isfinite(X).all():
        raise RepresentationError("non-finite values (NaN or infinity) in the activations")
    if X.shape[0] < 3:
        raise RepresentationError(f"only {X.shape[0]} probe point(s); at least 3 are needed")
    if constant_rows(stored):  # a run recorded before capture marked constant snapshots
        raise ConstantError(CONSTANT)
    return X, record["crc32"]


def _labels(run: Run) -> np.ndarray | None:
    """The class of each probe point for a class target (:mod:`repviz.targets`), else None: other targets are
    kept but give no k-NN accuracy."""
    probe = run.probe
    return class_labels(probe.labels, probe.target)


@dataclass(frozen=True)
class _Previous:
    """The embedding a representation continues from: ``layout`` of the probe points ``rows``."""

    layout: np.ndarray
    rows: np.ndarray

    def link(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(target, common)`` for a representation of the probe points ``rows``: the previous layout of the points
        both hold, and their rows in the representation (None: the same points in the same order)."""
        if np.array_equal(rows, self.rows):
            return self.layout, None
        _, (here, there) = common_rows([rows, self.rows])
        return self.layout[there], here


def _fit(resolved: Resolved, X: np.ndarray, labels: np.ndarray | None,
         previous: tuple[np.ndarray, np.ndarray | None] | None, threads: int, memo: dict) -> tuple[np.ndarray, dict]:
    """Embed X; ``previous`` is ``(target, common)`` of :meth:`_Previous.link` (None: nothing to continue);
    ``memo`` what the method carries to the next snapshot of the same points (see
    :attr:`repviz.methods.Method.continue_with`), updated."""
    if resolved.method.supervised and labels is None:
        raise RepresentationError(f"{resolved.method.name} needs a class per probe point, and this run stored "
                                  f"none (no labels, or a target of another kind: see repviz info)")
    method, params = resolved.method, dict(resolved.params)
    if X.shape[1] < (params.get("n_components") or 2):  # a 1-wide layer: its values, a strip per class
        flag = "one_dimensional" if X.shape[1] == 1 else "narrow"
        return narrow_layout(X, labels, params.get("n_components") or 2), {flag: True}
    if "n_jobs" in params and params["n_jobs"] is None:
        params["n_jobs"] = threads
    continues = resolved.chain_align == "init" and previous is not None
    if continues:
        target, common = previous
        start = np.array(target, dtype=np.float32) if common is None else carry_layout(target, X, common)
    if continues and (policy := method.continuation_function()) is not None:
        Y, diagnostics = policy(X, start, params, dict(method.continuation), memo)
    else:
        if continues:
            params.update(method.continuation, init=start)
        estimator = method.estimator_class()(**params)
        Y = estimator.fit_transform(X, labels if method.supervised else None)
        memo["knn_indices"] = getattr(estimator, "knn_indices_", None)
        diagnostics = {attr.rstrip("_"): value.item() if isinstance(value, np.generic) else value
                       for attr in ("n_iter_", "kl_divergence_")
                       if isinstance(value := getattr(estimator, attr, None), (int, float, np.integer, np.floating))}
    Y = np.asarray(Y, dtype=np.float32)
    if not np.isfinite(Y).all():
        raise RepresentationError(f"{method.name} returned non-finite coordinates")
    if resolved.chain_align == "procrustes" and previous is not None:
        Y = align_to(Y, *previous)
    return Y, diagnostics


def _scores(run: Run, layer: str, step: int, X: np.ndarray, Y: np.ndarray, labels: np.ndarray | None,
            sample: int | None) -> dict:
    """The quality scores of Y. The exact k-NN graph of the snapshot is cached in the store and shared by every
    method that scores it (and by the tab's neighbourhood change): a scoring that searched every point's
    neighbours writes it, the next ones skip that search."""
    from .metrics import quality_scores  # here, not at the top: a fully cached job never loads numba

    k = min(10, (X.shape[0] - 1) // 2)
    if k < 1:
        return {}
    variant = f"k{k}-exact"
    graphs = run.artifact(NEIGHBOR_GRAPH)
    graph = graphs.cached(layer, step, variant)
    scores, near = quality_scores(X, Y, labels, n_neighbors=k, max_exact=sample, neighbors=graph,
                                  return_neighbors=True)
    if graph is None and len(near) == len(X):
        with contextlib.suppress(OSError):  # a log directory that cannot be written still gets its scores
            graphs.write(layer, step, variant, near.astype(np.int32))
    return scores


def run_chain(task: ChainTask, advance: Callable[[int], None], threads: int = 1) -> list[dict]:
    """Embed the items of ``task`` in order, storing each as soon as it is computed; ``advance(1)`` after each.

    ``threads`` is what estimators with ``n_jobs=None`` get (the executor's share of the cores).
    """
    run, resolved = task.run, task.resolved
    labels = _labels(run)
    previous = None if task.init_from is None else _Previous(
        np.array(run.embeddings.read(resolved.key, *task.init_from)), run.rows(*task.init_from))
    previous_ref = None if task.init_from is None else list(task.init_from)
    memo: dict = {}  # what the method carries between snapshots of the same points (a kNN graph)
    results = []
    for layer, step in task.items:
        start = time.perf_counter()
        try:
            record, rows = run.record(layer, step), run.rows(layer, step)
            X, crc32 = _representation(run, layer, step)
            link = None if previous is None else previous.link(rows)
            shared = None if link is None or link[1] is None else len(link[1])
            if shared is not None:  # other points than the snapshot before: nothing carried applies
                memo.clear()
            known = None if labels is None else labels[rows]
            Y, diagnostics = _fit(resolved, X, known, None if shared is not None and shared < 3 else link, threads,
                                  memo)
            scores = _scores(run, layer, step, X, Y, known, task.score_sample)
        except Exception as e:  # one failing representation must not stop the others; it is reported
            results.append(failure(run.name, layer, step, resolved.method.name, e))
            advance(1)
            continue
        seconds = time.perf_counter() - start
        info = {"method": resolved.method.name, "key": resolved.key, "params": resolved.describe()["params"],
                "align": resolved.align, "init_from": previous_ref,
                "source": {"layer": layer, "step": step, "crc32": crc32},
                "scores": scores, "seconds": round(seconds, 3), **diagnostics}
        if "rows" in record:
            info["rows"] = record["rows"]
        if shared is not None:
            info["common_points"] = shared
        run.embeddings.write(resolved.key, layer, step, Y, info)
        previous, previous_ref = _Previous(Y, rows), [layer, step]
        results.append({"run": run.name, "layer": layer, "step": step, "method": resolved.method.name,
                        "status": "computed", "seconds": seconds})
        advance(1)
    return results


def lost_chain(task: ChainTask, error: Exception) -> list[dict]:
    """The results of a chain whose worker died of ``error``: what it stored counts as computed, the rest as
    failed."""
    key, method = task.resolved.key, task.resolved.method.name
    return [{"run": task.run.name, "layer": layer, "step": step, "method": method, "status": "computed",
             "seconds": float("nan")} if task.run.embeddings.has(key, layer, step)
            else failure(task.run.name, layer, step, method, error) for layer, step in task.items]
