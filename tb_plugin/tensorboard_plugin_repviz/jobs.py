"""Embeddings and meta-SNE maps computed on demand, in background worker processes, never in a request thread.

An embedding job (kind ``"embed"``) embeds one layer of one run with one method at every snapshot, through the
same pipeline as ``repviz embed`` (aligned chain, results cached in the store), so a job asked for twice computes
once and the next index lists the new key. A meta job (kind ``"meta"``) computes and saves one meta-SNE map of
every run, as ``repviz meta --include-input`` does. A similarity job (kind ``"similarity"``) computes the heatmaps
of the Similarity view into the similarity cache: the layers of one or two runs at each snapshot asked for, or one
layer's snapshots against each other. The work of each kind is :data:`repviz.service.JOBS`; every job runs through
one skeleton here (:func:`_run_job`). Bounds: ``workers`` processes (spawned, not forked:
TensorBoard's threads and any BLAS pool are not copied), at most ``max_pending`` jobs queued or running
(``TooManyJobs`` beyond), at most ``keep`` finished jobs remembered. Jobs are deduplicated per (run, layer,
method), or per meta-SNE or similarity parameters, while queued or running.

Short computations that a request waits for (k-NN graphs, :meth:`JobManager.calls`) run in worker processes of
their own (``quick_workers``, each on one numba thread, so two graphs are computed side by side without
oversubscribing), so they queue neither behind long embedding jobs nor hold TensorBoard's process (numba kernels
keep the GIL).

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
from collections.abc import Callable
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from queue import Empty

from repviz import service

_PROGRESS_KEYS = ("stage", "done", "total", "fraction", "message", "eta")


class TooManyJobs(RuntimeError):
    """The job queue is full (HTTP 429)."""


class StillComputing(RuntimeError):
    """A computation a request waited for did not finish in time; it goes on, and a retry gets it (HTTP 503)."""


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


def _report(job_id: str, snapshot: dict | None) -> None:
    """Send a job's progress (None: it started) to the server; nothing in an executor the manager did not start."""
    if _QUEUE is not None:
        _QUEUE.put((job_id, snapshot))


def _init_quick_worker() -> None:
    """One numba thread per quick worker: they run side by side, and numba is loaded before the first call."""
    import numba

    numba.set_num_threads(1)


def _run_job(job_id: str, logdir: str, out: str | None, kind: str, *args) -> dict:
    """The one skeleton of every job (worker side): report its start, run ``repviz.service.JOBS[kind]`` with its
    progress sent to the server, and return its key, count stored and failures with the last progress event
    (queued events may arrive after the job is marked finished)."""
    _report(job_id, None)  # started
    return service.run_job(kind, logdir, out, lambda snapshot: _report(job_id, snapshot), *args)


# --------------------------------------------------------------------------------------------------------------
# Server side
# --------------------------------------------------------------------------------------------------------------

