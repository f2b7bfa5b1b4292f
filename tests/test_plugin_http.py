"""The plugin's HTTP surface against hostile or broken requests: cross-site POSTs queue no job, methods a route
does not take answer 405, malformed and stalled bodies answer 4xx quickly, damaged stored arrays answer one line
naming the file, and a seeded fuzz of every route never gets a 5xx or a non-JSON error.

Requests go through werkzeug's test client, except the two that need a real connection (a body shorter than its
Content-Length, the request-line limit), which use a server on 127.0.0.1. The log directory is written through the
store (no Keras), and the job pools never run a job (queued jobs are what the cross-site tests count)."""

from __future__ import annotations

import io
import json
import random
import socket
import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from tensorboard import program
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard_plugin_repviz import loader
from tensorboard_plugin_repviz.jobs import JobManager
from werkzeug import (
    serving,
    wrappers,
)
from werkzeug import test as wtest

import repviz
from repviz.meta.result import MetaResult

BASE = "/data/plugin/repviz/"
N = 30
GET_ROUTES = ["runs", "info", "meta_result", "knn", "density", "jobs", "coords", "labels", "predictions", "ids",
              "thumbnails", "neighborhood_change", "static/index.js"]
POST_ROUTES = ["compute", "compute_meta", "trails"]
HOST = "http://localhost"  # werkzeug's test client's scheme://host


class _IdlePool:
    """Jobs stay queued: what was accepted is counted without computing it."""

    def submit(self, *args):
        return Future()

    def shutdown(self, wait=True, cancel_futures=False):
        pass


class _InlinePool:
    """Short computations (k-NN graphs) run in the request's thread."""

    def submit(self, fn, *args):
        future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as e:  # handed to the caller as the future's exception
            future.set_exception(e)
        return future

    def shutdown(self, wait=True, cancel_futures=False):
        pass


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, new_run):
    """Runs "a" and "b" (one layer "dense", 30 probe points with labels, thumbnails and predictions, steps 0-2)
    with PCA embeddings, and a meta-SNE result "m"."""
    root = tmp_path_factory.mktemp("http_logs")
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        writer = new_run(root / name)
        writer.write_probe(np.arange(N), np.arange(N) % 3, rng.integers(0, 255, (N, 4, 4), dtype=np.uint8))
        for step in range(3):
            writer.write_activation("dense", step, rng.normal(size=(N, 4)).astype(np.float32))
            writer.write_prediction(step, rng.random((N, 3)).astype(np.float32))
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    keys = [(run, "dense", s) for run in ("a", "b") for s in range(3)]
    MetaResult(keys, rng.normal(size=(6, 2)), np.zeros((6, 6)), {"transform": "dist"}).save(root, "m")
    return root


def _served(root):
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(root)))
    plugin.jobs = JobManager(str(root), pool=_IdlePool(), quick_pool=_InlinePool())
    return wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response), plugin


@pytest.fixture
def served(logdir):
    client, plugin = _served(logdir)
    yield client, plugin
    plugin.jobs.close()


def _key(root):
    return repviz.open_logdir(root).run("a").embeddings.key("pca")


def _valid_queries(root) -> dict[str, str]:
    key = _key(root)
    return {"info": "run=a&layer=dense&step=1", "meta_result": "name=m", "knn": "run=a&layer=dense&step=1&index=3",
            "density": f"run=a&layer=dense&step=1&key={key}", "coords": f"run=a&layer=dense&step=1&key={key}",
            "labels": "run=a", "predictions": "run=a&step=1", "ids": "run=a", "thumbnails": "run=a&count=4",
            "neighborhood_change": "run=a&layer=dense&step=0&run2=b&layer2=dense&step2=2"}


def _valid_bodies(root) -> dict[str, dict]:
    return {"compute": {"run": "a", "layer": "dense", "method": "tsne"}, "compute_meta": {},
            "trails": {"run": "a", "layer": "dense", "key": _key(root), "indices": [0, 5]}}


