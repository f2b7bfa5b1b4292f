"""Does a meta-SNE map tell the truth? Nearest-neighbour checks across training seeds (Kornblith et al. 2019).

Networks trained from different seeds learn different weights but, if a representation similarity measures
something real, similar representations: the same layer of the same architecture should be each other's nearest
neighbour (layer identification), and hidden layers of one architecture should sit nearer each other than any
layer of another architecture (architecture separation). Both read only the distances of a :class:`MetaResult`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from .result import MetaResult
from .sources import Key


@dataclass(frozen=True)
class SeedChecks:
    """Result of :func:`seed_checks` at one snapshot ``step``.

    ``layer_identification``: fraction of the ``n_layers`` representations (every layer of every run) whose
    nearest other-seed representation is the same architecture and layer. ``architecture_separation``: fraction
    of the ``n_hidden`` hidden-layer representations whose nearest other-seed representation has the same
    architecture. ``misses``: (representation, its nearest other-seed neighbour) where the layer was not
    identified.
    """

    step: int
    layer_identification: float
    n_layers: int
    architecture_separation: float
    n_hidden: int
    misses: list[tuple[Key, Key]]


def seed_checks(result: MetaResult, runs: Mapping[str, tuple[str, int]], *, output_layers: Collection[str] = (),
                step: int | None = None) -> SeedChecks:
    """Layer identification and architecture separation across seeds, from the distances of ``result``.

    Parameters
    ----------
    result : MetaResult
        A meta-SNE map whose keys are (run, layer, step); representations of runs not in ``runs`` (such as the
        input landmark) are ignored.
    runs : mapping run name -> (architecture, seed)
        Which runs to check and how they were trained. The candidates for a representation's nearest neighbour
        are the representations, at the same step, of the runs trained with another seed (of any architecture);
        runs sharing its seed are left out, since a shared seed may share initial weights.
    output_layers : collection of str, default=()
        Layers left out of architecture separation (e.g. the softmax outputs, which every network drives
        towards the same labels). Layer identification counts every layer.
    step : int, default=None
        The snapshot to check; None: the last step that every run in ``runs`` has.

    Returns
    -------
    SeedChecks
    """
    rows = {key: i for i, key in enumerate(result.keys) if key[0] in runs}
    if step is None:
        common = set.intersection(*({s for r, _, s in rows if r == run} for run in runs)) if runs else set()
        if not common:
            raise ValueError(f"runs {sorted(runs)} share no snapshot in this map; pass step= or map them together")
        step = max(common)
    keys = [k for k in rows if k[2] == step]
    if len({runs[r][1] for r, _, _ in keys}) < 2:
        raise ValueError(f"the checks need runs of at least two seeds at step {step}; this map has "
                         f"{sorted({runs[r][1] for r, _, _ in keys})}")
    idx = np.array([rows[k] for k in keys], dtype=np.intp)
    D = np.asarray(result.distances)[np.ix_(idx, idx)]
    arch = [runs[r][0] for r, _, _ in keys]
    seed = np.array([runs[r][1] for r, _, _ in keys])
    identified, separated, misses = [], [], []
    for i, (_, layer, _) in enumerate(keys):
        others = np.flatnonzero(seed != seed[i])
        j = int(others[np.argmin(D[i, others])])
        same_arch = arch[j] == arch[i]
        identified.append(same_arch and keys[j][1] == layer)
        if not identified[-1]:
            misses.append((keys[i], keys[j]))
        if layer not in output_layers:
            separated.append(same_arch)
    return SeedChecks(step=int(step), layer_identification=float(np.mean(identified)), n_layers=len(identified),
                      architecture_separation=float(np.mean(separated)) if separated else float("nan"),
                      n_hidden=len(separated), misses=misses)
