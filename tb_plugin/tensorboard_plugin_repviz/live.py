"""A notebook widget that follows its log directory while the kernel is busy (``model.fit`` in the same kernel).

While a cell runs, ipykernel reads no message from the page, so the page's own requests (its poll of the run index,
the points of a new snapshot) wait for the cell to end. A :class:`Follower` thread asks the plugin for the run index
itself, on a fresh listing (a cheap 304 while nothing changed), and when a snapshot or an embedding lands sends the
page the new index with the answers the shown choice needs (``widget.push``) and only then the choice (run, layer,
embedding, the newest step when the page was on the last one): the page finds in its cache everything it then asks
for, and redraws without the kernel. Sending from a thread is what ipykernel allows during a cell; nothing here
blocks training. Before each cell runs, every follower also looks once more, so a cell after ``fit`` reads the
widget's traits (``w.run``, ``w.step``) as the training left them, not as of the thread's last look.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

from .answers import embedding_steps, run_named
from .plugin import RepvizPlugin, call

#: Seconds between two looks at the run index (each a 304 while nothing changed), and at least this many times the
#: last listing's duration (a log directory of thousands of runs is not walked without pause).
INTERVAL = 1.0
SPACING = 20.0
_LIVE: set[Follower] = set()  # the running followers, looked through before each cell
_hook_lock = threading.Lock()
_hooked = False
_busy = threading.Event()  # a cell is running: the page's messages wait until it ends


class Follower(threading.Thread):
    """Push ``widget`` what its log directory gains (read through ``plugin``, the widget's), every :data:`INTERVAL`
    seconds, until the widget is closed or gone. ``choose(index, logdir, run, layer, method, step)`` is the
    widget's rule for what the page shows (a dict with those keys; ``ValueError`` when nothing can be shown yet)."""

    def __init__(self, widget, plugin: RepvizPlugin, choose: Callable[..., dict], interval: float = INTERVAL,
                 wanted: dict | None = None):
        super().__init__(name="repviz-widget-follow", daemon=True)
        self._widget = weakref.ref(widget)
        self._plugin, self._choose, self._interval = plugin, choose, interval
        # asked of a widget shown before its first run: tried at each look until the run has an embedding of them
        self._wanted = {k: v for k, v in (wanted or {}).items() if v is not None}
        first = call(plugin, "runs")  # what the page is shown first
        self._tag = first.headers.get("ETag")
        self._head = _last_step(first.json(), widget)
        self._looking = threading.Lock()
        self._scan_seconds = 0.0
        self._moved_to: int | None = None  # the step this follower last moved the widget to while a cell ran
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(max(self._interval, SPACING * self._scan_seconds)) and self.look():
                pass
        finally:
            _LIVE.discard(self)

    def look(self) -> bool:
        """One look on a listing of the log directory made now; False once the widget is closed or gone."""
        widget = self._widget()
        if widget is None or widget.comm is None:
            return False
        try:
            start = time.monotonic()
            self._plugin.catalog.scan()
            self._scan_seconds = time.monotonic() - start
            self.step(widget)
        except Exception:  # a half-written snapshot, a widget closing: the next look sees it whole
            pass
        return True

    def settle(self) -> None:
        """Before a cell: the step this follower moved the widget to while the kernel was busy is the one shown.
        What the page said meanwhile reaches the kernel only now, and is older than that move (such as the step
        the page chose for itself before the first move); without this, ``w.step`` would read it."""
        widget = self._widget()
        with self._looking:
            moved, self._moved_to = self._moved_to, None
            if widget is not None and widget.comm is not None and moved is not None and widget.step != moved:
                widget.step = moved

    def step(self, widget) -> bool:
        """Look once; push and return True when the run index changed since the last look."""
        with self._looking:  # the thread and the hook before a cell, one at a time
            return self._step(widget)

    def _step(self, widget) -> bool:
        headers = {"If-None-Match": self._tag} if self._tag else {}
        reply = call(self._plugin, "runs", headers=headers)
        if reply.status != 200:
            return False
        index = reply.json()
        at_head = widget.step is None or self._head is None or widget.step >= self._head
        current = {name: getattr(widget, name) for name in ("run", "layer", "method", "step")}
        asked = {**current, "step": None if at_head else widget.step}
        chosen = {}
        for ask in ([{**asked, **self._wanted}] if self._wanted else []) + [asked]:
            try:
                chosen = self._choose(index, widget.logdir, **ask)
            except ValueError:  # no run, or nothing embedded yet (or not what was wanted): the index alone
                continue
            if ask is not asked and chosen["method"] is None:  # not embedded yet: the page could not show it
                continue
            if ask is not asked:
                self._wanted = {}
            break
        with widget.hold_sync():  # the choice reaches the page after the answers it needs
            for name, value in chosen.items():
                if value is not None and value != current[name]:
                    setattr(widget, name, value)
                    if name == "step" and _busy.is_set():
                        self._moved_to = value
            widget.push()
        # only now: a look that raised (a snapshot half written when its answers were read) is made again whole at
        # the next, instead of getting a 304 for an index the page never received
        self._tag = reply.headers.get("ETag")
        self._head = _last_step(index, widget)
        return True


def _last_step(index: dict, widget) -> int | None:
    """The newest stored step of the widget's choice in ``index`` (None when it has none)."""
    run = run_named(index, widget.run)
    steps = embedding_steps(run, widget.layer, widget.method) if run and widget.layer and widget.method else []
    return steps[-1] if steps else None


def _before_cell(*_) -> None:
    for follower in list(_LIVE):
        follower.settle()  # first: a move of this look is newer than what settle restores
        follower.look()
    _busy.set()


def _after_cell(*_) -> None:
    _busy.clear()


def follow(widget, plugin: RepvizPlugin, choose: Callable[..., dict], **wanted) -> Follower:
    """Start a :class:`Follower` for ``widget`` (and, once per process, the look before each IPython cell);
    ``wanted``: the layer, method and step shown first once the first run lands, when it has them."""
    global _hooked
    with _hook_lock:
        if not _hooked:
            from IPython import get_ipython

            shell = get_ipython()
            if shell is not None:
                shell.events.register("pre_run_cell", _before_cell)
                shell.events.register("post_run_cell", _after_cell)
            _hooked = True
    follower = Follower(widget, plugin, choose, wanted=wanted)
    _LIVE.add(follower)
    follower.start()
    return follower
