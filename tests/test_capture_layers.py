"""Layer selection on modern graphs: ``TimeDistributed`` recorded once, a nested model's outputs named by key and
recorded once, attention parts pooled over their sequence axis with the padding mask, residual merges recorded by
default. Small models of each kind, one epoch; values are checked against a side model over the same layers, and one
log directory goes through ``info``, ``embed``, ``meta`` and ``similarity``.
"""

import contextlib
import io
import os
import re

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

import repviz
from repviz.capture import ActivationLogger

N, T, V = 16, 6, 12  # probe rows, tokens per sequence, vocabulary
L = keras.layers


def _run(model, x, y, root, name, loss="mse", **kwargs):
    """``model`` trained one epoch with a logger on the first N examples; the run as a reader sees it."""
    model.compile(optimizer="adam", loss=loss)
    logger = ActivationLogger(root / name, probe=(x[:N], y[:N]), **kwargs)
    model.fit(x, y, epochs=1, batch_size=16, verbose=0, shuffle=False, callbacks=[logger])
    return repviz.open_logdir(root).run(name)


def _side(model, layer_output, x):
    """What ``layer_output`` (a symbolic tensor of ``model``'s graph) holds on ``x``."""
    return keras.ops.convert_to_numpy(keras.Model(model.inputs[0], layer_output)(x, training=False))


def _tokens(n=32, seed=0):
    """Token ids with 0 as right padding (lengths 2..T), the first example padded."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, V, size=(n, T))
    lengths = rng.integers(2, T + 1, size=n)
    lengths[0] = 2
    x[np.arange(T)[None, :] >= lengths[:, None]] = 0
    return x.astype(np.int32), rng.integers(0, 2, n)


def _masked_mean(values, kept):
    """Mean over axis 1 of the positions ``kept`` (n, T) keeps."""
    shape = kept.shape + (1,) * (values.ndim - 2)
    return (values * kept.reshape(shape)).sum(1) / kept.sum(1).reshape((-1,) + (1,) * (values.ndim - 2))


def _forecaster():
    """An LSTM forecaster with a TimeDistributed head and a regression target per step (series, next values)."""
    keras.utils.set_random_seed(5)
    t = np.linspace(0, 6, 13, dtype=np.float32)
    phase = np.random.default_rng(5).random((32, 1), dtype=np.float32) * 6
    series = np.sin(t[None, :] + phase)[..., None]
    model = keras.Sequential([keras.Input((12, 1)), L.LSTM(6, return_sequences=True, name="lstm"),
                              L.TimeDistributed(L.Dense(1, name="dense"), name="next")])
    return model, series[:, :-1], series[:, 1:]


def test_time_distributed_is_one_representation(tmp_path):
    """Before: the inner Dense was recorded once per time step (next/dense#0 ... #11, width 1 each)."""
    model, x, y = _forecaster()
    run = _run(model, x, y, tmp_path, "forecast")
    assert run.layers == ["lstm", "next"]
    assert run.layer_info("next")["stored_shape"] == [N, 1]
    assert run.layer_info("next")["reduction"]["kind"] == "sequence_mean_pooling"
    assert "once per time step inside TimeDistributed 'next'" in run.manifest["skipped"]["next/dense"]
    np.testing.assert_allclose(run.activations("next", 1), _side(model, model.get_layer("next").output, x[:N])
                               .mean(axis=1), rtol=1e-5, atol=1e-6)
    for layers, match in [(["next/dense"], r"^layer 'next/dense' runs once per time step inside TimeDistributed "
                                            r"'next'; record 'next' instead \(its output holds every step\)\.$"),
                          (L.Dense, r"selects no layer of the model")]:  # a class selects no per-step call either
        logger = ActivationLogger(tmp_path / "named", probe=x[:N], layers=layers)
        with pytest.raises(ValueError, match=match):
            model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])


