"""meta-SNE: representation vectors, distances between representations, the cache, the map and `repviz meta`."""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform
from scipy.stats import spearmanr

from repviz import open_logdir
from repviz.cli import main
from repviz.meta import INPUT_KEY, MetaResult, MetaSNE, representation_distances
from repviz.meta import distances as meta_distances
from repviz.meta.bank import VectorBank
from repviz.meta.options import TRANSFORMS
from repviz.meta.vectors import probe_pairs, representation_vectors
from repviz.store import Artifacts, DamagedFileError, RunWriter


def clusters(n=90, width=12, seed=0, spread=1.0):
    """Gaussian clusters: a representation with structure (so its probe distances are not all alike)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(5, width)) * 3
    return centers[np.arange(n) % 5] + spread * rng.normal(size=(n, width))


def make_run(path, layers=("a", "b"), steps=range(3), n=60, width=8, seed=0, ids=None, thumbnails=False):
    """A run of drifting clusters; each layer is a different random linear map of the same clusters."""
    rng = np.random.default_rng(seed)
    writer = RunWriter(path)
    writer.begin({"fingerprint": {"model": "m", "probe": "p"},
                  "layers": {lay: {"stored_shape": [n, width]} for lay in layers}})
    thumbs = rng.integers(0, 256, size=(n, 4, 4), dtype=np.uint8) if thumbnails else None
    writer.write_probe(np.arange(n) if ids is None else ids, np.arange(n) % 5, thumbs)
    base = clusters(n, width, seed)
    maps = {lay: rng.normal(size=(width, width)) for lay in layers}
    for s in steps:
        for lay in layers:
            X = (base + 0.3 * s * rng.normal(size=base.shape)) @ maps[lay]
            writer.write_activation(lay, s, np.tanh(X).astype(np.float32), epoch=s)
    return writer


def reference_chord(X, Y):
    """Olah's vector in float64 with scipy: normalised condensed distances, then the chord."""
    a, b = pdist(np.asarray(X, np.float64)), pdist(np.asarray(Y, np.float64))
    return np.linalg.norm(a / np.linalg.norm(a) - b / np.linalg.norm(b))


def linear_cka(X, Y):
    """Linear CKA from features (Kornblith et al. 2019, eq. 5) on centred features."""
    X, Y = X - X.mean(0), Y - Y.mean(0)
    return np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


# ---------------------------------------------------------------------------------------------------------------
# vectors and distances
# ---------------------------------------------------------------------------------------------------------------

def test_dist_vector_matches_scipy_pdist():
    X = clusters()
    v = representation_vectors(X, ["dist"])["dist"]
    d = pdist(X)
    np.testing.assert_allclose(v, d / np.linalg.norm(d), rtol=1e-4, atol=1e-7)
    assert v.dtype == np.float32


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("metric", ["chord", "angle"])
def test_metric_axioms(transform, metric):
    rng = np.random.default_rng(1)
    reps = [clusters(seed=s, width=w) @ rng.normal(size=(w, w)) for s, w in enumerate([6, 10, 14, 8, 12])]
    reps += [np.tanh(reps[0]), reps[1] + 0.5 * rng.normal(size=reps[1].shape)]
    D = representation_distances(reps + [reps[2].copy()], transform=transform, metric=metric)
    assert D[2, -1] == 0 and np.all(np.diag(D) == 0)  # d(X, X) = 0
    np.testing.assert_array_equal(D, D.T)  # symmetry
    assert D[np.triu_indices(len(reps), 1)].min() > 1e-3
    for i, j, k in rng.integers(0, len(D), size=(300, 3)):  # triangle inequality on random triples
        assert D[i, k] <= D[i, j] + D[j, k] + 1e-9
    if metric == "chord":
        assert D.max() <= 2.0


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_invariance_to_rotation_permutation_translation_scale(transform):
    rng = np.random.default_rng(2)
    X = clusters(width=10)
    Q = np.linalg.qr(rng.normal(size=(10, 10)))[0]
    variants = [X @ Q, X[:, rng.permutation(10)], X + rng.normal(size=10) * 50, 7.5 * X,
                3.0 * (X @ Q)[:, ::-1] - 4.0]
    D = representation_distances([X] + variants, transform=transform)
    # ranks may swap between pairs whose distances tie to float32 rounding
    assert D[0, 1:].max() < (1e-4 if transform == "rank" else 1e-5), D[0]
    # and a real change is seen at the same scale
    assert representation_distances([X, np.tanh(X)], transform=transform)[0, 1] > 1e-2


