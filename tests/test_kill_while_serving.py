"""The kill-while-serving loop: a child process trains a tiny Keras model with a batch-schedule
``ActivationLogger`` and prints each snapshot's step once its write has returned (acknowledged); meanwhile reader
threads in this process poll the plugin's WSGI routes and run ``repviz info`` / ``repviz embed`` on the log
directory. The child is SIGKILLed at a seeded random moment, then the script is started again into the same run
directory (the run it continues, or a new run beside it when it starts anew), several rounds. No acknowledged
snapshot may be lost (each one's activations read back
and match the checksum recorded at capture), no request may answer 5xx, no reader may raise, and ``repviz embed``
succeeds on what is left."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard_plugin_repviz import loader
from werkzeug import test as wtest
from werkzeug import wrappers

from repviz.chains import verified_activations
from repviz.cli import main
from repviz.store import open_logdir, run_name_of

BASE = "/data/plugin/repviz/"
ROUNDS = 3  # kills, each followed by a fit continuing the run
SEED = 0  # of the moments of the kills and of the readers' choices

# Trains until killed; prints "ack STEP RUN_DIR" once the snapshot of STEP is stored (its write has returned), RUN_DIR
# the run it records into (a fit that starts anew is recorded beside the killed run: repviz.capture.rerun).
_CHILD = """
import sys, time
import numpy as np, keras
from repviz.capture import ActivationLogger

class Pace(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.01)

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x, y = rng.normal(size=(256, 32)).astype("float32"), rng.integers(0, 3, 256)
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(24, activation="relu", name="hidden"),
                          keras.layers.Dense(3, name="out")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
logger = ActivationLogger(sys.argv[1], probe=rng.normal(size=(60, 32)).astype("float32"), batch_freq=3)
write = logger._write_snapshot  # wrapped on the instance: a subclass would not get the batch-schedule variant

def acknowledged(step, info, acts, preds):
    records = write(step, info, acts, preds)
    print("ack", step, logger.log_dir, flush=True)
    return records

