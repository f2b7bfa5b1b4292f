"""Capture cost of a TimeDistributed forecaster, and how many representations each modern layer pattern records.

    python benchmarks/bench_forecaster.py [--trees after=.,before=/path/to/other/checkout] [--repeats 3]
                                          [--epochs 10] [--rows 4000] [--steps 32] [--probe 500] [--cell lstm]

The forecaster is ``LSTM(16, return_sequences=True) -> TimeDistributed(Dense(1))`` on sine series of ``--steps``
steps with the next value at every step as its regression target (mse). Each fit runs in its own process with
``PYTHONPATH`` set to one checkout of repviz (``--trees``: name=path, compared side by side): a plain fit and a fit
with the default ``ActivationLogger`` (every epoch, ``--probe`` series), alternated for ``--repeats`` rounds. The
table gives, per checkout, the median fit time of each, the overhead against the plain fit of the same round in
wall time and in the process's CPU time (the logger's work wherever it runs; medians over the rounds), the time
the logger holds the training thread (its set-up before the first epoch, the median snapshot after an epoch, the
final wait for the background writer), and the representations recorded. On a shared machine whole fits differ
by tens of percent between processes, so the logger's own times are the steadier figures. A second table counts the representations
each pattern records by default on each checkout: the forecaster, a nested model with dict outputs, a masked
self-attention block and a residual block with a squeeze-excite gate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def forecaster(args):
    import keras
    import numpy as np

    L = keras.layers
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    t = np.linspace(0, 8, args.steps + 1, dtype=np.float32)
    series = np.sin(t[None, :] * rng.uniform(0.5, 2, (args.rows, 1)) + rng.uniform(0, 6, (args.rows, 1)))
    series = (series + rng.normal(0, 0.05, series.shape)).astype(np.float32)[..., None]
    cell = {"lstm": L.LSTM, "gru": L.GRU}[args.cell]
    model = keras.Sequential([keras.Input((args.steps, 1)), cell(16, return_sequences=True, name="rnn"),
                              L.TimeDistributed(L.Dense(1), name="next")])
    model.compile(optimizer="adam", loss="mse")
    return model, series[:, :-1], series[:, 1:]


def patterns():
    """The default-layer patterns, small: name -> (model, x, y, loss)."""
    import keras
    import numpy as np

    L = keras.layers
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    out = {}
    inp = keras.Input((8,))
    h = L.Dense(6, activation="relu", name="h")(inp)
    encoder = keras.Model(inp, {"mean": L.Dense(2, name="zm")(h), "logvar": L.Dense(2, name="zl")(h)}, name="encoder")
    outer = keras.Input((8,))
    z = encoder(outer)
    nested = keras.Model(outer, L.Dense(1, name="out")(L.concatenate([z["mean"], z["logvar"]])))
    out["nested dict outputs"] = (nested, rng.normal(size=(64, 8)).astype(np.float32),
                                  rng.normal(size=(64, 1)).astype(np.float32), "mse")
    tokens = rng.integers(1, 20, size=(64, 16)).astype(np.int32)
    tokens[:, 10:] = 0
    inp = keras.Input((16,), dtype="int32")
    emb = L.Embedding(20, 16, mask_zero=True, name="emb")(inp)
    att = L.MultiHeadAttention(4, 8, name="mha")(emb, emb)
    attention = keras.Model(inp, L.Dense(2, activation="softmax", name="out")(L.GlobalAveragePooling1D()(att)))
    out["masked self-attention"] = (attention, tokens, rng.integers(0, 2, 64), "sparse_categorical_crossentropy")
    inp = keras.Input((8, 8, 3))
    h = L.Conv2D(8, 3, padding="same", activation="relu", name="stem")(inp)
    r = L.Conv2D(8, 3, padding="same", name="c1")(h)
    gate = L.Dense(8, activation="sigmoid", name="se")(L.GlobalAveragePooling2D(keepdims=True)(r))
    h = L.Add(name="add0")([h, L.Multiply(name="se_mul")([r, gate])])
    h = L.ReLU(name="relu1")(L.Add(name="add1")([h, L.Conv2D(8, 3, padding="same", name="c2")(h)]))
    residual = keras.Model(inp, L.Dense(2, activation="softmax", name="out")(L.GlobalAveragePooling2D()(h)))
    out["residual + squeeze-excite"] = (residual, rng.random((64, 8, 8, 3), dtype=np.float32),
                                        rng.integers(0, 2, 64), "sparse_categorical_crossentropy")
    return out


def worker(args) -> dict:
    """One measurement in this process: a fit of the forecaster (plain or logged), or the pattern counts."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import repviz

    root = Path(tempfile.mkdtemp(prefix="bench_forecaster_"))
    if args.worker == "patterns":
        counts = {}
        for name, (model, x, y, loss) in patterns().items():
            model.compile(optimizer="adam", loss=loss)
            logger = repviz.ActivationLogger(root / "p", probe=(x[:32], y[:32]))
            model.fit(x, y, epochs=1, batch_size=32, verbose=0, callbacks=[logger])
            counts[name] = len(repviz.open_logdir(root).run(logger.log_dir.name).layers)
            root = Path(tempfile.mkdtemp(prefix="bench_forecaster_"))
        return {"counts": counts}
    model, x, y = forecaster(args)
    callbacks, hooks = [], {}
    if args.worker == "logged":
        logger = repviz.ActivationLogger(root / "run", probe=(x[:args.probe], y[:args.probe]))
        for hook in ("on_train_begin", "on_epoch_begin", "on_epoch_end", "on_train_end"):
            setattr(logger, hook, timed(getattr(logger, hook), hooks.setdefault(hook, [])))
        callbacks = [logger]
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(x, y, epochs=args.epochs, batch_size=64, verbose=0, callbacks=callbacks)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    layers = len(repviz.open_logdir(root).run("run").layers) if callbacks else None
    times = {}
    if callbacks:
        times = {"setup": hooks["on_train_begin"][0] + hooks["on_epoch_begin"][0],
                 "snapshot": statistics.median(hooks["on_epoch_end"]), "end": hooks["on_train_end"][0]}
    return {"seconds": seconds, "cpu": cpu, "layers": layers, **times}


