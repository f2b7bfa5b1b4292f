"""Aligning embeddings of the same points: orthogonal Procrustes and the displacement it minimises.

Eigenvector methods (PCA, Isomap, spectral, LLE, classical MDS) return coordinates defined only up to sign and,
for near-equal eigenvalues, rotation; two snapshots of a layer that barely changed can come out mirrored. Rotating
(or reflecting) one onto the other keeps every distance of the embedding and removes that arbitrariness.
"""

from __future__ import annotations

import numpy as np


def _pair(Y: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    Y, target = np.asarray(Y, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if Y.shape != target.shape or Y.ndim != 2:
        raise ValueError(f"Y and target must be 2-D arrays of the same shape (the same points embedded twice); "
                         f"got {Y.shape} and {target.shape}")
    return Y, target


def procrustes_rotation(Y, target) -> np.ndarray:
    """The orthogonal matrix R (rotation or reflection) minimising ||(Y - mean Y) R - (target - mean target)||_F.

    Schönemann's solution: R = U Vᵀ from the SVD of (Y - ȳ)ᵀ(T - t̄) = U S Vᵀ. Time O(n k²) for n points in k
    dimensions.
    """
    Y, target = _pair(Y, target)
    U, _, Vt = np.linalg.svd((Y - Y.mean(axis=0)).T @ (target - target.mean(axis=0)))
    return U @ Vt


def align_to(Y, target, rows: np.ndarray | None = None) -> np.ndarray:
    """``Y`` rotated/reflected and translated onto ``target`` (no scaling: every distance in ``Y`` is kept).

    ``rows``: the rows of ``Y`` that are ``target``'s points, in its order, when the two embed different sets of
    points (snapshots of different probe subsets): the motion is fitted on those common points only, and moves
    every row of ``Y``. Returns float32; the common points get ``target``'s centroid.
    """
    Y = np.asarray(Y, dtype=np.float64)
    Y64, target64 = _pair(Y if rows is None else Y[rows], target)
    R = procrustes_rotation(Y64, target64)
    return ((Y - Y64.mean(axis=0)) @ R + target64.mean(axis=0)).astype(np.float32)


def mean_displacement(A, B) -> float:
    """Mean distance each point moves from ``A`` to ``B``, in units of their RMS radius (scale-free).

    The radius is the root-mean-square distance of the points from their centroid, averaged over ``A`` and
    ``B``, so 0 means "the same picture" and values near 1.4 mean "unrelated pictures of the same size".
    """
    A, B = _pair(A, B)
    radius = np.sqrt(0.5 * (((A - A.mean(axis=0)) ** 2).sum(axis=1).mean()
                            + ((B - B.mean(axis=0)) ** 2).sum(axis=1).mean()))
    if radius == 0:
        return 0.0
    return float(np.linalg.norm(A - B, axis=1).mean() / radius)
