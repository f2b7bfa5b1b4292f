"""How each recorded tensor becomes its stored rows: pooled over positions (global pooling of maps, mask-aware
pooling of sequences over their sequence axis) on the backend, flattened, and count-sketched in numpy when wide
(:mod:`repviz._reduction`, a numba kernel whose compiled form is loaded on a thread as soon as a layer is planned
with it: a model whose layers are all narrow never imports numba). A layer keeps the reduction it was first
recorded with, so snapshots stay comparable.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from .. import _reduction
from .layers import Output, Tensor, keras_mask, run_recorded
from .options import Reduction

SEQUENCE_DEFAULT = "mean"  # Reduction(pooling=None) for sequences: mask-aware mean pooling
#: The stored reduction kind of each policy for sequences (n, T, ...) and maps (n, H, W, C), as the manifest says;
#: a sequence pooled over another axis than 1, or with more axes than (n, T, d), has it as the reduction's "axis".
SEQUENCE_KINDS = {"avg": "global_avg_pooling",
                  **{p: f"sequence_{p}_pooling" for p in ("mean", "max", "first", "last")}}
MAP_KINDS = {"avg": "global_avg_pooling", "mean": "global_avg_pooling", "max": "global_max_pooling"}
POOLING_KINDS = {*SEQUENCE_KINDS.values(), *MAP_KINDS.values()}
SEQUENCE_POOLING = {k for k in SEQUENCE_KINDS.values() if k.startswith("sequence_")}

BATCH_BYTES = 96 << 20  # ProbeSet(batch_size=None): the full-width outputs of one probe batch fit in this


@dataclass
class Capture(Tensor):
    """One recorded tensor and how it is reduced and stored."""

    pooling: str | None  # a reduction kind of POOLING_KINDS, or None
    flat_width: int  # columns after pooling, before the random reduction
    sketch: Any  # count sketch, applied to the flat output in numpy: (bucket, sign) per column, or None
    reduction: dict
    width: int  # stored columns


def capture(t: Tensor, options: Reduction, seed: int, recorded: dict | None = None) -> Capture:
    """How ``t`` is reduced: as ``recorded`` before (the manifest entry of the run this fit continues) when its
    shape is the same, else as ``options`` give for a layer recorded for the first time."""
    if recorded and recorded.get("output_shape") == [None, *t.sample_shape]:
        reduction = recorded.get("reduction") or {"kind": "none"}  # resumed: snapshots stay comparable
    else:
        reduction = new_reduction(t.name, t.sample_shape, options, seed, t.sequence_axis)
    kind = reduction["kind"]
    pooling = reduction.get("before", kind)
    pooling = pooling if pooling in POOLING_KINDS else None
    axis = reduction.get("axis", 1) if pooling in SEQUENCE_POOLING else None
    width = pooled_width(t.sample_shape, pooling, axis)
    sketch = None
    if kind == _reduction.COUNT_SKETCH:
        plan = _reduction.count_sketch_plan(width, reduction["dim"], reduction["seed"])
        sketch = _reduction.count_sketch_columns(*plan, width, reduction["dim"])
        _reduction.load_sketch_kernel()  # loads while the capture's forward pass is traced
    elif kind != "none" and pooling is None:
        raise ValueError(f"layer {t.name!r} of this run was recorded with the reduction {kind!r}, which this "
                         f"version of repviz cannot continue; record into a new run directory")
    stored = reduction["dim"] if sketch is not None else width
    return Capture(t.name, t.path, t.layer, t.call, t.output, t.sample_shape, axis, pooling, width, sketch,
                   reduction, stored)


def new_reduction(name: str, shape: tuple[int, ...], options: Reduction, seed: int,
                  sequence_axis: int | None = None) -> dict:
    """The reduction of a layer recorded for the first time, as the manifest stores it (``sequence_axis``: the axis
    of its positions when it is a sequence, see :func:`repviz.capture.layers.sequence_axis`)."""
    kind = pooling_kind(options.pooling, name, shape, sequence_axis)
    axis = sequence_axis if kind in SEQUENCE_POOLING else None
    width = pooled_width(shape, kind, axis)
    where = {"axis": axis} if axis is not None and (axis != 1 or len(shape) > 2) else {}
    reduction: dict = {"kind": kind, "dim": width, **where} if kind else {"kind": "none"}
    if width <= options.max_width:
        return reduction
    return {"kind": _reduction.COUNT_SKETCH, "dim": options.projection_dim,
            "seed": [seed, zlib.crc32(name.encode())], "in_width": width, "before": reduction["kind"], **where}


def pooling_kind(pooling: str | dict | None, name: str, shape: tuple[int, ...],
                 sequence_axis: int | None = None) -> str | None:
    """The reduction kind that ``pooling`` gives layer ``name`` of sample shape ``shape`` (a sequence when
    ``sequence_axis`` is given); None: flattened. A dict names layers (``name`` or the layer path before
    ``#``/``:``); the rest get the default."""
    if isinstance(pooling, dict):
        pooling = pooling.get(name, pooling.get(name.split("#")[0].split(":")[0]))
    if len(shape) == 2 or (len(shape) > 2 and sequence_axis is not None):
        return SEQUENCE_KINDS.get(SEQUENCE_DEFAULT if pooling is None else pooling)
    return MAP_KINDS.get(pooling) if len(shape) > 2 else None


def pooled_width(shape: tuple[int, ...], pooling: str | None, axis: int | None) -> int:
    """Columns of a sample of ``shape`` after ``pooling``: the last axis for global pooling, every axis but the
    sequence ``axis`` for sequence pooling, every axis when flattened."""
    if pooling in MAP_KINDS.values():
        return int(shape[-1])
    kept = [s for i, s in enumerate(shape, start=1) if pooling is None or i != axis]
    return int(np.prod(kept, dtype=np.int64))


def reduce(tensor: Any, c: Any, masks: dict[int, Any] | None = None) -> Any:
    """Flatten one batch of a captured output to (batch, flat width) float32 on the backend side, pooled on
    request (``c``: a :class:`Capture`, or anything with its ``pooling``, ``sequence_axis`` and ``flat_width``);
    the count sketch follows in numpy (:func:`sketch_rows`). A sequence is pooled with its own Keras mask; one of
    more axes than ``(n, T, d)`` whose layer drops the mask (attention projections and scores) with the mask of
    its length from ``masks`` (:func:`sequence_masks`)."""
    ops = keras.ops
    x = ops.cast(tensor, "float32")
    if c.pooling in ("global_avg_pooling", "global_max_pooling"):
        axes = tuple(range(1, len(x.shape) - 1))
        x = ops.mean(x, axis=axes) if c.pooling == "global_avg_pooling" else ops.max(x, axis=axes)
    elif c.pooling:
        axis = c.sequence_axis or 1
        mask = keras_mask(tensor)
        length = x.shape[axis]
        if len(x.shape) > 3 and (mask is None or tuple(mask.shape)[1:] != (length,)):
            mask = None if length is None else (masks or {}).get(int(length))
        x = pool_sequence(ops.moveaxis(x, axis, 1) if axis != 1 else x, mask, c.pooling.split("_")[1])
    return ops.reshape(x, (-1, c.flat_width))


def sequence_masks(calls: dict[int, list]) -> dict[int, Any]:
    """The Keras masks ``(batch, T)`` on the recorded outputs of one run, by length ``T`` (the first of each): the
    padding of the sequences that attention layers' parts see without a mask of their own."""
    masks: dict[int, Any] = {}
    for results in calls.values():
        for t in (t for result in results for t in keras.tree.flatten(result)):
            mask = keras_mask(t)
            if mask is not None and len(mask.shape) == 2 and mask.shape[1] is not None:
                masks.setdefault(int(mask.shape[1]), mask)
    return masks


def pool_sequence(x: Any, mask: Any, policy: str) -> Any:
    """Pool (batch, T, ...) over T by ``policy``, leaving out the positions ``mask`` (batch, T) drops: the mean or
    max over the kept ones, the first position, or the last kept one (0 for an example with none kept)."""
    ops = keras.ops
    if policy == "first":
        return x[:, 0]
    if mask is None:
        mask = ops.ones(ops.shape(x)[:2], "float32")
    m = ops.cast(mask, "float32")
    each = m  # the mask against x, and the count of kept positions against a pooled row
    count = ops.sum(m, axis=1, keepdims=True)
    for _ in range(len(x.shape) - 2):
        each = each[..., None]
    for _ in range(len(x.shape) - 3):
        count = count[..., None]
    if policy == "mean":
        return ops.sum(x * each, axis=1) / ops.maximum(count, 1.0)
    if policy == "max":
        kept = ops.where(each > 0, x, ops.full_like(x, -np.inf))
        return ops.where(count > 0, ops.max(kept, axis=1), ops.zeros_like(x[:, 0]))
    positions = ops.cast(ops.arange(ops.shape(x)[1]), "float32")[None, :] * m + m  # kept position + 1, else 0
    last = ops.cast(ops.maximum(ops.argmax(positions, axis=1), 0), "int32")
    index = last
    for _ in range(len(x.shape) - 1):
        index = index[..., None]
    picked = ops.take_along_axis(x, index, axis=1)[:, 0]
    return ops.where(count > 0, picked, ops.zeros_like(picked))


def sketch_rows(rows: np.ndarray, c: Capture, threads: int | None = None) -> np.ndarray:
    """One probe batch of ``c`` as stored: ``rows`` count-sketched (on ``threads`` threads; None: numba's) when
    ``c`` is, else as they are."""
    if c.sketch is None:
        return rows
    sketched = np.empty((len(rows), c.width), np.float32)
    _reduction.apply_count_sketch(rows, *c.sketch, sketched, threads)
    return sketched


def host_view(tensor: Any) -> np.ndarray:
    """A backend tensor as a numpy array, without a copy where the backend allows (TensorFlow's CPU tensors:
    ``keras.ops.convert_to_numpy`` copies, which cost a CNN snapshot more than its sketch)."""
    if keras.backend.backend() == "tensorflow":
        return np.asarray(tensor)
    return keras.ops.convert_to_numpy(tensor)


def auto_batch_rows(n: int, captures: list[Capture], outputs: list[Output]) -> int:
    """Probe rows per batch for ``ProbeSet(batch_size=None)``: the fewest batches within :data:`BATCH_BYTES` for the
    full-width outputs of a batch, of equal size (a short last batch costs nearly a whole call)."""
    values = sum(c.flat_width for c in captures) + sum(int(np.prod(o.sample_shape)) for o in outputs)
    most = max(16, BATCH_BYTES // (4 * max(1, values)))
    batches = -(-n // most)
    return int(-(-n // batches))


class CaptureCall:
    """``x -> (reduced captures, float32 model outputs)`` for one probe batch: the model's forward pass with the
    recorded layers wrapped, each capture reduced (see :func:`reduce`). A callable object rather than a closure:
    TensorFlow counts traces per Python code object, so the closures of several models in one process, each
    traced once, would add up to its "triggered tf.function retracing" warning."""

    def __init__(self, model: Any, forward: Callable | None, captures: list[Capture], outputs: list[int]):
        self.model, self.forward, self.captures, self.outputs = model, forward, captures, outputs
        self.layers = [c.layer for c in captures]

    def __call__(self, x: Any) -> tuple[list, list]:
        calls, outputs = run_recorded(self.model, self.forward, x, self.layers)
        masks = sequence_masks(calls)
        reduced = [reduce(keras.tree.flatten(calls[id(c.layer)][c.call])[c.output], c, masks) for c in self.captures]
        flat = keras.tree.flatten(outputs)
        return reduced, [keras.ops.cast(flat[i], "float32") for i in self.outputs]

    def compiled(self, x: Any) -> Callable:
        """This call as the backend runs it fastest on batches shaped like ``x``'s: on TensorFlow a
        ``tf.function`` traced once (the input signature leaves the batch dimension free, for the shorter last
        batch; the wrappers run once, while tracing, and each snapshot runs one graph); elsewhere itself."""
        if keras.backend.backend() != "tensorflow":
            return self
        import tensorflow as tf

        signature = keras.tree.map_structure(lambda a: tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype)), x)
        return tf.function(self, input_signature=[signature], autograph=False)
