"""UMAP through umap-learn: reproducible, on repviz's kNN graph, a pipeline method like t-SNE (keys, cache,
resumption, aligned chains), and one line saying what to install without the extra."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from repviz import open_logdir
from repviz.cli import main
from repviz.methods import resolve
from repviz.pipeline import embed_logdir

if importlib.util.find_spec("umap") is None:  # looked up, not imported: only the worker that fits one pays for it
    pytest.skip("the umap extra (umap-learn) is not installed", allow_module_level=True)
from repviz.manifold.umap import UMAP, self_first_knn


def test_umap_is_reproducible_with_random_state(digits):
    X = digits[0][:300]
    a = UMAP(random_state=0, n_epochs=60).fit_transform(X)
    b = UMAP(random_state=0, n_epochs=60).fit_transform(X)
    c = UMAP(random_state=1, n_epochs=60).fit_transform(X)
    assert a.dtype == np.float64 and a.shape == (300, 2)  # the input's dtype
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_umap_gets_repviz_neighbours_self_first(digits):
    X = digits[0][:200].astype(np.float32)
    idx, dist = self_first_knn(X, 15, "euclidean", "exact", 0)
    # brute force: each row's 15 smallest distances, itself (0) first
    D = np.sqrt(((X[:, None, :].astype(np.float64) - X[None, :, :]) ** 2).sum(axis=2))
    np.testing.assert_array_equal(idx[:, 0], np.arange(200))
    np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :15], rtol=1e-4, atol=1e-3)
    model = UMAP(random_state=0, n_epochs=30).fit(X)
    np.testing.assert_array_equal(model.umap_._knn_indices, idx)


def test_a_start_that_does_not_move_keeps_its_coordinates(digits):
    X = digits[0][:200]
    start = np.random.default_rng(0).normal(size=(200, 2)) * [8.0, 1.0] + [3.0, -20.0]  # elongated, off-centre
    # umap-learn rescales each axis of a start to [0, 10]; repviz rotates and scales it back
    Y = UMAP(random_state=0, init=start, n_epochs=1, learning_rate=1e-9).fit_transform(X)
    np.testing.assert_allclose(Y, start, atol=1e-3)


def test_umap_layout_keeps_classes_and_transform_places_new_points(digits):
    X, y = digits[0][:900], digits[1][:900]
    model = UMAP(random_state=0).fit(X[:700])
    Z = model.transform(X[700:])
    # each new digit's 10 nearest fitted points in the layout vote for its class
    d = ((Z[:, None, :] - model.embedding_[None, :, :]) ** 2).sum(axis=2)
    votes = y[:700][np.argsort(d, axis=1)[:, :10]]
    accuracy = np.mean([np.bincount(v).argmax() == t for v, t in zip(votes, y[700:])])
    assert Z.shape == (200, 2) and accuracy > 0.85


def test_umap_method_keys_cache_and_resumption_behave_like_tsne(tmp_path, cluster_run):
    cluster_run(tmp_path / "logs" / "r1", layers=("a",), steps=range(4), n=80)
    cluster_run(tmp_path / "fresh" / "r1", layers=("a",), steps=range(4), n=80)
    resolved = resolve("umap")
    assert resolved.key.startswith("umap-") and resolved.chain_align == "init" and resolved.default
    assert resolve("umap", {"min_dist": 0.5}).key != resolved.key
    assert resolve("umap", align="none").key != resolved.key
    assert resolved.describe()["continuation"] == {"n_epochs": 50, "learning_rate": 0.1}

    first = embed_logdir(tmp_path / "logs", ["umap"])
    assert (first.computed, first.cached, first.failed) == (4, 0, []) and first.keys["umap"] == resolved.key
    run = open_logdir(tmp_path / "logs").run("r1")
    assert run.embeddings.info(resolved.key, "a", 3)["init_from"] == ["a", 2]
    assert 0 < run.embedding_scores("a", 3, resolved.key)["trustworthiness"] <= 1
    again = embed_logdir(tmp_path / "logs", ["umap"])
    assert (again.computed, again.cached) == (0, 4)

    # a chain stopped after its second snapshot resumes from the last stored one, and ends as an unbroken run
    for step in (2, 3):
        for suffix in (".npy", ".json"):
            Path(tmp_path / "logs" / f"r1/plugins/repviz/embeddings/{resolved.key}/a/{step}{suffix}").unlink()
    resumed = embed_logdir(tmp_path / "logs", ["umap"])
    assert (resumed.computed, resumed.cached) == (2, 2)
    embed_logdir(tmp_path / "fresh", ["umap"])
    fresh = open_logdir(tmp_path / "fresh").run("r1")
    for step in range(4):
        np.testing.assert_array_equal(run.embedding("a", step, resolved.key), fresh.embedding("a", step, resolved.key))


@pytest.mark.slow
def test_aligned_umap_snapshots_of_a_converged_network_move_far_less(tmp_path, digits):
    from test_pipeline import _consecutive_displacement, _train_and_capture

    _train_and_capture(tmp_path, digits, epochs_before=30, snapshots=5)
    run = open_logdir(tmp_path).run("mlp")
    converged = run.steps("hidden")[1:]  # the capture also holds epoch 0, before training
    aligned = embed_logdir(tmp_path, ["umap"], steps=converged)
    independent = embed_logdir(tmp_path, ["umap"], steps=converged, align="none")
    assert aligned.failed == independent.failed == []
    d_aligned = _consecutive_displacement(run, aligned.keys["umap"], "hidden")
    d_independent = _consecutive_displacement(run, independent.keys["umap"], "hidden")
    print(f"umap: mean displacement aligned {d_aligned:.3f}, independent {d_independent:.3f}")
    assert d_aligned <= 0.5 * d_independent
    assert run.embedding_scores("hidden", converged[-1], aligned.keys["umap"])["trustworthiness"] > 0.9


@pytest.fixture
def without_umap(monkeypatch):
    """umap-learn made unimportable (as without the extra), and repviz's wrapper forgotten."""
    monkeypatch.setitem(sys.modules, "umap", None)
    monkeypatch.delitem(sys.modules, "repviz.manifold.umap")


