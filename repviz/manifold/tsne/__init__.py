"""t-SNE and symmetric SNE: affinities (``affinity``), initialisations (``init``), objectives and gradient
descent (``optimize``), numba kernels (``_kernels``, ``_bh``, ``_fft``) and the estimators (``tsne``)."""

from .tsne import SNE, TSNE

__all__ = ["TSNE", "SNE"]
