"""Dimensionality-reduction methods with scikit-learn's estimator conventions."""

from .mds import classical_mds
from .pca import PCA, ProbabilisticPCA
from .tsne import SNE, TSNE

__all__ = ["classical_mds", "PCA", "ProbabilisticPCA", "TSNE", "SNE"]
