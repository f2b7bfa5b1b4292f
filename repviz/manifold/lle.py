"""Locally linear embedding and its variants: standard (Roweis & Saul 2000), modified (Zhang & Wang 2006),
Hessian (Donoho & Grimes 2003) and local tangent space alignment (Zhang & Zha 2004).

Every variant builds a sparse, symmetric positive semi-definite alignment matrix M from one small dense
problem per point, solved by numpy's stacked linear algebra over blocks of points (about 0.1 s for 10,000 points,
far below the eigensolve; numba's linear algebra took seconds to compile in each new process), then embeds
with the bottom eigenvectors of M after the constant one. Standard LLE forms M = (I - W)ᵀ (I - W) from the
sparse weights W; the other variants sum one dense block per neighbourhood into a CSR matrix. Memory is
O(n k²); nothing is n×n.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, splu

from .._validation import (
    NONE,
    RANDOM_STATE,
    Interval,
    Options,
    check_array,
    check_n_components,
    check_n_features,
    check_n_neighbors,
    rescaled,
)
from ..neighbors import KNN_METHODS
from ._base import Estimator
from ._eigen import SOLVERS, eigsolve
from ._fitted_neighbors import FittedNeighbors
from ._graph import neighbor_graph


def _row_blocks(n: int, k: int, d: int, block_bytes: int = 64 << 20) -> list[slice]:
    """Slices of ``range(n)`` whose (rows, k, max(k, d)) float64 local arrays take about ``block_bytes``."""
    rows = max(1, block_bytes // (8 * k * max(d, k)))
    return [slice(start, min(n, start + rows)) for start in range(0, n, rows)]


def _neighbourhoods(X: np.ndarray, ind: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
    """The rows ``X[ind]`` as float64 (m, k, d), minus ``centre`` (m, d), or minus their own mean when it is None."""
    Z = X[ind].astype(np.float64)
    return Z - (Z.sum(axis=1, keepdims=True) / Z.shape[1] if centre is None else centre[:, None, :])


def _barycentric_weights(Q: np.ndarray, X: np.ndarray, ind: np.ndarray, reg: float) -> np.ndarray:
    """Weights reconstructing each point of Q from its neighbours ``X[ind]`` (sum 1), by a regularised local
    Gram solve."""
    n, k = ind.shape
    weights = np.empty((n, k))
    for rows in _row_blocks(n, k, X.shape[1]):
        Z = _neighbourhoods(X, ind[rows], Q[rows])
        C = Z @ Z.transpose(0, 2, 1)
        tr = np.trace(C, axis1=1, axis2=2)
        # a singular local Gram (k > d, duplicates) is made invertible
        C[:, np.arange(k), np.arange(k)] += np.where(tr > 0, reg * tr, reg)[:, None]
        w = np.linalg.solve(C, np.ones((len(C), k, 1)))[..., 0]
        weights[rows] = w / w.sum(axis=1, keepdims=True)
    return weights


def _local_spectra(X: np.ndarray, ind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (n, k), decreasing and clipped at 0, and eigenvectors (n, k, k) of each neighbourhood's Gram
    matrix G Gᵀ, G = X[nbrs] - X[i]."""
    n, k = ind.shape
    evals, evecs = np.empty((n, k)), np.empty((n, k, k))
    for rows in _row_blocks(n, k, X.shape[1]):
        Z = _neighbourhoods(X, ind[rows], X[rows])
        w, V = np.linalg.eigh(Z @ Z.transpose(0, 2, 1))
        evals[rows] = np.maximum(w[:, ::-1], 0.0)
        evecs[rows] = V[:, :, ::-1]
    return evals, evecs


