"""Principal component analysis and its probabilistic version (Tipping & Bishop 1999).

Both estimators share ``principal_axes``: centre the data, then either an exact eigendecomposition of the
smaller of the covariance (d×d) and Gram (n×n) matrices, in float64, or Halko et al.'s randomized range finder
for large inputs. Sign convention (as scikit-learn >= 1.5): each component's largest-magnitude loading is
positive, so the same data always gives the same picture.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh, qr, svd

from .._validation import BOOLEAN, NONE, RANDOM_STATE, Interval, Options, check_array, check_n_features
from ._base import Estimator, check_dense_memory, rng_from


def signed_rows(V: np.ndarray) -> np.ndarray:
    """Flip each row so its largest-magnitude entry is positive."""
    idx = np.argmax(np.abs(V), axis=1)
    signs = np.sign(V[np.arange(V.shape[0]), idx])
    signs[signs == 0] = 1
    return V * signs[:, None]


def _exact_axes(Xc: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Top-k eigenpairs of the covariance Xcᵀ Xc / (n - 1), via whichever of Xcᵀ Xc and Xc Xcᵀ is smaller, and
    the total variance (the trace of either)."""
    n, d = Xc.shape
    check_dense_memory(8.0 * min(n, d) ** 2, "PCA", f"a {min(n, d)}×{min(n, d)} covariance matrix",
                       "Use PCA(svd_solver='randomized'), which needs O((n + d) n_components) memory.")
    scale = max(n - 1, 1)
    if d <= n:
        C = Xc.T @ Xc
        w, V = eigh(C, subset_by_index=(d - k, d - 1), driver="evx")
        return w[::-1] / scale, V[:, ::-1].T, float(np.trace(C)) / scale
    G = Xc @ Xc.T
    w, U = eigh(G, subset_by_index=(n - k, n - 1), driver="evx")
    w, U = w[::-1], U[:, ::-1]
    V = (U.T @ Xc) / np.sqrt(np.clip(w, 1e-300, None))[:, None]
    return w / scale, V, float(np.trace(G)) / scale


