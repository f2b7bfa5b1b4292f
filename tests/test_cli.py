"""The ``repviz`` command: ``info`` on a store-written log directory, ``demo`` end to end (offline)."""

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from repviz import open_logdir
from repviz.cli import main
from repviz.meta import MetaResult
from repviz.store import RunWriter


def test_info_lists_runs_layers_shapes_snapshots(tmp_path, capsys):
    w = RunWriter(tmp_path / "relu")
    w.begin({"fingerprint": {"model": "m", "probe": "p"}, "model": {"name": "relu_mlp"}, "probe": {"n": 4},
             "step_unit": "epoch",
             "layers": {"dense": {"stored_shape": [4, 3], "output_shape": [None, 3], "reduction": {"kind": "none"}},
                        "conv": {"stored_shape": [4, 2], "output_shape": [None, 5, 5, 8],
                                 "reduction": {"kind": "random_projection", "dim": 2}}}})
    for step in range(8):
        w.write_activation("dense", step, np.zeros((4, 3), np.float32))
        w.write_activation("conv", step, np.full((4, 2), np.nan if step == 7 else 0, np.float32))
    assert main(["info", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("run 'relu': model relu_mlp, probe n=4, 8 snapshot(s) (epochs 0, 1, ..., 7), ")
    assert out[1].split() == ["dense", "(4,", "3)", "8", "snapshot(s)"]
    assert "(random_projection from [None, 5, 5, 8]) 8 snapshot(s), 8 non-finite value(s)!" in out[2]


def test_info_missing_logdir_is_one_clear_line(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == f"repviz info: error: log directory {str(tmp_path / 'nope')!r} " \
                                              f"does not exist"


def test_demo_writes_two_runs_offline(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "logs"), "--epochs", "1", "--probe", "200", "--jobs", "1"]) == 0
    captured = capsys.readouterr()
    assert "using the MNIST subset bundled with repviz" in captured.err
    lines = captured.out.splitlines()
    assert lines[0].lstrip().startswith("relu: 1 epochs, train accuracy") and lines[0].endswith("relu")
    assert lines[-1].startswith("wrote runs relu, sigmoid under")
    logdir = open_logdir(tmp_path / "logs")
    assert list(logdir.runs) == ["relu", "sigmoid"]
    for run in logdir.runs.values():
        assert run.layers == ["hidden1", "hidden2", "logits"] and run.steps() == [0, 1]
        assert run.activations("hidden1", 1).shape == (200, 128) and run.predictions(1).shape == (200, 10)
        assert run.probe.thumbnails.shape == (200, 28, 28) and len(np.unique(run.probe.labels)) == 10
        for method in ("pca", "tsne"):
            assert run.embedding("logits", 1, method=method).shape == (200, 2)
            assert run.embedding_scores("logits", 1, method=method)["trustworthiness"] > 0.8
    assert "24 computed, 0 cached, 0 failed" in captured.out
    meta = MetaResult.load(logdir, "meta-dist-chord-mds")
    assert len(meta) == 2 * 3 * 2 + 1 and meta.coords.shape == (13, 2)  # runs x layers x snapshots + the input
    assert main(["info", str(tmp_path / "logs")]) == 0
    assert "run 'sigmoid': model sigmoid_mlp, probe n=200, 2 snapshot(s)" in capsys.readouterr().out


@pytest.mark.parametrize("args, match", [(["--probe", "5000"], "--probe must be between 1 and the 1000 test digits"),
                                         (["--epochs", "0"], "--epochs must be >= 1; got 0")])
def test_demo_bad_arguments(tmp_path, capsys, args, match):
    assert main(["demo", str(tmp_path / "logs"), *args]) == 2
    assert match in capsys.readouterr().err
