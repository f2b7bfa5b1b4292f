"""One vector per representation: the probe pairwise-distance structure, normalised to unit norm.

A representation X (n_probe, width) becomes ``v̂ = v / ||v||`` where ``v`` lists, for every pair of probes
(i < j, scipy's condensed order), a function of their distance. The vector ignores everything distances ignore:
rotations, permutations of units, translations; the normalisation removes isotropic scale and layer width.

Transforms (``TRANSFORMS``):

- ``"dist"``: the distance d_ij (Olah 2015).
- ``"sqrt"``: sqrt(d_ij), which gives close pairs more weight.
- ``"rank"``: the rank of d_ij among all pairs, centred, so the cosine of two vectors is Spearman's correlation
  of the two distance matrices (representational similarity analysis).
- ``"cka"``: the double-centred Gram matrix K = -1/2 H D² H = H X Xᵀ H, stored as its n diagonal entries followed
  by sqrt(2)·(upper triangle), so that the plain dot product of two vectors is ⟨K_X, K_Y⟩_F and the cosine is
  linear CKA (Kornblith et al. 2019).
- ``"rbf_cka"``: the same for the Gaussian kernel exp(-d²/(2σ²)), σ the median pair distance (kernel CKA).
- ``"ucka"``: the U-centred Gram matrix Ũ(X Xᵀ) (Székely & Rizzo 2014; zero diagonal), stored as sqrt(2)·(upper
  triangle), so that the dot product of two vectors is ⟨Ũ(K_X), Ũ(K_Y)⟩_F, n(n-3) times the unbiased HSIC
  estimator of Song et al. 2007, and the cosine is debiased linear CKA (near 0 for unrelated representations
  at any width, where "cka" grows with width / n_probe).

Above ``max_probes`` probes the vector holds a fixed, seeded random subset of pairs (:func:`probe_pairs`), the
same for every representation; for ``"cka"`` and ``"ucka"`` the sampled off-diagonal part is reweighted so that
the dot product still estimates ⟨K_X, K_Y⟩_F (⟨Ũ(K_X), Ũ(K_Y)⟩_F; the U-centring terms come from all probes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import rankdata

from .._validation import check_option, rescaled
from . import _kernels
from .options import TRANSFORMS

_KERNEL_TRANSFORMS = ("cka", "rbf_cka")
#: Pair kernels visit the pairs of this many consecutive rows i at a time, sorted by j within: a row j is then
#: read for several pairs while it is cached (at 50,000 probes of width 512, 2.5x fewer CPU seconds than the
#: (i, j) order on a 2-core EPYC with 1 MiB of L2 per core; 4,096 rows was slower again).
PAIR_BLOCK_ROWS = 1024


@dataclass(frozen=True)
class PairSample:
    """Probe pairs (I[p] < J[p]) that a vector holds when not all n(n-1)/2 pairs are used, and the order in which
    the pair kernels visit them (blocks of ``PAIR_BLOCK_ROWS`` rows i, by j within; the vectors keep the (i, j)
    order whatever the visiting order). Computed once and shipped with the tasks that use it."""

    n: int
    I: np.ndarray
    J: np.ndarray
    random_state: int
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.I)

    @property
    def n_total(self) -> int:
        return self.n * (self.n - 1) // 2


def probe_pairs(n: int, n_pairs: int, random_state: int = 0) -> PairSample:
    """A seeded uniform sample of ``n_pairs`` distinct probe pairs, sorted by (i, j).

    Time O(n_pairs log n_pairs), memory O(n_pairs + n); depends only on (n, n_pairs, random_state).
    """
    total = n * (n - 1) // 2
    if not 1 <= n_pairs <= total:
        raise ValueError(f"n_pairs ({n_pairs}) must be in [1, n(n-1)/2 ({total})] for {n} probes")
    codes = np.sort(np.random.default_rng(random_state).choice(total, n_pairs, replace=False, shuffle=False))
    # condensed index k -> (i, j): row i starts at i*n - i(i+1)/2
    starts = np.arange(n, dtype=np.int64)
    starts = starts * n - starts * (starts + 1) // 2
    I = np.searchsorted(starts, codes, side="right") - 1
    J = codes - starts[I] + I + 1
    order = np.argsort((I // PAIR_BLOCK_ROWS) * n + J, kind="stable")
    return PairSample(n, I, J, int(random_state), order.astype(np.int32) if n_pairs < 2**31 else order)


def vector_length(n: int, transform: str, pairs: PairSample | None = None) -> int:
    """Length of the vector of a representation of ``n`` probes."""
    m = len(pairs) if pairs is not None else n * (n - 1) // 2
    return m + (n if transform in _KERNEL_TRANSFORMS else 0)


def _centred(X, name: str) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"{name} must have shape (n_probe, width, ...); got shape {X.shape}")
    X = X.reshape(X.shape[0], -1)
    if X.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    if X.shape[0] < 3:
        raise ValueError(f"{name} has {X.shape[0]} probe(s); comparing representations needs at least 3")
    mean = X.mean(axis=0, dtype=np.float64)
    if not np.isfinite(mean).all():
        raise ValueError(f"{name} contains NaN or infinity; a representation must be finite")
    # Distances ignore translation; centring first keeps float32 Gram entries small (less cancellation), and a
    # power-of-two rescale (exact: the unit vectors do not change) keeps them inside float32 at any scale. Both in
    # float64, rounded once, a block of rows at a time (no float64 copy of X: 400 MB at 50,000 probes x 1,024)
    scale = rescaled(np.stack([X.min(axis=0), X.max(axis=0)]).astype(np.float64))[1]
    Z = np.empty(X.shape, dtype=np.float32)
    step = max(1, (16 << 20) // (8 * max(1, X.shape[1])))
    for s in range(0, len(X), step):
        Z[s:s + step] = (X[s:s + step] - mean) / scale
    return Z


def representation_vectors(X, transforms, pairs: PairSample | None = None,
                           name: str = "X") -> dict[str, np.ndarray]:
    """Unit-norm float32 vectors of one representation, one per transform, sharing one pass over ``X``.

    Parameters
    ----------
    X : array of shape (n_probe, ...)
        Activations; trailing axes are flattened.
    transforms : iterable of str
        Any of ``TRANSFORMS``.
    pairs : PairSample or None
        Use these probe pairs instead of all of them (for large probe sets).
    name : str
        How errors refer to ``X``.

    Time O(n² width) (one float32 GEMM) or O(n_pairs · width) with ``pairs``; memory about 3 n² float32.
    """
    # rbf_cka last: it overwrites the Gram matrix that "cka" reads.
    transforms = sorted(dict.fromkeys(transforms), key=lambda t: t == "rbf_cka")
    for t in transforms:
        check_option(t, TRANSFORMS, "transform", "representation_vectors")
    stored = X
    X = _centred(X, name)
    n = X.shape[0]
    if pairs is not None and pairs.n != n:
        raise ValueError(f"{name} has {n} probes but the pair sample was drawn for {pairs.n}")
    G = X @ X.T if pairs is None else None  # float32 SYRK
    diag = (np.einsum("ij,ij->i", X, X, dtype=np.float64) if G is None else np.diagonal(G).astype(np.float64))
    d2, dots = (None, None) if pairs is None else _pair_terms(X, pairs, transforms)
    out = {}
    for t in transforms:
        if t == "cka":
            v = _kernel_vector(X, G, diag, np.zeros(n), 0.0, pairs, dots)
        elif t == "ucka":
            v = _ucentred_vector(X, G, diag, pairs, name, dots)
        elif t == "rbf_cka":
            v = _rbf_vector(X, G, diag, _dists(G, d2, 0.5), name, pairs)
        elif t == "rank":
            v = _centred_ranks(stored, pairs)
        else:
            v = _dists(G, d2, {"dist": 0.5, "sqrt": 0.25}[t])
        out[t] = _unit(v, name, t)
    return out


_KERNEL_DOTS = ("cka", "ucka")


def _pair_terms(X, pairs: PairSample, transforms) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The squared distances (for the distance transforms) and dot products (for "cka" and "ucka") of the sampled
    pairs, float32, in one pass over the pairs' rows when both are needed; None for the one not needed."""
    need_d, need_k = any(t not in _KERNEL_DOTS for t in transforms), any(t in _KERNEL_DOTS for t in transforms)
    d2 = np.empty(len(pairs), dtype=np.float32) if need_d else None
    dots = np.empty(len(pairs), dtype=np.float32) if need_k else None
    if need_d and need_k:
        _kernels.pair_sq_dists_dots(X, pairs.I, pairs.J, pairs.order, d2, dots)
    elif need_d:
        _kernels.pair_sq_dists(X, pairs.I, pairs.J, pairs.order, d2)
    else:
        _kernels.pair_dots(X, pairs.I, pairs.J, pairs.order, dots)
    return d2, dots


