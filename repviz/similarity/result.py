"""A labelled similarity matrix, readable with numpy alone (the TensorBoard plugin reads it without the numerics).

Rows and columns are representations keyed (run, layer, step): the layers of two runs at one snapshot, or the
snapshots of one layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .registry import get_measure


class RepKey(NamedTuple):
    """One representation: a layer of a run at a snapshot."""

    run: str
    layer: str
    step: int


def _shared(keys: list[RepKey], field_name: str):
    values = {getattr(k, field_name) for k in keys}
    return values.pop() if len(values) == 1 else None


@dataclass(frozen=True, eq=False)
class SimilarityMatrix:
    """``values[i, j]`` compares representation ``rows[i]`` with ``cols[j]``.

    Attributes
    ----------
    values : ndarray (len(rows), len(cols)) float64
    rows, cols : list of RepKey
        In model order (layers) or step order (snapshots).
    measure : str
        A name of :data:`~repviz.similarity.registry.MEASURES`: ``"cka"`` (1 = same up to rotation and scale) or
        ``"procrustes"`` (a distance: 0 = same shape).
    params : dict
        The measure's options (kernel, debiased, batch_size, ...); with the measure, the cache key.
    notes : list of str
        How the values were obtained, for a reader: the probe count, minibatches, where they came from.
    step_unit : str
        What a step counts (the run's ``manifest["step_unit"]``: ``"epoch"``, ``"batch"``, ``"step"``).
    left_out : dict
        RepKey -> why that representation is compared with nothing (constant over the probe, as a dead layer is;
        non-finite values; a damaged file): its row or column is NaN, a hole in the matrix rather than a failure
        of the whole (:meth:`hole` gives a cell's reason).
    computed, cached : int
        How many of the values the call that returned the matrix computed, and how many it read from the cache
        (the notes say so too).
    """

    values: np.ndarray
    rows: list[RepKey]
    cols: list[RepKey]
    measure: str
    params: dict
    notes: list[str] = field(default_factory=list)
    step_unit: str = "step"
    left_out: dict[RepKey, str] = field(default_factory=dict)
    computed: int = 0
    cached: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    def hole(self, i: int, j: int) -> str | None:
        """Why cell (i, j) is empty (its row's or its column's representation is left out), else None."""
        for key in (self.rows[i], self.cols[j]):
            if key in self.left_out:
                return f"{key.layer!r} ({key.run}, step {key.step}) is left out: {self.left_out[key]}"
        return None

    def left_out_line(self) -> str:
        """One line naming the representations left out and why (empty when none)."""
        reasons: dict[str, list[str]] = {}
        for key, why in self.left_out.items():
            reasons.setdefault(why, []).append(key.layer if len({k.run for k in self.left_out}) == 1
                                               and len({k.step for k in self.left_out}) == 1
                                               else f"{key.run}/{key.layer}@{key.step}")
        parts = [f"{', '.join(dict.fromkeys(names))} ({why})" for why, names in reasons.items()]
        return f"left out {len(self.left_out)} representation(s), empty cells: {'; '.join(parts)}" if parts else ""

    @property
    def higher_is_similar(self) -> bool:
        """True for similarities (CKA), False for distances (Procrustes)."""
        return get_measure(self.measure).higher_is_similar

    @property
    def title(self) -> str:
        """What the matrix shows, e.g. ``debiased linear CKA, run 'a' (rows) vs run 'b' (columns) at epoch 3``."""
        what = get_measure(self.measure).label(self.params)
        ra, rb = _shared(self.rows, "run"), _shared(self.cols, "run")
        step, layer = _shared(self.rows + self.cols, "step"), _shared(self.rows + self.cols, "layer")
        if layer is not None and ra is not None and ra == rb and step is None:
            return f"{what}, layer {layer!r} of run {ra!r} across snapshots"
        who = f"run {ra!r}" if ra == rb else f"run {ra!r} (rows) vs run {rb!r} (columns)"
        return f"{what}, {who}" + (f" at {self.step_unit} {step}" if step is not None else "")

    def labels(self, axis: str = "rows") -> list[str]:
        """Short tick labels: the layer when every key shares run and step, the step when they share the layer,
        else ``run/layer@step``."""
        keys = self.rows if axis == "rows" else self.cols
        if _shared(keys, "run") is not None and _shared(keys, "step") is not None:
            return [k.layer for k in keys]
        if _shared(keys, "run") is not None and _shared(keys, "layer") is not None:
            return [str(k.step) for k in keys]
        return [f"{k.run}/{k.layer}@{k.step}" for k in keys]

    def best(self) -> np.ndarray:
        """For each row, the column index of the most similar representation (max CKA, min distance) among its
        values; -1 for a row with none (a hole)."""
        V = np.where(np.isnan(self.values), -np.inf if self.higher_is_similar else np.inf, self.values)
        best = np.argmax(V, axis=1) if self.higher_is_similar else np.argmin(V, axis=1)
        return np.where(np.isnan(self.values).all(axis=1), -1, best)

    def layer_identification(self) -> tuple[float, int]:
        """Kornblith et al. (2019)'s test across seeds: the fraction of rows whose most similar column is the same
        layer, over the rows whose layer is among the columns (holes left out), and how many such rows there
        are."""
        cols = [k.layer for k in self.cols]
        rows = [i for i, k in enumerate(self.rows) if k.layer in cols and k not in self.left_out
                and self.cols[cols.index(k.layer)] not in self.left_out]
        if not rows:
            return float("nan"), 0
        best = self.best()
        hits = [cols[best[i]] == self.rows[i].layer for i in rows]
        return float(np.mean(hits)), len(rows)

    def table(self, digits: int = 3) -> str:
        """The matrix as aligned text: row labels down the left, column labels across the top."""
        rl, cl = self.labels("rows"), self.labels("cols")
        cells = [[f"{v:.{digits}f}" if np.isfinite(v) else "-" for v in row] for row in self.values]
        width = max([len(c) for c in cl] + [digits + 3])
        left = max([len(r) for r in rl] + [1])
        lines = [" " * left + "  " + " ".join(c.rjust(width) for c in cl)]
        lines += [r.ljust(left) + "  " + " ".join(c.rjust(width) for c in row) for r, row in zip(rl, cells)]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-able: values as nested lists (NaN as None), keys as [run, layer, step]."""
        values = [[None if not np.isfinite(v) else float(v) for v in row] for row in self.values]
        return {"values": values, "rows": [list(k) for k in self.rows], "cols": [list(k) for k in self.cols],
                "measure": self.measure, "params": dict(self.params), "notes": list(self.notes),
                "step_unit": self.step_unit, "title": self.title,
                "left_out": [{"key": list(k), "reason": why} for k, why in self.left_out.items()]}

    @classmethod
    def from_dict(cls, d: dict) -> SimilarityMatrix:
        values = np.array([[np.nan if v is None else v for v in row] for row in d["values"]], dtype=np.float64)
        return cls(values.reshape(len(d["rows"]), len(d["cols"])), [RepKey(*k) for k in d["rows"]],
                   [RepKey(*k) for k in d["cols"]], d["measure"], dict(d["params"]), list(d.get("notes", [])),
                   d.get("step_unit", "step"), {RepKey(*h["key"]): h["reason"] for h in d.get("left_out", [])})
