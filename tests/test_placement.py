"""Placing probes that were not in a layout's fit into it (repviz.placement, ``repviz place``)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from repviz.cli import main
from repviz.methods import resolve
from repviz.metrics import knn_accuracy, placed_knn_accuracy
from repviz.pipeline import embed_logdir
from repviz.placement import place_points, place_run
from repviz.store import DamagedFileError, open_logdir

METHODS = ["tsne", "isomap", "lle", "umap"]
TURN = np.array([[np.cos(0.7), -np.sin(0.7)], [np.sin(0.7), np.cos(0.7)]])


@pytest.fixture(scope="module")
def layout(digits):
    """``layout(method) -> (params, X_fit, Y_fit, y_fit, X_new, y_new)``: 1,000 digits fitted by the pipeline's
    parameters of ``method``, the layout turned and moved as the pipeline's Procrustes alignment leaves a stored
    one, and 300 held-out digits."""
    X, y = digits
    perm = np.random.default_rng(0).permutation(len(X))
    fit, new = perm[:1000], perm[1000:1300]

    @functools.cache
    def make(method: str):
        if method == "umap":
            pytest.importorskip("umap")
        params = resolve(method, {"n_neighbors": 30} if method == "lle" else None).params  # 1 component
        params = {**params, "n_jobs": 1} if "n_jobs" in params else params
        estimator = resolve(method).method.estimator_class()(**params)
        Y = np.asarray(estimator.fit_transform(X[fit].astype(np.float32)), dtype=np.float64)
        Y = (Y @ TURN + [5.0, -3.0]).astype(np.float32)
        return params, X[fit], Y, y[fit], X[new], y[new]

    return make


def _radius(Y) -> float:
    return float(np.sqrt(((Y - Y.mean(axis=0)) ** 2).sum(axis=1).mean()))


@pytest.mark.parametrize("method", METHODS)
def test_placed_points_of_the_fit_land_at_their_fitted_position(layout, method):
    params, X_fit, Y_fit, _, _, _ = layout(method)
    placed = place_points(method, params, X_fit, Y_fit, X_fit[:200])
    moved = np.linalg.norm(placed.coords - Y_fit[:200], axis=1)
    print(method, "median moved / radius", np.median(moved) / _radius(Y_fit))
    assert placed.coords.dtype == np.float32 and np.median(moved) < 0.03 * _radius(Y_fit)
    if method in ("isomap", "lle"):  # refitted, turned onto the stored layout: the refit reproduced it
        assert placed.how["refit_displacement"] < 1e-4


@pytest.mark.parametrize("method", METHODS)
def test_held_out_points_land_among_their_own_class(layout, method):
    params, X_fit, Y_fit, y_fit, X_new, y_new = layout(method)
    placed = place_points(method, params, X_fit, Y_fit, X_new).coords
    fitted, held_out = knn_accuracy(Y_fit, y_fit), placed_knn_accuracy(Y_fit, y_fit, placed, y_new)
    print(method, "10-NN accuracy: fitted", fitted, "placed", held_out)
    assert held_out >= fitted - 0.05


def test_placed_knn_accuracy_counts_the_vote_of_the_nearest_layout_points():
    Y_fit = np.array([[0, 0], [0, 1], [1, 0], [10, 10], [10, 11], [11, 10]], dtype=np.float32)
    labels = np.array(["a", "a", "a", "b", "b", "b"])
    Y_new = np.array([[0.5, 0.5], [10.5, 10.5], [9, 9]], dtype=np.float32)
    assert placed_knn_accuracy(Y_fit, labels, Y_new, ["a", "b", "a"], n_neighbors=3) == pytest.approx(2 / 3)


def test_a_method_without_a_transform_is_refused_in_one_line(digits):
    X = digits[0][:60].astype(np.float32)
    with pytest.raises(ValueError, match=r"^method 'mds' has no rule for placing new points .*tsne") as e:
        place_points("mds", {}, X, X[:, :2], X[:5])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="the new points have 3 features and the layout's 64"):
        place_points("tsne", {}, X, X[:, :2], X[:5, :3])


@pytest.fixture()
def two_probe_sets(tmp_path, cluster_run):
    """A log directory with run "train" (120 probes of 4 clusters, t-SNE layouts of its steps 0-2) and run "test"
    (60 other probes of the same clusters, same model and layers), placed into it."""
    cluster_run(tmp_path / "logs" / "train", layers=("a",), steps=range(3), n=120, seed=0)
    cluster_run(tmp_path / "logs" / "test", layers=("a",), steps=range(3), n=60, seed=0)
    embed_logdir(tmp_path / "logs", ["tsne"], runs=["train"], progress=False)
    return tmp_path / "logs"


def test_place_run_stores_placed_points_apart_from_fitted_layouts(two_probe_sets):
    events = []
    rows = place_run(two_probe_sets, "test", into="train", method="tsne",
                     progress=lambda *event: events.append(event))
    assert events == [("place", 0, 3, "a step 0"), ("place", 1, 3, "a step 1"), ("place", 2, 3, "a step 2"),
                      ("place", 3, 3, "")]
    assert [(r["layer"], r["step"], r["status"], r["n"]) for r in rows] == [("a", s, "placed", 60) for s in range(3)]
    assert all(r["knn_accuracy"] >= r["layout_knn_accuracy"] - 0.05 for r in rows)
    log = open_logdir(two_probe_sets)
    test, train = log.run("test"), log.run("train")
    key = train.embeddings.key("tsne")
    coords, info = test.placed("train", key, "a", 2)
    assert coords.shape == (60, 2) and info["placed_into"] == {"run": "train", "key": key, "method": "tsne",
                                                                "layer": "a", "step": 2}
    assert test.embeddings.method_keys() == []  # never a fitted layout of its own
    # each placed point lies among the layout's points of its cluster
    Y = np.asarray(train.embeddings.read(key, "a", 2))
    means = np.stack([Y[np.arange(120) % 4 == c].mean(axis=0) for c in range(4)])
    nearest = np.argmin(((coords[:, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
    assert np.mean(nearest == np.arange(60) % 4) > 0.95


def test_placing_again_computes_only_what_a_new_layout_made_stale(two_probe_sets):
    place_run(two_probe_sets, "test", into="train")
    assert {r["status"] for r in place_run(two_probe_sets, "test", into="train")} == {"cached"}
    train = open_logdir(two_probe_sets).run("train")
    key = train.embeddings.key("tsne")
    moved = np.asarray(train.embeddings.read(key, "a", 1)) + 1.0  # the layout of step 1 computed anew
    train.embeddings.write(key, "a", 1, moved, train.embeddings.info(key, "a", 1))
    assert [r["status"] for r in place_run(two_probe_sets, "test", into="train")] == ["cached", "placed", "cached"]


def test_place_refuses_what_it_cannot_place(two_probe_sets):
    with pytest.raises(ValueError, match="placed into another run's layout"):
        place_run(two_probe_sets, "train", into="train")
    with pytest.raises(LookupError, match="holds no snapshot at the steps of run 'train'"):
        place_run(two_probe_sets, "test", into="train", steps=[7])
    with pytest.raises(LookupError, match="run 'train' has no 'pca' embeddings"):
        place_run(two_probe_sets, "test", into="train", method="pca")


def test_repviz_place_prints_a_row_per_snapshot(two_probe_sets, capsys):
    assert main(["place", str(two_probe_sets), "--run", "test", "--into", "train", "--steps", "0,2"]) == 0
    out = capsys.readouterr().out
    assert "placed" in out and out.count("\n") >= 3 and "10-NN" in out
    assert main(["place", str(two_probe_sets), "--run", "test", "--into", "nope"]) == 2
    assert "repviz place: error: " in capsys.readouterr().err
    assert main(["info", str(two_probe_sets)]) == 0
    key = open_logdir(two_probe_sets).run("train").embeddings.key("tsne")
    assert "  placed into: run 'train', its tsne layouts\n" in capsys.readouterr().out
    assert main(["info", str(two_probe_sets), "--verbose"]) == 0  # the keys for those who need them
    assert f"  placed into: run 'train', its tsne [{key}] layouts\n" in capsys.readouterr().out


def test_the_placed_route_serves_the_points_placed_into_a_layout(two_probe_sets):
    pytest.importorskip("tensorboard")
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    place_run(two_probe_sets, "test", into="train", steps=[2])
    train = open_logdir(two_probe_sets).run("train")
    key = train.embeddings.key("tsne")
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(two_probe_sets)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    get = lambda step, k=key: client.get(f"/data/plugin/repviz/placed?run=train&layer=a&step={step}&key={k}")  # noqa: E731
    try:
        [entry] = get(2).get_json()["placed"]
        coords, _ = open_logdir(two_probe_sets).run("test").placed("train", key, "a", 2)
        assert entry["run"] == "test" and entry["n"] == 60 and not entry["stale"]
        np.testing.assert_allclose(entry["coords"], coords.ravel())
        assert entry["rows"] == list(range(60)) and entry["labels"] == [i % 4 for i in range(60)]
        assert get(1).get_json() == {"placed": []}  # nothing placed into the layout of step 1
        index = {r["name"]: r for r in client.get("/data/plugin/repviz/runs").get_json()["runs"]}
        assert index["test"]["placed_into"] == ["train"] and index["train"]["placed_into"] == []
        assert get(2, "tsne-nope").status_code == 404
        # the layout computed again: the placed points no longer belong to it
        train.embeddings.write(key, "a", 2, np.asarray(train.embeddings.read(key, "a", 2)) * 2,
                              train.embeddings.info(key, "a", 2))
        assert get(2).get_json()["placed"][0]["stale"]
    finally:
        plugin.jobs.close()


def test_a_refit_reproduces_the_stored_aligned_layout_it_places_into(tmp_path, cluster_run):
    cluster_run(tmp_path / "logs" / "train", layers=("a",), steps=range(3), n=120, seed=0)
    cluster_run(tmp_path / "logs" / "test", layers=("a",), steps=range(3), n=60, seed=0)
    embed_logdir(tmp_path / "logs", ["isomap"], runs=["train"], progress=False)  # rotated onto step by step
    rows = place_run(tmp_path / "logs", "test", into="train", method="isomap")
    assert [r["status"] for r in rows] == ["placed"] * 3
    log = open_logdir(tmp_path / "logs")
    key = log.run("train").embeddings.key("isomap")
    for step in range(3):
        _, info = log.run("test").placed("train", key, "a", step)
        assert info["how"]["refit_displacement"] < 1e-4 and rows[step]["knn_accuracy"] > 0.9


def test_a_damaged_placement_is_left_out_of_the_route_and_refused_by_the_store(two_probe_sets, cluster_run):
    pytest.importorskip("tensorboard")
    from tensorboard_plugin_repviz import data
    from tensorboard_plugin_repviz.catalog import Catalog

    from repviz.store import DamagedFileError

    cluster_run(two_probe_sets / "extra", layers=("a",), steps=range(3), n=40, seed=0)
    place_run(two_probe_sets, "test", into="train", steps=[2])
    place_run(two_probe_sets, "extra", into="train", steps=[2])
    log = open_logdir(two_probe_sets)
    key = log.run("train").embeddings.key("tsne")
    sidecar = two_probe_sets / "extra" / "plugins" / "repviz" / "placed" / "train" / key / "a" / "2.json"
    sidecar.write_text("[1, 2]")
    with pytest.raises(DamagedFileError, match="is not a placement's sidecar"):
        log.run("extra").placed("train", key, "a", 2)
    served = data.placed_impl(Catalog(str(two_probe_sets)), "train", "a", 2, key)["placed"]
    assert [p["run"] for p in served] == ["test"]


class _Killed(BaseException):
    """A kill between two writes (a BaseException: nothing on the way catches it)."""


def _kill_at_the_array_write(monkeypatch, below: str) -> None:
    """Make the next array written below the folder ``below`` of a run stop the writer, its sidecar written."""
    from repviz.store import artifacts

    real = artifacts.save_array

    def save_array(path, array):
        if below in path.parts:
            raise _Killed(path)
        real(path, array)

    monkeypatch.setattr(artifacts, "save_array", save_array)


def _served(log_dir, key, step=2) -> list[dict]:
    from tensorboard_plugin_repviz import data
    from tensorboard_plugin_repviz.catalog import Catalog

    return data.placed_impl(Catalog(str(log_dir)), "train", "a", step, key)["placed"]


def test_a_placement_killed_between_its_two_writes_is_never_served_as_current(two_probe_sets, monkeypatch):
    """Non-regression: the sidecar is written before the coordinates; killed between the two after the layout
    was computed again, the next `place` said "cached" and the tab drew the old points with stale: false. The
    sidecar now names its array: the torn pair is left out of the route and placed again by the next `place`."""
    pytest.importorskip("tensorboard")
    place_run(two_probe_sets, "test", into="train", steps=[2])
    train = open_logdir(two_probe_sets).run("train")
    key = train.embeddings.key("tsne")
    old, _ = open_logdir(two_probe_sets).run("test").placed("train", key, "a", 2)
    old = np.array(old)
    moved = np.asarray(train.embeddings.read(key, "a", 2)) + 50.0  # the layout computed again, elsewhere
    train.embeddings.write(key, "a", 2, moved, train.embeddings.info(key, "a", 2))
    with monkeypatch.context() as patch:
        _kill_at_the_array_write(patch, "placed")
        with pytest.raises(_Killed):
            place_run(two_probe_sets, "test", into="train", steps=[2])
    test = open_logdir(two_probe_sets).run("test")
    np.testing.assert_array_equal(np.load(test.artifact("placed").path("train", key, "a", 2)), old)  # torn
    with pytest.raises(DamagedFileError, match="is not the array its sidecar was written with"):
        test.placed("train", key, "a", 2)
    assert not [p for p in _served(two_probe_sets, key) if not p["stale"]]
    [row] = place_run(two_probe_sets, "test", into="train", steps=[2])
    assert row["status"] == "placed"  # not "cached"
    [entry] = _served(two_probe_sets, key)
    coords = np.asarray(entry["coords"]).reshape(-1, 2)
    assert not entry["stale"] and np.linalg.norm(coords.mean(axis=0) - moved.mean(axis=0)) < 5.0


@pytest.mark.parametrize("rows", [5, 300])
@pytest.mark.parametrize("sidecar", ["kept", "without its array entry"])
def test_placed_points_of_another_length_than_the_run_are_not_served(two_probe_sets, rows, sidecar):
    """Non-regression: 5 or 300 coordinates for a run of 60 probe points were served with stale: false. A file of
    another length is damaged (also under a sidecar written before sidecars named their array) and placed again."""
    pytest.importorskip("tensorboard")
    place_run(two_probe_sets, "test", into="train", steps=[2])
    test = open_logdir(two_probe_sets).run("test")
    key = open_logdir(two_probe_sets).run("train").embeddings.key("tsne")
    path = test.artifact("placed").path("train", key, "a", 2)
    np.save(path, np.ones((rows, 2), np.float32))
    if sidecar != "kept":
        info = json.loads(path.with_suffix(".json").read_text())
        path.with_suffix(".json").write_text(json.dumps({k: v for k, v in info.items() if k != "array"}))
    with pytest.raises(DamagedFileError) as e:
        test.placed("train", key, "a", 2)
    if sidecar != "kept":
        assert f"holds {rows} points, but run 'test' has 60 at layer 'a', step 2" in str(e.value)
    assert _served(two_probe_sets, key) == []
    assert [r["status"] for r in place_run(two_probe_sets, "test", into="train", steps=[2])] == ["placed"]
    assert [p["n"] for p in _served(two_probe_sets, key)] == [60]


def test_a_value_beyond_float32_is_neither_served_nor_placed(two_probe_sets, monkeypatch):
    """Non-regression: a stored coordinate of 1e300 (a float64 file) passed the finite check and was served as
    null after the cast to float32. The check is made on the values as cast; placing refuses them in one line."""
    import repviz.placement
    from repviz.placement import Placed

    pytest.importorskip("tensorboard")
    place_run(two_probe_sets, "test", into="train", steps=[2])
    test = open_logdir(two_probe_sets).run("test")
    key = open_logdir(two_probe_sets).run("train").embeddings.key("tsne")
    path = test.artifact("placed").path("train", key, "a", 2)
    coords = np.load(path).astype(np.float64)
    coords[3, 0] = 1e300
    np.save(path, coords)
    info = json.loads(path.with_suffix(".json").read_text())  # a sidecar naming no array: only the values checked
    path.with_suffix(".json").write_text(json.dumps({k: v for k, v in info.items() if k != "array"}))
    with pytest.raises(DamagedFileError, match="non-finite"):
        test.placed("train", key, "a", 2)
    assert _served(two_probe_sets, key) == []
    monkeypatch.setattr(repviz.placement, "_place_by_refit", lambda *a: Placed(np.array([[1e300, 0.0]]), {}))
    with pytest.raises(ValueError, match="^placing by pca gave non-finite coordinates .*beyond float32's range"):
        place_points("pca", {}, np.ones((3, 2)), np.ones((3, 2)), np.ones((1, 2)))
