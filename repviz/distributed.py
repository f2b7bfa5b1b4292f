"""Run repviz's tasks on a Dask cluster: :class:`DaskExecutor`, an executor (:mod:`repviz.executors`) passed in
by the caller, as scikit-learn hands ``Parallel`` a backend.

The work is already split into independent units: the pipeline's chains and meta-SNE's vectors and Gram blocks.
Here each becomes one Dask task; workers read the log directory and write results through the store, exactly as
local worker processes do (same cache keys, atomic writes), so a sweep started on a cluster can be resumed locally
and the other way round. Hence the one requirement: the log directory lives on storage that every worker sees at
the same path (NFS, Lustre, a shared volume), which :meth:`DaskExecutor.prepare` checks before any work is sent.

- :func:`connect` turns ``--scheduler ADDR|local[N]`` into a client (and a :class:`LocalCluster` for ``local``).
- Progress comes back to the client as Dask events (``Worker.log_event``).
- On a worker, one repviz task computes at a time, with the worker's ``nthreads`` numba threads: a worker stands
  for ``nthreads`` cores, as a local worker process stands for ``cores // jobs``; running several numba-parallel
  tasks at once in one process would oversubscribe it (and numba's workqueue layer is not thread-safe).
- A worker that dies mid-task: Dask runs the task again elsewhere (the pipeline's task resumes from the last
  snapshot the first attempt stored). A task that fails too often (``KilledWorker``) is reported like the local
  pool's dead worker, through the caller's ``on_lost``. A cluster that keeps losing workers (more than
  ``max_lost_workers`` while the run goes on), or has none left for ``patience`` seconds, ends the run
  with :class:`ClusterFailed`, one line; what was stored stays, and the same command resumes from it.

``dask[distributed]`` is an optional extra (``pip install ".[dask]"`` in the checkout); the CLI imports this module, and
nothing below it does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .executors import LostHandler, TaskFunction
from .store import LogDir, open_logdir
from .version import install_hint
from .workers import WorkerDied, cores

_LOCAL = re.compile(r"local(?:\[(\d+)\])?")
_EXTRA = install_hint("dask")
_ONE_AT_A_TIME = threading.Lock()  # per worker process: see the module docstring
_LOOK_EVERY = 0.5  # seconds between looks at the workers while no task finishes


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra installs it."""


class SchedulerUnreachable(ConnectionError):
    """No Dask scheduler answered at the address given; the message names it and what to check."""


class ClusterFailed(RuntimeError):
    """The cluster kept losing workers, or had none left, in the middle of a run; the message says which."""


def require_distributed():
    """``dask.distributed``, or :class:`MissingExtra` saying which extra installs it."""
    try:
        import distributed
    except ImportError as e:
        raise MissingExtra(f"running on a Dask cluster needs dask.distributed, which is not installed ({e}); "
                          f"install it with: {_EXTRA}") from None
    return distributed


@contextlib.contextmanager
def connect(scheduler: str, *, timeout: str = "20s") -> Iterator[Any]:
    """A Dask client for ``scheduler``, closed (with its cluster) when the block ends; a scheduler address that
    does not answer within ``timeout`` raises :class:`SchedulerUnreachable`.

    ``scheduler`` is an address (``tcp://host:8786``, a scheduler file's address) or ``local[N]``: a
    :class:`LocalCluster` of N single-threaded worker processes on this machine (``local``: one per core).
    """
    distributed = require_distributed()
    match = _LOCAL.fullmatch(scheduler.strip())
    if match is None:
        if not scheduler.strip() or scheduler.startswith("local"):
            raise ValueError(f"--scheduler must be a scheduler address (tcp://host:8786) or local[N] (N worker "
                             f"processes on this machine); got {scheduler!r}")
        address = scheduler.strip()
        try:
            client = distributed.Client(address, timeout=timeout)
        except OSError as e:  # refused, unknown host, or no answer within the timeout
            raise SchedulerUnreachable(f"no Dask scheduler answered at {address} within {timeout} ({e}); check "
                                       f"the address and that the scheduler is running and reachable from "
                                       f"here") from None
        with client:
            yield client
        return
    n = int(match.group(1)) if match.group(1) else cores()
    if n < 1:
        raise ValueError(f"local[N] needs at least one worker; got {scheduler!r}")
    try:  # its log lines (a worker restarted, tasks recomputed) are the cluster's: the run reports what matters
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                           dashboard_address="127.0.0.1:8787", silence_logs=logging.ERROR)
    except (RuntimeError, OSError) as e:  # e.g. "Nanny failed to start": a worker died while starting
        raise ClusterFailed(f"the local Dask cluster of {n} worker(s) did not start ({e}); try again, or with "
                            f"fewer workers") from None
    with cluster, distributed.Client(cluster) as client:
        yield client


