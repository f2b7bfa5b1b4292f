"""How the pipeline continues a t-SNE chain (the continuation policy of the ``"tsne"`` method in
:mod:`repviz.methods`): snapshot k's layout from snapshot k−1's, written against
:class:`~repviz.manifold.tsne.TSNEEmbedding`.

The previous layout is the start, at its own scale and without early exaggeration (its clusters are there
already). Two starts race: that layout as it is, and the same with every point moved to the P-weighted mean of
its new neighbours there (:func:`~repviz.manifold.tsne.init.weighted_mean`), so that points whose neighbourhood
changed jump to it instead of crawling there through the points in between. The moved start is contracted (each
point is an average), so it runs at 4x the learning rate, where it re-expands. After 30 iterations, if its KL
divergence is below that of the previous layout as it is, it runs on to ``neighbour_start`` iterations in all;
otherwise the previous layout runs for ``max_iter`` iterations (the 30 are then spent outside them), stopping
early by ``tol``. ``benchmarks/bench_continuation.py`` measures it against plain iterations (the figures are in
``docs/MEASUREMENTS.md``).

The kNN search of a snapshot starts from the previous snapshot's graph when the chain has it (``memo``): the
same points' neighbours change little between snapshots, so NN-descent (used from 50,000 points) converges in a
round or two instead of building its graph from random-projection trees, at the same recall. The exact search,
below 50,000 points, is unaffected. A chain resumed from a stored layout has no graph to start from and searches
afresh, so above 50,000 points its later layouts may differ from an uninterrupted chain's by what the approximate
search's differences make.
"""

from __future__ import annotations

import numpy as np

from ..._validation import NONE, Interval, check_param
from .embedding import TSNEEmbedding, auto_learning_rate
from .init import rescale, weighted_mean
from .tsne import TSNE

#: Iterations from both starts before the moved one is judged.
RACE_ITER = 30
#: Factor on the learning rate from the moved start (a contracted layout re-expands).
RACE_RATE = 4.0

# keys of the continuation dict that are this policy's own; the others are TSNE parameters
_POLICY_KEYS = ("rescale_init", "neighbour_start")


def continue_tsne(X: np.ndarray, previous: np.ndarray, params: dict, continuation: dict,
                  memo: dict | None = None) -> tuple[np.ndarray, dict]:
    """Embed X by t-SNE continuing from ``previous``, the layout of the snapshot before (see the module
    docstring): the pipeline's continuation of its ``"tsne"`` method.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The snapshot's representation.
    previous : array of shape (n_samples, n_components)
        The previous snapshot's layout, its points in the order of X's (for a snapshot of another probe subset,
        carried onto X's points by :func:`repviz.chains.carry_layout`).
    params : dict
        Every :class:`~repviz.manifold.TSNE` parameter (as ``TSNE(**params)`` takes them), ``n_jobs`` an int.
    continuation : dict
        The pipeline's continuation settings: ``rescale_init`` (bool: rescale ``previous`` to standard deviation
        1e-4 first), ``neighbour_start`` (int: iterations in all from a kept moved start; None: no race) and
        TSNE parameters that override ``params`` (the pipeline's: ``early_exaggeration_iter=0``, the only value
        allowed, ``max_iter=300`` and ``tol=2e-2``).
    memo : dict or None
        What the chain carries from one snapshot to the next (of the same points): ``"knn_indices"``, the
        previous snapshot's kNN graph, is read to start the search from and replaced by this snapshot's.

    Returns
    -------
    Y : float32 array of shape (n_samples, n_components)
    diagnostics : dict
        ``{"n_iter": iterations of Y's descent, "kl_divergence": KL(P || Q) of Y}``.
    """
    memo = {} if memo is None else memo
    embedding, _ = continue_embedding(X, previous, params, continuation, seeds=memo.get("knn_indices"))
    memo["knn_indices"] = embedding.affinities.knn_indices
    Y = embedding.layout
    if not np.isfinite(Y).all():
        raise FloatingPointError("TSNE diverged (non-finite coordinates) continuing from the previous layout")
    return Y.astype(np.float32), {"n_iter": int(embedding.n_iter), "kl_divergence": float(embedding.kl_divergence)}


def continue_embedding(X: np.ndarray, previous: np.ndarray, params: dict, continuation: dict,
                       seeds: np.ndarray | None = None) -> tuple[TSNEEmbedding, str]:
    """The race of the module docstring on X from ``previous``: the optimised embedding, and the start it went on
    from ("neighbours" if the moved start won, else "previous"). Parameters as in :func:`continue_tsne`;
    ``seeds``: candidate neighbours to start the kNN search from (:meth:`TSNE.prepare_affinities
    <repviz.manifold.TSNE.prepare_affinities>`)."""
    race_total = check_param(continuation.get("neighbour_start"), [NONE, Interval(int, 1, None, closed="left")],
                             "neighbour_start", "continue_embedding")
    tsne = TSNE(**{**params, **{k: v for k, v in continuation.items() if k not in _POLICY_KEYS}})
    if tsne.early_exaggeration_iter:
        raise ValueError(f"continue_embedding goes on from a layout that has its clusters already, without early "
                         f"exaggeration; got early_exaggeration_iter={tsne.early_exaggeration_iter}, pass 0")
    affinities = tsne.prepare_affinities(X, seeds=seeds)
    start = np.array(previous, dtype=np.float64)
    if start.shape != (affinities.n_samples, tsne.n_components):
        raise ValueError(f"previous has shape {start.shape}; it must be (n_samples, n_components) = "
                         f"{(affinities.n_samples, tsne.n_components)}")
    start = rescale(start) if continuation.get("rescale_init", False) else start - start.mean(axis=0)
    options = dict(method=tsne.method, dof=tsne.dof, angle=tsne.angle, n_jobs=tsne.n_jobs)
    descent = dict(momentum=tsne.momentum, tol=float(tsne.tol))
    rate = (auto_learning_rate(affinities.n_samples) if tsne.learning_rate == "auto"
            else float(tsne.learning_rate))
    embedding = TSNEEmbedding(start, affinities, **options)
    if race_total is not None:
        race = min(RACE_ITER, race_total)
        moved = TSNEEmbedding(weighted_mean(start, affinities.P), affinities, **options)
        moved.optimize(race, learning_rate=RACE_RATE * rate, **descent)
        if moved.kl_divergence < embedding.kl_divergence:
            # on from a copy, which relabels the points from their input order: the pipeline always has, and in
            # place, points whose Z-order codes tie (closer than 2^-31 of the extent) could be summed in another
            # order
            return moved.copy().optimize(race_total - race, learning_rate=RACE_RATE * rate, **descent), "neighbours"
    return embedding.optimize(tsne.max_iter, learning_rate=rate, **descent), "previous"
