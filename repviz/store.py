"""The on-disk format of a repviz log directory: writers, readers and records.

This is the only module that knows paths and file names. It imports neither Keras nor TensorFlow (reading a log
directory must stay light) and computes nothing beyond checksums.

Layout of one run (TensorBoard's plugin-assets convention, so TensorBoard and our plugin find it)::

    <logdir>/<run>/plugins/repviz/
        manifest.json                       format version, model, layers, probe, schedule (atomic rewrite)
        records.jsonl                       one JSON line appended per stored array; a torn last line is ignored
        probe/ids.npy labels.npy thumbnails.npy
        probe/metadata.json                 per-example columns (text, categories, numbers; repviz.metadata)
        activations/<layer-key>/<step>.npy  one array (n_rows, width) per layer and snapshot: every probe point, or
                                            the subset its record's "rows" file names (Run.rows)
        subsets/<crc>-<n>.npy               positions into the probe of a subset snapshot's rows, one per subset
        predictions/<step>.npy              the primary model output on the probe set per snapshot
        predictions/<output-key>/<step>.npy every other output of a multi-output model
        embeddings/<method-key>/<layer-key>/<step>.npy (+ <step>.json: parameters and quality scores)
        placed/<run-key>/<method-key>/<layer-key>/<step>.npy (+ .json)  probes placed into another run's layout
        cache/neighbors/<layer-key>/<step>-<variant>-<crc>.npy         k-NN graphs of stored activations
        cache/density/<method-key>/<layer-key>/<step>-<variant>-<crc>.json   density contours of an embedding

Results that span runs (meta-SNE) live in ``<logdir>/plugins/repviz-meta/<name>/`` (:meth:`LogDir.artifacts`); the
caches behind them are named here too (:meth:`LogDir.vector_cache`). Scratch results go to
:func:`temporary_artifacts`.

Code outside this module reaches files only through these objects: a :class:`Run` pickles as a reference (its
location and name) so worker processes reopen it, :meth:`Run.read_array` reads what a record describes,
:meth:`Artifacts.read_into` reads part of a stored array into a caller's buffer, and
:meth:`RunWriter.write_tensorboard_marker` writes TensorBoard's marker event. A worker on another
machine, or another storage backend, changes this module only.

Nothing outside the log directory is read through it: every file a reader opens must resolve, symbolic links
included, inside its run (or inside the ``out`` directory for results written there, or inside the log directory for
cross-run results), checked on the file actually opened. A file or directory that leads out (an absolute or ``../``
record, a planted link) is a damaged entry: a listing leaves it out with a warning naming it, a read raises
:class:`UnsafeFileError` (a :class:`NotFoundError`) naming it, a write into it is refused.

Every file is written to a temporary name and renamed into place, and a record is appended only after its
file exists, so a run killed at any moment (even by SIGKILL) opens with every snapshot completed before the kill.
Arrays are ``.npy`` read with ``allow_pickle=False`` and memory-mapped.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from repviz.metadata import Metadata, columns_from, from_json, parse_tsv

FORMAT_VERSION = 1
PLUGIN_NAME = "repviz"
_RUN_SUBDIR = ("plugins", PLUGIN_NAME)
_META_SUBDIR = ("plugins", "repviz-meta")
_MANIFEST = "manifest.json"
_RECORDS = "records.jsonl"
_TMP_SUFFIX = ".tmp"
_PREDICTION = "prediction"  # record kind of the primary model output (a single-output run's only one)
_PROBE = ("ids", "labels", "thumbnails")  # the probe's arrays, probe/<name>.npy
_METADATA = "probe/metadata.json"  # the probe's metadata columns (repviz.metadata)
_OUTPUT = "output"  # record kind of every other output of a multi-output model, keyed by its name


class NotFoundError(LookupError):
    """A run, layer, step, method or artifact that the log directory does not hold."""


class UnsafeFileError(NotFoundError):
    """A stored entry that resolves outside its run or log directory (an absolute or ``../`` file name, a symbolic
    link leading out), or that is not a regular file: never read, served or written through."""


class DamagedFileError(ValueError):
    """A stored file that cannot be read as what it should hold (truncated, garbage, not the format it should
    be); ``filename`` names it, as :class:`OSError` does."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{os.fspath(path)} {reason}")
        self.filename = os.fspath(path)


class DiskFullError(OSError):
    """A write that found no space left on its filesystem; the message names the file and the bytes free."""

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _disk_full(path: str | os.PathLike, error: OSError) -> DiskFullError | None:
    """``error`` as a :class:`DiskFullError` naming ``path`` if it says the disk is full (ENOSPC, a quota, or
    numpy's short write "N requested and M written", which carries no errno), else None."""
    if error.errno not in (errno.ENOSPC, errno.EDQUOT) and not (
            error.errno is None and re.fullmatch(r"\d+ requested and \d+ written", str(error))):
        return None
    try:
        free = f"{shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free} bytes free"
    except OSError:
        free = "free space unknown"
    return DiskFullError(errno.ENOSPC, f"disk full ({free}); free some space and run it again", os.fspath(path))


class IncompatibleRunError(ValueError):
    """Writing into a run directory that already holds a run of another model or probe set."""


# --------------------------------------------------------------------------------------------------------------
# Atomic file primitives
# --------------------------------------------------------------------------------------------------------------

def _temp_beside(path: Path) -> tuple[int, Path]:
    """Create a new temporary file beside ``path``: (open descriptor, its path).

    Unlike ``mkstemp`` (always mode 600) the file gets mode 666 minus the umask, as ``open`` and ``np.save``
    give, so a TensorBoard server running as another user, or a shared cluster filesystem, can read the logs.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}{_TMP_SUFFIX}"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds, else delete it."""
    fd, tmp_path = _temp_beside(Path(path))
    os.close(fd)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as e:
        if (full := _disk_full(path, e)) is not None:
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


class ArrayBlocks:
    """An ``.npy`` array written in blocks of rows, in order, to a temporary file beside ``path``, so that it never
    exists whole in memory (a snapshot of 50,000 probes x 4,096 columns is 800 MB); its :func:`checksum` and
    non-finite count are kept as the blocks go. :meth:`RunWriter.write_activation` and
    :meth:`RunWriter.write_prediction` take it in place of an array and rename it into place
    (:meth:`RunWriter.activation_blocks`, :meth:`RunWriter.prediction_blocks` open one)."""

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype | str):
        self.path, self.shape, self.dtype = path, tuple(int(s) for s in shape), np.dtype(dtype)
        self.rows, self.crc, self.nonfinite = 0, 0, 0
        fd, self._tmp = _temp_beside(path)
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
        try:
            self._file.write(memoryview(block).cast("B"))
        except OSError as e:
            raise _disk_full(self.path, e) or e from e
        self.rows += len(block)

    def commit(self) -> None:
        """Rename the complete array into place."""
        if self.rows != self.shape[0]:
            raise ValueError(f"{self.path}: {self.rows} of {self.shape[0]} rows written; write them all first")
        try:
            self._file.close()
            os.replace(self._tmp, self.path)
        except OSError as e:
            self.abandon()
            raise _disk_full(self.path, e) or e from e

    def abandon(self) -> None:
        """Delete the temporary file (nothing stored); a no-op once committed."""
        self._file.close()
        self._tmp.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------------------------
# Containment: every file a reader opens lies inside its run (or its results directory, or the log directory)
# --------------------------------------------------------------------------------------------------------------

#: Linux names the file an open descriptor holds: the path checked is the one opened, so a directory swapped for
#: a link between a check and the open cannot lead a read out.
_FD_NAMES = os.path.isdir("/proc/self/fd")
#: Flags of a descriptor that only names a file (opens no FIFO, reads nothing), where the system has them.
_O_PATH = (os.O_PATH | os.O_CLOEXEC) if _FD_NAMES and hasattr(os, "O_PATH") else 0


def _real(path: str | os.PathLike) -> str:
    """``path`` with every symbolic link resolved (a missing tail kept as it is): by the kernel where it names the
    file an ``O_PATH`` descriptor holds (one open, half the time of ``realpath``'s ``lstat`` per component), else
    by ``os.path.realpath``."""
    if _O_PATH:
        try:
            fd = os.open(path, _O_PATH)
        except (OSError, ValueError):  # missing (realpath keeps the tail), or not a path
            return os.path.realpath(path)
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        if os.path.isabs(real) and not real.endswith(" (deleted)"):
            return real
    return os.path.realpath(path)


def _bounds(*real: str) -> tuple[str, ...]:
    """Containment bounds: resolved directories, each ending with a separator (for :func:`_within`)."""
    return tuple(r if r.endswith(os.sep) else r + os.sep for r in real)


def _within(real: str, bounds: tuple[str, ...]) -> bool:
    """Whether the resolved path ``real`` is one of the directories ``bounds`` or lies below one of them."""
    return (real + os.sep).startswith(bounds)


