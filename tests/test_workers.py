"""Worker processes: every result comes back, errors surface with the worker's traceback, and a pool is stopped
at once (mid-task) or reports a worker that died instead of waiting for it."""

from __future__ import annotations

import os
import signal
import time

import pytest

from repviz.workers import WorkerDied, WorkerPool


def _square(task, advance):
    advance(1)
    advance(2)
    return task * task


def _env(task, advance):
    return os.environ.get(task)


def _fail(task, advance):
    if task == 3:
        raise KeyError("task three")
    return task


def _start_then_sleep(task, advance):
    advance(1)
    time.sleep(60)


def _die(task, advance):
    os.kill(os.getpid(), signal.SIGKILL)


class _Stop(Exception):
    pass


def test_every_task_runs_once_and_reports_its_progress():
    advanced = []
    with WorkerPool(_square, 2) as pool:
        results = list(pool.run(range(10), advanced.append))
    assert sorted(results) == [i * i for i in range(10)]
    assert sum(advanced) == 30
    assert all(p.exitcode == 0 for p in pool.processes)


def test_workers_start_with_the_given_environment():
    with WorkerPool(_env, 1, env={"REPVIZ_TEST_VARIABLE": "7"}) as pool:
        assert list(pool.run(["REPVIZ_TEST_VARIABLE"], lambda n: None)) == ["7"]
    assert "REPVIZ_TEST_VARIABLE" not in os.environ


def test_a_task_error_is_raised_with_the_worker_traceback():
    with pytest.raises(KeyError, match="task three") as info, WorkerPool(_fail, 2) as pool:
        list(pool.run(range(6), lambda n: None))
    assert any("in a worker process" in note and "_fail" in note for note in info.value.__notes__)
    assert all(not p.is_alive() for p in pool.processes)


def test_an_exception_in_the_caller_stops_every_worker_mid_task():
    def advance(n):
        raise _Stop

    start = time.monotonic()
    with pytest.raises(_Stop), WorkerPool(_start_then_sleep, 2) as pool:
        list(pool.run(range(2), advance))
    assert time.monotonic() - start < 30  # not after the 60-second tasks
    assert all(p.exitcode == -signal.SIGTERM for p in pool.processes)


def test_a_worker_that_dies_is_reported_with_its_task_not_waited_for():
    with pytest.raises(WorkerDied, match=r"stopped in the middle of a task \(killed by signal 9,") as info, \
            WorkerPool(_die, 1) as pool:
        list(pool.run(["the task"], lambda n: None))
    assert info.value.task == "the task"
    assert all(not p.is_alive() for p in pool.processes)


def _die_on_negative(task, advance):
    if task < 0:
        os.kill(os.getpid(), signal.SIGKILL)
    return task * task


def test_a_dead_worker_is_replaced_and_the_other_tasks_finish():
    with WorkerPool(_die_on_negative, 2) as pool:
        got = list(pool.run([1, -1, 2, 3, -2, 4], lambda n: None, on_death=lambda e: ("lost", e.task)))
        assert len(pool.processes) == 2 and all(p.is_alive() for p in pool.processes)
    assert sorted(map(str, got)) == sorted(map(str, [1, 4, 9, 16, ("lost", -1), ("lost", -2)]))


def test_more_workers_than_tasks_and_no_tasks():
    with WorkerPool(_square, 3) as pool:
        assert list(pool.run([4], lambda n: None)) == [16]
        assert list(pool.run([], lambda n: None)) == []
        assert sorted(pool.run([1, 2, 3, 5], lambda n: None)) == [1, 4, 9, 25]  # a pool runs several batches


_ORPHAN_SCRIPT = """
import sys, time
sys.path[:0] = {path!r}
from repviz.workers import WorkerPool
from test_workers import _square
pool = WorkerPool(_square, 2)
print(*[p.pid for p in pool.processes], flush=True)
time.sleep(60)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\\tZ" not in next(line for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_idle_workers_exit_when_their_parent_is_killed():
    import subprocess
    import sys

    script = _ORPHAN_SCRIPT.format(path=[os.path.dirname(__file__), *sys.path])
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in pids)
