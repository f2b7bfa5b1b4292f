"""Artifact kinds: what a run stores per snapshot beyond its records, and the files of the cross-run folders.

Each per-snapshot kind is declared once as an :class:`ArtifactKind`: its name, its relative path pattern (fields
in braces, each made file-system safe by :func:`~repviz.store.path_key`), whether a JSON sidecar is written beside
it (first, so a file that exists always has its sidecar), how a value read back is checked, and how it is
computed again. A sidecar names the array it was written with (:data:`PAIR`: its checksum and shape), so a pair
torn by a kill between the two writes (the new sidecar beside the old array), or one file replaced alone, is read
as damaged and computed again, never served as current. :class:`Artifact` writes, reads, checks and lists any
kind inside a run's bounds (``run.artifact(kind)``): written under the results directory, read from there first,
then from the run's own. A kind whose key is not its path's fields (a cache named by a checksum), or whose check
needs the run, brings a small :class:`Artifact` subclass as its reader (:class:`NeighborGraphs`,
:class:`Densities`, :class:`Placements`).

Adding a per-snapshot artifact: declare its kind here (or anywhere: ``run.artifact`` takes the declaration) and,
where its key or check needs the run, its reader class.
"""

from __future__ import annotations

import re
import string
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._validation import choices
from .contained import array_inside, check_writable_inside, complete_array_inside, entries_inside, json_inside
from .errors import DamagedFileError, NotFoundError, UnsafeFileError
from .files import checksum, save_array, save_json
from .layout import path_key
from .schema import DENSITY_FIELDS, METHOD_FIELDS, SIDECAR_FIELDS, embedding_fault, object_fault

_STEP = "(0|-?[1-9][0-9]*)"  # a step as a file name spells it
#: The sidecar's entry naming the array written with it, ``{"crc32", "shape"}``; a sidecar written before it has
#: none, and its pair is taken as it is.
PAIR = "array"
_TORN = ("is not the array its sidecar was written with (a write interrupted between the two files, or one of "
         "them replaced)")


@dataclass(frozen=True)
class ArtifactKind:
    """One kind of per-snapshot artifact, declared once.

    ``pattern``: its file relative to the run, e.g. ``"embeddings/{method_key}/{layer}/{step}.npy"`` (``.npy``:
    an array, cast to ``dtype`` when one is given; ``.json``: a JSON object of ``fields``). ``sidecar``: the
    fields of the ``.json`` written beside an array (None: no sidecar). ``check``: why an array read is not one
    of this kind (None when it is); an array stored in another dtype is checked again as cast to ``dtype``, as
    its readers serve it. ``what`` and ``again`` word the messages; ``missing`` is the message for an
    absent one (``str.format`` of the key's fields, ``run``, ``name`` and ``key``). ``reader``: the
    :class:`Artifact` subclass that reads it when its key is not its path's fields or its check needs the run.
    """

    name: str
    pattern: str
    what: str
    again: str
    sidecar: Mapping[str, Callable[[Any], bool]] | None = None
    fields: Mapping[str, Callable[[Any], bool]] = field(default_factory=dict)
    check: Callable[[np.ndarray], str | None] | None = None
    dtype: str | None = None
    missing: str = "run {run!r} has no {name} stored for {key}"
    reader: type[Artifact] | None = None

    @cached_property  # (a frozen dataclass still has a __dict__: computed once per kind)
    def field_names(self) -> tuple[str, ...]:
        """The fields of :attr:`pattern`, in order."""
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.pattern) if f)

    @cached_property
    def is_array(self) -> bool:
        """Whether the artifact is an array (``.npy``), else a JSON object."""
        return self.pattern.endswith(".npy")

    @cached_property
    def directory(self) -> str:
        """The fixed directory every artifact of the kind lies below, relative to the run."""
        return self.pattern.split("{", 1)[0].rstrip("/")


#: Every declared kind by name (``run.artifact(name)``); :func:`declare` adds one.
KINDS: dict[str, ArtifactKind] = {}


def declare(kind: ArtifactKind) -> ArtifactKind:
    """Register ``kind`` under its name, so that ``run.artifact(kind.name)`` finds it; returns it."""
    if KINDS.get(kind.name, kind) != kind:
        raise ValueError(f"an artifact kind named {kind.name!r} is already declared")
    KINDS[kind.name] = kind
    return kind


