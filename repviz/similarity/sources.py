"""What a similarity matrix compares: stored representations chosen from a log directory, checked to share probes.

Two selections: the layers of run A against the layers of run B at one snapshot (A = B allowed), and the
snapshots of one layer against each other. Representations are comparable only over the same probes in the same
order, so both runs must hold the same probe ids and, where capture stored their digest, the same probe inputs;
a mismatch is a :class:`ProbeMismatchError` naming both. A
snapshot may hold a subset of the probe (``ActivationLogger(batch_probe=...)``): every representation of a matrix
is compared on the probe points all of them hold (:func:`repviz.meta.sources.common_points`), which the matrix's
notes say, and which is part of each value's cache identity.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..chains import constant, nonfinite, verified_activations
from ..meta.sources import ProbeMismatchError as ProbeMismatchError  # re-exported by repviz.similarity
from ..meta.sources import common_points, shared_probe_ids, stored_rows
from ..store import LogDir, NotFoundError, Run, checksum
from .result import RepKey


@dataclass(frozen=True)
class Stored:
    """One stored representation: its key, the checksum and shape of its data and, when it is compared on part of
    the probe, which rows (``where``, positions in its stored rows) and a tag of those probe points
    (``compared``): together its identity in caches. ``left_out``: why its record alone rules it out of every
    comparison (constant over the probe, non-finite values), else empty."""

    key: RepKey
    checksum: str
    shape: tuple[int, ...]
    run: Run
    where: np.ndarray | None = field(default=None, compare=False)
    compared: str = ""
    left_out: str = field(default="", compare=False)

    @property
    def identity(self) -> str:
        """File-system-safe cache id: key, data checksum and shape (a re-recorded snapshot gets a new one), and the
        probe points compared unless they are the whole probe (a value over other points is another value)."""
        blob = json.dumps([list(self.key), self.checksum, list(self.shape)] +
                          ([self.compared] if self.compared else [])).encode()
        return hashlib.sha1(blob).hexdigest()[:24]

    @property
    def label(self) -> str:
        return f"run {self.key.run!r} layer {self.key.layer!r} step {self.key.step}"

    def stored(self) -> np.ndarray:
        """The stored activations (n_rows, ...), memory-mapped read-only and checked against the checksum recorded
        at capture (:func:`repviz.chains.verified_activations`)."""
        return verified_activations(self.run, self.key.layer, self.key.step, mmap=True)

    def load(self) -> np.ndarray:
        """The activations of the compared probe points (a memory map when they are all the stored rows)."""
        X = self.stored()
        return X if self.where is None else X[self.where]


@dataclass(frozen=True)
class Selection:
    """Rows and columns of one matrix, the probe ids they are compared on (``probe_id``: their checksum) and the
    size of the whole probe."""

    rows: list[Stored]
    cols: list[Stored]
    ids: np.ndarray
    n_probe: int

    @property
    def probe_id(self) -> str:
        return checksum(np.asarray(self.ids))

    @property
    def symmetric(self) -> bool:
        """Rows and columns are the same representations (a run against itself, a layer over training)."""
        return [r.key for r in self.rows] == [c.key for c in self.cols]


def _stored(run: Run, layer: str, step: int) -> Stored:
    rec = run.record(layer, step)
    why = constant(rec) or nonfinite(rec)
    return Stored(RepKey(run.name, layer, int(step)), str(rec.get("crc32", "")), tuple(rec.get("shape", ())), run,
                  left_out="" if why is None else str(why))


def _on_common_points(rows: list[Stored], cols: list[Stored], ids: np.ndarray) -> Selection:
    """The selection with every representation restricted to the probe points all of them hold
    (:func:`repviz.meta.sources.common_points`, refused in one line when subsets share too few)."""
    reps = list({r.key: r for r in rows + cols}.values())
    held = [stored_rows(r.run, r.run.record(r.key.layer, r.key.step)) for r in reps]
    common, where = common_points(held, len(ids), "compare snapshots whose subsets agree")
    tag = "" if len(common) == len(ids) else f"{checksum(np.asarray(ids)[common])}-{len(common)}"
    on = {r.key: replace(r, where=w, compared=tag) for r, w in zip(reps, where)}
    return Selection([on[r.key] for r in rows], [on[c.key] for c in cols], np.asarray(ids)[common], len(ids))


def _steps_text(steps: list[int]) -> str:
    if not steps:
        return "none"
    return ", ".join(map(str, steps)) if len(steps) <= 8 else f"{steps[0]}, {steps[1]}, ..., {steps[-1]} " \
                                                               f"({len(steps)} in all)"


def _layers_of(run: Run, layers: Sequence[str] | None) -> list[str]:
    chosen = [lay for lay in run.layers if layers is None or lay in layers]
    if not chosen:
        raise NotFoundError(f"run {run.name!r} has none of the layers {list(layers or [])}; it has: {run.layers}")
    return chosen


def _common_steps(run: Run, layers: list[str]) -> set[int]:
    return set.intersection(*(set(run.steps(lay)) for lay in layers))


def between_runs(logdir: LogDir, runs: str | Sequence[str], step: int | None = None,
                 layers: Sequence[str] | None = None, probe_check: bool = True) -> Selection:
    """The layers of ``runs[0]`` (rows) against those of ``runs[-1]`` (columns), in model order, at ``step``
    (None: the latest snapshot every chosen layer of both runs has); ``probe_check``: whether their probe
    inputs must agree too (:func:`repviz.meta.sources.shared_probe_ids`)."""
    names = [runs] if isinstance(runs, str) else list(runs)
    if not 1 <= len(names) <= 2:
        raise ValueError(f"runs must name one run (against itself) or two; got {names}")
    a, b = logdir.run(names[0]), logdir.run(names[-1])
    if layers is not None:
        known = set(a.layers) | set(b.layers)
        unknown = [lay for lay in layers if lay not in known]
        if unknown and a is b:
            raise NotFoundError(f"layer(s) {unknown} are not in run {a.name!r}; it has: {a.layers}")
        if unknown:
            raise NotFoundError(f"layer(s) {unknown} are in neither run {a.name!r} nor {b.name!r}; they have: "
                                f"{list(dict.fromkeys(a.layers + b.layers))}")
    la, lb = _layers_of(a, layers), _layers_of(b, layers)
    ids = shared_probe_ids(a, b, probe_check=probe_check)
    sa, sb = _common_steps(a, la), _common_steps(b, lb)
    both = sorted(sa & sb)
    pair = f"run {a.name!r}" if a is b else f"both runs {a.name!r} and {b.name!r}"
    if step is None:
        if not both:
            raise NotFoundError(f"runs {a.name!r} and {b.name!r} share no snapshot: {a.name!r} has steps "
                                f"{_steps_text(sorted(sa))}; {b.name!r} has {_steps_text(sorted(sb))}")
        step = both[-1]
    elif int(step) not in both:
        have = (f"it has steps {_steps_text(sorted(sa))}" if a is b else
                f"{a.name!r} has steps {_steps_text(sorted(sa))}; {b.name!r} has {_steps_text(sorted(sb))}")
        raise NotFoundError(f"step {step} is not a snapshot of {pair}; {have}")
    rows = [_stored(a, lay, step) for lay in la]
    cols = rows if a is b and la == lb else [_stored(b, lay, step) for lay in lb]
    return _on_common_points(rows, cols, ids)


def over_training(logdir: LogDir, run: str, layer: str, steps: Sequence[int] | None = None) -> Selection:
    """The snapshots ``steps`` (None: all) of ``layer`` in ``run`` against each other, in step order."""
    r = logdir.run(run)
    have = r.steps(layer)  # NotFoundError naming the layers when ``layer`` is not one
    if steps is None:
        steps = have
    missing = [s for s in steps if int(s) not in have]
    if missing:
        raise NotFoundError(f"step(s) {missing} of layer {layer!r} are not in run {r.name!r}; it has steps "
                            f"{_steps_text(have)}")
    if not steps:
        raise NotFoundError(f"layer {layer!r} of run {r.name!r} has no snapshot stored")
    reps = [_stored(r, layer, s) for s in sorted({int(s) for s in steps})]
    return _on_common_points(reps, reps, np.asarray(r.probe.ids))