def _json_error(r) -> str:
    assert r.headers["Content-Type"].startswith("application/json"), (r.status_code, r.data[:200])
    error = r.json["error"]
    assert error and "\n" not in error and "Traceback" not in error
    return error


# --------------------------------------------------------------------------------------------------------------
# Cross-site requests
# --------------------------------------------------------------------------------------------------------------

CROSS_SITE = {
    "text/plain": dict(content_type="text/plain"),
    "form-encoded": dict(content_type="application/x-www-form-urlencoded"),
    "multipart": dict(content_type="multipart/form-data; boundary=x"),
    "no content type": dict(),
    "foreign Origin": dict(content_type="application/json", headers={"Origin": "http://evil.example"}),
    "foreign Origin port": dict(content_type="application/json", headers={"Origin": "http://localhost:6007"}),
    "Origin null": dict(content_type="application/json", headers={"Origin": "null"}),
    "cross-site fetch": dict(content_type="application/json", headers={"Sec-Fetch-Site": "cross-site"}),
    "same-site fetch": dict(content_type="application/json", headers={"Sec-Fetch-Site": "same-site"}),
}
SAME_ORIGIN = {
    "same Origin": dict(content_type="application/json", headers={"Origin": HOST}),
    "same-origin fetch": dict(content_type="application/json",
                              headers={"Origin": HOST, "Sec-Fetch-Site": "same-origin"}),
    "same-origin fetch behind a proxy": dict(content_type="application/json",  # the proxy rewrote Host
                                             headers={"Origin": "https://proxy.example", "Sec-Fetch-Site": "same-origin"}),
    "no Origin (curl)": dict(content_type="application/json"),
    "charset": dict(content_type="application/json; charset=utf-8"),
}


@pytest.mark.parametrize("case", CROSS_SITE)
@pytest.mark.parametrize("route", ["compute", "compute_meta"])
def test_cross_site_posts_queue_no_job(served, logdir, route, case):
    client, _ = served
    r = client.post(BASE + route, data=json.dumps(_valid_bodies(logdir)[route]), **CROSS_SITE[case])
    assert r.status_code in (403, 415), r.status_code
    assert ("Origin" in case or "fetch" in case) == (r.status_code == 403)
    _json_error(r)
    assert client.get(BASE + "jobs").json["jobs"] == []


@pytest.mark.parametrize("case", SAME_ORIGIN)
@pytest.mark.parametrize("route", ["compute", "compute_meta"])
def test_same_origin_posts_queue_a_job(served, logdir, route, case):
    client, _ = served
    r = client.post(BASE + route, data=json.dumps(_valid_bodies(logdir)[route]), **SAME_ORIGIN[case])
    assert r.status_code == 202, r.data
    assert [job["id"] for job in client.get(BASE + "jobs").json["jobs"]] == [r.json["job"]["id"]]


def test_cross_site_trails_refused(served, logdir):
    client, _ = served
    body = json.dumps(_valid_bodies(logdir)["trails"])
    assert client.post(BASE + "trails", data=body, content_type="application/json").status_code == 200
    assert client.post(BASE + "trails", data=body, content_type="text/plain").status_code == 415
    r = client.post(BASE + "trails", data=body, content_type="application/json", headers={"Origin": "http://x.y"})
    assert r.status_code == 403 and "origin" in _json_error(r).lower()


CROSS_SITE_GET = {"cross-site fetch": {"Sec-Fetch-Site": "cross-site"}, "same-site fetch": {"Sec-Fetch-Site": "same-site"},
                  "foreign Origin": {"Origin": "http://evil.example"}, "Origin null": {"Origin": "null"}}
SAME_ORIGIN_GET = {"same-origin fetch": {"Sec-Fetch-Site": "same-origin"}, "typed URL": {"Sec-Fetch-Site": "none"},
                   "same Origin": {"Origin": HOST}, "no Origin (curl)": {}}


