"""The tab's job queue: fair between clients (round-robin, a cap per client), jobs cancelled and stopped at their
time limit (issue #40, item 4).

The queue's tests hand jobs to a pool whose futures the test finishes itself, so every state is reached by the
test's own step and never raced; the stopping tests run a slow fake job in a real process of its own.
"""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest

pytest.importorskip("tensorboard")

from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard_plugin_repviz import jobs as jobs_module
from tensorboard_plugin_repviz import loader
from tensorboard_plugin_repviz.jobs import JobManager, TooManyJobs
from werkzeug import test as wtest
from werkzeug import wrappers

from repviz.service import NotFoundError

BASE = "/data/plugin/repviz/"
DONE = {"key": "pca-0", "stored": 1, "failures": [], "progress": {"stage": "done", "done": 1, "total": 1}}


class HeldPool:
    """Runs nothing: the test finishes each job's future itself (``finish``), in the order it chooses."""

    def __init__(self):
        self.started: list[tuple[str, Future]] = []  # (layer, future) in the order the manager started them

    def submit(self, fn, job_id, logdir, out, kind, run, layer, method):
        future = Future()
        self.started.append((layer, future))
        return future

    def finish(self, layer: str) -> None:
        next(f for name, f in self.started if name == layer).set_result(DONE)

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def _states(manager: JobManager) -> dict[str, str]:
    return {job["layer"]: job["state"] for job in manager.jobs()}