def dashboard(client) -> str | None:
    """The link to the cluster's dashboard, or None if it serves none (bokeh not installed)."""
    services = client.scheduler_info().get("services", {})
    return client.dashboard_link if "dashboard" in services else None


# ---------------------------------------------------------------------------------------------------------------
# The shared log directory
# ---------------------------------------------------------------------------------------------------------------

def shared_logdir(logdir) -> LogDir:
    """``logdir`` opened by absolute paths (workers run in other directories, on other machines)."""
    if isinstance(logdir, LogDir):
        path, out = logdir.path, logdir.out
        if path.is_absolute() and (out is None or out.is_absolute()):
            return logdir
    else:
        path, out = logdir, None
    return open_logdir(os.path.abspath(path), None if out is None else os.path.abspath(out))


def _view(path: str, out: str | None) -> list[str] | str:
    """On a worker: the runs it finds in the log directory, or why it cannot read it."""
    try:
        logdir = open_logdir(path, out)
    except (OSError, ValueError, LookupError) as e:
        return f"{type(e).__name__}: {e}"
    return sorted(logdir.runs)


def check_workers_see(client, logdir: LogDir) -> None:
    """Fail before any work is sent if a worker cannot read ``logdir`` as this process does.

    Runs one tiny function on every worker (``Client.run``): each opens the log directory through the store and
    lists its runs; a worker that cannot, or that lists other runs (another copy), raises with its address.
    """
    if not client.scheduler_info().get("workers"):
        raise ValueError("the Dask cluster has no workers; start some (dask worker ADDR) and try again")
    here = sorted(logdir.runs)
    views = client.run(_view, str(logdir.path), None if logdir.out is None else str(logdir.out))
    for worker, view in sorted(views.items()):
        if view != here:
            why = view if isinstance(view, str) else f"it lists runs {view}, this process {here}"
            raise ValueError(f"Dask worker {worker} cannot see the log directory {str(logdir.path)!r} as this "
                             f"process does ({why}); put it on a filesystem every worker mounts at the same path "
                             f"(NFS, Lustre, a shared volume)")


# ---------------------------------------------------------------------------------------------------------------
# The executor
# ---------------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _worker_threads() -> Iterator[int]:
    """Inside a task: hold this worker for one repviz computation at a time, with numba on the worker's
    ``nthreads`` threads (restored afterwards); yields that thread count."""
    import numba
    from distributed import get_worker

    n = max(1, min(get_worker().state.nthreads, numba.config.NUMBA_NUM_THREADS))
    with _ONE_AT_A_TIME:
        old = numba.get_num_threads()
        numba.set_num_threads(n)
        try:
            yield n
        finally:
            numba.set_num_threads(old)


def _on_worker(fn: TaskFunction, task: Any, topic: str) -> Any:
    """One task on a worker: ``fn(task, advance, threads)`` with progress sent to the client on ``topic``."""
    from distributed import get_worker

    worker = get_worker()
    with _worker_threads() as threads:
        return fn(task, lambda n: worker.log_event(topic, int(n)), threads)


