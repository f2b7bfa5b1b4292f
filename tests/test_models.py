"""Every kind of model a user brings, end to end: capture with the probe its own training data would give (dict,
rank N-1, dataset), embed with 0 failures (1-wide layers included), meta-SNE, and the plugin's ``/runs`` index.

Small models of the keras-io examples' kinds (issue #27): a token transformer with masking, a BiLSTM, residual
blocks with BatchNorm, a VAE trained through ``train_step`` (its encoder logged), a multi-input multi-output
Functional model fed a dict, a siamese network with a shared tower, a nested Sequential. Tiny widths, a few
examples, one epoch: each test checks what the pipeline does with the model's shapes, not what it learns.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

import repviz
from repviz.capture import ActivationLogger
from repviz.meta import MetaSNE

N, T, V = 24, 6, 20  # probe rows, tokens per sequence, vocabulary
L = keras.layers


def _tokens(n=48, seed=0):
    """Token ids with 0 as right padding (lengths 2..T) and a label: whether token 1 appears."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, V, size=(n, T))
    lengths = rng.integers(2, T + 1, size=n)
    x[np.arange(T)[None, :] >= lengths[:, None]] = 0
    return x.astype(np.int32), (x == 1).any(axis=1).astype(np.int64)


def _end_to_end(root, run: str, expect_layers=()) -> dict:
    """Embed (PCA and t-SNE) with no failure, map with meta-SNE, and read the run's entry of the plugin's index."""
    result = repviz.embed_logdir(root, methods=["pca", "tsne"], params={"tsne": {"perplexity": 5}}, progress=False)
    assert result.failed == [], result.failure_lines()
    MetaSNE(random_state=0).fit(root).save(root, "meta")
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(root)))
    try:
        client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        index = client.get("/data/plugin/repviz/runs").json
    finally:
        plugin.jobs.close()
    assert index["meta"] == ["meta"]
    (entry,) = [r for r in index["runs"] if r["name"] == run]
    names = [lay["name"] for lay in entry["layers"]]
    assert set(expect_layers) <= set(names), names
    assert all(set(e["steps"]) == set(names) for e in entry["embeddings"])  # every layer embedded by each method
    return entry


def _fit(model, x, y, logger, epochs=1, **kwargs):
    model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, callbacks=[logger], **kwargs)
    return repviz.open_logdir(logger.log_dir.parent).run(logger.log_dir.name)