def _wait(manager: JobManager, job_id: str, states: tuple[str, ...], timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = next(j for j in manager.jobs() if j["id"] == job_id)
        if job["state"] in states:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not reach {states}: {job}")


def test_one_clients_eight_jobs_do_not_hold_back_another_clients_job(tmp_path):
    """Client A queues 8 jobs, then B one: B is accepted, told one job is ahead of it (A's running one), and
    starts next; A's others follow. Before: B got 429 until A's 8 jobs had all finished."""
    pool = HeldPool()
    manager = JobManager(str(tmp_path), per_client=8, pool=pool)
    for i in range(8):
        job, new = manager.submit("a", f"a{i}", "mds", client="A")
        assert new
    job_b, new = manager.submit("b", "b0", "pca", client="B")
    assert new and job_b["state"] == "queued" and job_b["ahead"] == 1
    assert [layer for layer, _ in pool.started] == ["a0"]
    pool.finish("a0")
    assert [layer for layer, _ in pool.started] == ["a0", "b0"]  # B's job before A's second
    assert _states(manager)["b0"] == "running" and _states(manager)["a1"] == "queued"
    pool.finish("b0")
    for i in range(1, 8):
        pool.finish(f"a{i}")
    assert [layer for layer, _ in pool.started] == ["a0", "b0"] + [f"a{i}" for i in range(1, 8)]
    assert set(_states(manager).values()) == {"done"}


def test_round_robin_takes_turns_and_says_how_many_are_ahead(tmp_path):
    pool = HeldPool()
    manager = JobManager(str(tmp_path), pool=pool)
    for client, layers in (("A", ["a0", "a1", "a2"]), ("B", ["b0", "b1"]), ("C", ["c0"])):
        for layer in layers:
            manager.submit("r", layer, "pca", client=client)
    ahead = {job["layer"]: job["ahead"] for job in manager.jobs()}
    # a0 runs; then B, C, A, B, A in turn
    assert ahead == {"a0": None, "b0": 1, "c0": 2, "a1": 3, "b1": 4, "a2": 5}
    for layer in ("a0", "b0", "c0", "a1", "b1"):
        pool.finish(layer)
    assert [layer for layer, _ in pool.started] == ["a0", "b0", "c0", "a1", "b1", "a2"]


def test_the_cap_per_client_refuses_that_client_only(tmp_path):
    manager = JobManager(str(tmp_path), per_client=4, max_pending=16, pool=HeldPool())
    for i in range(4):
        manager.submit("a", f"a{i}", "pca", client="A")
    with pytest.raises(TooManyJobs, match=r"^this tab has 4 jobs queued or running \(at most 4 per tab\)"):
        manager.submit("a", "a4", "pca", client="A")
    assert manager.submit("b", "b0", "pca", client="B")[1]
    assert manager.submit("a", "a0", "pca", client="A")[1] is False  # joining a job it has is no new job


def test_a_job_another_client_joins_starts_on_that_clients_turn_and_stays_theirs_when_one_cancels(tmp_path):
    pool = HeldPool()
    manager = JobManager(str(tmp_path), per_client=8, pool=pool)
    for i in range(4):
        manager.submit("a", f"a{i}", "pca", client="A")
    joined, new = manager.submit("a", "a3", "pca", client="B")  # A's last queued job, asked for by B too
    assert not new and joined["ahead"] == 1
    pool.finish("a0")
    assert [layer for layer, _ in pool.started] == ["a0", "a3"]
    assert manager.cancel(joined["id"], client="B")["state"] == "running"  # A still wants it
    pool.finish("a3")
    assert _states(manager)["a3"] == "done"


def test_cancel_a_queued_and_a_running_job(tmp_path):
    pool = HeldPool()
    manager = JobManager(str(tmp_path), pool=pool)
    running, _ = manager.submit("a", "a0", "pca", client="A")
    queued, _ = manager.submit("a", "a1", "pca", client="A")
    later, _ = manager.submit("a", "a2", "pca", client="A")
    assert manager.cancel(queued["id"], client="A")["state"] == "cancelled"
    assert next(j for j in manager.jobs() if j["id"] == later["id"])["ahead"] == 1  # the cancelled one left
    assert manager.cancel(running["id"], client="A")["state"] == "cancelled"
    assert pool.started[0][1].cancelled()  # its computation was stopped, and the next job started
    assert [layer for layer, _ in pool.started] == ["a0", "a2"]
    assert manager.cancel(running["id"], client="A")["state"] == "cancelled"  # a finished job stays as it is
    with pytest.raises(NotFoundError, match="no job 'nope'"):
        manager.cancel("nope")


# --------------------------------------------------------------------------------------------------------------
# Stopping a job's process
# --------------------------------------------------------------------------------------------------------------

def _slow_job(job_id, logdir, out, kind, *args):
    """A job that reports progress and then takes a minute (in the job's own process)."""
    jobs_module._report(job_id, {"stage": "slow", "done": 0, "total": 1})
    for _ in range(1200):
        time.sleep(0.05)
    return DONE


class SlowProcesses(jobs_module._JobProcesses):
    """The real job processes, each running :func:`_slow_job` instead of a job of repviz."""

    def submit(self, fn, *args):
        self.last = super().submit(_slow_job, *args)
        return self.last


def test_a_job_over_its_time_limit_is_stopped_and_says_so(tmp_path):
    progress = []
    pool = SlowProcesses(lambda job_id, snapshot: progress.append(snapshot))
    manager = JobManager(str(tmp_path), time_limit=1.0, pool=pool)
    try:
        job, _ = manager.submit("a", "a0", "mds", client="A")
        assert job["state"] == "running" and job["limit"] == 1.0 and job["elapsed"] is not None
        job = _wait(manager, job["id"], ("failed", "done"))
        assert job["state"] == "failed"
        assert job["error"].startswith("stopped after its time limit of 1 s; start TensorBoard with "
                                       "--repviz_job_limit SECONDS")
        pool.last.exception(timeout=60)  # the process ended
        assert pool.last.process.exitcode == -15
    finally:
        manager.close()


def test_cancel_stops_the_running_process_and_starts_the_next(tmp_path):
    pool = SlowProcesses(lambda job_id, snapshot: None)
    manager = JobManager(str(tmp_path), pool=pool)
    try:
        first, _ = manager.submit("a", "a0", "mds", client="A")
        process = pool.last.process
        second, _ = manager.submit("b", "b0", "mds", client="B")
        assert manager.cancel(first["id"], client="A")["state"] == "cancelled"
        _wait(manager, second["id"], ("running",))
        process.join(60)
        assert process.exitcode == -15
        assert next(j for j in manager.jobs() if j["id"] == first["id"])["state"] == "cancelled"
    finally:
        manager.close()


def test_a_job_process_answers_its_result_and_its_progress():
    """The real job processes: a call's result and its progress come back through its pipe; an error is the
    job's one line."""
    progress = []
    pool = jobs_module._JobProcesses(lambda job_id, snapshot: progress.append((job_id, snapshot)))
    assert pool.submit(_report_and_answer, "j1").result(timeout=120) == {"answer": 42}
    assert progress == [("j1", {"stage": "s"})]
    with pytest.raises(jobs_module.JobFailed, match=r"^ValueError: no such layer$"):
        pool.submit(_fail).result(timeout=120)


def _report_and_answer(job_id):
    jobs_module._report(job_id, {"stage": "s"})
    return {"answer": 42}


def _fail():
    raise ValueError("no such layer")


# --------------------------------------------------------------------------------------------------------------
# Through the routes
# --------------------------------------------------------------------------------------------------------------

@pytest.fixture
def served(tmp_path, new_run):
    import numpy as np

    layers = ("l0", "l1", "l2", "l3", "l4")
    writer = new_run(tmp_path / "a", layers=dict.fromkeys(layers, (20, 3)))
    writer.write_probe(np.arange(20), np.arange(20) % 2)
    for layer in layers:
        writer.write_activation(layer, 0, np.ones((20, 3), np.float32))
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(tmp_path)))
    plugin.jobs = JobManager(str(tmp_path), pool=(pool := HeldPool()))
    yield wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response), pool
    plugin.jobs.close()


