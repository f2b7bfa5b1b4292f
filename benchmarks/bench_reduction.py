"""Distance distortion of ActivationLogger's reduction of wide layers, on the conv layers of a trained MNIST CNN.

    python benchmarks/bench_reduction.py [--mnist PATH] [--probe 2000] [--epochs 1] [--dims 256,512]

The CNN of ``bench_capture.py`` (conv16-pool-conv32-pool-dense128-dense10) is recorded at full width before
training and after each of ``--epochs`` epochs on the 60,000 MNIST training digits. For every layer wider than
the reduced width, each snapshot's full activations (2,000 test digits) are reduced by the count sketch (the
default since issue 17) and by the Gaussian projection it replaced, at each width of ``--dims``. Reported per
layer and width: the median and 95th percentile of the relative error of the pairwise probe distances against
the full-width activations (all pairs, last snapshot), the largest change of the meta-SNE distance (the chord
between unit distance vectors, in [0, 2]; about the RMS relative difference between two snapshots' probe
distances) between any two snapshots of the layer, and the time one reduction of the 2,000 rows takes on the
backend. Target: median relative error <= 5 % at the default width, meta-SNE distances within that error.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def pair_distances(x: np.ndarray) -> np.ndarray:
    """Upper-triangle Euclidean distances between the rows of ``x`` (float64, through one Gram matrix)."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    sq = np.einsum("ij,ij->i", x, x)
    d2 = sq[:, None] + sq[None, :] - 2 * (x @ x.T)
    return np.sqrt(np.maximum(d2[np.triu_indices(len(x), 1)], 0))


def meta_distances(snapshots: list[np.ndarray]) -> np.ndarray:
    """Chord distances between the unit-norm distance vectors of the snapshots (meta-SNE's default)."""
    from repviz.meta.distances import representation_distances

    return representation_distances(snapshots, max_probes=len(snapshots[0]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    p.add_argument("--probe", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--dims", default="256,512")
    args = p.parse_args()

    import keras

    import repviz._reduction as R
    from benchmarks.bench_capture import build
    from repviz.capture.reduction import reduce as _reduce

    with np.load(args.mnist, allow_pickle=False) as f:
        x, y, xt = (f[k] for k in ("x_train", "y_train", "x_test"))
    x = (x[..., None] / 255.0).astype(np.float32)
    probe = (xt[: args.probe, ..., None] / 255.0).astype(np.float32)
    keras.utils.set_random_seed(0)
    model = build("cnn")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    wide = [layer for layer in model.layers if int(np.prod(layer.output.shape[1:])) > min(map(int, args.dims.split(",")))
            and not isinstance(layer, keras.layers.Flatten)]
    side = keras.Model(model.inputs, [layer.output for layer in wide])
    snapshots = {layer.name: [] for layer in wide}
    for epoch in range(args.epochs + 1):
        if epoch:
            model.fit(x, y, epochs=1, batch_size=128, verbose=0)
        for layer, out in zip(wide, side.predict(probe, batch_size=256, verbose=0)):
            snapshots[layer.name].append(out.reshape(len(out), -1))
    print(f"MNIST CNN, {args.epochs} epoch(s), {args.probe} probes, {args.epochs + 1} snapshots per layer")
    head = (f"{'layer':<16} {'width':>6} {'reduction':<18} {'dim':>4} {'median err':>10} {'p95 err':>8} "
            f"{'meta err':>8} {'meta full':>9} {'its err':>8} {'time':>8}")
    print(head + "\n" + "-" * len(head))
    for name, snaps in snapshots.items():
        width = snaps[0].shape[1]
        full_d = pair_distances(snaps[-1])
        full_meta = meta_distances(snaps)
        iu = np.triu_indices(len(snaps), 1)
        for dim in map(int, args.dims.split(",")):
            seed = [0, 1]
            sketch = tuple(keras.ops.convert_to_tensor(a) for a in R.count_sketch_plan(width, dim, seed))
            gaussian = keras.ops.convert_to_tensor(R.gaussian_matrix(width, dim, seed))
            for label, plan in (("count sketch", {"sketch": sketch, "projection": None}),
                                ("Gaussian (before)", {"sketch": None, "projection": gaussian})):
                c = SimpleNamespace(pooling=None, flat_width=width, width=dim, **plan)  # what _reduce reads
                _reduce(keras.ops.convert_to_tensor(snaps[-1][:256]), c)  # warm-up
                t = time.perf_counter()
                reduced = [keras.ops.convert_to_numpy(_reduce(keras.ops.convert_to_tensor(s), c)) for s in snaps]
                spent = (time.perf_counter() - t) / len(snaps)
                err = np.abs(pair_distances(reduced[-1]) / full_d - 1)
                meta = np.abs(meta_distances(reduced)[iu] - full_meta[iu])
                print(f"{name:<16} {width:>6} {label:<18} {dim:>4} {100 * np.median(err):9.2f}% "
                      f"{100 * np.percentile(err, 95):7.2f}% {meta.max():8.4f} {full_meta[iu].min():9.4f} {meta[np.argmin(full_meta[iu])]:8.4f} "
                      f"{spent:7.3f}s",
                      flush=True)
    print("median/p95 err: relative error of the pairwise probe distances against the full-width activations "
          "(last snapshot); meta err: largest change of a meta-SNE distance between two snapshots of the layer "
          "(the chord between unit distance vectors, about the RMS relative difference of the probe distances), "
          "against meta full: the smallest such distance at full width, and its err; time: one reduction of all probe rows on the backend (2 threads or what TF uses)")


if __name__ == "__main__":
    main()
