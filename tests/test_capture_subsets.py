"""ActivationLogger(batch_probe=...): batch snapshots of a subset of the probe; snapshots written in blocks.

Stored values are checked against the model itself (run on the subset after training) and the subset against the
probe's class counts; the store is read back through ``open_logdir`` as a user would.
"""

import errno
import os
import threading
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

import repviz
from repviz import store
from repviz.capture import ActivationLogger, writer
from repviz.chains import verified_activations
from repviz.cli import main

N = 40  # probe rows


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = np.arange(n) % 4  # 10 of each class among the first 40
    return x, y


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="hidden"),
                             keras.layers.Dense(4, activation="softmax", name="out")])


def _fit(run_dir, batches=4, **kwargs):
    x, y = _data()
    model = _model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(run_dir, probe=(x[:N], y[:N]), **kwargs)
    model.fit(x, y, epochs=1, batch_size=len(x) // batches, shuffle=False, verbose=0, callbacks=[logger])
    return model, repviz.open_logdir(run_dir.parent).run(run_dir.name)


def test_batch_snapshots_store_the_subset_and_the_first_snapshot_the_whole_probe(tmp_path):
    model, run = _fit(tmp_path / "run", batch_freq=2, batch_probe=8, seed=3)
    assert run.steps() == [0, 2, 4]
    np.testing.assert_array_equal(run.rows("hidden", 0), np.arange(N))
    rows = run.rows("hidden", 2)
    assert len(rows) == 8 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(run.rows("hidden", 4), rows)
    np.testing.assert_array_equal(run.prediction_rows(4), rows)
    np.testing.assert_array_equal(np.bincount(run.probe.labels[rows]), [2, 2, 2, 2])  # stratified by class
    assert run.manifest["batch_probe"] == {"n": 8, "seed": 3, "by": "class"}
    # the last snapshot (after the last batch) is the trained model on exactly those probe points
    x = _data()[0][:N][rows]
    hidden = keras.Model(model.inputs, model.get_layer("hidden").output)
    np.testing.assert_allclose(run.activations("hidden", 4), keras.ops.convert_to_numpy(hidden(x)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(run.predictions(4), keras.ops.convert_to_numpy(model(x)), rtol=1e-5, atol=1e-6)
    assert run.activations("hidden", 0).shape == (N, 8) and run.predictions(0).shape == (N, 4)


def test_the_same_seed_draws_the_same_subset_and_given_positions_are_kept(tmp_path):
    _, a = _fit(tmp_path / "a", batch_freq=2, batch_probe=8, seed=3)
    _, b = _fit(tmp_path / "b", batch_freq=2, batch_probe=8, seed=3)
    np.testing.assert_array_equal(a.rows("hidden", 2), b.rows("hidden", 2))
    _, c = _fit(tmp_path / "c", batch_freq=2, batch_probe=[30, 1, 7])
    np.testing.assert_array_equal(c.rows("hidden", 2), [1, 7, 30])
    assert c.manifest["batch_probe"] == {"n": 3, "by": "positions"}


def test_a_batch_probe_larger_than_the_probe_records_the_whole_probe_with_a_warning(tmp_path):
    with pytest.warns(RuntimeWarning, match="exceeds the probe's 40 points"):
        _, run = _fit(tmp_path / "run", batch_freq=2, batch_probe=500)
    assert "rows" not in run.record("hidden", 2) and "batch_probe" not in run.manifest


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_probe=8), "pass batch_freq= too"),
    (dict(batch_freq=2, batch_probe=[1, 1, 3]), "distinct positions into the probe"),
    (dict(batch_freq=2, batch_probe=[0, 40]), r"\(0 to 39\)"),
    (dict(batch_freq=2, batch_probe=0), "'batch_probe' parameter"),
], ids=["no-batch-schedule", "repeated", "outside", "zero"])
def test_a_batch_probe_that_cannot_apply_is_refused_in_one_line(tmp_path, kwargs, match):
    x, y = _data()
    with pytest.raises(ValueError, match=match) as e:
        ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), **kwargs)
    assert "\n" not in str(e.value)


def test_snapshots_written_in_blocks_match_their_checksums_float16_and_sketched(tmp_path):
    """Several probe batches per snapshot, a count-sketched layer and float16 storage: every file reads back
    through the checksum recorded while its blocks were written."""
    _, run = _fit(tmp_path / "run", batch_freq=2, batch_probe=20, batch_size=6, dtype="float16", max_width=4,
                  projection_dim=3)
    for step in run.steps():
        for layer in run.layers:
            X = verified_activations(run, layer, step)
            assert X.dtype == np.float16 and len(X) == len(run.rows(layer, step))
    assert run.layer_info("hidden")["stored_shape"][1] == 3
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_fit_with_batch_probe_embeds_and_info_says_so(tmp_path, capsys):
    """End to end: a run mixing whole and subset snapshots embeds (t-SNE chain, PCA), and `repviz info` names the
    subset snapshots."""
    _fit(tmp_path / "run", batch_freq=2, batch_probe=20, seed=1)
    result = repviz.embed_logdir(tmp_path, ["tsne", "pca"], {"tsne": {"perplexity": 5}}, progress=False)
    assert (result.computed, result.failed) == (12, [])  # 2 layers x 3 snapshots x 2 methods
    run = repviz.open_logdir(tmp_path).run("run")
    assert [len(run.embedding(layer, step, "tsne")) for layer in ("hidden", "out") for step in (0, 2, 4)] == \
        [N, 20, 20] * 2
    assert main(["info", str(tmp_path)]) == 0
    assert "subset snapshots: 20 of 40 probe points at 2 (batches 2, 4), drawn by class with seed 1\n" in \
        capsys.readouterr().out


