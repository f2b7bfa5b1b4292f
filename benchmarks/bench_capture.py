"""Cost of ActivationLogger during model.fit: wall time, overhead and peak memory, with and without capture.

    python benchmarks/bench_capture.py [--mnist PATH] [--epochs 3] [--probe 2000] [--models mlp,cnn]

An MLP (784-256-128-10) and a small CNN (conv16-pool-conv32-pool-dense128-dense10) train on the 60,000 MNIST
training digits, each configuration in its own process: a plain fit, a fit capturing every epoch (the default
layers, 2,000 probe digits), and one capturing every 50 batches. Reported per configuration: fit wall time, the
time spent inside snapshots and its share of the fit, the overhead against the plain fit, peak RSS during the
fit (the data loading's peak is reset away) and its excess over the plain fit, the number of snapshots and the
bytes written. Targets: epoch-end capture <= 3% of
fit time; peak RSS <= plain + 150 MB whatever the number of snapshots. The last configuration also embeds each
snapshot with t-SNE while training runs (``embed="tsne"``, a background process at the lowest priority): its
"vs plain" is what that costs the fit, and the time the embedding needs after the fit ends is printed below.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODES = {"plain": {}, "every epoch": {"freq": 1}, "every 50 batches": {"batch_freq": 50},
         "every epoch, tsne": {"freq": 1, "embed": "tsne"}}


def build(name: str):
    import keras

    L = keras.layers
    if name == "mlp":
        return keras.Sequential([keras.Input((28, 28, 1)), L.Flatten(), L.Dense(256, activation="relu"),
                                 L.Dense(128, activation="relu"), L.Dense(10, activation="softmax")])
    return keras.Sequential([keras.Input((28, 28, 1)), L.Conv2D(16, 3, activation="relu"), L.MaxPooling2D(),
                             L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(), L.Flatten(),
                             L.Dense(128, activation="relu"), L.Dense(10, activation="softmax")])


def worker(args) -> None:
    import keras

    from repviz.capture import ActivationLogger

    with np.load(args.mnist, allow_pickle=False) as f:
        x, y, xt, yt = (f[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    x = x[..., None].astype(np.float32)
    x /= 255
    probe = ((xt[: args.probe, ..., None] / 255.0).astype(np.float32), yt[: args.probe])
    keras.utils.set_random_seed(0)
    model = build(args.model)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks, logdir, spent = [], tempfile.mkdtemp(prefix="bench_capture_"), {"setup": 0.0, "snapshots": []}
    if MODES[args.mode]:
        logger = ActivationLogger(os.path.join(logdir, "run"), probe=probe, **MODES[args.mode])
        begin, snapshot = logger.on_train_begin, logger._snapshot

        def timed_begin(*a, **k):  # planning: dry run, manifest, probe, projection matrices
            t = time.perf_counter()
            begin(*a, **k)
            spent["setup"] = time.perf_counter() - t

        def timed_snapshot(*a, **k):  # time spent inside snapshots, measured where it happens
            t = time.perf_counter()
            snapshot(*a, **k)
            spent["snapshots"].append(time.perf_counter() - t)

        logger.on_train_begin, logger._snapshot = timed_begin, timed_snapshot
        callbacks.append(logger)
    rss_start = _reset_peak_rss()
    t0 = time.perf_counter()
    history = model.fit(x, y, epochs=args.epochs, batch_size=128, verbose=0, callbacks=callbacks)
    wall = time.perf_counter() - t0
    if MODES[args.mode].get("embed"):  # the live embedding finishing after the fit (not part of the fit time)
        t = time.perf_counter()
        callbacks[0].wait_embeddings()
        spent["embed_lag"] = time.perf_counter() - t
    disk = sum(p.stat().st_size for p in Path(logdir).rglob("*") if p.is_file())
    shutil.rmtree(logdir)
    print(json.dumps({"wall": wall, **spent, "disk": disk,
                      "rss": _peak_rss(), "rss_start": rss_start, "accuracy": history.history["accuracy"][-1]}))


def _reset_peak_rss() -> int:
    """Reset the process's peak RSS (Linux ``clear_refs`` 5), so the peak measured is the fit's, not the data
    loading's; returns the current RSS in bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_bytes("VmRSS")


def _peak_rss() -> int:
    return _status_bytes("VmHWM")


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_one(model: str, mode: str, args) -> dict:
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           "OMP_NUM_THREADS": str(args.threads), "TF_NUM_INTRAOP_THREADS": str(args.threads),
           "TF_NUM_INTEROP_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, __file__, "--worker", "--model", model, "--mode", mode, "--mnist", args.mnist,
           "--epochs", str(args.epochs), "--probe", str(args.probe)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{model}/{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--probe", type=int, default=2000)
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    print(f"MNIST 60,000 train, batch 128, {args.epochs} epochs, probe {args.probe}, {args.threads} threads, "
          f"one process per row")
    head = (f"{'model':<5} {'capture':<17} {'fit s':>7} {'snap':>5} {'in logger':>13} {'per snap':>9} "
            f"{'epoch-end':>9} {'vs plain':>9} {'peak RSS':>9} {'+RSS':>7} {'disk':>7}")
    print(head + "\n" + "-" * len(head))
    for model in args.models.split(","):
        base = None
        for mode in MODES:
            r = run_one(model, mode, args)
            base = base or r
            snaps = r.get("snapshots", [])
            if snaps:
                total = r["setup"] + sum(snaps)
                share = f"{total:.2f} s {100 * total / r['wall']:4.1f}%"
                steady = float(np.median(snaps[1:] or snaps))  # without the first (compiles the capture)
                per_epoch = (r["wall"] - total) / args.epochs  # the fit's own epoch time
                epoch_end = f"{100 * steady / per_epoch:.1f}%" if mode == "every epoch" else "-"
                per = f"{steady:.2f} s"
            else:
                share = per = epoch_end = "-"
            vs = f"{100 * (r['wall'] / base['wall'] - 1):+.1f}%" if r is not base else "-"
            plus = f"{(r['rss'] - base['rss']) / 2**20:+.0f} MB" if r is not base else "-"
            print(f"{model:<5} {mode:<17} {r['wall']:7.1f} {len(snaps) or '-':>5} {share:>13} {per:>9} "
                  f"{epoch_end:>9} {vs:>9} {r['rss'] / 2**20:6.0f} MB {plus:>7} {r['disk'] / 2**20:4.0f} MB",
                  flush=True)
            if "embed_lag" in r:
                print(f"      (live t-SNE: every snapshot embedded {r['embed_lag']:.1f} s after the fit ended)")
    print("in logger: setup + all snapshots, share of fit time; per snap: median snapshot after the first; "
          "epoch-end: that over the mean epoch time (target <= 3%); vs plain: fit time against the plain fit "
          "(noisy on a shared machine); +RSS: peak RSS during fit over the plain fit's (target <= 150 MB)")


if __name__ == "__main__":
    main()
