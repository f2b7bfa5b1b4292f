"""Live embedding: ``ActivationLogger(embed=...)`` embeds each stored snapshot in a background process, with the
same keys and results as ``repviz embed`` afterwards; a crashed fit still leaves readable logs, embedded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import repviz  # noqa: E402
from repviz import follow  # noqa: E402

N = 40


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((80, 6), dtype=np.float32)
    y = (x[:, :3].sum(axis=1) > x[:, 3:].sum(axis=1)).astype(np.int64)
    return x, y


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="hidden"),
                              keras.layers.Dense(2, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def test_each_snapshot_is_embedded_as_repviz_embed_would(tmp_path):
    x, y = _data()
    logger = repviz.ActivationLogger(tmp_path / "live", probe=(x[:N], y[:N]), embed="pca")
    _model().fit(x, y, epochs=2, batch_size=20, verbose=0, callbacks=[logger])
    assert logger.wait_embeddings(timeout=300)
    assert logger._follower.returncode == 0
    live = repviz.open_logdir(tmp_path).run("live")
    key = live.embedding_key("pca")
    assert {layer: live.embedding_steps(key, layer) for layer in live.layers} == {"hidden": [0, 1, 2],
                                                                                    "out": [0, 1, 2]}
    # the same log directory embedded afterwards by `repviz embed`: same key, same arrays, nothing new computed
    shutil.copytree(tmp_path / "live", tmp_path / "after" / "live", ignore=shutil.ignore_patterns("embeddings"))
    result = repviz.embed_logdir(tmp_path / "after", methods=["pca"], progress=False)
    after = repviz.open_logdir(tmp_path / "after").run("live")
    assert result.keys["pca"] == key and result.computed == 6
    for layer in live.layers:
        for step in (0, 1, 2):
            np.testing.assert_allclose(live.read_embedding(key, layer, step), after.read_embedding(key, layer, step),
                                       rtol=1e-5, atol=1e-6)
    assert repviz.embed_logdir(tmp_path, methods=["pca"], progress=False).computed == 0  # all cached


def test_a_crashed_fit_leaves_readable_logs_that_get_embedded(tmp_path):
    class Crash(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("training crashed")

    x, y = _data(1)
    logger = repviz.ActivationLogger(tmp_path / "crash", probe=(x[:N], y[:N]), embed=["pca", "cmds"])
    with pytest.raises(RuntimeError, match="training crashed"):
        _model().fit(x, y, epochs=4, batch_size=20, verbose=0, callbacks=[logger, Crash()])
    run = repviz.open_logdir(tmp_path).run("crash")
    assert run.steps() == [0, 1, 2] and run.activations("hidden", 2).shape == (N, 8)  # the crash after step 2
    assert logger.wait_embeddings(timeout=300)
    for method in ("pca", "cmds"):
        assert run.embedding_steps(run.embedding_key(method), "out") == [0, 1, 2]


def test_embed_is_checked_before_training(tmp_path):
    x, y = _data()
    with pytest.raises(ValueError, match="'embed' parameter of ActivationLogger.*'tsne'.*Got 'umap'"):
        repviz.ActivationLogger(tmp_path / "a", probe=(x, y), embed="umap")
    with pytest.raises(ValueError, match="'embed' parameter"):
        repviz.ActivationLogger(tmp_path / "b", probe=(x, y), embed=[])
    assert repviz.ActivationLogger(tmp_path / "c", probe=(x, y)).wait_embeddings(timeout=0)  # none: done


def test_a_nudge_never_blocks_on_a_busy_follower():
    """A follower that reads nothing (busy embedding): the pipe fills up and later nudges are dropped."""
    busy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE,
                            bufsize=0)
    os.set_blocking(busy.stdin.fileno(), False)
    try:
        for _ in range(100_000):  # about 900 KB, far beyond a pipe's buffer
            follow.nudge(busy)
    finally:
        busy.kill()
        busy.wait()
    busy.stdin.close()
    follow.nudge(busy)  # closed: dropped too
