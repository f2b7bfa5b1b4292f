"""The plugin's routes on snapshots that hold a subset of the probe: the page maps each row to its probe point
(``rows``), and every route that takes or gives points speaks of probe positions (``knn``, ``trails``,
``predictions``), the neighbourhood change comparing two subsets on the points they share."""

from __future__ import annotations

import numpy as np
import pytest
from test_plugin_routes import _array, _client, _get

from repviz.store import open_logdir

tb = pytest.importorskip("tensorboard")
from tensorboard_plugin_repviz import compare, data  # noqa: E402
from tensorboard_plugin_repviz.catalog import Catalog  # noqa: E402

KEY = "pca-subsets00000"
N = 12
SUBSETS = {0: None, 1: np.array([1, 3, 4, 8, 10]), 2: np.array([0, 1, 3, 4, 8, 9, 10, 11])}


@pytest.fixture(scope="module")
def logs(tmp_path_factory, new_run):
    """Run "sub": 12 probe points (ids 100.., 3 classes), layer "dense" of width 3 stored whole at step 0 and as
    two different subsets at steps 1 and 2; the embedding of each snapshot is its activations' first two columns;
    predictions of the step-1 subset."""
    root = tmp_path_factory.mktemp("subset_logs")
    writer = new_run(root / "sub", layers={"dense": (N, 3)})
    writer.write_probe(np.arange(100, 100 + N), np.arange(N) % 3)
    rng = np.random.default_rng(0)
    run = open_logdir(root).run("sub")
    run.embeddings.write_method(KEY, {"method": "pca", "params": {}, "align": "snapshots", "default": True})
    for step, rows in SUBSETS.items():
        X = rng.normal(size=(N if rows is None else len(rows), 3)).astype(np.float32)
        writer.write_activation("dense", step, X, rows=rows, epoch=step)
        run.embeddings.write(KEY, "dense", step, X[:, :2], {"method": "pca", "scores": {}})
    probs = np.eye(3, dtype=np.float32)[[2, 0, 1, 1, 0]] * 0.8 + 0.2 / 3
    writer.write_prediction(1, probs, rows=SUBSETS[1])
    return root


@pytest.fixture(scope="module")
def catalog(logs):
    return Catalog(str(logs))


def _activations(logs, step):
    return np.asarray(open_logdir(logs).run("sub").activations("dense", step))


def test_rows_route_maps_each_coords_row_to_its_probe_point(logs):
    client, plugin = _client(logs)
    try:
        for step, rows in SUBSETS.items():
            r = _get(client, f"rows?run=sub&layer=dense&step={step}")
            assert r.status_code == 200 and r.headers["X-Repviz-Shape"] == str(N if rows is None else len(rows))
            np.testing.assert_array_equal(_array(r, "<i4"), np.arange(N) if rows is None else rows)
            coords = _array(_get(client, f"coords?run=sub&layer=dense&step={step}&key={KEY}"), "<f4")
            assert len(coords) == 2 * len(_array(r, "<i4"))
        info = _get(client, f"info?run=sub&layer=dense&step=1&key={KEY}").get_json()
        assert info["points"] == {"n": 5, "of": N, "subset": True}
        assert _get(client, "info?run=sub&layer=dense&step=0").get_json()["points"] == {"n": N, "of": N,
                                                                                         "subset": False}
        assert _get(client, "rows?run=sub&layer=dense&step=7").status_code == 404
    finally:
        plugin.jobs.close()


def test_predictions_of_a_subset_come_in_probe_order(catalog):
    out = data.predictions_impl(catalog, "sub", 1)
    classes, confidence = out[:N], out[N:]
    expected = np.full(N, -1.0)
    expected[SUBSETS[1]] = [2, 0, 1, 1, 0]
    np.testing.assert_array_equal(classes, expected)
    assert np.all(np.isnan(np.delete(confidence, SUBSETS[1])))
    np.testing.assert_allclose(confidence[SUBSETS[1]], 0.8 + 0.2 / 3, rtol=1e-6)


def test_knn_takes_and_gives_probe_positions(logs, catalog):
    rows = SUBSETS[2]
    X = _activations(logs, 2)
    point = 9  # probe position 9 is row 5 of the step-2 snapshot
    distances = np.linalg.norm(X - X[5], axis=1)
    distances[5] = np.inf
    order = np.argsort(distances, kind="stable")[:3]
    out = compare.knn_impl(catalog, "sub", "dense", 2, point, 3)
    assert out["index"] == point
    assert out["neighbors"] == rows[order].tolist()
    np.testing.assert_allclose(out["distances"], distances[order], rtol=1e-5)
    with pytest.raises(data.BadRequest, match="one of the 8 probe points"):
        compare.knn_impl(catalog, "sub", "dense", 2, 2, 3)  # position 2 is not in the step-2 subset


def test_trails_are_nan_where_a_snapshot_lacks_the_point(logs, catalog):
    points = [0, 3, 8]
    coords, steps = compare.trails_impl(catalog, "sub", "dense", KEY, points)
    assert steps == [0, 1, 2] and coords.shape == (3, 3, 2)
    for t, rows in SUBSETS.items():
        X = _activations(logs, t)
        for p, point in enumerate(points):
            if rows is None or point in rows:
                row = point if rows is None else int(np.flatnonzero(rows == point)[0])
                np.testing.assert_array_equal(coords[t, p], X[row, :2])
            else:
                assert np.all(np.isnan(coords[t, p])), (t, point)
    assert np.isnan(coords[1, 0]).all() and not np.isnan(coords[2, 0]).any()


def _knn_sets(X, k):
    d = np.linalg.norm(X[:, None] - X[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    return [set(np.argsort(row, kind="stable")[:k]) for row in d]


def test_neighbourhood_change_of_two_subsets_compares_the_points_they_share(logs, catalog):
    k = 2
    common = np.intersect1d(SUBSETS[1], SUBSETS[2])  # probe positions 1, 3, 4, 8, 10
    A = _activations(logs, 1)[np.searchsorted(SUBSETS[1], common)]
    B = _activations(logs, 2)[np.searchsorted(SUBSETS[2], common)]
    expected = [1 - len(a & b) / len(a | b) for a, b in zip(_knn_sets(A, k), _knn_sets(B, k))]
    asked = []

    def compute(representations, k):
        asked.extend(representations)
        return [compare.compute_graph(*rep[:3], k, *rep[3:]) for rep in representations]

    change = compare.neighbor_change_impl(catalog, ("sub", "dense", 2), ("sub", "dense", 1), k, compute)
    assert change.shape == (len(SUBSETS[2]),)
    held = np.isin(SUBSETS[2], common)
    np.testing.assert_allclose(change[held], expected, atol=1e-6)
    assert np.all(np.isnan(change[~held]))  # positions 0, 9 and 11 are not in the step-1 subset
    assert all(len(rep) == 4 for rep in asked)  # graphs among the shared points only


def test_density_by_class_of_a_subset_uses_the_subsets_labels(catalog):
    out = compare.density_impl(catalog, "sub", "dense", 2, KEY, "class", 2)
    classes = {c["class"] for c in out["contours"]}
    assert classes <= {0, 1, 2}
