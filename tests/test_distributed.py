"""Embedding and meta-SNE on a Dask cluster: the same stored results as locally, resumption after a worker is
killed, the shared-log-directory check, the command line."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")


from repviz import open_logdir  # noqa: E402
from repviz.cli import main  # noqa: E402
from repviz.distributed import DaskExecutor  # noqa: E402
from repviz.methods import register_method  # noqa: E402
from repviz.pipeline import embed_logdir  # noqa: E402
from repviz.store import RunWriter  # noqa: E402


@pytest.fixture(scope="module")
def client(repo):
    """One LocalCluster of two single-threaded worker processes for the module; the workers import this checkout
    (PYTHONPATH), as they would import an installed repviz."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), str(repo / "tb_plugin"), old) if p)
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                      dashboard_address="127.0.0.1:0") as cluster, distributed.Client(cluster) as c:
            yield c
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old


def _stored(logdir) -> dict[tuple, tuple[np.ndarray, dict]]:
    """Every stored embedding and its sidecar (time taken left out), by (run, key, layer, step)."""
    out = {}
    log = open_logdir(logdir)
    for name, run in log.runs.items():
        for key in run.embeddings.method_keys():
            for layer in run.layers:
                for step in run.embeddings.steps(key, layer):
                    info = {k: v for k, v in run.embeddings.info(key, layer, step).items() if k != "seconds"}
                    out[name, key, layer, step] = (np.array(run.embeddings.read(key, layer, step)), info)
    return out


def _mtimes(logdir) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in Path(logdir).rglob("embeddings/**/*.npy")}


# ---------------------------------------------------------------------------------------------------------------
# repviz embed
# ---------------------------------------------------------------------------------------------------------------

def test_embed_on_the_cluster_stores_what_a_local_run_stores(tmp_path, client, cluster_run):
    for where in ("local", "cluster"):
        cluster_run(tmp_path / where / "r1", nan_at=(("b", 2),))
        cluster_run(tmp_path / where / "r2", seed=1)
    local = embed_logdir(tmp_path / "local", ["tsne", "pca"])
    events = []
    remote = embed_logdir(tmp_path / "cluster", ["tsne", "pca"], executor=DaskExecutor(client),
                          on_progress=lambda *e: events.append(e))
    assert (remote.computed, remote.cached, remote.keys, remote.rows) == \
           (local.computed, local.cached, local.keys, local.rows) == (30, 0, local.keys, local.rows)
    assert sorted(remote.failure_lines()) == sorted(local.failure_lines()) and len(remote.failed) == 2
    ours, theirs = _stored(tmp_path / "cluster"), _stored(tmp_path / "local")
    assert ours.keys() == theirs.keys() and len(ours) == 30
    for k, (Y, info) in ours.items():
        assert np.array_equal(Y, theirs[k][0]), k  # bit-identical
        assert info == theirs[k][1], k
    assert events[0] == ("embed", 0, 32, "") and events[-1] == ("embed", 32, 32, "")
    assert all(a[1] <= b[1] for a, b in zip(events, events[1:]))

    # the same cache: a local run finds everything the cluster stored, and the other way round
    again = embed_logdir(tmp_path / "cluster", ["tsne", "pca"])
    assert (again.computed, again.cached) == (0, 30)
    assert embed_logdir(tmp_path / "local", ["tsne", "pca"], executor=DaskExecutor(client)).computed == 0


_SLOW = '''
import time
from repviz.manifold import PCA

class SlowPCA(PCA):
    def fit(self, X, y=None):
        time.sleep(0.4)
        return super().fit(X, y)
'''


@pytest.fixture
def slow_pca(tmp_path, monkeypatch):
    """The method "slowpca": PCA taking 0.4 s a fit (plain PCA afterwards); call it with a client to make it
    importable on that cluster's workers."""
    module = tmp_path / "repviz_slow_pca.py"
    module.write_text(_SLOW)
    monkeypatch.syspath_prepend(str(tmp_path))
    register_method("slowpca", "repviz_slow_pca:SlowPCA", align="procrustes", defaults={"random_state": 0})
    yield lambda c: c.upload_file(str(module))
    register_method("slowpca", "repviz.manifold:PCA", align="procrustes", defaults={"random_state": 0})


