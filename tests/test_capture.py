"""ActivationLogger: every kind of Keras model, schedules, reductions, precision, bad inputs, crash safety.

Captured values are checked against an independent computation (a side model over the same layer, or the input
itself for an identity layer); the store is read back through ``open_logdir`` as a user would.
"""

import importlib.util
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
from keras.src.utils.python_utils import is_default

import repviz
from repviz._reduction import count_sketch, count_sketch_plan
from repviz.capture import ActivationLogger, ProbeSet, Reduction, callback
from repviz.capture import probe as capture_probe
from repviz.store import IncompatibleRunError, NotFoundError, RunWriter, checksum

N = 64  # probe rows


def _images(n=160, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28), dtype=np.float32)
    y = (x[:, :14].mean(axis=(1, 2)) > x[:, 14:].mean(axis=(1, 2))).astype(np.int64)
    return x, y


def _mlp(with_input=True):
    layers = [keras.layers.Flatten(name="flat"), keras.layers.Dense(16, activation="relu", name="hidden"),
              keras.layers.Dropout(0.5, name="drop"), keras.layers.Dense(2, activation="softmax", name="out")]
    return keras.Sequential(([keras.Input((28, 28))] if with_input else []) + layers)


def _recorded(root) -> list[str]:
    """The runs a reader finds under ``root`` that hold any snapshot."""
    try:
        runs = repviz.open_logdir(root).runs
    except NotFoundError:  # not even a run begun
        return []
    return [name for name, run in runs.items() if run.records()]


def _fit(model, run_dir, x, y, epochs=2, **kwargs):
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(run_dir, probe=(x[:N], y[:N]), **kwargs)
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False, callbacks=[logger])
    return repviz.open_logdir(run_dir.parent).run(run_dir.name)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    """A Sequential MLP trained 2 epochs with the default logger; shared by read-back tests."""
    keras.utils.set_random_seed(0)
    x, y = _images()
    model = _mlp()
    run = _fit(model, tmp_path_factory.mktemp("logs") / "mlp", x, y)
    return run, model, x, y


