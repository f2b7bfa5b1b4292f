"""k-nearest-neighbour graphs shared by t-SNE, Isomap, LLE, spectral methods and the quality scores.

``knn`` returns, for every point, its ``k`` nearest other points (never itself) and their distances.
The exact method works in row blocks of a matrix product, so memory is bounded by ``block_bytes``, not n².
"""

from __future__ import annotations

import numpy as np

METRICS = ("euclidean", "sqeuclidean", "cosine", "precomputed")


def _as_float_matrix(X, name: str = "X") -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features); got shape {X.shape}")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    if X.dtype != np.float64:
        X = X.astype(np.float32, copy=False)
    if not np.isfinite(X).all():
        bad = int(np.count_nonzero(~np.isfinite(X).all(axis=1)))
        raise ValueError(f"{name} contains NaN or infinity in {bad} row(s); remove or impute them first")
    return np.ascontiguousarray(X)


def check_n_neighbors(n_neighbors: int, n_samples: int, owner: str = "knn") -> int:
    """Validate ``n_neighbors`` against the number of points, with both numbers in the message."""
    if not isinstance(n_neighbors, (int, np.integer)) or isinstance(n_neighbors, bool) or n_neighbors < 1:
        raise ValueError(f"The 'n_neighbors' parameter of {owner} must be an int in the range [1, inf). "
                         f"Got {n_neighbors!r} instead.")
    if n_neighbors >= n_samples:
        raise ValueError(f"n_neighbors ({n_neighbors}) must be less than n_samples ({n_samples}) in {owner}")
    return int(n_neighbors)


def _block_rows(n: int, block_bytes: int) -> int:
    return int(max(1, min(n, block_bytes // max(1, 8 * n))))


def knn(X, n_neighbors: int, *, metric: str = "euclidean", method: str = "exact",
        block_bytes: int = 64 << 20, random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Nearest neighbours of every row of ``X`` among the other rows.

    Parameters
    ----------
    X : array of shape (n_samples, n_features), or (n_samples, n_samples) if ``metric="precomputed"``
    n_neighbors : int
        Neighbours per point, excluding the point itself.
    metric : {"euclidean", "sqeuclidean", "cosine", "precomputed"}, default="euclidean"
    method : {"exact"}, default="exact"
        "exact" computes all distances block by block (time O(n² d), memory O(block)).
    block_bytes : int, default=64 MiB
        Memory budget of one block of the distance matrix.
    random_state : int or None
        Unused by "exact"; accepted so every method has one signature.

    Returns
    -------
    indices : int64 array (n_samples, n_neighbors), sorted by increasing distance
    distances : float32 array (n_samples, n_neighbors), in the metric's units
    """
    if metric not in METRICS:
        raise ValueError(f"The 'metric' parameter of knn must be a str among {set(METRICS)}. Got {metric!r} instead.")
    if method not in ("auto", "exact"):
        raise ValueError(f"The 'method' parameter of knn must be a str among {{'auto', 'exact'}}. "
                         f"Got {method!r} instead.")
    X = _as_float_matrix(X)
    n = X.shape[0]
    if metric == "precomputed" and X.shape[0] != X.shape[1]:
        raise ValueError(f"a precomputed distance matrix must be square (n, n); got shape {X.shape}")
    k = check_n_neighbors(n_neighbors, n, "knn")
    return _exact_knn(X, k, metric, block_bytes)


def _exact_knn(X: np.ndarray, k: int, metric: str, block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    n = X.shape[0]
    if metric == "cosine":
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        X = X / np.where(norms == 0, 1, norms)
    sq = np.einsum("ij,ij->i", X, X) if metric != "precomputed" else None
    indices = np.empty((n, k), dtype=np.int64)
    distances = np.empty((n, k), dtype=np.float32)
    rows = _block_rows(n, block_bytes)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        if metric == "precomputed":
            D = np.array(X[start:stop], dtype=np.float64)
        else:
            D = X[start:stop] @ X.T
            D *= -2
            D += sq[start:stop, None]
            D += sq[None, :]
            np.maximum(D, 0, out=D)
        local = np.arange(stop - start)
        D[local, start + local] = np.inf  # exclude the point itself, even among exact duplicates
        part = np.argpartition(D, k - 1, axis=1)[:, :k]
        dpart = np.take_along_axis(D, part, axis=1)
        order = np.argsort(dpart, axis=1, kind="stable")
        indices[start:stop] = np.take_along_axis(part, order, axis=1)
        distances[start:stop] = np.take_along_axis(dpart, order, axis=1)
    if metric == "euclidean":
        np.sqrt(distances, out=distances)
    elif metric == "cosine":
        distances *= 0.5  # |a-b|² / 2 = 1 - cos for unit vectors
    return indices, distances
