"""The probe as the callback records it: taken from arrays or a stream of batches, conformed to the model's inputs
as ``fit`` would, its labels, ids, thumbnails, the subset batch snapshots record, and its fingerprint.

Everything here works on numpy arrays (a stream is read into them once); Keras is used only for its tree
utilities and its reading of ``fit``'s batches.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from .._validation import check_param, param_error
from ..datasets import thumbnails as image_thumbnails
from ..metadata import Metadata, columns_from
from ..subsets import stratified_subset
from ..targets import Target, decide
from .options import OWNER, POSITIVE, Spelling, is_int, user_stacklevel

STREAM_ROWS = 1000  # ProbeSet(size=None): the examples taken from a dataset, generator or PyDataset


def split_probe(x: Any, y: Any = None, size: int | None = None) -> tuple[Any, Any]:
    """The probe's inputs and labels as numpy arrays, at most ``size`` rows: ``x`` as ``fit`` takes it, or a
    dataset, generator or PyDataset whose first ``size`` examples (default :data:`STREAM_ROWS`) are read."""
    if is_stream(x):
        if y is not None:
            raise ValueError("a probe dataset, generator or PyDataset yields its own labels; pass ProbeSet(dataset) "
                             "without y")
        source = x
        x, y = take_examples(x, size or STREAM_ROWS)
    else:
        source = x
    try:
        x = keras.tree.map_structure(np.asarray, x)
    except Exception as e:
        raise param_error("probe", OWNER, "an array, a list/dict of arrays, a pair (x, y), a tf.data.Dataset, a "
                          "generator or a keras.utils.PyDataset", type(source)) from e
    x = keras.tree.map_structure(input_array, x)
    if any(a.dtype.kind in "US" for a in keras.tree.flatten(x)) and keras.backend.backend() != "tensorflow":
        raise ValueError(f"string probe inputs need the TensorFlow backend (a model taking raw strings runs "
                         f"TensorFlow ops, and fit on {keras.backend.backend()} takes no strings); vectorise the text "
                         f"in the data pipeline and pass the probe as the token ids the model takes")
    y = None if y is None else targets(y)
    if size is not None:
        x = keras.tree.map_structure(lambda a: a[:size], x)
        y = None if y is None else keras.tree.map_structure(lambda a: a[:size], y)
    return x, y


def input_array(a: Any) -> np.ndarray:
    """One probe input array as numpy: numbers as given; strings (numpy ``<U``, Python ``str`` in an object array,
    ``tf.constant`` strings) as ``<U``, bytes as ``S``, so that they hash and slice as fixed-width arrays; anything
    else, or a mix, is refused."""
    a = fixed_width(np.asarray(a))
    if a.dtype.kind not in "biufUS":
        raise ValueError(f"probe inputs must hold numbers or strings (as model.fit takes them); got dtype "
                         f"{a.dtype}" + (" mixing types" if a.dtype.kind == "O" else ""))
    return a


def fixed_width(a: np.ndarray) -> np.ndarray:
    """An object array of ``str`` (or of ``bytes``) as ``<U`` (``S``); any other array as it is."""
    if a.dtype.kind == "O" and a.size:
        items = a.ravel().tolist()
        for kind, dtype in ((str, np.str_), (bytes, np.bytes_)):
            if all(isinstance(v, kind) for v in items):
                return a.astype(dtype)
    return a


def targets(y: Any) -> Any:
    """The probe's labels as arrays: one array, or a dict / list of arrays with one target per model output (as
    ``fit`` takes them for a multi-output model; the primary output's become the labels, see :func:`labels`)."""
    if isinstance(y, dict) or (isinstance(y, (list, tuple)) and y and all(np.ndim(t) >= 1 for t in y)):
        return keras.tree.map_structure(lambda t: fixed_width(np.asarray(t)), y)
    return fixed_width(np.asarray(y))


def leaves(y: Any) -> list[np.ndarray]:
    """The label arrays of ``y`` (none for None)."""
    return [] if y is None else keras.tree.flatten(y)


def is_stream(probe: Any) -> bool:
    """A dataset, generator or PyDataset (batches to iterate), not arrays."""
    if isinstance(probe, (list, tuple, dict, np.ndarray, str, bytes)) or hasattr(probe, "shape"):
        return False
    return isinstance(probe, keras.utils.PyDataset) or hasattr(probe, "__iter__")


