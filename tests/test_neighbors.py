"""kNN graphs: exact against scikit-learn's brute force, NN-descent recall against exact, determinism, errors."""

import numpy as np
import pytest
import scipy.sparse as sp

from repviz.neighbors import kneighbors, knn


def _data(n=600, d=12, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(6, d)) * 4
    return (centers[rng.integers(0, 6, n)] + rng.normal(size=(n, d))).astype(np.float32)


@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "cosine"])
def test_exact_matches_sklearn(metric):
    neighbors = pytest.importorskip("sklearn.neighbors")
    X = _data()
    idx, dist = knn(X, 15, metric=metric, block_bytes=1 << 16)  # many small blocks
    ref_metric = "euclidean" if metric == "sqeuclidean" else metric
    ref_d, ref_i = neighbors.NearestNeighbors(n_neighbors=16, metric=ref_metric, algorithm="brute").fit(
        X.astype(np.float64)).kneighbors()
    ref_d = ref_d[:, :15] ** 2 if metric == "sqeuclidean" else ref_d[:, :15]
    np.testing.assert_allclose(dist, ref_d, rtol=1e-3, atol=1e-3)
    assert np.mean(idx == ref_i[:, :15]) > 0.999  # rare float ties may swap
    assert idx.dtype == np.int64 and dist.dtype == np.float32
    assert (np.diff(dist, axis=1) >= 0).all()
    assert not (idx == np.arange(len(X))[:, None]).any()


def test_exact_precomputed_and_duplicates():
    X = _data(200)
    X[1] = X[0]
    D = np.sqrt(((X[:, None].astype(np.float64) - X[None]) ** 2).sum(-1))
    idx, dist = knn(D, 5, metric="precomputed")
    ref_i, ref_d = knn(X, 5)
    np.testing.assert_allclose(dist, ref_d, atol=1e-3)
    assert idx[0, 0] == 1 and idx[1, 0] == 0 and dist[0, 0] == 0  # a duplicate is a neighbour, never itself


