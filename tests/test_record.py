"""``repviz.record``: one snapshot of any model without training, through the callback's own capture; then the
log directory goes through ``info``, ``embed``, ``meta`` and ``similarity`` like a run recorded during ``fit``.
Constant representations (a dead ReLU layer, an output that ignores the input) are marked at capture, listed by
``info`` and left out, not failed, by embed, meta and similarity (a matrix with holes)."""

from __future__ import annotations

import json
import warnings

import keras
import numpy as np
import pytest

import repviz
from repviz.chains import CONSTANT
from repviz.cli import main
from repviz.similarity import RepKey, similarity

N = 48


class Broadcast(keras.layers.Layer):
    """The same learned vector for every example, as a position embedding is: a constant representation."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(5,), initializer=keras.initializers.RandomNormal(seed=3))

    def call(self, x):
        return keras.ops.zeros_like(x[:, :5]) + self.w


def _functional(seed: int = 0) -> keras.Model:
    """A small functional model, random weights: a live layer, a dead ReLU layer, a constant custom layer."""
    glorot = keras.initializers.GlorotUniform
    inp = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu", name="hidden", kernel_initializer=glorot(seed=seed))(inp)
    dead = keras.layers.Dense(4, activation="relu", name="dead", kernel_initializer=glorot(seed=seed + 1),
                              bias_initializer=keras.initializers.Constant(-100.0))(h)
    pos = Broadcast(name="pos")(h)
    merged = keras.layers.Concatenate(name="merged")([h, dead, pos])
    out = keras.layers.Dense(3, activation="softmax", name="out", kernel_initializer=glorot(seed=seed + 2))(merged)
    return keras.Model(inp, out, name="functional_net")


def _convnet() -> keras.Model:
    """Another architecture on the same inputs: a 1-D convolution over the 8 features."""
    glorot = keras.initializers.GlorotUniform
    return keras.Sequential([
        keras.Input((8,)), keras.layers.Reshape((8, 1)),
        keras.layers.Conv1D(6, 3, activation="tanh", name="conv", kernel_initializer=glorot(seed=7)),
        keras.layers.GlobalAveragePooling1D(name="pool"),
        keras.layers.Dense(3, activation="softmax", name="head", kernel_initializer=glorot(seed=8))],
        name="conv_net")


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(0).random((N, 8), dtype=np.float32)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, x):
    """logs/net (the functional model at steps 0 and 5) and logs/conv (the convnet at step 0)."""
    root = tmp_path_factory.mktemp("record")
    model = _functional()
    first = repviz.record(model, x, root / "net")
    second = repviz.record(model, repviz.ProbeSet(x), root / "net", step=5)
    repviz.record(_convnet(), x, root / "conv")
    return root, first, second


def test_record_stores_one_snapshot_per_call_into_one_run(recorded, x):
    root, first, second = recorded
    assert first.name == second.name == "net" and second.steps() == [0, 5]
    assert first.layers == ["hidden", "dead", "pos", "out"]
    assert second.manifest["step_unit"] == "step"
    model = _functional()  # the same seeded weights: what the callback would have stored
    hidden = keras.Model(model.inputs[0], model.get_layer("hidden").output)
    np.testing.assert_allclose(second.activations("hidden", 5), hidden(x), rtol=1e-6)
    np.testing.assert_allclose(second.predictions(0), model(x), rtol=1e-6)
    assert [second.record(layer, 0).get("constant", False) for layer in second.layers] == [False, True, True, False]


def test_record_refuses_a_step_the_run_holds_in_one_line(recorded, x):
    root, _, _ = recorded
    before = sorted(p.name for p in (root / "net").rglob("*"))
    with pytest.raises(ValueError, match=r"already holds step 5 \(it has steps 0, 5\); record with another step=") as e:
        repviz.record(_functional(), x, root / "net", step=5)
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in (root / "net").rglob("*")) == before  # nothing written, no new run beside
    for bad in (-1, 1.5, "3"):
        with pytest.raises(ValueError, match=r"'step' parameter of record must be an int >= 0"):
            repviz.record(_functional(), x, root / "net", step=bad)
    with pytest.raises(ValueError, match=r"'model' parameter of record must be a keras Model or Layer"):
        repviz.record("resnet50.keras", x, root / "net", step=9)


def test_another_model_follows_the_rerun_rule(tmp_path, x):
    """Other weights of the same architecture: a new run beside, said in one line; the same model object changed
    by a loop of one's own between calls continues its run; another architecture is refused in one line."""
    model = _functional(seed=0)
    repviz.record(model, x, tmp_path / "net")
    model.get_layer("hidden").kernel.assign(model.get_layer("hidden").kernel * 2.0)  # "trained" by the user
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no new run for the same model object
        assert repviz.record(model, x, tmp_path / "net", step=1).steps() == [0, 1]
    with pytest.warns(RuntimeWarning, match=r"holds another training .* so this snapshot is recorded as the new "
                                            r"run '.*net-2'") as caught:
        other = repviz.record(_functional(seed=10), x, tmp_path / "net")
    assert other.name == "net-2" and other.steps() == [0] and len(caught) == 1
    assert "\n" not in str(caught[0].message)
    with pytest.raises(repviz.store.IncompatibleRunError, match="already holds a repviz run of a different model"):
        repviz.record(_convnet(), x, tmp_path / "net")


