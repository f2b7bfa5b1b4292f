"""The plugin's readers against a run being written: while an appender thread stores snapshots through the store's
run writer (activations, predictions and embeddings, as a fit with live embedding does), reader threads poll the
index and read every step it lists through the WSGI routes, under a forced thread-switch interval. Every request
must see one consistent state of the run: no 5xx (a dictionary changing size while a request iterates it) and no
404 for a step the index had listed (a half-refreshed record index)."""

from __future__ import annotations

import random
import sys
import threading
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard_plugin_repviz import loader
from werkzeug import test as wtest
from werkzeug import wrappers

from repviz.store import open_logdir

BASE = "/data/plugin/repviz/"
N = 24  # probe points
KEY = "pca-race"
HISTORY = 100  # snapshots stored before the readers start: each re-read of the record log parses them all
STEPS = 60  # snapshots the appender writes after them
READERS = 4
PACE = 0.05  # seconds between snapshots: the index (cached 2 s) lists new steps while the appender still writes


def _append(writer, run, done: threading.Event) -> None:
    """STEPS more steps of run "r": an activation of two layers, a prediction, then an embedding of each."""
    rng = np.random.default_rng(1)
    try:
        for step in range(HISTORY, HISTORY + STEPS):
            for layer, width in (("a", 6), ("b", 3)):
                writer.write_activation(layer, step, rng.normal(size=(N, width)).astype(np.float32), epoch=step)
            writer.write_prediction(step, rng.random((N, 3)).astype(np.float32))
            for layer in ("a", "b"):
                run.embeddings.write(KEY, layer, step, rng.normal(size=(N, 2)), {"method": "pca"})
            done.wait(PACE)
    finally:
        done.set()


def _read(client, done: threading.Event, seed: int, answers: list, bodies: list) -> None:
    """Poll the index; read what it lists (a random listed step of each route); record (route, listed, status)."""
    rng = random.Random(seed)
    while not done.is_set():
        r = client.get(BASE + "runs")
        answers.append(("runs", True, r.status_code))
        runs = {run["name"]: run for run in (r.json or {}).get("runs", [])} if r.status_code == 200 else {}
        if "r" not in runs:
            continue
        run = runs["r"]
        layer = rng.choice(run["layers"])
        steps = layer["steps"]
        embedded = next((e["steps"].get(layer["name"], []) for e in run["embeddings"] if e["key"] == KEY), [])
        predicted = run["prediction_steps"]
        queries = [("knn", steps, "run=r&layer={layer}&step={step}&index=0&k=3"),
                   ("info", steps, "run=r&layer={layer}&step={step}"),
                   ("coords", embedded, "run=r&layer={layer}&step={step}&key=" + KEY),
                   ("info", embedded, "run=r&layer={layer}&step={step}&key=" + KEY),
                   ("predictions", predicted, "run=r&step={step}")]
        for route, listed, query in queries:
            if listed:
                r = client.get(BASE + route + "?" + query.format(layer=layer["name"], step=rng.choice(listed)))
                answers.append((route, True, r.status_code))
                if r.status_code >= 500 or r.status_code == 404:
                    bodies.append(f"{route} {r.status_code}: {r.get_data(as_text=True)[:300]}")


@pytest.fixture
def fast_switching():
    """Switch threads as often as the interpreter allows, so that unguarded shared state shows."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_readers_see_a_consistent_run_while_it_is_written(tmp_path, new_run, fast_switching):
    writer = new_run(tmp_path / "r", layers={"a": (N, 6), "b": (N, 3)})
    rng = np.random.default_rng(0)
    writer.write_probe(np.arange(N), np.arange(N) % 3)
    for step in range(HISTORY):
        for layer, width in (("a", 6), ("b", 3)):
            writer.write_activation(layer, step, rng.normal(size=(N, width)).astype(np.float32))
        writer.write_prediction(step, rng.random((N, 3)).astype(np.float32))
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(tmp_path)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    assert client.get(BASE + "runs").status_code == 200  # the first listing, before the appender starts

    done, answers, bodies = threading.Event(), [], []
    threads = [threading.Thread(target=_append, args=(writer, open_logdir(tmp_path).run("r"), done))]
    threads += [threading.Thread(target=_read, args=(client, done, seed, answers, bodies)) for seed in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    plugin.jobs.close()

    assert not any(t.is_alive() for t in threads)
    reads = [a for a in answers if a[0] != "runs"]
    assert len(reads) >= 50, f"only {len(reads)} reads of listed steps: the race was not exercised"
    failed = Counter(f"{route} {status}" for route, listed, status in answers
                     if status >= 500 or (listed and status == 404))
    assert not failed, f"{sum(failed.values())} of {len(answers)} requests failed: {dict(failed)}; {bodies[:5]}"
