"""Which tensors of a model the callback records, and under which names.

Walks the model (nested models and custom layers included), resolves ``layers=``, runs the model with the chosen
layers' ``call`` wrapped to keep their outputs, leaves out the default set's layers whose output repeats a
recorded tensor (identity, ReLU after ReLU, a container's output that is an inner layer's) or has no batch axis,
never records a layer's per-step calls inside ``TimeDistributed``, names each recorded tensor (``name#call``,
``name:output``, ``model/key`` for a nested model's outputs), says which axis of each is a sequence, and names each
model output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from .._validation import choices, param_error
from .options import OWNER


@dataclass
class Tensor:
    """One recorded tensor: output ``output`` (in the flattened outputs) of call ``call`` of ``layer``, and the axis
    of its positions when it is a sequence (:func:`sequence_axis`; None: not one)."""

    name: str
    path: str
    layer: Any
    call: int
    output: int
    sample_shape: tuple[int, ...]
    sequence_axis: int | None


@dataclass
class Output:
    """One output of the model, stored per snapshot: its name, position in the flattened outputs, sample shape."""

    name: str
    index: int
    sample_shape: tuple[int, ...]


def default_types() -> tuple[type, ...]:
    """The layer classes ``layers=None`` records: those whose output is a representation."""
    L = keras.layers
    return (
        L.Dense, L.EinsumDense, L.Embedding,
        L.Conv1D, L.Conv2D, L.Conv3D, L.Conv1DTranspose, L.Conv2DTranspose, L.Conv3DTranspose,
        L.SeparableConv1D, L.SeparableConv2D, L.DepthwiseConv1D, L.DepthwiseConv2D,
        L.MaxPooling1D, L.MaxPooling2D, L.MaxPooling3D, L.AveragePooling1D, L.AveragePooling2D,
        L.AveragePooling3D, L.GlobalMaxPooling1D, L.GlobalMaxPooling2D, L.GlobalMaxPooling3D,
        L.GlobalAveragePooling1D, L.GlobalAveragePooling2D, L.GlobalAveragePooling3D,
        L.Activation, L.ReLU, L.LeakyReLU, L.PReLU, L.ELU, L.Softmax, L.RNN, L.Bidirectional, L.TimeDistributed,
    )


def check_layers_spec(spec: Any) -> Any:
    """``layers=`` checked (model-free): None, a name, a class, a callable, or a non-empty list of names and
    classes (as a list)."""
    if spec is None or isinstance(spec, (str, type)) or (callable(spec) and not isinstance(spec, (list, tuple))):
        return spec
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(s, (str, type)) for s in spec):
        return list(spec)
    raise param_error("layers", OWNER, "None, a layer name, a layer class, a callable or a non-empty list of names "
                      "and classes", spec)


def check_callable(model: Any) -> None:
    """Refuse, naming the way out, a model that trains through ``train_step`` and has no ``call()``."""
    if isinstance(model, keras.Model) and type(model).call is keras.Model.call:
        parts = [f"{model.name}.{a}" for a, v in vars(model).items()
                 if isinstance(v, keras.layers.Layer) and not a.startswith("_")]
        which = f" (it has {', '.join(parts)})" if parts else ""
        raise ValueError(f"model {model.name!r} has no call() (it trains through train_step), so no probe can run "
                         f"through it; log one of its models with ActivationLogger(..., model={model.name}.encoder)"
                         f"{which} or pass forward=lambda x: ...")


def merge_types() -> tuple[type, ...]:
    """The merge layers ``layers=None`` records where they carry a block's output (:func:`activation_after`)."""
    return keras.layers.Add, keras.layers.Multiply


def activation_types() -> tuple[type, ...]:
    """The activation layers of the default set: after a merge, theirs is the block's output."""
    L = keras.layers
    return L.Activation, L.ReLU, L.LeakyReLU, L.PReLU, L.ELU, L.Softmax


def activation_after(layer: Any) -> Any:
    """The activation layer that alone takes ``layer``'s output in the model's graph (a residual ``Add`` then
    ``ReLU``), else None (also in a subclassed model, whose calls leave no graph)."""
    nodes = getattr(layer, "_outbound_nodes", None) or []
    return nodes[0].operation if len(nodes) == 1 and isinstance(nodes[0].operation, activation_types()) else None


