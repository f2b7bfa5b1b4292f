"""The notebook widget's Python side (no browser, no kernel): show() and its one-line errors, the traits and their
checks, the page's requests answered by the plugin's own routes with binary buffers (equal to the HTTP answers),
pushes for live updates and the static export."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

anywidget = pytest.importorskip("anywidget")
import traitlets  # noqa: E402
from ipywidgets.widgets.widget import _remove_buffers  # noqa: E402
from tensorboard.backend import application  # noqa: E402
from tensorboard.plugins import base_plugin  # noqa: E402
from tensorboard_plugin_repviz import loader, widget  # noqa: E402
from tensorboard_plugin_repviz.plugin import call  # noqa: E402
from werkzeug import test as wtest  # noqa: E402
from werkzeug import wrappers  # noqa: E402

import repviz  # noqa: E402

N = 30
BASE = "/data/plugin/repviz/"


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, small_logdir):
    """Runs "a" and "b" (one layer "dense", 30 probe points with labels, thumbnails and predictions, steps 0-2)
    with PCA embeddings."""
    root = small_logdir(tmp_path_factory.mktemp("widget_logs"), runs=("a", "b"), thumbnails=True, predictions=True)
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    return root


class Sent:
    """What a widget sends to its front end, captured instead of a comm."""

    def __init__(self, w):
        self.messages = []
        w.send = lambda content, buffers=None: self.messages.append((content, buffers))


@pytest.fixture
def shown(logdir):
    w = repviz.show(logdir, run="a")
    yield w, Sent(w)
    w.close()


def _key(root) -> str:
    return repviz.open_logdir(root).run("a").embeddings.key("pca")


# --- show() -------------------------------------------------------------------------------------------------------

def test_show_is_the_package_export_and_resolves_what_the_tab_would_show(logdir):
    assert repviz.show is widget.show
    w = repviz.show(logdir)
    assert isinstance(w, anywidget.AnyWidget)
    assert (w.run, w.layer, w.method, w.step, w.view) == ("a", "dense", _key(logdir), 2, "main")
    assert repviz.show(logdir, run="b", method="pca", step=1).method == repviz.open_logdir(logdir).run("b").embeddings.key("pca")
    similarity = repviz.show(logdir, view="similarity", runs=("b", "a"))
    assert (similarity.view, similarity.run, similarity._runs) == ("similarity", "b", ["b", "a"])


@pytest.mark.parametrize("kwargs, message", [
    (dict(run="zz"), "run 'zz' is not in .*; it has: 'a', 'b'$"),
    (dict(run="a", layer="conv9"), "layer 'conv9' is not in run 'a'; it has: 'dense'$"),
    (dict(run="a", method="tsne"), "method 'tsne' has no embedding of layer 'dense' in run 'a'; stored: pca"),
    (dict(view="similarity", runs=("a", "c")), "run 'c' is not in .*; it has: 'a', 'b'$"),
    (dict(view="table"), "view must be one of main, grid, runs, meta, similarity; got 'table'$"),
    (dict(step="last"), "step must be an integer snapshot step; got 'last'$"),
])
def test_a_missing_name_is_one_line_naming_what_exists(logdir, kwargs, message):
    with pytest.raises(ValueError) as e:
        repviz.show(logdir, **kwargs)
    assert re.search(message, str(e.value)) and "\n" not in str(e.value)


def test_a_log_directory_without_runs_waits_and_a_named_run_in_it_is_one_line(tmp_path):
    waiting = repviz.show(tmp_path / "nowhere")  # not made yet: the widget waits for the first run
    assert (waiting.run, waiting.layer, waiting.method, waiting.step) == (None, None, None, None)
    waiting.close()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no repviz run yet"):
        repviz.show(tmp_path / "empty", run="a")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"^log directory '.*file' is a file \(give the directory"):
        repviz.show(tmp_path / "file")


def test_without_anywidget_show_says_how_to_install_it(logdir, monkeypatch):
    monkeypatch.setattr(widget, "anywidget", None)
    with pytest.raises(ImportError, match=r'^repviz.show needs anywidget: pip install "\.\[notebook\]" in the repviz '
                                          r'checkout, or pip install "anywidget>=0\.9"$'):
        repviz.show(logdir)


# --- traits -------------------------------------------------------------------------------------------------------

def test_selected_is_an_int_array_sent_as_binary_and_read_back(shown):
    w, _ = shown
    w.selected = [3, 14, 15]
    assert w.selected.dtype == np.int64 and w.selected.tolist() == [3, 14, 15]
    _, buffer_paths, buffers = _remove_buffers(w.get_state())
    assert ["selected"] in buffer_paths
    assert np.frombuffer(bytes(buffers[buffer_paths.index(["selected"])]), "<f8").tolist() == [3, 14, 15]
    # the page's selection arrives as float64 bytes, and is taken as it comes (ids of any run it shows)
    w.set_state({"selected": memoryview(np.array([1, 2, 29], "<f8").tobytes())})
    assert w.selected.dtype == np.int64 and w.selected.tolist() == [1, 2, 29]


def test_selected_set_from_python_is_checked_in_one_line(shown):
    w, _ = shown
    with pytest.raises(traitlets.TraitError) as e:
        w.selected = [2, 30, 99]
    assert str(e.value) == "probe ids [30, 99] are not in run 'a' (30 probe points, ids 0 … 29)"
    with pytest.raises(traitlets.TraitError, match="1-D array of integer probe ids; got float64"):
        w.selected = [0.5]
    assert w.selected.tolist() == []


def test_choices_set_from_python_are_checked_and_resolved(shown, logdir):
    w, _ = shown
    w.method = "pca"  # a method's name becomes its stored key
    assert w.method == _key(logdir)
    w.run = "b"
    assert w.run == "b"
    with pytest.raises(traitlets.TraitError, match=r"^layer 'nope' is not in run 'b'; it has: 'dense'$"):
        w.layer = "nope"
    with pytest.raises(traitlets.TraitError, match=r"^run 'zz' is not in"):
        w.run = "zz"
    seen = []
    w.observe(lambda change: seen.append(change["new"]), "hovered")
    w.set_state({"hovered": 7, "step": 1})  # what the page reports
    assert (w.hovered, w.step, seen) == (7, 1, [7])


# --- the page's requests --------------------------------------------------------------------------------------------

def test_points_travel_as_binary_buffers(shown, logdir):
    w, sent = shown
    params = {"run": "a", "layer": "dense", "step": "1", "key": _key(logdir)}
    w._answer({"type": "request", "id": "v:1", "route": "coords", "params": params, "method": "GET", "headers": {}})
    (content, buffers), = sent.messages
    assert content["type"] == "response" and content["id"] == "v:1" and content["status"] == 200
    assert content["headers"]["X-Repviz-Shape"] == f"{N},2"
    assert not any(isinstance(v, (list, tuple)) for v in content.values() if v is not content["headers"])
    assert len(json.dumps(content)) < 1000  # the points are not in the message itself
    stored = repviz.open_logdir(logdir).run("a").embeddings.read(_key(logdir), "dense", 1)
    np.testing.assert_array_equal(np.frombuffer(buffers[0], "<f4").reshape(N, 2), stored)


def test_requests_are_answered_off_the_kernel_thread(shown, logdir):
    w, sent = shown
    w._on_message(w, {"type": "request", "id": "v:2", "route": "ids", "params": {"run": "a"}}, [])
    w._on_message(w, {"type": "other"}, [])  # not ours: ignored
    w._on_message(w, {"type": "request", "id": "v:3", "route": "ids", "params": {"run": "a"}, "method": "GET",
                      "headers": {"X": "\n"}}, [])  # a header werkzeug refuses: one line back, no silence
    w._pool.shutdown(wait=True)
    (content, buffers), (bad, bad_buffers) = sorted(sent.messages, key=lambda m: m[0]["id"])
    assert content["id"] == "v:2" and np.frombuffer(buffers[0], "<f8").tolist() == list(range(N))
    assert bad["id"] == "v:3" and bad["status"] == 400 and "bad request" in json.loads(bad_buffers[0])["error"]


def _http(logdir):
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    return wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response), plugin


def _requests(logdir):
    key = _key(logdir)
    return [("runs", {}), ("info", {"run": "a", "layer": "dense", "step": 1, "key": key}),
            ("coords", {"run": "a", "layer": "dense", "step": 2, "key": key}), ("labels", {"run": "a"}),
            ("ids", {"run": "b"}), ("predictions", {"run": "a", "step": 0}),
            ("thumbnails", {"run": "a", "start": 0, "count": 256}), ("metadata", {"run": "a"}),
            ("knn", {"run": "a", "layer": "dense", "step": 1, "index": 3}),
            ("placed", {"run": "a", "layer": "dense", "step": 1, "key": key}),
            # names that do not exist, or try to leave the log directory: the same refusals
            ("coords", {"run": "../a", "layer": "dense", "step": 1, "key": key}),
            ("coords", {"run": "a", "layer": "nope", "step": 1, "key": key}),
            ("coords", {"run": "a", "layer": "dense", "step": 9, "key": key}),
            ("labels", {}), ("thumbnails", {"run": "a", "count": "x"}), ("static/index.js", {}), ("nope", {})]


def test_the_dispatch_answers_as_the_plugin_does_over_http(logdir):
    client, http_plugin = _http(logdir)
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    try:
        for route, params in _requests(logdir):
            reply = call(plugin, route, params)
            if route.startswith("static/") or route == "nope":  # the page's files are no route of the widget
                assert reply.status == 404 and "no route" in reply.json()["error"]
                continue
            r = client.get(BASE + route, query_string=params)
            assert (reply.status, reply.body) == (r.status_code, r.data), (route, params)
            for header in ("Content-Type", "ETag", "X-Repviz-Shape"):
                assert reply.headers.get(header) == r.headers.get(header), (route, header)
            if reply.status >= 400:
                assert "\n" not in reply.json()["error"]
        # a POST: the same checks of its body, and the job it queues
        body = json.dumps({"run": "a", "layer": "nope", "method": "pca"})
        reply = call(plugin, "compute", method="POST", headers={"Content-Type": "application/json"}, body=body)
        r = client.post(BASE + "compute", data=body, content_type="application/json")
        assert (reply.status, reply.body) == (r.status_code, r.data) == (404, r.data)
        # a poll with the index's ETag: 304 as over HTTP
        tag = call(plugin, "runs").headers["ETag"]
        assert call(plugin, "runs", headers={"If-None-Match": tag}).status == 304
    finally:
        plugin.jobs.close()
        http_plugin.jobs.close()


# --- live updates ---------------------------------------------------------------------------------------------------

def test_push_sends_the_index_and_each_snapshot_once(shown, logdir):
    w, sent = shown
    w.push()
    (content, buffers), = sent.messages
    assert content["type"] == "push" and content["refresh"] is True
    entries = content["entries"]
    assert len(entries) == len(buffers)
    assert entries[0]["route"] == "runs" and entries[0]["once"] is True
    assert json.loads(buffers[0])["runs"][0]["name"] == "a"
    coords = [e["params"]["step"] for e in entries if e["route"] == "coords"]
    assert coords == [0, 1, 2]
    w.push()  # nothing new: the index alone
    (content, buffers) = sent.messages[-1]
    assert [e["route"] for e in content["entries"]] == ["runs"]


# --- the static export ----------------------------------------------------------------------------------------------

def _embedded(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="repviz-data">(.*?)</script>', html, re.DOTALL)
    return json.loads(found.group(1))


def test_save_html_is_one_file_with_the_data_and_nothing_to_fetch(shown, tmp_path, logdir):
    w, _ = shown
    w.selected = [1, 2]
    out = w.save_html(tmp_path / "view.html")
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//|@import|url\(\s*["']?https?:""", html)
    assert "<script src" not in html and "<link" not in html
    assert len(re.findall(r"<script\b", html)) == 2 and html.count("</script>") == 2
    data = _embedded(html)
    assert data["initial"] == {"view": "main", "run": "a", "layer": "dense", "method": _key(logdir), "step": 2,
                               "selectedIds": [1, 2], "runs": []}
    routes = [(e["route"], e["params"].get("step")) for e in data["entries"]]
    for step in ("0", "1", "2"):  # the slider works without a kernel
        assert ("coords", step) in routes and ("info", step) in routes
    assert {"runs", "labels", "ids", "thumbnails", "predictions"} <= {route for route, _ in routes}
    coords = next(e for e in data["entries"] if e["route"] == "coords" and e["params"]["step"] == "1")
    stored = repviz.open_logdir(logdir).run("a").embeddings.read(_key(logdir), "dense", 1)
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(coords["body"]), "<f4").reshape(N, 2), stored)
    assert not list(tmp_path.glob(".*tmp*"))


