"""The main job behind ``repviz demo LOGDIR``: Olah's showcase, offline. A sigmoid MLP, a ReLU MLP and a small CNN
learn MNIST digits, two seeds each; every layer is recorded, embedded and placed in one meta-SNE map, and the map
is checked against what it should show.

The demo is a list of steps run in order on one :class:`DemoConfig` (``STEPS``); each step reads what the earlier
ones wrote in the log directory and prints what it found: training (test accuracy), per-layer embeddings (PCA
and aligned t-SNE), a second probe set (training digits recorded by :func:`repviz.record` after training) placed
into one network's layouts, the meta-SNE maps (``dist`` and ``cka``, the raw input as landmark) with the truth checks of
:func:`repviz.meta.seed_checks`, the layer-by-layer CKA of the seeds of each network (Kornblith et al. 2019's
layer identification, read off :func:`repviz.similarity`'s heatmap), and a closing summary.
``examples/compare_networks.py`` is the same experiment as a script. The networks train in a process of their
own, so that TensorFlow's memory (0.5 GB once imported) is given back before the embeddings start; meanwhile
:mod:`repviz.warmup` compiles the numerical kernels in the background, so that on a fresh install the embeddings
do not wait for the compiler.
"""

from __future__ import annotations

import contextlib
import io
import logging
import multiprocessing
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .datasets import BUNDLED_MNIST, load_mnist, stratified_indices
from .networks import ARCHITECTURES

OUTPUT_LAYER = "softmax"  # every network's softmax layer (repviz.networks): left out of architecture separation
# The showcase's targets at the default size: (check, the transforms it applies to, the least fraction).
TARGETS = (("layer_identification", ("cka",), 0.9), ("architecture_separation", ("dist", "cka"), 1.0))
TRANSFORMS = ("dist", "cka")
EMBEDDINGS = ("pca", "tsne")  # the methods of every layer's embeddings
#: ActivationLogger's max_width for the showcase: every map of its networks is kept whole (see train_networks).
SHOWCASE_MAX_WIDTH = 4096
#: Training batches per compiled call: the demo records epochs only, and its small networks spend a good part of
#: each batch in Python.
STEPS_PER_EXECUTION = 16
#: The network (at the first seed) whose t-SNE layouts the demo places a second probe set into, and that set's run.
PLACED_INTO, PLACED_RUN = "relu", "relu/training-digits"


@dataclass
class DemoConfig:
    """What the demo trains and where it writes.

    Parameters
    ----------
    logdir : path
        Log directory; runs go to ``logdir/<architecture>/seed<k>`` (e.g. ``relu/seed0``).
    epochs : int, default=8
        Training epochs per network (about 1 s each on two CPU cores with the bundled data).
    n_probe : int, default=1000
        Test digits recorded at every snapshot, drawn evenly from the classes (100 per class at 1,000).
    seed : int, default=0
        First seed; the networks are trained with seeds ``seed, seed + 1, ...``. Seeds weights, shuffling, the
        probe draw and the projections.
    n_seeds : int, default=2
        Runs per architecture (at least 2: the checks compare seeds).
    snapshots : int, default=4
        Log-spaced snapshot epochs besides epoch 0 (:func:`repviz.capture.log_spaced_epochs`).
    n_train : int or None, default=None
        Train on the first ``n_train`` training digits only; None: all of them.
    mnist : path, default=None
        A local MNIST ``.npz``; default the subset bundled with repviz (6,000 train / 1,000 test digits).
    jobs : int, default=-1
        Worker processes for the embeddings (-1: one per core).
    quick : bool, default=False
        Marks a CI-sized run (see :meth:`quick_config`); the summary then says the targets are for the default size.
    """

    logdir: str | Path
    epochs: int = 8
    n_probe: int = 1000
    seed: int = 0
    n_seeds: int = 2
    snapshots: int = 4
    n_train: int | None = None
    mnist: str | Path | None = None
    jobs: int = -1
    quick: bool = False
    # filled by the steps
    runs: dict[str, tuple[str, int]] = field(default_factory=dict)  # run name -> (architecture, seed)
    accuracy: dict[str, float] = field(default_factory=dict)  # run name -> test accuracy
    scores: list[dict] = field(default_factory=list)  # EmbedResult.rows: last snapshot's quality per layer
    checks: dict = field(default_factory=dict)  # transform -> SeedChecks
    maps: dict[str, str] = field(default_factory=dict)  # transform -> meta-SNE result name
    similar: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # architecture -> (hits, layers, step)
    placed: tuple[str, str] | None = None  # the second probe set's run and the run it is placed into
    digits: Digits | None = field(default=None, repr=False)  # load_digits(self), set before any process starts
    embedded: list = field(default_factory=list)  # EmbedResults of the runs embedded while the others trained

    @classmethod
    def quick_config(cls, logdir: str | Path, **overrides) -> DemoConfig:
        """The CI-sized demo: 200 probes, 2,000 training digits, 2 epochs (snapshots 0, 1, 2)."""
        return cls(logdir, **{"epochs": 2, "n_probe": 200, "n_train": 2000, "snapshots": 2, "quick": True,
                              **overrides})


