"""t-SNE / SNE: gradients against finite differences and against each other, perplexity calibration, quality
against scikit-learn's exact t-SNE, determinism, bad input and parameter flow."""

import numpy as np
import pytest
from scipy.optimize import check_grad

from repviz.manifold import SNE, TSNE
from repviz.manifold.tsne import tsne as tsne_module
from repviz.manifold.tsne.affinity import conditional_affinities, joint_affinities
from repviz.manifold.tsne.optimize import (
    AutoRepulsion,
    DirectRepulsion,
    ExactRepulsion,
    KLObjective,
    gradient_descent,
    make_repulsion,
    relabel,
    spatial_order,
)
from repviz.metrics import knn_accuracy
from repviz.neighbors import knn


def _blobs(n_per, centers, dim=10, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(centers, dim)) * 10
    X = np.concatenate([c + scale * rng.normal(size=(n_per, dim)) for c in C]).astype(np.float32)
    return X, np.repeat(np.arange(centers), n_per)


def _affinities(X, perplexity, k=None):
    k = k or X.shape[0] - 1
    idx, dist = knn(X, k)
    return joint_affinities(idx, dist, perplexity)


@pytest.mark.parametrize("dof", [1.0, 0.5, 2.0, 0.0])
def test_exact_gradient_matches_finite_differences(dof):
    X, _ = _blobs(10, 3, dim=5)
    P = _affinities(X, 5.0)
    obj = KLObjective(P, ExactRepulsion(dof), dof)
    Y0 = np.random.default_rng(1).normal(size=(30, 2))
    f = lambda y: obj(y.reshape(30, 2))[0]  # noqa: E731
    g = lambda y: obj(y.reshape(30, 2))[1].ravel()  # noqa: E731
    err = check_grad(f, g, Y0.ravel(), epsilon=1e-6)
    assert err < 1e-4 * np.linalg.norm(g(Y0.ravel())), err


@pytest.mark.parametrize("dof,dim", [(1.0, 2), (1.0, 3), (0.5, 2), (0.0, 2)])
def test_divergence_is_the_definition_on_dense_matrices(dof, dim):
    """KL(P || Q) = sum p log(p / q) with q = w / sum w, from dense P and kernel matrices; evaluated twice on
    the same objective (its buffers are reused) and with P holding zeros (a kNN graph's missing pairs)."""
    X, _ = _blobs(10, 3, dim=5)
    P = _affinities(X, 5.0, k=8)
    Y = np.random.default_rng(3).normal(size=(30, dim)) * 3
    d2 = ((Y[:, None] - Y[None]) ** 2).sum(-1)
    W = np.exp(-d2) if dof == 0 else (1 + d2 / dof) ** -dof
    np.fill_diagonal(W, 0)
    Pd = P.toarray().astype(np.float64)
    nz = Pd > 0
    expected = float((Pd[nz] * np.log(Pd[nz] / (W[nz] / W.sum()))).sum())
    obj = KLObjective(P, ExactRepulsion(dof), dof)
    for _ in range(2):
        assert obj(Y)[0] == pytest.approx(expected, rel=1e-9)
    assert np.isnan(obj(Y, compute_kl=False)[0])


def test_exaggeration_scales_only_the_attraction():
    X, _ = _blobs(10, 3, dim=5)
    P = _affinities(X, 5.0)
    obj = KLObjective(P, ExactRepulsion(1.0))
    Y = np.random.default_rng(2).normal(size=(30, 2))
    kl1, g1 = obj(Y, exaggeration=1.0)
    kl4, g4 = obj(Y, exaggeration=4.0)
    _, g0 = obj(Y, exaggeration=0.0)
    np.testing.assert_allclose(g4 - g0, 4 * (g1 - g0), rtol=1e-10, atol=1e-14)
    assert kl1 == pytest.approx(kl4)  # the reported KL is that of the un-exaggerated P
    np.testing.assert_array_equal(P.data, _affinities(X, 5.0).data)  # P untouched


