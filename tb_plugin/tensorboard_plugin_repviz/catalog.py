"""A cached listing of the log directory, shared by every request of the plugin.

Finding runs walks the whole log directory (``repviz.store.LogDir``); with hundreds of runs that is too slow to
do on every request or on every ``is_active`` call of TensorBoard's plugin listing. The catalog keeps the last
listing and rescans in a background thread once it is older than ``ttl`` seconds (or than
:attr:`Catalog.SCAN_SPACING` times the last scan's duration, so a huge log directory is not walked without pause);
only the very first listing is waited for. Runs whose manifest did not change keep their ``Run`` object, so its
parsed records stay cached. A name not in the listing is looked up alone (``repviz.store.open_run``), never by
walking the log directory again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from repviz.service import LogDir, NotFoundError, Run, open_run


def inside(path: str, root: str) -> bool:
    """Whether ``path``, symbolic links resolved, lies under ``root`` (itself resolved)."""
    real = os.path.realpath(path)
    return os.path.commonpath([real, root]) == root


class Catalog:
    """The runs and meta-SNE results of one log directory, rescanned in the background.

    Parameters
    ----------
    path : str
        The log directory (TensorBoard's ``--logdir``). A path that is not a local directory (a cloud URL, an
        empty string under ``--logdir_spec``) lists nothing.
    out : str, optional
        Results written outside the log directory (``repviz embed --out``), read as an overlay.
    ttl : float, default=5.0
        Seconds a listing is served before a background rescan is started.
    first_wait : float, default=10.0
        Seconds the first caller waits for the first scan (later callers never wait).
    """

    #: A background rescan waits at least this many times the last scan's duration, and a cached value as many
    #: times its build time (a scan of 10,000 runs takes seconds: rescanning every ``ttl`` would keep a core busy
    #: walking the same tree).
    SCAN_SPACING = 20.0

    def __init__(self, path: str, *, out: str | None = None, ttl: float = 5.0, first_wait: float = 10.0):
        self.path, self.out = path, out
        self.ttl, self.first_wait = ttl, first_wait
        self._lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self._ready = threading.Event()
        self._logdir: LogDir | None = None
        self._scanned, self._scan_seconds = -float("inf"), 0.0
        self._scanning = False
        self._cache: dict[str, tuple[float, Any, float]] = {}  # name -> (built at, value, seconds it took)
        self._per_run: dict[str, tuple[Run, tuple, Any]] = {}
        self._found: dict[str, Run] = {}  # runs opened by name since the last scan (replaced whole, never changed)

    # listing ------------------------------------------------------------------------------------------------
    def logdir(self) -> LogDir | None:
        """The latest listing (None: no log directory); starts a background rescan when it is stale."""
        self._refresh_if_stale()
        if not self._ready.wait(self.first_wait):
            return None
        return self._logdir

    def prefetch(self) -> None:
        """Start the first scan in the background (returns at once)."""
        self._refresh_if_stale()

    def runs(self) -> dict[str, Run]:
        log = self.logdir()
        return {**log.runs, **self._found} if log is not None else {}

    def is_active(self) -> bool:
        """True when the log directory holds a repviz run or a meta-SNE result (from the cached listing)."""
        log = self.logdir()
        return log is not None and bool(log.runs or log.artifact_names())

    def run(self, name: str) -> Run:
        """The run called ``name``: listed, or else looked up alone, so that a run created since the last scan is
        served at once and a name that is no run costs a few ``stat`` calls; ``NotFoundError`` otherwise."""
        run = self.runs().get(name)
        if run is not None:
            return run
        try:
            run = open_run(self.path, name, self.out) if self.path and os.path.isdir(self.path) else None
        except (NotFoundError, OSError, ValueError):  # no run, or one that cannot be read (as the scan skips it)
            run = None
        if run is None or not inside(run.root, os.path.realpath(self.path)):
            raise NotFoundError(f"run {name!r} is not in the log directory")
        with self._lock:
            self._found = {**self._found, name: run}
        return run

    def scan(self) -> None:
        """Rescan now, in the calling thread (one scan at a time)."""
        with self._scan_lock:
            start = time.monotonic()
            log = self._list()
            with self._lock:
                self._logdir, self._scanned = log, time.monotonic()
                self._scan_seconds, self._found = self._scanned - start, {}
                self._cache.clear()
                listed = log.runs if log is not None else {}
                self._per_run = {k: v for k, v in self._per_run.items() if listed.get(k) is v[0]}
            self._ready.set()

    def _refresh_if_stale(self) -> None:
        with self._lock:
            if self._scanning or time.monotonic() - self._scanned < max(self.ttl,
                                                                         self.SCAN_SPACING * self._scan_seconds):
                return
            self._scanning = True
        threading.Thread(target=self._background_scan, name="repviz-catalog", daemon=True).start()

    def _background_scan(self) -> None:
        try:
            self.scan()
        finally:
            with self._lock:
                self._scanning = False
            self._ready.set()  # a failed first scan must not leave callers waiting

    def _list(self) -> LogDir | None:
        if not self.path or not os.path.isdir(self.path):
            return None
        log = LogDir(self.path, self.out)
        root = os.path.realpath(self.path)
        old = self._logdir.runs if self._logdir is not None else {}
        runs = {}
        for name, run in log.runs.items():
            if not inside(run.root, root):  # a symlink leading out of the log directory is not served
                continue
            previous = old.get(name)
            # the same manifest: keep the old object and the records it has parsed
            runs[name] = previous if previous is not None and previous.manifest == run.manifest else run
        log.runs = runs
        return log

    # derived values -----------------------------------------------------------------------------------------
    def per_run(self, run: Run, build: Callable[[Run], Any]) -> Any:
        """``build(run)``, rebuilt only when :meth:`repviz.store.Run.stamp` changes (a record or an embedding
        written), so an index of hundreds of runs costs a few ``stat`` calls per run while nothing changes."""
        stamp = run.stamp()
        with self._lock:
            hit = self._per_run.get(run.name)
        if hit is not None and hit[0] is run and hit[1] == stamp:
            return hit[2]
        value = build(run)
        with self._lock:
            self._per_run[run.name] = (run, stamp, value)
        return value

    def cached(self, name: str, build: Callable[[], Any], ttl: float = 2.0) -> Any:
        """``build()``, reused for ``ttl`` seconds (or :attr:`SCAN_SPACING` times its build time, if longer: the
        index of 10,000 runs takes a fraction of a second even when nothing changed) and dropped at every rescan
        (e.g. the runs index, which clients poll every few seconds)."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None and now - hit[0] < max(ttl, self.SCAN_SPACING * hit[2]):
            return hit[1]
        value = build()
        with self._lock:
            self._cache[name] = (now, value, time.monotonic() - now)
        return value
