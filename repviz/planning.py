"""What embedding a log directory takes: what the store already holds, what is left, and where to resume.

:func:`plan_embeddings` only reads the store: it walks each chain through the cache up to its first
representation to compute (a stored embedding counts if its sidecar names the same source checksum and the same
predecessor) and returns a :class:`Plan` of :class:`~repviz.chains.ChainTask` s. :func:`run_rest` is the task an
executor runs: :func:`resume` (skip what a previous attempt stored), then :func:`~repviz.chains.run_chain`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from .chains import ChainTask, RepresentationError, constant, damaged, failure, nonfinite, run_chain
from .methods import check_method, request_id, resolve
from .store import DamagedFileError, NotFoundError, Run, open_logdir


def select_names(names: Iterable[str] | None, have: Iterable[str], what: str, where: str) -> list[str]:
    have = list(have)
    if names is None:
        return have
    names = list(names)
    for n in names:
        if n not in have:
            raise NotFoundError(f"{what} {n!r} is not in {where}; it has: {', '.join(map(repr, have)) or 'none'}")
    return names


def _chains_of(run: Run, layers: list[str], steps: Sequence[int] | None, align: str) -> list[list[tuple[str, int]]]:
    def steps_of(layer: str) -> list[int]:
        have = run.steps(layer)
        if steps is None:
            return have
        for s in steps:
            if s not in have:
                run.record(layer, s)  # raises NotFoundError naming the steps the layer has
        return sorted(set(steps))

    per_layer = {layer: steps_of(layer) for layer in layers}
    if align == "snapshots":
        return [[(layer, s) for s in per_layer[layer]] for layer in layers]
    if align == "layers":
        all_steps = sorted({s for ss in per_layer.values() for s in ss})
        return [[(layer, s) for layer in layers if s in per_layer[layer]] for s in all_steps]
    return [[(layer, s)] for layer in layers for s in per_layer[layer]]


class _Todo(NamedTuple):
    """The part of one chain left to compute, and the stored embedding it continues from."""

    run: Run
    items: list[tuple[str, int]]
    init_from: tuple[str, int] | None


@dataclass
class _CacheWalk:
    """What the store holds for the chains of one method key: counts, failures known without computing, and
    what is left to compute."""

    cached: int = 0
    failed: list[dict] = field(default_factory=list)
    todo: list[_Todo] = field(default_factory=list)

    def add_chain(self, run: Run, key: str, method: str, items: list[tuple[str, int]],
                  previous: tuple[str, int] | None = None) -> None:
        """Walk one chain through the cache up to the first representation to compute; ``previous`` is the
        stored embedding the chain continues from (None: it starts with ``items[0]``)."""
        for i, (layer, step) in enumerate(items):
            record = run.record(layer, step)
            info = _cached_info(run, key, layer, step, record["shape"][0])
            if (info is not None and info.get("source", {}).get("crc32") == record["crc32"]
                    and run.record_intact(record) and info.get("init_from") == (None if previous is None
                                                                                 else list(previous))):
                previous = (layer, step)
                self.cached += 1
                continue
            if error := nonfinite(record) or constant(record) or damaged(run, record) or _no_probe(run):
                # fails (or is left out as constant) every time
                self.failed.append(failure(run.name, layer, step, method, error))
                continue
            self.todo.append(_Todo(run, items[i:], previous))
            return


def _cached_info(run: Run, key: str, layer: str, step: int, n_rows: int) -> dict | None:
    """The sidecar of the stored embedding of (layer, step) under ``key`` when that embedding is intact (complete,
    finite, ``n_rows`` rows) and its sidecar reads; None otherwise: it is computed again, and both files replaced."""
    if not run.embeddings.intact(key, layer, step, n_rows):
        return None
    try:
        return run.embeddings.info(key, layer, step)
    except DamagedFileError:
        return None


def _no_probe(run: Run) -> RepresentationError | None:
    """The error of every snapshot of a run whose probe set cannot be read (missing or damaged)."""
    try:
        n = len(run.probe)
    except (NotFoundError, DamagedFileError) as e:
        return RepresentationError(str(e))
    return None if n else RepresentationError(f"run {run.name!r} has an empty probe set")


def resume(task: ChainTask) -> tuple[ChainTask | None, list[dict]]:
    """What is left of ``task`` once what the store already holds is skipped: the task for the rest (None if
    nothing is left) and the results of the representations skipped.

    A task run a second time (a cluster retrying it after its worker died) so continues from the last snapshot
    the first attempt stored, which counts as computed.
    """
    key, method = task.resolved.key, task.resolved.method.name
    walk = _CacheWalk()
    walk.add_chain(task.run, key, method, list(task.items), task.init_from)
    todo = walk.todo[0] if walk.todo else None
    left = () if todo is None else tuple(todo.items)
    done = [{"run": task.run.name, "layer": layer, "step": step, "method": method, "status": "computed",
             "seconds": float("nan")} for layer, step in task.items[:len(task.items) - len(left)]
            if task.run.embeddings.has(key, layer, step)]
    rest = None if todo is None else replace(task, items=left, init_from=todo.init_from)
    return rest, done + walk.failed


def _walk(runs: list[Run], run_chains: dict[str, list], key: str, method: str) -> _CacheWalk:
    walk = _CacheWalk()
    for run in runs:
        for items in run_chains[run.name]:
            walk.add_chain(run, key, method, items)
    return walk


def _known_key(runs: list[Run], request: str) -> str | None:
    """The key every run recorded for ``request`` (None if any run has not seen it)."""
    keys = set()
    for run in runs:
        found = [k for k in run.embeddings.method_keys() if request in run.embeddings.method(k).get("requests", [])]
        if len(found) != 1:
            return None
        keys.add(found[0])
    return keys.pop() if len(keys) == 1 else None


@dataclass(frozen=True)
class MethodNote:
    """A method key's description (``method.json``) to write into a run before anything is computed under it."""

    run: Run
    key: str
    description: dict


