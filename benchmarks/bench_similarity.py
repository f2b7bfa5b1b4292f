"""Layer-similarity matrices at scale: two runs × 12 layers at 10,000 probes, the full debiased linear CKA matrix.

Writes 24 float32 activation arrays (.npy, read back as memmaps) shaped like two training runs: layer l of run r =
ReLU([class structure that strengthens with depth, noise] @ W_rl), widths geometric from 64 to 4,096. Then, each
configuration in its own process with ``--threads`` BLAS threads, alternated over ``--rounds`` rounds (median):

- ``cka_matrix(reps)`` (24 × 24, debiased, ``batch_size=None``: minibatches of 1,024 above 2,048 probes) at
  ``--probes``;
- the same at each of ``--compare`` probe counts (2,000: exact, one batch; 4,000: minibatches) against a
  straightforward numpy implementation (each layer's n × n float64 Gram matrix U-centred and kept, then every
  pair's inner product: exact), which at 10,000 probes would hold 24 × 800 MB;
- the minibatch estimate's deviation from the exact value: at 4,000 probes on all pairs (from numpy), and at
  ``--probes`` on the pairs of the narrow layers (widths <= 619), whose exact value the feature-space form
  gives cheaply.

Peak memory: the process's peak RSS (ru_maxrss, which counts the memmapped activation pages the kernel may drop)
and its peak anonymous memory (RssAnon, sampled at every progress event: the arrays the computation allocates).

    python benchmarks/bench_similarity.py [--probes 10000] [--compare 2000 4000] [--threads 2] [--rounds 3]
                                          [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RUNS = 2
WIDTHS = tuple(int(w) for w in np.geomspace(64, 4096, 12).round())


def layer_paths(root: Path) -> list[str]:
    """Run 0's layers in model order, then run 1's."""
    return [str(root / f"run{r}_layer{i}.npy") for r in range(RUNS) for i in range(len(WIDTHS))]


def write_layers(path: Path, n: int) -> None:
    rng = np.random.default_rng(0)
    latent = np.eye(10)[rng.integers(0, 10, size=n)] * 3 + rng.normal(size=(n, 10))
    for r in range(RUNS):
        for i, w in enumerate(WIDTHS):
            W = np.random.default_rng(100 * r + i).normal(size=(42, w)) / np.sqrt(42)
            noise = np.random.default_rng(1000 * r + i).normal(size=(n, 32)) * (1.1 - i / len(WIDTHS))
            Z = np.hstack([latent * (0.3 + i / len(WIDTHS)), noise])
            np.save(path / f"run{r}_layer{i}.npy", np.maximum(Z @ W, 0).astype(np.float32))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """User + system time of this process (all threads): under a shared machine's load, the work done."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class AnonPeak:
    """A progress callback that samples the process's anonymous resident memory (Linux /proc)."""

    def __init__(self):
        self.peak = 0.0

    def __call__(self, *event) -> None:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    self.peak = max(self.peak, int(line.split()[1]) / 1024)


def load(paths: list[str], n: int) -> list[np.ndarray]:
    return [np.load(p, mmap_mode="r")[:n] for p in paths]


def worker_repviz(paths: list[str], n: int, out: str) -> dict:
    from repviz.similarity.measures import cka_matrix

    anon = AnonPeak()
    t, cpu = time.perf_counter(), cpu_seconds()
    M = cka_matrix(load(paths, n), debiased=True, progress=anon)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - cpu
    np.save(out, M)
    return {"total": wall, "cpu": cpu, "rss": peak_rss_mb(), "anon": anon.peak}


def worker_numpy(paths: list[str], n: int, out: str) -> dict:
    """The straightforward way: each layer's n × n float64 Gram matrix, U-centred and kept; all pairs after."""
    anon = AnonPeak()
    t, cpu = time.perf_counter(), cpu_seconds()
    grams = []
    for X in load(paths, n):
        X = np.asarray(X, dtype=np.float64)
        X = X - X.mean(axis=0)
        K = X @ X.T
        np.fill_diagonal(K, 0)
        means = K.sum(axis=0) / (n - 2)
        means -= means.sum() / (2 * (n - 1))
        K -= means[:, None]
        K -= means[None, :]
        np.fill_diagonal(K, 0)
        grams.append(K)
        anon()
    R = len(grams)
    H = np.empty((R, R))
    for i in range(R):
        for j in range(i, R):
            H[i, j] = H[j, i] = np.sum(grams[i] * grams[j])
    d = np.sqrt(np.diag(H))
    M = H / np.outer(d, d)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - cpu
    anon()
    np.save(out, M)
    return {"total": wall, "cpu": cpu, "rss": peak_rss_mb(), "anon": anon.peak}


