"""Linear discriminant analysis as a projection: the directions that best separate labelled classes.

Shows how linearly separable the classes are in a layer: the generalised eigenvectors of the between-class
scatter against the within-class covariance (Fisher 1936; Rao 1948). Time O(n d² + d³), memory O(d²).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

from .._validation import NONE, Interval, check_array, check_n_features
from ._base import Estimator, check_dense_memory
from ._eigen import fix_signs


class LinearDiscriminantAnalysis(Estimator):
    """Fisher's discriminant projection (supervised). Time O(n d² + d³), memory O(d²).

    Parameters
    ----------
    n_components : int or None, default=None
        At most min(n_classes - 1, n_features); None takes that maximum.
    shrinkage : float in [0, 1] or None, default=None
        Within-class covariance shrunk towards a multiple of the identity, (1 - s) S_w + s tr(S_w)/d I; None
        adds only a 1e-6 tr(S_w)/d ridge so that a singular S_w (d > n, constant features) stays solvable.

    Attributes
    ----------
    scalings_ : ndarray (n_features, n_components_)
        Projection directions, normalised so the projected within-class covariance is the identity;
        each column's largest-magnitude entry is positive.
    explained_variance_ratio_ : ndarray (n_components_,)
        Share of the between-class variance (in within-class units) along each direction.
    classes_ : ndarray
    mean_ : ndarray (n_features,)
    embedding_ : ndarray (n_samples, n_components_), float32 for float32 input, else float64
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left"), NONE],
        "shrinkage": [Interval(float, 0, 1, "both"), NONE],
    }

    def __init__(self, n_components=None, *, shrinkage=None):
        self.n_components = n_components
        self.shrinkage = shrinkage

    def fit(self, X, y=None):
        """Fit the discriminant directions to ``X`` and the class labels ``y``."""
        self._validate_params()
        if y is None:
            raise ValueError("LinearDiscriminantAnalysis requires y to be passed, but the target y is None.")
        X = check_array(X, "LinearDiscriminantAnalysis", min_samples=2, dtype=np.float64)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(X):
            raise ValueError(f"y must be a 1-D array with one label per row of X ({len(X)}); got shape {y.shape}.")
        self.classes_, codes = np.unique(y, return_inverse=True)
        n, d = X.shape
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError(f"LinearDiscriminantAnalysis needs at least 2 classes; y has {n_classes}.")
        limit = min(n_classes - 1, d)
        k = limit if self.n_components is None else self.n_components
        if k > limit:
            raise ValueError(f"n_components ({k}) cannot be larger than min(n_features, n_classes - 1) = {limit}.")
        check_dense_memory(16.0 * d * d, "LinearDiscriminantAnalysis", f"two {d}×{d} scatter matrices",
                           "Reduce the features first, e.g. with PCA(n_components=100).")
        counts = np.bincount(codes)
        means = np.zeros((n_classes, d))
        np.add.at(means, codes, X)
        means /= counts[:, None]
        self.mean_ = X.mean(axis=0)
        within = X - means[codes]
        Sw = within.T @ within / max(n - n_classes, 1)
        centred = means - self.mean_
        Sb = (centred.T * counts) @ centred / n
        ridge = np.trace(Sw) / d
        s = 1e-6 if self.shrinkage is None else self.shrinkage
        Sw = (1 - s) * Sw + s * max(ridge, 1e-12) * np.eye(d)
        w, V = eigh(Sb, Sw, subset_by_index=(d - k, d - 1))
        w, V = w[::-1], V[:, ::-1]
        self.scalings_ = fix_signs(V)
        self.explained_variance_ratio_ = np.clip(w, 0, None) / max(float(np.trace(np.linalg.solve(Sw, Sb))), 1e-300)
        self.n_components_ = k
        self.n_features_in_ = d
        self.embedding_ = self.transform(X)
        return self

    def transform(self, X) -> np.ndarray:
        """Project rows onto the discriminant directions."""
        self._check_fitted("scalings_")
        X = check_array(X, "LinearDiscriminantAnalysis", dtype=np.float64)
        check_n_features(self, X)
        return ((X - self.mean_) @ self.scalings_).astype(np.float32)

    def fit_transform(self, X, y=None) -> np.ndarray:
        """Fit to ``X`` and ``y``; return the projection of ``X``."""
        return self.fit(X, y).embedding_
