"""The progress protocol and its two consumers."""

import io
import os
import threading

from repviz.progress import ProgressState, TerminalProgress, fan_out, report


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_terminal_line_redraws_on_a_terminal_only():
    shown, hidden = _Tty(), io.StringIO()
    for stream in (shown, hidden):
        bar = TerminalProgress("repviz embed", stream=stream, min_interval=0)
        for done in range(5):
            bar("embed", done, 4)
        bar.close()
    assert hidden.getvalue() == ""  # a stage shorter than `every` prints nothing off a terminal
    if not os.environ.get("CI"):
        assert "repviz embed: embed 4/4 (100%)" in shown.getvalue() and "ETA 0:00" in shown.getvalue()


def test_terminal_line_starts_a_new_line_per_stage():
    stream = _Tty()
    bar = TerminalProgress(stream=stream, enabled=True, min_interval=0)
    bar("vectors", 2, 2)
    bar("distances", 1, 3, "block 1")
    bar.close()
    lines = stream.getvalue().split("\n")
    assert "vectors 2/2" in lines[0] and "distances 1/3" in lines[1] and "block 1" in lines[1]


def test_off_a_terminal_a_long_stage_prints_a_plain_line_every_few_seconds(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("repviz.progress.time.perf_counter", lambda: clock[0])
    monkeypatch.delenv("CI", raising=False)
    stream = io.StringIO()
    bar = TerminalProgress("repviz place", stream=stream, every=5)
    bar("quick", 0, 1)
    bar("quick", 1, 1)  # done before 5 s: nothing
    for second in range(13):  # 12 steps, one a second
        clock[0] = 100.0 + second
        bar("place", second, 12, f"layer {second}")
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines == ["repviz place: place 5/12 (42%) elapsed 0:05 ETA 0:07 layer 5",
                     "repviz place: place 10/12 (83%) elapsed 0:10 ETA 0:02 layer 10",
                     "repviz place: place 12/12 (100%) elapsed 0:12 ETA 0:00 layer 12"]
    assert "\r" not in stream.getvalue()


def test_off_a_terminal_short_stages_one_after_another_print_too(monkeypatch):
    """Before: each stage under 5 s printed nothing, so a command of several (meta-SNE's vectors, then its
    distances) stayed silent for 11.7 s in a piped demo. Now the first event after 5 s without a line prints."""
    clock = [0.0]
    monkeypatch.setattr("repviz.progress.time.perf_counter", lambda: clock[0])
    monkeypatch.delenv("CI", raising=False)
    stream = io.StringIO()
    bar = TerminalProgress("meta-SNE", stream=stream, every=5)
    for second, (stage, done) in enumerate([("vectors", 0), ("vectors", 2), ("vectors", 4), ("distances", 0),
                                            ("distances", 1), ("distances", 2), ("distances", 3)]):
        clock[0] = 1.5 * second
        bar(stage, done, 4 if stage == "vectors" else 3)
    bar.close()
    lines = [line.split(" elapsed")[0] for line in stream.getvalue().splitlines()]
    assert lines == ["meta-SNE: distances 1/3 (33%)", "meta-SNE: distances 3/3 (100%)"]  # at 6 s, then its end


def test_off_a_terminal_a_slow_step_repeats_the_last_event(monkeypatch):
    """Before: `repviz embed --method umap` said nothing for its first 11 s, one chain's import and compile with
    no event. Now the last event comes again every few seconds while its stage runs, and stops with the stage."""
    import time

    monkeypatch.delenv("CI", raising=False)
    stream = io.StringIO()
    bar = TerminalProgress("repviz embed", stream=stream, every=0.2)
    bar("embed", 0, 3, "first chain")
    time.sleep(0.75)  # no event: the heartbeat speaks
    beats = stream.getvalue().splitlines()
    assert len(beats) >= 2 and all(b.startswith("repviz embed: embed 0/3 (0%)") and b.endswith("first chain")
                                   for b in beats), beats
    bar("embed", 3, 3)  # the stage ends: its last event, then nothing more
    time.sleep(0.5)
    after = stream.getvalue().splitlines()[len(beats):]
    assert [line.split(" elapsed")[0] for line in after] == ["repviz embed: embed 3/3 (100%)"]
    bar.close()


def test_state_snapshot_is_machine_readable_and_throttles_its_sink():
    sent = []
    state = ProgressState(sent.append, min_interval=3600)
    assert state.snapshot()["stage"] == "" and state.snapshot()["eta"] is None
    state("distances", 1, 4, "block 1")
    state("distances", 2, 4)        # throttled: within min_interval and not complete
    state("distances", 4, 4)        # a completed stage always reaches the sink
    snap = state.snapshot()
    assert {k: snap[k] for k in ("stage", "done", "total", "fraction", "message")} == {
        "stage": "distances", "done": 4, "total": 4, "fraction": 1.0, "message": ""}
    assert snap["eta"] == 0 and snap["elapsed"] >= 0
    assert [s["done"] for s in sent] == [1, 4]


def test_state_is_safe_across_threads():
    state = ProgressState()
    threads = [threading.Thread(target=lambda: [state("embed", i, 1000) for i in range(1001)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state.snapshot()["done"] == 1000


def test_report_and_fan_out():
    got_a, got_b = [], []
    report(None, "x", 1, 2)  # no consumer: nothing happens
    both = fan_out(lambda *e: got_a.append(e), None, lambda *e: got_b.append(e))
    report(both, "x", 1, 2, "note")
    assert got_a == got_b == [("x", 1, 2, "note")]
    assert fan_out(None, None) is None
