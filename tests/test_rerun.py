"""A fit into a directory that holds a run continues it only when the model starts from a state that training
reached there; a new initialisation (the script run again) is recorded as a new run beside it, said in one line,
and never spliced into the old one."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

import repviz
from repviz.capture import ActivationLogger
from repviz.store.files import save_json
from repviz.store.layout import MANIFEST, RUN_SUBDIR

N = 40
NEW_RUN = r"holds another training \(the model does not start from a state that run reached\), so this fit is " \
          r"recorded as the new run '.*run-2'"


def _fit(model, x, y, run_dir, epochs=2, logger=None, **fit):
    logger = logger or ActivationLogger(run_dir, probe=(x[:N], y[:N]), layers=["hidden"])
    model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, callbacks=[logger], **fit)
    return logger


def _steps(root, name="run"):
    return repviz.open_logdir(root).run(name).steps()


def _no_new_run(fn):
    """Run ``fn`` and check that it said nothing about a new run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    assert not [w for w in caught if "holds another training" in str(w.message)]


def test_the_same_script_run_again_is_a_new_run_beside_never_spliced(tmp_path, tiny_classifier):
    """The same seeded script twice: the second model starts where the first run started, not where it ended."""
    model, x, y = tiny_classifier(seed=0)
    _fit(model, x, y, tmp_path / "run")
    first = {s: np.array(repviz.open_logdir(tmp_path).run("run").activations("hidden", s)) for s in (0, 1, 2)}
    again, _, _ = tiny_classifier(seed=0)  # the same initial weights
    with pytest.warns(RuntimeWarning, match=NEW_RUN) as caught:
        logger = _fit(again, x, y, tmp_path / "run")
    assert logger.log_dir == str(tmp_path / "run-2")
    assert sum("holds another training" in str(w.message) for w in caught) == 1
    assert "\n" not in str(caught[0].message)
    assert _steps(tmp_path) == [0, 1, 2] and _steps(tmp_path, "run-2") == [0, 1, 2]
    run = repviz.open_logdir(tmp_path).run("run")
    for s, a in first.items():
        np.testing.assert_array_equal(run.activations("hidden", s), a)
    np.testing.assert_array_equal(repviz.open_logdir(tmp_path).run("run-2").activations("hidden", 0), first[0])
    third, _, _ = tiny_classifier(seed=5)
    with pytest.warns(RuntimeWarning, match=r"recorded as the new run '.*run-3'"):
        _fit(third, x, y, tmp_path / "run")
    # a new logger on the third model, continuing its training, continues run-3 (not run, not a run-4)
    with pytest.warns(RuntimeWarning, match=r"recorded as the new run '.*run-3'"):
        _fit(third, x, y, tmp_path / "run", epochs=1)
    assert _steps(tmp_path, "run-3") == [0, 1, 2, 3] and _steps(tmp_path) == [0, 1, 2]
    assert sorted(repviz.open_logdir(tmp_path).runs) == ["run", "run-2", "run-3"]


def test_initial_epoch_on_the_same_model_continues(tmp_path, tiny_classifier):
    model, x, y = tiny_classifier()
    logger = _fit(model, x, y, tmp_path / "run")
    _no_new_run(lambda: _fit(model, x, y, tmp_path / "run", epochs=4, logger=logger, initial_epoch=2))
    assert _steps(tmp_path) == [0, 1, 2, 3, 4]


def test_a_second_phase_of_the_same_model_object_continues(tmp_path, tiny_classifier):
    """Two-phase transfer learning: a frozen layer, then unfrozen and recompiled with a lower rate."""
    model, x, y = tiny_classifier()
    model.get_layer("hidden").trainable = False
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    logger = _fit(model, x, y, tmp_path / "run")
    model.get_layer("hidden").trainable = True
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy")
    _no_new_run(lambda: _fit(model, x, y, tmp_path / "run", logger=logger))
    run = repviz.open_logdir(tmp_path).run("run")
    assert run.steps() == [0, 1, 2, 3, 4]
    assert [(f["first_step"], f["end_step"]) for f in run.manifest["fits"]] == [(0, 2), (2, 4)]


def test_a_new_logger_on_the_same_model_continues(tmp_path, tiny_classifier):
    model, x, y = tiny_classifier()
    _fit(model, x, y, tmp_path / "run")
    _no_new_run(lambda: _fit(model, x, y, tmp_path / "run", epochs=1))
    assert _steps(tmp_path) == [0, 1, 2, 3]


def test_a_model_restored_from_a_snapshotted_epoch_continues(tmp_path, tiny_classifier):
    """A checkpoint of epoch 1 (a state the run reached) restored into a new model object: resumed."""
    model, x, y = tiny_classifier()
    saved = {}
    keep = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: saved.setdefault(e, model.get_weights()))
    model.fit(x, y, epochs=2, batch_size=16, verbose=0,
              callbacks=[ActivationLogger(tmp_path / "run", probe=(x[:N], y[:N]), layers=["hidden"]), keep])
    restored, _, _ = tiny_classifier(seed=7)
    restored.set_weights(saved[0])
    _no_new_run(lambda: _fit(restored, x, y, tmp_path / "run", epochs=3, initial_epoch=1))
    assert _steps(tmp_path) == [0, 1, 2, 3, 4]  # numbered on from the run's last step, as every later fit


def test_runs_recorded_before_digests_continue_as_they_did(tmp_path, tiny_classifier):
    model, x, y = tiny_classifier()
    _fit(model, x, y, tmp_path / "run")
    run = repviz.open_logdir(tmp_path).run("run")
    manifest = {k: v for k, v in run.manifest.items() if k != "weights"}
    save_json(run.run_dir.joinpath(*RUN_SUBDIR, MANIFEST), manifest)
    other, _, _ = tiny_classifier(seed=3)
    _no_new_run(lambda: _fit(other, x, y, tmp_path / "run", epochs=1))
    assert _steps(tmp_path) == [0, 1, 2, 3]
