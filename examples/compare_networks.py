"""Sigmoid MLP vs ReLU MLP vs small CNN on MNIST: record every layer, embed it, map all representations.

    python examples/compare_networks.py [--logdir logs/compare] [--quick] [--mnist PATH.npz]

The experiment of ``repviz demo`` as a script to copy and adapt (Olah, "Visualizing Representations", 2015):
each network is trained from two seeds while ActivationLogger records its layers on 1,000 test digits (100 per
class) at log-spaced epochs; every layer is embedded (PCA, aligned t-SNE) and meta-SNE maps all representations
with the raw input as a landmark. If the map is to be trusted, a layer's nearest representation among the other
seed's is the same layer of the same network; the layer-by-layer CKA heatmap of the two seeds asks the same
(Kornblith et al. 2019). Offline on the digits bundled with repviz unless --mnist is given.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import repviz
from repviz.capture import log_spaced_epochs
from repviz.datasets import BUNDLED_MNIST, load_mnist, stratified_indices
from repviz.meta import MetaSNE, seed_checks
from repviz.networks import ARCHITECTURES, build_network
from repviz.similarity import similarity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", default="logs/compare")
    parser.add_argument("--mnist", default=BUNDLED_MNIST, help="a local MNIST .npz (default: the bundled subset)")
    parser.add_argument("--quick", action="store_true", help="200 probes, 2,000 training digits, 2 epochs")
    args = parser.parse_args()
    epochs, n_probe, n_train = (2, 200, 2000) if args.quick else (8, 1000, None)

    # Data: a fixed probe set with every digit equally represented; its test-set indices are the probe ids.
    (x, y), (x_test, y_test) = load_mnist(args.mnist)
    x, y, x_test = x[:n_train] / np.float32(255), y[:n_train], x_test / np.float32(255)
    probe = stratified_indices(y_test, n_probe, random_state=0)

    # Train: three architectures x two seeds, one run each, snapshots at epochs 0, 1, 2, 4, 8.
    runs = {}
    for arch in ARCHITECTURES:
        for seed in (0, 1):
            name = f"{arch}/seed{seed}"
            model = build_network(arch, seed)
            # max_width: keep the conv maps whole (the default sketches maps wider than 512 values to 256 columns,
            # cheap but too coarse to compare conv1 with the input, which differ by little).
            logger = repviz.ActivationLogger(os.path.join(args.logdir, name), probe=(x_test[probe], y_test[probe]),
                                             probe_ids=probe, freq=log_spaced_epochs(epochs, 4), seed=seed,
                                             max_width=4096)
            model.fit(x, y, epochs=epochs, batch_size=64, verbose=0, callbacks=[logger])
            accuracy = model.evaluate(x_test, y_test, verbose=0)[1]
            print(f"{name:>14}: test accuracy {accuracy:.3f}")
            runs[name] = (arch, seed)

    # Embed every layer at every snapshot; t-SNE continues from the previous snapshot, so training plays as motion.
    embedded = repviz.embed_logdir(args.logdir, methods=["pca", "tsne"], runs=list(runs), jobs=-1)
    print(embedded.table())

    # Meta-SNE: one point per (network, layer, snapshot), the input as landmark; then the truth checks.
    logdir = repviz.open_logdir(args.logdir)
    thumbnails = logdir.run("relu/seed0").probe.thumbnails
    for transform in ("dist", "cka"):
        result = MetaSNE(transform, embedding="tsne").fit(logdir, runs=list(runs),
                                                           inputs=thumbnails.reshape(n_probe, -1))
        result.save(logdir)
        checks = seed_checks(result, runs, output_layers={"softmax"})
        print(f"{transform}: at epoch {checks.step}, the nearest other-seed representation is the same network and "
              f"layer for {checks.layer_identification:.0%} of {checks.n_layers} layers, the same network for "
              f"{checks.architecture_separation:.0%} of {checks.n_hidden} hidden layers")

    # Layer against layer: debiased linear CKA of seed 0's layers (rows) with seed 1's (columns). A layer is
    # identified when its most similar layer of the other seed is itself (the row maximum is on the diagonal).
    for arch in ARCHITECTURES:
        matrix = similarity(logdir, (f"{arch}/seed0", f"{arch}/seed1"))
        rate, n = matrix.layer_identification()
        print(f"{matrix.title}\n{matrix.table()}\n  layer identification: {rate:.0%} of {n} layers")
    print(f"browse it: tensorboard --logdir {args.logdir}; heatmaps: repviz export {args.logdir} --out figures/")


if __name__ == "__main__":  # embed_logdir's worker processes re-import this file
    main()
