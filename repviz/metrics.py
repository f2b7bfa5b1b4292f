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
from scipy.spatial import cKDTree

from ._jit import njit
from ._rows import run_rows
from ._validation import check_array, check_n_neighbors
from .neighbors import FLOAT_DTYPES, block_rows, knn


def _sample(n: int, max_exact: int | None, random_state) -> np.ndarray:
    if max_exact is None or n <= max_exact:
        return np.arange(n)
    return np.sort(np.random.default_rng(random_state).choice(n, size=max_exact, replace=False))


def _query_knn(X: np.ndarray, queries: np.ndarray, k: int, block_bytes: int = 64 << 20) -> np.ndarray:
    """k nearest neighbours (excluding self) of the rows ``queries`` among all rows of X, nearest first, ties
    to the smaller index (as :func:`repviz.neighbors.knn`)."""
    if X.shape[1] <= _TREE_MAX_DIM and k + 2 <= len(X):
        return _tree_knn(X, queries, k, block_bytes)
    if len(queries) == len(X):
        return knn(X, k)[0]
    return _scan(X, queries, k, None, block_bytes)[0]


_TREE_MAX_DIM = 3  # an embedding: a k-d tree finds its neighbours without an n x n block (2,000 points: 8x faster)


def _tree_knn(X: np.ndarray, queries: np.ndarray, k: int, block_bytes: int) -> np.ndarray:
    """:func:`_query_knn` for low-dimensional X by scipy's k-d tree. It returns k + 2 candidates per query; a
    row whose k-th and (k+1)-th candidates (self left out) are at the same distance is searched again by
    :func:`_scan`, so that ties at the boundary go to the smaller index there too."""
    dist, idx = cKDTree(X).query(X[queries], k + 2)
    dist = np.where(idx == queries[:, None], np.inf, dist)  # the query itself goes last
    order = np.lexsort((idx, dist), axis=1)
    dist, idx = np.take_along_axis(dist, order, axis=1), np.take_along_axis(idx, order, axis=1)
    near = np.ascontiguousarray(idx[:, :k])
    tied = np.flatnonzero(dist[:, k - 1] == dist[:, k])
    if len(tied):
        near[tied] = _scan(X, queries[tied], k, None, block_bytes)[0]
    return near


def _ranks_of(X: np.ndarray, queries: np.ndarray, neighbors: np.ndarray, block_bytes: int = 64 << 20) -> np.ndarray:
    """1-based rank (self excluded) in X's distances from each query of each of its listed neighbours."""
    return _scan(X, queries, 1, neighbors, block_bytes)[1]


def _scan(X: np.ndarray, queries: np.ndarray, k: int, others: np.ndarray | None,
          block_bytes: int = 64 << 20) -> tuple[np.ndarray, np.ndarray]:
    """One pass over the distances from each query to all rows of X: its k nearest neighbours in X and, with
    ``others`` (n_queries, m), the 1-based rank in X's distances of each point listed there (0 for an entry of -1).
    Wide X goes through its Gram matrix, block by block; low-dimensional X (an embedding) has its squared distances
    computed from the coordinates, which costs less than writing and reading an n x n block."""
    X = np.ascontiguousarray(X)
    low = X.shape[1] <= _TREE_MAX_DIM
    sq = np.einsum("ij,ij->i", X, X).astype(np.float64) if not low else np.empty(0)
    near = np.empty((len(queries), k), dtype=np.int64)
    targets = np.zeros((len(queries), 0), dtype=np.int64) if others is None else np.asarray(others, dtype=np.int64)
    ranks = np.empty(targets.shape, dtype=np.int64)
    rows = max(1, len(queries)) if low else block_rows(len(X), block_bytes)
    coords = np.ascontiguousarray(X.T, dtype=np.float64) if low else np.empty((0, len(X)))
    for s in range(0, len(queries), rows):
        q = np.ascontiguousarray(queries[s:s + rows], dtype=np.int64)
        G = np.empty((0, len(X)), dtype=X.dtype) if low else X[q] @ X.T
        run_rows(_select_and_rank, len(q), coords, G, sq, q, k, targets[s:s + rows], near[s:s + rows],
                 ranks[s:s + rows])
    return near, ranks


