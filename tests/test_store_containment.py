"""Planted pointers: no file outside the log directory is ever read or served (issue #32, item 1).

Each case plants one pointer inside a run (or inside the cross-run results) to a secret file outside the log
directory: a record whose ``file`` is absolute or climbs out with ``../``, or a symbolic link in place of a stored
file or directory. Then (a) the store refuses to read it, with an error naming the file (or leaves the entry out of
its listing, with a warning naming it); (b) no route of the plugin serves the secret, and the route that would
serve it answers a one-line JSON error; (c) ``repviz info`` and ``repviz embed`` say one line about it and go on.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from repviz import cli
from repviz.meta.result import MetaResult
from repviz.store import NotFoundError, checksum, open_logdir

# Every case plants damage the store skips with a warning naming it: expected here, and counted where it matters.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MARK = 4242  # in every secret, so a leak shows in any answer: JSON text or float32/float64/int64 bytes
KEY = "pca-test"  # the embedding key every run stores
N = 30  # probe points of small_logdir's runs


def _leaks(data: bytes) -> bool:
    return any(m in data for m in (b"4242", np.float32(MARK).tobytes(), np.float64(MARK).tobytes(),
                                   np.int64(MARK).tobytes()))


def _secrets(where: Path) -> dict[str, Path]:
    """The secret files outside the log directory: an array, a JSON object and a whole directory."""
    where.mkdir()
    np.save(where / "secret.npy", np.full((N, 4), MARK, dtype=np.float32))
    np.save(where / "graph.npy", np.full((N, 3), MARK, dtype=np.int32))
    obj = {"method": f"secret-{MARK}", "params": {"secret": MARK}, "scores": {"secret": MARK}, "secret": MARK,
           "fingerprint": {"model": "m", "probe": "p"}, "layers": {f"secret{MARK}": {"stored_shape": [N, 4]}}}
    (where / "secret.json").write_text(json.dumps(obj))
    d = where / "dir"
    (d / "dense").mkdir(parents=True)
    for name in ("0.npy", "1.npy", "2.npy", "coords.npy", "distances.npy", "v.npy", "ids.npy", "labels.npy"):
        np.save(d / name, np.full((N, 4), MARK, dtype=np.float32))
        np.save(d / "dense" / name, np.full((N, 4), MARK, dtype=np.float32))
    for name in ("method.json", "result.json", "0.json"):
        (d / name).write_text(json.dumps(obj))
        (d / "dense" / name).write_text(json.dumps(obj))
    return {"npy": where / "secret.npy", "json": where / "secret.json", "dir": d, "graph": where / "graph.npy"}


def _snapshot(secrets: dict[str, Path]) -> dict[Path, bytes]:
    """Every secret file's bytes, to check that nothing was written through a pointer."""
    return {p: p.read_bytes() for p in secrets["npy"].parent.rglob("*") if p.is_file()}


