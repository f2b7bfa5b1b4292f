"""Kernel PCA (Schölkopf, Smola & Müller 1998): PCA in the feature space of a kernel, through the centred Gram
matrix. Memory O(n²) (8 n² bytes, refused above the dense-memory budget); time O(n² d) for the kernel plus the
shared partial eigensolver, O(n² k) per iteration.
"""

from __future__ import annotations

import numpy as np

from .._validation import NONE, RANDOM_STATE, Interval, Options, check_array, check_n_features
from ._base import Estimator, check_dense_memory
from ._eigen import SOLVERS, eigsolve


def _kernel(A: np.ndarray, B: np.ndarray, kernel: str, gamma: float, degree: int, coef0: float) -> np.ndarray:
    G = A @ B.T
    if kernel == "linear":
        return G
    if kernel == "poly":
        return (gamma * G + coef0) ** degree
    G *= -2
    G += np.einsum("ij,ij->i", A, A)[:, None]
    G += np.einsum("ij,ij->i", B, B)[None, :]
    np.maximum(G, 0, out=G)
    G *= -gamma
    return np.exp(G, out=G)


def _check_gram(K: np.ndarray, X: np.ndarray, kernel: str, gamma: float) -> None:
    """Refuse a Gram matrix that holds no structure: the kernel's parameters are absolute, so data far from the
    scale ``gamma`` expects gives an rbf kernel that is all ones (every point at distance 0) or the identity (every
    pair infinitely far), or a poly kernel that overflows. Say which, and the gamma that would fit."""
    if not np.isfinite(K).all():
        raise ValueError(f"KernelPCA: the {kernel} kernel overflows on X (largest |x| = {np.abs(X).max():.3g}) "
                         f"with gamma={gamma:.3g}. Rescale X or pass a smaller gamma.")
    if kernel != "rbf":
        return
    off = K[~np.eye(K.shape[0], dtype=bool)]
    if off.max() > 1e-12 and off.min() < 1 - 1e-12:
        return
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, X.shape[0], (2, 1000))
    d2 = np.square(X[i] - X[j]).sum(axis=1)
    fit = 1.0 / max(float(np.median(d2[i != j])), 1e-300)
    what = "the identity (every pair of points is too far apart" if off.max() <= 1e-12 else \
        "all ones (every pair of points is too close"
    raise ValueError(f"KernelPCA: the rbf kernel exp(-gamma ||x - y||^2) with gamma={gamma:.3g} is {what} for "
                     f"the scale of X), so it holds no structure; the kernel is absolute, so KernelPCA does not "
                     f"rescale X. Pass gamma near 1 / median squared distance = {fit:.3g}, or rescale X.")


class KernelPCA(Estimator):
    """Kernel principal component analysis with an RBF, polynomial or linear kernel.

    Cost: the n×n Gram matrix (8 n² bytes; refused above the dense-memory budget), O(n² d) time to build it and
    a partial eigensolve (dense ``eigh`` for n <= 1,000, else Lanczos at O(n² k) per iteration).

    Parameters
    ----------
    n_components : int, default=2
    kernel : {"rbf", "poly", "linear"}, default="rbf"
        rbf: exp(-gamma ||x - y||²); poly: (gamma xᵀy + coef0)^degree; linear: xᵀy (equals PCA).
    gamma : float or None, default=None
        None uses 1 / n_features (as scikit-learn).
    degree : int, default=3
    coef0 : float, default=1.0
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"}, default="auto"
    tol : float, default=0
    max_iter : int or None, default=None
    random_state : int, Generator or None, default=None
        Seeds the iterative eigensolver's start vector.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
        Projections of the training points, V sqrt(lambda); columns signed so their largest-magnitude entry is
        positive.
    eigenvalues_ : ndarray (n_components,)
        Eigenvalues of the centred Gram matrix.
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "kernel": [Options("rbf", "poly", "linear")],
        "gamma": [Interval(float, 0, None, "neither"), NONE],
        "degree": [Interval(int, 1, None, "left")],
        "coef0": [Interval(float, None, None)],
        "eigen_solver": [Options(*SOLVERS)],
        "tol": [Interval(float, 0, None, "left")],
        "max_iter": [Interval(int, 1, None, "left"), NONE],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, kernel="rbf", gamma=None, degree=3, coef0=1.0, eigen_solver="auto",
                 tol=0.0, max_iter=None, random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _gram(self, A: np.ndarray) -> np.ndarray:
        return _kernel(A, self._X_fit, self.kernel, self.gamma_, self.degree, self.coef0)

    def fit(self, X, y=None):
        """Fit on ``X`` (n_samples, n_features) and store the training projections."""
        self._validate_params()
        X = check_array(X, "KernelPCA", min_samples=2, dtype=np.float64)
        n = X.shape[0]
        if self.n_components >= n:
            raise ValueError(f"n_components ({self.n_components}) must be less than n_samples ({n}) in KernelPCA.")
        check_dense_memory(8.0 * n * n, "KernelPCA", f"the {n}×{n} Gram matrix",
                           "Subsample the points (for example 10,000), or use PCA.")
        self.gamma_ = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
        self._X_fit = X
        K = self._gram(X)
        _check_gram(K, X, self.kernel, self.gamma_)
        self._col_means = K.mean(axis=0)
        self._total_mean = float(self._col_means.mean())
        K -= self._col_means[None, :]
        K -= (self._col_means - self._total_mean)[:, None]
        w, V = eigsolve(K, self.n_components, largest=True, solver=self.eigen_solver, tol=self.tol,
                        max_iter=self.max_iter, random_state=self.random_state, owner="KernelPCA")
        del K
        self.eigenvalues_ = w
        keep = w > 0
        self._alphas = np.where(keep, 1.0 / np.sqrt(np.where(keep, w, 1.0)), 0.0)[None, :] * V
        self.embedding_ = (V * np.sqrt(np.clip(w, 0, None))).astype(np.float32)
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        """Project new points: their kernel row against the training set, centred with the training
        statistics, times the scaled eigenvectors. Time O(m n d), memory O(m n)."""
        self._check_fitted()
        X = check_array(X, "KernelPCA", dtype=np.float64)
        check_n_features(self, X)
        K = self._gram(X)
        K -= K.mean(axis=1, keepdims=True)
        K -= (self._col_means - self._total_mean)[None, :]
        return (K @ self._alphas).astype(np.float32)
