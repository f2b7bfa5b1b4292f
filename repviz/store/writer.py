"""Writing a run: manifest, probe, activations, predictions (the capture callback's side of the store)."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from repviz.metadata import Metadata, dumps

from .contained import as_bounds, check_writable_inside, json_inside, read_inside, real_path
from .errors import IncompatibleRunError
from .files import (
    ArrayBlocks,
    atomic_path,
    checksum,
    constant_rows,
    create_exclusive,
    remove_stale_temps,
    save_array,
    save_json,
    save_text,
)
from .layout import (
    ACTIVATION,
    FORMAT_VERSION,
    MANIFEST,
    METADATA,
    PLUGIN_NAME,
    PROBE,
    RECORDS,
    RUN_SUBDIR,
    activation_file,
    prediction_target,
    probe_file,
    subset_file,
)
from .records import append_record, parse_records
from .schema import check_manifest

#: The fingerprint's parts that make a run (its other parts, such as the digest of the probe inputs alone, are
#: read by the comparisons and may be missing from runs recorded before they were stored).
IDENTITY = ("model", "probe")


class RunWriter:
    """Writes one run: manifest, probe, activations, predictions (the capture callback's side of the store).

    Parameters
    ----------
    run_dir : path
        The run's directory (what the user passed as ``log_dir``); data goes under ``plugins/repviz/`` in it.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self.root = self.run_dir.joinpath(*RUN_SUBDIR)
        self.created = False  # set by begin(): this writer created the run
        # what the run's files may resolve into: nothing is read or written through a link leading out of the run
        self._own = as_bounds(real_path(self.root), real_path(self.run_dir))

    def check_writable(self) -> None:
        """Raise a clear ``PermissionError``/``NotADirectoryError`` now rather than after the first epoch."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".probe-write-"):
                pass
        except OSError as e:
            raise type(e)(f"cannot write repviz logs under {str(self.run_dir)!r}: {e.strerror or e}") from e

    def begin(self, manifest: dict) -> None:
        """Create or reopen the run. ``manifest`` must hold ``fingerprint`` (model and probe identity).

        Reopening a run with the same fingerprint continues it (training resumed); a different fingerprint is
        refused, because snapshots of another model or probe set cannot be compared with the ones stored.
        """
        self.check_writable()
        remove_stale_temps(self.root)
        path = self.root / MANIFEST
        fresh = {"format_version": FORMAT_VERSION, "created": time.time(), **manifest}
        self.created = create_exclusive(path, fresh)  # atomic: of two writers racing to create it, one wins
        if self.created:
            self.manifest = fresh
            return
        old = check_manifest(path, json_inside(path, self._own))  # a damaged one: refused, naming it
        was, now = old.get("fingerprint") or {}, manifest.get("fingerprint") or {}
        if any(was.get(k) != now.get(k) for k in IDENTITY):
            what = [k for k in IDENTITY if was.get(k) != now.get(k)]
            raise IncompatibleRunError(
                f"{str(self.run_dir)!r} already holds a repviz run of a different {' and '.join(what)}; "
                f"snapshots of the two could not be compared. Log to a new directory "
                f"(e.g. log_dir={str(self.run_dir) + '_2'!r}) or delete the old one.")
        # The same model and probe: continue the run. Layers recorded before stay listed even when this fit
        # records others, so no stored snapshot is hidden.
        layers = {**(old.get("layers") or {}), **(manifest.get("layers") or {})} if "layers" in manifest else None
        self.manifest = {"format_version": FORMAT_VERSION, **old, **manifest,
                         "created": old.get("created", fresh["created"])}
        if layers is not None:
            self.manifest["layers"] = layers
        save_json(path, self.manifest)

    def stored_manifest(self) -> dict | None:
        """The manifest of the run already in this directory (None when there is none), read before
        :meth:`begin` so that a continued run is recorded as it was (each layer's reduction)."""
        path = self.root / MANIFEST
        return check_manifest(path, json_inside(path, self._own)) if path.exists() else None

    def last_step(self) -> int | None:
        """The largest snapshot step the run holds (None for a new run): a continued fit numbers on from it."""
        steps = self.steps()
        return steps[-1] if steps else None

    def steps(self) -> list[int]:
        """The snapshot steps the run holds, in order."""
        return sorted({r["step"] for r in self._records()})

    def _records(self) -> list[dict]:
        path = self.root / RECORDS
        try:
            return parse_records(read_inside(path, self._own), path)
        except FileNotFoundError:
            return []

    def abandon(self) -> None:
        """Undo :meth:`begin` of a run this writer created and stored nothing in (a fit that failed while
        starting), so that a retry with other data is not refused as a different run."""
        if self.created and not self._records():
            for rel in (*map(probe_file, PROBE), METADATA):
                (self.root / rel).unlink(missing_ok=True)
            (self.root / MANIFEST).unlink(missing_ok=True)
            self.created = False

    def write_tensorboard_marker(self) -> None:
        """Write the one tiny summary that makes TensorBoard list this run and enable the repviz tab.

        An event file in the run directory (where TensorBoard looks for them), written atomically, holding one
        string summary tagged ``repviz/run`` and owned by the plugin, whose content is the format version and the
        layers as JSON. Encoded with TensorBoard's protocol buffers and record framing, not its event writer,
        which would load TensorFlow for its file system layer.
        """
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        content = json.dumps({"format_version": self.manifest["format_version"],
                              "layers": list(self.manifest["layers"])}).encode()
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME, content=content))
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[content],
                                        tensor_shape=tensor_shape_pb2.TensorShapeProto())
        now = time.time()
        events = [event_pb2.Event(wall_time=now, file_version="brain.Event:2"),
                  event_pb2.Event(wall_time=now, step=0, summary=summary_pb2.Summary(
                      value=[summary_pb2.Summary.Value(tag=f"{PLUGIN_NAME}/run", metadata=metadata,
                                                       tensor=tensor)]))]
        name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}.repviz"
        with atomic_path(self.run_dir / name) as tmp, open(tmp, "wb") as f:
            records = RecordWriter(f)
            for event in events:
                records.write(event.SerializeToString())

    def __str__(self) -> str:
        return str(self.run_dir)

    def beside(self, n: int) -> RunWriter:
        """The writer of the run ``<this run's name>-<n>`` beside this one, where a new training goes when this
        directory holds another (:mod:`repviz.capture.rerun`)."""
        return RunWriter(self.run_dir.with_name(f"{self.run_dir.name}-{n}"))

    def reader_location(self) -> tuple[str, str]:
        """A log directory that lists this run and the run's name in it (its parent directory and its own name),
        for a reader started beside the writer (the live embedding of ``ActivationLogger(embed=...)``)."""
        run_dir = self.run_dir.resolve()
        return str(run_dir.parent), run_dir.name

    def update_manifest(self, **fields: Any) -> None:
        """Merge ``fields`` into the manifest and rewrite it atomically."""
        self.manifest = {**self.manifest, **fields}
        save_json(self.root / MANIFEST, self.manifest)

    def write_probe(self, ids: np.ndarray, labels: np.ndarray | None = None,
                    thumbnails: np.ndarray | None = None) -> None:
        """Store the probe set once: stable ids (int64), optional labels, optional uint8 thumbnails."""
        ids_path = check_writable_inside(self.root / probe_file("ids"), self._own)
        save_array(ids_path, np.asarray(ids, dtype=np.int64))
        if labels is not None:
            save_array(self.root / probe_file("labels"), np.asarray(labels))
        if thumbnails is not None:
            thumbnails = np.asarray(thumbnails)
            if thumbnails.dtype != np.uint8:
                raise TypeError(f"thumbnails must be uint8, got {thumbnails.dtype}")
            save_array(self.root / probe_file("thumbnails"), thumbnails)

    def write_metadata(self, metadata: Metadata) -> None:
        """Store (or replace) the probe's metadata columns, atomically; metadata over
        :data:`repviz.metadata.MAX_FILE_BYTES` as JSON raises one ``ValueError`` line and writes nothing."""
        save_text(check_writable_inside(self.root / METADATA, self._own), dumps(metadata))

    def write_activation(self, layer: str, step: int, array: np.ndarray, *, rows: np.ndarray | None = None,
                         **info: Any) -> dict:
        """Store one layer's activations at one snapshot; returns the record appended.

        ``info`` (e.g. ``epoch``, ``batch``) is stored in the record. Non-finite values are stored as they are
        and counted in the record's ``nonfinite`` field; an array whose rows are all equal up to float rounding
        (a dead layer, an output that does not depend on the input; :func:`constant_rows`) is marked
        ``"constant": true``.
        ``rows`` (positions into the probe, increasing) stores a snapshot of that subset of the probe only; see
        :meth:`Run.rows`.
        """
        return self._write(ACTIVATION, activation_file(layer, step), array, rows=rows, layer=layer,
                           step=int(step), **info)

    def activation_blocks(self, layer: str, step: int, shape: tuple[int, ...], dtype) -> ArrayBlocks:
        """An array to fill block by block, then pass to :meth:`write_activation` (same layer and step)."""
        return ArrayBlocks(check_writable_inside(self.root / activation_file(layer, step), self._own), shape,
                           dtype)

    def prediction_blocks(self, step: int, shape: tuple[int, ...], *, output: str | None = None,
                          primary: bool = True) -> ArrayBlocks:
        """An array to fill block by block, then pass to :meth:`write_prediction` (same arguments)."""
        rel = prediction_target(step, output, primary)[1]
        return ArrayBlocks(check_writable_inside(self.root / rel, self._own), shape, np.float32)

    def write_prediction(self, step: int, array: np.ndarray, *, output: str | None = None, primary: bool = True,
                         rows: np.ndarray | None = None, **info: Any) -> dict:
        """Store one model output on the probe set at one snapshot.

        The primary output (the one readers colour by) goes where single-output runs have always put it; each
        other output of a multi-output model is stored under its name ``output`` (required then). ``output``
        names the primary too when given, so a reader can tell which output each snapshot's primary file holds.
        """
        kind, rel, fields = prediction_target(step, output, primary)
        return self._write(kind, rel, array, rows=rows, **fields, **info)

    def _write(self, kind: str, rel: str, array: np.ndarray | ArrayBlocks, rows: np.ndarray | None = None,
               **fields: Any) -> dict:
        if not isinstance(array, ArrayBlocks):
            array = np.asarray(array)
        if rows is not None:
            fields["rows"] = self._write_rows(rows, array.shape[0])
        if isinstance(array, ArrayBlocks):
            if array.path != self.root / rel:
                raise ValueError(f"blocks opened for {array.path} cannot be stored as {self.root / rel}")
            array.commit()
            crc, nonfinite, constant = f"{array.crc & 0xFFFFFFFF:08x}", array.nonfinite, array.constant
        else:
            save_array(check_writable_inside(self.root / rel, self._own), array)
            crc = checksum(array)
            nonfinite = int(array.size - np.count_nonzero(np.isfinite(array))) if array.dtype.kind == "f" else 0
            constant = constant_rows(array)
        if kind == ACTIVATION and constant:
            fields["constant"] = True
        record = {"kind": kind, "file": rel, "dtype": array.dtype.str, "shape": list(array.shape),
                  "crc32": crc, "nonfinite": nonfinite, "time": time.time(), **fields}
        append_record(self.root / RECORDS, record, self._own)
        return record

    def _write_rows(self, rows: np.ndarray, n: int) -> str:
        """Store a snapshot's probe subset once per distinct subset (named by its checksum); its file name."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 1 or len(rows) != n or (len(rows) > 1 and np.any(np.diff(rows) <= 0)) or \
                (len(rows) and rows[0] < 0):
            raise ValueError(f"rows must be {n} increasing positions into the probe, one per stored row; got "
                             f"shape {rows.shape}")
        rel = subset_file(checksum(rows), len(rows))
        path = check_writable_inside(self.root / rel, self._own)
        if not path.exists():
            save_array(path, rows)
        return rel

