"""The Similarity view's routes, through werkzeug's test client: the stored matrix (labels in model or step order,
values against linear CKA written here from Kornblith et al. 2019's formula), the "not computed" answer, every name
checked against the log directory (400, one line), and the background job that computes what is missing."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard_plugin_repviz import loader
from test_plugin_routes import BASE, _get, _wait_job
from werkzeug import test as wtest
from werkzeug import wrappers

import repviz
from repviz.similarity import KERNELS, MEASURES, similarity

STEPS = range(3)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, cluster_run):
    """Runs "x" and "y" (same 120 probes, layers in the order "logits", "conv", "dense", steps 0-2) and "z" (60
    other probes)."""
    root = tmp_path_factory.mktemp("similarity_logs")
    cluster_run(root / "x", layers=("logits", "conv", "dense"), steps=STEPS, seed=0)
    cluster_run(root / "y", layers=("logits", "conv", "dense"), steps=STEPS, seed=1)
    cluster_run(root / "z", layers=("logits",), steps=STEPS, n=60, seed=2)
    return root


@pytest.fixture(scope="module")
def served(logdir):
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    yield client, plugin
    plugin.jobs.close()


def _linear_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Biased linear CKA (Kornblith et al. 2019, eq. 5): ||Yc' Xc||_F² / (||Xc' Xc||_F ||Yc' Yc||_F)."""
    X = X.reshape(len(X), -1).astype(np.float64)
    Y = Y.reshape(len(Y), -1).astype(np.float64)
    X, Y = X - X.mean(axis=0), Y - Y.mean(axis=0)
    return np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def test_the_run_index_lists_the_measures_and_what_each_takes(served):
    choices = _get(served[0], "runs").json["choices"]["similarity"]
    assert choices["measure"] == list(MEASURES) and choices["kernel"] == list(KERNELS)
    assert choices["options"] == {"cka": ["debiased", "kernel"], "procrustes": []}
    assert choices["similarities"] == ["cka"]


def test_a_stored_matrix_is_served_with_its_labels_in_model_order(served, logdir):
    client, _ = served
    route = "similarity?mode=layers&run=x&run2=y&step=1&measure=cka&kernel=linear&debiased=0"
    missing = _get(client, route)
    assert missing.status_code == 404 and missing.json["computed"] is False
    assert "not computed yet" in missing.json["error"] and "\n" not in missing.json["error"]
    similarity(logdir, ("x", "y"), 1, debiased=False)
    r = _get(client, route)
    assert r.status_code == 200, r.json
    m = r.json
    assert m["rows"] == [["x", layer, 1] for layer in ("logits", "conv", "dense")]
    assert m["cols"] == [["y", layer, 1] for layer in ("logits", "conv", "dense")]
    log = repviz.open_logdir(logdir)
    for i, (_, a, _) in enumerate(m["rows"]):
        for j, (_, b, _) in enumerate(m["cols"]):
            want = _linear_cka(log.run("x").activations(a, 1), log.run("y").activations(b, 1))
            assert m["values"][i][j] == pytest.approx(want, abs=1e-6)
    assert m["measure"] == "cka" and m["params"] == {"kernel": "linear", "debiased": False}
    assert m["scale_title"] == "biased linear CKA" and m["higher_is_similar"] is True
    assert m["selection"] == {"mode": "layers", "runs": ["x", "y"], "layer": None, "step": 1, "measure": "cka",
                              "kernel": "linear", "debiased": False}
    # the debiased estimator is another matrix, not computed yet
    assert _get(client, route.replace("debiased=0", "debiased=1")).status_code == 404