# ---------------------------------------------------------------------------------------------------------------
# Model kinds
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("with_input", [True, False])
def test_sequential_default_layers_steps_and_values(tmp_path, with_input):
    keras.utils.set_random_seed(0)
    x, y = _images()
    model = _mlp(with_input)
    run = _fit(model, tmp_path / "run", x, y)
    assert run.layers == ["hidden", "out"]  # Flatten and Dropout are skipped by default
    assert run.steps() == [0, 1, 2] and run.manifest["step_unit"] == "epoch"
    side = keras.Model(model.inputs, model.get_layer("hidden").output)
    np.testing.assert_allclose(run.activations("hidden", 2), side.predict(x[:N], verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run.predictions(2), model.predict(x[:N], verbose=0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(run.predictions(0), run.predictions(2))  # snapshot 0 is the untrained model


def test_read_back_probe_records_and_manifest(mlp_run):
    run, model, x, y = mlp_run
    probe = run.probe
    np.testing.assert_array_equal(probe.ids, np.arange(N))
    np.testing.assert_array_equal(probe.labels, y[:N])
    assert probe.thumbnails.dtype == np.uint8 and probe.thumbnails.shape == (N, 28, 28)
    np.testing.assert_array_equal(probe.thumbnails, np.round(x[:N] * 255).astype(np.uint8))
    m = run.manifest
    assert m["format_version"] == 1 and m["model"]["params"] == model.count_params()
    assert m["layers"]["hidden"]["stored_shape"] == [N, 16]
    assert m["layers"]["hidden"]["reduction"] == {"kind": "none"}
    assert m["probe"] == {"n": N, "shape": [N, 28, 28], "has_labels": True,
                          "target": {"kind": "class", "shape": [], "stored_shape": []}}
    assert set(m["fingerprint"]) == {"model", "probe", "inputs"}
    for layer in run.layers:
        for step in run.steps(layer):
            rec = run.record(layer, step)
            assert rec["crc32"] == checksum(np.asarray(run.activations(layer, step))) and rec["nonfinite"] == 0
            assert rec["epoch"] == step


def test_functional_nested_shared_and_multi_output(tmp_path):
    class Split(keras.layers.Layer):  # a multi-output layer
        def call(self, x):
            return x[:, :3], x[:, 3:] * 2.0

    keras.utils.set_random_seed(0)
    inner_in = keras.Input((8,))
    inner = keras.Model(inner_in, keras.layers.Dense(6, activation="tanh", name="inner_dense")(inner_in),
                        name="encoder")
    inp = keras.Input((8,))
    shared = keras.layers.Dense(8, activation="relu", name="shared")
    h = shared(shared(inp))  # called twice
    a, b = Split(name="split")(inner(h))
    out = keras.layers.Dense(2, activation="softmax", name="out")(keras.layers.Concatenate()([a, b]))
    model = keras.Model(inp, out)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(96, 8)).astype(np.float32), rng.integers(0, 2, 96)
    run = _fit(model, tmp_path / "run", x, y, layers=["shared", "encoder/inner_dense", "split", "out"])
    assert run.layers == ["shared#0", "shared#1", "encoder/inner_dense", "split:0", "split:1", "out"]
    assert run.layer_info("split:1")["stored_shape"] == [N, 3]
    xp = x[:N]
    first = keras.ops.convert_to_numpy(shared(xp))
    second = keras.ops.convert_to_numpy(shared(first))
    enc = keras.ops.convert_to_numpy(inner(second))
    for name, want in [("shared#0", first), ("shared#1", second), ("encoder/inner_dense", enc),
                       ("split:0", enc[:, :3]), ("split:1", enc[:, 3:] * 2)]:
        np.testing.assert_allclose(run.activations(name, 2), want, rtol=1e-5, atol=1e-6, err_msg=name)


def _two_outputs(as_dict=False):
    """A Functional model with a 3-class head 'digits' and a 1-unit head 'aux' (a list, or a dict keyed
    'zdigits'/'aux' so that the sorted key order differs from the order of definition)."""
    keras.utils.set_random_seed(0)
    inp = keras.Input((6,))
    h = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    digits = keras.layers.Dense(3, activation="softmax", name="digits")(h)
    aux = keras.layers.Dense(1, name="aux")(h)
    model = keras.Model(inp, {"zdigits": digits, "aux": aux} if as_dict else [digits, aux])
    losses = ["sparse_categorical_crossentropy", "mse"]
    model.compile(optimizer="adam", loss=dict(zip(["zdigits", "aux"], losses)) if as_dict else losses)
    rng = np.random.default_rng(3)
    x, y, z = rng.normal(size=(48, 6)).astype(np.float32), rng.integers(0, 3, 48), rng.normal(size=(48, 1))
    return model, x, ({"zdigits": y, "aux": z} if as_dict else [y, z]), y


def _fit_two_outputs(tmp_path, as_dict=False, **kwargs):
    model, x, targets, y = _two_outputs(as_dict)
    logger = ActivationLogger(tmp_path / "run", probe=(x[:16], y[:16]), layers="hidden", **kwargs)
    model.fit(x, targets, epochs=1, batch_size=16, verbose=0, shuffle=False, callbacks=[logger])
    return repviz.open_logdir(tmp_path).run("run"), model, x[:16]


def test_multi_output_model_stores_every_output(tmp_path):
    """Non-regression test for issue 10 item 17: only the first output was stored."""
    run, model, xp = _fit_two_outputs(tmp_path)
    digits, aux = model.predict(xp, verbose=0)
    assert run.prediction_outputs == ["digits", "aux"] and run.prediction_output == "digits"
    assert run.prediction_steps() == run.prediction_steps("aux") == [0, 1]
    np.testing.assert_allclose(run.predictions(1, "digits"), digits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run.predictions(1, "aux"), aux, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(run.predictions(1), run.predictions(1, "digits"))  # the first is the primary
    assert run.predictions(0, "aux").shape == (16, 1) and not np.allclose(run.predictions(0, "aux"), aux)
    assert run.manifest["predictions"] == {"shape": [16, 3], "output": "digits",
                                           "outputs": {"digits": [16, 3], "aux": [16, 1]}}


def test_prediction_output_picks_the_primary_output(tmp_path):
    run, model, xp = _fit_two_outputs(tmp_path, prediction_output="aux")
    assert run.prediction_output == "aux" and run.prediction_outputs == ["digits", "aux"]
    np.testing.assert_allclose(run.predictions(1), model.predict(xp, verbose=0)[1], rtol=1e-5, atol=1e-6)
    assert run.predictions(1, "digits").shape == (16, 3)


def test_dict_outputs_are_named_by_their_keys(tmp_path):
    run, model, xp = _fit_two_outputs(tmp_path, as_dict=True)
    want = model.predict(xp, verbose=0)
    assert run.prediction_outputs == ["aux", "zdigits"] and run.prediction_output == "aux"  # flatten order
    for name in ("aux", "zdigits"):
        np.testing.assert_allclose(run.predictions(1, name), want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_unknown_prediction_output_fails_before_training(tmp_path):
    model, x, targets, y = _two_outputs()
    before = [keras.ops.convert_to_numpy(w).copy() for w in model.weights]
    logger = ActivationLogger(tmp_path / "run", probe=x[:8], prediction_output="digit")
    with pytest.raises(ValueError, match=r"The 'prediction_output' parameter of ActivationLogger must be one of "
                                         r"the outputs of model '\w+' \('digits', 'aux'\)\. Got 'digit' instead"):
        model.fit(x, targets, epochs=1, verbose=0, callbacks=[logger])
    assert _recorded(tmp_path) == []
    for a, w in zip(before, model.weights):
        np.testing.assert_array_equal(a, keras.ops.convert_to_numpy(w))


def test_single_output_run_stores_predictions_as_before(mlp_run):
    run = mlp_run[0]
    records = [r for r in run.records() if r["kind"] != "activation"]
    assert {r["kind"] for r in records} == {"prediction"} and not any("output" in r for r in records)
    assert sorted(r["file"] for r in records) == ["predictions/0.npy", "predictions/1.npy", "predictions/2.npy"]
    assert run.prediction_outputs == ["out"] and run.prediction_output == "out"
    np.testing.assert_array_equal(run.predictions(2, "out"), run.predictions(2))


def test_subclassed_model_with_sublayer_block(tmp_path):
    class Block(keras.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.inner = keras.layers.Dense(5, activation="relu", name="inner")

        def call(self, x):
            return self.inner(x) + 1.0

    class Net(keras.Model):
        def __init__(self):
            super().__init__(name="net")
            self.block = Block(name="block")
            self.head = keras.layers.Dense(2, activation="softmax", name="head")

        def call(self, x, training=None):
            return self.head(self.block(x))

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(96, 4)).astype(np.float32), rng.integers(0, 2, 96)
    model = Net()
    run = _fit(model, tmp_path / "run", x, y)
    assert run.layers == ["block", "block/inner", "head"]  # the custom block's output, and inside it
    inner = keras.ops.convert_to_numpy(model.block.inner(x[:N]))
    np.testing.assert_allclose(run.activations("block/inner", 2), inner, rtol=1e-5, atol=1e-6)
    run2 = _fit(model, tmp_path / "by_class", x, y, layers=Block)
    np.testing.assert_allclose(run2.activations("block", 0), inner + 1.0, rtol=1e-5, atol=1e-6)


def test_weights_and_batchnorm_statistics_bit_identical(tmp_path):
    def build():
        keras.utils.set_random_seed(3)
        return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, name="d"),
                                 keras.layers.BatchNormalization(name="bn"), keras.layers.Dropout(0.3),
                                 keras.layers.Dense(2, activation="softmax")])

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(128, 6)).astype(np.float32), rng.integers(0, 2, 128)
    results = []
    for use_logger in (False, True):
        model = build()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        cbs = [ActivationLogger(tmp_path / "run", probe=x[:32], layers=["d", "bn"])] if use_logger else []
        keras.utils.set_random_seed(4)
        model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False, callbacks=cbs)
        results.append([keras.ops.convert_to_numpy(w) for w in model.weights])
    bn_names = [w.path for w in model.weights if "moving" in w.path]
    assert len(bn_names) == 2
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_the_optimizer_is_built_when_the_fit_begins_unless_the_model_steps_itself(tmp_path):
    """On TensorFlow, Keras makes the optimizer's slots inside the first traced step, which is then traced twice;
    the logger builds them when a fit begins (the other backends already have). The weights it trains are those
    of a fit without the logger (test above). A model with a train_step of its own keeps its optimizer as it is."""
    built = []

    class FirstBatch(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                built.append(self.model.optimizer.built)

    class OwnStep(keras.Sequential):
        def train_step(self, data):
            return super().train_step(data)

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(64, 6)).astype(np.float32), rng.integers(0, 2, 64)
    cases = [(keras.Sequential, "keras_step")]
    if keras.backend.backend() == "tensorflow":  # a train_step's signature is the backend's
        cases.append((OwnStep, "own_step"))  # its optimizer built inside its first step, as Keras does
    for cls, name in cases:
        model = cls([keras.Input((6,)), keras.layers.Dense(4, name="d"), keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        logger = ActivationLogger(tmp_path / name, probe=x[:16], layers=["d"])
        model.fit(x, y, epochs=1, batch_size=32, verbose=0, callbacks=[logger, FirstBatch()])
    assert built == [True, False][:len(cases)]


def test_several_models_in_one_process_trace_once_each(tmp_path):
    """Non-regression: the capture function was a closure traced per model (and again for the shorter last
    probe batch); TensorFlow counts traces per code object, so a few models in one process logged its
    "triggered tf.function retracing" warning."""
    import tensorflow as tf

    messages, models = [], []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    x, y = _images()
    try:
        for i in range(5):
            keras.utils.set_random_seed(i)
            model = _mlp()
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
            logger = ActivationLogger(tmp_path / f"m{i}", probe=(x[:70], y[:70]), batch_size=32)  # 32, 32, 6
            model.fit(x, y, epochs=1, batch_size=32, verbose=0, callbacks=[logger])
            models.append(model)
    finally:
        tf.get_logger().removeHandler(handler)
    # Keras's own step functions are traced once per model whoever fits it, and TensorFlow counts their traces
    # over every test this process ran before: the check is on the capture function's
    assert not [m for m in messages if "retracing" in m and "TensorFlowTrainer" not in m]
    for i, model in enumerate(models):  # (predict below traces one function per model: after the check)
        side = keras.Model(model.inputs, model.get_layer("hidden").output)
        np.testing.assert_allclose(repviz.open_logdir(tmp_path).run(f"m{i}").activations("hidden", 1),
                                   side.predict(x[:70], verbose=0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# Schedules
# ---------------------------------------------------------------------------------------------------------------

def test_batch_schedule_and_async_dispatch(tmp_path):
    keras.utils.set_random_seed(0)
    x, y = _images(160)  # 5 batches of 32 per epoch
    epoch_logger = ActivationLogger(tmp_path / "e", probe=x[:8])
    batch_logger = ActivationLogger(tmp_path / "b", probe=x[:8], batch_freq=3)
    assert isinstance(batch_logger, ActivationLogger) and repviz.ActivationLogger is ActivationLogger
    assert is_default(epoch_logger.on_train_batch_end)  # keeps async dispatch
    assert not is_default(batch_logger.on_train_batch_end)
    run = _fit(_mlp(), tmp_path / "run", x, y, epochs=2, batch_freq=3)
    assert run.manifest["step_unit"] == "batch" and run.steps() == [0, 3, 6, 9]
    rec = run.record("hidden", 6)
    assert (rec["epoch"], rec["batch"]) == (1, 1)  # 6th batch overall = 1st batch of the 2nd epoch


def test_a_subclass_of_the_logger_keeps_its_batch_schedule(tmp_path):
    """A user's subclass with batch_freq recorded only step 0: the batch hook is the batch class's."""

    class Tagged(ActivationLogger):
        def on_train_begin(self, logs=None):
            self.began = True
            super().on_train_begin(logs)

    keras.utils.set_random_seed(0)
    x, y = _images(160)
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = Tagged(tmp_path / "run", probe=x[:8], batch_freq=3)
    assert isinstance(logger, Tagged) and type(logger).__name__ == "Tagged"
    assert type(logger) is type(Tagged(tmp_path / "other", probe=x[:8], batch_freq=2))  # one class, made once
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, shuffle=False, callbacks=[logger])
    assert logger.began and repviz.open_logdir(tmp_path).run("run").steps() == [0, 3, 6, 9]


@pytest.mark.parametrize("snapshot, warns", [(0.02, True), (0.005, False)])
def test_a_costly_batch_schedule_warns_once(tmp_path, monkeypatch, snapshot, warns):
    """The rule on a fit timed by a scripted clock (the share of the training time between snapshots, medians of
    three), then on a real fit whose every batch is followed by a snapshot, which costs far more than a tenth of a
    batch."""
    # the clock the logger reads around each snapshot: 0.1 s of training, then the snapshot, and again
    ticks = (k * (0.1 + snapshot) + after * snapshot for k in itertools.count() for after in (0, 1))
    keras.utils.set_random_seed(0)
    x, y = _images(12)
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "unit", probe=x[:8], batch_freq=2)
    with monkeypatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        patch.setattr(callback, "time", types.SimpleNamespace(time=time.time, perf_counter=lambda: next(ticks)))
        warnings.simplefilter("always")
        # 6 snapshots: the first starts the clock, three more decide, later ones are not judged
        model.fit(x, y, epochs=1, batch_size=1, verbose=0, shuffle=False, callbacks=[logger])
    costly = [w for w in caught if "training runs at least that much slower" in str(w.message)]
    assert len(costly) == warns
    if warns:
        assert "every 2 batches takes 20 ms on the training thread, 20% of the 0.10 s" in str(costly[0].message)
    keras.utils.set_random_seed(0)
    x, y = _images(192)
    with pytest.warns(RuntimeWarning, match="a snapshot every batch takes") as caught:
        _fit(_mlp(), tmp_path / "run", x, y, epochs=1, batch_freq=1)
    assert sum("training runs at least" in str(w.message) for w in caught) == 1


def test_resumed_batch_schedule_of_unknown_length_continues_the_count(tmp_path):
    """Non-regression: a resumed batch_freq run fed by a generator (no known epoch length) restarted the batch
    count at 0 and overwrote the stored snapshots."""
    import tensorflow as tf

    x, y = _images(96)
    data = tf.data.Dataset.from_generator(  # cardinality unknown: Keras reports params["steps"] = None
        lambda: ((x[i:i + 32], y[i:i + 32]) for i in range(0, 96, 32)),
        output_signature=(tf.TensorSpec((None, 28, 28), tf.float32), tf.TensorSpec((None,), tf.int64)))
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    for initial in (0, 2):
        logger = ActivationLogger(tmp_path / "run", probe=x[:8], batch_freq=2, layers=["hidden"])
        model.fit(data, epochs=initial + 2, initial_epoch=initial, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == [0, 2, 4, 6, 7, 8, 10, 12]  # 7: the resumed start, then every 2nd batch
    assert [run.record("hidden", s)["epoch"] for s in (0, 2, 4, 6, 7)] == [0, 0, 1, 1, 2]


@pytest.mark.parametrize("same_logger", [True, False])
def test_a_second_fit_continues_the_step_count_and_overwrites_nothing(tmp_path, same_logger):
    """Non-regression (issue #27): with an epoch schedule the second fit restarted at step 0 and overwrote the
    first fit's snapshots."""
    keras.utils.set_random_seed(0)
    x, y = _images()
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), layers=["hidden"])
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    first = {s: np.array(run.activations("hidden", s)) for s in run.steps()}
    if not same_logger:  # a later script: a new logger into the same run
        logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), layers=["hidden"])
    model.fit(x, y, epochs=3, batch_size=32, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == [0, 1, 2, 3, 4, 5]
    for s, a in first.items():  # the first fit's snapshots, untouched
        np.testing.assert_array_equal(run.activations("hidden", s), a)
    assert len([r for r in run.records() if r["kind"] == "activation" and r["step"] == 2]) == 1
    assert [(f["first_step"], f["end_step"]) for f in run.manifest["fits"]] == [(0, 2), (2, 5)]
    head = keras.Model(model.inputs, model.get_layer("hidden").output)
    np.testing.assert_allclose(run.activations("hidden", 5), head.predict(x[:N], verbose=0), rtol=1e-5, atol=1e-6)


def test_epoch_list_schedule(tmp_path):
    x, y = _images()
    run = _fit(_mlp(), tmp_path / "run", x, y, epochs=3, freq=[1, 3])
    assert run.steps() == [0, 1, 3]


def test_an_epoch_list_applies_to_each_fit_as_fit_numbers_its_epochs(tmp_path):
    """freq=[0, 2, 5] into one run: a second fit numbers its epochs from 1 again and continues the step count
    (steps 3 and 3 + 2); fit(initial_epoch=6, epochs=9) runs epochs 7-9, which the list does not name: it is said
    (it was not: the check counted epochs from 1), and a resumed fit(initial_epoch=3) takes the listed epoch 5."""
    keras.utils.set_random_seed(0)
    x, y = _images()
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), layers=["hidden"], freq=[0, 2, 5])
    for _ in range(2):
        model.fit(x, y, epochs=3, batch_size=32, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == [0, 2, 3, 5]
    assert [run.record("hidden", s)["epoch"] for s in run.steps()] == [0, 2, 0, 2]  # each fit's own epoch
    with pytest.warns(RuntimeWarning, match=r"freq=\[0, 2, 5\] schedules no snapshot within epochs 7-9 of this fit"):
        model.fit(x, y, epochs=9, initial_epoch=6, batch_size=32, verbose=0, callbacks=[logger])
    assert repviz.open_logdir(tmp_path).run("run").steps() == [0, 2, 3, 5, 6]
    resumed = ActivationLogger(tmp_path / "resumed", probe=(x[:N], y[:N]), layers=["hidden"], freq=[0, 2, 5])
    model.fit(x, y, epochs=6, initial_epoch=3, batch_size=32, verbose=0, callbacks=[resumed])
    run = repviz.open_logdir(tmp_path).run("resumed")
    assert run.steps() == [3, 5]
    assert [(f["first_step"], f["end_step"]) for f in run.manifest["fits"]] == [(3, 6)]


def test_a_schedule_beyond_the_fit_is_reported(tmp_path):
    """Non-regression: freq=[100] with 2 epochs recorded only step 0 without a word; the warning points at the
    user's line (the fit call), not at repviz's (issue #27)."""
    x, y = _images()
    with pytest.warns(RuntimeWarning, match=r"freq=\[100\] schedules no snapshot within the 2 epoch\(s\)") as w:
        run = _fit(_mlp(), tmp_path / "run", x, y, epochs=2, freq=[100])
    assert run.steps() == [0]
    assert [r.filename for r in w if "schedules no snapshot" in str(r.message)] == [__file__]


def test_a_time_series_probe_gets_line_plot_thumbnails(tmp_path):
    """Non-regression (issue #27): a (n, 500, 1) series got a 63 x 1 striped "barcode" as its thumbnail."""
    t = np.linspace(0, 2 * np.pi, 500, dtype=np.float32)
    x = np.stack([np.sin(t + p) for p in (0.0, 1.0, 2.0)])[..., None]
    thumbs = capture_probe.line_thumbnails(x)
    assert thumbs.shape == (3, 32, 64) and thumbs.dtype == np.uint8
    assert ((thumbs == 0).any(axis=1)).all()  # a stroke in every column, black on white
    peak = np.add.reduceat(x[0, :, 0], np.linspace(0, 500, 65).astype(int)[:-1]).argmax()
    assert thumbs[0, 0, peak] == 0 and thumbs[0, 31, peak] == 255  # the highest bin at the top row


def test_the_background_process_starts_without_the_fork_handlers_and_at_the_lowest_priority():
    """Non-regression (issue #27): started with preexec_fn, the embedding process ran the parent's fork handlers,
    which JAX answers with "os.fork() was called ... will likely lead to a deadlock"."""
    from repviz.workers import background_process

    forks = []
    os.register_at_fork(before=lambda: forks.append(os.getpid()))
    child = background_process(["-c", "import os; print(os.nice(0))"], stdout=subprocess.PIPE)
    out, _ = child.communicate(timeout=60)
    assert forks == [] and out.decode().strip() == "19"


def test_resumed_training_continues_run(tmp_path):
    x, y = _images()
    model = _mlp()
    _fit(model, tmp_path / "run", x, y, epochs=2)
    logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]))
    model.fit(x, y, epochs=4, initial_epoch=2, batch_size=32, verbose=0, callbacks=[logger])
    assert repviz.open_logdir(tmp_path).run("run").steps() == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------------------------------------------