def is_default(layer: Any) -> bool:
    """Whether ``layers=None`` records ``layer``: a layer of the default set (``TimeDistributed`` when the layer it
    wraps is), a container (:func:`is_container`), or an ``Add``/``Multiply`` merge whose output is not handed to
    one activation layer alone (that activation's output, recorded, is then the block's)."""
    if isinstance(layer, keras.layers.TimeDistributed):
        return is_default(layer.layer)
    if isinstance(layer, merge_types()):
        return activation_after(layer) is None
    return isinstance(layer, default_types()) or is_container(layer)


def per_step(paths: dict[str, Any]) -> dict[str, str]:
    """The layers inside a ``TimeDistributed`` wrapper, by path, each with the wrapper's path: they run once per
    time step, so the wrapper's output (every step) is what is recorded."""
    wrappers = [p for p, layer in paths.items() if isinstance(layer, keras.layers.TimeDistributed)]
    return {p: w for p in paths for w in reversed(wrappers) if p.startswith(w + "/")}


def walk(layer: Any, prefix: str = "", seen: set | None = None) -> Iterator[tuple[str, Any]]:
    """(path, layer) for every layer inside ``layer``, depth first, in model order; shared layers once."""
    seen = set() if seen is None else seen
    if isinstance(layer, keras.Model):
        children = layer.layers  # graph order for Functional and Sequential
    else:  # sublayers of a custom layer, in the order they were assigned
        children = layer._flatten_layers(include_self=False, recursive=False)
    for child in children:
        if id(child) in seen or isinstance(child, keras.layers.InputLayer):
            continue
        seen.add(id(child))
        path = prefix + child.name
        yield path, child
        yield from walk(child, path + "/", seen)


def select_layers(paths: dict[str, Any], spec: Any) -> tuple[list[tuple[str, Any]], set[str]]:
    """Resolve ``layers=`` against the model's layer paths; returns the choice and the explicitly named paths."""
    steps = per_step(paths)
    if spec is None:
        return [(p, layer) for p, layer in paths.items() if p not in steps and is_default(layer)], set()
    items = spec if isinstance(spec, list) else [spec]
    by_name: dict[str, list[str]] = {}
    for p, layer in paths.items():
        by_name.setdefault(layer.name, []).append(p)
    chosen: dict[str, Any] = {}
    explicit: set[str] = set()
    for item in items:
        if isinstance(item, str):
            if item in paths:
                found = [item]
            elif len(by_name.get(item, [])) == 1:
                found = by_name[item]
            elif item in by_name:
                raise ValueError(f"layer name {item!r} is ambiguous: it matches {by_name[item]}; pass one of "
                                 f"these paths instead.")
            else:
                raise ValueError(f"layer {item!r} is not in the model; available layers: {choices(paths)}")
            if found[0] in steps:
                raise ValueError(f"layer {found[0]!r} runs once per time step inside TimeDistributed "
                                 f"{steps[found[0]]!r}; record {steps[found[0]]!r} instead (its output holds "
                                 f"every step).")
            explicit.update(found)
            chosen.update((p, paths[p]) for p in found)
        elif isinstance(item, type):
            chosen.update((p, layer) for p, layer in paths.items() if isinstance(layer, item) and p not in steps)
        else:
            chosen.update((p, layer) for p, layer in paths.items() if p not in steps and item(layer))
    if not chosen:
        raise ValueError(f"layers={spec!r} selects no layer of the model; available layers: {choices(paths)}")
    return [(p, layer) for p, layer in paths.items() if p in chosen], explicit