class TokenAndPositionEmbedding(L.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.token = L.Embedding(V, 8, mask_zero=True, name="token")
        self.position = L.Embedding(T, 8, name="position")

    def call(self, x):
        return self.token(x) + self.position(keras.ops.arange(T))  # the positions: no batch axis

    def compute_mask(self, x, mask=None):
        return self.token.compute_mask(x)


class TransformerBlock(L.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.att = L.MultiHeadAttention(num_heads=2, key_dim=4, name="att")
        self.ffn = keras.Sequential([L.Dense(8, activation="relu"), L.Dense(8)], name="ffn")
        self.norm1, self.norm2 = L.LayerNormalization(name="norm1"), L.LayerNormalization(name="norm2")

    def call(self, x):
        h = self.norm1(x + self.att(x, x))
        return self.norm2(h + self.ffn(h))


def test_token_transformer_with_masking(tmp_path):
    keras.utils.set_random_seed(0)
    x, y = _tokens()
    inp = keras.Input((T,), dtype="int32")
    h = TransformerBlock(name="block")(TokenAndPositionEmbedding(name="embed")(inp))
    out = L.Dense(1, activation="sigmoid", name="out")(L.GlobalAveragePooling1D(name="gap")(h))
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    run = _fit(model, x, y, ActivationLogger(tmp_path / "transformer", probe=(x[:N], y[:N])))
    assert {"embed", "block", "out"} <= set(run.layers)  # the custom layers' outputs, by default
    assert run.layer_info("block")["reduction"]["kind"] == "sequence_mean_pooling"
    assert run.layer_info("block")["stored_shape"] == [N, 8]
    assert "no batch axis" in run.manifest["skipped"]["embed/position"]
    entry = _end_to_end(tmp_path, "transformer", ["embed", "block", "out"])
    key = run.embeddings.key("pca")
    info = run.embeddings.info(key, "out", 1)
    assert info["one_dimensional"] is True  # the sigmoid output: its values on x, a strip per class on y
    Y = np.asarray(run.embeddings.read(key, "out", 1))
    np.testing.assert_allclose(Y[:, 0], run.activations("out", 1)[:, 0] - run.activations("out", 1)[:, 0].mean(),
                               rtol=1e-5, atol=1e-6)
    strips = [Y[y[:N] == c, 1] for c in (0, 1)]
    assert strips[0].max() < strips[1].min()  # one strip per class
    assert entry["layers"][[lay["name"] for lay in entry["layers"]].index("block")]["reduction"]["kind"] == \
        "sequence_mean_pooling"
    pytest.importorskip("matplotlib")
    from repviz.export import embedding_grid

    logdir = repviz.open_logdir(tmp_path)  # export's figure names the 1-D layout, as the tab's info line does
    assert embedding_grid(logdir, "out", key)._suptitle.get_text() == \
        "layer out (1-D: x = its values, y = a strip per class)"
    assert embedding_grid(logdir, "block", key)._suptitle.get_text() == "layer block"


def test_bilstm(tmp_path):
    keras.utils.set_random_seed(1)
    x, y = _tokens(seed=1)
    model = keras.Sequential([keras.Input((T,), dtype="int32"), L.Embedding(V, 8, mask_zero=True, name="emb"),
                              L.Bidirectional(L.LSTM(4, return_sequences=True), name="bi1"),
                              L.Bidirectional(L.LSTM(4), name="bi2"), L.Dense(2, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    run = _fit(model, x, y, ActivationLogger(tmp_path / "bilstm", probe=(x[:N], y[:N])))
    assert {"emb", "bi1", "bi2", "out"} <= set(run.layers)
    assert run.layer_info("bi1")["reduction"]["kind"] == "sequence_mean_pooling"
    assert run.layer_info("bi1")["stored_shape"] == [N, 8]
    _end_to_end(tmp_path, "bilstm", ["bi1", "bi2"])


def test_residual_blocks_with_batchnorm(tmp_path):
    keras.utils.set_random_seed(2)
    rng = np.random.default_rng(2)
    x = rng.random((48, 8, 8, 1), dtype=np.float32)
    y = (x[:, :4].mean(axis=(1, 2, 3)) > 0.5).astype(np.int64)
    inp = keras.Input((8, 8, 1))
    h = L.Activation("relu", name="stem_act")(L.BatchNormalization(name="stem_bn")(L.Conv2D(4, 3, padding="same",
                                                                                            name="stem")(inp)))
    for i in range(2):
        r = L.SeparableConv2D(4, 3, padding="same", name=f"sep{i}")(h)
        r = L.BatchNormalization(name=f"bn{i}")(r)
        h = L.Activation("relu", name=f"res{i}")(L.add([h, r], name=f"add{i}"))
    out = L.Dense(1, activation="sigmoid", name="out")(L.GlobalAveragePooling2D(name="gap")(h))
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    run = _fit(model, x, y, ActivationLogger(tmp_path / "resnet", probe=(x[:N], y[:N])))
    assert {"stem", "sep0", "res0", "res1", "gap", "out"} <= set(run.layers)
    _end_to_end(tmp_path, "resnet", ["res1", "out"])


class Sampling(L.Layer):
    def call(self, inputs):
        mean, log_var = inputs
        return mean + keras.ops.exp(0.5 * log_var) * keras.random.normal(keras.ops.shape(mean), seed=0)


class VAE(keras.Model):
    """The keras-io VAE's shape: an encoder and a decoder, trained through train_step, no call()."""

    def __init__(self, encoder, decoder, **kw):
        super().__init__(**kw)
        self.encoder, self.decoder = encoder, decoder

    def train_step(self, data):
        import tensorflow as tf

        with tf.GradientTape() as tape:
            mean, log_var, z = self.encoder(data)
            rec = keras.ops.mean((data - self.decoder(z)) ** 2)
            loss = rec - 0.5 * keras.ops.mean(1 + log_var - mean ** 2 - keras.ops.exp(log_var))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"loss": loss}


def _vae():
    inp = keras.Input((8, 8, 1))
    h = L.Dense(6, activation="relu", name="enc_hidden")(L.Flatten()(inp))
    mean, log_var = L.Dense(2, name="z_mean")(h), L.Dense(2, name="z_log_var")(h)
    encoder = keras.Model(inp, [mean, log_var, Sampling(name="z")([mean, log_var])], name="encoder")
    z = keras.Input((2,))
    decoder = keras.Model(z, L.Reshape((8, 8, 1))(L.Dense(64, activation="sigmoid", name="dec_out")(z)),
                          name="decoder")
    vae = VAE(encoder, decoder, name="vae")
    vae.compile(optimizer="adam")
    return vae


def test_subclassed_model_with_custom_train_step_logs_its_encoder(tmp_path):
    pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the VAE's train_step is written with tf.GradientTape")
    keras.utils.set_random_seed(3)
    x = np.random.default_rng(3).random((48, 8, 8, 1), dtype=np.float32)
    vae = _vae()
    with pytest.raises(ValueError, match=r"model 'vae' has no call\(\) \(it trains through train_step\).*"
                                         r"model=vae.encoder\) \(it has vae.encoder, vae.decoder\) or pass forward="):
        vae.fit(x, epochs=1, verbose=0, callbacks=[ActivationLogger(tmp_path / "refused", probe=x[:N])])
    logger = ActivationLogger(tmp_path / "vae", probe=x[:N], model=vae.encoder)
    vae.fit(x, epochs=1, batch_size=16, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("vae")
    assert {"enc_hidden", "z_mean", "z_log_var", "z"} <= set(run.layers)
    mean = keras.ops.convert_to_numpy(vae.encoder(x[:N])[0])
    np.testing.assert_allclose(run.activations("z_mean", 1), mean, rtol=1e-5, atol=1e-6)
    forward = ActivationLogger(tmp_path / "forward", probe=x[:N], model=vae.decoder,
                               forward=lambda b: vae.decoder(vae.encoder(b)[0]))
    vae.fit(x, epochs=1, batch_size=16, verbose=0, callbacks=[forward])
    assert "dec_out" in repviz.open_logdir(tmp_path).run("forward").layers
    _end_to_end(tmp_path, "vae", ["z_mean"])


def test_multi_input_multi_output_with_a_dict_probe(tmp_path):
    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(4)
    title, body = rng.integers(0, V, (48, 4)).astype(np.int32), rng.integers(0, V, (48, 10)).astype(np.int32)
    tags = rng.random((48, 3), dtype=np.float32)
    inputs = [keras.Input((4,), dtype="int32", name="title"), keras.Input((10,), dtype="int32", name="body"),
              keras.Input((3,), name="tags")]
    t = L.LSTM(4, name="title_lstm")(L.Embedding(V, 4, name="title_emb")(inputs[0]))
    b = L.LSTM(4, name="body_lstm")(L.Embedding(V, 4, name="body_emb")(inputs[1]))
    h = L.concatenate([t, b, inputs[2]], name="merged")
    priority = L.Dense(1, activation="sigmoid", name="priority")(h)
    department = L.Dense(3, activation="softmax", name="department")(h)
    model = keras.Model(inputs, [priority, department])
    model.compile(optimizer="adam", loss=["binary_crossentropy", "sparse_categorical_crossentropy"])
    probe = {"title": title[:N], "body": body[:N], "tags": tags[:N]}  # sorted keys != declared order
    y_dep = rng.integers(0, 3, 48)
    logger = ActivationLogger(tmp_path / "mimo", probe=(probe, y_dep[:N]), prediction_output="department")
    model.fit({"title": title, "body": body, "tags": tags}, [rng.random((48, 1)), y_dep], epochs=1, batch_size=16,
              verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("mimo")
    assert {"title_lstm", "body_lstm", "priority", "department"} <= set(run.layers)
    assert run.layer_info("priority")["stored_shape"] == [N, 1]
    _end_to_end(tmp_path, "mimo", ["priority"])


def test_siamese_shared_tower(tmp_path):
    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(5)
    a, b = rng.random((48, 8), dtype=np.float32), rng.random((48, 8), dtype=np.float32)
    y = (a.sum(1) > b.sum(1)).astype(np.int64)
    tower = keras.Sequential([keras.Input((8,)), L.Dense(6, activation="relu", name="t1"), L.Dense(4, name="t2")],
                             name="tower")
    ia, ib = keras.Input((8,), name="left"), keras.Input((8,), name="right")
    diff = L.subtract([tower(ia), tower(ib)], name="diff")
    model = keras.Model([ia, ib], L.Dense(1, activation="sigmoid", name="out")(diff))
    model.compile(optimizer="adam", loss="binary_crossentropy")
    logger = ActivationLogger(tmp_path / "siamese", probe=([a[:N], b[:N]], y[:N]))
    model.fit([a, b], y, epochs=1, batch_size=16, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("siamese")
    assert {"tower/t1#0", "tower/t1#1", "tower/t2#0", "tower/t2#1", "out"} <= set(run.layers)
    assert run.manifest["skipped"]["tower"].startswith("same tensor as 'tower/t2'")  # the tower's output is t2's
    _end_to_end(tmp_path, "siamese", ["tower/t2#1"])


def test_nested_sequential_with_a_rank_short_dataset_probe(tmp_path):
    import tensorflow as tf

    keras.utils.set_random_seed(6)
    rng = np.random.default_rng(6)
    x = rng.random((48, 8, 8), dtype=np.float32)  # Input((8, 8, 1)): one rank short, as fit accepts
    y = (x.mean(axis=(1, 2)) > 0.5).astype(np.int64)
    encoder = keras.Sequential([L.Conv2D(3, 3, activation="relu", name="conv"), L.Flatten(),
                                L.Dense(4, activation="relu", name="code")], name="encoder")
    model = keras.Sequential([keras.Input((8, 8, 1)), encoder, L.Dense(2, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    probe = tf.data.Dataset.from_tensor_slices((x, y)).batch(10)
    logger = ActivationLogger(tmp_path / "nested", probe=probe, probe_size=N)
    model.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[logger])
    run = repviz.open_logdir(tmp_path).run("nested")
    assert len(run.probe) == N
    np.testing.assert_array_equal(run.probe.labels, y[:N])  # taken from the dataset's (x, y)
    assert {"encoder/conv", "encoder/code", "out"} <= set(run.layers) and "encoder" not in run.layers
    np.testing.assert_allclose(run.activations("encoder/code", 1),
                               keras.ops.convert_to_numpy(encoder(x[:N, ..., None])), rtol=1e-5, atol=1e-6)
    _end_to_end(tmp_path, "nested", ["encoder/code"])


def test_narrow_layout_is_the_values_and_a_strip_per_class():
    from repviz.narrow import narrow_layout

    x = np.array([[3.0], [1.0], [2.0], [6.0]], np.float32)
    Y = narrow_layout(x, np.array([0, 1, 0, 1]), 2)
    np.testing.assert_allclose(Y[:, 0], [0, -2, -1, 3])  # the centred values
    assert Y[[0, 2], 1].max() < Y[[1, 3], 1].min()  # class 0's strip below class 1's
    np.testing.assert_array_equal(Y, narrow_layout(x, np.array([0, 1, 0, 1]), 2))  # seeded
    assert np.ptp(narrow_layout(x, np.array([0.1, 0.7, 0.2, 0.3]), 2)[:, 1]) <= 0.6 * 5 * 0.7  # floats: one strip
    wide = narrow_layout(np.array([[1, 2], [3, 5], [5, 2]], np.float32), None, 3)
    np.testing.assert_allclose(wide, [[-2, -1, 0], [0, 2, 0], [2, -1, 0]])  # 2 columns for 3 components


# ---------------------------------------------------------------------------------------------------------------
# Targets of every shape (repviz.targets) and raw-string probes: each through fit, info, embed (0 failed), meta,
# similarity, export and the tab's index, labels and metadata routes
# ---------------------------------------------------------------------------------------------------------------

def _everywhere(root, run: str, kind: str) -> tuple[dict, np.ndarray, dict]:
    """:func:`_end_to_end`, then ``repviz info`` (the target's line), similarity, export and the plugin's labels and
    metadata routes of ``run``; the index entry, the class codes and the metadata columns."""
    import contextlib
    import io

    from repviz.cli import main

    entry = _end_to_end(root, run)
    assert entry["target"]["kind"] == kind
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["info", str(root)]) == 0
        assert main(["similarity", str(root), "--runs", run]) == 0
    assert f"target: {kind} (" in out.getvalue()
    pytest.importorskip("matplotlib")
    from repviz.export import export_figures

    assert export_figures(root, root / "figures", formats=["png"])
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(root)))
    try:
        client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        labels = client.get(f"/data/plugin/repviz/labels?run={run}")
        columns = client.get(f"/data/plugin/repviz/metadata?run={run}")
    finally:
        plugin.jobs.close()
    assert labels.status_code == 200 and columns.status_code == 200
    return entry, np.frombuffer(labels.data, "<i4"), {c["name"]: c for c in columns.json["columns"]}


def test_unet_per_pixel_softmax(tmp_path):
    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(4)
    x = rng.random((32, 8, 8, 1), dtype=np.float32)
    y = np.eye(3, dtype=np.float32)[(x[..., 0] * 3).astype(int).clip(0, 2)]  # one-hot masks (n, 8, 8, 3)
    inp = keras.Input((8, 8, 1))
    down = L.Conv2D(4, 3, padding="same", activation="relu", name="down")(inp)
    up = L.UpSampling2D(name="up")(L.MaxPooling2D(name="pool")(down))
    h = L.Conv2D(4, 3, padding="same", activation="relu", name="merge")(L.concatenate([down, up], name="skip"))
    model = keras.Model(inp, L.Conv2D(3, 1, activation="softmax", name="mask")(h))
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    run = _fit(model, x, y, ActivationLogger(tmp_path / "unet", probe=(x[:N], y[:N])))
    assert run.manifest["probe"]["target"] == {"kind": "per_pixel", "shape": [8, 8, 3], "stored_shape": [8, 8]}
    np.testing.assert_array_equal(run.probe.labels, y[:N].argmax(-1))  # a class per pixel, as uint8
    assert run.probe.labels.dtype == np.uint8
    entry, labels, _ = _everywhere(tmp_path, "unet", "per_pixel")
    assert labels.tolist() == [-1] * N and not entry["has_labels"]  # kept, not a class per example
    assert entry["target"]["colours"] is None


def test_lstm_forecaster_per_step(tmp_path):
    keras.utils.set_random_seed(5)
    t = np.linspace(0, 6, 13, dtype=np.float32)
    phase = np.random.default_rng(5).random((40, 1), dtype=np.float32) * 6
    series = np.sin(t[None, :] + phase)[..., None]  # (n, 13, 1)
    x, y = series[:, :-1], series[:, 1:]  # the next value at every step
    model = keras.Sequential([keras.Input((12, 1)), L.LSTM(6, return_sequences=True, name="lstm"),
                              L.TimeDistributed(L.Dense(1), name="next")])
    model.compile(optimizer="adam", loss="mse")
    run = _fit(model, x, y, ActivationLogger(tmp_path / "forecast", probe=(x[:N], y[:N])))
    assert run.manifest["probe"]["target"]["kind"] == "per_step"
    np.testing.assert_array_equal(run.probe.labels, y[:N])  # as given
    _, labels, _ = _everywhere(tmp_path, "forecast", "per_step")
    assert (labels == -1).all()


def test_regression_mlp_colours_by_value(tmp_path):
    keras.utils.set_random_seed(6)
    x = np.random.default_rng(6).random((48, 5), dtype=np.float32)
    y = x @ np.arange(1, 6, dtype=np.float32) + 0.5
    model = keras.Sequential([keras.Input((5,)), L.Dense(8, activation="relu", name="hidden"), L.Dense(1, name="out")])
    model.compile(optimizer="adam", loss="mse")
    run = _fit(model, x, y, ActivationLogger(tmp_path / "regression", probe=(x[:N], y[:N])))
    assert run.manifest["probe"]["target"] == {"kind": "scalar", "shape": [], "stored_shape": []}
    entry, labels, columns = _everywhere(tmp_path, "regression", "scalar")
    assert (labels == -1).all() and entry["target"]["colours"] == "scale"
    column = columns[entry["target"]["column"]]  # the tab colours "label" by this column, on a scale
    assert column["kind"] == "number" and column["colours"] == "scale"
    np.testing.assert_allclose(column["values"], y[:N], rtol=1e-6)
    scores = run.embedding_scores("hidden", 1, method="pca")
    assert "knn_accuracy" not in scores  # k-NN accuracy only for classes


def test_multilabel_and_one_hot_classes(tmp_path):
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    x = rng.random((48, 6), dtype=np.float32)
    y = (x[:, :3] > 0.5).astype(np.float32)  # several labels per example
    model = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu", name="hidden"),
                              L.Dense(3, activation="sigmoid", name="out")])
    model.compile(optimizer="adam", loss="binary_crossentropy")
    _fit(model, x, y, ActivationLogger(tmp_path / "multilabel", probe=(x[:N], y[:N])))
    _, labels, _ = _everywhere(tmp_path, "multilabel", "multilabel")
    assert (labels == -1).all()
    onehot = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 48)]  # one class per example, as today
    model = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu", name="hidden"),
                              L.Dense(3, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    run = _fit(model, x, onehot, ActivationLogger(tmp_path / "onehot", probe=(x[:N], onehot[:N])))
    assert run.probe.labels.dtype == np.int64
    np.testing.assert_array_equal(run.probe.labels, onehot[:N].argmax(1))
    entry, labels, _ = _everywhere(tmp_path, "onehot", "class")
    assert labels.tolist() == onehot[:N].argmax(1).tolist() and entry["has_labels"]
    assert "knn_accuracy" in run.embedding_scores("hidden", 1, method="pca")


WORDS = ["good", "great", "fun", "bad", "awful", "boring", "film", "plot", "actors", "music"]


def _texts(n=50, seed=8):
    """Short reviews and whether they are positive (more of the first three words than of the next three)."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 7))) for _ in range(n)]
    y = np.array([sum(w in WORDS[:3] for w in t.split()) > sum(w in WORDS[3:6] for w in t.split()) for t in texts])
    return texts, y.astype(np.int64)


def _text_model(texts):
    vectorize = L.TextVectorization(max_tokens=len(WORDS) + 2, output_sequence_length=6, name="vectorize")
    vectorize.adapt(texts)
    inp = keras.Input((1,), dtype="string")
    h = L.Embedding(len(WORDS) + 2, 8, mask_zero=True, name="emb")(vectorize(inp))
    out = L.Dense(2, activation="softmax", name="out")(L.GlobalAveragePooling1D(name="gap")(h))
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def _needs_tensorflow():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("a model taking raw strings (TextVectorization inside) runs TensorFlow ops: fit on "
                    f"{keras.backend.backend()} takes no strings (see test_string_probe_refused_off_tensorflow)")


@pytest.mark.parametrize("form", ["unicode", "object", "bytes", "tf.constant", "dataset"])
def test_text_model_takes_raw_string_probes(tmp_path, form):
    _needs_tensorflow()
    import tensorflow as tf

    keras.utils.set_random_seed(8)
    texts, y = _texts()
    model = _text_model(texts)
    given = {"unicode": np.array(texts), "object": np.array(texts, dtype=object),
             "bytes": np.array([t.encode() for t in texts]), "tf.constant": tf.constant(texts)}
    probe = (tf.data.Dataset.from_tensor_slices((texts, y)).batch(16) if form == "dataset" else
             (given[form][:N], y[:N]))
    logger = ActivationLogger(tmp_path / "text", probe=probe, probe_size=N if form == "dataset" else None)
    run = _fit(model, np.array(texts, dtype=object), y, logger)
    assert run.probe.thumbnails is None and run.manifest["probe"]["target"]["kind"] == "class"
    metadata = run.probe.metadata
    assert metadata.kinds == {"text": "text"} and metadata["text"].tolist() == texts[:N]  # no pickle: JSON
    assert {"emb", "gap", "out"} <= set(run.layers)
    entry, labels, columns = _everywhere(tmp_path, "text", "class")
    assert labels.tolist() == y[:N].tolist()
    assert columns["text"]["card_text"] and columns["text"]["values"] == texts[:N]  # hover and search


def test_text_probe_keeps_given_metadata_first(tmp_path):
    _needs_tensorflow()
    texts, y = _texts()
    source = ["a" if i % 2 else "b" for i in range(N)]
    logger = ActivationLogger(tmp_path / "text", probe=(np.array(texts[:N], dtype=object), y[:N]),
                              metadata={"source": source})
    run = _fit(_text_model(texts), np.array(texts, dtype=object), y, logger)
    assert list(run.probe.metadata) == ["source", "text"]


def test_string_probe_refused_off_tensorflow(monkeypatch):
    """On JAX or PyTorch, fit takes no strings: a string probe is refused in one line naming the remedy."""
    if keras.backend.backend() == "tensorflow":
        monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(ValueError, match="string probe inputs need the TensorFlow backend"):
        ActivationLogger("unused", probe=(np.array(["good film", "bad plot"]), np.array([1, 0])))
