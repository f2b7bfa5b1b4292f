"""meta-SNE: compare whole representations (Olah 2015) and map them jointly.

>>> from repviz.meta import MetaSNE, representation_distances   # doctest: +SKIP
>>> result = MetaSNE(transform="dist", embedding="mds").fit("logs")   # doctest: +SKIP
>>> result.coords, result.keys, result.trajectories()   # doctest: +SKIP

Modules, one job each: ``vectors`` (representation → unit vector), ``bank`` (vectors on disk, blocked float64
Gram, incremental cache), ``distances`` (chord/angle, ``representation_distances``), ``sources`` (what to
compare, probe checks), ``embedding`` (MDS/SMACOF/t-SNE of the R×R distances), ``metasne`` (the estimator and
its fit), ``tasks`` (vectors and Gram blocks as executor tasks), ``result`` (the saved map, numpy only),
``checks`` (layer identification and architecture separation across seeds), ``options`` (the transform, metric
and embedding choices, importing nothing).
"""

from __future__ import annotations

import importlib

# Lazy: reading a saved map (MetaResult, used by the TensorBoard plugin) must not import numba and the manifold
# code that computing one needs. Each public name is imported from its module on first use.
_EXPORTS = {"EMBEDDINGS": "options", "INPUT_KEY": "sources", "METRICS": "options", "MetaResult": "result",
            "MetaSNE": "metasne", "SeedChecks": "checks", "SUBSETS": "options", "TRANSFORMS": "options",
            "Trajectory": "result", "representation_distances": "distances", "seed_checks": "checks"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'repviz.meta' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