def test_time_distributed_maps_and_tokens_pool_over_time_with_the_mask(tmp_path):
    """A TimeDistributed output of rank 5 (frames of maps) is pooled over its time axis; one over masked tokens
    keeps only the positions the mask keeps."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    frames = rng.random((32, 3, 4, 4, 1), dtype=np.float32)
    video = keras.Sequential([keras.Input((3, 4, 4, 1)), L.TimeDistributed(L.Conv2D(2, 3, name="conv"), name="frames"),
                              L.TimeDistributed(L.Flatten(), name="flat"), L.LSTM(3, name="lstm"),
                              L.Dense(1, name="out")])
    run = _run(video, frames, rng.random((32, 1), dtype=np.float32), tmp_path, "video")
    assert run.layers == ["frames", "lstm", "out"]
    assert run.manifest["skipped"]["flat"].startswith("a TimeDistributed(Flatten): not in the default set")
    assert run.layer_info("frames")["reduction"] == {"kind": "sequence_mean_pooling", "dim": 8, "axis": 1}
    np.testing.assert_allclose(run.activations("frames", 1),
                               _side(video, video.get_layer("frames").output, frames[:N]).mean(1).reshape(N, -1),
                               rtol=1e-5, atol=1e-6)
    x, y = _tokens()
    inp = keras.Input((T,), dtype="int32")
    steps = L.TimeDistributed(L.Dense(3), name="steps")(L.Embedding(V, 4, mask_zero=True, name="emb")(inp))
    tagger = keras.Model(inp, L.Dense(2, activation="softmax", name="out")(L.GlobalAveragePooling1D()(steps)))
    run = _run(tagger, x, y, tmp_path, "tagger", loss="sparse_categorical_crossentropy")
    got, values = run.activations("steps", 1), _side(tagger, steps, x[:N])
    np.testing.assert_allclose(got, _masked_mean(values, x[:N] > 0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0], values[0].mean(0), atol=1e-4)  # the padding is left out


def _encoder_model(as_dict: bool):
    """A Functional model around a nested encoder with two outputs (dict keys 'mean'/'logvar', or a list)."""
    keras.utils.set_random_seed(1)
    inp = keras.Input((8,))
    h = L.Dense(6, activation="relu", name="h")(inp)
    mean, logvar = L.Dense(2, name="zm")(h), L.Dense(2, name="zl")(h)
    encoder = keras.Model(inp, {"mean": mean, "logvar": logvar} if as_dict else [mean, logvar], name="encoder")
    outer = keras.Input((8,))
    z = encoder(outer)
    z = [z["mean"], z["logvar"]] if as_dict else z
    model = keras.Model(outer, L.Dense(1, name="out")(L.concatenate(z, name="cat")))
    return model, encoder


@pytest.mark.parametrize("as_dict", [True, False])
def test_nested_model_outputs_are_named_by_key_and_recorded_once(tmp_path, as_dict):
    """Before: the encoder's two outputs were recorded as 'encoder:0'/'encoder:1' beside 'encoder/zm' and
    'encoder/zl', the same tensors twice."""
    model, encoder = _encoder_model(as_dict)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(32, 8)).astype(np.float32), rng.normal(size=(32, 1)).astype(np.float32)
    run = _run(model, x, y, tmp_path, "nested")
    names = ["encoder/mean", "encoder/logvar"] if as_dict else ["encoder/zm", "encoder/zl"]
    assert sorted(run.layers) == sorted(["encoder/h", *names, "out"])
    assert not any(":" in name for name in run.layers)
    assert [run.layer_info(n)["class"] for n in names] == ["Dense", "Dense"]  # recorded where it is made
    want = encoder(x[:N])
    want = [want["mean"], want["logvar"]] if as_dict else want
    for name, value in zip(names, want):
        np.testing.assert_allclose(run.activations(name, 1), keras.ops.convert_to_numpy(value), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    if as_dict:
        assert run.manifest["skipped"]["encoder/zm"] == "same tensor as 'encoder/mean'"
        named = _run(model, x, y, tmp_path, "named", layers=["encoder"])
        assert named.layers == ["encoder/logvar", "encoder/mean"]  # keras.tree.flatten's order: sorted keys


def _attention_model():
    """Tokens (0: padding, masked) -> Embedding -> self-attention returning its scores -> pooled -> classes."""
    keras.utils.set_random_seed(2)
    inp = keras.Input((T,), dtype="int32")
    emb = L.Embedding(V, 8, mask_zero=True, name="emb")(inp)
    att, scores = L.MultiHeadAttention(2, 4, name="mha")(emb, emb, return_attention_scores=True)
    out = L.Dense(2, activation="softmax", name="out")(L.GlobalAveragePooling1D(name="gap")(att))
    return keras.Model(inp, out), emb, scores


def test_attention_parts_pool_over_the_sequence_with_the_mask(tmp_path):
    """Before: the query/key/value projections (n, T, heads, dim) and the scores (n, heads, T, T) were flattened
    with their padded positions (widths 48 and 72), and the embedding feeding the attention lost its mask (the
    attention layer clears it), so its mean took the padding in."""
    model, emb, scores = _attention_model()
    x, y = _tokens(seed=2)
    weights = [w.copy() for w in model.get_weights()]
    run = _run(model, x, y, tmp_path, "att", loss="sparse_categorical_crossentropy")
    softmax = run.layers[4]  # Keras names the attention's softmax per process: softmax, softmax_1, ...
    assert re.fullmatch(r"mha/softmax(_\d+)?", softmax), run.layers
    assert run.layers == ["emb", "mha/query", "mha/key", "mha/value", softmax, "mha/attention_output", "gap", "out"]
    assert run.layer_info("mha/query")["reduction"] == {"kind": "sequence_mean_pooling", "dim": 8, "axis": 1}
    assert run.layer_info(softmax)["reduction"] == {"kind": "sequence_mean_pooling", "dim": 2 * T, "axis": 2}
    model.set_weights(weights)  # snapshot 0's weights
    kept = x[:N] > 0
    mha = model.get_layer("mha")
    vectors = _side(model, emb, x[:N])
    np.testing.assert_allclose(run.activations("emb", 0), _masked_mean(vectors, kept), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run.activations("mha/query", 0),
                               _masked_mean(keras.ops.convert_to_numpy(mha.query_dense(vectors)), kept)
                               .reshape(N, -1), rtol=1e-5, atol=1e-6)
    per_query = np.moveaxis(_side(model, scores, x[:N]), 2, 1)  # (n, T_q, heads, T_k)
    np.testing.assert_allclose(run.activations(softmax, 0), _masked_mean(per_query, kept).reshape(N, -1),
                               rtol=1e-5, atol=1e-6)
    # Padding positions do not change any pooled value: give the padding token another embedding and record again.
    table = model.get_layer("emb").embeddings
    padding = keras.ops.convert_to_numpy(table).copy()
    padding[0] += 5.0
    table.assign(padding)
    again = _run(model, x, y, tmp_path, "again", loss="sparse_categorical_crossentropy")
    for name in run.layers:
        np.testing.assert_allclose(again.activations(name, 0), run.activations(name, 0), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    assert not np.allclose(_side(model, emb, x[:1])[0, -1], vectors[0, -1])  # the padding did change


def _residual_model():
    """Conv stem, a squeeze-excite block with a residual Add, then Add -> ReLU (the block's output is the ReLU's)."""
    keras.utils.set_random_seed(3)
    inp = keras.Input((6, 6, 2))
    h = L.Conv2D(4, 3, padding="same", activation="relu", name="stem")(inp)
    r = L.Conv2D(4, 3, padding="same", name="c1")(h)
    gate = L.Dense(4, activation="sigmoid", name="se_fc")(L.GlobalAveragePooling2D(keepdims=True, name="se_gap")(r))
    h = L.Add(name="add0")([h, L.Multiply(name="se_mul")([r, gate])])
    h = L.ReLU(name="relu1")(L.Add(name="add1")([h, L.Conv2D(4, 3, padding="same", name="c2")(h)]))
    out = L.Dense(2, activation="softmax", name="out")(L.GlobalAveragePooling2D(name="gap")(h))
    return keras.Model(inp, out)


def test_residual_merges_are_recorded_by_default(tmp_path):
    """Before: every Add and Multiply was skipped as "not in the default set"."""
    model = _residual_model()
    rng = np.random.default_rng(3)
    x, y = rng.random((32, 6, 6, 2), dtype=np.float32), rng.integers(0, 2, 32)
    run = _run(model, x, y, tmp_path, "res", loss="sparse_categorical_crossentropy")
    assert run.layers == ["stem", "c1", "se_gap", "se_fc", "se_mul", "add0", "c2", "relu1", "gap", "out"]
    assert run.manifest["skipped"]["add1"] == ("Add whose output goes only to 'relu1', recorded as the block's "
                                               "output; name it in layers= to record it too")
    assert run.layer_info("add0")["stored_shape"] == [N, 6 * 6 * 4]  # a map: flattened, as conv maps are
    np.testing.assert_allclose(run.activations("add0", 1),
                               _side(model, model.get_layer("add0").output, x[:N]).reshape(N, -1), rtol=1e-5,
                               atol=1e-6)
    named = _run(model, x, y, tmp_path, "named", loss="sparse_categorical_crossentropy", layers=["add1", "relu1"])
    assert named.layers == ["add1", "relu1"]


def test_each_pattern_through_info_embed_meta_and_similarity(tmp_path):
    from repviz.cli import main
    from repviz.meta import MetaSNE

    model, x, y = _forecaster()
    _run(model, x, y, tmp_path, "forecast")
    model, _, _ = _attention_model()
    x, y = _tokens(seed=2)
    _run(model, x, y, tmp_path, "att", loss="sparse_categorical_crossentropy")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["info", str(tmp_path)]) == 0
    assert "once per time step inside TimeDistributed 'next'" in out.getvalue()
    result = repviz.embed_logdir(tmp_path, methods=["pca", "tsne"], params={"tsne": {"perplexity": 4}},
                                 progress=False)
    assert result.failed == [], result.failure_lines()
    meta = MetaSNE(random_state=0).fit(tmp_path, runs=["att"])
    assert len(meta) == 2 * 8  # 8 layers x 2 snapshots
    with contextlib.redirect_stdout(out):
        assert main(["similarity", str(tmp_path), "--runs", "att"]) == 0
        assert main(["similarity", str(tmp_path), "--runs", "forecast"]) == 0
    assert "mha/softmax" in out.getvalue()
