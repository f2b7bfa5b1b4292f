"""repviz.similarity on a log directory: labelled matrices against the measures called directly on the stored
activations, the cache (a second call computes nothing, a new snapshot only its pairs), the meta-bank path against
the direct one, probe checks, ``repviz similarity`` and the heatmaps ``repviz export`` writes."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from repviz import open_logdir
from repviz.chains import CONSTANT
from repviz.cli import main
from repviz.similarity import (
    ProbeMismatchError,
    RepKey,
    SimilarityMatrix,
    cached_similarity,
    compute,
    measures,
    similarity,
    similarity_over_training,
)

LAYERS = {"l1": (40, 6), "l2": (40, 5), "l3": (40, 3)}


@pytest.fixture
def seeds(tmp_path, new_run):
    """``seeds(runs=("net/seed0", "net/seed1"), steps=3, ids=None, where="logs")``: runs whose layer l<k> is the
    same latent Z_k (40 probes) in every run, each run rotating it its own way and adding its own noise, so the
    same layer of two runs is the most similar (CKA near 1) and different layers are not; ``ids[r]``: the probe
    ids of run r. Returns the log directory ``tmp_path / where`` (the same data whatever ``where``)."""

    def write(runs=("net/seed0", "net/seed1"), steps=3, ids=None, where="logs"):
        latent = np.random.default_rng(100)
        Z = {name: latent.normal(size=(40, width)) for name, (_, width) in LAYERS.items()}
        for r, name in enumerate(runs):
            writer = new_run(tmp_path / where / name, layers=LAYERS)
            writer.write_probe(np.arange(40) if ids is None else ids[r], np.arange(40) % 4)
            rng = np.random.default_rng(r)
            for step in range(steps):
                for layer, (_, width) in LAYERS.items():
                    Q = np.linalg.qr(rng.normal(size=(width, width)))[0]
                    X = Z[layer] * (1 + 0.1 * step) @ Q + 0.3 * rng.normal(size=(40, width))
                    writer.write_activation(layer, step, X.astype(np.float32))
        return tmp_path / where

    return write


@pytest.fixture
def counted(monkeypatch):
    """The (rows, cols) of every block the measures compute, and the vectors the meta bank builds."""
    calls = {"blocks": [], "vectors": 0}
    real_cka, real_procrustes, real_add = measures.cka_matrix, measures.procrustes_matrix, compute.add_vectors

    def cka(A, B=None, **kw):
        calls["blocks"].append((len(A), len(A) if B is None else len(B)))
        return real_cka(A, B, **kw)

    def procrustes(A, B=None, **kw):
        calls["blocks"].append((len(A), len(A) if B is None else len(B)))
        return real_procrustes(A, B, **kw)

    def add(reps, banks, *args, **kw):
        calls["vectors"] += sum(compute.vector_id(r, t) not in b for r in reps for t, b in banks.items())
        return real_add(reps, banks, *args, **kw)

    monkeypatch.setattr(measures, "cka_matrix", cka)  # the registry's measures call them by these names
    monkeypatch.setattr(measures, "procrustes_matrix", procrustes)
    monkeypatch.setattr(compute, "add_vectors", add)
    return calls


def _reference(logdir, measure, kernel, debiased, rows, cols) -> np.ndarray:
    """The measure called directly on each pair of stored activations."""
    logdir = open_logdir(logdir)

    def one(X, Y):
        if measure == "procrustes":
            return measures.procrustes_distance(X, Y)
        if kernel == "rbf":
            return measures.rbf_cka(X, Y, debiased=debiased)
        return measures.linear_cka(X, Y, debiased=debiased)

    return np.array([[one(logdir.run(a.run).activations(a.layer, a.step), logdir.run(b.run).activations(b.layer, b.step))
                      for b in cols] for a in rows])


@pytest.mark.parametrize("measure, kernel, debiased", [("cka", "linear", True), ("cka", "linear", False),
                                                       ("cka", "rbf", True), ("cka", "rbf", False),
                                                       ("procrustes", "linear", True)])
def test_the_matrix_is_the_measure_of_each_pair_of_stored_layers(seeds, measure, kernel, debiased):
    root = seeds()
    m = similarity(root, ("net/seed0", "net/seed1"), step=1, measure=measure, kernel=kernel, debiased=debiased)
    assert m.rows == [RepKey("net/seed0", layer, 1) for layer in LAYERS]
    assert m.cols == [RepKey("net/seed1", layer, 1) for layer in LAYERS]
    assert m.values.dtype == np.float64 and m.measure == measure
    np.testing.assert_allclose(m.values, _reference(root, measure, kernel, debiased, m.rows, m.cols), atol=1e-6)
    assert m.layer_identification() == (1.0, 3)  # the same latent: the same layer is the most similar
    assert m.notes[0] == "compared on the 40 probes both runs 'net/seed0' and 'net/seed1' hold"


def test_the_latest_shared_snapshot_by_default(seeds, new_run):
    root = seeds(steps=3)
    short = new_run(root / "short", layers=LAYERS)
    short.write_probe(np.arange(40), np.arange(40) % 4)
    rng = np.random.default_rng(7)
    for step in (0, 1):
        for layer, shape in LAYERS.items():
            short.write_activation(layer, step, rng.normal(size=shape).astype(np.float32))
    m = similarity(root, ("net/seed0", "short"))
    assert {k.step for k in m.rows + m.cols} == {1}
    assert similarity(root, ("net/seed0", "net/seed1")).rows[0].step == 2


def test_a_run_against_itself_is_one_on_the_diagonal_and_symmetric(seeds):
    root = seeds()
    cka = similarity(root, "net/seed0")
    assert cka.rows == cka.cols and cka.title == "debiased linear CKA, run 'net/seed0' at epoch 2"
    np.testing.assert_allclose(np.diagonal(cka.values), 1.0, atol=1e-6)
    np.testing.assert_allclose(cka.values, cka.values.T, atol=1e-12)
    shape = similarity(root, ("net/seed0", "net/seed0"), measure="procrustes")
    np.testing.assert_allclose(np.diagonal(shape.values), 0.0, atol=1e-6)
    assert shape.best().tolist() == [0, 1, 2]  # a distance: the smallest is the most similar


def test_over_training_compares_one_layers_snapshots(seeds):
    root = seeds(steps=4)
    m = similarity_over_training(root, "net/seed0", "l2", measure="cka", kernel="rbf")
    assert m.rows == m.cols == [RepKey("net/seed0", "l2", s) for s in range(4)]
    assert m.title == "debiased rbf CKA, layer 'l2' of run 'net/seed0' across snapshots"
    np.testing.assert_allclose(m.values, _reference(root, "cka", "rbf", True, m.rows, m.cols), atol=1e-6)
    part = similarity_over_training(root, "net/seed0", "l2", steps=[3, 1], kernel="rbf")
    assert [k.step for k in part.rows] == [1, 3]
    np.testing.assert_allclose(part.values, m.values[np.ix_([1, 3], [1, 3])], atol=1e-12)


def test_a_second_call_computes_nothing_and_a_new_snapshot_only_its_pairs(seeds, counted):
    root = seeds(steps=4)
    first = similarity_over_training(root, "net/seed0", "l1", steps=[0, 1, 2], measure="procrustes")
    assert counted["blocks"] == [(3, 3)]
    again = similarity_over_training(root, "net/seed0", "l1", steps=[0, 1, 2], measure="procrustes")
    # the notes say what each call did: before, a first call and the read after it could not be told apart
    assert (first.notes[-1], first.computed, first.cached) == ("computed 9 value(s) now, read 0 from the cache", 9, 0)
    assert counted["blocks"] == [(3, 3)] and again.notes[-1] == "read all 9 values from the cache, computed none now"
    assert (again.computed, again.cached) == (0, 9)
    np.testing.assert_array_equal(again.values, first.values)
    grown = similarity_over_training(root, "net/seed0", "l1", measure="procrustes")  # step 3 is new
    assert counted["blocks"] == [(3, 3), (1, 4)]  # the new snapshot against all four, nothing else
    assert grown.notes[-1] == "computed 7 value(s) now, read 9 from the cache"
    np.testing.assert_array_equal(grown.values[:3, :3], first.values)
    # a cross-run matrix reuses the values the other selections computed
    similarity(root, ("net/seed0", "net/seed1"), step=0, measure="procrustes")
    similarity(root, ("net/seed1", "net/seed0"), step=0, measure="procrustes")
    assert counted["blocks"] == [(3, 3), (1, 4), (3, 3)]


def test_the_meta_bank_gives_linear_cka_as_the_measures_do(seeds, counted, monkeypatch):
    root = seeds()
    banked = {d: similarity(root, ("net/seed0", "net/seed1"), debiased=d) for d in (True, False)}
    assert counted["vectors"] == 12 and counted["blocks"] == []  # 6 representations, 'ucka' and 'cka' vectors
    assert "from the meta bank's 'ucka' vectors" in banked[True].notes[-1]
    again = similarity(root, ("net/seed0", "net/seed1"), debiased=True)
    assert counted["vectors"] == 12 and again.notes[-1].startswith("read all ")

    monkeypatch.setattr(compute, "bank_transform", lambda *args: None)
    fresh = seeds(where="fresh")  # the same runs without cache or bank
    direct = {d: similarity(fresh, ("net/seed0", "net/seed1"), debiased=d) for d in (True, False)}
    assert counted["blocks"] == [(3, 3), (3, 3)]
    for d in (True, False):
        np.testing.assert_allclose(banked[d].values, direct[d].values, atol=1e-6)


def test_a_banked_matrix_is_shared_with_meta_sne(seeds, counted):
    """Vectors banked by MetaSNE(transform="ucka") are the ones similarity reads: nothing is built again."""
    from repviz.meta import MetaSNE

    root = seeds()
    MetaSNE("ucka").fit(root)
    m = similarity(root, ("net/seed0", "net/seed1"))
    assert counted["vectors"] == 0 and "0 built now" in m.notes[-1]


def test_cached_similarity_never_computes(seeds, counted):
    root = seeds()
    assert cached_similarity(root, ("net/seed0", "net/seed1"), measure="procrustes") is None
    assert cached_similarity(root, "net/seed0", layer="l3", kernel="rbf") is None
    assert counted["blocks"] == [] and counted["vectors"] == 0
    computed = similarity(root, ("net/seed0", "net/seed1"), measure="procrustes")
    read = cached_similarity(root, ("net/seed0", "net/seed1"), measure="procrustes")
    np.testing.assert_array_equal(read.values, computed.values)
    assert read.rows == computed.rows and len(counted["blocks"]) == 1
    similarity_over_training(root, "net/seed0", "l3", kernel="rbf")
    assert cached_similarity(root, "net/seed0", layer="l3", kernel="rbf").shape == (3, 3)


def test_minibatch_options_are_their_own_cache_and_noted(seeds):
    root = seeds()
    exact = similarity(root, ("net/seed0", "net/seed1"), measure="cka", kernel="rbf")
    batched = similarity(root, ("net/seed0", "net/seed1"), kernel="rbf", batch_size=16, random_state=3)
    assert batched.params == {"kernel": "rbf", "debiased": True, "sigma": 0.8, "batch_size": 16, "random_state": 3}
    assert "minibatch CKA, 3 batches of about 13 probes (seed 3)" in batched.notes
    assert not np.allclose(batched.values, exact.values)
    whole = similarity(root, ("net/seed0", "net/seed1"), kernel="rbf", batch_size=40)  # one batch: exact
    assert whole.params == exact.params and whole.notes[-1].startswith("read all ")


def test_runs_with_different_probes_are_refused_naming_both(seeds, capsys):
    root = seeds(ids=[np.arange(40), np.arange(40)[::-1]])
    with pytest.raises(ProbeMismatchError, match=r"^runs 'net/seed0' and 'net/seed1' hold different probe sets "
                                                 r"\(ids differ first at position 0 of 40\)") as e:
        similarity(root, ("net/seed0", "net/seed1"))
    assert "\n" not in str(e.value)
    assert main(["similarity", str(root), "--runs", "net/seed0,net/seed1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("repviz similarity: error: runs 'net/seed0' and 'net/seed1' hold different probe sets")
    assert err.count("\n") == 1


@pytest.mark.parametrize("call, match", [
    (lambda root: similarity(root, ("net/seed0", "net/seed1"), step=9),
     "step 9 is not a snapshot of both runs 'net/seed0' and 'net/seed1'; 'net/seed0' has steps 0, 1, 2; "
     "'net/seed1' has 0, 1, 2"),
    (lambda root: similarity(root, ("net/seed0", "nope")), "run 'nope' is not in"),
    (lambda root: similarity(root, "net/seed0", layers=["l9"]), "layer(s) ['l9'] are not in run 'net/seed0'; it "
                                                                "has: ['l1', 'l2', 'l3']"),
    (lambda root: similarity(root, ("net/seed0", "net/seed1"), layers=["l9"]),
     "layer(s) ['l9'] are in neither run 'net/seed0' nor 'net/seed1'"),
    (lambda root: similarity_over_training(root, "net/seed0", "l9"), "layer 'l9' is not in run 'net/seed0'"),
    (lambda root: similarity_over_training(root, "net/seed0", "l1", steps=[5]),
     "step(s) [5] of layer 'l1' are not in run 'net/seed0'; it has steps 0, 1, 2"),
    (lambda root: similarity(root, "net/seed0", measure="cca"), "The 'measure' parameter of similarity"),
    (lambda root: similarity(root, "net/seed0", batch_size=2), "The 'batch_size' parameter of similarity"),
])
def test_bad_names_are_one_line_naming_what_there_is(seeds, call, match):
    root = seeds()
    with pytest.raises((LookupError, ValueError)) as e:
        call(root)
    assert match in str(e.value) and "\n" not in str(e.value)


def test_the_matrix_as_json_and_its_identification_rate():
    rows = [RepKey("a", layer, 3) for layer in ("x", "y", "z")]
    cols = [RepKey("b", layer, 3) for layer in ("x", "y")]
    m = SimilarityMatrix(np.array([[0.9, 0.2], [0.8, 0.1], [np.nan, 0.4]]), rows, cols, "cka",
                         {"kernel": "linear", "debiased": False}, ["a note"])
    d = json.loads(json.dumps(m.to_dict()))
    assert d["values"][2][0] is None and d["rows"][0] == ["a", "x", 3] and d["notes"] == ["a note"]
    assert d["title"] == "biased linear CKA, run 'a' (rows) vs run 'b' (columns) at step 3"
    back = SimilarityMatrix.from_dict(d)
    np.testing.assert_array_equal(back.values, m.values)
    assert back.rows == rows and back.labels("cols") == ["x", "y"]
    assert m.layer_identification() == (0.5, 2)  # x -> x, y -> x; z has no column


def test_repviz_reexports_the_matrix_and_training_view():
    import repviz

    assert repviz.SimilarityMatrix is SimilarityMatrix and repviz.similarity_over_training is similarity_over_training


def test_the_command_prints_the_labelled_matrix_and_writes_it(seeds, capsys, tmp_path):
    root = seeds()
    out = tmp_path / "figures"
    assert main(["similarity", str(root), "--runs", "net/seed0,net/seed1", "--step", "1", "--biased",
                 "--no-progress", "--figures", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = _reference(root, "cka", "linear", False, [RepKey("net/seed0", lay, 1) for lay in LAYERS],
                          [RepKey("net/seed1", lay, 1) for lay in LAYERS])
    assert lines[0] == "biased linear CKA, run 'net/seed0' (rows) vs run 'net/seed1' (columns) at epoch 1"
    assert lines[1].split() == list(LAYERS)
    for row, (layer, values) in zip(lines[2:5], zip(LAYERS, expected)):
        assert row.split() == [layer] + [f"{v:.3f}" for v in values]
    assert "# layer identification: 100% of 3 layers of 'net/seed0' are most similar to the same layer of " \
           "'net/seed1'" in lines
    stem = "similarity-net_seed0-vs-net_seed1-step1"
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{stem}.{ext}" for ext in ("csv", "json", "png", "svg"))
    assert json.loads((out / f"{stem}.json").read_text())["rows"][0] == ["net/seed0", "l1", 1]
    assert (out / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"

    assert main(["similarity", str(root), "--runs", "net/seed1", "--layer", "l2", "--steps", "0,2",
                 "--measure", "procrustes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Procrustes distance, layer 'l2' of run 'net/seed1' across snapshots"
    assert lines[1].split() == ["0", "2"] and lines[2].split()[:2] == ["0", "0.000"]


@pytest.mark.parametrize("args, match", [
    (["--runs", "net/seed0,net/seed1", "--step", "7"], "step 7 is not a snapshot of both runs"),
    (["--runs", "net/seed0,zz"], "run 'zz' is not in"),
    (["--runs", "net/seed0", "--layer", "l7"], "layer 'l7' is not in run 'net/seed0'"),
    (["--runs", "net/seed0,net/seed1", "--layer", "l1"], "give one or two (a,b), or one with --layer"),
    (["--runs", "net/seed0", "--steps", "1"], "--steps selects snapshots of --layer"),
    (["--runs", "net/seed0", "--layer", "l1", "--steps", "x"], "--steps must be comma-separated integers"),
])
def test_the_command_refuses_bad_names_in_one_line(seeds, capsys, args, match):
    root = seeds()
    assert main(["similarity", str(root), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("repviz similarity: error: ") and match in err and err.count("\n") == 1


def test_export_draws_the_seeds_heatmaps_and_cached_training_ones(seeds, tmp_path):
    pytest.importorskip("matplotlib")
    from repviz.export import export_figures

    root = seeds(runs=("net/seed0", "net/seed1", "solo"))
    similarity_over_training(root, "solo", "l1")
    out = tmp_path / "exported"
    written = {p.name for p in export_figures(root, out, formats=["png", "svg"])}
    for stem in ("similarity-net_seed0-vs-net_seed1-step2", "similarity-solo-vs-solo-step2",
                 "similarity-solo-l1-over-training"):
        assert {f"{stem}.{ext}" for ext in ("csv", "json", "png", "svg")} <= written
    assert not any("over-training" in name and "solo" not in name for name in written)  # only where cached
    saved = json.loads((out / "similarity-net_seed0-vs-net_seed1-step2.json").read_text())
    assert saved["title"] == "debiased linear CKA, run 'net/seed0' (rows) vs run 'net/seed1' (columns) at epoch 2"
    assert (out / "similarity-solo-l1-over-training.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("options", [{"measure": "procrustes"}, {"kernel": "rbf"}, {"debiased": True}])
def test_a_layer_without_geometry_is_a_hole_with_its_reason(tmp_path, new_run, options):
    """A constant layer (marked so at capture) leaves its row and column empty, the rest is computed; before, it
    failed the whole matrix."""
    writer = new_run(tmp_path / "dead", layers={"live": (30, 4), "flat": (30, 4)})
    writer.write_probe(np.arange(30), np.arange(30) % 3)
    writer.write_activation("live", 0, np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32))
    writer.write_activation("flat", 0, np.ones((30, 4), np.float32))
    m = similarity(tmp_path, "dead", **options)
    assert np.isfinite(m.values[0, 0]) and np.isnan(m.values[1]).all() and np.isnan(m.values[:, 1]).all()
    assert m.left_out == {RepKey("dead", "flat", 0): CONSTANT}
    assert m.hole(0, 1) == f"'flat' (dead, step 0) is left out: {CONSTANT}" and m.hole(0, 0) is None
    assert m.best().tolist() == [0, -1] and m.table().splitlines()[2].split() == ["flat", "-", "-"]
    cached = cached_similarity(tmp_path, "dead", **options)  # the hole is answered from the cache too
    assert cached is not None and cached.left_out == m.left_out


def test_a_constant_representation_found_on_reading_is_a_hole_remembered_by_the_cache(tmp_path, new_run):
    """A run recorded before capture marked constant snapshots: found when its values are read, then kept in the
    cache's index so that the cached matrix is answered without reading it again."""
    writer = new_run(tmp_path / "old", layers={"live": (30, 4), "flat": (30, 4)})
    writer.write_probe(np.arange(30), np.arange(30) % 3)
    writer.write_activation("live", 0, np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32))
    record = writer.write_activation("flat", 0, np.ones((30, 4), np.float32))
    assert record["constant"] is True
    records = tmp_path / "old" / "plugins" / "repviz" / "records.jsonl"
    records.write_text(records.read_text().replace('"constant": true, ', ""))
    assert "constant" not in open_logdir(tmp_path).run("old").record("flat", 0)
    for options in ({"measure": "procrustes"}, {}):  # the measures' path and the meta bank's
        assert cached_similarity(tmp_path, "old", **options) is None
        m = similarity(tmp_path, "old", **options)
        assert list(m.left_out) == [RepKey("old", "flat", 0)] and np.isnan(m.values[1]).all()
        assert cached_similarity(tmp_path, "old", **options).left_out == m.left_out


