"""The Repviz TensorBoard plugin's routes, through werkzeug's test client, on a log directory made by the real
callback: every route, empty states, bad names, path traversal, bounds, a job computed on demand, TensorBoard's CSP
and the imports that serving must not pull in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

tb = pytest.importorskip("tensorboard")
from tensorboard.backend import application, http_util  # noqa: E402
from tensorboard.plugins import base_plugin  # noqa: E402
from tensorboard_plugin_repviz import data, loader  # noqa: E402
from tensorboard_plugin_repviz import plugin as plugin_module  # noqa: E402
from tensorboard_plugin_repviz.jobs import JobManager  # noqa: E402
from werkzeug import test as wtest  # noqa: E402
from werkzeug import wrappers  # noqa: E402

import repviz  # noqa: E402
from repviz.meta.result import MetaResult  # noqa: E402
from repviz.store import Probe, RunWriter  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
N = 48  # probe points
BASE = "/data/plugin/repviz/"


def _train(run_dir, seed, activation="relu"):
    import keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(0)  # one probe for every run: the comparing routes compare runs on the same inputs
    x = rng.random((96, 8, 8), dtype=np.float32)
    y = (x[:, :4].mean(axis=(1, 2)) > x[:, 4:].mean(axis=(1, 2))).astype(np.int64) + 2 * (x[:, :, :4].mean(
        axis=(1, 2)) > 0.5)
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(12, activation=activation, name="hidden"),
                              keras.layers.Dense(4, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = repviz.ActivationLogger(run_dir, probe=(x[:N], y[:N]))
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=[logger])


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Two runs recorded by ActivationLogger (2 epochs): "mlp" with stored PCA embeddings, "bare" without; and one
    meta-SNE result."""
    root = tmp_path_factory.mktemp("plugin_logs")
    _train(root / "mlp", 0)
    _train(root / "bare", 1, activation="tanh")
    repviz.embed_logdir(root, methods=["pca"], runs=["mlp"], progress=False)
    keys = [("mlp", "hidden", s) for s in range(3)] + [("mlp", "out", s) for s in range(3)]
    coords = np.arange(12, dtype=np.float32).reshape(6, 2)
    MetaResult(keys, coords, np.zeros((6, 6)), {"transform": "dist"}, explained_variance=0.75,
               robustness=float("nan"), info={"notes": ["compared on all 48 probe points", 7]}).save(root, "meta-test")
    return root


def _client(path, static_dir=None):
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(path)))
    app = application.TensorBoardWSGI([plugin])
    return wtest.Client(app, wrappers.Response), plugin


@pytest.fixture(scope="module")
def served(logdir):
    client, plugin = _client(logdir)
    yield client, plugin
    plugin.jobs.close()


def _get(client, route, **headers):
    return client.get(BASE + route, headers=headers)


def _array(response, dtype):
    return np.frombuffer(response.data, dtype=dtype)


def _key(logdir):
    return repviz.open_logdir(logdir).run("mlp").embeddings.key("pca")


# --------------------------------------------------------------------------------------------------------------
# JSON routes
# --------------------------------------------------------------------------------------------------------------

def test_runs_index_lists_runs_layers_steps_and_embeddings(served, logdir):
    client, plugin = served
    r = _get(client, "runs")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    index = r.json
    runs = {run["name"]: run for run in index["runs"]}
    assert set(runs) == {"mlp", "bare"}
    mlp = runs["mlp"]
    assert mlp["n_probe"] == N and mlp["step_unit"] == "epoch" and mlp["has_labels"] and mlp["n_classes"] == 4
    assert mlp["has_thumbnails"] and mlp["thumbnail_shape"] == [8, 8]
    assert mlp["prediction_steps"] == [0, 1, 2]
    assert [lay["name"] for lay in mlp["layers"]] == ["hidden", "out"]
    assert mlp["layers"][0]["steps"] == [0, 1, 2] and mlp["layers"][0]["stored_shape"] == [N, 12]
    assert mlp["layers"][0]["class"] == "Dense" and mlp["layers"][0]["reduction"]["kind"] == "none"
    (emb,) = mlp["embeddings"]
    assert emb["key"] == _key(logdir) and emb["method"] == "pca" and emb["default"] is True
    assert emb["steps"] == {"hidden": [0, 1, 2], "out": [0, 1, 2]}
    assert runs["bare"]["embeddings"] == []
    assert mlp["probe_group"] == runs["bare"]["probe_group"]  # same probe ids and inputs
    assert "pca" in index["methods"] and "tsne" in index["methods"]
    assert index["meta"] == ["meta-test"]
    assert plugin.is_active()


