"""New points placed into a fixed t-SNE layout (openTSNE's ``transform``; Poličar, Stražar & Zupan 2019).

Each new point gets conditional affinities p_{j|i} to its ``3 * perplexity`` nearest training points (calibrated
by perplexity on their distances, rows summing to 1), starts at the p-weighted mean of those neighbours'
positions (the rule of :func:`~repviz.manifold.tsne.init.weighted_mean`) and moves by gradient descent on its own
KL(p_i || q_i), where q_{j|i} normalises the Student-t kernel over the training points only: the training layout
never moves and the new points do not see each other, so placing a point does not depend on the others placed
with it.

The repulsion of the fixed layout is the same at every iteration, so it is computed once: its kernel sums
(sum_l w_il, and sum_l w_il^(1+1/dof) (1, y_l)) on a grid by FFT convolution (bilinear charges, spacing
:data:`GRID_SPACING` in layout units, where the kernel varies on a scale of 1), then read at the new points by
bilinear interpolation at each iteration (2-D, more than :data:`EXACT_MAX_PAIRS` pairs); exactly from every
training point at each iteration otherwise. An iteration then costs O(m k) for m new points.

Defaults are openTSNE's: perplexity 5, 250 iterations, learning rate 0.1, exaggeration 1.5, momentum 0.8, each
point's gradient clipped to norm 0.25, no early exaggeration.
"""

from __future__ import annotations

import numpy as np
import scipy.fft

from ...neighbors import kneighbors
from .affinity import conditional_affinities, n_neighbors_for

#: Grid spacing of the precomputed repulsion, in layout units.
GRID_SPACING = 0.2
#: Largest grid side (nodes); a layout wider than GRID_SPACING * MAX_GRID gets a coarser grid.
MAX_GRID = 800
#: Up to this many (new, training) pairs the repulsion is summed exactly at every iteration.
EXACT_MAX_PAIRS = 250_000


def partial_affinities(X_new, X_fit, perplexity: float, metric: str = "euclidean") -> tuple[np.ndarray, ...]:
    """Each new point's nearest training points, its conditional affinities p_{j|i} to them (rows sum to 1) and
    its distance to the nearest: (indices (m, k), P (m, k) float64, distances (m,)), k = 3 * perplexity. With
    ``metric="precomputed"``, ``X_new`` holds the distances (m, n_fit) to the training points and ``X_fit`` is
    unused."""
    n_fit = X_new.shape[1] if metric == "precomputed" else X_fit.shape[0]
    k = n_neighbors_for(perplexity, n_fit + 1)
    reference = np.empty((n_fit, 0)) if metric == "precomputed" else X_fit
    idx, dist = kneighbors(X_new, reference, k, metric=metric)
    P, _ = conditional_affinities(dist, min(float(perplexity), k / 3.0))
    return idx, P, dist[:, 0]


