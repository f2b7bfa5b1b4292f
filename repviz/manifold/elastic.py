"""Elastic embedding (Carreira-Perpiñán 2010), optimised along the spectral direction (Vladymyrov &
Carreira-Perpiñán 2012).

The embedding Y minimises

    E(Y) = sum_ij p_ij ||y_i - y_j||² + lambda / (n (n - 1)) sum_{i != j} exp(-||y_i - y_j||²)

with P the symmetric Gaussian affinities of t-SNE (each row calibrated to perplexity ``n_neighbors / 3`` on the
kNN graph, P summing to 1) pulling neighbours together, and a Gaussian repulsion between all pairs (weights
summing to 1, as in the author's code) keeping the points apart; ``lambda_`` trades the two. In terms of the
graph Laplacian L = D - P: E = 2 tr(Yᵀ L Y) + c Z with Z the repulsive sum, and ∇E = 4 L Y - 4 c R, with
R_i = sum_j exp(-d_ij²) (y_i - y_j).

Each iteration moves along the spectral direction -(4 L + mu I)⁻¹ ∇E (the Hessian of the attractive term, fixed,
so it is factorised once by a sparse LU) with a backtracking line search. The repulsion is the t-SNE machinery's
(:mod:`repviz.manifold.tsne.optimize`) with its Gaussian kernel (the one SNE uses): exact, O(n²) per evaluation,
up to ``EXACT_MAX_N`` points, Barnes-Hut, O(n log n), above.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from .._validation import ARRAY_LIKE, RANDOM_STATE, Interval, Options, check_array, check_n_neighbors, rescaled
from ..neighbors import KNN_METHODS, knn
from ._base import Estimator, rng_from
from .tsne import init as tsne_init
from .tsne.affinity import joint_affinities
from .tsne.optimize import make_repulsion

#: Largest n for the exact O(n²) repulsion with method="auto" (an evaluation takes ~20 ms on 2 cores there).
EXACT_MAX_N = 2_000
#: Standard deviation of the first coordinate of a PCA or random start: well inside the kernel's width of 1.
INIT_STD = 1e-2


class ElasticObjective:
    """E(Y) and the pieces of ∇E(Y) for fixed affinities: ``L`` the graph Laplacian D - P, ``c`` the weight of
    the repulsive sum (lambda / (n (n - 1))), ``repulsion`` a t-SNE repulsion callable with the Gaussian kernel
    (:func:`repviz.manifold.tsne.optimize.make_repulsion` with dof 0)."""

    def __init__(self, L: sp.csr_matrix, c: float, repulsion):
        self.L, self.c, self.repulsion = L, c, repulsion

    def energy(self, Y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """E, L Y and the repulsive forces R (the pieces of the gradient)."""
        LY = self.L @ Y
        rep = np.empty_like(Y)
        z = self.repulsion(Y, rep)
        return 2.0 * float(np.einsum("ij,ij->", Y, LY)) + self.c * z, LY, rep

    def value(self, Y: np.ndarray) -> float:
        return self.energy(Y)[0]


def spectral_descent(Y: np.ndarray, objective: ElasticObjective, max_iter: int,
                     tol: float) -> tuple[np.ndarray, int, float]:
    """Minimise the objective from Y along the spectral direction with Armijo backtracking.

    Stops when the relative decrease of E falls below ``tol`` or after ``max_iter`` iterations. Returns Y, the
    iterations run and the final E."""
    n = Y.shape[0]
    B = (4.0 * objective.L).tocsc()
    mu = 1e-6 * float(B.diagonal().max())  # L is singular (translations): a tiny ridge makes B invertible
    lu = splu((B + mu * sp.identity(n, format="csc")).tocsc(), permc_spec="MMD_AT_PLUS_A",
              options={"SymmetricMode": True}, diag_pivot_thresh=0.0)
    E, LY, rep = objective.energy(Y)
    n_iter, alpha = 0, 1.0
    while n_iter < max_iter:
        n_iter += 1
        grad = 4.0 * LY - 4.0 * objective.c * rep
        p = -lu.solve(grad)
        slope = float(np.einsum("ij,ij->", grad, p))
        alpha = min(1.0, 2.0 * alpha)  # the last accepted step, doubled: most iterations then need one evaluation
        while True:
            Y_new = Y + alpha * p
            E_new, LY_new, rep_new = objective.energy(Y_new)
            if E_new <= E + 1e-4 * alpha * slope or alpha < 1e-10:
                break
            alpha *= 0.5
        decrease = E - E_new
        Y, E, LY, rep = Y_new, E_new, LY_new, rep_new
        if abs(decrease) <= tol * abs(E):
            break
    return Y, n_iter, E


class ElasticEmbedding(Estimator):
    """Elastic embedding: Gaussian attraction on the kNN graph, Gaussian repulsion between all pairs.

    Cost: kNN as in :func:`repviz.neighbors.knn`; one sparse LU of the n × n Laplacian (fill depends on the
    graph; about O(n k) for manifold-like data); per iteration O(n k) plus the repulsion, O(n²) exact
    (n <= 2,000 with method="auto") or O(n log n) Barnes-Hut, evaluated 1-2 times by the line search.
    Memory O(n k) plus the LU factor.

    Parameters
    ----------
    n_components : int, default=2
    lambda_ : float, default=100.0
        Weight of the repulsion (both weight sets sum to 1). Small values give Laplacian-eigenmap-like
        pictures, large ones spread clusters more evenly; useful range 1 to 10⁴.
    n_neighbors : int, default=30
        Neighbours of the kNN graph; the Gaussian weights are calibrated to perplexity n_neighbors / 3.
    init : {"pca", "random"} or array (n_samples, n_components), default="pca"
        Start: PCA or Gaussian scaled to std 1e-2 (inside the repulsion kernel's width), or a given layout used
        at its own scale (an earlier embedding, to continue from it).
    method : {"auto", "exact", "barnes_hut"}, default="auto"
        Repulsion: exact all pairs, or Barnes-Hut (theta 0.5); "auto": exact up to 2,000 points (on MNIST at
        5,000 points Barnes-Hut is 6x faster and scores the same).
    max_iter : int, default=300
    tol : float, default=1e-6
        Stop when an iteration lowers E by less than this fraction of E.
    neighbors : {"exact", "nndescent", "auto"}, default="exact"
        Neighbour search, passed to :func:`repviz.neighbors.knn`.
    random_state : int, Generator or None, default=None
        Seeds the random start and the approximate neighbour search.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
    energy_ : float
        Final value of E.
    n_iter_ : int
    affinities_ : sparse (n_samples, n_samples)
        The attractive weights P.

    References
    ----------
    Carreira-Perpiñán (2010), The elastic embedding algorithm for dimensionality reduction. ICML.
    Vladymyrov & Carreira-Perpiñán (2012), Partial-Hessian strategies for fast learning of nonlinear
    embeddings. ICML.

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import ElasticEmbedding
    >>> ElasticEmbedding(random_state=0).fit_transform(np.random.default_rng(0).normal(size=(200, 5))).shape
    (200, 2)
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "lambda_": [Interval(float, 0, None, "neither")],
        "n_neighbors": [Interval(int, 1, None, "left")],
        "init": [Options("pca", "random"), ARRAY_LIKE],
        "method": [Options("auto", "exact", "barnes_hut")],
        "max_iter": [Interval(int, 1, None, "left")],
        "tol": [Interval(float, 0, None, "left")],
        "neighbors": [Options(*KNN_METHODS)],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, lambda_=100.0, n_neighbors=30, init="pca", method="auto", max_iter=300,
                 tol=1e-6, neighbors="exact", random_state=None):
        self.n_components = n_components
        self.lambda_ = lambda_
        self.n_neighbors = n_neighbors
        self.init = init
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.neighbors = neighbors
        self.random_state = random_state

    def __sklearn_is_fitted__(self) -> bool:
        # the parameter lambda_ ends with "_", which scikit-learn's default test takes for a fitted attribute
        return hasattr(self, "embedding_")

    def _start(self, X: np.ndarray) -> np.ndarray:
        n, k = X.shape[0], self.n_components
        if not isinstance(self.init, str):
            Y0 = np.array(self.init, dtype=np.float64)
            if Y0.shape != (n, k):
                raise ValueError(f"init has shape {Y0.shape}; it must be (n_samples, n_components) = {(n, k)}")
            if not np.isfinite(Y0).all():
                raise ValueError("init contains NaN or infinity")
            return Y0 - Y0.mean(axis=0)
        if self.init == "random" or not np.ptp(X, axis=0).any():
            Y0 = rng_from(self.random_state).standard_normal((n, k))
        else:
            Y0 = tsne_init.pca(X, k)
            if not np.ptp(Y0[:, 0]):
                Y0 = rng_from(self.random_state).standard_normal((n, k))
        return tsne_init.rescale(Y0, INIT_STD)

    def fit(self, X, y=None):
        """Compute the elastic embedding of ``X`` (n_samples, n_features)."""
        self._validate_params()
        X = check_array(X, "ElasticEmbedding", min_samples=2)
        X = rescaled(X)[0]  # P is calibrated by perplexity: the scale of X does not matter
        n = X.shape[0]
        k = check_n_neighbors(min(self.n_neighbors, n - 1), n, "ElasticEmbedding")
        ind, dist = knn(X, k, method=self.neighbors, random_state=self.random_state)
        P = joint_affinities(ind, dist, k / 3.0).astype(np.float64)
        L = (sp.diags(np.asarray(P.sum(axis=1)).ravel()) - P).tocsr()
        method = self.method if self.method != "auto" else ("exact" if n <= EXACT_MAX_N else "barnes_hut")
        repulsion = make_repulsion(method, n, self.n_components, 0.0)  # dof 0: the Gaussian kernel
        objective = ElasticObjective(L, self.lambda_ / max(n * (n - 1), 1), repulsion)
        Y, self.n_iter_, self.energy_ = spectral_descent(self._start(X), objective, self.max_iter, self.tol)
        self.affinities_ = P
        self.n_features_in_ = X.shape[1]
        self.embedding_ = Y.astype(np.float32)
        return self