def run_recorded(model: Any, forward: Callable | None, x: Any, layers: list) -> tuple[dict[int, list], Any]:
    """Run ``model(x, training=False)`` (or ``forward(x)``) with ``layers``' ``call`` wrapped (each once, however
    often listed); returns, per layer id, the outputs of each of its calls in order, and the model's outputs. Each
    recorded output keeps the Keras mask its layer gave it, also where a later layer took it off its input
    (``MultiHeadAttention`` clears its query's)."""
    calls: dict[int, list] = {id(layer): [] for layer in layers}
    masks: dict[int, tuple] = {}
    with contextlib.ExitStack() as stack:
        for layer in {id(layer): layer for layer in layers}.values():
            stack.enter_context(recording(layer, calls[id(layer)], masks))
        outputs = model(x, training=False) if forward is None else forward(x)
    for tensor, mask in masks.values():
        if keras_mask(tensor) is None:
            _set_keras_mask(tensor, mask)
    return calls, outputs


@contextlib.contextmanager
def recording(layer: Any, sink: list, masks: dict) -> Iterator[None]:
    """Temporarily replace ``layer.call`` by a wrapper that appends each output to ``sink``, and ``layer``'s
    ``compute_mask`` by one that notes in ``masks`` (by tensor id) the masks Keras gives those outputs after the
    call (a layer that sets them in its call, as attention layers do, has them noted at once)."""
    original, compute = layer.call, layer.compute_mask
    pending: list = []  # the output of the call whose masks Keras computes next

    def call(*args, **kwargs):
        out = original(*args, **kwargs)
        sink.append(out)
        pending[:] = [out]
        _note_masks(out, [keras_mask(t) for t in keras.tree.flatten(out)], masks)
        return out

    def compute_mask(*args, **kwargs):
        mask = compute(*args, **kwargs)
        if pending:
            _note_masks(pending.pop(), mask, masks)
        return mask

    # instance attributes, bypassing Keras's attribute tracking
    object.__setattr__(layer, "call", call)
    object.__setattr__(layer, "compute_mask", compute_mask)
    try:
        yield
    finally:
        del layer.__dict__["call"], layer.__dict__["compute_mask"]


def _note_masks(out: Any, mask: Any, masks: dict) -> None:
    flat = keras.tree.flatten(out)
    given = [None] * len(flat) if mask is None else keras.tree.flatten(mask)
    if len(given) == len(flat):
        masks.update((id(t), (t, m)) for t, m in zip(flat, given) if m is not None)


def keras_mask(tensor: Any) -> Any:
    """The Keras mask (batch, T) a layer attached to its output, or None. Keras keeps it on the tensor, or in a
    table by tensor id where the tensor takes no attribute (JAX arrays); only its own reader knows both."""
    try:
        from keras.src.backend.common.masking import get_keras_mask
    except ImportError:  # pragma: no cover - a Keras that moved it
        return getattr(tensor, "_keras_mask", None)
    return get_keras_mask(tensor)


def _set_keras_mask(tensor: Any, mask: Any) -> None:
    try:
        from keras.src.backend.common.masking import set_keras_mask
    except ImportError:  # pragma: no cover - a Keras that moved it
        with contextlib.suppress(AttributeError):
            tensor._keras_mask = mask
        return
    set_keras_mask(tensor, mask)


def default_skips(paths: dict[str, Any], chosen: list[tuple[str, Any]], calls: dict[int, list]) -> dict[str, str]:
    """The layers ``layers=None`` leaves out, with the reason: run per time step inside ``TimeDistributed``, a
    merge whose activation's output is recorded, not in the default set, or a copy of a recorded tensor
    (:func:`duplicates`, :func:`container_copies`)."""
    chosen_ids = {id(layer) for _, layer in chosen}
    steps, where = per_step(paths), {id(layer): p for p, layer in paths.items()}
    skipped = {p: _left_out(layer, steps.get(p), where) for p, layer in paths.items() if id(layer) not in chosen_ids}
    skipped.update(duplicates(chosen, calls))
    skipped.update(container_copies(chosen, calls, skipped))
    return skipped


def _left_out(layer: Any, wrapper: str | None, where: dict[int, str]) -> str:
    kind = type(layer).__name__
    if isinstance(layer, keras.layers.TimeDistributed):
        kind = f"{kind}({type(layer.layer).__name__})"
    if wrapper is not None:
        return f"runs once per time step inside TimeDistributed {wrapper!r}, whose output (every step) is recorded"
    after = activation_after(layer) if isinstance(layer, merge_types()) else None
    if after is not None and id(after) in where:
        return (f"{kind} whose output goes only to {where[id(after)]!r}, recorded as the block's output; name it in "
                f"layers= to record it too")
    return f"a {kind}: not in the default set (see layers=); name it in layers= to record it"