def _real_dir(directory: str, dirs: dict[str, str]) -> str:
    """``directory`` resolved, from ``dirs`` (resolved directories, filled as it goes): a plain directory below
    one already resolved costs one ``lstat``, not a walk of its whole path."""
    found = dirs.get(directory)
    if found is None:
        up, name = os.path.split(directory)
        if up and up != directory and name not in ("", ".", "..") and not os.path.islink(directory):
            found = os.path.join(_real_dir(up, dirs), name)
        else:
            found = _real(directory)
        dirs[directory] = found
    return found


def _refuse(path: str | os.PathLike, why: str = "resolves outside its run or log directory") -> UnsafeFileError:
    return UnsafeFileError(f"{path} {why}; it is not read: remove it, or record or compute it again")


def _open_inside(path: str | os.PathLike, bounds: tuple[str, ...], directory: bool = False) -> int:
    """A read-only descriptor of ``path``, which must resolve inside ``bounds`` (symbolic links included) and be a
    regular file (or a directory with ``directory``); else :class:`UnsafeFileError` naming it.

    The check is made on the file opened (its name from ``/proc/self/fd``), not on a path resolved beforehand; a
    FIFO is opened without blocking and refused, so a planted pipe cannot hang a reader.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (os.O_DIRECTORY if directory else 0)
    try:
        fd = _open_checked(path, bounds, flags)
    except NotADirectoryError:
        raise _refuse(path, "is not a directory") from None
    try:
        mode = os.fstat(fd).st_mode
        if not directory and stat.S_ISDIR(mode):  # as open() says it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not directory and not stat.S_ISREG(mode):
            raise _refuse(path, "is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_checked(path: str | os.PathLike, bounds: tuple[str, ...], flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)``, refused with :class:`UnsafeFileError` unless the file opened resolves inside
    ``bounds`` (checked on the descriptor where the system names it; else on the path resolved, which is opened)."""
    target = str(path)
    if not _FD_NAMES:
        target = _real(path)
        if not _within(target, bounds):
            raise _refuse(path)
    fd = os.open(target, flags, mode)
    if _FD_NAMES and not _within(os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)"), bounds):
        os.close(fd)
        raise _refuse(path)
    return fd


def _read_inside(path: str | os.PathLike, bounds: tuple[str, ...]) -> bytes:
    """The bytes of ``path``, which must resolve inside ``bounds`` (see :func:`_open_inside`)."""
    with os.fdopen(_open_inside(path, bounds), "rb") as f:
        return f.read()


def _json_inside(path: str | os.PathLike, bounds: tuple[str, ...]) -> Any:
    """The parsed JSON file ``path``, which must resolve inside ``bounds``; invalid JSON raises ``ValueError``."""
    return _parse_json(_read_inside(path, bounds), path)


