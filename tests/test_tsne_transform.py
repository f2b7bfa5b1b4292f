"""TSNE.transform: new points placed into a fixed layout (openTSNE's scheme)."""

from __future__ import annotations

import numpy as np
import pytest

from repviz.manifold import TSNE
from repviz.manifold.tsne import transform as placing


def _accuracy(Y_ref, labels, Y, truth, skip_self=False) -> float:
    """10-NN accuracy of the points Y (classes ``truth``) among the labelled layout Y_ref (brute force)."""
    d = ((Y[:, None, :].astype(np.float64) - Y_ref[None, :, :]) ** 2).sum(axis=2)
    order = np.argsort(d, axis=1)[:, int(skip_self):10 + int(skip_self)]
    return float(np.mean([np.bincount(labels[row], minlength=10).argmax() == t for row, t in zip(order, truth)]))


@pytest.fixture(scope="module")
def fitted(digits):
    X, y = digits
    perm = np.random.default_rng(0).permutation(len(X))
    fit, new = perm[:1000], perm[1000:1300]
    tsne = TSNE(perplexity=30, max_iter=500, random_state=0, n_jobs=1).fit(X[fit])
    return tsne, X[fit], y[fit], X[new], y[new]


def test_points_of_the_fit_land_at_their_fitted_position(fitted):
    tsne, X, _, _, _ = fitted
    placed = tsne.transform(X[:150])
    moved = np.linalg.norm(placed - tsne.embedding_[:150], axis=1)
    radius = np.sqrt(((tsne.embedding_ - tsne.embedding_.mean(axis=0)) ** 2).sum(axis=1).mean())
    # within a kernel width (1) of where the fit put them, in a layout some 30 units across
    assert placed.dtype == np.float32 and moved.max() < 1.0 and np.median(moved) < 0.02 * radius


def test_held_out_points_land_among_their_own_class(fitted):
    tsne, _, y, X_new, y_new = fitted
    placed = tsne.transform(X_new)
    fitted_accuracy = _accuracy(tsne.embedding_, y, tsne.embedding_, y, skip_self=True)
    placed_accuracy = _accuracy(tsne.embedding_, y, placed, y_new)
    assert placed_accuracy >= fitted_accuracy - 0.05


def test_the_grid_repulsion_matches_the_exact_sums():
    rng = np.random.default_rng(0)
    layout = np.concatenate([rng.normal(size=(1500, 2)) * 3 + c for c in ([0, 0], [25, 5], [-10, 20])])
    at = layout[rng.choice(len(layout), 300, replace=False)] + rng.normal(size=(300, 2))
    for dof in (1.0, 0.5):
        z_exact, s_exact = placing._ExactField(layout, dof)(at)
        z_grid, s_grid = placing._GridField(layout, dof)(at)
        np.testing.assert_allclose(z_grid, z_exact, rtol=0.01)
        force = lambda z, s: (at * s[:, :1] - s[:, 1:]) / z[:, None]  # noqa: E731
        error = np.linalg.norm(force(z_grid, s_grid) - force(z_exact, s_exact), axis=1)
        assert np.median(error / np.linalg.norm(force(z_exact, s_exact), axis=1)) < 0.03


@pytest.mark.parametrize("dof, dim", [(1.0, 2), (0.5, 2), (2.0, 3)])
def test_the_exact_repulsion_is_the_kernel_summed_over_the_layout(dof, dim):
    """The exact field, computed one coordinate at a time, against the sums written out pair by pair."""
    rng = np.random.default_rng(0)
    Y_fit, Y = rng.normal(size=(50, dim)) * 5, rng.normal(size=(7, dim)) * 5
    z, sums = placing._ExactField(Y_fit, dof)(Y)
    for i, y in enumerate(Y):
        base = 1.0 + ((y - Y_fit) ** 2).sum(axis=1) / dof
        w, w2 = base ** -dof, base ** -dof / base
        np.testing.assert_allclose(z[i], w.sum(), rtol=1e-12)
        np.testing.assert_allclose(sums[i], [w2.sum(), *(w2 @ Y_fit)], rtol=1e-12)


def test_placing_with_the_grid_agrees_with_the_exact_repulsion(fitted, monkeypatch):
    tsne, X, _, X_new, _ = fitted
    exact = placing.place(X_new[:100], X, tsne.embedding_)  # 100 x 1000 pairs: exact
    monkeypatch.setattr(placing, "EXACT_MAX_PAIRS", 0)
    grid = placing.place(X_new[:100], X, tsne.embedding_)
    assert np.median(np.linalg.norm(grid - exact, axis=1)) < 0.5


def test_transform_needs_the_data_it_was_fitted_on(digits):
    X = digits[0][:200]
    tsne = TSNE(perplexity=10, max_iter=250, random_state=0)
    with pytest.raises(ValueError, match="not fitted yet"):
        tsne.transform(X)
    affinities = tsne.prepare_affinities(X)
    fitted = TSNE(init="random", max_iter=250, random_state=0).fit(affinities)
    with pytest.raises(ValueError, match="fitted from precomputed affinities and kept no data"):
        fitted.transform(X)
    tsne.fit(X)
    with pytest.raises(ValueError, match="X has 10 features, but TSNE is expecting 64 features"):
        tsne.transform(X[:, :10])


def test_precomputed_distances_place_like_the_features(digits):
    X = digits[0][:300].astype(np.float64)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    tsne = TSNE(perplexity=10, max_iter=300, random_state=0).fit(X[:250])
    by_features = tsne.transform(X[250:])
    by_distances = placing.place(D[250:, :250], None, tsne.embedding_, metric="precomputed")
    np.testing.assert_allclose(by_distances, by_features, atol=1e-2)
