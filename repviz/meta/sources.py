"""What meta-SNE compares: representations keyed (run, layer, step), read lazily from a log directory or arrays.

Representations are comparable only over the same probes in the same order, so every run must carry the same
probe ids and, where capture stored their digest, the same probe inputs; the check names the first two runs that
differ. A snapshot may hold a subset of its run's probe
(``ActivationLogger(batch_probe=...)``): :func:`compared_rows` restricts every representation to the probe points
that all of them hold (``subsets="common"``) or leaves out those of a subset (``subsets="whole"``), and says so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .._validation import check_option
from ..chains import verified_activations
from ..store import LogDir, NotFoundError, Run, checksum
from ..subsets import common_rows
from .options import SUBSETS

Key = tuple[str, str, int]
INPUT_KEY: Key = ("<input>", "input", 0)
"""The key of the raw input, the landmark representation that every network starts from."""
#: Subsets that share fewer probe points than this (and fewer than the smallest of them holds) are refused.
MIN_COMMON_PROBES = 100


class ProbeMismatchError(ValueError):
    """Two runs hold different probe sets, so their representations cannot be compared."""


def inputs_fingerprint(run: Run) -> str | None:
    """The digest of the probe inputs ``run`` was recorded on (:func:`repviz.capture.probe.inputs_fingerprint`);
    None for a run that stored none (recorded before it was stored, or written by other code)."""
    return (run.manifest.get("fingerprint") or {}).get("inputs")


def shared_probe_ids(a: Run, b: Run, remedy: str = "record both runs with the same probe",
                     probe_check: bool = True) -> np.ndarray:
    """The probe ids of runs ``a`` and ``b``, refused with :class:`ProbeMismatchError` (one line naming both runs,
    where they differ and ``remedy``) if they differ.

    Equal ids do not make equal inputs (a GAN's generator and discriminator both number their probes 0 to n-1),
    so the digests of the probe inputs stored at capture must agree too, unless ``probe_check`` is False (the
    user knows the inputs correspond, e.g. the same examples preprocessed differently). Runs that stored no
    digest are checked by their ids alone."""
    ids = np.asarray(a.probe.ids)
    if a is b:
        return ids
    if probe_check:
        fa, fb = inputs_fingerprint(a), inputs_fingerprint(b)
        if fa and fb and fa != fb:
            raise ProbeMismatchError(f"runs {a.name!r} and {b.name!r} were recorded on different probe inputs "
                                     f"(fingerprints {fa[:8]}… and {fb[:8]}…); they cannot be compared. Pass "
                                     f"--allow-different-probes (probe_check=False in Python) if their inputs "
                                     f"correspond")
    other = np.asarray(b.probe.ids)
    if other.shape != ids.shape or not np.array_equal(other, ids):
        where = (f"{len(ids)} vs {len(other)} probes" if other.shape != ids.shape else
                 f"ids differ first at position {int(np.argmax(other != ids))} of {len(ids)}")
        raise ProbeMismatchError(f"runs {a.name!r} and {b.name!r} hold different probe sets ({where}); "
                                 f"representations are comparable only over the same probes in the same order: "
                                 f"{remedy}")
    return ids


@dataclass(frozen=True)
class Representation:
    """One representation: its key, a checksum of its data (the cache key in a bank of one set of compared probe
    points), a loader of the stored rows, the probe positions they hold (``rows``; None: the whole probe in
    order), which of them are compared (``where``; None: all) and whether capture found it the same for every
    probe point (``constant``: left out of every comparison, :data:`repviz.chains.CONSTANT`)."""

    key: Key
    checksum: str
    load: Callable[[], np.ndarray]
    rows: np.ndarray | None = field(default=None, compare=False)
    where: np.ndarray | None = field(default=None, compare=False)
    constant: bool = field(default=False, compare=False)

    def compared(self) -> np.ndarray:
        """The activations of the compared probe points, in probe order."""
        X = self.load()
        return X if self.where is None else np.asarray(X)[self.where]

    @property
    def label(self) -> str:
        run, layer, step = self.key
        return f"run {run!r} layer {layer!r} step {step}" if run else f"representation {layer!r}"


def from_logdir(logdir: LogDir, runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
                probe_check: bool = True) -> tuple[list[Representation], np.ndarray]:
    """Every stored (run, layer, step) of the selected runs and layers, and the probe ids they share. Each is
    read checked against the checksum recorded at capture.

    ``runs`` and ``layers`` default to all; a layer name is taken from every selected run that has it.
    ``probe_check``: whether the runs' probe inputs must agree too (:func:`shared_probe_ids`).
    """
    # By default, runs with no snapshot (e.g. killed before storing its probe) have nothing to compare.
    chosen = [logdir.run(r) for r in runs] if runs is not None else [r for r in logdir.runs.values() if r.steps()]
    if not chosen:
        raise NotFoundError(f"{str(logdir.path)!r} holds no repviz runs to compare")
    ids = shared_probe_ids(chosen[0], chosen[0])
    for run in chosen[1:]:
        shared_probe_ids(chosen[0], run, "compare them separately (runs=[...]) or record both with the same probe",
                         probe_check)
    if layers is not None:
        known = {lay for run in chosen for lay in run.layers}
        unknown = [lay for lay in layers if lay not in known]
        if unknown:
            raise NotFoundError(f"layer(s) {unknown} are in none of the runs {[r.name for r in chosen]}; "
                                f"they have: {sorted(known)}")
    reps = []
    for run in chosen:
        for layer in run.layers:
            if layers is not None and layer not in layers:
                continue
            for step in run.steps(layer):
                rec = run.record(layer, step)
                reps.append(Representation((run.name, layer, int(step)), rec["crc32"], _loader(run, layer, step),
                                           rows=stored_rows(run, rec), constant=rec.get("constant") is True))
    return reps, ids


def stored_rows(run: Run, record: dict) -> np.ndarray | None:
    """The probe positions a stored snapshot holds, or None for the whole probe (every distinct subset is one
    shared, read-only array: :meth:`repviz.store.Run.record_rows` reads it once)."""
    return None if "rows" not in record else run.record_rows(record)


def common_points(held: list[np.ndarray | None], n_probe: int, remedy: str
                  ) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """The probe positions that every one of ``held`` holds (None: the whole probe of ``n_probe`` points) and,
    for each, where they lie in its rows (None: all of them, in order). Each distinct subset array is intersected
    once, so thousands of snapshots of a few subsets cost a few intersections.

    Refused (one line ending with ``remedy``) when subsets share fewer than ``MIN_COMMON_PROBES`` points and
    fewer than the smallest holds (subsets drawn with different seeds): nothing useful would be left.
    """
    distinct = list({id(h): h for h in held if h is not None}.values())
    common = common_rows(distinct)[0] if distinct else np.arange(n_probe)
    smallest = min((len(h) for h in distinct), default=n_probe)
    if len(common) < min(MIN_COMMON_PROBES, smallest):
        sizes = sorted({len(h) for h in distinct} | ({n_probe} if any(h is None for h in held) else set()))
        raise ValueError(f"the {len(held)} representations hold probe subsets of {sizes} points that share only "
                         f"{len(common)}; {remedy}")
    where: dict[int, np.ndarray | None] = {}
    for h in held:
        if id(h) not in where:
            where[id(h)] = (None if len(common) == (n_probe if h is None else len(h)) else
                            common if h is None else np.searchsorted(h, common))
    return common, [where[id(h)] for h in held]


@dataclass(frozen=True)
class Compared:
    """What :func:`compared_rows` decided: the probe positions compared, out of ``n_probe``, and what it left out."""

    positions: np.ndarray
    n_probe: int
    n_reps: int
    left_out: list[Representation]

    def notes(self, subsets: str) -> list[str]:
        """One line each: on which probe points the representations were compared, and what was left out."""
        k, n = len(self.positions), self.n_probe
        notes = [f"compared on all {n:,} probe points" if k == n else
                 f"compared on the {k:,} probe points common to all {self.n_reps} representations (of {n:,})"]
        if self.left_out:
            smallest = min(len(r.rows) for r in self.left_out)
            notes.append(f"left out {len(self.left_out)} snapshot(s) of a probe subset (the smallest holds "
                         f"{smallest:,} of {n:,} points; subsets={subsets!r}); subsets='common' compares them on "
                         f"the points all hold")
        return notes


def compared_rows(reps: list[Representation], n_probe: int, subsets: str = "common"
                  ) -> tuple[list[Representation], Compared]:
    """Every representation restricted to the probe points that all of them hold, matched by position in the
    probe (the runs share one probe set, :func:`shared_probe_ids`).

    ``subsets="common"`` (the default) keeps every snapshot: a map of per-epoch snapshots of the whole probe and
    batch snapshots of a 1,000-point subset compares all of them on those 1,000 points, so the training path at
    batch resolution lands on the same map. ``subsets="whole"`` leaves out the snapshots of a subset and compares
    the others on the whole probe. Refused (one line) when the subsets share fewer than ``MIN_COMMON_PROBES``
    points, fewer than the smallest of them holds (subsets drawn with different seeds): nothing useful is left.
    """
    check_option(subsets, SUBSETS, "subsets", "MetaSNE")
    part = [subsets == "whole" and r.rows is not None and len(r.rows) < n_probe for r in reps]
    kept = [r for r, out in zip(reps, part) if not out]
    common, where = common_points([r.rows for r in kept], n_probe, "pass subsets='whole' to leave out the "
                                  "snapshots of a subset, or choose runs and layers whose subsets agree")
    restricted = [r if w is None else replace(r, where=w) for r, w in zip(kept, where)]
    return restricted, Compared(common, n_probe, len(kept), [r for r, out in zip(reps, part) if out])


def _loader(run, layer: str, step: int) -> Callable[[], np.ndarray]:
    """Reads through the checksum recorded at capture, as ``repviz embed`` does (a mismatch is a ValueError: the
    representation is left out with that reason)."""
    return lambda: verified_activations(run, layer, step)


def from_arrays(arrays: Sequence[np.ndarray] | Mapping) -> list[Representation]:
    """Representations given in memory: a list (keyed ``("", "<index>", 0)``) or a mapping whose keys are
    (run, layer, step) tuples or names (keyed ``("", name, 0)``). All must have the same number of probes."""
    items = arrays.items() if isinstance(arrays, Mapping) else ((str(i), a) for i, a in enumerate(arrays))
    reps = []
    for name, a in items:
        key = (str(name[0]), str(name[1]), int(name[2])) if isinstance(name, tuple) else ("", str(name), 0)
        a = np.asarray(a)
        reps.append(Representation(key, checksum(a), _constant(a)))
    if not reps:
        raise ValueError("no representations given; pass a list of at least 2 arrays (n_probe, width)")
    sizes = {len(r.load()) for r in reps}
    if len(sizes) > 1:
        raise ValueError(f"representations have different numbers of probes {sorted(sizes)}; they are "
                         f"comparable only over the same probes in the same order")
    return reps


def _constant(a: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: a


def landmark_inputs(probe) -> np.ndarray | None:
    """The raw input the input landmark stands for: the probe's stored thumbnails, one flattened float32 row per
    probe (None when the run stored none)."""
    thumbnails = probe.thumbnails
    return None if thumbnails is None else np.asarray(thumbnails).reshape(len(thumbnails), -1).astype(np.float32)


def input_representation(inputs, n_probe: int) -> Representation:
    """The raw probe inputs as the landmark representation :data:`INPUT_KEY` (the whole probe)."""
    inputs = np.asarray(inputs)
    if inputs.ndim < 1 or len(inputs) != n_probe:
        raise ValueError(f"inputs has {len(inputs) if inputs.ndim else 0} rows but the representations have "
                         f"{n_probe} probes; pass the probe inputs in probe order")
    inputs = inputs.reshape(n_probe, -1).astype(np.float32)
    return Representation(INPUT_KEY, checksum(inputs), _constant(inputs))


def warn_skipped(skipped: list[tuple[Representation, str]]) -> None:
    if skipped:
        lines = "; ".join(f"{rep.label}: {why}" for rep, why in skipped[:5])
        more = f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""
        warnings.warn(f"left out {len(skipped)} representation(s) that cannot be compared: {lines}{more}",
                      RuntimeWarning, stacklevel=3)
