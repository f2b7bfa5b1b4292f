"""Record what a small MLP's layers do on 1,000 MNIST test digits while it trains, then read it back.

    python examples/quickstart.py [--logdir logs] [--epochs 5]

Uses the Keras MNIST cache or download when available, else the digits bundled with repviz (offline).
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras

import repviz
from repviz.datasets import load_mnist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", default="logs")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()

    (x, y), (x_test, y_test) = load_mnist()
    x, x_test = x.reshape(len(x), 784) / 255.0, x_test.reshape(len(x_test), 784) / 255.0

    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dropout(0.2), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    logger = repviz.ActivationLogger(
        log_dir=os.path.join(args.logdir, "quickstart"),  # one run per directory, as with TensorBoard
        probe=(x_test[:1000], y_test[:1000]),             # the same 1,000 digits at every snapshot
        layers=None,                                      # default: Dense layers (Dropout skipped)
        freq=1,                                           # every epoch, plus epoch 0 before training
    )
    model.fit(x, y, epochs=args.epochs, batch_size=128, validation_split=0.1, callbacks=[logger], verbose=2)

    run = repviz.open_logdir(args.logdir).run("quickstart")  # reading needs no TensorFlow
    last = run.steps()[-1]
    print(f"layers {run.layers}, snapshots {run.steps()}")
    for layer in run.layers:
        print(f"  {layer}: activations at epoch {last} {run.activations(layer, last).shape}")
    accuracy = (run.predictions(last).argmax(axis=1) == run.probe.labels).mean()
    print(f"probe accuracy at epoch {last}: {accuracy:.3f}; thumbnails {run.probe.thumbnails.shape}")


if __name__ == "__main__":
    main()
