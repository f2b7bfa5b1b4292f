"""The one eigensolver behind every spectral method (Isomap, LLE variants, spectral embedding, diffusion maps,
kernel PCA, classical MDS).

``eigsolve`` checks the connected components of the graph the matrix came from (a disconnected graph gives a
degenerate null space: one zero eigenvalue per component), then picks a solver by size:

- "dense": LAPACK ``eigh`` restricted to the wanted eigenpairs; time O(n² k) to O(n³), memory O(n²).
- "arpack": ARPACK Lanczos (``scipy.sparse.linalg.eigsh``). Largest eigenpairs directly (callers that want the
  bottom of a normalised Laplacian ask for the top of D^-1/2 W D^-1/2 instead: no factorisation); smallest
  eigenpairs of a sparse matrix in shift-invert mode just below zero (a sparse LU, then fast convergence).
  When the caller knows the top of the spectrum (``upper``: 1 for D^-1/2 W D^-1/2) and Lanczos stalls on
  largest eigenvalues clustered against it, shift-invert just above it takes over (see ``_largest_arpack``).
- "lobpcg": block preconditioner-free LOBPCG; no factorisation, for sparse problems too large to factorise.

Sign convention: each eigenvector's largest-magnitude entry is positive (``fix_signs``); the start vector comes
from ``random_state``, so a run is reproducible.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh, lobpcg, splu

from ._base import check_dense_memory, rng_from

SOLVERS = ("auto", "dense", "arpack", "lobpcg")
_DENSE_MAX_N = 1000      # below this, LAPACK on the whole matrix beats iterative solvers
_FACTORISE_MAX_N = 200_000  # above this, a sparse LU for shift-invert may take too long or fill in too much
# Lanczos restarts before a top-of-spectrum problem falls back to shift-invert: kNN graphs of MNIST, swiss rolls
# and S-curves (n <= 10,000) converge within 80; a diffusion operator on a 3-D Gaussian blob never does
_LANCZOS_RESTARTS = 500


def fix_signs(Y: np.ndarray) -> np.ndarray:
    """Deterministic sign convention for eigenvector embeddings: each column's largest-magnitude entry is positive."""
    idx = np.argmax(np.abs(Y), axis=0)
    signs = np.sign(Y[idx, np.arange(Y.shape[1])])
    signs[signs == 0] = 1
    return Y * signs


def check_connected(graph, owner: str) -> None:
    """Raise if ``graph`` (sparse adjacency) has more than one connected component, naming the fix."""
    n_comp, _ = connected_components(graph, directed=False)
    if n_comp > 1:
        raise ValueError(f"The neighbourhood graph of {owner} has {n_comp} connected components, so the "
                         f"embedding is not defined (one zero eigenvalue per component). Increase "
                         f"n_neighbors until the neighbourhoods overlap.")


def _shift_invert(A, sigma: float):
    """(A - sigma I)⁻¹ as an operator. A sparse A is factorised once with a symmetric minimum-degree ordering
    (about half the fill-in and time of SuperLU's default column ordering on kNN-graph matrices); sigma sits
    just outside the spectrum (below 0 for a singular positive semi-definite A such as LLE's or a Laplacian,
    above the top for ``upper``), so the factorised matrix is definite and needs no pivoting."""
    n = A.shape[0]
    if not sp.issparse(A):
        return None  # eigsh factorises dense matrices itself
    lu = splu(sp.csc_matrix(A - sigma * sp.identity(n)), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
              options={"SymmetricMode": True})
    return LinearOperator((n, n), matvec=lu.solve, dtype=np.float64)


def _largest_arpack(A, n_eig: int, *, upper: float | None, tol: float, max_iter: int | None, v0: np.ndarray):
    """Largest eigenpairs by Lanczos: matrix-vector products only, O(nnz) memory.

    The top eigenvalues of a diffusion operator can sit within 1e-7 of each other on a spectrum of width 1 (a
    3-D Gaussian blob: its outliers are almost cut off by the kernel), and Lanczos then does not converge in
    thousands of restarts. If ``upper`` bounds the spectrum from above, Lanczos gets ``_LANCZOS_RESTARTS``
    restarts (unless ``max_iter`` is given), then shift-invert just above ``upper`` takes over: the wanted
    eigenvalues become the largest, well separated ones of (A - sigma I)⁻¹, at the price of one sparse LU.
    Spectra that crowd like this usually come from low-dimensional data, whose graphs have small separators,
    so the LU stays sparse.
    """
    if upper is None:
        return eigsh(A, n_eig, which="LA", tol=tol, maxiter=max_iter, v0=v0)
    try:
        return eigsh(A, n_eig, which="LA", tol=tol, maxiter=max_iter or _LANCZOS_RESTARTS, v0=v0)
    except ArpackNoConvergence:
        sigma = upper + 1e-9 * (abs(upper) or 1.0)
        return eigsh(A, n_eig, sigma=sigma, which="LM", tol=tol, maxiter=max_iter, v0=v0,
                     OPinv=_shift_invert(A, sigma))