# Probes as fit takes them
# ---------------------------------------------------------------------------------------------------------------

def _two_inputs():
    a, b = keras.Input((3,), name="alpha"), keras.Input((5,), name="beta")
    h = keras.layers.Dense(4, activation="tanh", name="hidden")(keras.layers.concatenate([b, a], name="cat"))
    return keras.Model([b, a], keras.layers.Dense(2, activation="softmax", name="out")(h))  # declared: beta, alpha


def test_a_dict_probe_is_matched_to_the_inputs_by_name(tmp_path):
    """Non-regression (issue #27): a dict probe was compared in sorted-key order (alpha, beta) with the inputs in
    declaration order (beta, alpha) and refused."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(96, 3)).astype(np.float32), rng.normal(size=(96, 5)).astype(np.float32)
    y = rng.integers(0, 2, 96)
    model = _two_inputs()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=({"alpha": a[:N], "beta": b[:N]}, y[:N]))
    model.fit([b, a], y, epochs=1, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    head = keras.Model(model.inputs, model.get_layer("hidden").output)
    np.testing.assert_allclose(run.activations("hidden", 1), head.predict([b[:N], a[:N]], verbose=0), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("form", ["frame", "columns"])
def test_a_pandas_probe_as_fit_takes_it(tmp_path, form):
    """A DataFrame probe with a Series of labels, as model.fit takes them: the frame for one input of its width, or
    dict(frame) for one Input((1,)) per column (keras-io's structured data, inputs declared in another order than
    the columns); the frame's columns also as metadata. The stored activations are the model's on the values."""
    pd = pytest.importorskip("pandas")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.normal(40, 9, 96), "visits": rng.integers(0, 9, 96),
                          "score": rng.random(96).astype(np.float32)})
    y = pd.Series((frame.score > 0.5).astype(int), name="label")
    if form == "frame":
        inputs = keras.Input((3,))
        hidden = keras.layers.Dense(4, activation="tanh", name="hidden")(inputs)
        probe, values = frame, frame.to_numpy(np.float32)
    else:
        inputs = {c: keras.Input((1,), name=c) for c in ("score", "age", "visits")}
        hidden = keras.layers.Dense(4, activation="tanh", name="hidden")(keras.layers.concatenate(list(inputs.values())))
        probe, values = dict(frame), {c: frame[[c]].to_numpy(np.float32) for c in inputs}
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax", name="out")(hidden))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=(probe, y), probe_size=N,
                              metadata=frame[:N].assign(label=y[:N].map({0: "low", 1: "high"})))
    model.fit(probe, y, epochs=1, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    np.testing.assert_array_equal(run.probe.labels, y[:N])
    assert run.probe.metadata.kinds == {"age": "number", "visits": "category", "score": "number", "label": "category"}
    np.testing.assert_array_equal(run.probe.metadata["age"], frame.age[:N])
    head = keras.Model(model.inputs, model.get_layer("hidden").output)
    np.testing.assert_allclose(run.activations("hidden", 1), head.predict(keras.tree.map_structure(lambda v: v[:N], values), verbose=0),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["dict", "list", "generator"])
def test_multi_output_targets_give_the_primary_outputs_labels(tmp_path, form):
    """Non-regression (issue #27): a multi-output model's targets as fit takes them (a dict by output name, a list
    in output order, or batches of them) were refused ("len() of unsized object", "inhomogeneous shape"); the
    labels stored are the primary output's (prediction_output)."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((96, 3), dtype=np.float32)
    score, kind = rng.random((96, 1)).astype(np.float32), rng.integers(0, 3, 96)
    inp = keras.Input((3,))
    h = keras.layers.Dense(4, name="hidden")(inp)
    model = keras.Model(inp, [keras.layers.Dense(1, name="score")(h),
                              keras.layers.Dense(3, activation="softmax", name="kind")(h)])
    model.compile(optimizer="adam", loss=["mse", "sparse_categorical_crossentropy"])
    targets = {"dict": {"score": score, "kind": kind}, "list": [score, kind]}
    probe = (x, targets[form]) if form in targets else (
        (x[i:i + 10], {"score": score[i:i + 10], "kind": kind[i:i + 10]}) for i in range(0, 96, 10))
    logger = ActivationLogger(tmp_path / "run", probe=probe, probe_size=N, prediction_output="kind")
    model.fit(x, [score, kind], epochs=1, verbose=0, callbacks=[logger])
    np.testing.assert_array_equal(repviz.open_logdir(tmp_path).run("run").probe.labels, kind[:N])
    wrong = ActivationLogger(tmp_path / "wrong", probe=(x, {"a": score, "b": kind}))
    with pytest.raises(ValueError, match=r"^the probe's labels are keyed \['a', 'b'\] but the recorded output is "
                                         r"'score'; key them by output name"):
        model.fit(x, [score, kind], epochs=1, verbose=0, callbacks=[wrong])


