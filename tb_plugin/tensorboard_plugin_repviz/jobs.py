"""Embeddings and meta-SNE maps computed on demand, in background worker processes, never in a request thread.

An embedding job (kind ``"embed"``) embeds one layer of one run with one method at every snapshot, through the
same pipeline as ``repviz embed`` (aligned chain, results cached in the store), so a job asked for twice computes
once and the next index lists the new key. A meta job (kind ``"meta"``) computes and saves one meta-SNE map of
every run, as ``repviz meta --include-input`` does. A similarity job (kind ``"similarity"``) computes the heatmaps
of the Similarity view into the similarity cache: the layers of one or two runs at each snapshot asked for, or one
layer's snapshots against each other. The work of each kind is :data:`repviz.service.JOBS`; every job runs through
one skeleton here (:func:`_run_job`). Jobs are deduplicated per (run, layer, method), or per meta-SNE or similarity
parameters, while queued or running.

The queue is fair between clients (a client is one page load of the tab, named by its ``X-Repviz-Client`` header,
or the remote address): each client's jobs wait in a line of their own, and a free worker takes the next job of
the next client in turn (round-robin), so one tab's many jobs never hold back another tab's. Bounds: ``workers``
jobs run at once, a client has at most ``per_client`` jobs queued or running and all clients together at most
``max_pending`` (:class:`TooManyJobs` beyond, naming the bound that was hit), at most ``keep`` finished jobs are
remembered. A job can be cancelled (:meth:`JobManager.cancel`) and is stopped once it has run ``time_limit``
seconds.

Each job runs in a spawned process of its own (not forked: TensorBoard's threads and any BLAS pool are not copied),
so stopping one ends that process alone; the store writes every file atomically (temp file + rename), so a stopped
job leaves its finished snapshots and no half-written file. The process sends its progress (a
:class:`repviz.progress.ProgressState` snapshot) and its answer through a pipe of its own, which a thread of the
server reads. Spawned processes import the server's main module again, so a script that starts the plugin needs
the usual ``if __name__ == "__main__":`` guard (TensorBoard's own entry points have it).

Short computations that a request waits for (k-NN graphs, :meth:`JobManager.calls`) run in worker processes of
their own (``quick_workers``, each on one numba thread, so two graphs are computed side by side without
oversubscribing), so they queue neither behind long embedding jobs nor hold TensorBoard's process (numba kernels
keep the GIL).
"""

from __future__ import annotations

import atexit
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout

from repviz import service

_PROGRESS_KEYS = ("stage", "done", "total", "fraction", "message", "eta")
_ACTIVE = ("queued", "running")
#: Seconds a job may run before it is stopped, unless the plugin is told otherwise (``--repviz_job_limit``).
DEFAULT_TIME_LIMIT = 1800.0
_KILL_AFTER = 5.0  # seconds a stopped job's process has to end on SIGTERM before it is killed


class TooManyJobs(RuntimeError):
    """The job queue is full for this client or for all (HTTP 429)."""


class StillComputing(RuntimeError):
    """A computation a request waited for did not finish in time; it goes on, and a retry gets it (HTTP 503)."""


class JobFailed(RuntimeError):
    """A job's process answered with an error, or ended without answering; the message is its one line."""


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


# --------------------------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------------------------

_PIPE = None  # the job process's end of its pipe to the server
_PIPE_LOCK = threading.Lock()


def _report(job_id: str, snapshot: dict | None) -> None:
    """Send a job's progress to the server; nothing in a pool the manager did not start."""
    if _PIPE is not None:
        with _PIPE_LOCK:
            _PIPE.send(("progress", job_id, snapshot))


def _job_process(pipe, fn: Callable, args: tuple) -> None:
    """The body of a job's process: ``fn(*args)``, answered through ``pipe`` as (True, result) or (False, the
    error's one line)."""
    global _PIPE
    _PIPE = pipe
    try:
        answer = (True, fn(*args))
    except BaseException as e:  # every failure becomes the job's one-line error
        answer = (False, _one_line(e))
    with _PIPE_LOCK:
        pipe.send(("answer", *answer))
    pipe.close()


def _init_quick_worker() -> None:
    """One numba thread per quick worker: they run side by side, and numba is loaded before the first call."""
    import numba

    numba.set_num_threads(1)