def _array_inside(path: str | os.PathLike, bounds: tuple[str, ...], mmap: bool = True) -> np.ndarray:
    """The ``.npy`` file ``path``, which must resolve inside ``bounds``: memory-mapped read-only from the descriptor
    that was checked (never reopened by name) or read whole; pickles are refused, and a file that is not the array
    its header describes raises :class:`DamagedFileError`."""
    with os.fdopen(_open_inside(path, bounds), "rb") as f:
        try:
            shape, fortran, dtype, offset = _npy_layout(f)
        except (ValueError, EOFError) as e:
            raise DamagedFileError(path, f"is not a readable .npy file ({e})") from None
        if dtype.hasobject:
            raise DamagedFileError(path, "holds Python objects (a pickle); repviz stores numeric arrays only")
        order = "F" if fortran else "C"
        if mmap and int(np.prod(shape, dtype=np.int64)):  # (an empty file region cannot be mapped)
            try:
                return np.memmap(f, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
            except ValueError as e:  # shorter than its header says
                raise DamagedFileError(path, f"cannot be mapped as its header says ({e})") from None
        out = np.empty(shape, dtype=dtype, order=order)
        if f.readinto(memoryview(out.reshape(-1, order="A")).cast("B")) != out.nbytes:
            raise DamagedFileError(path, "is shorter than its header says (truncated)")
        return out


def _intact_inside(path: str | os.PathLike, bounds: tuple[str, ...]) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of the complete ``.npy`` file ``path`` (see :func:`_intact_header`); None when it is missing,
    incomplete, or does not resolve inside ``bounds``."""
    try:
        fd = _open_inside(path, bounds)
    except (OSError, UnsafeFileError):
        return None
    with os.fdopen(fd, "rb") as f:
        return _intact_header(f)


def _complete_array_inside(path: str | os.PathLike, bounds: tuple[str, ...]) -> np.ndarray | None:
    """The complete ``.npy`` file ``path`` read whole, its header parsed once (see :func:`_intact_header`); None
    when it is missing, incomplete, not numeric, or does not resolve inside ``bounds``. For small arrays read
    often (a cached embedding checked by every plan): one open, no memory map."""
    try:
        fd = _open_inside(path, bounds)
    except (OSError, UnsafeFileError):
        return None
    with os.fdopen(fd, "rb") as f:
        found = _intact_header(f)  # leaves f at the data
        if found is None or found[1].hasobject:
            return None
        out = np.empty(found[0], dtype=found[1])
        return out if f.readinto(memoryview(out.reshape(-1)).cast("B")) == out.nbytes else None


def _entries_inside(directory: Path, bounds: tuple[str, ...], dirs: bool = False) -> list[str]:
    """Names in ``directory`` (only its subdirectories with ``dirs``), which must resolve inside ``bounds``: a
    missing directory lists nothing, and so does one leading out (with a warning naming it), as does a
    subdirectory that is a link leading out. Files are checked when they are opened."""
    try:
        fd = _open_inside(directory, bounds, directory=True)
    except FileNotFoundError:
        return []
    except UnsafeFileError as e:
        warnings.warn(str(e), RuntimeWarning, stacklevel=3)
        return []
    try:
        with os.scandir(fd) as entries:
            found = [(e.name, e.is_symlink()) for e in entries if not dirs or e.is_dir()]
    finally:
        os.close(fd)
    names = []
    for name, link in found:
        if dirs and link and not _within(_real(directory / name), bounds):
            warnings.warn(str(_refuse(directory / name)), RuntimeWarning, stacklevel=3)
        else:
            names.append(name)
    return names


def _check_writable_inside(path: Path, bounds: tuple[str, ...]) -> Path:
    """``path``, whose directory (as far as it exists) must resolve inside ``bounds``: a write never follows a link
    out of the log directory. A file at ``path`` itself that is a link is replaced, not followed."""
    if not _within(_real(path.parent), bounds):
        raise _refuse(path.parent)
    return path


def _npy_layout(f) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """Shape, Fortran order, dtype and data offset of the ``.npy`` file open as ``f`` (from its header only)."""
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    return tuple(shape), bool(fortran and len(shape) > 1), np.dtype(dtype), f.tell()


def _npy_header(f) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset of the C-ordered ``.npy`` file open as ``f`` (read from its header only)."""
    shape, fortran, dtype, offset = _npy_layout(f)
    if fortran:
        raise ValueError(f"{f.name}: a Fortran-ordered array; repviz stores C-ordered arrays only")
    return shape, dtype, offset


def _intact_header(f) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of the complete ``.npy`` file open as ``f``; None when it is unreadable or not as long as its
    header says (truncated by a full disk, or appended to). Reads the header only."""
    try:
        shape, dtype, offset = _npy_header(f)
        size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return None
    return (shape, dtype) if size == offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize else None


def save_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON atomically. Key order is kept (``manifest['layers']`` lists layers in model order)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1, default=_json_default))


def _create_exclusive(path: Path, obj: Any) -> bool:
    """Write ``obj`` as JSON to ``path`` only if no file is there (atomically: hard-link of a complete temporary
    file); False if one already was."""
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(obj, indent=1, default=_json_default))
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def _parse_json(raw: bytes, path: str | os.PathLike) -> Any:
    """Parse the bytes ``raw`` of the JSON file ``path``; not valid UTF-8 JSON raises ``ValueError`` naming it."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DamagedFileError(path, f"is not valid JSON ({e})") from None


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def checksum(array: np.ndarray) -> str:
    """CRC32 of the array's bytes (cheap: about 1 GB/s), as 8 hex digits."""
    return f"{zlib.crc32(np.ascontiguousarray(array).data) & 0xFFFFFFFF:08x}"


def _parse_records(raw: bytes, path: str | os.PathLike) -> list[dict]:
    """Parse the bytes ``raw`` of the JSON-lines record log ``path`` into the records readers can rely on
    (:func:`_valid_record`).

    A torn last line (a kill mid-append) is dropped silently; damaged lines elsewhere (an old short write, a disk
    error, a field of the wrong type) are skipped with one warning naming the file and the lines, so one bad record
    never hides the others.
    """
    records, bad, lines = [], [], raw.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            record = None
        if _valid_record(record):
            records.append(record)
        elif i < len(lines) - 1 or record is not None:  # the last line has no newline yet: a torn append
            bad.append(i + 1)
    if bad:
        which = (f"line {bad[0]}, which is not a valid record" if len(bad) == 1 else
                 f"lines {', '.join(map(str, bad[:10]))}{', ...' if len(bad) > 10 else ''} ({len(bad)} in all), "
                 f"which are not valid records")
        warnings.warn(f"{path}: skipped {which}", RuntimeWarning, stacklevel=3)
    return records


def append_record(path: str | os.PathLike, record: dict, bounds: tuple[str, ...] | None = None) -> None:
    """Append one JSON line with a single ``write`` on an ``O_APPEND`` descriptor.

    A short write (full disk, file-size limit) is rolled back by truncating to the old length and raises
    ``OSError``, so the next append never glues onto half a line. With ``bounds``, a record log that resolves
    outside them (a planted link) is refused with :class:`UnsafeFileError` before anything is written.
    """
    data = (json.dumps(record, sort_keys=True, default=_json_default) + "\n").encode()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    fd = os.open(path, flags, 0o666) if bounds is None else _open_checked(path, bounds, flags)
    try:
        start = os.fstat(fd).st_size
        written = os.write(fd, data)
        if written != len(data):
            os.ftruncate(fd, start)
            raise OSError(f"{path}: only {written} of {len(data)} bytes of a record were written (disk full?); "
                          f"the record was rolled back")
    finally:
        os.close(fd)


def remove_stale_temps(root: str | os.PathLike, older_than: float = 3600.0) -> int:
    """Delete temporary files (``.*.tmp``) under ``root`` left by killed writers; returns how many.

    Only files untouched for ``older_than`` seconds go, so a writer still filling one is never disturbed.
    """
    cutoff, removed = time.time() - older_than, 0
    for tmp in Path(root).rglob(f".*{_TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            if tmp.is_file() and tmp.stat().st_mtime < cutoff:
                tmp.unlink()
                removed += 1
    return removed


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


# --------------------------------------------------------------------------------------------------------------
# Writing a run
# --------------------------------------------------------------------------------------------------------------

class RunWriter:
    """Writes one run: manifest, probe, activations, predictions (the capture callback's side of the store).

    Parameters
    ----------
    run_dir : path
        The run's directory (what the user passed as ``log_dir``); data goes under ``plugins/repviz/`` in it.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self.root = self.run_dir.joinpath(*_RUN_SUBDIR)
        self.created = False  # set by begin(): this writer created the run
        # what the run's files may resolve into: nothing is read or written through a link leading out of the run
        self._own = _bounds(_real(self.root), _real(self.run_dir))

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
        path = self.root / _MANIFEST
        fresh = {"format_version": FORMAT_VERSION, "created": time.time(), **manifest}
        self.created = _create_exclusive(path, fresh)  # atomic: of two writers racing to create it, one wins
        if self.created:
            self.manifest = fresh
            return
        old = _check_manifest(path, _json_inside(path, self._own))  # a damaged one: refused, naming it
        if old.get("fingerprint") != manifest.get("fingerprint"):
            what = [k for k in ("model", "probe") if (old.get("fingerprint") or {}).get(k)
                    != (manifest.get("fingerprint") or {}).get(k)] or ["model or probe"]
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
        path = self.root / _MANIFEST
        return _check_manifest(path, _json_inside(path, self._own)) if path.exists() else None

    def last_step(self) -> int | None:
        """The largest snapshot step the run holds (None for a new run): a continued fit numbers on from it."""
        steps = [r["step"] for r in self._records()]
        return max(steps) if steps else None

    def _records(self) -> list[dict]:
        path = self.root / _RECORDS
        try:
            return _parse_records(_read_inside(path, self._own), path)
        except FileNotFoundError:
            return []

    def abandon(self) -> None:
        """Undo :meth:`begin` of a run this writer created and stored nothing in (a fit that failed while
        starting), so that a retry with other data is not refused as a different run."""
        if self.created and not self._records():
            for name in ("ids.npy", "labels.npy", "thumbnails.npy", "metadata.json"):
                (self.root / "probe" / name).unlink(missing_ok=True)
            (self.root / _MANIFEST).unlink(missing_ok=True)
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

    def reader_location(self) -> tuple[str, str]:
        """A log directory that lists this run and the run's name in it (its parent directory and its own name),
        for a reader started beside the writer (the live embedding of ``ActivationLogger(embed=...)``)."""
        run_dir = self.run_dir.resolve()
        return str(run_dir.parent), run_dir.name

    def update_manifest(self, **fields: Any) -> None:
        """Merge ``fields`` into the manifest and rewrite it atomically."""
        self.manifest = {**self.manifest, **fields}
        save_json(self.root / _MANIFEST, self.manifest)

    def write_probe(self, ids: np.ndarray, labels: np.ndarray | None = None,
                    thumbnails: np.ndarray | None = None) -> None:
        """Store the probe set once: stable ids (int64), optional labels, optional uint8 thumbnails."""
        probe = _check_writable_inside(self.root / "probe" / "ids.npy", self._own).parent
        save_array(probe / "ids.npy", np.asarray(ids, dtype=np.int64))
        if labels is not None:
            save_array(probe / "labels.npy", np.asarray(labels))
        if thumbnails is not None:
            thumbnails = np.asarray(thumbnails)
            if thumbnails.dtype != np.uint8:
                raise TypeError(f"thumbnails must be uint8, got {thumbnails.dtype}")
            save_array(probe / "thumbnails.npy", thumbnails)

    def write_metadata(self, metadata: Metadata) -> None:
        """Store (or replace) the probe's metadata columns, atomically."""
        save_json(_check_writable_inside(self.root / _METADATA, self._own), metadata.to_json())

    def write_activation(self, layer: str, step: int, array: np.ndarray, *, rows: np.ndarray | None = None,
                         **info: Any) -> dict:
        """Store one layer's activations at one snapshot; returns the record appended.

        ``info`` (e.g. ``epoch``, ``batch``) is stored in the record. Non-finite values are stored as they are
        and counted in the record's ``nonfinite`` field.
        ``rows`` (positions into the probe, increasing) stores a snapshot of that subset of the probe only; see
        :meth:`Run.rows`.
        """
        return self._write("activation", _activation_file(layer, step), array, rows=rows, layer=layer,
                           step=int(step), **info)

    def activation_blocks(self, layer: str, step: int, shape: tuple[int, ...], dtype) -> ArrayBlocks:
        """An array to fill block by block, then pass to :meth:`write_activation` (same layer and step)."""
        return ArrayBlocks(_check_writable_inside(self.root / _activation_file(layer, step), self._own), shape,
                           dtype)

    def prediction_blocks(self, step: int, shape: tuple[int, ...], *, output: str | None = None,
                          primary: bool = True) -> ArrayBlocks:
        """An array to fill block by block, then pass to :meth:`write_prediction` (same arguments)."""
        rel = _prediction_target(step, output, primary)[1]
        return ArrayBlocks(_check_writable_inside(self.root / rel, self._own), shape, np.float32)

    def write_prediction(self, step: int, array: np.ndarray, *, output: str | None = None, primary: bool = True,
                         rows: np.ndarray | None = None, **info: Any) -> dict:
        """Store one model output on the probe set at one snapshot.

        The primary output (the one readers colour by) goes where single-output runs have always put it; each
        other output of a multi-output model is stored under its name ``output`` (required then). ``output``
        names the primary too when given, so a reader can tell which output each snapshot's primary file holds.
        """
        kind, rel, fields = _prediction_target(step, output, primary)
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
            crc, nonfinite = f"{array.crc & 0xFFFFFFFF:08x}", array.nonfinite
        else:
            save_array(_check_writable_inside(self.root / rel, self._own), array)
            crc = checksum(array)
            nonfinite = int(array.size - np.count_nonzero(np.isfinite(array))) if array.dtype.kind == "f" else 0
        record = {"kind": kind, "file": rel, "dtype": array.dtype.str, "shape": list(array.shape),
                  "crc32": crc, "nonfinite": nonfinite, "time": time.time(), **fields}
        append_record(self.root / _RECORDS, record, self._own)
        return record


    def _write_rows(self, rows: np.ndarray, n: int) -> str:
        """Store a snapshot's probe subset once per distinct subset (named by its checksum); its file name."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 1 or len(rows) != n or (len(rows) > 1 and np.any(np.diff(rows) <= 0)) or \
                (len(rows) and rows[0] < 0):
            raise ValueError(f"rows must be {n} increasing positions into the probe, one per stored row; got "
                             f"shape {rows.shape}")
        rel = f"subsets/{checksum(rows)}-{len(rows)}.npy"
        path = _check_writable_inside(self.root / rel, self._own)
        if not path.exists():
            save_array(path, rows)
        return rel


def _activation_file(layer: str, step: int) -> str:
    return f"activations/{path_key(layer)}/{int(step)}.npy"


def _prediction_target(step: int, output: str | None, primary: bool) -> tuple[str, str, dict]:
    """Record kind, file and record fields of one stored model output (see :meth:`RunWriter.write_prediction`)."""
    if primary:
        fields = {"step": int(step)} if output is None else {"output": output, "step": int(step)}
        return _PREDICTION, f"predictions/{int(step)}.npy", fields
    if output is None:
        raise ValueError("a model output other than the primary one must be stored under its name (output=...)")
    return _OUTPUT, f"predictions/{path_key(output)}/{int(step)}.npy", {"output": output, "step": int(step)}


# --------------------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Probe:
    """The fixed inputs recorded at every snapshot: stable ids, labels (or None), uint8 thumbnails (or None), and
    :attr:`metadata`, read when first asked for."""

    ids: np.ndarray
    labels: np.ndarray | None
    thumbnails: np.ndarray | None
    read_metadata: Any = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def metadata(self) -> Metadata:
        """Column name -> read-only array of one value per example, with ``kinds`` (empty when none is stored).
        A damaged metadata file raises :class:`DamagedFileError` here; the probe's arrays stay readable."""
        return Metadata() if self.read_metadata is None else self.read_metadata()


def _choices(items) -> str:
    items = [repr(i) for i in items]
    if not items:
        return "none"
    return ", ".join(items[:20]) + (f", ... ({len(items)} in all)" if len(items) > 20 else "")


def _is_int(value: Any) -> bool:
    return type(value) is int  # JSON's integers; not bool


def _is_shape(value: Any) -> bool:
    """A shape as the store writes it: a list of sizes, ``None`` for a model's batch dimension."""
    if type(value) is not list:
        return False
    for v in value:  # a loop, not all(...): shapes are short, and every run's manifest and records check them
        if not (v is None or type(v) is int and v >= 0):
            return False
    return True


def _typed(kind: type | tuple[type, ...]):
    return lambda v: isinstance(v, kind)


def _dict_of(check) -> Any:
    return lambda v: type(v) is dict and all(map(check, v.values()))


def _bad_fields(entry: dict, fields: dict) -> list[str]:
    """The fields of ``entry`` named in ``fields`` whose value fails its check (absent ones are not checked)."""
    return [name for name, check in fields.items() if name in entry and not check(entry[name])]


def _object_fault(obj: Any, fields: dict) -> str | None:
    """Why the parsed JSON ``obj`` is not the object of ``fields`` a reader expects (None when it is)."""
    if type(obj) is not dict:
        return f"a JSON {type(obj).__name__}, not an object"
    bad = _bad_fields(obj, fields)
    return f"{', '.join(bad)} of the wrong type" if bad else None


#: The fields of a record and what each must be (kinds: activation, prediction, output); a record missing one of
#: the first five, or with one of another type, is left out, so readers never meet a field of the wrong type.
_RECORD_FIELDS = {"kind": _typed(str), "file": _typed(str), "step": _is_int, "dtype": _typed(str),
                  "crc32": _typed(str), "shape": lambda v: _is_shape(v) and bool(v) and None not in v,
                  "nonfinite": lambda v: _is_int(v) and v >= 0, "layer": _typed(str), "output": _typed(str),
                  "rows": _typed(str)}
_RECORD_REQUIRED = frozenset(("kind", "file", "step", "dtype", "crc32", "shape"))


def _valid_record(record: Any) -> bool:
    """Whether ``record`` (parsed JSON) has every field readers use, each of the type the writer gives it."""
    if type(record) is not dict or not _RECORD_REQUIRED.issubset(record) or _bad_fields(record, _RECORD_FIELDS):
        return False
    return "layer" in record if record["kind"] == "activation" else "output" in record if record["kind"] == _OUTPUT \
        else True


#: What the readers use of a manifest, and what each field must be: a field of another type is left out (with a
#: warning naming the file), so a reader never meets a field of the wrong type.
_MANIFEST_FIELDS = {"model": _typed(dict), "probe": _typed(dict), "fingerprint": _typed(dict),
                    "step_unit": _typed(str), "schedule": _typed(dict), "skipped": _dict_of(_typed(str))}
_PREDICTION_FIELDS = {"shape": _is_shape, "output": _typed(str), "outputs": _dict_of(_is_shape)}
_LAYER_FIELDS = {"stored_shape": _is_shape, "output_shape": _is_shape, "class": _typed(str),
                 "reduction": lambda v: type(v) is dict and isinstance(v.get("kind", ""), str)}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: The fields of an embedding's sidecar and of a method key's ``method.json`` that readers use, and what each must be.
_SIDECAR_FIELDS = {"method": _typed(str), "key": _typed(str), "params": _typed(dict),
                   "align": _typed((str, type(None))), "init_from": _typed((list, type(None))),
                   "source": lambda v: isinstance(v, dict) and isinstance(v.get("crc32", ""), str),
                   "scores": _dict_of(lambda v: v is None or _is_number(v)), "seconds": _is_number}
_METHOD_FIELDS = {"method": _typed(str), "params": _typed(dict), "align": _typed((str, type(None))),
                  "default": _typed(bool), "requests": lambda v: isinstance(v, list) and all(isinstance(r, str)
                                                                                          for r in v)}
#: Density contours as :func:`repviz.density.density_contours` returns them (a damaged cache is computed again).
_DENSITY_FIELDS = {"levels": _typed(list),
                   "contours": lambda v: type(v) is list and all(type(c) is dict and type(c.get("paths")) is list
                                                                 for c in v)}
_STEP_FILE = re.compile(r"(0|-?[1-9][0-9]*)\.npy")


def _embedding_fault(Y: np.ndarray) -> str | None:
    """Why the array ``Y`` read from an embedding's file is not an embedding (None when it is one): a matrix of
    finite floating-point coordinates."""
    if Y.ndim != 2 or Y.dtype.kind != "f":
        return f"holds {Y.dtype} {Y.shape}, not an embedding"
    if not np.isfinite(Y).all():
        return "holds non-finite coordinates (NaN or infinity): damaged"
    return None


def _embedding_inside(path: Path, bounds: tuple[str, ...]) -> np.ndarray:
    """The stored embedding ``path``, memory-mapped; :class:`DamagedFileError` naming it when it is not one."""
    Y = _array_inside(path, bounds)
    if fault := _embedding_fault(Y):
        raise DamagedFileError(path, f"{fault}; `repviz embed` computes it again")
    return Y


def _keep_valid(entry: Any, fields: dict, where: str, dropped: list[str]) -> dict:
    """``entry`` without the fields of ``fields`` whose value fails its check, or {} when it is not an object;
    what is left out is named in ``dropped`` (``where`` names the entry)."""
    if type(entry) is not dict:
        dropped.append(f"{where} (a JSON {type(entry).__name__}, not an object)")
        return {}
    bad = _bad_fields(entry, fields)
    dropped += [f"{where}.{name}" if where else name for name in bad]
    return {k: v for k, v in entry.items() if k not in bad} if bad else entry


def _check_manifest(path: Path, manifest: Any) -> dict:
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
    manifest = _keep_valid(manifest, _MANIFEST_FIELDS, "", dropped)
    predictions = manifest.get("predictions")
    if predictions is not None and (kept := _keep_valid(predictions, _PREDICTION_FIELDS, "predictions",
                                                        dropped)) is not predictions:
        manifest = {**manifest, "predictions": kept}
    if not all(type(e) is dict and not _bad_fields(e, _LAYER_FIELDS) for e in layers.values()):  # the rare case
        manifest = {**manifest, "layers": {name: _keep_valid(entry, _LAYER_FIELDS, f"layers.{name}", dropped)
                                           for name, entry in layers.items()}}
    if dropped:
        warnings.warn(f"{path}: left out {', '.join(dropped)}: not of the type repviz writes (a damaged or "
                      f"hand-edited manifest); record the run again to restore them", RuntimeWarning, stacklevel=4)
    return manifest


def _stat_field(path: str, field: str) -> int | None:
    """``os.stat(path).<field>``, None when there is no such file."""
    try:
        return getattr(os.stat(path), field)
    except (FileNotFoundError, NotADirectoryError):
        return None


class Run:
    """One run of a log directory, read lazily. Arrays come back memory-mapped and read-only.

    Use :func:`open_logdir` to get runs by name.
    """

    def __init__(self, root: str | os.PathLike, name: str, results: str | os.PathLike | None = None):
        self.root = Path(root)
        self.name = name
        # where embeddings are written; those of the run's own directory are still read (see open_logdir's out)
        self.results = self.root if results is None else Path(results)
        # what the run's files may resolve into (symbolic links included): its own directories, and those of its
        # results when they are written elsewhere; resolved once, every open is checked against them
        dirs = {str(self.run_dir): _real(self.run_dir)}
        real_root = _real_dir(str(self.root), dirs)
        self._own = _bounds(real_root, dirs[str(self.run_dir)])
        self._out = self._own if self.results == self.root else _bounds(_real(self.results),
                                                                        _real(self.results.parent.parent))
        self.manifest: dict = _check_manifest(self.root / _MANIFEST,
                                              _json_inside(self.root / _MANIFEST, self._own))
        # files every reader of the run needs: one leading out makes the run damaged (skipped by LogDir), not each
        # of its readers
        dirs[real_root] = real_root
        for rel in (_RECORDS, *(f"probe/{k}.npy" for k in _PROBE)):
            real = self._resolve(os.path.join(real_root, rel), dirs)
            if real is not None and not _within(real, self._own):
                raise _refuse(self.root / rel)
        # the parsed record log: (size read, records, kind -> (name, step) -> record), replaced whole, never
        # changed in place, so a request thread reading it while another re-reads the log sees one state
        self._state: tuple[int, list[dict], dict[str, dict[tuple, dict]]] = (-1, [], {})
        self._rereading = threading.Lock()
        self._subsets: dict[str, np.ndarray] = {}  # subset file -> its positions (named by checksum: immutable)

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
        return self._records_state()[1]

    def _records_state(self) -> tuple[int, list[dict], dict[str, dict[tuple, dict]]]:
        """The parsed record log, re-read when it has grown (one cheap ``stat`` per lookup). Re-reads are made one
        at a time, each of the log as it is then, so the state only moves forward: a step once listed stays."""
        path = os.path.join(self.root, _RECORDS)
        state = self._state
        if _stat_field(path, "st_size") == state[0]:
            return state
        with self._rereading:
            size = _stat_field(path, "st_size")
            if size == self._state[0]:
                return self._state
            try:
                raw = _read_inside(path, self._own)
            except FileNotFoundError:
                raw = b""
            real_root = self._own[0].rstrip(os.sep)
            dirs = {real_root: real_root}
            records = [r for r in _parse_records(raw, path) if self._listed(r, real_root, dirs)]
            index: dict[str, dict[tuple, dict]] = {}
            for r in records:  # one pass: later records for the same key win (resumed training)
                name = r.get("output") if r["kind"] == _OUTPUT else r.get("layer")
                index.setdefault(r["kind"], {})[(name, r["step"])] = r
            self._state = (size, records, index)
            return self._state

    @staticmethod
    def _resolve(full: str, dirs: dict[str, str]) -> str | None:
        """``full`` resolved (None if missing): one ``lstat``, and each directory resolved once per listing
        (``dirs``), so checking every record of a run costs what checking that its files exist did."""
        try:
            link = stat.S_ISLNK(os.lstat(full).st_mode)
        except OSError:
            return None
        if link:
            real = _real(full)
            return real if os.path.exists(real) else None
        parent, name = os.path.split(full)
        return os.path.join(_real_dir(parent, dirs), name)

    def _listed(self, record: dict, real_root: str, dirs: dict[str, str]) -> bool:
        """Whether the file of ``record`` exists inside the run. A file resolving outside the run (an absolute or
        ``../`` name, a link leading out) is left out with a warning naming it; a missing one silently."""
        real = self._resolve(os.path.join(real_root, record["file"]), dirs)
        if real is None:
            return False
        if _within(real, self._own):
            return True
        warnings.warn(f"run {self.name!r}: left out the {record['kind']} record of step {record['step']}, whose file "
                      f"{record['file']!r} resolves outside the run; remove it or record the snapshot again",
                      RuntimeWarning, stacklevel=4)
        return False

    def _latest(self, kind: str) -> dict[tuple, dict]:
        """(layer, step) -> the latest record of ``kind``; built once per read of the record log."""
        return self._records_state()[2].get(kind, {})

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
            raise NotFoundError(f"layer {layer!r} is not in run {self.name!r}; it has: {_choices(self.layers)}")

    def steps(self, layer: str | None = None) -> list[int]:
        """Sorted snapshot steps stored for ``layer`` (or for any layer). See ``manifest['step_unit']``."""
        if layer is not None:
            self._check_layer(layer)
        return sorted({s for (lay, s) in self._latest("activation") if layer is None or lay == layer})

    def record(self, layer: str, step: int) -> dict:
        """The record of one stored activation (dtype, shape, checksum, non-finite count, epoch, batch)."""
        self._check_layer(layer)
        rec = self._latest("activation").get((layer, int(step)))
        if rec is None:
            raise NotFoundError(f"step {step} of layer {layer!r} is not in run {self.name!r}; "
                                f"it has steps: {_choices(self.steps(layer))}")
        return rec

    def read_array(self, record: dict, mmap: bool = True) -> np.ndarray:
        """The array that ``record`` (one of :meth:`records`) describes, memory-mapped read-only by default.

        For callers that already hold the record (its checksum, its non-finite count), so that the array is
        found without looking the record up again.
        """
        path = self.record_path(record)
        array = _array_inside(path, self._own, mmap=mmap)
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
        found = _intact_inside(self.record_path(record), self._own)
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
            found = np.asarray(_array_inside(path, self._own, mmap=False))
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
        primary = self._latest(_PREDICTION).get((None, int(step)))
        if output is None:
            return primary
        if output not in self.prediction_outputs:
            raise NotFoundError(f"output {output!r} is not in run {self.name!r}; it has: "
                                f"{_choices(self.prediction_outputs)}")
        found = self._latest(_OUTPUT).get((output, int(step)))
        # A resumed fit may have chosen another primary output: the primary file names the output it holds.
        if found is None and primary is not None and primary.get("output", self.prediction_output) == output:
            found = primary
        return found

    def prediction_steps(self, output: str | None = None) -> list[int]:
        """Sorted steps that hold predictions of ``output`` (default: the primary output)."""
        steps = {s for (_, s) in self._latest(_PREDICTION)} | {s for (_, s) in self._latest(_OUTPUT)}
        return sorted(s for s in steps if self._prediction_record(s, output) is not None)

    def predictions(self, step: int, output: str | None = None) -> np.ndarray:
        """Model outputs on the probe set at ``step``: the primary output, (n_probe, ...) as the model returns
        it, or the output named ``output`` (one of :attr:`prediction_outputs`) of a multi-output model."""
        rec = self._prediction_record(step, output)
        if rec is None:
            which = "predictions" if output is None else f"predictions of output {output!r}"
            raise NotFoundError(f"run {self.name!r} has no {which} at step {step}; "
                                f"it has: {_choices(self.prediction_steps(output))}")
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
        d = self.root / "probe"
        if not (d / "ids.npy").exists():
            raise NotFoundError(f"run {self.name!r} has no probe stored ({d / 'ids.npy'} is missing: its recording "
                                f"stopped while starting, or the file was removed)")
        ids = _array_inside(d / "ids.npy", self._own)
        opt = {k: _array_inside(d / f"{k}.npy", self._own) if (d / f"{k}.npy").exists() else None
               for k in _PROBE[1:]}
        if ids.ndim != 1:
            raise DamagedFileError(d / "ids.npy", f"holds shape {ids.shape}, not one id per probe point")
        for k, array in opt.items():
            if array is not None and (array.ndim < 1 or len(array) != len(ids)):
                raise DamagedFileError(d / f"{k}.npy", f"holds shape {array.shape}, not one row per probe point "
                                                       f"({len(ids)})")
        return Probe(ids=ids, **opt, read_metadata=lambda: self._metadata(len(ids)))

    def _metadata(self, n: int) -> Metadata:
        """The stored metadata of a probe of ``n`` examples (empty when none); see :attr:`Probe.metadata`."""
        path = self.root / _METADATA
        if not os.path.lexists(path):
            return Metadata()
        try:
            return from_json(_json_inside(path, self._own), n)
        except DamagedFileError:
            raise
        except ValueError as e:
            raise DamagedFileError(path, f"{e}; write it again with repviz.store.write_metadata") from None

    # embeddings -----------------------------------------------------------------------------------------------
    def _embedding_dirs(self, method_key: str, *parts: str) -> list[Path]:
        """Where embeddings of ``method_key`` live: the results directory, then the run's own (when apart)."""
        bases = [self.results] if self.results == self.root else [self.results, self.root]
        return [base.joinpath("embeddings", path_key(method_key), *parts) for base in bases]

    def _bounds_of(self, path: Path) -> tuple[str, ...]:
        """What ``path`` (built from the results directory or the run's own) may resolve into."""
        return self._out if self.results != self.root and self.results in path.parents else self._own

    def _embedding_path(self, method_key: str, layer: str, step: int, *, write: bool = False) -> Path:
        """The file of an embedding: where it is written, or for reading the first place that holds it."""
        paths = [d / f"{int(step)}.npy" for d in self._embedding_dirs(method_key, path_key(layer))]
        return paths[0] if write else next((p for p in paths if p.exists()), paths[0])

    def embedding_keys(self) -> list[str]:
        """Method keys (``<method>-<params hash>``) that have at least one stored embedding."""
        dirs = {self.results / "embeddings", self.root / "embeddings"}
        return sorted({name for d in dirs for name in _entries_inside(d, self._bounds_of(d), dirs=True)})

    def has_embedding(self, method_key: str, layer: str, step: int) -> bool:
        return self._embedding_path(method_key, layer, step).exists()

    def embedding_intact(self, method_key: str, layer: str, step: int, n_rows: int) -> bool:
        """The stored embedding exists, is as long as its header says, has ``n_rows`` rows and finite coordinates
        (a truncated, foreign or overwritten file is not a cached result)."""
        path = self._embedding_path(method_key, layer, step)
        Y = _complete_array_inside(path, self._bounds_of(path))
        return Y is not None and len(Y) == n_rows and _embedding_fault(Y) is None

    def write_embedding(self, method_key: str, layer: str, step: int, embedding: np.ndarray,
                        info: dict) -> None:
        """Store an embedding and its sidecar (parameters, quality scores, source checksum), both atomically.

        The sidecar is written first: an embedding file that exists always has its scores.
        """
        path = _check_writable_inside(self._embedding_path(method_key, layer, step, write=True), self._out)
        save_json(path.with_suffix(".json"), info)
        save_array(path, np.asarray(embedding, dtype=np.float32))

    def embedding_info(self, method_key: str, layer: str, step: int) -> dict:
        """The sidecar of a stored embedding: parameters and quality scores. A sidecar that is not the JSON object
        of fields the pipeline writes raises :class:`DamagedFileError` (the embedding is then computed again)."""
        path = self._embedding_path(method_key, layer, step)
        if not path.exists():
            raise NotFoundError(self._missing_embedding(method_key, layer, step))
        sidecar = path.with_suffix(".json")
        info = _json_inside(sidecar, self._bounds_of(path))
        if fault := _object_fault(info, _SIDECAR_FIELDS):
            raise DamagedFileError(sidecar, f"is not an embedding's sidecar ({fault}); `repviz embed` computes the "
                                            f"embedding again")
        return info

    def read_embedding(self, method_key: str, layer: str, step: int) -> np.ndarray:
        """A stored embedding (n_rows, n_components) float32 (rows as :meth:`rows`), memory-mapped; one that is not
        a matrix of finite coordinates raises :class:`DamagedFileError`."""
        path = self._embedding_path(method_key, layer, step)
        if not path.exists():
            raise NotFoundError(self._missing_embedding(method_key, layer, step))
        return _embedding_inside(path, self._bounds_of(path))

    def embedding_steps(self, method_key: str, layer: str) -> list[int]:
        """Sorted steps stored for ``layer`` under ``method_key``; a file there not named ``<step>.npy`` is left out,
        with a warning naming it."""
        steps = set()
        for d in self._embedding_dirs(method_key, path_key(layer)):
            # scandir, not glob: an index of hundreds of runs calls this thousands of times
            for name in _entries_inside(d, self._bounds_of(d)):
                if _STEP_FILE.fullmatch(name):
                    steps.add(int(name[:-4]))
                elif name.endswith(".npy") and not name.startswith("."):
                    warnings.warn(f"{d / name}: left out, not an embedding (those are named <step>.npy); remove it",
                                  RuntimeWarning, stacklevel=2)
        return sorted(steps)

    def write_embedding_method(self, method_key: str, info: dict) -> None:
        """Describe a method key (``method``, full ``params``, ``align``, ``default``) so readers find it by name."""
        save_json(_check_writable_inside(self._embedding_dirs(method_key)[0] / "method.json", self._out), info)

    def embedding_method(self, method_key: str) -> dict:
        """The description written by :meth:`write_embedding_method` ({} if none, or if it is damaged: then with a
        warning naming it; the next ``repviz embed`` of the key writes it again)."""
        path = next((p for d in self._embedding_dirs(method_key) if (p := d / "method.json").exists()), None)
        if path is None:
            return {}
        try:
            info = _json_inside(path, self._bounds_of(path))
        except DamagedFileError as e:
            warnings.warn(f"{e}; its embeddings are listed by key only", RuntimeWarning, stacklevel=2)
            return {}
        if fault := _object_fault(info, _METHOD_FIELDS):
            warnings.warn(f"{path} is not a method description ({fault}); its embeddings are listed by key only",
                          RuntimeWarning, stacklevel=2)
            return {}
        return info

    def embedding_key(self, method: str = "tsne", params: dict | None = None) -> str:
        """The stored method key for a method name and (some of) its parameters.

        ``method`` may also be a full key. A key matches when its method is ``method`` and every entry of
        ``params`` (``"align"`` included) equals the stored one; of several matches, the one computed with the
        pipeline's defaults is preferred, otherwise the match must be unique.
        """
        keys = self.embedding_keys()
        if method in keys:
            return method
        matches = []
        for key in keys:
            info = self.embedding_method(key)
            stored = {**info.get("params", {}), "align": info.get("align")}
            if info.get("method") == method and all(stored.get(k, object()) == v for k, v in (params or {}).items()):
                matches.append((key, info))
        if not matches:
            raise NotFoundError(f"run {self.name!r} has no {method!r} embeddings"
                                f"{' with ' + repr(params) if params else ''}; it has: {_choices(keys)} "
                                f"(compute them with `repviz embed`)")
        if len(matches) > 1:
            defaults = [key for key, info in matches if info.get("default")]
            if params is None and len(defaults) == 1:
                return defaults[0]
            raise NotFoundError(f"run {self.name!r} has {len(matches)} {method!r} embeddings matching "
                                f"{params or {}!r}: {_choices(k for k, _ in matches)}; pass the key, or params= "
                                f"that tell them apart")
        return matches[0][0]

    def embedding(self, layer: str, step: int, method: str = "tsne", params: dict | None = None) -> np.ndarray:
        """The embedding of ``layer`` at ``step`` by ``method`` (name or key), (n_rows, 2) float32, rows as
        :meth:`rows`.

        >>> run.embedding("dense_1", 5, method="tsne", params={"perplexity": 50})   # doctest: +SKIP
        """
        return self.read_embedding(self.embedding_key(method, params), layer, step)

    def embedding_scores(self, layer: str, step: int, method: str = "tsne", params: dict | None = None) -> dict:
        """Quality scores stored with an embedding (trustworthiness, continuity, kNN kept, k-NN accuracy)."""
        return self.embedding_info(self.embedding_key(method, params), layer, step).get("scores", {})

    def _missing_embedding(self, method_key: str, layer: str, step: int) -> str:
        keys = self.embedding_keys()
        if path_key(method_key) not in keys:
            return (f"run {self.name!r} has no embeddings for method {method_key!r}; it has: {_choices(keys)} "
                    f"(compute them with `repviz embed`)")
        return (f"run {self.name!r} has no {method_key!r} embedding of layer {layer!r} at step {step}; it has "
                f"steps: {_choices(self.embedding_steps(method_key, layer))}")

    # placed points: this run's probes placed into another run's stored layout (repviz.placement) --------------
    def _placed_path(self, into: str, method_key: str, layer: str, step: int, *, write: bool = False) -> Path:
        """The file of this run's points placed into run ``into``'s layout ``method_key`` of ``layer`` at ``step``:
        where it is written, or for reading the first place that holds it (as :meth:`_embedding_path`)."""
        bases = [self.results] if self.results == self.root else [self.results, self.root]
        paths = [base.joinpath("placed", path_key(into), path_key(method_key), path_key(layer), f"{int(step)}.npy")
                 for base in bases]
        return paths[0] if write else next((p for p in paths if p.exists()), paths[0])

    def has_placed(self, into: str, method_key: str, layer: str, step: int) -> bool:
        return self._placed_path(into, method_key, layer, step).exists()

    def write_placed(self, into: str, method_key: str, layer: str, step: int, coords: np.ndarray,
                     info: dict) -> None:
        """Store placed points and their sidecar (the layout they were placed into), both atomically, the sidecar
        first. Kept apart from :meth:`write_embedding`: placed points are never listed as a fitted layout."""
        path = _check_writable_inside(self._placed_path(into, method_key, layer, step, write=True), self._out)
        save_json(path.with_suffix(".json"), info)
        save_array(path, np.asarray(coords, dtype=np.float32))

    def placed_layouts(self) -> list[tuple[str, str]]:
        """The layouts this run's points are placed into (:meth:`write_placed`): (:func:`path_key` of the other
        run's name, method key) pairs."""
        found = set()
        for base in dict.fromkeys((self.results, self.root)):
            d = base / "placed"
            for into in _entries_inside(d, self._bounds_of(d), dirs=True):
                found.update((into, key) for key in _entries_inside(d / into, self._bounds_of(d), dirs=True))
        return sorted(found)

    def placed(self, into: str, method_key: str, layer: str, step: int) -> tuple[np.ndarray, dict]:
        """Points of this run placed into run ``into``'s layout (:meth:`write_placed`): coordinates (n_probe,
        n_components) float32 and their sidecar; :class:`NotFoundError` when none are stored."""
        path = self._placed_path(into, method_key, layer, step)
        if not path.exists():
            raise NotFoundError(f"run {self.name!r} has no points placed into the {method_key!r} layout of run "
                                f"{into!r} ({layer!r}, step {step}); place them with `repviz place`")
        info = _json_inside(path.with_suffix(".json"), self._bounds_of(path))
        if type(info) is not dict:
            raise DamagedFileError(path.with_suffix(".json"), "is not a placement's sidecar; `repviz place` "
                                                              "computes it again")
        return _embedding_inside(path, self._bounds_of(path)), info

    def stamp(self) -> tuple:
        """A cheap value that changes whenever a listing of this run would: a record appended, the probe or an
        embedding (method, layer or step) written. A few ``stat`` calls, no file read; for readers that cache what
        they derive from a run (the TensorBoard plugin's index)."""
        root = str(self.root)  # string paths: an index of 10,000 runs calls this 10,000 times
        stamps = [os.stat(os.path.join(root, _MANIFEST)).st_mtime_ns,
                  _stat_field(os.path.join(root, _RECORDS), "st_size"),
                  _stat_field(os.path.join(root, "probe"), "st_mtime_ns")]  # the probe: a starting run can be listed
        # adding a file or directory changes its directory's mtime: embeddings/<key>/<layer>/<step>.npy, so the
        # mtimes of embeddings/, of each key and of each key's layers (whose files are not listed)
        level = [os.path.join(base, "embeddings") for base in dict.fromkeys((str(self.results), root))]
        for depth in range(3):
            below = []
            for d in level:
                stamps.append(_stat_field(d, "st_mtime_ns"))
                if depth < 2 and stamps[-1] is not None:
                    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                        below += [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
            level = below
        # the runs whose layouts its points are placed into (placed/<run>/): the tab's index names them
        stamps += [_stat_field(os.path.join(base, "placed"), "st_mtime_ns")
                   for base in dict.fromkeys((str(self.results), root))]
        return tuple(stamps)

    # caches of derived results --------------------------------------------------------------------------------
    def _cache_path(self, kind: str, parts: tuple[str, ...], name: str, *, write: bool = False) -> Path:
        """A cached derived result: where it is written (the results directory), or for reading the first place
        that holds it (the results directory, then the run's own)."""
        bases = [self.results] if self.results == self.root else [self.results, self.root]
        paths = [base.joinpath("cache", kind, *map(path_key, parts), name) for base in bases]
        return paths[0] if write else next((p for p in paths if p.exists()), paths[0])

    def _graph_path(self, layer: str, step: int, variant: str, *, write: bool = False) -> Path:
        # named by the activation's checksum: a snapshot stored again (a resumed fit) never reads a stale graph
        crc = self.record(layer, step).get("crc32", "none")
        return self._cache_path("neighbors", (layer,), f"{int(step)}-{path_key(variant)}-{crc}.npy", write=write)

    def neighbor_graph(self, layer: str, step: int, variant: str) -> np.ndarray | None:
        """The cached k-nearest-neighbour graph of the activations of ``layer`` at ``step`` (row i: the probe
        indices of point i's neighbours, nearest first), as computed by ``variant`` (e.g. ``"k10-exact"``);
        None when it is not cached, cached for activations since stored again, or damaged (not a graph of probe
        indices: computed again and replaced)."""
        path = self._graph_path(layer, step, variant)
        graph = _complete_array_inside(path, self._bounds_of(path))
        n = self.record(layer, step)["shape"][0]
        if graph is None or graph.ndim != 2 or graph.dtype.kind not in "iu" or len(graph) != n or \
                (graph.size and not 0 <= graph.min() <= graph.max() < n):
            return None
        return graph

    def write_neighbor_graph(self, layer: str, step: int, variant: str, indices: np.ndarray) -> None:
        """Cache a k-nearest-neighbour graph (see :meth:`neighbor_graph`), atomically."""
        save_array(_check_writable_inside(self._graph_path(layer, step, variant, write=True), self._out),
                   np.asarray(indices))

    def _density_path(self, method_key: str, layer: str, step: int, variant: str, *, write: bool = False) -> Path:
        # named by the embedding's checksum: an embedding computed again never reads stale contours
        crc = checksum(np.asarray(self.read_embedding(method_key, layer, step)))
        return self._cache_path("density", (method_key, layer), f"{int(step)}-{path_key(variant)}-{crc}.json",
                                write=write)

    def density(self, method_key: str, layer: str, step: int, variant: str) -> dict | None:
        """Cached density contours of the embedding ``method_key`` of ``layer`` at ``step`` (``variant``: how they
        were drawn, e.g. ``"class-l4"``); None when not cached or the embedding has changed since."""
        path = self._density_path(method_key, layer, step, variant)
        try:
            contours = _json_inside(path, self._bounds_of(path))
        except (OSError, ValueError, UnsafeFileError):  # not cached: computed again, and the file replaced
            return None
        complete = type(contours) is dict and _DENSITY_FIELDS.keys() <= contours.keys()
        return contours if complete and not _bad_fields(contours, _DENSITY_FIELDS) else None

    def write_density(self, method_key: str, layer: str, step: int, variant: str, contours: dict) -> None:
        """Cache density contours (see :meth:`density`), atomically."""
        save_json(_check_writable_inside(self._density_path(method_key, layer, step, variant, write=True), self._out),
                  contours)

    # sizes ----------------------------------------------------------------------------------------------------
    def disk_bytes(self) -> int:
        """Bytes of every file of the run (its repviz data)."""
        return _tree_bytes(self.root)


def _tree_bytes(root: str | os.PathLike) -> int:
    """Bytes of the files under ``root``; a file or directory that a concurrent writer renames away or removes
    between the listing and its stat (an atomic write's temporary) counts 0."""
    total = 0
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    total += _tree_bytes(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(FileNotFoundError):
                        total += entry.stat(follow_symlinks=False).st_size
    except FileNotFoundError:
        pass
    return total


class Artifacts:
    """A directory of named results that span runs (meta-SNE), with atomic writes.

    With ``fallback``, files missing from ``root`` are read from ``fallback`` (the log directory's own results
    when results are written elsewhere, see :func:`open_logdir`'s ``out``); writes always go to ``root``.
    """

    def __init__(self, root: str | os.PathLike, fallback: str | os.PathLike | None = None):
        self.root = Path(root)
        self.fallback = None if fallback is None else Path(fallback)
        self._own = _artifacts_bounds(self.root)
        self._fallback = None if self.fallback is None else _artifacts_bounds(self.fallback)
        self._headers: dict[str, tuple[tuple, tuple[tuple[int, ...], np.dtype, int]]] = {}

    @property
    def location(self) -> str:
        """Where the directory is, for messages."""
        return str(self.root)

    def path(self, name: str) -> Path:
        """The path artifact ``name`` is read from; ``name`` is a plain file name (no directories)."""
        return self._source(name)[0]

    def _source(self, name: str) -> tuple[Path, tuple[str, ...]]:
        """The path artifact ``name`` is read from, and what it may resolve into (the log directory, or the
        ``out`` directory, that holds it)."""
        target = self._target(name)
        if self.fallback is not None and not target.exists() and (self.fallback / name).exists():
            return self.fallback / name, self._fallback
        return target, self._own

    def _target(self, name: str) -> Path:
        """The path artifact ``name`` is written to."""
        if name != Path(name).name or name.startswith("."):
            raise ValueError(f"artifact names are plain file names, got {name!r}")
        return self.root / name

    def exists(self, name: str) -> bool:
        """Whether artifact ``name`` is stored (a link leading out of the log directory is not)."""
        path, bounds = self._source(name)
        return path.exists() and _within(_real(path), bounds)

    def names(self) -> list[str]:
        return sorted({name for d, bounds in ((self.root, self._own), (self.fallback, self._fallback))
                       if d is not None for name in _entries_inside(d, bounds) if not name.startswith(".")})

    def save_array(self, name: str, array: np.ndarray) -> None:
        save_array(_check_writable_inside(self._target(name), self._own), array)

    def load_array(self, name: str, mmap: bool = True) -> np.ndarray:
        path, bounds = self._source(name)
        try:
            return _array_inside(path, bounds, mmap=mmap)
        except FileNotFoundError:
            raise NotFoundError(f"{name!r} is not in {str(self.root)!r}; it has: {_choices(self.names())}") from None

    def intact(self, name: str) -> bool:
        """The stored array ``name`` exists and is as long as its header says."""
        return _intact_inside(*self._source(name)) is not None

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype of the stored array ``name``, read from its header alone."""
        with self._open(name) as f:
            shape, dtype, _ = self._header(name, f)
        return shape, dtype

    def read_into(self, name: str, out: np.ndarray, start: int = 0) -> None:
        """Fill ``out`` with elements ``start, start + 1, ...`` of the stored array ``name`` (in C order).

        For a 1-D array this reads ``array[start:start + out.size]``; for a 2-D array of width w, ``start = i * w``
        and ``out`` of shape (k, w) read rows ``i:i + k``. One plain read into ``out``'s memory: unlike a memory
        map, nothing of the file stays resident afterwards, so reading many large arrays block by block keeps
        memory at the size of the caller's buffers. ``out`` must be C-contiguous, writeable and of the stored
        dtype.
        """
        if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(f"out must be a writeable C-contiguous numpy array to read {name!r} into")
        with self._open(name) as f:
            shape, dtype, offset = self._header(name, f)
            if out.dtype != dtype:
                raise ValueError(f"{name!r} in {self.location!r} holds {dtype}; out is {out.dtype}")
            size = int(np.prod(shape, dtype=np.int64))
            if not 0 <= start <= start + out.size <= size:
                raise ValueError(f"elements [{start}, {start + out.size}) are outside {name!r} in "
                                 f"{self.location!r}, which holds {size} (shape {shape})")
            f.seek(offset + start * dtype.itemsize)
            if f.readinto(memoryview(out).cast("B")) != out.nbytes:
                raise ValueError(f"{name!r} in {self.location!r} is truncated; delete it to rebuild it")

    def _open(self, name: str):
        try:
            return os.fdopen(_open_inside(*self._source(name)), "rb")
        except FileNotFoundError:
            raise NotFoundError(f"{name!r} is not in {self.location!r}; it has: {_choices(self.names())}") from None

    def _header(self, name: str, f) -> tuple[tuple[int, ...], np.dtype, int]:
        """The parsed header of the open file ``f``, cached while the file stays the same one (a file renamed
        onto ``name`` is parsed again)."""
        st = os.fstat(f.fileno())
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._headers.get(name)
        if cached is None or cached[0] != identity:
            cached = self._headers[name] = (identity, _npy_header(f))
        return cached[1]

    def save_json(self, name: str, obj: Any) -> None:
        save_json(_check_writable_inside(self._target(name), self._own), obj)

    def load_json(self, name: str) -> Any:
        path, bounds = self._source(name)
        try:
            return _json_inside(path, bounds)
        except FileNotFoundError:
            raise NotFoundError(f"{name!r} is not in {str(self.root)!r}; it has: {_choices(self.names())}") from None

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[Path]:
        """Yield a temporary path to fill (e.g. with ``np.lib.format.open_memmap``); renamed onto ``name`` on
        success, deleted on failure."""
        with atomic_path(_check_writable_inside(self._target(name), self._own)) as tmp:
            yield tmp


def _artifacts_bounds(root: Path) -> tuple[str, ...]:
    """What the files of the artifacts directory ``root`` may resolve into: the log directory (or ``out``
    directory) of ``<base>/plugins/repviz-meta/<name>``, else (a scratch directory) ``root`` itself."""
    meta = root.parent
    return _bounds(_real(meta.parent.parent if (meta.parent.name, meta.name) == _META_SUBDIR else root))


def _find_manifests(root: Path) -> list[Path]:
    """Every ``<run>/plugins/repviz/manifest.json`` below ``root``, at any depth, sorted.

    The walk does not enter a run's own data (``plugins/repviz/``, thousands of arrays) nor the cross-run results
    (``plugins/repviz-meta/``), which makes it more than 10x faster than a recursive glob on a log directory of 300
    runs. Like that glob, it does not follow symbolic links to directories, except as the ``plugins`` directory
    of a run.
    """
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        manifest = Path(dirpath).joinpath(*_RUN_SUBDIR, _MANIFEST)
        if "plugins" in dirnames and manifest.exists():
            found.append(manifest)
        if Path(dirpath).name == _RUN_SUBDIR[0]:
            dirnames[:] = [d for d in dirnames if d not in (_RUN_SUBDIR[1], _META_SUBDIR[1])]
    return sorted(found)


class LogDir:
    """A log directory holding one or more repviz runs (found at any depth, as TensorBoard finds runs)."""

    def __init__(self, path: str | os.PathLike, out: str | os.PathLike | None = None):
        self.path = Path(path)
        self.out = None if out is None else Path(out)
        if not self.path.exists():
            raise NotFoundError(f"log directory {str(self.path)!r} does not exist")
        if not self.path.is_dir():
            raise NotFoundError(f"log directory {str(self.path)!r} is a file, not a directory")
        self.runs: dict[str, Run] = {}
        self.skipped: dict[str, str] = {}  # run name -> why it could not be read
        for manifest in _find_manifests(self.path):
            root = manifest.parent
            name = root.parent.parent.relative_to(self.path).as_posix()
            results = None if self.out is None else self.out.joinpath(*Path(name).parts, *_RUN_SUBDIR)
            try:
                self.runs[name] = Run(root, name, results)
            except (OSError, ValueError, UnsafeFileError) as e:  # one broken run must not hide the others
                self.skipped[name] = str(e)
                warnings.warn(f"skipped run {name!r}: {e}", RuntimeWarning, stacklevel=2)

    def __repr__(self) -> str:
        return f"LogDir({str(self.path)!r}, runs={list(self.runs)})"

    def run(self, name: str) -> Run:
        """The run called ``name`` (its path relative to the log directory)."""
        if name not in self.runs:
            raise NotFoundError(f"run {name!r} is not in {str(self.path)!r}; it has: {_choices(self.runs)}")
        return self.runs[name]

    def artifacts(self, name: str) -> Artifacts:
        """The results directory ``name`` for cross-run results (e.g. one meta-SNE configuration)."""
        if not name or name != Path(name).name or name.startswith("."):
            raise ValueError(f"artifact directory names are plain names, got {name!r}")
        own = self.path.joinpath(*_META_SUBDIR, name)
        return Artifacts(own) if self.out is None else Artifacts(self.out.joinpath(*_META_SUBDIR, name), own)

    def vector_cache(self, transform: str, probe_id: str, n_pairs: int | None = None,
                     pair_seed: int | None = None) -> Artifacts:
        """The cache of meta-SNE representation vectors of one transform over one probe set (``probe_id``) and,
        above the pair-sample threshold, one sample of ``n_pairs`` probe pairs drawn with ``pair_seed``."""
        sample = "" if n_pairs is None else f"-p{int(n_pairs)}s{pair_seed}"
        return self.artifacts(f"vectors-{transform}-{probe_id}{sample}")

    def artifact_names(self) -> list[str]:
        bases = [base for base in (self.path, self.out) if base is not None]
        return sorted({name for base in bases
                       for name in _entries_inside(base.joinpath(*_META_SUBDIR), _bounds(_real(base)), dirs=True)})


@contextlib.contextmanager
def temporary_artifacts(prefix: str = "repviz-") -> Iterator[Artifacts]:
    """A scratch :class:`Artifacts` directory, deleted with everything in it when the block ends."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Artifacts(tmp)


def run_directory(logdir: str | os.PathLike, name: str) -> Path:
    """The directory to log a run called ``name`` of ``logdir`` to (``ActivationLogger(log_dir=...)``), so that
    :func:`open_logdir` lists it under that name."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or any(p in (".", "..") for p in parts):
        raise ValueError(f"run names are relative paths inside the log directory, got {name!r}")
    return Path(logdir, *parts)


def write_metadata(run_dir: str | os.PathLike, columns: Any, kinds: dict[str, str] | None = None) -> Metadata:
    """Add or replace the probe metadata of the run logged to ``run_dir`` (``ActivationLogger``'s ``log_dir``),
    e.g. after capture: ``columns`` as ``ActivationLogger(metadata=...)`` takes them (a mapping column -> values, a
    pandas DataFrame), or the path of a TSV file with a header line (:func:`repviz.metadata.parse_tsv`), one value
    per probe example; returns them."""
    if isinstance(columns, (str, os.PathLike)):
        try:
            columns = parse_tsv(Path(columns).read_text(encoding="utf-8"), os.fspath(columns))
        except UnicodeDecodeError as e:
            raise ValueError(f"{os.fspath(columns)} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    root = Path(run_dir).joinpath(*_RUN_SUBDIR)
    if not (root / _MANIFEST).exists():
        raise NotFoundError(f"{os.fspath(run_dir)!r} holds no repviz run ({root / _MANIFEST} is missing); give the "
                            f"directory that ActivationLogger logged to")
    metadata = columns_from(columns, len(Run(root, Path(run_dir).name).probe), kinds)
    RunWriter(run_dir).write_metadata(metadata)
    return metadata


def open_logdir(path: str | os.PathLike, out: str | os.PathLike | None = None) -> LogDir:
    """Open a log directory for reading; needs no TensorFlow.

    ``out``: a directory for the results computed from it (embeddings, meta-SNE maps), for log directories that
    are read-only (shared experiment directories): results are written under ``out`` in the same layout and read
    from ``out`` first, then from the log directory itself.

    >>> logdir = open_logdir("logs")                                   # doctest: +SKIP
    >>> run = logdir.runs["relu_mlp"]; run.activations(run.layers[0], 0).shape   # doctest: +SKIP
    (2000, 128)
    """
    logdir = LogDir(path, out)
    if not logdir.runs and not logdir.artifact_names():
        raise NotFoundError(f"{str(path)!r} holds no repviz runs (no */plugins/repviz/manifest.json); "
                            f"record some with repviz.ActivationLogger")
    return logdir


def open_run(path: str | os.PathLike, name: str, out: str | os.PathLike | None = None) -> Run:
    """The run called ``name`` of the log directory ``path``, opened alone: the run ``LogDir(path, out)`` would list
    under that name, found without walking the whole log directory (a few ``stat`` calls), for a reader holding a
    listing that is asked for a name not in it. ``NotFoundError`` when the walk would list no run of that name."""
    parts = Path(name).parts
    pairs = set(zip(parts, parts[1:]))
    run_dir = Path(path).joinpath(*parts)
    root = run_dir.joinpath(*_RUN_SUBDIR)
    # as the walk: a canonical relative name, not inside a run's data, reached through no link to a directory
    if (not parts or Path(name).as_posix() != name or Path(name).is_absolute() or {".", ".."} & set(parts)
            or _RUN_SUBDIR in pairs or _META_SUBDIR in pairs or _real(run_dir) != os.path.join(_real(path), *parts)
            or not (root / _MANIFEST).is_file()):
        raise NotFoundError(f"run {name!r} is not in {str(path)!r}")
    return Run(root, name, None if out is None else Path(out).joinpath(*parts, *_RUN_SUBDIR))
