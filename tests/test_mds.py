"""Classical MDS, SMACOF MDS and Sammon's mapping: exact recovery cases, scikit-learn (test-only), bad input."""

import numpy as np
import pytest
from scipy.spatial import procrustes
from scipy.spatial.distance import cdist
from sklearn.manifold import MDS as SkMDS
from sklearn.manifold import ClassicalMDS as SkClassicalMDS

from repviz.manifold import MDS, PCA, ClassicalMDS, Sammon, classical_mds
from repviz.manifold.mds import _sammon_error


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).standard_normal((120, 2)) * [3.0, 1.0]


@pytest.fixture(scope="module")
def digits300(digits):
    """The first 300 of the shared digits."""
    return digits[0][:300]


def test_classical_mds_recovers_points_up_to_rotation(points):
    D = cdist(points, points)
    Y, eigenvalues = classical_mds(D, 2)
    assert eigenvalues.shape == (len(points),)  # the full spectrum, as meta-SNE expects
    np.testing.assert_allclose(cdist(Y, Y), D, atol=1e-9)
    assert procrustes(points, Y)[2] < 1e-12
    est = ClassicalMDS(metric="precomputed").fit(D)
    np.testing.assert_allclose(cdist(est.embedding_, est.embedding_), D, atol=1e-4)
    np.testing.assert_allclose(est.explained_variance_ratio_.sum(), 1.0, rtol=1e-6)  # float32 input