def test_info_embed_meta_similarity_on_a_recorded_logdir(recorded, capsys):
    """Before: embed reported the dead and constant layers as 4 failed (exit 1), similarity failed the whole
    matrix (exit 2). Now: 0 failed, left out as constant in one line, exit 0; the matrix has holes."""
    root, _, _ = recorded
    assert main(["info", str(root)]) == 0
    out = capsys.readouterr().out
    assert "dead                             (48, 4)        2 snapshot(s), constant at steps 0, 5 (left out)" in out
    assert "pos" in out and "constant at steps 0, 5 (left out)" in out.split("pos", 1)[1].splitlines()[0]

    assert main(["embed", str(root), "--method", "pca", "--runs", "net", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "4 computed, 0 cached, 0 failed, 4 constant (left out)" in out
    assert err.splitlines() == ["repviz embed: left out 4 constant representation(s), the same for every probe "
                                "point (e.g. a dead ReLU layer; nothing to embed): 'net'/'dead' at step(s) 0, 5; "
                                "'net'/'pos' at step(s) 0, 5"]

    assert main(["meta", str(root), "--runs", "net", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("4 representations of 48 probes from run(s) net")
    assert err.splitlines() == [f"repviz meta: left out 4 representations (('net', 'dead', 0), ('net', 'dead', 5), "
                                f"('net', 'pos', 0), ('net', 'pos', 5)): {CONSTANT}"]

    assert main(["similarity", str(root), "--runs", "net", "--no-progress", "--figures", str(root / "figures")]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"repviz similarity: left out 2 representation(s), empty cells: dead, pos "
                                f"({CONSTANT})"]
    assert out.splitlines()[3].split() == ["dead", "-", "-", "-", "-"]
    saved = json.loads((root / "figures" / "similarity-net-vs-net-step5.json").read_text())
    assert saved["left_out"] == [{"key": ["net", "dead", 5], "reason": CONSTANT},
                                 {"key": ["net", "pos", 5], "reason": CONSTANT}]
    assert saved["values"][1] == [None] * 4 and saved["values"][0][0] == pytest.approx(1.0)
    assert (root / "figures" / "similarity-net-vs-net-step5.png").read_bytes()[:4] == b"\x89PNG"


def test_two_architectures_compared_layer_by_layer(recorded):
    """Raghu et al.'s comparison of two networks, here a dense net and a convnet recorded on the same inputs: a
    CKA heatmap of every layer of one against every layer of the other, holes where a layer is constant."""
    root, _, _ = recorded
    m = similarity(root, ("net", "conv"), step=0)
    assert [k.layer for k in m.rows] == ["hidden", "dead", "pos", "out"]
    assert [k.layer for k in m.cols] == ["conv", "pool", "head"]
    assert set(m.left_out) == {RepKey("net", "dead", 0), RepKey("net", "pos", 0)}
    live = m.values[[0, 3]]
    assert np.isfinite(live).all() and (np.abs(live) <= 1.0 + 1e-6).all()
    assert np.isnan(m.values[[1, 2]]).all()
    from repviz.export import write_matrix

    written = write_matrix(m, root / "archs")
    assert {p.suffix for p in written} == {".csv", ".json", ".png", ".svg"}


@pytest.mark.parametrize("blocks", [False, True])
def test_constant_means_equal_rows_up_to_float_rounding(tmp_path, blocks):
    """MobileNetV3Small's squeeze-excite ReLUs: every probe point the same except one value a rounding unit apart
    (two probe batches of the forward pass rounded differently). Constant; a difference of 1e-4 is not; NaN is
    not (it is counted as non-finite)."""
    from repviz.store import RunWriter

    writer = RunWriter(tmp_path / "r")
    writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {}})
    base = np.tile(np.linspace(0.0, 3.0, 6, dtype=np.float32), (40, 1))
    cases = {"ulp": (29, np.nextafter(np.float32(3.0), np.float32(4.0))), "real": (29, np.float32(3.0003)),
             "nan": (29, np.float32("nan")), "zeros": None, "float16": None}
    for name, change in cases.items():
        X = np.zeros_like(base) if name == "zeros" else base.copy()
        if change is not None:
            X[change[0], -1] = change[1]
        dtype = np.float16 if name == "float16" else np.float32
        if name == "float16":
            X[7, 2] = np.float32(1.2) * (1 + 1e-4)  # rounds to the same float16 as 1.2, or one unit apart
        if blocks:
            array = writer.activation_blocks(name, 0, X.shape, dtype)
            for start in range(0, 40, 16):
                array.write(X[start:start + 16])
        else:
            array = X.astype(dtype)
        record = writer.write_activation(name, 0, array)
        assert record.get("constant", False) is (name in ("ulp", "zeros", "float16")), name
