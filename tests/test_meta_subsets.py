"""meta-SNE over snapshots that hold a subset of the probe (#30): every representation is compared on the probe
points all of them hold (or the subset snapshots are left out), the result says so, caches never mix subsets, and
above ``max_probes`` the pair sample is used and said."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from repviz import open_logdir
from repviz.cli import main
from repviz.executors import LocalExecutor
from repviz.meta import MetaSNE
from repviz.meta.vectors import PAIR_BLOCK_ROWS, probe_pairs, representation_vectors
from repviz.store import RunWriter

N = 300
SUBSET = np.sort(np.random.default_rng(7).choice(N, 120, replace=False))


def states(layers=("a", "b"), steps=(0, 1, 10, 11), seed=0) -> dict:
    """(layer, step) -> activations of every probe point: drifting clusters under a per-layer linear map."""
    rng = np.random.default_rng(seed)
    base = np.eye(5)[np.arange(N) % 5] @ rng.normal(size=(5, 8)) * 3 + rng.normal(size=(N, 8))
    maps = {lay: rng.normal(size=(8, 8)) for lay in layers}
    return {(lay, s): np.tanh((base + 0.2 * s * rng.normal(size=base.shape)) @ maps[lay]).astype(np.float32)
            for s in steps for lay in layers}


def write(path, full: dict, subset_steps=(10, 11), rows=SUBSET, name="run") -> None:
    """Steps in ``subset_steps`` store only the probe points ``rows`` (as ``batch_probe`` does); the rest all."""
    writer = RunWriter(path / name)
    writer.begin({"fingerprint": {"model": "m", "probe": "p"},
                  "layers": {lay: {"stored_shape": [N, 8]} for lay, _ in full}})
    writer.write_probe(np.arange(N), np.arange(N) % 5, np.zeros((N, 2, 2), dtype=np.uint8) + 1)
    for (lay, s), X in full.items():
        if s in subset_steps:
            writer.write_activation(lay, s, X[rows], rows=rows, batch=s)
        else:
            writer.write_activation(lay, s, X, epoch=s)


def chord(X, Y) -> float:
    """Olah's vectors in float64 with scipy (normalised condensed distances), and the chord between them."""
    a, b = pdist(np.asarray(X, np.float64)), pdist(np.asarray(Y, np.float64))
    return float(np.linalg.norm(a / np.linalg.norm(a) - b / np.linalg.norm(b)))


def reference(result, full: dict, rows: np.ndarray, inputs=None) -> np.ndarray:
    def data(key):
        return (inputs if key[0] == "<input>" else full[key[1], key[2]])[rows]
    return np.array([[chord(data(p), data(q)) for q in result.keys] for p in result.keys])


@pytest.fixture
def logdir(tmp_path):
    full = states()
    write(tmp_path / "logs", full)
    return tmp_path / "logs", full


def test_every_representation_is_compared_on_the_common_points_and_the_result_says_so(logdir):
    root, full = logdir
    result = MetaSNE(cache=False).fit(root)
    assert len(result) == 8
    np.testing.assert_allclose(result.distances, reference(result, full, SUBSET), atol=2e-6)
    assert result.info["n_probe"] == 120 and result.info["n_probe_total"] == N
    assert result.info["notes"][0] == "compared on the 120 probe points common to all 8 representations (of 300)"
    assert not any("pair sample" in note for note in result.info["notes"])


def test_whole_leaves_out_the_subset_snapshots_and_says_so(logdir):
    root, full = logdir
    result = MetaSNE(subsets="whole", cache=False).fit(root)
    assert sorted(k[2] for k in result.keys) == [0, 0, 1, 1]
    np.testing.assert_allclose(result.distances, reference(result, full, np.arange(N)), atol=2e-6)
    assert result.info["notes"][0] == "compared on all 300 probe points"
    assert result.info["notes"][1].startswith("left out 4 snapshot(s) of a probe subset (the smallest holds 120 of "
                                              "300 points; subsets='whole')")


def test_a_map_over_other_points_never_reuses_cached_vectors(logdir):
    root, full = logdir
    whole = MetaSNE(subsets="whole").fit(root)
    common = MetaSNE().fit(root)  # the whole-probe snapshots again, now on the 120 common points
    on_common = reference(common, full, SUBSET)
    np.testing.assert_allclose(common.distances, on_common, atol=2e-6)
    a0, a1 = common.keys.index(("run", "a", 0)), common.keys.index(("run", "a", 1))
    w0, w1 = whole.keys.index(("run", "a", 0)), whole.keys.index(("run", "a", 1))
    assert abs(whole.distances[w0, w1] - common.distances[a0, a1]) > 1e-3  # a reused vector would give equality
    banks = [name for name in open_logdir(root).artifact_names() if name.startswith("vectors-dist-")]
    assert len(banks) == 2
    again = MetaSNE().fit(root)  # and a second map over the same points takes its own bank's vectors
    np.testing.assert_allclose(again.distances, common.distances, atol=1e-12)


