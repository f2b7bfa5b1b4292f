"""Quality scores of an embedding: how well it keeps the neighbourhoods of the input.

- ``trustworthiness`` (Venna & Kaski 2001): penalises points that are neighbours in the embedding but not in the
  input (false neighbours), weighted by their input rank.
- ``continuity``: the converse, neighbours in the input missing from the embedding.
- ``knn_preservation``: fraction of each point's k input neighbours that are among its k embedding neighbours.
- ``knn_accuracy``: leave-one-out k-NN classification accuracy of labels in the embedding.

Exact scores need the rank of every point in every row (O(n²)); above ``max_exact`` points they are computed on a
seeded random sample of query points (their neighbours still searched among all points), which is unbiased for
the mean. ``quality_scores`` records the sample size used.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_array, check_n_neighbors
from .neighbors import FLOAT_DTYPES, _block_rows, knn


def _sample(n: int, max_exact: int | None, random_state) -> np.ndarray:
    if max_exact is None or n <= max_exact:
        return np.arange(n)
    return np.sort(np.random.default_rng(random_state).choice(n, size=max_exact, replace=False))


def _query_knn(X: np.ndarray, queries: np.ndarray, k: int, block_bytes: int = 64 << 20) -> np.ndarray:
    """k nearest neighbours (excluding self) of the rows ``queries`` among all rows of X."""
    if len(queries) == len(X):
        return knn(X, k)[0]
    sq = np.einsum("ij,ij->i", X, X)
    out = np.empty((len(queries), k), dtype=np.int64)
    rows = _block_rows(len(X), block_bytes)
    for s in range(0, len(queries), rows):
        q = queries[s:s + rows]
        D = sq[q, None] - 2 * (X[q] @ X.T) + sq[None, :]
        D[np.arange(len(q)), q] = np.inf
        part = np.argpartition(D, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(D, part, axis=1), axis=1, kind="stable")
        out[s:s + rows] = np.take_along_axis(part, order, axis=1)
    return out


def _ranks_of(X: np.ndarray, queries: np.ndarray, neighbors: np.ndarray, block_bytes: int = 64 << 20) -> np.ndarray:
    """1-based rank (self excluded) in X's distances from each query of each of its listed neighbours."""
    sq = np.einsum("ij,ij->i", X, X)
    ranks = np.empty(neighbors.shape, dtype=np.int64)
    rows = _block_rows(len(X), block_bytes)
    for s in range(0, len(queries), rows):
        q = queries[s:s + rows]
        D = sq[q, None] - 2 * (X[q] @ X.T) + sq[None, :]
        D[np.arange(len(q)), q] = -np.inf  # self sorts first, so "points strictly closer" is the 1-based rank
        target = np.take_along_axis(D, neighbors[s:s + rows], axis=1)
        D.sort(axis=1)
        ranks[s:s + rows] = [np.searchsorted(d, t, side="left") for d, t in zip(D, target)]
    return ranks


def _points(X, Y, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """Input points and their embedding, checked (finite 2-D float arrays)."""
    return check_array(X, owner, dtype=FLOAT_DTYPES), check_array(Y, owner, dtype=FLOAT_DTYPES, name="Y")


def _rank_penalty(X_from, X_to, k: int, max_exact, random_state) -> float:
    """1 - normalised sum over each point's k neighbours in X_to of how far beyond rank k they are in X_from."""
    n = X_from.shape[0]
    check_n_neighbors(k, n, "trustworthiness")
    if k >= n / 2:
        raise ValueError(f"n_neighbors ({k}) should be less than n_samples / 2 ({n / 2})")
    queries = _sample(n, max_exact, random_state)
    ranks = _ranks_of(X_from, queries, _query_knn(X_to, queries, k))
    penalty = float(np.maximum(ranks - k, 0).sum())
    # Venna & Kaski's normaliser, for len(queries) query points instead of n
    return 1.0 - penalty * 2.0 / (len(queries) * k * (2.0 * n - 3.0 * k - 1.0))


def trustworthiness(X, Y, n_neighbors: int = 10, *, max_exact: int | None = 10_000, random_state=0) -> float:
    """Trustworthiness of embedding ``Y`` of ``X`` in [0, 1] (1: no false neighbours). Same definition as
    ``sklearn.manifold.trustworthiness``; sampled above ``max_exact`` points."""
    X, Y = _points(X, Y, "trustworthiness")
    return _rank_penalty(X, Y, n_neighbors, max_exact, random_state)


def continuity(X, Y, n_neighbors: int = 10, *, max_exact: int | None = 10_000, random_state=0) -> float:
    """Continuity in [0, 1] (1: no input neighbour is lost in the embedding); trustworthiness with roles swapped."""
    X, Y = _points(X, Y, "continuity")
    return _rank_penalty(Y, X, n_neighbors, max_exact, random_state)


def knn_preservation(X, Y, n_neighbors: int = 10, *, max_exact: int | None = 20_000, random_state=0) -> float:
    """Mean fraction of each point's ``n_neighbors`` input neighbours kept among its embedding neighbours."""
    X, Y = _points(X, Y, "knn_preservation")
    check_n_neighbors(n_neighbors, X.shape[0], "knn_preservation")
    queries = _sample(X.shape[0], max_exact, random_state)
    a, b = _query_knn(X, queries, n_neighbors), _query_knn(Y, queries, n_neighbors)
    return float(np.mean([np.isin(r, s).mean() for r, s in zip(a, b)]))


def knn_accuracy(Y, labels, n_neighbors: int = 10, *, max_exact: int | None = 20_000, random_state=0) -> float:
    """Leave-one-out accuracy of a majority vote of the ``n_neighbors`` nearest points' labels in ``Y``
    (ties go to the smallest label)."""
    Y = check_array(Y, "knn_accuracy", dtype=FLOAT_DTYPES, name="Y")
    labels = np.asarray(labels)
    if labels.shape[0] != Y.shape[0]:
        raise ValueError(f"labels has {labels.shape[0]} entries but Y has {Y.shape[0]} rows")
    check_n_neighbors(n_neighbors, Y.shape[0], "knn_accuracy")
    classes, codes = np.unique(labels, return_inverse=True)
    queries = _sample(Y.shape[0], max_exact, random_state)
    nb = _query_knn(Y, queries, n_neighbors)
    votes = np.zeros((len(queries), len(classes)), dtype=np.int64)
    np.add.at(votes, (np.repeat(np.arange(len(queries)), n_neighbors), codes[nb].ravel()), 1)
    return float(np.mean(votes.argmax(axis=1) == codes[queries]))


def quality_scores(X, Y, labels=None, n_neighbors: int = 10, *, max_exact: int | None = 10_000,
                   random_state=0) -> dict:
    """All scores of embedding ``Y`` of ``X`` in one dict (plus ``n_neighbors`` and ``n_sampled``)."""
    n = np.asarray(X).shape[0]
    scores = {
        "trustworthiness": trustworthiness(X, Y, n_neighbors, max_exact=max_exact, random_state=random_state),
        "continuity": continuity(X, Y, n_neighbors, max_exact=max_exact, random_state=random_state),
        "knn_preservation": knn_preservation(X, Y, n_neighbors, max_exact=max_exact, random_state=random_state),
        "n_neighbors": n_neighbors,
        "n_sampled": int(min(n, max_exact or n)),
    }
    if labels is not None:
        scores["knn_accuracy"] = knn_accuracy(Y, labels, n_neighbors, max_exact=max_exact, random_state=random_state)
    return scores