def test_relabelled_problem_has_the_same_objective():
    """The points are relabelled in Z-order before each phase; KL and gradient must not change."""
    X, _ = _blobs(40, 3)
    P = _affinities(X, 10.0, k=30)
    Y = np.random.default_rng(4).normal(size=(120, 2))
    order = spatial_order(Y)
    assert sorted(order) == list(range(120))
    kl, grad = KLObjective(P, ExactRepulsion(1.0))(Y)
    kl_r, grad_r = KLObjective(relabel(P, order), ExactRepulsion(1.0))(Y[order])
    assert kl_r == pytest.approx(kl, rel=1e-12)
    np.testing.assert_allclose(grad_r, grad[order], rtol=1e-10, atol=1e-14)


def test_calibrated_perplexities_match_target():
    rng = np.random.default_rng(0)
    dist = np.sort(rng.gamma(2.0, 1.0, size=(200, 90)), axis=1) * rng.uniform(0.01, 100, size=(200, 1))
    for perplexity in (5.0, 30.0, 80.0):
        P, _ = conditional_affinities(dist, perplexity)
        entropy = -np.sum(np.where(P > 0, P * np.log(np.where(P > 0, P, 1)), 0), axis=1)
        np.testing.assert_allclose(np.exp(entropy), perplexity, atol=1e-3)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)


def test_calibration_scales_with_the_distances_and_stops_on_unreachable_rows():
    rng = np.random.default_rng(1)
    dist = np.sort(rng.gamma(2.0, 1.0, size=(50, 90)), axis=1)
    P, beta = conditional_affinities(dist, 30.0)
    for scale in (1e-4, 1e4):  # the same P, the precision scaled by 1 / scale² (the squared distances' units)
        P_s, beta_s = conditional_affinities(dist * scale, 30.0)
        np.testing.assert_allclose(P_s, P, atol=1e-6)
        np.testing.assert_allclose(beta_s * scale ** 2, beta, rtol=1e-4)
    tied = np.concatenate([np.zeros(40), np.arange(1.0, 51.0)])[None]  # 40 neighbours tied at distance 0
    P_t, _ = conditional_affinities(tied, 30.0)  # perplexity 30 is out of reach: at least 40 stay equal
    np.testing.assert_allclose(P_t[0, :40], 1 / 40)
    assert P_t[0, 40:].max() < 1e-12


def test_joint_affinities_symmetric_and_normalised():
    X, _ = _blobs(20, 3)
    P = _affinities(X, 10.0, k=30)
    assert abs(P - P.T).max() < 1e-9
    assert P.data.sum() == pytest.approx(1.0, rel=1e-6)
    assert P.diagonal().max() == 0


@pytest.mark.parametrize("method,dim,rtol", [("barnes_hut", 2, 0.02), ("barnes_hut", 3, 0.02),
                                             ("barnes_hut", 1, 0.02), ("fft", 2, 0.02)])
def test_approximate_gradients_close_to_exact(method, dim, rtol):
    X, _ = _blobs(100, 3)
    P = _affinities(X, 30.0, k=90)
    Y = np.random.default_rng(3).normal(size=(300, dim)) * 5
    for dof in (1.0, 0.6):
        kl_ex, g_ex = KLObjective(P, ExactRepulsion(dof), dof)(Y)
        rep = make_repulsion(method, 300, dim, dof, theta=0.3)
        kl, g = KLObjective(P, rep, dof)(Y)
        assert np.linalg.norm(g - g_ex) < rtol * np.linalg.norm(g_ex)
        assert kl == pytest.approx(kl_ex, rel=rtol)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0, 1e4])
def test_direct_float32_sums_equal_the_float64_loop(scale):
    """The vectorised float32 kernel of 2-D t-SNE against the generic float64 loop over all pairs."""
    Y = np.random.default_rng(5).normal(size=(700, 2)) * scale
    rep, fast = np.empty_like(Y), np.empty_like(Y)
    z_ref = ExactRepulsion(1.0)(Y, rep)
    z = DirectRepulsion(700)(Y, fast)
    assert z == pytest.approx(z_ref, rel=1e-6)
    np.testing.assert_allclose(fast, rep, rtol=1e-4, atol=1e-5 * np.abs(rep).max())