def run_name(architecture: str, seed: int) -> str:
    """The run of one network and seed, e.g. ``relu/seed0`` (TensorBoard groups the seeds under ``relu``)."""
    return f"{architecture}/seed{seed}"


@dataclass(frozen=True)
class Digits:
    """The demo's data: training digits ``x`` and labels ``y``, test digits ``xt`` and labels ``yt`` (images
    scaled to [0, 1]), and the rows of the test set that are the probe."""

    x: np.ndarray
    y: np.ndarray
    xt: np.ndarray
    yt: np.ndarray
    probe: np.ndarray


def load_digits(cfg: DemoConfig) -> Digits:
    """The digits ``cfg`` trains on, after checking the sizes it asks for (a ``ValueError`` line each), so that a
    wrong option is said before any process starts."""
    if cfg.n_seeds < 2:
        raise ValueError(f"--seeds must be >= 2 (the checks compare seeds); got {cfg.n_seeds}")
    (x, y), (xt, yt) = load_mnist(cfg.mnist if cfg.mnist is not None else BUNDLED_MNIST)
    if not 1 <= cfg.n_probe <= len(xt):
        raise ValueError(f"--probe must be between 1 and the {len(xt)} test digits available; got {cfg.n_probe}")
    return Digits(x[:cfg.n_train].astype(np.float32) / 255, y[:cfg.n_train], xt.astype(np.float32) / 255, yt,
                  stratified_indices(yt, cfg.n_probe, random_state=cfg.seed))


