"""t-SNE / SNE: gradients against finite differences and against each other, perplexity calibration, quality
against scikit-learn's exact t-SNE, determinism, the embedding object and precomputed affinities, the pipeline's
continuation, bad input and parameter flow."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import check_grad

from repviz.manifold import SNE, TSNE
from repviz.manifold.tsne import Affinities, TSNEEmbedding
from repviz.manifold.tsne.affinity import conditional_affinities, joint_affinities
from repviz.manifold.tsne.continuation import continue_embedding, continue_tsne
from repviz.manifold.tsne.init import weighted_mean
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


def test_fft_grid_covers_the_layout_in_boxes_of_at_most_one_unit_and_follows_it():
    """Every extent, compact or spread out, gets at least ``min_boxes`` boxes per side, boxes at most one unit
    wide, and a grid that covers exactly the layout's extent; a layout that grows a little keeps its box count,
    and its boxes widen with it, so every point keeps its box and its interpolation weights."""
    from repviz.manifold.tsne._fft import FFTRepulsion

    fft = FFTRepulsion(400, 1.0)
    for span in (1e-9, 0.37, 12.0, 49.9, 50.0, 50.2, 203.7, 1e4):
        n_boxes, width = fft._grid(span)
        assert n_boxes >= 50 and 0 < width <= 1 + 1e-8 and n_boxes * width == pytest.approx(span, rel=1e-8)
    Y = np.random.default_rng(4).normal(size=(400, 2)) * 30
    Y -= Y.min()
    rep = np.empty_like(Y)
    fft(Y, rep)
    box, wts = fft.box.copy(), fft.wts.copy()
    fft(Y * 1.003, rep)
    np.testing.assert_array_equal(fft.box, box)
    np.testing.assert_allclose(fft.wts, wts, atol=1e-9)


@pytest.mark.parametrize("n,spread", [(2000, 5.0), (5000, 2.0), (5000, 20.0), (20000, 50.0)])
def test_fft_gradient_at_its_grid_matches_the_exact_gradient(n, spread):
    """The FFT repulsion on the grid it picks, on t-SNE-like layouts (ten tight clusters, extents from 9, as in
    early exaggeration, to 160, a spread-out layout of 20,000 points): the repulsive forces within 3 % and Z
    within 0.1 % of the exact sums over all pairs."""
    rng = np.random.default_rng(n)
    centers = rng.normal(size=(10, 2)) * spread
    Y = centers[rng.integers(10, size=n)] + rng.normal(size=(n, 2)) * spread / 8
    exact, rep = np.empty_like(Y), np.empty_like(Y)
    z_exact = DirectRepulsion(n)(Y, exact)
    z = make_repulsion("fft", n, 2, 1.0)(Y, rep)
    assert np.linalg.norm(rep - exact) < 0.03 * np.linalg.norm(exact)
    assert z == pytest.approx(z_exact, rel=1e-3)


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
    the data and two copies shifted by noise of 1e-3 (the digits range 0-16) are compared."""
    sklearn_manifold = pytest.importorskip("sklearn.manifold")
    X = pytest.importorskip("sklearn.datasets").load_digits().data[:300].astype(np.float32)
    kls = []
    for seed in range(3):
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


def test_the_same_layout_whatever_blas_threads_the_process_has():
    # a threaded BLAS sums a matrix product in an order set by its thread count (a Dask worker has one, a
    # process of its own every core): the exact kNN's distances and PCA's start of 300 features come out
    # bit-identical, and so does the chaotic descent after them, fresh and continued
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    X = (rng.standard_normal((600, 300)) + np.repeat(3 * rng.standard_normal((6, 300)), 100, axis=0))
    X = X.astype(np.float32)
    params = dict(random_state=0, max_iter=250, n_jobs=1)
    layouts = []
    for threads in (1, 4):
        with threadpool_limits(threads, user_api="blas"):
            Y = TSNE(**params).fit_transform(X)
            continued, _ = continue_tsne(X[::-1].copy(), Y[::-1].copy(), {**TSNE().get_params(), **params},
                                         {"early_exaggeration_iter": 0, "max_iter": 100, "neighbour_start": 60})
        layouts.append((Y, continued))
    np.testing.assert_array_equal(layouts[0][0], layouts[1][0])
    np.testing.assert_array_equal(layouts[0][1], layouts[1][1])


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


