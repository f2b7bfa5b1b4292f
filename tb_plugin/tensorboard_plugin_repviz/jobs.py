"""Embeddings computed on demand, in background worker processes, never in a request thread.

A job embeds one layer of one run with one method at every snapshot, through the same pipeline as
``repviz embed`` (aligned chain, results cached in the store), so a job asked for twice computes once and the
next index lists the new key. Bounds: ``workers`` processes (spawned, not forked: TensorBoard's threads and any
BLAS pool are not copied), at most ``max_pending`` jobs queued or running (``TooManyJobs`` beyond), at most
``keep`` finished jobs remembered. Jobs are deduplicated per (run, layer, method) while queued or running.

Progress travels from the worker through a :class:`repviz.progress.ProgressState` whose sink puts snapshots on a
multiprocessing queue; a daemon thread in the server drains it into the job table. Spawned workers import the
server's main module again, so a script that starts the plugin needs the usual ``if __name__ == "__main__":``
guard (TensorBoard's own entry points have it).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import threading
import time
from collections import OrderedDict
from queue import Empty
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

_PROGRESS_KEYS = ("stage", "done", "total", "fraction", "message", "eta")


class TooManyJobs(RuntimeError):
    """The job queue is full (HTTP 429)."""


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


# --------------------------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------------------------

_QUEUE = None


def _init_worker(queue) -> None:
    global _QUEUE
    _QUEUE = queue


def _run_job(job_id: str, logdir: str, out: str | None, run: str, layer: str, method: str) -> dict:
    """Embed one (run, layer) with ``method`` at every snapshot; returns the key and the failures."""
    from repviz.pipeline import embed_logdir
    from repviz.progress import ProgressState
    from repviz.store import open_logdir

    def sink(snapshot: dict) -> None:
        _QUEUE.put((job_id, snapshot))

    _QUEUE.put((job_id, None))  # started
    state = ProgressState(sink, min_interval=0.25)
    result = embed_logdir(open_logdir(logdir, out), methods=[method], runs=[run], layers=[layer], progress=False,
                          on_progress=state)
    # the last event also travels with the result: queued events may arrive after the job is marked finished
    return {"key": result.keys.get(method), "stored": result.computed + result.cached,
            "failures": result.failure_lines(), "progress": state.snapshot()}


# --------------------------------------------------------------------------------------------------------------
# Server side
# --------------------------------------------------------------------------------------------------------------

class JobManager:
    """Queue, run and report on-demand embedding jobs for one log directory.

    Parameters
    ----------
    logdir : str
        The log directory the workers read and write.
    out : str, optional
        Where the workers write instead (``--repviz_out``), reading the log directory's own results too.
    workers : int, default=1
        Worker processes (started with the first job).
    max_pending : int, default=8
        Jobs queued or running at once; one more raises :class:`TooManyJobs`.
    keep : int, default=50
        Finished jobs kept for the status route.
    """

    def __init__(self, logdir: str, *, out: str | None = None, workers: int = 1, max_pending: int = 8,
                 keep: int = 50):
        self.logdir, self.out, self.workers, self.max_pending, self.keep = logdir, out, workers, max_pending, keep
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, dict] = OrderedDict()
        self._ids = itertools.count(1)
        self._pool: ProcessPoolExecutor | None = None
        self._queue = None
        self._drainer: threading.Thread | None = None
        self._closed = False

    # public -------------------------------------------------------------------------------------------------
    def submit(self, run: str, layer: str, method: str) -> tuple[dict, bool]:
        """Start (or join) the job for (run, layer, method); returns its status and whether it is new."""
        with self._lock:
            for job in self._jobs.values():
                if (job["run"], job["layer"], job["method"]) == (run, layer, method) and \
                        job["state"] in ("queued", "running"):
                    return self._public(job), False
            pending = sum(job["state"] in ("queued", "running") for job in self._jobs.values())
            if pending >= self.max_pending:
                raise TooManyJobs(f"{pending} jobs are queued or running (at most {self.max_pending}); "
                                  f"wait for one to finish")
            job_id = f"{int(time.time())}-{next(self._ids)}"
            job = {"id": job_id, "run": run, "layer": layer, "method": method, "state": "queued",
                   "progress": None, "error": None, "key": None, "submitted": time.time()}
            self._jobs[job_id] = job
            pool = self._start()
            try:
                future = pool.submit(_run_job, job_id, self.logdir, self.out, run, layer, method)
            except Exception as e:  # a broken pool (a worker was killed): report it and start afresh next time
                job.update(state="failed", error=_one_line(e))
                self._pool = None
                return self._public(job), True
            self._forget_old()
        future.add_done_callback(lambda f, job_id=job_id: self._finished(job_id, f))
        return self._public(job), True

    def jobs(self) -> list[dict]:
        """Every remembered job, newest first."""
        with self._lock:
            return [self._public(job) for job in reversed(self._jobs.values())]

    def close(self) -> None:
        """Stop the workers now (a running job's stored snapshots are kept; the rest is not computed)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()  # the executor has no public way to stop a running task
            pool.shutdown(wait=False, cancel_futures=True)

    # internals ----------------------------------------------------------------------------------------------
    def _start(self) -> ProcessPoolExecutor:
        if self._closed:
            raise RuntimeError("the job manager is closed")
        if self._pool is None:
            import multiprocessing  # here: TensorBoard pays for process machinery only once a job is asked for
            from concurrent.futures import ProcessPoolExecutor

            ctx = multiprocessing.get_context("spawn")
            if self._queue is None:
                self._queue = ctx.Queue()
                self._drainer = threading.Thread(target=self._drain, name="repviz-jobs", daemon=True)
                self._drainer.start()
                atexit.register(self.close)
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                             initializer=_init_worker, initargs=(self._queue,))
        return self._pool

    def _drain(self) -> None:
        while not self._closed:
            with contextlib.suppress(Empty, EOFError, OSError):
                job_id, snapshot = self._queue.get(timeout=0.5)
                with self._lock:
                    job = self._jobs.get(job_id)
                    if job is None or job["state"] not in ("queued", "running"):
                        continue
                    job["state"] = "running"
                    if snapshot is not None:
                        job["progress"] = {k: snapshot.get(k) for k in _PROGRESS_KEYS}

    def _finished(self, job_id: str, future: Future) -> None:
        try:
            result, error = future.result(), None
        except BaseException as e:  # the job raised, or its worker died
            result, error = None, _one_line(e)
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return
            if error is None and result["stored"] == 0 and result["failures"]:
                error = result["failures"][0]
            if error is not None:
                job.update(state="failed", error=error)
                if "BrokenProcessPool" in error:
                    self._pool = None
            else:
                job["progress"] = {k: result["progress"].get(k) for k in _PROGRESS_KEYS}
                job.update(state="done", key=result["key"],
                           error=(f"{len(result['failures'])} snapshot group(s) skipped: {result['failures'][0]}"
                                  if result["failures"] else None))
            job["finished"] = time.time()

    def _forget_old(self) -> None:
        finished = [k for k, job in self._jobs.items() if job["state"] in ("done", "failed")]
        for k in finished[:max(0, len(finished) - self.keep)]:
            del self._jobs[k]

    @staticmethod
    def _public(job: dict) -> dict:
        return {k: job.get(k) for k in ("id", "run", "layer", "method", "state", "progress", "error", "key")}
