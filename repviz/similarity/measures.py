"""Layer-similarity measures between two representations of the same probes: CKA and the Procrustes shape metric.

Every function takes activation arrays of shape (n_probe, ...) (trailing axes flattened to a width; float16, float32
or float64; ``np.memmap`` is read lazily, one minibatch of rows at a time) and computes in float64.

- :func:`linear_cka`, :func:`rbf_cka`: centred kernel alignment (Kornblith et al. 2019), biased (HSIC of the
  centred Gram matrices, H K H) or debiased (the unbiased HSIC estimator of Song et al. 2007, which is the inner
  product of U-centred Gram matrices: Székely & Rizzo 2014, zero diagonal).
- :func:`minibatch_cka`: Nguyen, Raghu & Kornblith 2021: HSIC summed over the minibatches of a seeded permutation
  of the probes, CKA = ΣHSIC(K, L) / sqrt(ΣHSIC(K, K) ΣHSIC(L, L)); not the mean of per-batch CKAs, which is
  biased low for small batches.
- :func:`procrustes_distance`: the angular shape metric of Williams et al. 2021, arccos of the best alignment of
  the centred, unit-norm representations under rotations (a metric on shapes).
- :func:`cka_matrix`, :func:`procrustes_matrix`: all pairs between two lists of representations, each
  representation's Gram matrix computed once per minibatch.

References
----------
Kornblith, Norouzi, Lee & Hinton (2019), Similarity of Neural Network Representations Revisited, ICML.
Song, Smola, Gretton, Borgwardt & Bedo (2007), Supervised feature selection via dependence estimation, ICML.
Székely & Rizzo (2014), Partial distance correlation with methods for dissimilarities, Ann. Statist.
Nguyen, Raghu & Kornblith (2021), Do Wide and Deep Networks Learn the Same Things?, ICLR.
Williams, Kunz, Kornblith & Linderman (2021), Generalized Shape Metrics on Neural Representations, NeurIPS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validation import check_option
from ..meta._kernels import condensed_centred
from ..progress import ProgressCallback, report
from .options import AUTO_BATCH, AUTO_EXACT_PROBES, KERNELS, RBF_SIGMA

#: The packed Gram matrices of one minibatch (m²/2 float64 per representation) held at once; above, cka_matrix
#: forms them in groups (see ``_hsic_sums``).
STACK_BYTES = 512 << 20
#: A ``batch_size`` with which even two representations' Gram matrices pass this many bytes is refused.
MAX_STACK_BYTES = 4 << 30


# --- input --------------------------------------------------------------------------------------------------

def _rows(X, name: str) -> np.ndarray:
    """``X`` as (n, width) without reading it (a memmap stays a memmap)."""
    if not hasattr(X, "shape") or not hasattr(X, "dtype"):
        X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"{name} must have shape (n_probe, width, ...); got shape {X.shape}")
    if X.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    return X.reshape(X.shape[0], -1)


#: Probes a comparison needs: two centred points always have the same shape (every biased CKA would be 1, every
#: Procrustes distance 0), and the debiased HSIC divides by (n - 3).
MIN_PROBES, MIN_PROBES_DEBIASED = 3, 4


def _probes(reps: list[np.ndarray], names: list[str], minimum: int) -> int:
    n = reps[0].shape[0]
    for X, name in zip(reps, names):
        if X.shape[0] != n:
            raise ValueError(f"{name} has {X.shape[0]} probes but {names[0]} has {n}; similarity compares "
                             f"representations of the same probes")
    if n < minimum:
        raise ValueError(f"{names[0]} has {n} probe(s); this measure needs at least {minimum}")
    return n


def _centred(X: np.ndarray, idx: np.ndarray | None, name: str) -> np.ndarray:
    """Rows ``idx`` (all when None) of ``X`` minus their mean, in float64 (written once, by the subtraction).

    Centring first keeps the Gram entries of the order of the spread, not of the mean (ReLU activations sit far
    from 0), so float64 rounding stays relative to what the centrings leave.
    """
    B = np.asarray(X if idx is None else X[idx])
    mean = B.mean(axis=0, dtype=np.float64)
    if not np.isfinite(mean).all():
        raise ValueError(f"{name} contains NaN or infinity; a representation must be finite")
    Z = np.empty(B.shape)
    np.subtract(B, mean, out=Z)
    return Z


# --- kernels and centring --------------------------------------------------------------------------------------

def _sq_dists(G: np.ndarray) -> np.ndarray:
    """Squared distances from the Gram matrix of centred rows, clipped at 0 (rounding)."""
    d = np.diagonal(G)
    D = d[:, None] + d[None, :] - 2.0 * G
    np.maximum(D, 0.0, out=D)
    np.fill_diagonal(D, 0.0)
    return D


def _gram(X: np.ndarray, idx: np.ndarray | None, kernel: str, sigma: float, name: str) -> np.ndarray:
    """The Gram matrix of the centred rows ``idx`` of ``X``: linear, or Gaussian with bandwidth sigma·(median
    distance)."""
    Z = _centred(X, idx, name)
    G = Z @ Z.T  # float64 SYRK
    if kernel == "linear":
        return G
    D = _sq_dists(G)
    median = float(np.median(np.sqrt(D[np.triu_indices(len(D), 1)])))
    if not median > 0:
        raise ValueError(f"{name}: more than half of the probe pairs coincide, so the median distance (the RBF "
                         f"bandwidth) is 0; use kernel='linear'")
    D *= -0.5 / (sigma * median) ** 2
    return np.exp(D, out=D)


def _pack_centred(K: np.ndarray, debiased: bool, out: np.ndarray) -> None:
    """``out`` = the centred Gram matrix, packed so that plain dot products of packed vectors are Frobenius ones.

    Debiased: sqrt(2)·upper(Ũ(K)), Ũ(K)_ij = K_ij - m_i - m_j (i ≠ j; zero diagonal) with m = c/(n-2) -
    Σc/(2(n-1)(n-2)), c the column sums of K without its diagonal, so that ⟨Ũ(K), Ũ(L)⟩ / (n(n-3)) is Song et al.'s
    unbiased HSIC. Biased: [diag(HKH), sqrt(2)·upper(HKH)], HKH_ij = K_ij - r_i - r_j + r̄ (r the row means), with
    ⟨HKH, HLH⟩ / (n-1)² the biased HSIC. One pass over K besides its column sums.
    """
    n = len(K)
    diag = np.diagonal(K).copy()
    if debiased:
        means = (K.sum(axis=0) - diag) / (n - 2)
        means -= means.sum() / (2 * (n - 1))
        condensed_centred(K, means, 0.0, np.sqrt(2.0), out)
    else:
        r = K.mean(axis=0)
        grand = float(r.mean())
        out[:n] = diag - 2.0 * r + grand
        condensed_centred(K, r, grand, np.sqrt(2.0), out[n:])


def _hsic_scale(n: int, debiased: bool) -> float:
    return 1.0 / (n * (n - 3)) if debiased else 1.0 / (n - 1) ** 2


def _packed_length(n: int, debiased: bool) -> int:
    return n * (n - 1) // 2 + (0 if debiased else n)


# --- minibatches ------------------------------------------------------------------------------------------

def _batches(n: int, batch_size: int, random_state) -> list[np.ndarray | None]:
    """[None] (all probes, exact) when n ≤ batch_size, else a seeded permutation split into near-equal batches.

    Each batch is sorted, so a memmap is read front to back; the order inside a batch changes no HSIC.
    """
    if n <= batch_size:
        return [None]
    perm = np.random.default_rng(random_state).permutation(n)
    return [np.sort(b) for b in np.array_split(perm, -(-n // batch_size))]


def _stack_bytes(m: int, n_reps: int, debiased: bool) -> int:
    """The packed Gram matrices of ``n_reps`` representations over ``m`` probes, plus one Gram and its input."""
    return 8 * (n_reps * _packed_length(m, debiased) + 2 * m * m)


def _groups(index: list[int], size: int) -> list[list[int]]:
    return [index[s:s + size] for s in range(0, len(index), size)]


def _hsic_sums(reps: list[np.ndarray], names: list[str], rows: list[int], cols: list[int] | None, *, kernel: str,
               debiased: bool, sigma: float, batches: list[np.ndarray | None], n: int,
               progress: ProgressCallback | None) -> tuple[np.ndarray, np.ndarray]:
    """Sums over minibatches of the HSIC estimate between ``rows`` and ``cols`` (None: ``rows`` with themselves),
    and of every representation's HSIC with itself.

    Per minibatch, each representation's centred (or U-centred) Gram matrix is packed as one row of a matrix
    (m(m-1)/2 [+ m] columns); one matrix product of those rows gives every pair's inner product. When the rows of
    all representations pass ``STACK_BYTES``, they are formed in groups that fit two at a time, and a group of
    columns is recomputed for each group of rows it meets (the price of bounded memory).
    """
    symmetric = cols is None
    every = rows if symmetric else rows + cols
    per = 8 * _packed_length(n if batches[0] is None else max(len(b) for b in batches), debiased)
    if len(every) * per <= STACK_BYTES:  # everything fits: one stack, one product
        schedule = [(every, [])]
    else:  # (row group, the column groups it meets); the column group equal to the row group needs no second Gram
        size = max(1, STACK_BYTES // (2 * per))
        row_groups = _groups(rows, size)
        col_groups = row_groups if symmetric else _groups(cols, size)
        schedule = [(ga, col_groups[i:] if symmetric else col_groups) for i, ga in enumerate(row_groups)]
    units = sum(len(ga) + sum(len(gb) for gb in gbs if gb is not ga) for ga, gbs in schedule)
    H = np.zeros((len(rows), len(rows if symmetric else cols)))
    diag = np.zeros(len(reps))
    position = {r: k for k, r in enumerate(rows)} | ({} if symmetric else {c: k for k, c in enumerate(cols)})
    grams = iter(range(1, len(batches) * units + 1))

    def stack(group: list[int], idx: np.ndarray | None) -> np.ndarray:
        m = n if idx is None else len(idx)
        out = np.empty((len(group), _packed_length(m, debiased)))
        for k, r in enumerate(group):
            _pack_centred(_gram(reps[r], idx, kernel, sigma, names[r]), debiased, out[k])
            report(progress, "similarity", next(grams), len(batches) * units)
        return out

    for idx in batches:
        scale = _hsic_scale(n if idx is None else len(idx), debiased)
        for i, (ga, gbs) in enumerate(schedule):
            A = stack(ga, idx)
            G = (A @ A.T) * scale
            diag[ga] += np.diagonal(G)
            if not gbs:  # the single stack of every representation, rows first
                H += G if symmetric else G[:len(rows), len(rows):]
                continue
            ra = [position[r] for r in ga]
            for gb in gbs:
                B = A if gb is ga else stack(gb, idx)
                if not symmetric and i == 0:
                    diag[gb] += np.einsum("ij,ij->i", B, B) * scale
                H[np.ix_(ra, [position[c] for c in gb])] += G if gb is ga else (A @ B.T) * scale
    if symmetric:
        H = np.triu(H) + np.triu(H, 1).T
    return H, diag


# --- CKA -----------------------------------------------------------------------------------------------------

def linear_cka(X, Y, *, debiased: bool = False) -> float:
    """Linear CKA between two representations of the same probes (Kornblith et al. 2019).

    Parameters
    ----------
    X, Y : arrays of shape (n_probe, ...)
        Activations (trailing axes flattened); widths may differ.
    debiased : bool, default=False
        Use the unbiased HSIC estimator (Song et al. 2007) instead of the biased one: the value of two independent
        representations is then near 0 for any width, where the biased one grows with width / n_probe.

    Returns
    -------
    float
        In [0, 1] (biased); the debiased value can fall slightly below 0.

    Computed from the (width × width) cross-covariances, ||XᵀY||_F² plus O(n·width) correction terms for the
    debiased estimator, when that is cheaper than the n×n Gram matrices (widths well below n_probe) or when those
    would pass ``STACK_BYTES`` (above about 4,700 probes), else from the Gram matrices; both are exact.
    """
    X, Y = _rows(X, "X"), _rows(Y, "Y")
    n = _probes([X, Y], ["X", "Y"], MIN_PROBES_DEBIASED if debiased else MIN_PROBES)
    p, q = X.shape[1], Y.shape[1]
    gram_cheaper = p * q + (p * p + q * q) / 2 > n * (p + q) / 2
    if gram_cheaper and _stack_bytes(n, 2, debiased) <= STACK_BYTES:
        return _gram_cka(X, Y, kernel="linear", debiased=debiased, sigma=RBF_SIGMA, owner="linear_cka")
    Xc, Yc = _centred(X, None, "X"), _centred(Y, None, "Y")
    hsic = _feature_hsic(Xc, Yc, debiased)
    norm = np.sqrt(_feature_hsic(Xc, Xc, debiased) * _feature_hsic(Yc, Yc, debiased))
    if not norm > 0:
        raise ValueError("a representation is constant over the probes (its centred Gram matrix is zero), so its "
                         "CKA is undefined; leave it out")
    return float(hsic / norm)


def _feature_hsic(Xc: np.ndarray, Yc: np.ndarray, debiased: bool) -> float:
    """n(n-3)·HSIC_unbiased or the biased ⟨HKH, HLH⟩ of linear kernels from centred features, in O(n·p·q).

    For centred rows, K̃ = K - diag(K) has K̃1 = -diag(K), so Song et al.'s terms are tr(K̃L̃) = ||XᵀY||² - dK·dL,
    1ᵀK̃1 = -ΣdK and 1ᵀK̃L̃1 = dK·dL.
    """
    C = Xc.T @ Yc
    cross = float(np.einsum("ij,ij->", C, C))
    if not debiased:
        return cross
    n = len(Xc)
    dK, dL = np.einsum("ij,ij->i", Xc, Xc), np.einsum("ij,ij->i", Yc, Yc)
    kl = float(dK @ dL)
    return cross - kl + dK.sum() * dL.sum() / ((n - 1) * (n - 2)) - 2.0 * kl / (n - 2)


def _gram_cka(X, Y, *, kernel: str, debiased: bool, sigma: float, owner: str) -> float:
    """CKA from the two full n×n Gram matrices (one batch)."""
    return float(_cka_block([X], [Y], ["X"], ["Y"], kernel=kernel, debiased=debiased, sigma=sigma, owner=owner,
                            batch_size=max(X.shape[0], 8))[0, 0])


def rbf_cka(X, Y, *, sigma: float = RBF_SIGMA, debiased: bool = False) -> float:
    """CKA with Gaussian kernels exp(-d²/(2 (sigma·median d)²)), each representation with its own bandwidth.

    ``sigma`` is the bandwidth as a fraction of the median distance between probes (Kornblith et al. 2019 report
    0.2-0.8; 0.8 is close to linear CKA). The median is over the n(n-1)/2 pairs of distinct probes (Kornblith's
    code takes the median of all n² squared distances, the n zeros of the diagonal included, which shifts it
    slightly for small n). Time O(n² width), memory O(n²).
    """
    return _gram_cka(X, Y, kernel="rbf", debiased=debiased, sigma=sigma, owner="rbf_cka")


def minibatch_cka(X, Y, *, batch_size: int = 1024, random_state=0, debiased: bool = True) -> float:
    """Minibatch linear CKA (Nguyen, Raghu & Kornblith 2021): HSIC accumulated over minibatches of the probes.

    The probes are split into ceil(n / batch_size) near-equal minibatches (``np.array_split`` of
    ``np.random.default_rng(random_state).permutation(n)``); CKA is ΣHSIC(K, L) / sqrt(ΣHSIC(K, K)·ΣHSIC(L, L))
    over them. The unbiased HSIC (default) keeps the estimate centred on the full-batch value whatever the batch
    size; the biased one drifts upward as batches shrink. With ``batch_size >= n`` it is the exact CKA.
    Time O(n·batch_size·width), memory O(batch_size²).
    """
    return float(_cka_block([X], [Y], ["X"], ["Y"], debiased=debiased, batch_size=batch_size,
                            random_state=random_state, owner="minibatch_cka")[0, 0])


def cka_matrix(reps_a: Sequence[np.ndarray], reps_b: Sequence[np.ndarray] | None = None, *, kernel: str = "linear",
               debiased: bool = True, batch_size: int | None = None, random_state=0,
               progress: ProgressCallback | None = None, sigma: float = RBF_SIGMA) -> np.ndarray:
    """CKA between every representation of ``reps_a`` and every one of ``reps_b`` (default: ``reps_a`` itself).

    Parameters
    ----------
    reps_a, reps_b : sequences of arrays of shape (n_probe, ...)
        Representations of the same probes; read one minibatch of rows at a time (``np.memmap`` welcome).
    kernel : {"linear", "rbf"}, default="linear"
    debiased : bool, default=True
        Unbiased HSIC (Song et al. 2007) rather than the biased estimator.
    batch_size : int or None, default=None
        Probes per minibatch (Nguyen et al. 2021); exact (one batch) when n_probe <= batch_size. None: exact up
        to ``AUTO_EXACT_PROBES`` (2,048) probes, minibatches of ``AUTO_BATCH`` (1,024) above: a value depends on
        n_probe and the options only, never on the other representations in the call.
    random_state : int, default=0
        Seeds the permutation that forms the minibatches.
    progress : callable or None
        Receives ``("similarity", done, total)``, one unit per Gram matrix computed (:mod:`repviz.progress`).
    sigma : float, default=0.8
        RBF bandwidth as a fraction of the median distance (in each minibatch), see :func:`rbf_cka`.

    Returns
    -------
    ndarray of shape (len(reps_a), len(reps_b))
        Symmetric with ones on the diagonal when ``reps_b`` is None.

    Time O(n·m·Σwidth) for the Gram matrices (m the minibatch size) plus O(n·m·R²) for the pairs; memory
    R·m²/2 float64 (R representations) up to ``STACK_BYTES`` (512 MB), above which groups of representations
    that fit are formed and some Gram matrices computed more than once.
    """
    if reps_b is not None and not len(reps_b) or not len(reps_a):
        raise ValueError("cka_matrix needs at least one representation on each side")
    return _cka_block(reps_a, reps_b, [f"reps_a[{i}]" for i in range(len(reps_a))],
                      None if reps_b is None else [f"reps_b[{i}]" for i in range(len(reps_b))], kernel=kernel,
                      debiased=debiased, batch_size=batch_size, random_state=random_state, progress=progress,
                      sigma=sigma, owner="cka_matrix")


def _cka_block(reps_a, reps_b, names_a: list[str], names_b: list[str] | None, *, kernel: str = "linear",
               debiased: bool, batch_size: int | None, random_state=0, progress: ProgressCallback | None = None,
               sigma: float = RBF_SIGMA, owner: str) -> np.ndarray:
    """:func:`cka_matrix` with the representations' names for errors and the public function's name."""
    check_option(kernel, KERNELS, "kernel", owner)
    if kernel == "rbf" and (isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma > 0):
        raise ValueError(f"The 'sigma' parameter of {owner} must be a float > 0. Got {sigma!r} instead.")
    names = names_a + (names_b or [])
    reps = [_rows(X, name) for X, name in zip(list(reps_a) + list(reps_b or []), names)]
    n = _probes(reps, names, MIN_PROBES_DEBIASED if debiased else MIN_PROBES)
    if batch_size is None:
        batch_size = AUTO_EXACT_PROBES if n <= AUTO_EXACT_PROBES else AUTO_BATCH
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 8:
        raise ValueError(f"The 'batch_size' parameter of {owner} must be an int >= 8 (each minibatch needs 4 probes "
                         f"for the unbiased HSIC) or None. Got {batch_size!r} instead.")
    m = min(n, int(batch_size))
    if (need := _stack_bytes(m, 2, debiased)) > MAX_STACK_BYTES:
        raise ValueError(f"{owner}: the Gram matrices of {m:,} probes take {need / 2**30:.1f} GiB for two "
                         f"representations (over {MAX_STACK_BYTES / 2**30:.0f}); pass a smaller batch_size "
                         f"(minibatch CKA) or batch_size=None")
    rows = list(range(len(names_a)))
    cols = None if names_b is None else list(range(len(names_a), len(reps)))
    H, d = _hsic_sums(reps, names, rows, cols, kernel=kernel, debiased=debiased, sigma=sigma,
                      batches=_batches(n, int(batch_size), random_state), n=n, progress=progress)
    if (flat := np.flatnonzero(~(d > 0))).size:
        raise ValueError(f"{names[flat[0]]}: all probe points coincide (its centred Gram matrix is zero), so its CKA "
                         f"is undefined; leave it out")
    C = H / np.sqrt(np.outer(d[rows], d[rows if cols is None else cols]))
    if names_b is None:
        np.fill_diagonal(C, 1.0)
    return C


# --- Procrustes ------------------------------------------------------------------------------------------------

def _shape(X: np.ndarray, name: str) -> np.ndarray:
    """Centred, unit-Frobenius-norm ``X`` reduced to at most n columns with the same Gram matrix.

    A width above n is replaced by the n×n factor Rᵀ of Xᵀ = QR (X Xᵀ = Rᵀ R): rotations of the feature space
    leave the metric unchanged, so XᵀY's singular values are those of R_X R_Yᵀ.
    """
    Z = _centred(X, None, name)
    norm = np.linalg.norm(Z)
    if not norm > 0:
        raise ValueError(f"{name} is constant over the probes, so it has no shape to compare; leave it out")
    Z /= norm
    if Z.shape[1] > Z.shape[0]:
        Z = np.linalg.qr(Z.T, mode="r").T
    return Z


def _angle(Zx: np.ndarray, Zy: np.ndarray) -> float:
    nuclear = np.linalg.svd(Zx.T @ Zy, compute_uv=False).sum()
    return float(np.arccos(np.clip(nuclear, -1.0, 1.0)))


def procrustes_distance(X, Y) -> float:
    """The angular Procrustes shape distance (Williams et al. 2021) between two representations of the same probes.

    Both are centred, scaled to unit Frobenius norm and (implicitly) zero-padded to a common width; the distance
    is arccos(max over orthogonal Q of ⟨X, YQ⟩) = arccos(||XᵀY||_*), in [0, π/2]. We use this angular form, not
    the Euclidean sqrt(2 - 2||XᵀY||_*) of the same alignment, because it is the one Williams et al. prove to be a
    metric on the sphere of shapes (their eq. 5) and it spreads near-identical layers less thinly near 0.
    It is invariant to translations, isotropic scaling and rotations of either side.

    Computed from min(n_probe, width) columns per side (a QR factor when width > n_probe): time
    O(n·min(n, p)·min(n, q)), memory O(n·min(n, width)).
    """
    X, Y = _rows(X, "X"), _rows(Y, "Y")
    _probes([X, Y], ["X", "Y"], MIN_PROBES)
    return _angle(_shape(X, "X"), _shape(Y, "Y"))


def procrustes_matrix(reps_a: Sequence[np.ndarray], reps_b: Sequence[np.ndarray] | None = None, *,
                      progress: ProgressCallback | None = None) -> np.ndarray:
    """:func:`procrustes_distance` between every representation of ``reps_a`` and of ``reps_b`` (default: ``reps_a``).

    Each representation is centred, normalised and reduced once while the reduced ones fit in ``STACK_BYTES``
    (n·min(n, width) float64 each), again for each pair beyond; symmetric with zeros on the diagonal when
    ``reps_b`` is None.
    """
    a = [_rows(X, f"reps_a[{i}]") for i, X in enumerate(reps_a)]
    b = [] if reps_b is None else [_rows(X, f"reps_b[{i}]") for i, X in enumerate(reps_b)]
    names = [f"reps_a[{i}]" for i in range(len(a))] + [f"reps_b[{i}]" for i in range(len(b))]
    if not a or (reps_b is not None and not b):
        raise ValueError("procrustes_matrix needs at least one representation on each side")
    _probes(a + b, names, MIN_PROBES)
    reps, kept, room = a + b, {}, [STACK_BYTES]

    def shape(k: int) -> np.ndarray:
        if k in kept:
            return kept[k]
        Z = _shape(reps[k], names[k])
        if Z.nbytes <= room[0]:
            kept[k], room[0] = Z, room[0] - Z.nbytes
        return Z

    cols = range(len(a)) if reps_b is None else range(len(a), len(reps))
    pairs = [(i, j) for i in range(len(a)) for j in cols if reps_b is not None or j > i]
    D = np.zeros((len(a), len(cols)))
    for k, (i, j) in enumerate(pairs):
        D[i, j - cols.start] = _angle(shape(i), shape(j))
        report(progress, "similarity", k + 1, len(pairs))
    if reps_b is None:
        D += D.T
    return D
