"""Repulsive forces of 2-D t-SNE by FFT-accelerated interpolation (FIt-SNE, Linderman et al. 2019).

The bounding square of the embedding is cut into ``n_boxes`` x ``n_boxes`` boxes with ``n_interp`` equispaced
Lagrange nodes per box and dimension; all nodes together form one equispaced grid of G = n_boxes * n_interp
points per side. Charges (1, y_x, y_y) are spread onto the grid nodes, convolved with the kernel sampled on the
grid (a Toeplitz product, done as a circular convolution of size 2G by real FFTs), and interpolated back.
Time O(n p² + G² log G) per call instead of O(n²).

Locating, spreading and interpolating are O(n p²) serial loops: at 70,000 points each takes about a millisecond,
less than waking the threads of a parallel region costs on a busy machine. The FFTs run on ``workers`` threads.
"""

from __future__ import annotations

import numpy as np
import scipy.fft

from ..._jit import njit


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


@njit(cache=True, fastmath=True)
def _locate(Y, lo, box_width, n_boxes, n_interp, box, wts):
    """Box of each point (box[i] = (bx, by)), its Lagrange weights on the box's nodes (wts[i, dim, k]), and a
    counting sort of the points by box column: order, with starts[b]:starts[b+1] the points of column b.
    Serial: it is O(n p) and cheaper than waking the threads."""
    n = Y.shape[0]
    starts = np.zeros(n_boxes + 1, dtype=np.int64)
    for i in range(n):
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


@njit(cache=True, fastmath=True)
def _spread(Y, box, wts, order, starts, n_interp, grid):
    """grid[c, gx, gy] = sum of charge c (1, y_x, y_y) of the points weighted by their Lagrange weights."""
    n_boxes = starts.shape[0] - 1
    grid[:] = 0.0
    for b in range(n_boxes):
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


@njit(inline="always")
def _interpolate(box, wts, n_interp, pot, i):
    gx0 = box[i, 0] * n_interp
    gy0 = box[i, 1] * n_interp
    p0, p1, p2 = 0.0, 0.0, 0.0
    for k in range(n_interp):
        for m in range(n_interp):
            w = wts[i, 0, k] * wts[i, 1, m]
            p0 += w * pot[0, gx0 + k, gy0 + m]
            p1 += w * pot[1, gx0 + k, gy0 + m]
            p2 += w * pot[2, gx0 + k, gy0 + m]
    return p0, p1, p2


@njit(cache=True, fastmath=True)
def _gather(Y, box, wts, n_interp, pot, rep):
    """Interpolate the potentials back to the points: rep[i] = y_i phi_1 - (phi_yx, phi_yy)."""
    for i in range(Y.shape[0]):
        p0, p1, p2 = _interpolate(box, wts, n_interp, pot, i)
        rep[i, 0] = Y[i, 0] * p0 - p1
        rep[i, 1] = Y[i, 1] * p0 - p2


def _kernel_hats(n_grid: int, h: float, dof: float, dtype, workers: int = 1) -> np.ndarray:
    """Transforms (2, 2G, G + 1) of the force kernel w^(1+1/dof) and of w at the grid offsets, circulantly
    embedded in size 2G: exactly what rfft2 of the embedded kernels gives, but the kernels are even in both
    axes, so their transforms are real and equal to a type-I DCT of one quadrant ((G + 1)², 4x fewer points),
    on ``workers`` threads (each 1-D transform on one thread: the result does not depend on their number)."""
    o2 = (np.arange(n_grid + 1, dtype=dtype) * dtype(h)) ** 2
    base = 1 + (o2[:, None] + o2[None, :]) / dtype(dof)
    w = 1 / base if dof == 1.0 else base ** dtype(-dof)
    quad = np.stack([w / base, w])
    quad[:, n_grid, :] = 0  # the offset G itself belongs to neither direction of the circulant embedding
    quad[:, :, n_grid] = 0
    half = scipy.fft.dctn(quad, type=1, axes=(1, 2), workers=workers, overwrite_x=True)
    return np.concatenate([half, half[:, n_grid - 1:0:-1]], axis=1)