@njit(cache=True, nogil=True)
def _select_and_rank(start_row, stop_row, coords, G, sq, queries, k, targets, near, ranks):
    """For queries start_row..stop_row (query i = queries[r]; serial, for :func:`repviz._rows.run_rows`): the k
    nearest other points, sorted, and for each listed target t the count of other points strictly closer than
    t, plus one: its 1-based rank. The keys that order row r are sq[j] - 2 G[r, j] for a Gram block G (the
    query's own squared norm does not change the order) or, with ``sq`` empty, the squared distances from
    ``coords`` (dimensions x points, float64). They are computed once per row into a buffer, the query's own
    set to infinity, so that the selection and every rank count are plain vectorised passes over it."""
    n = coords.shape[1]
    keys = np.empty(n)
    best_d = np.empty(k)
    best_j = np.empty(k, dtype=np.int64)
    for r in range(start_row, stop_row):
        i = queries[r]
        if sq.shape[0]:
            for j in range(n):
                keys[j] = sq[j] - 2.0 * G[r, j]
        else:
            keys[:] = 0.0
            for f in range(coords.shape[0]):
                ci = coords[f, i]
                for j in range(n):
                    t = ci - coords[f, j]
                    keys[j] += t * t
        keys[i] = np.inf
        if k > 0:  # insertion into a sorted list of the k best (ties: the smaller index first, as knn)
            best_d[:] = np.inf
            best_j[:] = n
            for j in range(n):
                d = keys[j]
                if d < best_d[k - 1]:
                    a = k - 1
                    while a > 0 and best_d[a - 1] > d:
                        best_d[a] = best_d[a - 1]
                        best_j[a] = best_j[a - 1]
                        a -= 1
                    best_d[a] = d
                    best_j[a] = j
            for a in range(k):
                near[r, a] = best_j[a]
        for m in range(targets.shape[1]):
            if targets[r, m] < 0:  # not asked for (see _false_ranks)
                ranks[r, m] = 0
                continue
            key = keys[targets[r, m]]
            c = 1
            for j in range(n):
                c += keys[j] < key
            ranks[r, m] = c