@pytest.mark.parametrize("k", [1, 40, 299])  # a few, a sizeable share of the row, every other point
def test_exact_ties_go_to_the_smaller_index(k):
    """Integer points: many exactly equal distances, each row's k neighbours in (distance, index) order."""
    X = np.random.default_rng(1).integers(0, 3, size=(300, 4)).astype(np.float32)
    D = ((X[:, None].astype(np.float64) - X[None]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    ref = np.array([np.lexsort((np.arange(len(X)), row))[:k] for row in D])
    for data, metric in ((X, "euclidean"), (np.sqrt(np.where(np.isinf(D), 0, D)), "precomputed")):
        idx, dist = knn(data, k, metric=metric, block_bytes=1 << 14)
        np.testing.assert_array_equal(idx, ref)
        np.testing.assert_allclose(dist, np.sqrt(np.take_along_axis(D, ref, axis=1)), rtol=1e-6)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_nndescent_recall(metric):
    X = _data(3000, 20)
    exact, dist_exact = knn(X, 30, metric=metric)
    approx, dist = knn(X, 30, metric=metric, method="nndescent", random_state=0)
    recall = np.mean([np.intersect1d(a, b).size for a, b in zip(exact, approx)]) / 30
    print(f"NN-descent recall at k=30 ({metric}): {recall:.4f}")
    assert recall >= 0.98
    assert (np.diff(dist, axis=1) >= 0).all() and not (approx == np.arange(3000)[:, None]).any()
    assert np.all(dist[:, -1] >= dist_exact[:, -1] * (1 - 1e-4))  # never closer than the true k-th neighbour


def test_nndescent_deterministic_and_tiny_inputs():
    X = _data(1500)
    a = knn(X, 10, method="nndescent", random_state=3)
    b = knn(X, 10, method="nndescent", random_state=3)
    np.testing.assert_array_equal(a[0], b[0])
    small = _data(20)
    idx, dist = knn(small, 19, method="nndescent", random_state=0)
    np.testing.assert_array_equal(np.sort(idx, axis=1), [np.delete(np.arange(20), i) for i in range(20)])
    same = np.ones((50, 3), dtype=np.float32)
    idx, dist = knn(same, 5, method="nndescent", random_state=0)
    assert (dist == 0).all() and not (idx == np.arange(50)[:, None]).any()


def test_nndescent_from_seeds_of_a_related_data_set_keeps_its_recall():
    """Seeded by the graph of the same points slightly moved (a later snapshot's activations), NN-descent finds
    the new neighbours as well as from its trees; seeded by the exact answer it returns it; seeds that are wrong
    or out of range only cost recall nothing."""
    X = _data(3000, 20)
    moved = X + np.random.default_rng(1).normal(scale=0.3, size=X.shape).astype(np.float32)
    exact, _ = knn(moved, 30)
    before, _ = knn(X, 30, method="nndescent", random_state=0)
    assert np.mean([np.intersect1d(a, b).size for a, b in zip(exact, before)]) / 30 < 0.95  # the graph changed
    plain, _ = knn(moved, 30, method="nndescent", random_state=0)
    seeded, dist = knn(moved, 30, method="nndescent", random_state=0, seeds=before)

    def recall(idx):
        return np.mean([np.intersect1d(a, b).size for a, b in zip(exact, idx)]) / 30

    print(f"recall: plain {recall(plain):.4f}, seeded {recall(seeded):.4f}")
    assert recall(seeded) >= max(0.98, recall(plain) - 0.005)
    assert (np.diff(dist, axis=1) >= 0).all() and not (seeded == np.arange(3000)[:, None]).any()
    assert recall(knn(moved, 30, method="nndescent", random_state=0, seeds=exact)[0]) == 1.0
    junk = np.random.default_rng(2).integers(-5, 3005, size=(3000, 40))
    assert recall(knn(moved, 30, method="nndescent", random_state=0, seeds=junk)[0]) >= 0.98
    np.testing.assert_array_equal(knn(moved, 30, seeds=junk)[0], exact)  # the exact search ignores them
    with pytest.raises(ValueError, match=r"seeds must be an integer array with one row .* shape \(3000, m\)"):
        knn(moved, 30, method="nndescent", seeds=before[:10])


def test_auto_picks_exact_for_small_and_precomputed():
    X = _data(300)
    np.testing.assert_array_equal(knn(X, 7, method="auto")[0], knn(X, 7)[0])


@pytest.mark.parametrize("kwargs,match", [
    ({"metric": "hamming"}, "The 'metric' parameter of knn must be a str among"),
    ({"method": "annoy"}, "The 'method' parameter of knn must be a str among"),
])
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        knn(_data(50), 5, **kwargs)


def test_invalid_inputs():
    with pytest.raises(ValueError, match=r"n_neighbors \(50\) must be less than n_samples \(50\)"):
        knn(_data(50), 50)
    with pytest.raises(ValueError, match="needs dense feature vectors .* not metric='precomputed'"):
        knn(np.zeros((10, 10)), 3, metric="precomputed", method="nndescent")
    X = _data(50)
    X[4, 0] = np.nan
    with pytest.raises(ValueError, match=r"contains NaN or infinity in 1 row\(s\)"):
        knn(X, 3)


_METRICS = [("manhattan", None), ("l1", None), ("chebyshev", None), ("minkowski", {"p": 3}),
            ("mahalanobis", "VI"), (lambda a, b: np.abs(a - b).sum() ** 0.5, None)]


@pytest.mark.parametrize("metric,params", _METRICS)
def test_other_metrics_match_sklearn(metric, params):
    """The cdist metrics and callables against scikit-learn's brute force, self-search and new queries."""
    neighbors = pytest.importorskip("sklearn.neighbors")
    X = _data(120, 5).astype(np.float64)
    Q = _data(30, 5, seed=1).astype(np.float64)
    if params == "VI":
        params = {"VI": np.linalg.inv(np.cov(X.T))}
    ref = neighbors.NearestNeighbors(n_neighbors=8, metric=metric, metric_params=params,
                                     algorithm="brute").fit(X)
    idx, dist = knn(X, 7, metric=metric, metric_params=params, block_bytes=1 << 12)
    ref_d, ref_i = ref.kneighbors()
    np.testing.assert_allclose(dist, ref_d[:, :7], rtol=1e-5)
    np.testing.assert_array_equal(idx, ref_i[:, :7])
    idx, dist = kneighbors(Q, X, 8, metric=metric, metric_params=params)
    ref_d, ref_i = ref.kneighbors(Q)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-5)
    np.testing.assert_array_equal(idx, ref_i)


def test_mahalanobis_needs_its_matrix_and_a_metric_its_sign():
    with pytest.raises(ValueError, match="Must provide either V or VI for Mahalanobis distance"):
        knn(_data(50), 5, metric="mahalanobis")
    with pytest.raises(ValueError, match=r"All distances must be non-negative, but the metric given .* returned -1"):
        knn(_data(20), 5, metric=lambda a, b: -1.0)


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "manhattan"])
def test_sparse_input_equals_dense(metric):
    rng = np.random.default_rng(0)
    X = sp.random(200, 40, density=0.2, format="lil", random_state=0, dtype=np.float64)
    X[3] = 0  # an empty row
    X = X.tocsr()
    dense = knn(X.toarray(), 6, metric=metric)
    sparse = knn(X, 6, metric=metric, block_bytes=1 << 12)
    np.testing.assert_allclose(sparse[1], dense[1], rtol=1e-5, atol=1e-6)
    assert np.mean(sparse[0] == dense[0]) > 0.99  # the empty rows tie
    Q = sp.random(10, 40, density=0.2, format="csr", random_state=rng.integers(1 << 30))
    np.testing.assert_allclose(kneighbors(Q, X, 4, metric=metric)[1],
                               kneighbors(Q.toarray(), X.toarray(), 4, metric=metric)[1], rtol=1e-5, atol=1e-6)


def test_sparse_precomputed_neighbor_graph():
    """scikit-learn's KNeighborsTransformer graph (self included, k + 1 entries a row): the k nearest stored
    entries other than the diagonal, as from the data; a graph with too few entries is refused in one line."""
    neighbors = pytest.importorskip("sklearn.neighbors")
    X = _data(300, 6)
    G = neighbors.KNeighborsTransformer(n_neighbors=10, mode="distance").fit_transform(X)
    idx, dist = knn(G, 10, metric="precomputed")
    ref_i, ref_d = knn(X, 10)
    np.testing.assert_array_equal(idx, ref_i)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-4)  # float32 rounding of the two computations
    Gq = neighbors.KNeighborsTransformer(n_neighbors=10, mode="distance").fit(X).transform(X[:20] + 0.01)
    np.testing.assert_array_equal(kneighbors(Gq, X, 5, metric="precomputed")[0], kneighbors(X[:20] + 0.01, X, 5)[0])
    with pytest.raises(ValueError, match=r"stores only 10 neighbour\(s\) in row 0, fewer than n_neighbors \(11\)"):
        knn(G, 11, metric="precomputed")
