"""Dimensionality-reduction methods with scikit-learn's estimator conventions."""

from .force import ForceDirectedLayout
from .isomap import Isomap
from .kernel_pca import KernelPCA
from .lda import LinearDiscriminantAnalysis
from .lle import LocallyLinearEmbedding
from .mds import MDS, ClassicalMDS, Sammon, classical_mds
from .pca import PCA, ProbabilisticPCA
from .spectral import DiffusionMap, SpectralEmbedding
from .tsne import SNE, TSNE

__all__ = ["classical_mds", "PCA", "ProbabilisticPCA", "ClassicalMDS", "MDS", "Sammon", "Isomap",
           "LocallyLinearEmbedding", "SpectralEmbedding", "DiffusionMap", "KernelPCA", "ForceDirectedLayout",
           "LinearDiscriminantAnalysis", "TSNE", "SNE"]
