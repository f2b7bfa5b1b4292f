"""Placing new points into a t-SNE layout: repviz's TSNE.transform against openTSNE's ``transform``.

    python benchmarks/bench_transform.py [--mnist PATH] [--n-fit 20000] [--n-new 1000] [--rounds 3]

MNIST digits (the training images; PCA to 50 dimensions) make a layout of ``--n-fit`` points, fitted once by
repviz's TSNE and wrapped in an openTSNE ``TSNEEmbedding`` with openTSNE's own affinities of the same points
(``PerplexityBasedNN``, perplexity 30: what its ``transform`` searches); ``--n-new`` other digits are then placed
into that same layout by both, alternating, ``--rounds`` times (median reported): openTSNE's ``TSNEEmbedding.transform`` (its defaults) and
repviz's :func:`repviz.manifold.tsne.transform.place`, which is what ``TSNE.transform`` runs on the fitted data and
layout. Quality: 10-NN accuracy of the placed points among the layout's labelled points (and of the layout itself,
leave-one-out). Target: repviz's time at most 0.5x openTSNE's, its accuracy within 0.01 of openTSNE's.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def knn_accuracy(layout: np.ndarray, labels: np.ndarray, Y: np.ndarray, truth: np.ndarray, skip_self: bool) -> float:
    from scipy.spatial import cKDTree

    _, nb = cKDTree(layout).query(Y, 10 + int(skip_self))
    nb = nb[:, int(skip_self):]
    votes = np.array([np.bincount(labels[row], minlength=10).argmax() for row in nb])
    return float(np.mean(votes == truth))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    p.add_argument("--n-fit", type=int, default=20000)
    p.add_argument("--n-new", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()

    import openTSNE

    from repviz.manifold import PCA, TSNE
    from repviz.manifold.tsne.transform import place

    with np.load(args.mnist, allow_pickle=False) as f:
        x, y = f["x_train"], f["y_train"]
    x = x.reshape(len(x), -1).astype(np.float32) / 255
    rng = np.random.default_rng(0)
    pick = rng.permutation(len(x))[: args.n_fit + args.n_new]
    X = PCA(50, random_state=0).fit_transform(x[pick]).astype(np.float32)
    X_fit, y_fit, X_new, y_new = X[: args.n_fit], y[pick[: args.n_fit]], X[args.n_fit:], y[pick[args.n_fit:]]

    start = time.perf_counter()
    layout = TSNE(n_jobs=os.cpu_count(), random_state=0).fit_transform(X_fit).astype(np.float64)
    affinities = openTSNE.affinity.PerplexityBasedNN(X_fit, perplexity=30, n_jobs=os.cpu_count(), random_state=0)
    embedding = openTSNE.TSNEEmbedding(layout, affinities, n_jobs=os.cpu_count(), random_state=0)
    print(f"layout: TSNE of {args.n_fit} points and openTSNE's affinities in {time.perf_counter() - start:.1f} s; "
          f"10-NN accuracy of the layout {knn_accuracy(layout, y_fit, layout, y_fit, True):.4f}")
    place(X_new[:10], X_fit, layout, n_iter=1)  # compile (numba kNN kernels) outside the timings

    times: dict[str, list[float]] = {"openTSNE": [], "repviz": []}
    placed: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for name in times:
            start = time.perf_counter()
            placed[name] = np.asarray(embedding.transform(X_new) if name == "openTSNE" else place(X_new, X_fit, layout))
            times[name].append(time.perf_counter() - start)
    med = {name: float(np.median(t)) for name, t in times.items()}
    acc = {name: knn_accuracy(layout, y_fit, Y, y_new, False) for name, Y in placed.items()}
    print(f"\n{args.n_new} new points into {args.n_fit} (MNIST, PCA 50), median of {args.rounds}, alternating")
    print(f"{'':<10} {'seconds':>8} {'10-NN acc':>10}")
    for name in times:
        print(f"{name:<10} {med[name]:8.2f} {acc[name]:10.4f}   ({', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"ratio repviz / openTSNE: {med['repviz'] / med['openTSNE']:.2f}x (target <= 0.5x); accuracy difference "
          f"{acc['repviz'] - acc['openTSNE']:+.4f} (target within 0.01)")


if __name__ == "__main__":
    main()
