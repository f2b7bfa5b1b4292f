"""t-SNE and symmetric SNE: affinities (``affinity``), initialisations (``init``), objectives and gradient
descent (``optimize``), the embedding object that resumes a descent (``embedding``), numba kernels
(``_kernels``, ``_bh``, ``_fft``), the estimators (``tsne``), placing new points into a fixed layout
(``transform``) and the pipeline's continuation of a chain (``continuation``)."""

from .affinity import Affinities
from .embedding import TSNEEmbedding
from .tsne import SNE, TSNE

__all__ = ["TSNE", "SNE", "TSNEEmbedding", "Affinities"]