def _link(at: Path, to: Path) -> None:
    if at.is_dir() and not at.is_symlink():
        for p in sorted(at.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        at.rmdir()
    else:
        at.unlink(missing_ok=True)
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(to)


def _append_record(root: Path, file: str) -> None:
    record = {"kind": "activation", "layer": "dense", "step": 7, "file": file, "dtype": "<f4", "shape": [N, 4],
              "crc32": checksum(np.full((N, 4), MARK, dtype=np.float32)), "nonfinite": 0}
    with open(root / "records.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


@dataclass(frozen=True)
class Case:
    """One planted pointer: how to plant it in run ``r`` (its ``plugins/repviz`` directory ``root``), the read
    through the store that must be refused (``None``: what the listing must leave out), and the route whose answer
    must be a 4xx JSON error."""

    name: str
    plant: Callable[[Path, Path, dict], None]  # (root, logdir, secrets)
    read: Callable  # (logdir, run name) -> value, or raise NotFoundError naming the file
    # a cache whose file leads out is not cached (None): computed again, and the link replaced by the new file
    names: str  # a part of the planted file's path the error names
    route: str | None  # with {r} for the run; None: no route reads it directly (checked through every route)


def _meta(log: Path, name: str) -> Path:
    return log / "plugins" / "repviz-meta" / name


CASES = [
    Case("record file absolute", lambda root, log, s: _append_record(root, str(s["npy"])),
         lambda lg, r: lg.run(r).read_array(lg.run(r).records()[-1] if 7 in lg.run(r).steps() else
                                            {"file": str(_SECRETS["npy"])}), "secret.npy",
         "knn?run={r}&layer=dense&step=7&index=0&k=3"),
    Case("record file ../", lambda root, log, s: _append_record(root, os.path.relpath(s["npy"], root)),
         lambda lg, r: lg.run(r).read_array(lg.run(r).records()[-1] if 7 in lg.run(r).steps() else
                                            {"file": os.path.relpath(_SECRETS["npy"], lg.run(r).root)}),
         "secret.npy", "knn?run={r}&layer=dense&step=7&index=0&k=3"),
    Case("activation .npy symlink", lambda root, log, s: _link(root / "activations/dense/0.npy", s["npy"]),
         lambda lg, r: lg.run(r).activations("dense", 0) if 0 in lg.run(r).steps() else
         lg.run(r).read_array({"file": "activations/dense/0.npy"}), "0.npy",
         "knn?run={r}&layer=dense&step=0&index=0&k=3"),
    Case("activation directory symlink", lambda root, log, s: _link(root / "activations/dense", s["dir"]),
         lambda lg, r: lg.run(r).activations("dense", 0) if 0 in lg.run(r).steps() else
         lg.run(r).read_array({"file": "activations/dense/0.npy"}), "0.npy",
         "knn?run={r}&layer=dense&step=0&index=0&k=3"),
    Case("probe ids symlink", lambda root, log, s: _link(root / "probe/ids.npy", s["npy"]),
         lambda lg, r: lg.skipped[r], "ids.npy", "ids?run={r}"),
    Case("probe labels symlink", lambda root, log, s: _link(root / "probe/labels.npy", s["npy"]),
         lambda lg, r: lg.skipped[r], "labels.npy", "labels?run={r}"),
    Case("probe thumbnails symlink", lambda root, log, s: _link(root / "probe/thumbnails.npy", s["npy"]),
         lambda lg, r: lg.skipped[r], "thumbnails.npy", "thumbnails?run={r}&start=0&count=4"),
    Case("probe directory symlink", lambda root, log, s: _link(root / "probe", s["dir"]),
         lambda lg, r: lg.skipped[r], "probe", "labels?run={r}"),
    Case("embedding .npy symlink", lambda root, log, s: _link(root / f"embeddings/{KEY}/dense/0.npy", s["npy"]),
         lambda lg, r: lg.run(r).embeddings.read(KEY, "dense", 0), "0.npy",
         f"coords?run={{r}}&layer=dense&step=0&key={KEY}"),
    Case("embedding layer directory symlink",
         lambda root, log, s: _link(root / f"embeddings/{KEY}/dense", s["dir"] / "dense"),
         lambda lg, r: lg.run(r).embeddings.read(KEY, "dense", 0), "dense",
         f"coords?run={{r}}&layer=dense&step=0&key={KEY}"),
    Case("embedding key directory symlink", lambda root, log, s: _link(root / "embeddings/evil-1", s["dir"]),
         lambda lg, r: lg.run(r).embeddings.read("evil-1", "dense", 0), "evil-1",
         "coords?run={r}&layer=dense&step=0&key=evil-1"),
    Case("embedding sidecar .json symlink",
         lambda root, log, s: _link(root / f"embeddings/{KEY}/dense/0.json", s["json"]),
         lambda lg, r: lg.run(r).embeddings.info(KEY, "dense", 0), "0.json",
         f"info?run={{r}}&layer=dense&step=0&key={KEY}"),
    Case("method.json symlink", lambda root, log, s: _link(root / f"embeddings/{KEY}/method.json", s["json"]),
         lambda lg, r: lg.run(r).embeddings.method(KEY), "method.json", None),
    Case("manifest.json symlink", lambda root, log, s: _link(root / "manifest.json", s["json"]),
         lambda lg, r: lg.skipped[r], "manifest.json", "labels?run={r}"),
    Case("records.jsonl symlink", lambda root, log, s: _link(root / "records.jsonl", s["json"]),
         lambda lg, r: lg.skipped[r], "records.jsonl", "knn?run={r}&layer=dense&step=0&index=0&k=3"),
    Case("neighbour graph cache symlink",
         lambda root, log, s: _link(_graph_cache(log, root), s["graph"]),
         lambda lg, r: lg.run(r).artifact("neighbor_graph").cached("dense", 0, "k3-exact"), "k3-exact", None),
    Case("density cache symlink", lambda root, log, s: _link(_density_cache(log, root), s["json"]),
         lambda lg, r: lg.run(r).artifact("density").cached(KEY, "dense", 0, "all-l4"), "all-l4", None),
    Case("meta result directory symlink", lambda root, log, s: _link(_meta(log, "meta-dir"), s["dir"]),
         lambda lg, r: MetaResult.load(lg, "meta-dir"), "meta-dir", "meta_result?name=meta-dir"),
    Case("meta coords.npy symlink", lambda root, log, s: _link(_meta(log, "meta-coords") / "coords.npy", s["npy"]),
         lambda lg, r: MetaResult.load(lg, "meta-coords"), "coords.npy", "meta_result?name=meta-coords"),
    Case("meta vector bank .npy symlink", lambda root, log, s: _link(_meta(log, "vectors-x") / "v.npy", s["npy"]),
         lambda lg, r: lg.artifacts("vectors-x").load_array("v.npy"), "v.npy", None),
]
_SECRETS: dict[str, Path] = {}


def _run_name(case: Case) -> str:
    return "k" + str(CASES.index(case))


def _graph_cache(log: Path, root: Path) -> Path:
    run = open_logdir(log).run(root.parent.parent.name)
    return run.artifact("neighbor_graph").path("dense", 0, "k3-exact", write=True)


def _density_cache(log: Path, root: Path) -> Path:
    run = open_logdir(log).run(root.parent.parent.name)
    return run.artifact("density").path(KEY, "dense", 0, "all-l4", write=True)


def _build(tmp: Path, small_logdir) -> Path:
    """A log directory of run "good" and one run per case, each with an embedding and thumbnails, and meta-SNE
    results; then every case's pointer planted."""
    global _SECRETS
    _SECRETS = _secrets(tmp / "secret")
    log = small_logdir(tmp / "logs", runs=["good"] + [_run_name(c) for c in CASES])
    lg = open_logdir(log)
    for run in lg.runs.values():
        np.save(run.root / "probe" / "thumbnails.npy", np.zeros((N, 2, 2), np.uint8))
        run.embeddings.write_method(KEY, {"method": "pca", "params": {}})
        for step in run.steps():
            run.embeddings.write(KEY, "dense", step, np.asarray(run.activations("dense", step))[:, :2],
                                {"scores": {"t": 1.0}})
    keys = [("good", "dense", s) for s in range(3)]
    for name in ("meta-good", "meta-dir", "meta-coords"):
        MetaResult(keys, np.zeros((3, 2)), np.zeros((3, 3)), {"transform": "dist"}).save(lg, name)
    lg.artifacts("vectors-x").save_array("v.npy", np.zeros(4, np.float32))
    for case in CASES:
        case.plant(log / _run_name(case) / "plugins" / "repviz", log, _SECRETS)
    return log


@pytest.fixture
def logdir(tmp_path, small_logdir):
    return _build(tmp_path, small_logdir)


# --------------------------------------------------------------------------------------------------------------
# (a) the store
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_store_refuses_to_read_a_planted_pointer(case, logdir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = open_logdir(logdir)
        run = _run_name(case)
        try:
            value = case.read(log, run)
        except NotFoundError as e:
            assert case.names in str(e) and len(str(e).splitlines()) == 1, str(e)
            return
    if "cache" in case.name:
        assert value is None
        return
    # not raised: the entry must have been left out of a listing (or its run skipped), with a warning naming it
    assert not _leaks(json.dumps(value, default=lambda o: np.asarray(o).tolist()).encode()), case.name
    assert any(case.names in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_links_that_stay_inside_their_run_are_read(tmp_path, small_logdir):
    """A run whose activations directory is a link to another place inside the same run reads as before."""
    log = small_logdir(tmp_path / "logs")
    root = log / "a" / "plugins" / "repviz"
    (root / "activations").rename(root / "moved")
    (root / "activations").symlink_to("moved")
    np.save(root / "moved" / "dense" / "copy.npy", np.ones((N, 4), np.float32))
    (root / "probe" / "labels.npy").rename(root / "probe" / "labels-real.npy")
    (root / "probe" / "labels.npy").symlink_to("labels-real.npy")
    run = open_logdir(log).run("a")
    assert run.steps() == [0, 1, 2] and run.activations("dense", 2).shape == (N, 4)
    assert list(run.probe.labels[:4]) == [0, 1, 2, 0]


def test_an_out_overlay_is_checked_against_its_own_root(tmp_path, small_logdir):
    secrets = _secrets(tmp_path / "secret")
    log = small_logdir(tmp_path / "logs")
    out = tmp_path / "out"
    run = open_logdir(log, out=out).run("a")
    run.embeddings.write(KEY, "dense", 0, np.zeros((N, 2)), {"scores": {}})
    _link(out / "a" / "plugins" / "repviz" / "embeddings" / KEY / "dense" / "0.npy", secrets["npy"])
    with pytest.raises(NotFoundError, match="0.npy"):
        open_logdir(log, out=out).run("a").embeddings.read(KEY, "dense", 0)
    _link(out / "a" / "plugins" / "repviz" / "embeddings" / KEY / "dense", secrets["dir"] / "dense")
    with pytest.raises(NotFoundError, match="dense"):
        open_logdir(log, out=out).run("a").embeddings.write(KEY, "dense", 5, np.zeros((N, 2)), {"scores": {}})
    assert not (secrets["dir"] / "dense" / "5.npy").exists() and not (secrets["dir"] / "dense" / "5.json").exists()


# --------------------------------------------------------------------------------------------------------------
# (b) the plugin's routes
# --------------------------------------------------------------------------------------------------------------

ROUTES = ["runs", "info?run={r}&layer=dense&step=0", f"info?run={{r}}&layer=dense&step=0&key={KEY}",
          "knn?run={r}&layer=dense&step=0&index=0&k=3", "knn?run={r}&layer=dense&step=7&index=0&k=3",
          f"coords?run={{r}}&layer=dense&step=0&key={KEY}", "coords?run={r}&layer=dense&step=0&key=evil-1",
          "labels?run={r}", "ids?run={r}", "thumbnails?run={r}&start=0&count=4", "predictions?run={r}&step=0",
          f"density?run={{r}}&layer=dense&step=0&key={KEY}&by=all&levels=4", "meta_result?name=meta-dir",
          "meta_result?name=meta-coords", "meta_result?name=meta-good"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_no_route_serves_a_planted_pointer(case, logdir):
    pytest.importorskip("tensorboard")
    from test_plugin_routes import BASE, _client

    before = _snapshot(_SECRETS)
    client, plugin = _client(logdir)
    try:
        run = _run_name(case)
        if case.route is not None:
            r = client.get(BASE + case.route.format(r=run))
            assert 400 <= r.status_code < 500, (r.status_code, r.data[:200])
            assert r.headers["Content-Type"].startswith("application/json")
            assert len(r.get_json()["error"].splitlines()) == 1
        for route in ROUTES:
            r = client.get(BASE + route.format(r=run))
            assert r.status_code < 500, (route, r.status_code, r.data[:200])
            assert not _leaks(r.data), (route, r.data[:200])
        r = client.get(BASE + "labels?run=good")
        assert r.status_code == 200  # the rest stays served
    finally:
        plugin.jobs.close()
    assert _snapshot(_SECRETS) == before  # nothing written through a pointer (a cache link is replaced)


# --------------------------------------------------------------------------------------------------------------
# (c) the command line
# --------------------------------------------------------------------------------------------------------------

def test_info_and_embed_report_each_pointer_in_one_line_and_go_on(logdir, capsys):
    before = _snapshot(_SECRETS)
    status = cli.main(["info", str(logdir)])
    out, err = capsys.readouterr()
    assert status == 0 and "Traceback" not in out + err and not _leaks((out + err).encode())
    assert "run 'good'" in out
    status = cli.main(["embed", str(logdir), "--method", "pca", "--no-progress"])
    out, err = capsys.readouterr()
    assert status in (0, 1) and "Traceback" not in out + err and not _leaks((out + err).encode()), out + err
    good = open_logdir(logdir).run("good")
    assert any(good.embeddings.has(k, "dense", 2) for k in good.embeddings.method_keys() if k != KEY)
    assert not any(_leaks(p.read_bytes()) for p in (logdir / "good").rglob("*") if p.is_file())
    assert _snapshot(_SECRETS) == before


def test_a_planted_fifo_is_refused_without_blocking(tmp_path, small_logdir):
    """A pipe in place of a stored array would block ``open`` forever: it is opened without blocking and refused
    as not a regular file."""
    log = small_logdir(tmp_path / "logs")
    path = log / "a" / "plugins" / "repviz" / "activations" / "dense" / "1.npy"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(NotFoundError, match="1.npy is not a regular file"):
        open_logdir(log).run("a").activations("dense", 1)


@pytest.mark.parametrize("planted", ["activations/dense", "records.jsonl", "probe"])
def test_a_continued_run_never_writes_through_a_link_leading_out(planted, tmp_path, new_run):
    """Writing into a shared run directory: a planted link would make training append or write arrays outside."""
    secrets = _secrets(tmp_path / "secret")
    new_run(tmp_path / "logs" / "a").write_activation("dense", 0, np.zeros((N, 4), np.float32))
    root = tmp_path / "logs" / "a" / "plugins" / "repviz"
    _link(root / planted, secrets["json"] if planted == "records.jsonl" else secrets["dir"])
    before = _snapshot(secrets)
    with pytest.raises(NotFoundError, match=planted.split("/")[0]):
        writer = new_run(tmp_path / "logs" / "a")
        writer.write_probe(np.arange(N))
        writer.write_activation("dense", 5, np.zeros((N, 4), np.float32))
    assert _snapshot(secrets) == before
