"""Isomap: geodesics against scipy, embedding against scikit-learn (test-only), the rolled rectangle,
landmarks, disconnected graphs and bad input."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra
from scipy.spatial import procrustes
from scipy.spatial.distance import cdist
from sklearn.datasets import make_blobs, make_s_curve, make_swiss_roll
from sklearn.manifold import Isomap as SkIsomap
from sklearn.neighbors import KNeighborsClassifier, KNeighborsTransformer, kneighbors_graph, radius_neighbors_graph
from sklearn.pipeline import make_pipeline

from repviz.manifold import Isomap
from repviz.manifold._graph import knn_graph
from repviz.manifold.isomap import _geodesics


@pytest.fixture(scope="module")
def roll(swiss_roll):
    return swiss_roll(800)


def test_geodesics_equal_scipy_dijkstra():
    X = np.random.default_rng(0).standard_normal((700, 5))
    G = knn_graph(X, 6, "euclidean")[0]
    ref = dijkstra(G, directed=False)
    assert np.isfinite(ref).all()
    n = len(X)
    order = np.random.default_rng(1).permutation(n).astype(np.int64)
    for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-12)):  # float64: exact despite float32 heap keys
        out = np.empty((n, n), dtype=dtype)
        for reuse in (False, True):  # plain Dijkstra, and with finished rows reused as shortcuts
            _geodesics(G, order, out, reuse=reuse)
            np.testing.assert_allclose(out, ref if reuse else ref[order], rtol=rtol, atol=rtol)


@pytest.mark.parametrize("data", ["swiss_roll", "s_curve"])
def test_matches_sklearn(data):
    X = (make_swiss_roll if data == "swiss_roll" else make_s_curve)(1200, random_state=0)[0]
    ours = Isomap(n_neighbors=10, random_state=0).fit(X)  # n > 1000: ARPACK path
    ref = SkIsomap(n_neighbors=10).fit(X)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-6
    np.testing.assert_allclose(ours.eigenvalues_, ref.kernel_pca_.eigenvalues_, rtol=1e-5)


def test_precomputed_and_radius_match(roll):
    ref = Isomap(n_neighbors=8).fit(roll).embedding_
    pre = Isomap(n_neighbors=8, metric="precomputed").fit(cdist(roll, roll)).embedding_
    assert procrustes(ref, pre)[2] < 1e-6
    ours = Isomap(n_neighbors=None, radius=4.0).fit(roll)
    sk = SkIsomap(n_neighbors=None, radius=4.0).fit(roll)
    assert procrustes(ours.embedding_, sk.embedding_)[2] < 1e-6


def test_rolled_rectangle_recovers_aspect_ratio():
    # a 3:1 rectangle (arc length x height) rolled into a spiral; the spiral's arc length is parametrised exactly
    rng = np.random.default_rng(0)
    n = 1500
    a = 1.0  # spiral r = a * phi, arc length s(phi) = a/2 (phi sqrt(1+phi²) + asinh(phi))
    phi = np.linspace(1.5 * np.pi, 4.5 * np.pi, 4000)
    s = 0.5 * a * (phi * np.sqrt(1 + phi ** 2) + np.arcsinh(phi))
    length = s[-1] - s[0]
    u = rng.uniform(0, length, n)
    v = rng.uniform(0, length / 3, n)
    ph = np.interp(u + s[0], s, phi)
    X = np.c_[a * ph * np.cos(ph), v, a * ph * np.sin(ph)]
    Y = Isomap(n_neighbors=12).fit_transform(X)
    extent = np.sort(np.ptp(Y, axis=0))[::-1]
    assert extent[0] / extent[1] == pytest.approx(3.0, rel=0.1)


def test_landmarks_close_to_full(roll):
    full = Isomap(n_neighbors=10).fit(roll)
    land = Isomap(n_neighbors=10, n_landmarks=200, random_state=0).fit(roll)
    assert land.landmarks_.shape == (200,)
    assert procrustes(full.embedding_, land.embedding_)[2] < 1e-3


def test_deterministic_signs(roll):
    a = Isomap(n_neighbors=10).fit_transform(roll)
    b = Isomap(n_neighbors=10).fit_transform(roll[::-1].copy())[::-1]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
    assert (np.abs(a).argmax(axis=0) == np.argmax(a, axis=0)).all()  # largest-magnitude entry positive


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_neighbors=800), r"n_neighbors \(800\) must be less than n_samples \(800\)"),
    (dict(n_neighbors=5, radius=1.0), r"Isomap\(radius=..., n_neighbors=None\)"),
    (dict(n_neighbors=None), r"Isomap\(radius=..., n_neighbors=None\)"),
    (dict(n_landmarks=900), r"n_landmarks \(900\) must be at most n_samples \(800\)"),
    (dict(n_neighbors=0), r"The 'n_neighbors' parameter of Isomap must be an int in the range \[1, inf\) or None"),
    (dict(metric="hamming"), "The 'metric' parameter of Isomap must be a str among"),
    (dict(n_components=800), r"n_components \(800\) must be less than"),
])
def test_bad_parameters(roll, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Isomap(**kwargs).fit(roll)


def test_refuses_huge_geodesic_matrix(roll, monkeypatch):
    monkeypatch.setenv("REPVIZ_MAX_DENSE_BYTES", str(2 << 20))
    with pytest.raises(MemoryError, match=r"Use Isomap\(n_landmarks=1000\).*, or pass float32 data"):
        Isomap().fit(roll)  # float64: two 800 x 800 float64 matrices, 10 MB
    with pytest.raises(MemoryError, match=r"O\(n_landmarks × n_samples\)\.$"):
        Isomap().fit(roll.astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Isomap(n_landmarks=100, random_state=0).fit(roll)  # two 100 x 800 float64 matrices fit the budget


def _aligned(ours: np.ndarray, ref_embedding: np.ndarray, embedding: np.ndarray) -> np.ndarray:
    """``ours`` with the column signs that take our fitted embedding to the reference's."""
    return ours * np.sign(np.sum(embedding * ref_embedding, axis=0))


