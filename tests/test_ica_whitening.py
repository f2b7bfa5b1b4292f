"""Whitening (identity covariance, exact inverse) and FastICA (known mixed sources, Amari index, scikit-learn as a
test-only reference on the same data and seeds)."""

import numpy as np
import pytest
from sklearn.decomposition import FastICA as SkFastICA

from repviz.manifold import FastICA, Whitening


def amari_index(W: np.ndarray, A: np.ndarray) -> float:
    """Amari et al.'s (1996) performance index of an unmixing W for a mixing A, normalised to [0, 1]: 0 when
    W A is a scaled permutation (every source recovered up to order, sign and scale)."""
    P = np.abs(W @ A)
    k = P.shape[0]
    rows = (P / P.max(axis=1, keepdims=True)).sum(axis=1) - 1
    cols = (P / P.max(axis=0, keepdims=True)).sum(axis=0) - 1
    return float((rows.sum() + cols.sum()) / (2 * k * (k - 1)))


def mixed_sources(n: int, seed: int):
    """Five independent non-Gaussian sources (Laplace and Student-t: super-Gaussian; uniform, sawtooth and a noisy
    square wave: sub-Gaussian), standardised, mixed by a random matrix."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 200, n)
    S = np.c_[rng.laplace(size=n), rng.uniform(-1, 1, n), (t % 1.0) - 0.5,
              np.sign(np.sin(3 * t)) + 0.1 * rng.normal(size=n), rng.standard_t(5, n)]
    S = (S - S.mean(axis=0)) / S.std(axis=0)
    A = rng.normal(size=(5, 5))
    return S, A, S @ A.T + rng.normal(size=5)


@pytest.mark.parametrize("method", ["pca", "zca", "cholesky"])
def test_whitened_covariance_is_the_identity_and_inverse_is_exact(method):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4)) @ rng.normal(size=(4, 4)) * [1, 10, 100, 0.1] + 7
    w = Whitening(method=method).fit(X)
    np.testing.assert_allclose(np.cov(w.embedding_.T), np.eye(4), atol=1e-4)
    np.testing.assert_allclose(w.embedding_.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(w.inverse_transform(w.embedding_), X, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(w.transform(X[:10]), w.embedding_[:10], atol=1e-5)


def test_whitening_variants_are_rotations_of_each_other_and_zca_is_symmetric():
    X = np.random.default_rng(1).normal(size=(500, 3)) @ [[2, 1, 0], [0, 1, 3], [1, 0, 1]]
    Y = {m: Whitening(method=m).fit(X).embedding_.astype(np.float64) for m in ("pca", "zca", "cholesky")}
    for m in ("zca", "cholesky"):
        R = np.linalg.lstsq(Y["pca"], Y[m], rcond=None)[0]
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-4)
    W = Whitening(method="zca").fit(X).components_
    np.testing.assert_allclose(W, W.T, atol=1e-10)
    assert np.allclose(np.triu(Whitening(method="cholesky").fit(X).components_, 1), 0)


def test_pca_whitening_keeps_the_leading_directions():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5)) * [8, 4, 2, 0.1, 0.1]
    w = Whitening(3, method="pca").fit(X)
    assert w.embedding_.shape == (3000, 3)
    np.testing.assert_allclose(np.abs(w.components_[:, :3] * [8, 4, 2]), np.eye(3), atol=0.05)
    with pytest.raises(ValueError, match="applies to Whitening\\(method='pca'\\) only"):
        Whitening(2, method="zca").fit(X)


@pytest.mark.parametrize("algorithm", ["parallel", "deflation"])
@pytest.mark.parametrize("fun", ["logcosh", "exp", "cube"])
def test_fastica_recovers_known_sources_as_well_as_scikit_learn(algorithm, fun):
    """Same data and seeds for both; the random starts differ (different generators and whitening bases), so the
    two are compared by their mean index over the seeds, each run must reach 0.05."""
    ours, ref = [], []
    for seed in range(4):
        S, A, X = mixed_sources(5000, seed)
        est = FastICA(5, algorithm=algorithm, fun=fun, random_state=seed).fit(X)
        sk = SkFastICA(5, algorithm=algorithm, fun=fun, whiten="unit-variance", random_state=seed).fit(X)
        ours.append(amari_index(est.components_, A))
        ref.append(amari_index(sk.components_, A))
        # the sources themselves: each true source has one estimate with |correlation| near 1
        C = np.abs(np.corrcoef(est.embedding_.T, S.T)[:5, 5:])
        assert C.max(axis=0).min() > 0.97
    print(f"Amari index {algorithm}/{fun}: repviz {np.round(ours, 4)}, scikit-learn {np.round(ref, 4)}")
    assert max(ours) <= 0.05
    assert np.mean(ours) <= 1.2 * np.mean(ref) + 0.002


def test_fastica_attributes_are_consistent():
    S, A, X = mixed_sources(3000, 0)
    ica = FastICA(5, random_state=0).fit(X)
    np.testing.assert_allclose(ica.embedding_.std(axis=0), 1, atol=1e-3)
    np.testing.assert_allclose(ica.transform(X), ica.embedding_, atol=1e-3)
    np.testing.assert_allclose(ica.inverse_transform(ica.embedding_), X, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(ica.components_ @ ica.mixing_, np.eye(5), atol=1e-8)
    assert (ica.mixing_[np.abs(ica.mixing_).argmax(axis=0), np.arange(5)] > 0).all()
    again = FastICA(5, random_state=0).fit(X)
    np.testing.assert_array_equal(again.embedding_, ica.embedding_)


def test_fastica_reduces_dimension_and_checks_its_input():
    S, A, X = mixed_sources(2000, 2)
    X10 = np.c_[X, X @ np.random.default_rng(0).normal(size=(5, 5))]  # 10 features spanning 5 dimensions
    assert FastICA(3, random_state=0).fit_transform(X10).shape == (2000, 3)
    with pytest.raises(ValueError, match="n_components must be None or n_features"):
        FastICA(3, whiten=False).fit(X)
    with pytest.raises(ValueError, match=r"w_init has shape \(2, 2\); FastICA needs \(5, 5\)"):
        FastICA(5, w_init=np.eye(2)).fit(X)
    with pytest.raises(ValueError, match="The 'fun' parameter of FastICA must be a str among"):
        FastICA(fun="tanh").fit(X)
    with pytest.warns(RuntimeWarning, match="did not converge in max_iter=1"):
        FastICA(5, max_iter=1, random_state=0).fit(X)
