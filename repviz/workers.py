"""Run independent tasks in spawned worker processes that can be stopped at once.

:class:`WorkerPool` owns its processes (rather than hiding them inside an executor), so that Ctrl-C or an error
stops every worker immediately, mid-task, through :meth:`WorkerPool.terminate`; whatever a task stored before
that stays stored. Workers are spawned, not forked, so no numba or BLAS thread pool is copied mid-flight, and
they start with the environment given to the pool (thread counts are read by numba and BLAS when they load).

Each worker has two pipes of its own: tasks in, events out. The pool hands a task to a worker as it frees up (the
tasks queued first start first), knows which task each worker holds, and sees a worker's death at once (its
pipe closes) rather than waiting for it.

:func:`background_process` starts the other kind: one plain ``python`` process at the lowest priority for work
beside a training script (live embeddings, the compiler warm-up), which never runs the script again.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import multiprocessing
import os
import signal
import site
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any

# A task function is called as fn(task, advance): advance(n) reports n more units of work done.
TaskFunction = Callable[[Any, Callable[[int], None]], Any]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>

#: Thread counts of a process (read by numba and BLAS when they load, hence set before it starts).
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def background_process(args: Sequence[str], *, threads: int = 1, **popen: Any) -> subprocess.Popen:
    """Start ``python ARGS...`` at the lowest CPU priority (nice 19) on ``threads`` threads, with this repviz
    importable in it (a source checkout is put on PYTHONPATH after the user's own entries). ``popen`` goes to
    :class:`subprocess.Popen` (stdin, stdout, ...)."""
    env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, str(threads))}
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if package_root not in {os.path.abspath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), package_root) if p)
    # No preexec_fn: it makes subprocess run the parent's fork handlers (JAX warns "os.fork() was called ... will
    # likely lead to a deadlock"), where without it the child is spawned by vfork/exec in C. Its priority is set
    # from here as soon as it exists, before its interpreter has started a second thread (Linux's niceness is per
    # thread and inherited by the threads created after).
    process = subprocess.Popen([sys.executable, *args], env=env, **popen)
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, process.pid, 19)
    return process


class Terminated(BaseException):
    """SIGTERM arrived (``kill``, ``timeout``, a batch scheduler): unwinds like ``KeyboardInterrupt``, through
    ``finally`` blocks (temporary files deleted, worker processes stopped) and past the ``except Exception`` that
    keeps one failing item from stopping the others."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


def _terminate_by_raising() -> Callable[[], None]:
    """Raise :class:`Terminated` on SIGTERM from now on; returns the function that restores what was before.

    Python code that C calls back (numba's compiler, through ctypes) cannot raise: the exception is dropped there
    with a traceback, and the process would go on. So a dropped Terminated is raised again, quietly, 50 ms later
    (SIGALRM), by when the callback has returned.
    """
    hook, again = sys.unraisablehook, hasattr(signal, "setitimer")

    def unraisable(info) -> None:
        if again and isinstance(info.exc_value, Terminated):
            signal.setitimer(signal.ITIMER_REAL, 0.05)
        else:
            hook(info)

    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    alarm = signal.signal(signal.SIGALRM, _raise_terminated) if again else None
    sys.unraisablehook = unraisable

    def restore() -> None:
        if again:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook

    return restore


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Raise :class:`Terminated` on SIGTERM while the block runs (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    restore = _terminate_by_raising()
    try:
        yield
    finally:
        restore()


class WorkerDied(RuntimeError):
    """A worker process ended in the middle of a task (killed, e.g. for lack of memory); ``task`` is that task."""

    def __init__(self, message: str, task: Any):
        super().__init__(message)
        self.task = task


def _die_with_parent(parent: int) -> None:
    """End this process when the parent ends, however it ends (SIGKILL by the OOM killer or a scheduler
    included), so no worker goes on writing for a job nobody waits for.

    Linux delivers SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread
    polls the parent id once a second.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl failed")
    except (OSError, AttributeError):
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="repviz-parent-watch").start()
    if os.getppid() != parent:  # the parent died before we asked
        os._exit(1)


def _worker_main(fn: TaskFunction, tasks: Connection, events: Connection, parent: int) -> None:
    _die_with_parent(parent)
    # Ctrl-C reaches every process of the terminal's group: the parent alone decides, and terminates us (SIGTERM,
    # which unwinds the task so that the file it was writing leaves no temporary behind).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _terminate_by_raising()
    try:
        with contextlib.suppress(EOFError):  # the parent is gone: nobody wants the results
            while (task := tasks.recv()) is not None:
                try:
                    result = fn(task, lambda n: events.send(("advance", n)))
                    events.send(("done", result))  # pickles before writing: a failure here sends nothing
                except Terminated:
                    raise
                except BaseException as e:
                    events.send(("error", _portable(e)))
    except Terminated:
        pass
    else:
        return
    # Unwound, and out of the except block, so the frames it held are freed (a context entered halfway when the
    # signal came is closed now); then end as the signal ends a process, so the parent reads "killed by signal 15".
    gc.collect()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _portable(error: BaseException) -> BaseException:
    """``error`` with the worker's traceback as a note, or a RuntimeError saying it if it cannot be pickled."""
    text = "".join(traceback.format_exception(error))
    try:
        ForkingPickler.dumps(error)
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


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    tasks: Connection   # the parent's sending end
    events: Connection  # the parent's receiving end
    task: Any = None    # the task it holds


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
        self._fn, self._env = fn, dict(env or {})
        self._workers: list[_Worker] = [self._start() for _ in range(processes)]

    def _start(self) -> _Worker:
        ctx = multiprocessing.get_context("spawn")
        task_out, task_in = ctx.Pipe(duplex=False)
        event_out, event_in = ctx.Pipe(duplex=False)
        with _environment(self._env):
            process = ctx.Process(target=_worker_main, args=(self._fn, task_out, event_in, os.getpid()),
                                  daemon=True)
            process.start()
        task_out.close()  # the child's ends: once closed here, a worker's death closes its pipe
        event_in.close()
        return _Worker(process, task_in, event_out)

    @property
    def processes(self) -> list[multiprocessing.process.BaseProcess]:
        return [w.process for w in self._workers]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()

    def run(self, tasks: Sequence[Any], advance: Callable[[int], None],
            on_death: Callable[[WorkerDied], Any] | None = None) -> Iterator[Any]:
        """Yield the result of every task, in the order they finish; ``advance(n)`` receives the workers'
        progress. A task's exception is raised here (with the worker's traceback as a note).

        A worker that dies mid-task (SIGKILL, e.g. by the OOM killer) raises :class:`WorkerDied`, or, with
        ``on_death``, is replaced by a new worker while ``on_death(error)`` gives the result yielded for its
        task, and the other tasks go on.
        """
        queued = iter(tasks)
        busy: dict[Connection, _Worker] = {}

        def give(worker: _Worker) -> None:
            for task in queued:
                worker.task = task
                worker.tasks.send(task)
                busy[worker.events] = worker
                return

        for worker in self._workers:
            give(worker)
        while busy:
            for conn in wait(list(busy)):
                worker = busy[conn]
                try:
                    kind, value = conn.recv()
                except EOFError:
                    del busy[conn]
                    death = self._bury(worker)
                    if on_death is None:
                        raise death from None
                    replacement = self._start()
                    self._workers[self._workers.index(worker)] = replacement
                    give(replacement)
                    yield on_death(death)
                    continue
                if kind == "advance":
                    advance(value)
                    continue
                del busy[conn]
                worker.task = None
                if kind == "error":
                    raise value
                give(worker)
                yield value

    @staticmethod
    def _bury(worker: _Worker) -> WorkerDied:
        worker.process.join()
        worker.tasks.close()
        worker.events.close()
        code = worker.process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return WorkerDied(f"a worker process stopped in the middle of a task ({how}, e.g. by the out-of-memory "
                          f"killer); what it finished before is stored", worker.task)

    def close(self) -> None:
        """Let the workers finish their current task and exit."""
        for worker in self._workers:
            with contextlib.suppress(OSError):  # a worker that already died
                worker.tasks.send(None)
        self._join()

    def terminate(self, grace: float = 5.0) -> None:
        """Stop every worker now, mid-task: SIGTERM, which unwinds its task, then SIGKILL for one still running
        ``grace`` seconds later (inside a long compiled kernel, which sees no signal until it returns)."""
        for worker in self._workers:
            worker.process.terminate()
        deadline = time.monotonic() + grace
        for worker in self._workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
        self._join()

    def _join(self) -> None:
        for worker in self._workers:
            worker.process.join()
            if not worker.tasks.closed:
                worker.tasks.close()
                worker.events.close()
