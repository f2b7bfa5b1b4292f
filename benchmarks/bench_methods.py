"""The newer methods of repviz.manifold against their references, on data with known ground truth.

    FastICA          scikit-learn's FastICA (same data, same seed): Amari index of the unmixing matrix
                     (0 = every source recovered), on 5 mixed non-Gaussian sources (n = 5,000) and on
                     20 sources at n = 100,000 (the speed target: within 1.5x of scikit-learn)
    Whitening        scikit-learn's PCA(whiten=True): largest |cov(Y) - I|
    SFA              the generalised eigenproblem A w = λ B w solved directly by scipy ("hand"; MDP does not import
                     with NumPy 2): |corr| of the slowest feature with the hidden slow signal of Wiskott &
                     Sejnowski's toy (degree 2), and a 30-dimensional sequence (degree 2, 495 expanded features)
    Autoencoder      PCA and t-SNE on MNIST PCA-50 (10,000 points): trustworthiness and kNN accuracy (k = 10)
    ElasticEmbedding PCA and t-SNE on the swiss roll (2,000 points) and MNIST PCA-50 (5,000 points)

Every (problem, method) fit runs in its own process (``bench_manifold._run``) with 2 threads after a small
warm-up fit in that process; the fits of a problem alternate (ours, reference, ours, ...) ``--repeats`` times and
the median wall time is reported, with the peak RSS of the worker. Quality is the first run's (seeded: every run
gives the same). A figure of each ground truth beside the embeddings is written to ``--figure``.

    python benchmarks/bench_methods.py                   # about 15 minutes on 2 cores
    python benchmarks/bench_methods.py --problems ica-5k,sfa-toy --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_manifold import ROOT, _load, _run  # the shared helpers of the manifold benchmark

K = 10

# problem -> (data, score, [(label, library, constructor text)]); the first entry is ours
PROBLEMS = {
    "ica-5k": ("sources-5k", "amari", [
        ("FastICA", "repviz", "FastICA(5, random_state=0)"),
        ("FastICA", "sklearn", "FastICA(5, whiten='unit-variance', random_state=0)")]),
    "ica-100k": ("sources-100k", "amari", [
        ("FastICA", "repviz", "FastICA(20, random_state=0)"),
        ("FastICA", "sklearn", "FastICA(20, whiten='unit-variance', random_state=0)")]),
    "whiten-100k": ("sources-100k", "whiteness", [
        ("Whitening pca", "repviz", "Whitening(method='pca')"),
        ("Whitening zca", "repviz", "Whitening(method='zca')"),
        ("PCA whiten", "sklearn", "PCA(whiten=True)")]),
    "sfa-toy": ("wiskott", "slow", [
        ("SFA degree 2", "repviz", "SlowFeatureAnalysis(2, degree=2)"),
        ("SFA degree 2", "hand", "HandSFA(2, degree=2)")]),
    "sfa-30d": ("sequence-30d", "slow-hand", [
        ("SFA degree 2", "repviz", "SlowFeatureAnalysis(5, degree=2)"),
        ("SFA degree 2", "hand", "HandSFA(5, degree=2)")]),
    "ae-mnist-10k": ("mnist-10k", "quality", [
        ("Autoencoder", "repviz", "AutoencoderEmbedding(random_state=0)"),
        ("PCA", "repviz", "PCA(2, random_state=0)"),
        ("t-SNE", "repviz", "TSNE(random_state=0, n_jobs=2)")]),
    "ee-swiss-2k": ("swiss-2k", "quality", [
        ("ElasticEmbedding", "repviz", "ElasticEmbedding(random_state=0)"),
        ("PCA", "repviz", "PCA(2, random_state=0)"),
        ("t-SNE", "repviz", "TSNE(random_state=0, n_jobs=2)")]),
    "ee-mnist-5k": ("mnist-5k", "quality", [
        ("ElasticEmbedding", "repviz", "ElasticEmbedding(random_state=0)"),
        ("PCA", "repviz", "PCA(2, random_state=0)"),
        ("t-SNE", "repviz", "TSNE(random_state=0, n_jobs=2)")]),
}


# --------------------------------------------------------------------------------------------------------------
# data (built once in the parent, saved as .npz; the truth travels with it)
# --------------------------------------------------------------------------------------------------------------

def mixed_sources(n: int, k: int, seed: int) -> dict:
    """k independent non-Gaussian sources (Laplace, uniform, sawtooth, noisy square wave, Student-t, in turn),
    standardised, mixed by a random k × k matrix."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, n / 25, n)
    kinds = [lambda: rng.laplace(size=n), lambda: rng.uniform(-1, 1, n), lambda: (t * rng.uniform(0.5, 2)) % 1.0,
             lambda: np.sign(np.sin(rng.uniform(1, 5) * t)) + 0.1 * rng.normal(size=n),
             lambda: rng.standard_t(5, n)]
    S = np.stack([kinds[i % len(kinds)]() for i in range(k)], axis=1)
    S = (S - S.mean(axis=0)) / S.std(axis=0)
    A = rng.normal(size=(k, k))
    return {"X": (S @ A.T).astype(np.float32), "S": S.astype(np.float32), "A": A}


