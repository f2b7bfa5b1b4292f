"""k-nearest-neighbour graphs shared by t-SNE, Isomap, LLE, spectral methods and the quality scores.

``knn`` returns, for every point, its ``k`` nearest other points (never itself) and their distances;
``kneighbors`` the nearest training points of new points (to place them: Isomap's and LLE's ``transform``).

- "exact" works in row blocks of a distance matrix, so memory is bounded by ``block_bytes``, not n²: a matrix
  product (BLAS) for the Euclidean-type metrics (:data:`GRAM_METRICS`; sparse X stays sparse), scipy's
  ``cdist`` for the others (:data:`CDIST_METRICS` and callables: slower, a callable much slower, as it is
  called once per pair from Python; sparse X is densified a block at a time). A numba kernel finds each
  row's k smallest entries from a histogram of the row (no full sort of the block), on
  :func:`repviz._rows.run_rows`'s threads.
- "nndescent" (Dong et al. 2011) starts from a forest of random-projection trees and refines the graph by
  looking at neighbours of neighbours, on :func:`repviz._rows.run_rows`'s threads. Each round reads a snapshot
  of the previous graph and every point updates only its own list, so the result is race-free and independent
  of the thread count.
- "auto" picks "exact" up to ``NNDESCENT_MIN_N`` points (where blocked BLAS is as fast and exact) and
  "nndescent" above, for dense data and the Euclidean-type metrics.
- ``metric="precomputed"`` takes a square distance matrix, or a sparse neighbour graph (scikit-learn's
  ``KNeighborsTransformer(mode="distance")``, ``radius_neighbors_graph``): each row's stored entries are its
  candidate neighbours (the diagonal ignored, explicit zeros are duplicates at distance 0).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

from ._jit import njit
from ._kernels import sq_dist
from ._rows import run_rows
from ._validation import Options, Rule, check_array, check_distance_matrix, check_n_neighbors, check_option

#: Metrics computed from dot products (BLAS blocks; sparse input stays sparse; NN-descent supports them).
GRAM_METRICS = ("euclidean", "sqeuclidean", "cosine")
#: Metrics computed by scipy's ``cdist`` block by block ("minkowski" reads ``p`` from ``metric_params``,
#: default 2; "mahalanobis" needs ``V`` or ``VI`` there); callables go the same way.
CDIST_METRICS = ("manhattan", "chebyshev", "minkowski", "mahalanobis")
#: Other names scikit-learn accepts for these metrics.
METRIC_ALIASES = {"l2": "euclidean", "l1": "manhattan", "cityblock": "manhattan"}
#: Metrics of :func:`knn` (and callables of two 1-D arrays).
KNN_METRICS = GRAM_METRICS + CDIST_METRICS + ("precomputed",) + tuple(METRIC_ALIASES)
#: Neighbour searches of :func:`knn` (its ``method``; the estimators' ``neighbors`` option).
KNN_METHODS = ("auto", "exact", "nndescent")
NNDESCENT_MIN_N = 50_000
#: Random-projection trees of an NN-descent started from candidate neighbours (``knn(..., seeds=)``): the
#: candidates carry most of the graph, one tree adds random links across it.
SEEDED_TREES = 1

#: dtypes the kernels take as they are; anything else becomes float32 (see :func:`repviz._validation.check_array`)
FLOAT_DTYPES = (np.float32, np.float64)


def block_rows(n: int, block_bytes: int) -> int:
    """Rows per block so that a block of float64 distances to ``n`` points takes about ``block_bytes``."""
    return int(max(1, min(n, block_bytes // max(1, 8 * n))))


#: Parameter rules of an estimator's ``metric`` (see :func:`repviz._validation.validate_params`).
METRIC_RULES = [Options(*KNN_METRICS), Rule(callable, "a callable")]


def resolve_metric(metric, metric_params: dict | None = None, p: float | None = None) -> tuple:
    """(metric, metric_params) as :func:`knn` takes them, from an estimator's ``metric``, ``metric_params``
    and ``p`` (scikit-learn's: Minkowski's power, overridden by ``metric_params["p"]``): aliases resolved,
    "minkowski" with p = 2 or 1 turned into the faster "euclidean" or "manhattan"."""
    metric = canonical_metric(metric)
    params = dict(metric_params or {})
    if metric == "minkowski":
        params.setdefault("p", 2 if p is None else p)
        if "w" not in params and float(params["p"]) in (1.0, 2.0):
            return ("euclidean" if float(params["p"]) == 2.0 else "manhattan"), {}
    return metric, params


def canonical_metric(metric):
    """``metric`` with scikit-learn's aliases resolved ("l1" -> "manhattan"); a callable as it is."""
    if callable(metric):
        return metric
    check_option(metric, KNN_METRICS, "metric", "knn")
    return METRIC_ALIASES.get(metric, metric)


