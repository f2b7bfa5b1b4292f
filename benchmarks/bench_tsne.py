"""t-SNE on real MNIST: repviz vs openTSNE (FFT) vs scikit-learn (Barnes-Hut, 20,000-point subset only).

Every configuration runs in its own process with the same thread budget (NUMBA / OpenMP / BLAS threads), the
same perplexity and the same iterations. The parent scores every embedding the same way:

- KL: exact KL(P || Q) of the final embedding, with one P for all (exact kNN, k = 90, perplexity 30, computed
  here by repviz's affinity code) and the exact normalisation Z over all n² pairs (numba, O(n²));
- kNN preservation (k = 10) and 10-NN label accuracy from ``repviz.metrics`` (sampled queries above 20,000);
- wall time of the fit alone (data loading, imports and one small untimed fit before it excluded: what a fit costs
  in a process that embeds many probe sets) and peak RSS of the worker process.

It also reports repviz's time per phase, the recall of NN-descent at k = 90, and the first-call time of a
1,000-point fit with an empty numba cache (cold) and with the cache filled (warm).

``--data layer`` embeds real layer activations instead: the 128-wide ReLU layer of an MLP (784-256-128-10)
trained for 2 epochs on 20,000 MNIST training images, on the test digits (what `repviz embed` sees).
``--repeats R`` runs the libraries alternately R times per size and reports the median wall time (quality
figures are from the first run; every library is deterministic for its seed). ``--libs repviz@PATH`` also runs
the repviz of another checkout (e.g. main's) in the same alternation. Above 70,000 points the data continues
with shifted training images (see :func:`prepare`).

    python benchmarks/bench_tsne.py [--mnist PATH] [--sizes 20000 70000] [--threads 2]
    python benchmarks/bench_tsne.py --sizes 1000 2000 5000 --repeats 3 --libs repviz openTSNE [--data layer]
    python benchmarks/bench_tsne.py --sizes 2000 20000 --repeats 3 --libs repviz repviz@../main openTSNE
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PERPLEXITY = 30.0


def _thread_env(threads: int, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.update(extra or {})
    return env


def prepare(mnist: Path, out: Path, n_max: int = 70000) -> None:
    """MNIST train + test (70,000 images) / 255, PCA to 50 dimensions (float32), saved with the labels. Beyond
    70,000 points (``n_max``), the training images again, shifted one pixel right (MNIST's borders are blank),
    projected on the same components: the first 70,000 rows stay what they are."""
    with np.load(mnist, allow_pickle=False) as d:
        images = np.concatenate([d["x_train"], d["x_test"]])
        y = np.concatenate([d["y_train"], d["y_test"]])
        extra = max(0, n_max - len(images))
        if extra:
            images = np.concatenate([images, np.roll(d["x_train"][:extra], 1, axis=2)])
            y = np.concatenate([y, d["y_train"][:extra]])
    X = images.reshape(len(images), -1).astype(np.float64) / 255.0
    mean = X[:70000].mean(axis=0)
    X -= mean
    vals, vecs = np.linalg.eigh(X[:70000].T @ X[:70000])
    X = (X @ vecs[:, ::-1][:, :50]).astype(np.float32)
    np.savez(out, X=X, y=y)


def prepare_layer(mnist: Path, out: Path) -> None:
    """The 128-wide hidden layer of a small ReLU MLP trained briefly on MNIST, on the 10,000 test digits."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    with np.load(mnist, allow_pickle=False) as d:
        x_train, y_train = d["x_train"][:20000].reshape(20000, -1) / 255.0, d["y_train"][:20000]
        x_test, y_test = d["x_test"].reshape(10000, -1) / 255.0, d["y_test"]
    keras.utils.set_random_seed(0)
    inputs = keras.Input((784,))
    hidden = keras.layers.Dense(128, activation="relu")(keras.layers.Dense(256, activation="relu")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x_train, y_train, epochs=2, batch_size=128, verbose=0)
    X = keras.Model(inputs, hidden).predict(x_test, verbose=0).astype(np.float32)
    np.savez(out, X=X, y=y_test)


# --- workers (each in its own process) ----------------------------------------------------------------------

def _peak_rss_mb() -> float:
    """Peak resident memory of this process (VmHWM; unlike ru_maxrss it does not inherit the parent's peak
    across fork + exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _fit(lib: str, X: np.ndarray, threads: int, ee_iter: int, n_iter: int):
    """One fit with ``lib``: (embedding, its own KL, extra information). ``repviz@PATH``: the repviz of another
    checkout (e.g. main's, to compare a change with what it replaces in the same run)."""
    if lib.startswith("repviz@"):
        sys.path.insert(0, lib.partition("@")[2])
        lib = "repviz"
    if lib == "repviz":
        from repviz.manifold import TSNE
        est = TSNE(perplexity=PERPLEXITY, early_exaggeration_iter=ee_iter, max_iter=ee_iter + n_iter,
                   n_jobs=threads, random_state=0)
        return est.fit_transform(X), est.kl_divergence_, {"phases": est.timings_}
    if lib == "openTSNE":
        import openTSNE
        emb = openTSNE.TSNE(perplexity=PERPLEXITY, early_exaggeration_iter=ee_iter, n_iter=n_iter,
                            n_jobs=threads, random_state=0).fit(X)
        return np.asarray(emb), float(emb.kl_divergence), {}
    if lib == "scikit-learn":
        from sklearn.manifold import TSNE
        est = TSNE(perplexity=PERPLEXITY, max_iter=ee_iter + n_iter, n_jobs=threads, init="pca",
                   learning_rate="auto", method="barnes_hut", random_state=0)
        return est.fit_transform(X), float(est.kl_divergence_), {}
    raise ValueError(f"unknown library {lib!r}")


def worker(lib: str, data: Path, n: int, threads: int, ee_iter: int, n_iter: int, out: Path) -> None:
    """Time one fit of ``n`` points after a small untimed one in the same process: the import, loading compiled
    code and starting thread pools are paid once per process, and a user embeds many probe sets per process
    (the first call in a fresh process is measured on its own, see ``worker_first_call``)."""
    X = np.load(data)["X"][:n]
    _fit(lib, X[:300], threads, 50, 50)
    t0 = time.perf_counter()
    Y, kl_own, extra = _fit(lib, X, threads, ee_iter, n_iter)
    wall = time.perf_counter() - t0
    np.save(out.with_suffix(".npy"), np.ascontiguousarray(Y, dtype=np.float64))
    out.write_text(json.dumps({"wall": wall, "rss_mb": _peak_rss_mb(), "kl_own": kl_own, **extra}))


def worker_first_call(data: Path, out: Path) -> None:
    X = np.load(data)["X"][:1000]
    t0 = time.perf_counter()
    from repviz.manifold import TSNE
    t1 = time.perf_counter()
    TSNE(random_state=0, n_jobs=2).fit(X)
    out.write_text(json.dumps({"import": t1 - t0, "fit": time.perf_counter() - t1}))


def worker_recall(data: Path, n: int, out: Path) -> None:
    from repviz.neighbors import knn
    X = np.load(data)["X"][:n]
    t0 = time.perf_counter()
    idx, _ = knn(X, 90, method="nndescent", random_state=0)
    wall = time.perf_counter() - t0
    np.save(out.with_suffix(".npy"), idx)
    out.write_text(json.dumps({"wall": wall}))


# --- parent: run the workers, score the embeddings ----------------------------------------------------------

def _run(args: list[str], env: dict, tmp: Path, name: str) -> dict:
    out = tmp / f"{name}.json"
    cmd = [sys.executable, __file__, "--worker", *args, "--out", str(out)]
    subprocess.run(cmd, env=env, check=True, cwd=ROOT)
    return json.loads(out.read_text())


def _exact_kl(P, Y: np.ndarray) -> float:
    """KL(P || Q) with Q's normalisation summed exactly over all pairs (O(n²) numba)."""
    from repviz.manifold.tsne.optimize import ExactRepulsion, KLObjective
    return KLObjective(P, ExactRepulsion(1.0))(np.ascontiguousarray(Y, dtype=np.float64))[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mnist", type=Path, default=ROOT.parent / "shared" / "data" / "mnist.npz")
    ap.add_argument("--sizes", type=int, nargs="+", default=[20000, 70000])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ee-iter", type=int, default=250)
    ap.add_argument("--iter", type=int, default=500, help="iterations after early exaggeration")
    ap.add_argument("--sklearn-max-n", type=int, default=20000)
    ap.add_argument("--libs", nargs="+", default=["repviz", "openTSNE", "scikit-learn"])
    ap.add_argument("--data", choices=["mnist", "layer"], default="mnist",
                    help="MNIST PCA-50 (70,000 points) or a trained MLP's hidden layer (10,000 test digits)")
    ap.add_argument("--repeats", type=int, default=1, help="alternating runs per size; the median wall time counts")
    ap.add_argument("--worker", nargs="*")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.worker is not None:
        kind, *rest = args.worker
        if kind == "fit":
            lib, data, n, threads, ee, it = rest
            worker(lib, Path(data), int(n), int(threads), int(ee), int(it), args.out)
        elif kind == "layer":
            prepare_layer(Path(rest[0]), Path(rest[1]))
        elif kind == "first-call":
            worker_first_call(Path(rest[0]), args.out)
        else:
            worker_recall(Path(rest[0]), int(rest[1]), args.out)
        return

    from repviz.manifold.tsne.affinity import joint_affinities
    from repviz.metrics import knn_accuracy, knn_preservation
    from repviz.neighbors import knn

    env = _thread_env(args.threads)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        data = tmp / f"{args.data}.npz"
        if args.data == "layer":
            subprocess.run([sys.executable, __file__, "--worker", "layer", str(args.mnist), str(data)],
                           env=env, check=True, cwd=ROOT)
        else:
            prepare(args.mnist, data, max(args.sizes))
        X_all, y_all = np.load(data)["X"], np.load(data)["y"]
        rows, notes = [], []
        # fill the numba cache once, as any earlier use would (the cold first call is measured separately below)
        _run(["first-call", str(data)], env, tmp, "warmup")
        for n in args.sizes:
            X, y = X_all[:n], y_all[:n]
            t = time.perf_counter()
            idx, dist = knn(X, 90)
            notes.append(f"n={n}: exact kNN (k=90) for the reference P took {time.perf_counter() - t:.1f} s")
            P = joint_affinities(idx, dist, PERPLEXITY)
            rec = _run(["recall", str(data), str(n)], env, tmp, f"recall{n}")
            approx = np.load(tmp / f"recall{n}.npy")
            recall = np.mean([np.intersect1d(a, b).size for a, b in zip(idx, approx)]) / 90
            notes.append(f"n={n}: NN-descent k=90 recall {recall:.4f} vs exact, {rec['wall']:.1f} s")
            libs = [lib for lib in args.libs if lib != "scikit-learn" or n <= args.sklearn_max_n]
            walls, loads = {lib: [] for lib in libs}, []
            for repeat in range(args.repeats):  # alternate the libraries, so that load from other work is shared
                for lib in libs:
                    loads.append(os.getloadavg()[0])
                    res = _run(["fit", lib, str(data), str(n), str(args.threads), str(args.ee_iter),
                                str(args.iter)], env, tmp, f"lib{libs.index(lib)}-{n}-{repeat}")
                    walls[lib].append(res["wall"])
                    if repeat:
                        continue
                    Y = np.load(tmp / f"lib{libs.index(lib)}-{n}-{repeat}.npy")
                    res.update(n=n, lib=lib, kl=_exact_kl(P, Y), knn_pres=knn_preservation(X, Y, 10),
                               acc=knn_accuracy(Y, y, 10))
                    rows.append(res)
            notes.append(f"n={n}: 1-minute load average at the fits' starts {min(loads):.1f}-{max(loads):.1f} "
                         f"(median {np.median(loads):.1f})")
            for res in (r for r in rows if r["n"] == n):
                lib = res["lib"]
                res["wall"] = float(np.median(walls[lib]))
                if "phases" in res:
                    notes.append(f"n={n}: repviz phases: " + ", ".join(f"{k} {v:.1f} s"
                                                                        for k, v in res["phases"].items()))
                print(f"  done {lib} n={n}: {res['wall']:.1f} s", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as cache:
            cold = _run(["first-call", str(data)], _thread_env(2, {"NUMBA_CACHE_DIR": cache}), tmp, "cold")
            warm = _run(["first-call", str(data)], _thread_env(2, {"NUMBA_CACHE_DIR": cache}), tmp, "warm")
        notes.append(f"first 1,000-point fit in a new process: cold numba cache {cold['fit']:.1f} s "
                     f"(+ import repviz.manifold {cold['import']:.1f} s), warm {warm['fit']:.1f} s "
                     f"(+ import {warm['import']:.1f} s)")

    what = "MNIST (PCA-50, float32)" if args.data == "mnist" else "an MLP's 128-wide hidden layer on MNIST test digits"
    print(f"\nt-SNE on {what}, perplexity {PERPLEXITY:g}, {args.ee_iter} early-exaggeration + "
          f"{args.iter} iterations, {args.threads} threads each; wall: median of {args.repeats} alternating runs")
    print(f"{'n':>6} {'library':<13} {'wall s':>8} {'peak RSS MB':>11} {'KL exact':>9} {'KL own':>8} "
          f"{'kNN pres@10':>11} {'10-NN acc':>9}")
    for r in rows:
        print(f"{r['n']:>6} {r['lib']:<13} {r['wall']:>8.1f} {r['rss_mb']:>11.0f} {r['kl']:>9.4f} "
              f"{r['kl_own']:>8.4f} {r['knn_pres']:>11.4f} {r['acc']:>9.4f}")
    for n in args.sizes:
        peer = [r for r in rows if r["n"] == n and r["lib"] == "openTSNE"]
        for a in (r for r in rows if r["n"] == n and r["lib"].startswith("repviz") and peer):
            b = peer[0]
            print(f"{n:>6} {a['lib'] + '/openTSNE':<13} {a['wall'] / b['wall']:>8.2f}x "
                  f"{a['rss_mb'] / b['rss_mb']:>10.2f}x {a['kl'] / b['kl']:>8.3f}x {'':>8} "
                  f"{a['knn_pres'] - b['knn_pres']:>+11.4f} {a['acc'] - b['acc']:>+9.4f}")
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
