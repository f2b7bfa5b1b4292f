"""Run independent tasks in spawned worker processes that can be stopped at once.

:class:`WorkerPool` owns its processes (rather than hiding them inside an executor), so that Ctrl-C or an error
stops every worker immediately, mid-task, through :meth:`WorkerPool.terminate`; whatever a task stored before
that stays stored. Workers are spawned, not forked, so no numba or BLAS thread pool is copied mid-flight, and
they inherit the environment given to the pool (thread counts are read by numba and BLAS when they load).
Tasks are handed out one at a time as workers free up, so the longest tasks, queued first, start first.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from queue import Empty
from typing import Any

# A task function is called as fn(task, advance): advance(n) reports n more units of work done.
TaskFunction = Callable[[Any, Callable[[int], None]], Any]


def _worker_main(fn: TaskFunction, tasks, events) -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent alone decides, and terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while (item := tasks.get()) is not None:
        index, task = item
        try:
            result = fn(task, lambda n, i=index: events.put(("advance", i, n)))
        except BaseException as e:  # sent to the parent, which raises it
            events.put(("error", index, _portable(e)))
        else:
            events.put(("done", index, result))


def _portable(error: BaseException) -> BaseException:
    """``error`` with the worker's traceback as a note, or a RuntimeError saying it if it cannot be pickled."""
    text = "".join(traceback.format_exception(error))
    try:
        pickle.dumps(error)
    except Exception:
        error = RuntimeError(f"{type(error).__name__}: {error}")
    error.add_note(f"in a worker process:\n{text}")
    return error


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class WorkerPool:
    """``processes`` spawned workers that each call ``fn(task, advance)`` on the tasks given to :meth:`run`.

    Parameters
    ----------
    fn : callable
        A module-level function (it is pickled by name), called as ``fn(task, advance)`` in a worker.
    processes : int
        Number of worker processes, started at once.
    env : dict of str, optional
        Environment variables the workers start with (e.g. ``OMP_NUM_THREADS``).

    Use it as a context manager: leaving the block normally lets the workers finish and exit; leaving it by an
    exception (Ctrl-C included) terminates them at once.
    """

    def __init__(self, fn: TaskFunction, processes: int, *, env: dict[str, str] | None = None):
        ctx = multiprocessing.get_context("spawn")
        # Tasks go through a pipe written directly (never more than one per worker waits in it); events come
        # back through a queue, read with a timeout so that a worker's death is noticed.
        self._tasks, self._events = ctx.SimpleQueue(), ctx.Queue()
        self.processes = [ctx.Process(target=_worker_main, args=(fn, self._tasks, self._events), daemon=True)
                          for _ in range(processes)]
        with _environment(env or {}):
            for process in self.processes:
                process.start()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()

    def run(self, tasks: Sequence[Any], advance: Callable[[int], None]) -> Iterator[Any]:
        """Yield the result of every task, in the order they finish; ``advance(n)`` receives the workers'
        progress. A task's exception is raised here; a worker that dies raises ``RuntimeError``."""
        queued = iter(enumerate(tasks))
        running = 0
        for item in queued:  # no more than one task per worker waits in the pipe
            self._tasks.put(item)
            running += 1
            if running == len(self.processes):
                break
        while running:
            kind, index, value = self._next_event()
            if kind == "advance":
                advance(value)
                continue
            running -= 1
            if kind == "error":
                raise value
            for item in queued:
                self._tasks.put(item)
                running += 1
                break
            yield value

    def _next_event(self) -> tuple[str, int, Any]:
        while True:
            with contextlib.suppress(Empty):
                return self._events.get(timeout=0.2)
            dead = [p for p in self.processes if p.exitcode is not None]
            if dead:
                raise RuntimeError(f"a worker process stopped unexpectedly (exit code {dead[0].exitcode}), e.g. "
                                   f"killed for lack of memory; what finished before is stored")

    def close(self) -> None:
        """Let the workers finish their current task and exit."""
        for _ in self.processes:
            self._tasks.put(None)
        for process in self.processes:
            process.join()

    def terminate(self) -> None:
        """Stop every worker now (SIGTERM), mid-task."""
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join()
