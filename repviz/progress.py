"""A one-line progress meter with an ETA, for terminals only.

It prints to stderr, rewriting one line with ``\\r``, only when stderr is a terminal and no ``CI`` environment
variable is set: logs of CI jobs and of piped commands stay clean.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def is_interactive(stream: TextIO | None = None) -> bool:
    """True when ``stream`` (default stderr) is a terminal and we are not in CI."""
    stream = stream or sys.stderr
    return not os.environ.get("CI") and hasattr(stream, "isatty") and stream.isatty()


class Progress:
    """Counts ``done`` out of ``total`` units of work and shows rate-based ETA.

    Parameters
    ----------
    total : int
        Units of work to do (those already done, e.g. cached, are not counted).
    label : str
        Shown before the counter.
    enabled : bool or None, default=None
        None: only on an interactive terminal (:func:`is_interactive`).
    stream : text stream, default=sys.stderr
    min_interval : float, default=0.2
        Seconds between redraws.
    """

    def __init__(self, total: int, label: str = "", *, enabled: bool | None = None,
                 stream: TextIO | None = None, min_interval: float = 0.2):
        self.total, self.label = int(total), label
        self.stream = stream or sys.stderr
        self.enabled = is_interactive(self.stream) if enabled is None else enabled
        self.min_interval = min_interval
        self.done = 0
        self._start = time.perf_counter()
        self._drawn = 0.0

    def update(self, n: int = 1, note: str = "") -> None:
        """Add ``n`` finished units; redraw at most every ``min_interval`` seconds (and at the end)."""
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._drawn >= self.min_interval or self.done >= self.total):
            self._drawn = now
            elapsed = now - self._start
            eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
            pct = 100.0 * self.done / self.total if self.total else 100.0
            eta_txt = _clock(eta) if self.done else "?"
            line = (f"{self.label} {self.done}/{self.total} ({pct:.0f}%) elapsed {_clock(elapsed)} "
                    f"ETA {eta_txt} {note}")
            width = shutil.get_terminal_size().columns - 1
            self.stream.write("\r" + line[:width].ljust(width))
            self.stream.flush()

    def close(self) -> None:
        """End the progress line (nothing is printed when disabled)."""
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
