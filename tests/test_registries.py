"""A name selects behaviour through one registry: a similarity measure, a method's placement policy or a metadata
kind, registered here (in the test, no other file changed), works through the public API like the built-in ones."""

from __future__ import annotations

import numpy as np
import pytest

from repviz import embed_logdir, metadata, open_logdir, place_run
from repviz.methods import METHODS, register_method
from repviz.similarity import MEASURES, cached_similarity, register_measure, similarity
from repviz.similarity.figures import colour_label, heatmap

LAYERS = {"a": (30, 4), "b": (30, 3)}


def _gram_distance(X: np.ndarray, Y: np.ndarray) -> float:
    """A toy measure: the distance between the unit-norm centred Gram matrices of X and Y."""
    grams = []
    for Z in (X, Y):
        Z = Z - Z.mean(axis=0)
        G = Z @ Z.T
        grams.append(G / np.linalg.norm(G))
    return float(np.linalg.norm(grams[0] - grams[1]))


@pytest.fixture
def toy_measure():
    """The measure "toy" (a distance, no options), registered for one test; ``calls`` counts its blocks."""
    calls = []

    def compute(reps_a, reps_b, params, n_probe, progress):
        calls.append((len(reps_a), None if reps_b is None else len(reps_b)))
        cols = reps_a if reps_b is None else reps_b
        return np.array([[_gram_distance(np.asarray(x, np.float64), np.asarray(y, np.float64)) for y in cols]
                         for x in reps_a])

    register_measure("toy", compute, higher_is_similar=False, label="toy Gram distance", unit="Frobenius")
    try:
        yield calls
    finally:
        MEASURES.pop("toy")


@pytest.fixture
def logdir(tmp_path, new_run):
    rng = np.random.default_rng(0)
    for run in ("x", "y"):
        writer = new_run(tmp_path / run, layers=LAYERS)
        writer.write_probe(np.arange(30), np.arange(30) % 3)
        for step in range(2):
            for layer, shape in LAYERS.items():
                writer.write_activation(layer, step, rng.normal(size=shape).astype(np.float32))
    return tmp_path


def test_a_registered_measure_is_computed_cached_labelled_and_drawn(toy_measure, logdir):
    assert cached_similarity(logdir, ("x", "y"), 1, measure="toy") is None
    m = similarity(logdir, ("x", "y"), 1, measure="toy", kernel="rbf")  # options it does not take: one key
    assert m.measure == "toy" and m.params == {} and not m.higher_is_similar
    assert m.title.startswith("toy Gram distance, run 'x' (rows) vs run 'y' (columns)")
    log = open_logdir(logdir)
    want = [[_gram_distance(log.run("x").activations(a, 1).astype(np.float64),
                            log.run("y").activations(b, 1).astype(np.float64)) for b in LAYERS] for a in LAYERS]
    np.testing.assert_allclose(m.values, want, atol=1e-12)
    np.testing.assert_array_equal(m.best(), np.argmin(want, axis=1))
    blocks = len(toy_measure)
    again = cached_similarity(logdir, ("x", "y"), 1, measure="toy")
    assert again is not None and again.notes[-1].startswith("read all ") and len(toy_measure) == blocks
    np.testing.assert_array_equal(again.values, m.values)
    assert len(list((logdir / "plugins" / "repviz-meta").glob("similarity-toy-*"))) == 1
    assert colour_label(m) == "toy Gram distance (Frobenius)"
    image = heatmap(m).axes[0].images[0]
    assert image.get_cmap().name == "viridis_r" and image.get_clim() == (0.0, float(np.max(want)))


def test_an_unknown_measure_is_refused_with_the_registered_ones(logdir):
    with pytest.raises(ValueError, match=r"'measure' parameter of similarity must be a str among "
                                         r"\{'cka', 'procrustes'\}. Got 'svcca' instead"):
        similarity(logdir, "x", 1, measure="svcca")


def nearest_fit_point(params: dict, X_fit, Y_fit, X_new) -> tuple[np.ndarray, dict]:
    """A toy placement policy: each new point at the layout position of its nearest fitted point."""
    nearest = np.argmin(((X_new[:, None, :] - X_fit[None, :, :]) ** 2).sum(axis=2), axis=1)
    return Y_fit[nearest].astype(np.float32), {"transform": "toy: the nearest fitted point's position"}


@pytest.fixture
def toy_method():
    """The method "toy" (PCA's estimator, placed by :func:`nearest_fit_point`), registered for one test."""
    method = register_method("toy", "repviz.manifold:PCA", align="procrustes", defaults={"random_state": 0},
                             place_with=f"{__name__}:nearest_fit_point")
    try:
        yield method
    finally:
        METHODS.pop("toy")


def test_a_registered_placement_policy_places_through_the_public_api(toy_method, logdir):
    embed_logdir(logdir, ["toy"], runs=["x"], jobs=1, progress=False)
    rows = place_run(logdir, "y", into="x", method="toy", layers=["a"])
    assert [(r["layer"], r["step"], r["status"]) for r in rows] == [("a", 0, "placed"), ("a", 1, "placed")]
    log = open_logdir(logdir)
    key = log.run("x").embeddings.key("toy")
    X_fit, X_new = log.run("x").activations("a", 1), log.run("y").activations("a", 1)
    Y_fit = np.asarray(log.run("x").embeddings.read(key, "a", 1))
    coords, info = log.run("y").placed("x", key, "a", 1)
    np.testing.assert_array_equal(coords, nearest_fit_point({}, X_fit, Y_fit, X_new)[0])
    assert info["how"] == {"transform": "toy: the nearest fitted point's position"}
    again = place_run(logdir, "y", into="x", method="toy", layers=["a"])
    assert [r["status"] for r in again] == ["cached", "cached"]


def test_every_estimator_and_policy_a_method_names_can_be_loaded():
    for method in METHODS.values():
        assert isinstance(method.estimator_class(), type), method.name
        for policy in (method.continuation_function(), method.placement_function(), method.warm_function()):
            assert policy is None or callable(policy), method.name


def test_a_metadata_kind_is_one_row_of_the_table(monkeypatch):
    monkeypatch.setitem(metadata.KINDS, "label", metadata.ColumnKind("label", dtypes="U", colours="palette"))
    md = metadata.columns_from({"word": ["a", "b", "a"], "score": [1.0, 2.0, 3.0]}, 3, kinds={"word": "label"})
    assert md.kinds == {"word": "label", "score": "number"}
    assert metadata.from_json(md.to_json(), 3).kinds == md.kinds
    assert metadata.kinds_table()["label"] == {"dtypes": "U", "colours": "palette", "card_text": False}
    with pytest.raises(ValueError, match="metadata column 'score' holds numbers, which cannot be a 'label' column"):
        metadata.columns_from({"score": [1.0, 2.0, 3.0]}, 3, kinds={"score": "label"})
