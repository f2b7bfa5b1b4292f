"""Cost of `repviz embed`: every layer of every run at every snapshot, cold and with a warm cache.

    python benchmarks/bench_pipeline.py [--mnist PATH] [--runs 3] [--layers 4] [--snapshots 11] [--probe 2000]
                                        [--jobs 2] [--peer-runs 1] [--methods tsne,pca]

A log directory of ``runs x layers x snapshots`` representations of ``probe`` MNIST test digits is written with
``RunWriter``: layer l of run r at snapshot s is ReLU(P x) for a fixed random projection P of the pixels (widths
256, 128, 64, 10) plus class structure that grows with s (a network learning), so chains have something to follow.
Then, each in its own process:

- ``repviz embed`` cold: t-SNE and PCA (``--methods``) of every representation, aligned over snapshots, with quality scores,
  ``--jobs`` worker processes;
- the same command again (warm cache: nothing to compute; target < 2 s);
- the peer: a plain loop of openTSNE (``n_jobs`` = all cores) and scikit-learn PCA (those of ``--methods``) over
  the representations of ``--peer-runs`` run(s), independently, with no alignment, scores or cache (what one writes by hand).
  ``--methods umap``: a loop of umap-learn fits (``random_state=0``, its defaults), against ``repviz embed
  --method umap``; with ``--rounds N`` the cold command and the peer alternate N times (median reported), and the
  mean trustworthiness of each layer's last snapshot of the first run is compared (the peer's scored outside its
  timing, as the pipeline scores: 10 neighbours, 1,000 query points).

Reported: wall time of the call and of the whole process (interpreter, imports), representations computed and
cached, and peak RSS (the process and its workers).
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

ROOT = Path(__file__).resolve().parent.parent
WIDTHS = (256, 128, 64, 10)


def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 1024


def write_logdir(path: Path, args) -> None:
    import numpy as np

    from repviz.store import RunWriter

    rng = np.random.default_rng(0)
    if Path(args.mnist).exists():
        with np.load(args.mnist, allow_pickle=False) as f:
            x, y = f["x_test"][: args.probe].reshape(args.probe, -1) / 255.0, f["y_test"][: args.probe]
    else:  # no MNIST at hand: Gaussian "pixels" with random labels
        print(f"{args.mnist} not found: using Gaussian inputs", file=sys.stderr)
        x, y = rng.random((args.probe, 784)), rng.integers(0, 10, args.probe)
    for r in range(args.runs):
        writer = RunWriter(path / f"run{r}")
        names = [f"dense_{i}" for i in range(args.layers)]
        widths = [WIDTHS[i % len(WIDTHS)] for i in range(args.layers)]
        writer.begin({"fingerprint": {"model": f"bench{r}", "probe": "mnist"},
                      "layers": {n: {"stored_shape": [args.probe, w]} for n, w in zip(names, widths)}})
        writer.write_probe(np.arange(args.probe), y)
        for name, width in zip(names, widths):
            base = np.maximum(x @ rng.normal(size=(x.shape[1], width)) / np.sqrt(x.shape[1]), 0)
            centers = rng.normal(size=(10, width)) * base.std()
            for s in range(args.snapshots):
                grown = s / max(1, args.snapshots - 1)
                drift = 0.1 * base.std() * rng.normal(size=base.shape)
                writer.write_activation(name, s, (base + 2 * grown * centers[y] + drift).astype(np.float32), epoch=s)


def worker_embed(args) -> None:
    start = time.perf_counter()
    from repviz.pipeline import embed_logdir

    result = embed_logdir(args.logdir, args.methods.split(","), jobs=args.jobs, progress=False)
    call = result.seconds
    first = min(row["run"] for row in result.rows)
    trust = [row["scores"]["trustworthiness"] for row in result.rows if row["run"] == first and row["scores"]]
    print(json.dumps({"call_s": call, "process_s": time.perf_counter() - start, "computed": result.computed,
                      "cached": result.cached, "failed": len(result.failed), "peak_mb": _peak_mb(),
                      "trust": sum(trust) / len(trust) if trust else None, "table": result.table()}))


def worker_peer(args) -> None:
    start = time.perf_counter()
    import numpy as np
    from openTSNE import TSNE
    from sklearn.decomposition import PCA

    from repviz.store import open_logdir

    if "umap" in args.methods:
        import umap
    log = open_logdir(args.logdir)
    count, t0, last = 0, time.perf_counter(), []
    for name in list(log.runs)[: args.peer_runs]:
        run = log.run(name)
        for layer in run.layers:
            for step in run.steps(layer):
                X = np.asarray(run.activations(layer, step), dtype=np.float32)
                if "tsne" in args.methods:
                    TSNE(n_jobs=os.cpu_count(), random_state=0).fit(X)
                    count += 1
                if "pca" in args.methods:
                    PCA(2, random_state=0).fit_transform(X)
                    count += 1
                if "umap" in args.methods:
                    Y = umap.UMAP(random_state=0).fit_transform(X)
                    count += 1
            if "umap" in args.methods and name == min(log.runs):
                last.append((X, Y, run.probe.labels))
    call = time.perf_counter() - t0
    from repviz.metrics import quality_scores

    trust = [quality_scores(X, Y, y, n_neighbors=10, max_exact=1000)["trustworthiness"] for X, Y, y in last]
    print(json.dumps({"call_s": call, "process_s": time.perf_counter() - start,
                      "computed": count, "cached": 0, "failed": 0, "peak_mb": _peak_mb(),
                      "trust": sum(trust) / len(trust) if trust else None}))


def tsne_steps(logdir: Path) -> str:
    """Median seconds and iterations of t-SNE's first snapshot (a full fit) and of its aligned continuation steps,
    from the sidecars the cold run wrote (each includes its quality scores)."""
    import numpy as np

    from repviz.store import open_logdir

    first, steps = [], []
    for run in open_logdir(logdir).runs.values():
        key = run.embeddings.key("tsne")
        for layer in run.layers:
            for i, step in enumerate(run.embeddings.steps(key, layer)):
                info = run.embeddings.info(key, layer, step)
                (steps if i else first).append((info["seconds"], info.get("n_iter") or 0))
    med = lambda rows, c: float(np.median([r[c] for r in rows])) if rows else float("nan")  # noqa: E731
    return (f"t-SNE per representation (scores included): first snapshot median {med(first, 0):.3f} s "
            f"({med(first, 1):.0f} iterations); continuation step median {med(steps, 0):.3f} s "
            f"({med(steps, 1):.0f} iterations, {len(steps)} steps)")


def spawn(mode: str, args, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, __file__, "--worker", mode, "--logdir", str(args.logdir), "--jobs", str(args.jobs),
           "--peer-runs", str(args.peer_runs), "--methods", args.methods]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode:
        sys.exit(f"worker {mode} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "wall_s": time.perf_counter() - start}


def bench_info(layers: int, snapshots: int) -> None:
    """`repviz info` on a run with many snapshots: record lookups must not grow quadratically."""
    import numpy as np

    from repviz.store import RunWriter

    with tempfile.TemporaryDirectory(prefix="bench_info_") as tmp:
        writer = RunWriter(Path(tmp) / "run")
        names = [f"dense_{i}" for i in range(layers)]
        writer.begin({"fingerprint": {"model": "bench", "probe": "tiny"}, "step_unit": "batch",
                      "layers": {n: {"stored_shape": [4, 2]} for n in names}})
        writer.write_probe(np.arange(4))
        tiny = np.zeros((4, 2), np.float32)
        for step in range(snapshots):
            for name in names:
                writer.write_activation(name, step, tiny)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "repviz.cli", "info", tmp], check=True, capture_output=True,
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            times.append(time.perf_counter() - start)
        print(f"repviz info, {layers} layers x {snapshots} snapshots: median of 3 processes "
              f"{sorted(times)[1]:.2f} s (target < 1 s)")


PEERS = {"tsne": "openTSNE", "pca": "sklearn PCA", "umap": "umap-learn"}


def alternate(args, cores: int) -> None:
    """The cold command and the peer loop, alternated ``args.rounds`` times (the stored embeddings removed before
    each cold run); medians and the ratio of time per embedding, and the trustworthiness of both."""
    import statistics

    runs = {"repviz embed, cold": [], f"{PEERS[args.methods]} loop": []}
    for _ in range(args.rounds):
        for folder in Path(args.logdir).glob("*/plugins/repviz/embeddings"):
            shutil.rmtree(folder)
        runs["repviz embed, cold"].append(spawn("embed", args, cores))
        if args.peer_runs:
            runs[f"{PEERS[args.methods]} loop"].append(spawn("peer", args, cores))
    print(f"{'configuration':<30} {'ms/embedding (median)':>22} {'rounds (s per call)':>28} {'trust':>7}")
    per = {}
    for name, rs in runs.items():
        if not rs:
            continue
        per[name] = statistics.median(1000 * r["call_s"] / r["computed"] for r in rs)
        calls = ", ".join(f"{r['call_s']:.1f}" for r in rs)
        print(f"{name:<30} {per[name]:>22.0f} {calls:>28} {rs[-1]['trust']:7.4f}")
    if len(per) == 2:
        a, b = per.values()
        print(f"ratio repviz / peer per embedding: {a / b:.2f}x")


def logdir_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the log directory :func:`write_logdir` builds (shared with bench_distributed.py)."""
    p.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--snapshots", type=int, default=11)
    p.add_argument("--probe", type=int, default=2000)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    logdir_arguments(p)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--peer-runs", type=int, default=1, help="runs the peer loop covers (0: no peer)")
    p.add_argument("--methods", default="tsne,pca", choices=["tsne,pca", "tsne", "pca", "umap"])
    p.add_argument("--rounds", type=int, default=1, help="cold command and peer alternated this many times")
    p.add_argument("--worker", choices=["embed", "peer"], help=argparse.SUPPRESS)
    p.add_argument("--logdir", type=Path, help="keep the log directory here (default: a temporary one)")
    p.add_argument("--warm-only", action="store_true",
                   help="only time the warm-cache command on --logdir, an already embedded log directory")
    p.add_argument("--info-snapshots", type=int, metavar="N",
                   help="only time `repviz info` on one run of --layers layers x N snapshots (target < 1 s at "
                        "4 x 3000)")
    args = p.parse_args()
    if args.worker == "embed":
        return worker_embed(args)
    if args.worker == "peer":
        return worker_peer(args)

    cores = os.cpu_count() or 1
    if args.info_snapshots:
        return bench_info(args.layers, args.info_snapshots)
    if args.warm_only:
        if args.logdir is None:
            p.error("--warm-only needs --logdir, a log directory embedded by an earlier run of this script")
        r = spawn("embed", args, cores)
        print(f"repviz embed, warm cache: call {r['call_s']:.2f} s, process {r['wall_s']:.2f} s, "
              f"{r['computed']} computed, {r['cached']} cached, peak RSS {r['peak_mb']:.0f} MB")
        return None
    temporary = args.logdir is None
    args.logdir = args.logdir or Path(tempfile.mkdtemp(prefix="bench_pipeline_"))
    try:
        write_logdir(args.logdir, args)
        n = args.runs * args.layers * args.snapshots
        methods = args.methods.split(",")
        print(f"{args.runs} runs x {args.layers} layers x {args.snapshots} snapshots x {args.probe} probes "
              f"= {n} representations; {' + '.join(methods)} = {len(methods) * n} embeddings; {cores} cores, "
              f"jobs={args.jobs}; load average {os.getloadavg()[0]:.2f}")
        if args.rounds > 1:
            return alternate(args, cores)
        rows = [("repviz embed, cold", spawn("embed", args, cores)),
                ("repviz embed, warm cache", spawn("embed", args, cores))]
        table = rows[0][1].pop("table")
        rows[1][1].pop("table")
        if args.peer_runs:
            per = args.layers * args.snapshots * len(methods) * min(args.peer_runs, args.runs)
            peer = " + ".join(PEERS[m] for m in methods)
            rows.append((f"{peer} loop ({per} fits)", spawn("peer", args, cores)))
        head = f"{'configuration':<38} {'call (s)':>9} {'process (s)':>11} {'ms/embedding':>12} " \
               f"{'computed':>8} {'cached':>6} {'peak RSS (MB)':>13}"
        print(head)
        for name, r in rows:
            per_ms = 1000 * r["call_s"] / max(1, r["computed"]) if r["computed"] else float("nan")
            print(f"{name:<38} {r['call_s']:>9.2f} {r['wall_s']:>11.2f} {per_ms:>12.0f} {r['computed']:>8} "
                  f"{r['cached']:>6} {r['peak_mb']:>13.0f}")
        if "tsne" in methods:
            print(tsne_steps(args.logdir))
        print("\nquality of the last snapshot (from the cold run):\n" + table)
    finally:
        if temporary:
            shutil.rmtree(args.logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
