"""The three small networks of the showcase (Olah's comparison): a sigmoid MLP, a ReLU MLP and a small CNN.

All take (28, 28) digits and end in a softmax layer called ``softmax``; Flatten/Reshape layers (which the
:class:`~repviz.ActivationLogger` skips) are named too, so every run of one architecture has the same layer names
and runs line up layer by layer in the meta-SNE map. Keras is imported when a model is built, not with the module.
"""

from __future__ import annotations

from collections.abc import Callable

ARCHITECTURES = ("sigmoid", "relu", "cnn")
"""Architectures :func:`build_network` knows, in the order the showcase trains them."""


def mlp(activation: str, *, hidden: tuple[int, ...] = (128, 64), n_classes: int = 10, name: str | None = None):
    """An MLP on flattened 28x28 digits; layers ``hidden1``, ``hidden2``, ..., ``softmax``."""
    import keras

    layers = [keras.Input((28, 28)), keras.layers.Flatten(name="flatten")]
    layers += [keras.layers.Dense(h, activation=activation, name=f"hidden{i + 1}") for i, h in enumerate(hidden)]
    layers.append(keras.layers.Dense(n_classes, activation="softmax", name="softmax"))
    return keras.Sequential(layers, name=name or f"{activation}_mlp")


def cnn(*, filters: tuple[int, int] = (16, 32), dense: int = 64, n_classes: int = 10, name: str = "cnn"):
    """A small ReLU CNN: two strided 3x3 convolutions (``conv1``, ``conv2``), ``dense``, ``softmax``.

    Strided convolutions rather than pooling layers: every recorded layer is then a distinct stage of the
    network (a pooling layer's output is nearly a copy of the convolution before it).
    """
    import keras

    return keras.Sequential([
        keras.Input((28, 28)), keras.layers.Reshape((28, 28, 1), name="channels"),
        keras.layers.Conv2D(filters[0], 3, strides=2, activation="relu", name="conv1"),
        keras.layers.Conv2D(filters[1], 3, strides=2, activation="relu", name="conv2"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(dense, activation="relu", name="dense"),
        keras.layers.Dense(n_classes, activation="softmax", name="softmax"),
    ], name=name)


_BUILDERS: dict[str, Callable] = {"sigmoid": lambda: mlp("sigmoid"), "relu": lambda: mlp("relu"), "cnn": cnn}


def build_network(architecture: str, seed: int = 0, *, steps_per_execution: int = 1):
    """A freshly initialised, compiled network (Adam 1e-3, sparse cross-entropy, accuracy) of ``architecture``.

    ``seed`` seeds Keras (weights, dropout, shuffling in ``fit``), so the same seed gives the same run.
    ``steps_per_execution`` batches per compiled call: the same updates in the same order with less Python per
    batch (Keras then calls batch-level callbacks once per call, so a logger recording batches sees fewer).
    """
    import keras

    if architecture not in _BUILDERS:
        raise ValueError(f"unknown architecture {architecture!r}; choose one of {', '.join(ARCHITECTURES)}")
    keras.utils.set_random_seed(seed)
    model = _BUILDERS[architecture]()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], steps_per_execution=steps_per_execution)
    return model