def test_runs_index_lists_the_choices_the_page_offers(served):
    """The page spells no method or meta-SNE option itself: the index lists the registry's and repviz.meta's."""
    from repviz.meta import EMBEDDINGS, METRICS, TRANSFORMS
    from repviz.methods import METHODS

    client, _ = served
    choices = _get(client, "runs").get_json()["choices"]
    assert choices["meta"] == {"transform": list(TRANSFORMS), "metric": list(METRICS), "embedding": list(EMBEDDINGS)}
    assert [m["name"] for m in choices["methods"]] == sorted(METHODS)
    tsne = next(m for m in choices["methods"] if m["name"] == "tsne")
    assert tsne["align"] == METHODS["tsne"].align and tsne["defaults"]["random_state"] == 0


def test_runs_index_etag_gives_304(served):
    client, _ = served
    first = _get(client, "runs")
    again = _get(client, "runs", **{"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.data == b""
    assert again.headers["Content-Type"] == "application/json" and again.headers["X-Content-Type-Options"] == "nosniff"


def test_info_layer_record_and_embedding_scores(served, logdir):
    client, _ = served
    key = _key(logdir)
    r = _get(client, f"info?run=mlp&layer=hidden&step=2&key={key}")
    assert r.status_code == 200
    info = r.json
    assert info["layer"]["name"] == "hidden" and info["layer"]["stored_shape"] == [N, 12]
    assert info["record"]["shape"] == [N, 12] and info["record"]["epoch"] == 2 and info["record"]["nonfinite"] == 0
    stored = repviz.open_logdir(logdir).run("mlp").embeddings.info(key, "hidden", 2)
    assert info["embedding"]["scores"] == stored["scores"] and info["embedding"]["method"] == "pca"
    assert _get(client, "info?run=mlp&layer=hidden&step=2").json["embedding"] is None


def test_meta_result_route(served):
    client, _ = served
    r = _get(client, "meta_result?name=meta-test")
    assert r.status_code == 200
    body = json.loads(r.data)  # strict JSON: the NaN robustness is null
    assert body["keys"][1] == ["mlp", "hidden", 1] and body["coords"][1] == [2.0, 3.0]
    assert body["explained_variance"] == 0.75 and body["robustness"] is None
    assert body["notes"] == ["compared on all 48 probe points"]  # what was compared; a note not a string is left out
    assert _get(client, "meta_result?name=meta-nope").status_code == 404


# --------------------------------------------------------------------------------------------------------------
# Binary routes
# --------------------------------------------------------------------------------------------------------------

def test_coords_are_the_stored_embedding_with_etag(served, logdir):
    client, _ = served
    key = _key(logdir)
    r = _get(client, f"coords?run=mlp&layer=out&step=1&key={key}")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["X-Repviz-Shape"] == f"{N},2"
    stored = repviz.open_logdir(logdir).run("mlp").embeddings.read(key, "out", 1)
    np.testing.assert_array_equal(_array(r, "<f4").reshape(N, 2), stored)
    again = _get(client, f"coords?run=mlp&layer=out&step=1&key={key}", **{"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304 and again.data == b""
    assert again.headers["Content-Type"] == "application/octet-stream"  # TensorBoard's security check wants one
    other = _get(client, f"coords?run=mlp&layer=out&step=2&key={key}")
    assert other.headers["ETag"] != r.headers["ETag"]


def test_labels_ids_predictions_thumbnails(served, logdir):
    client, _ = served
    run = repviz.open_logdir(logdir).run("mlp")
    probe = run.probe
    np.testing.assert_array_equal(_array(_get(client, "labels?run=mlp"), "<i4"), probe.labels)
    np.testing.assert_array_equal(_array(_get(client, "ids?run=mlp"), "<f8"), probe.ids)
    r = _get(client, "predictions?run=mlp&step=2")
    pred = _array(r, "<f4")
    outputs = np.asarray(run.predictions(2))
    np.testing.assert_array_equal(pred[:N], outputs.argmax(axis=1))
    np.testing.assert_allclose(pred[N:], outputs.max(axis=1), rtol=1e-6)
    r = _get(client, "thumbnails?run=mlp&start=40&count=100")  # cut at the end of the probe set
    assert r.headers["X-Repviz-Shape"] == "8,8,8"
    np.testing.assert_array_equal(_array(r, np.uint8).reshape(8, 8, 8), probe.thumbnails[40:])


def test_predicted_classes_against_hand_computed_cases():
    probs = np.array([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]])
    classes, conf = data.predicted_classes(probs, binary=False)
    np.testing.assert_array_equal(classes, [1, 0])
    np.testing.assert_allclose(conf, [0.7, 0.5], rtol=1e-6)
    logits = np.array([[0.0, np.log(3.0)], [2.0, 2.0]])  # softmax: [0.25, 0.75] and [0.5, 0.5]
    classes, conf = data.predicted_classes(logits, binary=False)
    np.testing.assert_array_equal(classes, [1, 0])
    np.testing.assert_allclose(conf, [0.75, 0.5], rtol=1e-6)
    classes, conf = data.predicted_classes(np.array([[0.2], [0.9]]), binary=True)  # a sigmoid unit
    np.testing.assert_array_equal(classes, [0, 1])
    np.testing.assert_allclose(conf, [0.8, 0.9], rtol=1e-6)
    classes, conf = data.predicted_classes(np.array([[3.2], [-1.0]]), binary=False)  # regression
    np.testing.assert_array_equal(classes, [-1, -1])
    assert np.isnan(conf).all()


def test_label_codes():
    def codes(labels, n=2, **manifest):
        return data.label_codes(Probe(np.arange(n), labels, None, manifest=manifest))

    found, names = codes(np.array(["cat", "dog", "cat"]), 3)
    assert found.tolist() == [0, 1, 0] and names == ["cat", "dog"]
    assert codes(np.eye(3)[[2, 0]])[0].tolist() == [2, 0]
    assert codes(np.array([1.0, 2.0]))[0].tolist() == [1, 2]
    assert codes(np.array([0.3, 2.0]))[0].tolist() == [-1, -1]  # a regression target
    assert codes(None)[0].tolist() == [-1, -1]
    mask = np.ones((2, 4, 4, 1))  # a run recorded before the policy kept the U-Net's masks: no class, not class 0
    assert codes(mask, predictions={"shape": [2, 4, 4, 2]})[0].tolist() == [-1, -1]
    assert codes(np.array([1, 0]), probe={"target": {"kind": "scalar", "shape": []}})[0].tolist() == [-1, -1]


# --------------------------------------------------------------------------------------------------------------
# Empty states and bad names
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["empty", "missing"])
def test_empty_log_directory(tmp_path, kind):
    client, plugin = _client(tmp_path if kind == "empty" else tmp_path / "nope")
    index = _get(client, "runs").json
    assert index["runs"] == [] and index["meta"] == [] and "pca" in index["methods"]
    assert not plugin.is_active()
    r = _get(client, "labels?run=mlp")
    assert r.status_code == 404 and "error" in r.json


def test_run_without_embeddings(served):
    client, _ = served
    r = _get(client, "coords?run=bare&layer=hidden&step=0&key=pca-0123456789")
    assert r.status_code == 404 and "no embedding" in r.json["error"]


@pytest.mark.parametrize("route", [
    "coords?run=nope&layer=hidden&step=0&key=K",
    "coords?run=mlp&layer=nope&step=0&key=K",
    "coords?run=mlp&layer=hidden&step=9&key=K",
    "coords?run=mlp&layer=hidden&step=0&key=pca-nope",
    "info?run=mlp&layer=nope&step=0",
    "info?run=mlp&layer=hidden&step=7",
    "predictions?run=mlp&step=5",
    "labels?run=bare2",
])
def test_unknown_names_are_404_json(served, logdir, route):
    client, _ = served
    r = _get(client, route.replace("key=K", f"key={_key(logdir)}"))
    assert r.status_code == 404 and r.headers["Content-Type"].startswith("application/json")
    assert r.json["error"] and "Traceback" not in r.json["error"]


@pytest.mark.parametrize("route", [
    "coords?run=mlp&layer=hidden&step=0", "coords?run=mlp&layer=hidden&step=x&key=k", "labels", "info?run=mlp",
    "thumbnails?run=mlp&count=0", "thumbnails?run=mlp&count=1025", "thumbnails?run=mlp&start=-1&count=2",
    "thumbnails?run=mlp&start=48&count=2", "predictions?run=mlp&step=99999999999999999999", "meta_result",
    "labels?run=" + "x" * 2000,
])
def test_bad_parameters_are_400_json(served, route):
    client, _ = served
    r = _get(client, route)
    assert r.status_code == 400 and r.json["error"]


TRAVERSAL_NAMES = ["..", "../mlp", "mlp/..", "mlp/../mlp", "./mlp", "/etc", "/etc/passwd", "%2e%2e%2fmlp",
                   "%252e%252e%252fmlp", "..\\mlp", "mlp\\..\\mlp", "C:\\Windows", "mlp%00", "~", "plugins"]


@pytest.mark.parametrize("name", TRAVERSAL_NAMES)
def test_traversal_in_names_is_refused(served, logdir, name):
    client, _ = served
    from urllib.parse import quote

    q = quote(name, safe="%")  # a literal "%2e" stays as typed: the server decodes once
    key = _key(logdir)
    for route in (f"labels?run={q}", f"coords?run=mlp&layer={q}&step=0&key={key}",
                  f"coords?run=mlp&layer=hidden&step=0&key={q}", f"meta_result?name={q}",
                  f"info?run=mlp&layer={q}&step=0", f"thumbnails?run={q}&count=1"):
        r = _get(client, route)
        assert r.status_code in (400, 404), route
        assert r.headers["Content-Type"].startswith("application/json")


def test_symlinks_leading_out_of_the_log_directory_are_not_served(tmp_path):
    outside = tmp_path / "outside"
    w = RunWriter(outside / "secret")
    w.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {"a": {"stored_shape": [3, 2]}}})
    w.write_probe(np.arange(3), np.array([7, 8, 9]))
    MetaResult([("secret", "a", 0)], np.zeros((1, 2)), np.zeros((1, 1)), {}).save(outside, "meta-secret")
    logs = tmp_path / "logs"
    (logs / "evil").mkdir(parents=True)
    (logs / "evil" / "plugins").symlink_to(outside / "secret" / "plugins")
    (logs / "plugins").mkdir()
    (logs / "plugins" / "repviz-meta").symlink_to(outside / "plugins" / "repviz-meta")
    assert "evil" in repviz.open_logdir(logs).runs  # the store would list it; the plugin must not serve it
    client, _ = _client(logs)
    index = _get(client, "runs").json
    assert index["runs"] == [] and index["meta"] == []
    assert _get(client, "labels?run=evil").status_code == 404
    assert _get(client, "meta_result?name=meta-secret").status_code == 404