def _batches(x, y, size=10):
    return ((x[i:i + size], y[i:i + size]) for i in range(0, len(x), size))


class _Sequence(keras.utils.PyDataset):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return -(-len(self.x) // 10)

    def __getitem__(self, i):
        return self.x[10 * i:10 * i + 10], self.y[10 * i:10 * i + 10]


@pytest.mark.parametrize("kind", ["generator", "pydataset", "tf.data", "rank N-1"])
def test_dataset_generator_and_rank_short_probes(tmp_path, kind):
    """A probe as fit takes it gives the same stored probe and activations as the arrays themselves; the labels
    come from the batches' y, and probe_size bounds the rows taken."""
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    x, y = _images(96)
    x = x[..., None]  # Input((28, 28, 1))
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(6, activation="relu", name="hidden"),
                              keras.layers.Dense(2, activation="softmax", name="out")])
    probe = {"generator": lambda: _batches(x, y), "pydataset": lambda: _Sequence(x, y),
             "tf.data": lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(10),
             "rank N-1": lambda: (x[..., 0], y)}[kind]()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = ActivationLogger(tmp_path / "run", probe=probe, probe_size=25)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    assert len(run.probe) == 25
    np.testing.assert_array_equal(run.probe.labels, y[:25])
    head = keras.Model(model.inputs, model.get_layer("hidden").output)
    np.testing.assert_allclose(run.activations("hidden", 1), head.predict(x[:25], verbose=0), rtol=1e-5, atol=1e-6)


def test_a_dataset_probe_takes_1000_examples_by_default():
    x = np.arange(1200, dtype=np.float32).reshape(1200, 1)
    taken, labels = capture_probe.split_probe((x[i:i + 64], None) for i in range(0, 1200, 64))
    assert taken.shape == (1000, 1) and labels is None
    np.testing.assert_array_equal(taken[:, 0], np.arange(1000))


# ---------------------------------------------------------------------------------------------------------------
# Sequence pooling
# ---------------------------------------------------------------------------------------------------------------

