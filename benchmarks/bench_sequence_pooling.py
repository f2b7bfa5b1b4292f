"""Which pooling should ``ActivationLogger`` apply by default to sequence outputs (n, T, d)? (issue #27)

Trains a small token transformer (token + position embedding, one attention block, global average pooling) and a
BiLSTM (masked embedding, a Bidirectional LSTM returning sequences, then one returning its last state) on a
synthetic 4-topic text task: right-padded token sequences (0 = padding, ``mask_zero=True``) of 6 to 40 tokens, the
label being the topic whose 10 words are most frequent among 60 shared filler words. The sequence outputs of each
model are recorded on a 600-example probe with every policy (``mean`` mask-aware, ``first``, ``last``, ``max``,
``flatten`` count-sketched to 256 columns as before #27), and scored: 10-NN accuracy of the labels among the pooled
vectors themselves, and trustworthiness and 10-NN accuracy of their t-SNE map (``repviz embed``, perplexity 30).

    python benchmarks/bench_sequence_pooling.py [--epochs 4] [--probe 600] [--out /tmp/pooling]
"""

import argparse
import os
import shutil
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

import repviz
from repviz.metrics import quality_scores

L = keras.layers
T, V, D, TOPICS = 40, 100, 32, 4
POLICIES = ("mean", "first", "last", "max", "flatten")


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, TOPICS, n)
    x = np.zeros((n, T), np.int32)
    lengths = rng.integers(6, T + 1, n)
    for i in range(n):
        topical = rng.random(lengths[i]) < 0.3
        words = rng.integers(1 + TOPICS * 10, V, lengths[i])  # filler
        words[topical] = 1 + 10 * y[i] + rng.integers(0, 10, topical.sum())
        x[i, :lengths[i]] = words
    return x, y


class TokenAndPositionEmbedding(L.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.token, self.position = L.Embedding(V, D, mask_zero=True), L.Embedding(T, D)

    def call(self, x):
        return self.token(x) + self.position(keras.ops.arange(T))

    def compute_mask(self, x, mask=None):
        return self.token.compute_mask(x)


class TransformerBlock(L.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.att = L.MultiHeadAttention(num_heads=2, key_dim=D // 2)
        self.ffn = keras.Sequential([L.Dense(D, activation="relu"), L.Dense(D)])
        self.norm1, self.norm2 = L.LayerNormalization(), L.LayerNormalization()

    def call(self, x, mask=None):
        h = self.norm1(x + self.att(x, x))
        return self.norm2(h + self.ffn(h))


def transformer() -> tuple[keras.Model, list[str]]:
    inp = keras.Input((T,), dtype="int32")
    h = TransformerBlock(name="block")(TokenAndPositionEmbedding(name="embed")(inp))
    out = L.Dense(TOPICS, activation="softmax")(L.GlobalAveragePooling1D()(h))
    return keras.Model(inp, out, name="transformer"), ["embed", "block"]


def bilstm() -> tuple[keras.Model, list[str]]:
    model = keras.Sequential([keras.Input((T,), dtype="int32"), L.Embedding(V, D, mask_zero=True, name="emb"),
                              L.Bidirectional(L.LSTM(16, return_sequences=True), name="bi_seq"),
                              L.Bidirectional(L.LSTM(16), name="bi_last"), L.Dense(TOPICS, activation="softmax")],
                             name="bilstm")
    return model, ["emb", "bi_seq"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--probe", type=int, default=600)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = args.out or tempfile.mkdtemp(prefix="pooling-")
    shutil.rmtree(root, ignore_errors=True)
    x, y = data(4000)
    xp, yp = data(args.probe, seed=1)
    rows = []
    for build in (transformer, bilstm):
        keras.utils.set_random_seed(0)
        model, layers = build()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        loggers = [repviz.ActivationLogger(os.path.join(root, f"{model.name}-{p}"), probe=(xp, yp), layers=layers,
                                           pooling=p, freq=[args.epochs]) for p in POLICIES]
        hist = model.fit(x, y, epochs=args.epochs, batch_size=64, verbose=0, callbacks=loggers)
        print(f"{model.name}: training accuracy {hist.history['accuracy'][-1]:.3f}")
    result = repviz.embed_logdir(root, methods=["tsne"], steps=[args.epochs], progress=False)
    assert not result.failed, result.failure_lines()
    log = repviz.open_logdir(root)
    for r in result.rows:
        run = log.run(r["run"])
        X = np.asarray(run.activations(r["layer"], args.epochs))
        high = quality_scores(X, X, yp, n_neighbors=10)["knn_accuracy"]
        model, policy = r["run"].rsplit("-", 1)
        rows.append((model, r["layer"], policy, X.shape[1], high, r["scores"]["trustworthiness"],
                     r["scores"]["knn_accuracy"]))
    print(f"{'model':<12} {'layer':<7} {'pooling':<8} {'width':>5} {'10-NN acc (vectors)':>20} "
          f"{'t-SNE trust':>11} {'t-SNE 10-NN acc':>15}")
    for m, layer, p, w, high, trust, acc in sorted(rows, key=lambda r: (r[0], r[1], POLICIES.index(r[2]))):
        print(f"{m:<12} {layer:<7} {p:<8} {w:>5} {high:>20.3f} {trust:>11.3f} {acc:>15.3f}")


if __name__ == "__main__":
    main()
