"""The embed pipeline over snapshots of probe subsets: one embedding row per stored row, chains continued and
aligned through the points consecutive snapshots share, and ``repviz info`` saying which snapshots hold subsets.

References are independent: hand-placed layouts for the alignment and the carried start, and for the chains the
displacement of the shared points against that of unrelated layouts.
"""

from __future__ import annotations

import numpy as np
import pytest

from repviz import embed_logdir
from repviz.align import align_to, mean_displacement
from repviz.chains import carry_layout
from repviz.cli import main
from repviz.store import open_logdir

N = 90  # probe points, 3 clusters
TSNE = {"tsne": {"max_iter": 400, "early_exaggeration_iter": 100, "perplexity": 10}}


def _clusters(seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6, size=(3, 10))
    labels = np.arange(N) % 3
    return (centres[labels] + rng.normal(size=(N, 10))).astype(np.float32), labels


#: the probe points of each snapshot: whole, a subset, a subset sharing half of it with new points, whole again
ROWS = {0: None, 1: np.arange(0, N, 2), 2: np.r_[np.arange(0, 45, 2), np.arange(45, N, 2)], 3: None}


@pytest.fixture
def subset_run(tmp_path, new_run):
    writer = new_run(tmp_path / "r", layers={"dense": (N, 10)}, step_unit="batch", probe={"n": N},
                     batch_probe={"n": 45, "seed": 0, "by": "class"})
    X, labels = _clusters()
    writer.write_probe(np.arange(100, 100 + N), labels)
    drift = np.random.default_rng(1).normal(scale=0.05, size=X.shape).astype(np.float32)
    for step, rows in ROWS.items():
        Xs = X + step * drift  # the network barely changes: consecutive pictures should barely move
        writer.write_activation("dense", step, Xs if rows is None else Xs[rows], rows=rows)
    return tmp_path


def test_an_embedding_of_a_subset_has_one_row_per_stored_row_and_says_which(subset_run):
    embed_logdir(subset_run, ["tsne", "pca"], TSNE, progress=False)
    run = open_logdir(subset_run).run("r")
    for method in ("tsne", "pca"):
        for step, rows in ROWS.items():
            Y = run.embedding("dense", step, method)
            assert len(Y) == (N if rows is None else len(rows))
            info = run.embeddings.info(run.embeddings.key(method), "dense", step)
            assert info.get("rows") == run.record("dense", step).get("rows")
        key = run.embeddings.key(method)
        assert run.embeddings.info(key, "dense", 1)["common_points"] == 45  # all of step 1 is in step 0
        assert run.embeddings.info(key, "dense", 2)["common_points"] == 23
        assert run.embeddings.info(key, "dense", 3)["common_points"] == 46  # back to the whole probe
    # the cache compares with the snapshot's row count: nothing is computed again
    again = embed_logdir(subset_run, ["tsne", "pca"], TSNE, progress=False)
    assert (again.computed, again.cached, again.failed) == (0, 8, [])


@pytest.mark.parametrize("method", ["tsne", "pca"])
def test_points_shared_with_the_previous_snapshot_barely_move(subset_run, method):
    """Continuation (t-SNE) and Procrustes (PCA) through the shared points: they stay where they were; for t-SNE
    far closer than in an embedding of the same snapshot on its own (align="none"), for PCA that embedding moved
    by the rotation fitted on the shared points."""
    params = TSNE if method == "tsne" else None
    chained = embed_logdir(subset_run, [method], params, progress=False).keys[method]
    alone = embed_logdir(subset_run, [method], params, align="none", progress=False).keys[method]
    run = open_logdir(subset_run).run("r")
    for step in (1, 2, 3):
        rows, before = run.rows("dense", step), run.rows("dense", step - 1)
        common = np.intersect1d(rows, before)
        here, there = np.searchsorted(rows, common), np.searchsorted(before, common)
        previous = run.embeddings.read(chained, "dense", step - 1)[there]
        moved = mean_displacement(run.embeddings.read(chained, "dense", step)[here], previous)
        unaligned = mean_displacement(run.embeddings.read(alone, "dense", step)[here], previous)
        assert moved < 0.2, (step, moved)
        if method == "tsne":
            assert moved < unaligned / 3, (step, moved, unaligned)
        else:  # the snapshot's own PCA, rotated onto the previous layout of the shared points only
            np.testing.assert_allclose(run.embeddings.read(chained, "dense", step),
                                       align_to(run.embeddings.read(alone, "dense", step), previous, here), atol=1e-4)


def test_procrustes_on_the_common_points_moves_every_point():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(8, 2))
    angle = 0.7
    R = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]) @ np.diag([1, -1])
    target = Y @ R + [3, -2]
    common = np.array([1, 2, 5, 6])
    np.testing.assert_allclose(align_to(Y, target[common], common), target, atol=1e-5)


def test_a_new_point_starts_at_the_mean_of_its_nearest_common_points():
    X = np.array([[0, 0], [1, 0], [10, 0], [11, 0], [0.4, 0], [10.6, 0]], np.float32)
    previous = np.array([[0, 0], [2, 0], [50, 50], [52, 50]], np.float32)  # of rows 0-3
    start = carry_layout(previous, X, np.arange(4), n_neighbors=2)
    np.testing.assert_array_equal(start[:4], previous)
    np.testing.assert_allclose(start[4:], [[1, 0], [51, 50]], atol=0.02)  # within the jitter


def test_info_says_which_snapshots_hold_subsets(subset_run, capsys):
    assert main(["info", str(subset_run)]) == 0
    out = capsys.readouterr().out
    assert "subset snapshots: 45 of 90 probe points at 1 (batches 1), drawn by class with seed 0\n" in out
    assert "subset snapshots: 46 of 90 probe points at 1 (batches 2)\n" in out
    assert "the other 2 snapshot(s) hold every probe point" in out


def test_a_snapshot_sharing_fewer_than_3_points_with_the_previous_one_starts_afresh(tmp_path, new_run):
    writer = new_run(tmp_path / "r", layers={"dense": (N, 10)})
    X, labels = _clusters()
    writer.write_probe(np.arange(N), labels)
    writer.write_activation("dense", 0, X[:40], rows=np.arange(40))
    writer.write_activation("dense", 1, X[38:], rows=np.arange(38, N))  # shares points 38 and 39
    chained = embed_logdir(tmp_path, ["pca"], progress=False).keys["pca"]
    alone = embed_logdir(tmp_path, ["pca"], align="none", progress=False).keys["pca"]
    run = open_logdir(tmp_path).run("r")
    assert run.embeddings.info(chained, "dense", 1)["common_points"] == 2
    np.testing.assert_array_equal(run.embeddings.read(chained, "dense", 1), run.embeddings.read(alone, "dense", 1))


def test_the_exported_grid_colours_each_subset_snapshot_by_its_own_points(subset_run):
    from repviz.export import embedding_grid

    key = embed_logdir(subset_run, ["pca"], progress=False).keys["pca"]
    fig = embedding_grid(open_logdir(subset_run), "dense", key)
    sizes = [len(ax.collections[0].get_offsets()) for ax in fig.axes if ax.collections]
    colours = [len(ax.collections[0].get_facecolors()) for ax in fig.axes if ax.collections]
    assert sizes == colours == [N, 45, 46, N]