class _CountingPool(_InlinePool):
    def __init__(self):
        self.calls = 0

    def submit(self, fn, *args):
        self.calls += 1
        return super().submit(fn, *args)


@pytest.mark.parametrize("case", CROSS_SITE_GET)
def test_cross_site_gets_of_data_routes_are_refused(logdir, case):
    """Another site's page (an <img>, a no-cors fetch) gets 403 from every data route and starts no work (no k-NN
    graph is computed); the page's own files still load."""
    client, plugin = _served(logdir)
    plugin.jobs = JobManager(str(logdir), pool=_IdlePool(), quick_pool=(pool := _CountingPool()))
    queries = _valid_queries(logdir)
    for route in GET_ROUTES:
        r = client.get(BASE + route + "?" + queries.get(route, ""), headers=CROSS_SITE_GET[case])
        if route.startswith("static/"):
            assert r.status_code == 200, route
        else:
            assert r.status_code == 403 and "refused" in _json_error(r), (route, r.status_code)
    assert pool.calls == 0
    plugin.jobs.close()


@pytest.mark.parametrize("case", SAME_ORIGIN_GET)
def test_same_origin_gets_are_served(logdir, case):
    client, plugin = _served(logdir)
    queries = _valid_queries(logdir)
    for route in GET_ROUTES:
        r = client.get(BASE + route + "?" + queries.get(route, ""), headers=SAME_ORIGIN_GET[case])
        assert r.status_code == 200, (route, r.status_code, r.data[:200])
    plugin.jobs.close()


# --------------------------------------------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["PUT", "DELETE", "TRACE", "PATCH", "POST", "OPTIONS"])
def test_get_routes_refuse_other_methods(served, method):
    client, _ = served
    for route in GET_ROUTES:
        r = client.open(BASE + route, method=method, data=b"{}", content_type="application/json")
        assert r.status_code == 405, (route, r.status_code)
        assert r.headers["Allow"] == "GET, HEAD", route
        _json_error(r)


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "TRACE", "PATCH"])
def test_post_routes_refuse_other_methods(served, method):
    client, _ = served
    for route in POST_ROUTES:
        r = client.open(BASE + route, method=method)
        assert r.status_code == 405 and r.headers["Allow"] == "POST", (route, r.status_code)
        if method != "HEAD":
            _json_error(r)
    assert client.get(BASE + "jobs").json["jobs"] == []


def test_get_routes_still_answer_head(served, logdir):
    client, _ = served
    r = client.head(BASE + "labels?run=a")
    assert r.status_code == 200 and r.data == b""


# --------------------------------------------------------------------------------------------------------------
# Malformed bodies and parameters
# --------------------------------------------------------------------------------------------------------------

def _trails_body(root, **fields) -> bytes:
    return json.dumps({**_valid_bodies(root)["trails"], **fields}).encode()


MALFORMED = {
    "index 2**63": lambda root: _trails_body(root, indices=[2**63]),
    "index -2**63-1": lambda root: _trails_body(root, indices=[-2**63 - 1]),
    "index 1e400": lambda root: _trails_body(root)[:-2] + b", 1e400]}",
    "nested JSON": lambda root: b"[" * 30000 + b"]" * 30000,
    "nested field": lambda root: _trails_body(root)[:-7] + b"[" * 20000 + b"]" * 20000 + b"]}",
    "oversized body": lambda root: b'{"run": "' + b"a" * (70 << 10) + b'"}',
    "not UTF-8": lambda root: b'{"run": "\xff\xfe"}',
    "NaN": lambda root: _trails_body(root, indices=float("nan")),
}


@pytest.mark.parametrize("route, case", [("trails", case) for case in MALFORMED] + [
    (route, case) for route in ("compute", "compute_meta") for case in ("nested JSON", "oversized body", "not UTF-8")])