def test_the_input_landmark_is_restricted_to_the_same_points(logdir):
    root, full = logdir
    inputs = np.random.default_rng(3).normal(size=(N, 6)).astype(np.float32)
    result = MetaSNE(cache=False).fit(root, inputs=inputs)
    assert result.keys[-1][0] == "<input>"
    np.testing.assert_allclose(result.distances, reference(result, full, SUBSET, inputs), atol=2e-6)


def test_an_executor_computes_the_vectors_of_the_common_points(logdir):
    root, full = logdir
    result = MetaSNE().fit(root, executor=LocalExecutor(jobs=1))
    np.testing.assert_allclose(result.distances, reference(result, full, SUBSET), atol=2e-6)


def test_two_runs_are_matched_by_probe_id_on_the_points_all_hold(tmp_path):
    full, other = states(), states(seed=1)
    write(tmp_path / "logs", full, subset_steps=(10, 11), name="r0")
    write(tmp_path / "logs", other, subset_steps=(), name="r1")
    result = MetaSNE(cache=False).fit(tmp_path / "logs")
    assert len(result) == 16
    data = {"r0": full, "r1": other}
    keys = result.keys
    D = np.array([[chord(data[p[0]][p[1:]][SUBSET], data[q[0]][q[1:]][SUBSET]) for q in keys] for p in keys])
    np.testing.assert_allclose(result.distances, D, atol=2e-6)
    assert "common to all 16 representations (of 300)" in result.info["notes"][0]


def test_subsets_that_share_too_few_points_are_refused_in_one_line(tmp_path):
    full = states(steps=(0, 1, 10, 11))
    writer_rows = {10: np.arange(0, 150), 11: np.arange(140, 290)}  # 10 points in common
    writer = RunWriter(tmp_path / "logs" / "run")
    writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {"a": {"stored_shape": [N, 8]}}})
    writer.write_probe(np.arange(N))
    for (lay, s), X in full.items():
        if lay == "a":
            rows = writer_rows.get(s)
            writer.write_activation(lay, s, X if rows is None else X[rows], rows=rows)
    with pytest.raises(ValueError, match=r"^the 4 representations hold probe subsets of \[150, 300\] points that "
                                         r"share only 10; pass subsets='whole'") as e:
        MetaSNE(cache=False).fit(tmp_path / "logs")
    assert "\n" not in str(e.value)
    assert len(MetaSNE(subsets="whole", cache=False, n_components=1).fit(tmp_path / "logs")) == 2


def test_above_max_probes_the_pair_sample_is_used_and_said(logdir):
    root, full = logdir
    result = MetaSNE(max_probes=100, n_pairs=2000).fit(root)  # 120 common points: above the lowered threshold
    assert result.info["n_pairs"] == 2000
    assert result.info["notes"][1] == ("pair sample: each vector holds 2,000 of the 7,140 probe pairs (seed 0), "
                                       "automatic above max_probes=100 probes")
    assert any(name.endswith("-p2000s0") for name in open_logdir(root).artifact_names())
    exact = reference(result, full, SUBSET)
    assert np.corrcoef(result.distances.ravel(), exact.ravel())[0, 1] > 0.99  # a sample of the same distances


def test_the_command_prints_the_notes(logdir, capsys):
    root, _ = logdir
    assert main(["meta", str(root), "--no-robustness", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "# compared on the 120 probe points common to all 8 representations (of 300)" in out
    assert main(["meta", str(root), "--no-robustness", "--no-progress", "--subsets", "whole",
                 "--name", "whole"]) == 0
    out = capsys.readouterr().out
    assert "# compared on all 300 probe points" in out and "# left out 4 snapshot(s) of a probe subset" in out


def test_sampled_pair_vectors_match_numpy_whichever_transforms_share_the_pass():
    """The pair kernels visit the pairs block by block (PAIR_BLOCK_ROWS rows i, by j within) and read distances and
    dot products in one pass when both are asked; the vectors stay in (i, j) order and equal numpy's."""
    rng = np.random.default_rng(5)
    n = 2 * PAIR_BLOCK_ROWS + 300
    X = rng.normal(size=(n, 7)) * 3 + 10
    pairs = probe_pairs(n, 20_000, random_state=1)
    assert np.array_equal(np.sort(pairs.order), np.arange(len(pairs)))
    Z = X - X.mean(0)
    d = np.sqrt(((Z[pairs.I] - Z[pairs.J]) ** 2).sum(1))
    body = (Z[pairs.I] * Z[pairs.J]).sum(1) * np.sqrt(2 * pairs.n_total / len(pairs))
    cka = np.concatenate([(Z * Z).sum(1), body])
    both = representation_vectors(X.astype(np.float32), ["dist", "cka"], pairs)
    np.testing.assert_allclose(both["dist"], d / np.linalg.norm(d), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(both["cka"], cka / np.linalg.norm(cka), rtol=1e-4, atol=1e-7)  # float32 dots
    for t in ("dist", "cka"):
        np.testing.assert_allclose(representation_vectors(X.astype(np.float32), [t], pairs)[t], both[t], rtol=1e-6,
                                   atol=1e-7)