def test_init_array_is_rescaled_and_an_embedding_continues_at_its_own_scale():
    X, _ = _blobs(50, 3)
    prev = TSNE(random_state=0).fit_transform(X)
    est = TSNE(init=prev, max_iter=1, early_exaggeration_iter=0, learning_rate=1e-12)
    np.testing.assert_allclose(est.fit_transform(X)[:, 0].std(), 1e-4, rtol=1e-3)
    affinities = TSNE(random_state=0).prepare_affinities(X)
    cont = TSNEEmbedding(prev, affinities).optimize(50).layout
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
    assert est.n_iter_ == 9 and est.embedding_.dtype == np.float32  # scikit-learn's: last iteration's index
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
    affinities = TSNE(random_state=0).prepare_affinities(X)
    again = TSNEEmbedding(full.embedding_, affinities).optimize(300, tol=5e-3)
    assert again.n_iter == 50 and again.kl_divergence == pytest.approx(full.kl_divergence_, rel=0.02)
    shuffled = full.embedding_[np.random.default_rng(0).permutation(300)]
    moving = TSNEEmbedding(shuffled, affinities).optimize(300, tol=5e-3)
    assert moving.n_iter == 300
    no_tol = TSNEEmbedding(shuffled, affinities).optimize(300)
    np.testing.assert_array_equal(moving.layout, no_tol.layout)  # tol only ever stops, never steers


PIPELINE = {"rescale_init": False, "early_exaggeration_iter": 0, "max_iter": 300, "tol": 5e-3, "neighbour_start": 120}


def _params(**changes):
    """Every TSNE parameter, as the pipeline passes them to continue_tsne."""
    return {**TSNE().get_params(), "random_state": 0, "n_jobs": 1, **changes}


def test_continue_tsne_keeps_the_moved_start_where_neighbourhoods_moved_and_drops_it_where_not():
    """A continuation whose previous layout put a third of one cluster's points in another: the neighbour-mean
    start wins the race (its descent runs neighbour_start iterations in all, not max_iter) and ends at a lower KL
    than the plain continuation. From the converged layout of a continuous sheet (where averaging only shrinks
    the layout) it loses, and the result is then exactly the plain continuation."""
    X, labels = _blobs(100, 3)
    full = TSNE(random_state=0, max_iter=750).fit(X)
    race = {"rescale_init": False, "early_exaggeration_iter": 0, "max_iter": 150, "neighbour_start": 100}
    no_race = {**race, "neighbour_start": None}
    wrong = full.embedding_.copy()
    swap = np.flatnonzero(labels == 0)[:33], np.flatnonzero(labels == 1)[:33]
    wrong[swap[0]], wrong[swap[1]] = full.embedding_[swap[1]], full.embedding_[swap[0]]
    plain, plain_info = continue_tsne(X, wrong, _params(), no_race)
    raced, raced_info = continue_tsne(X, wrong, _params(), race)
    assert plain_info["n_iter"] == 150 and raced_info["n_iter"] == 100
    assert continue_embedding(X, wrong, _params(), race)[1] == "neighbours"
    assert raced_info["kl_divergence"] < 0.9 * plain_info["kl_divergence"], (raced_info, plain_info)
    assert knn_accuracy(raced, labels) > knn_accuracy(plain, labels)
    again, _ = continue_tsne(X, wrong, _params(n_jobs=2), race)
    np.testing.assert_array_equal(again, raced)

    rng = np.random.default_rng(0)
    sheet = np.c_[rng.random((300, 2)) * 10, np.zeros((300, 8))] @ np.linalg.qr(rng.normal(size=(10, 10)))[0]
    sheet = sheet.astype(np.float32)
    settled = TSNE(random_state=0, max_iter=750).fit(sheet).embedding_
    kept, kept_info = continue_tsne(sheet, settled, _params(), race)
    assert kept_info["n_iter"] == 150 and continue_embedding(sheet, settled, _params(), race)[1] == "previous"
    np.testing.assert_array_equal(kept, continue_tsne(sheet, settled, _params(), no_race)[0])


