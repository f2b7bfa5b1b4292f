"""What each route returns, without HTTP: pure functions of the catalog and plain arguments.

Every name a client sends (run, layer, embedding key, meta-SNE result) is looked up in what the store lists and
refused with ``NotFoundError`` otherwise, so a name is never turned into a path here. Arrays come back as
little-endian numpy arrays; the WSGI layer (``plugin.py``) turns them into bytes.
"""

from __future__ import annotations

import logging
import os
import zlib

import numpy as np

from repviz.service import (
    INPUT_KEY,
    META_RESULT,
    PLACED,
    NotFoundError,
    Probe,
    Run,
    checksum,
    class_codes,
    inputs_fingerprint,
    meta_result,
    path_key,
)

from . import metadata
from .catalog import Catalog, inside

logger = logging.getLogger(__name__)

#: At most this many thumbnails per request, and at most this many bytes (large colour thumbnails get fewer).
MAX_THUMBNAILS = 1024
MAX_THUMBNAIL_BYTES = 8 << 20


class BadRequest(ValueError):
    """A missing or malformed parameter, or one over a bound (HTTP 400)."""


# --------------------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------------------

def known_layer(run: Run, layer: str) -> str:
    """``layer`` if ``run`` lists it, else ``NotFoundError``."""
    if layer not in run.layers:
        raise NotFoundError(f"layer {layer!r} is not in run {run.name!r}")
    return layer


def known_key(run: Run, key: str) -> str:
    """``key`` if ``run`` stores an embedding of that key, else ``NotFoundError``."""
    if key not in run.embeddings.method_keys():
        raise NotFoundError(f"run {run.name!r} has no embedding {key!r}")
    return key


def known_step(value: int, have: list[int], what: str) -> int:
    """``value`` if it is one of the steps ``have`` of ``what``, else ``NotFoundError`` listing them."""
    if value not in have:
        raise NotFoundError(f"{what} has no step {value}; it has: {have[:50]}")
    return value


# --------------------------------------------------------------------------------------------------------------
# Labels and predictions
# --------------------------------------------------------------------------------------------------------------

def label_codes(probe: Probe) -> tuple[np.ndarray, list[str] | None]:
    """Class codes (int32, -1 = none) and class names (None when the labels are already integer codes) of the
    probe points: those of a class target (one-hot labels give their argmax, strings are numbered in sorted order,
    integral floats are codes); every code -1 for a target of another kind (:mod:`repviz.targets`) or none."""
    return class_codes(probe.labels, probe.target, len(probe))


