"""Atomic writes: every file is written to a temporary name beside it and renamed into place.

A run killed at any moment (even by SIGKILL) leaves either the old file or the new one, never half of one; the
temporaries a killed writer leaves are swept by :func:`remove_stale_temps`. Arrays are ``.npy``, never pickles.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import disk_full
from .layout import TMP_SUFFIX


def temp_beside(path: Path) -> tuple[int, Path]:
    """Create a new temporary file beside ``path``: (open descriptor, its path).

    Unlike ``mkstemp`` (always mode 600) the file gets mode 666 minus the umask, as ``open`` and ``np.save``
    give, so a TensorBoard server running as another user, or a shared cluster filesystem, can read the logs.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}{TMP_SUFFIX}"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds, else delete it."""
    fd, tmp_path = temp_beside(Path(path))
    os.close(fd)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as e:
        if (full := disk_full(path, e)) is not None:
            raise full from e
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def save_array(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write ``array`` as ``.npy`` atomically (never as a pickle), C-ordered: the readers refuse Fortran order
    (an eigensolver's output often is)."""
    array = np.ascontiguousarray(array)
    if array.dtype.hasobject:
        raise TypeError(f"refusing to store an object array at {path}: only numeric arrays are stored")
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.lib.format.write_array(f, array, allow_pickle=False)


def json_default(obj: Any) -> Any:
    """What ``json.dumps`` writes for the numpy values and paths the store is given."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def save_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON atomically. Key order is kept (``manifest['layers']`` lists layers in model order)."""
    save_text(path, json.dumps(obj, indent=1, default=json_default))


def save_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (e.g. JSON already serialised) as UTF-8, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def create_exclusive(path: Path, obj: Any) -> bool:
    """Write ``obj`` as JSON to ``path`` only if no file is there (atomically: hard-link of a complete temporary
    file); False if one already was."""
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(obj, indent=1, default=json_default))
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def checksum(array: np.ndarray) -> str:
    """CRC32 of the array's bytes (cheap: about 1 GB/s), as 8 hex digits."""
    return f"{zlib.crc32(np.ascontiguousarray(array).data) & 0xFFFFFFFF:08x}"


def rounding(dtype: np.dtype) -> float:
    """How far apart, relative to an array's largest magnitude, two values of ``dtype`` may be and still count as
    one value computed twice (a few units of float rounding: batches of a forward pass round differently)."""
    dtype = np.dtype(dtype)
    return 4.0 * float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0


def spread(rows: np.ndarray, first: np.ndarray) -> tuple[float, float]:
    """The largest difference of ``rows`` from the row ``first`` and their largest magnitude (NaN if any value is
    not finite)."""
    if not len(rows):
        return 0.0, 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        return float(np.max(np.abs(rows - first))), float(np.max(np.abs(rows)))


def constant_rows(array: np.ndarray) -> bool:
    """Whether every row of ``array`` (two or more) equals the first up to :func:`rounding`: the same for every
    probe point (a dead ReLU layer, an output that does not depend on the input)."""
    array = np.asarray(array)
    if array.ndim == 0 or len(array) < 2:
        return False
    rows = array.reshape(len(array), -1)
    deviation, magnitude = spread(rows, rows[0])
    return deviation <= rounding(array.dtype) * magnitude


class ArrayBlocks:
    """An ``.npy`` array written in blocks of rows, in order, to a temporary file beside ``path``, so that it never
    exists whole in memory (a snapshot of 50,000 probes x 4,096 columns is 800 MB); its :func:`checksum`,
    non-finite count and whether every row equals the first (:attr:`constant`) are kept as the blocks go.
    :meth:`RunWriter.write_activation` and :meth:`RunWriter.write_prediction` take it in place of an array and
    rename it into place (:meth:`RunWriter.activation_blocks`, :meth:`RunWriter.prediction_blocks` open one)."""

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype | str):
        self.path, self.shape, self.dtype = path, tuple(int(s) for s in shape), np.dtype(dtype)
        self.rows, self.crc, self.nonfinite = 0, 0, 0
        self._first: np.ndarray | None = None  # the first row, while every row written equals it (rounding)
        self._spread = (0.0, 0.0)  # the rows' largest difference from the first, their largest magnitude
        fd, self._tmp = temp_beside(path)
        self._file = os.fdopen(fd, "wb")
        np.lib.format.write_array_header_1_0(self._file, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                                                          "fortran_order": False, "shape": self.shape})

    def write(self, block: np.ndarray) -> None:
        """Append the next rows (converted to the array's dtype)."""
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.shape[1:] or self.rows + len(block) > self.shape[0]:
            raise ValueError(f"a block of shape {block.shape} does not continue an array of shape {self.shape} "
                             f"after its first {self.rows} rows")
        self.crc = zlib.crc32(block.data, self.crc)
        if self.dtype.kind == "f":
            self.nonfinite += int(block.size - np.count_nonzero(np.isfinite(block)))
        if self.rows == 0 and len(block):
            self._first = block[0].reshape(-1).copy()
        if self._first is not None and len(block):
            deviation, magnitude = spread(block.reshape(len(block), -1), self._first)
            self._spread = (max(deviation, self._spread[0]), max(magnitude, self._spread[1]))
            if not self._spread[0] <= rounding(self.dtype) * self._spread[1]:
                self._first = None  # it varies (a later block only adds to the difference)
        try:
            self._file.write(memoryview(block).cast("B"))
        except OSError as e:
            raise disk_full(self.path, e) or e from e
        self.rows += len(block)

    @property
    def constant(self) -> bool:
        """Every row written (two or more) equals the first up to :func:`rounding` (:func:`constant_rows`)."""
        return self._first is not None and self.rows > 1

    def commit(self) -> None:
        """Rename the complete array into place."""
        if self.rows != self.shape[0]:
            raise ValueError(f"{self.path}: {self.rows} of {self.shape[0]} rows written; write them all first")
        try:
            self._file.close()
            os.replace(self._tmp, self.path)
        except OSError as e:
            self.abandon()
            raise disk_full(self.path, e) or e from e

    def abandon(self) -> None:
        """Delete the temporary file (nothing stored); a no-op once committed."""
        self._file.close()
        self._tmp.unlink(missing_ok=True)


def remove_stale_temps(root: str | os.PathLike, older_than: float = 3600.0) -> int:
    """Delete temporary files (``.*.tmp``) under ``root`` left by killed writers; returns how many.

    Only files untouched for ``older_than`` seconds go, so a writer still filling one is never disturbed.
    """
    cutoff, removed = time.time() - older_than, 0
    for tmp in Path(root).rglob(f".*{TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            if tmp.is_file() and tmp.stat().st_mtime < cutoff:
                tmp.unlink()
                removed += 1
    return removed


def not_a_directory(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be a directory to write into (created if missing): "PATH is a file" where it, or the
    nearest of its parents that exists, is not a directory; None where it can."""
    path = Path(path)
    found = next((p for p in (path, *path.parents) if p.exists()), None)
    if found is None or found.is_dir():
        return None
    return f"{found} is {'a file' if found.is_file() else 'not a directory'}"


def is_inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether ``path`` is ``root`` or under it, both taken as absolute paths (no link resolved)."""
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))
