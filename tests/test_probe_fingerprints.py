"""Comparisons refuse runs recorded on different probe inputs (the digest capture stores), whatever their ids:
meta-SNE, similarity, the CLI (one line, exit 2, an override), the tab's comparing routes; runs without a digest
are checked by their ids as before, and placement places another probe on purpose."""

from __future__ import annotations

import numpy as np
import pytest

from repviz import open_logdir
from repviz.capture import probe as capture_probe
from repviz.cli import main
from repviz.meta import MetaSNE
from repviz.meta.sources import ProbeMismatchError
from repviz.similarity import similarity
from repviz.store import RunWriter

N, LAYERS = 40, {"l1": 6, "l2": 4}
REFUSED = (r"^runs 'gan/gen' and 'gan/disc' were recorded on different probe inputs \(fingerprints aaaaaaaa… and "
           r"bbbbbbbb…\); they cannot be compared. Pass --allow-different-probes \(probe_check=False in Python\) if "
           r"their inputs correspond$")


def _run(path, inputs: str | None, seed: int, steps=2) -> None:
    """A run of ``N`` probes numbered 0..N-1 (as every probe of a GAN's generator and discriminator is) whose
    probe inputs have the digest ``inputs`` (None: none stored, as in older logs)."""
    fingerprint = {"model": "m", "probe": f"p{seed}", **({"inputs": inputs} if inputs else {})}
    writer = RunWriter(path)
    writer.begin({"fingerprint": fingerprint, "step_unit": "epoch",
                  "layers": {name: {"stored_shape": [N, w]} for name, w in LAYERS.items()}})
    writer.write_probe(np.arange(N), np.arange(N) % 4)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        for name, w in LAYERS.items():
            writer.write_activation(name, step, rng.normal(size=(N, w)).astype(np.float32))


@pytest.fixture
def gan(tmp_path):
    """Runs "gan/gen" and "gan/disc" on different inputs with the same ids; "gan/twin" on gen's inputs."""
    _run(tmp_path / "gan" / "gen", "a" * 16, 0)
    _run(tmp_path / "gan" / "disc", "b" * 16, 1)
    _run(tmp_path / "gan" / "twin", "a" * 16, 2)
    return tmp_path


def test_similarity_and_meta_refuse_different_inputs_in_one_line(gan):
    with pytest.raises(ProbeMismatchError, match=REFUSED):
        similarity(gan, ("gan/gen", "gan/disc"))
    with pytest.raises(ProbeMismatchError, match=REFUSED):
        MetaSNE(robustness=False).fit(gan, runs=["gan/gen", "gan/disc"])
    with pytest.raises(ProbeMismatchError, match="runs 'gan/disc' and 'gan/gen' were recorded"):
        MetaSNE(robustness=False).fit(gan)  # all runs


def test_the_override_compares_them_and_keys_do_not_change(gan):
    forced = similarity(gan, ("gan/gen", "gan/disc"), probe_check=False)
    assert forced.values.shape == (2, 2)
    result = MetaSNE(robustness=False).fit(gan, runs=["gan/gen", "gan/disc"], probe_check=False)
    assert len(result) == 8
    same = similarity(gan, ("gan/gen", "gan/twin"))  # the same inputs: checked and compared
    assert same.notes[-1].startswith("computed ")
    again = similarity(gan, ("gan/gen", "gan/twin"), probe_check=False)  # the check is not part of the key
    assert again.notes[-1].startswith("read all ")
    np.testing.assert_array_equal(again.values, same.values)


def test_runs_without_a_digest_are_checked_by_their_ids(tmp_path):
    _run(tmp_path / "old", None, 0)
    _run(tmp_path / "new", "a" * 16, 1)
    assert similarity(tmp_path, ("old", "new")).values.shape == (2, 2)
    assert len(MetaSNE(robustness=False).fit(tmp_path)) == 8


