"""Locally linear embedding and its variants: standard (Roweis & Saul 2000), modified (Zhang & Wang 2006),
Hessian (Donoho & Grimes 2003) and local tangent space alignment (Zhang & Zha 2004).

Every variant builds a sparse, symmetric positive semi-definite alignment matrix M from one small dense
problem per point (numpy's stacked solves for the standard weights, serial numba loops for the other variants:
0.2-0.3 s for 10,000 points, cheaper to compile than parallel ones and far below the eigensolve), then embeds
with the bottom eigenvectors of M after the constant one. Standard LLE forms M = (I - W)ᵀ (I - W) from the
sparse weights W; the other variants sum one dense block per neighbourhood into a CSR matrix. Memory is
O(n k²); nothing is n×n.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, splu

from .._jit import njit
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


@njit(cache=True)
def _neighbourhood(X, nbrs):  # pragma: no cover - compiled
    """The rows ``X[nbrs]`` as a float64 (k, d) array (local solves run in float64 whatever X holds)."""
    return X[nbrs].astype(np.float64)


@njit(cache=True)
def _centred_neighbourhood(X, nbrs):  # pragma: no cover - compiled
    """The rows ``X[nbrs]`` minus their mean, float64 (k, d)."""
    Z = _neighbourhood(X, nbrs)
    return Z - Z.sum(axis=0) / Z.shape[0]


def _barycentric_weights(Q: np.ndarray, X: np.ndarray, ind: np.ndarray, reg: float,
                         block_bytes: int = 64 << 20) -> np.ndarray:
    """Weights reconstructing each point of Q from its neighbours ``X[ind]`` (sum 1), by a regularised local
    Gram solve; numpy's stacked matmul and solve over blocks of points (no compiled kernel: numba's linear
    algebra took 5 s to compile, longer than the solves themselves)."""
    n, k = ind.shape
    weights = np.empty((n, k))
    rows = max(1, block_bytes // (8 * k * max(X.shape[1], k)))
    for start in range(0, n, rows):
        Z = X[ind[start:start + rows]] - Q[start:start + rows, None, :]
        C = Z @ Z.transpose(0, 2, 1)
        tr = np.trace(C, axis1=1, axis2=2)
        # a singular local Gram (k > d, duplicates) is made invertible
        C[:, np.arange(k), np.arange(k)] += np.where(tr > 0, reg * tr, reg)[:, None]
        w = np.linalg.solve(C, np.ones((len(C), k, 1)))[..., 0]
        weights[start:start + rows] = w / w.sum(axis=1, keepdims=True)
    return weights


@njit(cache=True)
def _local_spectra(X, ind, evals, evecs):  # pragma: no cover - compiled
    """Eigen-decomposition (decreasing) of each neighbourhood's Gram matrix G Gᵀ, G = X[nbrs] - X[i]."""
    n, k = ind.shape
    for i in range(n):
        Z = _neighbourhood(X, ind[i]) - X[i]
        w, V = np.linalg.eigh(Z @ Z.T)
        for a in range(k):
            evals[i, a] = max(w[k - 1 - a], 0.0)
            for b in range(k):
                evecs[i, b, a] = V[b, k - 1 - a]


@njit(cache=True)
def _modified_blocks(ind, evals, evecs, n_components, eta, modified_tol, blocks):  # pragma: no cover
    """MLLE blocks Ŵ Ŵᵀ over [i, nbrs], Ŵ = [-1ᵀ; W_i], W_i from the s_i-dimensional almost-null space."""
    n, k = ind.shape
    for i in range(n):
        ev = evals[i]
        V = evecs[i]
        reg = 1e-3 * ev.sum()
        # regularised barycentric weights from the local spectrum: w = V diag(1/(ev+reg)) Vᵀ 1, normalised
        t = V.T @ np.ones(k)
        for a in range(k):
            t[a] /= ev[a] + reg
        w_reg = V @ t
        w_reg /= w_reg.sum()
        # s_i: the largest tail of eigenvalues whose sum, relative to the rest, stays below eta
        total = ev.sum()
        s = 0
        tail = 0.0
        for m in range(k - 1, 0, -1):
            tail += ev[m]
            head = total - tail
            if head > 0 and tail / head < eta:
                s = k - m
            else:
                break
        s = max(s, 1)
        Vi = np.ascontiguousarray(V[:, k - s:])
        ones_proj = Vi.T @ np.ones(k)
        alpha = np.sqrt((ones_proj ** 2).sum()) / np.sqrt(s)
        h = alpha - ones_proj
        norm_h = np.sqrt((h ** 2).sum())
        if norm_h < modified_tol:
            h[:] = 0.0
        else:
            h /= norm_h
        Wi = Vi - 2.0 * np.outer(Vi @ h, h) + (1.0 - alpha) * np.outer(w_reg, np.ones(s))
        What = np.empty((k + 1, s))
        What[0, :] = -1.0
        What[1:, :] = Wi
        blocks[i] = What @ What.T


@njit(cache=True)
def _hessian_blocks(X, ind, n_components, hessian_tol, blocks):  # pragma: no cover - compiled
    """HLLE blocks w wᵀ over nbrs, w spanning the local Hessian estimator (orthogonal to 1, tangents, products)."""
    n, k = ind.shape
    nc = n_components
    dp = nc * (nc + 1) // 2
    for i in range(n):
        G = _centred_neighbourhood(X, ind[i])
        _, V = np.linalg.eigh(G @ G.T)
        U = V[:, ::-1][:, :nc]
        Y = np.empty((k, 1 + nc + dp))
        Y[:, 0] = 1.0
        Y[:, 1:1 + nc] = U
        j = 1 + nc
        for p in range(nc):
            for q in range(p, nc):
                Y[:, j] = U[:, p] * U[:, q]
                j += 1
        Q, _ = np.linalg.qr(Y)
        w = Q[:, nc + 1:].copy()
        for c in range(w.shape[1]):
            S = w[:, c].sum()
            if abs(S) >= hessian_tol:
                w[:, c] /= S
        blocks[i] = w @ w.T


@njit(cache=True)
def _ltsa_blocks(X, ind, n_components, blocks):  # pragma: no cover - compiled
    """LTSA blocks I - G Gᵀ over nbrs, G = [1/sqrt(k), top local tangent coordinates]."""
    n, k = ind.shape
    for i in range(n):
        Z = _centred_neighbourhood(X, ind[i])
        _, V = np.linalg.eigh(Z @ Z.T)
        G = np.empty((k, n_components + 1))
        G[:, 0] = 1.0 / np.sqrt(k)
        for c in range(n_components):
            G[:, 1 + c] = V[:, k - 1 - c]
        B = -(G @ G.T)
        for a in range(k):
            B[a, a] += 1.0
        blocks[i] = B


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
            evals, evecs = np.empty((n, k)), np.empty((n, k, k))
            _local_spectra(X, ind, evals, evecs)
            rho = evals[:, nc:].sum(axis=1) / np.maximum(evals[:, :nc].sum(axis=1), 1e-300)
            blocks = np.empty((n, k + 1, k + 1))
            _modified_blocks(ind, evals, evecs, nc, float(np.median(rho)), self.modified_tol, blocks)
            return _assemble(blocks, with_self, n), None
        blocks = np.empty((n, k, k))
        if self.method == "hessian":
            _hessian_blocks(X, ind, nc, self.hessian_tol, blocks)
        else:
            _ltsa_blocks(X, ind, nc, blocks)
        return _assemble(blocks, ind, n), None
