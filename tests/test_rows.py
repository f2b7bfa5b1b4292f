"""repviz._rows.run_rows: every row exactly once, on at most numba's thread count, results independent of it."""

import threading
import time

import numba
import numpy as np
import pytest

from repviz._rows import run_rows
from repviz.neighbors import knn


def test_every_row_once_and_at_most_the_thread_count_at_a_time():
    seen = np.zeros(103, dtype=np.int64)
    running, peak, lock = [0], [0], threading.Lock()

    def kernel(start, stop, out):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.005)
        out[start:stop] += 1
        with lock:
            running[0] -= 1

    old = numba.get_num_threads()
    try:
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        run_rows(kernel, len(seen), seen)
    finally:
        numba.set_num_threads(old)
    assert (seen == 1).all()
    assert peak[0] <= min(2, numba.config.NUMBA_NUM_THREADS)


def test_an_error_in_a_chunk_reaches_the_caller():
    def kernel(start, stop):
        if stop == 50:  # the last chunk, however many there are
            raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        run_rows(kernel, 50)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 numba threads")
def test_knn_is_the_same_on_one_and_two_threads():
    X = np.random.default_rng(0).normal(size=(700, 8)).astype(np.float32)
    old = numba.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            numba.set_num_threads(threads)
            results.append(knn(X, 15))
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
