"""Which tensors of a model the callback records, and under which names.

Walks the model (nested models and custom layers included), resolves ``layers=``, runs the model with the chosen
layers' ``call`` wrapped to keep their outputs, leaves out the default set's layers whose output repeats a
recorded tensor (identity, ReLU after ReLU, a container's output that is an inner layer's) or has no batch axis,
and names each recorded tensor (``name#call``, ``name:output``) and each model output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from .._validation import choices, param_error
from .options import OWNER


@dataclass
class Tensor:
    """One recorded tensor: output ``output`` (in the flattened outputs) of call ``call`` of ``layer``."""

    name: str
    path: str
    layer: Any
    call: int
    output: int
    sample_shape: tuple[int, ...]


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
    if spec is None:
        types = default_types()
        return [(p, layer) for p, layer in paths.items() if isinstance(layer, types) or is_container(layer)], set()
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
            explicit.update(found)
            chosen.update((p, paths[p]) for p in found)
        elif isinstance(item, type):
            chosen.update((p, layer) for p, layer in paths.items() if isinstance(layer, item))
        else:
            chosen.update((p, layer) for p, layer in paths.items() if item(layer))
    if not chosen:
        raise ValueError(f"layers={spec!r} selects no layer of the model; available layers: {choices(paths)}")
    return [(p, layer) for p, layer in paths.items() if p in chosen], explicit


def run_recorded(model: Any, forward: Callable | None, x: Any, layers: list) -> tuple[dict[int, list], Any]:
    """Run ``model(x, training=False)`` (or ``forward(x)``) with ``layers``' ``call`` wrapped (each once, however
    often listed); returns, per layer id, the outputs of each of its calls in order, and the model's outputs."""
    calls: dict[int, list] = {id(layer): [] for layer in layers}
    with contextlib.ExitStack() as stack:
        for layer in {id(layer): layer for layer in layers}.values():
            stack.enter_context(recording(layer, calls[id(layer)]))
        outputs = model(x, training=False) if forward is None else forward(x)
    return calls, outputs


@contextlib.contextmanager
def recording(layer: Any, sink: list) -> Iterator[None]:
    """Temporarily replace ``layer.call`` by a wrapper that appends each output to ``sink``."""
    original = layer.call

    def call(*args, **kwargs):
        out = original(*args, **kwargs)
        sink.append(out)
        return out

    object.__setattr__(layer, "call", call)  # an instance attribute, bypassing Keras's attribute tracking
    try:
        yield
    finally:
        del layer.__dict__["call"]


def default_skips(paths: dict[str, Any], chosen: list[tuple[str, Any]], calls: dict[int, list]) -> dict[str, str]:
    """The layers ``layers=None`` leaves out, with the reason: not in the default set, or a copy of a recorded
    tensor (:func:`duplicates`, :func:`container_copies`)."""
    chosen_ids = {id(layer) for _, layer in chosen}
    skipped = {p: f"a {type(layer).__name__}: not in the default set (see layers=); name it in layers= to record it"
               for p, layer in paths.items() if id(layer) not in chosen_ids}
    skipped.update(duplicates(chosen, calls))
    skipped.update(container_copies(chosen, calls, skipped))
    return skipped


def recorded_tensors(chosen: list[tuple[str, Any]], calls: dict[int, list], n: int, explicit: set[str],
                     skipped: dict[str, str], model_name: str) -> list[Tensor]:
    """Every per-example tensor the chosen layers produced on the ``n``-row dry run, named ``path``, ``path#call``
    for a layer called several times and ``path:output`` for several outputs; adds to ``skipped`` what is left
    out (a layer not called, an output without a batch axis)."""
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
            for o, i in enumerate(batched):
                name = path + (f"#{c}" if len(results) > 1 else "") + (f":{o}" if len(batched) > 1 else "")
                found.append(Tensor(name, path, layer, c, i, tuple(flat[i].shape[1:])))
    return found


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


def output_names(model: Any, paths: list[tuple]) -> list[str]:
    """A name per flattened model output: the key path for dict outputs, else the output layer's name
    (``model.output_names`` of a Functional model, the last layer of a Sequential one), else ``output_<i>``;
    positions where names would repeat."""
    if paths and all(any(isinstance(k, str) for k in path) for path in paths):
        names = ["/".join(str(k) for k in path) for path in paths]
    elif isinstance(model, keras.Sequential) and model.layers:
        names = [model.layers[-1].name]
    else:
        try:
            names = [str(n) for n in model.output_names]
        except (AttributeError, ValueError):  # subclassed models name no outputs
            names = []
        if len(names) != len(paths):
            names = [f"output_{i}" for i in range(len(paths))]
    return names if len(set(names)) == len(names) else [f"output_{i}" for i in range(len(paths))]


def model_fingerprint(model: Any) -> str:
    """A digest of the model's class and of every layer's path, class and weight shapes: a run continues only
    with the architecture it was recorded with."""
    arch = [(path, type(layer).__name__, [list(w.shape) for w in layer.weights]) for path, layer in walk(model)]
    return hashlib.sha256(json.dumps([type(model).__name__, arch], sort_keys=True).encode()).hexdigest()[:16]