def test_continue_tsne_returns_float32_and_the_pipeline_diagnostics():
    X, _ = _blobs(30, 3)
    previous = TSNE(perplexity=10, random_state=0, max_iter=300).fit_transform(X)
    Y, info = continue_tsne(X + 0.1, previous, _params(perplexity=10), dict(PIPELINE))
    assert Y.dtype == np.float32 and Y.shape == (90, 2) and type(Y) is np.ndarray
    assert set(info) == {"n_iter", "kl_divergence"}
    assert type(info["n_iter"]) is int and type(info["kl_divergence"]) is float
    assert 30 < info["n_iter"] <= 300 and np.isfinite(info["kl_divergence"])


@pytest.mark.parametrize("continuation,match", [
    ({"early_exaggeration_iter": 10}, "without early exaggeration; got early_exaggeration_iter=10, pass 0"),
    ({"neighbour_start": 0}, r"The 'neighbour_start' parameter of continue_embedding must be None or an int in "
                             r"the range \[1, inf\)\. Got 0"),
    ({"max_iter": 0}, r"The 'max_iter' parameter of TSNE must be an int in the range \[1, inf\)\. Got 0"),
])
def test_continue_tsne_rejects_bad_settings(continuation, match):
    X, _ = _blobs(20, 3)
    previous = np.random.default_rng(0).normal(size=(60, 2))
    with pytest.raises(ValueError, match=match):
        continue_tsne(X, previous, _params(perplexity=5), {**PIPELINE, **continuation})
    with pytest.raises(ValueError, match=r"previous has shape \(60, 3\); it must be \(n_samples, n_components\)"):
        continue_tsne(X, np.zeros((60, 3)), _params(perplexity=5), PIPELINE)


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
    assert state.stopped_by == "tol"  # 50: the second check, 0.11 % over the last window


def test_fit_is_prepare_embedding_and_two_optimize_calls():
    """The constructor's parameters reach the embedding and its two phases: a fit equals the embedding that
    prepare_embedding gives, optimised by hand with those parameters (early exaggeration, then the main phase)."""
    X, _ = _blobs(20, 3)
    params = dict(method="barnes_hut", angle=0.3, dof=0.7, learning_rate=77.0, early_momentum=0.4, momentum=0.6,
                  early_exaggeration=5.0, early_exaggeration_iter=7, max_iter=20, perplexity=5, random_state=0)
    fit = TSNE(**params).fit(X)
    embedding = TSNE(**params).prepare_embedding(X)
    assert (embedding.method, embedding.angle, embedding.dof) == ("barnes_hut", 0.3, 0.7)
    embedding.optimize(7, exaggeration=5.0, momentum=0.4, learning_rate=77.0)
    embedding.optimize(13, momentum=0.6, learning_rate=77.0)
    np.testing.assert_array_equal(fit.embedding_, embedding.layout.astype(np.float32))
    assert fit.n_iter_ + 1 == embedding.n_iter == 20 and fit.kl_divergence_ == embedding.kl_divergence