def timed(hook, seconds: list):
    """``hook``, appending the seconds each call takes to ``seconds``."""
    def call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return hook(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - start)
    return call


def spawn(tree: Path, mode: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    argv = [sys.executable, __file__, "--worker", mode, "--epochs", str(args.epochs), "--rows", str(args.rows),
            "--steps", str(args.steps), "--probe", str(args.probe), "--cell", args.cell]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_forecaster: the {mode} fit with {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trees", default=f"this={ROOT}", help="name=path of each repviz checkout, comma-separated")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--rows", type=int, default=4000)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--probe", type=int, default=500)
    p.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    p.add_argument("--worker", choices=("plain", "logged", "patterns"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    trees = {name: Path(path).resolve() for name, path in trees.items()}
    fits: dict[tuple[str, str], list[dict]] = {}
    print(f"{args.cell.upper()} forecaster, {args.rows} series of {args.steps} steps, {args.epochs} epochs, probe "
          f"{args.probe}, load {os.getloadavg()[0]:.1f}", flush=True)
    for _ in range(args.repeats):
        for name, tree in trees.items():
            for mode in ("plain", "logged"):
                fits.setdefault((name, mode), []).append(spawn(tree, mode, args))
    print(f"{'checkout':<10} {'plain fit s':>11} {'logged fit s':>12} {'wall':>7} {'CPU':>7} {'set-up s':>9} "
          f"{'snapshot s':>10} {'end wait s':>10} {'representations':>15}")
    for name in trees:
        plain, logged = fits[(name, "plain")], fits[(name, "logged")]
        wall, cpu = (statistics.median(b[k] / a[k] - 1 for a, b in zip(plain, logged)) for k in ("seconds", "cpu"))
        setup, snapshot, end = (statistics.median(f[k] for f in logged) for k in ("setup", "snapshot", "end"))
        print(f"{name:<10} {statistics.median(f['seconds'] for f in plain):>11.2f} "
              f"{statistics.median(f['seconds'] for f in logged):>12.2f} {100 * wall:>6.1f}% {100 * cpu:>6.1f}% "
              f"{setup:>9.3f} {snapshot:>10.3f} {end:>10.3f} {logged[0]['layers']:>15}")
    counts = {name: spawn(tree, "patterns", args)["counts"] for name, tree in trees.items()}
    print(f"\n{'pattern':<28}" + "".join(f" {name:>10}" for name in trees))
    for pattern in next(iter(counts.values())):
        print(f"{pattern:<28}" + "".join(f" {counts[name][pattern]:>10}" for name in trees))
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