@pytest.mark.parametrize("command", [["similarity", "--runs", "gan/gen,gan/disc"],
                                     ["meta", "--runs", "gan/gen,gan/disc", "--no-progress"]])
def test_the_commands_refuse_in_one_line_and_take_the_override(gan, capsys, command):
    args = [command[0], str(gan), *command[1:]]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"repviz {command[0]}: error: runs 'gan/gen' and 'gan/disc' were recorded on "
                                   f"different probe inputs")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert main([*args, "--allow-different-probes"]) == 0


def test_the_tabs_comparing_routes_refuse_and_group_runs_by_inputs(gan):
    pytest.importorskip("tensorboard")
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from test_plugin_routes import _get
    from werkzeug import test as wtest
    from werkzeug import wrappers

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(gan)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    try:
        r = _get(client, "similarity?run=gan/gen&run2=gan/disc&step=0")
        assert r.status_code == 400 and "were recorded on different probe inputs" in r.json["error"]
        r = _get(client, "neighborhood_change?run=gan/gen&layer=l1&step=0&run2=gan/disc&layer2=l1&step2=0&k=3")
        assert r.status_code == 400 and "were recorded on different probe inputs" in r.json["error"]
        assert _get(client, "neighborhood_change?run=gan/gen&layer=l1&step=0&run2=gan/twin&layer2=l1&step2=0&k=3"
                    ).status_code == 200
        groups = {run["name"]: run["probe_group"] for run in _get(client, "runs").json["runs"]}
        assert groups["gan/gen"] == groups["gan/twin"] != groups["gan/disc"]
    finally:
        plugin.jobs.close()


def test_the_inputs_digest_is_of_values_alone():
    x = np.random.default_rng(0).random((10, 4, 4), dtype=np.float32)
    digest = capture_probe.inputs_fingerprint(x)
    assert capture_probe.inputs_fingerprint(x.reshape(10, 16)) == digest  # flattened for an MLP
    assert capture_probe.inputs_fingerprint(x[..., None].astype(np.float64)) == digest  # a channel axis
    assert capture_probe.inputs_fingerprint(x[::-1]) != digest  # another order
    assert capture_probe.inputs_fingerprint(x + 1) != digest
    assert capture_probe.inputs_fingerprint(np.array(["ein", "zwei"])) != capture_probe.inputs_fingerprint(
        np.array(["ein", "drei"]))


def test_capture_stores_the_digest_and_compares_runs_by_it(tmp_path, tiny_classifier):
    """Real fits: a classifier and an unsupervised twin on the same inputs compare (labels differ); a model on
    other inputs with the same ids is refused; placement places the other probe into the layout all the same."""
    from repviz.capture import ActivationLogger

    model, x, y = tiny_classifier(n=80, seed=0)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[ActivationLogger(tmp_path / "a", probe=(x[:40], y[:40]))])
    model_b, _, _ = tiny_classifier(n=80, seed=1)
    model_b.fit(x, y, epochs=1, verbose=0, callbacks=[ActivationLogger(tmp_path / "b", probe=x[:40])])
    model_c, _, _ = tiny_classifier(n=80, seed=2)
    model_c.fit(x, y, epochs=1, verbose=0, callbacks=[ActivationLogger(tmp_path / "c", probe=(x[40:], y[40:]))])
    log = open_logdir(tmp_path)
    assert log.run("a").manifest["fingerprint"]["inputs"] == capture_probe.inputs_fingerprint(x[:40])
    assert similarity(tmp_path, ("a", "b")).values.shape == (2, 2)
    with pytest.raises(ProbeMismatchError, match="runs 'a' and 'c' were recorded on different probe inputs"):
        similarity(tmp_path, ("a", "c"))
    assert main(["embed", str(tmp_path), "--runs", "a", "--method", "pca", "--no-progress"]) == 0
    assert main(["place", str(tmp_path), "--run", "c", "--into", "a", "--method", "pca"]) == 0