def take_examples(source: Any, n: int) -> tuple[Any, Any]:
    """The first ``n`` examples of the batches a dataset, generator or PyDataset yields (as ``fit`` reads them:
    ``x``, ``(x, y)`` or ``(x, y, sample_weight)``), as numpy arrays."""
    if isinstance(source, keras.utils.PyDataset):
        batches = (source[i] for i in range(len(source)))
    elif hasattr(source, "as_numpy_iterator"):  # tf.data
        batches = source.as_numpy_iterator()
    else:
        batches = iter(source)
    xs, ys, rows = [], [], 0
    for batch in batches:
        x, y, _ = keras.utils.unpack_x_y_sample_weight(tuple(batch) if isinstance(batch, list) else batch)
        x = keras.tree.map_structure(lambda a: input_array(_host(a)), x)
        xs.append(x)
        ys.append(None if y is None else keras.tree.map_structure(lambda a: fixed_width(_host(a)), y))
        rows += len(keras.tree.flatten(x)[0])
        if rows >= n:
            break
    if not xs:
        raise ValueError("the probe dataset yielded no batch; pass one that yields the examples to record")
    x = keras.tree.map_structure(lambda *a: np.concatenate(a)[:n], *xs)
    y = None if any(v is None for v in ys) else keras.tree.map_structure(lambda *a: np.concatenate(a)[:n], *ys)
    return x, y


def _host(a: Any) -> np.ndarray:
    """One array of a batch a stream yielded, as numpy (a backend tensor converted by Keras)."""
    return a if isinstance(a, np.ndarray) else keras.ops.convert_to_numpy(a)


def probe_length(x: Any, y: Any) -> int:
    """The probe's row count, checked: every input array and label array holds it, and it is not 0."""
    lengths = {len(a) if a.ndim else 0 for a in keras.tree.flatten(x)}
    if len(lengths) != 1:
        raise ValueError(f"probe input arrays differ in length: {sorted(lengths)}")
    n = lengths.pop()
    if n == 0:
        raise ValueError("the probe is empty (0 rows); pass at least one input row, e.g. probe=x_test[:2000].")
    for t in leaves(y):
        if len(t) != n:
            raise ValueError(f"the probe has {n} input rows but {len(t)} labels")
    return n


def warn_nonfinite_inputs(x: Any, stacklevel: int) -> None:
    """Warn about NaN/infinite probe inputs now: a network may hide them (some CPU kernels turn ReLU(NaN) into
    0), so the activations alone would not tell."""
    bad = sum(int(a.size - np.count_nonzero(np.isfinite(a))) for a in keras.tree.flatten(x)
              if isinstance(a, np.ndarray) and a.dtype.kind in "fc")
    if bad:
        warnings.warn(f"the probe inputs hold {bad} non-finite value(s) (NaN or infinity); activations computed "
                      f"from them may be NaN, or silently finite, depending on the layers and the CPU",
                      RuntimeWarning, stacklevel=stacklevel + 1)


def check_ids(ids: Any, n: int, spelling: Spelling) -> np.ndarray:
    """The probe ids (default ``0..n-1``) as int64, checked: ``n`` distinct integers."""
    if ids is None:
        return np.arange(n, dtype=np.int64)
    name = spelling.param("ids")[0]
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu" or ids.shape != (n,):
        raise ValueError(f"{name} must be {n} integers (one per probe row); got dtype {ids.dtype}, "
                         f"shape {ids.shape}")
    if len(np.unique(ids)) != n:
        raise ValueError(f"{name} must be unique; {n - len(np.unique(ids))} are repeated")
    return ids.astype(np.int64)


