"""The choices of a meta-SNE map, spelled once: what ``MetaSNE``, ``repviz meta`` and the TensorBoard tab offer.

A module of constants only (it imports nothing), so that the plugin can list the choices in its run index without
loading numba or the manifold code that computing a map needs. Each tuple starts with the default.
"""

#: How a representation becomes a vector (see :mod:`repviz.meta.vectors`).
TRANSFORMS = ("dist", "sqrt", "rank", "cka", "rbf_cka", "ucka")
#: The distance between two representation vectors (see :mod:`repviz.meta.distances`).
METRICS = ("chord", "angle")
#: How the R×R distances become a 2-D map (see :mod:`repviz.meta.embedding`).
EMBEDDINGS = ("mds", "smacof", "tsne")
#: How snapshots of a subset of the probe are compared (see :func:`repviz.meta.sources.compared_rows`): on the
#: probe points every representation holds, or left out so that the rest compare on the whole probe.
SUBSETS = ("common", "whole")
#: Above this many probe points a meta-SNE vector holds a seeded sample of the probe pairs, not all n(n-1)/2 of
#: them (see :func:`repviz.meta.distances.pair_sample`; ``MetaSNE(max_probes=)``).
DEFAULT_MAX_PROBES = 3000