def test_save_html_refuses_a_file_over_the_cap_in_one_line(shown, tmp_path):
    w, _ = shown
    with pytest.raises(ValueError) as e:
        w.save_html(tmp_path / "big.html", max_bytes=10_000)
    assert "export fewer snapshots (save_html(path, steps=[...])) or raise max_bytes" in str(e.value)
    assert "\n" not in str(e.value) and not (tmp_path / "big.html").exists()
    small = _embedded(w.save_html(tmp_path / "one.html", steps=[1]).read_text(encoding="utf-8"))
    assert {e["params"]["step"] for e in small["entries"] if e["route"] == "coords"} == {"1"}


def test_the_module_carries_the_page_and_no_closing_script_tag():
    text = widget.module_text()
    assert text.startswith("const PAGE = ") and "export default { render }" in text
    page = json.loads(text[len("const PAGE = "):text.index(";\n")])
    assert "</script" not in page.lower() and "<!--" not in page


def test_save_html_of_the_similarity_view_holds_its_computed_heatmaps(logdir, tmp_path):
    from repviz.similarity import similarity

    for step in (0, 2):
        similarity(logdir, ["a", "b"], step)  # the defaults the view asks for first: CKA, linear, debiased
    w = repviz.show(logdir, view="similarity", runs=("a", "b"))
    data = _embedded(w.save_html(tmp_path / "sim.html").read_text(encoding="utf-8"))
    heatmaps = [e for e in data["entries"] if e["route"] == "similarity"]
    assert [e["params"]["step"] for e in heatmaps] == ["0", "2"]  # step 1 is not computed: left out
    assert heatmaps[0]["params"] == {"mode": "layers", "run": "a", "run2": "b", "measure": "cka", "kernel": "linear",
                                     "debiased": "1", "step": "0"}
    assert json.loads(heatmaps[0]["body"])["values"]
    assert data["initial"]["view"] == "similarity" and data["initial"]["runs"] == ["a", "b"]
