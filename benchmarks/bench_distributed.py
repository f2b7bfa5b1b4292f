"""What the Dask scheduler costs: `repviz embed` and meta-SNE on a LocalCluster against the local paths.

    python benchmarks/bench_distributed.py [--runs 3] [--layers 4] [--snapshots 11] [--probe 2000]
                                           [--meta-probes 2000] [--repeats 3] [--skip-meta]

- Embedding: the log directory of ``bench_pipeline.py`` (its builder, same options), t-SNE + PCA of every
  representation, by the local pool (``jobs=2``: 2 spawned worker processes with 1 thread each on 2 cores) and by
  a ``LocalCluster`` of 2 single-threaded worker processes (``embed_logdir(executor=DaskExecutor(client))``). Target: ratio <= 1.15.
- meta-SNE: R = 300 representations of ``--meta-probes`` probes (``bench_meta.py``'s builder), ``MetaSNE().fit``
  locally (2 threads) and with the same cluster layout (``fit(executor=DaskExecutor(client))``). Target: ratio <= 1.2.

Every measurement runs in its own process on a fresh copy of the log directory (a cold cache); the local and the
cluster runs alternate and the median of ``--repeats`` is reported. Times are of the call only: the cluster's
start-up (about a second or two, once per session) is shown apart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

WORKERS = 2  # the local pool's jobs and the cluster's worker processes


def _cluster():
    import distributed

    cluster = distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0")
    return cluster, distributed.Client(cluster)


def worker(mode: str, logdir: str) -> dict:
    out: dict = {}
    client = cluster = None
    if mode.endswith("dask"):
        t = time.perf_counter()
        cluster, client = _cluster()
        out["startup_s"] = time.perf_counter() - t
    try:
        from repviz.distributed import DaskExecutor

        executor = None if client is None else DaskExecutor(client)
        t = time.perf_counter()
        if mode.startswith("embed"):
            from repviz.pipeline import embed_logdir

            result = embed_logdir(logdir, ["tsne", "pca"], jobs=1 if client else WORKERS, progress=False,
                                  executor=executor)
            out.update(computed=result.computed, failed=len(result.failed))
        else:
            from repviz.meta import MetaSNE

            result = MetaSNE().fit(logdir, executor=executor)
            out.update(R=len(result), seconds=result.info["seconds"])
            import numpy as np

            np.save(Path(logdir).parent / f"D-{mode}.npy", result.distances)
        out["call_s"] = time.perf_counter() - t
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return out


def spawn(mode: str, template: Path, scratch: Path) -> dict:
    """One measurement in its own process, on a fresh copy of ``template``."""
    copy = scratch / f"{mode}-{time.monotonic_ns()}"
    shutil.copytree(template, copy / "logs")
    threads = "1" if mode.endswith("dask") or mode == "embed-local" else str(WORKERS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           **dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), threads)}
    try:
        out = subprocess.run([sys.executable, __file__, "--worker", mode, "--logdir", str(copy / "logs")],
                             capture_output=True, text=True, env=env, cwd=ROOT)
        if out.returncode:
            sys.exit(f"{mode} failed:\n{out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if mode.startswith("meta"):
            result["D"] = str(scratch / f"D-{mode}.npy")
            shutil.copy(copy / f"D-{mode}.npy", result["D"])
        if mode == "embed-local":
            from bench_pipeline import tsne_steps

            result["tsne"] = tsne_steps(copy / "logs")
        return result
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def compare(name: str, modes: tuple[str, str], template: Path, scratch: Path, repeats: int, target: float) -> dict:
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(repeats):
        for m in modes:  # alternate, so a burst of load from elsewhere hits both
            runs[m].append(spawn(m, template, scratch))
    med = {m: statistics.median(r["call_s"] for r in runs[m]) for m in modes}
    ratio = med[modes[1]] / med[modes[0]]
    print(f"{name:<34} {med[modes[0]]:>9.2f} {med[modes[1]]:>11.2f} {ratio:>6.2f}x {target:>7.2f}x  "
          f"(cluster start-up {statistics.median(r['startup_s'] for r in runs[modes[1]]):.1f} s, not counted)")
    return runs


def main() -> None:
    from bench_pipeline import logdir_arguments

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    logdir_arguments(p)
    p.add_argument("--meta-probes", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-meta", action="store_true")
    p.add_argument("--skip-embed", action="store_true")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--logdir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.logdir)))
        return

    import numpy as np
    from bench_meta import write_logdir as write_meta_logdir
    from bench_pipeline import write_logdir

    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {WORKERS} local "
          f"worker processes vs a LocalCluster of {WORKERS} single-threaded workers; median of {args.repeats}, "
          f"alternating")
    print(f"{'workload':<34} {'local (s)':>9} {'cluster (s)':>11} {'ratio':>7} {'target':>8}")
    with tempfile.TemporaryDirectory(prefix="bench_distributed_") as tmp:
        scratch = Path(tmp)
        if not args.skip_embed:
            write_logdir(scratch / "pipeline", args)
            n = args.runs * args.layers * args.snapshots
            runs = compare(f"embed t-SNE+PCA, {n} reps x {args.probe}", ("embed-local", "embed-dask"),
                           scratch / "pipeline", scratch, args.repeats, 1.15)
            chains = 2 * args.runs * args.layers
            print(f"  {chains} chains; {runs['embed-local'][0]['tsne']}")
            assert {r["computed"] for rs in runs.values() for r in rs} == {2 * n}
        if not args.skip_meta:
            R = write_meta_logdir(scratch / "meta", args.meta_probes)
            runs = compare(f"meta-SNE, R={R} x {args.meta_probes} probes", ("meta-local", "meta-dask"),
                           scratch / "meta", scratch, args.repeats, 1.2)
            for m, rs in runs.items():
                s = statistics.median(r["seconds"]["vectors"] for r in rs), \
                    statistics.median(r["seconds"]["distances"] for r in rs)
                print(f"  {m}: vectors {s[0]:.1f} s, distances {s[1]:.1f} s (medians)")
            D = {m: np.load(rs[-1]["D"]) for m, rs in runs.items()}
            print(f"  max |D_cluster - D_local| = {np.abs(D['meta-dask'] - D['meta-local']).max():.1e}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
