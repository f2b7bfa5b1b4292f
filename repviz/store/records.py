"""The record log of a run: one JSON line appended per stored array, read back as the records readers rely on.

A record is appended only after its file exists, with one ``write`` on an ``O_APPEND`` descriptor; a torn last
line (a kill mid-append) is ignored, and a damaged line elsewhere is skipped with a warning naming it.
"""

from __future__ import annotations

import json
import os
import threading
import warnings

from .contained import open_checked, read_inside, resolve, stat_field, within
from .files import json_default
from .layout import OUTPUT, RECORDS
from .schema import valid_record


def parse_records(raw: bytes, path: str | os.PathLike) -> list[dict]:
    """Parse the bytes ``raw`` of the JSON-lines record log ``path`` into the records readers can rely on
    (:func:`valid_record`).

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
        if valid_record(record):
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
    data = (json.dumps(record, sort_keys=True, default=json_default) + "\n").encode()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    fd = os.open(path, flags, 0o666) if bounds is None else open_checked(path, bounds, flags)
    try:
        start = os.fstat(fd).st_size
        written = os.write(fd, data)
        if written != len(data):
            os.ftruncate(fd, start)
            raise OSError(f"{path}: only {written} of {len(data)} bytes of a record were written (disk full?); "
                          f"the record was rolled back")
    finally:
        os.close(fd)



class RecordLog:
    """The parsed record log of one run (``root``), re-read when it has grown (new snapshots during training).

    The parsed state is replaced whole, never changed in place, so a request thread reading it while another
    re-reads the log sees one state; re-reads are made one at a time, so a step once listed stays listed.
    """

    def __init__(self, root: str, name: str, bounds: tuple[str, ...]):
        self.path, self.name, self.bounds = os.path.join(root, RECORDS), name, bounds
        # (size read, records, kind -> (name, step) -> record)
        self._state: tuple[int, list[dict], dict[str, dict[tuple, dict]]] = (-1, [], {})
        self._rereading = threading.Lock()

    def records(self) -> list[dict]:
        """All valid records whose file exists inside the run."""
        return self._current()[1]

    def latest(self, kind: str) -> dict[tuple, dict]:
        """(layer or output, step) -> the latest record of ``kind``; built once per read of the log."""
        return self._current()[2].get(kind, {})

    def _current(self) -> tuple[int, list[dict], dict[str, dict[tuple, dict]]]:
        """The parsed record log, re-read when it has grown (one cheap ``stat`` per lookup)."""
        state = self._state
        if stat_field(self.path, "st_size") == state[0]:
            return state
        with self._rereading:
            size = stat_field(self.path, "st_size")
            if size == self._state[0]:
                return self._state
            try:
                raw = read_inside(self.path, self.bounds)
            except FileNotFoundError:
                raw = b""
            real_root = self.bounds[0].rstrip(os.sep)
            dirs = {real_root: real_root}
            records = [r for r in parse_records(raw, self.path) if self._listed(r, real_root, dirs)]
            index: dict[str, dict[tuple, dict]] = {}
            for r in records:  # one pass: later records for the same key win (resumed training)
                name = r.get("output") if r["kind"] == OUTPUT else r.get("layer")
                index.setdefault(r["kind"], {})[(name, r["step"])] = r
            self._state = (size, records, index)
            return self._state

    def _listed(self, record: dict, real_root: str, dirs: dict[str, str]) -> bool:
        """Whether the file of ``record`` exists inside the run. A file resolving outside the run (an absolute or
        ``../`` name, a link leading out) is left out with a warning naming it; a missing one silently."""
        real = resolve(os.path.join(real_root, record["file"]), dirs)
        if real is None:
            return False
        if within(real, self.bounds):
            return True
        warnings.warn(f"run {self.name!r}: left out the {record['kind']} record of step {record['step']}, whose file "
                      f"{record['file']!r} resolves outside the run; remove it or record the snapshot again",
                      RuntimeWarning, stacklevel=5)
        return False
