"""A notebook widget that follows its log directory while the kernel is busy (``model.fit`` in the same kernel).

While a cell runs, ipykernel reads no message from the page, so the page's own requests (its poll of the run index,
the points of a new snapshot) wait for the cell to end. A :class:`Follower` thread asks the plugin for the run index
itself (a cheap 304 while nothing changed) and, when a snapshot or an embedding lands, sends the page the new index
with the answers the shown choice needs (``widget.push``) and only then the choice (run, layer, embedding, the newest
step when the page was on the last one): the page finds in its cache everything it then asks for, and redraws
without the kernel. Sending from a thread is what ipykernel allows during a cell; nothing here blocks training.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from .answers import embedding_steps, run_named
from .plugin import RepvizPlugin, call

#: Seconds between two looks at the run index (each a 304 while nothing changed).
INTERVAL = 1.0


class Follower(threading.Thread):
    """Push ``widget`` what its log directory gains (read through ``plugin``, the widget's), every :data:`INTERVAL`
    seconds, until the widget is closed or gone. ``choose(index, logdir, run, layer, method, step)`` is the
    widget's rule for what the page shows (a dict with those keys; ``ValueError`` when nothing can be shown yet)."""

    def __init__(self, widget, plugin: RepvizPlugin, choose: Callable[..., dict], interval: float = INTERVAL):
        super().__init__(name="repviz-widget-follow", daemon=True)
        self._widget = weakref.ref(widget)
        self._plugin, self._choose, self._interval = plugin, choose, interval
        first = call(plugin, "runs")  # what the page is shown first
        self._tag = first.headers.get("ETag")
        self._head = _last_step(first.json(), widget)
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self._interval):
            widget = self._widget()
            if widget is None or widget.comm is None:
                return
            try:
                self.step(widget)
            except Exception:  # a half-written snapshot, a widget closing: the next look sees it whole
                pass
            widget = None

    def step(self, widget) -> bool:
        """Look once; push and return True when the run index changed since the last look."""
        headers = {"If-None-Match": self._tag} if self._tag else {}
        reply = call(self._plugin, "runs", headers=headers)
        if reply.status != 200:
            return False
        self._tag = reply.headers.get("ETag")
        index = reply.json()
        at_head = widget.step is None or self._head is None or widget.step >= self._head
        current = {name: getattr(widget, name) for name in ("run", "layer", "method", "step")}
        try:
            chosen = self._choose(index, widget.logdir, **{**current, "step": None if at_head else widget.step})
        except ValueError:  # no run, or nothing embedded yet: the index alone
            chosen = {}
        with widget.hold_sync():  # the choice reaches the page after the answers it needs
            for name, value in chosen.items():
                if value is not None and value != current[name]:
                    setattr(widget, name, value)
            widget.push()
        self._head = _last_step(index, widget)
        return True


def _last_step(index: dict, widget) -> int | None:
    """The newest stored step of the widget's choice in ``index`` (None when it has none)."""
    run = run_named(index, widget.run)
    steps = embedding_steps(run, widget.layer, widget.method) if run and widget.layer and widget.method else []
    return steps[-1] if steps else None


def follow(widget, plugin: RepvizPlugin, choose: Callable[..., dict]) -> Follower:
    """Start a :class:`Follower` for ``widget``."""
    follower = Follower(widget, plugin, choose)
    follower.start()
    return follower
