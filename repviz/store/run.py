"""Reading one run: its manifest, records, activations, predictions and probe; its artifacts through
:meth:`Run.artifact`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from repviz.metadata import MAX_FILE_BYTES, Metadata, from_json
from repviz.targets import Target, read_target

from .._validation import choices
from .artifacts import EMBEDDING, KINDS, PLACED, Artifact, ArtifactKind, Embeddings
from .contained import (
    array_inside,
    as_bounds,
    intact_inside,
    json_inside,
    real_dir,
    real_path,
    resolve,
    stat_field,
    tree_bytes,
    within,
)
from .errors import DamagedFileError, NotFoundError, refuse
from .layout import ACTIVATION, MANIFEST, METADATA, OUTPUT, PREDICTION, PROBE, PROBE_DIR, RECORDS, probe_file
from .records import RecordLog
from .schema import check_manifest


@dataclass(frozen=True)
class RunPlaces:
    """Where a run's files lie and what they may resolve into: ``root`` (its data), ``results`` (where results
    computed from it are written: ``root``, or a run of ``open_logdir``'s ``out``), ``own`` and ``out`` (the
    resolved bounds of each)."""

    root: Path
    results: Path
    own: tuple[str, ...]
    out: tuple[str, ...]

    @property
    def bases(self) -> list[Path]:
        """Where results are read from, in order: the results directory, then the run's own (when apart)."""
        return [self.results] if self.results == self.root else [self.results, self.root]

    def bounds_of(self, path: Path) -> tuple[str, ...]:
        """What ``path`` (built from the results directory or the run's own) may resolve into."""
        return self.out if self.results != self.root and self.results in path.parents else self.own


@dataclass(frozen=True)
class Probe:
    """The fixed inputs recorded at every snapshot: stable ids, labels (or None), uint8 thumbnails (or None), and
    :attr:`metadata` and :attr:`target`, read when first asked for."""

    ids: np.ndarray
    labels: np.ndarray | None
    thumbnails: np.ndarray | None
    read_metadata: Callable[[], Metadata] | None = field(default=None, repr=False, compare=False)
    manifest: dict = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def metadata(self) -> Metadata:
        """Column name -> read-only array of one value per example, with ``kinds`` (empty when none is stored).
        A damaged metadata file raises :class:`DamagedFileError` here; the probe's arrays stay readable."""
        return Metadata() if self.read_metadata is None else self.read_metadata()

    @cached_property
    def target(self) -> Target | None:
        """The policy of :attr:`labels` (:mod:`repviz.targets`): the manifest's, or decided from the stored labels
        for a run recorded before it; None without labels."""
        output = (self.manifest.get("predictions") or {}).get("shape")
        return read_target((self.manifest.get("probe") or {}).get("target"), self.labels,
                           output[1:] if isinstance(output, list) and output else None)


def read_probe(places: RunPlaces, name: str, manifest: dict | None = None) -> Probe:
    """The probe of the run at ``places`` (called ``name`` in messages, its manifest ``manifest``), memory-mapped;
    its metadata and target policy are read when first asked for."""
    root, own = places.root, places.own
    ids_path = root / probe_file("ids")
    if not ids_path.exists():
        raise NotFoundError(f"run {name!r} has no probe stored ({ids_path} is missing: its recording stopped while "
                            f"starting, or the file was removed)")
    ids = array_inside(ids_path, own)
    opt = {k: array_inside(root / probe_file(k), own) if (root / probe_file(k)).exists() else None for k in PROBE[1:]}
    if ids.ndim != 1:
        raise DamagedFileError(ids_path, f"holds shape {ids.shape}, not one id per probe point")
    for k, array in opt.items():
        if array is not None and (array.ndim < 1 or len(array) != len(ids)):
            raise DamagedFileError(root / probe_file(k), f"holds shape {array.shape}, not one row per probe point "
                                                         f"({len(ids)})")
    return Probe(ids=ids, **opt, read_metadata=lambda: _read_metadata(root / METADATA, own, len(ids)),
                 manifest=manifest or {})


def _read_metadata(path: Path, bounds: tuple[str, ...], n: int) -> Metadata:
    """The stored metadata of a probe of ``n`` examples (empty when none); see :attr:`Probe.metadata`."""
    if not os.path.lexists(path):
        return Metadata()
    try:
        return from_json(json_inside(path, bounds, MAX_FILE_BYTES), n)
    except DamagedFileError:
        raise
    except ValueError as e:
        raise DamagedFileError(path, f"{e}; write it again with repviz.store.write_metadata") from None