def worker_exact_narrow(paths: list[str], n: int, out: str) -> dict:
    """Exact debiased CKA between the layers of width <= 619 (the feature-space form: O(n·p·q) per pair)."""
    from repviz.similarity.measures import linear_cka

    reps = load(paths, n)
    keep = [k for k in range(len(reps)) if reps[k].shape[1] <= 619]
    M = np.full((len(reps), len(reps)), np.nan)
    t = time.perf_counter()
    for a in keep:
        for b in keep:
            if b >= a:
                M[a, b] = M[b, a] = linear_cka(reps[a], reps[b], debiased=True)
    np.save(out, M)
    return {"total": time.perf_counter() - t, "cpu": 0.0, "rss": peak_rss_mb(), "anon": 0.0}


WORKERS = {"repviz": worker_repviz, "numpy": worker_numpy, "exact-narrow": worker_exact_narrow}


def spawn(kind: str, root: Path, n: int, threads: int, tag: str) -> dict:
    env = {**os.environ, **{v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                       "NUMBA_NUM_THREADS")}}
    out = root / f"M_{kind}_{n}_{tag}.npy"
    args = [sys.executable, __file__, "--worker", kind, str(n), str(out), str(root)]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"worker {kind} n={n} failed:\n{done.stderr}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "M": np.load(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=10_000)
    ap.add_argument("--compare", type=int, nargs="*", default=[2000, 4000],
                    help="probe counts of the comparison with plain numpy (default 2000 4000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", help="write the activations here and keep them (default: a temporary dir)")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, n, out, root = args.worker
        print(json.dumps(WORKERS[kind](layer_paths(Path(root)), int(n), out)))
        return

    from repviz.similarity.options import AUTO_BATCH, AUTO_EXACT_PROBES

    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-similarity-"))
    try:
        if not Path(layer_paths(root)[-1]).exists():
            root.mkdir(parents=True, exist_ok=True)
            write_layers(root, args.probes)
        load_before = f"{os.getloadavg()[0]:.1f}"
        spawn("repviz", root, 100, args.threads, "warm")  # imports and first-call costs out of the timings
        order = [("repviz", args.probes)] + [(kind, n) for n in args.compare for kind in ("repviz", "numpy")]
        runs: dict[tuple[str, int], list[dict]] = {c: [] for c in order}
        for r in range(args.rounds):  # alternated: a change in machine load hits every configuration alike
            for kind, n in order if r % 2 == 0 else order[::-1]:
                runs[kind, n].append(spawn(kind, root, n, args.threads, str(r)))
        exact_narrow = spawn("exact-narrow", root, args.probes, args.threads, "x")["M"]

        def med(config, field):
            return float(np.median([x[field] for x in runs[config]]))

        def label(kind, n):
            if kind == "numpy":
                return "numpy: n x n U-centred Gram per layer, pairwise sums"
            how = "exact: one batch" if n <= AUTO_EXACT_PROBES else f"minibatches of {AUTO_BATCH:,}"
            return f"repviz cka_matrix, batch_size=None ({how})"

        print(f"similarity benchmark: {RUNS} runs x {len(WIDTHS)} layers (widths {WIDTHS[0]}-{WIDTHS[-1]}, "
              f"sum {RUNS * sum(WIDTHS):,}), float32 .npy memmaps, debiased linear CKA, 24 x 24 matrix, "
              f"{args.threads} threads, median of {args.rounds} alternated rounds")
        print(f"{'configuration':<62} {'probes':>7} {'wall s':>7} {'CPU s':>6} {'peak RSS MB':>12} "
              f"{'peak anon MB':>13}")
        for kind, n in order:
            c = (kind, n)
            print(f"{label(kind, n):<62} {n:>7} {med(c, 'total'):>7.2f} {med(c, 'cpu'):>6.1f} {med(c, 'rss'):>12.0f} "
                  f"{med(c, 'anon'):>13.0f}")
        print(f"(load average before: {load_before}, after: {os.getloadavg()[0]:.1f}; CPU s counts every thread)")
        for n in args.compare:
            ours, theirs = ("repviz", n), ("numpy", n)
            print(f"at {n} probes: numpy / repviz wall time {med(theirs, 'total') / med(ours, 'total'):.1f}x, "
                  f"peak anon {med(theirs, 'anon') / med(ours, 'anon'):.1f}x; max |repviz - exact| = "
                  f"{np.abs(runs[ours][0]['M'] - runs[theirs][0]['M']).max():.1e} over all pairs")
        narrow = ~np.isnan(exact_narrow)
        k = int(narrow.diagonal().sum())
        print(f"at {args.probes} probes: max |repviz - exact| = "
              f"{np.abs(runs['repviz', args.probes][0]['M'] - exact_narrow)[narrow].max():.1e} over the "
              f"{k * (k - 1) // 2} pairs of the {k} layers of width <= 619 (exact by the feature-space form); numpy "
              f"would keep {RUNS * len(WIDTHS)} Gram matrices of {args.probes**2 * 8 / 1e6:.0f} MB "
              f"({RUNS * len(WIDTHS) * args.probes**2 * 8 / 1e9:.1f} GB): not run")
        print(f"targets: {args.probes} probes in <= 10 s on 2 cores, <= 1,000 MB")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