def test_cka_transform_equals_linear_cka_from_features():
    rng = np.random.default_rng(3)
    X = clusters(n=120, width=9)
    reps = [X, np.maximum(X @ rng.normal(size=(9, 30)), 0), np.tanh(X[:, :4]), rng.normal(size=(120, 5))]
    D = representation_distances(reps, transform="cka")
    for i in range(len(reps)):
        for j in range(len(reps)):
            np.testing.assert_allclose(1 - D[i, j] ** 2 / 2, linear_cka(reps[i], reps[j]), atol=1e-6)
    A = representation_distances(reps, transform="cka", metric="angle")
    np.testing.assert_allclose(np.cos(A), 1 - D ** 2 / 2, atol=1e-9)


def test_rbf_cka_equals_kernel_cka_with_median_bandwidth():
    rng = np.random.default_rng(4)
    X, Y = clusters(n=80, width=6), rng.normal(size=(80, 3))

    def centred_rbf(Z):
        d = pdist(Z)
        K = np.exp(-squareform(d) ** 2 / (2 * np.median(d) ** 2))
        H = np.eye(len(Z)) - 1 / len(Z)
        return H @ K @ H

    Kx, Ky = centred_rbf(X), centred_rbf(Y)
    cka = np.sum(Kx * Ky) / (np.linalg.norm(Kx) * np.linalg.norm(Ky))
    D = representation_distances([X, Y], transform="rbf_cka")
    np.testing.assert_allclose(1 - D[0, 1] ** 2 / 2, cka, atol=1e-5)


def test_rank_transform_is_spearman_of_distance_matrices():
    rng = np.random.default_rng(5)
    X, Y = clusters(n=70), rng.normal(size=(70, 4))
    D = representation_distances([X, Y], transform="rank")
    np.testing.assert_allclose(1 - D[0, 1] ** 2 / 2, spearmanr(pdist(X), pdist(Y)).statistic, atol=1e-5)


def _saturated(rng, z):
    """A sigmoid layer driven far into saturation, float32 as stored: most units at (or one float32 step from) 0
    or 1, so many probe pairs are at exactly the same distance."""
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-400 * z))).astype(np.float32)


@pytest.mark.parametrize("sampled", [False, True])
def test_rank_transform_on_a_saturated_layer_is_exact_spearman(sampled):
    """Non-regression: the ranks came from float32 distances (through the Gram matrix), whose rounding tied
    distances that differ and split equal ones, moving Spearman's correlation by 1.5e-2 on this layer."""
    rng = np.random.default_rng(6)
    z = rng.normal(size=(200, 8))
    X, Y = _saturated(rng, z), _saturated(rng, z + 0.3 * rng.normal(size=z.shape))
    pairs = probe_pairs(200, 9000, random_state=1) if sampled else None
    v = [representation_vectors(R, ["rank"], pairs)["rank"] for R in (X, Y)]

    def d2(R):  # the squared distances, in float64 from the stored values
        d = pdist(R.astype(np.float64), "sqeuclidean")
        return d if pairs is None else squareform(d)[pairs.I, pairs.J]

    assert len(d2(X)) - len(np.unique(d2(X))) > 10  # tied distances
    expected = spearmanr(d2(X), d2(Y)).statistic
    assert abs(float(v[0].astype(np.float64) @ v[1]) - expected) < 1e-5  # float64 rounding of the sums


