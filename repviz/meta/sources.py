"""What meta-SNE compares: representations keyed (run, layer, step), read lazily from a log directory or arrays.

Representations are comparable only over the same probes in the same order, so every run must carry the same
probe ids; the check names the first two runs that differ.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..chains import verified_activations
from ..store import LogDir, NotFoundError, Run, checksum

Key = tuple[str, str, int]
INPUT_KEY: Key = ("<input>", "input", 0)
"""The key of the raw input, the landmark representation that every network starts from."""


class ProbeMismatchError(ValueError):
    """Two runs hold different probe sets, so their representations cannot be compared."""


def shared_probe_ids(a: Run, b: Run, remedy: str = "record both runs with the same probe") -> np.ndarray:
    """The probe ids of runs ``a`` and ``b``, refused with :class:`ProbeMismatchError` (one line naming both runs,
    where they differ and ``remedy``) if they differ."""
    ids = np.asarray(a.probe.ids)
    if a is b:
        return ids
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
    """One representation: its key, a checksum of its data (the cache key) and a loader."""

    key: Key
    checksum: str
    load: Callable[[], np.ndarray]

    @property
    def label(self) -> str:
        run, layer, step = self.key
        return f"run {run!r} layer {layer!r} step {step}" if run else f"representation {layer!r}"


def from_logdir(logdir: LogDir, runs: Sequence[str] | None = None,
                layers: Sequence[str] | None = None) -> tuple[list[Representation], np.ndarray]:
    """Every stored (run, layer, step) of the selected runs and layers, and the probe ids they share. Each is
    read checked against the checksum recorded at capture.

    ``runs`` and ``layers`` default to all; a layer name is taken from every selected run that has it.
    """
    # By default, runs with no snapshot (e.g. killed before storing its probe) have nothing to compare.
    chosen = [logdir.run(r) for r in runs] if runs is not None else [r for r in logdir.runs.values() if r.steps()]
    if not chosen:
        raise NotFoundError(f"{str(logdir.path)!r} holds no repviz runs to compare")
    ids = shared_probe_ids(chosen[0], chosen[0])
    for run in chosen[1:]:
        shared_probe_ids(chosen[0], run, "compare them separately (runs=[...]) or record both with the same probe")
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
                reps.append(Representation((run.name, layer, int(step)), rec["crc32"],
                                           _loader(run, layer, step)))
    return reps, ids


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


def input_representation(inputs, n_probe: int) -> Representation:
    """The raw probe inputs as the landmark representation :data:`INPUT_KEY`."""
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