def test_malformed_bodies_are_4xx_json(served, logdir, route, case):
    client, _ = served
    started = time.monotonic()
    r = client.post(BASE + route, data=MALFORMED[case](logdir), content_type="application/json")
    assert 400 <= r.status_code < 500, (r.status_code, r.data[:200])
    _json_error(r)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("route", POST_ROUTES)
def test_content_length_larger_than_the_body_is_400(served, route):
    client, _ = served
    body = b'{"run": "a"}'
    r = client.open(BASE + route, method="POST", input_stream=io.BytesIO(body), content_type="application/json",
                    environ_overrides={"CONTENT_LENGTH": "1000"})
    assert r.status_code == 400 and "Content-Length" in _json_error(r)


def test_long_names_are_400_json(served):
    client, _ = served
    r = client.get(BASE + "labels?run=" + "x" * 30000)
    assert r.status_code == 400 and "too long" in _json_error(r)


@pytest.fixture
def live_server(logdir):
    """The plugin behind TensorBoard's own request handler on 127.0.0.1 (a real connection)."""
    client, plugin = _served(logdir)
    server = serving.make_server("127.0.0.1", 0, client.application, threaded=True,
                                 request_handler=program._WSGIRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_port
    server.shutdown()
    plugin.jobs.close()


def _exchange(port: int, request: bytes, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def test_a_stalled_body_is_refused_without_holding_the_thread(live_server, monkeypatch):
    """Content-Length says 1000, 12 bytes come and the client waits: the server answers 400 after its read
    timeout (shortened here from its 5 s) instead of waiting for the client to give up."""
    from tensorboard_plugin_repviz import web

    monkeypatch.setattr(web, "BODY_TIMEOUT", 0.5)
    request = (b"POST " + BASE.encode() + b"trails HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: 1000\r\n\r\n" + b'{"run": "a",')
    started = time.monotonic()
    try:
        answer = _exchange(live_server, request, timeout=20)
    except TimeoutError:
        pytest.fail("the server held the request for 20 s")
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert time.monotonic() - started < 10


def test_request_line_limit_is_the_http_servers(live_server):
    """A name under the 64 KiB request line gets our one-line 400; past it, Python's http.server answers 414
    (an HTML page) before TensorBoard or the plugin see the request."""
    for length, status in ((30000, b"400"), (70000, b"414")):
        request = b"GET " + BASE.encode() + b"labels?run=" + b"x" * length + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        answer = _exchange(live_server, request, timeout=20)
        assert answer.split(b" ")[1] == status, answer[:200]


# --------------------------------------------------------------------------------------------------------------
# Damaged stored arrays
# --------------------------------------------------------------------------------------------------------------

def _damage(path, kind):
    raw = path.read_bytes()
    path.write_bytes({"empty": b"", "truncated header": raw[:30], "truncated data": raw[:-40],
                      "garbage": b"x" * len(raw), "bad dtype": raw.replace(b"'<f", b"'<z", 1)}[kind])


DAMAGE = ["empty", "truncated header", "truncated data", "garbage", "bad dtype"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_arrays_answer_one_line_naming_the_file(logdir, tmp_path, kind):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir, root)
    _damage(root / "a" / "plugins" / "repviz" / "activations" / "dense" / "1.npy", kind)
    _damage(root / "plugins" / "repviz-meta" / "m" / "coords.npy", kind)
    client, plugin = _served(root)
    try:
        for route, name in (("knn?run=a&layer=dense&step=1&index=0", "1.npy"),
                            ("neighborhood_change?run=a&layer=dense&step=1&run2=b&layer2=dense&step2=1", "1.npy"),
                            ("meta_result?name=m", "coords.npy")):
            r = client.get(BASE + route)
            assert r.status_code == 500, (route, r.status_code)
            error = _json_error(r)
            assert name in error and "damaged" in error, (route, error)
        assert client.get(BASE + "knn?run=a&layer=dense&step=2&index=0").status_code == 200  # the rest is usable
    finally:
        plugin.jobs.close()


# --------------------------------------------------------------------------------------------------------------
# Fuzz
# --------------------------------------------------------------------------------------------------------------

GARBAGE = ["", "a", "b", "dense", "m", "-1", "0", "1", "2", "3", "29", "30", "1e3", "0x10", "9" * 30, "nan", "inf",
           "..", "../a", "a/../b", "%00", "\x00", "é", "𝄞", "a" * 3000, "[]", "{}", "null", "true", " 1", "1 ",
           "+1", "-0", "all", "class", "pca", "tsne"]
PARAMETERS = ["run", "layer", "step", "key", "index", "k", "name", "by", "levels", "start", "count", "run2",
              "layer2", "step2", "x"]
BODY_VALUES = [None, True, 0, -1, 2**63, 1.5, float("inf"), "", "a", "dense", [], [0], [2**63], [-2**63 - 1],
               [2**70], [-1], [[0]], [0, 1.5], [True], {"a": 1}, "x" * 5000, list(range(600)), "dist", "mds",
               json.loads("[" * 500 + "]" * 500)]


def _fuzz_request(rng: random.Random, root, valid_queries: dict, valid_bodies: dict) -> dict:
    route = rng.choice(GET_ROUTES + POST_ROUTES * 3 + ["static/nope.js", "static/a/../index.js"])
    own = "POST" if route in POST_ROUTES else rng.choice(["GET", "GET", "HEAD"])
    method = own if rng.random() < 0.85 else rng.choice(["GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
    query = valid_queries.get(route, "")
    params = dict(p.split("=", 1) for p in query.split("&") if p)
    for _ in range(rng.randrange(4)):
        params[rng.choice(PARAMETERS)] = rng.choice(GARBAGE)
    if rng.random() < 0.2:
        params.pop(rng.choice(list(params) or ["x"]), None)
    body = dict(valid_bodies.get(route, {}))
    for _ in range(rng.randrange(3)):
        body[rng.choice(["run", "layer", "key", "method", "indices", "indices", "transform", "metric"])] = \
            rng.choice(BODY_VALUES)
    data = json.dumps(body).encode()
    if rng.random() < 0.15:
        data = rng.choice([bytes(rng.randrange(256) for _ in range(rng.randrange(64))), b"[" * rng.randrange(60000),
                           data[:rng.randrange(len(data) + 1)], b'{"indices": ' + b"[" * 3000 + b"]" * 3000 + b"}"])
    content_type = rng.choice(["application/json"] * 8 + ["text/plain", ""])
    return dict(path=BASE + route, method=method, query_string=params, data=data if method == "POST" else None,
                content_type=content_type or None)


def test_fuzz_every_route_gives_no_5xx_and_json_errors(served, logdir):
    client, _ = served
    rng = random.Random(20261125)
    valid_queries, valid_bodies = _valid_queries(logdir), _valid_bodies(logdir)
    counts = {"requests": 0, "5xx": 0, "2xx": 0}
    failures = []
    for _ in range(1500):
        request = _fuzz_request(rng, logdir, valid_queries, valid_bodies)
        started = time.monotonic()
        r = client.open(**request)
        counts["requests"] += 1
        assert time.monotonic() - started < 10, request  # no hang
        if r.status_code >= 500:
            counts["5xx"] += 1
            failures.append((request, r.status_code, r.data[:200]))
        elif r.status_code < 300:
            counts["2xx"] += 1
        elif r.status_code != 304 and request["method"] != "HEAD":
            try:
                _json_error(r)
            except (AssertionError, ValueError, KeyError, TypeError):
                failures.append((request, r.status_code, r.data[:200]))
    print(counts)
    assert not failures, failures[:5]
    assert counts["2xx"] > 40  # the fuzz reaches the routes' work, not only their refusals