class _FillingFile:
    """A file that takes ``budget[0]`` more writes, then finds the disk full."""

    def __init__(self, file, budget: list[int]):
        self.file, self.budget = file, budget

    def write(self, data):
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.file.write(data)

    def close(self):
        self.file.close()


@pytest.mark.parametrize("writes", [2, 3], ids=["training-thread", "writer-thread"])
def test_a_disk_full_during_a_snapshot_leaves_the_earlier_snapshots_and_no_temporary_file(tmp_path, monkeypatch,
                                                                                          writes):
    """The disk fills during the first batch snapshot (step 2), after ``writes`` of its writes: in a batch the
    training thread writes (2) or in the last one, the writer's (3). Only that snapshot's files count the writes, as
    snapshot 0's last writes may still be under way in the writer thread when the training thread starts it."""
    budget = [writes]
    opened = store.ArrayBlocks.__init__

    def filling(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        if self.path.stem != "0":
            self._file = _FillingFile(self._file, budget)

    monkeypatch.setattr(store.ArrayBlocks, "__init__", filling)
    with pytest.raises(store.DiskFullError, match="disk full"):
        _fit(tmp_path / "run", batch_freq=2, batch_probe=20, batch_size=16)
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == [0] and run.activations("hidden", 0).shape == (N, 8)
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_disk_full_while_the_writer_still_holds_the_snapshot_before_leaves_no_temporary_file(tmp_path, monkeypatch):
    """The writer thread falls behind (each of its snapshots starts 0.3 s late), so the training thread's own
    snapshot finds the disk full while the writer still holds the snapshot before: the fit raises only once the
    writer has settled that one, so nothing half-written is left when the error reaches the user."""
    budget = [2]
    opened, submit = store.ArrayBlocks.__init__, writer.BackgroundWriter.submit

    def filling(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        if self.path.stem != "0":
            self._file = _FillingFile(self._file, budget)

    def late(self, job, discard):
        submit(self, lambda: time.sleep(0.3) or job(), discard)

    monkeypatch.setattr(store.ArrayBlocks, "__init__", filling)
    monkeypatch.setattr(writer.BackgroundWriter, "submit", late)
    with pytest.raises(store.DiskFullError, match="disk full"):
        _fit(tmp_path / "run", batch_freq=2, batch_probe=20, batch_size=16)
    assert repviz.open_logdir(tmp_path).run("run").steps() == [0]
    assert not list(tmp_path.rglob("*.tmp"))


def test_the_writes_queued_after_a_failed_one_are_discarded_not_run():
    """A snapshot must not be stored without the one before: the jobs queued behind a failed write are not run,
    their prepared files are discarded, and the failure reaches the training thread."""
    background, events = writer.BackgroundWriter(depth=2), []
    release = threading.Event()

    def failing():
        release.wait(10)
        raise OSError(errno.ENOSPC, "No space left on device")

    background.submit(failing, lambda: events.append("discarded first"))
    background.submit(lambda: events.append("ran second") or [], lambda: events.append("discarded second"))
    release.set()
    with pytest.raises(OSError, match="No space left"):
        background.close()
    assert events == ["discarded second"]


@pytest.mark.parametrize("batch_freq, subsets, whole", [(3, [3, 6], [0, 4, 8]), (2, [2, 6], [0, 4, 8])],
                         ids=["apart", "a-batch-snapshot-ends-an-epoch"])
def test_freq_with_batch_freq_and_batch_probe_adds_whole_probe_snapshots_after_those_epochs(tmp_path, batch_freq,
                                                                                           subsets, whole):
    """4 batches per epoch, 2 epochs: the batch snapshots hold the subset, the epoch ends the whole probe; a batch
    snapshot due at an epoch's end is that epoch's snapshot, recorded once."""
    x, y = _data()
    model = _model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), freq=1, batch_freq=batch_freq, batch_probe=8)
    model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == sorted(subsets + whole)
    assert [s for s in run.steps() if len(run.rows("hidden", s)) == 8] == subsets
    assert [s for s in run.steps() if len(run.rows("hidden", s)) == N] == whole
    assert [r["epoch"] for r in run.records() if r.get("layer") == "hidden" and r["step"] in whole] == [0, 1, 2]
    assert run.manifest["schedule"] == {"unit": "batch", "every": batch_freq, "after_epochs": 1}


def test_the_forward_pass_alone_runs_the_probe_batches_a_snapshot_stores(tmp_path):
    """``_probe_batches`` (what ``bench_capture.py`` times as the probe's own cost, beside the whole logger) runs
    the same batches of the same rows through the same function as the snapshot: after training, its outputs are
    the last snapshot's stored values, batch by batch, the last one flagged."""
    x, y = _data()
    model = _model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), batch_freq=2, batch_probe=8, batch_size=3)
    model.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    batches = list(logger._probe_batches(run.rows("hidden", 4)))
    assert [final for _, final in batches] == [False, False, True]
    hidden = [c.name for c in logger._captures].index("hidden")
    assert [len(b[0][hidden]) for b, _ in batches] == [3, 3, 2]
    host = keras.ops.convert_to_numpy  # a backend's tensor (PyTorch's requires grad) as numpy
    np.testing.assert_array_equal(np.concatenate([host(b[0][hidden]) for b, _ in batches]),
                                  run.activations("hidden", 4))
    np.testing.assert_array_equal(np.concatenate([host(b[1][0]) for b, _ in batches]), run.predictions(4))