def test_classical_mds_of_data_is_pca_and_matches_sklearn(digits300):
    ours = ClassicalMDS().fit(digits300)
    pre = ClassicalMDS(metric="precomputed").fit(cdist(digits300, digits300))
    ref = SkClassicalMDS(n_components=2).fit(digits300)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-10
    np.testing.assert_allclose(np.abs(ours.embedding_), np.abs(pre.embedding_), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(ours.explained_variance_ratio_, PCA(2).fit(digits300).explained_variance_ratio_,
                               rtol=1e-8)


def test_classical_mds_iterative_solver_matches_dense(digits):
    X = digits[0][:1200]
    D = cdist(X, X)
    dense = ClassicalMDS(metric="precomputed", eigen_solver="dense").fit(D)
    arpack = ClassicalMDS(metric="precomputed", eigen_solver="arpack", random_state=0).fit(D)
    np.testing.assert_allclose(dense.eigenvalues_, arpack.eigenvalues_, rtol=1e-8)
    assert procrustes(dense.embedding_, arpack.embedding_)[2] < 1e-8


def test_smacof_exact_for_euclidean_points_and_close_to_sklearn(points, digits300):
    mds = MDS(random_state=0).fit(points)
    assert mds.normalized_stress_ < 1e-4
    ours = MDS(max_iter=300, eps=1e-6).fit(digits300)
    ref = SkMDS(n_components=2, n_init=1, init="classical_mds", max_iter=300, eps=1e-6, metric_mds=True,
                normalized_stress=False).fit(digits300)
    D = cdist(digits300, digits300)
    stress = lambda Y: 0.5 * ((cdist(Y, Y) - D) ** 2).sum()  # noqa: E731
    classical = ClassicalMDS().fit(digits300).embedding_
    assert stress(ours.embedding_) < stress(classical)
    assert stress(ours.embedding_) <= 1.01 * stress(ref.embedding_)
    assert ours.stress_ == pytest.approx(stress(ours.embedding_.astype(np.float64)), rel=1e-3)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 0.02


def test_sammon_decreases_error_and_recovers_planar_points(points, digits300):
    sam = Sammon().fit(points)
    assert sam.stress_ < 1e-6
    assert procrustes(points, sam.embedding_)[2] < 1e-6
    X = np.vstack([digits300, digits300[:5]])  # duplicates: zero dissimilarities carry no weight
    fit = Sammon(max_iter=50).fit(X)
    assert np.isfinite(fit.embedding_).all()
    delta = cdist(X, X).astype(np.float32)
    start = ClassicalMDS().fit(X).embedding_.astype(np.float64)
    scale = 0.5 * delta.sum(dtype=np.float64)
    assert fit.stress_ < 0.5 * _sammon_error(delta, start) / scale


def test_deterministic(digits300):
    a, b = MDS(max_iter=20).fit_transform(digits300), MDS(max_iter=20).fit_transform(digits300)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("est, X, match, exc", [
    (ClassicalMDS(metric="precomputed"), np.ones((3, 4)), r"square distance matrix \(n, n\); got shape \(3, 4\)",
     ValueError),
    (MDS(metric="precomputed"), -np.ones((3, 3)), "non-negative distances", ValueError),
    (MDS(n_components=5), np.random.default_rng(0).random((5, 3)), r"n_components \(5\) must be less than n_samples",
     ValueError),
    (MDS(init=np.zeros((3, 2))), np.random.default_rng(0).random((6, 3)), "init must have shape", ValueError),
    (Sammon(metric="precomputed"), np.zeros((4, 4)), "at least two distinct points", ValueError),
    (MDS(metric="bogus"), np.ones((3, 3)), "The 'metric' parameter of MDS must be a str among", ValueError),
    (Sammon(max_iter=0), np.ones((3, 3)), r"The 'max_iter' parameter of Sammon must be an int in the range \[1, inf\)",
     ValueError),
])
def test_bad_inputs(est, X, match, exc):
    with pytest.raises(exc, match=match):
        est.fit(X)


def test_refuses_huge_dense_allocation(monkeypatch):
    monkeypatch.setenv("REPVIZ_MAX_DENSE_BYTES", str(10_000))
    with pytest.raises(MemoryError, match=r"MDS would need .* GiB for a dense 100×100 distance matrix"):
        MDS().fit(np.random.default_rng(0).random((100, 3)))


_ASYMMETRIC = np.array([[0, 5, 9, 4], [5, 0, 2, 2], [3, 2, 0, 1], [4, 2, 1, 0]], dtype=float)  # D[0, 2] != D[2, 0]
_DIAGONAL = np.array([[1, 5, 3], [5, 0, 2], [3, 2, 0]], dtype=float)  # symmetric, D[0, 0] = 1


@pytest.mark.parametrize("Est", [ClassicalMDS, MDS, Sammon])
@pytest.mark.parametrize("D, match", [(_ASYMMETRIC, r"symmetric distance matrix; max \|D - D.T\| = 6 .*"
                                                   r"Array must be symmetric"),  # and scikit-learn's phrase
                                      (_DIAGONAL, r"zero diagonal; the largest diagonal entry is 1")])
def test_precomputed_asymmetric_or_nonzero_diagonal_is_refused(Est, D, match):
    """The matrix was symmetrised by its element-wise maximum before: a wrong matrix gave a silent answer."""
    with pytest.raises(ValueError, match=match):
        Est(metric="precomputed").fit(D)


def test_nonmetric_mds_recovers_points_from_a_monotone_transform(points):
    """Only the order of the dissimilarities counts: D**2 (same order as D) gives the points back up to a
    similarity transform, where metric MDS of D**2 cannot."""
    D = cdist(points[:60], points[:60])
    nonmetric = MDS(metric="precomputed", metric_mds=False, max_iter=500, eps=1e-10).fit(D**2)
    metric = MDS(metric="precomputed", normalized_stress=True).fit(D**2)
    assert nonmetric.stress_ == nonmetric.normalized_stress_  # "auto": stress-1 for non-metric MDS
    assert procrustes(points[:60], nonmetric.embedding_)[2] < 1e-3
    assert procrustes(points[:60], metric.embedding_)[2] > 10 * procrustes(points[:60], nonmetric.embedding_)[2]


def test_disparities_are_sklearns_isotonic_regression():
    from sklearn.isotonic import IsotonicRegression

    from repviz.manifold.mds import _disparities, _pair_order

    rng = np.random.default_rng(1)
    delta = np.round(cdist(*(2 * [rng.random((12, 2))])), 1).astype(np.float32)  # rounded: ties
    Y = rng.random((12, 2))
    got = _disparities(delta, Y, _pair_order(delta))
    i, j = np.triu_indices(12, 1)
    keep = delta[i, j] != 0
    ref = IsotonicRegression().fit_transform(delta[i, j][keep].astype(np.float64), cdist(Y, Y)[i, j][keep])
    ref *= np.sqrt(12 * 11 / 2 / np.square(ref).sum())
    np.testing.assert_allclose(got[i, j][keep], ref, rtol=1e-6)  # stored in float32, as the dissimilarities
    np.testing.assert_array_equal(got, got.T)


def test_nonmetric_stress_decreases_with_iterations(digits300):
    stress = [MDS(metric_mds=False, init="random", max_iter=it, random_state=42).fit(digits300).stress_
              for it in (2, 3, 10)]
    assert stress[0] > stress[1] > stress[2]


def test_n_init_keeps_the_best_random_start(digits300):
    one = MDS(init="random", n_init=1, max_iter=30, random_state=0).fit(digits300[:100])
    three = MDS(init="random", n_init=3, max_iter=30, random_state=0).fit(digits300[:100])
    assert three.stress_ <= one.stress_  # the first of the three starts is the single run's
    assert MDS(init="random", n_init=3, max_iter=30, random_state=1).fit(digits300[:100]).stress_ != three.stress_


def test_init_given_to_fit_transform_takes_precedence(digits300):
    X = digits300[:80]
    start = ClassicalMDS().fit_transform(X) + 1.0
    np.testing.assert_array_equal(MDS(init="random").fit_transform(X, init=start),
                                  MDS(init=start).fit_transform(X))


@pytest.mark.parametrize("normalized", [True, False])
def test_stress_is_that_of_the_returned_embedding(digits300, normalized):
    X = digits300[:80]
    est = MDS(max_iter=50, normalized_stress=normalized).fit(X)
    d, D = cdist(est.embedding_, est.embedding_), cdist(X, X)
    raw = 0.5 * np.square(d - D).sum()
    stress1 = np.sqrt(raw / (0.5 * np.square(d).sum()))
    assert est.normalized_stress_ == pytest.approx(stress1, rel=1e-4)
    assert est.stress_ == pytest.approx(stress1 if normalized else raw, rel=1e-4)


@pytest.mark.parametrize("Est", [ClassicalMDS, MDS])
@pytest.mark.parametrize("metric, params, scipy_name", [("manhattan", None, "cityblock"),
                                                         ("minkowski", {"p": 3}, "minkowski"),
                                                         ("chebyshev", None, "chebyshev")])
def test_metrics_of_repviz_neighbors_equal_their_precomputed_matrix(Est, metric, params, scipy_name, digits300):
    X = digits300[:60]
    kwargs = {"max_iter": 20} if Est is MDS else {}
    ours = Est(metric=metric, metric_params=params, **kwargs).fit_transform(X)
    D = cdist(X, X, scipy_name, **(params or {}))
    np.testing.assert_allclose(ours, Est(metric="precomputed", **kwargs).fit_transform(D), rtol=1e-4, atol=1e-4)


def test_classical_mds_pipeline_cache_key_kept():
    """metric_params=None leaves the pipeline's cmds key, and so its cached results, as they were (at b37e822);
    SMACOF's key changed with its stopping rule (eps, scikit-learn's), which changes its results."""
    from repviz.methods import resolve

    assert resolve("cmds").key == "cmds-89b5b368d5"
    assert resolve("mds").key != "mds-048a178d74"


@pytest.mark.parametrize("factor", [1.0, 2.0**30])  # as it is, and rescaled (scale != 1)
def test_precomputed_input_is_never_written(points, factor):
    D = (cdist(points[:30], points[:30]) * factor).astype(np.float32)
    D.flags.writeable = False
    est = MDS(metric="precomputed", max_iter=5).fit(D)
    np.testing.assert_array_equal(est.dissimilarity_matrix_, D)


def test_classical_mds_dissimilarity_matrix_is_what_it_embedded():
    """scikit-learn's attribute: cdist of the data in its units (far from 1: repviz rescales inside the fit), for
    Euclidean data (computed on first access, as the fit takes PCA's route) and another metric; a precomputed
    matrix as given."""
    X = np.random.default_rng(0).standard_normal((30, 4)) * 1e7
    for metric, ref in (("euclidean", "euclidean"), ("manhattan", "cityblock")):
        D = ClassicalMDS(metric=metric).fit(X).dissimilarity_matrix_
        assert D.dtype == np.float64  # float64 data: float64 distances
        np.testing.assert_allclose(D, cdist(X, X, ref), rtol=1e-5, atol=1e-5 * np.abs(X).max())
    P = cdist(X, X).astype(np.float32)
    np.testing.assert_array_equal(ClassicalMDS(metric="precomputed").fit(P).dissimilarity_matrix_, P)