def check_data(X, owner: str, *, min_samples: int = 1, dtype=FLOAT_DTYPES, metric="euclidean"):
    """Validated input of a neighbour search: a dense array as :func:`repviz._validation.check_array` makes
    it, or a scipy sparse matrix as a canonical CSR matrix of finite values (square and non-negative for
    ``metric="precomputed"``: a neighbour graph)."""
    if not sp.issparse(X):
        X = check_array(X, owner, min_samples=min_samples, dtype=dtype)
        if metric == "precomputed":
            check_distance_matrix(X, owner)
        return X
    X = sp.csr_matrix(X)
    accepted = tuple(np.dtype(d) for d in (dtype if isinstance(dtype, (tuple, list)) else (dtype,)))
    X = X.astype(X.dtype if X.dtype in accepted else accepted[0])
    X.sum_duplicates()
    if X.shape[0] < min_samples:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a minimum of "
                         f"{min_samples} is required by {owner}.")
    if not np.isfinite(X.data).all():
        raise ValueError(f"Input X contains NaN or infinity among its stored values ({owner} needs finite values).")
    if metric == "precomputed":
        if X.shape[0] != X.shape[1]:
            raise ValueError(f"With metric='precomputed', {owner} expects a square distance matrix (n, n), here a "
                             f"sparse neighbour graph; got shape {X.shape}.")
        if (X.data < 0).any():
            raise ValueError(f"With metric='precomputed', {owner} expects distances that are positive or zero; the "
                             f"smallest stored entry is {float(X.data.min())}.")
    return X


def _sq_norms(X) -> np.ndarray:
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", X, X).astype(np.float64)


def _cdist_args(metric, metric_params: dict | None) -> tuple:
    """(metric, keyword arguments) of scipy's ``cdist`` for a :data:`CDIST_METRICS` name or a callable."""
    params = dict(metric_params or {})
    if callable(metric):
        return metric, params
    if metric == "manhattan":
        return "cityblock", {}
    if metric == "minkowski":
        return "minkowski", {"p": float(params.get("p", 2)), **({"w": params["w"]} if "w" in params else {})}
    if metric == "mahalanobis":
        if "VI" in params:
            return "mahalanobis", {"VI": np.asarray(params["VI"], dtype=np.float64)}
        if "V" in params:
            return "mahalanobis", {"VI": np.linalg.inv(np.asarray(params["V"], dtype=np.float64))}
        raise ValueError("Must provide either V or VI for Mahalanobis distance: pass metric_params={'V': "
                         "np.cov(X.T)} (or the inverse as 'VI').")
    return metric, {}


def _dense(A) -> np.ndarray:
    return A.toarray() if sp.issparse(A) else A


def distances(A, B, metric="euclidean", metric_params: dict | None = None, *, sq_b: np.ndarray | None = None):
    """Distances (float64, in :func:`knn`'s units for ``metric``) from the rows of ``A`` to the rows of ``B``
    (dense or sparse, not precomputed); ``sq_b``: the squared norms of B's rows, if known."""
    metric = canonical_metric(metric)
    if metric not in GRAM_METRICS:
        name, kwargs = _cdist_args(metric, metric_params)
        D = cdist(np.asarray(_dense(A), dtype=np.float64), np.asarray(_dense(B), dtype=np.float64), name, **kwargs)
        if callable(metric) and (D < 0).any():
            raise ValueError(f"All distances must be non-negative, but the metric given ({metric!r}) returned "
                             f"{D.min():g}; check the metric.")
        return D
    if metric == "cosine":
        A, B = _unit_rows(A), _unit_rows(B)
        sq_b = None
    sq_b = _sq_norms(B) if sq_b is None else sq_b
    D = _dense(A @ B.T).astype(np.float64)
    D *= -2
    D += _sq_norms(A)[:, None]
    D += sq_b[None, :]
    np.maximum(D, 0, out=D)
    return _to_metric_units(D, metric)


