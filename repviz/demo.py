"""The main job behind ``repviz demo LOGDIR``: record, offline, how two small networks learn MNIST digits.

The demo is a list of steps run in order on one :class:`DemoConfig` (``STEPS``); each step reads what the earlier
ones wrote in the log directory and prints what it found: training, then per-layer embeddings (PCA and aligned
t-SNE, with quality scores), then the meta-SNE map of all representations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .datasets import BUNDLED_MNIST, load_mnist

NETWORKS = ("relu", "sigmoid")


@dataclass
class DemoConfig:
    """What the demo writes and how long it trains.

    Parameters
    ----------
    logdir : path
        Log directory; runs go to ``logdir/relu`` and ``logdir/sigmoid``.
    epochs : int, default=5
        Training epochs per network (about 1 s each on two CPU cores with the bundled data).
    n_probe : int, default=1000
        Test digits recorded at every snapshot (at most the 1,000 bundled test digits unless ``mnist`` is given).
    seed : int, default=0
        Seed of weights, shuffling and projections.
    mnist : path, default=None
        A local MNIST ``.npz``; default the subset bundled with repviz (6,000 train / 1,000 test digits).
    jobs : int, default=-1
        Worker processes for the embeddings (-1: one per core).
    """

    logdir: str | Path
    epochs: int = 5
    n_probe: int = 1000
    seed: int = 0
    mnist: str | Path | None = None
    jobs: int = -1
    runs: list[str] = field(default_factory=list)  # filled by the steps: the runs written


def mlp(activation: str, *, hidden: tuple[int, ...] = (128, 64), n_classes: int = 10, name: str | None = None):
    """A small MLP on flattened 28x28 digits; layer names are fixed (``hidden1``, ``hidden2``, ``logits``) so
    runs of different activations line up layer by layer."""
    import keras

    layers = [keras.Input((784,))]
    layers += [keras.layers.Dense(h, activation=activation, name=f"hidden{i + 1}") for i, h in enumerate(hidden)]
    layers.append(keras.layers.Dense(n_classes, activation="softmax", name="logits"))
    return keras.Sequential(layers, name=name or f"{activation}_mlp")


def train_networks(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Train a ReLU and a sigmoid MLP with :class:`repviz.ActivationLogger`, one run each."""
    import keras

    from .capture import ActivationLogger
    from .store import run_directory

    (x, y), (xt, yt) = load_mnist(cfg.mnist if cfg.mnist is not None else BUNDLED_MNIST)
    if not 1 <= cfg.n_probe <= len(xt):
        raise ValueError(f"--probe must be between 1 and the {len(xt)} test digits available; got {cfg.n_probe}")
    x = x.reshape(len(x), -1).astype(np.float32) / 255
    probe = xt[: cfg.n_probe].reshape(cfg.n_probe, -1).astype(np.float32) / 255
    for activation in NETWORKS:
        keras.utils.set_random_seed(cfg.seed)
        model = mlp(activation)
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
        run_dir = run_directory(cfg.logdir, activation)
        logger = ActivationLogger(run_dir, probe=(probe, yt[: cfg.n_probe]), seed=cfg.seed)
        history = model.fit(x, y, epochs=cfg.epochs, batch_size=64, verbose=0, callbacks=[logger])
        acc = model.evaluate(probe, yt[: cfg.n_probe], verbose=0)[1]
        out(f"{activation:>8}: {cfg.epochs} epochs, train accuracy {history.history['accuracy'][-1]:.3f}, "
            f"probe accuracy {acc:.3f} -> {run_dir}")
        cfg.runs.append(activation)


def embed_layers(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Embed every layer at every snapshot with PCA and t-SNE (aligned over snapshots) and print the scores."""
    from .pipeline import embed_logdir

    result = embed_logdir(cfg.logdir, methods=["pca", "tsne"], runs=cfg.runs, jobs=cfg.jobs)
    out(result.table())
    for line in result.failure_lines():
        out(f"skipped: {line}")


def compare_representations(cfg: DemoConfig, out: Callable[[str], None] = print) -> None:
    """Meta-SNE: map every (network, layer, snapshot), with the raw input as a landmark, and save the map."""
    from .meta import MetaSNE
    from .store import open_logdir

    logdir = open_logdir(cfg.logdir)
    probe = logdir.run(cfg.runs[0]).probe
    inputs = None if probe.thumbnails is None else probe.thumbnails.reshape(len(probe), -1).astype(np.float32)
    result = MetaSNE(random_state=cfg.seed).fit(logdir, runs=cfg.runs, inputs=inputs)
    name = result.save(logdir)
    out(f"meta-SNE: {len(result)} representations mapped ({100 * result.explained_variance:.1f}% of the variance "
        f"in 2-D) -> {logdir.artifacts(name).location}")


STEPS: list[Callable[[DemoConfig, Callable[[str], None]], None]] = [train_networks, embed_layers,
                                                                    compare_representations]


def run_demo(cfg: DemoConfig, out: Callable[[str], None] = print) -> DemoConfig:
    """Run every step of ``STEPS`` on ``cfg``; returns ``cfg`` with the runs written."""
    for step in STEPS:
        step(cfg, out)
    return cfg
