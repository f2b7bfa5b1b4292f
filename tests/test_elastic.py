"""Elastic embedding: its gradient against finite differences, the Gaussian Barnes-Hut repulsion against the
exact sum, and quality floors on the swiss roll and digits (t-SNE's scores printed beside)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import check_grad
from sklearn.datasets import load_digits, make_swiss_roll

from repviz.manifold import TSNE, ElasticEmbedding
from repviz.manifold.elastic import ElasticObjective
from repviz.manifold.tsne.optimize import make_repulsion
from repviz.metrics import knn_accuracy, trustworthiness


def _small_objective(n=40, dim=2, seed=0):
    rng = np.random.default_rng(seed)
    P = sp.random(n, n, density=0.2, random_state=seed, format="csr")
    P = (P + P.T) / (P + P.T).sum()
    L = (sp.diags(np.asarray(P.sum(axis=1)).ravel()) - P).tocsr()
    return ElasticObjective(L, 50.0 / (n * (n - 1)), make_repulsion("exact", n, dim, 0.0)), rng.normal(size=(n, dim))


@pytest.mark.parametrize("dim", [2, 3])
def test_gradient_matches_finite_differences(dim):
    obj, Y = _small_objective(dim=dim)
    shape = Y.shape

    def grad(y):
        _, LY, rep = obj.energy(y.reshape(shape))
        return (4 * LY - 4 * obj.c * rep).ravel()

    err = check_grad(lambda y: obj.value(y.reshape(shape)), grad, Y.ravel())
    assert err < 1e-5 * np.linalg.norm(grad(Y.ravel()))


def test_barnes_hut_gaussian_repulsion_matches_the_exact_sum():
    Y = np.random.default_rng(0).normal(size=(2000, 2)) * 3
    rep_exact, rep_bh = np.empty_like(Y), np.empty_like(Y)
    z_exact = make_repulsion("exact", 2000, 2, 0.0)(Y, rep_exact)
    z_bh = make_repulsion("barnes_hut", 2000, 2, 0.0, theta=0.3)(Y, rep_bh)
    assert abs(z_bh - z_exact) < 1e-2 * z_exact
    assert np.linalg.norm(rep_bh - rep_exact) < 2e-2 * np.linalg.norm(rep_exact)


def test_swiss_roll_trustworthiness_floor():
    X, _ = make_swiss_roll(1000, random_state=0)
    ee = ElasticEmbedding(random_state=0).fit(X)
    t_ee = trustworthiness(X, ee.embedding_, 10)
    t_tsne = trustworthiness(X, TSNE(random_state=0, n_jobs=1).fit_transform(X), 10)
    print(f"swiss roll trustworthiness: elastic {t_ee:.4f}, t-SNE {t_tsne:.4f}")
    assert t_ee >= 0.97
    assert ee.embedding_.dtype == np.float64 and ee.n_iter_ >= 1  # the input's dtype


def test_digits_quality_floor_and_determinism():
    X, y = load_digits(return_X_y=True)
    X, y = X[:1000], y[:1000]
    Y = ElasticEmbedding(random_state=0).fit_transform(X)
    t, acc = trustworthiness(X, Y, 10), knn_accuracy(Y, y, 10)
    Y_tsne = TSNE(random_state=0, n_jobs=1).fit_transform(X)
    print(f"digits: elastic T={t:.4f} kNN acc={acc:.4f}; t-SNE T={trustworthiness(X, Y_tsne, 10):.4f} "
          f"kNN acc={knn_accuracy(Y_tsne, y, 10):.4f}")
    assert t >= 0.94 and acc >= 0.93
    np.testing.assert_array_equal(ElasticEmbedding(random_state=0).fit_transform(X), Y)


def test_affinities_are_those_of_tsne_at_a_third_of_the_neighbours():
    """The attraction is t-SNE's joint P, calibrated to perplexity n_neighbors / 3 on the exact kNN graph."""
    X, _ = make_swiss_roll(300, random_state=2)
    ee = ElasticEmbedding(n_neighbors=30, max_iter=1).fit(X)
    P = TSNE(perplexity=10, neighbors="exact").prepare_affinities(X).P
    assert ee.affinities_.dtype == np.float64
    np.testing.assert_array_equal(ee.affinities_.toarray(), P.toarray().astype(np.float64))


def test_continuing_from_an_embedding_keeps_it_and_lowers_the_energy():
    X, _ = make_swiss_roll(400, random_state=1)
    first = ElasticEmbedding(max_iter=20, random_state=0).fit(X)
    more = ElasticEmbedding(max_iter=20, init=first.embedding_, random_state=0).fit(X)
    assert more.energy_ <= first.energy_ * (1 + 1e-6)
    with pytest.raises(ValueError, match=r"init has shape \(3, 2\); it must be"):
        ElasticEmbedding(init=np.zeros((3, 2))).fit(X)
