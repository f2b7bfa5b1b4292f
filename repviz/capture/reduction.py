"""How each recorded tensor becomes its stored rows: pooled over positions (global pooling of maps, mask-aware
pooling of sequences) on the backend, flattened, and count-sketched in numpy when wide
(:mod:`repviz._reduction`, a numba kernel whose compiled form is loaded on a thread as soon as this module is
imported). A layer keeps the reduction it was first recorded with, so snapshots stay comparable.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from .. import _reduction
from .layers import Output, Tensor, run_recorded
from .options import Reduction

SKETCH_KERNEL = _reduction.load_sketch_kernel()  # while the script goes on to load data and build its model

SEQUENCE_DEFAULT = "mean"  # Reduction(pooling=None) for (n, T, d) outputs: mask-aware mean pooling
#: The stored reduction kind of each policy for sequences (n, T, d) and maps (n, H, W, C), as the manifest says.
SEQUENCE_KINDS = {"avg": "global_avg_pooling",
                  **{p: f"sequence_{p}_pooling" for p in ("mean", "max", "first", "last")}}
MAP_KINDS = {"avg": "global_avg_pooling", "mean": "global_avg_pooling", "max": "global_max_pooling"}
POOLING_KINDS = {*SEQUENCE_KINDS.values(), *MAP_KINDS.values()}

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
        reduction = new_reduction(t.name, t.sample_shape, options, seed)
    kind = reduction["kind"]
    pooling = reduction.get("before", kind)
    pooling = pooling if pooling in POOLING_KINDS else None
    width = int(t.sample_shape[-1]) if pooling else int(np.prod(t.sample_shape, dtype=np.int64))
    sketch = None
    if kind == _reduction.COUNT_SKETCH:
        plan = _reduction.count_sketch_plan(width, reduction["dim"], reduction["seed"])
        sketch = _reduction.count_sketch_columns(*plan, width, reduction["dim"])
    elif kind != "none" and pooling is None:
        raise ValueError(f"layer {t.name!r} of this run was recorded with the reduction {kind!r}, which this "
                         f"version of repviz cannot continue; record into a new run directory")
    stored = reduction["dim"] if sketch is not None else width
    return Capture(t.name, t.path, t.layer, t.call, t.output, t.sample_shape, pooling, width, sketch, reduction,
                   stored)


def new_reduction(name: str, shape: tuple[int, ...], options: Reduction, seed: int) -> dict:
    """The reduction of a layer recorded for the first time, as the manifest stores it."""
    kind = pooling_kind(options.pooling, name, shape)
    width = int(shape[-1]) if kind else int(np.prod(shape, dtype=np.int64))
    reduction: dict = {"kind": kind, "dim": width} if kind else {"kind": "none"}
    if width <= options.max_width:
        return reduction
    return {"kind": _reduction.COUNT_SKETCH, "dim": options.projection_dim,
            "seed": [seed, zlib.crc32(name.encode())], "in_width": width, "before": reduction["kind"]}


def pooling_kind(pooling: str | dict | None, name: str, shape: tuple[int, ...]) -> str | None:
    """The reduction kind that ``pooling`` gives layer ``name`` of sample shape ``shape``; None: flattened. A
    dict names layers (``name`` or the layer path before ``#``/``:``); the rest get the default."""
    if isinstance(pooling, dict):
        pooling = pooling.get(name, pooling.get(name.split("#")[0].split(":")[0]))
    if len(shape) == 2:
        return SEQUENCE_KINDS.get(SEQUENCE_DEFAULT if pooling is None else pooling)
    return MAP_KINDS.get(pooling) if len(shape) > 2 else None


def reduce(tensor: Any, c: Any) -> Any:
    """Flatten one batch of a captured output to (batch, flat width) float32 on the backend side, pooled on
    request (``c``: a :class:`Capture`, or anything with its ``pooling`` and ``flat_width``); the count sketch
    follows in numpy (:func:`sketch_rows`)."""
    ops = keras.ops
    x = ops.cast(tensor, "float32")
    if c.pooling in ("global_avg_pooling", "global_max_pooling"):
        axes = tuple(range(1, len(x.shape) - 1))
        x = ops.mean(x, axis=axes) if c.pooling == "global_avg_pooling" else ops.max(x, axis=axes)
    elif c.pooling:
        x = pool_sequence(x, keras_mask(tensor), c.pooling.split("_")[1])
    return ops.reshape(x, (-1, c.flat_width))


def keras_mask(tensor: Any) -> Any:
    """The Keras mask (batch, T) a layer attached to its output, or None. Keras keeps it on the tensor, or in a
    table by tensor id where the tensor takes no attribute (JAX arrays); only its own reader knows both."""
    try:
        from keras.src.backend.common.masking import get_keras_mask
    except ImportError:  # pragma: no cover - a Keras that moved it
        return getattr(tensor, "_keras_mask", None)
    return get_keras_mask(tensor)


def pool_sequence(x: Any, mask: Any, policy: str) -> Any:
    """Pool (batch, T, d) over T by ``policy``, leaving out the positions ``mask`` (batch, T) drops: the mean or
    max over the kept ones, the first position, or the last kept one (0 for an example with none kept)."""
    ops = keras.ops
    if policy == "first":
        return x[:, 0]
    if mask is None:
        mask = ops.ones(ops.shape(x)[:2], "float32")
    m = ops.cast(mask, "float32")
    if policy == "mean":
        return ops.sum(x * m[:, :, None], axis=1) / ops.maximum(ops.sum(m, axis=1, keepdims=True), 1.0)
    if policy == "max":
        kept = ops.where(m[:, :, None] > 0, x, ops.full_like(x, -np.inf))
        return ops.where(ops.sum(m, axis=1, keepdims=True) > 0, ops.max(kept, axis=1), ops.zeros_like(x[:, 0]))
    positions = ops.cast(ops.arange(ops.shape(x)[1]), "float32")[None, :] * m + m  # kept position + 1, else 0
    last = ops.cast(ops.maximum(ops.argmax(positions, axis=1), 0), "int32")
    picked = ops.take_along_axis(x, last[:, None, None], axis=1)[:, 0]
    return ops.where(ops.sum(m, axis=1, keepdims=True) > 0, picked, ops.zeros_like(picked))


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
        reduced = [reduce(keras.tree.flatten(calls[id(c.layer)][c.call])[c.output], c) for c in self.captures]
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
