"""Similarity matrices over snapshots that hold a subset of the probe (#30): every representation of a matrix is
compared on the probe points all of them hold, the notes say so, a value over other points is never taken from
the cache, and minibatch CKA above the stated probe count is used and said."""

from __future__ import annotations

import numpy as np
import pytest

from repviz import open_logdir
from repviz.executors import LocalExecutor
from repviz.similarity import cached_similarity, similarity, similarity_over_training
from repviz.similarity import matrix as similarity_matrix
from repviz.similarity import registry as similarity_registry
from repviz.similarity.measures import minibatch_cka, procrustes_distance
from repviz.store import RunWriter, checksum

N = 300
LAYERS = {"l1": 6, "l2": 5, "l3": 3}
SUBSET = np.sort(np.random.default_rng(7).choice(N, 120, replace=False))
STEPS = (0, 1, 10, 11)  # 10 and 11 hold the 120 points of SUBSET, as batch snapshots of batch_probe=120 do


def states(seed: int) -> dict:
    """(layer, step) -> activations of every probe point: layer l is a latent Z_l shared by every run, rotated
    and noised per run and step."""
    latent = np.random.default_rng(100)
    Z = {layer: latent.normal(size=(N, width)) for layer, width in LAYERS.items()}
    rng = np.random.default_rng(seed)
    out = {}
    for step in STEPS:
        for layer, width in LAYERS.items():
            Q = np.linalg.qr(rng.normal(size=(width, width)))[0]
            X = Z[layer] * (1 + 0.1 * step) @ Q + 0.5 * rng.normal(size=(N, width))
            out[layer, step] = X.astype(np.float32)
    return out


@pytest.fixture
def logs(tmp_path):
    """Two runs of the same probe; returns (log directory, {run: states})."""
    data = {}
    for r, name in enumerate(("r0", "r1")):
        data[name] = states(r)
        writer = RunWriter(tmp_path / "logs" / name)
        writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "step_unit": "epoch",
                      "layers": {layer: {"stored_shape": [N, w]} for layer, w in LAYERS.items()}})
        writer.write_probe(np.arange(N), np.arange(N) % 4)
        for (layer, step), X in data[name].items():
            rows = SUBSET if step >= 10 else None
            writer.write_activation(layer, step, X if rows is None else X[rows], rows=rows)
    return tmp_path / "logs", data


def debiased_cka(X, Y) -> float:
    """Linear CKA with the unbiased HSIC of Song et al. (2007), written out from the Gram matrices in float64."""
    def hsic(K, L):
        n = len(K)
        K, L = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
        return (np.trace(K @ L) + K.sum() * L.sum() / ((n - 1) * (n - 2)) - 2 * (K.sum(0) @ L.sum(0)) / (n - 2)) \
            / (n * (n - 3))
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    K, L = X @ X.T, Y @ Y.T
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def test_two_runs_at_a_subset_snapshot_are_compared_on_its_points_and_the_notes_say_so(logs):
    root, data = logs
    m = similarity(root, ("r0", "r1"), step=10)
    ref = [[debiased_cka(data["r0"][a, 10][SUBSET], data["r1"][b, 10][SUBSET]) for b in LAYERS] for a in LAYERS]
    np.testing.assert_allclose(m.values, ref, atol=1e-6)
    assert m.notes[0] == "compared on the 120 probe points common to all 6 representations (of 300)"
    tag = checksum(np.arange(N)[SUBSET])
    assert any(name.startswith(f"vectors-ucka-{tag}") for name in open_logdir(root).artifact_names())


def test_a_layer_over_training_compares_every_snapshot_on_the_points_all_hold(logs):
    root, data = logs
    m = similarity_over_training(root, "r0", "l1", executor=LocalExecutor(jobs=1))  # the bank's vectors as tasks
    X = [data["r0"]["l1", s][SUBSET] for s in STEPS]
    np.testing.assert_allclose(m.values, [[debiased_cka(a, b) for b in X] for a in X], atol=1e-6)
    assert m.notes[0] == "compared on the 120 probe points common to all 4 representations (of 300)"


def test_a_value_over_other_points_is_never_taken_from_the_cache(logs):
    root, data = logs
    whole = similarity_over_training(root, "r0", "l1", steps=[0, 1])  # both hold every point
    assert whole.notes[0] == "compared on the 300 probes of run 'r0'"
    mixed = similarity_over_training(root, "r0", "l1")  # the same pair, now on the 120 common points
    on_subset = debiased_cka(data["r0"]["l1", 0][SUBSET], data["r0"]["l1", 1][SUBSET])
    assert mixed.values[0, 1] == pytest.approx(on_subset, abs=1e-6)
    assert whole.values[0, 1] == pytest.approx(debiased_cka(data["r0"]["l1", 0], data["r0"]["l1", 1]), abs=1e-6)
    assert abs(whole.values[0, 1] - mixed.values[0, 1]) > 1e-4
    options = dict(measure="procrustes")
    similarity_over_training(root, "r0", "l1", **options)
    again = cached_similarity(root, "r0", layer="l1", steps=[0, 1], **options)
    assert again is None  # the whole-probe pair was computed over the 120 points only: not a cached value


def test_procrustes_on_the_common_points(logs):
    root, data = logs
    m = similarity(root, ("r0", "r1"), step=11, measure="procrustes", executor=LocalExecutor(jobs=1))
    ref = [[procrustes_distance(data["r0"][a, 11][SUBSET], data["r1"][b, 11][SUBSET]) for b in LAYERS]
           for a in LAYERS]
    np.testing.assert_allclose(m.values, ref, atol=1e-9)


def test_above_the_stated_probe_count_minibatch_cka_is_used_and_said(logs, monkeypatch):
    root, data = logs
    exact = similarity(root, ("r0", "r1"), step=10)  # 120 points: exact under the 2,048 of repviz
    assert "batch_size" not in exact.params and not any("minibatch" in note for note in exact.notes)
    monkeypatch.setattr(similarity_registry, "AUTO_EXACT_PROBES", 100)  # 120 common points: above it
    monkeypatch.setattr(similarity_registry, "AUTO_BATCH", 64)
    monkeypatch.setattr(similarity_matrix, "AUTO_EXACT_PROBES", 100)
    m = similarity(root, ("r0", "r1"), step=10)
    assert m.params["batch_size"] == 64
    assert m.notes[1] == "minibatch CKA, 2 batches of about 60 probes (seed 0, automatic above 100 probes)"
    ref = [[minibatch_cka(data["r0"][a, 10][SUBSET], data["r1"][b, 10][SUBSET], batch_size=64) for b in LAYERS]
           for a in LAYERS]
    np.testing.assert_allclose(m.values, ref, atol=1e-9)
