"""The first call in a new process: what the numba compiler costs each method, with an empty and a filled cache.

numba compiles a kernel at its first call in a process and, with ``cache=True``, stores the machine code where
later processes load it. A new user (and every user after an upgrade) meets the empty cache; everyone else the
filled one. For each method this script starts a fresh process on an empty ``NUMBA_CACHE_DIR`` (cold), then
another on the cache that one filled (warm), and in each times the import, the first call and a second identical
call (the computation alone, compiled code in hand). The compiler's share is first call − second call.

    python benchmarks/bench_firstcall.py                       # every method, MNIST test digits (PCA-50)
    python benchmarks/bench_firstcall.py --methods tsne isomap --threads 1

Methods and sizes: t-SNE on 1,000 points; Isomap, LLE and spectral embedding on 5,000; the meta-SNE kernels
(representation vectors, Gram matrix, classical MDS and t-SNE map) on a log directory of 3 layers × 6 snapshots ×
1,000 probes; the quality scores of a 2,000-point embedding. The table also gives how long ``repviz.warmup.warm``
(what ``repviz demo`` runs in the background while the model trains) takes on an empty cache.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT.parent / "shared" / "data" / "mnist.npz"
SIZES = {"tsne": 1000, "isomap": 5000, "lle": 5000, "spectral": 5000, "scores": 2000, "meta": 1000}


def load(path: Path, n: int):
    """The first n MNIST test digits reduced to 50 dimensions (float32), or Gaussian blobs without MNIST."""
    import numpy as np

    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            X, y = f["x_test"][:n].reshape(n, -1).astype(np.float32) / 255.0, f["y_test"][:n]
    else:
        rng = np.random.default_rng(0)
        y = rng.integers(0, 10, n)
        X = (rng.normal(size=(n, 784)) + 3 * np.eye(10, 784)[y]).astype(np.float32)
    X = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(X[:2000], full_matrices=False)
    return np.ascontiguousarray(X @ vt[:50].T, dtype=np.float32), y


def meta_logdir(root: Path, X) -> None:
    """3 layers × 6 snapshots of drifting projections of X, the input recorded as the landmark probe."""
    import numpy as np

    from repviz.store import RunWriter

    rng = np.random.default_rng(0)
    writer = RunWriter(root / "run")
    writer.begin({"fingerprint": {"model": "bench", "probe": "mnist"},
                  "layers": {f"l{i}": {"stored_shape": [X.shape[0], 64]} for i in range(3)}})
    writer.write_probe(np.arange(X.shape[0]), np.zeros(X.shape[0], dtype=np.int64))
    for i in range(3):
        W = rng.normal(size=(X.shape[1], 64)).astype(np.float32)
        for step in range(6):
            noise = 0.1 * step * rng.normal(size=W.shape).astype(np.float32)
            writer.write_activation(f"l{i}", step, np.maximum(X @ (W + noise), 0), epoch=step)


def call(method: str, X, y, scratch: Path):
    """The function a user would call first, ready to run twice."""
    import numpy as np

    if method == "meta":
        from repviz.meta import MetaSNE

        if not (scratch / "run").exists():
            meta_logdir(scratch, X)
        return lambda: [MetaSNE(embedding=e, cache=False, random_state=0).fit(scratch) for e in ("mds", "tsne")]
    if method == "scores":
        from repviz.metrics import quality_scores

        Y = X[:, :2] + 0.1 * np.random.default_rng(0).normal(size=(X.shape[0], 2)).astype(np.float32)
        return lambda: quality_scores(X, Y, y)
    from repviz import manifold

    estimator = {"tsne": lambda: manifold.TSNE(random_state=0),
                 "isomap": lambda: manifold.Isomap(n_neighbors=10),
                 "lle": lambda: manifold.LocallyLinearEmbedding(n_neighbors=10, random_state=0),
                 "spectral": lambda: manifold.SpectralEmbedding(n_neighbors=10, random_state=0)}[method]
    return lambda: estimator().fit_transform(X)


def worker(method: str, mnist: Path, out: Path) -> None:
    start = time.perf_counter()
    import repviz.manifold  # the import a user pays first, timed apart from the call
    import repviz.meta  # noqa: F401
    imported = time.perf_counter() - start
    X, y = load(mnist, SIZES[method])
    with tempfile.TemporaryDirectory() as scratch:
        run = call(method, X, y, Path(scratch))
        start = time.perf_counter()
        run()
        first = time.perf_counter() - start
        start = time.perf_counter()
        run()
        second = time.perf_counter() - start
    out.write_text(json.dumps({"import": imported, "first": first, "second": second}))


def worker_warmup(out: Path) -> None:
    from repviz.warmup import warm

    start = time.perf_counter()
    warm()
    out.write_text(json.dumps({"warmup": time.perf_counter() - start}))


def spawn(args: list[str], cache: str, threads: int, mnist: Path) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        subprocess.run([sys.executable, __file__, "--mnist", str(mnist), "--worker", *args, str(out)], env=env, check=True, cwd=ROOT)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mnist", type=Path, default=MNIST)
    parser.add_argument("--no-warmup", action="store_true", help="skip timing repviz.warmup on an empty cache")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker[0] == "warmup":
            worker_warmup(Path(args.worker[1]))
        else:
            worker(args.worker[0], args.mnist, Path(args.worker[1]))
        return

    print(f"first call in a new process, {args.threads} threads; load average {os.getloadavg()[0]:.2f}")
    print(f"{'method':<10} {'n':>6} {'cache':<6} {'import s':>9} {'first call s':>13} {'second call s':>14} "
          f"{'compile s':>10}")
    for method in args.methods:
        with tempfile.TemporaryDirectory() as cache:
            for state in ("cold", "warm"):
                r = spawn([method], cache, args.threads, args.mnist)
                print(f"{method:<10} {SIZES[method]:>6} {state:<6} {r['import']:>9.2f} {r['first']:>13.2f} "
                      f"{r['second']:>14.2f} {r['first'] - r['second']:>10.2f}", flush=True)
    if not args.no_warmup:
        with tempfile.TemporaryDirectory() as cache:
            r = spawn(["warmup"], cache, args.threads, args.mnist)
        print(f"\nrepviz.warmup.warm() on an empty cache (what `repviz demo` runs while the model trains): "
              f"{r['warmup']:.1f} s")


if __name__ == "__main__":
    main()
