"""repviz.density against independent references: a Gaussian's highest-density circles, a direct sum of Gaussian
kernels, hand-computed thresholds and masses."""

from __future__ import annotations

import numpy as np
import pytest

contourpy = pytest.importorskip("contourpy")

from repviz.density import GRID, density_contours, density_grid, kde_grid, mass_levels, mass_thresholds  # noqa: E402


def test_mass_levels_are_spread_evenly_inside_0_1():
    assert mass_levels(4) == [0.2, 0.4, 0.6, 0.8]
    assert mass_levels(1) == [0.5]
    assert mass_levels(2) == [0.333333, 0.666667]


def test_mass_thresholds_by_hand():
    z = np.array([[0.1, 0.4], [0.3, 0.2]])  # sorted 0.4, 0.3, 0.2, 0.1: cumulative 0.4, 0.7, 0.9, 1.0
    assert mass_thresholds(z, [0.4, 0.65, 0.85, 1.0]) == [0.4, 0.3, 0.2, 0.1]
    assert mass_thresholds(2 * z, [0.4, 0.65]) == [0.8, 0.6]  # mass is relative: scale does not matter


def test_kde_grid_against_a_direct_sum_of_gaussian_kernels():
    """Binning moves each point by at most half a cell; on a fine grid the binned and smoothed KDE is the direct
    one (Scott's bandwidth per axis, kernels summed at the cell centres) within a few per cent of its peak."""
    rng = np.random.default_rng(1)
    Y = np.concatenate([rng.normal(size=(150, 2)) * [1.0, 0.5], rng.normal(size=(100, 2)) * 0.3 + [2.5, 1.0]])
    xs, ys = np.linspace(-4, 5, 181), np.linspace(-3, 3, 121)
    z = kde_grid(Y, xs, ys)
    h = Y.std(axis=0) * len(Y) ** (-1 / 6)
    gx = np.exp(-0.5 * ((xs[None, :] - Y[:, :1]) / h[0]) ** 2)  # (m, nx)
    gy = np.exp(-0.5 * ((ys[None, :] - Y[:, 1:]) / h[1]) ** 2)  # (m, ny)
    direct = gy.T @ gx  # (ny, nx): sum over points of the product kernel
    direct /= direct.sum()
    assert z.shape == (len(ys), len(xs)) and z.sum() == pytest.approx(1.0)
    assert np.abs(z - direct).max() < 0.03 * direct.max()


def test_contours_of_a_gaussian_are_its_highest_density_circles():
    """A standard normal sample's KDE is about N(0, 1 + h²): the region holding mass p is a circle of radius
    sqrt(-2 ln(1 - p) (1 + h²))."""
    Y = np.random.default_rng(0).normal(size=(20_000, 2))
    xs = ys = np.linspace(-6, 6, 161)
    z = kde_grid(Y, xs, ys)
    h2 = np.mean(Y.std(axis=0) ** 2) * len(Y) ** (-1 / 3)
    for p, t in zip([0.2, 0.5, 0.8], mass_thresholds(z, [0.2, 0.5, 0.8])):
        (line,) = contourpy.contour_generator(xs, ys, z).lines(t)
        radius = np.linalg.norm(line, axis=1)
        assert radius.mean() == pytest.approx(np.sqrt(-2 * np.log(1 - p) * (1 + h2)), rel=0.04)
    out = density_contours(Y, levels=3)
    assert out["levels"] == [0.25, 0.5, 0.75] and [c["level"] for c in out["contours"]] == out["levels"]
    for c in out["contours"]:
        (path,) = c["paths"]
        radius = np.linalg.norm(np.reshape(path, (-1, 2)), axis=1)
        assert radius.mean() == pytest.approx(np.sqrt(-2 * np.log(1 - c["level"]) * (1 + h2)), rel=0.05)


def test_grid_covers_the_points_with_a_margin():
    Y = np.array([[0.0, 10.0], [4.0, 12.0], [np.nan, 0.0]])
    xs, ys = density_grid(Y, 8)
    assert len(xs) == len(ys) == 8
    cell_x, cell_y = (6.0 / 8, 3.0 / 8)  # spans 4 and 2 widened by a quarter on each side
    np.testing.assert_allclose([xs[0], xs[-1]], [-1 + cell_x / 2, 5 - cell_x / 2])
    np.testing.assert_allclose([ys[0], ys[-1]], [9.5 + cell_y / 2, 12.5 - cell_y / 2])


def test_contours_per_class_skip_small_classes_and_non_finite_points():
    rng = np.random.default_rng(2)
    Y = np.concatenate([rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 6, [[0.5, 0.5], [1.0, 1.0]]])
    classes = np.array([0] * 200 + [1] * 200 + [2, 2])  # class 2: two points, no density
    Y[5] = np.nan
    out = density_contours(Y, classes, levels=2)
    assert [(c["class"], c["level"]) for c in out["contours"]] == [(0, 0.333333), (0, 0.666667), (1, 0.333333),
                                                                   (1, 0.666667)]
    for c in out["contours"]:
        points = np.concatenate([np.reshape(p, (-1, 2)) for p in c["paths"]])
        centre = [0, 0] if c["class"] == 0 else [6, 6]
        assert np.abs(points.mean(axis=0) - centre).max() < 0.5
    assert density_contours(Y[:2], levels=2) == {"levels": [0.333333, 0.666667], "contours": []}
    assert GRID == 128


@pytest.mark.parametrize("Y, classes, levels, message", [
    (np.zeros((5, 3)), None, 4, r"Y must have shape \(n, 2\); got shape \(5, 3\)"),
    (np.zeros((5, 2)), None, 0, "levels must be at least 1; got 0"),
    (np.zeros((5, 2)), np.zeros(4), 4, r"classes must have shape \(5,\), one code per point; got shape \(4,\)"),
])
def test_bad_inputs_say_what_is_expected(Y, classes, levels, message):
    with pytest.raises(ValueError, match=message):
        density_contours(Y, classes, levels)