def wiskott_toy(n: int = 5000) -> dict:
    """x1 = sin t + cos² 11t, x2 = cos 11t: the slow sin t = x1 - x2² hidden in fast nonlinear mixtures."""
    t = np.linspace(0, 2 * np.pi, n)
    return {"X": np.c_[np.sin(t) + np.cos(11 * t) ** 2, np.cos(11 * t)], "slow": np.sin(t), "t": t}


def sequence_30d(n: int = 20_000) -> dict:
    """A 30-dimensional random mixture of sinusoids of 30 frequencies with noise (timing case for SFA)."""
    rng = np.random.default_rng(0)
    t = np.arange(n) / 100
    S = np.sin(np.outer(t, rng.uniform(0.1, 20, 30)) + rng.uniform(0, 6, 30)) + 0.1 * rng.normal(size=(n, 30))
    return {"X": S @ rng.normal(size=(30, 30))}


def make_data(name: str, mnist: str) -> dict:
    if name == "sources-5k":
        return mixed_sources(5000, 5, 0)
    if name == "sources-100k":
        return mixed_sources(100_000, 20, 0)
    if name == "wiskott":
        return wiskott_toy()
    if name == "sequence-30d":
        return sequence_30d()
    if name == "swiss-2k":
        from sklearn.datasets import make_swiss_roll

        X, t = make_swiss_roll(2000, random_state=0)
        return {"X": X.astype(np.float32), "labels": t}
    n = int(name.split("-")[1][:-1]) * 1000
    with np.load(mnist, allow_pickle=False) as f:
        y = f["y_train"][:n]
    return {"X": _load(mnist)[:n], "labels": y}


# --------------------------------------------------------------------------------------------------------------
# worker: one fit in a fresh process
# --------------------------------------------------------------------------------------------------------------

class HandSFA:
    """The reference SFA: scipy's generalised symmetric eigensolver on the covariance of the differences (A) and
    of the (expanded) data (B), smallest eigenvalues first; the same centring, scaling and expansion as ours."""

    def __init__(self, n_components: int, degree: int):
        self.n_components, self.degree = n_components, degree

    def fit_transform(self, X):
        from scipy.linalg import eigh

        from repviz.manifold.sfa import quadratic_expansion

        X = np.asarray(X, dtype=np.float64)
        Xs = (X - X.mean(axis=0)) / np.sqrt(np.mean((X - X.mean(axis=0)) ** 2))
        H = Xs if self.degree == 1 else quadratic_expansion(Xs)
        H -= H.mean(axis=0)
        dH = np.diff(H, axis=0)
        _, W = eigh(dH.T @ dH / (len(H) - 2), H.T @ H / (len(H) - 1), subset_by_index=(0, self.n_components - 1))
        return (H @ W).astype(np.float32)