@pytest.mark.parametrize("kwargs", [dict(n_neighbors=6), dict(n_neighbors=None, radius=0.8)])
def test_transform_matches_sklearn(kwargs):
    """New points through their neighbours' geodesics and the kernel-PCA projection, as scikit-learn places
    them; the fitted points get their embedding back."""
    X = make_s_curve(300, random_state=0)[0]
    Q = X[:40] + 0.03 * np.random.default_rng(0).normal(size=(40, 3))
    ours = Isomap(n_components=3, **kwargs).fit(X)
    ref = SkIsomap(n_components=3, **kwargs).fit(X)
    np.testing.assert_allclose(_aligned(ours.transform(Q), ref.embedding_, ours.embedding_), ref.transform(Q),
                               atol=1e-4 * np.abs(ref.embedding_).max())
    np.testing.assert_allclose(ours.transform(X), ours.embedding_, atol=1e-5 * np.abs(ref.embedding_).max())
    np.testing.assert_allclose(ours.dist_matrix_, ref.dist_matrix_, rtol=1e-7)  # float64 input: float64 numerics
    assert ours.reconstruction_error() == pytest.approx(ref.reconstruction_error(), rel=1e-4)


def test_landmark_transform_places_fitted_points_on_their_embedding(roll):
    iso = Isomap(n_neighbors=10, n_landmarks=100, random_state=0).fit(roll)
    assert iso.dist_matrix_.shape == (100, len(roll))
    np.testing.assert_allclose(iso.transform(roll[:50]), iso.embedding_[:50], atol=1e-4)
    with pytest.raises(ValueError, match="reconstruction_error needs the full geodesic matrix"):
        iso.reconstruction_error()


def test_pipeline_step_and_classifier():
    """Isomap as the middle step of a Pipeline (it was refused: no transform)."""
    X, y = make_blobs(random_state=0)
    assert make_pipeline(Isomap(), KNeighborsClassifier()).fit(X, y).score(X, y) > 0.9


@pytest.mark.parametrize("metric,p,params", [("manhattan", 2, None), ("minkowski", 1, None),
                                             ("minkowski", 3, None), ("chebyshev", 2, None),
                                             ("mahalanobis", 2, "V")])
def test_other_metrics_match_sklearn(metric, p, params):
    X = make_s_curve(300, random_state=1)[0]
    params = {"V": np.cov(X.T)} if params == "V" else params
    ours = Isomap(n_neighbors=8, metric=metric, p=p, metric_params=params).fit(X)
    ref = SkIsomap(n_neighbors=8, metric=metric, p=p, metric_params=params).fit(X)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-6
    Q = X[:20] + 0.02
    np.testing.assert_allclose(_aligned(ours.transform(Q), ref.embedding_, ours.embedding_), ref.transform(Q),
                               atol=1e-4 * np.abs(ref.embedding_).max())


def test_minkowski_2_and_scikit_learn_options_equal_the_default(roll):
    ref = Isomap(n_neighbors=8).fit_transform(roll)
    same = Isomap(n_neighbors=8, metric="minkowski", p=2, path_method="FW", neighbors_algorithm="kd_tree")
    np.testing.assert_array_equal(same.fit_transform(roll), ref)