def _compute(client, layer, tab):
    return client.post(BASE + "compute", json={"run": "a", "layer": layer, "method": "pca"},
                       headers={"X-Repviz-Client": tab})


def test_routes_queue_per_tab_and_cancel(served):
    client, pool = served
    for layer in ("l0", "l1", "l2", "l3"):
        assert _compute(client, layer, "tab-a").status_code == 202
    full = _compute(client, "l4", "tab-a")
    assert full.status_code == 429 and "at most 4 per tab" in full.json["error"]
    other = _compute(client, "l4", "tab-b")
    assert other.status_code == 202 and other.json["job"]["ahead"] == 1  # after the running one only
    r = client.post(BASE + "cancel", json={"id": other.json["job"]["id"]}, headers={"X-Repviz-Client": "tab-b"})
    assert r.status_code == 200 and r.json["job"]["state"] == "cancelled"
    assert client.post(BASE + "cancel", json={"id": "1-999"}).status_code == 404
    assert client.post(BASE + "cancel", json={"job": "x"}).status_code == 400
    assert client.get(BASE + "cancel").status_code == 405


def test_the_time_limit_flag():
    import argparse

    parser = argparse.ArgumentParser()
    loader.RepvizLoader().define_flags(parser)
    flags = parser.parse_args(["--repviz_job_limit", "90"])
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir="", flags=flags))
    assert plugin.jobs.time_limit == 90.0
    default = loader.RepvizLoader().load(base_plugin.TBContext(logdir="", flags=parser.parse_args([])))
    assert default.jobs.time_limit == jobs_module.DEFAULT_TIME_LIMIT
    with pytest.raises(SystemExit):
        parser.parse_args(["--repviz_job_limit", "0"])


@pytest.mark.slow
def test_a_cancelled_embedding_job_leaves_whole_snapshots_only(tmp_path, new_run):
    """A real PCA job over many snapshots, cancelled once it has stored some: every stored snapshot reads back
    whole, and nothing but the store's own temporary files (which readers skip) is left half-written."""
    import numpy as np

    import repviz

    writer = new_run(tmp_path / "a", layers={"dense": (1500, 32)})
    writer.write_probe(np.arange(1500), np.arange(1500) % 3)
    rng = np.random.default_rng(0)
    for step in range(40):
        writer.write_activation("dense", step, rng.normal(size=(1500, 32)).astype(np.float32))
    manager = JobManager(str(tmp_path))
    try:
        job, _ = manager.submit("a", "dense", "pca", client="A")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            now = next(j for j in manager.jobs() if j["id"] == job["id"])
            if now["state"] != "running" or (now["progress"] or {}).get("done", 0) >= 2:
                break
            time.sleep(0.05)
        assert now["state"] == "running", now  # still running with some snapshots stored
        assert manager.cancel(job["id"], client="A")["state"] == "cancelled"
        run = repviz.open_logdir(tmp_path).run("a")
        keys = run.embeddings.keys()
        assert keys, "no snapshot was stored before the cancel"
        for (key,) in keys:
            steps = run.embeddings.steps(key, "dense")
            assert 0 < len(steps) < 40
            for step in steps:
                assert run.embeddings.read(key, "dense", step).shape == (1500, 2)
    finally:
        manager.close()
