"""Locally linear embedding variants against scikit-learn (test-only), regularisation and bad input."""

import numpy as np
import pytest
from scipy.spatial import procrustes
from sklearn.datasets import make_s_curve
from sklearn.manifold import LocallyLinearEmbedding as SkLLE

from repviz.manifold import LocallyLinearEmbedding


@pytest.fixture(scope="module")
def roll(swiss_roll):
    return swiss_roll(600)


@pytest.mark.parametrize("method", ["standard", "modified", "ltsa"])
def test_matches_sklearn_dense(roll, method):
    ours = LocallyLinearEmbedding(n_neighbors=12, method=method).fit(roll)  # n <= 1000: dense eigensolver
    ref = SkLLE(n_neighbors=12, method=method, eigen_solver="dense").fit(roll)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-4
    assert ours.embedding_.dtype == np.float64  # the input's dtype


def _hessian_reference(X, ind, nc):
    """Donoho & Grimes (2003), written directly: the Hessian estimator is the last nc(nc+1)/2 columns of the
    Gram-Schmidt-orthonormalised [1, U, products of U's columns]."""
    n, k = ind.shape
    M = np.zeros((n, n))
    for i in range(n):
        G = X[ind[i]] - X[ind[i]].mean(0)
        U = np.linalg.svd(G, full_matrices=False)[0][:, :nc]
        prods = [U[:, p] * U[:, q] for p in range(nc) for q in range(p, nc)]
        Q = np.linalg.qr(np.column_stack([np.ones(k), U, *prods]))[0]
        w = Q[:, nc + 1:]
        S = w.sum(0)
        S[np.abs(S) < 1e-4] = 1
        w = w / S
        M[np.ix_(ind[i], ind[i])] += w @ w.T
    return np.linalg.eigh(M)[1][:, 1:nc + 1]


def test_hessian_matches_the_paper(roll):
    from repviz.neighbors import knn

    X = roll[:400].astype(np.float32)
    ours = LocallyLinearEmbedding(n_neighbors=12, method="hessian").fit(X)
    ref = _hessian_reference(X.astype(np.float64), knn(X, 12)[0], 2)
    assert procrustes(ours.embedding_, ref)[2] < 1e-6
    # scikit-learn keeps the whole orthogonal complement (full QR), a slightly different estimator
    sk = SkLLE(n_neighbors=12, method="hessian", eigen_solver="dense").fit(roll[:400])
    assert procrustes(ours.embedding_, sk.embedding_)[2] < 0.05


@pytest.mark.parametrize("method", ["standard", "ltsa"])
def test_matches_sklearn_arpack_on_s_curve(method):
    X = make_s_curve(1500, random_state=0)[0]
    ours = LocallyLinearEmbedding(n_neighbors=12, method=method, random_state=0).fit(X)  # shift-invert path
    ref = SkLLE(n_neighbors=12, method=method, eigen_solver="arpack", random_state=0).fit(X)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-4
    assert ours.reconstruction_error_ == pytest.approx(ref.reconstruction_error_, rel=1e-3, abs=1e-9)


def test_matches_sklearn_on_digits(digits):
    X = digits[0][:600]
    ours = LocallyLinearEmbedding(n_neighbors=15).fit(X)
    ref = SkLLE(n_neighbors=15, eigen_solver="dense").fit(X)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-3


def test_singular_local_gram_is_regularised(roll):
    # duplicated points and k > d make every local Gram matrix singular
    X = np.vstack([roll, roll])
    Y = LocallyLinearEmbedding(n_neighbors=8).fit_transform(X)
    assert np.isfinite(Y).all()
    assert np.ptp(Y, axis=0).min() > 0


def test_deterministic(roll):
    a = LocallyLinearEmbedding(n_neighbors=10, random_state=0).fit_transform(roll)
    b = LocallyLinearEmbedding(n_neighbors=10, random_state=0).fit_transform(roll)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_neighbors=600), r"n_neighbors \(600\) must be less than n_samples \(600\)"),
    (dict(method="hessian", n_neighbors=5), r"method='hessian' with n_components=2 needs n_neighbors >= 6"),
    (dict(method="isomap"), "The 'method' parameter of LocallyLinearEmbedding must be a str among"),
    (dict(reg=-1.0), r"The 'reg' parameter of LocallyLinearEmbedding must be a float in the range \[0, inf\)"),
    (dict(n_components=600), r"n_components \(600\) must be less than n_samples \(600\)"),
])
def test_bad_parameters(roll, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LocallyLinearEmbedding(**kwargs).fit(roll)


def test_disconnected_graph_names_the_fix(roll):
    X = np.vstack([roll, roll + 500.0])
    with pytest.raises(ValueError, match="has 2 connected components.*Increase n_neighbors"):
        LocallyLinearEmbedding(n_neighbors=8).fit(X)


@pytest.mark.parametrize("method", ["standard", "modified", "hessian", "ltsa"])
def test_transform_is_scikit_learns_barycentric_placement(roll, method):
    """Every variant places new points as scikit-learn's transform does: its barycenter_weights (test-only
    reference) on the nearest fitted points, applied to the embedding; a fitted point lands on its own."""
    from sklearn.manifold._locally_linear import barycenter_weights
    from sklearn.neighbors import NearestNeighbors

    lle = LocallyLinearEmbedding(n_neighbors=12, method=method).fit(roll)
    Q = roll[:50] + 0.05 * np.random.default_rng(0).normal(size=(50, 3))
    ind = NearestNeighbors(n_neighbors=12).fit(roll).kneighbors(Q, return_distance=False)
    w = barycenter_weights(Q, roll, ind, reg=1e-3)
    expected = np.einsum("ik,ikc->ic", w, lle.embedding_[ind].astype(np.float64))
    np.testing.assert_allclose(lle.transform(Q), expected, atol=1e-5 * np.abs(lle.embedding_).max())
    np.testing.assert_allclose(lle.transform(roll[:20]), lle.embedding_[:20], atol=1e-2 * np.abs(lle.embedding_).max())


def test_transform_in_a_pipeline():
    """LocallyLinearEmbedding as the middle step of a Pipeline (it was refused: no transform)."""
    from sklearn.datasets import make_blobs
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    X, y = make_blobs(n_samples=300, centers=3, random_state=0)
    assert make_pipeline(LocallyLinearEmbedding(n_neighbors=10, random_state=0),
                         KNeighborsClassifier()).fit(X, y).score(X, y) > 0.9
    with pytest.raises(ValueError, match="X has 3 features, but LocallyLinearEmbedding is expecting 2"):
        LocallyLinearEmbedding().fit(X).transform(np.c_[X, X[:, :1]])


def test_nbrs_finds_the_neighbours_transform_uses(roll):
    from sklearn.neighbors import NearestNeighbors

    lle = LocallyLinearEmbedding(n_neighbors=7).fit(roll * 1e3)  # rescaled inside the fit
    dist, ind = lle.nbrs_.kneighbors(roll[:5] * 1e3 + 1.0)
    ref_dist, ref_ind = NearestNeighbors(n_neighbors=7).fit(roll * 1e3).kneighbors(roll[:5] * 1e3 + 1.0)
    assert lle.nbrs_.n_neighbors == 7
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-5)