@dataclass
class Plan:
    """What embedding a log directory takes: the chains to compute and what is known without computing.

    Built by :func:`plan_embeddings`, which only reads the store. :func:`repviz.pipeline.execute` carries it out with an
    executor.

    Attributes
    ----------
    runs : list of Run
        The selected runs.
    layers : dict
        Run name -> the layers it embeds, in model order (the rows of the summary).
    steps : tuple of int or None
        The selected snapshots (None: all).
    keys : dict
        Method name -> the key its results are stored under.
    tasks : list of ChainTask
        What to compute, longest and slowest chains first (so the last worker is not left alone with a long
        t-SNE chain). Empty when everything is stored.
    cached : int
        Representations already stored and valid.
    failed : list of dict
        Representations known to fail without computing (non-finite activations), or to be left out (status
        ``"constant"``: capture found them the same for every probe point).
    notes : list of MethodNote
        Method descriptions to write first.
    """

    runs: list[Run]
    layers: dict[str, list[str]]
    steps: tuple[int, ...] | None
    keys: dict[str, str]
    tasks: list[ChainTask]
    cached: int
    failed: list[dict]
    notes: list[MethodNote]

    @property
    def total(self) -> int:
        """Representations to compute."""
        return sum(len(task.items) for task in self.tasks)

    def write_method_notes(self) -> None:
        """Describe every method key in the runs it will store results in, so readers find it by name."""
        for note in self.notes:
            note.run.embeddings.write_method(note.key, note.description)


def plan_embeddings(logdir, methods: Sequence[str] = ("tsne",), params: dict[str, dict] | None = None, *,
                    runs: Sequence[str] | None = None, layers: Sequence[str] | None = None,
                    steps: Sequence[int] | None = None, align: str = "snapshots",
                    score_sample: int | None = 1000) -> Plan:
    """Check a request and find what the store holds and what is left to compute; nothing is written.

    The parameters are those of :func:`repviz.pipeline.embed_logdir`. A request seen before finds its key in
    ``method.json``, so a fully cached plan never imports the numerical code (about a second); anything to compute
    goes through :func:`repviz.methods.resolve`, which validates the parameters and hashes them.
    """
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    if not methods:
        raise ValueError("no method given; pass e.g. methods=['tsne']")
    params = dict(params or {})
    stray = sorted(set(params) - set(methods))
    if stray:
        raise ValueError(f"parameters given for method {stray[0]!r}, which is not among the methods to run "
                         f"({', '.join(methods)})")
    for name in methods:
        check_method(name, align)
    log = open_logdir(logdir) if not hasattr(logdir, "runs") else logdir
    if not log.runs:
        raise NotFoundError(f"{str(log.path)!r} holds no repviz runs (no */plugins/repviz/manifest.json)")
    run_names = select_names(runs, log.runs, "run", repr(str(log.path)))
    selected_runs = [log.run(n) for n in run_names]
    if layers is not None:
        select_names(layers, dict.fromkeys(lay for run in selected_runs for lay in run.layers), "layer",
                f"run(s) {', '.join(map(repr, run_names))}")
    run_chains = {run.name: _chains_of(run, run.layers if layers is None else
                                       [lay for lay in layers if lay in run.layers], steps, align)
                  for run in selected_runs}

    tasks: list[ChainTask] = []
    notes: list[MethodNote] = []
    failed: list[dict] = []
    cached = 0
    keys: dict[str, str] = {}
    for name in dict.fromkeys(methods):
        request = request_id(name, params.get(name), align)
        key = _known_key(selected_runs, request)
        walk = None if key is None else _walk(selected_runs, run_chains, key, name)
        if walk is None or walk.todo:
            resolved = resolve(name, params.get(name), align)
            if resolved.key != key:
                key, walk = resolved.key, _walk(selected_runs, run_chains, resolved.key, name)
            for run in selected_runs:
                todo = [t for t in walk.todo if t.run is run]
                info = run.embeddings.method(key)
                if todo or request not in info.get("requests", []):
                    requests = sorted({*info.get("requests", []), request})
                    notes.append(MethodNote(run, key, {**resolved.describe(), "requests": requests}))
                tasks += [ChainTask(run, resolved, tuple(t.items), t.init_from, score_sample) for t in todo]
        keys[name] = key
        cached += walk.cached
        failed += walk.failed
    tasks.sort(key=lambda t: (t.resolved.chain_align == "init", len(t.items)), reverse=True)
    layers_of = {run.name: list(dict.fromkeys(lay for chain in run_chains[run.name] for lay, _ in chain))
                 for run in selected_runs}
    return Plan(selected_runs, layers_of, None if steps is None else tuple(steps), keys, tasks, cached, failed,
                notes)


def run_rest(task: ChainTask, advance: Callable[[int], None], threads: int = 1) -> list[dict]:
    """Run what is left of ``task`` (:func:`resume`, then :func:`~repviz.chains.run_chain`): an executor's task
    function, so that a task run again after its worker died continues where the first attempt stopped."""
    rest, done = resume(task)
    if skipped := len(task.items) - (0 if rest is None else len(rest.items)):
        advance(skipped)
    return done if rest is None else done + run_chain(rest, advance, threads)