def conform_probe(model: Any, x: Any) -> Any:
    """The probe as the model's ``fit`` reads it: a dict matched to ``model.inputs`` by input name (not in
    sorted-key order), an array one rank short of an input whose last axis is 1 expanded (one rank long with a
    last axis of 1, squeezed), as Keras's Functional models adjust their inputs. Refused only where Keras
    would refuse it: another count of arrays, another rank or size."""
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):  # subclassed models declare none: the dry run checks them
        return x
    if not inputs:
        return x
    struct = getattr(model, "_inputs_struct", None)  # a Functional model's inputs as declared (list or dict)
    keys = [i.name for i in inputs]
    named = isinstance(x, dict) and not isinstance(struct, dict) and set(keys) <= set(x)
    arrays = [x[k] for k in keys] if named else keras.tree.flatten(x)
    if len(arrays) != len(inputs):
        raise ValueError(f"the probe has {len(arrays)} input array(s) but model {model.name!r} takes {len(inputs)} "
                         f"({', '.join(keys)}); pass them as a list in that order or a dict keyed by these names.")
    fixed = []
    for a, inp in zip(arrays, inputs):
        want = tuple(inp.shape[1:])
        if a.ndim == len(want) and want and want[-1] == 1:
            a = a[..., None]
        elif a.ndim == len(want) + 2 and a.shape[-1] == 1:
            a = a[..., 0]
        if a.ndim - 1 != len(want) or any(w is not None and w != s for w, s in zip(want, a.shape[1:])):
            raise ValueError(f"the probe's input {inp.name!r} has shape {a.shape} but model {model.name!r} expects "
                             f"{(None, *want)} (so would its fit); pass probe inputs shaped like the training "
                             f"inputs.")
        fixed.append(a)
    if named:
        return dict(zip(keys, fixed))
    return keras.tree.pack_sequence_as(x, fixed) if isinstance(x, (list, tuple, dict)) else fixed[0]


def take(x: Any, rows: Any) -> Any:
    """The probe inputs at ``rows`` (positions, or a slice)."""
    return keras.tree.map_structure(lambda a: a[rows], x)


def shapes(x: Any) -> Any:
    """The shapes of the probe inputs, in their structure (for the manifest and messages)."""
    return keras.tree.map_structure(lambda a: [int(s) for s in a.shape], x)


def labels(y: Any, outputs: Sequence[Any]) -> tuple[Target | None, np.ndarray | None]:
    """The labels stored with the probe and their policy (:func:`repviz.targets.decide`: class ids from one-hot
    rows, one value per example, masks and sequences as given...), judged against the primary output,
    ``outputs[0]`` (none: unknown). ``y`` holding one target per model output gives the primary output's."""
    if y is None:
        return None, None
    if not isinstance(y, np.ndarray):  # one target per output, as fit takes them: the primary output's
        y = primary_target(y, outputs)
    return decide(y, outputs[0].sample_shape if outputs else None)


def primary_target(y: Any, outputs: Sequence[Any]) -> np.ndarray:
    """The target of the primary output (``outputs[0]``: its ``name``, and its ``index`` as ``keras.tree.flatten``
    orders the outputs) among ``y``'s, one per output: by output name for a dict, by position for a list."""
    if isinstance(y, dict):
        if outputs[0].name not in y:
            raise ValueError(f"the probe's labels are keyed {sorted(y)} but the recorded output is "
                             f"{outputs[0].name!r}; key them by output name, or pass the labels of one output")
        return np.asarray(y[outputs[0].name])
    flat = keras.tree.flatten(y)
    if len(flat) != len(outputs):
        raise ValueError(f"the probe has {len(flat)} label arrays but the model has {len(outputs)} outputs; pass one "
                         f"per output, as fit takes them, or the labels of one output")
    return flat[outputs[0].index]


def thumbnails(x: Any) -> np.ndarray | None:
    """uint8 hover pictures of a single-array probe: images as :func:`repviz.datasets.thumbnails` makes them,
    series ``(n, T, 1)`` as line plots; None for several input arrays and for text (see :func:`probe_metadata`)."""
    if not isinstance(x, np.ndarray) or x.dtype.kind in "US":
        return None
    return line_thumbnails(x) if x.ndim == 3 and x.shape[2] == 1 else image_thumbnails(x)


def line_thumbnails(x: np.ndarray, height: int = 32, width: int = 64) -> np.ndarray:
    """uint8 line plots (black on white, ``height`` rows) of series ``x`` (n, T, 1), each over its own range, T
    binned to at most ``width`` means: the hover picture of a time-series probe."""
    n, steps = x.shape[:2]
    v = np.nan_to_num(x.reshape(n, steps).astype(np.float32))
    edges = np.linspace(0, steps, min(width, steps) + 1).astype(np.int64)
    means = np.add.reduceat(v, edges[:-1], axis=1) / np.diff(edges)
    lo, hi = means.min(axis=1, keepdims=True), means.max(axis=1, keepdims=True)
    rows = np.round((height - 1) * (hi - means) / np.maximum(hi - lo, 1e-12)).astype(np.int64)
    before = np.concatenate([rows[:, :1], rows[:, :-1]], axis=1)  # a vertical stroke joins consecutive points
    r = np.arange(height)[None, :, None]
    on = (r >= np.minimum(before, rows)[:, None, :]) & (r <= np.maximum(before, rows)[:, None, :])
    return np.where(on, 0, 255).astype(np.uint8)


