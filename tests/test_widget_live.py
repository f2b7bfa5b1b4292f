"""The notebook widget following its log directory while the kernel is busy (no browser, no kernel): what lands
is pushed to the page, with the choice moved on to it, by the widget's own follower thread."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("anywidget")
from tensorboard_plugin_repviz import live

import repviz

N = 30


class Sent:
    """The custom messages a widget sends (what ``push`` sends), captured instead of its comm."""

    def __init__(self, w):
        self.messages = []
        w.send = lambda content, buffers=None: self.messages.append((content, buffers))

    def pushed(self, route: str) -> list[dict]:
        return [e["params"] for content, _ in self.messages if content["type"] == "push"
                for e in content["entries"] if e["route"] == route]


def _snapshot(writer, run, step: int, rng, layers=("dense",)) -> None:
    """``layers`` at ``step`` and their stored embeddings (key ``pca-live``), as a fit with embed= writes them."""
    for layer in layers:
        writer.write_activation(layer, step, rng.normal(size=(N, 4)).astype(np.float32))
        run.embeddings.write("pca-live", layer, step, rng.normal(size=(N, 2)).astype(np.float32),
                             {"method": "pca", "scores": {}})


def _begin(root, new_run, layers=("dense",)):
    writer = new_run(root / "live", layers={layer: (N, 4) for layer in layers})
    writer.write_probe(np.arange(N), np.arange(N) % 3)
    run = repviz.open_logdir(root).run("live")
    run.embeddings.write_method("pca-live", {"method": "pca", "params": {}, "align": "snapshots", "default": True})
    return writer, run


def _until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_new_snapshots_are_pushed_and_the_widget_moves_to_the_newest(tmp_path, new_run, monkeypatch):
    monkeypatch.setattr(live, "INTERVAL", 0.1)
    rng = np.random.default_rng(0)
    writer, run = _begin(tmp_path, new_run)
    for step in (0, 1):
        _snapshot(writer, run, step, rng)
    w = repviz.show(tmp_path, run="live")
    sent = Sent(w)
    try:
        assert (w.method, w.step) == ("pca-live", 1)
        # The page asks for step 1 itself (the kernel idle): what it holds is not pushed again.
        w._answer({"type": "request", "id": 1, "route": "coords",
                   "params": {"run": "live", "layer": "dense", "step": "1", "key": "pca-live"}})
        time.sleep(0.5)
        assert [m["type"] for m, _ in sent.messages] == ["response"]  # nothing changed: nothing pushed
        _snapshot(writer, run, 2, rng)
        _until(lambda: sent.pushed("coords"), "the new snapshot pushed")
        assert [p["step"] for p in sent.pushed("coords")] == [0, 2]
        assert w.step == 2  # the widget showed the last snapshot: it moves to the new one
        # A widget moved back by the user stays where it is when the next snapshot lands.
        w.step = 0
        _snapshot(writer, run, 3, rng)
        _until(lambda: any(p["step"] == 3 for p in sent.pushed("coords")), "the next snapshot pushed")
        assert w.step == 0
    finally:
        w.close()


def test_a_widget_shown_before_the_first_run_shows_it_when_it_lands(tmp_path, new_run, monkeypatch):
    monkeypatch.setattr(live, "INTERVAL", 0.1)
    w = repviz.show(tmp_path / "logs", layer="dense")  # not the first layer: kept for the first run
    sent = Sent(w)
    try:
        assert w.run is None
        rng = np.random.default_rng(0)
        writer, run = _begin(tmp_path / "logs", new_run, layers=("first", "dense"))
        _snapshot(writer, run, 0, rng, layers=("first",))  # "dense" not embedded yet: the first layer meanwhile
        _until(lambda: sent.pushed("coords"), "the first run pushed")
        assert (w.run, w.layer, w.method, w.step) == ("live", "first", "pca-live", 0)
        assert sent.pushed("labels") == [{"run": "live"}]
        _snapshot(writer, run, 0, rng, layers=("dense",))
        _until(lambda: w.layer == "dense", "the layer asked for, once embedded")
        _until(lambda: {"run": "live", "layer": "dense", "step": 0, "key": "pca-live"} in sent.pushed("coords"),
               "its points pushed")
    finally:
        w.close()


def test_the_follower_ends_with_its_widget(tmp_path, new_run, monkeypatch):
    monkeypatch.setattr(live, "INTERVAL", 0.05)
    w = repviz.show(tmp_path)
    followers = [t for t in live.threading.enumerate() if isinstance(t, live.Follower) and t._widget() is w]
    assert len(followers) == 1
    w.close()
    followers[0].join(timeout=5)
    assert not followers[0].is_alive()


def test_before_each_cell_the_widget_catches_up_at_once(tmp_path, new_run, monkeypatch):
    """What a cell after ``fit`` reads: the traits as the training left them, without waiting for the thread (here
    it never looks) or the listing's cache."""
    monkeypatch.setattr(live, "INTERVAL", 3600)
    w = repviz.show(tmp_path / "logs")
    sent = Sent(w)
    try:
        writer, run = _begin(tmp_path / "logs", new_run)
        _snapshot(writer, run, 0, np.random.default_rng(0))
        live._before_cell()  # what IPython's pre_run_cell runs
        assert (w.run, w.layer, w.method, w.step) == ("live", "dense", "pca-live", 0)
        assert sent.pushed("coords") == [{"run": "live", "layer": "dense", "step": 0, "key": "pca-live"}]
    finally:
        w.close()


