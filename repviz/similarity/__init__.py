"""Layer against layer: how similar are two networks' representations, and how did training move one?

>>> from repviz.similarity import similarity   # doctest: +SKIP
>>> m = similarity("logs", runs=("relu/seed0", "relu/seed1"))   # doctest: +SKIP
>>> m.values, m.rows, m.cols, m.layer_identification()   # doctest: +SKIP

Modules, one job each: ``measures`` (linear, RBF and minibatch CKA, Procrustes; arrays in, numbers out),
``sources`` (which stored representations a matrix compares, probe checks), ``cache`` (values stored in the log
directory, per measure and options), ``compute`` (the missing values, from the meta bank or the measures),
``matrix`` (``similarity``, ``similarity_over_training``, ``cached_similarity``), ``result`` (the labelled
matrix, numpy only), ``figures`` (heatmaps with matplotlib), ``registry`` (the measures by name, ``MEASURES`` and
``register_measure``, numpy only), ``options`` (the other choices, importing nothing).

"""

from __future__ import annotations

import importlib

# Lazy, as in repviz.meta: reading a cached matrix (the TensorBoard plugin) must not import numba.
_EXPORTS = {"KERNELS": "options", "MEASURES": "registry", "ProbeMismatchError": "sources", "RepKey": "result",
            "SimilarityMatrix": "result", "cached_similarity": "matrix", "register_measure": "registry",
            "similarity": "matrix", "similarity_over_training": "matrix"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'repviz.similarity' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)