# --------------------------------------------------------------------------------------------------------------
# Static files
# --------------------------------------------------------------------------------------------------------------

@pytest.fixture
def static_client(tmp_path, monkeypatch, served):
    static = tmp_path / "static"
    (static / "vendor").mkdir(parents=True)
    (static / "index.js").write_text("export function render() {}\n")
    (static / "style.css").write_text("body {}\n")
    (static / "vendor" / "lib.js").write_text("export const x = 1;\n")
    (tmp_path / "secret.txt").write_text("secret")
    (static / "link.js").symlink_to(tmp_path / "secret.txt")
    monkeypatch.setattr(plugin_module, "STATIC_DIR", str(static))
    return served[0]


def test_static_files_with_content_types(static_client):
    r = _get(static_client, "static/index.js")
    assert r.status_code == 200 and r.headers["Content-Type"].split(";")[0] == "text/javascript"
    assert b"render" in r.data
    assert _get(static_client, "static/style.css").headers["Content-Type"].split(";")[0] == "text/css"
    assert _get(static_client, "static/vendor/lib.js").status_code == 200
    missing = _get(static_client, "static/nope.js")
    assert missing.status_code == 404 and missing.json["error"]


@pytest.mark.parametrize("prefix", ["/tb/", "/tb/experiment/123/"])
def test_routes_under_path_prefix_and_experiment(static_client, logdir, prefix):
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    client = wtest.Client(application.TensorBoardWSGI([plugin], path_prefix="/tb"), wrappers.Response)
    assert client.get(prefix + BASE[1:] + "static/index.js").status_code == 200
    assert client.get(prefix + BASE[1:] + "labels?run=mlp").status_code == 200
    assert client.get(prefix + BASE[1:] + "static/../plugin.py").status_code in (400, 404)


