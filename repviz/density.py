"""Density contours of a 2-D embedding: a Gaussian KDE on a grid and the lines around its highest-density regions.

What the tab's "Contours" draw, callable on any (n, 2) array: :func:`density_contours` returns, for each enclosed
probability mass (e.g. 0.2, 0.4, 0.6, 0.8), the polylines around the smallest region holding that share of the
points, overall or per class. Numerics on arrays only (numpy, scipy, contourpy): no store, no capture.

>>> import numpy as np
>>> Y = np.random.default_rng(0).normal(size=(500, 2))
>>> out = density_contours(Y, levels=2)
>>> out["levels"], len(out["contours"])
([0.333333, 0.666667], 2)
"""

from __future__ import annotations

import numpy as np

#: Cells per axis of the density grid.
GRID = 128
#: The grid reaches this share of the points' span beyond them on every side (room for the smoothed tails).
MARGIN = 0.25


def mass_levels(levels: int) -> list[float]:
    """The enclosed probability masses of ``levels`` contours spread evenly in (0, 1): 4 -> [0.2, 0.4, 0.6, 0.8]."""
    return [round((i + 1) / (levels + 1), 6) for i in range(levels)]


def _extent(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lowest and highest value and span per axis of the finite points of ``Y``; a zero span gets a small positive
    width."""
    finite = Y[np.isfinite(Y).all(axis=1)]
    lo, hi = finite.min(axis=0), finite.max(axis=0)
    return lo, hi, np.maximum(hi - lo, 1e-6 * max(1.0, float(np.abs(finite).max())))


def density_grid(Y: np.ndarray, size: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres ``(xs, ys)`` of a ``size`` × ``size`` grid over the finite points of ``Y`` (n, 2), widened by
    :data:`MARGIN` of their span on each side."""
    lo, hi, span = _extent(Y)
    lo, hi = lo - MARGIN * span, hi + MARGIN * span
    xs, ys = (np.linspace(lo[a] + (hi[a] - lo[a]) / (2 * size), hi[a] - (hi[a] - lo[a]) / (2 * size), size)
              for a in range(2))
    return xs, ys


def kde_grid(Y: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Gaussian KDE of the points ``Y`` (m, 2) on the grid of cell centres ``xs`` × ``ys`` (ny, nx), normalised
    to sum 1: points binned into cells, then smoothed with a Gaussian of Scott's bandwidth per axis
    (std · m^(-1/6)), at least half a cell; binning moves a point by at most half a cell."""
    from scipy.ndimage import gaussian_filter

    dx, dy = xs[1] - xs[0], ys[1] - ys[0]
    edges_x = np.append(xs - dx / 2, xs[-1] + dx / 2)
    edges_y = np.append(ys - dy / 2, ys[-1] + dy / 2)
    counts, _, _ = np.histogram2d(Y[:, 1], Y[:, 0], bins=(edges_y, edges_x))
    h = np.maximum(Y.std(axis=0) * len(Y) ** (-1 / 6), [dx / 2, dy / 2])
    z = gaussian_filter(counts, sigma=(h[1] / dy, h[0] / dx), mode="constant", truncate=4.0)
    total = z.sum()
    return z / total if total > 0 else z


def mass_thresholds(z: np.ndarray, masses: list[float]) -> list[float]:
    """Density values whose superlevel sets hold the given fractions of the mass of ``z`` (highest-density
    regions): the region {z >= t} of the contour at t holds that mass."""
    values = np.sort(z.ravel())[::-1]
    cumulative = np.cumsum(values)
    cumulative /= cumulative[-1]
    return [float(values[min(np.searchsorted(cumulative, m), len(values) - 1)]) for m in masses]


def _paths(lines: list[np.ndarray], decimals: int) -> list[list[float]]:
    return [np.round(line[np.isfinite(line).all(axis=1)], decimals).ravel().tolist() for line in lines
            if len(line) >= 2]


def density_contours(Y: np.ndarray, classes: np.ndarray | None = None, levels: int = 4, grid: int = GRID) -> dict:
    """Contour lines of the density of the points ``Y`` (n, 2), overall or per class.

    Parameters
    ----------
    Y : array of shape (n, 2)
        A 2-D layout; rows with a non-finite coordinate are left out.
    classes : int array of shape (n,), optional
        A class code per point (negative: none). Given, each class gets its own contours, from its own KDE.
    levels : int, default=4
        How many contours per group, at the masses :func:`mass_levels` gives.
    grid : int, default=128
        Cells per axis of the KDE grid, shared by every group.

    Returns
    -------
    dict
        ``{"levels": masses, "contours": [{"class": int or None, "level": mass, "paths": [[x0, y0, x1, y1, ...],
        ...]}]}`` in the coordinates of ``Y``, rounded to about 5 significant digits of the layout's span. A group
        with fewer than 3 finite points has no contours.
    """
    import contourpy

    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != 2:
        raise ValueError(f"Y must have shape (n, 2); got shape {Y.shape}")
    if not levels >= 1:
        raise ValueError(f"levels must be at least 1; got {levels}")
    finite = np.isfinite(Y).all(axis=1)
    masses = mass_levels(levels)
    out = {"levels": masses, "contours": []}
    if finite.sum() < 3:
        return out
    xs, ys = density_grid(Y, grid)
    decimals = int(max(0, 4 - np.floor(np.log10(_extent(Y)[2].max()))))
    if classes is None:
        groups = [(None, finite)]
    else:
        codes = np.asarray(classes)
        if codes.shape != (len(Y),):
            raise ValueError(f"classes must have shape ({len(Y)},), one code per point; got shape {codes.shape}")
        groups = [(int(c), finite & (codes == c)) for c in np.unique(codes[codes >= 0])]
    for cls, rows in groups:
        if rows.sum() < 3:
            continue
        z = kde_grid(Y[rows], xs, ys)
        generator = contourpy.contour_generator(xs, ys, z)
        for mass, threshold in zip(masses, mass_thresholds(z, masses)):
            out["contours"].append({"class": cls, "level": mass, "paths": _paths(generator.lines(threshold), decimals)})
    return out