def _amari(W: np.ndarray, A: np.ndarray) -> float:
    P = np.abs(W @ A)
    k = P.shape[0]
    rows = (P / P.max(axis=1, keepdims=True)).sum(axis=1) - 1
    cols = (P / P.max(axis=0, keepdims=True)).sum(axis=0) - 1
    return float((rows.sum() + cols.sum()) / (2 * k * (k - 1)))


def _score(kind: str, est, Y: np.ndarray, data) -> dict:
    X = data["X"]
    if kind == "amari":
        return {"amari": _amari(est.components_, data["A"])}
    if kind == "whiteness":
        return {"|cov-I|": float(np.abs(np.cov(np.asarray(Y, np.float64).T) - np.eye(Y.shape[1])).max())}
    if kind == "slow":
        return {"|corr|": float(abs(np.corrcoef(Y[:, 0], data["slow"])[0, 1]))}
    if kind == "slow-hand":  # the slowness of the slowest feature (mean squared difference of a unit-variance signal)
        y = (Y[:, 0] - Y[:, 0].mean()) / Y[:, 0].std()
        return {"slowness": float(np.mean(np.diff(y) ** 2))}
    from repviz.metrics import knn_accuracy, trustworthiness

    out = {"trust": trustworthiness(X, Y, K)}
    if "labels" in data and data["labels"].dtype.kind in "iu":
        out["kNN acc"] = knn_accuracy(Y, data["labels"], K)
    return out


def _worker(spec: dict) -> dict:
    with np.load(spec["data"], allow_pickle=False) as f:
        data = {k: f[k] for k in f.files}
    X = data["X"]
    if spec["lib"] == "sklearn":
        import sklearn.decomposition

        names = vars(sklearn.decomposition)
    else:
        import repviz.manifold

        names = {**vars(repviz.manifold), "HandSFA": HandSFA}
    make = lambda: eval(spec["ctor"], {}, names)  # noqa: E731 - constructor text from PROBLEMS
    warm = make()
    if "epochs" in getattr(warm, "__dict__", {}):
        warm.epochs = 1
    warm.fit_transform(X[:500])  # warm-up: imports, numba cache load, BLAS threads, Keras graph
    est = make()
    start = time.perf_counter()
    Y = np.asarray(est.fit_transform(X))
    wall = time.perf_counter() - start
    if spec.get("out"):
        np.save(spec["out"], Y.astype(np.float32))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall": wall, "rss": rss, **_score(spec["score"], est, Y, data)}


# --------------------------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------------------------