class Run:
    """One run of a log directory, read lazily. Arrays come back memory-mapped and read-only.

    Use :func:`open_logdir` to get runs by name. What a run stores per snapshot beyond its records (embeddings,
    placed points, caches) is read and written through :meth:`artifact` (:attr:`embeddings` for embeddings).
    """

    def __init__(self, root: str | os.PathLike, name: str, results: str | os.PathLike | None = None):
        self.root = Path(root)
        self.name = name
        # where embeddings are written; those of the run's own directory are still read (see open_logdir's out)
        self.results = self.root if results is None else Path(results)
        # what the run's files may resolve into (symbolic links included): its own directories, and those of its
        # results when they are written elsewhere; resolved once, every open is checked against them
        dirs = {str(self.run_dir): real_path(self.run_dir)}
        real_root = real_dir(str(self.root), dirs)
        own = as_bounds(real_root, dirs[str(self.run_dir)])
        out = own if self.results == self.root else as_bounds(real_path(self.results),
                                                              real_path(self.results.parent.parent))
        self.places = RunPlaces(self.root, self.results, own, out)
        self.manifest: dict = check_manifest(self.root / MANIFEST, json_inside(self.root / MANIFEST, own))
        # files every reader of the run needs: one leading out makes the run damaged (skipped by LogDir), not each
        # of its readers
        dirs[real_root] = real_root
        for rel in (RECORDS, *map(probe_file, PROBE)):
            real = resolve(os.path.join(real_root, rel), dirs)
            if real is not None and not within(real, own):
                raise refuse(self.root / rel)
        self._log = RecordLog(str(self.root), name, own)
        self._subsets: dict[str, np.ndarray] = {}  # subset file -> its positions (named by checksum: immutable)
        self._artifacts: dict[str, Artifact] = {}

    def __repr__(self) -> str:
        return f"Run({self.name!r}, layers={len(self.layers)}, snapshots={len(self.steps())})"

    def __reduce__(self) -> tuple:
        """Pickle as a reference (location and name): a worker process reopens the run, re-reading the manifest
        and the records, rather than receiving a copy of every record."""
        return type(self), (str(self.root), self.name, None if self.results == self.root else str(self.results))

    @property
    def run_dir(self) -> Path:
        """The directory the user logged to (the one TensorBoard lists as the run)."""
        return self.root.parent.parent

    # records --------------------------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        """All valid records, re-read when the record log has grown (new snapshots during training).

        A record whose file is gone, or that is malformed, is left out.
        """
        return self._log.records()

    # layers and steps -----------------------------------------------------------------------------------------
    @property
    def layers(self) -> list[str]:
        """Captured layer names, in model order."""
        return list(self.manifest.get("layers", {}))

    def layer_info(self, layer: str) -> dict:
        """The manifest entry of ``layer``: shapes, reduction applied, layer class."""
        self._check_layer(layer)
        return self.manifest["layers"][layer]

    def _check_layer(self, layer: str) -> None:
        if layer not in self.manifest.get("layers", {}):
            raise NotFoundError(f"layer {layer!r} is not in run {self.name!r}; it has: {choices(self.layers)}")

    def steps(self, layer: str | None = None) -> list[int]:
        """Sorted snapshot steps stored for ``layer`` (or for any layer). See ``manifest['step_unit']``."""
        if layer is not None:
            self._check_layer(layer)
        return sorted({s for (lay, s) in self._log.latest(ACTIVATION) if layer is None or lay == layer})

    def record(self, layer: str, step: int) -> dict:
        """The record of one stored activation (dtype, shape, checksum, non-finite count, epoch, batch)."""
        self._check_layer(layer)
        rec = self._log.latest(ACTIVATION).get((layer, int(step)))
        if rec is None:
            raise NotFoundError(f"step {step} of layer {layer!r} is not in run {self.name!r}; "
                                f"it has steps: {choices(self.steps(layer))}")
        return rec

    def read_array(self, record: dict, mmap: bool = True) -> np.ndarray:
        """The array that ``record`` (one of :meth:`records`) describes, memory-mapped read-only by default.

        For callers that already hold the record (its checksum, its non-finite count), so that the array is
        found without looking the record up again.
        """
        path = self.record_path(record)
        array = array_inside(path, self.places.own, mmap=mmap)
        if array.dtype.str != record["dtype"] or list(array.shape) != record["shape"]:
            raise DamagedFileError(path, f"holds {array.dtype.str} {list(array.shape)}, not the {record['dtype']} "
                                         f"{record['shape']} recorded (replaced or damaged); record the snapshot "
                                         f"again")
        return array

    def record_path(self, record: dict) -> Path:
        """Where the file ``record`` describes lies (for messages: reads go through :meth:`read_array`)."""
        return self.root / record["file"]

    def record_intact(self, record: dict) -> bool:
        """The file ``record`` describes is complete and holds the shape and dtype the record says (a check of
        its header and size; the checksum needs the data, see :func:`checksum`)."""
        found = intact_inside(self.record_path(record), self.places.own)
        return found is not None and list(found[0]) == list(record.get("shape", ())) and \
            found[1].str == record.get("dtype")

    def activations(self, layer: str, step: int, mmap: bool = True) -> np.ndarray:
        """Activations of ``layer`` at ``step``: (n_rows, width), memory-mapped read-only; row i is probe point
        ``rows(layer, step)[i]`` (every probe point, in order, unless the snapshot holds a subset)."""
        return self.read_array(self.record(layer, step), mmap=mmap)

    def rows(self, layer: str, step: int) -> np.ndarray:
        """Positions into :attr:`probe` of the rows stored for ``layer`` at ``step``: all of them in order, or the
        subset a snapshot recorded (e.g. ``ActivationLogger(batch_probe=...)``). Their ids: ``probe.ids[rows]``."""
        return self.record_rows(self.record(layer, step))

    def record_rows(self, record: dict) -> np.ndarray:
        """Positions into :attr:`probe` of the rows of the array ``record`` describes (see :meth:`rows`)."""
        rel = record.get("rows")
        if rel is None:
            return np.arange(record["shape"][0])
        found = self._subsets.get(rel)
        if found is None:
            path = self.root / rel
            found = np.asarray(array_inside(path, self.places.own, mmap=False))
            n = len(self.probe)
            if found.dtype != np.int64 or found.ndim != 1 or len(found) != record["shape"][0] or \
                    (len(found) and (found[0] < 0 or found[-1] >= n)) or np.any(np.diff(found) <= 0):
                raise DamagedFileError(path, f"is not {record['shape'][0]} increasing positions into the probe of "
                                             f"{n} points (replaced or damaged); record the snapshot again")
            found.flags.writeable = False
            self._subsets[rel] = found
        return found

    # predictions ----------------------------------------------------------------------------------------------
    @property
    def prediction_outputs(self) -> list[str]:
        """Names of the model outputs stored per snapshot, in model order (empty for a run whose manifest names
        none: one written through :class:`RunWriter` without ``predictions.outputs``, holding one unnamed output)."""
        return list((self.manifest.get("predictions") or {}).get("outputs") or {})

    @property
    def prediction_output(self) -> str | None:
        """Name of the primary output: the one :meth:`predictions` returns by default (None if unnamed)."""
        return (self.manifest.get("predictions") or {}).get("output")

    def _prediction_record(self, step: int, output: str | None) -> dict | None:
        primary = self._log.latest(PREDICTION).get((None, int(step)))
        if output is None:
            return primary
        if output not in self.prediction_outputs:
            raise NotFoundError(f"output {output!r} is not in run {self.name!r}; it has: "
                                f"{choices(self.prediction_outputs)}")
        found = self._log.latest(OUTPUT).get((output, int(step)))
        # A resumed fit may have chosen another primary output: the primary file names the output it holds.
        if found is None and primary is not None and primary.get("output", self.prediction_output) == output:
            found = primary
        return found

    def prediction_steps(self, output: str | None = None) -> list[int]:
        """Sorted steps that hold predictions of ``output`` (default: the primary output)."""
        steps = {s for (_, s) in self._log.latest(PREDICTION)} | {s for (_, s) in self._log.latest(OUTPUT)}
        return sorted(s for s in steps if self._prediction_record(s, output) is not None)

    def predictions(self, step: int, output: str | None = None) -> np.ndarray:
        """Model outputs on the probe set at ``step``: the primary output, (n_probe, ...) as the model returns
        it, or the output named ``output`` (one of :attr:`prediction_outputs`) of a multi-output model."""
        rec = self._prediction_record(step, output)
        if rec is None:
            which = "predictions" if output is None else f"predictions of output {output!r}"
            raise NotFoundError(f"run {self.name!r} has no {which} at step {step}; "
                                f"it has: {choices(self.prediction_steps(output))}")
        return self.read_array(rec)

    def prediction_rows(self, step: int, output: str | None = None) -> np.ndarray:
        """Positions into :attr:`probe` of the rows of :meth:`predictions` at ``step`` (see :meth:`rows`)."""
        rec = self._prediction_record(step, output)
        if rec is None:
            raise NotFoundError(f"run {self.name!r} has no predictions at step {step}")
        return self.record_rows(rec)

    # probe ----------------------------------------------------------------------------------------------------
    @property
    def probe(self) -> Probe:
        """The probe set (ids, labels, thumbnails), memory-mapped."""
        return read_probe(self.places, self.name, self.manifest)

    # artifacts ------------------------------------------------------------------------------------------------
    def artifact(self, kind: ArtifactKind | str) -> Artifact:
        """The run's artifacts of ``kind`` (a declared :class:`~repviz.store.artifacts.ArtifactKind`, or its
        name): written, read, checked and listed inside the run's bounds."""
        if isinstance(kind, str):
            if kind not in KINDS:
                raise NotFoundError(f"no artifact kind {kind!r}; there are: {choices(KINDS)}")
            kind = KINDS[kind]
        found = self._artifacts.get(kind.name)
        if found is None or found.kind is not kind:
            found = self._artifacts[kind.name] = (kind.reader or Artifact)(self, kind)
        return found

    @property
    def embeddings(self) -> Embeddings:
        """The run's embeddings: ``run.embeddings.read(method_key, layer, step)``, ``.info``, ``.steps``,
        ``.key(method, params)``, ``.write`` ... (see :class:`~repviz.store.artifacts.Embeddings`)."""
        return self.artifact(EMBEDDING)

    def embedding(self, layer: str, step: int, method: str = "tsne", params: dict | None = None) -> np.ndarray:
        """The embedding of ``layer`` at ``step`` by ``method`` (name or key), (n_rows, 2) float32, rows as
        :meth:`rows`.

        >>> run.embedding("dense_1", 5, method="tsne", params={"perplexity": 50})   # doctest: +SKIP
        """
        return self.embeddings.read(self.embeddings.key(method, params), layer, step)

    def embedding_scores(self, layer: str, step: int, method: str = "tsne", params: dict | None = None) -> dict:
        """Quality scores stored with an embedding (trustworthiness, continuity, kNN kept, k-NN accuracy)."""
        return self.embeddings.info(self.embeddings.key(method, params), layer, step).get("scores", {})

    def placed(self, into: str, method_key: str, layer: str, step: int) -> tuple[np.ndarray, dict]:
        """Points of this run placed into run ``into``'s layout (:mod:`repviz.placement`): coordinates (n_probe,
        n_components) float32 and their sidecar; :class:`NotFoundError` when none are stored,
        :class:`DamagedFileError` when they do not belong together or to this run's snapshot (placed again by the
        next ``repviz place``)."""
        return self.artifact(PLACED).read_pair(into, method_key, layer, step)

    def stamp(self) -> tuple:
        """A cheap value that changes whenever a listing of this run would: a record appended, the probe or an
        embedding (method, layer or step) written. A few ``stat`` calls, no file read; for readers that cache what
        they derive from a run (the TensorBoard plugin's index)."""
        root = str(self.root)  # string paths: an index of 10,000 runs calls this 10,000 times
        stamps = [os.stat(os.path.join(root, MANIFEST)).st_mtime_ns,
                  stat_field(os.path.join(root, RECORDS), "st_size"),
                  stat_field(os.path.join(root, PROBE_DIR), "st_mtime_ns")]  # the probe: a starting run can be listed
        # adding a file or directory changes its directory's mtime: embeddings/<key>/<layer>/<step>.npy, so the
        # mtimes of embeddings/, of each key and of each key's layers (whose files are not listed)
        level = [os.path.join(base, EMBEDDING.directory) for base in dict.fromkeys((str(self.results), root))]
        for depth in range(3):
            below = []
            for d in level:
                stamps.append(stat_field(d, "st_mtime_ns"))
                if depth < 2 and stamps[-1] is not None:
                    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                        below += [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
            level = below
        # the runs whose layouts its points are placed into (placed/<run>/): the tab's index names them
        stamps += [stat_field(os.path.join(base, PLACED.directory), "st_mtime_ns")
                   for base in dict.fromkeys((str(self.results), root))]
        return tuple(stamps)

    # sizes ----------------------------------------------------------------------------------------------------
    def disk_bytes(self) -> int:
        """Bytes of every file of the run (its repviz data)."""
        return tree_bytes(self.root)

