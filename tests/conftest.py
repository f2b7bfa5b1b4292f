"""Fixtures shared by the test modules: scikit-learn's digits, Swiss rolls, tiny log directories written through
the store, and a tiny Keras classifier for the callback's tests.

Every synthetic array comes from its own seeded generator (never numpy's global seed), and arrays shared between
tests are read-only, so a test that writes into one fails instead of changing what the next test sees.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
from collections import OrderedDict
from pathlib import Path

# The suite runs on several worker processes (pytest-xdist), each of whose numba kernels and BLAS calls run on
# every core: a thread that waits at the end of a parallel loop (GNU OpenMP) or of a BLAS call (OpenBLAS) sleeps
# at once instead of spinning on a core that another worker needs (by default both spin first; with the cores
# shared that doubled the CPU time of the numerical tests). Set before the thread pools start, so in every worker.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # OpenBLAS's shortest: 2**4 cycles

import numpy as np
import pytest

from repviz.store import RunWriter


# Tests that go to one worker as one unit with `--dist loadgroup` (pyproject); every other test goes on its own:
# - a browser test module: its tests share one page (and its server) and build on each other's state;
# - the notebook tests: they share one JupyterLab server and browser per worker (session fixtures, the slowest to
#   start);
# - the tests that fit umap-learn: it compiles its numba functions (uncached) in each process that first fits one,
#   about 5 s of CPU, paid by one worker instead of each.
# (pytest-xdist's own loadgroup reads xdist_group marks through a node id that pytest 9 no longer lets it change.)
def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/browser/"):
        return path
    if path.startswith("tests/notebook/"):
        return "tests/notebook/"
    if path == "tests/test_umap.py" or nodeid.endswith(("[umap]", "[UMAP]")):
        return "umap-learn"
    return nodeid


def pytest_configure(config):
    """Under pytest-xdist, a worker's numba kernels and BLAS calls take ``cores // workers`` threads (at least one)
    unless a test asks for more (``n_jobs``, ``threadpool_limits``), as the pipeline's worker processes do. Three
    workers on two cores each running two-thread loops spent about 5 % more CPU on a run (threads waiting at the end
    of every parallel loop for one that another worker's process had descheduled)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        import numba
        from threadpoolctl import threadpool_limits

        from repviz.workers import cores

        threads = max(1, cores() // workers)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        threadpool_limits(threads)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than pytest-xdist's one per core. A worker whose test waits on a page, a server
    or a subprocess leaves its core idle (a sixth of the run with two workers on two cores); a third fills it. Left
    to xdist when PYTEST_XDIST_AUTO_NUM_WORKERS says how many."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from xdist.plugin import pytest_xdist_auto_num_workers as one_per_core

    return one_per_core(config) + 1


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        _spread = False

        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._spread:  # the first assignment: the queue is complete
                self.workqueue = OrderedDict(_spread_out(list(self.workqueue.items())))
                self._spread = True
            super()._assign_work_unit(node)

    return Units(config, log)


def _spread_out(units: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The work units in the order the workers take them: the units of several tests (a browser module, the
    notebook tests: tens of seconds, mostly spent waiting on a page or a server) spread through the first four
    fifths of the single tests, the notebook tests first, instead of all first (pytest-xdist's order, by size: all
    workers then waited on pages at once while a core idled, and the numerical tests came after)."""
    groups = sorted((u for u in units if len(u[1]) > 1), key=lambda u: (u[0] != "tests/notebook/", -len(u[1])))
    singles = [u for u in units if len(u[1]) == 1]
    at: dict[int, list] = {}
    for i, unit in enumerate(groups):
        at.setdefault(round(i * 0.8 * len(singles) / len(groups)), []).append(unit)
    order = []
    for j, unit in enumerate(singles):
        order += at.pop(j, [])
        order.append(unit)
    return order + [u for rest in at.values() for u in rest]


#: The fingerprint (model and probe identity) of the runs written by :func:`new_run`.
FINGERPRINT = {"model": "m", "probe": "p"}


def _read_only(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


@pytest.fixture(scope="session")
def repo() -> Path:
    """The root of this checkout: the working directory of subprocesses that import repviz from it."""
    return Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _registries_restored():
    """A test that registers a method or a similarity measure leaves the registries as it found them (a test
    registering "slowpca" made a later test of every method's description fail on the same worker)."""
    from repviz import methods
    from repviz.similarity import registry

    saved = [(table, dict(table)) for table in (methods.METHODS, registry.MEASURES)]
    yield
    for table, before in saved:
        table.clear()
        table.update(before)


@pytest.fixture(scope="session")
def build_once(tmp_path_factory):
    """``build_once(name, build) -> Path``: a directory that ``build(path)`` fills, built once per test session
    and shared by its worker processes (pytest-xdist): the first worker to ask builds it under a file lock and
    marks it done; the others wait for the lock and read it. An unfinished directory (a worker killed while
    building) is built again. For slow setups whose result the tests only read (or write atomically)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's, above each worker's

    def get(name: str, build) -> Path:
        path = root / f"shared-{name}"
        with open(root / f"shared-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its worker dies
            if not (path / ".done").exists():
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir()
                build(path)
                (path / ".done").touch()
        return path

    return get


@pytest.fixture(scope="session")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits (1,797 images, bundled: no network): ``(X, y)``, X float64 (1797, 64) with
    values 0..16, y the digit; read-only. Test modules take the rows and dtype they need."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float64)
    _read_only(X, y)
    return X, y


@pytest.fixture(scope="session")
def swiss_roll():
    """``swiss_roll(n, random_state=0)``: scikit-learn's Swiss roll of ``n`` points, (n, 3) float64, read-only;
    made once per ``(n, random_state)``."""
    from sklearn.datasets import make_swiss_roll

    @functools.cache
    def make(n: int, random_state: int = 0) -> np.ndarray:
        X = make_swiss_roll(n, random_state=random_state)[0]
        _read_only(X)
        return X

    return make


@pytest.fixture(scope="session")
def new_run():
    """``new_run(run_dir, layers={"dense": (30, 4)}, **manifest) -> RunWriter``: a run begun through the store
    with :data:`FINGERPRINT`, per-epoch steps and ``layers`` of those stored shapes; ``manifest`` adds or replaces
    fields (``fingerprint=...``, ``model=...``, ``predictions=...``)."""

    def begin(run_dir, layers: dict | None = None, **manifest) -> RunWriter:
        layers = {"dense": (30, 4)} if layers is None else layers
        writer = RunWriter(run_dir)
        writer.begin({"fingerprint": FINGERPRINT, "step_unit": "epoch",
                      "layers": {name: {"stored_shape": list(shape)} for name, shape in layers.items()}, **manifest})
        return writer

    return begin


@pytest.fixture(scope="session")
def small_logdir(new_run):
    """``small_logdir(root, runs=("a",), steps=3, thumbnails=False, predictions=False) -> root``: a log directory of
    tiny runs, each with one layer "dense" (30 probes in 3 classes, width 4) and Gaussian activations at steps
    0 .. steps - 1 (the same in every run), with 4×4 thumbnails and class predictions if asked; what the
    command-line tests embed and summarise in a second."""

    def write(root, runs=("a",), steps: int = 3, thumbnails: bool = False, predictions: bool = False):
        for name in runs:
            writer = new_run(root / name)
            rng = np.random.default_rng(0)
            writer.write_probe(np.arange(30), np.arange(30) % 3,
                               rng.integers(0, 255, (30, 4, 4), dtype=np.uint8) if thumbnails else None)
            for step in range(steps):
                writer.write_activation("dense", step, rng.normal(size=(30, 4)).astype(np.float32))
                if predictions:
                    writer.write_prediction(step, rng.random((30, 3)).astype(np.float32))
        return root

    return write


@pytest.fixture(scope="session")
def tiny_classifier():
    """``tiny_classifier(n=80, hidden=8, seed=0) -> (model, x, y)``: a compiled Keras classifier of 6 features,
    ``Dense(hidden, relu, name="hidden") -> Dense(2, softmax, name="out")`` whose initial weights come from
    ``seed`` (seeded initialisers: no global seed is set), and ``n`` rows of data whose class is learnable (is the
    sum of the first 3 features the larger?). Keras is imported only when it is called; call it inside a
    ``strategy.scope()`` to build the model under a strategy."""

    def make(n: int = 80, hidden: int = 8, seed: int = 0):
        import keras

        rng = np.random.default_rng(seed)
        x = rng.random((n, 6), dtype=np.float32)
        y = (x[:, :3].sum(axis=1) > x[:, 3:].sum(axis=1)).astype(np.int64)
        glorot = keras.initializers.GlorotUniform
        model = keras.Sequential([
            keras.Input((6,)),
            keras.layers.Dense(hidden, activation="relu", name="hidden", kernel_initializer=glorot(seed=seed)),
            keras.layers.Dense(2, activation="softmax", name="out", kernel_initializer=glorot(seed=seed + 1))])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        return model, x, y

    return make


@pytest.fixture(scope="session")
def cluster_run():
    """``cluster_run(run_dir, layers=("a", "b"), steps=range(4), n=120, width=12, seed=0, dead=(), nan_at=())
    -> RunWriter``: a run of 4 Gaussian clusters drifting apart over the steps (what the pipeline's chains
    follow); ``dead`` layers are all zeros and ``nan_at`` (layer, step) pairs get one NaN."""

    def write(path, layers=("a", "b"), steps=range(4), n=120, width=12, seed=0, dead=(), nan_at=()) -> RunWriter:
        rng = np.random.default_rng(seed)
        labels = np.arange(n) % 4
        writer = RunWriter(path)
        writer.begin({"fingerprint": FINGERPRINT, "layers": {lay: {"stored_shape": [n, width]} for lay in layers}})
        writer.write_probe(np.arange(n), labels)
        centers = rng.normal(size=(4, width)) * 3
        noise = rng.normal(size=(n, width))
        for s in steps:
            for lay in layers:
                X = (centers[labels] * (1 + s / 4) + noise + 0.05 * s * rng.normal(size=(n, width))).astype(np.float32)
                if lay in dead:
                    X[:] = 0
                if (lay, s) in nan_at:
                    X[0, 0] = np.nan
                writer.write_activation(lay, s, X, epoch=s)
        return writer

    return write