@pytest.mark.parametrize("eps", [1e-3, 1e-4, 1e-5])
def test_float32_storage_against_float64_reference_for_nearly_identical_inputs(eps):
    """Late-epoch snapshots differ by little: 2 - 2cos in float32 would cancel to 0; float64 accumulation over
    float32 vectors (plus direct recomputation of near pairs) keeps the distance."""
    rng = np.random.default_rng(6)
    X = clusters(n=300, width=32)
    Y = X + eps * rng.normal(size=X.shape)
    ref = reference_chord(X, Y)
    D = representation_distances([X, Y, X + 5 * rng.normal(size=X.shape)])
    np.testing.assert_allclose(D[0, 1], ref, rtol=2e-2)
    v = representation_vectors(X, ["dist"])["dist"]
    w = representation_vectors(Y, ["dist"])["dist"]
    naive = np.sqrt(max(0.0, 2 - 2 * float(np.dot(v, w))))  # float32 accumulation, for contrast
    if eps <= 1e-4:
        assert abs(naive - ref) > 0.1 * ref, (naive, ref)


def test_near_pairs_are_recomputed_from_the_difference(tmp_path):
    """The bank's direct recomputation (1 - cos < near) agrees with the Gram route where both are accurate."""
    rng = np.random.default_rng(7)
    X = clusters(n=200, width=16)
    vecs = [representation_vectors(X + e * rng.normal(size=X.shape), ["dist"])["dist"] for e in (0, 1e-3, 3e-3)]
    out = {}
    for near in (0.0, 1.0):  # never / always recompute
        bank = VectorBank(Artifacts(tmp_path / str(near)), len(vecs[0]), near=near)
        for i, v in enumerate(vecs[:2]):
            bank.add(str(i), v)
        bank.sq_chords(["0", "1"])
        bank.add("2", vecs[2])  # an incremental row: near pairs between a new and the cached vectors
        out[near] = bank.sq_chords(["0", "1", "2"])
    np.testing.assert_allclose(np.sqrt(out[1.0]), np.sqrt(out[0.0]), rtol=1e-6)
    np.testing.assert_array_equal(out[1.0], out[1.0].T)
    assert out[1.0][0, 1] > 0


def test_column_blocks_give_the_same_gram(tmp_path):
    rng = np.random.default_rng(8)
    vecs = [representation_vectors(clusters(n=120, seed=s) @ rng.normal(size=(12, 12)), ["dist"])["dist"]
            for s in range(6)]
    res = []
    for block_bytes in (1, 1 << 30):  # 1 byte: the smallest block (1,024 columns), many blocks
        bank = VectorBank(Artifacts(tmp_path / str(block_bytes)), len(vecs[0]), block_bytes=block_bytes)
        for i, v in enumerate(vecs):
            bank.add(str(i), v)
        res.append(bank.sq_chords([str(i) for i in range(6)]))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12, atol=1e-15)


def test_a_truncated_vector_is_rebuilt_not_trusted(tmp_path):
    """Non-regression: a truncated cached vector counted as banked until deleted by hand."""
    X = clusters(n=60, width=8)
    vec = representation_vectors(X, ["dist"])["dist"]
    bank = VectorBank(Artifacts(tmp_path), len(vec))
    bank.add("v", vec)
    bank.add("w", representation_vectors(np.tanh(X), ["dist"])["dist"])
    bank.sq_chords(["v", "w"])
    path = tmp_path / "v.npy"
    path.write_bytes(path.read_bytes()[:-16])
    reopened = VectorBank(Artifacts(tmp_path), len(vec))
    assert "v" not in reopened and "w" in reopened and reopened.rows == ["w"]


def test_a_cache_torn_between_two_writers_is_dropped(tmp_path):
    """Non-regression: the index and the two matrices were three renames, so concurrent `repviz meta` runs could
    leave an index of one with matrices of the other, and it was accepted."""
    X = clusters(n=60, width=8)
    vecs = {name: representation_vectors(f(X), ["dist"])["dist"] for name, f in
            (("a", lambda x: x), ("b", np.tanh), ("c", np.sin))}
    first, second = Artifacts(tmp_path / "first"), Artifacts(tmp_path / "second")
    for art, names in ((first, "ab"), (second, "ac")):  # same shapes, other distances
        bank = VectorBank(art, len(vecs["a"]))
        for n in names:
            bank.add(n, vecs[n])
        bank.sq_chords(list(names))
    (tmp_path / "first" / "chord2.npy").write_bytes((tmp_path / "second" / "chord2.npy").read_bytes())
    torn = VectorBank(first, len(vecs["a"]))
    assert torn.rows == [] and "a" in torn  # the vectors stay; their distances are recomputed
    expected = VectorBank(Artifacts(tmp_path / "fresh"), len(vecs["a"]))
    for n in "ab":
        expected.add(n, vecs[n])
    np.testing.assert_allclose(torn.sq_chords(["a", "b"]), expected.sq_chords(["a", "b"]))


