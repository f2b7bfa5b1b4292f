"""The log-directory store on its own (no Keras): round trips, atomic writes, torn records, refusals, messages."""

import json
import multiprocessing
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from unittest.mock import ANY

import numpy as np
import pytest

from repviz import store
from repviz.store import IncompatibleRunError, NotFoundError, RunWriter, open_logdir

FP = {"model": "m1", "probe": "p1"}


def _writer(tmp_path, name="run", fingerprint=FP, layers=("dense", "block/conv"), **manifest):
    w = RunWriter(tmp_path / name)
    w.begin({"fingerprint": fingerprint, "step_unit": "epoch",
             "layers": {layer: {"stored_shape": [5, 3]} for layer in layers}, **manifest})
    return w


def test_round_trip(tmp_path):
    w = _writer(tmp_path)
    rng = np.random.default_rng(0)
    ids, labels = np.arange(10, 15), np.array([0, 1, 2, 1, 0])
    thumbs = rng.integers(0, 255, (5, 8, 8), dtype=np.uint8)
    w.write_probe(ids, labels, thumbs)
    arrays = {(layer, step): rng.normal(size=(5, 3)).astype(np.float32)
              for layer in ("dense", "block/conv") for step in (0, 1, 2)}
    for (layer, step), a in arrays.items():
        w.write_activation(layer, step, a, epoch=step)
    w.write_prediction(2, np.eye(5, dtype=np.float32))
    run = open_logdir(tmp_path).run("run")
    assert run.layers == ["dense", "block/conv"] and run.steps() == [0, 1, 2]
    for (layer, step), a in arrays.items():
        got = run.activations(layer, step)
        np.testing.assert_array_equal(got, a)
        assert isinstance(got, np.memmap) and not got.flags.writeable
        assert run.record(layer, step)["epoch"] == step
    np.testing.assert_array_equal(run.predictions(2), np.eye(5))
    np.testing.assert_array_equal(run.probe.ids, ids)
    np.testing.assert_array_equal(run.probe.labels, labels)
    np.testing.assert_array_equal(run.probe.thumbnails, thumbs)
    assert run.manifest["format_version"] == store.FORMAT_VERSION and run.disk_bytes() > 0


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "a.npy"
    store.save_array(path, np.arange(3))
    with pytest.raises(RuntimeError, match="interrupted"):
        with store.atomic_path(path) as tmp:
            tmp.write_bytes(b"partial")
            raise RuntimeError("interrupted")
    np.testing.assert_array_equal(np.load(path), np.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["a.npy"]


def test_no_pickles(tmp_path):
    with pytest.raises(TypeError, match="refusing to store an object array"):
        store.save_array(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object))
    with store.temporary_artifacts() as art:
        np.save(art.root / "p.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
        for mmap in (True, False):
            with pytest.raises(store.DamagedFileError, match=r"p\.npy holds Python objects \(a pickle\)"):
                art.load_array("p.npy", mmap=mmap)


def test_a_damaged_array_is_named_by_the_error(tmp_path):
    """Garbage, a truncated header and a body shorter than its header say which file, as ``filename`` too."""
    with store.temporary_artifacts() as art:
        store.save_array(art.root / "ok.npy", np.arange(100, dtype=np.float32))
        whole = (art.root / "ok.npy").read_bytes()
        for name, raw in {"garbage.npy": b"not an array", "header.npy": whole[:20], "body.npy": whole[:-8]}.items():
            (art.root / name).write_bytes(raw)
            for mmap in (True, False):
                with pytest.raises(store.DamagedFileError) as caught:
                    art.load_array(name, mmap=mmap)
                assert caught.value.filename.endswith(name) and name in str(caught.value)


def test_torn_last_record_is_ignored(tmp_path):
    w = _writer(tmp_path)
    for step in (0, 1):
        w.write_activation("dense", step, np.zeros((5, 3), np.float32))
    with open(w.root / "records.jsonl", "ab") as f:
        f.write(b'{"kind": "activation", "layer": "dense", "step": 2, "fi')
    assert open_logdir(tmp_path).run("run").steps("dense") == [0, 1]


def test_damaged_middle_record_is_skipped_with_a_warning(tmp_path):
    """Non-regression: one damaged line (an old short write) made the whole run unreadable."""
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    with open(w.root / "records.jsonl", "ab") as f:
        f.write(b'{"kind": "activation", "la\n[1, 2]\n')  # torn, then valid JSON that is not a record
    w.write_activation("dense", 1, np.zeros((5, 3), np.float32))
    with pytest.warns(RuntimeWarning, match=r"records.jsonl: skipped lines 2, 3 \(2 in all\), which are not valid "
                                            r"records"):
        assert open_logdir(tmp_path).run("run").steps("dense") == [0, 1]


def test_short_record_write_is_rolled_back(tmp_path, monkeypatch):
    """Non-regression: a short append (full disk) left half a line that the next append glued onto."""
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    path = w.root / "records.jsonl"
    before = path.read_bytes()
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    with pytest.raises(OSError, match=r"only \d+ of \d+ bytes of a record were written .*rolled back"):
        w.write_activation("dense", 1, np.zeros((5, 3), np.float32))
    monkeypatch.undo()
    assert path.read_bytes() == before
    w.write_activation("dense", 2, np.zeros((5, 3), np.float32))
    assert open_logdir(tmp_path).run("run").steps("dense") == [0, 2]


def test_files_honour_the_umask(tmp_path):
    """Non-regression: mkstemp made every stored file mode 600, unreadable by a TensorBoard service account."""
    old = os.umask(0o022)
    try:
        w = _writer(tmp_path)
        w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
        w.write_activation("dense", 1, np.zeros((5, 3), np.float32))
    finally:
        os.umask(old)
    for name in ("manifest.json", "records.jsonl", "activations/dense/0.npy", "activations/dense/1.npy"):
        assert stat.S_IMODE((w.root / name).stat().st_mode) == 0o644, name


def _begin_at(args):
    root, fingerprint, start = args
    while time.time() < start:
        pass
    try:
        RunWriter(root).begin({"fingerprint": fingerprint, "layers": {}})
        return "ok"
    except IncompatibleRunError:
        return "refused"


def test_concurrent_creation_admits_one_run(tmp_path):
    """Non-regression: two processes creating a run for different models at the same moment were both accepted."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(_begin_at, [(tmp_path / "warm", {"model": "w"}, 0)] * 2)  # start-up cost out of the race
        for trial in range(5):
            start = time.time() + 0.3
            got = pool.map(_begin_at, [(tmp_path / str(trial), {"model": m}, start) for m in ("a", "b")])
            assert sorted(got) == ["ok", "refused"], got


def test_a_run_that_stored_nothing_can_be_abandoned(tmp_path):
    w = _writer(tmp_path)
    with pytest.raises(TypeError, match="refusing to store an object array"):
        w.write_probe(np.arange(5), np.array([None] * 5, dtype=object))
    w.abandon()
    _writer(tmp_path, fingerprint={"model": "m1", "probe": "p2"})  # the retry with other data is accepted
    w2 = _writer(tmp_path, fingerprint={"model": "m1", "probe": "p2"})
    w2.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    w2.abandon()  # it did not create the run, and the run holds snapshots: nothing happens
    assert open_logdir(tmp_path).run("run").steps() == [0]


def test_continued_run_keeps_every_layer_it_recorded(tmp_path):
    """Non-regression: logging again with another layer selection hid the earlier layers' snapshots."""
    _writer(tmp_path, layers=("dense",)).write_activation("dense", 0, np.zeros((5, 3), np.float32))
    w = _writer(tmp_path, layers=("block/conv",))
    w.write_activation("block/conv", 1, np.zeros((5, 3), np.float16))
    run = open_logdir(tmp_path).run("run")
    assert run.layers == ["dense", "block/conv"] and run.steps("dense") == [0]
    assert run.record("dense", 0)["dtype"] == "<f4" and run.record("block/conv", 1)["dtype"] == "<f2"


@pytest.mark.parametrize("content, why", [(b"{not json", "is not valid JSON"), (b"[1, 2]", "holds a JSON list"),
                                          (b'{"layers": null}', "'layers' of type NoneType"),
                                          (b"\xff\xfe", "is not valid JSON"), (None, "Is a directory")])
def test_a_broken_manifest_skips_that_run_only(tmp_path, content, why):
    _writer(tmp_path, name="good").write_activation("dense", 0, np.zeros((5, 3), np.float32))
    bad = tmp_path / "bad" / "plugins" / "repviz" / "manifest.json"
    if content is None:
        bad.mkdir(parents=True)
    else:
        bad.parent.mkdir(parents=True)
        bad.write_bytes(content)
    with pytest.warns(RuntimeWarning, match=f"skipped run 'bad': .*{re.escape(why)}"):
        logdir = open_logdir(tmp_path)
    assert list(logdir.runs) == ["good"] and why in logdir.skipped["bad"]
    if content is not None:
        assert str(bad) in logdir.skipped["bad"]


def test_malformed_records_are_left_out(tmp_path):
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    for bad in ({"kind": "activation"}, {"kind": "activation", "file": 3, "step": 1},
                {"kind": "activation", "file": "activations/dense/0.npy", "step": "1"}):
        store.append_record(w.root / "records.jsonl", bad)
    assert open_logdir(tmp_path).run("run").steps("dense") == [0]


def test_stale_temporary_files_are_cleaned_when_a_run_is_reopened(tmp_path):
    w = _writer(tmp_path)
    old, fresh = w.root / "activations" / ".0.npy.abc.tmp", w.root / ".manifest.json.def.tmp"
    old.parent.mkdir(parents=True)
    for p in (old, fresh):
        p.write_bytes(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    _writer(tmp_path)
    assert not old.exists() and fresh.exists()


def test_record_without_file_is_skipped(tmp_path):
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    store.append_record(w.root / "records.jsonl", {"kind": "activation", "layer": "dense", "step": 1,
                                                   "file": "activations/dense/1.npy"})
    assert open_logdir(tmp_path).run("run").steps("dense") == [0]


def test_reopen_same_run_continues_and_later_record_wins(tmp_path):
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    created = w.manifest["created"]
    w2 = _writer(tmp_path)
    assert w2.manifest["created"] == created
    w2.write_activation("dense", 0, np.ones((5, 3), np.float32))
    w2.write_activation("dense", 1, np.ones((5, 3), np.float32))
    run = open_logdir(tmp_path).run("run")
    assert run.steps("dense") == [0, 1]
    np.testing.assert_array_equal(run.activations("dense", 0), np.ones((5, 3)))


@pytest.mark.parametrize("fingerprint, what", [({"model": "m2", "probe": "p1"}, "model"),
                                               ({"model": "m1", "probe": "p2"}, "probe"),
                                               ({"model": "m2", "probe": "p2"}, "model and probe")])
def test_incompatible_run_is_refused(tmp_path, fingerprint, what):
    _writer(tmp_path).write_activation("dense", 0, np.zeros((5, 3), np.float32))
    with pytest.raises(IncompatibleRunError, match=f"already holds a repviz run of a different {what}; .*"
                                                   f"Log to a new directory"):
        _writer(tmp_path, fingerprint=fingerprint)
    assert open_logdir(tmp_path).run("run").manifest["fingerprint"] == FP


def _multi_output_run(tmp_path, primary="digits"):
    """A run of a two-output model as the capture writes it: the primary output at the usual place."""
    w = _writer(tmp_path, predictions={"shape": [5, 3], "output": primary,
                                       "outputs": {"digits": [5, 3], "aux": [5, 1]}})
    arrays = {(name, step): np.full(shape, 10 * step + len(name), np.float32)
              for name, shape in (("digits", (5, 3)), ("aux", (5, 1))) for step in (0, 1)}
    for (name, step), a in arrays.items():
        w.write_prediction(step, a, output=name, primary=name == primary)
    return w, arrays


def test_every_output_of_a_multi_output_model_reads_back(tmp_path):
    _, arrays = _multi_output_run(tmp_path)
    run = open_logdir(tmp_path).run("run")
    assert run.prediction_outputs == ["digits", "aux"] and run.prediction_output == "digits"
    assert run.prediction_steps() == run.prediction_steps("aux") == [0, 1]
    for (name, step), a in arrays.items():
        np.testing.assert_array_equal(run.predictions(step, name), a)
        if name == "digits":
            np.testing.assert_array_equal(run.predictions(step), a)
    with pytest.raises(NotFoundError, match=r"output 'digit' is not in run 'run'; it has: 'digits', 'aux'"):
        run.predictions(0, "digit")
    with pytest.raises(NotFoundError, match=r"run 'run' has no predictions of output 'aux' at step 4; it has: 0, 1"):
        run.predictions(4, "aux")


def test_the_primary_output_is_stored_where_a_single_output_run_stores_its_predictions(tmp_path):
    """On disk, records of kind 'prediction' hold the primary output only, at predictions/<step>.npy, naming it."""
    _multi_output_run(tmp_path)
    primary = [r for r in open_logdir(tmp_path).run("run").records() if r["kind"] == "prediction"]
    assert [(r["file"], r["output"]) for r in primary] == [("predictions/0.npy", "digits"),
                                                           ("predictions/1.npy", "digits")]


def test_resumed_run_with_another_primary_output_reads_each_output_by_name(tmp_path):
    _, arrays = _multi_output_run(tmp_path)
    w = _writer(tmp_path, predictions={"shape": [5, 1], "output": "aux",
                                       "outputs": {"digits": [5, 3], "aux": [5, 1]}})
    later = {"aux": np.full((5, 1), -1, np.float32), "digits": np.full((5, 3), -2, np.float32)}
    for name, a in later.items():
        w.write_prediction(2, a, output=name, primary=name == "aux")
    run = open_logdir(tmp_path).run("run")
    assert run.prediction_steps("digits") == run.prediction_steps("aux") == [0, 1, 2]
    np.testing.assert_array_equal(run.predictions(0, "aux"), arrays["aux", 0])
    np.testing.assert_array_equal(run.predictions(0, "digits"), arrays["digits", 0])
    np.testing.assert_array_equal(run.predictions(2), later["aux"])


def test_a_run_whose_manifest_names_no_output_reads_its_one_output(tmp_path):
    w = _writer(tmp_path, predictions={"shape": [5, 2]})
    w.write_prediction(0, np.ones((5, 2), np.float32))
    run = open_logdir(tmp_path).run("run")
    assert run.prediction_outputs == [] and run.prediction_output is None and run.prediction_steps() == [0]
    np.testing.assert_array_equal(run.predictions(0), np.ones((5, 2)))
    with pytest.raises(NotFoundError, match=r"output 'out' is not in run 'run'; it has: none"):
        run.predictions(0, "out")
    with pytest.raises(ValueError, match="must be stored under its name"):
        w.write_prediction(1, np.ones((5, 2), np.float32), primary=False)


def test_not_found_messages_list_the_choices(tmp_path):
    w = _writer(tmp_path)
    _writer(tmp_path, name="other")
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    w.write_prediction(0, np.zeros((5, 2), np.float32))
    logdir = open_logdir(tmp_path)
    run = logdir.run("run")
    with pytest.raises(NotFoundError, match=r"run 'nope' is not in .*; it has: 'other', 'run'"):
        logdir.run("nope")
    with pytest.raises(NotFoundError, match=r"layer 'dense_9' is not in run 'run'; it has: 'dense', 'block/conv'"):
        run.activations("dense_9", 0)
    with pytest.raises(NotFoundError, match=r"step 7 of layer 'dense' is not in run 'run'; it has steps: 0"):
        run.activations("dense", 7)
    with pytest.raises(NotFoundError, match=r"run 'run' has no predictions at step 3; it has: 0"):
        run.predictions(3)
    with pytest.raises(NotFoundError, match=r"has no embeddings for method 'tsne-x'; it has: none"):
        run.embeddings.read("tsne-x", "dense", 0)
    with pytest.raises(NotFoundError, match="does not exist"):
        open_logdir(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(NotFoundError, match="is a file, not a directory"):
        open_logdir(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match="holds no repviz runs"):
        open_logdir(tmp_path / "empty")


def test_several_runs_at_any_depth(tmp_path):
    for name in ("a", "group/b", "group/c"):
        _writer(tmp_path, name=name)
    assert list(open_logdir(tmp_path).runs) == ["a", "group/b", "group/c"]


def test_path_keys_are_safe_and_distinct():
    keys = {store.path_key(n) for n in ("dense", "block/conv", "block_conv", "dense#1", "split:0", "../x")}
    assert len(keys) == 6 and all("/" not in k and not k.startswith(".") for k in keys)
    assert store.path_key("dense") == "dense"


def test_a_layer_name_longer_than_a_file_name_is_stored(tmp_path):
    """Non-regression: a layer name longer than the filesystem allows aborted capture at snapshot 0."""
    long_a, long_b = "block/" + "x" * 400, "block/" + "x" * 399 + "y"
    assert len(store.path_key(long_a)) < 140 and store.path_key(long_a) != store.path_key(long_b)
    w = _writer(tmp_path, layers=(long_a,))
    w.write_activation(long_a, 0, np.ones((5, 3), np.float32))
    np.testing.assert_array_equal(open_logdir(tmp_path).run("run").activations(long_a, 0), np.ones((5, 3)))


def test_check_writable_names_the_directory(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(OSError, match=r"cannot write repviz logs under '.*f/run'"):
        RunWriter(tmp_path / "f" / "run").check_writable()


# ---------------------------------------------------------------------------------------------------------------
# What other modules ask of the store instead of knowing paths
# ---------------------------------------------------------------------------------------------------------------

def test_read_into_equals_a_slice_of_the_loaded_array(tmp_path):
    art = store.Artifacts(tmp_path / "art")
    rng = np.random.default_rng(2)
    vector = rng.normal(size=1000).astype(np.float32)
    matrix = rng.normal(size=(9, 7))
    art.save_array("v.npy", vector)
    art.save_array("m.npy", matrix)
    ref_v = np.load(art.path("v.npy"), allow_pickle=False)
    for start, width in ((0, 1000), (0, 1), (123, 456), (999, 1), (1000, 0)):
        out = np.full(width, np.nan, dtype=np.float32)
        art.read_into("v.npy", out, start)
        np.testing.assert_array_equal(out, ref_v[start:start + width])
    rows = np.empty((3, 7))
    art.read_into("m.npy", rows, 4 * 7)  # rows 4, 5, 6 of a 2-D array
    np.testing.assert_array_equal(rows, np.load(art.path("m.npy"))[4:7])
    buffer = np.zeros((2, 10), dtype=np.float32)
    art.read_into("v.npy", buffer[1], 10)  # a row of a caller's buffer is filled in place
    np.testing.assert_array_equal(buffer, [np.zeros(10), vector[10:20]])
    assert art.header("v.npy") == ((1000,), np.float32) and art.header("m.npy") == ((9, 7), np.float64)


def test_read_into_refuses_what_it_cannot_read(tmp_path):
    art = store.Artifacts(tmp_path)
    art.save_array("v.npy", np.arange(10, dtype=np.float32))
    with pytest.raises(ValueError, match=r"'v.npy' .* holds float32; out is float64"):
        art.read_into("v.npy", np.empty(3), 0)
    with pytest.raises(ValueError, match=r"elements \[8, 11\) are outside 'v.npy' .* which holds 10"):
        art.read_into("v.npy", np.empty(3, dtype=np.float32), 8)
    with pytest.raises(ValueError, match="C-contiguous"):
        art.read_into("v.npy", np.empty((3, 2), dtype=np.float32)[:, 0], 0)
    with pytest.raises(NotFoundError, match=r"'w.npy' is not in .* it has: 'v.npy'"):
        art.read_into("w.npy", np.empty(3, dtype=np.float32), 0)
    data = art.path("v.npy").read_bytes()
    art.path("v.npy").write_bytes(data[:-8])  # the last two elements lost
    with pytest.raises(ValueError, match="'v.npy' .* is truncated"):
        art.read_into("v.npy", np.empty(4, dtype=np.float32), 6)


def test_read_into_follows_a_file_replaced_under_the_same_name(tmp_path):
    art = store.Artifacts(tmp_path)
    art.save_array("v.npy", np.arange(10, dtype=np.float32))
    out = np.empty(2, dtype=np.float32)
    art.read_into("v.npy", out, 4)
    np.save(art.path("v.npy"), np.arange(100, 150, dtype=np.float32).reshape(5, 10))  # another header
    art.read_into("v.npy", out, 4)
    np.testing.assert_array_equal(out, [104, 105])
    assert art.header("v.npy") == ((5, 10), np.float32)


def test_a_run_pickles_as_a_reference_and_reads_what_a_record_names(tmp_path):
    import pickle

    w = _writer(tmp_path)
    w.write_probe(np.arange(5))
    for step in range(50):
        w.write_activation("dense", step, np.full((5, 3), step, dtype=np.float32))
    run = open_logdir(tmp_path).run("run")
    run.records()
    data = pickle.dumps(run)
    assert len(data) < 500  # location and name, not 50 records
    copy = pickle.loads(data)
    assert (copy.name, copy.layers, copy.steps()) == (run.name, run.layers, run.steps())
    np.testing.assert_array_equal(copy.activations("dense", 7), run.activations("dense", 7))
    record = run.record("dense", 7)
    np.testing.assert_array_equal(run.read_array(record), np.full((5, 3), 7))
    assert not isinstance(run.read_array(record, mmap=False), np.memmap)


def test_the_tensorboard_marker_is_an_event_file_tensorboard_reads(tmp_path):
    """TensorBoard's own event reader finds the run's one summary, tagged and owned by the plugin, holding the
    format version and the layers."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _writer(tmp_path).write_tensorboard_marker()
    events = EventAccumulator(str(tmp_path / "run")).Reload()
    assert events.Tags()["tensors"] == [f"{store.PLUGIN_NAME}/run"]
    assert events.PluginTagToContent(store.PLUGIN_NAME) == {f"{store.PLUGIN_NAME}/run": ANY}
    [event] = events.Tensors(f"{store.PLUGIN_NAME}/run")
    content = json.loads(event.tensor_proto.string_val[0])
    assert content == {"format_version": store.FORMAT_VERSION, "layers": ["dense", "block/conv"]}


def test_writing_the_tensorboard_marker_loads_no_tensorflow(tmp_path):
    """TensorBoard's event writer loads TensorFlow for its file system layer; the store's marker must not."""
    code = ("import sys, numpy as np; from repviz.store import RunWriter; w = RunWriter(sys.argv[1]); "
            "w.begin({'fingerprint': {}, 'layers': {'a': {'stored_shape': [3, 2]}}}); w.write_probe(np.arange(3)); "
            "w.write_tensorboard_marker(); print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_cross_run_results_and_scratch_directories_are_named_by_the_store(tmp_path):
    _writer(tmp_path).write_probe(np.arange(5))
    logdir = open_logdir(tmp_path)
    cache = logdir.vector_cache("dist", "0a1b2c3d")
    sampled = logdir.vector_cache("dist", "0a1b2c3d", n_pairs=4500, pair_seed=0)
    cache.save_array("x.npy", np.zeros(3))
    sampled.save_array("x.npy", np.zeros(3))
    assert logdir.artifact_names() == ["vectors-dist-0a1b2c3d", "vectors-dist-0a1b2c3d-p4500s0"]
    with store.temporary_artifacts() as scratch:
        scratch.save_array("x.npy", np.ones(2))
        np.testing.assert_array_equal(scratch.load_array("x.npy"), np.ones(2))
        where = scratch.root
    assert not where.exists()


def test_run_directory_is_where_open_logdir_finds_the_run(tmp_path):
    for name in ("relu", "sweep/lr-0.1"):
        w = RunWriter(store.run_directory(tmp_path, name))
        w.begin({"fingerprint": FP, "layers": {}})
    assert sorted(open_logdir(tmp_path).runs) == ["relu", "sweep/lr-0.1"]
    for bad in ("", "..", "a/../../b", "/abs"):
        with pytest.raises(ValueError, match="run names are relative paths"):
            store.run_directory(tmp_path, bad)


_PACKAGE = Path(store.__file__).parents[1]
#: Modules with files of their own, none inside a log directory: the store's own (store/*), the MNIST file, the exported
#: figures and the warm-up's scratch log directory (which it writes through the store).
_OWN_FILES = {"datasets", "export", "warmup"}
_MODULES = sorted(p.relative_to(_PACKAGE).with_suffix("").as_posix() for p in _PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("module", [m for m in _MODULES if m not in _OWN_FILES and not m.startswith("store/")])
def test_only_the_store_builds_paths(module):
    """Grep-style guard over every module (the behaviour is tested above): no path joins, file opens or .npy reads
    outside the store."""
    source = (_PACKAGE / f"{module}.py").read_text()
    for pattern in (r"root /", r"Path\(", r"np\.load", r"(?<![\w.])open\(", r"tempfile", r"os\.path\.join",
                    r"\.run_dir\b"):
        assert not re.search(pattern, source), f"repviz/{module}.py matches {pattern!r}"


def test_results_overlay_reads_both_and_writes_out(tmp_path):
    w = _writer(tmp_path / "logs")
    w.write_probe(np.arange(5))
    w.write_activation("dense", 0, np.ones((5, 3), np.float32))
    own = open_logdir(tmp_path / "logs").run("run")
    own.embeddings.write("pca-1", "dense", 0, np.zeros((5, 2)), {"scores": {}})
    own.embeddings.write_method("pca-1", {"method": "pca"})
    overlay = open_logdir(tmp_path / "logs", out=tmp_path / "out")
    run = overlay.run("run")
    run.embeddings.write("pca-1", "dense", 1, np.ones((5, 2)), {"scores": {}})
    run.embeddings.write("tsne-2", "dense", 0, np.ones((5, 2)), {"scores": {}})
    assert run.embeddings.method_keys() == ["pca-1", "tsne-2"] and run.embeddings.steps("pca-1", "dense") == [0, 1]
    assert run.embeddings.method("pca-1") == {"method": "pca"} and run.embeddings.intact("pca-1", "dense", 0, 5)
    assert (tmp_path / "out/run/plugins/repviz/embeddings/pca-1/dense/1.npy").exists()
    assert open_logdir(tmp_path / "logs").run("run").embeddings.steps("pca-1", "dense") == [0]
    import pickle
    assert pickle.loads(pickle.dumps(run)).embeddings.steps("pca-1", "dense") == [0, 1]
    art = overlay.artifacts("meta-x")
    open_logdir(tmp_path / "logs").artifacts("meta-x").save_json("a.json", {"from": "logs"})
    art.save_json("b.json", {"from": "out"})
    assert art.names() == ["a.json", "b.json"] and art.load_json("a.json") == {"from": "logs"}
    assert overlay.artifact_names() == ["meta-x"] and not (tmp_path / "logs/plugins/repviz-meta/meta-x/b.json").exists()


def test_derived_caches_are_named_by_their_source_and_written_to_the_results(tmp_path):
    """k-NN graphs and density contours are cached under the run's results; one cached for other data (a snapshot
    stored again, an embedding computed again) is never read back."""
    w = _writer(tmp_path / "logs")
    w.write_probe(np.arange(5))
    w.write_activation("dense", 0, np.ones((5, 3), np.float32))
    run = open_logdir(tmp_path / "logs", out=tmp_path / "out").run("run")
    assert run.artifact("neighbor_graph").cached("dense", 0, "k2-exact") is None
    graph = (np.arange(10, dtype=np.int32) % 5).reshape(5, 2)
    run.artifact("neighbor_graph").write("dense", 0, "k2-exact", graph)
    np.testing.assert_array_equal(run.artifact("neighbor_graph").cached("dense", 0, "k2-exact"), graph)
    assert run.artifact("neighbor_graph").cached("dense", 0, "k3-exact") is None
    assert not (tmp_path / "logs/run/plugins/repviz/cache").exists()
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))  # stored again (a resumed fit)
    elsewhere = open_logdir(tmp_path / "logs", out=tmp_path / "out").run("run")
    assert elsewhere.artifact("neighbor_graph").cached("dense", 0, "k2-exact") is None
    run.embeddings.write("pca-1", "dense", 0, np.zeros((5, 2)), {"scores": {}})
    assert run.artifact("density").cached("pca-1", "dense", 0, "all-l4") is None
    contours = {"levels": [0.5], "contours": [{"class": None, "level": 0.5, "paths": []}]}
    run.artifact("density").write("pca-1", "dense", 0, "all-l4", contours)
    assert run.artifact("density").cached("pca-1", "dense", 0, "all-l4") == contours
    run.embeddings.write("pca-1", "dense", 0, np.ones((5, 2)), {"scores": {}})  # computed again
    assert run.artifact("density").cached("pca-1", "dense", 0, "all-l4") is None


def test_a_fortran_ordered_embedding_is_stored_as_a_cached_result(tmp_path):
    """Non-regression: an eigensolver's Fortran-ordered output (Isomap, LLE, spectral, diffusion maps, kernel PCA)
    was stored in Fortran order, which the header check refuses, so those embeddings were computed again on every
    `repviz embed`."""
    w = _writer(tmp_path / "logs")
    w.write_probe(np.arange(5))
    w.write_activation("dense", 0, np.zeros((5, 3), np.float32))
    run = open_logdir(tmp_path / "logs").run("run")
    Y = np.asfortranarray(np.arange(10, dtype=np.float32).reshape(5, 2))
    run.embeddings.write("isomap-1", "dense", 0, Y, {"scores": {}})
    assert run.embeddings.intact("isomap-1", "dense", 0, 5)
    np.testing.assert_array_equal(run.embeddings.read("isomap-1", "dense", 0), Y)


# ----------------------------------------------------------------------------------------------------------------
# Every field read from disk is checked where it is read (issue #32 items 3 and 8)
# ----------------------------------------------------------------------------------------------------------------

def test_an_activation_of_another_dtype_than_recorded_is_refused(tmp_path):
    """Non-regression: an activation rewritten as int32 of the same byte size was served (distances near 3e9)."""
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.ones((5, 3), np.float32))
    path = w.root / "activations" / "dense" / "0.npy"
    np.save(path, np.ones((5, 3), np.int32))
    with pytest.raises(store.DamagedFileError, match=r"holds <i4 \[5, 3\], not the <f4 \[5, 3\] recorded") as caught:
        open_logdir(tmp_path).run("run").activations("dense", 0)
    assert caught.value.filename == str(path)


def test_manifest_fields_of_wrong_types_are_left_out_with_one_warning(tmp_path):
    """Non-regression: a layer entry that is a string, or a model that is not an object, made `repviz info` and the
    tab's index fail for every run. The layer stays listed with its snapshots; the damaged fields go."""
    w = _writer(tmp_path, model="m", layers=("dense", "out"))
    w.update_manifest(layers={"dense": "dense", "out": {"stored_shape": 4, "class": "Dense"}},
                      predictions={"outputs": ["a"], "output": "a"})
    w.write_activation("dense", 0, np.ones((5, 3), np.float32))
    with pytest.warns(RuntimeWarning) as caught:
        run = open_logdir(tmp_path).run("run")
    assert [str(c.message) for c in caught] == [
        f"{w.root / 'manifest.json'}: left out model, predictions.outputs, layers.dense (a JSON str, not an object), "
        f"layers.out.stored_shape: not of the type repviz writes (a damaged or hand-edited manifest); record the run "
        f"again to restore them"]
    assert run.layers == ["dense", "out"] and run.steps("dense") == [0]
    assert run.layer_info("dense") == {} and run.layer_info("out") == {"class": "Dense"}
    assert "model" not in run.manifest and run.prediction_outputs == [] and run.prediction_output == "a"


def _embedded(tmp_path) -> tuple:
    w = _writer(tmp_path)
    w.write_activation("dense", 0, np.ones((5, 3), np.float32))
    run = open_logdir(tmp_path).run("run")
    run.embeddings.write_method("pca-1", {"method": "pca", "params": {}, "requests": ["r"]})
    run.embeddings.write("pca-1", "dense", 0, np.ones((5, 2)), {"source": {"crc32": "0"}, "scores": {"t": 0.5}})
    return run, run.root / "embeddings" / "pca-1" / "dense"


def test_a_stray_file_in_an_embedding_directory_is_left_out_naming_it(tmp_path):
    """Non-regression: embeddings/<key>/<layer>/old.npy hid the run and stopped embed and export ("invalid literal
    for int() with base 10: 'old'")."""
    run, d = _embedded(tmp_path)
    for name in ("old.npy", "01.npy", ".0.npy.abc.tmp", "0.json"):
        (d / name).write_bytes(b"x")
    with pytest.warns(RuntimeWarning) as caught:
        assert run.embeddings.steps("pca-1", "dense") == [0]
    assert sorted(str(c.message).split(":")[0] for c in caught) == [str(d / "01.npy"), str(d / "old.npy")]


def test_a_nonfinite_embedding_is_neither_cached_nor_served(tmp_path):
    run, d = _embedded(tmp_path)
    assert run.embeddings.intact("pca-1", "dense", 0, 5)
    Y = np.ones((5, 2), np.float32)
    Y[2, 1] = np.inf
    store.save_array(d / "0.npy", Y)
    assert not run.embeddings.intact("pca-1", "dense", 0, 5)
    with pytest.raises(store.DamagedFileError, match="non-finite coordinates") as caught:
        run.embeddings.read("pca-1", "dense", 0)
    assert caught.value.filename == str(d / "0.npy")


@pytest.mark.parametrize("sidecar", ['[1, 2]', '{"scores": "high"}', '{"source": []}', '{"init_from": 3}'])
def test_a_sidecar_not_as_written_is_damaged(tmp_path, sidecar):
    run, d = _embedded(tmp_path)
    (d / "0.json").write_text(sidecar)
    with pytest.raises(store.DamagedFileError, match="is not an embedding's sidecar") as caught:
        run.embeddings.info("pca-1", "dense", 0)
    assert caught.value.filename == str(d / "0.json")


@pytest.mark.parametrize("description", ['[]', '{"method": 3}', '{"requests": "abc"}', '{"default": "yes"}',
                                         '{"method": "pc'])
def test_a_damaged_method_description_lists_the_key_only(tmp_path, description):
    """Non-regression: a method.json that is an array made info, embed, export and the tab's index fail."""
    run, d = _embedded(tmp_path)
    (d.parent / "method.json").write_text(description)
    with pytest.warns(RuntimeWarning, match="method.json"):
        assert run.embeddings.method("pca-1") == {}
    assert run.embeddings.method_keys() == ["pca-1"] and run.embeddings.read("pca-1", "dense", 0).shape == (5, 2)


@pytest.mark.parametrize("probe", [{"ids": np.arange(5).reshape(5, 1)}, {"labels": np.arange(4)},
                                   {"thumbnails": np.zeros((6, 2, 2), np.uint8)}])
def test_a_probe_of_inconsistent_shapes_is_damaged(tmp_path, probe):
    w = _writer(tmp_path)
    w.write_probe(np.arange(5), np.arange(5), np.zeros((5, 2, 2), np.uint8))
    (name, array), = probe.items()
    np.save(w.root / "probe" / f"{name}.npy", array)
    with pytest.raises(store.DamagedFileError, match=f"{name}.npy holds shape"):
        len(open_logdir(tmp_path).run("run").probe)


def test_continuing_a_run_reads_its_manifest_through_the_same_checks(tmp_path):
    """Non-regression: a manifest that is a JSON array, or whose layer entry is a string, stopped a fit continuing
    the run with an AttributeError; now the first is refused naming the file, the second continues the run."""
    w = _writer(tmp_path, layers=("dense",))
    w.write_activation("dense", 0, np.ones((5, 3), np.float32))
    path = w.root / "manifest.json"
    path.write_text(json.dumps({**w.manifest, "layers": {"dense": "x"}}))
    with pytest.warns(RuntimeWarning, match="layers.dense"):
        assert RunWriter(tmp_path / "run").stored_manifest()["layers"] == {"dense": {}}
        again = _writer(tmp_path, layers=("dense",))
    again.write_activation("dense", 1, np.ones((5, 3), np.float32))
    assert open_logdir(tmp_path).run("run").steps("dense") == [0, 1]
    path.write_text("[]")
    with pytest.raises(store.DamagedFileError, match="holds a JSON list, not an object") as caught:
        _writer(tmp_path, layers=("dense",))
    assert caught.value.filename == str(path)
