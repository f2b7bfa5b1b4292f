"""The embedding pipeline: cache, resume after a kill, alignment, failure isolation, CLI."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from repviz import open_logdir
from repviz.align import align_to, mean_displacement, procrustes_rotation
from repviz.chains import ChainTask
from repviz.cli import main
from repviz.executors import LocalExecutor
from repviz.methods import METHODS, params_hash, register_method, resolve
from repviz.pipeline import embed_logdir, execute
from repviz.planning import plan_embeddings
from repviz.store import NotFoundError


def _mtimes(logdir) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in Path(logdir).rglob("embeddings/**/*.npy")}


# ---------------------------------------------------------------------------------------------------------------
# keys and parameters
# ---------------------------------------------------------------------------------------------------------------

def test_params_hash_is_stable():
    # a fixed value: the hash must not change between Python versions, machines or processes
    assert params_hash({"b": 1, "a": [1.5, "x", None, True]}) == params_hash({"a": [1.5, "x", None, True], "b": 1.0})
    # sha256 of the canonical JSON '{"a":[1.5,"x",null,true],"b":1}'
    assert params_hash({"b": 1, "a": [1.5, "x", None, True]}) == "a1fbfff801"
    assert params_hash({"a": 1}) != params_hash({"a": 2})
    implicit, explicit = resolve("pca"), resolve("pca", {"random_state": 0, "n_components": 2})
    assert implicit.key == explicit.key and implicit.key.startswith("pca-")
    assert resolve("pca", {"n_components": 3}).key != implicit.key
    assert resolve("pca", align="none").key != implicit.key
    out = subprocess.run([sys.executable, "-c", "from repviz.methods import resolve; print(resolve('pca').key)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == implicit.key


@pytest.mark.parametrize("call, match", [
    (lambda: resolve("tnse"), r"unknown method 'tnse'; available: .*pca"),
    (lambda: resolve("pca", {"perplexity": 5}), r"unknown parameter 'perplexity' for method 'pca'; it accepts: "),
    (lambda: resolve("pca", {"n_components": -3}), r"The 'n_components' parameter of PCA must be .* Got -3"),
    (lambda: resolve("pca", align="epochs"), r"The 'align' parameter of embed_logdir must be .* Got 'epochs'"),
    (lambda: register_method("x", "m:C", align="rotate"), r"The 'align' parameter of register_method"),
])
def test_bad_methods_and_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_registered_method_runs_through_the_pipeline(tmp_path, name, cluster_run):
    try:
        METHODS[name].estimator_class()
    except ValueError as e:  # an optional extra (umap-learn) that is not installed
        pytest.skip(str(e))
    cluster_run(tmp_path / "r1", layers=("a",), steps=range(2), n=60)
    # neighbourhoods must span the 4 clusters of 15 points for the graph methods
    params = {"tsne": {"perplexity": 10, "max_iter": 300, "n_jobs": 1}, "lle": {"n_neighbors": 20}}.get(name)
    result = embed_logdir(tmp_path, [name], {name: params} if params else None)
    assert (result.computed, result.failed) == (2, [])
    Y = open_logdir(tmp_path).run("r1").embedding("a", 1, result.keys[name])
    assert Y.shape == (60, 2) and np.isfinite(Y).all()


# ---------------------------------------------------------------------------------------------------------------
# cache and resume
# ---------------------------------------------------------------------------------------------------------------

def test_second_run_computes_nothing_and_a_changed_source_is_recomputed(tmp_path, cluster_run):
    writer = cluster_run(tmp_path / "r1")
    cluster_run(tmp_path / "r2", seed=1)
    first = embed_logdir(tmp_path, ["pca"])
    assert (first.computed, first.cached, first.failed) == (16, 0, [])
    before = _mtimes(tmp_path)
    assert len(before) == 16
    second = embed_logdir(tmp_path, ["pca"])
    assert (second.computed, second.cached) == (0, 16)
    assert _mtimes(tmp_path) == before
    # a repeated request finds its key in the store: the numerical code (numba) is not even imported
    code = (f"import sys; from repviz.pipeline import embed_logdir; r = embed_logdir({str(tmp_path)!r}, ['pca']); "
            f"print(r.computed, r.cached, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "16", "False"]

    # the activations of r1/a at step 2 are rewritten: steps 2 and 3 of that chain are recomputed, nothing else
    writer.write_activation("a", 2, np.random.default_rng(5).normal(size=(120, 12)).astype(np.float32))
    third = embed_logdir(tmp_path, ["pca"])
    assert (third.computed, third.cached) == (2, 14)
    changed = {p for p, t in _mtimes(tmp_path).items() if before[p] != t}
    assert changed == {str(tmp_path / f"r1/plugins/repviz/embeddings/{first.keys['pca']}/a/{s}.npy") for s in (2, 3)}
    run = open_logdir(tmp_path).run("r1")
    info = run.embeddings.info(first.keys["pca"], "a", 2)
    assert info["source"]["crc32"] == run.record("a", 2)["crc32"] and info["init_from"] == ["a", 1]


def test_the_cache_checks_what_it_finds(tmp_path, cluster_run):
    """Non-regression: a truncated embedding counted as cached, and a damaged or hand-replaced snapshot was never
    noticed (the recorded checksum was not compared with the file)."""
    cluster_run(tmp_path / "r1")
    key = embed_logdir(tmp_path, ["pca"]).keys["pca"]
    run = open_logdir(tmp_path).run("r1")
    emb = run.root / "embeddings" / key / "b" / "1.npy"
    emb.write_bytes(emb.read_bytes()[:-8])  # a full disk cut the file short
    again = embed_logdir(tmp_path, ["pca"])
    assert (again.computed, again.cached, again.failed) == (3, 5, [])  # b/1 and the rest of its chain
    assert run.embeddings.read(key, "b", 1).shape == (120, 2)

    source = run.root / run.record("a", 2)["file"]
    data = bytearray(source.read_bytes())
    data[-5] ^= 0xFF  # one flipped bit pattern, same size: found when the source is read
    source.write_bytes(bytes(data))
    embed_logdir(tmp_path, ["pca"], {"pca": {"n_components": 3}})  # another key reads every source
    flipped = embed_logdir(tmp_path, ["pca"], {"pca": {"n_components": 3}})
    assert [(f["layer"], f["step"]) for f in flipped.failed] == [("a", 2)]
    assert "does not match the checksum recorded" in flipped.failed[0]["error"]

    np.save(source, np.zeros((120, 5), np.float32))  # replaced by hand with another shape: found from its header
    replaced = embed_logdir(tmp_path, ["pca"])
    assert ("a", 2) in [(f["layer"], f["step"]) for f in replaced.failed]
    assert "does not hold the shape and dtype recorded" in replaced.failed[0]["error"]


def _nonfinite(emb) -> None:
    Y = np.load(emb)
    Y[5] = [np.nan, np.inf]
    raw = emb.read_bytes()
    emb.write_bytes(raw[:len(raw) - Y.nbytes] + Y.tobytes())


@pytest.mark.parametrize("damage", [
    _nonfinite,
    lambda emb: emb.with_suffix(".json").write_bytes(emb.with_suffix(".json").read_bytes()[:40]),
    lambda emb: emb.with_suffix(".json").write_text('{"source": ["crc32"], "scores": "high"}')],
    ids=["non-finite coordinates", "sidecar cut short", "sidecar of wrong types"])
def test_a_damaged_cached_embedding_is_computed_again(tmp_path, cluster_run, damage):
    """Non-regression (issue #32 items 7, 8): NaN written into a stored embedding counted as cached, and a cut-short
    sidecar stopped the whole embed (exit 2); now that snapshot and the rest of its chain are computed again."""
    cluster_run(tmp_path / "r1")
    key = embed_logdir(tmp_path, ["pca"]).keys["pca"]
    run = open_logdir(tmp_path).run("r1")
    damage(run.root / "embeddings" / key / "b" / "1.npy")
    again = embed_logdir(tmp_path, ["pca"])
    assert (again.computed, again.cached, again.failed) == (3, 5, [])  # b/1 and the rest of its chain
    assert np.isfinite(run.embeddings.read(key, "b", 1)).all()
    assert run.embeddings.info(key, "b", 1)["source"]["crc32"] == run.record("b", 1)["crc32"]


def test_a_run_without_its_probe_fails_per_representation_and_the_others_go_on(tmp_path, cluster_run):
    """Non-regression (issue #32 item 3): a run whose probe directory was removed made `repviz embed` exit 2."""
    cluster_run(tmp_path / "r1")
    cluster_run(tmp_path / "r2")
    shutil.rmtree(tmp_path / "r2" / "plugins" / "repviz" / "probe")
    result = embed_logdir(tmp_path, ["pca"])
    assert (result.computed, result.cached) == (8, 0)  # r1: 2 layers x 4 steps
    assert sorted((f["run"], f["layer"], f["step"]) for f in result.failed) == [
        ("r2", layer, step) for layer in ("a", "b") for step in range(4)]
    assert all("ids.npy is missing" in f["error"] for f in result.failed)


def test_embedding_by_method_name_scores_and_layer_alignment(tmp_path, cluster_run):
    cluster_run(tmp_path / "r1")
    default = embed_logdir(tmp_path, ["pca"])
    other = embed_logdir(tmp_path, ["pca"], {"pca": {"n_components": 3}}, align="layers")
    run = open_logdir(tmp_path).run("r1")
    Y = run.embedding("b", 3, method="pca")
    assert Y.shape == (120, 2) and Y.dtype == np.float32
    np.testing.assert_array_equal(Y, run.embeddings.read(default.keys["pca"], "b", 3))
    assert run.embedding("b", 3, "pca", {"n_components": 3}).shape == (120, 3)
    assert run.embeddings.key("pca", {"align": "layers"}) == other.keys["pca"]
    assert run.embeddings.info(other.keys["pca"], "b", 3)["init_from"] == ["a", 3]  # chained along the layers
    scores = run.embedding_scores("b", 3, "pca")
    assert {"trustworthiness", "continuity", "knn_preservation", "knn_accuracy"} <= set(scores)
    assert scores["trustworthiness"] > 0.8
    with pytest.raises(NotFoundError, match=r"has 2 'pca' embeddings matching \{'random_state': 0\}"):
        run.embedding("b", 3, "pca", {"random_state": 0})
    with pytest.raises(NotFoundError, match=r"has no 'tsne' embeddings; it has: 'pca-"):
        run.embedding("b", 3, "tsne")


def test_default_values_spelled_out_find_the_default_embedding(tmp_path, cluster_run):
    """Non-regression: embed pca, then whiten=true, then whiten=false (the default) left two keys neither marked
    default, so run.embedding(..., method="pca") failed with "2 'pca' embeddings matching {}"."""
    cluster_run(tmp_path / "r1", steps=range(2))
    first = embed_logdir(tmp_path, ["pca"]).keys["pca"]
    whitened = embed_logdir(tmp_path, ["pca"], {"pca": {"whiten": True}}).keys["pca"]
    again = embed_logdir(tmp_path, ["pca"], {"pca": {"whiten": False}})
    assert again.keys["pca"] == first != whitened and again.computed == 0
    run = open_logdir(tmp_path).run("r1")
    assert run.embeddings.key("pca") == first
    np.testing.assert_array_equal(run.embedding("a", 1, method="pca"), run.embeddings.read(first, "a", 1))


def test_parallel_jobs_give_the_same_embeddings(tmp_path, cluster_run):
    cluster_run(tmp_path / "one" / "r1")
    cluster_run(tmp_path / "two" / "r1")
    a = embed_logdir(tmp_path / "one", ["pca"], jobs=1)
    b = embed_logdir(tmp_path / "two", ["pca"], jobs=2)
    assert a.computed == b.computed == 8
    ra, rb = open_logdir(tmp_path / "one").run("r1"), open_logdir(tmp_path / "two").run("r1")
    for lay in ("a", "b"):
        for s in range(4):
            np.testing.assert_allclose(ra.embedding(lay, s, "pca"), rb.embedding(lay, s, "pca"), atol=1e-5)


_SLOW_SCRIPT = """
import signal, sys, time
from repviz.manifold import PCA
from repviz.methods import register_method
from repviz.cli import main

class SlowPCA(PCA):
    def fit(self, X, y=None):
        time.sleep(0.3)
        return super().fit(X, y)

register_method("slowpca", "__main__:SlowPCA", align="procrustes", defaults={"random_state": 0})
if __name__ == "__main__":  # spawned workers import this script too
    # Ctrl-C as at a terminal: a shell without job control starts background commands with SIGINT ignored,
    # and Python then installs no KeyboardInterrupt handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(["embed", sys.argv[1], "--method", "slowpca", "--jobs", sys.argv[2]]))
"""


@pytest.mark.parametrize("sig, jobs", [(signal.SIGKILL, 1), (signal.SIGINT, 1), (signal.SIGINT, 2),
                                       (signal.SIGTERM, 2), (signal.SIGKILL, 2)])
def test_a_killed_run_resumes_where_it_stopped(tmp_path, sig, jobs, cluster_run):
    """Workers die with the command however it is stopped (non-regression: after SIGTERM or SIGKILL of the main
    process, workers went on writing, then hung)."""
    psutil = pytest.importorskip("psutil")
    cluster_run(tmp_path / "logs" / "r1", steps=range(8))
    cluster_run(tmp_path / "fresh" / "r1", steps=range(8))
    script = tmp_path / "slow.py"
    script.write_text(_SLOW_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "logs"), str(jobs)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(_mtimes(tmp_path / "logs")) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert len(workers) >= (jobs if jobs > 1 else 0)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "repviz embed: interrupted" in err
    elif sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM and "repviz embed: terminated" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    stored = _mtimes(tmp_path / "logs")
    assert 3 <= len(stored) < 16
    time.sleep(1.0)
    assert _mtimes(tmp_path / "logs") == stored  # no worker is left computing

    # the same method without the sleep: same name and parameters, so the same key
    register_method("slowpca", "repviz.manifold:PCA", align="procrustes", defaults={"random_state": 0})
    resumed = embed_logdir(tmp_path / "logs", ["slowpca"])
    assert (resumed.computed, resumed.cached) == (16 - len(stored), len(stored))
    assert all(_mtimes(tmp_path / "logs")[p] == t for p, t in stored.items())  # nothing stored was redone
    embed_logdir(tmp_path / "fresh", ["slowpca"])
    done, fresh = open_logdir(tmp_path / "logs").run("r1"), open_logdir(tmp_path / "fresh").run("r1")
    for lay in ("a", "b"):
        for s in range(8):
            np.testing.assert_allclose(done.embedding(lay, s, "slowpca"), fresh.embedding(lay, s, "slowpca"),
                                       atol=1e-5)


def test_a_killed_worker_fails_its_chain_and_the_rest_finishes(tmp_path, cluster_run):
    """Non-regression: SIGKILL of one worker (the OOM killer) ended the command with a BrokenProcessPool
    traceback."""
    psutil = pytest.importorskip("psutil")
    cluster_run(tmp_path / "logs" / "r1", layers=("a", "b", "c"), steps=range(8))
    script = tmp_path / "slow.py"
    script.write_text(_SLOW_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "logs"), "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(_mtimes(tmp_path / "logs")) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    workers = [c for c in psutil.Process(proc.pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
    workers[0].kill()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "WorkerDied: a worker process stopped in the middle of a task (killed by " \
                                      "signal 9" in err
    failed = err.count("repviz embed: skipped")
    assert failed >= 1 and "computed" in out and "failed in" in out
    resumed = embed_logdir(tmp_path / "logs", ["pca"], align="snapshots")  # a fresh method finishes everything
    assert resumed.failed == []
    register_method("slowpca", "repviz.manifold:PCA", align="procrustes", defaults={"random_state": 0})
    again = embed_logdir(tmp_path / "logs", ["slowpca"])
    assert again.failed == [] and again.computed >= 1 and again.computed + again.cached == 24


def test_a_plan_reads_only_and_executing_it_equals_embed_logdir(tmp_path, cluster_run):
    for where in ("planned", "direct"):
        cluster_run(tmp_path / where / "r1", nan_at=(("b", 1),))
    plan = plan_embeddings(tmp_path / "planned", ["pca", "mds"])
    assert not list((tmp_path / "planned").rglob("embeddings"))  # planning writes nothing
    assert all(isinstance(task, ChainTask) for task in plan.tasks) and plan.total == 16 and plan.cached == 0
    assert [(t.resolved.method.name, t.items[0], len(t.items), t.init_from) for t in plan.tasks] == [
        ("mds", ("a", 0), 4, None), ("mds", ("b", 0), 4, None),  # chains continuing by init= first
        ("pca", ("a", 0), 4, None), ("pca", ("b", 0), 4, None)]
    shipped = pickle.loads(pickle.dumps(plan))  # what a cluster client would send
    assert [t.items for t in shipped.tasks] == [t.items for t in plan.tasks]

    events = []
    result = execute(shipped, progress=lambda *event: events.append(event))
    assert events == [("embed", done, 16, "") for done in range(17)]
    direct = embed_logdir(tmp_path / "direct", ["pca", "mds"])
    assert (result.computed, result.cached, len(result.failed)) == (direct.computed, direct.cached, 2) == (14, 0, 2)
    assert result.keys == direct.keys and result.rows == direct.rows

    again = plan_embeddings(tmp_path / "planned", ["pca", "mds"])
    assert (again.tasks, again.cached, len(again.failed)) == ([], 14, 2)  # (b, 1) is known to fail
    with pytest.raises(ValueError, match=r"The 'jobs' parameter of LocalExecutor must be an int .* Got 0 instead"):
        execute(again, LocalExecutor(jobs=0))


# ---------------------------------------------------------------------------------------------------------------
# failures and the command line
# ---------------------------------------------------------------------------------------------------------------

def test_a_failing_representation_is_reported_and_skipped(tmp_path, capsys, cluster_run):
    """A dead layer (marked constant at capture) is left out, not failed: one line, and no exit 1 for it."""
    cluster_run(tmp_path / "r1", layers=("a", "dead", "c"), dead=("dead",), nan_at=(("c", 2),))
    result = embed_logdir(tmp_path, ["pca"])
    assert result.computed == 4 + 3
    assert {(f["layer"], f["step"]) for f in result.failed} == {("c", 2)}
    assert {(f["layer"], f["step"]) for f in result.constant} == {("dead", s) for s in range(4)}
    run = open_logdir(tmp_path).run("r1")
    assert run.embeddings.info(result.keys["pca"], "c", 3)["init_from"] == ["c", 1]  # the chain skips the hole
    assert run.embeddings.steps(result.keys["pca"], "dead") == []

    assert main(["embed", str(tmp_path), "--method", "pca"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "repviz embed: skipped run 'r1' layer 'c' (pca) at step(s) 2: 1 non-finite value(s) (NaN or infinity) "
        "in the activations",
        "repviz embed: left out 4 constant representation(s), the same for every probe point (e.g. a dead ReLU "
        "layer; nothing to embed): 'r1'/'dead' at step(s) 0, 1, 2, 3"]
    assert "0 computed, 7 cached, 1 failed, 4 constant (left out)" in out


def test_dead_layers_alone_leave_embed_exit_0(tmp_path, capsys, cluster_run):
    """Before: 4 failed, exit 1. Now 0 failed, 4 constant left out, exit 0; also for a run recorded before capture
    marked constant snapshots (found on reading)."""
    cluster_run(tmp_path / "r1", layers=("a", "dead"), dead=("dead",))
    records = tmp_path / "r1" / "plugins" / "repviz" / "records.jsonl"
    records.write_text(records.read_text().replace('"constant": true, ', ""))
    assert main(["embed", str(tmp_path), "--method", "pca"]) == 0
    out, err = capsys.readouterr()
    assert "4 computed, 0 cached, 0 failed, 4 constant (left out)" in out
    assert len(err.splitlines()) == 1 and "left out 4 constant representation(s)" in err


def test_cli_prints_the_summary_table(tmp_path, capsys, cluster_run):
    cluster_run(tmp_path / "r1")
    assert main(["embed", str(tmp_path), "--method", "pca", "--layers", "b", "--steps", "0,2",
                 "--param", "pca.n_components=2", "--jobs", "1"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert err == ""
    assert lines[0].split() == ["run", "layer", "method", "snapshots", "last", "step", "trust", "kNN", "kept",
                                "10-NN", "acc"]
    assert lines[1].split()[:5] == ["r1", "b", "pca", "2", "2"]
    assert lines[2].startswith("2 computed, 0 cached, 0 failed")


@pytest.mark.parametrize("args, message", [
    (["--method", "tnse"], "unknown method 'tnse'; available: "),
    (["--method", "pca", "--param", "pca.perplexity=5"], "unknown parameter 'perplexity' for method 'pca'"),
    (["--method", "pca", "--param", "tsne.perplexity=5"], "parameters given for method 'tsne', which is not"),
    (["--method", "pca", "--param", "perplexity"], "--param must look like METHOD.NAME=VALUE"),
    (["--method", "pca", "--runs", "nope"], "run 'nope' is not in "),
    (["--method", "pca", "--layers", "nope"], "layer 'nope' is not in run(s) 'r1'; it has: 'a', 'b'"),
    (["--method", "pca", "--steps", "9"], "step 9 of layer 'a' is not in run 'r1'; it has steps: 0, 1, 2, 3"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, message, cluster_run):
    cluster_run(tmp_path / "r1")
    assert main(["embed", str(tmp_path), *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"repviz embed: error: {message}")


def test_cli_refuses_a_directory_that_is_not_a_repviz_log(tmp_path, capsys):
    (tmp_path / "events").mkdir()
    assert main(["embed", str(tmp_path), "--method", "pca"]) == 2
    assert capsys.readouterr().err.startswith(f"repviz embed: error: '{tmp_path}' holds no repviz runs")


# ---------------------------------------------------------------------------------------------------------------
# alignment
# ---------------------------------------------------------------------------------------------------------------

def test_procrustes_recovers_a_rotated_reflected_copy():
    Y = np.random.default_rng(0).normal(size=(50, 2))
    theta = 0.7
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]) @ np.diag([1, -1])
    moved = Y @ R + [3.0, -1.0]
    np.testing.assert_allclose(procrustes_rotation(moved, Y), R.T, atol=1e-10)
    np.testing.assert_allclose(align_to(moved, Y), Y, atol=1e-5)
    assert mean_displacement(Y, Y) == 0.0 and mean_displacement(moved, Y) > 0.5


def _train_and_capture(logdir, digits, epochs_before=30, snapshots=4):
    """A small MLP on scikit-learn's digits, trained to convergence, captured at its last epochs."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    keras = pytest.importorskip("keras")

    from repviz import ActivationLogger

    x, y = (digits[0] / 16).astype(np.float32), digits[1]
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu", name="hidden"),
                              keras.layers.Dense(10, activation="softmax", name="out")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(str(logdir / "mlp"), probe=(x[:300], y[:300]), layers=["hidden"],
                              freq=list(range(epochs_before, epochs_before + snapshots)))
    model.fit(x, y, epochs=epochs_before + snapshots, batch_size=64, verbose=0, callbacks=[logger])


def _consecutive_displacement(run, key, layer):
    steps = run.embeddings.steps(key, layer)
    return np.mean([mean_displacement(run.embeddings.read(key, layer, a), run.embeddings.read(key, layer, b))
                    for a, b in zip(steps, steps[1:])])


@pytest.mark.slow
def test_aligned_snapshots_of_a_converged_network_move_far_less(tmp_path, digits):
    _train_and_capture(tmp_path, digits, epochs_before=30, snapshots=5)
    run = open_logdir(tmp_path).run("mlp")
    converged = run.steps("hidden")[1:]  # the capture also holds epoch 0, before training
    params = {"tsne": {"perplexity": 20, "n_jobs": 1}}
    aligned = embed_logdir(tmp_path, ["tsne", "pca"], params, steps=converged)
    independent = embed_logdir(tmp_path, ["tsne", "pca"], params, steps=converged, align="none")
    assert aligned.failed == independent.failed == []
    for method, margin in (("tsne", 0.5), ("pca", 1.0)):
        d_aligned = _consecutive_displacement(run, aligned.keys[method], "hidden")
        d_independent = _consecutive_displacement(run, independent.keys[method], "hidden")
        print(f"{method}: mean displacement aligned {d_aligned:.3f}, independent {d_independent:.3f}")
        assert d_aligned <= margin * d_independent + 1e-6
    assert run.embedding_scores("hidden", converged[-1], aligned.keys["tsne"])["trustworthiness"] > 0.95


def test_import_repviz_stays_light(repo):
    code = textwrap.dedent("""
        import sys, repviz
        assert callable(repviz.embed_logdir)
        heavy = [m for m in ("keras", "tensorflow", "numba") if m in sys.modules]
        print(heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "[]"


def test_tuple_parameters_reach_the_estimator_and_the_cache_key(tmp_path, cluster_run):
    from repviz.cli import _parse_value

    assert _parse_value("128,32") == (128, 32)
    cluster_run(tmp_path / "r1", layers=("a",), steps=range(2), n=40)
    keys = {}
    for hidden in ((8, 4), (8,)):
        result = embed_logdir(tmp_path, ["autoencoder"], {"autoencoder": {"hidden": hidden, "epochs": 2}})
        assert (result.computed, result.failed) == (2, [])
        keys[hidden] = result.keys["autoencoder"]
    assert keys[(8, 4)] != keys[(8,)]
    assert resolve("autoencoder", {"hidden": [8, 4], "epochs": 2}).key == keys[(8, 4)]