def _run_job(job_id: str, logdir: str, out: str | None, kind: str, *args) -> dict:
    """The one skeleton of every job (worker side): run ``repviz.service.JOBS[kind]`` with its progress sent to
    the server, and return its key, count stored and failures with the last progress event."""
    return service.run_job(kind, logdir, out, lambda snapshot: _report(job_id, snapshot), *args)


# --------------------------------------------------------------------------------------------------------------
# Server side
# --------------------------------------------------------------------------------------------------------------

class _ProcessFuture(Future):
    """The future of a job running in a process of its own; :meth:`stop` ends that process."""

    def __init__(self, process):
        super().__init__()
        self.process = process

    def stop(self) -> None:
        """SIGTERM now, SIGKILL if the process has not ended :data:`_KILL_AFTER` seconds later."""
        self.process.terminate()
        timer = threading.Timer(_KILL_AFTER, lambda: self.process.is_alive() and self.process.kill())
        timer.daemon = True
        timer.start()


class _JobProcesses(Executor):
    """Run each submitted call in a spawned process of its own, its progress handed to ``on_progress(job_id,
    snapshot)`` as it arrives."""

    def __init__(self, on_progress: Callable[[str, dict | None], None]):
        import multiprocessing  # here: TensorBoard pays for process machinery only once a job is asked for

        self._ctx = multiprocessing.get_context("spawn")
        self._on_progress = on_progress
        self._live: set[_ProcessFuture] = set()

    def submit(self, fn: Callable, /, *args) -> _ProcessFuture:
        receive, send = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(target=_job_process, args=(send, fn, args), name="repviz-job")
        process.start()
        send.close()  # this end lives in the child now: its death closes the pipe
        future = _ProcessFuture(process)
        future.set_running_or_notify_cancel()
        self._live.add(future)
        threading.Thread(target=self._follow, args=(future, receive), name="repviz-job-pipe", daemon=True).start()
        return future

    def _follow(self, future: _ProcessFuture, receive) -> None:
        answer = None
        with receive:
            while answer is None:
                try:
                    message = receive.recv()
                except (EOFError, OSError):  # the process ended without answering (stopped, killed, crashed)
                    break
                if message[0] == "progress":
                    self._on_progress(*message[1:])
                else:
                    answer = message[1:]
        future.process.join(_KILL_AFTER * 2)
        if future.process.is_alive():  # answered, or closed its pipe, but does not end
            future.process.kill()
            future.process.join()
        self._live.discard(future)
        if answer is None:
            code = future.process.exitcode
            answer = (False, f"the job's process ended without an answer "
                             f"({f'signal {-code}' if code is not None and code < 0 else f'exit code {code}'})")
        ok, value = answer
        if ok:
            future.set_result(value)
        else:
            future.set_exception(JobFailed(value))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for future in list(self._live):
            future.process.terminate()
        if wait:
            for future in list(self._live):
                future.process.join()


