"""Row-parallel loops without numba's parallel compiler: a serial ``nogil`` kernel over a range of rows, run on
a few threads.

numba compiles a ``parallel=True`` kernel in about twice the time of the same loop compiled serially (the parfor
lowering and its gufunc wrapper), and each method meets that cost in its first call in a new process. Kernels
that run once per call (a neighbour search, a shortest-path sweep, a round of NN-descent) or whose every call
is O(n²) work (MDS's Guttman transform, Sammon's step, exact t-SNE's repulsion) gain nothing from ``prange``
over a thread pool, so they are compiled serially, take ``(start, stop, ...)`` and run here on
``numba.get_num_threads()`` threads (what an estimator's ``n_jobs`` set). Every row is computed by one call and
writes only its own outputs, so results do not depend on the thread count. t-SNE's other kernels, called every
iteration on O(n) work, keep ``prange``: a thread pool's hand-off would cost more than they do.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numba

_pool: ThreadPoolExecutor | None = None
_pool_pid = -1


def _executor() -> ThreadPoolExecutor:
    """One pool per process (a forked worker must not inherit its parent's threads)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=numba.config.NUMBA_NUM_THREADS, thread_name_prefix="repviz-rows")
        _pool_pid = os.getpid()
    return _pool


def run_rows(kernel: Callable, n_rows: int, *args, threads: int | None = None) -> None:
    """``kernel(start, stop, *args)`` over ``range(n_rows)`` in contiguous chunks, four per thread, on ``threads``
    threads (None: ``numba.get_num_threads()``) that each take the next chunk when done with one (rows differ in
    cost). ``kernel`` must be compiled with ``nogil=True`` (else the threads take turns) and write only its rows."""
    threads = min(threads or numba.get_num_threads(), n_rows)
    if threads <= 1:
        kernel(0, n_rows, *args)
        return
    chunks = min(4 * threads, n_rows)
    bounds = [n_rows * c // chunks for c in range(chunks + 1)]
    todo = iter(zip(bounds[:-1], bounds[1:]))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                chunk = next(todo, None)
            if chunk is None:
                return
            kernel(*chunk, *args)

    for future in [_executor().submit(work) for _ in range(threads)]:
        future.result()
