"""The options of a similarity matrix, spelled once: what ``repviz.similarity``, ``repviz similarity`` and the
TensorBoard tab offer besides the measure (the measures are :data:`repviz.similarity.registry.MEASURES`).

A module of constants only (it imports nothing), so that the plugin can list the choices without loading numba or
the numerics. Each tuple starts with the default.
"""

#: CKA's kernel on the probes: dot products (linear CKA) or a Gaussian of the distances (RBF CKA).
KERNELS = ("linear", "rbf")
#: RBF CKA's bandwidth as a fraction of the median probe distance (Kornblith et al. 2019 report 0.2 to 0.8).
RBF_SIGMA = 0.8
#: ``batch_size=None``: exact (one batch) up to this many probes, minibatches above.
AUTO_EXACT_PROBES = 2048
#: ``batch_size=None`` above ``AUTO_EXACT_PROBES`` probes: minibatches of this many (Nguyen et al. use 256).
AUTO_BATCH = 1024
