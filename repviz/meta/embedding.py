"""Joint 2-D maps of all representations from their R×R distances.

Classical MDS is the default: deterministic, and it keeps trajectory lengths (Euclidean-embeddable parts of
the distances are reproduced exactly). SMACOF refines it towards the distances themselves (metric MDS); t-SNE
on the precomputed distances, started from the MDS map, is Olah's meta-SNE. All representations are embedded
together, never per snapshot, so positions are comparable across runs, layers and time.
"""

from __future__ import annotations

import numpy as np

from ..manifold import classical_mds


def auto_perplexity(n: int) -> float:
    """t-SNE perplexity for ``n`` representations: 30, or (n - 1) / 3 when there are fewer than 91."""
    return float(max(1.0, min(30.0, (n - 1) / 3)))


def embed(D: np.ndarray, method: str = "mds", n_components: int = 2, perplexity: float | str = "auto",
          random_state: int | None = 0) -> tuple[np.ndarray, dict]:
    """Coordinates (R, n_components) float64 of representations whose distances are ``D``, and diagnostics.

    The diagnostics always hold ``explained_variance`` of the classical MDS map (the share of the positive
    eigenvalues of -1/2 H D² H in the first ``n_components``); SMACOF adds ``normalized_stress``, t-SNE its
    ``perplexity`` and ``kl_divergence``. Time O(R³) for MDS (R is hundreds to a few thousands).
    """
    R = len(D)
    if R < n_components + 1:
        raise ValueError(f"embedding {R} representation(s) in {n_components} dimensions needs at least "
                         f"{n_components + 1}; add runs, layers or snapshots")
    Y, eigenvalues = classical_mds(D, n_components)
    positive = eigenvalues.clip(0)
    info = {"explained_variance": float(positive[:n_components].sum() / max(positive.sum(), 1e-300))}
    if method == "smacof":
        from ..manifold import MDS

        # float32 numerics, as the stored maps were made (MDS computes float64 input in float64)
        mds = MDS(n_components, metric="precomputed", init=Y, random_state=random_state).fit(
            np.asarray(D, dtype=np.float32))
        Y = np.asarray(mds.embedding_, dtype=np.float64)
        info["normalized_stress"] = float(mds.normalized_stress_)
    elif method == "tsne":
        from ..manifold import TSNE

        p = auto_perplexity(R) if perplexity == "auto" else float(perplexity)
        tsne = TSNE(n_components, perplexity=p, metric="precomputed", init=Y, random_state=random_state)
        Y = np.asarray(tsne.fit_transform(D), dtype=np.float64)
        info.update(perplexity=float(tsne.perplexity_), kl_divergence=float(tsne.kl_divergence_))
    return Y, info