def test_sparse_input_equals_dense():
    X = sp.random(150, 20, density=0.3, format="csr", random_state=0)
    dense = Isomap(n_neighbors=8).fit(X.toarray())
    sparse = Isomap(n_neighbors=8).fit(X)
    assert procrustes(dense.embedding_, sparse.embedding_)[2] < 1e-8
    np.testing.assert_allclose(sparse.transform(X[:10]), dense.transform(X[:10].toarray()), atol=1e-4)


def test_precomputed_neighbor_graphs(roll):
    """scikit-learn's KNeighborsTransformer -> Isomap(metric="precomputed") equals Isomap on the data, in fit
    and in transform; a precomputed radius graph equals the radius graph."""
    Q = roll[:30] + 0.1
    chain = make_pipeline(KNeighborsTransformer(n_neighbors=10, mode="distance"),
                          Isomap(n_neighbors=10, metric="precomputed"))
    direct = Isomap(n_neighbors=10).fit(roll)
    np.testing.assert_allclose(chain.fit_transform(roll), direct.embedding_, atol=1e-3)
    np.testing.assert_allclose(chain.transform(Q), direct.transform(Q), atol=1e-3)
    graph = radius_neighbors_graph(roll, 4.0, mode="distance")
    pre = Isomap(n_neighbors=None, radius=4.0, metric="precomputed").fit(graph)
    assert procrustes(pre.embedding_, Isomap(n_neighbors=None, radius=4.0).fit(roll).embedding_)[2] < 1e-8


def test_disconnected_sparse_graph_is_refused():
    X = np.array([0, 1, 2, 5, 6, 7], dtype=float)[:, None]
    with pytest.raises(RuntimeError, match="has 2 connected components; the distances that would join them"):
        Isomap(n_neighbors=1, metric="precomputed").fit(kneighbors_graph(X, 2, mode="distance"))


def test_pipeline_cache_key_kept():
    """scikit-learn's options at their defaults leave the pipeline's Isomap key, and so its cached results, as
    they were (the key at 39b5a74, before them)."""
    from repviz.methods import resolve

    assert resolve("isomap").key == "isomap-ee4ccc8e0e"
    assert resolve("isomap", {"p": 1, "metric": "minkowski"}).key != "isomap-ee4ccc8e0e"


def test_nbrs_is_a_fitted_neighbour_search_in_the_data_units():
    # scikit-learn's test_isomap_clone_bug reads nbrs_.n_neighbors after set_params; its answers are checked
    # against scikit-learn's NearestNeighbors on data far from unit scale (Isomap rescales X internally)
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(0)
    X, Q = rng.standard_normal((60, 3)) * 1e4, rng.standard_normal((7, 3)) * 1e4
    iso = Isomap()
    for k in (6, 9):
        iso.set_params(n_neighbors=k).fit(X)
        assert iso.nbrs_.n_neighbors == k and iso.nbrs_.n_samples_fit_ == 60
    ref = NearestNeighbors(n_neighbors=9).fit(X)
    for query in (Q, None):
        dist, ind = iso.nbrs_.kneighbors(query)
        ref_dist, ref_ind = ref.kneighbors(query)
        np.testing.assert_array_equal(ind, ref_ind)
        np.testing.assert_allclose(dist, ref_dist, rtol=1e-5)
    np.testing.assert_array_equal(iso.nbrs_.kneighbors(Q, 3, return_distance=False), ref.kneighbors(Q, 3)[1])
    graph = iso.nbrs_.radius_neighbors_graph(Q, radius=2e4, mode="distance")
    ref_graph = ref.radius_neighbors_graph(Q, radius=2e4, mode="distance")
    np.testing.assert_allclose(graph.toarray(), ref_graph.toarray(), rtol=1e-5)
    np.testing.assert_array_equal(iso.nbrs_.kneighbors_graph(Q).toarray(), ref.kneighbors_graph(Q).toarray())


def test_disconnected_graph_messages_carry_scikit_learns_phrase():
    # code written for scikit-learn filters or matches "number of connected components"
    X = np.array([0, 1, 2, 5, 6, 7], dtype=float)[:, None]
    with pytest.warns(UserWarning, match="has 2 connected components; joining.*number of connected components"):
        Isomap(n_neighbors=2).fit(X)
    with pytest.raises(RuntimeError, match="has 2 connected components;.*number of connected components"):
        Isomap(n_neighbors=1, metric="precomputed").fit(kneighbors_graph(X, 2, mode="distance"))