class Artifact:
    """The artifacts of one kind in one run: ``run.artifact(kind)``. Every method takes the artifact's key (the
    fields of its pattern, ``step`` last among those its directory does not name) as positional arguments."""

    def __init__(self, run: Any, kind: ArtifactKind):
        self.run, self.kind, self.places = run, kind, run.places  # run: a repviz.store.Run

    def fields(self, *key: Any) -> tuple:
        """The values of the pattern's fields for ``key`` (a reader that names files by a checksum adds it)."""
        return key

    def path(self, *key: Any, write: bool = False) -> Path:
        """The file of ``key``: where it is written, or for reading the first place that holds it."""
        values = dict(zip(self.kind.field_names, self.fields(*key)))
        rel = self.kind.pattern.format(**{name: str(int(value)) if name == "step" else path_key(str(value))
                                          for name, value in values.items()})
        paths = [base / rel for base in self.places.bases]
        return paths[0] if write else next((p for p in paths if p.exists()), paths[0])

    def has(self, *key: Any) -> bool:
        """Whether the artifact of ``key`` is stored."""
        return self.path(*key).exists()

    def write(self, *args: Any) -> None:
        """``write(*key, value[, info])``: store ``value`` (and, for a kind with a sidecar, ``info`` beside it,
        written first, naming the array: :data:`PAIR`), each atomically, into the results directory."""
        n = len(args) - (2 if self.kind.sidecar is not None else 1)
        key, value, info = args[:n], args[n], args[n + 1:]
        path = check_writable_inside(self.path(*key, write=True), self.places.out)
        if self.kind.is_array:
            value = np.asarray(value, dtype=self.kind.dtype)
        if info:
            save_json(path.with_suffix(".json"), {**info[0], PAIR: _pair(value)} if self.kind.is_array else info[0])
        if self.kind.is_array:
            save_array(path, value)
        else:
            save_json(path, value)

    def read(self, *key: Any) -> Any:
        """The stored artifact of ``key`` (an array memory-mapped read-only, or a JSON object):
        :class:`NotFoundError` when it is not stored, :class:`DamagedFileError` naming it when it is not one."""
        path = self.path(*key)
        if not path.exists():
            raise NotFoundError(self.missing(*key))
        value = array_inside(path, self.places.bounds_of(path)) if self.kind.is_array else \
            json_inside(path, self.places.bounds_of(path))
        if fault := self.fault(value, *key):
            raise DamagedFileError(path, f"{fault}; {self.kind.again}")
        if self._torn(path, value):
            raise DamagedFileError(path, f"{_TORN}; {self.kind.again}")
        return value

    def info(self, *key: Any) -> dict:
        """The sidecar of the artifact of ``key`` (without :data:`PAIR`); one that is not the JSON object of the
        kind's sidecar fields, or that was written with another array than the one beside it, raises
        :class:`DamagedFileError` (the artifact is then computed again)."""
        path = self.path(*key)
        if not path.exists():
            raise NotFoundError(self.missing(*key))
        return self._sidecar(path)

    def read_pair(self, *key: Any) -> tuple[np.ndarray, dict]:
        """The array of ``key`` and its sidecar, each read once and checked as :meth:`read` and :meth:`info` check
        them: a writer replacing the pair meanwhile cannot hand back one file of each."""
        path = self.path(*key)
        if not path.exists():
            raise NotFoundError(self.missing(*key))
        array = array_inside(path, self.places.bounds_of(path))
        if fault := self.fault(array, *key):
            raise DamagedFileError(path, f"{fault}; {self.kind.again}")
        return array, self._sidecar(path, array)

    def _sidecar(self, path: Path, array: np.ndarray | None = None) -> dict:
        """The checked sidecar of the array at ``path`` (read from there unless given), without :data:`PAIR`."""
        sidecar = path.with_suffix(".json")
        info = json_inside(sidecar, self.places.bounds_of(path))
        if fault := object_fault(info, self.kind.sidecar or {}):
            raise DamagedFileError(sidecar, f"is not {self.kind.what}'s sidecar ({fault}); {self.kind.again}")
        if PAIR not in info:
            return info
        if array is None:
            array = array_inside(path, self.places.bounds_of(path))
        if info[PAIR] != _pair(array):
            raise DamagedFileError(path, f"{_TORN}; {self.kind.again}")
        return {k: v for k, v in info.items() if k != PAIR}

    def cached(self, *key: Any) -> Any | None:
        """The artifact of ``key`` read whole, or None when it is missing, incomplete, damaged or leads out (a
        cache miss: computed again and replaced)."""
        path = self.path(*key)
        bounds = self.places.bounds_of(path)
        if self.kind.is_array:
            value = complete_array_inside(path, bounds)
        else:
            try:
                value = json_inside(path, bounds)
            except (OSError, ValueError, UnsafeFileError):
                return None
        return None if value is None or self.fault(value, *key) or self._torn(path, value) else value

    def _torn(self, path: Path, array: Any) -> bool:
        """Whether the sidecar beside ``path`` names another array than ``array``: False for a kind without a
        sidecar, and for a sidecar that names none (written before :data:`PAIR`) or cannot be read (:meth:`info`
        says why)."""
        if self.kind.sidecar is None or not self.kind.is_array:
            return False
        try:
            info = json_inside(path.with_suffix(".json"), self.places.bounds_of(path))
        except (OSError, ValueError, UnsafeFileError):
            return False
        return type(info) is dict and PAIR in info and info[PAIR] != _pair(array)

    def fault(self, value: Any, *key: Any) -> str | None:
        """Why ``value``, read as the artifact of ``key``, is not one (None when it is)."""
        if self.kind.is_array:
            if self.kind.check is None:
                return None
            if (fault := self.kind.check(value)) or self.kind.dtype is None or value.dtype == self.kind.dtype:
                return fault
            with np.errstate(over="ignore"):  # a value beyond the dtype's range becomes infinite: refused
                return self.kind.check(np.asarray(value, dtype=self.kind.dtype))
        if fault := object_fault(value, self.kind.fields):
            return f"is {fault}"
        absent = [name for name in self.kind.fields if name not in value]
        return f"lacks {', '.join(absent)}" if absent else None

    def steps(self, *key: Any) -> list[int]:
        """Sorted steps stored under ``key`` (the fields before the step); a file there not named as the kind's
        files are is left out, with a warning naming it."""
        last = self.kind.pattern.rsplit("/", 1)[-1]
        named = re.compile(re.escape(last).replace(re.escape("{step}"), _STEP))
        found = set()
        for d in self._directories(*key):
            # scandir, not glob: an index of hundreds of runs calls this thousands of times
            for name in entries_inside(d, self.places.bounds_of(d)):
                if m := named.fullmatch(name):
                    found.add(int(m.group(1)))
                elif name.endswith(Path(last).suffix) and not name.startswith("."):
                    shown = last.replace("{", "<").replace("}", ">")
                    warnings.warn(f"{d / name}: left out, not {self.kind.what} (those are named {shown}); remove it",
                                  RuntimeWarning, stacklevel=3)
        return sorted(found)

    def _directories(self, *key: Any) -> list[Path]:
        """The directories named by the first fields ``key`` (the results directory's, then the run's own)."""
        parts = self.kind.pattern.split("/")
        first = len(self.kind.directory.split("/"))
        values = dict(zip(self.kind.field_names, key))
        rel = "/".join(parts[:first + len(key)]).format(**{name: path_key(str(v)) for name, v in values.items()})
        return [base / rel for base in self.places.bases]

    def keys(self, depth: int = 1) -> list[tuple[str, ...]]:
        """The (:func:`path_key` of the) first ``depth`` fields of every key stored, as sorted tuples."""
        found: set[tuple[str, ...]] = set()
        for top in self._directories():
            level: list[tuple[Path, tuple[str, ...]]] = [(top, ())]
            for _ in range(depth):
                level = [(d / name, names + (name,)) for d, names in level
                         for name in entries_inside(d, self.places.bounds_of(d), dirs=True)]
            found.update(names for _, names in level)
        return sorted(found)

    def missing(self, *key: Any) -> str:
        """Why the artifact of ``key`` cannot be read: it is not stored."""
        values = dict(zip(self.kind.field_names, self.fields(*key)))
        return self.kind.missing.format(run=self.run.name, name=self.kind.name, key=key, **values)