def _modified_blocks(evals: np.ndarray, evecs: np.ndarray, eta: float, modified_tol: float) -> np.ndarray:
    """MLLE blocks Ŵ Ŵᵀ (n, k + 1, k + 1) over [i, nbrs], Ŵ = [-1ᵀ; W_i], W_i from the s_i-dimensional almost-null
    space; the points of one s_i are computed together."""
    n, k = evals.shape
    # regularised barycentric weights from the local spectrum: w = V diag(1/(ev+reg)) Vᵀ 1, normalised
    reg = 1e-3 * evals.sum(axis=1)
    t = evecs.sum(axis=1) / (evals + reg[:, None])
    w_reg = (evecs @ t[:, :, None])[:, :, 0]
    w_reg /= w_reg.sum(axis=1, keepdims=True)
    # s_i: the largest tail of eigenvalues whose sum, relative to the rest, stays below eta (at least 1)
    tail = np.cumsum(evals[:, :0:-1], axis=1)
    head = evals.sum(axis=1, keepdims=True) - tail
    small = (head > 0) & (tail / np.where(head > 0, head, 1.0) < eta)
    s_all = np.maximum(np.cumprod(small, axis=1).sum(axis=1), 1)
    blocks = np.empty((n, k + 1, k + 1))
    for s in np.unique(s_all):
        idx = np.flatnonzero(s_all == s)
        Vi = evecs[idx][:, :, k - s:]
        ones_proj = Vi.sum(axis=1)
        alpha = np.sqrt((ones_proj ** 2).sum(axis=1)) / np.sqrt(s)
        h = alpha[:, None] - ones_proj
        norm_h = np.sqrt((h ** 2).sum(axis=1))
        h = np.where((norm_h < modified_tol)[:, None], 0.0, h / np.where(norm_h > 0, norm_h, 1.0)[:, None])
        Wi = Vi - 2.0 * (Vi @ h[:, :, None]) * h[:, None, :] + (1.0 - alpha)[:, None, None] * w_reg[idx][:, :, None]
        What = np.concatenate([np.full((len(idx), 1, s), -1.0), Wi], axis=1)
        blocks[idx] = What @ What.transpose(0, 2, 1)
    return blocks


def _hessian_blocks(X: np.ndarray, ind: np.ndarray, n_components: int, hessian_tol: float) -> np.ndarray:
    """HLLE blocks w wᵀ (n, k, k) over nbrs, w spanning the local Hessian estimator (orthogonal to 1, tangents,
    products)."""
    n, k = ind.shape
    nc = n_components
    blocks = np.empty((n, k, k))
    for rows in _row_blocks(n, k, X.shape[1]):
        G = _neighbourhoods(X, ind[rows])
        _, V = np.linalg.eigh(G @ G.transpose(0, 2, 1))
        U = V[:, :, ::-1][:, :, :nc]
        products = [U[:, :, p] * U[:, :, q] for p in range(nc) for q in range(p, nc)]
        Y = np.concatenate([np.ones((len(U), k, 1)), U, np.stack(products, axis=2)], axis=2)
        Q, _ = np.linalg.qr(Y)
        w = Q[:, :, nc + 1:]
        S = w.sum(axis=1, keepdims=True)
        w = np.where(np.abs(S) >= hessian_tol, w / np.where(S != 0, S, 1.0), w)
        blocks[rows] = w @ w.transpose(0, 2, 1)
    return blocks


def _ltsa_blocks(X: np.ndarray, ind: np.ndarray, n_components: int) -> np.ndarray:
    """LTSA blocks I - G Gᵀ (n, k, k) over nbrs, G = [1/sqrt(k), top local tangent coordinates]."""
    n, k = ind.shape
    blocks = np.empty((n, k, k))
    for rows in _row_blocks(n, k, X.shape[1]):
        Z = _neighbourhoods(X, ind[rows])
        _, V = np.linalg.eigh(Z @ Z.transpose(0, 2, 1))
        tangents = V[:, :, ::-1][:, :, :n_components]
        G = np.concatenate([np.full((len(V), k, 1), 1.0 / np.sqrt(k)), tangents], axis=2)
        B = -(G @ G.transpose(0, 2, 1))
        B[:, np.arange(k), np.arange(k)] += 1.0
        blocks[rows] = B
    return blocks


def _assemble(blocks: np.ndarray, idx: np.ndarray, n: int) -> sp.csr_matrix:
    """Sum the per-point dense blocks over their index sets into a symmetric CSR matrix."""
    b = idx.shape[1]
    rows = np.repeat(idx, b, axis=1).ravel()
    cols = np.tile(idx, (1, b)).ravel()
    M = sp.coo_matrix((blocks.ravel(), (rows, cols)), shape=(n, n)).tocsr()
    M.sum_duplicates()
    return M