def recorded_tensors(chosen: list[tuple[str, Any]], calls: dict[int, list], n: int, explicit: set[str],
                     skipped: dict[str, str], model_name: str, paths: dict[str, Any]) -> list[Tensor]:
    """Every per-example tensor the chosen layers produced on the ``n``-row dry run, once: named ``path``,
    ``path#call`` for a layer called several times, ``path/key`` for the outputs of a nested model with several
    (its output keys, else its output layers' names: :func:`output_labels`) and ``path:output`` for the other
    layers with several outputs. A tensor is recorded once, where the layer that made it is, under the name of the
    first layer it comes from (a nested model's output key before the inner layer's path); a layer named in
    ``layers=`` keeps its name. Adds to ``skipped`` what is left out (a layer not called, an output without a
    batch axis, a second name of a tensor). ``paths``: every layer of the model (:func:`walk`), for
    :func:`sequence_axis`."""
    found = _tensors(chosen, calls, n, explicit, skipped, model_name, attention_parts(paths))
    groups: dict[int, list[Tensor]] = {}  # by tensor identity, in the order of the first
    for t in found:
        groups.setdefault(id(keras.tree.flatten(calls[id(t.layer)][t.call])[t.output]), []).append(t)
    keep: set[int] = set()
    for group in groups.values():
        maker = next((t for t in group if not is_container(t.layer)), group[0])
        name = maker.name if maker.path in explicit else group[0].name
        for t in group:
            if t is maker or (t.path in explicit and t.name != name):
                keep.add(id(t))
            if (t is maker or id(t) not in keep) and t.name != name:
                skipped[t.name] = f"same tensor as {name!r}"
        maker.name = name
    kept = [t for t in found if id(t) in keep]
    taken = Counter(t.name for t in kept)
    for t in kept:  # a nested model's output key that is also the path of another recorded layer
        if taken[t.name] > 1 and t.name.split("#")[0] != t.path:
            t.name = t.name.replace(t.name.split("#")[0], f"{t.path}:{t.output}", 1)
        skipped.pop(t.name, None)
    return kept


def _tensors(chosen: list[tuple[str, Any]], calls: dict[int, list], n: int, explicit: set[str],
             skipped: dict[str, str], model_name: str, attention: set[int]) -> list[Tensor]:
    found = []
    for path, layer in chosen:
        if path in skipped:
            continue
        results = calls[id(layer)]
        if not results:
            if path in explicit:
                raise ValueError(f"layer {path!r} is not called when model {model_name!r} runs on the probe, "
                                 f"so it has no activations to record; choose another layer.")
            skipped[path] = "not called when the model runs on the probe"
        for c, result in enumerate(results):
            flat = keras.tree.flatten(result)
            batched = [i for i, t in enumerate(flat) if is_batched(t, n)]
            for i, t in enumerate(flat):
                if i not in batched:
                    where = path + (f"#{c}" if len(results) > 1 else "") + (f":{i}" if len(flat) > 1 else "")
                    skipped[where] = (f"output of shape {tuple(getattr(t, 'shape', ()))} has no batch "
                                      f"axis (the same for every example)")
            labels = output_labels(layer, result, batched)
            for o, i in enumerate(batched):
                name = path + labels[o] + (f"#{c}" if len(results) > 1 else "")
                shape = tuple(flat[i].shape[1:])
                found.append(Tensor(name, path, layer, c, i, shape, sequence_axis(layer, shape, flat[i], i, attention)))
    return found


def output_labels(layer: Any, result: Any, batched: list[int]) -> list[str]:
    """The suffix naming each batched output of one call of ``layer``: none for one output, ``/key`` for a nested
    model's outputs (:func:`output_names`: dict keys, else output layers' names), ``:i`` for others."""
    if len(batched) == 1:
        return [""]
    if isinstance(layer, keras.Model):
        names = output_names(layer, [p for p, _ in keras.tree.flatten_with_path(result)], fallback=None)
        if names is not None:
            return ["/" + names[i] for i in batched]
    return [f":{o}" for o in range(len(batched))]