def test_optimize_resumes_where_it_stopped():
    """Two optimize(n) calls go on with the momentum and gains of the first: the same as one optimize(2n) up to
    rounding (the second call evaluates the KL in another loop), and unlike a fresh start from the same layout."""
    X, _ = _blobs(30, 3)
    affinities = TSNE(perplexity=10, method="exact").prepare_affinities(X)
    start = np.random.default_rng(0).normal(size=(90, 2)) * 1e-4
    whole = TSNEEmbedding(start, affinities, method="exact").optimize(40, exaggeration=12, momentum=0.5)
    halves = TSNEEmbedding(start, affinities, method="exact").optimize(20, exaggeration=12, momentum=0.5)
    restart = TSNEEmbedding(halves.layout, affinities, method="exact").optimize(20, exaggeration=12, momentum=0.5)
    halves.optimize(20, exaggeration=12, momentum=0.5)
    assert halves.n_iter == whole.n_iter == 40 and restart.n_iter == 20
    np.testing.assert_allclose(halves.layout, whole.layout, rtol=1e-7, atol=1e-12 * np.abs(whole.layout).max())
    assert np.abs(restart.layout - whole.layout).max() > 1e-3 * np.abs(whole.layout).max()
    assert halves.kl_divergence == pytest.approx(whole.kl_divergence, rel=1e-9)


def test_embedding_hands_out_plain_arrays_and_copies():
    X, _ = _blobs(20, 3)
    embedding = TSNE(perplexity=5, random_state=0).prepare_embedding(X).optimize(30)
    layout = embedding.layout
    assert type(layout) is np.ndarray and layout.dtype == np.float64 and layout.shape == (60, 2)
    layout[:] = 0  # a copy: the embedding is untouched
    assert np.abs(embedding.layout).max() > 0
    twin = embedding.copy()
    assert twin.n_iter == 30 and twin.kl_divergence == embedding.kl_divergence
    twin.optimize(10)
    assert embedding.n_iter == 30 and not np.array_equal(twin.layout, embedding.layout)


def test_precomputed_affinities_give_the_fit_of_the_data():
    X, _ = _blobs(40, 3)
    for params in ({"init": "random"}, {"init": np.random.default_rng(1).normal(size=(120, 2))},
                   {"init": "random", "method": "exact"}):
        est = TSNE(perplexity=10, random_state=3, max_iter=100, **params)
        affinities = est.prepare_affinities(X)
        assert isinstance(affinities, Affinities) and affinities.perplexity == 10.0
        assert affinities.n_neighbors == (119 if params.get("method") == "exact" else 30)
        from_data, from_affinities = est.fit(X), TSNE(**est.get_params()).fit(affinities)
        np.testing.assert_array_equal(from_affinities.embedding_, from_data.embedding_)
        assert from_affinities.kl_divergence_ == from_data.kl_divergence_
        assert from_affinities.n_features_in_ == 10 and "kNN" not in from_affinities.timings_
    with pytest.raises(ValueError, match=r"The 'init' parameter of TSNE must be 'random' or an array-like when X "
                                         r"is precomputed Affinities \(PCA needs the data\)\. Got 'pca' instead\."):
        TSNE().fit(affinities)


def test_weighted_mean_start_by_hand():
    """Each point at the P-weighted mean of its neighbours' positions; a point with no neighbours stays."""
    P = sp.csr_matrix(np.array([[0, 1, 3, 0], [1, 0, 0, 0], [3, 0, 0, 0], [0, 0, 0, 0]], dtype=np.float32))
    Y = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 8.0], [5.0, 5.0]])
    np.testing.assert_allclose(weighted_mean(Y, P), [[1.0, 6.0], [0.0, 0.0], [0.0, 0.0], [5.0, 5.0]])


