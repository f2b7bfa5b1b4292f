"""The Similarity view's data, without HTTP: which heatmap a request names, checked against the log directory, and
the stored matrix of it.

A heatmap is either the layers of one run against the layers of another (or the same) at one snapshot (mode
``"layers"``) or the snapshots of one layer against each other (mode ``"steps"``). Every run, layer and snapshot a
request names must be one the catalog lists, the measure and kernel ones :mod:`repviz.service` offers, and
two runs must hold the same probes; anything else is a :class:`~.data.BadRequest` (HTTP 400) naming it. A request
never computes: :func:`stored_matrix` reads what :func:`repviz.service.cached_similarity` holds, and the job
(``jobs.py``) computes the rest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from repviz.service import (
    DEFAULT_MEASURE,
    KERNELS,
    MEASURES,
    ProbeMismatchError,
    Run,
    cached_similarity,
    measure_options,
    shared_probe_ids,
)

from .catalog import Catalog
from .data import BadRequest

MODES = ("layers", "steps")


@dataclass(frozen=True)
class Selection:
    """One heatmap: ``runs`` (one or two names), ``layer`` (mode "steps"), ``step`` (mode "layers"; None in a job:
    every snapshot the runs share) and the measure's options (for a measure without them, their defaults, so that
    equal heatmaps have one selection)."""

    mode: str
    runs: tuple[str, ...]
    layer: str | None
    step: int | None
    measure: str
    kernel: str
    debiased: bool

    def public(self) -> dict:
        """The selection as JSON (the job's parameters, the answer's echo)."""
        return {**asdict(self), "runs": list(self.runs)}

    def options(self) -> dict:
        """The keyword arguments of the similarity functions."""
        return {"measure": self.measure, "kernel": self.kernel, "debiased": self.debiased}


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("1", "true", "0", "false"):
        return value in ("1", "true")
    raise BadRequest(f"{name} must be true or false (1 or 0); got {str(value)[:40]!r}")


def _step(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequest(f"{name} must be an integer; got {str(value)[:40]!r}")
    try:
        step = int(value)
    except ValueError:
        raise BadRequest(f"{name} must be an integer; got {value[:40]!r}") from None
    if abs(step) >= 2**53:
        raise BadRequest(f"{name} is out of range")
    return step


def _choice(value, options: tuple[str, ...], name: str) -> str:
    if value not in options:
        raise BadRequest(f"{name} must be one of {list(options)}; got {str(value)[:40]!r}")
    return value


def _run(catalog: Catalog, name) -> Run:
    runs = catalog.runs()
    if not isinstance(name, str) or name not in runs:
        raise BadRequest(f"run {str(name)[:100]!r} is not in the log directory; it has: {sorted(runs)[:20]}")
    return runs[name]


def shared_steps(runs: list[Run]) -> list[int]:
    """The snapshots that every layer of every run in ``runs`` stored, sorted (those a layers × layers heatmap
    can be drawn at)."""
    steps = None
    for run in runs:
        for layer in run.layers:
            steps = set(run.steps(layer)) if steps is None else steps & set(run.steps(layer))
    return sorted(steps or ())


def selection(catalog: Catalog, fields: dict, *, step_required: bool) -> Selection:
    """The heatmap that ``fields`` names (query parameters as strings, or a JSON body), every name checked.

    Fields: ``mode`` ("layers" or "steps", default "layers"), ``run`` and, in mode "layers", ``run2`` (default
    ``run``), ``step`` (mode "layers"; optional when not ``step_required``), ``layer`` (mode "steps"), ``measure``,
    ``kernel`` (defaults: the first of each) and ``debiased`` (default true).
    """
    mode = _choice(fields.get("mode") or MODES[0], MODES, "mode")
    first = _run(catalog, fields.get("run"))
    runs = [first]
    layer = step = None
    if mode == "layers":
        second = fields.get("run2")
        if second not in (None, "", first.name):
            runs.append(_run(catalog, second))
            try:
                shared_probe_ids(first, runs[1])
            except ProbeMismatchError as e:
                raise BadRequest(str(e)) from None
        raw = fields.get("step")
        if raw not in (None, ""):
            step = _step(raw, "step")
            have = shared_steps(runs)
            if step not in have:
                names = " and ".join(repr(r.name) for r in runs)
                raise BadRequest(f"step {step} is not a snapshot of every layer of run {names}; they share: "
                                 f"{have[:50]}")
        elif step_required:
            raise BadRequest("missing parameter 'step'")
        elif not shared_steps(runs):
            raise BadRequest(f"runs {' and '.join(repr(r.name) for r in runs)} share no snapshot of every layer")
    else:
        layer = fields.get("layer")
        if layer in (None, ""):
            raise BadRequest("missing parameter 'layer'")
        if not isinstance(layer, str) or layer not in first.layers:
            raise BadRequest(f"layer {str(layer)[:100]!r} is not in run {first.name!r}; it has: {first.layers[:30]}")
    measure = _choice(fields.get("measure") or DEFAULT_MEASURE, MEASURES, "measure")
    kernel = _choice(fields.get("kernel") or KERNELS[0], KERNELS, "kernel")
    debiased = _flag(fields.get("debiased", True), "debiased")
    if not measure_options(measure):  # a measure without options: one selection for it
        kernel, debiased = KERNELS[0], True
    return Selection(mode, tuple(r.name for r in runs), layer, step, measure, kernel, debiased)


def stored_matrix(catalog: Catalog, chosen: Selection) -> dict | None:
    """The stored matrix of ``chosen`` as JSON (values, rows and cols as [run, layer, step] in model or step
    order, measure, params, notes, title, ``left_out``: the representations whose cells are empty, each with its
    reason), with the colour scale's title and direction and the selection echoed; None when some value is not
    computed yet."""
    log = catalog.logdir()
    if log is None:
        return None
    if chosen.mode == "layers":
        matrix = cached_similarity(log, chosen.runs, chosen.step, **chosen.options())
    else:
        matrix = cached_similarity(log, chosen.runs[0], layer=chosen.layer, **chosen.options())
    if matrix is None:
        return None
    # the title starts with what the values are ("debiased linear CKA, run ...")
    return {**matrix.to_dict(), "scale_title": matrix.title.split(", ", 1)[0],
            "higher_is_similar": matrix.higher_is_similar, "selection": chosen.public()}


def not_computed(chosen: Selection) -> str:
    """The one line of a heatmap that is not computed yet (HTTP 404): which, and how to compute it."""
    what = (f"layer {chosen.layer!r} of run {chosen.runs[0]!r} over training" if chosen.mode == "steps" else
            f"run {' against run '.join(repr(r) for r in chosen.runs)} at step {chosen.step}")
    return f"the {chosen.measure} heatmap of {what} is not computed yet; POST compute_similarity to compute it"


def job_steps(catalog: Catalog, chosen: Selection) -> list[int] | None:
    """The snapshots a job computes the heatmap at: ``chosen.step``, or every one the runs share (mode "layers");
    None in mode "steps" (one matrix over every snapshot)."""
    if chosen.mode == "steps":
        return None
    if chosen.step is not None:
        return [chosen.step]
    return shared_steps([catalog.run(name) for name in chosen.runs])