class JobManager:
    """Queue, run and report on-demand embedding, meta-SNE and similarity jobs for one log directory.

    Parameters
    ----------
    logdir : str
        The log directory the workers read and write.
    out : str, optional
        Where the workers write instead (``--repviz_out``), reading the log directory's own results too.
    workers : int, default=1
        Jobs running at once, each in a process of its own.
    max_pending : int, default=16
        Jobs queued or running at once, all clients together; one more raises :class:`TooManyJobs`.
    per_client : int, default=4
        Jobs queued or running at once for one client; one more raises :class:`TooManyJobs` for that client only.
    time_limit : float, default=DEFAULT_TIME_LIMIT
        Seconds a job may run; it is then stopped and reported as failed, saying so. ``None``: no limit.
    keep : int, default=50
        Finished jobs kept for the status route.
    quick_workers : int, default=2
        Worker processes for the short computations of :meth:`calls` (started with the first), one numba thread
        each.
    max_calls : int, default=8
        Different short computations waiting at once; one more raises :class:`TooManyJobs`.
    pool, quick_pool : concurrent.futures.Executor, optional
        Executors for the jobs and for the short computations instead of the processes started on first use (e.g.
        one that never runs what it is given, to test the bounds of the queue). A job in such a ``pool`` reports
        its progress only when it has finished, and is stopped only if its future can be cancelled or has a
        ``stop()`` method.
    """

    def __init__(self, logdir: str, *, out: str | None = None, workers: int = 1, max_pending: int = 16,
                 per_client: int = 4, time_limit: float | None = DEFAULT_TIME_LIMIT, keep: int = 50,
                 quick_workers: int = 2, max_calls: int = 8, pool: Executor | None = None,
                 quick_pool: Executor | None = None):
        self.logdir, self.out, self.workers, self.max_pending, self.keep = logdir, out, workers, max_pending, keep
        self.per_client, self.time_limit = per_client, time_limit
        self.quick_workers, self.max_calls = quick_workers, max_calls
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, dict] = OrderedDict()
        self._ids = itertools.count(1)
        self._lines: dict[str, deque[str]] = {}  # client -> ids of its jobs waiting, first in first out
        self._served: dict[str, int] = {}  # client -> when it last had a job started (a serial number)
        self._busy: set[str] = set()  # jobs handed to the pool whose future has not finished
        self._pool: Executor | None = pool
        self._quick: Executor | None = quick_pool
        self._calls: dict[tuple, Future] = {}
        self._closed = False

    # public -------------------------------------------------------------------------------------------------
    def submit(self, run: str, layer: str, method: str, client: str = "") -> tuple[dict, bool]:
        """Start (or join) the embedding job for (run, layer, method); returns its status and whether it is new."""
        return self._submit({"kind": "embed", "run": run, "layer": layer, "method": method, "params": None},
                            client, run, layer, method)

    def submit_meta(self, transform: str, metric: str, embedding: str, client: str = "") -> tuple[dict, bool]:
        """Start (or join) the meta-SNE job with these parameters; returns its status and whether it is new.
        When done, its ``key`` is the name of the saved result."""
        params = {"transform": transform, "metric": metric, "embedding": embedding}
        return self._submit({"kind": "meta", "run": None, "layer": None, "method": embedding, "params": params},
                            client, transform, metric, embedding)

    def submit_similarity(self, chosen: dict, steps: list[int] | None, client: str = "") -> tuple[dict, bool]:
        """Start (or join) the job computing the similarity heatmaps ``chosen`` names (a JSON-able selection with
        ``runs``, ``layer``, ``measure``, ...) at ``steps`` (None: one layer over training); returns its status and
        whether it is new."""
        return self._submit({"kind": "similarity", "run": chosen["runs"][0], "layer": chosen.get("layer"),
                             "method": chosen["measure"], "params": chosen}, client, chosen, steps)

    def cancel(self, job_id: str, client: str = "") -> dict:
        """Cancel job ``job_id`` for ``client``: a job other clients asked for too goes on for them; otherwise a
        queued job leaves the queue and a running one is stopped. Returns its status (a finished job's as it is);
        :class:`repviz.service.NotFoundError` for an id that was never given or is forgotten."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise service.NotFoundError(f"no job {job_id[:80]!r}; the jobs route lists the jobs there are")
            future = None
            if job["state"] in _ACTIVE:
                if client in job["clients"] and len(job["clients"]) > 1:
                    job["clients"].remove(client)
                else:
                    future = job["future"]
                    self._end(job, "cancelled", "cancelled")
            public = self._public(job, self._order())
        if future is not None:
            self._stop(future)
        return public

    def calls(self, calls: list[tuple[tuple, Callable, tuple]], timeout: float = 120.0) -> list:
        """The results of ``fn(*args)`` for each ``(key, fn, args)`` of ``calls``, run side by side in the
        worker processes for short computations and waited for up to ``timeout`` seconds in all
        (:class:`StillComputing` beyond; the computations go on and a retry joins them). Calls with the same
        ``key`` share one computation while it runs; at most ``max_calls`` different ones wait at once."""
        futures = [self._call_future(key, fn, args) for key, fn, args in calls]
        deadline = time.monotonic() + timeout
        try:
            return [future.result(timeout=max(0.0, deadline - time.monotonic())) for future in futures]
        except FutureTimeout:
            raise StillComputing(f"still computing after {timeout:.0f} s; retry later") from None

    def jobs(self) -> list[dict]:
        """Every remembered job, newest first."""
        with self._lock:
            order = self._order()
            return [self._public(job, order) for job in reversed(self._jobs.values())]

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

    # the queue ----------------------------------------------------------------------------------------------
    def _submit(self, fields: dict, client: str, *args) -> tuple[dict, bool]:
        """Queue (or join) the job of kind ``fields["kind"]`` (:data:`repviz.service.JOBS`) with ``args`` for
        ``client``, and start what the free workers can take."""
        identity = tuple(fields.get(k) for k in ("kind", "run", "layer", "method")) + \
            tuple(sorted((fields["params"] or {}).items()))
        with self._lock:
            if self._closed:
                raise RuntimeError("the job manager is closed")
            job = next((j for j in self._jobs.values() if j["identity"] == identity and j["state"] in _ACTIVE),
                       None)
            new = job is None
            if job is not None and client not in job["clients"]:
                job["clients"].append(client)  # it is this client's job too: it may start on this client's turn
                if job["state"] == "queued":
                    self._line_up(client, job["id"])
            if new:
                mine = sum(client in j["clients"] for j in self._jobs.values() if j["state"] in _ACTIVE)
                if mine >= self.per_client:
                    raise TooManyJobs(f"this tab has {mine} jobs queued or running (at most {self.per_client} per "
                                      f"tab); cancel one or wait for one to finish")
                pending = sum(j["state"] in _ACTIVE for j in self._jobs.values())
                if pending >= self.max_pending:
                    raise TooManyJobs(f"{pending} jobs are queued or running (at most {self.max_pending}); "
                                      f"wait for one to finish")
                job_id = f"{int(time.time())}-{next(self._ids)}"
                job = {"id": job_id, **fields, "identity": identity, "args": (fields["kind"], *args),
                       "clients": [client], "state": "queued", "progress": None, "error": None, "key": None,
                       "submitted": time.time(), "started": None, "future": None, "timer": None}
                self._jobs[job_id] = job
                self._line_up(client, job_id)
                self._forget_old()
            started = self._dispatch()
            public = self._public(job, self._order())
        self._follow(started)
        return public, new

    def _line_up(self, client: str, job_id: str) -> None:
        self._lines.setdefault(client, deque()).append(job_id)

    def _next_of(self, client: str, lines: dict[str, deque[str]], taken: set[str]) -> str | None:
        """Pop the first job of ``client``'s line in ``lines`` that still waits for it (lines hold stale ids:
        jobs cancelled, started on another client's turn, or no longer asked for by this client)."""
        line = lines[client]
        while line:
            job = self._jobs.get(line.popleft())
            if job is not None and job["state"] == "queued" and client in job["clients"] and job["id"] not in taken:
                return job["id"]
        return None

    def _take(self, lines: dict[str, deque[str]], served: dict[str, int], taken: set[str]) -> str | None:
        """The next job round-robin: the first waiting job of the client served longest ago (never: first), or
        None. Updates ``lines`` and ``served`` (the queue's own, or copies to look ahead)."""
        for client in sorted(lines, key=lambda c: served.get(c, -1)):  # stable: ties in the order they came
            job_id = self._next_of(client, lines, taken)
            if not lines[client]:
                del lines[client]
            if job_id is not None:
                served[client] = max(served.values(), default=0) + 1
                return job_id
        return None

    def _order(self) -> dict[str, int]:
        """How many jobs run or start before each queued one (by its id): the running ones, then the queued ones
        the round-robin takes first."""
        lines = {client: deque(line) for client, line in self._lines.items()}
        served, taken, order = dict(self._served), set(), {}
        while (job_id := self._take(lines, served, taken)) is not None:
            order[job_id] = len(self._busy) + len(taken)
            taken.add(job_id)
        return order

    def _dispatch(self) -> list[tuple[str, Future]]:
        """Hand the next jobs round-robin to the pool while fewer than ``workers`` run (with the lock held);
        returns (id, future) of those started, for :meth:`_follow` once the lock is released."""
        started = []
        while len(self._busy) < self.workers and not self._closed:
            job_id = self._take(self._lines, self._served, set())
            if job_id is None:
                break
            job = self._jobs[job_id]
            job.update(state="running", started=time.time())
            try:
                job["future"] = future = self._start().submit(_run_job, job_id, self.logdir, self.out, *job["args"])
            except Exception as e:  # a broken pool: report it and start afresh next time
                self._end(job, "failed", _one_line(e))
                self._pool = None
                continue
            self._busy.add(job_id)
            if self.time_limit is not None:
                job["timer"] = threading.Timer(self.time_limit, self._expire, (job_id,))
                job["timer"].daemon = True
                job["timer"].start()
            started.append((job_id, future))
        return started

    def _follow(self, started: list[tuple[str, Future]]) -> None:
        """Watch the futures of started jobs (outside the lock: a future already done calls back at once)."""
        for job_id, future in started:
            future.add_done_callback(lambda f, job_id=job_id: self._finished(job_id, f))

    def _end(self, job: dict, state: str, error: str | None) -> None:
        job.update(state=state, error=error, finished=time.time())
        if job["timer"] is not None:
            job["timer"].cancel()

    @staticmethod
    def _stop(future: Future) -> None:
        """Stop a job's computation (outside the lock: a cancelled future calls back at once)."""
        if not future.cancel() and hasattr(future, "stop"):
            future.stop()

    def _expire(self, job_id: str) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job["state"] != "running":
                return
            self._end(job, "failed", f"stopped after its time limit of {self.time_limit:g} s; start TensorBoard "
                                     f"with --repviz_job_limit SECONDS to allow longer jobs")
            future = job["future"]
        self._stop(future)

    def _progress(self, job_id: str, snapshot: dict | None) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job["state"] == "running" and snapshot is not None:
                job["progress"] = {k: snapshot.get(k) for k in _PROGRESS_KEYS}

    def _finished(self, job_id: str, future: Future) -> None:
        try:
            result, error = future.result(), None
        except CancelledError:
            result, error = None, "cancelled"
        except JobFailed as e:
            result, error = None, str(e)
        except BaseException as e:  # the job raised in a pool given to the manager
            result, error = None, _one_line(e)
        with self._lock:
            self._busy.discard(job_id)
            job = self._jobs.get(job_id)
            if job is not None and job["state"] == "running":  # not cancelled nor stopped at its time limit
                if error is None and result["stored"] == 0 and result["failures"]:
                    error = result["failures"][0]
                if error is not None:
                    self._end(job, "failed", error)
                else:
                    job["progress"] = {k: result["progress"].get(k) for k in _PROGRESS_KEYS}
                    job["key"] = result["key"]
                    self._end(job, "done", f"{len(result['failures'])} snapshot group(s) skipped: "
                                           f"{result['failures'][0]}" if result["failures"] else None)
            if job is not None:
                job["future"] = None
            started = self._dispatch()
        self._follow(started)

    def _forget_old(self) -> None:
        finished = [k for k, job in self._jobs.items() if job["state"] not in _ACTIVE]
        for k in finished[:max(0, len(finished) - self.keep)]:
            del self._jobs[k]
        active = {client for job in self._jobs.values() if job["state"] in _ACTIVE for client in job["clients"]}
        self._served = {client: n for client, n in self._served.items() if client in active}

    def _public(self, job: dict, order: dict[str, int]) -> dict:
        """What the status route says of ``job``: its fields, and for a queued job the jobs ahead of it
        (``ahead``), for a running one its seconds so far (``elapsed``) of at most ``limit``."""
        running = job["state"] == "running"
        return {**{k: job.get(k) for k in ("id", "kind", "run", "layer", "method", "params", "state", "progress",
                                           "error", "key")},
                "ahead": order.get(job["id"]), "limit": self.time_limit,
                "elapsed": round(time.time() - job["started"], 1) if running else None}

    # pools --------------------------------------------------------------------------------------------------
    def _start(self) -> Executor:
        if self._pool is None:
            self._pool = _JobProcesses(self._progress)
            atexit.register(self.close)
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

    def _call_future(self, key: tuple, fn: Callable, args: tuple) -> Future:
        with self._lock:
            future, new = self._calls.get(key), False
            if future is None:
                if len(self._calls) >= self.max_calls:
                    raise TooManyJobs(f"{len(self._calls)} computations are waiting (at most {self.max_calls}); "
                                      f"retry in a moment")
                future, new = self._start_quick().submit(fn, *args), True
                self._calls[key] = future
        if new:  # outside the lock: a future already done runs the callback at once, in this thread
            future.add_done_callback(lambda f, key=key: self._call_done(key, f))
        return future

    def _call_done(self, key: tuple, future: Future) -> None:
        with self._lock:
            if self._calls.get(key) is future:
                del self._calls[key]
            if not future.cancelled() and type(future.exception()).__name__ == "BrokenProcessPool":
                # a worker was killed: start afresh
                self._quick = None