@pytest.mark.parametrize("params,match", [
    ({"n_iter": -1}, r"The 'n_iter' parameter of TSNEEmbedding\.optimize must be an int in the range \[0, inf\)\. "
                     r"Got -1 instead\."),
    ({"momentum": 1.0}, r"The 'momentum' parameter of TSNEEmbedding\.optimize must be a float in the range "
                        r"\[0, 1\)\. Got 1\.0 instead\."),
    ({"learning_rate": "fast"}, r"The 'learning_rate' parameter of TSNEEmbedding\.optimize must be a str among "
                                r"\{'auto'\} or a float in the range \(0, inf\)\. Got 'fast' instead\."),
])
def test_optimize_rejects_bad_parameters(params, match):
    X, _ = _blobs(20, 3)
    embedding = TSNE(perplexity=5, random_state=0).prepare_embedding(X)
    with pytest.raises(ValueError, match=match):
        embedding.optimize(**{"n_iter": 10, **params})
    with pytest.raises(ValueError, match=r"layout has shape \(59, 2\); the affinities need"):
        TSNEEmbedding(np.zeros((59, 2)), embedding.affinities)


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
    ({"metric": "hamming"}, r"The 'metric' parameter of TSNE"),
    ({"init": "spectral"}, r"The 'init' parameter of TSNE"),
    ({"angle": 1.5}, r"The 'angle' parameter"),
    ({"dof": 0}, r"The 'dof' parameter"),
    ({"max_iter": 0}, r"The 'max_iter' parameter"),
    ({"method": "fft", "n_components": 3}, r"method='fft' supports n_components=2 only"),
    # scikit-learn's code matches "'n_components' should be"
    ({"method": "barnes_hut", "n_components": 4}, r"supports n_components <= 3 \('n_components' should be at most 3"),
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
    """repviz's messages also carry scikit-learn's phrases, which code written for it matches."""
    with pytest.raises(ValueError, match=r"square distance matrix \(n, n\); got shape \(5, 4\) \(the array must "
                                         r"be 2-dimensional and square\)"):
        TSNE(metric="precomputed").fit(np.ones((5, 4)))
    D = np.abs(np.random.default_rng(0).normal(size=(10, 10)))
    with pytest.raises(ValueError, match="symmetric distance matrix; .* Array must be symmetric"):
        TSNE(metric="precomputed").fit(D)
    with pytest.raises(ValueError, match=r"non-negative distances \(all distances should be positive or zero\)"):
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
    assert "[t-SNE] kNN:" in out and "[t-SNE] optimisation:" in out
    events.clear()
    SNE(perplexity=5, max_iter=30, early_exaggeration_iter=10).fit_transform(X, progress=lambda *e: events.append(e))
    assert events[-1][:3] == ("optimise", 30, 30)


# --- scikit-learn's options (issue #31) ---------------------------------------------------------------------

_METRICS = [("manhattan", None, "cityblock", {}), ("chebyshev", None, "chebyshev", {}),
            ("minkowski", {"p": 3}, "minkowski", {"p": 3}), ("mahalanobis", "V", "mahalanobis", "VI"),
            (lambda a, b: np.abs(a - b).max(), None, lambda a, b: np.abs(a - b).max(), {})]


@pytest.mark.parametrize("metric,params,ref_metric,ref_kwargs", _METRICS)
def test_other_metrics_give_the_affinities_of_their_distances(metric, params, ref_metric, ref_kwargs):
    """Each metric's P, and the fit, equal those of the same distances from scipy's cdist passed precomputed
    (float64 data stays float64 for these metrics, so the two paths see the same distances)."""
    from scipy.spatial.distance import cdist

    X = np.random.default_rng(0).normal(size=(120, 4))
    if params == "V":
        params, ref_kwargs = {"V": np.cov(X.T)}, {"VI": np.linalg.inv(np.cov(X.T))}
    D = cdist(X, X, ref_metric, **ref_kwargs)
    ours = TSNE(perplexity=10, metric=metric, metric_params=params, method="exact")
    ref = TSNE(perplexity=10, metric="precomputed", method="exact")
    np.testing.assert_allclose(ours.prepare_affinities(X).P.toarray(), ref.prepare_affinities(D).P.toarray(),
                               rtol=1e-4, atol=1e-9)
    kw = dict(perplexity=10, init="random", random_state=0, max_iter=300)
    np.testing.assert_allclose(TSNE(metric=metric, metric_params=params, **kw).fit_transform(X),
                               TSNE(metric="precomputed", **kw).fit_transform(D), rtol=1e-5, atol=1e-5)


