"""ForceDirectedLayout and LinearDiscriminantAnalysis."""

import numpy as np
import pytest
from scipy.spatial import procrustes
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as SkLDA

from repviz.manifold import PCA, ForceDirectedLayout, LinearDiscriminantAnalysis
from repviz.metrics import knn_preservation


@pytest.fixture(scope="module")
def digits(digits):
    """The first 800 of the shared digits and their labels."""
    return digits[0][:800], digits[1][:800]


def test_force_layout_keeps_neighbourhoods_and_is_reproducible(digits):
    X, _ = digits
    a = ForceDirectedLayout(random_state=0).fit_transform(X)
    b = ForceDirectedLayout(random_state=0).fit_transform(X)
    np.testing.assert_array_equal(a, b)
    assert np.isfinite(a).all()
    kept = knn_preservation(X, a, 10)
    print(f"force layout kNN preservation {kept:.3f}")
    assert kept > 0.2
    assert kept > 1.5 * knn_preservation(X, PCA(2).fit_transform(X), 10)
    c = ForceDirectedLayout(random_state=1).fit_transform(X)
    assert not np.array_equal(a, c)


def test_lda_matches_sklearn_eigen_solver(digits):
    X, y = digits
    ours = LinearDiscriminantAnalysis(n_components=2).fit(X, y)
    ref = SkLDA(solver="eigen", n_components=2, shrinkage=1e-6).fit(X, y)
    assert procrustes(ours.embedding_, ref.transform(X))[2] < 1e-6
    np.testing.assert_allclose(ours.transform(X[:10]), ours.embedding_[:10], rtol=1e-5, atol=1e-5)
    assert LinearDiscriminantAnalysis().fit(X, y).n_components_ == 9


def test_lda_whitens_the_within_class_covariance(digits):
    X, y = digits
    Y = LinearDiscriminantAnalysis(n_components=3).fit_transform(X, y).astype(np.float64)
    within = np.cov(np.vstack([Y[y == c] - Y[y == c].mean(0) for c in np.unique(y)]).T, ddof=0)
    np.testing.assert_allclose(within * len(y) / (len(y) - 10), np.eye(3), atol=1e-3)  # 1e-6 ridge, float32 output


@pytest.mark.parametrize("kwargs, y, match", [
    (dict(), None, "requires y to be passed"),
    (dict(), np.zeros(800), "needs at least 2 classes; y has 1"),
    (dict(n_components=10), "labels", r"n_components \(10\) cannot be larger than min\(n_features, n_classes - 1\) = 9"),
    (dict(shrinkage=2.0), "labels", r"The 'shrinkage' parameter of LinearDiscriminantAnalysis must be a float in "
                                    r"the range \[0, 1\] or None"),
    (dict(), np.arange(5), r"one label per row of X \(800\)"),
])
def test_lda_bad_input(digits, kwargs, y, match):
    X, labels = digits
    with pytest.raises(ValueError, match=match):
        LinearDiscriminantAnalysis(**kwargs).fit(X, labels if isinstance(y, str) else y)


def test_force_bad_parameters(digits):
    with pytest.raises(ValueError, match=r"n_neighbors \(800\) must be less than n_samples \(800\)"):
        ForceDirectedLayout(n_neighbors=800).fit(digits[0])
    with pytest.raises(ValueError, match="The 'init' parameter of ForceDirectedLayout must be a str among"):
        ForceDirectedLayout(init="spectral").fit(digits[0])
