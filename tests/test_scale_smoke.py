"""A large probe end to end, small enough for CI (issue #30): 20,000 probes of a tiny model, 2 snapshots.

Above a stated probe count meta-SNE holds a pair sample and CKA runs on minibatches instead of n x n Gram
matrices; both must happen on their own and be said where the user reads results (the command's output, the
tab's routes). The README's "Large probes" section states those thresholds and recommends float16 storage; its
figures must be the code's. The full-size figures are benchmarks/bench_scale.py's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from repviz.cli import main as cli
from repviz.meta.distances import DEFAULT_MAX_PROBES
from repviz.similarity.options import AUTO_BATCH, AUTO_EXACT_PROBES
from repviz.store import open_logdir

N = 20_000
ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "tb_plugin" / "tensorboard_plugin_repviz" / "static"


@pytest.fixture(scope="module")
def large(tmp_path_factory, tiny_classifier):
    """A log directory with run "run": every one of N probes at epochs 0 and 1, stored in float16 (what the README
    recommends at this size), and the float32 outputs of layer "hidden" after training, computed here."""
    import keras

    from repviz import ActivationLogger

    root = tmp_path_factory.mktemp("large")
    model, x, y = tiny_classifier(n=N, hidden=16)
    logger = ActivationLogger(root / "run", probe=(x, y), freq=[0, 1], dtype="float16")
    model.fit(x[:256], y[:256], epochs=1, batch_size=64, verbose=0, callbacks=[logger])
    hidden = keras.Model(model.inputs, model.get_layer("hidden").output).predict(x, batch_size=4096, verbose=0)
    return root, np.asarray(hidden, dtype=np.float32)


def test_every_probe_is_stored_in_float16_as_the_model_computes_it(large):
    root, hidden = large
    run = open_logdir(root).run("run")
    stored = run.activations("hidden", 1)
    assert stored.dtype == np.float16 and stored.shape == (N, 16)
    np.testing.assert_array_equal(stored, hidden.astype(np.float16))  # float16 rounding is all that differs


def test_meta_sne_samples_probe_pairs_above_its_threshold_and_says_so(large, capsys):
    root, _ = large
    assert cli(["meta", str(root), "--no-progress", "--no-robustness"]) == 0
    out = capsys.readouterr().out
    pairs = DEFAULT_MAX_PROBES * (DEFAULT_MAX_PROBES - 1) // 2
    line = f"pair sample: each vector holds {pairs:,} of the {N * (N - 1) // 2:,} probe pairs"
    assert f"# {line}" in out
    assert f"automatic above max_probes={DEFAULT_MAX_PROBES:,} probes" in out
    result = json.loads(next((root / "plugins" / "repviz-meta").glob("meta-*/result.json")).read_text())
    assert result["info"]["n_pairs"] == pairs and result["info"]["n_probe"] == N
    assert any(note.startswith(line) for note in result["info"]["notes"])  # stored with the map
    assert cli(["info", str(root)]) == 0  # and said by `repviz info`: before computing, and under the stored map
    info = capsys.readouterr().out
    assert (f"large probe ({N:,} points): meta-SNE compares a seeded sample of its probe pairs (above "
            f"{DEFAULT_MAX_PROBES:,} probe points); similarity uses minibatch CKA (above {AUTO_EXACT_PROBES:,})") in info
    assert f"  {line}" in info, info


def _linear_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Biased linear CKA over every probe at once (Kornblith et al. 2019, eq. 5)."""
    X, Y = (a.astype(np.float64) - a.astype(np.float64).mean(axis=0) for a in (X, Y))
    return np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def test_cka_runs_on_minibatches_above_its_threshold_says_so_and_stays_close(large, capsys):
    root, _ = large
    assert cli(["similarity", str(root), "--runs", "run", "--layer", "hidden", "--no-progress"]) == 0
    out = capsys.readouterr().out
    batches = -(-N // AUTO_BATCH)
    assert re.search(rf"^# minibatch CKA, {batches} batches of about {N / batches:,.0f} probes \(seed 0, "
                     rf"automatic above {AUTO_EXACT_PROBES:,} probes\)$", out, re.M), out
    run = open_logdir(root).run("run")
    exact = _linear_cka(run.activations("hidden", 0), run.activations("hidden", 1))
    from repviz.similarity import similarity_over_training

    matrix = similarity_over_training(root, "run", "hidden")  # the values just printed, from the cache
    assert np.allclose(np.diag(matrix.values), 1.0)
    # the debiased minibatch estimate and the biased exact value differ by O(width / batch) at most
    assert matrix.values[0, 1] == pytest.approx(exact, abs=0.03)


def test_the_tab_is_told_of_the_pair_sample_and_the_minibatches(large, capsys):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    root, _ = large
    assert cli(["meta", str(root), "--no-progress", "--no-robustness", "--name", "tab-map"]) == 0
    assert cli(["similarity", str(root), "--runs", "run", "--step", "1", "--no-progress"]) == 0
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(root)))
    try:
        client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        meta = client.get("/data/plugin/repviz/meta_result?name=tab-map")
        assert meta.status_code == 200, meta.data[:300]
        assert any(note.startswith("pair sample: ") and f"automatic above max_probes={DEFAULT_MAX_PROBES:,}" in note
                   for note in meta.json["notes"]), meta.json["notes"]
        response = client.get("/data/plugin/repviz/similarity?run=run&step=1")
        assert response.status_code == 200, response.data[:300]
        assert any(note.startswith("minibatch CKA") and f"automatic above {AUTO_EXACT_PROBES:,} probes" in note
                   for note in response.json["notes"]), response.json["notes"]
    finally:
        plugin.jobs.close()


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def _js_constant(name: str, file: str) -> int:
    return int(re.search(rf"export const {name} = (\d+);", (STATIC / file).read_text()).group(1))


def test_the_readme_states_the_switches_thresholds_as_the_code_has_them():
    section = _section((ROOT / "README.md").read_text(), "Large probes")
    assert 'dtype="float16"' in section
    for threshold in (DEFAULT_MAX_PROBES, AUTO_EXACT_PROBES, _js_constant("CELL_MAX_POINTS", "points.js"),
                      _js_constant("PERFORMANCE_AT", "scatter.js")):
        assert f"{threshold:,}" in section, threshold
