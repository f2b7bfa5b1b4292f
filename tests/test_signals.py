"""SIGTERM (``kill``, ``timeout``, a batch scheduler) stops every command as Ctrl-C does: one line, exit status 143,
no temporary file left, what was stored before intact.

Each command runs in a subprocess whose array writes are gated: the Nth write of a process puts half its bytes
into the temporary file, prints one line and waits, so the signal lands in the middle of a write (the worst place)
once the command has done real work; the test waits for that line, never for a guessed time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from repviz.cli import main
from repviz.store import open_logdir

_GATED = """
import os, signal, sys, time
import numpy as np
from repviz.cli import main
from repviz.follow import main as follow

_write, _count = np.lib.format.write_array, [0]

def gated(f, array, *args, **kwargs):
    _count[0] += 1
    if _count[0] == int(os.environ["GATE_AT"]):
        f.write(np.ascontiguousarray(array).tobytes()[: array.nbytes // 2])  # half a file, in its temporary
        f.flush()
        # one write: the workers share the pipe, and print's text and newline could interleave with another's
        os.write(2, f"gate: holding write {_count[0]}\\n".encode())
        time.sleep(120)
    return _write(f, array, *args, **kwargs)

np.lib.format.write_array = gated  # in spawned workers too: they import this script
if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (see test_pipeline)
    sys.exit({"repviz": main, "follow": follow}[sys.argv[1]](sys.argv[2:]))
"""


def _stop(tmp_path: Path, args: list[str], gate_at: int, sig: int = signal.SIGTERM, entry: str = "repviz",
          held: int = 1) -> tuple[int, list[str]]:
    """Run ``repviz ARGS`` (or the live embedder, ``python -m repviz.follow ARGS``) with the Nth array write of each
    process held, send ``sig`` once ``held`` processes hold one; (exit status, stderr lines other than the
    gate's)."""
    script = tmp_path / "gated.py"
    script.write_text(_GATED)
    proc = subprocess.Popen([sys.executable, "-W", "default", str(script), entry, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GATE_AT": str(gate_at)})
    lines, holding = [], 0
    while holding < held:
        line = proc.stderr.readline()
        assert line, f"the command ended before its write {gate_at}: {''.join(lines)}{proc.communicate()}"
        holding += line.startswith("gate:")
        lines.append(line)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, [x for x in lines + err.splitlines() if x.strip() and not x.startswith("gate:")]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp")]


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_stops_embed(tmp_path, cluster_run, jobs):
    """Non-regression: in one process, SIGTERM was reported as one representation's failure ("skipped ...
    _Terminated") and the command went on to embed the rest, then exited 1."""
    logs = tmp_path / "logs"
    cluster_run(logs / "r1", steps=range(8))
    cluster_run(tmp_path / "fresh" / "r1", steps=range(8))
    rc, err = _stop(tmp_path, ["embed", str(logs), "--method", "pca", "--jobs", str(jobs), "--no-progress"], 5,
                    held=jobs)  # each worker in the middle of a write
    assert (rc, err) == (143, ["repviz embed: terminated"])
    assert not _temporaries(logs)
    embed = open_logdir(logs).run("r1").embeddings
    key = embed.key("pca")
    stored = [(layer, s) for layer in ("a", "b") for s in embed.steps(key, layer)]
    assert 2 <= len(stored) < 16, stored
    main(["embed", str(tmp_path / "fresh"), "--method", "pca"])
    fresh = open_logdir(tmp_path / "fresh").run("r1")
    for layer, s in stored:  # what was stored before the signal is whole
        np.testing.assert_allclose(embed.read(key, layer, s), fresh.embedding(layer, s, "pca"), atol=1e-5)


def test_sigterm_stops_meta_and_keeps_the_earlier_map(tmp_path, cluster_run):
    logs = tmp_path / "logs"
    cluster_run(logs / "r1")
    assert main(["meta", str(logs), "--no-robustness", "--no-progress", "--name", "first"]) == 0
    before = _files(logs / "plugins")
    rc, err = _stop(tmp_path, ["meta", str(logs), "--transform", "cka", "--no-progress", "--name", "second"], 3)
    assert (rc, err) == (143, ["repviz meta: terminated"])
    assert not _temporaries(logs)
    after = _files(logs / "plugins")
    assert {k: v for k, v in after.items() if k in before} == before
    assert "first" in open_logdir(logs).artifact_names()


def test_sigterm_stops_similarity_and_keeps_the_earlier_cache(tmp_path, cluster_run):
    logs = tmp_path / "logs"
    cluster_run(logs / "r1")
    assert main(["similarity", str(logs), "--runs", "r1", "--no-progress"]) == 0
    before = _files(logs / "plugins")
    rc, err = _stop(tmp_path, ["similarity", str(logs), "--runs", "r1", "--measure", "procrustes", "--no-progress"],
                    1)
    assert (rc, err) == (143, ["repviz similarity: terminated"])
    assert not _temporaries(logs)
    assert _files(logs / "plugins") == before


def test_sigterm_stops_place_and_keeps_what_it_placed(tmp_path, cluster_run):
    logs = tmp_path / "logs"
    cluster_run(logs / "r1")
    cluster_run(logs / "r2", seed=1)
    assert main(["embed", str(logs), "--method", "pca", "--runs", "r1"]) == 0
    rc, err = _stop(tmp_path, ["place", str(logs), "--run", "r2", "--into", "r1", "--method", "pca"], 3)
    assert (rc, err) == (143, ["repviz place: terminated"])
    assert not _temporaries(logs)
    placed = sorted((logs / "r2").rglob("placed/**/*.npy"))
    assert placed and all(np.load(p, allow_pickle=False).shape == (120, 2) for p in placed)


def test_sigterm_stops_the_live_embedder(tmp_path, cluster_run):
    """The background process of ``ActivationLogger(embed=...)``: SIGTERM (the training job's scheduler ending it)
    unwinds its write instead of leaving a temporary file."""
    logs = tmp_path / "logs"
    cluster_run(logs / "r1")
    rc, err = _stop(tmp_path, [str(logs), "r1", "pca"], 5, entry="follow")
    assert (rc, err) == (143, ["repviz follow: terminated"])
    assert not _temporaries(logs)


@pytest.mark.parametrize("command", ["meta", "similarity"])
@pytest.mark.parametrize("stop, status, said", [(KeyboardInterrupt, 130, "interrupted"),
                                                ("Terminated", 143, "terminated")])
def test_a_stopped_command_ends_its_progress_line_first(tmp_path, capsys, monkeypatch, small_logdir, command, stop,
                                                        status, said):
    """Non-regression: on a terminal, Ctrl-C during `repviz meta` or `similarity` printed "interrupted" at the end
    of the progress line (the bar was closed only after a normal end)."""
    from repviz import progress, workers
    from repviz.meta import MetaSNE
    from repviz.similarity import matrix

    stop = workers.Terminated if stop == "Terminated" else stop
    logs = small_logdir(tmp_path / "logs")
    monkeypatch.setattr(progress, "is_interactive", lambda stream=None: True)

    def stopped(*args, **kwargs):  # MetaSNE.fit(self, ...) holds the bar; similarity's _matrix is handed it
        bar = next(a for a in (*args, *kwargs.values(), getattr(args[0], "progress", None))
                   if isinstance(a, progress.TerminalProgress))
        bar("vectors", 1, 3)
        raise stop

    monkeypatch.setattr(MetaSNE, "fit", stopped)
    monkeypatch.setattr(matrix, "_matrix", stopped)
    args = ["--runs", "a"] if command == "similarity" else []
    assert main([command, str(logs), *args]) == status
    err = capsys.readouterr().err
    assert err.startswith(f"\rrepviz {command}: vectors 1/3") and err.endswith(f"\nrepviz {command}: {said}\n")


def test_a_terminated_dropped_by_a_callback_from_c_is_raised_again(capfd):
    """Non-regression: SIGTERM while numba compiled (its compiler calls Python back through ctypes, where an
    exception cannot propagate) printed "Exception ignored on calling ctypes callback function ... Terminated",
    and the process went on computing until it was killed, leaving its temporary file."""
    import ctypes
    import time

    from repviz.workers import Terminated, sigterm_unwinds

    def compile_step() -> None:  # what the compiler's callback does when the signal arrives in it
        signal.raise_signal(signal.SIGTERM)

    callback = ctypes.CFUNCTYPE(None)(compile_step)
    with pytest.raises(Terminated), sigterm_unwinds():
        callback()  # the Terminated raised in here is dropped by ctypes...
        time.sleep(5)  # ...and raised again here
    assert "Exception ignored" not in capfd.readouterr().err
