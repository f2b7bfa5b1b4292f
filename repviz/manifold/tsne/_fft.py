"""Repulsive forces of 2-D t-SNE by FFT-accelerated interpolation (FIt-SNE, Linderman et al. 2019).

The bounding square of the embedding is cut into ``n_boxes`` x ``n_boxes`` boxes with ``n_interp`` equispaced
Lagrange nodes per box and dimension; all nodes together form one equispaced grid of G = n_boxes * n_interp
points per side. Charges (1, y_x, y_y) are spread onto the grid nodes, convolved with the kernel sampled on the
grid (a Toeplitz product, done as a circular convolution of size 2G by real FFTs), and interpolated back.
Time O(n p² + G² log G) per call instead of O(n²).

Points are spread box column by box column (``prange`` over columns, each owning its own grid rows), so the
result is race-free and independent of the number of threads.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
from numba import njit, prange


def smooth_box_count(n_boxes: int, n_interp: int) -> int:
    """Smallest count >= n_boxes whose FFT length 2 * n_interp * count has only the prime factors 2, 3, 5, 7
    (pocketfft, like FFTW, is fastest on such lengths)."""
    m = int(n_boxes)
    while True:
        r = 2 * n_interp * m
        for f in (2, 3, 5, 7):
            while r % f == 0:
                r //= f
        if r == 1:
            return m
        m += 1


@njit(parallel=True, cache=True, fastmath=True)
def _locate(Y, lo, box_width, n_boxes, n_interp, box, wts):
    """Box of each point (box[i] = (bx, by)) and its Lagrange weights on the box's nodes (wts[i, dim, k])."""
    n = Y.shape[0]
    for i in prange(n):
        for d in range(2):
            s = (Y[i, d] - lo) / box_width
            b = min(int(s), n_boxes - 1)
            t = s - b
            box[i, d] = b
            for k in range(n_interp):
                xk = (k + 0.5) / n_interp
                num, den = 1.0, 1.0
                for m in range(n_interp):
                    if m != k:
                        xm = (m + 0.5) / n_interp
                        num *= t - xm
                        den *= xk - xm
                wts[i, d, k] = num / den


