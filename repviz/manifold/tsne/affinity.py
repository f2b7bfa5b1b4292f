"""Input affinities P of t-SNE and SNE: Gaussian conditional probabilities calibrated to a perplexity on a kNN
graph, symmetrised into a sparse joint distribution (van der Maaten 2014; openTSNE's ``affinity.py``), and
:class:`Affinities`, P with what built it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..._rows import run_rows
from . import _kernels


def n_neighbors_for(perplexity: float, n_samples: int) -> int:
    """Neighbours used to calibrate a perplexity: 3 * perplexity (beyond that the Gaussian weights are < e^-9 of
    the largest for typical data), at most n_samples - 1."""
    return int(min(n_samples - 1, max(1, np.floor(3 * perplexity))))


def conditional_affinities(distances: np.ndarray, perplexity: float) -> tuple[np.ndarray, np.ndarray]:
    """p_{j|i} over each row's neighbours, exp(-beta_i d_ij²) normalised, with beta_i solved (float64, Newton steps
    safeguarded by bisection) until the row's perplexity exp(entropy) equals ``perplexity``. Returns
    (P_cond (n, k) float64, beta (n,))."""
    sq = np.square(np.asarray(distances, dtype=np.float64))
    out = np.empty_like(sq)
    betas = np.empty(sq.shape[0])
    run_rows(_kernels.conditional_p, sq.shape[0], sq, float(perplexity), out, betas)
    return out, betas


def joint_affinities(indices: np.ndarray, distances: np.ndarray, perplexity: float) -> sp.csr_matrix:
    """Symmetric joint affinities p_ij = (p_{j|i} + p_{i|j}) / 2n as a CSR matrix (float32 data, int32 indices,
    sorted, summing to 1), from a kNN graph (``indices``, ``distances``: (n, k), self excluded)."""
    return symmetrize_conditional(indices, conditional_affinities(distances, perplexity)[0])


def symmetrize_conditional(indices: np.ndarray, cond: np.ndarray) -> sp.csr_matrix:
    """:func:`joint_affinities` from the conditional p_{j|i} of each row's neighbours ``indices`` (n, k)."""
    n, k = indices.shape
    # each row's neighbours are distinct: sorted, they make a canonical CSR matrix directly (no COO conversion)
    order = np.argsort(indices, axis=1)
    P = sp.csr_matrix((np.take_along_axis(cond, order, axis=1).ravel(),
                       np.take_along_axis(indices, order, axis=1).ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))
    P = P + P.T
    P.sum_duplicates()
    P.sort_indices()
    P.data /= P.data.sum()
    return sp.csr_matrix((P.data.astype(np.float32), P.indices.astype(np.int32), P.indptr.astype(np.int64)),
                         shape=(n, n))


@dataclass(frozen=True, eq=False)
class Affinities:
    """The joint affinities P of a data set with what built them: computed once, they can be reused by several
    fits (``TSNE(...).fit(affinities)``) and continuations. Made by :meth:`TSNE.prepare_affinities
    <repviz.manifold.TSNE.prepare_affinities>`.

    Attributes
    ----------
    P : scipy.sparse.csr_matrix (n_samples, n_samples)
        Symmetric, float32, zero diagonal, summing to 1 (:func:`joint_affinities`).
    perplexity : float
        The perplexity each row was calibrated to (after lowering for a small n_samples).
    n_neighbors : int
        Neighbours per row of the kNN graph (n_samples - 1 for the exact gradient).
    metric : str
        Distances of the kNN graph ("euclidean", "cosine" or "precomputed").
    neighbors : str
        kNN method of :func:`repviz.neighbors.knn` ("auto", "exact" or "nndescent").
    n_features : int
        Features of the data (n_samples for a precomputed distance matrix).
    knn_indices : int32 array (n_samples, n_neighbors) or None
        Each point's nearest neighbours that P was calibrated on (None for the exact gradient, whose P uses every
        pair): what the kNN search of a related data set can start from (:func:`repviz.neighbors.knn`'s
        ``seeds``).
    """

    P: sp.csr_matrix
    perplexity: float
    n_neighbors: int
    metric: str
    neighbors: str
    n_features: int
    knn_indices: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return self.P.shape[0]
