"""One progress protocol for every long job (pipeline, meta-SNE, estimators), and its two consumers.

The protocol is a callable::

    progress(stage: str, done: int, total: int, message: str = "") -> None

``stage`` names the current piece of work ("embed", "vectors", "distances", "tsne: optimise", ...), ``done``
counts finished units out of ``total`` in that stage (absolute, not an increment; a new stage starts again from
0) and ``message`` is an optional short note (the current item, a KL value). Producers call it through
:func:`report`, which accepts ``None`` (no progress wanted).

Consumers:

- :class:`TerminalProgress` draws one redrawn line per stage with an ETA on stderr on an interactive terminal;
  where stderr is not one (a notebook cell, a log file, CI) it prints a plain line at most every few seconds
  instead, so a long step never runs silent and a log stays short.
- :class:`ProgressState` keeps the latest event as a JSON-able dict for a server to poll (the TensorBoard
  plugin's status route) or for a cluster client to forward; thread-safe, optionally forwarding each change
  (throttled) to a sink such as a queue or a status file.

:func:`fan_out` sends one producer's events to several consumers.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol, TextIO


class ProgressCallback(Protocol):
    """Receives ``(stage, done, total, message)``; see the module docstring."""

    def __call__(self, stage: str, done: int, total: int, message: str = "") -> None: ...


def report(progress: ProgressCallback | None, stage: str, done: int, total: int, message: str = "") -> None:
    """Call ``progress`` if there is one (producers call this, never the callback directly)."""
    if progress is not None:
        progress(stage, int(done), int(total), message)


def fan_out(*consumers: ProgressCallback | None) -> ProgressCallback | None:
    """One callback that forwards every event to each of ``consumers`` (``None`` entries are dropped)."""
    live = [c for c in consumers if c is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]

    def forward(stage: str, done: int, total: int, message: str = "") -> None:
        for consumer in live:
            consumer(stage, done, total, message)

    return forward


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def is_interactive(stream: TextIO | None = None) -> bool:
    """True when ``stream`` (default stderr) is a terminal and we are not in CI."""
    stream = stream or sys.stderr
    return not os.environ.get("CI") and hasattr(stream, "isatty") and stream.isatty()


def _eta(elapsed: float, done: int, total: int) -> float | None:
    return elapsed / done * (total - done) if done and total >= done else None


#: Seconds after its last event that a plain progress line stops repeating it (a stage left unfinished).
BEAT_FOR = 1800.0


class TerminalProgress:
    """The terminal consumer: ``label: stage done/total (pct%) elapsed ETA message``, redrawn in place on an
    interactive terminal, else printed as a plain line at most every ``every`` seconds: the first event after
    ``every`` seconds without a line, whichever stage it belongs to (short stages one after another print too;
    a stage that printed also prints its last event), and while a stage waits on one slow step, its last event
    again with the time elapsed (a background thread, until the stage ends, :meth:`close` or ``BEAT_FOR``
    seconds without an event).

    Parameters
    ----------
    label : str
        Shown before the stage (e.g. ``"repviz embed"``).
    enabled : bool or None, default=None
        None: redrawn on an interactive terminal (:func:`is_interactive`), plain lines elsewhere; True: redrawn
        wherever the stream is; False: nothing.
    stream : text stream, default=sys.stderr
    min_interval : float, default=0.2
        Seconds between redraws (the last event of a stage is always drawn).
    every : float, default=5.0
        Seconds between plain lines.
    """

    def __init__(self, label: str = "", *, enabled: bool | None = None, stream: TextIO | None = None,
                 min_interval: float = 0.2, every: float = 5.0):
        self.label = label
        self.stream = stream or sys.stderr
        self.redraw = is_interactive(self.stream) if enabled is None else enabled
        self.plain = enabled is None and not self.redraw
        self.enabled = self.redraw or self.plain
        self.min_interval, self.every = min_interval, every
        self.stage: str | None = None
        self.done = 0
        self._start = self._drawn = 0.0
        self._quiet_since = time.perf_counter()  # the last plain line (or the start)
        self._lock = threading.Lock()
        self._event: tuple | None = None  # (stage, done, total, message, when) of the last event of a stage
        self._beating: threading.Event | None = None  # set: the heartbeat thread ends

    def __call__(self, stage: str, done: int, total: int, message: str = "") -> None:
        now = time.perf_counter()
        if stage != self.stage or done < self.done:  # a new stage: end the previous line, restart the clock
            self.close()
            self.stage, self._start, self._drawn = stage, now, 0.0
        self.done = done
        if self.redraw and (now - self._drawn >= self.min_interval or done >= total):
            self._drawn = now
            width = shutil.get_terminal_size().columns - 1
            self.stream.write("\r" + self._line(stage, done, total, message, now)[:width].ljust(width))
            self.stream.flush()
        elif self.plain:
            with self._lock:
                self._event = (stage, done, total, message, now) if done < total else None
                if now - self._quiet_since >= self.every or (self._drawn and done >= total):
                    self._plain_line(stage, done, total, message, now)
                if self._event is not None and self._beating is None:
                    self._beating = threading.Event()
                    threading.Thread(target=self._beat, args=(self._beating,), name="repviz-progress",
                                     daemon=True).start()

    def _plain_line(self, stage: str, done: int, total: int, message: str, now: float) -> None:
        self._drawn = self._quiet_since = now
        self.stream.write(self._line(stage, done, total, message, now) + "\n")
        self.stream.flush()

    def _beat(self, stop: threading.Event) -> None:
        """The heartbeat: the last event again once ``every`` seconds pass without a line, while the stage runs."""
        while not stop.wait(self.every / 4):
            with self._lock:
                now = time.perf_counter()
                if self._event is None or now - self._event[4] > BEAT_FOR:  # the stage ended, or was left
                    if self._beating is stop:
                        self._beating = None
                    return
                if now - self._quiet_since >= self.every:
                    self._plain_line(*self._event[:4], now)

    def _line(self, stage: str, done: int, total: int, message: str, now: float) -> str:
        elapsed = now - self._start
        eta = _eta(elapsed, done, total)
        pct = 100.0 * done / total if total else 100.0
        return (f"{self.label}{': ' if self.label else ''}{stage} {done}/{total} ({pct:.0f}%) "
                f"elapsed {_clock(elapsed)} ETA {'?' if eta is None else _clock(eta)} {message}").rstrip()

    def close(self) -> None:
        """End the current line (nothing is printed when disabled, in plain lines, or when nothing was drawn)."""
        if self.redraw and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = 0.0
        with self._lock:
            if self._beating is not None:
                self._beating.set()
                self._beating = None
            self._event = None


class ProgressState:
    """The machine-readable consumer: the latest event of a job as a JSON-able dict, safe across threads.

    Parameters
    ----------
    sink : callable or None
        Called with :meth:`snapshot` after a change, at most every ``min_interval`` seconds and always when a
        stage completes (e.g. ``queue.put`` in a worker process, or a function writing a status file).
    min_interval : float, default=0.5
        Throttle for ``sink``.

    :meth:`snapshot` returns ``{"stage", "done", "total", "fraction", "message", "elapsed", "eta", "updated"}``
    (seconds; ``eta`` is None until something is done; ``updated`` is a Unix time).
    """

    def __init__(self, sink: Callable[[dict], None] | None = None, *, min_interval: float = 0.5):
        self.sink, self.min_interval = sink, min_interval
        self._lock = threading.Lock()
        self._start = time.perf_counter()
        self._stage_start = self._start
        self._sent = -math.inf  # the first event always reaches the sink (perf_counter may start near 0)
        self._event: tuple[str, int, int, str] = ("", 0, 0, "")
        self._updated = time.time()

    def __call__(self, stage: str, done: int, total: int, message: str = "") -> None:
        with self._lock:
            if stage != self._event[0] or done < self._event[1]:
                self._stage_start = time.perf_counter()
            self._event, self._updated = (stage, int(done), int(total), message), time.time()
        now = time.perf_counter()
        if self.sink is not None and (now - self._sent >= self.min_interval or done >= total):
            self._sent = now
            self.sink(self.snapshot())

    def snapshot(self) -> dict:
        """The latest event with its fraction, elapsed time and ETA."""
        with self._lock:
            stage, done, total, message = self._event
            now = time.perf_counter()
            return {"stage": stage, "done": done, "total": total,
                    "fraction": done / total if total else 0.0, "message": message,
                    "elapsed": round(now - self._start, 3),
                    "eta": _eta(now - self._stage_start, done, total), "updated": self._updated}