def _dists(G, d2, half_power) -> np.ndarray:
    """(d²)^half_power over all pairs (from the Gram matrix ``G``) or over the sampled pairs (from their squared
    distances ``d2``, when ``G`` is None); a new array."""
    if G is None:
        return d2.copy() if half_power == 1.0 else np.sqrt(d2) if half_power == 0.5 else np.sqrt(np.sqrt(d2))
    v = np.empty(len(G) * (len(G) - 1) // 2, dtype=np.float32)
    _kernels.condensed_dists(G, np.ascontiguousarray(np.diagonal(G)), np.float32(half_power), v)
    return v


def _centred_ranks(X, pairs: PairSample | None) -> np.ndarray:
    """The ranks of the pairs' squared distances, centred, as float32, equal distances sharing their average rank
    (as in ``scipy.stats.spearmanr``).

    Computed from the stored values with float64 differences (exact for float32 activations of similar scale),
    not from the float32 Gram matrix, whose rounding ties distances that differ and splits equal ones: on a
    saturated layer (units at 0 or 1, many equal distances) that moved Spearman's correlation by 1e-2. Memory: a
    float64 copy of ``X`` (all pairs) or of a block of pairs.
    """
    X = np.asarray(X)
    X = X.reshape(X.shape[0], -1)
    if pairs is None:
        d2 = pdist(X.astype(np.float64), "sqeuclidean")
    else:
        d2 = np.empty(len(pairs), dtype=np.float64)
        step = max(1, (16 << 20) // (8 * max(1, X.shape[1])))
        for s in range(0, len(pairs), step):
            diff = X[pairs.I[s:s + step]].astype(np.float64) - X[pairs.J[s:s + step]]
            d2[s:s + step] = np.einsum("ij,ij->i", diff, diff)
    ranks = rankdata(d2)
    return (ranks - ranks.mean()).astype(np.float32)


def _unit(v: np.ndarray, name: str, transform: str) -> np.ndarray:
    norm = float(np.sqrt(_kernels.sum_squares(v)))
    if not norm > 0 or not np.isfinite(norm):
        raise ValueError(f"{name}: all probe points coincide (the {transform!r} vector is zero), so the "
                         f"representation has no geometry to compare; leave it out")
    v = v.astype(np.float32, copy=False)
    v /= np.float32(norm)
    return v


def _kernel_vector(X, K, diag_k, row_means, grand, pairs, dots=None) -> np.ndarray:
    """[diag(HKH), s·upper(HKH)] with s = sqrt(2) (all pairs) or sqrt(2·total/sampled) (a pair sample; for the
    linear kernel, ``K`` is None and ``dots`` holds the pairs' dot products)."""
    n = X.shape[0]
    head = (diag_k - 2.0 * row_means + grand).astype(np.float32)
    body = np.empty(vector_length(n, "dist", pairs), dtype=np.float32)
    if pairs is None:
        _kernels.condensed_centred(K, row_means.astype(np.float32), np.float32(grand), np.float32(np.sqrt(2.0)), body)
    else:
        if K is None:  # linear kernel: K_ij = x_i · x_j, rows already centred
            body[:] = dots
        else:
            body[:] = K
            body -= (row_means[pairs.I] + row_means[pairs.J] - grand).astype(np.float32)
        body *= np.float32(np.sqrt(2.0 * pairs.n_total / len(pairs)))
    return np.concatenate([head, body])


def _ucentred_vector(X, G, diag, pairs, name, dots=None) -> np.ndarray:
    """s·upper(Ũ(K)) of the linear kernel K = X Xᵀ, s = sqrt(2) (all pairs) or sqrt(2·total/sampled).

    Ũ(K)_ij = K_ij - m_i - m_j (i ≠ j) with m = c/(n-2) - Σc/(2(n-1)(n-2)), c the column sums of K without its
    diagonal; c = X(Xᵀ1) - diag(K) needs no Gram matrix, so a pair sample (its dot products ``dots``) is
    U-centred over all probes.
    """
    n = X.shape[0]
    if n < 4:
        raise ValueError(f"{name} has {n} probes; the 'ucka' transform (the unbiased HSIC) needs at least 4")
    if G is None:
        col = (X @ X.sum(axis=0, dtype=np.float64).astype(np.float32)).astype(np.float64)
    else:
        col = G.sum(axis=0, dtype=np.float64)
    means = (col - diag) / (n - 2)
    means -= means.sum() / (2 * (n - 1))
    body = np.empty(vector_length(n, "ucka", pairs), dtype=np.float32)
    if pairs is None:
        _kernels.condensed_centred(G, means.astype(np.float32), np.float32(0.0), np.float32(np.sqrt(2.0)), body)
    else:
        body[:] = dots
        body -= (means[pairs.I] + means[pairs.J]).astype(np.float32)
        body *= np.float32(np.sqrt(2.0 * pairs.n_total / len(pairs)))
    return body


def _rbf_vector(X, G, diag, d, name, pairs) -> np.ndarray:
    sigma = float(np.median(d))
    if sigma <= 0:
        raise ValueError(f"{name}: more than half of the probe pairs coincide, so the median distance "
                         f"(the RBF bandwidth of rbf_cka) is 0; use transform='cka' or 'dist'")
    gamma = -0.5 / sigma**2
    if pairs is None:
        K = G  # overwritten in place: exp(-(|x_i|² + |x_j|² - 2 x_i·x_j) / 2σ²)
        K *= np.float32(-2.0)
        K += diag.astype(np.float32)[:, None]
        K += diag.astype(np.float32)[None, :]
        np.maximum(K, 0, out=K)
        K *= np.float32(gamma)
        np.exp(K, out=K)
        r = K.mean(axis=1, dtype=np.float64)
        return _kernel_vector(X, K, np.ones(len(X)), r, float(r.mean()), None)
    r = _rbf_row_means(X, diag, gamma)
    Kp = np.exp(np.square(d, dtype=np.float64) * gamma).astype(np.float32)
    return _kernel_vector(X, Kp, np.ones(len(X)), r, float(r.mean()), pairs)


def _rbf_row_means(X, diag, gamma, block_bytes: int = 64 << 20) -> np.ndarray:
    """Row means of the full n×n RBF kernel, in row blocks (memory O(block · n))."""
    n = X.shape[0]
    step = max(1, block_bytes // (4 * n))
    r = np.empty(n)
    d32 = diag.astype(np.float32)
    for s in range(0, n, step):
        B = X[s:s + step] @ X.T
        B *= np.float32(-2.0)
        B += d32[s:s + step, None]
        B += d32[None, :]
        np.maximum(B, 0, out=B)
        B *= np.float32(gamma)
        np.exp(B, out=B)
        r[s:s + step] = B.mean(axis=1, dtype=np.float64)
    return r