def test_mahalanobis_without_its_matrix_is_refused():
    with pytest.raises(ValueError, match="Must provide either V or VI for Mahalanobis distance"):
        TSNE(metric="mahalanobis").fit(np.random.default_rng(0).normal(size=(50, 3)))


def test_angle_zero():
    """angle=0 is accepted: the exact method ignores it (the same layout as with any angle), Barnes-Hut opens
    every cell (its gradient is then the exact one)."""
    X, _ = _blobs(40, 3)
    exact = TSNE(perplexity=10, method="exact", angle=0, random_state=0, max_iter=300).fit_transform(X)
    np.testing.assert_array_equal(exact, TSNE(perplexity=10, method="exact", angle=0.5, random_state=0,
                                              max_iter=300).fit_transform(X))
    P = _affinities(X, 10)
    Y = np.random.default_rng(0).normal(size=(len(X), 2))
    bh = KLObjective(P, make_repulsion("barnes_hut", len(X), 2, 1.0, theta=0.0), 1.0)(Y)
    ref = KLObjective(P, ExactRepulsion(1.0), 1.0)(Y)
    np.testing.assert_allclose(bh[1], ref[1], rtol=1e-4, atol=1e-9)


def test_scikit_learn_stopping_rules():
    """n_iter_without_progress: with a KL that never falls after its first evaluation (iteration 25) and
    evaluations every 25 iterations, 50 stops at iteration 100, the first evaluation more than 50 after the
    best; min_grad_norm stops after the first step whose exact gradient (4x ours) is at most it. Through TSNE:
    each phase stops after one step; None and 0 (the defaults) run every iteration."""
    def flat(Y, exaggeration=1.0, compute_kl=True):
        return 1.0, np.full_like(Y, 0.1)

    Y = np.zeros((10, 2))
    assert gradient_descent(Y.copy(), flat, 500, learning_rate=1.0, momentum=0.5,
                            n_iter_without_progress=50).n_iter == 100
    norm = 4 * np.sqrt(20 * 0.01)  # ||4 * grad||
    assert gradient_descent(Y.copy(), flat, 500, learning_rate=1.0, momentum=0.5, min_grad_norm=1.01 * norm).n_iter == 1
    assert gradient_descent(Y.copy(), flat, 500, learning_rate=1.0, momentum=0.5,
                            min_grad_norm=0.99 * norm).n_iter == 500
    X, _ = _blobs(30, 3)
    kw = dict(perplexity=10, method="exact", random_state=0, max_iter=600, early_exaggeration_iter=100)
    assert TSNE(**kw).fit(X).n_iter_ == 599
    assert TSNE(min_grad_norm=1e6, **kw).fit(X).n_iter_ == 1


