"""Layer against layer: how similar are two networks' representations, and how did training move one?

>>> from repviz.similarity import similarity   # doctest: +SKIP
>>> m = similarity("logs", runs=("relu/seed0", "relu/seed1"))   # doctest: +SKIP
>>> m.values, m.rows, m.cols, m.layer_identification()   # doctest: +SKIP

Modules, one job each: ``measures`` (linear, RBF and minibatch CKA, Procrustes; arrays in, numbers out),
``sources`` (which stored representations a matrix compares, probe checks), ``cache`` (values stored in the log
directory, per measure and options), ``compute`` (the missing values, from the meta bank or the measures),
``matrix`` (``similarity``, ``similarity_over_training``, ``cached_similarity``), ``result`` (the labelled
matrix, numpy only), ``figures`` (heatmaps with matplotlib), ``options`` (the choices, importing nothing).

The package is callable: ``repviz.similarity(logdir, runs)`` is :func:`similarity`. A plain function re-exported
as ``repviz.similarity`` would be replaced by this package the moment any of its modules is imported (Python
binds a subpackage to its parent's attribute), so the package itself takes the call.
"""

from __future__ import annotations

import importlib
import sys
import types

# Lazy, as in repviz.meta: reading a cached matrix (the TensorBoard plugin) must not import numba.
_EXPORTS = {"KERNELS": "options", "MEASURES": "options", "ProbeMismatchError": "sources", "RepKey": "result",
            "SimilarityMatrix": "result", "cached_similarity": "matrix", "similarity": "matrix",
            "similarity_over_training": "matrix"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'repviz.similarity' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        """:func:`repviz.similarity.matrix.similarity`."""
        return __getattr__("similarity")(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
