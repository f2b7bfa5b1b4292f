"""Static figures and tables from a log directory (``repviz export``), for papers and readers without TensorBoard.

Everything is read through the store (:func:`repviz.open_logdir`, :meth:`MetaResult.load`):

- ``layer-<layer>-<method>.<fmt>``: per layer name and embedding method, a grid of the stored embeddings, one row
  per run that has the layer, one column per snapshot, points coloured by label;
- ``meta-<name>.<fmt>``: each meta-SNE map, every (run, layer) drawn as its training path, runs coloured (runs in
  one parent directory, such as ``relu/seed0`` and ``relu/seed1``, share a hue in shades, solid then dashed lines;
  a run's colour comes from its name, :func:`run_colour`), the
  last snapshot circled and labelled with the layer, the input landmark marked;
- ``quality.csv`` and ``quality.md``: each layer's quality scores at its last embedded snapshot;
- ``similarity-*``: layer-by-layer CKA heatmaps (with CSV and JSON) of the seeds of each network, and of a
  layer's snapshots where computed (:func:`export_heatmaps`).

The point clouds are rasterised inside SVG files (text and axes stay vectors), which keeps a figure of tens of
thousands of points at a few hundred KB. Needs matplotlib (the ``export`` extra).
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

from .version import install_hint

try:
    import matplotlib

    matplotlib.use("Agg", force=False)  # files only, whatever the environment's display
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
except ImportError as e:  # the optional extra: one clear line for the CLI
    raise ImportError(f"repviz export needs matplotlib; install it with: {install_hint('export')}") from e

from .meta.distances import DEFAULT_MAX_PROBES
from .meta.result import MetaResult
from .meta.sources import INPUT_KEY, inputs_fingerprint
from .progress import ProgressCallback, report
from .similarity.figures import heatmap
from .similarity.matrix import cached_similarity, similarity
from .similarity.result import SimilarityMatrix
from .store import META_RESULT, DamagedFileError, LogDir, NotFoundError, Probe, atomic_path, open_logdir
from .targets import class_labels, scalar_values

SCORES = ("trustworthiness", "continuity", "knn_preservation", "knn_accuracy")
_INPUT_RUN = INPUT_KEY[0]


def _file_part(name: str) -> str:
    """A name as a safe file-name part (layer paths like ``encoder/dense#0`` included)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "_"


def _method_names(logdir: LogDir) -> dict[str, str]:
    """Embedding key -> its method's name, or the key itself where two keys share a method (other parameters)."""
    methods: dict[str, str] = {}
    for run in logdir.runs.values():
        for key in run.embeddings.method_keys():
            methods.setdefault(key, run.embeddings.method(key).get("method") or key.rsplit("-", 1)[0])
    counts = {m: list(methods.values()).count(m) for m in methods.values()}
    return {key: m if counts[m] == 1 else key for key, m in methods.items()}


def score_rows(logdir: LogDir | str | os.PathLike) -> list[dict]:
    """Per run, layer and embedding method: the last embedded snapshot and its stored quality scores."""
    logdir = logdir if isinstance(logdir, LogDir) else open_logdir(logdir)
    names = _method_names(logdir)
    rows = []
    for run in logdir.runs.values():
        for layer in run.layers:
            for key in run.embeddings.method_keys():
                steps = run.embeddings.steps(key, layer)
                if steps:
                    scores = _readable(run.embeddings.info, key, layer, steps[-1], default={}).get("scores", {})
                    rows.append({"run": run.name, "layer": layer, "method": names[key], "step": steps[-1],
                                 **{s: scores.get(s) for s in SCORES}})
    return rows


def _readable(read, *args, default=None):
    """``read(*args)``, or ``default`` when what it reads is damaged or missing: that entry is left out with a
    warning naming the file, and the rest is exported."""
    try:
        return read(*args)
    except (DamagedFileError, NotFoundError) as e:
        warnings.warn(f"left out: {e}", RuntimeWarning, stacklevel=2)
        return default


def _save(fig: Figure, out: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    paths = []
    for fmt in formats:
        path = out / f"{stem}.{fmt}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=110, bbox_inches="tight")
        paths.append(path)
    return paths


def _target_colours(probe: Probe) -> np.ndarray:
    """A colour per probe point from its target (:mod:`repviz.targets`): a class by class, a scalar on viridis
    from its smallest to its largest value, anything else (or none) grey."""
    n = len(probe)
    classes, values = class_labels(probe.labels, probe.target), scalar_values(probe.labels, probe.target)
    if classes is not None:
        return matplotlib.colormaps["tab10"](np.asarray(classes) % 10)
    if values is not None and np.isfinite(values).any():
        lo, hi = np.nanmin(values), np.nanmax(values)
        return matplotlib.colormaps["viridis"](np.nan_to_num((values - lo) / max(hi - lo, 1e-12)))
    return np.full((n, 4), (0.3, 0.3, 0.3, 1.0))


def embedding_grid(logdir: LogDir, layer: str, key: str, title: str = "") -> Figure | None:
    """Rows: the runs that have ``layer`` embedded under ``key``; columns: their snapshots. None if no run has it."""
    runs = [run for run in logdir.runs.values() if layer in run.layers and run.embeddings.steps(key, layer)
            and _readable(lambda r: r.probe, run) is not None]
    if not runs:
        return None
    steps = sorted({s for run in runs for s in run.embeddings.steps(key, layer)})
    unit = runs[0].manifest.get("step_unit", "step")
    fig = Figure(figsize=(1.7 * len(steps) + 0.6, 1.7 * len(runs) + 0.5))
    axes = fig.subplots(len(runs), len(steps), squeeze=False)
    for r, run in enumerate(runs):
        colours = _target_colours(run.probe)
        size = float(np.clip(2000 / len(run.probe), 0.5, 4))  # dots shrink as the probe set grows
        have = set(run.embeddings.steps(key, layer))
        for c, step in enumerate(steps):
            ax = axes[r, c]
            ax.set_xticks([]), ax.set_yticks([])
            if step in have and (Y := _readable(run.embeddings.read, key, layer, step)) is not None and \
                    len(rows := _readable(run.rows, layer, step, default=())) == len(Y):  # a probe subset's points
                ax.scatter(Y[:, 0], Y[:, 1], s=size, c=colours[rows], linewidths=0, rasterized=True)
            ax.set_aspect("equal", adjustable="datalim")
            if r == 0:
                ax.set_title(f"{unit} {step}", fontsize=9)
            if c == 0:
                ax.set_ylabel(run.name, fontsize=8)
    if (known := class_labels(runs[0].probe.labels, runs[0].probe.target)) is not None:
        classes = np.unique(known)
        handles = [Line2D([], [], ls="", marker="o", ms=4, color=matplotlib.colormaps["tab10"](int(k) % 10))
                   for k in classes]
        fig.legend(handles, [str(k) for k in classes], loc="center right", fontsize=7, frameon=False,
                   title="label", title_fontsize=7)
        fig.subplots_adjust(right=0.9)
    first = runs[0].embeddings.steps(key, layer)[0]
    if (_readable(runs[0].embeddings.info, key, layer, first) or {}).get("one_dimensional"):  # see repviz.narrow
        title = f"{title or f'layer {layer}'} (1-D: x = its values, y = a strip per class)"
    fig.suptitle(title or f"layer {layer}", fontsize=10)
    fig.subplots_adjust(top=1 - 0.55 / fig.get_figheight())  # the column titles below the figure's title
    return fig


def _group(run: str) -> str:
    """Runs in one parent directory (``relu/seed0``, ``relu/seed1``) form a group: one colour, one layer label."""
    return str(Path(run).parent) if "/" in run else run


# Tableau 10 less its grey (which would read as "no run"), as the tab's colors.js; a run's shade of its group's
# hue: mixed with black (< 0) or white (> 0).
_RUN_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
_RUN_SHADES = (0.0, -0.3, 0.35)


def _fnv1a(text: str) -> int:
    """FNV-1a (32 bits) of the UTF-8 bytes of ``text``: the same in the tab."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def run_colour(name: str) -> str:
    """Hex colour of run ``name``, from its name alone, so a run keeps it when runs are added or removed: the
    network group (the name before the first "/") picks the hue by a hash, the rest of the name a shade of it (by
    its trailing number, so ``seed0``, ``seed1`` and ``seed2`` differ, else by a hash). The tab's ``runColor``
    (static/colors.js) is the same rule."""
    group, slash, _ = name.partition("/")
    base = _RUN_PALETTE[_fnv1a(group) % len(_RUN_PALETTE)]
    number = re.search(r"[0-9]+$", name) if slash else None
    shade = (sum(map(int, number.group())) if number else _fnv1a(name)) if slash else 0  # digit sum: the number mod 3
    t = _RUN_SHADES[shade % len(_RUN_SHADES)]
    target = 0 if t < 0 else 255
    channels = (int(base[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{int(v + (target - v) * abs(t) + 0.5):02x}" for v in channels)


def _run_styles(runs: list[str]) -> dict[str, tuple]:
    """A colour per run (:func:`run_colour`), a line style per member of a group (solid for the first)."""
    dashes = ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    styles = {}
    for r in runs:
        g = _group(r)
        styles[r] = (run_colour(r), dashes[seen.get(g, 0) % len(dashes)])
        seen[g] = seen.get(g, 0) + 1
    return styles


def meta_map(result: MetaResult, title: str = "") -> Figure:
    """The map with every (run, layer)'s training path; the last snapshot circled, and labelled with the layer
    on the first run of each group."""
    fig = Figure(figsize=(7.5, 6.5))
    ax = fig.subplots()
    runs = sorted({k[0] for k in result.keys if k[0] != _INPUT_RUN})
    styles = _run_styles(runs)
    for (run, layer), path in result.trajectories().items():
        xy = np.asarray(path.coords)
        if run == _INPUT_RUN:
            ax.scatter(xy[:, 0], xy[:, 1], marker="*", s=260, c="black", zorder=5, label="input (landmark)")
            continue
        colour, dash = styles[run]
        ax.plot(xy[:, 0], xy[:, 1], ls=dash, lw=1, color=colour, alpha=0.8)
        ax.scatter(xy[:-1, 0], xy[:-1, 1], s=8, color=colour, alpha=0.6)
        ax.scatter(xy[-1:, 0], xy[-1:, 1], s=36, color=colour, edgecolors="black", linewidths=0.5, zorder=4)
        if styles[run][1] == "-":  # the layer named once per group: its runs end side by side
            ax.annotate(layer, xy[-1], fontsize=7, xytext=(4, 4), textcoords="offset points")
    handles = [Line2D([], [], color=styles[r][0], ls=styles[r][1], marker="o", ms=4) for r in runs]
    labels = list(runs)
    if any(k[0] == _INPUT_RUN for k in result.keys):
        handles.append(Line2D([], [], ls="", marker="*", ms=12, color="black"))
        labels.append("input (landmark)")
    ax.legend(handles, labels, fontsize=7, loc="best", frameon=False)
    ax.set_xticks([]), ax.set_yticks([])
    p = result.params
    ax.set_title(title or f"meta-SNE ({p.get('transform')}, {p.get('embedding')}): paths from the first snapshot "
                          f"to the labelled last one", fontsize=9)
    return fig


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _spreadsheet_cell(value) -> object:
    """``value`` for a CSV cell: text that a spreadsheet would run as a formula (a run or layer named
    ``=HYPERLINK(...)``) gets a leading single quote, as OWASP recommends; numbers, -1.5 included, stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _write_csv(path: Path, rows: list[list]) -> None:
    """``rows`` as a CSV file at ``path``, written atomically, every cell made safe for spreadsheets."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        csv.writer(f).writerows([[_spreadsheet_cell(v) for v in row] for row in rows])


def _write_tables(rows: list[dict], out: Path) -> list[Path]:
    head = ["run", "layer", "method", "step", *SCORES]
    csv_path, md_path = out / "quality.csv", out / "quality.md"
    _write_csv(csv_path, [head, *([r[h] if r[h] is not None else "" for h in head] for r in rows)])

    def cell(v) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(r[h]) for h in head) + " |" for r in rows]
    with atomic_path(md_path) as tmp:
        Path(tmp).write_text("\n".join(lines) + "\n")
    return [csv_path, md_path]


def _matrix_stem(matrix: SimilarityMatrix) -> str:
    """``similarity-<run a>-vs-<run b>-step<k>`` (one snapshot) or ``similarity-<run>-<layer>-over-training``."""
    keys = matrix.rows + matrix.cols
    if len({k.run for k in keys}) == 1 and len({k.layer for k in keys}) == 1 and len({k.step for k in keys}) > 1:
        return _file_part(f"similarity-{keys[0].run}-{keys[0].layer}-over-training")
    return _file_part(f"similarity-{matrix.rows[0].run}-vs-{matrix.cols[0].run}-step{matrix.rows[0].step}")


def write_matrix(matrix: SimilarityMatrix, out: str | os.PathLike,
                 formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """``out/<stem>.csv`` (labelled rows and columns), ``out/<stem>.json`` (:meth:`SimilarityMatrix.to_dict`) and
    the heatmap in each of ``formats`` (``repviz similarity --figures``); ``out`` is created if missing. Returns the
    paths written."""
    out = Path(out)
    stem = _matrix_stem(matrix)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / f"{stem}.csv", out / f"{stem}.json"
    _write_csv(csv_path, [["", *matrix.labels("cols")],
                          *([label, *("" if not np.isfinite(v) else f"{v:.6g}" for v in row)]
                            for label, row in zip(matrix.labels("rows"), matrix.values))])
    with atomic_path(json_path) as tmp:
        Path(tmp).write_text(json.dumps(matrix.to_dict(), indent=1) + "\n")
    return [csv_path, json_path] + _save(heatmap(matrix), out, stem, formats)


def run_pairs(logdir: LogDir) -> list[tuple[str, str]]:
    """The pairs of runs ``repviz export`` compares: the first run of each group (``relu/seed0``) against each
    other run of it recorded on the same probe inputs (``relu/seed1``: the seeds of one network), and a run alone
    in its group against itself. A run of the group recorded on other inputs (a second probe set to place) is
    its own group."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for name, run in logdir.runs.items():
        if run.steps():
            groups.setdefault((_group(name), inputs_fingerprint(run)), []).append(name)
    return [(runs[0], other) for runs in groups.values() for other in (runs[1:] or runs[:1])]


def export_heatmaps(logdir: LogDir, out: str | os.PathLike, formats: Sequence[str] = ("png", "svg"),
                    max_probes: int = DEFAULT_MAX_PROBES) -> list[Path]:
    """The heatmaps ``repviz export`` writes, with their CSV and JSON: debiased linear CKA of each pair of
    :func:`run_pairs` at their latest shared snapshot (from the cache, else computed when the probe set is at most
    ``max_probes``, where the meta bank makes it cheap), and every layer's snapshots against each other where all
    its values are cached (``repviz similarity --layer``). A pair that cannot be compared is left out with a
    warning naming why."""
    def pair(a: str, b: str) -> SimilarityMatrix | None:
        matrix = cached_similarity(logdir, (a, b))
        return matrix if matrix is not None or len(logdir.run(a).probe) > max_probes else similarity(logdir, (a, b))

    wanted = [(f"runs {a!r} and {b!r}", pair, (a, b), {}) for a, b in run_pairs(logdir)]
    wanted += [(f"layer {layer!r} of run {name!r}", cached_similarity, (logdir, name), {"layer": layer})
               for name, run in logdir.runs.items() for layer in run.layers if len(run.steps(layer)) > 1]
    written = []
    for what, read, args, kwargs in wanted:
        try:
            matrix = read(*args, **kwargs)
        except (NotFoundError, ValueError, PermissionError) as e:  # DamagedFileError is a ValueError
            warnings.warn(f"left out the similarity heatmap of {what}: {e}", RuntimeWarning, stacklevel=2)
            continue
        if matrix is not None:
            written += write_matrix(matrix, out, formats=formats)
    return written


def export_figures(logdir: LogDir | str | os.PathLike, out: str | os.PathLike, *,
                   formats: Sequence[str] = ("png", "svg"), progress: ProgressCallback | None = None) -> list[Path]:
    """Write every figure and table of ``logdir`` under ``out`` (created if missing); returns the paths written.

    Parameters
    ----------
    logdir : path or LogDir
        A log directory with stored embeddings (``repviz embed``) and/or meta-SNE maps (``repviz meta``).
    out : path
        Output directory.
    formats : sequence of str, default=("png", "svg")
        Figure formats matplotlib can write (png, svg, pdf, ...).
    progress : callable, optional
        Receives ``("figures", done, total, name)`` events (:mod:`repviz.progress`), one per layer grid and map.
    """
    logdir = logdir if isinstance(logdir, LogDir) else open_logdir(logdir)
    bad = [f for f in formats if f not in Figure().canvas.get_supported_filetypes()]
    if bad or not formats:
        raise ValueError(f"figure formats {bad or list(formats)} are not supported; use some of "
                         f"{sorted(Figure().canvas.get_supported_filetypes())}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    names = _method_names(logdir)
    layers = list(dict.fromkeys(layer for run in logdir.runs.values() for layer in run.layers))
    maps = [name for name in logdir.artifact_names() if logdir.artifacts(name).exists(META_RESULT.result)]
    total = len(names) * len(layers) + len(maps) + 1
    for done, (key, layer) in enumerate((key, layer) for key in names for layer in layers):
        report(progress, "figures", done, total, f"{names[key]} {layer}")
        fig = embedding_grid(logdir, layer, key, title=f"layer {layer}: {names[key]} over training")
        if fig is not None:
            written += _save(fig, out, f"layer-{_file_part(layer)}-{_file_part(names[key])}", formats)
    for done, name in enumerate(maps, len(names) * len(layers)):
        report(progress, "figures", done, total, name)
        if (result := _readable(MetaResult.load, logdir, name)) is not None:
            written += _save(meta_map(result), out, _file_part(name), formats)
    report(progress, "figures", total - 1, total, "similarity heatmaps")
    written += export_heatmaps(logdir, out, formats)
    report(progress, "figures", total, total)
    written += _write_tables(score_rows(logdir), out)
    return written