@pytest.mark.parametrize("query, words", [
    ("run=ghost&step=0", "run 'ghost' is not in the log directory"),
    ("run=x&run2=ghost&step=0", "run 'ghost' is not in"),
    ("run=x&run2=y&step=7", "step 7 is not a snapshot"),
    ("run=x&run2=y&step=one", "step must be an integer"),
    ("run=x&run2=y", "missing parameter 'step'"),
    ("run=x&run2=z&step=0", "runs 'x' and 'z' hold different probe sets"),
    ("mode=steps&run=x&layer=../x", "layer '../x' is not in run 'x'"),
    ("mode=steps&run=x", "missing parameter 'layer'"),
    ("mode=diagonal&run=x&step=0", "mode must be one of"),
    ("run=x&step=0&measure=cca", "measure must be one of ['cka', 'procrustes']"),
    ("run=x&step=0&kernel=poly", "kernel must be one of"),
    ("run=x&step=0&debiased=maybe", "debiased must be true or false"),
])
def test_bad_names_are_refused_with_one_line(served, query, words):
    r = _get(served[0], f"similarity?{query}")
    assert r.status_code == 400, r.json
    assert words in r.json["error"] and "\n" not in r.json["error"]


def test_a_measure_without_options_has_one_selection(served):
    client, _ = served
    a = _get(client, "similarity?run=x&step=0&measure=procrustes&kernel=rbf&debiased=0").json
    b = _get(client, "similarity?run=x&step=0&measure=procrustes").json
    assert a["error"] == b["error"] and "procrustes heatmap of run 'x' at step 0" in a["error"]


def test_compute_queues_a_job_then_every_snapshot_is_served(served, logdir):
    client, _ = served
    body = {"mode": "layers", "run": "y", "run2": "x", "measure": "procrustes"}
    r = client.post(BASE + "compute_similarity", json=body)
    assert r.status_code == 202 and r.json["job"]["kind"] == "similarity", r.json
    job_id = r.json["job"]["id"]
    joined = client.post(BASE + "compute_similarity", json=body)  # deduplicated while it runs
    assert joined.status_code == 200 and joined.json["job"]["id"] == job_id
    job = _wait_job(client, job_id)
    assert job["state"] == "done" and job["error"] is None, job
    assert job["progress"]["done"] == job["progress"]["total"] == len(STEPS)
    # the job's last line says what it did (the page shows it in place of the read's "read all ... from the cache")
    done = re.fullmatch(r"computed (\d+) value\(s\), read (\d+) from the cache \(3 heatmaps\)", job["progress"]["message"])
    assert done and int(done[1]) + int(done[2]) == 3 * 9 and int(done[1]) > 0, job["progress"]
    assert job["params"]["runs"] == ["y", "x"] and job["params"]["step"] is None
    for step in STEPS:
        m = _get(client, f"similarity?run=y&run2=x&step={step}&measure=procrustes").json
        assert [k[1] for k in m["rows"]] == ["logits", "conv", "dense"] and m["rows"][0][0] == "y"
        assert m["higher_is_similar"] is False and m["notes"][-1] == "read all 9 values from the cache, computed none now"
        want = similarity(logdir, ("y", "x"), step, measure="procrustes").values
        np.testing.assert_allclose(m["values"], want, atol=1e-9)


def test_compute_one_layer_over_training(served):
    client, _ = served
    r = client.post(BASE + "compute_similarity", json={"mode": "steps", "run": "x", "layer": "dense"})
    assert r.status_code == 202
    job = _wait_job(client, r.json["job"]["id"])
    assert job["state"] == "done", job
    m = _get(client, "similarity?mode=steps&run=x&layer=dense").json
    assert m["rows"] == m["cols"] == [["x", "dense", s] for s in STEPS]
    values = np.array(m["values"])
    np.testing.assert_allclose(np.diag(values), 1.0, atol=1e-9)  # each snapshot against itself
    np.testing.assert_allclose(values, values.T, atol=1e-12)
    assert m["scale_title"] == "debiased linear CKA"