def train_networks(cfg: DemoConfig, out: Callable[[str], None] = print,
                   trained: Callable[[str], None] | None = None) -> None:
    """Train every architecture with every seed, recorded by :class:`repviz.ActivationLogger` on one stratified
    probe set at log-spaced epochs; print each network's test accuracy. ``trained(run)`` is called once a
    network's run is complete."""
    from .capture import ActivationLogger, ProbeSet, log_spaced_epochs, record
    from .networks import build_network
    from .store import run_directory, run_name_of

    logging.getLogger("tensorflow").addFilter(_RETRACING_NOTE_LEFT_OUT)
    d = cfg.digits or load_digits(cfg)
    x, y, xt, yt, probe = d.x, d.y, d.xt, d.yt, d.probe
    epochs = log_spaced_epochs(cfg.epochs, cfg.snapshots)
    for arch in ARCHITECTURES:
        for seed in range(cfg.seed, cfg.seed + cfg.n_seeds):
            name = run_name(arch, seed)
            model = build_network(arch, seed, steps_per_execution=STEPS_PER_EXECUTION)
            # Conv maps are kept whole (at most 2,704 values here): the default count sketch to 256 columns moves
            # the cka distance of conv1 to the input from 0.11-0.25 to 0.29-0.36, as large as what the map shows.
            logger = ActivationLogger(run_directory(cfg.logdir, name), probe=(xt[probe], yt[probe]),
                                      probe_ids=probe, freq=epochs, seed=seed, max_width=SHOWCASE_MAX_WIDTH)
            model.fit(x, y, epochs=cfg.epochs, batch_size=64, verbose=0, callbacks=[logger])
            # a log directory that already holds this run gets the new training beside it (`<name>-2`)
            name = run_name_of(cfg.logdir, logger.log_dir)
            cfg.accuracy[name] = float(model.evaluate(xt, yt, batch_size=500, verbose=0)[1])
            cfg.runs[name] = (arch, seed)
            out(f"{name:>14}: {cfg.epochs} epochs on {len(x):,} digits, test accuracy {cfg.accuracy[name]:.3f} "
                f"({len(xt):,} digits), snapshots at epochs 0, {', '.join(map(str, epochs))}")
            if (arch, seed) == (PLACED_INTO, cfg.seed):  # a second probe set of this network, to place
                rows = stratified_indices(y, max(10, cfg.n_probe // 5), random_state=cfg.seed)
                again = name[len(run_name(arch, seed)):]  # "-2" beside an earlier demo's runs, as the seeds went
                run = record(model, ProbeSet(x[rows], y[rows], ids=rows),
                             run_directory(cfg.logdir, PLACED_RUN + again), step=cfg.epochs, seed=seed,
                             max_width=SHOWCASE_MAX_WIDTH)
                # record opens the run in its parent directory: the name there, under the same group
                cfg.placed = (f"{PLACED_RUN.rpartition('/')[0]}/{run.name}", name)
            if trained is not None:
                trained(name)


class _RetracingNoteLeftOut(logging.Filter):
    """Drops TensorFlow's warning that a function was traced again: an epoch whose last batch is smaller traces
    its last call again, as it must, and TensorFlow counts the functions of all the networks together and warns
    of excessive retracing (the quick demo printed it twice)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "triggered tf.function retracing" not in record.getMessage()


_RETRACING_NOTE_LEFT_OUT = _RetracingNoteLeftOut()


def train_networks_apart(cfg: DemoConfig, out: Callable[[str], None] = print,
                         trained: Callable[[str], None] | None = None) -> None:
    """:func:`train_networks` in a child process: its lines come back to ``out`` as it prints them, its
    ``trained`` calls to ``trained``, what Python writes to its ``sys.stderr`` (notes, warnings) to this
    process's, its runs and accuracies into ``cfg``, and an error it raises is raised here. TensorFlow is imported
    only there, so the later steps do not carry its memory."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_train_child, args=(cfg, sending), name="repviz-demo-training")
    child.start()
    sending.close()
    try:
        while True:
            try:
                kind, value = receiving.recv()
            except EOFError:
                child.join()
                raise RuntimeError(f"the training process ended without a result (exit code "
                                   f"{child.exitcode})") from None
            if kind == "line":
                out(value)
            elif kind == "trained":
                if trained is not None:
                    trained(value)
            elif kind == "stderr":
                sys.stderr.write(value)
            elif kind == "error":
                raise value
            else:
                cfg.runs, cfg.accuracy, cfg.placed = value
                break
        child.join()
    finally:
        if child.is_alive():
            child.terminate()
            child.join()
        receiving.close()


def _train_child(cfg: DemoConfig, sending) -> None:
    """The training process of :func:`train_networks_apart`."""
    sys.stderr = _Sent(sending)
    _few_malloc_arenas()
    _unused_packages_left_out()
    try:
        with _native_startup_held():  # TensorFlow's start-up lines; what else native code writes comes after
            train_networks(cfg, out=lambda line: sending.send(("line", line)),
                           trained=lambda run: sending.send(("trained", run)))
    except Exception as e:  # raised again in the parent
        try:
            sending.send(("error", e))
        except Exception:  # an exception that does not pickle
            sending.send(("error", RuntimeError(f"{type(e).__name__}: {e}")))
    else:
        sending.send(("done", (cfg.runs, cfg.accuracy, cfg.placed)))
    finally:
        sending.close()


def _few_malloc_arenas(arenas: int = 2) -> None:
    """Let glibc's malloc keep at most ``arenas`` arenas in this process (its default: 8 per core). TensorFlow's
    thread pools otherwise each allocate in an arena of their own, whose freed memory stays resident: the
    training process peaks 0.05 GB lower with two. Set before TensorFlow starts its threads; a no-op elsewhere
    than glibc."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


#: Packages Keras imports whenever they are installed, for what the demo's training never does (plots, DataFrame
#: input, scikit-learn wrappers, notebook display, image files). With the test extras installed they cost the
#: training process 0.14 GB (0.89 -> 0.75 GB at its peak) and 1 s.
UNUSED_BY_TRAINING = ("IPython", "matplotlib", "pandas", "sklearn", "PIL")


def _unused_packages_left_out(names: tuple[str, ...] = UNUSED_BY_TRAINING) -> None:
    """Make ``import`` of each of ``names`` raise ImportError in this process (a ``None`` entry in
    ``sys.modules``), which Keras takes as the package being absent."""
    for name in names:
        sys.modules.setdefault(name, None)


# TensorFlow's lines from before its logging is set up: they ignore TF_CPP_MIN_LOG_LEVEL, and each of its two
# native libraries prints them as it loads (twice per import).
_TF_STARTUP = re.compile(r"All log messages before absl::InitializeLog\(\)|\] oneDNN custom operations are on")


@contextlib.contextmanager
def _native_startup_held():
    """Pass on what native code writes to file descriptor 2 meanwhile, line by line as it comes, but TensorFlow's
    start-up lines (all of them when ``TF_CPP_MIN_LOG_LEVEL`` is 0 or unset: a user who asks for TensorFlow's log
    gets it)."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") in ("", "0"):
        yield
        return
    sys.__stderr__.flush()
    saved = os.dup(2)
    reading, writing = os.pipe()
    os.dup2(writing, 2)
    os.close(writing)

    def forward() -> None:
        with os.fdopen(reading, "rb") as pipe:
            for line in pipe:
                if not _TF_STARTUP.search(line.decode(errors="replace")):
                    os.write(saved, line)

    forwarder = threading.Thread(target=forward, name="repviz-native-stderr", daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        os.dup2(saved, 2)  # the pipe's last writer closes: the forwarder reads to its end and stops
        forwarder.join(timeout=5)  # unless a child process still holds a copy: then it forwards on meanwhile
        if not forwarder.is_alive():
            os.close(saved)


class _Sent(io.TextIOBase):
    """A text stream whose writes go to the parent process as ``("stderr", text)``."""

    def __init__(self, sending):
        self._sending = sending

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._sending.send(("stderr", text))
        return len(text)


class _OneCore:
    """The pipeline's executor (:class:`repviz.executors.Executor`) of :class:`EmbeddingWhileTraining`: the
    tasks in this process, one thread each."""

    workers = 1

    def prepare(self, logdir):
        return logdir

    def map(self, fn, tasks, advance, on_lost):
        for task in tasks:
            yield fn(task, advance, 1)


class EmbeddingWhileTraining:
    """Embeds each network's run in a thread of this process as soon as the training process reports it
    trained, on one core (the training has the others) and once the kernels' warm-up ``warming`` has ended;
    the results go to ``cfg.embedded``. :meth:`stop` drops the runs still waiting and ends the thread after the
    run it is embedding: :func:`embed_layers` embeds the rest on every core. The embeddings do not depend on
    where or on how many threads they are computed."""

    def __init__(self, cfg: DemoConfig, warming=None):
        self.cfg, self.warming = cfg, warming
        self._runs: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._work, name="repviz-demo-embedding", daemon=True)
        self._thread.start()

    def add(self, run: str) -> None:
        self._runs.put(run)

    def _work(self) -> None:
        from .pipeline import embed_logdir

        while (run := self._runs.get()) is not None:
            if self.warming is not None:
                self.warming.wait()
            if self._stopped.is_set():
                return
            try:
                self.cfg.embedded.append(embed_logdir(self.cfg.logdir, methods=list(EMBEDDINGS), runs=[run],
                                                      progress=False, executor=_OneCore()))
            except Exception:  # left to embed_layers, which computes whatever is not stored and reports it
                return

    def stop(self, wait: bool = True) -> None:
        self._stopped.set()
        self._runs.put(None)
        if wait:
            self._thread.join()


def place_digits(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Place the second probe set (training digits, recorded after training) into the t-SNE layouts of its
    network's last snapshot, where the tab draws them as rings (:func:`repviz.place_run`)."""
    from .placement import place_run
    from .progress import TerminalProgress

    run, into = cfg.placed
    with contextlib.closing(TerminalProgress("placement")) as bar:
        rows = [r for r in place_run(cfg.logdir, run, into, "tsne", steps=[cfg.epochs], progress=bar)
                if "knn_accuracy" in r]
    placed, own = (np.mean([r[k] for r in rows]) for k in ("knn_accuracy", "layout_knn_accuracy"))
    out(f"placed {rows[0]['n']} training digits ({run}) into the t-SNE layouts of {into} at epoch {cfg.epochs}: "
        f"10-NN accuracy {placed:.2f} among the layout's points (its own points: {own:.2f}), "
        f"{len(rows)} layers")


def embed_layers(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Embed every layer at every snapshot with PCA and t-SNE (aligned over snapshots), counting what
    :class:`EmbeddingWhileTraining` stored as computed here."""
    from .pipeline import embed_logdir

    result = embed_logdir(cfg.logdir, methods=list(EMBEDDINGS), runs=list(cfg.runs), jobs=cfg.jobs)
    cfg.scores = result.rows
    early = sum(r.computed for r in cfg.embedded)  # stored while the others trained: cached now
    out(f"embeddings: {result.computed + early} computed, {result.cached - early} cached, {len(result.failed)} "
        f"failed in {result.seconds + sum(r.seconds for r in cfg.embedded):.0f} s")
    for line in result.failure_lines():
        out(f"skipped: {line}")


def compare_representations(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Meta-SNE of every (network, layer, snapshot) with the raw input as landmark, for the ``dist`` and ``cka``
    transforms; each map is saved and checked with :func:`repviz.meta.seed_checks`."""
    from .meta import MetaSNE, seed_checks
    from .meta.sources import landmark_inputs
    from .progress import TerminalProgress
    from .store import open_logdir

    logdir = open_logdir(cfg.logdir)
    inputs = landmark_inputs(logdir.run(next(iter(cfg.runs))).probe)
    for transform in TRANSFORMS:
        # cache=False: the vectors (2 MB per representation at 1,000 probes) would triple the demo's disk use
        bar = TerminalProgress(f"meta-SNE ({transform})")
        meta = MetaSNE(transform, embedding="tsne", cache=False, random_state=cfg.seed, progress=bar)
        result = meta.fit(logdir, runs=list(cfg.runs), inputs=inputs)
        bar.close()
        cfg.maps[transform] = result.save(logdir)
        cfg.checks[transform] = seed_checks(result, cfg.runs, output_layers={OUTPUT_LAYER})
        where = logdir.artifacts(cfg.maps[transform]).location
        out(f"meta-SNE ({transform}): {len(result)} representations -> {where}")


def compare_layers(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Debiased linear CKA between every layer of the first seed of each network and every layer of each other seed
    at their last snapshot (:func:`repviz.similarity`, from the meta bank's vectors); a layer is identified when
    its most similar layer of the other seed is itself (the heatmap's row maximum is on the diagonal)."""
    from .similarity import similarity

    start = time.perf_counter()
    for arch in ARCHITECTURES:
        names = [name for name, (a, _) in cfg.runs.items() if a == arch]
        hits = layers = step = 0
        for other in names[1:]:
            matrix = similarity(cfg.logdir, (names[0], other))
            rate, n = matrix.layer_identification()
            hits, layers, step = hits + round(rate * n), layers + n, matrix.rows[0].step
        cfg.similar[arch] = (hits, layers, step)
    out(f"layer similarity (debiased linear CKA of the seeds of each network, {time.perf_counter() - start:.1f} s): "
        + ", ".join(f"{arch} {hits} of {n} layers identified" for arch, (hits, n, _) in cfg.similar.items()))


def summarise(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """The closing summary: accuracy per network, mean quality per layer, the checks against their targets."""
    for line in summary_lines(cfg):
        out(line)


def summary_lines(cfg: DemoConfig) -> list[str]:
    """The lines :func:`summarise` prints, from what the earlier steps left in ``cfg``."""
    seeds = sorted({s for _, s in cfg.runs.values()})
    lines = ["", "test accuracy at the last epoch (" + ", ".join(f"seed {s}" for s in seeds) + "):"]
    named = {trained: name for name, trained in cfg.runs.items()}
    for arch in ARCHITECTURES:
        accs = [cfg.accuracy[named[arch, s]] for s in seeds]
        lines.append(f"  {arch:<8} " + "  ".join(f"{a:.3f}" for a in accs))
    lines += ["", "embedding quality at the last snapshot, mean over seeds (trustworthiness / 10-NN accuracy):"]
    groups: dict[tuple[str, str], dict[str, list]] = {}
    for row in cfg.scores:
        arch = cfg.runs[row["run"]][0]
        s = row["scores"]
        groups.setdefault((arch, row["layer"]), {}).setdefault(row["method"], []).append(
            (s.get("trustworthiness", np.nan), s.get("knn_accuracy", np.nan)))
    for (arch, layer), methods in groups.items():
        cells = [f"{m} {np.mean([t for t, _ in v]):.3f} / {np.mean([a for _, a in v]):.3f}"
                 for m, v in sorted(methods.items())]
        lines.append(f"  {arch:<8} {layer:<8} " + "   ".join(cells))
    lines += [""] + check_lines(cfg.checks, quick=cfg.quick)
    if cfg.similar:
        step = next(iter(cfg.similar.values()))[2]
        lines.append(f"layer identification from the CKA heatmaps at epoch {step} (the most similar layer of the "
                     f"other seed is the same layer): " + ", ".join(f"{arch} {hits} of {n}" for arch, (hits, n, _)
                                                                    in cfg.similar.items()))
    return lines


def _fraction(value: float, n: int) -> str:
    return f"{100 * value:.0f}% of {n}"


def check_lines(checks: dict, *, quick: bool = False) -> list[str]:
    """The truth checks of each transform against :data:`TARGETS` (set for the default size); a missed target is
    said so, and every representation whose layer was not identified is listed with its nearest neighbour."""
    step = next(iter(checks.values())).step
    lines = [f"layer identification at epoch {step} (nearest other-seed representation is the same network and "
             f"layer): " + ", ".join(f"{t} {_fraction(c.layer_identification, c.n_layers)}"
                                     for t, c in checks.items()),
             f"architecture separation at epoch {step} (hidden layers; nearest other-seed representation is the "
             f"same network): " + ", ".join(f"{t} {_fraction(c.architecture_separation, c.n_hidden)}"
                                            for t, c in checks.items())]
    for name, transforms, target in TARGETS:
        for t in transforms:
            if t in checks:
                got = getattr(checks[t], name)
                lines.append(f"target: {name.replace('_', ' ')} ({t}) >= {100 * target:.0f}%: "
                             f"{'met' if got >= target else 'MISSED'} ({100 * got:.0f}%)")
    if quick:
        lines.append("  (the targets are set for the default size; this is a --quick run)")
    for t, c in checks.items():
        for (run, layer, _), (orun, olayer, _) in c.misses:
            lines.append(f"  {t}: {run} {layer} is nearest to {orun} {olayer}")
    return lines


STEPS: list[Callable[[DemoConfig, Callable[[str], None]], None]] = [
    train_networks_apart, embed_layers, place_digits, compare_representations, compare_layers, summarise]


def run_demo(cfg: DemoConfig, out: Callable[[str], None] = print) -> DemoConfig:
    """Run every step of ``STEPS`` on ``cfg``; returns ``cfg`` with the runs, accuracies, maps and checks. The
    kernels compile in a background process from the start; each network's run is embedded in this process while
    the next one trains (:class:`EmbeddingWhileTraining`, after the compiler's warm-up: what it compiles the
    embedding would otherwise compile itself, in every worker)."""
    from . import warmup

    cfg.digits = load_digits(cfg)  # a size it cannot have is said before any process starts
    warming = warmup.start(list(EMBEDDINGS))
    for step in STEPS:
        if step is train_networks_apart:
            embedding = EmbeddingWhileTraining(cfg, warming)
            try:
                step(cfg, out, trained=embedding.add)
            except BaseException:
                embedding.stop(wait=False)
                raise
            embedding.stop()
            cfg.digits = None  # the training process had them; the later steps read the log directory
            continue
        if step is embed_layers and warming is not None:
            start = time.perf_counter()
            warming.wait()
            if (waited := time.perf_counter() - start) >= 0.5:
                out(f"waited {waited:.1f} s for the numerical kernels to compile")
        step(cfg, out)
    return cfg