def _randomized_axes(Xc: np.ndarray, k: int, n_oversamples: int, n_iter: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Halko, Martinsson & Tropp (2011), Algorithm 4.4 with QR re-orthonormalisation between power steps."""
    n, d = Xc.shape
    Q = Xc @ rng.standard_normal((d, min(d, k + n_oversamples))).astype(Xc.dtype)
    Q, _ = qr(Q, mode="economic")
    for _ in range(n_iter):
        Q, _ = qr(Xc.T @ Q, mode="economic")
        Q, _ = qr(Xc @ Q, mode="economic")
    _, s, Vt = svd(Q.T @ Xc, full_matrices=False)
    return (s[:k].astype(np.float64) ** 2) / max(n - 1, 1), Vt[:k].astype(np.float64)


def principal_axes(X: np.ndarray, k: int, solver: str, n_oversamples: int, n_iter: int | str, random_state):
    """Mean, top-k eigenvalues of the sample covariance (n - 1 normaliser), components (k, d), total variance,
    the solver used and the centred data (reused for the projection)."""
    n, d = X.shape
    mean = X.mean(axis=0, dtype=np.float64)
    if solver == "auto":
        solver = "randomized" if min(n, d) > 1000 and k < 0.1 * min(n, d) else "full"
    if solver == "full":
        Xc = np.subtract(X, mean, dtype=np.float64)  # one pass; astype-then-subtract costs 10x more here
        w, V, total = _exact_axes(Xc, k)
    else:
        Xc = X - mean.astype(X.dtype)
        total = float(np.einsum("ij,ij->", Xc, Xc, dtype=np.float64)) / max(n - 1, 1)
        iters = (7 if k < 0.1 * min(n, d) else 4) if n_iter == "auto" else n_iter
        w, V = _randomized_axes(Xc, k, n_oversamples, iters, rng_from(random_state))
    return mean, np.clip(w, 0, None), signed_rows(V), total, solver, Xc


_SOLVER_DOC = """svd_solver : {"auto", "full", "randomized"}, default="auto"
        "full": exact, float64 eigendecomposition of the smaller of the covariance and Gram matrices; time
        O(n d min(n, d)), memory O(min(n, d)²). "randomized": Halko et al.'s range finder; time
        O(n d (n_components + n_oversamples) n_iter), memory O((n + d)(n_components + n_oversamples)).
        "auto": "randomized" when min(n, d) > 1000 and n_components < min(n, d) / 10, else "full"."""


class PCA(Estimator):
    """Principal component analysis: the linear projection that keeps the most variance.

    Parameters
    ----------
    n_components : int, float in (0, 1) or None, default=2
        Number of components; a float keeps the fewest components explaining that fraction of the variance
        (exact solver only); None keeps min(n_samples, n_features).
    whiten : bool, default=False
        Divide each projected coordinate by the square root of its variance (unit-variance outputs).
    {solver}
    n_oversamples : int, default=10
        Extra random directions of the randomized solver.
    n_iter : int or "auto", default="auto"
        Power iterations of the randomized solver ("auto": 7 for few components, else 4).
    random_state : int, Generator or None, default=None
        Seeds the randomized solver.

    Attributes
    ----------
    components_ : ndarray (n_components_, n_features)
        Principal axes, largest-magnitude loading positive.
    explained_variance_, explained_variance_ratio_, singular_values_ : ndarray (n_components_,)
    mean_ : ndarray (n_features,)
    noise_variance_ : float
        Mean of the discarded eigenvalues of the covariance (what Probabilistic PCA calls sigma²).
    embedding_ : ndarray (n_samples, n_components_), float32 for float32 input, else float64

    Examples
    --------
    >>> import numpy as np
    >>> from repviz.manifold import PCA
    >>> PCA(n_components=2).fit_transform(np.random.default_rng(0).normal(size=(50, 5))).shape
    (50, 2)
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left"), Interval(float, 0, 1, "neither"), NONE],
        "whiten": [BOOLEAN],
        "svd_solver": [Options("auto", "full", "randomized")],
        "n_oversamples": [Interval(int, 1, None, "left")],
        "n_iter": [Interval(int, 0, None, "left"), Options("auto")],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, whiten=False, svd_solver="auto", n_oversamples=10, n_iter="auto",
                 random_state=None):
        self.n_components = n_components
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit the principal axes to ``X`` (n_samples, n_features) and store ``embedding_``."""
        self._validate_params()
        X = check_array(X, "PCA", min_samples=2)
        n, d = X.shape
        limit = min(n, d)
        nc = self.n_components
        if isinstance(nc, float):
            if self.svd_solver == "randomized":
                raise ValueError("A fractional n_components (a variance fraction) needs svd_solver='full' or "
                                 "'auto'; the randomized solver does not see all eigenvalues.")
            k, solver = limit, "full"
        else:
            k = limit if nc is None else int(nc)
            if k > limit:
                raise ValueError(f"n_components={k} must be between 1 and min(n_samples, n_features)={limit} "
                                 f"with svd_solver={self.svd_solver!r}")
            solver = self.svd_solver
        self.mean_, w, V, total, self.svd_solver_, Xc = principal_axes(
            X, k, solver, self.n_oversamples, self.n_iter, self.random_state)
        ratio = w / total if total > 0 else np.zeros_like(w)
        if isinstance(nc, float):
            k = int(np.searchsorted(np.cumsum(ratio), nc) + 1)
            k = min(k, limit)
            w, V, ratio = w[:k], V[:k], ratio[:k]
        self.n_components_ = k
        self.components_ = V.astype(np.float32)
        self.explained_variance_ = w
        self.explained_variance_ratio_ = ratio
        self.singular_values_ = np.sqrt(w * max(n - 1, 1))
        self.noise_variance_ = (total - w.sum()) / (limit - k) if k < limit else 0.0
        self.n_features_in_, self.n_samples_ = d, n
        self._total_variance = total
        self.embedding_ = self._project_centred(Xc)
        return self

    def _project(self, X: np.ndarray) -> np.ndarray:
        return self._project_centred(X - self.mean_.astype(X.dtype))

    def _project_centred(self, Xc: np.ndarray) -> np.ndarray:
        Y = Xc @ self.components_.T.astype(Xc.dtype)
        if self.whiten:
            Y /= np.sqrt(np.clip(self.explained_variance_, 1e-12, None)).astype(np.float32)
        return Y.astype(np.float32, copy=False)

    def transform(self, X) -> np.ndarray:
        """Project new rows onto the principal axes. Time O(n d k)."""
        self._check_fitted()
        X = check_array(X, "PCA")
        check_n_features(self, X)
        return self._project(X)

    def inverse_transform(self, Y) -> np.ndarray:
        """Map projected coordinates back to the input space (the rank-k reconstruction)."""
        self._check_fitted()
        Y = check_array(Y, "PCA", name="Y")
        if Y.shape[1] != self.n_components_:
            raise ValueError(f"Y has {Y.shape[1]} columns, but PCA has {self.n_components_} components.")
        if self.whiten:
            Y = Y * np.sqrt(self.explained_variance_).astype(np.float32)
        return (Y @ self.components_ + self.mean_.astype(np.float32)).astype(np.float32)


PCA.__doc__ = PCA.__doc__.replace("{solver}", _SOLVER_DOC)


class ProbabilisticPCA(Estimator):
    """Probabilistic PCA (Tipping & Bishop 1999): x = W z + mu + noise, z ~ N(0, I), noise ~ N(0, sigma² I).

    Fitted by the maximum-likelihood closed form: with lambda_1 >= ... >= lambda_d the eigenvalues of the
    sample covariance S (normaliser n) and U their eigenvectors, sigma² is the mean of the d - k discarded
    eigenvalues and W = U_k (Lambda_k - sigma² I)^(1/2). The embedding is the posterior mean of the latent,
    E[z | x] = M⁻¹ Wᵀ (x - mu) with M = Wᵀ W + sigma² I. Time and memory as :class:`PCA` with the same solver.

    Parameters
    ----------
    n_components : int, default=2
        Latent dimension k; must be below min(n_samples, n_features) so that some variance is left for sigma².
    {solver}
    random_state : int, Generator or None, default=None
        Seeds the randomized solver.

    Attributes
    ----------
    W_ : ndarray (n_features, n_components)
    sigma2_ : float
    mean_ : ndarray (n_features,)
    log_likelihood_ : float
        Total log-likelihood of the training data under the fitted model.
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64
        Posterior means of the latent variables.
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "svd_solver": [Options("auto", "full", "randomized")],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, svd_solver="auto", random_state=None):
        self.n_components = n_components
        self.svd_solver = svd_solver
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit W, sigma² and mu by maximum likelihood; store the posterior means as ``embedding_``."""
        self._validate_params()
        X = check_array(X, "ProbabilisticPCA", min_samples=2)
        n, d = X.shape
        k = self.n_components
        if k >= d:
            raise ValueError(f"ProbabilisticPCA needs n_features > n_components, so that the discarded directions "
                             f"define the noise variance; got n_features = {d} and n_components = {k}.")
        if k > n:
            raise ValueError(f"n_components ({k}) must be at most n_samples ({n}) in ProbabilisticPCA.")
        mean, w, V, total, _, _ = principal_axes(X, k, self.svd_solver, 10, "auto", self.random_state)
        ml = (n - 1) / n  # the ML covariance has normaliser n, PCA's has n - 1
        lam, total = w * ml, total * ml
        sigma2 = max((total - lam.sum()) / (d - k), 1e-12 * max(total, 1e-300))
        lam = np.maximum(lam, sigma2)
        self.mean_, self.sigma2_ = mean, float(sigma2)
        self.W_ = V.T * np.sqrt(lam - sigma2)
        self.eigenvalues_ = lam
        # log|C| = sum log lambda_k + (d-k) log sigma²; tr(C⁻¹ S) = d at the ML solution
        self._logdet = float(np.log(lam).sum() + (d - k) * np.log(sigma2))
        self.log_likelihood_ = float(-0.5 * n * (d * np.log(2 * np.pi) + self._logdet + d))
        self.n_features_in_ = d
        self.embedding_ = self.transform(X)
        return self

    def transform(self, X) -> np.ndarray:
        """Posterior mean E[z | x] of each row's latent coordinates."""
        self._check_fitted("W_")
        X = check_array(X, "ProbabilisticPCA")
        check_n_features(self, X)
        M = self.W_.T @ self.W_ + self.sigma2_ * np.eye(self.W_.shape[1])
        return ((X - self.mean_) @ self.W_ @ np.linalg.inv(M)).astype(np.float32)

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row under N(mu, W Wᵀ + sigma² I). Time O(n d k)."""
        self._check_fitted("W_")
        X = check_array(X, "ProbabilisticPCA")
        check_n_features(self, X)
        Xc = X.astype(np.float64) - self.mean_
        d, k = self.W_.shape
        # Woodbury: C⁻¹ = (I - W M⁻¹ Wᵀ) / sigma²
        M = self.W_.T @ self.W_ + self.sigma2_ * np.eye(k)
        proj = Xc @ self.W_
        quad = (np.einsum("ij,ij->i", Xc, Xc) - np.einsum("ij,ij->i", proj @ np.linalg.inv(M), proj)) / self.sigma2_
        return -0.5 * (d * np.log(2 * np.pi) + self._logdet + quad)

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per row."""
        return float(self.score_samples(X).mean())


ProbabilisticPCA.__doc__ = ProbabilisticPCA.__doc__.replace("{solver}", _SOLVER_DOC)
