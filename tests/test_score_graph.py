"""A snapshot's exact k-NN graph found once and shared by the quality scores of every method (issue #29)."""

from __future__ import annotations

import numpy as np
import pytest

from repviz import metrics
from repviz.metrics import quality_scores
from repviz.neighbors import knn
from repviz.pipeline import embed_logdir
from repviz.store import open_logdir


@pytest.fixture()
def scans(monkeypatch):
    """Every pass over the input's distances, as (neighbours searched, rows scanned)."""
    calls = []
    scan = metrics._scan

    def counted(X, queries, k, others, *args):
        if X.shape[1] > 3:  # the input, not the embedding
            calls.append((k, len(queries)))
        return scan(X, queries, k, others, *args)

    monkeypatch.setattr(metrics, "_scan", counted)
    return calls


@pytest.mark.parametrize("max_exact", [None, 300])
def test_scores_from_a_cached_graph_are_the_scores(digits, max_exact, scans):
    X, y = digits[0][:600].astype(np.float32), digits[1][:600]
    Y = X[:, :2] + np.random.default_rng(0).normal(size=(600, 2)).astype(np.float32)  # keeps some neighbours
    searched = quality_scores(X, Y, y, max_exact=max_exact)
    assert scans == [(10, searched["n_sampled"])]
    scans.clear()
    shared = quality_scores(X, Y, y, max_exact=max_exact, neighbors=knn(X, 10)[0])
    assert shared == searched
    # no neighbour search of the input; its distances scanned only for the rows with a false neighbour
    [(k, rows)] = scans
    assert k == 0 and 0 < rows <= searched["n_sampled"]


def test_the_neighbours_returned_are_the_graph_of_every_point(digits):
    X = digits[0][:300].astype(np.float32)
    scores, near = quality_scores(X, X[:, :2], max_exact=None, return_neighbors=True)
    np.testing.assert_array_equal(near, knn(X, 10)[0])
    with pytest.raises(ValueError, match=r"neighbors must be an integer array \(n_samples, >= n_neighbors\) = "
                                         r"\(300, >= 10\); got int64 \(300, 5\)"):
        quality_scores(X, X[:, :2], neighbors=near[:, :5])


def test_methods_scoring_one_snapshot_search_its_neighbours_once(tmp_path, cluster_run, scans):
    cluster_run(tmp_path / "logs" / "r", layers=("a",), steps=range(2), n=120)
    embed_logdir(tmp_path / "logs", ["pca"], progress=False)
    assert [k for k, _ in scans] == [10, 10]  # each snapshot's neighbours searched by the first method to score it
    run = open_logdir(tmp_path / "logs").run("r")
    assert run.artifact("neighbor_graph").cached("a", 1, "k10-exact") is not None
    scans.clear()
    embed_logdir(tmp_path / "logs", ["cmds", "isomap"], progress=False)
    assert scans and all(k == 0 for k, _ in scans)  # the others read them from the store
    for key in (run.embeddings.key("cmds"), run.embeddings.key("isomap")):
        for step in (0, 1):
            X = np.asarray(run.activations("a", step), dtype=np.float32)
            expected = quality_scores(X, run.embeddings.read(key, "a", step), np.arange(120) % 4, max_exact=1000)
            assert run.embeddings.info(key, "a", step)["scores"] == expected
