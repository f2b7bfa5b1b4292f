"""What the store raises, and the one wording of "what there is instead" in its messages."""

from __future__ import annotations

import errno
import os
import re
import shutil


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


class IncompatibleRunError(ValueError):
    """Writing into a run directory that already holds a run of another model or probe set."""


def disk_full(path: str | os.PathLike, error: OSError) -> DiskFullError | None:
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


def refuse(path: str | os.PathLike, why: str = "resolves outside its run or log directory") -> UnsafeFileError:
    """The error for a stored entry that is never read or written through (see :class:`UnsafeFileError`)."""
    return UnsafeFileError(f"{path} {why}; it is not read: remove it, or record or compute it again")
