"""Where things lie in a log directory: the subdirectories, the fixed file names, and file-system-safe keys.

Per-snapshot artifacts (embeddings, placed points, caches) declare their paths in :mod:`repviz.store.artifacts`;
the files of the cross-run results folders are declared there too.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

FORMAT_VERSION = 1
PLUGIN_NAME = "repviz"
RUN_SUBDIR = ("plugins", PLUGIN_NAME)  # a run's data, under the directory it was logged to
META_SUBDIR = ("plugins", "repviz-meta")  # results that span runs, under the log directory
MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
TMP_SUFFIX = ".tmp"
PROBE_DIR = "probe"
PROBE = ("ids", "labels", "thumbnails")  # the probe's arrays, probe/<name>.npy
METADATA = f"{PROBE_DIR}/metadata.json"  # the probe's metadata columns (repviz.metadata)
PREDICTION = "prediction"  # record kind of the primary model output (a single-output run's only one)
OUTPUT = "output"  # record kind of every other output of a multi-output model, keyed by its name
ACTIVATION = "activation"  # record kind of one layer's activations

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_KEY = 120  # bytes: far below the usual 255-byte limit of a file name, leaving room for suffixes


def path_key(name: str) -> str:
    """A file-system-safe, reversible-enough key for a layer or method name (``/`` in nested names, etc.).

    Names that need sanitising, or longer than a file name may safely be, get a checksum suffix that keeps
    distinct names distinct.
    """
    key = _UNSAFE.sub("_", name).strip(".") or "_"
    if key != name or len(key) > _MAX_KEY:
        key = f"{key[:_MAX_KEY]}-{zlib.crc32(name.encode()) & 0xFFFFFFFF:08x}"
    return key


def probe_file(name: str) -> str:
    """The file of the probe's array ``name`` (one of :data:`PROBE`), relative to the run."""
    return f"{PROBE_DIR}/{name}.npy"


def activation_file(layer: str, step: int) -> str:
    """The file of one layer's activations at one snapshot, relative to the run."""
    return f"activations/{path_key(layer)}/{int(step)}.npy"


def subset_file(crc: str, n: int) -> str:
    """The file of a subset snapshot's positions into the probe (named by their checksum), relative to the run."""
    return f"subsets/{crc}-{n}.npy"


def prediction_target(step: int, output: str | None, primary: bool) -> tuple[str, str, dict]:
    """Record kind, file and record fields of one stored model output (see
    :meth:`~repviz.store.RunWriter.write_prediction`)."""
    if primary:
        fields = {"step": int(step)} if output is None else {"output": output, "step": int(step)}
        return PREDICTION, f"predictions/{int(step)}.npy", fields
    if output is None:
        raise ValueError("a model output other than the primary one must be stored under its name (output=...)")
    return OUTPUT, f"predictions/{path_key(output)}/{int(step)}.npy", {"output": output, "step": int(step)}


def run_directory(logdir: str | os.PathLike, name: str) -> Path:
    """The directory to log a run called ``name`` of ``logdir`` to (``ActivationLogger(log_dir=...)``), so that
    :func:`~repviz.store.open_logdir` lists it under that name."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or any(p in (".", "..") for p in parts):
        raise ValueError(f"run names are relative paths inside the log directory, got {name!r}")
    return Path(logdir, *parts)


def run_name_of(logdir: str | os.PathLike, run_dir: str | os.PathLike) -> str:
    """The name :func:`~repviz.store.open_logdir` lists the run logged to ``run_dir`` under (the inverse of
    :func:`run_directory`), e.g. after a new training was recorded beside the directory it was given."""
    return Path(run_dir).relative_to(logdir).as_posix()
