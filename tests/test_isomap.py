"""Isomap: geodesics against scipy, embedding against scikit-learn (test-only), the rolled rectangle,
landmarks, disconnected graphs and bad input."""

import warnings

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra
from scipy.spatial import procrustes
from scipy.spatial.distance import cdist
from sklearn.datasets import make_s_curve, make_swiss_roll
from sklearn.manifold import Isomap as SkIsomap

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
    out = np.empty((n, n), dtype=np.float32)
    order = np.random.default_rng(1).permutation(n).astype(np.int64)
    for reuse in (False, True):  # plain Dijkstra, and with finished rows reused as shortcuts
        _geodesics(G, order, out, reuse=reuse)
        np.testing.assert_allclose(out, ref if reuse else ref[order], rtol=1e-5, atol=1e-5)


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
    (dict(metric="sqeuclidean"), "The 'metric' parameter of Isomap must be a str among"),
    (dict(n_components=800), r"n_components \(800\) must be less than"),
])
def test_bad_parameters(roll, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Isomap(**kwargs).fit(roll)


def test_refuses_huge_geodesic_matrix(roll, monkeypatch):
    monkeypatch.setenv("REPVIZ_MAX_DENSE_BYTES", str(1 << 20))
    with pytest.raises(MemoryError, match=r"Use Isomap\(n_landmarks=1000\)"):
        Isomap().fit(roll)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Isomap(n_landmarks=100, random_state=0).fit(roll)  # 100 x 800 float32 fits the budget