def _figure(path: str, tmp: Path, problems: list[str], datasets: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for p in problems:
        data_name, _, entries = PROBLEMS[p]
        for label, lib, _ in entries:
            f = tmp / f"{p}-{label}-{lib}.npy".replace(" ", "_")
            if f.exists():
                panels.append((p, label, lib, np.load(f), datasets[data_name]))
    if not panels:
        return
    cols = 4
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
    for ax, (p, label, lib, Y, data) in zip(axes.ravel(), panels):
        if p.startswith("ica"):
            S = data["S"]
            C = np.corrcoef(Y[:2000].T, S[:2000].T)[: Y.shape[1], Y.shape[1]:]
            j = int(np.argmax(np.abs(C[:, 1])))  # the estimate of the uniform source
            ax.plot(S[:300, 1], lw=1, label="true source")
            ax.plot(np.sign(C[j, 1]) * Y[:300, j], lw=1, ls="--", label="recovered")
            ax.legend(fontsize=7)
        elif p.startswith("sfa") and "slow" in data:
            ax.plot(data["t"], data["slow"], lw=2, label="sin t (hidden)")
            sign = np.sign(np.corrcoef(Y[:, 0], data["slow"])[0, 1])
            ax.plot(data["t"], sign * Y[:, 0] * data["slow"].std(), lw=1, ls="--", label="slowest feature")
            ax.legend(fontsize=7)
        elif p.startswith("sfa"):
            ax.plot(Y[:2000, 0], lw=1)
        elif p.startswith("whiten"):
            ax.imshow(np.cov(Y.T.astype(np.float64)), vmin=-0.1, vmax=1.1, cmap="viridis")
        else:
            c = data["labels"]
            ax.scatter(Y[:, 0], Y[:, 1], c=c, s=1, cmap="tab10" if c.dtype.kind in "iu" else "viridis")
            ax.set_xticks([])
            ax.set_yticks([])
        ax.set_title(f"{p}: {label} ({lib})", fontsize=9)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    print(f"\nfigure: {path}")


# --------------------------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    ap.add_argument("--problems", default=",".join(PROBLEMS), help="comma-separated subset of: " + ", ".join(PROBLEMS))
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs per fit; the median time is reported")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--figure", default="bench_methods.png")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(json.loads(args.worker))))
        return
    problems = [p.strip() for p in args.problems.split(",")]
    unknown = set(problems) - set(PROBLEMS)
    if unknown:
        ap.error(f"unknown problems {sorted(unknown)}; choose from {list(PROBLEMS)}")
    # Keras (TensorFlow) sizes its own thread pools: hold it to the same count as BLAS and numba
    os.environ.update(TF_NUM_INTRAOP_THREADS=str(args.threads), TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    print(f"{args.threads} threads; wall s = median of {args.repeats} alternating runs, each fit in its own process "
          f"after a warm-up fit; RSS = worker peak (MiB, includes imports: ~0.2 GiB, ~0.9 GiB with TensorFlow); "
          f"trust/kNN acc at k={K}\n")
    header = f"{'problem':<13} {'method':<17} {'library':<8} {'wall s':>8} {'RSS MiB':>8}  quality"
    print(header)
    print("-" * (len(header) + 20))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        datasets = {}
        for p in problems:
            data_name, score, entries = PROBLEMS[p]
            if data_name not in datasets:
                datasets[data_name] = make_data(data_name, args.mnist)
                np.savez(tmp / f"{data_name}.npz", **datasets[data_name])
            runs: dict[int, list[dict]] = {i: [] for i in range(len(entries))}
            for r in range(args.repeats):
                for i, (label, lib, ctor) in enumerate(entries):
                    out = str(tmp / f"{p}-{label}-{lib}.npy".replace(" ", "_")) if r == 0 else None
                    spec = {"lib": lib, "ctor": ctor, "data": str(tmp / f"{data_name}.npz"), "score": score,
                            "out": out}
                    runs[i].append(_run(spec, args.threads, args.timeout, script=__file__))
            walls = {}
            for i, (label, lib, _) in enumerate(entries):
                ok = [res for res in runs[i] if "wall" in res]
                if not ok:
                    print(f"{p:<13} {label:<17} {lib:<8} {runs[i][0].get('error', 'failed')}", flush=True)
                    continue
                walls[i] = float(np.median([res["wall"] for res in ok]))
                quality = "  ".join(f"{k} {v:.4f}" for k, v in ok[0].items() if k not in ("wall", "rss"))
                print(f"{p:<13} {label:<17} {lib:<8} {walls[i]:8.2f} {max(res['rss'] for res in ok):8.0f}  "
                      f"{quality}", flush=True)
            if 0 in walls:
                ratios = [f"{entries[i][0]} ({entries[i][1]}) {walls[0] / walls[i]:.2f}" for i in walls if i]
                if ratios:
                    print(f"{'':<13} time ratio {entries[0][0]} / " + ", ".join(ratios), flush=True)
        _figure(args.figure, tmp, problems, datasets)


if __name__ == "__main__":
    main()
