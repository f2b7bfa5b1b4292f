"""The comparison routes of the Repviz plugin (issue 12): k nearest neighbours in the original space, neighbourhood
change, trails, density contours, the meta-SNE rows and the meta-SNE job. Through werkzeug's test client on a log
directory made by the real callback (the fixtures of ``test_plugin_routes``), against independent references."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from test_plugin_routes import BASE, N, _array, _client, _get, _key, _wait_job, logdir  # noqa: F401 (a fixture)

from repviz.store import RunWriter

tb = pytest.importorskip("tensorboard")
from tensorboard_plugin_repviz import compare  # noqa: E402
from tensorboard_plugin_repviz import plugin as plugin_module  # noqa: E402

import repviz  # noqa: E402

neighbors_module = pytest.importorskip("sklearn.neighbors")


@pytest.fixture(scope="module")
def logs(logdir):  # noqa: F811
    """The routes' log directory ("mlp" with PCA embeddings, "bare", "meta-test"; this module's own copy) plus
    "other": two snapshots of a layer "hidden" over the same probe points in reversed id order, the second with a
    NaN."""
    root = logdir
    rng = np.random.default_rng(3)
    writer = RunWriter(root / "other")
    writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {"hidden": {"stored_shape": [N, 12]}}})
    writer.write_probe(np.arange(N)[::-1].copy(), np.zeros(N, dtype=np.int64))
    writer.write_activation("hidden", 0, rng.normal(size=(N, 12)).astype(np.float32))
    diverged = rng.normal(size=(N, 12)).astype(np.float32)
    diverged[3, 2] = np.nan
    writer.write_activation("hidden", 1, diverged)
    return root


@pytest.fixture(scope="module")
def served(logs):
    client, plugin = _client(logs)
    yield client, plugin
    plugin.jobs.close()


def _stored(logs, run, layer, step):
    return np.asarray(repviz.open_logdir(logs).run(run).activations(layer, step), dtype=np.float64)


def _reference_knn(X, k):
    """k nearest other points of every row (scikit-learn, brute force)."""
    nn = neighbors_module.NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X)
    _, idx = nn.kneighbors(X)
    return [[j for j in row if j != i][:k] for i, row in enumerate(idx)]


# --------------------------------------------------------------------------------------------------------------
# knn
# --------------------------------------------------------------------------------------------------------------

def test_knn_in_the_original_space_against_brute_force(served, logs):
    client, _ = served
    X = _stored(logs, "mlp", "hidden", 2)
    r = _get(client, "knn?run=mlp&layer=hidden&step=2&index=5&k=7")
    assert r.status_code == 200
    body = r.json
    d = np.linalg.norm(X - X[5], axis=1)
    d[5] = np.inf
    expected = np.argsort(d, kind="stable")[:7]
    assert body["index"] == 5 and body["k"] == 7 and body["neighbors"] == expected.tolist()
    np.testing.assert_allclose(body["distances"], d[expected], rtol=1e-6)
    assert 5 not in body["neighbors"] and body["distances"] == sorted(body["distances"])
    assert set(_get(client, "knn?run=mlp&layer=hidden&step=2&index=5").json["neighbors"]) == \
        set(_reference_knn(X, 10)[5])  # k defaults to 10


@pytest.mark.parametrize("query, message", [
    ("k=51", "k must be in [1, 47]"), ("k=0", "k must be in"), ("index=48", "index must be in [0, 48)"),
    ("index=-1", "index must be in"), ("k=x", "must be an integer"),
])
def test_knn_bounds(served, query, message):
    client, _ = served
    args = dict(p.split("=") for p in f"index=0&k=5&{query}".split("&"))
    r = _get(client, "knn?run=mlp&layer=hidden&step=1&" + "&".join(f"{a}={b}" for a, b in args.items()))
    assert r.status_code == 400 and message in r.json["error"]


def test_knn_refuses_more_than_50_neighbours():
    with pytest.raises(compare.BadRequest, match=r"k must be in \[1, 50\] .* got 51"):
        compare._check_k(51, compare.MAX_KNN, 20_000)


# --------------------------------------------------------------------------------------------------------------
# Neighbourhood change
# --------------------------------------------------------------------------------------------------------------

def test_neighborhood_change_route_then_cached(served, logs, monkeypatch):
    client, plugin = served
    route = "neighborhood_change?run=mlp&layer=hidden&step=0&run2=mlp&layer2=out&step2=2&k=5"
    r = _get(client, route)
    assert r.status_code == 200, r.data
    assert r.headers["Content-Type"] == "application/octet-stream" and r.headers["X-Repviz-Shape"] == str(N)
    change = _array(r, "<f4")
    A = _reference_knn(_stored(logs, "mlp", "hidden", 0), 5)
    B = _reference_knn(_stored(logs, "mlp", "out", 2), 5)
    expected = [1 - len(set(x) & set(y)) / len(set(x) | set(y)) for x, y in zip(A, B)]
    np.testing.assert_allclose(change, expected, atol=1e-6)
    assert float(r.headers["X-Repviz-Mean"]) == pytest.approx(np.mean(expected), abs=1e-5)
    run = repviz.open_logdir(logs).run("mlp")
    assert run.artifact("neighbor_graph").cached("hidden", 0, "k5-exact") is not None  # cached in the store
    again = _get(client, route, **{"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304

    def no_compute(*args, **kwargs):
        raise AssertionError("a cached graph was computed again")

    monkeypatch.setattr(plugin.jobs, "calls", no_compute)
    swapped = _get(client, "neighborhood_change?run=mlp&layer=out&step=2&run2=mlp&layer2=hidden&step2=0&k=5")
    np.testing.assert_array_equal(_array(swapped, "<f4"), change)
    same = _get(client, "neighborhood_change?run=mlp&layer=out&step=2&run2=mlp&layer2=out&step2=2&k=5")
    assert not _array(same, "<f4").any() and float(same.headers["X-Repviz-Mean"]) == 0.0


def test_neighborhood_change_across_runs_of_one_probe_set(served, logs):
    client, _ = served
    r = _get(client, "neighborhood_change?run=mlp&layer=hidden&step=1&run2=bare&layer2=hidden&step2=1&k=3")
    assert r.status_code == 200 and len(_array(r, "<f4")) == N


@pytest.mark.parametrize("query, code, message", [
    ("run=mlp&layer=hidden&step=0&run2=other&layer2=hidden&step2=0", 400, "runs 'mlp' and 'other' hold different"),
    ("run=other&layer=hidden&step=0&run2=other&layer2=hidden&step2=1", 400, "has non-finite activations at step 1"),
    ("run=mlp&layer=hidden&step=0&run2=mlp&layer2=hidden&step2=1&k=101", 400, "k must be in [1, 47]"),
    ("run=mlp&layer=hidden&step=0&run2=mlp&layer2=hidden&step2=1&k=0", 400, "k must be in"),
    ("run=mlp&layer=hidden&step=0&run2=mlp&layer2=hidden", 400, "missing parameter 'step2'"),
    ("run=mlp&layer=hidden&step=0&run2=nope&layer2=hidden&step2=0", 404, "run 'nope'"),
    ("run=mlp&layer=hidden&step=0&run2=mlp&layer2=nope&step2=0", 404, "layer 'nope'"),
    ("run=mlp&layer=hidden&step=9&run2=mlp&layer2=hidden&step2=0", 404, "no step 9"),
])
def test_neighborhood_change_refusals(served, query, code, message):
    client, _ = served
    r = _get(client, "neighborhood_change?" + query)
    assert r.status_code == code and message in r.json["error"], r.json


def test_neighborhood_change_bound_on_large_probes():
    with pytest.raises(compare.BadRequest, match=r"k must be in \[1, 100\] .* got 101"):
        compare._check_k(101, compare.MAX_CHANGE_K, 20_000)


# --------------------------------------------------------------------------------------------------------------
# Trails
# --------------------------------------------------------------------------------------------------------------

def test_trails_are_the_stored_embeddings_in_step_order(served, logs):
    client, _ = served
    key = _key(logs)
    r = client.post(BASE + "trails", json={"run": "mlp", "layer": "hidden", "key": key, "indices": [3, 0, 47, 3]})
    assert r.status_code == 200 and r.headers["X-Repviz-Steps"] == "0,1,2"
    assert r.headers["X-Repviz-Shape"] == "3,4,2"
    trails = _array(r, "<f4").reshape(3, 4, 2)
    run = repviz.open_logdir(logs).run("mlp")
    for i, step in enumerate([0, 1, 2]):
        np.testing.assert_array_equal(trails[i], run.embeddings.read(key, "hidden", step)[[3, 0, 47, 3]])
    again = client.post(BASE + "trails", json={"run": "mlp", "layer": "hidden", "key": key,
                                               "indices": [3, 0, 47, 3]}, headers={"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304


@pytest.mark.parametrize("body, code, message", [
    ({"indices": list(range(501))}, 400, "trails take at most 500 points; got 501"),
    ({"indices": []}, 400, "trails take at most 500 points; got 0"),
    ({"indices": [48]}, 400, "indices must be in [0, 48)"),
    ({"indices": [-1]}, 400, "indices must be in"),
    ({"indices": [1.5]}, 400, "list of integers"),
    ({"indices": [True]}, 400, "list of integers"),
    ({"indices": "1,2"}, 400, "list of integers"),
    ({"indices": [1], "key": "pca-nope"}, 404, "no embedding"),
    ({"indices": [1], "layer": "nope"}, 404, "layer 'nope'"),
    ({"indices": [1], "run": "../mlp"}, 404, "run '../mlp'"),
    ({"indices": [1], "run": 3}, 400, "string fields"),
])
def test_trails_refusals(served, logs, body, code, message):
    client, _ = served
    r = client.post(BASE + "trails", json={"run": "mlp", "layer": "hidden", "key": _key(logs), **body})
    assert r.status_code == code and message in r.json["error"], r.json


def test_trails_needs_a_post(served):
    client, _ = served
    assert _get(client, "trails").status_code == 405
    assert client.post(BASE + "trails", data=b"[1]", content_type="application/json").status_code == 400


# --------------------------------------------------------------------------------------------------------------
# Density
# --------------------------------------------------------------------------------------------------------------

def test_density_route_by_class_and_all_then_cached(served, logs, monkeypatch):
    client, _ = served
    key = _key(logs)
    r = _get(client, f"density?run=mlp&layer=hidden&step=2&key={key}&by=class&levels=3")
    assert r.status_code == 200
    body = r.json
    assert body["levels"] == [0.25, 0.5, 0.75]
    labels = repviz.open_logdir(logs).run("mlp").probe.labels
    Y = repviz.open_logdir(logs).run("mlp").embeddings.read(key, "hidden", 2)
    classes = {c["class"] for c in body["contours"]}
    assert classes and classes <= set(np.unique(labels).tolist())
    assert {c["level"] for c in body["contours"]} == {0.25, 0.5, 0.75}
    for contour in body["contours"]:
        for path in contour["paths"]:
            xy = np.reshape(path, (-1, 2))
            span = Y.max(axis=0) - Y.min(axis=0)
            assert (xy >= Y.min(axis=0) - span).all() and (xy <= Y.max(axis=0) + span).all()
    overall = _get(client, f"density?run=mlp&layer=hidden&step=2&key={key}").json  # by=all, 4 levels
    assert overall["levels"] == [0.2, 0.4, 0.6, 0.8] and {c["class"] for c in overall["contours"]} == {None}
    assert all(c["paths"] for c in overall["contours"])

    def no_kde(*args):
        raise AssertionError("cached contours were computed again")

    monkeypatch.setattr(compare, "density_contours", no_kde)
    assert _get(client, f"density?run=mlp&layer=hidden&step=2&key={key}&by=class&levels=3").json == body


@pytest.mark.parametrize("query, code, message", [
    ("levels=11", 400, "levels must be in [1, 10]"), ("levels=0", 400, "levels must be in"),
    ("by=label", 400, "by must be 'all' or 'class'"), ("key=pca-nope", 404, "no embedding"),
    ("layer=nope", 404, "layer 'nope'"), ("step=7", 404, "no step 7"),
])
def test_density_refusals(served, logs, query, code, message):
    client, _ = served
    args = {"run": "mlp", "layer": "hidden", "step": "1", "key": _key(logs)}
    args.update(dict([query.split("=")]))
    r = _get(client, "density?" + "&".join(f"{a}={b}" for a, b in args.items()))
    assert r.status_code == code and message in r.json["error"], r.json


# --------------------------------------------------------------------------------------------------------------
# meta-SNE: rows and the job
# --------------------------------------------------------------------------------------------------------------

def test_meta_result_rows(served):
    client, _ = served
    rows = _get(client, "meta_result?name=meta-test").json["rows"]
    assert rows[0] == {"run": "mlp", "layer": "hidden", "step": 0, "depth": 0, "n_layers": 2, "landmark": False}
    assert rows[4] == {"run": "mlp", "layer": "out", "step": 1, "depth": 1, "n_layers": 2, "landmark": False}


def test_meta_options_are_those_of_repviz_meta():
    from repviz.meta import EMBEDDINGS, METRICS, TRANSFORMS

    assert plugin_module.META_OPTIONS == {"transform": tuple(TRANSFORMS), "metric": tuple(METRICS),
                                          "embedding": tuple(EMBEDDINGS)}


@pytest.mark.parametrize("body, code", [
    ({"transform": "nope"}, 400), ({"metric": 3}, 400), ({"embedding": "umap"}, 400),
])
def test_compute_meta_refuses_bad_bodies(served, body, code):
    client, _ = served
    r = client.post(BASE + "compute_meta", json=body)
    assert r.status_code == code and r.json["error"]
    assert _get(client, "compute_meta").status_code == 405
    assert client.post(BASE + "compute_meta", data=b"nope", content_type="application/json").status_code == 400


def test_compute_meta_job_then_listed_with_rows(logs, tmp_path):
    # its own copy: the job writes a result, which the other tests' index must not see
    shutil.copytree(logs / "mlp", tmp_path / "mlp")
    shutil.copytree(logs / "bare", tmp_path / "bare")
    client, plugin = _client(tmp_path)
    try:
        body = {"transform": "cka", "metric": "angle", "embedding": "mds"}
        r = client.post(BASE + "compute_meta", json=body)
        assert r.status_code == 202, r.json
        job = r.json["job"]
        assert job["kind"] == "meta" and job["params"] == body and job["state"] in ("queued", "running")
        assert client.post(BASE + "compute_meta", json=body).json["job"]["id"] == job["id"]  # deduplicated
        job = _wait_job(client, job["id"])
        assert job["state"] == "done", job
        assert job["key"] == "meta-cka-angle-mds" and job["progress"]["stage"]
        deadline = time.time() + 15
        while "meta-cka-angle-mds" not in _get(client, "runs").json["meta"] and time.time() < deadline:
            time.sleep(0.5)
        result = _get(client, "meta_result?name=meta-cka-angle-mds").json
        rows = result["rows"]
        assert len(rows) == len(result["keys"]) == 2 * 2 * 3 + 1  # 2 runs x 2 layers x 3 snapshots + input
        (landmark,) = [row for row in rows if row["landmark"]]
        assert landmark["depth"] is None and landmark["run"] == "<input>"
        assert {row["depth"] for row in rows if not row["landmark"]} == {0, 1}
        assert result["params"]["transform"] == "cka" and result["robustness"] is not None
        r = client.post(BASE + "compute", json={"run": "bare", "layer": "out", "method": "pca"})
        assert r.json["job"]["kind"] == "embed" and r.json["job"]["params"] is None
        _wait_job(client, r.json["job"]["id"])
    finally:
        plugin.jobs.close()


def test_compute_meta_without_runs_is_404(tmp_path):
    client, plugin = _client(tmp_path)
    r = client.post(BASE + "compute_meta", json={})
    assert r.status_code == 404 and "no runs" in r.json["error"]


# --------------------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["..", "../mlp", "/etc/passwd", "%2e%2e%2fmlp", "mlp%00", "plugins"])
def test_traversal_in_names_is_refused(served, logs, name):
    client, _ = served
    from urllib.parse import quote

    q, key = quote(name, safe="%"), _key(logs)
    for route in (f"knn?run={q}&layer=hidden&step=0&index=0", f"knn?run=mlp&layer={q}&step=0&index=0",
                  f"neighborhood_change?run=mlp&layer=hidden&step=0&run2={q}&layer2=hidden&step2=0",
                  f"density?run=mlp&layer=hidden&step=0&key={q}", f"density?run={q}&layer=hidden&step=0&key={key}"):
        r = _get(client, route)
        assert r.status_code in (400, 404), route
        assert r.headers["Content-Type"].startswith("application/json")


def test_comparison_routes_load_no_keras_tensorflow_numba_in_the_server(logs):
    """k-NN graphs are computed in the worker process; everything else of these routes is numpy, scipy and
    contourpy in TensorBoard's process."""
    repo = Path(__file__).resolve().parents[1]
    script = textwrap.dedent(f"""
        import sys
        from tensorboard.backend import application
        from tensorboard.plugins import base_plugin
        from werkzeug import test, wrappers
        from tensorboard_plugin_repviz.loader import RepvizLoader
        plugin = RepvizLoader().load(base_plugin.TBContext(logdir={str(logs)!r}))
        client = test.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        key = {_key(logs)!r}
        base = "/data/plugin/repviz/"
        for route in ["knn?run=mlp&layer=hidden&step=1&index=3", "density?run=mlp&layer=out&step=1&key=" + key,
                      "neighborhood_change?run=mlp&layer=hidden&step=1&run2=mlp&layer2=out&step2=1&k=4",
                      "meta_result?name=meta-test"]:
            assert client.get(base + route).status_code == 200, route
        body = {{"run": "mlp", "layer": "hidden", "key": key, "indices": [1, 2]}}
        assert client.post(base + "trails", json=body).status_code == 200
        plugin.jobs.close()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("keras", "tensorflow", "numba")
                     or m.startswith(("repviz.manifold", "repviz.neighbors"))))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tb_plugin"),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_computation_done_before_its_callback_is_added_does_not_deadlock(tmp_path):
    """Regression: a future already done runs its done-callback at once, in the submitting thread; the manager
    must not hold its lock then (it did, and a fast k-NN graph hung the request)."""
    import threading
    from concurrent.futures import Future

    from tensorboard_plugin_repviz.jobs import JobManager

    class DonePool:
        def submit(self, fn, *args):
            future = Future()
            future.set_result(fn(*args))
            return future

    jobs = JobManager(str(tmp_path), quick_pool=DonePool(), max_pending=1)
    result = []
    caller = threading.Thread(target=lambda: result.append(jobs.calls([(("k",), sum, ([1, 2],))])), daemon=True)
    caller.start()
    caller.join(timeout=30)
    assert result == [[3]]
    assert jobs.calls([(("other",), sum, ([3, 4],))]) == [7]  # the finished call no longer waits
