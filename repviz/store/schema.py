"""What the readers may rely on: the fields of manifests, records and sidecars, and what each must be.

A record whose field is of the wrong type is left out; a manifest field of the wrong type is dropped with a
warning naming the file, so a reader never meets a field of the wrong type. Embeddings and sidecars are checked
when read (:func:`embedding_fault`, :func:`object_fault`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DamagedFileError
from .layout import ACTIVATION, OUTPUT

Check = Callable[[Any], bool]


def is_int(value: Any) -> bool:
    """A JSON integer (not a bool)."""
    return type(value) is int  # JSON's integers; not bool


def is_shape(value: Any) -> bool:
    """A shape as the store writes it: a list of sizes, ``None`` for a model's batch dimension."""
    if type(value) is not list:
        return False
    for v in value:  # a loop, not all(...): shapes are short, and every run's manifest and records check them
        if not (v is None or type(v) is int and v >= 0):
            return False
    return True


def typed(kind: type | tuple[type, ...]) -> Check:
    """The check that a value is an instance of ``kind``."""
    return lambda v: isinstance(v, kind)


def dict_of(check: Check) -> Check:
    """The check that a value is a JSON object whose every value passes ``check``."""
    return lambda v: type(v) is dict and all(map(check, v.values()))


def bad_fields(entry: dict, fields: dict) -> list[str]:
    """The fields of ``entry`` named in ``fields`` whose value fails its check (absent ones are not checked)."""
    return [name for name, check in fields.items() if name in entry and not check(entry[name])]


def object_fault(obj: Any, fields: dict) -> str | None:
    """Why the parsed JSON ``obj`` is not the object of ``fields`` a reader expects (None when it is)."""
    if type(obj) is not dict:
        return f"a JSON {type(obj).__name__}, not an object"
    bad = bad_fields(obj, fields)
    return f"{', '.join(bad)} of the wrong type" if bad else None


#: The fields of a record and what each must be (kinds: activation, prediction, output); a record missing one of
#: the first five, or with one of another type, is left out, so readers never meet a field of the wrong type.
RECORD_FIELDS = {"kind": typed(str), "file": typed(str), "step": is_int, "dtype": typed(str),
                  "crc32": typed(str), "shape": lambda v: is_shape(v) and bool(v) and None not in v,
                  "nonfinite": lambda v: is_int(v) and v >= 0, "layer": typed(str), "output": typed(str),
                  "rows": typed(str), "constant": typed(bool)}
RECORD_REQUIRED = frozenset(("kind", "file", "step", "dtype", "crc32", "shape"))


def valid_record(record: Any) -> bool:
    """Whether ``record`` (parsed JSON) has every field readers use, each of the type the writer gives it."""
    if type(record) is not dict or not RECORD_REQUIRED.issubset(record) or bad_fields(record, RECORD_FIELDS):
        return False
    return "layer" in record if record["kind"] == ACTIVATION else "output" in record if record["kind"] == OUTPUT \
        else True


#: What the readers use of a manifest, and what each field must be: a field of another type is left out (with a
#: warning naming the file), so a reader never meets a field of the wrong type.
MANIFEST_FIELDS = {"model": typed(dict), "probe": typed(dict), "fingerprint": typed(dict),
                    "step_unit": typed(str), "schedule": typed(dict), "skipped": dict_of(typed(str))}
PREDICTION_FIELDS = {"shape": is_shape, "output": typed(str), "outputs": dict_of(is_shape)}
LAYER_FIELDS = {"stored_shape": is_shape, "output_shape": is_shape, "class": typed(str),
                 "reduction": lambda v: type(v) is dict and isinstance(v.get("kind", ""), str)}


def is_number(value: Any) -> bool:
    """A JSON number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: The fields of an embedding's sidecar and of a method key's ``method.json`` that readers use, and what each must be.
SIDECAR_FIELDS = {"method": typed(str), "key": typed(str), "params": typed(dict),
                   "align": typed((str, type(None))), "init_from": typed((list, type(None))),
                   "source": lambda v: isinstance(v, dict) and isinstance(v.get("crc32", ""), str),
                   "scores": dict_of(lambda v: v is None or is_number(v)), "seconds": is_number}
METHOD_FIELDS = {"method": typed(str), "params": typed(dict), "align": typed((str, type(None))),
                  "default": typed(bool), "requests": lambda v: isinstance(v, list) and all(isinstance(r, str)
                                                                                          for r in v)}
#: Density contours as :func:`repviz.density.density_contours` returns them (a damaged cache is computed again).
DENSITY_FIELDS = {"levels": typed(list),
                   "contours": lambda v: type(v) is list and all(type(c) is dict and type(c.get("paths")) is list
                                                                 for c in v)}

def embedding_fault(Y: np.ndarray) -> str | None:
    """Why the array ``Y`` read from an embedding's file is not an embedding (None when it is one): a matrix of
    finite floating-point coordinates."""
    if Y.ndim != 2 or Y.dtype.kind != "f":
        return f"holds {Y.dtype} {Y.shape}, not an embedding"
    if not np.isfinite(Y).all():
        return "holds non-finite coordinates (NaN or infinity): damaged"
    return None



def keep_valid(entry: Any, fields: dict, where: str, dropped: list[str]) -> dict:
    """``entry`` without the fields of ``fields`` whose value fails its check, or {} when it is not an object;
    what is left out is named in ``dropped`` (``where`` names the entry)."""
    if type(entry) is not dict:
        dropped.append(f"{where} (a JSON {type(entry).__name__}, not an object)")
        return {}
    bad = bad_fields(entry, fields)
    dropped += [f"{where}.{name}" if where else name for name in bad]
    return {k: v for k, v in entry.items() if k not in bad} if bad else entry


def check_manifest(path: Path, manifest: Any) -> dict:
    """``manifest`` with every field readers use of the type they expect: a field of another type is left out,
    a layer entry that is not an object becomes an empty description (its snapshots stay readable), with one
    warning naming the file; a manifest that is not an object, or whose layers are not, is damaged
    (:class:`DamagedFileError`): the run cannot be read."""
    if type(manifest) is not dict:
        raise DamagedFileError(path, f"holds a JSON {type(manifest).__name__}, not an object")
    layers = manifest.get("layers", {})
    if type(layers) is not dict:
        raise DamagedFileError(path, f"has 'layers' of type {type(layers).__name__}, not an object")
    dropped: list[str] = []
    manifest = keep_valid(manifest, MANIFEST_FIELDS, "", dropped)
    predictions = manifest.get("predictions")
    if predictions is not None and (kept := keep_valid(predictions, PREDICTION_FIELDS, "predictions",
                                                        dropped)) is not predictions:
        manifest = {**manifest, "predictions": kept}
    if not all(type(e) is dict and not bad_fields(e, LAYER_FIELDS) for e in layers.values()):  # the rare case
        manifest = {**manifest, "layers": {name: keep_valid(entry, LAYER_FIELDS, f"layers.{name}", dropped)
                                           for name, entry in layers.items()}}
    if dropped:
        warnings.warn(f"{path}: left out {', '.join(dropped)}: not of the type repviz writes (a damaged or "
                      f"hand-edited manifest); record the run again to restore them", RuntimeWarning, stacklevel=4)
    return manifest