def _points(X, Y, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """Input points and their embedding, checked (finite 2-D float arrays)."""
    return check_array(X, owner, dtype=FLOAT_DTYPES), check_array(Y, owner, dtype=FLOAT_DTYPES, name="Y")


def _check_trust_k(k: int, n: int) -> None:
    check_n_neighbors(k, n, "trustworthiness")
    if k >= n / 2:
        raise ValueError(f"n_neighbors ({k}) should be less than n_samples / 2 ({n / 2})")


def _penalty(ranks: np.ndarray, n: int, n_queries: int) -> float:
    """1 - normalised sum of how far beyond rank k each query's k neighbours from the other space are."""
    k = ranks.shape[1]
    penalty = float(np.maximum(ranks - k, 0).sum())
    # Venna & Kaski's normaliser, for n_queries query points instead of n
    return 1.0 - penalty * 2.0 / (n_queries * k * (2.0 * n - 3.0 * k - 1.0))


def _rank_penalty(X_from, X_to, k: int, max_exact, random_state) -> float:
    """1 - normalised sum over each point's k neighbours in X_to of how far beyond rank k they are in X_from."""
    _check_trust_k(k, X_from.shape[0])
    queries = _sample(X_from.shape[0], max_exact, random_state)
    return _penalty(_ranks_of(X_from, queries, _query_knn(X_to, queries, k)), X_from.shape[0], len(queries))


def _kept(a: np.ndarray, b: np.ndarray) -> float:
    """Mean fraction of each row of ``a`` found in the same row of ``b``."""
    return float((a[:, :, None] == b[:, None, :]).any(axis=2).mean())


def _vote_accuracy(neighbors: np.ndarray, codes: np.ndarray, queries: np.ndarray, n_classes: int) -> float:
    votes = np.zeros((len(queries), n_classes), dtype=np.int64)
    np.add.at(votes, (np.repeat(np.arange(len(queries)), neighbors.shape[1]), codes[neighbors].ravel()), 1)
    return float(np.mean(votes.argmax(axis=1) == codes[queries]))


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
    return _kept(_query_knn(X, queries, n_neighbors), _query_knn(Y, queries, n_neighbors))


def knn_accuracy(Y, labels, n_neighbors: int = 10, *, max_exact: int | None = 20_000, random_state=0) -> float:
    """Leave-one-out accuracy of a majority vote of the ``n_neighbors`` nearest points' labels in ``Y``
    (ties go to the smallest label)."""
    Y = check_array(Y, "knn_accuracy", dtype=FLOAT_DTYPES, name="Y")
    classes, codes = _label_codes(labels, Y.shape[0])
    check_n_neighbors(n_neighbors, Y.shape[0], "knn_accuracy")
    queries = _sample(Y.shape[0], max_exact, random_state)
    return _vote_accuracy(_query_knn(Y, queries, n_neighbors), codes, queries, len(classes))


def _label_codes(labels, n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(labels)
    if labels.shape[0] != n:
        raise ValueError(f"labels has {labels.shape[0]} entries but Y has {n} rows")
    return np.unique(labels, return_inverse=True)


def quality_scores(X, Y, labels=None, n_neighbors: int = 10, *, max_exact: int | None = 10_000,
                   random_state=0, neighbors=None, return_neighbors: bool = False) -> dict | tuple[dict, np.ndarray]:
    """All scores of embedding ``Y`` of ``X`` in one dict (plus ``n_neighbors`` and ``n_sampled``): the same values
    as the functions above with the same ``max_exact``, from one neighbour search in each space.

    ``neighbors`` (n, >= n_neighbors) int: each point's exact nearest input neighbours, nearest first (ties to the
    smaller index), e.g. the graph of a snapshot that a log directory caches for every method that scores it
    (``run.artifact(repviz.store.NEIGHBOR_GRAPH)``). The input's neighbour search is then skipped: the pass over X's
    distances ranks only the embedding neighbours that are not input neighbours (those within them cost nothing
    to trustworthiness), in the rows that have one. ``return_neighbors``: also return the input neighbours of the
    sampled points (n_sampled, n_neighbors), every point's when none is left out (``n_sampled == n``)."""
    X, Y = _points(X, Y, "quality_scores")
    n, k = X.shape[0], n_neighbors
    _check_trust_k(k, n)
    if labels is not None:
        classes, codes = _label_codes(labels, n)
    queries = _sample(n, max_exact, random_state)
    near_y = _query_knn(Y, queries, k)
    if neighbors is None:
        near_x, ranks_x = _scan(X, queries, k, near_y)  # one pass over X's Gram matrix for both
    else:
        near_x = _graph_rows(neighbors, n, k, queries)
        ranks_x = _false_ranks(X, queries, near_x, near_y)
    scores = {
        "trustworthiness": _penalty(ranks_x, n, len(queries)),
        "continuity": _penalty(_ranks_of(Y, queries, near_x), n, len(queries)),
        "knn_preservation": _kept(near_x, near_y),
        "n_neighbors": k,
        "n_sampled": len(queries),
    }
    if labels is not None:
        scores["knn_accuracy"] = _vote_accuracy(near_y, codes, queries, len(classes))
    return (scores, near_x) if return_neighbors else scores


def _graph_rows(neighbors, n: int, k: int, queries: np.ndarray) -> np.ndarray:
    """The first k neighbours of the rows ``queries`` of a k-NN graph of the n input points, checked."""
    graph = np.asarray(neighbors)
    if graph.ndim != 2 or graph.shape[0] != n or graph.shape[1] < k or graph.dtype.kind not in "iu":
        raise ValueError(f"neighbors must be an integer array (n_samples, >= n_neighbors) = ({n}, >= {k}); got "
                         f"{graph.dtype} {graph.shape}")
    return np.ascontiguousarray(graph[queries, :k], dtype=np.int64)


def _false_ranks(X: np.ndarray, queries: np.ndarray, near_x: np.ndarray, near_y: np.ndarray) -> np.ndarray:
    """:func:`_scan`'s ranks in X of ``near_y``, computed only where trustworthiness needs them: 0 (no penalty) for
    an embedding neighbour that is among the k input neighbours (its rank is at most k), the rank otherwise, the
    pass over X's distances made only for the rows that have such a false neighbour."""
    false = ~(near_y[:, :, None] == near_x[:, None, :]).any(axis=2)
    ranks = np.zeros(near_y.shape, dtype=np.int64)
    rows = np.flatnonzero(false.any(axis=1))
    if len(rows):
        targets = np.where(false[rows], near_y[rows], -1)
        ranks[rows] = _scan(X, queries[rows], 0, targets)[1]
    return ranks


def placed_knn_accuracy(Y_fit, labels_fit, Y_new, labels_new, n_neighbors: int = 10) -> float:
    """Accuracy of a majority vote of each placed point's ``n_neighbors`` nearest points of the layout ``Y_fit``
    (labels ``labels_fit``) against its own label: :func:`knn_accuracy` for points that were not in the fit (ties
    go to the smallest label)."""
    Y_fit = check_array(Y_fit, "placed_knn_accuracy", dtype=FLOAT_DTYPES, name="Y_fit")
    Y_new = check_array(Y_new, "placed_knn_accuracy", dtype=FLOAT_DTYPES, name="Y_new")
    check_n_neighbors(n_neighbors, Y_fit.shape[0], "placed_knn_accuracy")
    labels_fit, labels_new = np.asarray(labels_fit).ravel(), np.asarray(labels_new).ravel()
    if len(labels_fit) != len(Y_fit) or len(labels_new) != len(Y_new):
        raise ValueError(f"labels have {len(labels_fit)} and {len(labels_new)} entries for {len(Y_fit)} layout and "
                         f"{len(Y_new)} placed points")
    classes, codes = np.unique(np.concatenate([labels_fit, labels_new]), return_inverse=True)
    fit_codes, new_codes = codes[:len(Y_fit)], codes[len(Y_fit):]
    near = cKDTree(Y_fit).query(Y_new, n_neighbors)[1].reshape(len(Y_new), n_neighbors)
    votes = np.zeros((len(Y_new), len(classes)), dtype=np.int64)
    np.add.at(votes, (np.repeat(np.arange(len(Y_new)), n_neighbors), fit_codes[near].ravel()), 1)
    return float(np.mean(votes.argmax(axis=1) == new_codes))
