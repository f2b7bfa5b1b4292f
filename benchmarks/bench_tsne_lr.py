"""KL divergence after TSNE's default iterations (250 early exaggeration + 500) under learning_rate="auto" rules,
small to large n: the measurement behind :func:`repviz.manifold.tsne.embedding.auto_learning_rate`.

Rules (the convention of bhtsne / FIt-SNE / openTSNE): "floor200" max(n / ex, 200) (repviz before issue #31,
FIt-SNE); "n/ex" n / exaggeration (openTSNE, Belkina et al. 2019); "auto" max(n / ex, min(200, n / 1.5))
(repviz now). Data: randn(n, 3) (no structure, seed s: ``np.random.RandomState(s)``) and 10 Gaussian blobs in
50-D. Usage: ``python benchmarks/bench_tsne_lr.py --sizes 50 500 5000 --seeds 8``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from repviz.manifold import TSNE

RULES = {
    "floor200": lambda n, ex: max(n / ex, 200.0),
    "n/ex": lambda n, ex: n / ex,
    "auto": lambda n, ex: max(n / ex, min(200.0, n / 1.5)),
}


def data(kind: str, n: int, seed: int) -> np.ndarray:
    if kind == "randn3":
        return np.random.RandomState(seed).randn(n, 3)
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4, size=(10, 50))
    return centres[rng.integers(0, 10, n)] + rng.normal(size=(n, 50))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--data", nargs="+", default=["randn3", "blobs"])
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # perplexity lowered for small n
    print("| data | n | rule | mean KL | min | max | seeds better than floor200 |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.data:
        for n in args.sizes:
            base = None
            for rule, f in RULES.items():
                kls = []
                for s in range(args.seeds):
                    tsne = TSNE(random_state=s)
                    tsne._auto_learning_rate = lambda n, ex, f=f: f(n, ex)
                    kls.append(tsne.fit(data(kind, n, s)).kl_divergence_)
                kls = np.array(kls)
                base = kls if base is None else base
                wins = "" if rule == "floor200" else f"{int(np.sum(kls < base))}/{args.seeds}"
                print(f"| {kind} | {n} | {rule} | {kls.mean():.4f} | {kls.min():.3f} | {kls.max():.3f} | {wins} |",
                      flush=True)


if __name__ == "__main__":
    main()
