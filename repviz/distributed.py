"""Run the pipeline's chains (and meta-SNE's blocks) as tasks on a Dask cluster.

The work is already split into independent units: the pipeline's chains (:class:`repviz.pipeline.ChainTask`,
computed by :func:`repviz.pipeline.run_chain`) and meta-SNE's vectors and Gram blocks. Here each becomes one
Dask task; workers read the log directory and write results through the store, exactly as local worker
processes do (same cache keys, atomic writes), so a sweep started on a cluster can be resumed locally and the
other way round. Hence the one requirement: the log directory lives on storage that every worker sees at the
same path (NFS, Lustre, a shared volume), which :func:`check_workers_see` checks before any work is sent.

- :func:`connect` turns ``--scheduler ADDR|local[N]`` into a client (and a :class:`LocalCluster` for ``local``).
- Progress comes back to the client as Dask events (``Worker.log_event``) and is reported through
  :mod:`repviz.progress`, like the local pool's.
- On a worker, one repviz task computes at a time, with the worker's ``nthreads`` numba threads: a worker stands
  for ``nthreads`` cores, as a local worker process stands for ``cores // jobs``; running several numba-parallel
  tasks at once in one process would oversubscribe it (and numba's workqueue layer is not thread-safe).
- A worker that dies mid-chain: Dask runs the task again elsewhere, and it resumes from the last snapshot the
  first attempt stored (:func:`repviz.pipeline.resume`). A task that fails too often (``KilledWorker``) is
  reported like the local pool's dead worker: what it stored counts, the rest of its chain is failed.

``dask[distributed]`` is an optional extra (``pip install "repviz[dask]"``); nothing else imports this module.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from .progress import ProgressCallback, report
from .store import LogDir, open_logdir

_LOCAL = re.compile(r"local(?:\[(\d+)\])?")
_EXTRA = 'pip install "repviz[dask]"'
_ONE_AT_A_TIME = threading.Lock()  # per worker process: see the module docstring


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra installs it."""


class SchedulerUnreachable(ConnectionError):
    """No Dask scheduler answered at the address given; the message names it and what to check."""


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
    n = int(match.group(1)) if match.group(1) else _cores()
    if n < 1:
        raise ValueError(f"local[N] needs at least one worker; got {scheduler!r}")
    with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:8787") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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
# On a worker
# ---------------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def worker_threads() -> Iterator[int]:
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


def progress_sender(topic: str) -> Callable[[int], None]:
    """Inside a task: ``advance(n)`` that sends ``n`` more done units to the client listening on ``topic``."""
    from distributed import get_worker

    worker = get_worker()
    return lambda n: worker.log_event(topic, int(n))


class ProgressRelay:
    """On the client: count the units that tasks report on a fresh topic and forward them to ``progress`` as
    ``(stage, done, total)`` events. Use as a context manager around the computation; :attr:`topic` goes to the
    tasks."""

    def __init__(self, client, progress: ProgressCallback | None, stage: str, total: int):
        self.client, self.progress, self.stage, self.total = client, progress, stage, total
        self.topic = f"repviz-{stage}-{uuid.uuid4().hex}"
        self._done = 0
        self._lock = threading.Lock()

    def _receive(self, event: tuple[float, int]) -> None:
        with self._lock:
            self._done = min(self.total, self._done + int(event[1]))
            report(self.progress, self.stage, self._done, self.total)

    def __enter__(self) -> ProgressRelay:
        report(self.progress, self.stage, 0, self.total)
        self.client.subscribe_topic(self.topic, self._receive)
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is not None:  # e.g. the client closed under us: that error, not this one, is the story
            with contextlib.suppress(Exception):
                self.client.unsubscribe_topic(self.topic)
            return
        self.client.unsubscribe_topic(self.topic)
        with self._lock:
            self._done = self.total
            report(self.progress, self.stage, self.total, self.total)


def in_completion_order(client, futures: list, on_lost: Callable[[Any], Any]) -> Iterator[Any]:
    """The results of ``futures`` as they finish; a task Dask gave up on after its workers kept dying
    (``KilledWorker``) yields ``on_lost(its argument index)`` instead. Other task errors are raised. Pending
    tasks are cancelled if the caller stops (Ctrl-C, an error)."""
    distributed = require_distributed()
    index = {f.key: i for i, f in enumerate(futures)}
    try:
        for future in distributed.as_completed(futures):
            try:
                yield future.result()
            except distributed.KilledWorker:
                yield on_lost(index[future.key])
    finally:
        client.cancel([f for f in futures if not f.done()])


# ---------------------------------------------------------------------------------------------------------------
# The pipeline's chains
# ---------------------------------------------------------------------------------------------------------------

def _chain_task(task, topic: str) -> list[dict]:
    """One chain on a worker: skip what is stored (a retry resumes), compute the rest."""
    from .pipeline import resume, run_chain

    with worker_threads() as threads:
        rest, done = resume(task)
        if rest is None:
            return done
        return done + run_chain(replace(rest, threads=threads), progress_sender(topic))


def run_chains(client, plan, progress: ProgressCallback | None = None) -> list[dict]:
    """Compute every chain of ``plan`` (a :class:`repviz.pipeline.Plan`) as one task on ``client``'s cluster;
    the results of :func:`repviz.pipeline.run_chain`, flattened. The method notes must be written first."""
    from .pipeline import _lost_chain
    from .workers import WorkerDied

    results: list[dict] = []
    with ProgressRelay(client, progress, "embed", plan.total) as relay:
        # the plan lists the longest chains first: keep that order on the cluster too
        futures = [client.submit(_chain_task, task, relay.topic, pure=False, priority=len(plan.tasks) - i,
                                 key=f"repviz-chain-{uuid.uuid4().hex}")
                   for i, task in enumerate(plan.tasks)]

        def lost(i: int) -> list[dict]:
            return _lost_chain(WorkerDied("its Dask workers died in the middle of this chain every time it was "
                                          "tried (e.g. killed for lack of memory); what they finished is stored",
                                          plan.tasks[i]))

        for chain_results in in_completion_order(client, futures, lost):
            results += chain_results
    return results
