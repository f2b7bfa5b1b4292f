"""numba's thread count for the span of a t-SNE step (kNN, affinities, descent), restored afterwards."""

from __future__ import annotations

import numba


def thread_count(n_jobs: int | None) -> int:
    """Threads for ``n_jobs`` (None: 1, -1: all, -2: all but one, 0: 1), at most numba's limit."""
    limit = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max(1, limit + 1 + n_jobs)
    return max(1, min(int(n_jobs), limit))


class NumbaThreads:
    """Context manager: numba runs on ``thread_count(n_jobs)`` threads inside, as before outside (even on error).
    Results never depend on it."""

    def __init__(self, n_jobs: int | None):
        self.n = thread_count(n_jobs)

    def __enter__(self) -> int:
        self._old = numba.get_num_threads()
        numba.set_num_threads(self.n)
        return self.n

    def __exit__(self, *exc) -> bool:
        numba.set_num_threads(self._old)
        return False
