"""Slow feature analysis (Wiskott & Sejnowski 2002): the projections of a sequence that vary most slowly.

The rows of ``X`` are taken in order (a time series; for representations, a probe point's activations over
snapshots, or the probe set in its own order). SFA finds the functions y_j = w_jᵀ h(x), with h the identity
(``degree=1``) or the monomials of degree <= 2 (``degree=2``), of zero mean and unit variance, mutually
decorrelated, that minimise the mean squared temporal difference E[ẏ_j²]. That is the generalised eigenproblem
A w = λ B w, with A the covariance of the differences ḣ(t) = h(t+1) - h(t) and B the covariance of h, smallest
λ first; it is solved by whitening B (directions with variance below 1e-10 of the largest dropped, as MDP's
``SFANode`` does with its rank-deficit handling) and an ordinary symmetric eigendecomposition of the whitened A.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

from .._validation import Interval, check_array, check_n_features
from ._base import Estimator, check_dense_memory
from .pca import signed_rows

#: Directions of the expanded data with variance below this fraction of the largest are dropped.
RANK_RTOL = 1e-10


def quadratic_expansion(X: np.ndarray) -> np.ndarray:
    """[x, x_i x_j for i <= j]: d + d(d+1)/2 columns (float64)."""
    i, j = np.triu_indices(X.shape[1])
    return np.hstack([X, X[:, i] * X[:, j]])


def expanded_dim(d: int, degree: int) -> int:
    return d if degree == 1 else d + d * (d + 1) // 2


def slow_directions(H: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Projections W (k, D) of the centred sequence H (n, D) with unit-variance, decorrelated, slowest outputs,
    and their slowness λ = E[ẏ²] (ascending)."""
    n = H.shape[0]
    B = H.T @ H / (n - 1)
    w, V = eigh(B)
    keep = w > RANK_RTOL * max(float(w[-1]), 1e-300)
    if keep.sum() < n_components:
        raise ValueError(f"SlowFeatureAnalysis: the data span only {int(keep.sum())} dimension(s) (after expansion),"
                         f" fewer than n_components ({n_components}); pass a smaller n_components.")
    S = V[:, keep] / np.sqrt(w[keep])  # whitening: Sᵀ B S = I
    dH = np.diff(H, axis=0)
    A = dH.T @ dH / max(n - 2, 1)
    lam, U = eigh(S.T @ A @ S, subset_by_index=(0, n_components - 1))  # D³, not another n D² product
    return signed_rows((S @ U).T), lam


class SlowFeatureAnalysis(Estimator):
    """Slow feature analysis: unit-variance, decorrelated projections of an ordered sequence, slowest first.

    Cost: with D = d (``degree=1``) or d + d(d+1)/2 (``degree=2``, so D ≈ 33,000 for d = 256): time
    O(n D² + D³), memory O(n D + D²), float64. Reduce d first (PCA) for a quadratic expansion of wide layers.

    Parameters
    ----------
    n_components : int, default=2
        Number of slow features.
    degree : {1, 2}, default=1
        1: linear SFA; 2: SFA on the quadratic expansion [x, x_i x_j] (nonlinear slow features).

    Attributes
    ----------
    components_ : ndarray (n_components, n_expanded)
        Projections of the (centred, scaled, expanded) input; each row's largest-magnitude entry is positive.
    delta_ : ndarray (n_components,)
        Slowness of each output: its mean squared difference between consecutive rows (ascending).
    mean_, scale_ : ndarray (n_features,), float
        Input centring and scaling applied before the expansion; ``expanded_mean_`` is the mean after it.
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64

    References
    ----------
    Wiskott & Sejnowski (2002), Slow feature analysis: unsupervised learning of invariances. Neural Comp. 14.

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import SlowFeatureAnalysis
    >>> t = np.linspace(0, 2 * np.pi, 1000)
    >>> X = np.c_[np.sin(t) + np.cos(11 * t) ** 2, np.cos(11 * t)]
    >>> y = SlowFeatureAnalysis(n_components=1, degree=2).fit_transform(X)[:, 0]
    >>> bool(abs(np.corrcoef(y, np.sin(t))[0, 1]) > 0.99)
    True
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "degree": [Interval(int, 1, 2, "both")],
    }

    def __init__(self, n_components=2, *, degree=1):
        self.n_components = n_components
        self.degree = degree

    def _expand(self, X: np.ndarray) -> np.ndarray:
        Xs = (X - self.mean_) / self.scale_  # a new array: fit centres it in place
        return Xs if self.degree == 1 else quadratic_expansion(Xs)

    def fit(self, X, y=None):
        """Find the slow features of the sequence ``X`` (n_samples in order, n_features)."""
        self._validate_params()
        X = check_array(X, "SlowFeatureAnalysis", min_samples=3).astype(np.float64)
        n, d = X.shape
        D = expanded_dim(d, self.degree)
        check_dense_memory(8.0 * (n + D) * D, "SlowFeatureAnalysis", f"the {n}×{D} expanded data and its "
                           f"covariance", "Reduce the number of features first (PCA), or use degree=1.")
        self.mean_ = X.mean(axis=0)
        self.scale_ = float(np.sqrt(np.mean((X - self.mean_) ** 2))) or 1.0
        H = self._expand(X)
        self.expanded_mean_ = H.mean(axis=0)
        H -= self.expanded_mean_
        self.components_, self.delta_ = slow_directions(H, self.n_components)
        self.n_features_in_ = d
        self.embedding_ = (H @ self.components_.T).astype(np.float32)
        return self

    def _project(self, H: np.ndarray) -> np.ndarray:
        return ((H - self.expanded_mean_) @ self.components_.T).astype(np.float32)

    def transform(self, X) -> np.ndarray:
        """Slow features of new rows (each row on its own; the order matters only for fitting). Time O(n D k)."""
        self._check_fitted()
        X = check_array(X, "SlowFeatureAnalysis")
        check_n_features(self, X)
        return self._project(self._expand(X.astype(np.float64)))