@pytest.mark.parametrize("path", [
    "static/../plugin.py", "static/%2e%2e/plugin.py", "static/%2E%2E/%2E%2E/store.py", "static/..%2fplugin.py",
    "static/%252e%252e/plugin.py", "static/%252e%252e%252fplugin.py", "static/..%5cplugin.py",
    "static/vendor/..%5c..%5cplugin.py", "static/%2fetc%2fpasswd", "static//etc/passwd", "static/C:%5cWindows",
    "static/link.js", "static/vendor/../../plugin.py", "static/./index.js", "static/", "static/index.js%00.css",
])
def test_static_traversal_is_refused(static_client, path):
    r = _get(static_client, path)
    assert r.status_code in (400, 404), path
    assert b"secret" not in r.data and b"import" not in r.data
    if r.status_code != 404 or r.headers["Content-Type"].startswith("application/json"):
        assert r.json["error"]


# --------------------------------------------------------------------------------------------------------------
# Errors and bounds
# --------------------------------------------------------------------------------------------------------------

def test_unexpected_errors_are_json_without_traceback(served, monkeypatch):
    client, _ = served

    def boom(*args):
        raise RuntimeError("secret internals /home/x")

    monkeypatch.setattr(data, "label_codes", boom)  # inside the labels route
    r = _get(client, "labels?run=mlp")
    assert r.status_code == 500 and r.json["error"].startswith("internal error (RuntimeError)")
    assert b"Traceback" not in r.data and b"secret" not in r.data