class _Watch:
    """Counts the workers lost while a run goes on (the scheduler's "remove-worker" events; a worker retired on
    purpose aside, one killed while it starts included) and how long the cluster has had no worker; raises
    :class:`ClusterFailed` past a bound."""

    def __init__(self, client, max_lost: int, patience: float):
        self.client, self.max_lost, self.patience = client, max_lost, patience
        self.lost: list[str] = []
        self.empty_since: float | None = None

    def removed(self, event: tuple[float, dict]) -> None:
        """A scheduler event on the topic "all" (called on the client's event loop)."""
        msg = event[1]
        if isinstance(msg, dict) and msg.get("action") == "remove-worker" and not msg.get("expected"):
            self.lost.append(str(msg.get("worker")))

    def look(self) -> None:
        lost = list(self.lost)
        if len(lost) > self.max_lost:
            raise ClusterFailed(f"{len(lost)} Dask workers died during this run (killed, e.g. for lack of memory; "
                                f"the last was {lost[-1]}), more than max_lost_workers="
                                f"{self.max_lost}: gave up; what they finished is stored, and the same command "
                                f"resumes from it")
        now = time.monotonic()
        has_workers = bool(self.client.scheduler_info().get("workers"))
        self.empty_since = None if has_workers else (self.empty_since or now)
        if self.empty_since is not None and now - self.empty_since > self.patience:
            raise ClusterFailed(f"the Dask cluster has had no worker for {self.patience:g} s (all died or were "
                                f"stopped): gave up; what they finished is stored, and the same command resumes "
                                f"from it once workers are back")


class DaskExecutor:
    """Run tasks on a Dask cluster, one Dask task each (see the module docstring).

    Parameters
    ----------
    client : dask.distributed.Client
        The cluster's client, e.g. from :func:`connect`.
    max_lost_workers : int or None, default=None
        Workers that may die while a run goes on before it gives up (:class:`ClusterFailed`); None:
        twice the workers at its start, at least 4. Each task is also tried at most ``allowed-failures`` + 1
        times (Dask's setting, default 3), then reported as lost.
    patience : float, default=60
        Seconds the cluster may have no worker at all before the run gives up.

    Examples
    --------
    >>> with connect("local[2]") as client:                                       # doctest: +SKIP
    ...     embed_logdir("logs", ["tsne"], executor=DaskExecutor(client))
    """

    def __init__(self, client, *, max_lost_workers: int | None = None, patience: float = 60.0):
        self.client, self.max_lost_workers, self.patience = client, max_lost_workers, patience

    @property
    def workers(self) -> int:
        """The cluster's workers now."""
        return len(self.client.scheduler_info()["workers"])

    def prepare(self, logdir: LogDir) -> LogDir:
        """``logdir`` by absolute paths, once every worker is checked to see it (:func:`check_workers_see`)."""
        logdir = shared_logdir(logdir)
        check_workers_see(self.client, logdir)
        return logdir

    def map(self, fn: TaskFunction, tasks: Sequence[Any], advance: Callable[[int], None],
            on_lost: LostHandler) -> Iterator[Any]:
        """See :meth:`repviz.executors.Executor.map`; tasks are submitted in order, the first at the highest
        priority."""
        distributed = require_distributed()
        client = self.client
        topic = f"repviz-progress-{uuid.uuid4().hex}"
        lock = threading.Lock()

        def receive(event: tuple[float, int]) -> None:
            with lock:
                advance(int(event[1]))

        client.subscribe_topic(topic, receive)
        futures = [client.submit(_on_worker, fn, task, topic, pure=False, priority=len(tasks) - i,
                                 key=f"repviz-task-{uuid.uuid4().hex}") for i, task in enumerate(tasks)]
        index = {f.key: i for i, f in enumerate(futures)}
        limit = self.max_lost_workers if self.max_lost_workers is not None else max(4, 2 * self.workers)
        watch = _Watch(client, limit, self.patience)
        client.subscribe_topic("all", watch.removed)
        completed = distributed.as_completed(futures)
        try:
            while not completed.is_empty():
                watch.look()
                batch = completed.next_batch(block=False)
                if not batch:  # nothing finished: wait a little
                    time.sleep(_LOOK_EVERY)
                for future in batch:
                    try:
                        yield future.result()
                    except distributed.KilledWorker:
                        yield on_lost(tasks[index[future.key]],
                                      WorkerDied("its Dask workers died in the middle of this task every time it "
                                                 "was tried (e.g. killed for lack of memory); what they finished "
                                                 "is stored", tasks[index[future.key]]))
        finally:
            client.cancel([f for f in futures if not f.done()])
            with contextlib.suppress(Exception):  # the client may be closing under us: that error is the story
                client.unsubscribe_topic(topic)
                client.unsubscribe_topic("all")