def test_sparse_input_and_sparse_neighbor_graphs():
    """Sparse X and scikit-learn's KNeighborsTransformer graph (the recipe ``KNeighborsTransformer(mode=
    "distance") -> TSNE(metric="precomputed")``) give the affinities of the dense data, sparse data its PCA
    start; a graph with fewer than 3 * perplexity neighbours, an exact fit of a graph and its PCA start (classical
    MDS needs every distance) are refused."""
    from sklearn.neighbors import KNeighborsTransformer

    X = np.random.default_rng(0).normal(size=(200, 10))
    P = TSNE(perplexity=10).prepare_affinities(X).P.toarray()
    np.testing.assert_allclose(TSNE(perplexity=10).prepare_affinities(sp.csr_matrix(X)).P.toarray(), P,
                               rtol=1e-4, atol=1e-9)
    G = KNeighborsTransformer(n_neighbors=30, mode="distance").fit_transform(X)
    np.testing.assert_allclose(TSNE(perplexity=10, metric="precomputed").prepare_affinities(G).P.toarray(), P,
                               rtol=1e-4, atol=1e-9)
    Y = TSNE(perplexity=10, metric="precomputed", init="random", random_state=0, max_iter=300).fit_transform(G)
    assert Y.shape == (200, 2) and np.isfinite(Y).all()
    with pytest.raises(ValueError, match=r"stores only 20 neighbour\(s\) in row 0, fewer than n_neighbors \(30\)"):
        TSNE(perplexity=10, metric="precomputed", init="random").fit(
            KNeighborsTransformer(n_neighbors=20, mode="distance").fit_transform(X))
    with pytest.raises(TypeError, match="method='exact' needs every distance, not a sparse neighbour graph"):
        TSNE(perplexity=10, metric="precomputed", method="exact", init="random").fit(G)
    with pytest.raises(ValueError, match="'random' or an array-like with a sparse neighbour graph"):
        TSNE(perplexity=10, metric="precomputed").fit(G)
    from repviz.manifold.tsne import init

    start = TSNE(perplexity=10, max_iter=1, learning_rate=1e-12, early_exaggeration_iter=0)
    np.testing.assert_allclose(start.fit_transform(sp.csr_matrix(X)), init.rescale(init.pca(X, 2)), rtol=1e-4,
                               atol=1e-9)  # a PCA start without densifying: the dense data's


KEY = "tsne-1fcae1ae03"


def test_pipeline_cache_key_kept():
    """scikit-learn's options at their defaults leave the pipeline's t-SNE key as it was; what changes layouts
    changes it (the learning_rate="auto" rule, tsne-aa1eb71325; the continuation's tol, tsne-9b7b3d880d; the FFT
    grid that follows the layout, tsne-1fcae1ae03)."""
    from repviz.methods import resolve

    assert resolve("tsne").key == KEY
    assert resolve("tsne", {"min_grad_norm": 1e-7}).key != KEY


def test_auto_learning_rate_small_n():
    """learning_rate="auto" is n / exaggeration, at least min(200, n / 1.5): FIt-SNE's floor from 300 points on
    (as before), never above n / 1.5 below (a step of 200 at n = 50 left KL 0.338 on average over 16 seeds of
    randn(50, 3), 0.255 now; openTSNE 0.237)."""
    from repviz.manifold.tsne.embedding import auto_learning_rate

    assert auto_learning_rate(60, 12.0) == 40.0 and auto_learning_rate(50) == 50.0
    assert auto_learning_rate(150, 12.0) == 100.0 and auto_learning_rate(150) == 150.0
    assert auto_learning_rate(300, 12.0) == 200.0 and auto_learning_rate(1000, 12.0) == 200.0
    assert auto_learning_rate(6000, 12.0) == 500.0 and auto_learning_rate(1000) == 1000.0
    kl = [TSNE(random_state=s).fit(np.random.RandomState(s).randn(50, 3)).kl_divergence_ for s in range(4)]
    print(f"KL of randn(50, 3), seeds 0-3: {np.round(kl, 3)}")
    assert np.mean(kl) < 0.265  # 0.256; 0.279 with the floor of 200


def test_verbose_2_speaks_scikit_learns_lines_and_reports_the_returned_kl(capsys):
    """verbose=2 prints scikit-learn's lines: the last "Iteration N: error = ..." is kl_divergence_ (the KL of the
    layout returned), and the mean sigma of the affinities equals scikit-learn's for the same exact affinities
    (data far from unit scale: repviz rescales X inside the fit)."""
    from sklearn.manifold import TSNE as SkTSNE

    X = np.random.default_rng(0).standard_normal((50, 2)) * 1e4
    tsne = TSNE(perplexity=10, verbose=2, random_state=0, method="exact", max_iter=300).fit(X)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(line.startswith("[t-SNE] ") for line in lines) and "Computing 49 nearest neighbors..." in out
    errors = [float(line.split("error = ")[1].split(",")[0]) for line in lines if "Iteration" in line]
    assert len(errors) == 12 and errors[-1] == pytest.approx(tsne.kl_divergence_, abs=1e-7)
    SkTSNE(perplexity=10, verbose=2, method="exact", max_iter=250, random_state=0).fit(X)
    (ours,), (ref,) = ([float(line.split("Mean sigma: ")[1]) for line in text.splitlines() if "Mean sigma" in line]
                       for text in (out, capsys.readouterr().out))
    assert ours == pytest.approx(ref, rel=1e-3)


