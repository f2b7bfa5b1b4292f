"""Dimensionality-reduction methods with scikit-learn's estimator conventions."""

from .isomap import Isomap
from .lle import LocallyLinearEmbedding
from .mds import MDS, ClassicalMDS, Sammon, classical_mds
from .pca import PCA, ProbabilisticPCA
from .spectral import DiffusionMap, SpectralEmbedding
from .tsne import SNE, TSNE

__all__ = ["classical_mds", "PCA", "ProbabilisticPCA", "ClassicalMDS", "MDS", "Sammon", "Isomap",
           "LocallyLinearEmbedding", "SpectralEmbedding", "DiffusionMap", "TSNE", "SNE"]
