"""Slow feature analysis: Wiskott & Sejnowski's toy problem, and the generalised eigenproblem solved by hand.

MDP's SFANode (the reference the issue names) does not import with NumPy 2 (it uses the removed
``numpy.typeDict``), so the reference is scipy's generalised symmetric eigensolver on the same matrices.
"""

import numpy as np
import pytest
from scipy.linalg import eigh

from repviz.manifold import SlowFeatureAnalysis
from repviz.manifold.sfa import quadratic_expansion


def wiskott_toy(n: int = 5000):
    """x1 = sin t + cos² 11t, x2 = cos 11t on [0, 2π]: the slow signal sin t = x1 - x2² is hidden in fast,
    nonlinearly mixed inputs (Wiskott & Sejnowski 2002, section 4.1)."""
    t = np.linspace(0, 2 * np.pi, n)
    return np.c_[np.sin(t) + np.cos(11 * t) ** 2, np.cos(11 * t)], np.sin(t)


def hand_sfa(H: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The slowest k outputs of A w = λ B w (A: covariance of the differences, B: of the data), unit variance."""
    Hc = H - H.mean(axis=0)
    dH = np.diff(Hc, axis=0)
    A = dH.T @ dH / (len(Hc) - 2)
    B = Hc.T @ Hc / (len(Hc) - 1)
    lam, W = eigh(A, B, subset_by_index=(0, k - 1))
    return Hc @ W, lam


def test_quadratic_sfa_recovers_the_slow_signal():
    X, slow = wiskott_toy()
    est = SlowFeatureAnalysis(n_components=2, degree=2).fit(X)
    corr = abs(np.corrcoef(est.embedding_[:, 0], slow)[0, 1])
    print(f"|corr(first slow feature, sin t)| = {corr:.5f}")
    assert corr >= 0.95
    # linear SFA cannot undo the square: the quadratic expansion is what finds it
    assert abs(np.corrcoef(SlowFeatureAnalysis(1).fit_transform(X)[:, 0], slow)[0, 1]) < 0.95
    assert est.delta_[0] < est.delta_[1]


@pytest.mark.parametrize("degree", [1, 2])
def test_matches_the_generalised_eigenproblem(degree):
    rng = np.random.default_rng(0)
    t = np.arange(3000) / 100
    S = np.c_[np.sin(0.3 * t), np.sin(2 * t), rng.normal(size=3000), np.cos(7 * t)]
    X = S @ rng.normal(size=(4, 4))
    est = SlowFeatureAnalysis(n_components=3, degree=degree).fit(X)
    Xs = (X - est.mean_) / est.scale_
    Y, lam = hand_sfa(Xs if degree == 1 else quadratic_expansion(Xs), 3)
    np.testing.assert_allclose(est.delta_, lam, rtol=1e-6)
    for j in range(3):  # the same functions up to sign
        assert abs(np.corrcoef(est.embedding_[:, j], Y[:, j])[0, 1]) > 1 - 1e-6
    np.testing.assert_allclose(np.cov(est.embedding_.T), np.eye(3), atol=1e-4)
    np.testing.assert_allclose(est.transform(X), est.embedding_, atol=1e-4)


def test_slowest_of_mixed_sinusoids_is_the_slowest_source():
    t = np.arange(2000) / 50
    S = np.c_[np.sin(0.2 * t), np.sin(3 * t), np.sin(11 * t)]
    X = S @ np.random.default_rng(1).normal(size=(3, 3))
    Y = SlowFeatureAnalysis(3).fit_transform(X)
    C = np.abs(np.corrcoef(Y.T, S.T)[:3, 3:])
    np.testing.assert_allclose(np.diag(C), 1, atol=1e-3)  # sinusoids over a finite window: nearly uncorrelated


def test_too_few_dimensions_and_bad_degree_are_refused():
    X = np.random.default_rng(0).normal(size=(100, 2))
    with pytest.raises(ValueError, match="span only 2 dimension"):
        SlowFeatureAnalysis(3).fit(X)
    with pytest.raises(ValueError, match="The 'degree' parameter of SlowFeatureAnalysis must be an int in the"):
        SlowFeatureAnalysis(degree=3).fit(X)