def probe_metadata(given: Any, x: Any, n: int) -> Metadata | None:
    """The probe's metadata columns: those ``given`` (a mapping or DataFrame, or None), then a ``"text"`` column
    of kind text for each input array of strings (named ``text``, or ``text:<input>`` for several), so that a
    text probe shows its text on hover and in search; a given column of the same name wins."""
    texts = {path: a for path, a in keras.tree.flatten_with_path(x) if a.dtype.kind in "US"}
    if given is None and not texts:
        return None
    columns = Metadata() if given is None else columns_from(given, n)
    named = {("text" if len(texts) == 1 else "text:" + "/".join(map(str, path))): a for path, a in texts.items()}
    named = {k: _text_rows(a) for k, a in named.items() if k not in columns}
    extra = columns_from(named, n, kinds=dict.fromkeys(named, "text")) if named else Metadata()
    return Metadata({**columns, **extra}, {**columns.kinds, **extra.kinds})


def _text_rows(a: np.ndarray) -> np.ndarray:
    """One string per example of a string input (n, ...): bytes decoded as UTF-8, several strings joined."""
    a = np.char.decode(a, "utf-8", errors="replace") if a.dtype.kind == "S" else a
    return np.array([" | ".join(row) for row in a.reshape(len(a), -1).tolist()], dtype=np.str_)


def fingerprint(x: Any, ids: np.ndarray, y: Any) -> str:
    """A digest of the probe's inputs, ids and labels (dtype, shape and bytes of each array): a run continues
    only on the probe it was recorded with."""
    digest = hashlib.sha256()
    for a in [*keras.tree.flatten(x), ids, *leaves(y)]:
        digest.update(str((a.dtype.str, a.shape)).encode())
        digest.update(np.ascontiguousarray(a).data)
    return digest.hexdigest()[:16]


def inputs_fingerprint(x: Any) -> str:
    """A digest of the probe's input values alone, in probe order: what two runs must share for their
    representations to be compared (not their labels or ids). Each array counts as its values per example, as
    float32 when numeric, so the same images fed to an MLP flattened and to a CNN with a channel axis agree."""
    digest = hashlib.sha256()
    for a in keras.tree.flatten(x):
        a = np.asarray(a)
        numeric = a.dtype.kind in "biuf"
        digest.update(str((len(a), numeric)).encode())
        digest.update(np.ascontiguousarray(a, dtype=np.float32).data if numeric else
                      "\0".join(map(str, a.reshape(-1).tolist())).encode())
    return digest.hexdigest()[:16]


def batch_subset(choice: Any, n: int, classes: np.ndarray | None, seed: int,
                 spelling: Spelling) -> tuple[np.ndarray | None, dict | None]:
    """The probe positions that batch snapshots record (None: all) and the manifest's note of the choice: a size
    (a subset drawn with ``seed``, stratified by ``classes`` when given) or positions."""
    if is_int(choice):
        check_param(choice, [POSITIVE], *spelling.param("batch_subset"))
        if choice > n:
            warnings.warn(f"{spelling.param('batch_subset')[0]}={choice} exceeds the probe's {n} points; batch "
                          f"snapshots record the whole probe", RuntimeWarning,
                          stacklevel=user_stacklevel())
        rows = stratified_subset(n, int(choice), classes, random_state=seed)
        info = {"n": len(rows), "seed": seed, "by": "random" if classes is None else "class"}
    else:
        rows = np.asarray(choice)
        if rows.ndim != 1 or not len(rows) or rows.dtype.kind not in "iu" or rows.min() < 0 or \
                rows.max() >= n or len(np.unique(rows)) != len(rows):
            raise ValueError(f"{spelling.param('batch_subset')[0]} must be a size or distinct positions into the "
                             f"probe (0 to {n - 1}); got an array of dtype {rows.dtype}, shape {rows.shape}")
        rows = np.sort(rows).astype(np.int64)
        info = {"n": len(rows), "by": "positions"}
    return (None, None) if len(rows) == n else (rows, info)
