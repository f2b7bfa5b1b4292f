"""Dimensionality-reduction methods with scikit-learn's estimator conventions.

TSNE, Isomap, LocallyLinearEmbedding, SpectralEmbedding, MDS and ClassicalMDS are drop-ins for scikit-learn's
(tags, ``set_output``, feature names, scikit-learn's keywords, the input's dtype out); docs/SKLEARN.md lists the
deliberate differences (float32 numerics first) with their reasons.
"""

from .autoencoder import AutoencoderEmbedding
from .elastic import ElasticEmbedding
from .force import ForceDirectedLayout
from .ica import FastICA
from .isomap import Isomap
from .kernel_pca import KernelPCA
from .lda import LinearDiscriminantAnalysis
from .lle import LocallyLinearEmbedding
from .mds import MDS, ClassicalMDS, Sammon, classical_mds
from .pca import PCA, ProbabilisticPCA
from .sfa import SlowFeatureAnalysis
from .spectral import DiffusionMap, SpectralEmbedding
from .tsne import SNE, TSNE
from .whitening import Whitening

__all__ = ["classical_mds", "PCA", "ProbabilisticPCA", "ClassicalMDS", "MDS", "Sammon", "Isomap",
           "LocallyLinearEmbedding", "SpectralEmbedding", "DiffusionMap", "KernelPCA", "ForceDirectedLayout",
           "LinearDiscriminantAnalysis", "TSNE", "SNE", "Whitening", "FastICA", "SlowFeatureAnalysis",
           "AutoencoderEmbedding", "ElasticEmbedding"]
