"""The corruption table: each kind of damage to one stored file × each command and the plugin's routes (issue #32,
items 3, 7 and 8).

A log directory of two runs, "a" and "b" (one layer "dense", 30 probe points with labels, thumbnails and
predictions, steps 0-2, PCA embeddings) and a meta-SNE result "m" is built once; each case copies it and damages one
file of run "a" (or of "m"). Then ``repviz info``, ``embed``, ``meta`` and ``export`` (through
:func:`repviz.cli.main`) and every route of the plugin must:

- end without a traceback (a command) or a generic 500 (a route); a route reading the damaged file itself may
  answer the plugin's one-line 500 naming it, or a 4xx;
- say at most one line per damaged file, on stderr, naming it (``repviz CMD: warning: ...``);
- exit with the documented status: 0 (``info``, ``meta``, ``export``: a damaged entry is left out with a warning),
  0 or 1 (``embed``: 1 when a representation could not be embedded, each reported in one line);
- leave the rest usable: run "b" listed and served, its embeddings complete;
- never serve wrong data: an activation whose dtype is not the recorded one, a non-finite embedding, a meta-SNE
  result whose keys do not match its coordinates are refused, and ``embed`` computes a damaged cached embedding
  (cut short, non-finite, sidecar unreadable) again.

Assertion messages start with what went wrong (TRACEBACK, 5XX, UNUSABLE, WRONG DATA, LINES), so a run against an
older tree can be tallied by kind.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from repviz import cli
from repviz.meta.result import MetaResult
from repviz.store import checksum, open_logdir

N = 30  # probe points
STEP = 1  # the snapshot each case damages


# --------------------------------------------------------------------------------------------------------------
# The damage
# --------------------------------------------------------------------------------------------------------------

def _root(log: Path) -> Path:
    return log / "a" / "plugins" / "repviz"


def _key(log: Path) -> str:
    return open_logdir(log).run("b").embeddings.key("pca")


def _embedding(log: Path, suffix: str) -> Path:
    return _root(log) / "embeddings" / _key(log) / "dense" / f"{STEP}{suffix}"


def _edit_json(path: Path, edit: Callable) -> None:
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def _cut(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 2)


def _append_record(log: Path, **fields) -> None:
    record = {"kind": "activation", "layer": "dense", "step": STEP, "file": f"activations/dense/{STEP}.npy",
              "dtype": "<f4", "shape": [N, 4], "crc32": "00000000", "nonfinite": 0, **fields}
    with open(_root(log) / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


def _layer_entry(manifest: dict) -> dict:
    manifest["layers"]["dense"] = "dense"
    return manifest


def _manifest_types(manifest: dict) -> dict:
    manifest.update(model="m", probe=5, step_unit=3, predictions=[1], skipped="x",
                    layers={"dense": {"stored_shape": 4, "reduction": "pca", "output_shape": "x", "class": 5}})
    return manifest


def _stray_step(log: Path) -> None:
    for suffix in (".npy", ".json"):
        shutil.copy(_embedding(log, suffix), _embedding(log, suffix).with_name(f"old{suffix}"))


def _nonfinite_embedding(log: Path) -> None:
    path = _embedding(log, ".npy")
    Y = np.load(path)
    Y[0, 0], Y[3, 1] = np.nan, np.inf
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - Y.nbytes] + Y.tobytes())  # the same header, the values changed


def _int32_activation(log: Path) -> None:
    path = _root(log) / "activations" / "dense" / f"{STEP}.npy"
    X = np.load(path)
    np.save(path, (X * 1000).astype(np.int32))  # the same shape and byte size, another dtype


def _graph_cache(log: Path) -> None:
    """A cached k-NN graph (the neighbourhood-change route's k=10) of indices out of range."""
    path = open_logdir(log).run("a").artifact("neighbor_graph").path("dense", STEP, "k10-exact", write=True)
    path.parent.mkdir(parents=True, exist_ok=True)  # the pipeline caches the graphs it scored with
    np.save(path, np.full((N, 10), 10**6, np.int64))


def _density_cache(log: Path) -> None:
    path = open_logdir(log).run("a").artifact("density").path(_key(log), "dense", STEP, "all-l4", write=True)
    path.parent.mkdir(parents=True)
    path.write_text('[{"levels": "x"}]')


def _meta_file(log: Path, name: str) -> Path:
    return log / "plugins" / "repviz-meta" / "m" / name


@dataclass(frozen=True)
class Case:
    """One damaged file: how to damage a copy of the log directory, a part of the file's name that a message about
    it names, and what the damage leaves."""

    name: str
    damage: Callable[[Path], None]
    names: str
    run_listed: bool = True  # run "a" is still listed (the damage is to one entry of it)
    recompute: bool = False  # `repviz embed` computes the embedding of STEP again
    refused: tuple[str, ...] = ()  # routes (below) that must not answer 200 with the damaged data
    # `repviz meta` compares runs over the probe set they share: a run whose probe cannot be read stops it (exit 2,
    # one line naming the file); `--runs` leaves that run out
    probe: bool = False
    recomputed: tuple[str, ...] = ()  # routes that answer 200, computing a damaged cache again


CASES = [
    Case("record: layer is a list", lambda log: _append_record(log, layer=["x"]), "records.jsonl"),
    Case("record: fields of wrong types",
         lambda log: _append_record(log, step=7, dtype=4, shape="30,4", crc32=None, nonfinite="no"), "records.jsonl"),
    Case("records.jsonl: garbage bytes", lambda log: _garbage(_root(log) / "records.jsonl"), "records.jsonl"),
    Case("manifest: layer entry is a string", lambda log: _edit_json(_root(log) / "manifest.json", _layer_entry),
         "manifest.json"),
    Case("manifest: fields of wrong types", lambda log: _edit_json(_root(log) / "manifest.json", _manifest_types),
         "manifest.json"),
    Case("manifest: garbage bytes", lambda log: _garbage(_root(log) / "manifest.json"), "manifest.json",
         run_listed=False),
    Case("method.json: an array", lambda log: _embedding(log, "").parent.parent.joinpath("method.json").write_text(
        "[]"), "method.json"),
    Case("method.json: fields of wrong types",
         lambda log: _embedding(log, "").parent.parent.joinpath("method.json").write_text(json.dumps(
             {"method": 3, "params": "x", "align": [], "default": "yes", "requests": "abc"})), "method.json"),
    Case("embedding directory: stray old.npy", _stray_step, "old.npy"),
    Case("probe directory missing", lambda log: shutil.rmtree(_root(log) / "probe"), "ids.npy", run_listed=False,
         probe=True),
    Case("probe labels: garbage bytes", lambda log: _garbage(_root(log) / "probe" / "labels.npy"), "labels.npy",
         run_listed=False, probe=True),
    Case("sidecar cut short", lambda log: _cut(_embedding(log, ".json")), f"{STEP}.json", recompute=True,
         refused=("info_key",)),
    Case("sidecar: fields of wrong types", lambda log: _embedding(log, ".json").write_text(json.dumps(
        {"source": [], "scores": "x", "init_from": 5, "params": 3, "method": []})), f"{STEP}.json", recompute=True),
    Case("sidecar: garbage bytes", lambda log: _garbage(_embedding(log, ".json")), f"{STEP}.json", recompute=True,
         refused=("info_key",)),
    Case("embedding .npy cut short", lambda log: _cut(_embedding(log, ".npy")), f"{STEP}.npy", recompute=True,
         refused=("coords",)),
    Case("embedding: NaN and inf", _nonfinite_embedding, f"{STEP}.npy", recompute=True, refused=("coords",)),
    Case("activation: int32 of the same byte size", _int32_activation, f"{STEP}.npy", refused=("knn",)),
    Case("activation .npy cut short", lambda log: _cut(_root(log) / "activations" / "dense" / f"{STEP}.npy"),
         f"{STEP}.npy", refused=("knn",)),
    Case("k-NN graph cache: indices out of range", _graph_cache, "k10-exact", recomputed=("neighborhood_change",)),
    Case("density cache: not contours", _density_cache, "all-l4", recomputed=("density",)),
    Case("meta result.json: 5 keys for 6 coordinates",
         lambda log: _edit_json(_meta_file(log, "result.json"), lambda r: {**r, "keys": r["keys"][:5]}),
         "result.json", refused=("meta_result",)),
    Case("meta result.json: fields of wrong types", lambda log: _meta_file(log, "result.json").write_text(
        json.dumps({"keys": "abc", "params": [], "info": 3})), "result.json", refused=("meta_result",)),
    Case("meta result.json: garbage bytes", lambda log: _garbage(_meta_file(log, "result.json")), "result.json",
         refused=("meta_result",)),
    Case("meta coords.npy cut short", lambda log: _cut(_meta_file(log, "coords.npy")), "coords.npy",
         refused=("meta_result",)),
]
IDS = [c.name for c in CASES]


@pytest.fixture(scope="module")
def base(tmp_path_factory, small_logdir, new_run) -> Path:
    """Runs "a" and "b" (small_logdir's, continued with thumbnails and predictions) with PCA embeddings of every
    snapshot, and the meta-SNE result "m" over both."""
    import repviz

    root = small_logdir(tmp_path_factory.mktemp("corruption") / "logs", runs=("a", "b"))
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        writer = new_run(root / name)  # the same model and probe: the run goes on
        writer.write_probe(np.arange(N), np.arange(N) % 3, rng.integers(0, 255, (N, 4, 4), dtype=np.uint8))
        for step in range(3):
            writer.write_prediction(step, rng.random((N, 3)).astype(np.float32))
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    keys = [(run, "dense", s) for run in ("a", "b") for s in range(3)]
    MetaResult(keys, rng.normal(size=(6, 2)), np.zeros((6, 6)), {"transform": "dist"}).save(root, "m")
    return root


@pytest.fixture
def damaged(request, base, tmp_path) -> tuple[Case, Path]:
    case = request.param
    log = tmp_path / "logs"
    shutil.copytree(base, log)
    case.damage(log)
    return case, log


# --------------------------------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------------------------------

def _command(argv: list[str], capsys) -> tuple[int, str, str]:
    """``repviz ARGV``: an exception leaving :func:`repviz.cli.main` is what prints a traceback."""
    try:
        status = cli.main(argv)
    except Exception as e:
        pytest.fail(f"TRACEBACK repviz {argv[0]}: {type(e).__name__}: {e}")
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, f"TRACEBACK {err[-500:]}"
    lines = err.splitlines()
    assert all(line.startswith(f"repviz {argv[0]}") for line in lines), f"LINES {err[-800:]}"
    assert len(lines) == len(set(lines)), f"LINES repeated: {err[-800:]}"
    return status, out, err


def _one_line_naming(err: str, case: Case) -> None:
    """A damaged file reported is named; an error is one line."""
    said = [line for line in err.splitlines() if "error:" in line]
    assert all(case.names in line for line in said), f"LINES {said}"


@pytest.mark.parametrize("damaged", CASES, ids=IDS, indirect=True)
def test_info(damaged, capsys):
    case, log = damaged
    status, out, err = _command(["info", str(log)], capsys)
    assert status == 0, f"UNUSABLE exit {status}: {err[-300:]}"
    assert "run 'b'" in out, f"UNUSABLE {out[-300:]}"
    if case.run_listed:
        assert "'a'" in out, f"UNUSABLE {out[-300:]}"


@pytest.mark.parametrize("damaged", CASES, ids=IDS, indirect=True)
def test_embed(damaged, capsys):
    case, log = damaged
    status, out, err = _command(["embed", str(log), "--method", "pca", "--no-progress"], capsys)
    _one_line_naming(err, case)
    assert status in (0, 1), f"UNUSABLE exit {status}: {err[-300:]}"
    lg = open_logdir(log)
    key = _key(log)
    b = lg.run("b")
    assert all(np.isfinite(b.embeddings.read(key, "dense", s)).all() for s in range(3)), "UNUSABLE run b"
    if case.recompute:
        a = lg.run("a")
        Y = np.asarray(a.embeddings.read(key, "dense", STEP))
        info = a.embeddings.info(key, "dense", STEP)
        assert np.isfinite(Y).all() and Y.shape == (N, 2), "WRONG DATA: the damaged embedding was kept"
        assert info["source"]["crc32"] == a.record("dense", STEP)["crc32"], "WRONG DATA: sidecar not rewritten"
        assert "0 computed" not in out, f"WRONG DATA: counted as cached: {out[-200:]}"


@pytest.mark.parametrize("damaged", CASES, ids=IDS, indirect=True)
def test_meta(damaged, capsys):
    case, log = damaged
    argv = ["meta", str(log), "--no-robustness", "--no-progress", "--name", "fresh"]
    status, out, err = _command(argv, capsys)
    _one_line_naming(err, case)
    if case.probe:
        assert status == 2 and case.names in err, f"LINES exit {status}: {err[-300:]}"
        status, out, err = _command([*argv, "--runs", "b"], capsys)
    assert status == 0, f"UNUSABLE exit {status}: {err[-300:]}"
    keys = MetaResult.load(log, "fresh").keys
    assert {("b", "dense", s) for s in range(3)} <= set(keys), f"UNUSABLE {keys}"


@pytest.mark.parametrize("damaged", CASES, ids=IDS, indirect=True)
def test_export(damaged, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    case, log = damaged
    figures = tmp_path / "figures"
    status, out, err = _command(["export", str(log), "--out", str(figures), "--formats", "png"], capsys)
    _one_line_naming(err, case)
    assert status == 0, f"UNUSABLE exit {status}: {err[-300:]}"
    assert (figures / "layer-dense-pca.png").exists(), f"UNUSABLE {sorted(p.name for p in figures.iterdir())}"
    assert "b,dense" in (figures / "quality.csv").read_text(), "UNUSABLE: run b's scores missing"
    if "meta_result" in case.refused:
        assert not (figures / "m.png").exists(), "WRONG DATA: a damaged meta-SNE result was exported"
    else:
        assert (figures / "m.png").exists(), "UNUSABLE: the meta-SNE map is missing"


# --------------------------------------------------------------------------------------------------------------
# The plugin's routes
# --------------------------------------------------------------------------------------------------------------

def _routes(run: str, key: str) -> dict[str, str]:
    other = f"b&step2={STEP}" if run == "a" else "b&step2=0"  # run b is compared with itself
    q = f"run={run}&layer=dense&step={STEP}"
    return {"info": q, "info_key": f"{q}&key={key}", "coords": f"{q}&key={key}", "knn": f"{q}&index=0&k=3",
            "density": f"{q}&key={key}&by=all&levels=4",
            "neighborhood_change": f"{q}&run2={other}&layer2=dense", "labels": f"run={run}",
            "ids": f"run={run}", "thumbnails": f"run={run}&start=0&count=4", "predictions": f"run={run}&step={STEP}",
            "meta_result": "name=m"}


def _change(log: Path) -> np.ndarray:
    """The neighbourhood change (k=10) from run a to run b at STEP, computed here from the activations."""
    from repviz.neighbor_change import neighbor_change, neighbor_graph

    lg = open_logdir(log)
    graphs = [neighbor_graph(np.asarray(lg.run(r).activations("dense", STEP)), 10, random_state=0) for r in "ab"]
    return neighbor_change(*graphs)


def _route_path(route: str, query: str) -> str:
    return "/data/plugin/repviz/" + route.removesuffix("_key") + "?" + query


@pytest.mark.parametrize("damaged", CASES, ids=IDS, indirect=True)
def test_plugin_routes(damaged):
    pytest.importorskip("tensorboard")
    from concurrent.futures import Future

    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from tensorboard_plugin_repviz.jobs import JobManager
    from werkzeug import test as wtest
    from werkzeug import wrappers

    class _Inline:
        def submit(self, fn, *args):
            future = Future()
            try:
                future.set_result(fn(*args))
            except Exception as e:
                future.set_exception(e)
            return future

        def shutdown(self, wait=True, cancel_futures=False):
            pass

    case, log = damaged
    key = _key(log)
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(log)))
    plugin.jobs = JobManager(str(log), pool=_Inline(), quick_pool=_Inline())
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    try:
        r = client.get("/data/plugin/repviz/runs")
        assert r.status_code == 200, f"5XX runs answered {r.status_code}: {r.data[:200]}"
        listed = {run["name"] for run in r.get_json()["runs"]}
        assert "b" in listed, f"UNUSABLE runs lists {listed}"
        assert ("a" in listed) == case.run_listed, f"UNUSABLE runs lists {listed}"
        for route, query in _routes("a", key).items():
            r = client.get(_route_path(route, query))
            if r.status_code >= 500:
                error = r.get_json()["error"]
                assert "internal error" not in error, f"5XX {route}: {error}"
                assert case.names in error and "\n" not in error, f"LINES {route}: {error}"
            if route in case.refused:
                assert r.status_code != 200, f"WRONG DATA {route} served the damaged file"
            if route in case.recomputed:
                assert r.status_code == 200, f"UNUSABLE {route}: {r.status_code} {r.data[:200]}"
                assert route != "density" or isinstance(r.get_json(), dict), f"WRONG DATA {route}: {r.data[:200]}"
                assert route != "neighborhood_change" or np.allclose(np.frombuffer(r.data, "<f4"), _change(log)), \
                    f"WRONG DATA {route}: {np.frombuffer(r.data, '<f4')[:5]}"
        for route, query in _routes("b", key).items():
            if route == "meta_result" and route in case.refused:
                continue
            r = client.get(_route_path(route, query))
            assert r.status_code == 200, f"UNUSABLE b {route}: {r.status_code} {r.data[:200]}"
    finally:
        plugin.jobs.close()


def test_a_damaged_record_is_one_warning_naming_the_file(tmp_path, small_logdir):
    """Two records of wrong types and a line that is not JSON: one warning naming the record log and the lines;
    the valid records are all kept."""
    log = small_logdir(tmp_path / "logs")
    root = log / "a" / "plugins" / "repviz"
    with open(root / "records.jsonl", "a") as f:
        f.write(json.dumps({"kind": "activation", "layer": ["x"], "step": 1, "file": "activations/dense/1.npy",
                            "dtype": "<f4", "shape": [N, 4], "crc32": checksum(np.zeros(1)), "nonfinite": 0}) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({"kind": "activation", "layer": "dense", "step": 9, "file": "activations/dense/1.npy",
                            "dtype": "<f4", "shape": "30,4", "crc32": "0", "nonfinite": 0}) + "\n")
    with pytest.warns(RuntimeWarning) as caught:
        run = open_logdir(log).run("a")
        assert run.steps("dense") == [0, 1, 2]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "records.jsonl" in messages[0] and "4, 5, 6" in messages[0], messages
