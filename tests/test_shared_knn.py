"""One exact kNN search per snapshot for every method that embeds it (issue #29): t-SNE and UMAP fitted on the graph
of :func:`repviz.manifold.tsne.affinity.sharing_neighbors` give bit for bit the layouts of their own searches, and
``repviz embed --method tsne,umap`` searches each snapshot once.

The references are the estimators' own searches (the hook switched off), and a direct search of fewer neighbours
for the truncation of a larger graph, on data with many tied distances (the digits' integer pixels).
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from repviz import embed_logdir
from repviz.manifold import TSNE
from repviz.manifold.tsne.affinity import sharing_neighbors
from repviz.neighbors import knn
from repviz.store import open_logdir


def _graph_source(X, columns=90):
    """A source for sharing_neighbors searching once (BLAS on one thread, as the pipeline's) and counting calls."""
    with threadpool_limits(1, user_api="blas"):
        indices, distances = knn(X, columns, method="exact")
    asked = []

    def source(k):
        asked.append(k)
        return indices, distances

    return source, asked


def test_the_first_columns_of_a_larger_exact_graph_are_the_smaller_graph(digits):
    X = np.asarray(digits[0][:600], dtype=np.float32)  # integer pixels: many equal distances
    big_i, big_d = knn(X, 90, method="exact")
    for k in (10, 14, 45):
        small_i, small_d = knn(X, k, method="exact")
        np.testing.assert_array_equal(big_i[:, :k], small_i)
        np.testing.assert_array_equal(big_d[:, :k], small_d)
    assert (big_d[:, 1:] == big_d[:, :-1]).any()  # ties were there to break


def test_tsne_on_the_shared_graph_is_bit_identical(digits):
    X = np.asarray(digits[0][:400], dtype=np.float32)
    params = {"perplexity": 10, "max_iter": 300, "early_exaggeration_iter": 100, "random_state": 0}
    own = TSNE(**params).fit_transform(X)
    source, asked = _graph_source(X)
    with sharing_neighbors(len(X), source):
        shared = TSNE(**params).fit_transform(X)
    assert asked == [30]
    np.testing.assert_array_equal(shared, own)


def test_tsne_searches_itself_where_the_graph_would_not_be_its_own(digits):
    X = np.asarray(digits[0][:300], dtype=np.float32)
    source, asked = _graph_source(X)
    with sharing_neighbors(len(X), source):
        TSNE(perplexity=5, max_iter=50, early_exaggeration_iter=10, metric="cosine").fit(X)
        TSNE(perplexity=5, max_iter=50, early_exaggeration_iter=10, neighbors="nndescent").fit(X)
        TSNE(perplexity=5, max_iter=50, early_exaggeration_iter=10).fit(X[:200])  # other data
    assert asked == []


def test_umap_on_the_shared_graph_is_bit_identical(digits):
    pytest.importorskip("umap")
    from repviz.manifold.umap import UMAP

    X = np.asarray(digits[0][:400], dtype=np.float32)
    own = UMAP(random_state=0, n_epochs=60).fit_transform(X)
    source, asked = _graph_source(X)
    with sharing_neighbors(len(X), source):
        shared = UMAP(random_state=0, n_epochs=60).fit_transform(X)
    assert asked == [14]
    np.testing.assert_array_equal(shared, own)


def test_embed_tsne_and_umap_search_each_snapshot_once_with_the_same_layouts(tmp_path, cluster_run, monkeypatch):
    pytest.importorskip("umap")
    import repviz.chains
    import repviz.manifold.tsne.tsne
    import repviz.manifold.umap

    params = {"tsne": {"max_iter": 300, "early_exaggeration_iter": 100}, "umap": {"n_epochs": 60}}
    cluster_run(tmp_path / "own" / "r", layers=("a",), steps=range(3))
    cluster_run(tmp_path / "shared" / "r", layers=("a",), steps=range(3))
    with monkeypatch.context() as m:  # the estimators search themselves, as before #29
        m.setattr(repviz.manifold.tsne.affinity, "_SHARED_KNN", _Unset())
        embed_logdir(tmp_path / "own", ["tsne", "umap"], params, progress=False)

    def no_search(*args, **kwargs):
        raise AssertionError("an estimator searched the neighbours that the pipeline had found")

    monkeypatch.setattr(repviz.manifold.tsne.tsne, "knn", no_search)
    monkeypatch.setattr(repviz.manifold.umap, "knn", no_search)
    searches = []
    monkeypatch.setattr(repviz.neighbors, "knn", lambda *a, **kw: searches.append(a[1]) or knn(*a, **kw))
    result = embed_logdir(tmp_path / "shared", ["tsne", "umap"], params, progress=False)
    assert not result.failed
    assert searches == [90, 90, 90]  # once per snapshot, for both methods
    own, shared = open_logdir(tmp_path / "own").run("r"), open_logdir(tmp_path / "shared").run("r")
    for method in ("tsne", "umap"):
        assert result.keys[method] == shared.embedding_key(method, params[method]) == \
            own.embedding_key(method, params[method])  # the cache keys do not change
        for step in range(3):
            np.testing.assert_array_equal(shared.embedding("a", step, method, params[method]),
                                          own.embedding("a", step, method, params[method]))
    assert shared.neighbor_distances("a", 0, "k90-exact-euclidean").shape == (120, 90)


class _Unset:
    """A ContextVar stand-in that never holds a graph (the hook switched off)."""

    def get(self):
        return None

    def set(self, value):
        return None

    def reset(self, token):
        pass



def test_the_store_keeps_a_graph_with_its_distances(tmp_path, cluster_run):
    cluster_run(tmp_path / "r", layers=("a",), steps=range(1))
    run = open_logdir(tmp_path).run("r")
    indices, distances = knn(np.asarray(run.read_array(run.record("a", 0))), 5, method="exact")
    run.write_neighbor_graph("a", 0, "k5-exact-euclidean", indices.astype(np.int32), distances)
    run.write_neighbor_graph("a", 0, "k5-exact", indices.astype(np.int32))
    np.testing.assert_array_equal(run.neighbor_graph("a", 0, "k5-exact-euclidean"), indices)
    np.testing.assert_array_equal(run.neighbor_distances("a", 0, "k5-exact-euclidean"), distances)
    assert run.neighbor_distances("a", 0, "k5-exact") is None  # cached without them
    run.write_neighbor_graph("a", 0, "k5-exact", indices.astype(np.int32), -distances)
    assert run.neighbor_distances("a", 0, "k5-exact") is None  # damaged: searched again