def _convolve(grid: np.ndarray, hats: np.ndarray, workers: int) -> tuple[np.ndarray, float]:
    """Force potentials (3, G, G), K1 applied to the charges (c0, c1, c2), and the total sum_g c0 (K2 * c0)[g].

    A circular convolution of size 2G of the zero-padded grid, transformed axis by axis so that the rows known to
    be zero are never transformed and the rows not needed are never computed back. The total needs no inverse
    transform: by Parseval it is sum_k K2^[k] |c0^[k]|² / (2G)² (half-spectrum columns 1..G-1 counted twice)."""
    g = grid.shape[1]
    a = scipy.fft.rfft(grid, n=2 * g, axis=2, workers=workers)
    a = scipy.fft.fft(a, n=2 * g, axis=1, workers=workers)
    power = a[0].real ** 2 + a[0].imag ** 2
    power *= hats[1]
    total = 2.0 * float(power.sum(dtype=np.float64)) - float(power[:, 0].sum(dtype=np.float64)) \
        - float(power[:, g].sum(dtype=np.float64))
    a *= hats[0]
    b = scipy.fft.ifft(a, axis=1, workers=workers, overwrite_x=True)[:, :g]
    return scipy.fft.irfft(b, n=2 * g, axis=2, workers=workers)[:, :, :g], total / (2 * g) ** 2


class FFTRepulsion:
    """Repulsion callable ``(Y, rep) -> Z`` for a 2-D embedding. The grid is sized like openTSNE's / FIt-SNE's: at
    least ``min_boxes`` boxes per side, boxes at most ``ints_per_box`` wide, box count rounded up to a fast FFT
    size, and the boxes exactly cover the layout's extent.

    The grid follows the layout: as the layout grows, its boxes widen with it, so each point keeps its place in
    its box and the interpolation error it sees changes slowly. On a grid of fixed box widths (whose kernel
    transform consecutive iterations could share) the growing layout slides through the boxes, the error each
    point sees changes from one step to the next, and the descent ends at a higher KL divergence after the same
    iterations, even on a finer grid. So the kernel's transform is recomputed at every call."""

    def __init__(self, n_samples: int, dof: float, n_interp: int = 3, min_boxes: int = 50,
                 ints_per_box: float = 1.0, workers: int = 1, dtype=np.float32):
        # float32 grids: the interpolation error (~1e-2) dwarfs single precision, and the FFTs run twice as fast
        self.dof, self.n_interp, self.min_boxes, self.ints_per_box = float(dof), n_interp, min_boxes, ints_per_box
        self.workers, self.dtype = workers, dtype
        self.box = np.empty((n_samples, 2), dtype=np.int64)
        self.wts = np.empty((n_samples, 2, n_interp))

    def _grid(self, span: float) -> tuple[int, float]:
        """(boxes per side, box width) for a layout of extent ``span``: the boxes cover exactly that extent."""
        n_boxes = smooth_box_count(max(self.min_boxes, int(np.ceil(span / self.ints_per_box))), self.n_interp)
        return n_boxes, max(span, 1e-12) / n_boxes * (1 + 1e-9)  # the largest coordinate falls in the last box

    def grid_size(self, span: float) -> int:
        """Grid nodes per side, G, for a layout of extent ``span``."""
        return self._grid(span)[0] * self.n_interp

    def potentials(self, Y: np.ndarray) -> tuple[np.ndarray, float]:
        """Locate the points (``self.box``, ``self.wts``); return the grid force potentials (3, G, G) and Z."""
        lo, hi = float(Y.min()), float(Y.max())
        n_boxes, box_width = self._grid(hi - lo)
        n_grid = n_boxes * self.n_interp
        hats = _kernel_hats(n_grid, box_width / self.n_interp, self.dof, self.dtype, self.workers)
        order, starts = _locate(Y, lo, box_width, n_boxes, self.n_interp, self.box, self.wts)
        grid = np.empty((3, n_grid, n_grid), dtype=self.dtype)
        _spread(Y, self.box, self.wts, order, starts, self.n_interp, grid)
        pot, total = _convolve(grid, hats, self.workers)
        # sum_i phi_w(y_i) = sum_g c0[g] (K2 * c0)[g] exactly (interpolation is linear); each point's own w(0) = 1
        return np.ascontiguousarray(pot), total - Y.shape[0]

    def __call__(self, Y: np.ndarray, rep: np.ndarray) -> float:
        pot, z = self.potentials(Y)
        _gather(Y, self.box, self.wts, self.n_interp, pot, rep)
        return z