def test_pair_subset_above_max_probes_approximates_all_pairs():
    rng = np.random.default_rng(9)
    X = clusters(n=400, width=10)
    reps = [X, np.tanh(X), X @ rng.normal(size=(10, 3)), rng.normal(size=(400, 6))]
    for transform in ("dist", "cka", "rbf_cka"):
        full = representation_distances(reps, transform=transform)
        sub = representation_distances(reps, transform=transform, max_probes=100, n_pairs=20_000)
        np.testing.assert_allclose(sub, full, atol=0.03)
        assert not np.array_equal(sub, full)
    a, b = probe_pairs(400, 5000, 0), probe_pairs(400, 5000, 0)
    assert len(np.unique(a.I * 400 + a.J)) == 5000 and np.all(a.I < a.J)
    np.testing.assert_array_equal(a.I, b.I)  # the same pairs for every representation


@pytest.mark.parametrize("call, match", [
    (lambda: representation_distances([np.ones((5, 2))] * 2, transform="cca"),
     r"The 'transform' parameter of representation_distances must be a str among .* Got 'cca' instead"),
    (lambda: representation_distances([np.ones((5, 2))] * 2, metric="cosine"),
     r"The 'metric' parameter of representation_distances must be a str among .* Got 'cosine' instead"),
    (lambda: representation_distances([np.eye(5), np.eye(6)]), r"different numbers of probes \[5, 6\]"),
    (lambda: representation_distances([np.eye(5), np.ones((5, 3))]), r"all probe points coincide"),
    (lambda: representation_distances([np.eye(5), np.full((5, 2), np.nan)]), r"contains NaN or infinity"),
    (lambda: MetaSNE(embedding="umap").fit([np.eye(5)] * 3),
     r"The 'embedding' parameter of MetaSNE must be a str among .* Got 'umap' instead"),
    (lambda: MetaSNE(max_probes=-3).fit([np.eye(5)] * 3),
     r"The 'max_probes' parameter of MetaSNE must be an int in the range \[3, inf\)\. Got -3 instead"),
    (lambda: MetaSNE().fit([np.eye(5)] * 2), r"embedding 2 representation\(s\) in 2 dimensions needs at least 3"),
    (lambda: MetaSNE().fit([np.eye(5)] * 3, inputs=np.ones((4, 2))), r"inputs has 4 rows .* 5 probes"),
])
def test_bad_input_is_refused_with_a_clear_message(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------------------------------------------
# MetaSNE on arrays and log directories
# ---------------------------------------------------------------------------------------------------------------

def test_metasne_on_arrays_recovers_structure_and_trajectories():
    rng = np.random.default_rng(10)
    X = clusters(n=80, width=10)
    path = [X + 0.2 * t * rng.normal(size=X.shape) for t in range(5)]
    reps = {("r", "a", 10 * t): a for t, a in enumerate(path)}
    reps[("r", "b", 0)] = rng.normal(size=(80, 10))
    result = MetaSNE().fit(reps, inputs=X)
    assert result.coords.shape == (7, 2) and result.distances.shape == (7, 7)
    assert result.keys[-1] == INPUT_KEY and 0 < result.explained_variance <= 1
    np.testing.assert_allclose(result.distances[:6, :6], representation_distances(list(reps.values())))
    traj = result.trajectories()
    assert list(traj[("r", "a")].steps) == [0, 10, 20, 30, 40]
    np.testing.assert_array_equal(traj[("r", "a")].coords, result.coords[traj[("r", "a")].rows])
    assert result.distances[0, -1] < 1e-6  # the first snapshot is the input itself


def test_logdir_fit_is_incremental_and_equals_a_full_recompute(tmp_path, monkeypatch):
    writer = make_run(tmp_path / "r1", steps=range(3))
    make_run(tmp_path / "r2", steps=range(2), seed=1)
    first = MetaSNE().fit(tmp_path)
    assert len(first) == 2 * 3 + 2 * 2
    rng = np.random.default_rng(11)
    for s in (3, 4):  # training goes on: new snapshots arrive
        for lay in ("a", "b"):
            writer.write_activation(lay, s, rng.normal(size=(60, 8)).astype(np.float32))
    built = []
    real = meta_distances.representation_vectors
    monkeypatch.setattr(meta_distances, "representation_vectors",
                        lambda X, transforms, pairs=None, name="X": built.append(name) or real(X, transforms, pairs,
                                                                                                   name))
    second = MetaSNE().fit(tmp_path)
    assert len(built) == 4 and all("step 3" in b or "step 4" in b for b in built)  # only the new ones
    full = MetaSNE(cache=False).fit(tmp_path)
    assert second.keys == full.keys and len(second) == 14
    np.testing.assert_allclose(second.distances, full.distances, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(second.coords, full.coords, rtol=1e-5, atol=1e-6)
    rows = [second.keys.index(k) for k in first.keys]  # the old pairs are reused bit for bit
    np.testing.assert_array_equal(second.distances[np.ix_(rows, rows)], first.distances)


def test_probe_id_mismatch_is_refused_naming_the_runs(tmp_path):
    make_run(tmp_path / "relu")
    make_run(tmp_path / "sigmoid", ids=np.arange(60)[::-1])
    with pytest.raises(ValueError, match=r"runs 'relu' and 'sigmoid' hold different probe sets "
                                         r"\(ids differ first at position 0 of 60\)"):
        MetaSNE().fit(tmp_path)
    make_run(tmp_path / "small", n=40)
    with pytest.raises(ValueError, match=r"runs 'relu' and 'small' .*\(60 vs 40 probes\)"):
        MetaSNE().fit(tmp_path, runs=["relu", "small"])
    assert len(MetaSNE().fit(tmp_path, runs=["relu"], layers=["b"])) == 3


def test_collapsed_representation_is_left_out_with_a_warning(tmp_path):
    writer = make_run(tmp_path / "r")
    writer.write_activation("a", 7, np.zeros((60, 8), np.float32))
    with pytest.warns(RuntimeWarning, match=r"left out 1 representation\(s\).*layer 'a' step 7: constant: every "
                                            r"probe point has the same activations"):
        result = MetaSNE().fit(tmp_path)
    assert ("r", "a", 7) not in result.keys and result.info["left_out"][0]["key"] == ["r", "a", 7]


def test_a_representation_at_any_scale_is_compared_not_left_out(tmp_path):
    # X·1e20 overflowed float32 Gram entries and X·1e-25 underflowed them: both were left out as "all probe
    # points coincide"; distances ignore scale, so each is the same point as X
    writer = make_run(tmp_path / "r", layers=("a",), steps=range(2))
    X = np.asarray(open_logdir(tmp_path).run("r").activations("a", 0), dtype=np.float32)
    writer.write_activation("a", 10, X * np.float32(1e20))
    writer.write_activation("a", 11, X * np.float32(1e-25))
    writer.write_activation("a", 12, np.full_like(X, 1e20))  # a true collapse at that scale is still one
    with pytest.warns(RuntimeWarning, match=r"left out 1 representation\(s\).*step 12: constant") as caught:
        result = MetaSNE(robustness=True).fit(tmp_path)
    assert len(caught) == 1  # and no overflow warning from numpy
    rows = [result.keys.index(("r", "a", s)) for s in (0, 10, 11)]
    assert np.abs(result.distances[np.ix_(rows, rows)]).max() < 1e-5
    assert result.distances[rows[0], result.keys.index(("r", "a", 1))] > 1e-2


def test_a_flipped_bit_in_an_activation_file_is_left_out_as_embed_reports_it(tmp_path, capsys):
    # meta reads through the checksum recorded at capture, as embed does: a flip that turns 4.32 into 8e19 and
    # one in the last bit of a value (which went in silently) are both left out naming the checksum
    writer = make_run(tmp_path / "r", layers=("a",), steps=range(5))
    X = np.array(open_logdir(tmp_path).run("r").activations("a", 3), dtype=np.float32)
    X[5, 2] = 4.32
    writer.write_activation("a", 3, X)
    run = open_logdir(tmp_path).run("r")
    for step, bit in ((3, 29), (2, 0)):  # 0x408A3D71 ^ 1 << 29 = 7.96e19; the last mantissa bit
        path = next((tmp_path / "r").rglob(run.record("a", step)["file"]))
        data = bytearray(path.read_bytes())
        at = len(data) - X.nbytes + 4 * (5 * X.shape[1] + 2)
        word = int.from_bytes(data[at:at + 4], "little") ^ (1 << bit)
        data[at:at + 4] = word.to_bytes(4, "little")
        path.write_bytes(bytes(data))
    assert np.asarray(open_logdir(tmp_path).run("r").activations("a", 3))[5, 2] > 7e19
    with pytest.warns(RuntimeWarning, match=r"left out 2 representation\(s\).*step 2: the activations file '.*' "
                                            r"does not match the checksum recorded when it was captured .*step 3: "
                                            r"the activations file '.*' does not match the checksum") as caught:
        result = MetaSNE(robustness=True).fit(tmp_path)
    assert len(caught) == 1 and result.keys == [("r", "a", 0), ("r", "a", 1), ("r", "a", 4)]
    assert main(["embed", str(tmp_path), "--method", "pca", "--no-progress"]) == 1
    assert capsys.readouterr().err.count("does not match the checksum recorded") == 2  # steps 2 and 3, each named


def test_rank_correlation_is_spearman_of_the_upper_triangles_ties_included():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    A = rng.integers(0, 6, size=(40, 40)).astype(float)  # many ties
    A = A + A.T
    B = A + rng.integers(0, 4, size=(40, 40))
    B = B + B.T
    iu = np.triu_indices(40, 1)
    assert meta_distances.rank_correlation(A, B) == pytest.approx(spearmanr(A[iu], B[iu]).statistic, abs=1e-12)
    assert meta_distances.rank_correlation(A, A) == pytest.approx(1.0, abs=1e-12)


def test_a_large_map_peaks_at_about_four_r_by_r_matrices(tmp_path):
    # the README's figure: the squared chords, the distances and classical MDS's work, the robustness check
    # included, about 4 R x R float64 matrices at the peak (13.4 here before the in-place chords and ranks)
    import tracemalloc

    rng = np.random.default_rng(0)
    for r in range(4):
        writer = RunWriter(tmp_path / f"r{r}")
        writer.begin({"fingerprint": {"model": "m", "probe": "p"},
                      "layers": {f"l{i}": {"stored_shape": [8, 3]} for i in range(10)}})
        writer.write_probe(np.arange(8), np.arange(8) % 2)
        for s in range(10):
            for i in range(10):
                writer.write_activation(f"l{i}", s, rng.normal(size=(8, 3)).astype(np.float32))
    MetaSNE(robustness=True).fit(tmp_path)  # the vectors, banked
    for chords in tmp_path.rglob("chord2.npy"):
        chords.unlink()  # the R x R part from scratch
    tracemalloc.start()
    try:
        result = MetaSNE(robustness=True).fit(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    R = len(result)
    assert R == 400 and peak < 5.5 * 8 * R * R, peak / (8 * R * R)  # 4.2 at R = 1,500, where R-sized lists weigh less


def test_tsne_mode_embeds_precomputed_distances_from_mds():
    rng = np.random.default_rng(12)
    groups = [clusters(n=60, seed=g) for g in range(3)]
    reps = [g + 0.05 * rng.normal(size=g.shape) for g in groups for _ in range(6)]
    result = MetaSNE(embedding="tsne").fit(reps)
    assert result.coords.shape == (18, 2) and np.isfinite(result.coords).all()
    assert result.info["perplexity"] == pytest.approx(17 / 3)
    within = [np.linalg.norm(result.coords[6 * g:6 * g + 6] - result.coords[6 * g:6 * g + 6].mean(0), axis=1).max()
              for g in range(3)]
    centres = result.coords.reshape(3, 6, 2).mean(1)
    assert max(within) < min(pdist(centres)) / 2  # the three groups stay apart


def test_smacof_refinement_does_not_increase_stress():
    rng = np.random.default_rng(13)
    reps = [np.tanh(clusters(n=50, seed=s) * rng.uniform(0.1, 3)) for s in range(10)]
    mds = MetaSNE().fit(reps)
    ref = MetaSNE(embedding="smacof").fit(reps)

    def stress(Y, D):
        iu = np.triu_indices(len(D), 1)
        return np.sum((pdist(Y) - D[iu]) ** 2)

    assert stress(ref.coords, ref.distances) <= stress(mds.coords, mds.distances) * (1 + 1e-6)


def test_cli_writes_a_result_that_reloads(tmp_path, capsys):
    make_run(tmp_path / "relu", thumbnails=True)
    make_run(tmp_path / "tanh", seed=3, thumbnails=True)
    assert main(["meta", str(tmp_path), "--include-input", "--transform", "cka", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "13 representations of 60 probes" in out and "robustness: rank correlation of dist and cka" in out
    logdir = open_logdir(tmp_path)
    assert "meta-cka-chord-mds" in logdir.artifact_names()
    result = MetaResult.load(tmp_path, "meta-cka-chord-mds")
    assert result.keys[-1] == INPUT_KEY and result.coords.shape == (13, 2) and result.coords.dtype == np.float32
    assert -1 <= result.robustness <= 1 and result.params["transform"] == "cka"
    again = MetaSNE(transform="cka").fit(logdir, inputs=logdir.run("relu").probe.thumbnails.reshape(60, -1))
    np.testing.assert_allclose(result.distances, again.distances, rtol=1e-12)
    assert not any(tmp_path.rglob("*.tmp"))  # no temporary file left anywhere in the log directory
    assert main(["meta", str(tmp_path), "--runs", "nope"]) == 2
    assert "run 'nope' is not in" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# Kornblith et al. (2019): corresponding layers of networks trained from different seeds are nearest
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_layer_identification_across_seeds(digits):
    """Each layer of one seed's MLP is nearest to the same layer of another seed in >= 90% of cases (Kornblith et
    al. 2019, section 6.1), on sklearn's 8x8 digits (offline)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    keras = pytest.importorskip("keras")
    x, y = digits
    x = (x / 16).astype("float32")
    probe, (x_train, y_train) = x[:500], (x[500:], y[500:])
    acts = {}
    for seed in range(3):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(512, activation="relu"),
                                  keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)])
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x_train, y_train, epochs=5, batch_size=64, verbose=0)
        side = keras.Model(model.inputs, [layer.output for layer in model.layers])
        for layer, a in enumerate(side.predict(probe, verbose=0)):
            acts[(seed, layer)] = a
    keys = list(acts)
    for transform in ("dist", "cka"):
        D = representation_distances([acts[k] for k in keys], transform=transform)
        hits = []
        for i, (seed, layer) in enumerate(keys):
            for other in {0, 1, 2} - {seed}:
                cand = [j for j, k in enumerate(keys) if k[0] == other]
                hits.append(keys[cand[int(np.argmin(D[i, cand]))]][1] == layer)
        print(f"{transform}: layer identified in {np.mean(hits):.0%} of {len(hits)} cases")
        assert np.mean(hits) >= 0.9


def test_a_result_saved_again_and_killed_before_its_json_is_refused(tmp_path, monkeypatch):
    """result.json is written last and names the coordinates written first: a save killed in between (new
    coordinates beside the old json, same keys) is refused in one line, not served as the old result."""

    class Killed(BaseException):
        pass

    keys = [("r", "a", 0), ("r", "a", 1), ("r", "a", 2)]
    first = MetaResult(keys=keys, coords=np.zeros((3, 2)), distances=np.ones((3, 3)), params={"transform": "cka"})
    first.save(tmp_path, "m")
    assert MetaResult.load(tmp_path, "m").coords.tolist() == [[0, 0]] * 3

    def killed(self, name, obj):
        raise Killed(name)

    with monkeypatch.context() as patch:
        patch.setattr(Artifacts, "save_json", killed)
        with pytest.raises(Killed):
            MetaResult(keys=keys, coords=np.ones((3, 2)), distances=np.ones((3, 3)), params={"transform": "cka"},
                       robustness=0.5).save(tmp_path, "m")
    with pytest.raises(DamagedFileError, match=r"result.json was written with other coordinates than coords.npy "
                                               r"beside it \(a save interrupted\); run repviz meta again"):
        MetaResult.load(tmp_path, "m")