def test_a_killed_worker_s_chain_is_retried_and_resumes(tmp_path, client, slow_pca, cluster_run):
    slow_pca(client)
    cluster_run(tmp_path / "logs" / "r1", steps=range(10))
    cluster_run(tmp_path / "fresh" / "r1", steps=range(10))

    outcome = {}
    job = threading.Thread(target=lambda: outcome.update(result=embed_logdir(tmp_path / "logs", ["slowpca"],
                                                                             executor=DaskExecutor(client))))
    job.start()
    deadline = time.monotonic() + 60
    while len(_mtimes(tmp_path / "logs")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    busy = [w for w, keys in client.processing().items() if keys]
    pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
    before = _mtimes(tmp_path / "logs")
    os.kill(pid, signal.SIGKILL)  # as the out-of-memory killer would
    job.join(timeout=120)
    assert not job.is_alive()
    result = outcome["result"]
    assert result.failed == [] and result.computed == 20
    after = _mtimes(tmp_path / "logs")
    assert len(after) == 20 and all(after[p] == t for p, t in before.items())  # nothing stored was redone
    register_method("slowpca", "repviz.manifold:PCA", align="procrustes", defaults={"random_state": 0})
    embed_logdir(tmp_path / "fresh", ["slowpca"])
    fresh, done = _stored(tmp_path / "fresh"), _stored(tmp_path / "logs")
    assert fresh.keys() == done.keys()
    for k in fresh:
        assert np.array_equal(fresh[k][0], done[k][0]), k
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker


def test_local_and_cluster_layouts_are_bit_identical_whatever_blas_threads_this_process_has(tmp_path, client,
                                                                                            cluster_run):
    # 300 features: BLAS sums the kNN's products and PCA's covariance in an order set by its thread count; the
    # workers have one thread, this process four (as a many-core machine would)
    from threadpoolctl import threadpool_limits

    for where in ("local", "cluster"):
        cluster_run(tmp_path / where / "r1", layers=("a",), steps=range(2), n=300, width=300)
    with threadpool_limits(4, user_api="blas"):
        embed_logdir(tmp_path / "local", ["tsne"])
    embed_logdir(tmp_path / "cluster", ["tsne"], executor=DaskExecutor(client))
    ours, theirs = _stored(tmp_path / "cluster"), _stored(tmp_path / "local")
    assert ours.keys() == theirs.keys() and len(ours) == 2
    for k, (Y, _) in ours.items():
        assert np.array_equal(Y, theirs[k][0]), k


def test_a_cluster_that_keeps_losing_workers_gives_up_in_one_line(tmp_path, slow_pca, cluster_run):
    from repviz.distributed import ClusterFailed

    for r in ("r1", "r2"):
        cluster_run(tmp_path / "logs" / r, steps=range(10))
    stop = threading.Event()
    # a cluster of its own: its nannies may give up restarting workers killed this often
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        slow_pca(c)

        def kill_busy_workers():  # every worker holding a task, as often as the nanny brings one back
            while not stop.wait(0.3):
                for worker, keys in c.processing().items():
                    if keys:
                        with contextlib.suppress(Exception):
                            os.kill(c.run(os.getpid, workers=[worker])[worker], signal.SIGKILL)

        killer = threading.Thread(target=kill_busy_workers)
        killer.start()
        try:
            with pytest.raises(ClusterFailed, match=r"^[3-9] Dask workers died during this run \(killed, e\.g\. "
                                                    r"for lack of memory; the last was tcp://.*\), more than "
                                                    r"max_lost_workers=2: gave up; what they finished is stored, "
                                                    r"and the same command resumes from it$"):
                embed_logdir(tmp_path / "logs", ["slowpca"], executor=DaskExecutor(c, max_lost_workers=2))
        finally:
            stop.set()
            killer.join()
    stored = _stored(tmp_path / "logs")  # what the workers stored before they died is whole
    assert all(Y.shape == (120, 2) and np.isfinite(Y).all() for Y, _ in stored.values())


def test_a_cluster_with_no_worker_left_gives_up(tmp_path, cluster_run):
    from repviz.distributed import ClusterFailed

    cluster_run(tmp_path / "logs" / "r1")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        executor = DaskExecutor(c, patience=1.0)
        logdir = executor.prepare(open_logdir(tmp_path / "logs"))
        cluster.scale(0)
        while c.scheduler_info()["workers"]:
            time.sleep(0.05)
        with pytest.raises(ClusterFailed, match=r"^the Dask cluster has had no worker for 1 s \(all died or were "
                                                r"stopped\): gave up"):
            list(executor.map(_never, [1, 2], lambda n: None, lambda task, e: None))
    assert logdir.runs


def _never(task, advance, threads):
    raise AssertionError("no worker should run this")


def test_a_worker_that_cannot_see_the_logdir_fails_before_any_work(tmp_path, client, cluster_run):
    cluster_run(tmp_path / "logs" / "r1")
    worker = sorted(client.scheduler_info()["workers"])[0]

    def hide():  # this worker mounts nothing at that path
        import repviz.distributed
        from repviz.store import NotFoundError

        def missing(path, out=None):
            raise NotFoundError(f"log directory {str(path)!r} does not exist")

        repviz.distributed.open_logdir = missing

    def show():
        import repviz.distributed
        import repviz.store

        repviz.distributed.open_logdir = repviz.store.open_logdir

    client.run(hide, workers=[worker])
    try:
        with pytest.raises(ValueError, match=rf"^Dask worker {worker} cannot see the log directory "
                                             rf"'{tmp_path / 'logs'}' as this process does \(NotFoundError: log "
                                             rf"directory .* does not exist\); put it on a filesystem every worker"):
            embed_logdir(tmp_path / "logs", ["pca"], executor=DaskExecutor(client))
    finally:
        client.run(show, workers=[worker])
    assert not list((tmp_path / "logs").rglob("embeddings"))  # nothing was sent


def test_cli_embed_on_a_scheduler_address(tmp_path, client, capsys, monkeypatch, cluster_run):
    cluster_run(tmp_path / "logs" / "r1")
    monkeypatch.chdir(tmp_path)  # a relative log directory reaches the workers as an absolute path
    assert main(["embed", "logs", "--method", "pca", "--scheduler", client.scheduler.address]) == 0
    out, err = capsys.readouterr()
    assert "8 computed, 0 cached, 0 failed" in out
    assert err.startswith("repviz embed: Dask cluster with 2 worker(s)")
    assert main(["embed", "logs", "--method", "pca", "--jobs", "2", "--scheduler", client.scheduler.address]) == 2
    assert "jobs=2 and executor= both choose where the chains run" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# meta-SNE
# ---------------------------------------------------------------------------------------------------------------

def test_meta_on_the_cluster_equals_local_and_stays_incremental(tmp_path, client, cluster_run):
    from repviz.meta import MetaSNE

    for where in ("local", "cluster"):
        writer = cluster_run(tmp_path / where / "r1", steps=range(3), n=60, width=8)
        cluster_run(tmp_path / where / "r2", steps=range(2), n=60, width=8, seed=1)
        writer.write_activation("a", 3, np.zeros((60, 8), np.float32))  # all probes coincide: left out
    events = []
    meta = MetaSNE(robustness=True, block_bytes=1 << 14,  # several column blocks per Gram task
                   progress=lambda *e: events.append(e))
    with pytest.warns(RuntimeWarning, match="left out 1 representation"):
        remote = meta.fit(tmp_path / "cluster", executor=DaskExecutor(client))
    with pytest.warns(RuntimeWarning, match="left out 1 representation"):
        local = MetaSNE(robustness=True).fit(tmp_path / "local")
    assert remote.keys == local.keys and len(remote) == 10
    assert remote.info["left_out"] == local.info["left_out"]
    assert np.abs(remote.distances - local.distances).max() <= 1e-10
    assert abs(remote.robustness - local.robustness) <= 1e-10
    # 10 vectors: the collapsed snapshot is marked constant at capture and left out without being read
    assert {e[0] for e in events} >= {"vectors", "distances"} and ("vectors", 10, 10, "") in events

    # new snapshots: only their vectors are computed (the others are banked), and their rows extend the cache
    rng = np.random.default_rng(5)
    new = {(lay, s): rng.normal(size=(60, 8)).astype(np.float32) for lay in ("a", "b") for s in (4, 5)}
    for where in ("local", "cluster"):
        w = RunWriter(tmp_path / where / "r1")
        w.begin(open_logdir(tmp_path / where).run("r1").manifest)
        for (lay, s), X in new.items():
            w.write_activation(lay, s, X)
    before = {p.name for p in (tmp_path / "cluster").rglob("vectors-dist-*/*.npy")}
    with pytest.warns(RuntimeWarning, match="left out 1 representation"):
        remote = MetaSNE(robustness=True).fit(tmp_path / "cluster", executor=DaskExecutor(client))
    with pytest.warns(RuntimeWarning, match="left out 1 representation"):
        local = MetaSNE(robustness=True, cache=False).fit(tmp_path / "local")
    after = {p.name for p in (tmp_path / "cluster").rglob("vectors-dist-*/*.npy")}
    assert len(after - before) == 4  # the four new vectors
    assert remote.keys == local.keys and len(remote) == 14
    assert np.abs(remote.distances - local.distances).max() <= 1e-10


def test_cli_meta_on_a_scheduler_address(tmp_path, client, capsys, cluster_run):
    cluster_run(tmp_path / "r1", steps=range(3), n=60, width=8)
    assert main(["meta", str(tmp_path), "--scheduler", client.scheduler.address]) == 0
    out = capsys.readouterr().out
    assert "6 representations of 60 probes" in out


@pytest.mark.parametrize("spec", ["local[x]", "local[0]", "locally", ""])
def test_a_bad_scheduler_is_one_clear_error(spec):
    from repviz.distributed import connect

    with pytest.raises(ValueError, match=r"^(--scheduler must be a scheduler address \(tcp://host:8786\) or "
                                         r"local\[N\] \(N worker processes on this machine\)|local\[N\] needs "
                                         rf"at least one worker); got '{re.escape(spec)}'$"):
        with connect(spec):
            pass


def test_an_unreachable_scheduler_is_one_clear_error(tmp_path, capsys):
    import socket

    from repviz.distributed import SchedulerUnreachable, connect

    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(SchedulerUnreachable, match=rf"^no Dask scheduler answered at {re.escape(address)} "
                                                       r"within 1s \("):
            with connect(address, timeout="1s"):
                pass
