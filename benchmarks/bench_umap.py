"""UMAP over a layer's snapshots: which chain policy moves least where the representation did not move, at what
quality.

    python benchmarks/bench_umap.py LOGDIR [LOGDIR ...] [--max-chains 12]

For every chain (run x layer, snapshots in order) of each log directory (``repviz demo --quick`` writes one;
``bench_pipeline.py --logdir DIR`` another), three policies:

- ``independent``: ``UMAP(random_state=0)`` per snapshot (what ``--align none`` stores);
- ``init=previous``: snapshot 0 as above, then each snapshot from the previous layout with the pipeline's
  continuation (:data:`repviz.methods.METHODS` ``["umap"].continuation``; also ``--epochs``/``--rate`` variants);
- ``AlignedUMAP``: umap-learn's, all snapshots at once, identity relations between consecutive ones.

Reported per policy: motion (mean :func:`repviz.align.mean_displacement` between consecutive layouts, in units of
their RMS radius), the quality scores of every layout (trustworthiness, kNN kept, 10-NN accuracy;
:func:`repviz.metrics.quality_scores`, k = 10), NaN layouts, and seconds.

    python benchmarks/bench_umap.py --scores LOGDIR [--max-snapshots 8] [--sample 1000]

The quality scores of every stored layout of a snapshot (``repviz embed LOGDIR --method tsne,pca,umap`` first),
each method searching the input's neighbours itself (as before #29) against the snapshot's exact 10-NN graph found
once and shared (``quality_scores(neighbors=)``; the pipeline caches it in the store): seconds per snapshot, best of
3, the graph's search included; the scores must be the same.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def chains(logdir: str, limit: int):
    from repviz.chains import verified_activations
    from repviz.store import open_logdir

    log = open_logdir(logdir)
    for name in log.runs:
        run = log.run(name)
        labels = np.asarray(run.probe.labels)
        labels = labels.argmax(axis=1) if labels.ndim == 2 else labels.reshape(len(labels))
        for layer in run.layers:
            steps = run.steps(layer)
            if len(steps) < 2:
                continue
            Xs = [np.asarray(verified_activations(run, layer, s), np.float32).reshape(len(labels), -1) for s in steps]
            if any(not np.ptp(X, axis=0).any() for X in Xs):
                continue
            yield f"{name}/{layer}", Xs, labels
            limit -= 1
            if not limit:
                return


def independent(Xs):
    from repviz.manifold.umap import UMAP

    return [UMAP(random_state=0).fit_transform(X) for X in Xs]


def init_previous(Xs, epochs: int, rate: float):
    from repviz.manifold.umap import UMAP

    out = [UMAP(random_state=0).fit_transform(Xs[0])]
    for X in Xs[1:]:
        out.append(UMAP(random_state=0, init=out[-1], n_epochs=epochs, learning_rate=rate).fit_transform(X))
    return out


def aligned_umap(Xs):
    from umap import AlignedUMAP

    n = Xs[0].shape[0]
    relations = [{i: i for i in range(n)} for _ in Xs[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AlignedUMAP(n_neighbors=15, random_state=0).fit(Xs, relations=relations)
    return [np.asarray(Y, np.float32) for Y in model.embeddings_]


def measure(Xs, Ys, labels) -> dict:
    from repviz.align import mean_displacement
    from repviz.metrics import quality_scores

    finite = [np.isfinite(Y).all() for Y in Ys]
    scores = [quality_scores(X, Y, labels, n_neighbors=10) for X, Y, ok in zip(Xs, Ys, finite) if ok]
    motion = [mean_displacement(a, b) for a, b, ok_a, ok_b in zip(Ys, Ys[1:], finite, finite[1:]) if ok_a and ok_b]
    return {"motion": float(np.mean(motion)) if motion else float("nan"), "nan_layouts": finite.count(False),
            **{k: float(np.mean([s[k] for s in scores])) for k in ("trustworthiness", "knn_preservation",
                                                                   "knn_accuracy")}}


def _best(fn, *args, repeats: int = 3) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - start)
    return min(times), out


def _searching(X, Ys, labels, sample: int) -> list[dict]:
    """Each layout's scores searching the input's neighbours itself (as before #29)."""
    from repviz.metrics import quality_scores

    return [quality_scores(X, Y, labels, max_exact=sample) for Y in Ys]


def _sharing(X, Ys, labels, sample: int) -> list[dict]:
    """The same from one graph: found by the first scoring when it scores every point, else searched first."""
    from repviz.metrics import quality_scores
    from repviz.neighbors import knn

    graph = knn(X, 10)[0] if len(X) > sample else None
    first, near = quality_scores(X, Ys[0], labels, max_exact=sample, neighbors=graph, return_neighbors=True)
    graph = near if graph is None else graph
    return [first] + [quality_scores(X, Y, labels, max_exact=sample, neighbors=graph) for Y in Ys[1:]]


def shared_scores(logdir: str, limit: int, sample: int) -> None:
    """The ``--scores`` table (see the module docstring)."""
    from repviz.chains import verified_activations
    from repviz.store import open_logdir

    log = open_logdir(logdir)
    rows = []
    for name in log.runs:
        run = log.run(name)
        labels = np.asarray(run.probe.labels)
        labels = labels.argmax(axis=1) if labels.ndim == 2 else labels.reshape(len(labels))
        for layer in run.layers:
            for step in run.steps(layer):
                keys = [k for k in run.embeddings.method_keys() if run.embeddings.has(k, layer, step)]
                if len(keys) < 2 or len(rows) >= limit:
                    continue
                X = np.asarray(verified_activations(run, layer, step), np.float32).reshape(len(labels), -1)
                Ys = [np.asarray(run.embeddings.read(k, layer, step)) for k in keys]
                _sharing(X, Ys, labels, sample)  # compiled before timing
                alone, own = _best(_searching, X, Ys, labels, sample)
                together, shared = _best(_sharing, X, Ys, labels, sample)
                if shared != own:
                    raise AssertionError(f"{name}/{layer}/{step}: shared-graph scores differ: {shared} != {own}")
                rows.append((alone, together))
                print(f"{name}/{layer} step {step}: {len(X)} x {X.shape[1]}, {len(keys)} layouts "
                      f"({', '.join(k.split('-')[0] for k in keys)}): scores {alone * 1e3:.0f} ms each searching, "
                      f"{together * 1e3:.0f} ms sharing one graph", flush=True)
    if not rows:
        raise SystemExit(f"{logdir}: no snapshot with two stored layouts; run `repviz embed {logdir} --method "
                         f"tsne,pca,umap` first")
    a, b = (sum(r[i] for r in rows) for i in (0, 1))
    print(f"\n{len(rows)} snapshots: {a:.2f} s searching per method, {b:.2f} s with one shared graph "
          f"({b / a:.2f}x); load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("logdirs", nargs="+")
    p.add_argument("--scores", action="store_true", help="time the quality scores with and without a shared graph")
    p.add_argument("--max-snapshots", type=int, default=8, help="snapshots scored with --scores")
    p.add_argument("--sample", type=int, default=1000, help="query points of the scores (the pipeline's default)")
    p.add_argument("--max-chains", type=int, default=12, help="chains per log directory")
    p.add_argument("--epochs", default="100,200", help="continuation epochs to compare (comma-separated)")
    p.add_argument("--rate", default="0.25,1.0", help="continuation learning rates to compare (comma-separated)")
    args = p.parse_args()
    if args.scores:
        for logdir in args.logdirs:
            shared_scores(logdir, args.max_snapshots, args.sample)
        return
    from repviz.methods import METHODS

    cont = METHODS["umap"].continuation
    policies = {"independent": independent, "AlignedUMAP": aligned_umap}
    variants = {(cont["n_epochs"], cont["learning_rate"])} | {
        (int(e), float(r)) for e in args.epochs.split(",") for r in args.rate.split(",")}
    for e, r in sorted(variants):
        tag = " (pipeline)" if (e, r) == (cont["n_epochs"], cont["learning_rate"]) else ""
        policies[f"init=previous e{e} lr{r:g}{tag}"] = lambda Xs, e=e, r=r: init_previous(Xs, e, r)
    totals: dict[str, list[dict]] = {name: [] for name in policies}
    for logdir in args.logdirs:
        for chain, Xs, labels in chains(logdir, args.max_chains):
            for name, policy in policies.items():
                start = time.perf_counter()
                Ys = policy(Xs)
                row = {**measure(Xs, Ys, labels), "seconds": time.perf_counter() - start}
                totals[name].append(row)
                print(f"{chain:<28} {len(Xs)} snapshots x {len(labels)}  {name:<32} motion {row['motion']:.3f}  "
                      f"trust {row['trustworthiness']:.4f}  kept {row['knn_preservation']:.3f}  "
                      f"acc {row['knn_accuracy']:.3f}  NaN {row['nan_layouts']}  {row['seconds']:.1f} s", flush=True)
    print(f"\nmean over {len(next(iter(totals.values())))} chains")
    print(f"{'policy':<36} {'motion':>7} {'trust':>7} {'kNN kept':>9} {'10-NN acc':>10} {'NaN':>4} {'s/chain':>8}")
    for name, rows in totals.items():
        m = {k: np.mean([r[k] for r in rows]) for k in rows[0]}
        print(f"{name:<36} {m['motion']:7.3f} {m['trustworthiness']:7.4f} {m['knn_preservation']:9.3f} "
              f"{m['knn_accuracy']:10.3f} {sum(r['nan_layouts'] for r in rows):4d} {m['seconds']:8.1f}")


if __name__ == "__main__":
    main()
