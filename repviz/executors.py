"""Where independent tasks run: the executor interface, and the local executor over :class:`WorkerPool`.

The pipeline's chains (and meta-SNE's vectors and Gram blocks) are independent tasks that read and write the log
directory through the store. An executor is chosen by the caller and passed in, as scikit-learn hands
``Parallel`` a backend: :class:`LocalExecutor` here (this process, or spawned worker processes), or
:class:`repviz.distributed.DaskExecutor` on a cluster. Nothing below this module knows which one runs it.

A task function is called as ``fn(task, advance, threads)``: ``advance(n)`` reports n more units done and
``threads`` is the task's share of the cores (what numba and BLAS were started with in its process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from ._validation import Interval, Rule, check_param
from .store import LogDir
from .workers import THREAD_VARIABLES, WorkerPool, cores

#: fn(task, advance, threads) -> result
TaskFunction = Callable[[Any, Callable[[int], None], int], Any]
#: on_lost(task, error) -> the result that stands for a task whose workers died
LostHandler = Callable[[Any, Exception], Any]

#: jobs=-1: one worker per core
_ALL_CORES = Rule(lambda v: isinstance(v, int) and not isinstance(v, bool) and v == -1, "-1")


class Executor(Protocol):
    """Runs independent tasks somewhere; see the module docstring."""

    @property
    def workers(self) -> int:
        """How many tasks run at once (to cut work into about that many equal parts)."""
        ...

    def prepare(self, logdir: LogDir) -> LogDir:
        """``logdir`` as the workers will open it; raises if they cannot read it as this process does."""
        ...

    def map(self, fn: TaskFunction, tasks: Sequence[Any], advance: Callable[[int], None],
            on_lost: LostHandler) -> Iterator[Any]:
        """Yield ``fn(task, advance, threads)`` for every task as it finishes. A task whose workers died yields
        ``on_lost(task, error)`` instead and the others go on; any other error of a task is raised here. Tasks
        still running when the caller stops (Ctrl-C, an error) are stopped."""
        ...


def check_jobs(jobs: int, owner: str) -> None:
    """Check a ``jobs`` argument: a positive number of worker processes, or -1 for one per core."""
    check_param(jobs, [Interval(int, 1, None, "left"), _ALL_CORES], "jobs", owner)


def _call(fn: TaskFunction, threads: int, task: Any, advance: Callable[[int], None]) -> Any:
    return fn(task, advance, threads)


class LocalExecutor:
    """Tasks on this machine: in this process (``jobs=1``) or in ``jobs`` spawned worker processes.

    Each worker takes whole tasks and gets ``max(1, cores // workers)`` numba/BLAS threads, so the machine is
    never oversubscribed (workers are spawned, not forked, so no thread pool is copied mid-flight; see
    :class:`~repviz.workers.WorkerPool`). Ctrl-C stops the workers at once; what they stored is kept. A worker
    that dies (e.g. killed by the out-of-memory killer) is replaced and its task reported through ``on_lost``.

    Parameters
    ----------
    jobs : int, default=1
        Worker processes; -1 for one per core; 1 runs the tasks in this process, on every core.
    """

    def __init__(self, jobs: int = 1):
        check_jobs(jobs, "LocalExecutor")
        self.jobs = jobs

    @property
    def workers(self) -> int:
        """Worker processes at most (1: this process)."""
        return cores() if self.jobs == -1 else self.jobs

    def prepare(self, logdir: LogDir) -> LogDir:
        """The same log directory: local workers see what this process sees."""
        return logdir

    def map(self, fn: TaskFunction, tasks: Sequence[Any], advance: Callable[[int], None],
            on_lost: LostHandler) -> Iterator[Any]:
        """See :meth:`Executor.map`."""
        available = cores()
        workers = max(1, min(self.workers, len(tasks)))
        threads = max(1, available // workers)
        if workers == 1:
            for task in tasks:
                yield fn(task, advance, threads)
            return
        env = dict.fromkeys(THREAD_VARIABLES, str(threads))
        with WorkerPool(functools.partial(_call, fn, threads), workers, env=env) as pool:
            yield from pool.run(tasks, advance, on_death=lambda death: on_lost(death.task, death))
