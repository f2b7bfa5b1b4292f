"""Multidimensional scaling: classical (Torgerson) MDS.

``classical_mds`` is the one implementation shared by the ``ClassicalMDS`` estimator, Isomap and meta-SNE.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh


def _check_distance_matrix(D, name: str = "D") -> np.ndarray:
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"{name} must be a square distance matrix (n, n); got shape {D.shape}")
    if not np.isfinite(D).all():
        raise ValueError(f"{name} contains NaN or infinity; a distance matrix must be finite")
    scale = max(float(np.abs(D).max()), 1e-300)
    if np.abs(D - D.T).max() > 1e-6 * scale:
        raise ValueError(f"{name} is not symmetric (max |D - D.T| = {np.abs(D - D.T).max():.3g}); "
                         f"pass (D + D.T) / 2 if the asymmetry is numerical noise")
    return D


def fix_signs(Y: np.ndarray) -> np.ndarray:
    """Deterministic sign convention for eigenvector embeddings: each column's largest-magnitude entry is positive."""
    idx = np.argmax(np.abs(Y), axis=0)
    signs = np.sign(Y[idx, np.arange(Y.shape[1])])
    signs[signs == 0] = 1
    return Y * signs


def classical_mds(D, n_components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Torgerson's classical MDS of a distance matrix.

    Double-centres the squared distances, B = -1/2 H D² H, and returns the top eigenvectors scaled by the square
    roots of their eigenvalues. For Euclidean distances this recovers the points up to rotation and translation.
    Time O(n² k) with a partial dense eigensolver, memory O(n²).

    Parameters
    ----------
    D : array of shape (n, n)
        Symmetric distances.
    n_components : int, default=2

    Returns
    -------
    Y : float64 array (n, n_components)
        Coordinates; columns follow :func:`fix_signs`.
    eigenvalues : float64 array (n,)
        All eigenvalues of B in decreasing order (negative ones say how non-Euclidean D is); the variance
        explained by the embedding is ``eigenvalues[:k].clip(0).sum() / eigenvalues.clip(0).sum()``.
    """
    D = _check_distance_matrix(D)
    n = D.shape[0]
    if not 1 <= n_components <= n:
        raise ValueError(f"n_components ({n_components}) must be in [1, n_samples ({n})]")
    B = D ** 2
    B -= B.mean(axis=0, keepdims=True)
    B -= B.mean(axis=1, keepdims=True)
    B *= -0.5
    w, V = eigh(B)
    w, V = w[::-1], V[:, ::-1]
    top = np.sqrt(np.clip(w[:n_components], 0, None))
    return fix_signs(V[:, :n_components] * top), w