@pytest.mark.parametrize("body, code", [
    (b"not json", 400), (b"[1, 2]", 400), (json.dumps({"run": "mlp"}).encode(), 400),
    (json.dumps({"run": "mlp", "layer": "hidden", "method": 3}).encode(), 400),
    (json.dumps({"run": "../mlp", "layer": "hidden", "method": "pca"}).encode(), 404),
    (json.dumps({"run": "mlp", "layer": "nope", "method": "pca"}).encode(), 404),
    (json.dumps({"run": "mlp", "layer": "hidden", "method": "os.system"}).encode(), 404),
    (b"{" + b" " * 5000 + b"}", 413),
])
def test_compute_refuses_bad_bodies(served, body, code):
    client, _ = served
    r = client.post(BASE + "compute", data=body, content_type="application/json")
    assert r.status_code == code and r.json["error"]
    assert client.get(BASE + "compute").status_code == 405


def _wait_job(client, job_id, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = next(j for j in _get(client, "jobs").json["jobs"] if j["id"] == job_id)
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s: {job}")


def test_compute_on_demand_then_serve(served, logdir):
    client, plugin = served
    body = {"run": "bare", "layer": "hidden", "method": "pca"}
    r = client.post(BASE + "compute", json=body)
    assert r.status_code == 202 and r.json["job"]["state"] in ("queued", "running")
    job_id = r.json["job"]["id"]
    joined = client.post(BASE + "compute", json=body)  # deduplicated while it runs
    assert joined.status_code == 200 and joined.json["job"]["id"] == job_id
    job = _wait_job(client, job_id)
    assert job["state"] == "done" and job["error"] is None and job["key"].startswith("pca-")
    assert job["progress"]["done"] == job["progress"]["total"] == 3
    stored = repviz.open_logdir(logdir).run("bare").embeddings.read(job["key"], "hidden", 2)
    r = _get(client, f"coords?run=bare&layer=hidden&step=2&key={job['key']}")
    np.testing.assert_array_equal(_array(r, "<f4").reshape(N, 2), stored)
    deadline = time.time() + 15  # the index follows within the listing/index cache times
    while time.time() < deadline:
        runs = {run["name"]: run for run in _get(client, "runs").json["runs"]}
        if runs["bare"]["embeddings"]:
            break
        time.sleep(0.5)
    assert runs["bare"]["embeddings"][0]["steps"] == {"hidden": [0, 1, 2]}


def test_job_failure_has_a_one_line_reason(served):
    client, plugin = served
    job, new = plugin.jobs.submit("ghost", "hidden", "pca")  # past the route's checks: fails in the worker
    assert new
    job = _wait_job(client, job["id"])
    assert job["state"] == "failed" and job["key"] is None
    assert job["error"].startswith("NotFoundError: run 'ghost' is not in") and "\n" not in job["error"]


def test_results_written_elsewhere_are_served_and_computed_there(logdir, tmp_path):
    """``--repviz_out DIR``: results of ``repviz embed --out DIR`` are listed beside the log directory's own, and
    on-demand embeddings are written to DIR, never into the (possibly read-only) log directory."""
    import argparse
    import shutil

    logs, out = tmp_path / "logs", tmp_path / "out"
    shutil.copytree(logdir / "mlp", logs / "mlp")
    shutil.copytree(logdir / "bare", logs / "bare")
    shutil.rmtree(logs / "bare" / "plugins" / "repviz" / "embeddings", ignore_errors=True)  # other tests' jobs
    repviz.embed_logdir(repviz.open_logdir(logs, out), methods=["pca"], params={"pca": {"whiten": True}},
                        runs=["mlp"], progress=False)
    parser = argparse.ArgumentParser()
    loader.RepvizLoader().define_flags(parser)
    flags = parser.parse_args(["--repviz_out", str(out)])
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logs), flags=flags))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    try:
        mlp = next(run for run in _get(client, "runs").json["runs"] if run["name"] == "mlp")
        assert sorted(emb["method"] for emb in mlp["embeddings"]) == ["pca", "pca"]
        whitened = next(emb["key"] for emb in mlp["embeddings"] if not emb["default"])
        stored = repviz.open_logdir(logs, out).run("mlp").embeddings.read(whitened, "hidden", 1)
        r = _get(client, f"coords?run=mlp&layer=hidden&step=1&key={whitened}")
        np.testing.assert_array_equal(_array(r, "<f4").reshape(N, 2), stored)
        r = client.post(BASE + "compute", json={"run": "bare", "layer": "hidden", "method": "pca"})
        job = _wait_job(client, r.json["job"]["id"])
        assert job["state"] == "done", job
        assert not (logs / "bare" / "plugins" / "repviz" / "embeddings").exists()
        assert repviz.open_logdir(logs, out).run("bare").embeddings.steps(job["key"], "hidden") == [0, 1, 2]
    finally:
        plugin.jobs.close()