def test_sequence_pooling_honours_the_keras_mask(tmp_path):
    """Each policy against the embedding table itself: mean and max over the tokens the mask keeps (0 is
    padding, mask_zero=True), the first token, the last kept one; the default for (n, T, d) is the mean."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.integers(1, 9, size=(96, 5)).astype(np.int32)
    lengths = rng.integers(1, 6, size=96)
    x[np.arange(5)[None, :] >= lengths[:, None]] = 0
    y = rng.integers(0, 2, 96)
    model = keras.Sequential([keras.Input((5,), dtype="int32"), keras.layers.Embedding(9, 3, mask_zero=True,
                                                                                        name="emb"),
                              keras.layers.LSTM(4, name="lstm"), keras.layers.Dense(2, activation="softmax",
                                                                                    name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    runs = {}
    for policy in (None, "mean", "max", "first", "last", "flatten"):
        logger = ActivationLogger(tmp_path / str(policy), probe=(x[:N], y[:N]), layers=["emb"],
                                  pooling=policy if policy != "mean" else {"emb": "mean"})
        model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])
        runs[policy] = run = repviz.open_logdir(tmp_path).run(str(policy))
        vectors = keras.ops.convert_to_numpy(model.get_layer("emb").embeddings)[x[:N]]
        kept = (x[:N] > 0)[:, :, None]
        expected = {"mean": (vectors * kept).sum(1) / kept.sum(1), "max": np.where(kept, vectors, -np.inf).max(1),
                    "first": vectors[:, 0], "last": vectors[np.arange(N), lengths[:N] - 1],
                    "flatten": vectors.reshape(N, -1)}[policy or "mean"]
        np.testing.assert_allclose(run.activations("emb", 1), expected, rtol=1e-5, atol=1e-6, err_msg=str(policy))
    assert runs[None].layer_info("emb")["reduction"]["kind"] == "sequence_mean_pooling"
    assert runs["last"].layer_info("emb")["reduction"]["kind"] == "sequence_last_pooling"
    assert runs["flatten"].layer_info("emb")["reduction"] == {"kind": "none"}


# ---------------------------------------------------------------------------------------------------------------
# Reductions and precision
# ---------------------------------------------------------------------------------------------------------------

def test_info_names_the_pooling_before_a_sketch(tmp_path, capsys):
    """Non-regression (issue #27): a wide sequence output, mean-pooled then count-sketched, was listed by repviz info
    as "count_sketch" only (the manifest's reduction says 'before': 'sequence_mean_pooling')."""
    from repviz.cli import main

    rng = np.random.default_rng(0)
    x, y = rng.random((N, 4, 8), dtype=np.float32), rng.integers(0, 2, N)
    model = keras.Sequential([keras.Input((4, 8)), keras.layers.Dense(600, name="wide"),
                              keras.layers.GlobalAveragePooling1D(name="gap"), keras.layers.Dense(2, name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    run = _fit(model, tmp_path / "run", x, y, epochs=1, layers=["wide"])
    assert run.layer_info("wide")["reduction"]["before"] == "sequence_mean_pooling"
    assert main(["info", str(tmp_path)]) == 0
    assert "(sequence_mean_pooling, then count_sketch from [None, 4, 600])" in capsys.readouterr().out


def test_count_sketch_preserves_distances_and_is_fixed(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(96, 512)).astype(np.float32)
    y = rng.integers(0, 2, 96)
    inp = keras.Input((512,))
    ident = keras.layers.Activation("linear", name="ident")(inp)  # equals the input at every snapshot
    model = keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(ident))
    run = _fit(model, tmp_path / "run", x, y, layers=["ident", "out"], max_width=300, projection_dim=256)
    info = run.layer_info("ident")
    assert info["reduction"]["kind"] == "count_sketch" and info["reduction"]["dim"] == 256
    assert info["stored_shape"] == [N, 256] and info["output_shape"] == [None, 512]
    assert run.layer_info("out")["reduction"] == {"kind": "none"}
    np.testing.assert_array_equal(run.activations("ident", 0), run.activations("ident", 2))  # fixed for the run
    index, signs = count_sketch_plan(512, 256, info["reduction"]["seed"])  # the numpy definition
    np.testing.assert_allclose(run.activations("ident", 2), count_sketch(x[:N], index, signs, 256), atol=1e-5)
    from scipy.spatial.distance import pdist

    ratio = pdist(np.asarray(run.activations("ident", 2), np.float64)) / pdist(x[:N].astype(np.float64))
    print(f"distance ratio: mean {ratio.mean():.3f}, std {ratio.std():.3f}")
    assert abs(ratio.mean() - 1) < 0.03 and ratio.std() < 0.08  # JL: std <= 1/sqrt(2 * 256) = 0.044


def test_count_sketch_plan_is_seeded_and_unbiased():
    index, signs = count_sketch_plan(1000, 64, [0, 7])
    again, again_signs = count_sketch_plan(1000, 64, [0, 7])
    np.testing.assert_array_equal(index, again)
    np.testing.assert_array_equal(signs, again_signs)
    assert not np.array_equal(index, count_sketch_plan(1000, 64, [1, 7])[0])  # the seed matters
    used = signs != 0
    assert len(index) == 64 * 16 and np.array_equal(np.sort(index[used]), np.arange(1000))  # each column once
    assert set(np.unique(signs[used])) == {-1.0, 1.0}
    eye = np.eye(1000, dtype=np.float32)[:50]
    np.testing.assert_allclose(np.linalg.norm(count_sketch(eye, index, signs, 64), axis=1), 1)
    x = np.random.default_rng(0).normal(size=(1, 1000)).astype(np.float32)
    norms = [np.sum(count_sketch(x, *count_sketch_plan(1000, 64, [s, 0]), 64) ** 2) for s in range(400)]
    assert abs(np.mean(norms) / np.sum(x ** 2) - 1) < 0.03  # E ||Rx||^2 = ||x||^2; sd of the mean ~ 0.009


@pytest.mark.parametrize("rows", [1, 7, 64])  # a block of four and a tail; only a tail; blocks only
def test_apply_count_sketch_is_the_definition_on_any_thread_count(rows):
    import numba

    from repviz._reduction import apply_count_sketch, count_sketch_columns

    x = np.random.default_rng(rows).normal(size=(rows, 1000)).astype(np.float32)
    index, signs = count_sketch_plan(1000, 64, [3, 1])
    bucket, sign = count_sketch_columns(index, signs, 1000, 64)
    assert np.array_equal(np.sort(np.unique(bucket)), np.arange(64)) and set(np.unique(sign)) == {-1.0, 1.0}
    outs, old = [], numba.get_num_threads()
    try:
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(threads)
            out = np.full((rows, 64), np.nan, np.float32)  # every entry is written
            apply_count_sketch(x, bucket, sign, out)
            outs.append(out)
    finally:
        numba.set_num_threads(old)
    out = np.full((rows, 64), np.nan, np.float32)
    apply_count_sketch(x, bucket, sign, out, threads=1)  # the writer thread's form: the calling thread alone
    outs.append(out)
    np.testing.assert_allclose(outs[0], count_sketch(x, index, signs, 64), rtol=1e-5, atol=1e-5)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_default_probe_batch_fits_the_memory_budget_and_changes_no_value(tmp_path):
    from repviz.capture.reduction import BATCH_BYTES, auto_batch_rows

    keras.utils.set_random_seed(0)
    x, y = _images()
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
                              keras.layers.Flatten(), keras.layers.Dense(2, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    loggers = [ActivationLogger(tmp_path / f"b{b}", probe=(x[:N, ..., None], y[:N]), batch_size=b) for b in (None, 5)]
    model.fit(x[..., None], y, epochs=1, batch_size=32, verbose=0, callbacks=loggers)
    runs = [repviz.open_logdir(tmp_path).run(f"b{b}") for b in (None, 5)]
    for layer in ("conv", "out"):
        np.testing.assert_allclose(runs[0].activations(layer, 1), runs[1].activations(layer, 1), rtol=1e-5,
                                   atol=1e-6)
    # the rule, on what it reads of the captures and outputs: this model's 26 x 26 x 4 conv and 2 outputs
    conv, out = [types.SimpleNamespace(flat_width=2704)], [types.SimpleNamespace(sample_shape=(2,))]
    most = BATCH_BYTES // (4 * 2706)
    assert auto_batch_rows(N, conv, out) == N  # the probe of the fit above: one batch
    for n in (10 ** 6, most + 1, 3 * most, 3 * most - 1):  # the fewest batches within the budget, equal in size
        rows = auto_batch_rows(n, conv, out)
        batches = -(-n // rows)
        assert rows <= most and batches == -(-n // most)
        assert rows - (n - (batches - 1) * rows) < batches  # the last batch is short by less than one row a batch
    assert auto_batch_rows(most + 1, conv, out) == (most + 2) // 2
    assert auto_batch_rows(10, conv, out) == 10
    wide = [types.SimpleNamespace(flat_width=10 ** 9)]  # a layer too wide for the budget still runs in batches of 16
    assert auto_batch_rows(10 ** 6, wide, out) == 16


def test_count_sketch_distance_error_on_a_real_conv_layer(tmp_path):
    """The default reduction of a 10,816-wide conv layer of a CNN trained on real digits: pairwise probe
    distances and meta-SNE distances between snapshots against the full-width activations."""
    from scipy.spatial.distance import pdist

    from repviz.datasets import BUNDLED_MNIST, load_mnist
    from repviz.meta import representation_distances

    (x, y), (xt, _) = load_mnist(BUNDLED_MNIST)
    x, probe = (x[:2000, ..., None] / 255).astype(np.float32), (xt[:300, ..., None] / 255).astype(np.float32)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(16, 3, activation="relu", name="conv"),
                              keras.layers.MaxPooling2D(name="pool"), keras.layers.Flatten(),
                              keras.layers.Dense(10, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    side = keras.Model(model.inputs, model.get_layer("conv").output)
    full = [side.predict(probe, verbose=0).reshape(len(probe), -1)]
    model.fit(x, y[:2000], epochs=2, batch_size=64, verbose=0,
              callbacks=[ActivationLogger(tmp_path / "run", probe=probe, layers="conv")])
    full.append(side.predict(probe, verbose=0).reshape(len(probe), -1))
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.layer_info("conv")["reduction"]["kind"] == "count_sketch" and full[0].shape[1] == 10816
    sketched = [np.asarray(run.activations("conv", s), np.float64) for s in (0, 2)]
    assert sketched[0].shape == (300, 256)
    err = np.abs(pdist(sketched[1]) / pdist(full[1].astype(np.float64)) - 1)
    meta_full = representation_distances(full)[0, 1]
    meta_sketched = representation_distances(sketched)[0, 1]
    print(f"median relative distance error {np.median(err):.4f}; meta-SNE distance {meta_full:.4f} at full "
          f"width, {meta_sketched:.4f} sketched")
    assert np.median(err) <= 0.05
    assert abs(meta_sketched - meta_full) <= 0.05  # chords of unit distance vectors: ~ relative distance change


def test_resuming_a_run_with_a_reduction_this_version_cannot_apply_is_refused(tmp_path):
    """A manifest naming a reduction this version does not know (hand-edited, or from another build) stops the
    resumed fit with the layer and the reduction named, before anything is written over the run."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(96, 600)).astype(np.float32), rng.integers(0, 2, 96)
    inp = keras.Input((600,))
    model = keras.Model(inp, keras.layers.Dense(2, activation="softmax", name="out")(
        keras.layers.Activation("linear", name="ident")(inp)))
    run = _fit(model, tmp_path / "run", x, y, epochs=1, layers=["ident", "out"])
    unknown = {"kind": "random_projection", "dim": 64, "seed": [0, 12345], "in_width": 600, "before": "none"}
    ident = {**run.layer_info("ident"), "reduction": unknown, "stored_shape": [N, 64]}
    RunWriter(run.run_dir).begin({**run.manifest, "layers": {**run.manifest["layers"], "ident": ident}})
    logger = ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), layers=["ident", "out"])
    with pytest.raises(ValueError, match=r"layer 'ident' of this run was recorded with the reduction "
                                         r"'random_projection', .* record into a new run directory"):
        model.fit(x, y, epochs=2, initial_epoch=1, batch_size=32, verbose=0, callbacks=[logger])
    assert repviz.open_logdir(tmp_path).run("run").steps("ident") == [0, 1]


def test_conv_pooling_and_projection(tmp_path):
    keras.utils.set_random_seed(0)
    x, y = _images(96)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
                              keras.layers.GlobalAveragePooling2D(name="gap"),
                              keras.layers.Dense(2, activation="softmax", name="out")])
    x4 = x[..., None]
    pooled = _fit(model, tmp_path / "avg", x4, y, layers=["conv", "gap"], pooling="avg")
    np.testing.assert_allclose(pooled.activations("conv", 2), pooled.activations("gap", 2), rtol=1e-5, atol=1e-6)
    assert pooled.layer_info("conv")["reduction"]["kind"] == "global_avg_pooling"
    projected = _fit(model, tmp_path / "proj", x4, y, epochs=1, layers="conv", max_width=1000, projection_dim=64)
    assert projected.layer_info("conv")["stored_shape"] == [N, 64]  # 26 * 26 * 4 = 2704 > 1000
    assert projected.layer_info("conv")["reduction"]["in_width"] == 2704


def _conv_net(functional: bool):
    """Conv(relu) -> ReLU -> Activation(relu) -> pool -> Flatten -> Conv-free head; conv2 (linear) -> ReLU."""
    L = keras.layers
    stack = [L.Conv2D(4, 3, activation="relu", name="conv"), L.ReLU(name="relu"), L.Activation("relu", name="act"),
             L.MaxPooling2D(name="pool"), L.Conv2D(4, 3, name="conv2"), L.ReLU(name="relu2"),
             L.Activation("linear", name="ident"), L.Flatten(name="flat"), L.Dense(2, activation="softmax", name="out")]
    if not functional:
        return keras.Sequential([keras.Input((28, 28, 1)), *stack])
    inp = keras.Input((28, 28, 1))
    h = inp
    for layer in stack:
        h = layer(h)
    return keras.Model(inp, h)


@pytest.mark.parametrize("functional", [False, True])
def test_default_layers_record_no_tensor_twice(tmp_path, functional, capsys):
    keras.utils.set_random_seed(0)
    x, y = _images(64)
    model = _conv_net(functional)
    run = _fit(model, tmp_path / "run", x[..., None], y, epochs=1)
    # relu and act repeat conv (ReLU is idempotent); ident repeats relu2; conv2 is linear, so relu2 is new.
    assert run.layers == ["conv", "pool", "conv2", "relu2", "out"]
    skipped = run.manifest["skipped"]
    assert set(skipped) == {"relu", "act", "ident", "flat"}
    assert skipped["flat"].startswith("a Flatten: not in the default set")
    assert "same tensor as 'conv'" in skipped["act"] and "same tensor as 'relu2'" in skipped["ident"]
    # The pooled maps that Flatten reshapes are recorded once, under the pooling layer (a reshape is never
    # in the default set), whole and in Flatten's order.
    head = keras.Model(model.inputs, model.get_layer("relu2").output)
    np.testing.assert_allclose(run.activations("relu2", 1), head.predict(x[:N, ..., None], verbose=0)
                               .reshape(N, -1), rtol=1e-5, atol=1e-6)
    from repviz.cli import main

    assert main(["info", str(tmp_path)]) == 0
    assert "act                              not recorded: same tensor as 'conv'" in capsys.readouterr().out
    named = _fit(_conv_net(functional), tmp_path / "named", x[..., None], y, epochs=1, layers=["conv", "relu"])
    assert named.layers == ["conv", "relu"] and "skipped" not in named.manifest  # what is named is recorded


def test_a_failed_background_write_surfaces_on_the_training_thread(tmp_path, monkeypatch):
    from repviz import store

    write = store.RunWriter.write_activation

    def failing(self, layer, step, array, **info):
        if step == 1:
            raise OSError(28, "No space left on device")
        return write(self, layer, step, array, **info)

    monkeypatch.setattr(store.RunWriter, "write_activation", failing)
    x, y = _images()
    with pytest.raises(OSError, match="No space left") as caught:
        _fit(_mlp(), tmp_path / "run", x, y, epochs=3)
    assert any("background writer" in note for note in caught.value.__notes__)
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == [0] and run.prediction_steps() == [0]  # nothing stored after the failed snapshot


def test_float16_storage(tmp_path, mlp_run):
    run32 = mlp_run[0]
    x, y = _images()
    keras.utils.set_random_seed(0)
    run16 = _fit(_mlp(), tmp_path / "run", x, y, dtype="float16")
    a16 = run16.activations("hidden", 0)
    assert a16.dtype == np.float16 and run16.record("hidden", 0)["dtype"] == "<f2"
    np.testing.assert_allclose(a16, run32.activations("hidden", 0), rtol=2e-3, atol=2e-3)


def test_mixed_precision_stored_as_float32(tmp_path):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(0)
        x, y = _images()
        model = _mlp()
        run = _fit(model, tmp_path / "run", x, y, epochs=1)
        side = keras.Model(model.inputs[0], model.get_layer("hidden").output)
        want = keras.ops.convert_to_numpy(side(x[:N], training=False))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert want.dtype == np.float16
    got = run.activations("hidden", 1)
    assert got.dtype == np.float32 and np.isfinite(got).all()
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_nonfinite_activations_are_stored_and_counted(tmp_path):
    """Non-finite activations are stored as they are, counted and reported.

    Non-regression: this test relied on ReLU(NaN) = NaN, which oneDNN's kernels on AVX-512 CPUs turn into 0.
    A linear layer keeps NaN on every CPU; the probe's NaN is also reported before training.
    """
    x, y = _images()
    probe = x[:N].copy()
    probe[5, 3, 3] = np.nan
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(16, name="hidden"), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    with pytest.warns(RuntimeWarning, match=r"the probe inputs hold 1 non-finite value\(s\)"):
        logger = ActivationLogger(tmp_path / "run", probe=probe, layers=["hidden"])
    with pytest.warns(RuntimeWarning, match="layer 'hidden' has 16 non-finite activation value"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.record("hidden", 0)["nonfinite"] == 16
    assert np.isnan(run.activations("hidden", 0)[5]).all() and np.isfinite(run.activations("hidden", 0)[4]).all()


def test_a_fit_that_fails_while_starting_does_not_lock_the_directory(tmp_path):
    """Non-regression: bad labels failed on_train_begin after the manifest was written; the retry with correct
    labels was refused as a different probe although nothing was stored."""
    x, y = _images()
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    bad = ActivationLogger(tmp_path / "run", probe=(x[:N], np.array([None] * N, dtype=object)))
    with pytest.raises(TypeError, match="refusing to store an object array"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[bad])
    model.fit(x, y, epochs=1, verbose=0, callbacks=[ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]))])
    assert repviz.open_logdir(tmp_path).run("run").steps() == [0, 1]


def test_tensorboard_marker_names_the_plugin(mlp_run):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    run = mlp_run[0]
    files = sorted(run.run_dir.glob("events.out.tfevents.*"))
    assert len(files) == 1
    values = [v for e in EventFileLoader(str(files[0])).Load() if e.HasField("summary") for v in e.summary.value]
    assert [v.metadata.plugin_data.plugin_name for v in values] == ["repviz"]
    assert json.loads(values[0].metadata.plugin_data.content)["layers"] == run.layers


# ---------------------------------------------------------------------------------------------------------------
# Bad input, early
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(probe=np.zeros((0, 28, 28))), r"the probe is empty \(0 rows\)"),
    (dict(probe=(np.zeros((4, 28, 28)), np.zeros(3))), "4 input rows but 3 labels"),
    (dict(freq=0), r"The 'freq' parameter of ActivationLogger must be an int >= 1 .* Got 0 instead"),
    (dict(freq=2, batch_freq=5), "not both"),
    (dict(batch_freq=-1), r"'batch_freq' parameter .* Got -1 instead"),
    (dict(dtype="int8"), r"'dtype' parameter .* Got 'int8' instead"),
    (dict(pooling="min"), r"'pooling' parameter .* Got 'min' instead"),
    (dict(max_width=100, projection_dim=200), r"projection_dim \(200\) must not exceed max_width \(100\)"),
    (dict(layers=[3]), r"'layers' parameter .* Got \[3\] instead"),
    (dict(probe_ids=[1, 1, 2, 3]), "probe_ids must be unique"),
    (dict(prediction_output=0), r"'prediction_output' parameter .* must be a str or None\. Got 0 instead"),
])
def test_bad_arguments_at_construction(tmp_path, kwargs, match):
    kwargs = {"probe": np.zeros((4, 28, 28), np.float32), **kwargs}
    with pytest.raises(ValueError, match=match):
        ActivationLogger(tmp_path / "run", **kwargs)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(probe=ProbeSet(np.zeros((4, 28, 28), np.float32), size=0)), ValueError,
     r"^The 'size' parameter of ProbeSet must be an int in the range \[1, inf\) or None\. Got 0 instead\.$"),
    (dict(reduction=Reduction(pooling="min")), ValueError, r"^The 'pooling' parameter of Reduction must be "),
    (dict(reduction={"pool": "avg"}), ValueError, r"'reduction' parameter of ActivationLogger must be a Reduction "
                                                  r"or a dict with keys among \['dtype', 'max_width', "),
    (dict(probe=ProbeSet(np.zeros((4, 28, 28), np.float32), ids=[1, 1, 2, 3])), ValueError, "^ids must be unique"),
    (dict(probe=ProbeSet(np.zeros((4, 28, 28), np.float32)), probe_size=2), ValueError,
     r"^probe_size= sets ProbeSet's 'size', and probe= is a ProbeSet: pass ProbeSet\(size=\.\.\.\) instead$"),
    (dict(reduction={"dtype": "float16"}, max_width=8), ValueError, r"pass Reduction\(max_width=\.\.\.\) instead"),
    (dict(probe=ProbeSet(np.zeros((4, 28, 28), np.float32), batch_subset=2)), ValueError,
     r"^batch_subset chooses the probe points .* pass batch_freq= too, or ProbeSet\(size=\) to record"),
    (dict(probe_szie=2), TypeError, r"ActivationLogger\(\) got an unexpected keyword argument 'probe_szie'"),
])
def test_bad_grouped_options_are_named_as_passed(tmp_path, kwargs, error, match):
    """A grouped option is refused under its group's name; a flat keyword may not repeat its group's object."""
    kwargs = {"probe": np.zeros((4, 28, 28), np.float32), **kwargs}
    with pytest.raises(error, match=match):
        ActivationLogger(tmp_path / "run", **kwargs)


def test_the_signature_shows_the_parameters():
    """``__new__`` (which picks the batch variant) does not hide ``__init__``'s parameters from ``inspect``."""
    import inspect

    params = inspect.signature(repviz.ActivationLogger).parameters
    assert list(params)[:2] == ["log_dir", "probe"] and params["probe"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert {"layers", "freq", "batch_freq", "reduction", "seed", "embed", "model", "forward"} <= set(params)
    assert params["legacy"].kind is inspect.Parameter.VAR_KEYWORD and params["seed"].default == 0

    class Tagged(ActivationLogger):
        def __init__(self, log_dir, probe, tag="t", **kwargs):
            super().__init__(log_dir, probe, **kwargs)

    assert list(inspect.signature(Tagged).parameters) == ["log_dir", "probe", "tag", "kwargs"]


def test_grouped_options_store_what_the_flat_keywords_store(tmp_path):
    """``ProbeSet(...)`` and ``reduction=`` record the same files, byte for byte, as the flat keywords they group
    (every file of both runs, the manifests and records but for their times)."""
    keras.utils.set_random_seed(0)
    x, y = _images(96)
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Reshape((28, 28, 1)),
                              keras.layers.Conv2D(4, 3, activation="relu", name="conv"), keras.layers.Flatten(),
                              keras.layers.Dense(8, activation="relu", name="hidden"),
                              keras.layers.Dense(2, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    ids, meta = np.arange(100, 140), {"k": [f"row {i}" for i in range(40)]}
    flat = ActivationLogger(tmp_path / "flat", probe=(x[:40], y[:40]), probe_ids=ids, metadata=meta, batch_freq=2,
                            batch_probe=10, batch_size=16, dtype="float16", max_width=64, projection_dim=16,
                            pooling={"conv": "max"}, seed=3)
    grouped = ActivationLogger(tmp_path / "grouped", batch_freq=2, seed=3,
                               probe=ProbeSet(x[:40], y[:40], ids=ids, metadata=meta, batch_subset=10, batch_size=16),
                               reduction={"dtype": "float16", "max_width": 64, "projection_dim": 16,
                                          "pooling": {"conv": "max"}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a snapshot every 2 batches is costly
        model.fit(x, y, epochs=1, batch_size=32, verbose=0, shuffle=False, callbacks=[flat, grouped])

    def untimed(o):
        if isinstance(o, dict):
            return {k: untimed(v) for k, v in o.items() if k not in ("time", "started", "finished", "created")}
        return [untimed(v) for v in o] if isinstance(o, list) else o

    def files(root):
        return {p.relative_to(root): p for p in (root / "plugins" / "repviz").rglob("*") if p.is_file()}

    a, b = files(tmp_path / "flat"), files(tmp_path / "grouped")
    assert a.keys() == b.keys() and len(a) > 10
    for name, path in a.items():
        if path.suffix == ".json":
            assert untimed(json.loads(path.read_text())) == untimed(json.loads(b[name].read_text())), name
        elif path.suffix == ".jsonl":
            lines = [[untimed(json.loads(line)) for line in p.read_text().splitlines()] for p in (path, b[name])]
            assert lines[0] == lines[1], name
        else:
            assert path.read_bytes() == b[name].read_bytes(), name


def test_unwritable_log_dir(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(OSError, match="cannot write repviz logs under"):
        ActivationLogger(tmp_path / "file" / "run", probe=np.zeros((4, 28, 28), np.float32))


def _fit_fails(tmp_path, model, probe, **kwargs):
    """Fit must fail before the first epoch: nothing recorded, weights untouched."""
    x, y = _images(64)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model(x[:2])  # built by a real call, as after any use
    before = [keras.ops.convert_to_numpy(w).copy() for w in model.weights]
    logger = ActivationLogger(tmp_path / "run", probe=probe, **kwargs)
    try:
        model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])
    finally:
        assert _recorded(tmp_path) == []
        for a, w in zip(before, model.weights):
            np.testing.assert_array_equal(a, keras.ops.convert_to_numpy(w))


def test_unknown_layer_lists_available(tmp_path):
    with pytest.raises(ValueError, match=r"layer 'dense_9' is not in the model; available layers: 'flat', "
                                         r"'hidden', 'drop', 'out'"):
        _fit_fails(tmp_path, _mlp(), _images()[0][:8], layers=["hidden", "dense_9"])


def test_probe_shape_not_fitting_functional_model(tmp_path):
    with pytest.raises(ValueError, match=r"the probe's input 'keras_tensor.*' has shape \(8, 27, 28\) but model .* "
                                         r"expects \(None, 28, 28\) \(so would its fit\)"):
        _fit_fails(tmp_path, _mlp(), np.zeros((8, 27, 28), np.float32))


def test_probe_shape_not_fitting_subclassed_model(tmp_path):
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.flat = keras.layers.Flatten()
            self.dense = keras.layers.Dense(2, activation="softmax")

        def call(self, x):
            return self.dense(self.flat(x))

    with pytest.raises(ValueError, match=r"the probe \(inputs of shape \[8, 20, 20\]\) does not fit model"):
        _fit_fails(tmp_path, Net(), np.zeros((8, 20, 20), np.float32))


def test_different_model_or_probe_into_existing_run_is_refused(tmp_path, mlp_run):
    run = mlp_run[0]
    x, y = _images()
    other = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(3, name="hidden"), keras.layers.Dense(2, name="out")])
    other.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    with pytest.raises(IncompatibleRunError, match="already holds a repviz run of a different model"):
        other.fit(x, y, epochs=1, verbose=0, callbacks=[ActivationLogger(run.run_dir, probe=(x[:N], y[:N]))])
    same = mlp_run[1]
    with pytest.raises(IncompatibleRunError, match="of a different probe"):
        same.fit(x, y, epochs=1, verbose=0, callbacks=[ActivationLogger(run.run_dir, probe=x[1:N + 1])])
    assert run.steps() == [0, 1, 2]


# ---------------------------------------------------------------------------------------------------------------
# Crash safety and the light reader
# ---------------------------------------------------------------------------------------------------------------

_TRAIN_FOREVER = """
import os, sys, time
import numpy as np, keras
from repviz._reduction import count_sketch, count_sketch_plan, gaussian_matrix
from repviz.capture import ActivationLogger

class Slow(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(0.05)

rng = np.random.default_rng(0)
x, y = rng.normal(size=(64, 300)).astype("float32"), rng.integers(0, 2, 64)
model = keras.Sequential([keras.Input((300,)), keras.layers.Dense(400, activation="relu", name="a"),
                          keras.layers.Dense(300, activation="relu", name="b"), keras.layers.Dense(2, name="c")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
model.fit(x, y, epochs=100000, batch_size=64, verbose=0,
          callbacks=[ActivationLogger(sys.argv[1], probe=rng.normal(size=(500, 300)).astype("float32"),
                                      batch_size=50), Slow()])
"""


def _complete_snapshots(root) -> int:
    """How many snapshots (their predictions, written last) run "run" under ``root`` holds so far."""
    try:
        return len(repviz.open_logdir(root).run("run").prediction_steps())
    except NotFoundError:  # not begun yet
        return 0


def test_sigkill_mid_training_leaves_a_readable_run(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _TRAIN_FOREVER, str(tmp_path / "run")],
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if _complete_snapshots(tmp_path) >= 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the training subprocess ended early"
        os.kill(proc.pid, signal.SIGKILL)  # most likely in the middle of writing a snapshot
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    run = repviz.open_logdir(tmp_path).run("run")
    complete = run.prediction_steps()  # predictions are written last in a snapshot
    assert complete[:4] == [0, 1, 2, 3]
    for layer in run.layers:
        assert set(complete) <= set(run.steps(layer))
        for step in run.steps(layer):
            a = np.asarray(run.activations(layer, step))
            assert a.shape == (500, run.layer_info(layer)["stored_shape"][1])
            assert checksum(a) == run.record(layer, step)["crc32"]


def test_reader_needs_no_tensorflow(mlp_run):
    code = textwrap.dedent(f"""
        import sys
        import repviz
        run = repviz.open_logdir({str(mlp_run[0].run_dir.parent)!r}).run("mlp")
        a = run.activations("hidden", 2)
        assert a.shape == ({N}, 16) and float(abs(a).sum()) > 0
        assert run.predictions(1).shape == ({N}, 2) and run.probe.thumbnails.shape == ({N}, 28, 28)
        leaked = [m for m in ("tensorflow", "keras") if m in sys.modules]
        assert not leaked, leaked
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.skipif(keras.backend.backend() == "torch" or importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed (pip install torch), or this process already runs on it "
                           "(CI runs this file on it too)")
def test_capture_on_the_torch_backend(tmp_path):
    """The callback on Keras's PyTorch backend, in a process of its own: a second fit continues the run and the
    stored activations are the layer's outputs (this file runs whole under TensorFlow and JAX in CI)."""
    code = textwrap.dedent(f"""
        import keras, numpy as np, repviz
        rng = np.random.default_rng(0)
        x, y = rng.random((96, 8), dtype=np.float32), rng.integers(0, 2, 96)
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="tanh", name="hidden"),
                                  keras.layers.Dense(2, activation="softmax", name="out")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        logger = repviz.ActivationLogger({str(tmp_path / "run")!r}, probe=(x[:{N}], y[:{N}]))
        for _ in range(2):
            model.fit(x, y, epochs=1, batch_size=32, verbose=0, callbacks=[logger])
        run = repviz.open_logdir({str(tmp_path)!r}).run("run")
        assert run.steps() == [0, 1, 2], run.steps()
        head = keras.Model(model.inputs, model.get_layer("hidden").output)
        np.testing.assert_allclose(run.activations("hidden", 2), head.predict(x[:{N}], verbose=0), atol=1e-5)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "KERAS_BACKEND": "torch"})
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_numba_is_imported_by_the_first_layer_that_needs_the_sketch(tmp_path):
    """A model whose layers are all narrow records without importing numba (the compiler costs the training process
    about 0.1 GB); the first layer wider than max_width loads it, and its snapshots are sketched."""
    code = textwrap.dedent(f"""
        import sys
        import keras, numpy as np, repviz
        rng = np.random.default_rng(0)
        x, y = rng.random((64, 8), dtype=np.float32), rng.integers(0, 2, 64)

        def fit(width, name):
            model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(width, activation="relu", name="wide"),
                                      keras.layers.Dense(2, activation="softmax", name="out")])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
            logger = repviz.ActivationLogger({str(tmp_path)!r} + "/" + name, probe=(x, y), max_width=16,
                                             projection_dim=16)
            model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])
            return repviz.open_logdir({str(tmp_path)!r}).run(name).activations("wide", 1).shape

        assert fit(8, "narrow") == (64, 8) and "numba" not in sys.modules
        assert fit(40, "wide") == (64, 16) and "numba" in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
