"""Live embedding: ``ActivationLogger(embed=...)`` embeds each stored snapshot in a background process, with the
same keys and results as ``repviz embed`` afterwards; a crashed fit still leaves readable logs, embedded."""

from __future__ import annotations

import os
import signal

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import repviz  # noqa: E402
from repviz import follow  # noqa: E402
from repviz.store import RunWriter  # noqa: E402

N = 40


def test_each_snapshot_is_embedded_as_repviz_embed_would(tmp_path, capfd, tiny_classifier):
    model, x, y = tiny_classifier()
    logger = repviz.ActivationLogger(tmp_path / "live", probe=(x[:N], y[:N]), embed="pca")
    model.fit(x, y, epochs=2, batch_size=20, verbose=0, callbacks=[logger])
    assert logger.wait_embeddings(timeout=300)
    assert "repviz follow" not in capfd.readouterr().err  # the follower reported no failed pass
    live = repviz.open_logdir(tmp_path).run("live")
    key = live.embeddings.key("pca")
    assert {layer: live.embeddings.steps(key, layer) for layer in live.layers} == {"hidden": [0, 1, 2],
                                                                                    "out": [0, 1, 2]}
    # the same snapshots embedded afterwards by `repviz embed`: same key, same arrays, nothing new computed
    copy = RunWriter(tmp_path / "after" / "live")
    copy.begin(live.manifest)
    copy.write_probe(live.probe.ids, live.probe.labels, live.probe.thumbnails)
    for record in live.records():
        if record["kind"] == "activation":
            copy.write_activation(record["layer"], record["step"], live.read_array(record))
    result = repviz.embed_logdir(tmp_path / "after", methods=["pca"], progress=False)
    after = repviz.open_logdir(tmp_path / "after").run("live")
    assert result.keys["pca"] == key and result.computed == 6
    for layer in live.layers:
        for step in (0, 1, 2):
            np.testing.assert_allclose(live.embeddings.read(key, layer, step), after.embeddings.read(key, layer, step),
                                       rtol=1e-5, atol=1e-6)
    assert repviz.embed_logdir(tmp_path, methods=["pca"], progress=False).computed == 0  # all cached


def test_a_crashed_fit_leaves_readable_logs_that_get_embedded(tmp_path, tiny_classifier):
    class Crash(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("training crashed")

    model, x, y = tiny_classifier(seed=1)
    logger = repviz.ActivationLogger(tmp_path / "crash", probe=(x[:N], y[:N]), embed=["pca", "cmds"])
    with pytest.raises(RuntimeError, match="training crashed"):
        model.fit(x, y, epochs=4, batch_size=20, verbose=0, callbacks=[logger, Crash()])
    assert logger.wait_embeddings(timeout=300)  # stores the snapshot still being written, then embeds it
    run = repviz.open_logdir(tmp_path).run("crash")
    assert run.steps() == [0, 1, 2] and run.activations("hidden", 2).shape == (N, 8)  # the crash after step 2
    for method in ("pca", "cmds"):
        assert run.embeddings.steps(run.embeddings.key(method), "out") == [0, 1, 2]


CRASHING_SCRIPT = """
import sys, time
import numpy as np, keras
import repviz
from repviz.capture import writer

class Crash(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise RuntimeError("training crashed")

slow = writer.SnapshotWriter.store
def store(self, *args, **kwargs):  # a disk that falls behind: the snapshot is still being written at the crash
    time.sleep(1.0)
    return slow(self, *args, **kwargs)
writer.SnapshotWriter.store = store

rng = np.random.default_rng(0)
x = rng.random((40, 6), dtype=np.float32)
y = (x[:, 0] > 0.5).astype(np.int64)
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, name="hidden"), keras.layers.Dense(2, name="out")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x, y, epochs=4, batch_size=20, verbose=0,
          callbacks=[repviz.ActivationLogger(sys.argv[1], probe=(x, y)), Crash()])
"""


def test_a_script_that_crashes_keeps_its_last_snapshot(tmp_path, repo):
    """The writer's thread is a daemon: a script ended by the exception of a crashed fit (no on_train_end) still
    stores the snapshot it was writing, before the interpreter exits."""
    import subprocess
    import sys

    script = tmp_path / "crash.py"
    script.write_text(CRASHING_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "logs" / "crash")], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "training crashed" in done.stderr
    run = repviz.open_logdir(tmp_path / "logs").run("crash")
    assert run.steps() == [0, 1, 2] and run.activations("hidden", 2).shape == (40, 4)


def test_embed_is_checked_before_training(tmp_path, tiny_classifier):
    _, x, y = tiny_classifier()
    with pytest.raises(ValueError, match="'embed' parameter of ActivationLogger.*'tsne'.*Got 'tnse'"):
        repviz.ActivationLogger(tmp_path / "a", probe=(x, y), embed="tnse")
    with pytest.raises(ValueError, match="'embed' parameter"):
        repviz.ActivationLogger(tmp_path / "b", probe=(x, y), embed=[])
    assert repviz.ActivationLogger(tmp_path / "c", probe=(x, y)).wait_embeddings(timeout=0)  # none: done


def test_a_nudge_never_blocks_on_a_busy_follower(tmp_path):
    """A follower that reads nothing (busy embedding; here stopped): the pipe fills up and later nudges are
    dropped instead of stalling training."""
    busy = follow.start(str(tmp_path), "run", ["pca"])
    try:
        assert not os.get_blocking(busy.stdin.fileno())  # else a full pipe would block the nudge below for good
        os.kill(busy.pid, signal.SIGSTOP)
        for _ in range(100_000):  # about 900 KB, far beyond a pipe's buffer
            follow.nudge(busy)
    finally:
        busy.kill()
        busy.wait()
    busy.stdin.close()
    follow.nudge(busy)  # closed: dropped too
