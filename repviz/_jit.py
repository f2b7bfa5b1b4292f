"""numba's ``njit``, with each cached kernel compiled by one process at a time.

A kernel compiled with ``cache=True`` is compiled at its first call in a process and then stored beside its
module (or under ``NUMBA_CACHE_DIR``); a process that needs it later loads it in milliseconds. On an empty cache
(a new install, an upgrade) processes started together all miss it: the pipeline's worker processes, the warm-up
process and the process that trains, test workers. Each then compiles the same kernel, seconds of CPU apiece.
Here a process locks the kernel before compiling a signature it does not have (a file beside the kernel's cache
index, locked with ``fcntl.lockf``, released by the system if the process dies); a process that had to wait
finds the kernel in the cache and loads it. The lock also keeps two processes from rewriting the cache index at
once, which can drop the signature one of them stored. Where no lock can be taken (no ``fcntl``, a read-only
cache directory) the kernel compiles as numba's does.

A process never waits on a holder of lower CPU priority (a larger nice value), such as the warm-up process or the
follower that embeds beside a training script (nice 19): on busy cores the scheduler gives that holder almost no
time, so a load from the cache that takes it a tenth of a second kept a waiting process 20 s. It compiles (or loads)
the kernel without the lock instead.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from collections.abc import Callable

import numba
from numba.core.compiler_lock import global_compiler_lock

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None


def njit(*args, **options):
    """``numba.njit`` (same arguments, used as ``@njit`` or ``@njit(...)``); a kernel with ``cache=True`` compiles
    under its cross-process lock."""
    if len(args) == 1 and callable(args[0]) and not options:
        return _locked(numba.njit(args[0]))
    compile_with = numba.njit(*args, **options)
    return lambda func: _locked(compile_with(func))


def _locked(dispatcher):
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    if fcntl is None or index is None:  # not cached: there is nothing to share
        return dispatcher
    dispatcher.compile = _compile_under_lock(dispatcher.compile, os.path.splitext(index)[0] + ".lock")
    return dispatcher


def _compile_under_lock(compile_: Callable, lock_path: str) -> Callable:
    """``compile_`` (a dispatcher's ``compile``) holding the lock on the file ``lock_path``. numba's own compiler
    lock is taken first: record locks belong to a process, not to a thread, so only one thread of a process may
    hold them at a time (and a kernel that compiles itself again, recursively, does not wait on itself)."""

    def compile(sig):
        with global_compiler_lock:
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError:
                return compile_(sig)
            try:
                _lock_unless_held_below_us(fd)
                return compile_(sig)
            finally:
                os.close(fd)  # releases the lock

    return compile


def _lock_unless_held_below_us(fd: int) -> None:
    """Lock the file ``fd`` once it is free, unless a process of lower CPU priority holds it: then return without."""
    pause = 0.005
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            pass
        holder = _holder(fd)
        try:
            if holder and os.getpriority(os.PRIO_PROCESS, holder) > os.getpriority(os.PRIO_PROCESS, 0):
                return
        except OSError:  # the holder has just exited
            pass
        time.sleep(pause)
        pause = min(2 * pause, 0.1)


#: ``struct flock`` on Linux: l_type, l_whence, l_start, l_len, l_pid (other systems order it otherwise).
_FLOCK = "hhqqi"


def _holder(fd: int) -> int | None:
    """The process ID of the holder of a lock on the whole file ``fd`` (None if free, or not known here)."""
    if not sys.platform.startswith("linux"):
        return None
    asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    try:
        kind, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, asked))
    except OSError:
        return None
    return pid if kind != fcntl.F_UNLCK and pid > 0 else None