def test_auto_repulsion_picks_the_cheaper_method_by_size_and_extent():
    """Direct sums for a small probe set at any extent and for a spread-out layout of a few thousand points; the
    FFT for a compact layout of many points (early exaggeration) and for large n. The choice and the forces
    depend on the layout only, and each call gives what the chosen method gives."""
    rng = np.random.default_rng(6)
    small = AutoRepulsion(1000)
    assert small.prefers_direct(rng.normal(size=(1000, 2))) and small.prefers_direct(rng.normal(size=(1000, 2)) * 50)
    mid = AutoRepulsion(5000)
    assert not mid.prefers_direct(rng.normal(size=(5000, 2))) and mid.prefers_direct(rng.normal(size=(5000, 2)) * 30)
    assert not AutoRepulsion(50_000).prefers_direct(rng.normal(size=(50_000, 2)) * 30)
    Y = rng.normal(size=(5000, 2))
    rep, ref = np.empty_like(Y), np.empty_like(Y)
    assert mid(Y, rep) == make_repulsion("fft", 5000, 2, 1.0)(Y, ref)
    np.testing.assert_array_equal(rep, ref)
    assert mid.counts == {"direct": 0, "fft": 1}


def test_fft_interpolation_converges():
    """More Lagrange nodes and smaller boxes make the FFT repulsion exact (the error is interpolation only)."""
    Y = np.random.default_rng(3).normal(size=(300, 2)) * 5
    exact_rep = np.empty_like(Y)
    exact_z = ExactRepulsion(1.0)(Y, exact_rep)
    errors = []
    for n_interp in (3, 5):
        rep = np.empty_like(Y)
        z = make_repulsion("fft", 300, 2, 1.0, n_interp=n_interp, min_boxes=100)(Y, rep)
        errors.append(np.linalg.norm(rep - exact_rep) / np.linalg.norm(exact_rep))
        assert z == pytest.approx(exact_z, rel=errors[-1])
    assert errors[1] < 1e-4 < errors[0] < 1e-2


