"""PCA and ProbabilisticPCA against hand-checkable cases, scikit-learn (test-only reference) and its checks."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.decomposition import PCA as SkPCA

from repviz.manifold import PCA, ProbabilisticPCA
from repviz.manifold._base import NotFittedError


@pytest.fixture(scope="module")
def digits(digits):
    """The first 500 of the shared digits."""
    return digits[0][:500]


def test_rotated_ellipse_recovers_axes_and_variances():
    rng = np.random.default_rng(0)
    theta = 0.6
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    X = (rng.standard_normal((20_000, 2)) * [3.0, 1.0]) @ R.T + [5.0, -2.0]
    pca = PCA(n_components=2, svd_solver="full").fit(X)
    axes = np.abs(pca.components_)
    np.testing.assert_allclose(axes[0], np.abs(R[:, 0]), atol=0.01)
    np.testing.assert_allclose(axes[1], np.abs(R[:, 1]), atol=0.01)
    np.testing.assert_allclose(pca.explained_variance_, [9.0, 1.0], rtol=0.03)
    # exactly the eigenvalues of the sample covariance
    np.testing.assert_allclose(pca.explained_variance_, np.linalg.eigvalsh(np.cov(X.T))[::-1], rtol=1e-9)
    np.testing.assert_allclose(pca.mean_, [5.0, -2.0], atol=0.05)


@pytest.mark.parametrize("solver", ["full", "randomized"])
def test_matches_sklearn(digits, solver):
    ours = PCA(n_components=5, svd_solver=solver, random_state=0).fit(digits)
    ref = SkPCA(n_components=5, svd_solver="full").fit(digits)
    rtol = 1e-6 if solver == "full" else 1e-3
    np.testing.assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=rtol)
    np.testing.assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=rtol)
    np.testing.assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=rtol)
    # same sign convention as scikit-learn >= 1.5 (largest-magnitude loading positive)
    np.testing.assert_allclose(ours.components_, ref.components_, atol=1e-3 if solver == "randomized" else 1e-5)
    np.testing.assert_allclose(ours.embedding_, ref.transform(digits), rtol=1e-3, atol=1e-3)
    assert ours.embedding_.dtype == np.float64  # the input's dtype


def test_gram_path_when_features_exceed_samples():
    X = np.random.default_rng(1).standard_normal((30, 200))
    ours = PCA(n_components=4, svd_solver="full").fit(X)
    ref = SkPCA(n_components=4, svd_solver="full").fit(X)
    np.testing.assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-8)
    np.testing.assert_allclose(ours.components_, ref.components_, atol=1e-5)


def test_whiten_inverse_and_fraction(digits):
    pca = PCA(n_components=10, whiten=True).fit(digits)
    np.testing.assert_allclose(pca.embedding_.std(axis=0, ddof=1), 1.0, rtol=1e-4)
    full = PCA(n_components=None).fit(digits)
    np.testing.assert_allclose(full.inverse_transform(full.embedding_), digits, atol=1e-3)
    back = pca.inverse_transform(pca.transform(digits))
    assert np.abs(back - digits).mean() < np.abs(digits - digits.mean(0)).mean()
    frac = PCA(n_components=0.8).fit(digits)
    assert frac.n_components_ == SkPCA(n_components=0.8).fit(digits).n_components_


def test_auto_picks_randomized_for_large_inputs():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1100, 1050)).astype(np.float32) + 3 * rng.standard_normal((1100, 1)) * rng.standard_normal(1050)
    pca = PCA(n_components=3, random_state=0).fit(X)
    assert pca.svd_solver_ == "randomized"
    exact = PCA(n_components=3, svd_solver="full").fit(X)
    np.testing.assert_allclose(pca.explained_variance_[0], exact.explained_variance_[0], rtol=1e-3)


def test_ppca_sigma2_is_mean_of_discarded_eigenvalues(digits):
    X = digits[:, digits.std(0) > 0]
    k = 6
    ppca = ProbabilisticPCA(n_components=k).fit(X)
    eig = np.linalg.eigvalsh(np.cov(X.T, bias=True))[::-1]  # ML covariance: normaliser n
    assert ppca.sigma2_ == pytest.approx(eig[k:].mean(), rel=1e-8)
    # W Wᵀ + sigma² I reproduces the top-k covariance eigenvalues exactly
    C = ppca.W_ @ ppca.W_.T + ppca.sigma2_ * np.eye(X.shape[1])
    np.testing.assert_allclose(np.linalg.eigvalsh(C)[::-1][:k], eig[:k], rtol=1e-8)
    ref = multivariate_normal(ppca.mean_, C).logpdf(X)
    np.testing.assert_allclose(ppca.score_samples(X), ref, rtol=1e-8)
    assert ppca.log_likelihood_ == pytest.approx(ref.sum(), rel=1e-8)
    # posterior mean of the latent: M⁻¹ Wᵀ (x - mu)
    M = ppca.W_.T @ ppca.W_ + ppca.sigma2_ * np.eye(k)
    np.testing.assert_allclose(ppca.embedding_, (X - ppca.mean_) @ ppca.W_ @ np.linalg.inv(M), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("est, X, match", [
    (PCA(n_components=100), np.ones((10, 5)), "n_components=100 must be between 1 and"),
    (PCA(n_components=0.5, svd_solver="randomized"), np.ones((10, 5)), "needs svd_solver='full'"),
    (PCA(n_components=-1), np.ones((10, 5)), "The 'n_components' parameter of PCA must be"),
    (PCA(svd_solver="arpack"), np.ones((10, 5)), r"The 'svd_solver' parameter of PCA must be a str among"),
    (PCA(), np.array([[0.0, np.nan], [1, 2], [3, 4]]), "NaN or infinity"),
    (PCA(), np.ones(5), "Expected 2D array"),
    (PCA(), np.ones((1, 5)), r"Found array with 1 sample\(s\)"),
    (PCA(), np.ones((3, 3)) + 1j, "Complex data not supported"),
    (ProbabilisticPCA(n_components=5), np.random.default_rng(0).random((20, 5)), r"needs n_features > n_components.*n_features = 5"),
])
def test_bad_inputs(est, X, match):
    with pytest.raises(ValueError, match=match):
        est.fit(X)


def test_sparse_and_unfitted_and_feature_count():
    import scipy.sparse as sp

    with pytest.raises(TypeError, match="A sparse matrix was passed"):
        PCA().fit(sp.random(10, 5, density=0.5, format="csr"))
    with pytest.raises(NotFittedError, match="not fitted yet"):
        PCA().transform(np.ones((3, 4)))
    pca = PCA().fit(np.random.default_rng(0).random((10, 4)))
    with pytest.raises(ValueError, match="X has 3 features, but PCA is expecting 4 features"):
        pca.transform(np.ones((2, 3)))


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
def test_kernel_pca_matches_sklearn_and_projects_new_points(digits, kernel):
    from scipy.spatial import procrustes
    from sklearn.decomposition import KernelPCA as SkKernelPCA

    from repviz.manifold import KernelPCA

    X = digits / 16.0
    train, new = X[:400], X[400:]
    ours = KernelPCA(n_components=3, kernel=kernel).fit(train)
    ref = SkKernelPCA(n_components=3, kernel=kernel).fit(train)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    assert procrustes(ours.embedding_, ref.transform(train))[2] < 1e-10
    assert procrustes(ours.transform(new), ref.transform(new))[2] < 1e-10
    if kernel == "linear":  # linear kernel PCA is PCA
        assert procrustes(ours.embedding_, PCA(3).fit_transform(train))[2] < 1e-8


def test_kernel_pca_iterative_solver_and_bad_input(digits, monkeypatch):
    from repviz.manifold import KernelPCA

    X = digits / 16.0
    dense = KernelPCA(eigen_solver="dense").fit(X)
    arpack = KernelPCA(eigen_solver="arpack", random_state=0).fit(X)
    np.testing.assert_allclose(dense.eigenvalues_, arpack.eigenvalues_, rtol=1e-8)
    with pytest.raises(ValueError, match="The 'kernel' parameter of KernelPCA must be a str among"):
        KernelPCA(kernel="sigmoid").fit(X)
    monkeypatch.setenv("REPVIZ_MAX_DENSE_BYTES", "1000")
    with pytest.raises(MemoryError, match="KernelPCA would need .* for the 500×500 Gram matrix"):
        KernelPCA().fit(X)