def attention_types() -> tuple[type, ...]:
    """Attention layers (keras-hub's subclass them): their outputs and their parts' are sequences."""
    return keras.layers.MultiHeadAttention, keras.layers.GroupQueryAttention


def attention_parts(paths: dict[str, Any]) -> set[int]:
    """The ids of the attention layers of the model and of every layer inside one."""
    heads = [p for p, layer in paths.items() if isinstance(layer, attention_types())]
    return {id(layer) for p, layer in paths.items() if any(p == h or p.startswith(h + "/") for h in heads)}


def sequence_axis(layer: Any, shape: tuple[int, ...], tensor: Any, output: int, attention: set[int]) -> int | None:
    """The axis of ``layer``'s output (sample ``shape``) that runs over the positions of a sequence, which the
    sequence pooling pools (None: not a sequence; maps keep the map policy). ``(n, T, d)``: axis 1, whatever the
    layer. Of more axes: axis 1 of a ``TimeDistributed`` output, of an output of an attention layer or of a part
    of one (query, key and value projections ``(n, T, heads, dim)``), and of an output whose Keras mask is
    ``(n, T)``; the query axis (axis 2) of attention scores ``(n, heads, T_q, T_k)`` (an attention layer's
    ``Softmax``, or its second output). ``output``: the output's position in the layer's flattened outputs."""
    if len(shape) < 2:
        return None
    if len(shape) == 2:
        return 1
    if id(layer) in attention:
        scores = isinstance(layer, keras.layers.Softmax) or (isinstance(layer, attention_types()) and output == 1)
        return 2 if scores and len(shape) == 3 else 1
    mask = keras_mask(tensor)
    if isinstance(layer, keras.layers.TimeDistributed) or tuple(getattr(mask, "shape", ()))[1:] == shape[:1]:
        return 1
    return None


def is_batched(t: Any, n: int) -> bool:
    shape = getattr(t, "shape", None)
    return shape is not None and len(shape) >= 1 and shape[0] == n


def duplicates(chosen: list[tuple[str, Any]], calls: dict[int, list]) -> dict[str, str]:
    """The layers of the default set that would record a tensor already recorded, with the reason: layer ``B`` is
    skipped when (1) in the model's layer graph (Functional and Sequential models) it is called once, on the one
    output of a layer ``A`` that is recorded (or itself skipped as a copy of a recorded layer), (2) it applies
    the identity (``Activation("linear")``) or ReLU after an ``A`` that already ends in ReLU (``Conv2D(...,
    activation="relu")`` then ``ReLU()`` or ``Activation("relu")``; ReLU is idempotent), and (3) the outputs of
    ``A`` and ``B`` on the planning dry run are equal. A reshape (``Flatten``, ``Reshape``) is never in the default
    set, so the pooling output a ``Flatten`` reshapes is recorded once, under the pooling layer."""
    paths = {id(layer): path for path, layer in chosen}
    origin: dict[int, int] = {}  # id of a skipped layer -> id of the recorded layer whose tensor it repeats
    skipped = {}
    for path, layer in chosen:
        a = _producer(layer)
        if a is None or id(a) not in paths:
            continue
        kind, before = _final_activation(layer), _final_activation(a)
        if not (kind == "linear" or kind == before == "relu"):
            continue
        source = origin.get(id(a), id(a))
        mine, theirs = calls[id(layer)], calls[source]
        if len(mine) == len(theirs) == 1 and _same_values(mine[0], theirs[0]):
            origin[id(layer)] = source
            what = "the identity" if kind == "linear" else "ReLU to an output that already ends in ReLU"
            skipped[path] = f"same tensor as {paths[source]!r} ({type(layer).__name__} applies {what})"
    return skipped