class JobManager:
    """Queue, run and report on-demand embedding and meta-SNE jobs for one log directory.

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
    quick_workers : int, default=2
        Worker processes for the short computations of :meth:`calls` (started with the first), one numba thread
        each.
    pool, quick_pool : concurrent.futures.Executor, optional
        Executors for the jobs and for the short computations instead of the worker processes started on first
        use (e.g. one that never runs what it is given, to test the bounds of the queue). A job in such a
        ``pool`` reports its progress only when it has finished.
    """

    def __init__(self, logdir: str, *, out: str | None = None, workers: int = 1, max_pending: int = 8,
                 keep: int = 50, quick_workers: int = 2, pool: Executor | None = None,
                 quick_pool: Executor | None = None):
        self.logdir, self.out, self.workers, self.max_pending, self.keep = logdir, out, workers, max_pending, keep
        self.quick_workers = quick_workers
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, dict] = OrderedDict()
        self._ids = itertools.count(1)
        self._pool: Executor | None = pool
        self._quick: Executor | None = quick_pool
        self._calls: dict[tuple, Future] = {}
        self._queue = None
        self._drainer: threading.Thread | None = None
        self._closed = False

    # public -------------------------------------------------------------------------------------------------
    def submit(self, run: str, layer: str, method: str) -> tuple[dict, bool]:
        """Start (or join) the embedding job for (run, layer, method); returns its status and whether it is new."""
        return self._submit({"kind": "embed", "run": run, "layer": layer, "method": method, "params": None},
                            run, layer, method)

    def submit_meta(self, transform: str, metric: str, embedding: str) -> tuple[dict, bool]:
        """Start (or join) the meta-SNE job with these parameters; returns its status and whether it is new.
        When done, its ``key`` is the name of the saved result."""
        params = {"transform": transform, "metric": metric, "embedding": embedding}
        return self._submit({"kind": "meta", "run": None, "layer": None, "method": embedding, "params": params},
                            transform, metric, embedding)

    def submit_similarity(self, chosen: dict, steps: list[int] | None) -> tuple[dict, bool]:
        """Start (or join) the job computing the similarity heatmaps ``chosen`` names (a JSON-able selection with
        ``runs``, ``layer``, ``measure``, ...) at ``steps`` (None: one layer over training); returns its status and
        whether it is new."""
        return self._submit({"kind": "similarity", "run": chosen["runs"][0], "layer": chosen.get("layer"),
                             "method": chosen["measure"], "params": chosen}, chosen, steps)

    def calls(self, calls: list[tuple[tuple, Callable, tuple]], timeout: float = 120.0) -> list:
        """The results of ``fn(*args)`` for each ``(key, fn, args)`` of ``calls``, run side by side in the
        worker processes for short computations and waited for up to ``timeout`` seconds in all
        (:class:`StillComputing` beyond; the computations go on and a retry joins them). Calls with the same
        ``key`` share one computation while it runs; at most ``max_pending`` different ones wait at once."""
        futures = [self._call_future(key, fn, args) for key, fn, args in calls]
        deadline = time.monotonic() + timeout
        try:
            return [future.result(timeout=max(0.0, deadline - time.monotonic())) for future in futures]
        except FutureTimeout:
            raise StillComputing(f"still computing after {timeout:.0f} s; retry later") from None

    def _call_future(self, key: tuple, fn: Callable, args: tuple) -> Future:
        with self._lock:
            future, new = self._calls.get(key), False
            if future is None:
                if len(self._calls) >= self.max_pending:
                    raise TooManyJobs(f"{len(self._calls)} computations are waiting (at most {self.max_pending}); "
                                      f"retry in a moment")
                future, new = self._start_quick().submit(fn, *args), True
                self._calls[key] = future
        if new:  # outside the lock: a future already done runs the callback at once, in this thread
            future.add_done_callback(lambda f, key=key: self._call_done(key, f))
        return future

    def _submit(self, fields: dict, *args) -> tuple[dict, bool]:
        """Start (or join) the job of kind ``fields["kind"]`` (:data:`repviz.service.JOBS`) with ``args``."""
        identity = tuple(fields.get(k) for k in ("kind", "run", "layer", "method")) + \
            tuple(sorted((fields["params"] or {}).items()))
        with self._lock:
            for job in self._jobs.values():
                if job["identity"] == identity and job["state"] in ("queued", "running"):
                    return self._public(job), False
            pending = sum(job["state"] in ("queued", "running") for job in self._jobs.values())
            if pending >= self.max_pending:
                raise TooManyJobs(f"{pending} jobs are queued or running (at most {self.max_pending}); "
                                  f"wait for one to finish")
            job_id = f"{int(time.time())}-{next(self._ids)}"
            job = {"id": job_id, **fields, "identity": identity, "state": "queued", "progress": None,
                   "error": None, "key": None, "submitted": time.time()}
            self._jobs[job_id] = job
            pool = self._start()
            try:
                future = pool.submit(_run_job, job_id, self.logdir, self.out, fields["kind"], *args)
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
            pools = [self._pool, self._quick]
            self._pool = self._quick = None
        for pool in pools:
            if pool is not None:
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.terminate()  # the executor has no public way to stop a running task
                pool.shutdown(wait=False, cancel_futures=True)

    # internals ----------------------------------------------------------------------------------------------
    def _start(self) -> Executor:
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

    def _start_quick(self) -> Executor:
        if self._closed:
            raise RuntimeError("the job manager is closed")
        if self._quick is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._quick = ProcessPoolExecutor(max_workers=self.quick_workers,
                                              mp_context=multiprocessing.get_context("spawn"),
                                              initializer=_init_quick_worker)
            atexit.register(self.close)
        return self._quick

    def _call_done(self, key: tuple, future: Future) -> None:
        with self._lock:
            if self._calls.get(key) is future:
                del self._calls[key]
            if not future.cancelled() and type(future.exception()).__name__ == "BrokenProcessPool":
                # a worker was killed: start afresh
                self._quick = None

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
        return {k: job.get(k) for k in ("id", "kind", "run", "layer", "method", "params", "state", "progress",
                                        "error", "key")}