@pytest.mark.parametrize("method", ["exact", "direct", "barnes_hut", "fft", "auto"])
def test_separated_blobs_stay_separated(method):
    X, labels = _blobs(150, 4)
    Y = TSNE(method=method, perplexity=20, random_state=0, max_iter=400).fit_transform(X)
    assert np.isfinite(Y).all()
    assert knn_accuracy(Y, labels, 10) == 1.0
    centroids = np.array([Y[labels == c].mean(axis=0) for c in range(4)])
    nearest = np.argmin(((Y[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (nearest == labels).all()


def test_kl_no_worse_than_sklearn_exact():
    """Both embeddings are scored by the same exact KL against the same (dense) P, after the same iterations.

    One fit is one draw of a chaotic descent (P changed by 6e-11 moves the final KL by 3 %), so the medians over
    the data and four copies shifted by noise of 1e-3 (the digits range 0-16) are compared."""
    sklearn_manifold = pytest.importorskip("sklearn.manifold")
    X = pytest.importorskip("sklearn.datasets").load_digits().data[:300].astype(np.float32)
    kls = []
    for seed in range(5):
        Xs = X + (seed > 0) * np.random.default_rng(seed).normal(scale=1e-3, size=X.shape).astype(np.float32)
        ours = TSNE(method="exact", perplexity=30, random_state=0, max_iter=1000).fit(Xs)
        ref = sklearn_manifold.TSNE(method="exact", perplexity=30, init="pca", random_state=0, max_iter=1000,
                                    learning_rate="auto").fit(Xs)
        obj = KLObjective(ours.affinities_, ExactRepulsion(1.0))
        kls.append((obj(ours.embedding_.astype(np.float64))[0], obj(ref.embedding_.astype(np.float64))[0]))
        assert ours.kl_divergence_ == pytest.approx(kls[-1][0], rel=1e-4)
    kl_ours, kl_ref = np.median(kls, axis=0)
    print(f"median KL repviz {kl_ours:.4f}, scikit-learn {kl_ref:.4f}; each: {np.round(kls, 4).tolist()}")
    assert kl_ours <= kl_ref * 1.005


@pytest.mark.parametrize("method", ["exact", "direct", "barnes_hut", "fft", "auto"])
def test_deterministic_across_runs_and_threads(method):
    X, _ = _blobs(100, 3)
    a = TSNE(method=method, random_state=0, max_iter=100, n_jobs=1).fit_transform(X)
    b = TSNE(method=method, random_state=0, max_iter=100, n_jobs=1).fit_transform(X)
    c = TSNE(method=method, random_state=0, max_iter=100, n_jobs=2).fit_transform(X)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_precomputed_equals_euclidean():
    X, _ = _blobs(50, 3)
    D = np.sqrt(((X[:, None].astype(np.float64) - X[None]) ** 2).sum(-1))
    init = np.random.default_rng(0).normal(size=(150, 2))
    a = TSNE(init=init, random_state=0, max_iter=20).fit(X)
    b = TSNE(init=init, metric="precomputed", random_state=0, max_iter=20).fit(D)
    np.testing.assert_allclose(a.affinities_.toarray(), b.affinities_.toarray(), rtol=1e-4, atol=1e-9)
    assert a.kl_divergence_ == pytest.approx(b.kl_divergence_, rel=0.05)  # iterations amplify float noise


def test_cosine_metric_and_pca_init_on_precomputed():
    X, labels = _blobs(50, 3)
    Y = TSNE(metric="cosine", random_state=0, max_iter=300).fit_transform(X)
    assert knn_accuracy(Y, labels, 5) > 0.95
    D = np.sqrt(((X[:, None].astype(np.float64) - X[None]) ** 2).sum(-1))
    Y = TSNE(metric="precomputed", random_state=0, max_iter=300).fit_transform(D)
    assert knn_accuracy(Y, labels, 5) > 0.95


def test_init_array_rescaled_unless_told_otherwise():
    X, _ = _blobs(50, 3)
    prev = TSNE(random_state=0).fit_transform(X)
    est = TSNE(init=prev, max_iter=1, early_exaggeration_iter=0, learning_rate=1e-12)
    np.testing.assert_allclose(est.fit_transform(X)[:, 0].std(), 1e-4, rtol=1e-3)
    cont = TSNE(init=prev, rescale_init=False, early_exaggeration_iter=0, max_iter=50).fit_transform(X)
    # continues from the earlier layout (pairwise distances barely change) instead of restarting
    d_prev = np.linalg.norm(prev[:, None] - prev[None], axis=-1).ravel()
    d_cont = np.linalg.norm(cont[:, None] - cont[None], axis=-1).ravel()
    assert np.corrcoef(d_prev, d_cont)[0, 1] > 0.95


def test_three_components_and_sne():
    X, labels = _blobs(400, 3)
    tsne = TSNE(n_components=3, random_state=0, max_iter=300).fit(X)
    assert tsne.method_ == "barnes_hut" and tsne.embedding_.shape == (1200, 3)
    assert knn_accuracy(tsne.embedding_, labels, 10) == 1.0
    X, labels = _blobs(40, 3)
    sne = SNE(perplexity=10, random_state=0, max_iter=300).fit(X)
    assert np.isfinite(sne.embedding_).all() and np.isfinite(sne.kl_divergence_)
    assert knn_accuracy(sne.embedding_, labels, 5) > 0.9


def test_auto_method_and_resolved_attributes():
    X, _ = _blobs(400, 3)
    est = TSNE(max_iter=10, random_state=0).fit(X)
    assert est.method_ == "direct" and est.learning_rate_ == pytest.approx(1200.0)
    assert est.early_learning_rate_ == pytest.approx(200.0)
    assert est.n_iter_ == 10 and est.embedding_.dtype == np.float32
    assert set(est.timings_) == {"kNN", "affinities", "initialisation", "early exaggeration", "optimisation"}
    assert TSNE(max_iter=10).fit(X[:500]).method_ == "direct"
    assert TSNE(max_iter=10, dof=0.5).fit(X[:500]).method_ == "exact"  # other kernels: the rule as before
    assert TSNE(max_iter=10, n_components=3).fit(X[:500]).method_ == "exact"


def test_auto_reaches_the_kl_of_the_exact_gradient_on_the_same_affinities():
    """On small n, "auto" (direct sums with the kNN affinities) optimises the same objective as the exact
    gradient: the KL it reports equals the exact KL of its embedding, and is no worse than FFT's."""
    X, _ = _blobs(200, 4)
    auto = TSNE(random_state=0, max_iter=500).fit(X)
    fft = TSNE(method="fft", random_state=0, max_iter=500).fit(X)
    kl_exact = KLObjective(auto.affinities_, ExactRepulsion(1.0))(auto.embedding_.astype(np.float64))[0]
    assert auto.kl_divergence_ == pytest.approx(kl_exact, rel=1e-4)
    kl_fft = KLObjective(fft.affinities_, ExactRepulsion(1.0))(fft.embedding_.astype(np.float64))[0]
    assert kl_exact <= kl_fft * 1.01


def test_tol_stops_a_converged_layout_and_not_a_moving_one():
    """Continuing from a converged layout of the same data stops at the second KL check (25 iterations apart),
    with the KL where it was; continuing from a layout of other data does not stop early."""
    X, _ = _blobs(100, 3)
    full = TSNE(random_state=0, max_iter=750).fit(X)
    kw = dict(random_state=0, rescale_init=False, early_exaggeration_iter=0, max_iter=300, tol=5e-3)
    again = TSNE(init=full.embedding_, **kw).fit(X)
    assert again.n_iter_ == 50 and again.kl_divergence_ == pytest.approx(full.kl_divergence_, rel=0.02)
    shuffled = full.embedding_[np.random.default_rng(0).permutation(300)]
    moving = TSNE(init=shuffled, **kw).fit(X)
    assert moving.n_iter_ == 300
    no_tol = TSNE(init=shuffled, **{**kw, "tol": 0.0}).fit(X)
    np.testing.assert_array_equal(moving.embedding_, no_tol.embedding_)  # tol only ever stops, never steers


def test_neighbour_start_is_kept_where_neighbourhoods_moved_and_dropped_where_not():
    """A continuation whose previous layout put a third of one cluster's points in another: the neighbour-mean
    start wins the race and ends at a lower KL than the plain continuation after as many iterations. From the
    converged layout of a continuous sheet (where averaging only shrinks the layout) it loses, and the fit is
    then exactly the plain continuation."""
    X, labels = _blobs(100, 3)
    full = TSNE(random_state=0, max_iter=750).fit(X)
    kw = dict(random_state=0, rescale_init=False, early_exaggeration_iter=0, max_iter=100)
    wrong = full.embedding_.copy()
    swap = np.flatnonzero(labels == 0)[:33], np.flatnonzero(labels == 1)[:33]
    wrong[swap[0]], wrong[swap[1]] = full.embedding_[swap[1]], full.embedding_[swap[0]]
    plain = TSNE(init=wrong, **kw).fit(X)
    raced = TSNE(init=wrong, neighbour_start=100, **kw).fit(X)
    assert raced.start_ == "neighbours" and plain.start_ == "init"
    assert raced.n_iter_ == plain.n_iter_ == 100 and "neighbour start" in raced.timings_
    assert raced.learning_rate_ == 4 * plain.learning_rate_  # the contracted start re-expands at 4x the rate
    assert raced.kl_divergence_ < 0.9 * plain.kl_divergence_, (raced.kl_divergence_, plain.kl_divergence_)
    assert knn_accuracy(raced.embedding_, labels) > knn_accuracy(plain.embedding_, labels)
    again = TSNE(init=wrong, neighbour_start=100, n_jobs=2, **kw).fit(X)
    np.testing.assert_array_equal(again.embedding_, raced.embedding_)

    rng = np.random.default_rng(0)
    sheet = np.c_[rng.random((300, 2)) * 10, np.zeros((300, 8))] @ np.linalg.qr(rng.normal(size=(10, 10)))[0]
    sheet = sheet.astype(np.float32)
    settled = TSNE(random_state=0, max_iter=750).fit(sheet).embedding_
    kept = TSNE(init=settled, neighbour_start=100, **kw).fit(sheet)
    assert kept.start_ == "init"
    np.testing.assert_array_equal(kept.embedding_, TSNE(init=settled, **kw).fit(sheet).embedding_)


@pytest.mark.parametrize("params", [{}, {"init": "pca"}, {"early_exaggeration_iter": 10}])
def test_neighbour_start_needs_a_continuation(params):
    X, _ = _blobs(20, 3)
    kw = {"init": np.random.default_rng(0).normal(size=(60, 2)), "early_exaggeration_iter": 0, **params}
    if params:
        with pytest.raises(ValueError, match="neighbour_start continues from an earlier layout"):
            TSNE(perplexity=5, neighbour_start=40, max_iter=50, **kw).fit(X)
    else:
        fit = TSNE(perplexity=5, neighbour_start=40, max_iter=50, **kw).fit(X)
        assert fit.n_iter_ == {"neighbours": 40, "init": 50}[fit.start_]


def test_tol_extrapolates_the_last_window_over_the_iterations_left():
    """A KL falling by 0.11 % per 25 iterations: with tol = 0.5 % the descent runs on while the fall projected
    over the iterations left is above 0.5 % (5 windows left at iteration 175: 0.55 %) and stops at 200 (4 windows:
    0.44 %); with no iterations to project, one window's change decides."""
    def objective(Y, exaggeration=1.0, compute_kl=True):
        objective.calls += 1
        return 1.0 - 0.0011 / 25 * objective.calls, np.zeros_like(Y)

    for n_iter, stop in ((300, 200), (50, 50)):
        objective.calls = 0
        state = gradient_descent(np.zeros((3, 2)), objective, n_iter, learning_rate=1.0, momentum=0.5, tol=5e-3,
                                 kl_every=25)
        assert state.n_iter == stop
    assert state.converged  # 50: the second check, 0.11 % over the last window


def test_parameters_reach_the_kernels(monkeypatch):
    seen = {"gd": [], "rep": []}
    real_gd, real_rep = tsne_module.gradient_descent, tsne_module.make_repulsion

    def spy_gd(Y, objective, n_iter, **kw):
        seen["gd"].append((n_iter, kw["learning_rate"], kw["momentum"], kw.get("exaggeration", 1.0)))
        return real_gd(Y, objective, n_iter, **kw)

    def spy_rep(method, n, dim, dof, **kw):
        seen["rep"].append((method, dim, dof, kw["theta"]))
        return real_rep(method, n, dim, dof, **kw)

    monkeypatch.setattr(tsne_module, "gradient_descent", spy_gd)
    monkeypatch.setattr(tsne_module, "make_repulsion", spy_rep)
    X, _ = _blobs(20, 3)
    TSNE(method="barnes_hut", angle=0.3, dof=0.7, learning_rate=77.0, early_momentum=0.4, momentum=0.6,
         early_exaggeration=5.0, early_exaggeration_iter=7, max_iter=20, perplexity=5).fit(X)
    assert seen["gd"] == [(7, 77.0, 0.4, 5.0), (13, 77.0, 0.6, 1.0)]
    assert seen["rep"] == [("barnes_hut", 2, 0.7, 0.3)]


def test_params_follow_sklearn_contract():
    base = pytest.importorskip("sklearn.base")
    est = TSNE(perplexity=12, method="fft")
    clone = base.clone(est)
    assert clone.get_params() == est.get_params() and clone is not est
    assert "perplexity=12" in repr(est)
    assert est.set_params(perplexity=5) is est and est.perplexity == 5


# --- bad input -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,match", [
    ({"perplexity": -3}, r"The 'perplexity' parameter of TSNE must be a float in the range \(0, inf\)\. Got -3"),
    ({"method": "bh"}, r"The 'method' parameter of TSNE must be a str among"),
    ({"metric": "manhattan"}, r"The 'metric' parameter of TSNE"),
    ({"init": "spectral"}, r"The 'init' parameter of TSNE"),
    ({"angle": 0.0}, r"The 'angle' parameter"),
    ({"dof": 0}, r"The 'dof' parameter"),
    ({"max_iter": 0}, r"The 'max_iter' parameter"),
    ({"method": "fft", "n_components": 3}, r"method='fft' supports n_components=2 only"),
    ({"method": "barnes_hut", "n_components": 4}, r"supports n_components <= 3"),
])
def test_invalid_parameters(params, match):
    X, _ = _blobs(20, 3)
    with pytest.raises(ValueError, match=match):
        TSNE(**params).fit(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_rows_rejected(bad):
    X, _ = _blobs(20, 3)
    X[3, 2] = bad
    with pytest.raises(ValueError, match="contains NaN or infinity"):
        TSNE().fit(X)


def test_precomputed_matrix_checks():
    with pytest.raises(ValueError, match=r"square distance matrix \(n, n\); got shape \(5, 4\)"):
        TSNE(metric="precomputed").fit(np.ones((5, 4)))
    D = np.abs(np.random.default_rng(0).normal(size=(10, 10)))
    with pytest.raises(ValueError, match="symmetric distance matrix"):
        TSNE(metric="precomputed").fit(D)
    with pytest.raises(ValueError, match="non-negative distances"):
        TSNE(metric="precomputed").fit(-(D + D.T))


def test_small_n_lowers_perplexity_with_warning():
    X, _ = _blobs(10, 2)
    with pytest.warns(UserWarning, match=r"perplexity \(30\) is too large for n_samples \(20\).*Using perplexity"):
        est = TSNE(random_state=0, max_iter=100).fit(X)
    assert est.perplexity_ == pytest.approx(19 / 3)
    assert np.isfinite(est.embedding_).all()
    with pytest.raises(ValueError, match="minimum of 2 is required by TSNE"):
        TSNE().fit(X[:1])


@pytest.mark.parametrize("method", ["exact", "barnes_hut", "fft"])
def test_identical_points_warn_and_stay_finite(method):
    X = np.ones((60, 5), dtype=np.float32)
    with pytest.warns(UserWarning, match="All 60 points of X are identical"):
        est = TSNE(method=method, perplexity=5, random_state=0, max_iter=60).fit(X)
    assert np.isfinite(est.embedding_).all() and np.isfinite(est.kl_divergence_)


@pytest.mark.parametrize("method", ["exact", "barnes_hut", "fft"])
def test_duplicate_points_are_fine(method):
    X, labels = _blobs(50, 3)
    X = np.concatenate([X, X[:40], X[:10]])
    Y = TSNE(method=method, perplexity=10, random_state=0, max_iter=300).fit_transform(X)
    assert np.isfinite(Y).all()
    assert knn_accuracy(Y[:150], labels, 5) > 0.95


def test_init_array_checks():
    X, _ = _blobs(20, 3)
    with pytest.raises(ValueError, match=r"init has shape \(60, 3\); it must be \(n_samples, n_components\)"):
        TSNE(init=np.zeros((60, 3)), perplexity=5).fit(X)
    with pytest.raises(ValueError, match="init contains NaN"):
        TSNE(init=np.full((60, 2), np.nan), perplexity=5).fit(X)


def test_progress_goes_through_the_one_protocol(capsys):
    """fit(progress=...) receives (stage, done, total, message) events of repviz.progress; verbose=1 adds the
    phase lines (the terminal progress line itself is drawn only on an interactive terminal)."""
    X, _ = _blobs(20, 3)
    events = []
    TSNE(perplexity=5, max_iter=120, early_exaggeration_iter=20, random_state=0, verbose=1).fit(
        X, progress=lambda *event: events.append(event))
    assert [e[:3] for e in events] == [("optimise", 20, 120), ("optimise", 45, 120), ("optimise", 70, 120),
                                       ("optimise", 95, 120), ("optimise", 120, 120)]
    assert all(e[3].startswith("KL ") for e in events)
    out = capsys.readouterr().out
    assert "[TSNE] kNN:" in out and "[TSNE] optimisation:" in out
    events.clear()
    SNE(perplexity=5, max_iter=30, early_exaggeration_iter=10).fit_transform(X, progress=lambda *e: events.append(e))
    assert events[-1][:3] == ("optimise", 30, 30)