@njit(cache=True)
def _sort_by_column(box, n_boxes):
    """Counting sort of points by box column: order, and starts[b]:starts[b+1] the points of column b."""
    n = box.shape[0]
    starts = np.zeros(n_boxes + 1, dtype=np.int64)
    for i in range(n):
        starts[box[i, 0] + 1] += 1
    for b in range(n_boxes):
        starts[b + 1] += starts[b]
    fill = starts[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = box[i, 0]
        order[fill[b]] = i
        fill[b] += 1
    return order, starts


@njit(parallel=True, cache=True, fastmath=True)
def _spread(Y, box, wts, order, starts, n_interp, grid):
    """grid[c, gx, gy] = sum of charge c (1, y_x, y_y) of the points weighted by their Lagrange weights."""
    n_boxes = starts.shape[0] - 1
    grid[:] = 0.0
    for b in prange(n_boxes):
        for s in range(starts[b], starts[b + 1]):
            i = order[s]
            gx0 = box[i, 0] * n_interp
            gy0 = box[i, 1] * n_interp
            for k in range(n_interp):
                for m in range(n_interp):
                    w = wts[i, 0, k] * wts[i, 1, m]
                    grid[0, gx0 + k, gy0 + m] += w
                    grid[1, gx0 + k, gy0 + m] += w * Y[i, 0]
                    grid[2, gx0 + k, gy0 + m] += w * Y[i, 1]


@njit(parallel=True, cache=True, fastmath=True)
def _gather(Y, box, wts, n_interp, pot, rep, z_rows):
    """Interpolate the potentials back to the points: rep[i] = y_i phi_1 - (phi_yx, phi_yy); z_rows[i] =
    phi_w - 1 (the kernel sum without the point itself, w(0) = 1)."""
    n = Y.shape[0]
    for i in prange(n):
        gx0 = box[i, 0] * n_interp
        gy0 = box[i, 1] * n_interp
        p0, p1, p2, p3 = 0.0, 0.0, 0.0, 0.0
        for k in range(n_interp):
            for m in range(n_interp):
                w = wts[i, 0, k] * wts[i, 1, m]
                p0 += w * pot[0, gx0 + k, gy0 + m]
                p1 += w * pot[1, gx0 + k, gy0 + m]
                p2 += w * pot[2, gx0 + k, gy0 + m]
                p3 += w * pot[3, gx0 + k, gy0 + m]
        rep[i, 0] = Y[i, 0] * p0 - p1
        rep[i, 1] = Y[i, 1] * p0 - p2
        z_rows[i] = p3 - 1.0


def _kernel_hats(n_grid: int, h: float, dof: float, workers: int) -> np.ndarray:
    """rfft2 of the force kernel w^(1+1/dof) and of w, sampled at grid offsets, embedded circulantly (size 2G)."""
    o = np.arange(2 * n_grid, dtype=np.float64)
    o = np.where(o < n_grid, o, o - 2 * n_grid) * h
    o[n_grid] = 0.0
    d2 = o[:, None] ** 2 + o[None, :] ** 2
    base = 1.0 + d2 / dof
    w = base ** -dof
    kern = np.stack([w / base, w])
    kern[:, n_grid, :] = 0.0
    kern[:, :, n_grid] = 0.0
    return scipy.fft.rfft2(kern, workers=workers)


class FFTRepulsion:
    """Callable computing (rep, z_rows) for a 2-D embedding; keeps its buffers and the kernel transform, which is
    reused while the grid (box count and width) stays the same."""

    def __init__(self, n_samples: int, dof: float, n_interp: int = 3, min_boxes: int = 50,
                 ints_per_box: float = 1.0, workers: int = 1):
        self.dof, self.n_interp, self.min_boxes, self.ints_per_box = float(dof), n_interp, min_boxes, ints_per_box
        self.workers = workers
        self.box = np.empty((n_samples, 2), dtype=np.int64)
        self.wts = np.empty((n_samples, 2, n_interp))
        self._key = None
        self._hats = None

    def __call__(self, Y: np.ndarray, rep: np.ndarray, z_rows: np.ndarray) -> None:
        lo, hi = float(Y.min()), float(Y.max())
        span = max(hi - lo, 1e-12)
        n_boxes = smooth_box_count(max(self.min_boxes, int(np.ceil(span / self.ints_per_box))), self.n_interp)
        box_width = span / n_boxes * (1 + 1e-9)  # the largest coordinate falls inside the last box
        n_grid = n_boxes * self.n_interp
        key = (n_boxes, box_width)
        if key != self._key:
            self._hats = _kernel_hats(n_grid, box_width / self.n_interp, self.dof, self.workers)
            self._key = key
        _locate(Y, lo, box_width, n_boxes, self.n_interp, self.box, self.wts)
        order, starts = _sort_by_column(self.box, n_boxes)
        grid = np.empty((3, n_grid, n_grid))
        _spread(Y, self.box, self.wts, order, starts, self.n_interp, grid)
        charge_hat = scipy.fft.rfft2(grid, s=(2 * n_grid, 2 * n_grid), workers=self.workers)
        prod = np.empty((4,) + charge_hat.shape[1:], dtype=charge_hat.dtype)
        np.multiply(charge_hat, self._hats[0], out=prod[:3])
        np.multiply(charge_hat[0], self._hats[1], out=prod[3])
        pot = scipy.fft.irfft2(prod, s=(2 * n_grid, 2 * n_grid), workers=self.workers)[:, :n_grid, :n_grid]
        _gather(Y, self.box, self.wts, self.n_interp, np.ascontiguousarray(pot), rep, z_rows)