def test_without_the_extra_every_entry_point_says_what_to_install(tmp_path, capsys, cluster_run, without_umap):
    hint = 'pip install ".[umap]" in the repviz checkout, or pip install "umap-learn>=0.5.5"'
    with pytest.raises(ValueError) as error:
        resolve("umap")
    assert hint in str(error.value) and len(str(error.value).splitlines()) == 1
    cluster_run(tmp_path / "r1", layers=("a",), steps=range(2), n=40)
    # repviz embed (and the tab's "compute", which embeds through the same plan)
    assert main(["embed", str(tmp_path), "--method", "umap"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and hint in err
    with pytest.raises(ValueError, match=re.escape(hint)):
        embed_logdir(tmp_path, ["umap"])
    # the live embedder (ActivationLogger(embed="umap")) reports it and training goes on
    from repviz.follow import embed_run

    assert embed_run(str(tmp_path), "r1", ["umap"]) == 0
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and hint in err


def test_a_fit_does_not_import_tensorflow_for_umap_learn():
    """umap-learn imports TensorFlow (for ParametricUMAP) where it is installed: seconds, 0.7 GB and TensorFlow's
    start-up lines in every embedding process; repviz's fit leaves it out, and ParametricUMAP can still be
    imported afterwards."""
    code = ("import sys, numpy as np\n"
            "from repviz.manifold.umap import UMAP\n"
            "UMAP(random_state=0, n_epochs=20).fit(np.random.default_rng(0).normal(size=(60, 5)))\n"
            "print('tensorflow' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
    assert "oneDNN" not in out.stderr and "absl" not in out.stderr
