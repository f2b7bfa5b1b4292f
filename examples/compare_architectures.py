"""Two keras.applications architectures compared layer by layer, without training either (Raghu et al. 2021).

    python examples/compare_architectures.py [--logdir logs/archs] [--weights DIR] [--probes 256]

``repviz.record`` takes one snapshot of each network on the same probe images (MNIST digits from the test set,
as 64 x 64 RGB), then every layer of one is compared with every layer of the other by debiased linear CKA, and
the heatmap is written beside the log directory. With ``--weights DIR`` holding ``<Name>.weights.h5`` files (e.g.
ImageNet weights saved with ``model.save_weights``), the networks load them; otherwise they keep random weights
(offline). Layers that are the same for every probe (dead ReLUs) are left out as holes, said in one line.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

import repviz
from repviz.datasets import BUNDLED_MNIST, load_mnist, stratified_indices
from repviz.export import write_matrix
from repviz.similarity import similarity

NETWORKS = ("MobileNetV3Small", "EfficientNetB0")
SIZE = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", default="logs/archs")
    parser.add_argument("--weights", help="a directory of <Name>.weights.h5 files (default: random weights)")
    parser.add_argument("--probes", type=int, default=256, help="probe images, every digit equally (default 256)")
    args = parser.parse_args()

    _, (x_test, y_test) = load_mnist(BUNDLED_MNIST)
    chosen = stratified_indices(y_test, args.probes, random_state=0)
    digits = keras.ops.image.resize(x_test[chosen, :, :, None].astype(np.float32), (SIZE, SIZE))
    images = np.repeat(keras.ops.convert_to_numpy(digits), 3, axis=-1)  # 0..255, as the backbones expect
    probe = repviz.ProbeSet(images, y_test[chosen], ids=chosen)

    for name in NETWORKS:
        net = getattr(keras.applications, name)(weights=None, input_shape=(SIZE, SIZE, 3))
        if args.weights:
            net.load_weights(os.path.join(args.weights, f"{name}.weights.h5"))
        run = repviz.record(net, probe, os.path.join(args.logdir, name))
        print(f"recorded {len(run.layers)} layers of {name} into {args.logdir}/{run.name}")

    m = similarity(args.logdir, runs=NETWORKS)
    if m.left_out:
        print(m.left_out_line())
    best = m.best()
    for i in range(0, len(m.rows), max(1, len(m.rows) // 8)):  # a few rows, from input to output
        print(f"{m.rows[i].layer:>40} is most alike {m.cols[best[i]].layer if best[i] >= 0 else '-'}")
    written = write_matrix(m, os.path.join(args.logdir, "figures"))
    print(f"wrote {', '.join(p.name for p in written)} under {args.logdir}/figures")


if __name__ == "__main__":
    main()
