"""Whitening: a linear map after which the data have zero mean and identity covariance.

Three classic choices of the map W with W C Wᵀ = I (C the sample covariance, normaliser n - 1), which differ by
a rotation of the output (Kessy, Lewin & Strimmer 2018):

- "pca": W = Λ^-1/2 Vᵀ (rows: principal axes divided by their standard deviation); the only one that can drop
  directions (``n_components``), and the one ICA starts from.
- "zca" (Mahalanobis): W = V Λ^-1/2 Vᵀ, the whitened data closest to the input in the least-squares sense.
- "cholesky": W = L⁻¹ with C = L Lᵀ, lower triangular (whitened coordinate i depends on inputs 1..i only).

Everything is computed in float64 from the d × d covariance: time O(n d² + d³), memory O(d²).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cholesky, eigh, solve_triangular

from .._validation import NONE, Interval, Options, check_array, check_n_features
from ._base import Estimator, check_dense_memory
from .pca import signed_rows


def _covariance(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and sample covariance (n - 1 normaliser), float64, and the centred data (reused for the output)."""
    check_dense_memory(8.0 * X.shape[1] ** 2, "Whitening", f"a {X.shape[1]}×{X.shape[1]} covariance matrix",
                       "Reduce the number of features first (e.g. PCA(n_components=...)).")
    mean = X.mean(axis=0, dtype=np.float64)
    Xc = np.subtract(X, mean, dtype=np.float64)
    return mean, Xc.T @ Xc / max(X.shape[0] - 1, 1), Xc


def whitening_matrices(C: np.ndarray, method: str, n_components: int | None, eps: float):
    """The whitening matrix W (k, d) and its inverse map A (k, d), x - mean = y A, for a covariance ``C``.

    ``eps`` times the largest eigenvalue is added to every eigenvalue (to the diagonal for "cholesky"), so that
    directions without variance are not divided by zero; their outputs then stay near 0 instead of being unit.
    """
    d = C.shape[0]
    w, V = eigh(C)
    w, V = w[::-1], V[:, ::-1]
    reg = eps * max(float(w[0]), 1e-300)
    if method == "cholesky":
        L = cholesky(C + reg * np.eye(d), lower=True)
        W = solve_triangular(L, np.eye(d), lower=True)
        return W, L.T.copy()
    s = np.sqrt(np.clip(w, 0, None) + reg)
    if method == "pca":
        k = d if n_components is None else n_components
        Vt = signed_rows(V[:, :k].T)
        return Vt / s[:k, None], Vt * s[:k, None]
    return (V / s) @ V.T, (V * s) @ V.T


class Whitening(Estimator):
    """Decorrelate the features and scale them to unit variance: the covariance of the output is the identity.

    Cost: time O(n d² + d³), memory O(d²) (the covariance, float64); ``transform`` O(n d k).

    Parameters
    ----------
    n_components : int or None, default=None
        "pca" only: keep the first ``n_components`` principal directions (None: all ``n_features``).
    method : {"pca", "zca", "cholesky"}, default="pca"
        Which whitening matrix (see the module docstring); they differ by a rotation of the output.
    eps : float, default=1e-10
        Regulariser, relative to the largest variance, added to every variance before dividing by its square
        root. Matters only for (near-)singular covariances, e.g. more features than samples.

    Attributes
    ----------
    components_ : float64 ndarray (n_components_, n_features)
        The whitening matrix W: ``transform(X) = (X - mean_) @ components_.T``.
    inverse_components_ : float64 ndarray (n_components_, n_features)
        ``inverse_transform(Y) = Y @ inverse_components_ + mean_``.
    mean_ : ndarray (n_features,)
    n_components_ : int
    embedding_ : ndarray (n_samples, n_components_), float32 for float32 input, else float64

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import Whitening
    >>> Y = Whitening(method="zca").fit_transform(np.random.default_rng(0).normal(size=(500, 3)) * [1, 10, 100])
    >>> bool(np.allclose(np.cov(Y.T), np.eye(3), atol=1e-5))
    True
    """

    _parameter_constraints = {
        "method": [Options("pca", "zca", "cholesky")],
        "n_components": [Interval(int, 1, None, "left"), NONE],
        "eps": [Interval(float, 0, None, "left")],
    }

    def __init__(self, n_components=None, *, method="pca", eps=1e-10):
        self.n_components = n_components
        self.method = method
        self.eps = eps

    def fit(self, X, y=None):
        """Estimate the mean and the whitening matrix of ``X`` (n_samples, n_features); store ``embedding_``."""
        self._validate_params()
        X = check_array(X, "Whitening", min_samples=2)
        d = X.shape[1]
        k = self.n_components
        if k is not None and self.method != "pca":
            raise ValueError(f"n_components={k} applies to Whitening(method='pca') only; method={self.method!r} "
                             f"keeps all {d} features. Pass n_components=None or method='pca'.")
        if k is not None and k > d:
            raise ValueError(f"n_components ({k}) must be at most n_features ({d}) in Whitening.")
        self.mean_, C, Xc = _covariance(X)
        self.components_, self.inverse_components_ = whitening_matrices(C, self.method, k, self.eps)
        self.n_components_ = self.components_.shape[0]
        self.n_features_in_ = d
        self.embedding_ = (Xc @ self.components_.T).astype(np.float32)
        return self

    def _whiten(self, X: np.ndarray) -> np.ndarray:
        return (np.subtract(X, self.mean_, dtype=np.float64) @ self.components_.T).astype(np.float32)

    def transform(self, X) -> np.ndarray:
        """Whiten new rows with the fitted mean and matrix. Time O(n d k)."""
        self._check_fitted()
        X = check_array(X, "Whitening")
        check_n_features(self, X)
        return self._whiten(X)

    def inverse_transform(self, Y) -> np.ndarray:
        """Map whitened coordinates back to the input space (exact when no direction was dropped)."""
        self._check_fitted()
        Y = check_array(Y, "Whitening", name="Y")
        if Y.shape[1] != self.n_components_:
            raise ValueError(f"Y has {Y.shape[1]} columns, but Whitening has {self.n_components_} components.")
        return (Y.astype(np.float64) @ self.inverse_components_ + self.mean_).astype(np.float32)