def predicted_classes(outputs: np.ndarray, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """The predicted class and its confidence (the largest class probability) of each probe point.

    Rows that are not probability vectors (negative values, or sums away from 1) are taken as logits and
    softmaxed. A single output column is a sigmoid probability when ``binary`` (two classes), else a regression
    target: class -1 and confidence NaN, as for outputs of any other shape.
    """
    n = outputs.shape[0]
    out = np.asarray(outputs, dtype=np.float64).reshape(n, -1) if outputs.ndim <= 2 else None
    if out is None or out.shape[1] == 0 or (out.shape[1] == 1 and not binary):
        return np.full(n, -1.0, dtype=np.float32), np.full(n, np.nan, dtype=np.float32)
    if out.shape[1] == 1:
        p = np.clip(out[:, 0], 0.0, 1.0)
        return (p > 0.5).astype(np.float32), np.maximum(p, 1 - p).astype(np.float32)
    is_probability = np.all(out >= 0, axis=1) & (np.abs(out.sum(axis=1) - 1) < 1e-3)
    logits = out[~is_probability]
    if len(logits):
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        out[~is_probability] = e / e.sum(axis=1, keepdims=True)
    return out.argmax(axis=1).astype(np.float32), out.max(axis=1).astype(np.float32)


# --------------------------------------------------------------------------------------------------------------
# JSON routes
# --------------------------------------------------------------------------------------------------------------

def _run_summary(run: Run) -> dict:
    probe = run.probe
    n = len(probe)
    codes, names = label_codes(probe)
    thumbs = probe.thumbnails
    layers = [{"name": name, "class": info.get("class"), "stored_shape": info.get("stored_shape"),
               "output_shape": info.get("output_shape"), "reduction": info.get("reduction", {"kind": "none"}),
               "steps": run.steps(name)}
              for name, info in ((name, run.layer_info(name)) for name in run.layers)]
    embeddings = []
    for key in run.embeddings.method_keys():
        method = run.embeddings.method(key)
        steps = {layer: s for layer in run.layers if (s := run.embeddings.steps(key, layer))}
        embeddings.append({"key": key, "method": method.get("method", key.rsplit("-", 1)[0]),
                           "params": method.get("params", {}), "align": method.get("align"),
                           "default": bool(method.get("default")), "steps": steps})
    return {"name": run.name, "n_probe": n, "step_unit": run.manifest.get("step_unit", "epoch"),
            "has_labels": probe.target is not None and probe.target.kind == "class",  # classes to colour by
            "target": None if probe.target is None else probe.target.index(),  # the labels' policy
            "n_classes": len(names) if names is not None else int(codes.max()) + 1 if n else 0,
            "class_names": names, "has_thumbnails": thumbs is not None,
            "thumbnail_shape": list(thumbs.shape[1:]) if thumbs is not None else None,
            # runs of one group compare: the same probe ids and, where stored, the same probe inputs
            "probe_group": "-".join(filter(None, [checksum(np.asarray(probe.ids)), inputs_fingerprint(run)])),
            "prediction_steps": run.prediction_steps(),
            "fits": run.manifest.get("fits") or [],  # each fit's first and last step: a later fit continues the count
            **metadata.index_entry(probe),  # the probe's metadata columns
            "layers": layers, "embeddings": embeddings,
            # run keys: runs_impl names them
            "placed_into": sorted({into for into, _ in run.artifact(PLACED).keys(depth=2)})}


def runs_impl(catalog: Catalog, methods: list[str]) -> dict:
    """The index of runs, their layers, snapshots and stored embeddings (see plugin_api.md)."""
    log = catalog.logdir()
    if log is None:
        return {"runs": [], "methods": methods, "meta": []}
    runs = catalog.runs()
    summaries = [s for s in (catalog.per_run(run, _summary_or_none) for run in runs.values()) if s is not None]
    names = {path_key(name): name for name in runs}  # the runs that placed points name by key (repviz place)
    summaries = [{**s, "placed_into": [names[k] for k in s["placed_into"] if k in names]} for s in summaries]
    return {"runs": summaries, "methods": methods, "meta": _meta_names(log)}


def _summary_or_none(run: Run) -> dict | None:
    """:func:`_run_summary`, or None for a run that cannot be summarised yet (being created: no probe); cached
    like a summary, so a log directory of thousands of such runs costs a few ``stat`` calls each per index."""
    try:
        return _run_summary(run)
    except (OSError, ValueError, NotFoundError) as e:
        logger.info("repviz: run %r left out of the index: %s", run.name, e)
        return None


def _meta_names(log) -> list[str]:
    roots = [os.path.realpath(base) for base in (log.path, log.out) if base is not None]
    return [name for name in log.artifact_names()
            if log.artifacts(name).exists(META_RESULT.result)
            and any(inside(log.artifacts(name).path(META_RESULT.result), root) for root in roots)]


def info_impl(catalog: Catalog, run_name: str, layer: str, step: int, key: str | None) -> dict:
    """The manifest entry of a layer, the record of one snapshot and, with ``key``, the embedding's sidecar."""
    run = catalog.run(run_name)
    info = run.layer_info(known_layer(run, layer))
    record = run.record(layer, step)
    out = {"layer": {"name": layer, **info},
           "record": {k: record.get(k) for k in ("shape", "dtype", "nonfinite", "constant", "epoch", "batch",
                                                 "step")},
           "points": {"n": int(record["shape"][0]), "of": len(run.probe), "subset": "rows" in record},
           "embedding": None}
    if key is not None:
        known_step(step, run.embeddings.steps(known_key(run, key), layer), f"embedding {key!r} of layer {layer!r}")
        side = run.embeddings.info(key, layer, step)
        out["embedding"] = {k: side.get(k) for k in ("method", "scores", "params", "align", "seconds", "n_iter",
                                                     "kl_divergence", "one_dimensional")}
    return out


def meta_result_impl(catalog: Catalog, name: str) -> dict:
    """A stored meta-SNE map: the (run, layer, step) of each row, its coordinates, and the notes that say what was
    compared (the probe points, a pair sample, snapshots left out)."""
    log = catalog.logdir()
    if log is None or name not in _meta_names(log):
        raise NotFoundError(f"meta-SNE result {name!r} is not in the log directory")
    result = meta_result(log, name)
    return {"keys": [list(k) for k in result.keys], "coords": np.asarray(result.coords, dtype=float).tolist(),
            "params": result.params, "explained_variance": result.explained_variance,
            "robustness": result.robustness, "rows": meta_rows(result.keys, catalog.runs()),
            "notes": [n for n in result.info.get("notes") or [] if isinstance(n, str)]}


def meta_rows(keys: list[tuple[str, str, int]], runs: dict[str, Run]) -> list[dict]:
    """Each row of a meta-SNE map described for drawing: its run, layer and step, the layer's depth (index in its
    run's layer list) and the run's layer count, and whether it is the input landmark (depth and n_layers are
    None for the landmark and for a layer no listed run holds)."""
    rows = []
    for run, layer, step in keys:
        layers = runs[run].layers if run in runs else []
        depth = layers.index(layer) if layer in layers else None
        rows.append({"run": run, "layer": layer, "step": step, "depth": depth,
                     "n_layers": len(layers) if depth is not None else None, "landmark": (run, layer) == INPUT_KEY[:2]})
    return rows


# --------------------------------------------------------------------------------------------------------------
# Binary routes
# --------------------------------------------------------------------------------------------------------------

def coords_impl(catalog: Catalog, run_name: str, layer: str, step: int, key: str) -> np.ndarray:
    """The stored 2-D embedding (n, 2) float32 (a 1-D embedding gets y = 0; more components are cut to 2)."""
    run = catalog.run(run_name)
    known_layer(run, layer)
    known_step(step, run.embeddings.steps(known_key(run, key), layer), f"embedding {key!r} of layer {layer!r}")
    Y = np.asarray(run.embeddings.read(key, layer, step))
    out = np.zeros((Y.shape[0], 2), dtype="<f4")
    out[:, :min(2, Y.shape[1])] = Y[:, :2]
    return out


def rows_impl(catalog: Catalog, run_name: str, layer: str, step: int) -> np.ndarray:
    """Positions into the probe (int32) of the rows of ``layer`` at ``step``: of its activations and of every
    embedding of it (row i of the coords route is probe point ``rows[i]``); all of them, in order, unless the
    snapshot holds a subset of the probe."""
    run = catalog.run(run_name)
    known_step(step, run.steps(known_layer(run, layer)), f"layer {layer!r} of run {run_name!r}")
    return np.asarray(run.rows(layer, step), dtype="<i4")


def in_probe_order(values: np.ndarray, rows: np.ndarray, n: int, fill: float) -> np.ndarray:
    """``values`` of the rows at probe positions ``rows`` spread over all ``n`` probe points, ``fill`` elsewhere
    (the same array when the rows are the whole probe)."""
    if len(rows) == n:
        return values
    out = np.full((n, *values.shape[1:]), fill, dtype=values.dtype)
    out[rows] = values
    return out


def placed_impl(catalog: Catalog, run_name: str, layer: str, step: int, key: str) -> dict:
    """Points of other runs placed into the layout ``key`` of ``run_name``'s ``layer`` at ``step`` (``repviz
    place``): per run, its coordinates (x0, y0, x1, ...; as :func:`coords_impl` cuts them to 2-D), the probe
    position and class code of each point (for the hover card), its scores, and ``stale`` when the layout or the
    run's snapshot changed after the points were placed (the page does not draw those)."""
    run = catalog.run(run_name)
    known_layer(run, layer)
    known_step(step, run.embeddings.steps(known_key(run, key), layer), f"embedding {key!r} of layer {layer!r}")
    layout = None
    placed = []
    for other in catalog.runs().values():
        if other.name == run.name or not other.artifact(PLACED).has(run.name, key, layer, step):
            continue
        try:
            Y, info = other.placed(run.name, key, layer, step)
        except (NotFoundError, ValueError, OSError) as e:  # a damaged file: the others are still drawn
            logger.warning("repviz: points of run %r placed into %r left out: %s", other.name, run.name, e)
            continue
        if layout is None:
            layout = checksum(np.asarray(run.embeddings.read(key, layer, step)))
        source = info.get("source", {})
        current = layer in other.layers and step in other.steps(layer) and \
            source.get("crc32") == other.record(layer, step)["crc32"]
        rows = other.rows(layer, step) if current else np.arange(len(Y))
        xy = np.zeros((len(Y), 2), dtype=np.float32)
        xy[:, :min(2, Y.shape[1])] = Y[:, :2]
        codes = label_codes(other.probe)[0]
        placed.append({"run": other.name, "n": len(Y), "coords": xy.ravel().tolist(), "rows": rows.tolist(),
                       "labels": codes[rows].tolist() if current else [-1] * len(Y),
                       "stale": not current or source.get("layout_crc32") != layout, "scores": info.get("scores", {})})
    return {"placed": placed}


def labels_impl(catalog: Catalog, run_name: str) -> np.ndarray:
    """Class codes of the probe points, int32 (-1: none)."""
    probe = catalog.run(run_name).probe
    return label_codes(probe)[0].astype("<i4")


def predictions_impl(catalog: Catalog, run_name: str, step: int) -> np.ndarray:
    """Predicted class then confidence of every probe point at ``step``: float32 of length 2n (class -1 and
    confidence NaN for the points a snapshot of a probe subset did not predict)."""
    run = catalog.run(run_name)
    known_step(step, run.prediction_steps(), f"the predictions of run {run_name!r}")
    probe = run.probe
    n = len(probe)
    codes, names = label_codes(probe)
    n_classes = len(names) if names is not None else int(codes.max()) + 1 if len(codes) else 0
    classes, confidence = predicted_classes(np.asarray(run.predictions(step)), binary=n_classes == 2)
    rows = run.prediction_rows(step)
    return np.concatenate([in_probe_order(classes, rows, n, -1.0),
                           in_probe_order(confidence, rows, n, np.nan)]).astype("<f4")


def ids_impl(catalog: Catalog, run_name: str) -> np.ndarray:
    """Probe ids as float64 (exact up to 2^53, what a JavaScript number holds)."""
    return np.asarray(catalog.run(run_name).probe.ids, dtype="<f8")


def thumbnails_impl(catalog: Catalog, run_name: str, start: int, count: int) -> np.ndarray:
    """Thumbnails ``start`` to ``start + count`` (uint8); cut at the end of the probe set and at the byte bound."""
    thumbs = catalog.run(run_name).probe.thumbnails
    if thumbs is None:
        raise NotFoundError(f"run {run_name!r} stored no thumbnails")
    if not 1 <= count <= MAX_THUMBNAILS:
        raise BadRequest(f"count must be in [1, {MAX_THUMBNAILS}]; got {count}")
    if not 0 <= start < len(thumbs):
        raise BadRequest(f"start must be in [0, {len(thumbs)}); got {start}")
    per_item = max(1, int(np.prod(thumbs.shape[1:])))
    count = min(count, len(thumbs) - start, max(1, MAX_THUMBNAIL_BYTES // per_item))
    return np.ascontiguousarray(thumbs[start:start + count], dtype=np.uint8)


def etag(array: np.ndarray) -> str:
    """A strong validator: CRC32 and length of the bytes served (about 1 GB/s, so cheap at these sizes)."""
    data = np.ascontiguousarray(array).data
    return f'"{zlib.crc32(data) & 0xFFFFFFFF:08x}-{data.nbytes:x}"'