class Embeddings(Artifact):
    """A run's embeddings (``run.embeddings``): one per method key, layer and step, with a sidecar of parameters
    and quality scores; each method key described once (``method.json``) so that readers find it by name."""

    def intact(self, method_key: str, layer: str, step: int, n_rows: int) -> bool:
        """The stored embedding exists, is as long as its header says, has ``n_rows`` rows and finite coordinates
        (a truncated, foreign or overwritten file is not a cached result)."""
        Y = self.cached(method_key, layer, step)
        return Y is not None and len(Y) == n_rows

    def method_keys(self) -> list[str]:
        """Method keys (``<method>-<params hash>``) that have at least one stored embedding."""
        return [key for (key,) in self.keys()]

    def write_method(self, method_key: str, info: dict) -> None:
        """Describe a method key (``method``, full ``params``, ``align``, ``default``) so readers find it by name."""
        path = self._directories(method_key)[0] / "method.json"
        save_json(check_writable_inside(path, self.places.out), info)

    def method(self, method_key: str) -> dict:
        """The description written by :meth:`write_method` ({} if none, or if it is damaged: then with a warning
        naming it; the next ``repviz embed`` of the key writes it again)."""
        path = next((p for d in self._directories(method_key) if (p := d / "method.json").exists()), None)
        if path is None:
            return {}
        try:
            info = json_inside(path, self.places.bounds_of(path))
        except DamagedFileError as e:
            warnings.warn(f"{e}; its embeddings are listed by key only", RuntimeWarning, stacklevel=2)
            return {}
        if fault := object_fault(info, METHOD_FIELDS):
            warnings.warn(f"{path} is not a method description ({fault}); its embeddings are listed by key only",
                          RuntimeWarning, stacklevel=2)
            return {}
        return info

    def key(self, method: str = "tsne", params: dict | None = None) -> str:
        """The stored method key for a method name and (some of) its parameters.

        ``method`` may also be a full key. A key matches when its method is ``method`` and every entry of
        ``params`` (``"align"`` included) equals the stored one; of several matches, the one computed with the
        pipeline's defaults is preferred, otherwise the match must be unique.
        """
        keys = self.method_keys()
        if method in keys:
            return method
        matches = []
        for key in keys:
            info = self.method(key)
            stored = {**info.get("params", {}), "align": info.get("align")}
            if info.get("method") == method and all(stored.get(k, object()) == v for k, v in (params or {}).items()):
                matches.append((key, info))
        name = self.run.name
        if not matches:
            raise NotFoundError(f"run {name!r} has no {method!r} embeddings{' with ' + repr(params) if params else ''}"
                                f"; it has: {choices(keys)} (compute them with `repviz embed`)")
        if len(matches) > 1:
            defaults = [key for key, info in matches if info.get("default")]
            if params is None and len(defaults) == 1:
                return defaults[0]
            raise NotFoundError(f"run {name!r} has {len(matches)} {method!r} embeddings matching {params or {}!r}: "
                                f"{choices(k for k, _ in matches)}; pass the key, or params= that tell them apart")
        return matches[0][0]

    def missing(self, method_key: str, layer: str, step: int) -> str:
        keys = self.method_keys()
        if path_key(method_key) not in keys:
            return (f"run {self.run.name!r} has no embeddings for method {method_key!r}; it has: {choices(keys)} "
                    f"(compute them with `repviz embed`)")
        return (f"run {self.run.name!r} has no {method_key!r} embedding of layer {layer!r} at step {step}; it has "
                f"steps: {choices(self.steps(method_key, layer))}")


