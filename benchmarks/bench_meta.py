"""meta-SNE at scale: R = 300 representations of n = 2,000 probes, and 10 more added to the cached result.

Writes a synthetic log directory shaped like real training logs (5 runs x 6 layers x 10 snapshots, widths 64-512,
ReLU features of 10 classes that sharpen over training), then times `MetaSNE().fit(logdir)` (building the
vectors, the R x R distances, the classical-MDS map), adding 10 snapshots to the cached result, and a
straightforward numpy implementation (all vectors in RAM as float64, one V @ V.T) on R = 120, where it fits in
memory (1.9 GB). Every configuration runs in its own process with 2 threads; peak RSS is that process's.

    python benchmarks/bench_meta.py [--probes 2000] [--threads 2] [--numpy-runs 2] [--keep DIR]

``--scale N`` measures instead what issue #30 asks of a large probe: ``repviz meta --include-input`` (robustness on,
as the command's default) over 16 representations (4 layers of widths 64-512 x snapshots 0, 1, 2, 4, written
through RunWriter) plus the input (28 x 28 thumbnails) at N probes, in its own process with ``--threads``
threads: wall time and peak RSS. ``--batch-probe K`` adds 12 batch snapshots of a seeded K-point subset, as
``ActivationLogger(batch_probe=K)`` records them.

``--matrices R`` measures instead the client's memory for R representations of 12 probes (so the R x R float64
matrices are all there is): the peak that tracemalloc traces while the distances and the map are computed from
banked vectors, in units of one R x R float64 matrix, with and without the robustness check.
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

RUNS, LAYERS, SNAPSHOTS = 5, (512, 384, 256, 192, 128, 64), 10


def write_logdir(path: Path, n: int, runs=RUNS, snapshots=SNAPSHOTS, layers=LAYERS, prefix="run", seed=0) -> int:
    """Synthetic runs: layer l of run r at snapshot s = ReLU([t * class structure, (1 - t) * noise] @ W_l)."""
    from repviz.store import RunWriter

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n)
    latent = np.eye(10)[labels] * 3 + rng.normal(size=(n, 10))
    count = 0
    for r in range(runs):
        writer = RunWriter(path / f"{prefix}{r}")
        writer.begin({"fingerprint": {"model": f"{prefix}{r}", "probe": "synthetic"},
                      "layers": {f"dense_{i}": {"stored_shape": [n, w]} for i, w in enumerate(layers)}})
        writer.write_probe(np.arange(n), labels)
        noise = {i: np.random.default_rng(100 * r + i).normal(size=(n, 32)) for i in range(len(layers))}
        for s in range(snapshots):
            t = s / max(1, snapshots - 1)
            for i, w in enumerate(layers):
                W = np.random.default_rng(1000 * r + i).normal(size=(42, w)) / np.sqrt(42)
                Z = np.hstack([t * latent, (1 - t + 0.1) * noise[i] + 0.02 * s * rng.normal(size=(n, 32))])
                writer.write_activation(f"dense_{i}", s, np.maximum(Z @ W, 0).astype(np.float32), epoch=s)
                count += 1
    return count


SCALE_LAYERS, SCALE_STEPS = (512, 256, 128, 64), (0, 1, 2, 4)


def write_scale_logdir(path: Path, n: int, batch_probe: int | None = None, seed: int = 0) -> int:
    """One run of 4 layers x 4 snapshots at ``n`` probes with 28 x 28 thumbnails (and, with ``batch_probe``, 12
    batch snapshots of a fixed subset of that many points); written one array at a time."""
    from repviz.store import RunWriter
    from repviz.subsets import stratified_subset

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n)
    latent = (np.eye(10)[labels] * 3 + rng.normal(size=(n, 10))).astype(np.float32)
    writer = RunWriter(path / "run0")
    writer.begin({"fingerprint": {"model": "scale", "probe": "synthetic"},
                  "layers": {f"dense_{i}": {"stored_shape": [n, w]} for i, w in enumerate(SCALE_LAYERS)}})
    thumbs = np.clip(latent @ rng.normal(size=(10, 784)).astype(np.float32) * 20 + 128, 0, 255)
    writer.write_probe(np.arange(n), labels, thumbs.astype(np.uint8).reshape(n, 28, 28))
    del thumbs
    rows = None if batch_probe is None else stratified_subset(n, batch_probe, labels, random_state=seed)
    steps = list(SCALE_STEPS) + ([] if rows is None else [100 + 10 * k for k in range(12)])
    count = 0
    for s in steps:
        t = min(1.0, s / max(SCALE_STEPS)) if s < 100 else (s - 100) / 110
        for i, w in enumerate(SCALE_LAYERS):
            W = np.random.default_rng(1000 + i).normal(size=(42, w)).astype(np.float32) / np.float32(np.sqrt(42))
            noise = np.random.default_rng(100 + i).normal(size=(n, 32)).astype(np.float32)
            Z = np.hstack([t * latent, (1.1 - t) * noise])
            X = np.maximum(Z @ W, 0)
            if s < 100:
                writer.write_activation(f"dense_{i}", s, X, epoch=s)
            else:
                writer.write_activation(f"dense_{i}", s, X[rows], rows=rows, batch=s)
            count += 1
    return count


def worker_cli(logdir: str) -> dict:
    """``repviz meta LOGDIR --include-input`` in this process: wall time, CPU time (all threads), peak RSS and what
    it printed."""
    import contextlib
    import io

    from repviz.cli import main as cli

    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = cli(["meta", logdir, "--include-input", "--no-progress"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"code": code, "total": time.perf_counter() - t, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": peak_rss_mb(), "printed": out.getvalue()}


def scale(n: int, threads: int, root: Path, batch_probe: int | None) -> None:
    path = root / f"scale-{n}"
    shutil.rmtree(path, ignore_errors=True)
    count = write_scale_logdir(path, n, batch_probe)
    write_scale_logdir(root / "warm", 200)
    spawn(["cli", str(root / "warm")], threads)  # numba compiles into its on-disk cache once
    r = spawn(["cli", str(path)], threads)
    print(f"repviz meta --include-input: {count} representations + input at {n:,} probes"
          f"{'' if batch_probe is None else f' ({12 * len(SCALE_LAYERS)} of them batch snapshots of {batch_probe:,})'}"
          f", widths {min(SCALE_LAYERS)}-{max(SCALE_LAYERS)}, {threads} threads, robustness on")
    print(r["printed"].rstrip())
    print(f"wall {r['total']:.1f} s, CPU {r['cpu']:.1f} s (load average {os.getloadavg()[0]:.1f} at the end), peak "
          f"RSS {r['rss']:.0f} MB (exit {r['code']}); target <= 60 s, <= 2048 MB")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_repviz(logdir: str) -> dict:
    from repviz.meta import MetaSNE

    t = time.perf_counter()
    result = MetaSNE().fit(logdir)
    wall = time.perf_counter() - t
    np.save(Path(logdir) / "D_repviz.npy", result.distances)
    return {"R": len(result), **{k: v for k, v in result.info["seconds"].items() if k != "total"},
            "total": wall, "rss": peak_rss_mb(), "explained": result.explained_variance}


def worker_numpy(logdir: str) -> dict:
    """The straightforward way: float64 distances per representation, every vector in RAM, one V @ V.T."""
    from repviz import open_logdir

    t0 = time.perf_counter()
    logdir_ = open_logdir(logdir)
    # the order MetaSNE uses: runs, then layers in model order, then steps
    keys = [(run, layer, s) for run, r in logdir_.runs.items() for layer in r.layers for s in r.steps(layer)]
    V = None
    for k, (run, layer, s) in enumerate(keys):
        X = np.asarray(logdir_.run(run).activations(layer, s), dtype=np.float64)
        X = X - X.mean(0)
        sq = np.einsum("ij,ij->i", X, X)
        D = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0))
        v = D[np.triu_indices(len(X), 1)]
        if V is None:
            V = np.empty((len(keys), len(v)))
        V[k] = v / np.linalg.norm(v)
    t1 = time.perf_counter()
    G = V @ V.T
    chord = np.sqrt(np.maximum(2 - 2 * G, 0))
    np.fill_diagonal(chord, 0)
    t2 = time.perf_counter()
    np.save(Path(logdir) / "D_numpy.npy", chord)
    return {"R": len(keys), "vectors": t1 - t0, "distances": t2 - t1, "embedding": 0.0, "total": t2 - t0,
            "rss": peak_rss_mb()}


def worker_matrices(logdir: str, robustness: bool) -> dict:
    """Peak traced memory of MetaSNE.fit over banked vectors with the R x R part from scratch, in R x R float64."""
    import tracemalloc

    from repviz.meta import MetaSNE

    MetaSNE(robustness=robustness).fit(logdir)  # the vectors, banked
    for chords in Path(logdir).rglob("chord2.npy"):
        chords.unlink()
    tracemalloc.start()
    t = time.perf_counter()
    result = MetaSNE(robustness=robustness).fit(logdir)
    peak = tracemalloc.get_traced_memory()[1]
    return {"R": len(result), "matrices": peak / (8.0 * len(result) ** 2), "peak_mb": peak / 2**20,
            "total": time.perf_counter() - t}


def matrices(R: int, threads: int, root: Path) -> None:
    snapshots, layers = 10, (4,) * 10
    write_logdir(root / "matrices", 12, runs=max(1, R // (snapshots * len(layers))), snapshots=snapshots,
                 layers=layers)
    print(f"meta-SNE client memory: R x R float64 matrices at the peak (tracemalloc), 12 probes, {threads} threads")
    for robustness in (True, False):
        r = spawn(["matrices", str(root / "matrices"), str(int(robustness))], threads)
        print(f"R = {r['R']}, robustness={robustness}: {r['matrices']:.2f} matrices ({r['peak_mb']:.0f} MB), "
              f"{r['total']:.1f} s")


def spawn(args: list[str], threads: int) -> dict:
    env = {**os.environ, **{v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                       "NUMBA_NUM_THREADS")}}
    out = subprocess.run([sys.executable, __file__, "--worker", *args], env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"worker {args} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--numpy-runs", type=int, default=2,
                    help="runs (60 representations each) of the comparison with plain numpy (default 2)")
    ap.add_argument("--keep", help="build the log directories here and keep them (default: a temporary dir)")
    ap.add_argument("--matrices", type=int, metavar="R", help="measure the client's R x R matrices instead")
    ap.add_argument("--scale", type=int, metavar="N", help="measure repviz meta at N probes instead (issue #30)")
    ap.add_argument("--batch-probe", type=int, metavar="K", help="with --scale: add batch snapshots of K points")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, logdir, *flag = args.worker
        res = (worker_matrices(logdir, bool(int(flag[0]))) if kind == "matrices" else
               worker_cli(logdir) if kind == "cli" else
               worker_repviz(logdir) if kind == "repviz" else worker_numpy(logdir))
        print(json.dumps(res))
        return

    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-meta-"))
    if args.matrices or args.scale:
        try:
            if args.scale:
                scale(args.scale, args.threads, root, args.batch_probe)
            else:
                matrices(args.matrices, args.threads, root)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        return
    try:
        for d in ("big", "sub", "warm"):
            shutil.rmtree(root / d, ignore_errors=True)
        n_big = write_logdir(root / "big", args.probes)
        n_sub = write_logdir(root / "sub", args.probes, runs=args.numpy_runs) if args.numpy_runs else 0
        write_logdir(root / "warm", 100, runs=1, snapshots=2)
        spawn(["repviz", str(root / "warm")], args.threads)  # numba compiles into its on-disk cache once
        rows = [("repviz, from scratch", spawn(["repviz", str(root / "big")], args.threads))]
        n_new = write_logdir(root / "big", args.probes, runs=1, snapshots=2, layers=LAYERS[:5], prefix="late", seed=1)
        rows.append((f"repviz, +{n_new} to the cached R={n_big}", spawn(["repviz", str(root / "big")], args.threads)))
        if n_sub:  # the plain numpy comparison, on a smaller R that fits in memory
            rows.append(("repviz, from scratch", spawn(["repviz", str(root / "sub")], args.threads)))
            rows.append(("numpy float64, all vectors in RAM", spawn(["numpy", str(root / "sub")], args.threads)))
        print(f"meta-SNE benchmark: n = {args.probes} probes ({args.probes * (args.probes - 1) // 2:,} pairs per "
              f"vector), widths {min(LAYERS)}-{max(LAYERS)}, {args.threads} threads, classical MDS, "
              f"transform dist, metric chord")
        print(f"{'configuration':<38} {'R':>4} {'vectors s':>10} {'distances s':>12} {'embedding s':>12} "
              f"{'total s':>8} {'peak RSS MB':>12}")
        for name, r in rows:
            print(f"{name:<38} {r['R']:>4} {r['vectors']:>10.2f} {r['distances']:>12.2f} {r['embedding']:>12.2f} "
                  f"{r['total']:>8.2f} {r['rss']:>12.0f}")
        if n_sub:
            D1, D2 = np.load(root / "sub" / "D_repviz.npy"), np.load(root / "sub" / "D_numpy.npy")
            ratio = rows[3][1]["total"] / rows[2][1]["total"]
            print(f"numpy / repviz wall time at R={n_sub}: {ratio:.2f}x (peak RSS "
                  f"{rows[3][1]['rss'] / rows[2][1]['rss']:.1f}x); max |D_repviz - D_numpy| = {np.abs(D1 - D2).max():.1e}")
        print(f"targets: R={n_big} in <= 20 s and <= 1500 MB; adding {n_new} in <= 2 s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