def _pick(solver: str, A, n: int, k: int) -> str:
    if solver != "auto":
        return solver
    if n <= _DENSE_MAX_N or k >= n // 5:
        return "dense"
    if sp.issparse(A) and n > _FACTORISE_MAX_N:
        return "lobpcg"
    return "arpack"


def eigsolve(A, n_eig: int, *, largest: bool, solver: str = "auto", tol: float = 0.0, max_iter: int | None = None,
             random_state=None, graph=None, inverse=None, upper: float | None = None,
             owner: str = "eigsolve") -> tuple[np.ndarray, np.ndarray]:
    """Extreme eigenpairs of the symmetric matrix ``A`` (dense array or scipy sparse).

    Parameters
    ----------
    A : (n, n) symmetric array or sparse matrix
    n_eig : int
        Number of eigenpairs.
    largest : bool
        Largest (algebraic) eigenvalues if True, smallest if False.
    solver : {"auto", "dense", "arpack", "lobpcg"}
        "auto": dense for n <= 1000 or n_eig >= n / 5, lobpcg for sparse n > 200,000, else arpack.
    tol, max_iter : iterative solvers' tolerance (0: machine precision) and iteration cap.
    random_state : seeds the start vector(s).
    graph : sparse adjacency or None
        If given, its connected components are checked first (see :func:`check_connected`).
    inverse : LinearOperator or None
        For the smallest eigenpairs with ARPACK: an operator applying (A + eps I)⁻¹ for a tiny eps, when the
        caller can factorise something cheaper than A (LLE: A = Bᵀ B with B sparser than A).
    upper : float or None
        For the largest eigenpairs with ARPACK: the top of A's spectrum, if known and (nearly) attained (1 for
        D^-1/2 W D^-1/2); lets a stalled Lanczos run fall back to shift-invert (see :func:`_largest_arpack`).

    Returns
    -------
    eigenvalues : float64 (n_eig,), sorted from the extreme inwards (decreasing if ``largest``)
    eigenvectors : float64 (n, n_eig), columns signed by :func:`fix_signs`
    """
    if graph is not None:
        check_connected(graph, owner)
    n = A.shape[0]
    if not 1 <= n_eig <= n:
        raise ValueError(f"{owner} needs {n_eig} eigenvectors of a {n}×{n} matrix; there are only {n}.")
    method = _pick(solver, A, n, n_eig)
    if method == "arpack" and n_eig >= n - 1:
        method = "dense"  # ARPACK needs k < n
    try:
        if method == "dense":
            check_dense_memory(8.0 * n * n, owner, f"a dense {n}×{n} eigenproblem",
                               "Use eigen_solver='arpack' or 'lobpcg'.")
            M = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)
            lo, hi = (n - n_eig, n - 1) if largest else (0, n_eig - 1)
            # "evx" (bisection + inverse iteration) stays fast when BLAS threads compete for cores; "evr" was
            # 30x slower on a busy 2-core machine
            w, V = eigh(M, subset_by_index=(lo, hi), overwrite_a=M is not A, driver="evx")
        elif method == "arpack":
            v0 = rng_from(random_state).uniform(-1, 1, n)
            if largest:
                w, V = _largest_arpack(A, n_eig, upper=upper, tol=tol, max_iter=max_iter, v0=v0)
            elif inverse is not None:
                w, V = eigsh(A, n_eig, sigma=0.0, which="LM", tol=tol, maxiter=max_iter, v0=v0, OPinv=inverse)
            else:
                sigma = -1e-9 * (float(abs(A.diagonal()).max()) or 1.0)
                w, V = eigsh(A, n_eig, sigma=sigma, which="LM", tol=tol, maxiter=max_iter, v0=v0,
                             OPinv=_shift_invert(A, sigma))
        else:
            X0 = rng_from(random_state).standard_normal((n, n_eig + 2))
            w, V = lobpcg(A, X0, largest=largest, tol=tol or None, maxiter=max_iter or 500)
            keep = np.argsort(w)[-n_eig:] if largest else np.argsort(w)[:n_eig]  # two guard vectors dropped
            w, V = w[keep], V[:, keep]
    except (ArpackNoConvergence, ArpackError, RuntimeError) as e:
        raise RuntimeError(f"{owner}: the {method} eigensolver failed ({e}). Try eigen_solver='dense' for small "
                           f"data, eigen_solver='lobpcg', a larger max_iter, or a larger n_neighbors.") from e
    order = np.argsort(w)[::-1] if largest else np.argsort(w)
    w, V = np.asarray(w, dtype=np.float64)[order], np.asarray(V, dtype=np.float64)[:, order]
    return w, fix_signs(V)
