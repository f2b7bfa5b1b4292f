"""Quality scores against scikit-learn's trustworthiness and hand-computed cases."""

import numpy as np
import pytest

from repviz.metrics import continuity, knn_accuracy, knn_preservation, quality_scores, trustworthiness


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    Y = X[:, :2] + 0.3 * rng.normal(size=(n, 2))
    return X, Y


@pytest.mark.parametrize("k", [5, 12])
def test_trustworthiness_equals_sklearn(k):
    manifold = pytest.importorskip("sklearn.manifold")
    X, Y = _data()
    assert trustworthiness(X, Y, k) == pytest.approx(manifold.trustworthiness(X, Y, n_neighbors=k), abs=1e-6)


def test_continuity_is_trustworthiness_with_roles_swapped():
    manifold = pytest.importorskip("sklearn.manifold")
    X, Y = _data()
    assert continuity(X, Y, 7) == pytest.approx(manifold.trustworthiness(Y, X, n_neighbors=7), abs=1e-6)


def test_perfect_embedding_scores_one():
    X, _ = _data(120)
    assert trustworthiness(X, X, 5) == pytest.approx(1.0)
    assert continuity(X, X, 5) == pytest.approx(1.0)
    assert knn_preservation(X, X, 5) == 1.0


def test_knn_preservation_and_accuracy_by_hand():
    line = lambda v: np.c_[np.asarray(v, dtype=float), np.zeros(len(v))]  # noqa: E731
    X = line([0, 1, 10, 11, 20, 21, 30, 31])                  # nearest neighbours: the pairs (0,1), (2,3), ...
    assert knn_preservation(X, line([31, 30, 21, 20, 11, 10, 1, 0]), 1) == 1.0    # pairs kept, order reversed
    assert knn_preservation(X, line([0, 10, 1, 11, 20, 30, 21, 31]), 1) == 0.0    # every pair split
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    assert knn_accuracy(X, labels, 1) == 1.0
    assert knn_accuracy(X, np.array([0, 1] * 4), 1) == 0.0


def test_sampled_scores_close_to_exact():
    X, Y = _data(600)
    exact = trustworthiness(X, Y, 10, max_exact=None)
    sampled = trustworthiness(X, Y, 10, max_exact=300, random_state=1)
    assert sampled == pytest.approx(exact, abs=0.02)
    scores = quality_scores(X, Y, labels=np.arange(600) % 3, max_exact=300)
    assert scores["n_sampled"] == 300 and set(scores) >= {"trustworthiness", "continuity", "knn_preservation",
                                                          "knn_accuracy"}


def test_errors_give_both_numbers():
    X, Y = _data(20)
    with pytest.raises(ValueError, match=r"n_neighbors \(10\) should be less than n_samples / 2 \(10.0\)"):
        trustworthiness(X, Y, 10)
    with pytest.raises(ValueError, match="labels has 3 entries but Y has 20 rows"):
        knn_accuracy(Y, [0, 1, 2])


@pytest.mark.parametrize("max_exact", [None, 150])
def test_quality_scores_equal_the_separate_scores(max_exact):
    """One neighbour search per space gives what the separate functions give, exact and sampled."""
    X, Y = _data(400)
    labels = np.random.default_rng(1).integers(0, 4, 400)
    got = quality_scores(X, Y, labels, 9, max_exact=max_exact, random_state=3)
    kw = dict(max_exact=max_exact, random_state=3)
    assert got["trustworthiness"] == trustworthiness(X, Y, 9, **kw)
    assert got["continuity"] == continuity(X, Y, 9, **kw)
    assert got["knn_preservation"] == knn_preservation(X, Y, 9, **kw)
    assert got["knn_accuracy"] == knn_accuracy(Y, labels, 9, **kw)
    assert got["n_sampled"] == (150 if max_exact else 400) and got["n_neighbors"] == 9


@pytest.mark.parametrize("k", [1, 10, 40])
def test_embedding_neighbours_by_tree_equal_the_exact_search_with_ties(k):
    """Low-dimensional inputs (embeddings) are searched with a k-d tree; on integer points (ties everywhere,
    duplicates included) and on random ones it returns what the exact blocked search returns, ties to the
    smaller index."""
    from repviz.metrics import _query_knn
    from repviz.neighbors import knn

    rng = np.random.default_rng(0)
    for Y in (rng.integers(0, 6, size=(300, 2)).astype(np.float32), rng.normal(size=(300, 3))):
        queries = np.sort(rng.choice(300, size=120, replace=False))
        np.testing.assert_array_equal(_query_knn(Y, queries, k), knn(Y, k)[0][queries])
        np.testing.assert_array_equal(_query_knn(Y, np.arange(300), k), knn(Y, k)[0])