@pytest.fixture
def moved_during_a_cell(tmp_path, new_run, monkeypatch):
    """``(widget, snapshot)``: a widget on a run of step 0 that the follower moved to step 1 while a cell ran
    (the thread's look, no page), that cell now ended; ``snapshot(step)`` stores another snapshot."""
    monkeypatch.setattr(live, "INTERVAL", 3600)
    rng = np.random.default_rng(0)
    writer, run = _begin(tmp_path, new_run)
    _snapshot(writer, run, 0, rng)
    w = repviz.show(tmp_path, run="live")
    Sent(w)
    live._before_cell()  # the fit cell starts
    _snapshot(writer, run, 1, rng)
    next(f for f in live._LIVE if f._widget() is w).look()  # the thread's look during the fit
    assert w.step == 1
    yield w, lambda step: _snapshot(writer, run, step, rng)
    live._after_cell()
    w.close()


def test_a_step_the_page_said_during_the_cell_does_not_undo_the_followers_move(moved_during_a_cell):
    """The page's messages sent while a cell ran reach the kernel after it, older than the follower's moves: a
    step the page chose for itself before them must not be what ``w.step`` reads in the next cell."""
    w, _ = moved_during_a_cell
    live._after_cell()
    w.set_state({"step": 0})  # the page's message, sent before the move, read only now
    live._before_cell()  # the next cell
    assert w.step == 1
    live._after_cell()
    w.set_state({"step": 0})  # a move in the page while the kernel is idle is the user's: kept
    live._before_cell()
    assert w.step == 0


def test_the_look_before_a_cell_moves_on_past_the_followers_last_move(moved_during_a_cell):
    """A snapshot that lands after the thread's last look during a cell (the last embedding, waited for by
    ``wait_embeddings``) is shown by the look before the next cell, not undone by the step settled there."""
    w, snapshot = moved_during_a_cell
    snapshot(2)  # lands after that look
    live._after_cell()
    live._before_cell()  # the next cell
    assert w.step == 2


def test_a_look_whose_push_failed_pushes_again_at_the_next(tmp_path, new_run, monkeypatch):
    """A push that raises (a snapshot half written when its answers were read) leaves that index unseen: the next
    look pushes it whole, instead of being told that nothing changed since."""
    monkeypatch.setattr(live, "INTERVAL", 3600)
    w = repviz.show(tmp_path / "logs")
    sent = Sent(w)
    push, failed = w.push, []

    def failing_once():
        if not failed:
            failed.append(True)
            raise FileNotFoundError("an embedding half written")
        push()

    monkeypatch.setattr(w, "push", failing_once)
    try:
        writer, run = _begin(tmp_path / "logs", new_run)
        _snapshot(writer, run, 0, np.random.default_rng(0))
        live._before_cell()
        assert failed and sent.pushed("coords") == []
        live._before_cell()
        assert sent.pushed("coords") == [{"run": "live", "layer": "dense", "step": 0, "key": "pca-live"}]
    finally:
        live._after_cell()
        w.close()