def _producer(layer: Any) -> Any:
    """The layer whose one output is ``layer``'s one input in the model's graph, else None."""
    nodes = getattr(layer, "_inbound_nodes", None) or []
    if len(nodes) != 1 or len(nodes[0].arguments.keras_tensors) != 1 or len(nodes[0].parent_nodes) != 1:
        return None
    parent = nodes[0].parent_nodes[0]
    return parent.operation if len(parent.outputs) == 1 else None


def _final_activation(layer: Any) -> str | None:
    """``"relu"`` or ``"linear"`` when ``layer``'s output ends in that function (with its default arguments)."""
    if isinstance(layer, keras.layers.ReLU):
        plain = layer.max_value is None and not layer.negative_slope and not layer.threshold
        return "relu" if plain else None
    fn = getattr(layer, "activation", None)
    return {id(keras.activations.relu): "relu", id(keras.activations.linear): "linear"}.get(id(fn))


def _same_values(a: Any, b: Any) -> bool:
    a, b = (keras.ops.convert_to_numpy(t) for t in (a, b))
    return a.size == b.size and np.array_equal(a.reshape(-1), b.reshape(-1))


def is_container(layer: Any) -> bool:
    """A nested model or a custom layer (a class defined outside Keras): recorded by default."""
    return isinstance(layer, keras.Model) or type(layer).__module__.split(".")[0] != "keras"


def container_copies(chosen: list[tuple[str, Any]], calls: dict[int, list], skipped: dict) -> dict[str, str]:
    """The nested models and custom layers of the default set whose output is the same tensor as that of a
    recorded layer inside them (a nested Sequential's output is its last layer's): the inner one is recorded."""
    copies = {}
    for path, layer in chosen:
        mine = [keras.tree.flatten(r) for r in calls[id(layer)]]
        if not is_container(layer) or path in skipped or not mine:
            continue
        for inner, other in chosen:
            theirs = [keras.tree.flatten(r) for r in calls[id(other)]]
            if (inner.startswith(path + "/") and inner not in skipped and len(theirs) == len(mine)
                    and all(len(a) == len(b) and all(map(_same_values, a, b)) for a, b in zip(mine, theirs))):
                copies[path] = f"same tensor as {inner!r} (the {type(layer).__name__}'s output is that layer's)"
                break
    return copies


def model_outputs(model: Any, outputs: Any, primary: str | None) -> list[Output]:
    """The model's outputs to store, the ``primary`` one (by name; None: the first) first."""
    flat = keras.tree.flatten_with_path(outputs)
    names = output_names(model, [path for path, _ in flat])
    found = [Output(name, i, tuple(int(s) for s in t.shape[1:])) for i, (name, (_, t)) in
             enumerate(zip(names, flat))]
    choice = found[0].name if primary is None else primary
    first = [o for o in found if o.name == choice]
    if not first:
        raise param_error("prediction_output", OWNER, f"one of the outputs of model {model.name!r} "
                          f"({choices(names)})", choice)
    return first + [o for o in found if o.name != choice]


def output_names(model: Any, paths: list[tuple], fallback: str | None = "output_") -> list[str] | None:
    """A name per flattened model output: the key path for dict outputs, else the output layer's name
    (``model.output_names`` of a Functional model, the last layer of a Sequential one), else (also where names
    would repeat) ``<fallback><i>``, or None when ``fallback`` is None."""
    if paths and all(any(isinstance(k, str) for k in path) for path in paths):
        names = ["/".join(str(k) for k in path) for path in paths]
    elif isinstance(model, keras.Sequential) and model.layers:
        names = [model.layers[-1].name]
    else:
        try:
            names = [str(n) for n in model.output_names]
        except (AttributeError, ValueError):  # subclassed models name no outputs
            names = []
    if len(names) == len(paths) and len(set(names)) == len(names):
        return names
    return None if fallback is None else [f"{fallback}{i}" for i in range(len(paths))]


def model_fingerprint(model: Any) -> str:
    """A digest of the model's class and of every layer's path, class and weight shapes: a run continues only
    with the architecture it was recorded with."""
    arch = [(path, type(layer).__name__, [list(w.shape) for w in layer.weights]) for path, layer in walk(model)]
    return hashlib.sha256(json.dumps([type(model).__name__, arch], sort_keys=True).encode()).hexdigest()[:16]