class Placements(Artifact):
    """A run's probe points placed into other runs' layouts (:mod:`repviz.placement`), key (into, method key,
    layer, step): as many points as the run's rows of that snapshot."""

    def fault(self, coords: np.ndarray, into: str, method_key: str, layer: str, step: int) -> str | None:
        if fault := super().fault(coords, into, method_key, layer, step):
            return fault
        try:
            n = self.run.record(layer, step)["shape"][0]
        except LookupError:  # the snapshot is gone: the points are stale, as the tab says
            return None
        if len(coords) != n:
            return (f"holds {len(coords)} points, but run {self.run.name!r} has {n} at layer {layer!r}, step {step} "
                    f"(placed from another recording of it, or damaged)")
        return None


class NeighborGraphs(Artifact):
    """Cached k-nearest-neighbour graphs of stored activations, key (layer, step, variant): row i holds the probe
    indices of point i's neighbours, nearest first, as computed by ``variant`` (e.g. ``"k10-exact"``). Named by
    the activation's checksum, so a snapshot stored again (a resumed fit) never reads a stale graph."""

    def fields(self, layer: str, step: int, variant: str) -> tuple:
        return layer, step, variant, self.run.record(layer, step).get("crc32", "none")

    def fault(self, graph: np.ndarray, layer: str, step: int, variant: str) -> str | None:
        n = self.run.record(layer, step)["shape"][0]
        if graph.ndim != 2 or graph.dtype.kind not in "iu" or len(graph) != n or \
                (graph.size and not 0 <= graph.min() <= graph.max() < n):
            return f"is not a graph of the {n} probe points' indices"
        return None