def test_a_stop_names_its_rule_and_reports_the_returned_kl(capsys):
    """A stopping rule is named (state.stopped_by, TSNEEmbedding.stopped_by, verbose=2 in scikit-learn's words)
    and the last progress report carries the KL of the layout returned, not that of the step before."""
    def rising(Y, exaggeration=1.0, compute_kl=True):
        rising.calls += 1
        return (float(rising.calls) if compute_kl else float("nan")), np.full_like(Y, 0.1)

    rising.calls = 0
    reports = []
    state = gradient_descent(np.zeros((10, 2)), rising, 500, learning_rate=1.0, momentum=0.5,
                             n_iter_without_progress=0, progress=lambda s: reports.append(s.kl))
    assert state.stopped_by == "n_iter_without_progress" and state.n_iter == 50
    assert reports[-1] == state.kl == rising.calls  # evaluated again after the last step
    X, _ = _blobs(30, 3)
    tsne = TSNE(perplexity=10, method="exact", random_state=0, max_iter=600, early_exaggeration_iter=100,
                min_grad_norm=1e6, verbose=2).fit(X)
    out = capsys.readouterr().out
    assert "[t-SNE] Iteration 1: gradient norm at most min_grad_norm (1e+06). Finished." in out
    assert TSNE(perplexity=10, max_iter=300, random_state=0).prepare_embedding(X).optimize(
        60, tol=1.0).stopped_by == "tol"
    assert tsne.n_iter_ == 1


def test_transform_gives_copies_of_fitted_points_their_positions():
    """scikit-learn's transformer contract: fit(X).transform(X) == fit_transform(X); per point, so any subset or
    order of the fitted points comes back at its positions, while a point 1e-3 away is placed (near them)."""
    X, _ = _blobs(60, 3)
    X = X.astype(np.float64) + 0.1  # values not representable in float32: the fit keeps a float32 copy
    tsne = TSNE(perplexity=5, max_iter=100, random_state=0).fit(X)
    np.testing.assert_array_equal(tsne.transform(X), tsne.embedding_)
    np.testing.assert_array_equal(tsne.transform(X[[7, 3, 3]]), tsne.embedding_[[7, 3, 3]])
    moved = tsne.transform(X[:5] + 1e-3) - tsne.embedding_[:5]
    assert (np.abs(moved) > 0).any(axis=1).all() and np.linalg.norm(moved, axis=1).max() < 1.0


@pytest.mark.parametrize("d", [5, 40])
def test_pca_start_is_the_data_projected_on_its_top_principal_axes(d):
    """The PCA start of 30 points, narrower and wider than the probe set (the Gram matrix's side): scikit-learn's
    exact PCA projection, each column's sign as fix_signs sets it."""
    from sklearn.decomposition import PCA as SkPCA

    from repviz.manifold.tsne import init

    X = np.random.default_rng(0).normal(size=(30, d)) * np.linspace(3, 0.5, d)
    ours = init.pca(X.astype(np.float32), 2)
    ref = SkPCA(2, svd_solver="full").fit_transform(X.astype(np.float32).astype(np.float64))
    assert ours.dtype == np.float64
    np.testing.assert_allclose(np.abs(ours), np.abs(ref), atol=1e-9)
    assert np.array_equal(ours, init.fix_signs(ours))
