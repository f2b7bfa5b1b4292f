"""A t-SNE chain starts each snapshot's approximate kNN search from the previous snapshot's graph when both hold
the same probe points, and searches afresh otherwise (another subset, or nothing before it)."""

from __future__ import annotations

import numpy as np

import repviz.neighbors
from repviz import embed_logdir
from repviz.store import open_logdir

N = 120
#: probe rows of each snapshot: whole, whole, a subset, the same subset, whole
ROWS = {0: None, 1: None, 2: np.arange(0, N, 2), 3: np.arange(0, N, 2), 4: None}


def test_each_snapshot_s_search_starts_from_the_graph_of_the_one_before_on_the_same_points(tmp_path, new_run,
                                                                                          monkeypatch):
    monkeypatch.setattr(repviz.neighbors, "NNDESCENT_MIN_N", 50)  # NN-descent at this size, as from 50,000
    calls = []
    search = repviz.neighbors._nndescent_knn

    def spy(X, k, metric, random_state, seeds=None, **kw):
        out = search(X, k, metric, random_state, seeds=seeds, **kw)
        calls.append((len(X), seeds, out[0]))
        return out

    monkeypatch.setattr(repviz.neighbors, "_nndescent_knn", spy)
    writer = new_run(tmp_path / "r", layers={"dense": (N, 8)}, step_unit="batch", probe={"n": N},
                     batch_probe={"n": N // 2, "seed": 0, "by": "class"})
    rng = np.random.default_rng(0)
    X = (rng.normal(scale=5, size=(3, 8))[np.arange(N) % 3] + rng.normal(size=(N, 8))).astype(np.float32)
    writer.write_probe(np.arange(N), np.arange(N) % 3)
    for step, rows in ROWS.items():
        Xs = X + step * 0.05 * rng.normal(size=X.shape).astype(np.float32)
        writer.write_activation("dense", step, Xs if rows is None else Xs[rows], rows=rows)
    embed_logdir(tmp_path, ["tsne"], {"tsne": {"perplexity": 10, "max_iter": 300}}, progress=False)

    assert [n for n, _, _ in calls] == [N, N, N // 2, N // 2, N]
    seeds = [s for _, s, _ in calls]
    assert seeds[0] is None and seeds[2] is None and seeds[4] is None  # first, and after a change of points
    np.testing.assert_array_equal(seeds[1], calls[0][2])
    np.testing.assert_array_equal(seeds[3], calls[2][2])
    run = open_logdir(tmp_path).run("r")
    assert all(np.isfinite(run.embedding("dense", s, "tsne")).all() for s in ROWS)
