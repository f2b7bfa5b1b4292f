"""meta-SNE: compare whole representations (Olah 2015) and map them jointly.

>>> from repviz.meta import MetaSNE, representation_distances   # doctest: +SKIP
>>> result = MetaSNE(transform="dist", embedding="mds").fit("logs")   # doctest: +SKIP
>>> result.coords, result.keys, result.trajectories()   # doctest: +SKIP

Modules, one job each: ``vectors`` (representation → unit vector), ``bank`` (vectors on disk, blocked float64
Gram, incremental cache), ``distances`` (chord/angle, ``representation_distances``), ``sources`` (what to
compare, probe checks), ``embedding`` (MDS/SMACOF/t-SNE of the R×R distances), ``metasne`` (the estimator and
its saved result).
"""

from .distances import METRICS, representation_distances
from .embedding import EMBEDDINGS
from .metasne import MetaResult, MetaSNE, Trajectory
from .sources import INPUT_KEY
from .vectors import TRANSFORMS

__all__ = ["EMBEDDINGS", "INPUT_KEY", "METRICS", "MetaResult", "MetaSNE", "TRANSFORMS", "Trajectory",
           "representation_distances"]