def test_job_queue_is_bounded(logdir, monkeypatch):
    client, plugin = _client(logdir)

    class IdlePool:  # jobs stay queued: the bound is checked without racing a worker
        def submit(self, *args):
            return Future()

    monkeypatch.setattr(plugin, "jobs", JobManager(plugin.jobs.logdir, out=plugin.jobs.out, max_pending=2,
                                                   pool=IdlePool()))
    for layer in ("hidden", "out"):
        assert client.post(BASE + "compute", json={"run": "bare", "layer": layer, "method": "tsne"}).status_code == 202
    assert client.post(BASE + "compute", json={"run": "bare", "layer": "out", "method": "tsne"}).status_code == 200
    full = client.post(BASE + "compute", json={"run": "bare", "layer": "out", "method": "isomap"})
    assert full.status_code == 429 and "at most 2" in full.json["error"]
    assert [j["state"] for j in _get(client, "jobs").json["jobs"]] == ["queued", "running"]  # one worker


# --------------------------------------------------------------------------------------------------------------
# TensorBoard's CSP and import weight
# --------------------------------------------------------------------------------------------------------------

def test_tensorboard_csp_allows_what_the_page_needs():
    """The page needs eval (regl), same-origin fetches and module workers, data:/blob: images; TensorBoard's CSP
    must keep allowing them and keep blocking other hosts (an upgrade that changes this fails here)."""
    request = wrappers.Request(wtest.EnvironBuilder(path="/").get_environ())
    response = http_util.Respond(request, "<html></html>", "text/html")
    csp = dict(part.strip().split(" ", 1) for part in response.headers["Content-Security-Policy"].split(";"))
    script, connect, img = csp["script-src"].split(), csp["connect-src"].split(), csp["img-src"].split()
    assert "'self'" in script and "'unsafe-eval'" in script
    assert connect == ["'self'"]
    assert {"'self'", "data:", "blob:"} <= set(img)
    assert csp["default-src"] == "'self'" and "worker-src" not in csp  # workers fall back to script-src: 'self'
    for src in script + connect:
        assert src.startswith("'"), f"a host or scheme is allowed: {src}"  # no CDN, no blob: workers, no data:


def test_plugin_import_and_serving_load_no_keras_tensorflow_numba(logdir):
    script = textwrap.dedent(f"""
        import sys
        from tensorboard.backend import application
        from tensorboard.plugins import base_plugin
        from werkzeug import test, wrappers
        from tensorboard_plugin_repviz.loader import RepvizLoader
        plugin = RepvizLoader().load(base_plugin.TBContext(logdir={str(logdir)!r}))
        client = test.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        assert plugin.is_active()
        key = client.get("/data/plugin/repviz/runs").json["runs"][-1]["embeddings"][0]["key"]
        for route in ["runs", "labels?run=mlp", "ids?run=mlp", "predictions?run=mlp&step=1",
                      "thumbnails?run=mlp&count=4", "coords?run=mlp&layer=hidden&step=1&key=" + key,
                      "info?run=mlp&layer=hidden&step=1&key=" + key, "meta_result?name=meta-test", "jobs"]:
            assert client.get("/data/plugin/repviz/" + route).status_code == 200, route
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("keras", "tensorflow", "numba")
                       or m.startswith("repviz.manifold"))
        print(heavy)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tb_plugin"),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
