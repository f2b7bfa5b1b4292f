"""Containment: every file a reader opens lies inside its run (or its results directory, or the log directory).

The check is made on the file actually opened (its name from ``/proc/self/fd`` where the system has it), symbolic
links included, so a directory swapped for a link between a check and the open cannot lead a read out. A file
that leads out is refused with :class:`~repviz.store.UnsafeFileError` naming it; a listing leaves it out with a
warning. ``.npy`` files are read with pickles refused, memory-mapped from the descriptor that was checked.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DamagedFileError, UnsafeFileError, refuse

#: Linux names the file an open descriptor holds: the path checked is the one opened, so a directory swapped for
#: a link between a check and the open cannot lead a read out.
FD_NAMES = os.path.isdir("/proc/self/fd")
#: Flags of a descriptor that only names a file (opens no FIFO, reads nothing), where the system has them.
O_PATH = (os.O_PATH | os.O_CLOEXEC) if FD_NAMES and hasattr(os, "O_PATH") else 0


def real_path(path: str | os.PathLike) -> str:
    """``path`` with every symbolic link resolved (a missing tail kept as it is): by the kernel where it names the
    file an ``O_PATH`` descriptor holds (one open, half the time of ``realpath``'s ``lstat`` per component), else
    by ``os.path.realpath``."""
    if O_PATH:
        try:
            fd = os.open(path, O_PATH)
        except (OSError, ValueError):  # missing (realpath keeps the tail), or not a path
            return os.path.realpath(path)
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        if os.path.isabs(real) and not real.endswith(" (deleted)"):
            return real
    return os.path.realpath(path)


def as_bounds(*real: str) -> tuple[str, ...]:
    """Containment bounds: resolved directories, each ending with a separator (for :func:`within`)."""
    return tuple(r if r.endswith(os.sep) else r + os.sep for r in real)


def within(real: str, bounds: tuple[str, ...]) -> bool:
    """Whether the resolved path ``real`` is one of the directories ``bounds`` or lies below one of them."""
    return (real + os.sep).startswith(bounds)


def real_dir(directory: str, dirs: dict[str, str]) -> str:
    """``directory`` resolved, from ``dirs`` (resolved directories, filled as it goes): a plain directory below
    one already resolved costs one ``lstat``, not a walk of its whole path."""
    found = dirs.get(directory)
    if found is None:
        up, name = os.path.split(directory)
        if up and up != directory and name not in ("", ".", "..") and not os.path.islink(directory):
            found = os.path.join(real_dir(up, dirs), name)
        else:
            found = real_path(directory)
        dirs[directory] = found
    return found


def open_inside(path: str | os.PathLike, bounds: tuple[str, ...], directory: bool = False) -> int:
    """A read-only descriptor of ``path``, which must resolve inside ``bounds`` (symbolic links included) and be a
    regular file (or a directory with ``directory``); else :class:`UnsafeFileError` naming it.

    The check is made on the file opened (its name from ``/proc/self/fd``), not on a path resolved beforehand; a
    FIFO is opened without blocking and refused, so a planted pipe cannot hang a reader.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (os.O_DIRECTORY if directory else 0)
    try:
        fd = open_checked(path, bounds, flags)
    except NotADirectoryError:
        raise refuse(path, "is not a directory") from None
    try:
        mode = os.fstat(fd).st_mode
        if not directory and stat.S_ISDIR(mode):  # as open() says it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not directory and not stat.S_ISREG(mode):
            raise refuse(path, "is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_checked(path: str | os.PathLike, bounds: tuple[str, ...], flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)``, refused with :class:`UnsafeFileError` unless the file opened resolves inside
    ``bounds`` (checked on the descriptor where the system names it; else on the path resolved, which is opened)."""
    target = str(path)
    if not FD_NAMES:
        target = real_path(path)
        if not within(target, bounds):
            raise refuse(path)
    fd = os.open(target, flags, mode)
    if FD_NAMES and not within(os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)"), bounds):
        os.close(fd)
        raise refuse(path)
    return fd


def read_inside(path: str | os.PathLike, bounds: tuple[str, ...], max_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, which must resolve inside ``bounds`` (see :func:`open_inside`); a file over
    ``max_bytes`` is not read (:class:`DamagedFileError`)."""
    with os.fdopen(open_inside(path, bounds), "rb") as f:
        if max_bytes is not None and (size := os.fstat(f.fileno()).st_size) > max_bytes:
            raise DamagedFileError(path, f"is {size:,} bytes, over the {max_bytes:,} bytes repviz reads from it; "
                                         f"write it again, smaller")
        return f.read()


def json_inside(path: str | os.PathLike, bounds: tuple[str, ...], max_bytes: int | None = None) -> Any:
    """The parsed JSON file ``path``, which must resolve inside ``bounds`` (and hold at most ``max_bytes``);
    invalid JSON raises ``ValueError``."""
    return parse_json(read_inside(path, bounds, max_bytes), path)


def array_inside(path: str | os.PathLike, bounds: tuple[str, ...], mmap: bool = True) -> np.ndarray:
    """The ``.npy`` file ``path``, which must resolve inside ``bounds``: memory-mapped read-only from the descriptor
    that was checked (never reopened by name) or read whole; pickles are refused, and a file that is not the array
    its header describes raises :class:`DamagedFileError`."""
    with os.fdopen(open_inside(path, bounds), "rb") as f:
        try:
            shape, fortran, dtype, offset = npy_layout(f)
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


def intact_inside(path: str | os.PathLike, bounds: tuple[str, ...]) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of the complete ``.npy`` file ``path`` (see :func:`intact_header`); None when it is missing,
    incomplete, or does not resolve inside ``bounds``."""
    try:
        fd = open_inside(path, bounds)
    except (OSError, UnsafeFileError):
        return None
    with os.fdopen(fd, "rb") as f:
        return intact_header(f)


def complete_array_inside(path: str | os.PathLike, bounds: tuple[str, ...]) -> np.ndarray | None:
    """The complete ``.npy`` file ``path`` read whole, its header parsed once (see :func:`intact_header`); None
    when it is missing, incomplete, not numeric, or does not resolve inside ``bounds``. For small arrays read
    often (a cached embedding checked by every plan): one open, no memory map."""
    try:
        fd = open_inside(path, bounds)
    except (OSError, UnsafeFileError):
        return None
    with os.fdopen(fd, "rb") as f:
        found = intact_header(f)  # leaves f at the data
        if found is None or found[1].hasobject:
            return None
        out = np.empty(found[0], dtype=found[1])
        return out if f.readinto(memoryview(out.reshape(-1)).cast("B")) == out.nbytes else None


def entries_inside(directory: Path, bounds: tuple[str, ...], dirs: bool = False) -> list[str]:
    """Names in ``directory`` (only its subdirectories with ``dirs``), which must resolve inside ``bounds``: a
    missing directory lists nothing, and so does one leading out (with a warning naming it), as does a
    subdirectory that is a link leading out. Files are checked when they are opened."""
    try:
        fd = open_inside(directory, bounds, directory=True)
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
        if dirs and link and not within(real_path(directory / name), bounds):
            warnings.warn(str(refuse(directory / name)), RuntimeWarning, stacklevel=3)
        else:
            names.append(name)
    return names


def check_writable_inside(path: Path, bounds: tuple[str, ...]) -> Path:
    """``path``, whose directory (as far as it exists) must resolve inside ``bounds``: a write never follows a link
    out of the log directory. A file at ``path`` itself that is a link is replaced, not followed."""
    if not within(real_path(path.parent), bounds):
        raise refuse(path.parent)
    return path


#: numpy parses a header with ``ast.literal_eval``, which CPython 3.11 does not make safe across threads (a
#: server's concurrent reads raised "SystemError: AST constructor recursion depth mismatch"): one header at a time.
_HEADER_LOCK = threading.Lock()


def npy_layout(f) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """Shape, Fortran order, dtype and data offset of the ``.npy`` file open as ``f`` (from its header only)."""
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    with _HEADER_LOCK:
        shape, fortran, dtype = read(f)
    return tuple(shape), bool(fortran and len(shape) > 1), np.dtype(dtype), f.tell()


def npy_header(f) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset of the C-ordered ``.npy`` file open as ``f`` (read from its header only)."""
    shape, fortran, dtype, offset = npy_layout(f)
    if fortran:
        raise ValueError(f"{f.name}: a Fortran-ordered array; repviz stores C-ordered arrays only")
    return shape, dtype, offset


def intact_header(f) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of the complete ``.npy`` file open as ``f``; None when it is unreadable or not as long as its
    header says (truncated by a full disk, or appended to). Reads the header only."""
    try:
        shape, dtype, offset = npy_header(f)
        size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return None
    return (shape, dtype) if size == offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize else None



def parse_json(raw: bytes, path: str | os.PathLike) -> Any:
    """Parse the bytes ``raw`` of the JSON file ``path``; not valid UTF-8 JSON raises ``ValueError`` naming it."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DamagedFileError(path, f"is not valid JSON ({e})") from None



def resolve(full: str, dirs: dict[str, str]) -> str | None:
    """``full`` resolved (None if missing): one ``lstat``, and each directory resolved once per listing
    (``dirs``), so checking every record of a run costs what checking that its files exist did."""
    try:
        link = stat.S_ISLNK(os.lstat(full).st_mode)
    except OSError:
        return None
    if link:
        real = real_path(full)
        return real if os.path.exists(real) else None
    parent, name = os.path.split(full)
    return os.path.join(real_dir(parent, dirs), name)


def stat_field(path: str, field: str) -> int | None:
    """``os.stat(path).<field>``, None when there is no such file."""
    try:
        return getattr(os.stat(path), field)
    except (FileNotFoundError, NotADirectoryError):
        return None


def tree_bytes(root: str | os.PathLike) -> int:
    """Bytes of the files under ``root``; a file or directory that a concurrent writer renames away or removes
    between the listing and its stat (an atomic write's temporary) counts 0."""
    total = 0
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    total += tree_bytes(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(FileNotFoundError):
                        total += entry.stat(follow_symlinks=False).st_size
    except FileNotFoundError:
        pass
    return total

