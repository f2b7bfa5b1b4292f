"""The aligned t-SNE continuation step of `repviz embed`: its time, its KL divergence and its motion, against a
full 300-iteration plain continuation (the scheme before ``neighbour_start``) from the same previous layout.

Chains: ``bench_pipeline.py``'s synthetic layers (ReLU of random projections of MNIST test digits, widths 256,
128, 64 and 10, with class structure that grows and fresh noise at every snapshot) and, with ``--logdir``, the
first ``--layers`` layers of every run of a real log directory (e.g. one written by ``repviz demo``). Each chain
starts from a full fit of its first snapshot; every later snapshot is embedded twice from the previous layout
of the reference chain:

- ``plain``: 300 iterations from the previous layout at its own scale, no tolerance, no race
  (:func:`repviz.manifold.tsne.continuation.continue_embedding` with ``neighbour_start=None``, ``tol=0``);
- ``pipeline``: the settings `repviz embed` uses (``repviz.methods.METHODS["tsne"].continuation``).

Reported per chain kind: the median and maximum wall time of a step (the fit alone, kNN and affinities
included, quality scores excluded), the iterations, the final KL of ``pipeline`` over that of ``plain`` (the
issue's bound: within 2 %), and the mean displacement (``repviz.align.mean_displacement``) of each from the
previous layout. One process, ``--threads`` numba threads; the runs of a step alternate.

``--tol`` also runs the pipeline's settings with other tolerances (e.g. ``--tol 0.02``), reported as more rows.

    python benchmarks/bench_continuation.py [--mnist PATH] [--snapshots 5] [--threads 1] [--logdir DIR --layers 3]
                                            [--tol T ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WIDTHS = (256, 128, 64, 10)


def synthetic_chains(mnist: Path, snapshots: int, probe: int = 2000):
    """(name, [snapshot arrays]) of bench_pipeline.py's layers, one chain per width."""
    rng = np.random.default_rng(0)
    with np.load(mnist, allow_pickle=False) as f:
        x, y = f["x_test"][:probe].reshape(probe, -1) / 255.0, f["y_test"][:probe]
    for width in WIDTHS:
        base = np.maximum(x @ rng.normal(size=(x.shape[1], width)) / np.sqrt(x.shape[1]), 0)
        centers = rng.normal(size=(10, width)) * base.std()
        yield f"synthetic/{width}", [
            (base + 2 * (s / 10) * centers[y] + 0.1 * base.std() * rng.normal(size=base.shape)).astype(np.float32)
            for s in range(snapshots)]


def logdir_chains(logdir: Path, layers: int, snapshots: int):
    from repviz.store import open_logdir

    log = open_logdir(logdir)
    for name in log.runs:
        run = log.run(name)
        for layer in run.layers[:layers]:
            steps = run.steps(layer)[:snapshots]
            yield f"{name}:{layer}", [np.asarray(run.activations(layer, s), np.float32) for s in steps]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mnist", type=Path, default=ROOT.parent / "shared" / "data" / "mnist.npz")
    p.add_argument("--snapshots", type=int, default=5, help="snapshots per chain (the first is a full fit)")
    p.add_argument("--threads", type=int, default=1, help="numba threads (1: a chain of `--jobs 2` on 2 cores)")
    p.add_argument("--logdir", type=Path, help="also the chains of this log directory (e.g. of `repviz demo`)")
    p.add_argument("--layers", type=int, default=3, help="layers per run of --logdir")
    p.add_argument("--tol", type=float, nargs="*", default=[], help="other tolerances of the pipeline's settings")
    args = p.parse_args()
    os.environ["NUMBA_NUM_THREADS"] = str(max(args.threads, 1))
    from repviz.align import mean_displacement
    from repviz.manifold import TSNE
    from repviz.manifold.tsne.continuation import continue_embedding
    from repviz.methods import METHODS

    cont = METHODS["tsne"].continuation
    plain = {**cont, "max_iter": 300, "tol": 0.0, "neighbour_start": None}
    params = {**TSNE().get_params(), "random_state": 0, "n_jobs": args.threads}
    chains = list(synthetic_chains(args.mnist, args.snapshots))
    if args.logdir:
        chains += list(logdir_chains(args.logdir, args.layers, args.snapshots))
    TSNE(n_jobs=args.threads, max_iter=50).fit(chains[0][1][0][:300])  # compile outside the timings
    rows = []
    for name, snaps in chains:
        Y = TSNE(random_state=0, n_jobs=args.threads).fit_transform(snaps[0])
        for step, X in enumerate(snaps[1:], 1):
            out = {}
            modes = [("plain", plain), ("pipeline", cont)] + [(f"tol={t:g}", {**cont, "tol": t}) for t in args.tol]
            for mode, continuation in modes:
                start = time.perf_counter()
                embedding, kept = continue_embedding(X, Y, params, continuation)
                Y_mode = embedding.layout.astype(np.float32)
                out[mode] = (time.perf_counter() - start, embedding, kept, Y_mode, mean_displacement(Y, Y_mode))
            tp, ep, _, Yp, mp = out["plain"]
            for mode, _ in modes[1:]:
                tc, ec, kept, _, mc = out[mode]
                ratio = ec.kl_divergence / ep.kl_divergence
                kind = name.split("/")[0] if name.startswith("synthetic") else "logdir"
                rows.append((kind if mode == "pipeline" else f"{kind} {mode}", tp, tc, ec.n_iter,
                             kept == "neighbours", ratio, mp, mc))
                print(f"{name:28s} s{step}: plain {tp:.3f} s KL {ep.kl_divergence:.4f} | {mode} {tc:.3f} s, "
                      f"{ec.n_iter} it, start {kept}, KL {ec.kl_divergence:.4f} ({ratio:.3f}x) | "
                      f"motion {mp:.3f} -> {mc:.3f}", flush=True)
            Y = Yp
    print(f"\n{args.threads} thread(s); pipeline continuation: {cont}")
    print("chains     steps | step s plain: median | pipeline: median  max | iterations median | neighbour start"
          " | KL / plain: median  max  >1.02 | motion plain -> pipeline, median")
    for kind in sorted({r[0] for r in rows}):
        sel = np.array([r[1:] for r in rows if r[0] == kind], dtype=float)
        print(f"{kind:10s} {len(sel):5d} | {np.median(sel[:, 0]):20.3f} | {np.median(sel[:, 1]):16.3f} "
              f"{sel[:, 1].max():4.2f} | {np.median(sel[:, 2]):17.0f} | {sel[:, 3].mean():15.0%} | "
              f"{np.median(sel[:, 4]):18.3f} {sel[:, 4].max():5.3f} {int((sel[:, 4] > 1.02).sum()):4d} | "
              f"{np.median(sel[:, 5]):.3f} -> {np.median(sel[:, 6]):.3f}")


if __name__ == "__main__":
    sys.exit(main())
