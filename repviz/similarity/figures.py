"""Similarity heatmaps with matplotlib, and a matrix written out as CSV, JSON and figures (``repviz similarity
--out``, ``repviz export``).

Rows and columns keep the order of the matrix (layers in model order, snapshots in step order); each cell shows
its value when the matrix is small enough to read (:data:`ANNOTATE_CELLS`), the most similar column of each row
is outlined (the layer-identification test of Kornblith et al. 2019 reads the outlines off the diagonal), and the
colour bar names the measure. :func:`export_heatmaps` chooses what ``repviz export`` draws. Needs matplotlib (the
``export`` extra).
"""

from __future__ import annotations

import csv
import json
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

try:
    import matplotlib

    matplotlib.use("Agg", force=False)  # files only, whatever the environment's display
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
except ImportError as e:  # the optional extra: one clear line for the CLI
    raise ImportError("similarity figures need matplotlib; install it with: pip install \"repviz[export]\"") from e

from ..meta.distances import DEFAULT_MAX_PROBES
from ..store import LogDir, NotFoundError, atomic_path
from .matrix import cached_similarity, similarity
from .result import SimilarityMatrix

#: Values are written in the cells up to this many cells (a 16 × 16 matrix); above, only colours.
ANNOTATE_CELLS = 256


def colour_label(matrix: SimilarityMatrix) -> str:
    """What the colour bar measures, e.g. ``debiased linear CKA`` or ``Procrustes distance (angle, radians)``."""
    p = matrix.params
    if matrix.measure == "cka":
        return f"{'debiased' if p.get('debiased') else 'biased'} {p.get('kernel', 'linear')} CKA"
    return "Procrustes distance (angle, radians)"


def heatmap(matrix: SimilarityMatrix, title: str = "") -> Figure:
    """The matrix as a heatmap: rows down, columns across, colour bar labelled, small matrices annotated."""
    V = np.asarray(matrix.values, dtype=np.float64)
    n_rows, n_cols = V.shape
    fig = Figure(figsize=(min(2.2 + 0.55 * n_cols, 16), min(1.6 + 0.45 * n_rows, 14)))
    ax = fig.subplots()
    finite = V[np.isfinite(V)]
    if matrix.higher_is_similar:  # CKA: 1 is identical; debiased values may dip below 0
        vmin, vmax, cmap = min(0.0, float(finite.min()) if finite.size else 0.0), 1.0, "viridis"
    else:  # a distance: 0 is identical, drawn in the colour CKA gives to 1
        vmin, vmax, cmap = 0.0, max(float(finite.max()) if finite.size else 1.0, 1e-12), "viridis_r"
    image = ax.imshow(np.ma.masked_invalid(V), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03).set_label(colour_label(matrix), fontsize=8)
    ax.set_xticks(range(n_cols), matrix.labels("cols"), rotation=60 if n_cols > 6 else 0,
                  ha="right" if n_cols > 6 else "center", fontsize=7)
    ax.set_yticks(range(n_rows), matrix.labels("rows"), fontsize=7)
    ax.set_ylabel(_axis_name(matrix, "rows"), fontsize=8)
    outlined = bool(np.isfinite(V).any(axis=1).all())
    ax.set_xlabel(_axis_name(matrix, "cols") + ("\n(outlined: each row's most similar column)" if outlined else ""),
                  fontsize=8)
    if outlined:
        for i, j in enumerate(matrix.best()):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.2, ec="red"))
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


def save_figure(fig: Figure, out: str | os.PathLike, stem: str, formats: Sequence[str]) -> list[Path]:
    """Write ``fig`` as ``out/stem.<fmt>`` for each format (atomically); returns the paths."""
    paths = []
    for fmt in formats:
        path = Path(out) / f"{stem}.{fmt}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=110, bbox_inches="tight")
        paths.append(path)
    return paths


def file_stem(matrix: SimilarityMatrix) -> str:
    """A file name for the matrix: ``similarity-<run a>-vs-<run b>-step<k>`` (one snapshot) or
    ``similarity-<run>-<layer>-over-training``; characters other than letters, digits, ``.-_`` become ``_``."""
    keys = matrix.rows + matrix.cols
    if len({k.run for k in keys}) == 1 and len({k.layer for k in keys}) == 1 and len({k.step for k in keys}) > 1:
        name = f"similarity-{keys[0].run}-{keys[0].layer}-over-training"
    else:
        name = f"similarity-{matrix.rows[0].run}-vs-{matrix.cols[0].run}-step{matrix.rows[0].step}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def write_matrix(matrix: SimilarityMatrix, out: str | os.PathLike, stem: str | None = None,
                 formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """``out/stem.csv`` (labelled rows and columns), ``out/stem.json`` (:meth:`SimilarityMatrix.to_dict`) and the
    heatmap in each of ``formats``; ``stem`` defaults to :func:`file_stem`, ``out`` is created if missing.
    Returns the paths written."""
    out = Path(out)
    stem = stem or file_stem(matrix)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / f"{stem}.csv", out / f"{stem}.json"
    with atomic_path(csv_path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", *matrix.labels("cols")])
        for label, row in zip(matrix.labels("rows"), matrix.values):
            writer.writerow([label, *("" if not np.isfinite(v) else f"{v:.6g}" for v in row)])
    with atomic_path(json_path) as tmp:
        Path(tmp).write_text(json.dumps(matrix.to_dict(), indent=1) + "\n")
    return [csv_path, json_path] + save_figure(heatmap(matrix), out, stem, formats)


def run_pairs(logdir: LogDir) -> list[tuple[str, str]]:
    """The pairs of runs ``repviz export`` compares: the first run of each parent directory (``relu/seed0``)
    against each other run there (``relu/seed1``: the seeds of one network), and a run with no sibling (one at the
    top of the log directory) against itself."""
    groups: dict[str, list[str]] = {}
    for name, run in logdir.runs.items():
        if run.steps():
            groups.setdefault(str(Path(name).parent) if "/" in name else name, []).append(name)
    return [(runs[0], other) for runs in groups.values() for other in (runs[1:] or runs[:1])]


def export_heatmaps(logdir: LogDir, out: str | os.PathLike, formats: Sequence[str] = ("png", "svg"),
                    max_probes: int = DEFAULT_MAX_PROBES) -> list[Path]:
    """The heatmaps ``repviz export`` writes, with their CSV and JSON: debiased linear CKA of each pair of
    :func:`run_pairs` at their latest shared snapshot (from the cache, else computed when the probe set is at most
    ``max_probes``, where the meta bank makes it cheap), and every layer's snapshots against each other where all
    its values are cached (``repviz similarity --layer``). A pair that cannot be compared is left out with a
    warning naming why."""
    written = []
    for a, b in run_pairs(logdir):
        try:
            matrix = cached_similarity(logdir, (a, b))
            if matrix is None and len(logdir.run(a).probe) <= max_probes:
                matrix = similarity(logdir, (a, b))
        except (NotFoundError, ValueError, PermissionError) as e:
            warnings.warn(f"left out the similarity heatmap of runs {a!r} and {b!r}: {e}", RuntimeWarning,
                          stacklevel=2)
            continue
        if matrix is not None:
            written += write_matrix(matrix, out, formats=formats)
    for name, run in logdir.runs.items():
        for layer in run.layers:
            if len(run.steps(layer)) > 1 and (matrix := cached_similarity(logdir, name, layer=layer)) is not None:
                written += write_matrix(matrix, out, formats=formats)
    return written