def _inverse_of_gram(B: sp.csc_matrix) -> LinearOperator:
    """(Bᵀ B)⁻¹ through a sparse LU of B + eps I, eps = 1e-10.

    Standard LLE's M = (I - W)ᵀ (I - W) has k² non-zeros per row but its square root B = I - W only k + 1, and
    the LU of B fills in about half as much as M's, so shift-invert is 2-4× cheaper this way. B is singular
    (B 1 = 0), hence the shift; it moves the eigenvalues by about eps ||B + Bᵀ||, far below their gaps."""
    n = B.shape[0]
    lu = splu((B + 1e-10 * sp.identity(n)).tocsc(), permc_spec="COLAMD")
    return LinearOperator((n, n), matvec=lambda x: lu.solve(lu.solve(x, trans="T")), dtype=np.float64)


def _min_neighbors(method: str, n_components: int) -> int:
    if method == "hessian":
        return n_components * (n_components + 3) // 2 + 1
    if method == "modified":
        return n_components
    return 1


class LocallyLinearEmbedding(Estimator):
    """Locally linear embedding, standard or one of its variants.

    Each point is described by its ``n_neighbors`` nearest neighbours; the variants differ in the local model
    (barycentric weights, several weight vectors, a Hessian estimator, a tangent space) but all sum local
    blocks into a sparse alignment matrix M whose bottom eigenvectors (after the constant one) are the
    embedding. Cost: kNN as in :func:`repviz.neighbors.knn`; local problems O(n k² (k + d)) time; M has
    O(n k²) non-zeros; the eigensolve is ARPACK in shift-invert mode around 0 (a sparse LU of M) or dense
    ``eigh`` for n <= 1,000 (O(n²) memory).

    Parameters
    ----------
    n_neighbors : int, default=5
        Must exceed n_components (and n_components (n_components + 3) / 2 for "hessian"), and be < n_samples.
    n_components : int, default=2
    method : {"standard", "modified", "hessian", "ltsa"}, default="standard"
        "hessian" follows Donoho & Grimes: the local Hessian estimator is the last n_components (n_components
        + 1) / 2 columns of the orthonormalised [1, tangent coordinates, their products]; scikit-learn also adds
        the rest of the orthogonal complement (full QR), so its embeddings differ slightly.
    reg : float, default=1e-3
        Regularisation of each local Gram matrix, relative to its trace (needed whenever n_neighbors >
        n_features, or points are duplicated, since the Gram matrix is then singular).
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"}, default="auto"
    tol : float, default=1e-6
        Tolerance of the iterative eigensolver.
    max_iter : int or None, default=None
    hessian_tol, modified_tol : float
        Thresholds of the Hessian and modified variants (as in scikit-learn).
    metric : {"euclidean", "cosine"}, default="euclidean"
        Metric used to choose neighbours (the local models are Euclidean).
    neighbors : {"exact", "nndescent", "auto"}, default="exact"
        Neighbour search, passed to :func:`repviz.neighbors.knn` as ``method`` (the same option as TSNE's).
    random_state : int, Generator or None, default=None
        Seeds the eigensolver's start vector.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
        Columns signed so their largest-magnitude entry is positive.
    reconstruction_error_ : float
        Sum of the eigenvalues of M kept (the alignment cost of the embedding).
    nbrs_ : FittedNeighbors
        The neighbour search over the fitted points (scikit-learn's ``NearestNeighbors`` interface), which
        ``transform`` uses.

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import LocallyLinearEmbedding
    >>> t = np.linspace(0, 3, 200)
    >>> X = np.c_[np.cos(t), np.sin(t), t]
    >>> lle = LocallyLinearEmbedding(n_neighbors=8).fit(X)
    >>> lle.embedding_.shape, lle.transform(X[:3] + 0.01).shape
    ((200, 2), (3, 2))
    """

    _parameter_constraints = {
        "n_neighbors": [Interval(int, 1, None, "left")],
        "n_components": [Interval(int, 1, None, "left")],
        "method": [Options("standard", "modified", "hessian", "ltsa")],
        "reg": [Interval(float, 0, None, "left")],
        "eigen_solver": [Options(*SOLVERS)],
        "tol": [Interval(float, 0, None, "left")],
        "max_iter": [Interval(int, 1, None, "left"), NONE],
        "hessian_tol": [Interval(float, 0, None, "left")],
        "modified_tol": [Interval(float, 0, None, "left")],
        "metric": [Options("euclidean", "cosine")],
        "neighbors": [Options(*KNN_METHODS)],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, *, n_neighbors=5, n_components=2, method="standard", reg=1e-3, eigen_solver="auto",
                 tol=1e-6, max_iter=None, hessian_tol=1e-4, modified_tol=1e-12, metric="euclidean",
                 neighbors="exact", random_state=None):
        self.n_neighbors = n_neighbors
        self.n_components = n_components
        self.method = method
        self.reg = reg
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.hessian_tol = hessian_tol
        self.modified_tol = modified_tol
        self.metric = metric
        self.neighbors = neighbors
        self.random_state = random_state

    def fit(self, X, y=None):
        """Compute the embedding of ``X`` (n_samples, n_features)."""
        self._validate_params()
        X, scale = rescaled(check_array(X, "LocallyLinearEmbedding", min_samples=2), self.metric)  # scale-invariant
        n = X.shape[0]
        k, nc = check_n_neighbors(self.n_neighbors, n, "LocallyLinearEmbedding"), self.n_components
        check_n_components(nc, n, "LocallyLinearEmbedding")
        need = _min_neighbors(self.method, nc)
        if k < need:
            raise ValueError(f"method={self.method!r} with n_components={nc} needs n_neighbors >= {need}; "
                             f"got n_neighbors={k}.")
        # connect=None: a disconnected graph is refused before the local solves, so the error comes early
        ind = neighbor_graph(X, owner="LocallyLinearEmbedding", metric=self.metric, n_neighbors=k,
                              neighbors=self.neighbors, connect=None,
                              random_state=self.random_state).indices
        M, inverse = self._alignment_matrix(X.astype(np.float64), ind)
        w, V = eigsolve(M, nc + 1, largest=False, solver=self.eigen_solver, tol=self.tol, max_iter=self.max_iter,
                        random_state=self.random_state, inverse=inverse, owner="LocallyLinearEmbedding")
        self.embedding_ = V[:, 1:].astype(np.float32)
        self.reconstruction_error_ = float(w[1:].sum())
        self.n_features_in_ = X.shape[1]
        self._fit_X, self._scale = X, scale
        self.nbrs_ = FittedNeighbors(X, n_neighbors=k, radius=None, metric=self.metric, metric_params=None,
                                     scale=scale)
        return self

    def transform(self, X) -> np.ndarray:
        """Place new points as scikit-learn does, for every variant: the barycentric weights (``reg`` as in the
        fit) of each point on its ``n_neighbors`` nearest fitted points, applied to their ``embedding_``.
        Time O(m (n d + k³)), memory O(block)."""
        self._check_fitted()
        Q = check_array(X, "LocallyLinearEmbedding")
        check_n_features(self, Q)
        ind = self.nbrs_.kneighbors(Q, return_distance=False)
        Q = Q / Q.dtype.type(self._scale) if self._scale != 1.0 else Q
        weights = _barycentric_weights(Q.astype(np.float64), self._fit_X.astype(np.float64), ind, self.reg)
        return np.einsum("ik,ikc->ic", weights, self.embedding_[ind].astype(np.float64)).astype(np.float32)

    def _alignment_matrix(self, X: np.ndarray, ind: np.ndarray):
        """M, and for standard LLE an operator applying M⁻¹ (see :func:`_inverse_of_gram`), else None."""
        n, k = ind.shape
        nc = self.n_components
        with_self = np.concatenate([np.arange(n)[:, None], ind], axis=1)
        if self.method == "standard":
            weights = _barycentric_weights(X, X, ind, self.reg)
            B = (sp.identity(n, format="csr") - sp.csr_matrix(
                (weights.ravel(), ind.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))).tocsc()
            return (B.T @ B).tocsr(), _inverse_of_gram(B)
        if self.method == "modified":
            if k <= nc:
                raise ValueError(f"method='modified' needs n_neighbors > n_components; got {k} <= {nc}.")
            evals, evecs = _local_spectra(X, ind)
            rho = evals[:, nc:].sum(axis=1) / np.maximum(evals[:, :nc].sum(axis=1), 1e-300)
            blocks = _modified_blocks(evals, evecs, float(np.median(rho)), self.modified_tol)
            return _assemble(blocks, with_self, n), None
        if self.method == "hessian":
            return _assemble(_hessian_blocks(X, ind, nc, self.hessian_tol), ind, n), None
        return _assemble(_ltsa_blocks(X, ind, nc), ind, n), None