class _ExactField:
    """The repulsion sums of the fixed layout at given positions, from every training point."""

    def __init__(self, Y_fit: np.ndarray, dof: float):
        self.Y, self.dof = Y_fit, dof

    def __call__(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # (m, n) arrays one coordinate at a time: an (m, n, d) difference summed over its short last axis took
        # most of a placement's time
        d2 = np.square(Y[:, :1] - self.Y[:, 0])
        for d in range(1, Y.shape[1]):
            d2 += np.square(Y[:, d:d + 1] - self.Y[:, d])
        base = 1.0 + d2 / self.dof if self.dof != 1.0 else np.add(d2, 1.0, out=d2)
        w2 = np.reciprocal(base)  # (1 + d²/dof)^-1
        w = w2 if self.dof == 1.0 else base ** -self.dof
        z = w.sum(axis=1)
        w2 *= w
        return z, np.column_stack([w2.sum(axis=1), w2 @ self.Y])


class _GridField:
    """The same sums precomputed on a grid covering the layout (2-D), interpolated bilinearly."""

    def __init__(self, Y_fit: np.ndarray, dof: float, margin: float = 5.0):
        lo = Y_fit.min(axis=0) - margin
        side = float((Y_fit.max(axis=0) + margin - lo).max())
        g = int(min(MAX_GRID, max(32, np.ceil(side / GRID_SPACING) + 1)))
        self.lo, self.h, self.g = lo, side / (g - 1), g
        charges = self._spread(Y_fit, [np.ones(len(Y_fit)), Y_fit[:, 0], Y_fit[:, 1]])
        # a circular convolution of length L >= 2g - 1 (a fast FFT size): the kernel at every node offset, the
        # negative offsets wrapped to the end
        L = scipy.fft.next_fast_len(2 * g - 1, real=True)
        offsets = np.where(np.arange(L) <= L // 2, np.arange(L), np.arange(L) - L) * self.h
        d2 = offsets[:, None] ** 2 + offsets[None, :] ** 2
        w = (1.0 + d2 / dof) ** -dof
        # float32 transforms: twice as fast, and their error (~1e-6) is far below the interpolation's (~1e-2)
        hats = [scipy.fft.rfft2(kernel.astype(np.float32)) for kernel in (w, w / (1.0 + d2 / dof))]
        ones = scipy.fft.rfft2(charges[0].astype(np.float32), (L, L))
        spectra = [ones * hats[0], ones * hats[1],
                   *(scipy.fft.rfft2(c.astype(np.float32), (L, L)) * hats[1] for c in charges[1:])]
        fields = [scipy.fft.irfft2(spectrum, (L, L))[:g, :g] for spectrum in spectra]
        self.fields = np.stack(fields, axis=-1).astype(np.float64)  # (g, g, 4): sum w, sum w2, sum w2 y_x, sum w2 y_y

    def _cells(self, Y: np.ndarray):
        u = np.clip((Y - self.lo) / self.h, 0.0, self.g - 1.000001)
        cell = np.floor(u).astype(np.int64)
        return cell, u - cell

    def _spread(self, Y: np.ndarray, values: list[np.ndarray]) -> list[np.ndarray]:
        cell, f = self._cells(Y)
        out = []
        for v in values:
            grid = np.zeros(self.g * self.g)
            for dx, dy, weight in ((0, 0, (1 - f[:, 0]) * (1 - f[:, 1])), (1, 0, f[:, 0] * (1 - f[:, 1])),
                                   (0, 1, (1 - f[:, 0]) * f[:, 1]), (1, 1, f[:, 0] * f[:, 1])):
                grid += np.bincount((cell[:, 0] + dx) * self.g + cell[:, 1] + dy, v * weight, self.g * self.g)
            out.append(grid.reshape(self.g, self.g))
        return out

    def __call__(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cell, f = self._cells(Y)
        x, y, fx, fy = cell[:, 0], cell[:, 1], f[:, :1], f[:, 1:]
        F = self.fields
        v = ((1 - fx) * (1 - fy) * F[x, y] + fx * (1 - fy) * F[x + 1, y] + (1 - fx) * fy * F[x, y + 1]
             + fx * fy * F[x + 1, y + 1])
        return v[:, 0], v[:, 1:]


def repulsion_field(Y_fit: np.ndarray, n_new: int, dof: float = 1.0):
    """The repulsion of the fixed layout ``Y_fit`` as a function of positions (see the module docstring):
    ``field(Y) -> (sum_l w_il (m,), [sum_l w2_il, sum_l w2_il y_l] (m, 1 + n_components))``."""
    Y_fit = np.asarray(Y_fit, dtype=np.float64)
    if Y_fit.shape[1] == 2 and n_new * len(Y_fit) > EXACT_MAX_PAIRS:
        return _GridField(Y_fit, dof)
    return _ExactField(Y_fit, dof)


def place(X_new, X_fit, Y_fit, *, perplexity: float = 5.0, n_iter: int = 250, learning_rate: float = 0.1,
          exaggeration: float = 1.5, momentum: float = 0.8, max_grad_norm: float = 0.25, dof: float = 1.0,
          metric: str = "euclidean", keep_copies: bool = False) -> np.ndarray:
    """Positions of the new points ``X_new`` in the fixed layout ``Y_fit`` of ``X_fit`` (the module docstring):
    float32 (m, n_components).

    Parameters
    ----------
    X_new : array (m, n_features), or (m, n_fit) distances with ``metric="precomputed"``
    X_fit : array (n_fit, n_features) or None (precomputed)
    Y_fit : array (n_fit, n_components)
    perplexity, n_iter, learning_rate, exaggeration, momentum, max_grad_norm :
        openTSNE's ``transform`` parameters (its defaults).
    dof : float
        The kernel's degrees of freedom, as the layout was fitted.
    keep_copies : bool, default=False
        A new point at distance 0 from a training point (a copy of it, for a repeated point the first) gets
        that point's position in ``Y_fit`` rather than being placed (TSNE.transform, so that transforming the
        training data returns its layout).
    """
    Y_fit = np.asarray(Y_fit, dtype=np.float64)
    idx, P, nearest = partial_affinities(X_new, X_fit, perplexity, metric)
    Y = np.einsum("ik,ikd->id", P, Y_fit[idx])  # the p-weighted mean of the neighbours (rows of P sum to 1)
    field = repulsion_field(Y_fit, len(Y), dof)
    update, gains = np.zeros_like(Y), np.ones_like(Y)
    for _ in range(n_iter):
        diff = Y[:, None, :] - Y_fit[idx]
        q = (1.0 + np.square(diff).sum(axis=2) / dof) ** -1.0  # w^(1/dof): the gradient's factor per pair
        attract = np.einsum("ik,ikd->id", P * q, diff)
        z, sums = field(Y)
        repel = (Y * sums[:, :1] - sums[:, 1:]) / z[:, None]
        grad = exaggeration * attract - repel
        norm = np.linalg.norm(grad, axis=1, keepdims=True)
        grad *= np.minimum(1.0, max_grad_norm / np.maximum(norm, 1e-300))
        opposed = np.sign(grad) != np.sign(update)
        gains = np.where(opposed, gains + 0.2, gains * 0.8 + 0.01)
        update = momentum * update - learning_rate * gains * grad
        Y += update
    if keep_copies:
        copies = nearest == 0
        Y[copies] = Y_fit[idx[copies, 0]]
    return Y.astype(np.float32)


#: openTSNE's perplexity for placing new points (lower than a fit's: each point needs only its closest neighbours).
PLACING_PERPLEXITY = 5.0


def place_into_layout(params: dict, X_fit, Y_fit, X_new) -> tuple[np.ndarray, dict]:
    """The placement policy of the pipeline's ``"tsne"`` method (:mod:`repviz.placement`): :func:`place` against
    the stored layout ``Y_fit`` of ``X_fit``, with the ``dof`` and ``metric`` of its TSNE parameters ``params``.
    Returns the coordinates and how they were placed."""
    coords = place(X_new, X_fit, Y_fit, perplexity=PLACING_PERPLEXITY, dof=float(params.get("dof", 1.0)),
                   metric=params.get("metric", "euclidean"))
    return coords, {"transform": "tsne: openTSNE's transform against the fixed layout",
                    "perplexity": PLACING_PERPLEXITY}