class Densities(Artifact):
    """Cached density contours of a stored embedding, key (method key, layer, step, variant: how they were drawn,
    e.g. ``"class-l4"``); named by the embedding's checksum, so an embedding computed again never reads stale
    contours."""

    def fields(self, method_key: str, layer: str, step: int, variant: str) -> tuple:
        crc = checksum(np.asarray(self.run.embeddings.read(method_key, layer, step)))
        return method_key, layer, step, variant, crc


EMBEDDING = declare(ArtifactKind(
    "embedding", "embeddings/{method_key}/{layer}/{step}.npy", "an embedding", "`repviz embed` computes it again",
    sidecar=SIDECAR_FIELDS, check=embedding_fault, dtype="float32", reader=Embeddings))
#: This run's probes placed into another run's stored layout (:mod:`repviz.placement`); kept apart from the
#: embeddings: placed points are never listed as a fitted layout.
PLACED = declare(ArtifactKind(
    "placed", "placed/{into}/{method_key}/{layer}/{step}.npy", "a placement", "`repviz place` computes it again",
    sidecar={}, check=embedding_fault, dtype="float32", reader=Placements,
    missing="run {run!r} has no points placed into the {method_key!r} layout of run {into!r} ({layer!r}, step "
            "{step}); place them with `repviz place`"))
NEIGHBOR_GRAPH = declare(ArtifactKind(
    "neighbor_graph", "cache/neighbors/{layer}/{step}-{variant}-{crc}.npy", "a neighbour graph",
    "computed again", reader=NeighborGraphs))
#: Density contours as :func:`repviz.density.density_contours` returns them.
DENSITY = declare(ArtifactKind(
    "density", "cache/density/{method_key}/{layer}/{step}-{variant}-{crc}.json", "density contours",
    "computed again", fields=DENSITY_FIELDS, reader=Densities))


def _pair(array: np.ndarray) -> dict:
    """The :data:`PAIR` entry of ``array``: its checksum and shape."""
    return {"crc32": checksum(array), "shape": list(array.shape)}


# Files of the results folders that span runs (``LogDir.artifacts(name)``) ------------------------------------

class MetaResultFiles(NamedTuple):
    """A meta-SNE result (:mod:`repviz.meta.result`): its description, map coordinates and distances."""

    result: str = "result.json"
    coords: str = "coords.npy"
    distances: str = "distances.npy"


class VectorBankFiles(NamedTuple):
    """A bank of representation vectors (:mod:`repviz.meta.bank`): its index, the pairwise squared chord
    distances and squared norms, and one file per vector."""

    index: str = "index.json"
    chord2: str = "chord2.npy"
    norms2: str = "norms2.npy"

    @staticmethod
    def vector(vid: str) -> str:
        """The file of the vector ``vid``."""
        return f"{vid}.npy"


class SimilarityCacheFiles(NamedTuple):
    """A similarity cache (:mod:`repviz.similarity.cache`): its index and the matrix of values."""

    index: str = "index.json"
    values: str = "values.npy"


META_RESULT = MetaResultFiles()
VECTOR_BANK = VectorBankFiles()
SIMILARITY_CACHE = SimilarityCacheFiles()
