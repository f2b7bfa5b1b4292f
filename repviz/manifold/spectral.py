"""Laplacian eigenmaps (Belkin & Niyogi 2003) and diffusion maps (Coifman & Lafon 2006) on a sparse kNN graph.

Both build a symmetric affinity W on the kNN graph (memory O(n k)), join disconnected components by the rule
in :mod:`repviz.manifold._graph`, and take the bottom eigenvectors of a Laplacian as the top eigenvectors of
the shifted operator (D^-1/2 W D^-1/2, or 2 max(D) I - L) with the shared eigensolver: Lanczos with sparse
matrix-vector products for n > 1,000 (O(n k) per iteration, no factorisation), dense ``eigh`` below. Their
spectrum tops out at a known value (1, or 2 max(D)); when the leading eigenvalues crowd against it (a diffusion
operator on a 3-D Gaussian blob: within 1e-6 of 1) and Lanczos stalls, the solver shift-inverts just above it
instead, with one sparse LU.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._validation import (
    BOOLEAN,
    INTEGER,
    NONE,
    RANDOM_STATE,
    SYMMETRY_RTOL,
    Interval,
    Options,
    Rule,
    check_n_components,
)
from ..neighbors import KNN_METHODS, block_rows, check_data, distances
from ._base import Estimator, check_dense_memory
from ._eigen import SOLVERS, eigsolve, fix_signs
from ._graph import graph_of

_COMMON_DOC = """n_neighbors : int, default=10
        Neighbours per point (self excluded) of the kNN graph; an edge exists if either end lists the other.
    metric : {"euclidean", "cosine", "precomputed"}, default="euclidean"
        "precomputed" takes an (n, n) distance matrix as ``X``.
    max_iter : int or None, default=None
    neighbors : {"exact", "nndescent", "auto"}, default="exact"
        Neighbour search, passed to :func:`repviz.neighbors.knn` as ``method`` (the same option as TSNE's).
    connect : bool, default=True
        Join a disconnected graph by its shortest bridging edges (with a warning); False raises instead.
    random_state : int, Generator or None, default=None
        Seeds the eigensolver's start vector."""

_COMMON_CONSTRAINTS = {
    "n_neighbors": [Interval(int, 1, None, "left")],
    "n_components": [Interval(int, 1, None, "left")],
    "metric": [Options("euclidean", "cosine", "precomputed")],
    "eigen_solver": [Options(*SOLVERS)],
    "tol": [Interval(float, 0, None, "left")],
    "max_iter": [Interval(int, 1, None, "left"), NONE],
    "neighbors": [Options(*KNN_METHODS)],
    "connect": [BOOLEAN],
    "random_state": [RANDOM_STATE],
}


def _heat(G: sp.csr_matrix, gamma) -> sp.csr_matrix:
    """exp(-gamma d²) on the edges of the distance graph G; gamma None: 1 / median squared edge length."""
    d2 = G.data.astype(np.float64) ** 2
    g = 1.0 / max(float(np.median(d2)), 1e-300) if gamma is None else gamma
    W = G.copy().astype(np.float64)
    W.data = np.exp(-g * d2)
    return W


def _floor_bridges(W: sp.csr_matrix, bridges: sp.csr_matrix) -> sp.csr_matrix:
    """Give each bridging edge at least the smallest affinity of the data's own edges: a heat kernel of a long
    bridge underflows to 0, which would leave the graph disconnected in all but name."""
    if bridges.nnz == 0:
        return W
    own = W.data[~_stored_in(W, bridges)]
    floor = float(own[own > 0].min())
    return W.maximum((bridges > 0).astype(np.float64) * floor).tocsr()


def _stored_in(A: sp.csr_matrix, B: sp.csr_matrix) -> np.ndarray:
    """For each stored entry of ``A`` (in ``A.data`` order), whether ``B`` stores an entry at the same place.
    O(nnz) memory: comparing with ``B == 0`` instead would store every zero of the n × n matrix."""
    n = A.shape[1]
    def keys(M):
        return np.repeat(np.arange(M.shape[0], dtype=np.int64), np.diff(M.indptr)) * n + M.indices
    return np.isin(keys(A), keys(B))


def _degree_scaled(W: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """S = D^-1/2 W D^-1/2 and sqrt(D)."""
    deg = np.asarray(W.sum(axis=1)).ravel()
    s = np.sqrt(deg)
    Dm = sp.diags(1.0 / s)
    return (Dm @ W @ Dm).tocsr(), s


class SpectralEmbedding(Estimator):
    """Laplacian eigenmaps: bottom eigenvectors of a graph Laplacian of the kNN graph, or of a given affinity.

    Cost: kNN as in :func:`repviz.neighbors.knn`; affinity O(n k) memory; Lanczos iterations of O(n k) each
    (dense ``eigh``, O(n²) memory, for n <= 1,000). ``affinity="rbf"`` and a dense precomputed or callable
    affinity are n × n: time and memory O(n²) (refused above the dense-memory budget), O(n²) per iteration.

    Parameters
    ----------
    n_components : int, default=2
    affinity : {"binary", "heat", "nearest_neighbors", "rbf", "precomputed", "precomputed_nearest_neighbors"} \
or callable, default="binary"
        "binary": W = (A + Aᵀ) / 2 with A the 0/1 kNN adjacency; "nearest_neighbors": the same graph with
        scikit-learn's count, in which ``n_neighbors`` includes the point itself (so n_neighbors - 1 others);
        "heat": exp(-gamma d²) on the graph's edges; "rbf": exp(-gamma ||x_i - x_j||²) between all pairs;
        "precomputed": ``X`` is the (n, n) affinity matrix, dense or sparse; "precomputed_nearest_neighbors":
        ``X`` is a distance matrix or sparse neighbour graph (such as scikit-learn's
        ``KNeighborsTransformer(mode="distance")`` gives), of which each row's n_neighbors - 1 nearest entries
        besides the diagonal are kept (scikit-learn's count again); a callable maps ``X`` to its affinity
        matrix. The diagonal of an affinity
        (self-loops) is ignored, as scipy's Laplacian does.
    gamma : float or None, default=None
        Kernel width: "heat": None uses 1 / median squared kNN distance; "rbf": None uses 1 / n_features
        (scikit-learn's default).
    laplacian : {"random_walk", "normalized", "unnormalized"}, default="random_walk"
        "random_walk": generalised eigenvectors L v = lambda D v (Belkin & Niyogi; scikit-learn's choice);
        "normalized": eigenvectors of I - D^-1/2 W D^-1/2; "unnormalized": eigenvectors of L = D - W.
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"} or None, default="auto"
        None means "auto" (scikit-learn's spelling); "amg" is refused (repviz has no AMG solver).
    eigen_tol : float or "auto", default="auto"
        Eigensolver tolerance; "auto" and 0: machine precision (scikit-learn's "auto" for ARPACK).
    n_jobs : None
        Accepted for scikit-learn compatibility; the neighbour search runs on numba's threads.
    {common}

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
        Columns signed so their largest-magnitude entry is positive.
    eigenvalues_ : ndarray (n_components,)
        Laplacian eigenvalues of the kept eigenvectors (the first, trivial one dropped).
    affinity_matrix_ : sparse (n_samples, n_samples), or the dense matrix of "rbf" and a dense affinity
    n_connected_components_ : int
        Components of the graph before joining.
    n_neighbors_ : int or None
        The kNN graph's neighbours per point (self excluded); None when no kNN graph was built.
    """

    _parameter_constraints = {
        **{k: v for k, v in _COMMON_CONSTRAINTS.items() if k not in ("tol", "eigen_solver")},
        "affinity": [Options("binary", "heat", "nearest_neighbors", "rbf", "precomputed",
                             "precomputed_nearest_neighbors"), Rule(callable, "a callable")],
        "gamma": [Interval(float, 0, None, "neither"), NONE],
        "laplacian": [Options("random_walk", "normalized", "unnormalized")],
        "eigen_solver": [Options(*SOLVERS, "amg"), NONE],
        "eigen_tol": [Interval(float, 0, None, "left"), Options("auto")],
        "n_jobs": [NONE, INTEGER],
    }
    _accepts_sparse = True

    def __init__(self, n_components=2, *, affinity="binary", gamma=None, laplacian="random_walk", n_neighbors=10,
                 metric="euclidean", eigen_solver="auto", eigen_tol="auto", max_iter=None, neighbors="exact",
                 connect=True, random_state=None, n_jobs=None):
        self.n_components = n_components
        self.affinity = affinity
        self.gamma = gamma
        self.laplacian = laplacian
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.eigen_solver = eigen_solver
        self.eigen_tol = eigen_tol
        self.max_iter = max_iter
        self.neighbors = neighbors
        self.connect = connect
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X, y=None):
        """Compute the embedding of ``X`` (data, a precomputed distance matrix or neighbour graph, or an
        affinity matrix, as ``affinity`` says)."""
        self._validate_params()
        if self.eigen_solver == "amg":
            raise ValueError("The eigen_solver was set to 'amg', but pyamg is not available to SpectralEmbedding "
                             "(repviz has no AMG solver); use eigen_solver='lobpcg' for large sparse graphs.")
        if self.affinity in ("binary", "heat", "nearest_neighbors", "precomputed_nearest_neighbors"):
            W, n_features, n_comp = self._graph_affinity(X)
            self.affinity_matrix_ = W
        else:
            self.affinity_matrix_, W, n_features = self._full_affinity(X)
            n_comp = int(connected_components(W, directed=False)[0])
            if n_comp > 1:
                raise ValueError(f"The affinity matrix of SpectralEmbedding has {n_comp} connected components, so "
                                 f"the embedding is not defined (one zero eigenvalue per component); give every "
                                 f"group of points a non-zero affinity to another.")
            self.n_neighbors_ = None
        nc = self.n_components
        solve = dict(largest=True, solver="auto" if self.eigen_solver is None else self.eigen_solver,
                     tol=0.0 if self.eigen_tol == "auto" else float(self.eigen_tol), max_iter=self.max_iter,
                     random_state=self.random_state, owner="SpectralEmbedding", graph=W)
        # bottom of a Laplacian = top of a shifted operator: plain Lanczos, no factorisation (see _eigen)
        if self.laplacian == "unnormalized":
            deg = np.asarray(W.sum(axis=1)).ravel()
            c = 2.0 * float(deg.max())  # Gershgorin: the spectrum of D - W lies in [0, 2 max deg]
            lam, V = eigsolve((sp.diags(c - deg) + W).tocsr(), nc + 1, upper=c, **solve)
            w = c - lam
        else:
            S, sqrt_deg = _degree_scaled(W)
            lam, V = eigsolve(S, nc + 1, upper=1.0, **solve)
            w = 1.0 - lam
            if self.laplacian == "random_walk":
                V = V / sqrt_deg[:, None]
        self.embedding_ = fix_signs(V[:, 1:]).astype(np.float32)
        self.eigenvalues_ = w[1:]
        self.n_connected_components_ = n_comp
        self.n_features_in_ = n_features
        return self

    def _graph_affinity(self, X) -> tuple[sp.csr_matrix, int, int]:
        """The affinity on the kNN graph ("binary", "nearest_neighbors", "precomputed_nearest_neighbors",
        "heat"), the number of features and the graph's components before joining."""
        params = {}
        if self.affinity in ("nearest_neighbors", "precomputed_nearest_neighbors"):
            if self.n_neighbors < 2:
                raise ValueError(f"affinity={self.affinity!r} counts the point itself among its n_neighbors (as "
                                 f"scikit-learn does), so n_neighbors must be at least 2; got {self.n_neighbors}.")
            params = {"n_neighbors": self.n_neighbors - 1}
            if self.affinity == "precomputed_nearest_neighbors":
                params["metric"] = "precomputed"
        X, nbrs, scale = graph_of(self, X, **params)
        self.n_neighbors_ = params.get("n_neighbors", self.n_neighbors)
        ind, bridges = nbrs.indices, nbrs.bridges
        n, k = ind.shape
        if self.affinity != "heat":
            A = sp.csr_matrix((np.ones(n * k), ind.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))
            W = (0.5 * (A + A.T) + (bridges > 0)).tocsr().astype(np.float64)
        else:
            gamma = None if self.gamma is None else self.gamma * scale**2  # the graph's distances are d / scale
            W = _floor_bridges(_heat(nbrs.graph, gamma), bridges)
        return W, X.shape[1], nbrs.n_components

    def _full_affinity(self, X) -> tuple[object, sp.csr_matrix, int]:
        """("rbf", "precomputed" or a callable) the affinity as given or computed (dense or sparse), the same
        as a CSR matrix without its diagonal, and the number of features."""
        owner = "SpectralEmbedding"
        X = check_data(X, owner, min_samples=2)
        n = X.shape[0]
        check_n_components(self.n_components, n, owner)
        if self.affinity == "rbf":
            check_dense_memory(8.0 * n * n, owner, f"a dense {n}×{n} rbf affinity",
                               "Use affinity='heat' (the same kernel on the kNN graph) for large n.")
            gamma = 1.0 / X.shape[1] if self.gamma is None else self.gamma
            A = np.empty((n, n), dtype=X.dtype)
            X64, step = X.astype(np.float64), block_rows(n, 64 << 20)
            for s in range(0, n, step):
                A[s:s + step] = np.exp(-gamma * distances(X64[s:s + step], X64, "sqeuclidean"))
        else:
            A = X if self.affinity == "precomputed" else self.affinity(X)
            A = check_data(A, owner, dtype=(np.float32, np.float64))
            if A.shape != (n, n):
                raise ValueError(f"The affinity matrix of SpectralEmbedding must be square (n, n) = {(n, n)}; "
                                 f"got shape {A.shape}.")
            values = A.data if sp.issparse(A) else A
            if values.size and values.min() < 0:
                raise ValueError(f"The affinity matrix of SpectralEmbedding must be non-negative; the smallest "
                                 f"entry is {float(values.min())}.")
            asym = float(abs(A - A.T).max()) if values.size else 0.0
            if asym > SYMMETRY_RTOL * max(float(values.max()), 1e-30):
                raise ValueError(f"The affinity matrix of SpectralEmbedding must be symmetric; max |A - A.T| = "
                                 f"{asym:.3g}. Pass (A + A.T) / 2 if the asymmetry is numerical noise.")
        W = sp.csr_matrix(A, dtype=np.float64)
        W.setdiag(0)
        W.eliminate_zeros()
        return A, W, X.shape[1]


class DiffusionMap(Estimator):
    """Diffusion maps: the leading non-trivial eigenvectors of a diffusion operator, scaled by lambda^t.

    The Gaussian kernel K = exp(-d² / epsilon) on the kNN graph (plus each point's self-affinity 1) is
    renormalised by the density, K_alpha = Q^-alpha K Q^-alpha with Q the row sums (alpha=0: graph Laplacian,
    0.5: Fokker-Planck, 1: Laplace-Beltrami, independent of the sampling density), then row-normalised into a
    Markov matrix P. The embedding is lambda_j^t psi_j, psi_j the right eigenvectors of P (psi_0 = 1 dropped);
    Euclidean distance in it approximates the diffusion distance at time t. Cost as
    :class:`SpectralEmbedding`.

    Parameters
    ----------
    n_components : int, default=2
    epsilon : float or "auto", default="auto"
        Kernel width; "auto" uses the median squared kNN distance.
    alpha : float in [0, 1], default=1.0
    t : float, default=1
        Diffusion time: larger t damps the faster-decaying (smaller-eigenvalue) directions.
    eigen_solver : {"auto", "dense", "arpack", "lobpcg"}, default="auto"
    tol : float, default=0
        Eigensolver tolerance (0: machine precision).
    {common}

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
    eigenvalues_ : ndarray (n_components,)
        Eigenvalues of P for the kept eigenvectors (in (-1, 1)).
    epsilon_ : float
    n_connected_components_ : int
        Components of the kNN graph before joining.
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        "epsilon": [Interval(float, 0, None, "neither"), Options("auto")],
        "alpha": [Interval(float, 0, 1, "both")],
        "t": [Interval(float, 0, None, "left")],
    }
    _accepts_sparse = True

    def __init__(self, n_components=2, *, epsilon="auto", alpha=1.0, t=1.0, n_neighbors=10, metric="euclidean",
                 eigen_solver="auto", tol=0.0, max_iter=None, neighbors="exact", connect=True,
                 random_state=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.alpha = alpha
        self.t = t
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.neighbors = neighbors
        self.connect = connect
        self.random_state = random_state

    def fit(self, X, y=None):
        """Compute the diffusion-map coordinates of ``X`` (or of a precomputed distance matrix)."""
        self._validate_params()
        X, nbrs, scale = graph_of(self, X)
        G, bridges = nbrs.graph, nbrs.bridges
        n = G.shape[0]
        d2 = G.data.astype(np.float64) ** 2  # in units of scale**2
        epsilon = float(np.median(d2)) if self.epsilon == "auto" else float(self.epsilon) / scale**2
        self.epsilon_ = epsilon * scale**2
        K = G.copy().astype(np.float64)
        K.data = np.exp(-d2 / max(epsilon, 1e-300))
        K = (_floor_bridges(K, bridges) + sp.identity(n)).tocsr()
        q = np.asarray(K.sum(axis=1)).ravel() ** -self.alpha
        K_alpha = (sp.diags(q) @ K @ sp.diags(q)).tocsr()
        S, sqrt_deg = _degree_scaled(K_alpha)
        lam, V = eigsolve(S, self.n_components + 1, largest=True, solver=self.eigen_solver, tol=self.tol,
                          max_iter=self.max_iter, random_state=self.random_state, owner="DiffusionMap",
                          graph=K_alpha, upper=1.0)
        psi = V / sqrt_deg[:, None]
        psi = psi / np.abs(psi[:, :1]).mean()  # psi_0 is constant: scale so that it equals 1
        self.embedding_ = fix_signs(psi[:, 1:] * np.sign(lam[1:]) * np.abs(lam[1:]) ** self.t).astype(np.float32)
        self.eigenvalues_ = lam[1:]
        self.n_connected_components_ = nbrs.n_components
        self.n_features_in_ = X.shape[1]
        return self


SpectralEmbedding.__doc__ = SpectralEmbedding.__doc__.replace("{common}", _COMMON_DOC)
DiffusionMap.__doc__ = DiffusionMap.__doc__.replace("{common}", _COMMON_DOC)