logger._write_snapshot = acknowledged
model.fit(x, y, epochs=100000, batch_size=16, verbose=0, callbacks=[logger, Pace()])
"""


def _acknowledge(proc: subprocess.Popen, logdir: str, acked: list[tuple[str, int]]) -> None:
    """Collect the (run, step) snapshots the child acknowledges until its output ends."""
    for line in proc.stdout:
        if line.startswith("ack "):
            _, step, run_dir = line.rstrip("\n").split(" ", 2)
            acked.append((run_name_of(logdir, run_dir), int(step)))


def _lost(logdir: str, acked: list[tuple[str, int]]) -> list[tuple[str, str, int]]:
    """The acknowledged snapshots that a layer of their run does not list (each one's activations verified)."""
    log, lost = open_logdir(logdir), []
    for name, step in acked:
        run = log.run(name)
        for layer in run.layers:
            if step in run.steps(layer):
                verified_activations(run, layer, step)  # raises on a checksum mismatch
            else:
                lost.append((name, layer, step))
    return lost


def _serve(client, stop: threading.Event, seed: int, answers: list, errors: list) -> None:
    """Poll the index and read a random listed step through /knn and, once embedded, /coords."""
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            r = client.get(BASE + "runs")
            answers.append(("runs", r.status_code))
            runs = {run["name"]: run for run in (r.json or {}).get("runs", [])} if r.status_code == 200 else {}
            if "run" not in runs:
                time.sleep(0.05)
                continue
            run = runs["run"]
            layer = rng.choice(run["layers"])
            if layer["steps"]:
                step = rng.choice(layer["steps"])
                r = client.get(BASE + f"knn?run=run&layer={layer['name']}&step={step}&index=0&k=3")
                answers.append(("knn", r.status_code))
            for e in run["embeddings"]:
                if steps := e["steps"].get(layer["name"]):
                    r = client.get(BASE + f"coords?run=run&layer={layer['name']}&step={rng.choice(steps)}"
                                          f"&key={e['key']}")
                    answers.append(("coords", r.status_code))
        except Exception:  # a reader must never raise
            errors.append(traceback.format_exc())
        time.sleep(0.02)


def _command(argv: list[str], exits: list, errors: list) -> None:
    """Run one CLI command in this thread; record its exit status, or its traceback."""
    try:
        exits.append((argv[0], main(argv)))
    except BaseException:  # SystemExit included: main returns its status
        errors.append(traceback.format_exc())


@pytest.mark.slow
def test_no_acknowledged_snapshot_is_lost_when_killed_while_served(tmp_path):
    logdir, rng = str(tmp_path), random.Random(SEED)
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=logdir))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    stop, answers, errors, exits, acked = threading.Event(), [], [], [], []
    readers = [threading.Thread(target=_serve, args=(client, stop, seed, answers, errors)) for seed in range(2)]
    for t in readers:
        t.start()
    try:
        for _ in range(ROUNDS):
            proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path / "run")], stdout=subprocess.PIPE,
                                    text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
            before = len(acked)
            listener = threading.Thread(target=_acknowledge, args=(proc, logdir, acked))
            listener.start()
            try:
                deadline = time.monotonic() + 120
                while len(acked) < before + 2 and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert proc.poll() is None and len(acked) >= before + 2, "the training child did not record"
                commands = [threading.Thread(target=_command, args=(["info", logdir], exits, errors)),
                            threading.Thread(target=_command, args=(
                                ["embed", logdir, "--method", "pca", "--no-progress"], exits, errors))]
                for t in commands:
                    t.start()
                time.sleep(rng.uniform(0.2, 1.5))  # the kill lands at a random point of a snapshot's write
                os.kill(proc.pid, signal.SIGKILL)
                for t in commands:
                    t.join(timeout=120)
            finally:
                proc.kill()
                proc.wait()
                listener.join(timeout=10)
                proc.stdout.close()
            assert proc.returncode == -signal.SIGKILL
            assert not (lost := _lost(logdir, acked)), f"acknowledged snapshots lost: {lost[:5]}"
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=60)
        plugin.jobs.close()

    lost = _lost(logdir, acked)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged snapshots lost: {lost[:5]}"
    failed = Counter(f"{route} {status}" for route, status in answers if status >= 500)
    assert not failed, f"{sum(failed.values())} of {len(answers)} requests answered 5xx: {dict(failed)}"
    assert not errors, f"{len(errors)} reader tracebacks, the first:\n{errors[0]}"
    assert all(code == 0 for command, code in exits if command == "embed"), exits  # info: see the test below
    assert len(answers) >= 20, f"only {len(answers)} requests: the readers did not overlap the writes"
    assert main(["embed", logdir, "--method", "pca", "--no-progress"]) == 0
    answered = Counter(f"{route} {status}" for route, status in answers)
    print(f"acknowledged {len(acked)}, lost {len(lost)}, requests {dict(answered)}, commands {exits}")


class _Listing(list):
    """What os.scandir returns (an iterator that is its own context manager), over entries listed beforehand."""

    def __init__(self, entries: list) -> None:
        super().__init__(entries)
        self._rest = iter(entries)

    def __next__(self):
        return next(self._rest)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def close(self) -> None:
        pass


def test_info_while_a_temporary_file_is_renamed_away(tmp_path, small_logdir, monkeypatch, capsys):
    logdir = small_logdir(tmp_path)
    run_dir = Path(open_logdir(logdir).run("a").root)
    listed = os.scandir

    def renamed_after_listing(path):  # the writer's rename lands between the listing and the stat
        entries = list(listed(path))
        tmp = Path(path) / ".method.json.0123.tmp"
        if Path(path) == run_dir:
            tmp.write_text("{}")
            entries = list(listed(path))
            tmp.unlink()
        return _Listing(entries)

    monkeypatch.setattr(os, "scandir", renamed_after_listing)
    assert main(["info", str(logdir)]) == 0, capsys.readouterr().err
