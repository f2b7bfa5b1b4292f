"""Similarity heatmaps with matplotlib (written by ``repviz similarity --figures`` and ``repviz export``:
:mod:`repviz.export`).

Rows and columns keep the order of the matrix (layers in model order, snapshots in step order); each cell shows
its value when the matrix is small enough to read (:data:`ANNOTATE_CELLS`), the most similar column of each row
is outlined (the layer-identification test of Kornblith et al. 2019 reads the outlines off the diagonal), and the
colour bar names the measure. A representation left out (constant over the probe, as a dead layer is) leaves its
row or column empty: grey, hatched, and named with its reason in the caption. Needs matplotlib (the ``export``
extra).
"""

from __future__ import annotations

import textwrap

import numpy as np

from ..version import install_hint

try:
    import matplotlib

    matplotlib.use("Agg", force=False)  # files only, whatever the environment's display
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
except ImportError as e:  # the optional extra: one clear line for the CLI
    raise ImportError(f"similarity figures need matplotlib; install it with: {install_hint('export')}") from e

from .registry import get_measure
from .result import SimilarityMatrix

#: Values are written in the cells up to this many cells (a 16 × 16 matrix); above, only colours.
ANNOTATE_CELLS = 256


def colour_label(matrix: SimilarityMatrix) -> str:
    """What the colour bar measures, e.g. ``debiased linear CKA`` or ``Procrustes distance (angle, radians)``."""
    return get_measure(matrix.measure).colour_label(matrix.params)


def heatmap(matrix: SimilarityMatrix, title: str = "") -> Figure:
    """The matrix as a heatmap: rows down, columns across, colour bar labelled, small matrices annotated."""
    V = np.asarray(matrix.values, dtype=np.float64)
    n_rows, n_cols = V.shape
    fig = Figure(figsize=(min(2.2 + 0.55 * n_cols, 16), min(1.6 + 0.45 * n_rows, 14)))
    ax = fig.subplots()
    vmin, vmax = get_measure(matrix.measure).colour_range(V[np.isfinite(V)])
    cmap = "viridis" if matrix.higher_is_similar else "viridis_r"  # a distance's 0 in the colour of CKA's 1
    image = ax.imshow(np.ma.masked_invalid(V), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03).set_label(colour_label(matrix), fontsize=8)
    ax.set_xticks(range(n_cols), matrix.labels("cols"), rotation=60 if n_cols > 6 else 0,
                  ha="right" if n_cols > 6 else "center", fontsize=7)
    ax.set_yticks(range(n_rows), matrix.labels("rows"), fontsize=7)
    ax.set_ylabel(_axis_name(matrix, "rows"), fontsize=8)
    outlined = bool(np.isfinite(V).any())
    ax.set_xlabel(_axis_name(matrix, "cols") + ("\n(outlined: each row's most similar column)" if outlined else ""),
                  fontsize=8)
    if outlined:
        for i, j in enumerate(matrix.best()):
            if j >= 0:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.2, ec="red"))
    for i, j in zip(*np.nonzero(np.isnan(V))):
        if matrix.hole(i, j):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fc="0.85", ec="0.6", hatch="///", lw=0))
    if line := matrix.left_out_line():
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(line[0].upper() + line[1:], 110)), fontsize=6.5,
                 color="0.3", va="bottom")
        fig.subplots_adjust(bottom=0.3)
    if V.size <= ANNOTATE_CELLS:
        middle = (vmin + vmax) / 2
        for (i, j), v in np.ndenumerate(V):
            if np.isfinite(v):
                light = (v < middle) == matrix.higher_is_similar  # dark end of the colour map: white text
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6.5,
                        color="white" if light else "black")
    ax.set_title(title or matrix.title, fontsize=9)
    return fig


def _axis_name(matrix: SimilarityMatrix, axis: str) -> str:
    keys = matrix.rows if axis == "rows" else matrix.cols
    runs, layers = {k.run for k in keys}, {k.layer for k in keys}
    if len(runs) == 1 and len(layers) == 1:
        return f"{matrix.step_unit} of {next(iter(layers))} ({next(iter(runs))})"
    return f"layer of {next(iter(runs))}" if len(runs) == 1 else "representation"
