"""Initial t-SNE embeddings: plain functions returning float64 arrays (openTSNE's ``initialization.py``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..mds import classical_mds, fix_signs
from ..pca import principal_axes

INIT_STD = 1e-4


def rescale(Y: np.ndarray, std: float = INIT_STD) -> np.ndarray:
    """Centre Y and scale it so its first column has standard deviation ``std``.

    A small initial scale (1e-4, as in Kobak & Berens 2019 and scikit-learn's issue #18018) keeps the first
    iterations, where all points are close, in the regime that the early exaggeration phase expects; larger
    initial spreads make points overshoot.
    """
    Y = np.array(Y, dtype=np.float64)
    Y -= Y.mean(axis=0)
    s = Y[:, 0].std()
    return Y * (std / s) if s > 0 else Y


def random(n_samples: int, n_components: int, random_state=None) -> np.ndarray:
    """Isotropic Gaussian points with standard deviation 1e-4."""
    return np.random.default_rng(random_state).standard_normal((n_samples, n_components)) * INIT_STD


def pca(X: np.ndarray, n_components: int) -> np.ndarray:
    """The first principal components of X (signs fixed by :func:`repviz.manifold.mds.fix_signs`), unscaled.

    The top eigenpairs of the smaller of the covariance (d x d) and Gram (n x n) matrices, in float64 (the PCA
    estimator's exact solver): time O(n d min(n, d)), so a layer wider than the probe set costs its Gram matrix.
    """
    n, d = X.shape
    k = min(n_components, n, d)
    _, _, axes, _, _, Xc = principal_axes(np.asarray(X), k, "full", 0, 0, None)
    Y = Xc @ axes.T
    if Y.shape[1] < n_components:  # fewer features than components: pad with zeros
        Y = np.hstack([Y, np.zeros((Y.shape[0], n_components - Y.shape[1]))])
    return fix_signs(Y)


def mds(D: np.ndarray, n_components: int) -> np.ndarray:
    """Classical MDS of a distance matrix: PCA's counterpart when only distances are given. Time O(n³)."""
    return classical_mds(D, n_components)[0]


def weighted_mean(Y: np.ndarray, P: sp.csr_matrix) -> np.ndarray:
    """Each point at the P-weighted mean of its neighbours' positions in Y: y'_i = sum_j p_ij y_j / sum_j p_ij.

    A start for continuing a layout Y of earlier data under the affinities P of new data: a point whose
    neighbourhood changed jumps to its new neighbours instead of crawling there through the points in between.
    The result is contracted (each point is an average). A point with no neighbours keeps its position.
    """
    mass = np.asarray(P.sum(axis=1)).ravel()
    return np.where(mass[:, None] > 0, (P @ Y) / np.where(mass > 0, mass, 1.0)[:, None], Y)