def knn(X, n_neighbors: int, *, metric="euclidean", method: str = "exact", block_bytes: int = 64 << 20,
        random_state=None, metric_params: dict | None = None, seeds: np.ndarray | None = None,
        dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """Nearest neighbours of every row of ``X`` among the other rows.

    Parameters
    ----------
    X : array or sparse matrix of shape (n_samples, n_features), or (n_samples, n_samples) if
        ``metric="precomputed"`` (a distance matrix, or a sparse graph whose stored entries are the candidates)
    n_neighbors : int
        Neighbours per point, excluding the point itself.
    metric : str or callable, default="euclidean"
        One of :data:`KNN_METRICS`, or a callable of two 1-D arrays returning their distance (slow: called once
        per pair).
    method : {"exact", "nndescent", "auto"}, default="exact"
        "exact" computes all distances block by block (time O(n² d), memory O(block)). "nndescent" is
        approximate (recall about 0.985 at k = 90 on MNIST; time roughly O(n k² d) per round, memory O(n k)),
        dense data and :data:`GRAM_METRICS` only. "auto": "nndescent" from ``NNDESCENT_MIN_N`` points where it
        applies, else "exact".
    block_bytes : int, default=64 MiB
        Memory budget of one block of the distance matrix ("exact").
    random_state : int or None
        Seed of the random-projection trees ("nndescent"); the result is deterministic for a given seed.
    metric_params : dict or None
        Arguments of the metric: ``p`` of "minkowski", ``V`` or ``VI`` of "mahalanobis", keywords of a callable.
    seeds : int array (n_samples, m) or None
        Candidate neighbours of each point that NN-descent starts from, in place of all but one of its
        random-projection trees: the graph of a closely related data set, e.g. the same probe points at the
        previous snapshot. From a graph that shares most of the answer it converges in a round or two (at
        50,000 MNIST activations, 95 % shared: about a third of the time, the same recall). Entries outside
        [0, n_samples) are ignored; the exact search ignores ``seeds``.
    dtype : float32 or float64, default=float32
        dtype of the distances. float64 (for float64 ``X``): the exact search recomputes the winners' distances
        of a Euclidean-type metric from the coordinates' differences, exact to float64 rounding (the selection,
        and so the indices, are the same for both); NN-descent's float32 distances are widened.

    Returns
    -------
    indices : int64 array (n_samples, n_neighbors), sorted by increasing distance
    distances : array (n_samples, n_neighbors) of ``dtype``, in the metric's units
    """
    metric = canonical_metric(metric)
    check_option(method, KNN_METHODS, "method", "knn")
    X = check_data(X, "knn", metric=metric)
    n = X.shape[0]
    k = check_n_neighbors(n_neighbors, n, "knn")
    fast = metric in GRAM_METRICS and not sp.issparse(X)
    if method == "nndescent" and not fast:
        raise ValueError(f"method='nndescent' needs dense feature vectors and a metric of {GRAM_METRICS}, not "
                         f"metric={metric!r}{' on sparse input' if sp.issparse(X) else ''}; use method='exact' "
                         f"(or 'auto')")
    if method == "auto":
        method = "nndescent" if fast and n >= NNDESCENT_MIN_N else "exact"
    if seeds is not None:
        seeds = np.asarray(seeds)
        if seeds.ndim != 2 or seeds.shape[0] != n or not np.issubdtype(seeds.dtype, np.integer):
            raise ValueError(f"seeds must be an integer array with one row of candidate neighbours per point, "
                             f"shape ({n}, m); got {seeds.dtype} {seeds.shape}")
    if method == "nndescent":
        ind, dist = _nndescent_knn(X, k, metric, random_state, seeds=seeds)
        return ind, dist.astype(dtype, copy=False)
    if metric == "precomputed" and sp.issparse(X):
        return _graph_knn(X, k, exclude_self=True, dtype=dtype)
    ind, dist = _exact_knn(X, X, k, metric, metric_params, block_bytes, exclude_self=True, dtype=dtype)
    if np.dtype(dtype) == np.float64 and metric in GRAM_METRICS:
        _winner_distances(X, X, ind, metric, block_bytes, dist)
    return ind, dist


def kneighbors(Q, X, n_neighbors: int, *, metric="euclidean", metric_params: dict | None = None,
               block_bytes: int = 64 << 20, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_neighbors`` nearest rows of ``X`` to each row of ``Q`` (exact; a row equal to one of X's finds
    it at distance 0). With ``metric="precomputed"``, ``Q`` holds the distances (m, n_samples) from the
    queries to X's rows, dense or a sparse graph. Returns (indices, distances of ``dtype``) as :func:`knn`."""
    metric = canonical_metric(metric)
    Q = check_data(Q, "kneighbors")
    n = X.shape[0]
    if not 1 <= n_neighbors <= n:
        raise ValueError(f"n_neighbors ({n_neighbors}) must be between 1 and the {n} fitted points in kneighbors.")
    if metric == "precomputed":
        if Q.shape[1] != n:
            raise ValueError(f"With metric='precomputed', kneighbors expects distances to the {n} fitted points "
                             f"(shape (n_queries, {n})); got shape {Q.shape}.")
        if sp.issparse(Q):
            return _graph_knn(Q, n_neighbors, exclude_self=False, dtype=dtype)
    elif Q.shape[1] != X.shape[1]:
        raise ValueError(f"X has {Q.shape[1]} features, but the fitted data has {X.shape[1]} features.")
    ind, dist = _exact_knn(Q, X, n_neighbors, metric, metric_params, block_bytes, exclude_self=False,
                           dtype=dtype)
    if metric in GRAM_METRICS:  # the winners' distances again, directly: a point of X finds itself at 0
        _winner_distances(Q, X, ind, metric, block_bytes, dist)
    return ind, dist


def _winner_distances(Q, X, ind: np.ndarray, metric, block_bytes: int, out: np.ndarray) -> None:
    """out[i, a] = the distance from row i of ``Q`` to row ind[i, a] of ``X``, from the coordinates'
    differences (:func:`distances_to`), block by block."""
    step = max(1, block_bytes // (8 * ind.shape[1] * X.shape[1]))
    for s in range(0, len(ind), step):
        rows = slice(s, s + step)
        out[rows] = distances_to(Q[rows], X, ind[rows], metric)


def distances_to(Q, X, ind: np.ndarray, metric) -> np.ndarray:
    """Distances (float64, :func:`knn`'s units) from each row of ``Q`` to the rows ``ind[i]`` of ``X``."""
    if metric == "cosine":
        Q, X = _unit_rows(Q), _unit_rows(X)
    diff = np.asarray(_dense(Q), dtype=np.float64)[:, None, :] - np.asarray(
        _dense(X[ind.ravel()]), dtype=np.float64).reshape(ind.shape + (X.shape[1],))
    return _to_metric_units(np.einsum("ijk,ijk->ij", diff, diff), metric)


def _unit_rows(X):
    """Rows scaled to unit length (zero rows kept), dense or sparse."""
    if not sp.issparse(X):
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        return X / np.where(norms == 0, 1, norms)
    norms = np.sqrt(_sq_norms(X))
    return (sp.diags(1 / np.where(norms == 0, 1, norms)) @ X).tocsr()


def _to_metric_units(distances: np.ndarray, metric: str) -> np.ndarray:
    """Squared Euclidean distances (of unit rows for cosine) to the metric's units, in place."""
    if metric == "euclidean":
        np.sqrt(distances, out=distances)
    elif metric == "cosine":
        distances *= 0.5  # |a-b|² / 2 = 1 - cos for unit vectors
    return distances


@njit(inline="always")
def _before(d1, j1, d2, j2):
    """Order of (distance, index) pairs: ties go to the smaller index, so results do not depend on scan order."""
    return d1 < d2 or (d1 == d2 and j1 < j2)


@njit(inline="always")
def _sift_down(dist, idx, flag, pos, size):
    """Move entry ``pos`` of a max-heap of (distance, index) pairs down to its place among the first ``size``.
    ``flag`` (NN-descent's "new" marks) travels with its entry; pass an empty array where there is none."""
    while True:
        left = 2 * pos + 1
        if left >= size:
            return
        big = left
        right = left + 1
        if right < size and _before(dist[left], idx[left], dist[right], idx[right]):
            big = right
        if _before(dist[pos], idx[pos], dist[big], idx[big]):
            dist[pos], dist[big] = dist[big], dist[pos]
            idx[pos], idx[big] = idx[big], idx[pos]
            if flag.shape[0]:
                flag[pos], flag[big] = flag[big], flag[pos]
            pos = big
        else:
            return


@njit(inline="always")
def _heap_replace_top(dist, idx, flag, d, j):
    """Replace the largest entry of a max-heap of (distance, index) by (d, j)."""
    dist[0] = d
    idx[0] = j
    _sift_down(dist, idx, flag, 0, dist.shape[0])


@njit(inline="always")
def _heap_sort(dist, idx, flag):
    """Sort a max-heap in place into increasing (distance, index) order (``flag``, if not empty, with it)."""
    for end in range(dist.shape[0] - 1, 0, -1):
        dist[0], dist[end] = dist[end], dist[0]
        idx[0], idx[end] = idx[end], idx[0]
        if flag.shape[0]:
            flag[0], flag[end] = flag[end], flag[0]
        _sift_down(dist, idx, flag, 0, end)


_SELECT_BINS = 256  # histogram of a row's keys in the exact selection


@njit(cache=True, nogil=True)
def _select_block(start_row, stop_row, D, sq, sq_q, start, exclude_self, k, out_idx, out_dist):
    """Rows start_row..stop_row of the block D: the k smallest entries of each (excluding column start + r,
    the point itself, with ``exclude_self``), sorted, stored at row start + r of the outputs (serial, for
    :func:`repviz._rows.run_rows`).

    With ``sq`` (squared norms) D holds dot products and the key is sq[j] - 2 D[r, j] (the query's own squared
    norm, ``sq_q[start + r]``, does not change the order and is added to the k winners only); without it (sq
    empty) D holds the values.
    Per row: a histogram of the keys over their range finds the bin that holds the k-th smallest; only the keys
    in the bins up to it (k and a few more) go through a bounded max-heap of (key, index), so ties go to the
    smaller index. A bin index is monotone in the key, so the result is exact. 1.5-2x faster than streaming
    the whole row through the heap, whose replacements dominate when k is a sizeable share of the row (t-SNE's
    90 neighbours among a few thousand points)."""
    n = D.shape[1]
    gram = sq.shape[0] > 0
    no_flag = np.empty(0, dtype=np.bool_)
    keys = np.empty(n)
    bins = np.empty(n, dtype=np.int64)
    counts = np.empty(_SELECT_BINS + 1, dtype=np.int64)
    dist = np.empty(k)
    idx = np.empty(k, dtype=np.int64)
    for r in range(start_row, stop_row):
        self_j = start + r if exclude_self else -1
        lo, hi = np.inf, -np.inf
        for j in range(n):
            d = sq[j] - 2.0 * D[r, j] if gram else D[r, j]
            keys[j] = d
            if j != self_j:
                lo = min(lo, d)
                hi = max(hi, d)
        scale = _SELECT_BINS / (hi - lo) if hi > lo else 0.0
        counts[:] = 0
        for j in range(n):
            if j == self_j:
                bins[j] = _SELECT_BINS + 1  # never a candidate
            else:
                b = np.int64((keys[j] - lo) * scale)
                bins[j] = b
                counts[b] += 1
        last, seen = _SELECT_BINS, 0
        for b in range(_SELECT_BINS + 1):
            seen += counts[b]
            if seen >= k:
                last = b
                break
        dist[:] = np.inf
        idx[:] = n  # sentinel index larger than every real one
        for j in range(n):
            if bins[j] <= last and _before(keys[j], j, dist[0], idx[0]):
                _heap_replace_top(dist, idx, no_flag, keys[j], j)
        _heap_sort(dist, idx, no_flag)
        offset = sq_q[start + r] if gram else 0.0
        for a in range(k):
            out_idx[start + r, a] = idx[a]
            out_dist[start + r, a] = max(dist[a] + offset, 0.0)


def _exact_knn(Q, X, k: int, metric, metric_params: dict | None, block_bytes: int,
               exclude_self: bool, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest rows of X to each row of Q (Q is X with ``exclude_self``), block by block; distances of
    ``dtype``."""
    m = Q.shape[0]
    gram = metric in GRAM_METRICS
    if metric == "cosine":
        X = _unit_rows(X)
        Q = X if exclude_self else _unit_rows(Q)
    sq = _sq_norms(X) if gram else np.empty(0)
    sq_q = (sq if exclude_self else _sq_norms(Q)) if gram else np.empty(0)
    indices = np.empty((m, k), dtype=np.int64)
    dist = np.empty((m, k), dtype=dtype)
    rows = block_rows(X.shape[0], block_bytes)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        if metric == "precomputed":
            D = Q[start:stop]
        elif gram:
            D = _dense(Q[start:stop] @ X.T)
        else:
            D = distances(Q[start:stop], X, metric, metric_params)
        run_rows(_select_block, stop - start, D, sq, sq_q, start, exclude_self, k, indices, dist)
    return indices, _to_metric_units(dist, metric) if gram else dist


def _graph_knn(G: sp.csr_matrix, k: int, *, exclude_self: bool, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """The k smallest stored entries of each row of a sparse distance graph (the diagonal left out with
    ``exclude_self``), in (distance, index) order; distances of ``dtype``."""
    m = G.shape[0]
    rows = np.repeat(np.arange(m), np.diff(G.indptr))
    cols, vals = G.indices.astype(np.int64), G.data
    if exclude_self:
        keep = cols != rows
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
    counts = np.bincount(rows, minlength=m)
    if m and counts.min() < k:
        raise ValueError(f"The precomputed neighbour graph stores only {int(counts.min())} neighbour(s) in row "
                         f"{int(counts.argmin())}, fewer than n_neighbors ({k}); build it with more neighbours "
                         f"(e.g. KNeighborsTransformer(n_neighbors={k}, mode='distance')) or lower n_neighbors.")
    order = np.lexsort((cols, vals, rows))
    take = (np.concatenate([[0], np.cumsum(counts)[:-1]])[:, None] + np.arange(k)).ravel()
    pick = order[take] if m else order[:0]
    return cols[pick].reshape(m, k), vals[pick].astype(dtype).reshape(m, k)


# --- NN-descent --------------------------------------------------------------------------------------------

@njit(cache=True, fastmath=True)
def _rp_tree_leaves(X, leaf_size, seed):
    """One random-projection tree: returns (order, leaf_start) with leaf l holding order[leaf_start[l]:..[l+1]].

    Each node is split by the hyperplane halfway between two random points of it (an even random split when
    all its points fall on one side, e.g. duplicates). Plain arrays and loops only (no lists, sorts or masks),
    which numba compiles in a fraction of the time."""
    np.random.seed(seed)
    n, dim = X.shape
    order = np.arange(n)
    side = np.empty(n, dtype=np.bool_)
    scratch = np.empty(n, dtype=np.int64)
    # a node splits into two of at least one point each: at most n leaves, and a stack of at most n nodes
    stack_lo = np.empty(n, dtype=np.int64)
    stack_hi = np.empty(n, dtype=np.int64)
    is_leaf = np.zeros(n + 1, dtype=np.bool_)
    stack_lo[0], stack_hi[0], depth = 0, n, 1
    while depth > 0:
        depth -= 1
        lo, hi = stack_lo[depth], stack_hi[depth]
        size = hi - lo
        if size <= leaf_size:
            is_leaf[lo] = True
            continue
        a = order[lo + np.random.randint(size)]
        b = order[lo + np.random.randint(size)]
        n_left = 0
        for s in range(lo, hi):
            p = order[s]
            proj = 0.0
            for f in range(dim):
                proj += (X[a, f] - X[b, f]) * (X[p, f] - 0.5 * (X[a, f] + X[b, f]))
            side[s] = proj > 0
            n_left += side[s]
        if n_left == 0 or n_left == size:
            for s in range(lo, hi):
                side[s] = np.random.random() < 0.5
            n_left = 0
            for s in range(lo, hi):
                n_left += side[s]
            if n_left == 0 or n_left == size:
                side[lo] = not side[lo]
                n_left = 1 if side[lo] else size - 1
        # a stable partition: the left side first, each side in its order
        left, right = lo, lo + n_left
        for s in range(lo, hi):
            if side[s]:
                scratch[left] = order[s]
                left += 1
            else:
                scratch[right] = order[s]
                right += 1
        for s in range(lo, hi):
            order[s] = scratch[s]
        mid = lo + n_left
        stack_lo[depth], stack_hi[depth] = lo, mid
        stack_lo[depth + 1], stack_hi[depth + 1] = mid, hi
        depth += 2
    is_leaf[n] = True
    return order, np.flatnonzero(is_leaf)


@njit(inline="always")
def _try_push(dist, idx, flag, d, j):
    """Insert (d, j) into a row's max-heap unless j is already there; returns 1 if inserted."""
    if not _before(d, j, dist[0], idx[0]):
        return 0
    for a in range(idx.shape[0]):
        if idx[a] == j:
            return 0
    # the heap root is replaced; the new entry's flag travels with it
    flag[0] = True
    _heap_replace_top(dist, idx, flag, d, j)
    return 1


@njit(cache=True, nogil=True, fastmath=True)
def _leaf_join(start, stop, X, trees_order, trees_leaves, point_leaf, dist, idx, flag):  # pragma: no cover
    """Points ``start:stop`` take the closest of the points sharing a leaf with them in any tree."""
    n_trees = trees_order.shape[0]
    for i in range(start, stop):
        for t in range(n_trees):
            leaf = point_leaf[t, i]
            for s in range(trees_leaves[t, leaf], trees_leaves[t, leaf + 1]):
                j = trees_order[t, s]
                if j != i:
                    _try_push(dist[i], idx[i], flag[i], sq_dist(X, i, X, j), j)


@njit(cache=True, nogil=True, fastmath=True)
def _seed_join(start, stop, X, seeds, dist, idx, flag):  # pragma: no cover - compiled
    """Points ``start:stop`` take their candidate neighbours ``seeds[i]`` (entries < 0 or >= n are skipped)."""
    n = X.shape[0]
    for i in range(start, stop):
        for a in range(seeds.shape[1]):
            j = seeds[i, a]
            if 0 <= j < n and j != i:
                _try_push(dist[i], idx[i], flag[i], sq_dist(X, i, X, j), j)


@njit(cache=True)
def _sample_lists(idx, dist, flag, fwd, fwd_new, rev, rev_new):  # pragma: no cover - compiled
    """Into ``fwd`` (n, s), filled with -1, each point's closest s neighbours (with their 'new' flags, which are
    then cleared), then into ``rev`` (filled with -1) the reverse lists: for each point, up to s points that list
    it (the first in index order). A snapshot for one round."""
    n, k = idx.shape
    n_sample = fwd.shape[1]
    row_dist = np.empty(k, dtype=dist.dtype)
    row_idx = np.empty(k, dtype=np.int64)
    row_new = np.empty(k, dtype=np.bool_)
    for i in range(n):
        # a copy of the row's max-heap, sorted into increasing (distance, index) order with its flags
        for a in range(k):
            row_dist[a] = dist[i, a]
            row_idx[a] = idx[i, a]
            row_new[a] = flag[i, a]
            flag[i, a] = False
        _heap_sort(row_dist, row_idx, row_new)
        m = 0
        for a in range(k):
            if row_idx[a] < n and m < n_sample:
                fwd[i, m] = row_idx[a]
                fwd_new[i, m] = row_new[a]
                m += 1
    fill = np.zeros(n, dtype=np.int64)
    for i in range(n):
        for m in range(n_sample):
            j = fwd[i, m]
            if j >= 0 and fill[j] < n_sample:
                rev[j, fill[j]] = i
                rev_new[j, fill[j]] = fwd_new[i, m]
                fill[j] += 1


@njit(cache=True, nogil=True, fastmath=True)
def _descent_round(start, stop, X, fwd, fwd_new, rev, rev_new, dist, idx, flag, updates):  # pragma: no cover
    """Points ``start:stop`` look at the (sampled) neighbours of their (sampled) neighbours, forward and reverse,
    wherever either link is new since the last round, and keep the closest; point i writes only its own row."""
    s = fwd.shape[1]
    for i in range(start, stop):
        count = 0
        for side_a in range(2):
            for a in range(s):
                j = fwd[i, a] if side_a == 0 else rev[i, a]
                if j < 0:
                    continue
                new_ij = fwd_new[i, a] if side_a == 0 else rev_new[i, a]
                for side_b in range(2):
                    for b in range(s):
                        c = fwd[j, b] if side_b == 0 else rev[j, b]
                        if c < 0 or c == i:
                            continue
                        new_jc = fwd_new[j, b] if side_b == 0 else rev_new[j, b]
                        if new_ij or new_jc:
                            count += _try_push(dist[i], idx[i], flag[i], sq_dist(X, i, X, c), c)
        updates[i] = count


@njit(cache=True, nogil=True, fastmath=True)
def _finish_rows(start, stop, X, dist, idx):  # pragma: no cover - compiled
    """Sort rows ``start:stop``; rows the search left short (tiny or degenerate data) get an exact scan."""
    n, k = idx.shape
    no_flag = np.empty(0, dtype=np.bool_)
    for i in range(start, stop):
        short = False
        for a in range(k):
            short = short or idx[i, a] >= n
        if short:
            for a in range(k):
                dist[i, a] = np.inf
                idx[i, a] = n
            for j in range(n):
                if j != i:
                    d = sq_dist(X, i, X, j)
                    if _before(d, j, dist[i, 0], idx[i, 0]):
                        _heap_replace_top(dist[i], idx[i], no_flag, d, j)
        _heap_sort(dist[i], idx[i], no_flag)


def _nndescent_knn(X: np.ndarray, k: int, metric: str, random_state, n_trees: int | None = None,
                   n_sample: int = 24, max_rounds: int = 8, delta: float = 0.001,
                   seeds: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    if metric == "cosine":
        X = _unit_rows(X)
    X = np.ascontiguousarray(X, dtype=np.float32)
    n = X.shape[0]
    rng = np.random.default_rng(random_state)
    if n_trees is None:
        n_trees = SEEDED_TREES if seeds is not None else int(min(32, max(4, round(np.sqrt(n) / 40))))
    leaf_size = max(2 * k, 64)
    orders, leaves_list = [], []
    for seed in rng.integers(0, 2**31 - 1, size=n_trees):
        order, leaves = _rp_tree_leaves(X, leaf_size, int(seed))
        orders.append(order)
        leaves_list.append(leaves)
    # Relabel the points in the first tree's leaf order: neighbours then sit close in memory (far fewer cache
    # misses in the distance loops); labels are mapped back at the end.
    perm = orders[0]
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = np.arange(n)
    X = np.ascontiguousarray(X[perm])
    n_leaves = max(len(lv) for lv in leaves_list)
    trees_order = np.stack([inverse[order] for order in orders])
    trees_leaves = np.full((n_trees, n_leaves), n, dtype=np.int64)
    point_leaf = np.empty((n_trees, n), dtype=np.int64)
    for t, leaves in enumerate(leaves_list):
        trees_leaves[t, :len(leaves)] = leaves
        point_leaf[t, trees_order[t]] = np.repeat(np.arange(len(leaves) - 1), np.diff(leaves))
    dist = np.full((n, k), np.inf, dtype=np.float32)
    idx = np.full((n, k), n, dtype=np.int64)
    flag = np.zeros((n, k), dtype=np.bool_)
    run_rows(_leaf_join, n, X, trees_order, trees_leaves, point_leaf, dist, idx, flag)
    if seeds is not None:
        seeds = seeds[perm]  # rows and labels in the relabelled order
        seeds = np.where((seeds >= 0) & (seeds < n), inverse[np.clip(seeds, 0, n - 1)], -1)
        run_rows(_seed_join, n, X, seeds, dist, idx, flag)
    n_sample = min(k, n_sample)
    updates = np.zeros(n, dtype=np.int64)
    fwd, rev = np.empty((n, n_sample), dtype=np.int64), np.empty((n, n_sample), dtype=np.int64)
    fwd_new, rev_new = np.zeros((n, n_sample), dtype=np.bool_), np.zeros((n, n_sample), dtype=np.bool_)
    for _ in range(max_rounds):
        fwd.fill(-1)
        rev.fill(-1)
        _sample_lists(idx, dist, flag, fwd, fwd_new, rev, rev_new)
        run_rows(_descent_round, n, X, fwd, fwd_new, rev, rev_new, dist, idx, flag, updates)
        if updates.sum() <= delta * n * k:
            break
    run_rows(_finish_rows, n, X, dist, idx)
    out_idx = np.empty_like(idx)
    out_dist = np.empty_like(dist)
    out_idx[perm] = perm[idx]
    out_dist[perm] = dist
    return out_idx, _to_metric_units(out_dist, metric)