def test_a_torn_cache_is_recomputed_not_trusted(seeds, counted):
    """values.npy and index.json name each other by checksum: values from another writer, or a kill between the
    two renames, leave the cache unread and the values computed again."""
    root = seeds()
    first = similarity(root, "net/seed0", measure="procrustes")
    (cache,) = (root / "plugins" / "repviz-meta").glob("similarity-procrustes-*")
    np.save(cache / "values.npy", np.zeros((3, 3)))
    again = similarity(root, "net/seed0", measure="procrustes")
    assert counted["blocks"] == [(3, 3), (3, 3)] and again.notes[-1] == "computed 9 value(s) now, read 0 from the cache"
    np.testing.assert_array_equal(again.values, first.values)


def test_an_executor_computes_the_banked_values_as_tasks(seeds, counted):
    """With an executor, the meta bank's vectors and Gram blocks are its tasks (repviz.meta.tasks), not
    add_vectors here; the values are those of the local path."""
    from repviz.executors import LocalExecutor

    root = seeds()
    tasked = similarity(root, ("net/seed0", "net/seed1"), executor=LocalExecutor(jobs=1))
    assert counted["vectors"] == 0 and "6 built now" in tasked.notes[-1]
    local = similarity(seeds(where="local"), ("net/seed0", "net/seed1"))
    assert counted["vectors"] == 6
    np.testing.assert_allclose(tasked.values, local.values, atol=1e-12)


@pytest.mark.parametrize("measure, kernel", [("cka", "linear"), ("cka", "rbf"), ("procrustes", "linear")])
def test_a_flipped_bit_is_a_hole_naming_the_file_as_embed_reports_it(seeds, measure, kernel):
    """The bank path (linear CKA) and the measures' path read through the checksum recorded at capture; the
    representation that fails it is left out with that reason, the rest of the matrix computed."""
    root = seeds()
    run = open_logdir(root).run("net/seed1")
    path = run.record_path(run.record("l2", 2))
    data = bytearray(path.read_bytes())
    data[-7] ^= 0x01  # the last bit of a mantissa: a value off by 1e-7, nothing else would notice
    path.write_bytes(bytes(data))
    m = similarity(root, ("net/seed0", "net/seed1"), step=2, measure=measure, kernel=kernel)
    (why,) = m.left_out.values()
    assert list(m.left_out) == [RepKey("net/seed1", "l2", 2)] and np.isnan(m.values[:, 1]).all()
    assert re.search(r"activations file '.*l2.*' does not match the checksum", why) and "\n" not in why
    assert np.isfinite(np.delete(m.values, 1, axis=1)).all()