@pytest.mark.parametrize("body, code, words", [
    ({"run": "ghost"}, 400, "run 'ghost' is not in"),
    ({"run": "x", "run2": "z"}, 400, "different probe sets"),
    ({"run": "x", "step": 9}, 400, "step 9 is not a snapshot"),
    ({"run": "x", "debiased": "yes"}, 400, "debiased must be"),
    ({"run": ["x"]}, 400, "is not in the log directory"),
])
def test_compute_refuses_bad_bodies(served, body, code, words):
    client, _ = served
    r = client.post(BASE + "compute_similarity", json=body)
    assert r.status_code == code and words in r.json["error"], r.json
    assert client.get(BASE + "compute_similarity").status_code == 405
    cross = client.post(BASE + "compute_similarity", json={"run": "x"}, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403


FIELDS = ["mode", "run", "run2", "layer", "step", "measure", "kernel", "debiased"]
VALUES = ["", "x", "y", "z", "ghost", "dense", "logits", "layers", "steps", "cka", "procrustes", "rbf", "linear",
          "0", "1", "2", "-1", "1e3", " 1", "9" * 30, "true", "false", "../x", "\x00", "é", "a" * 2000]
BODY_VALUES = [None, True, 0, 1, 2**63, 1.5, [], ["x"], {"run": "x"}, "x" * 3000]


def test_fuzz_gives_no_5xx_and_one_line_errors(logdir, monkeypatch):
    """500 seeded requests of valid, wrong and wrongly typed fields: 200, 202, 400 or the not-computed 404 only,
    every error one line. Jobs go to a pool that never runs them."""
    import random
    from concurrent.futures import Future

    from tensorboard_plugin_repviz.jobs import JobManager

    class IdlePool:
        def submit(self, *args):
            return Future()

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    monkeypatch.setattr(plugin, "jobs", JobManager(str(logdir), max_pending=10**6, per_client=10**6,
                                                   pool=IdlePool()))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    rng = random.Random(0)
    for _ in range(500):
        fields = {k: rng.choice(VALUES) for k in rng.sample(FIELDS, rng.randrange(1, len(FIELDS) + 1))}
        if rng.random() < 0.5:
            r = client.get(BASE + "similarity", query_string=fields)
        else:
            if rng.random() < 0.4:
                fields[rng.choice(FIELDS)] = rng.choice(BODY_VALUES)
            r = client.post(BASE + "compute_similarity", json=fields)
        assert r.status_code in (200, 202, 400, 404), (fields, r.status_code, r.data[:300])
        if r.status_code >= 400:
            assert "\n" not in r.json["error"] and len(r.json["error"]) < 600, (fields, r.json)
            assert r.status_code == 400 or r.json["computed"] is False


def test_serving_a_stored_matrix_loads_no_numba_keras_or_tensorflow(logdir):
    """The TensorBoard process reads the cache with numpy alone: the numerics load only in the job's worker."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    similarity(logdir, "x", 0)
    script = textwrap.dedent(f"""
        import sys
        from tensorboard.backend import application
        from tensorboard.plugins import base_plugin
        from werkzeug import test, wrappers
        from tensorboard_plugin_repviz.loader import RepvizLoader
        plugin = RepvizLoader().load(base_plugin.TBContext(logdir={str(logdir)!r}))
        client = test.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        for route, code in [("runs", 200), ("similarity?run=x&step=0", 200), ("similarity?run=x&step=2", 404),
                            ("similarity?run=x&run2=ghost&step=0", 400)]:
            assert client.get("/data/plugin/repviz/" + route).status_code == code, route
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("keras", "tensorflow", "numba")))
    """)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tb_plugin"),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_matrix_with_a_dead_layer_is_served_with_its_holes_and_reasons(tmp_path, cluster_run):
    """Before: one dead layer failed the whole matrix (the job failed, nothing served). Now the job computes the
    rest and the route's JSON carries the holes (null values) with their reasons."""
    from repviz.chains import CONSTANT

    cluster_run(tmp_path / "d", layers=("a", "dead", "c"), steps=range(2), dead=("dead",))
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(tmp_path)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    try:
        r = client.post(BASE + "compute_similarity", json={"mode": "layers", "run": "d"})
        assert r.status_code == 202, r.json
        job = _wait_job(client, r.json["job"]["id"])
        assert job["state"] == "done", job
        m = _get(client, "similarity?run=d&step=1").json
    finally:
        plugin.jobs.close()
    assert m["left_out"] == [{"key": ["d", "dead", 1], "reason": CONSTANT}]
    assert m["values"][1] == [None] * 3 and [row[1] for row in m["values"]] == [None] * 3
    assert m["values"][0][2] is not None and m["values"][0][0] == pytest.approx(1.0)
