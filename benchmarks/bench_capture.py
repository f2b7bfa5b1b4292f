"""Cost of ActivationLogger during model.fit: the fit's wall time with the logger against a plain fit.

    python benchmarks/bench_capture.py [--mnist PATH] [--epochs 3] [--probe 2000] [--models mlp,cnn]
                                       [--modes "every epoch,every 50 batches,every 50 batches paired"]
                                       [--repeats 3] [--rows 60000] [--backend tensorflow,jax,torch]

An MLP (784-256-128-10) and a small CNN (conv16-pool-conv32-pool-dense128-dense10) train on the 60,000 MNIST
training digits, each fit in its own process: a plain fit, a fit capturing every epoch (the default layers,
2,000 probe digits) and one capturing every 50 batches, alternated for ``--repeats`` rounds (medians reported).
Per configuration: the fit's wall time and its overhead against the plain fit of the same round (what a user
feels: set-up, snapshots and the final wait for the background writer included), the time spent inside the
logger on the training thread, the median snapshot, the process's CPU time during the fit against the plain
fit's (the logger's work wherever it runs), peak RSS during the fit (the data loading's peak is reset away) over
the plain fit's, the bytes written per snapshot and the load average when the row started (the
machine may be shared). Targets: every epoch <= 3% of the fit time (MLP and CNN), every 50 batches on the CNN
<= 10%, <= 12 MB per CNN snapshot, peak RSS <= plain + 150 MB. The mode "every epoch + tsne" also embeds each
snapshot with t-SNE while training runs (``embed="tsne"``, a background process at the lowest priority).

On a shared machine whole fits a minute apart can differ by more than the logger costs. The mode "every 50
batches paired" (run by default) measures the same overhead within one fit: it captures every 100 batches and compares each
50-batch window that starts with a snapshot (whose background write falls in it too) with the windows either
side, which share the load of the moment; the set-up and final wait are added as their share of the plain fit.

The modes "every 50 batches split" and "every 50 batches on 1000 probes split" (issue #30) split the logger's cost
into the probe's own forward pass and the rest (copies, sketches, checksums, writes, records): one fit snapshots
every 100 batches, alternately the whole snapshot and its forward pass alone (the logger's own capture function on
the same probe batches, outputs discarded), and each cycle of four 50-batch windows compares the two with the
windows without. A table prints, per setting, the logger's share, the forward pass's measured share and its
analytic FLOP share (probe rows x forward FLOPs per snapshot over 3 x forward FLOPs x the samples trained on), and
the logger's cost beyond the forward pass; per-epoch snapshots of the whole probe are projected from the seconds
per snapshot of the same windows.

``--backend`` (comma-separated, default tensorflow) runs the same table on each Keras backend, each fit in a process
with ``KERAS_BACKEND`` set, and ends with one line per backend and model: the overhead against the plain fit on the
same backend (every epoch; every 50 batches, paired). A backend whose package is not installed is said so in one line
and skipped.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
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
         "every 50 batches paired": {"batch_freq": 100}, "every epoch + tsne": {"freq": 1, "embed": "tsne"},
         # issue #30: batch snapshots of a 1,000-point subset of the probe (the first snapshot holds the whole probe)
         "every 50 batches on 1000 probes": {"batch_freq": 50, "batch_probe": 1000},
         "every 50 batches on 1000 probes paired": {"batch_freq": 100, "batch_probe": 1000},
         # issue #30: the logger's cost split into the probe's own forward pass and the rest (see split_ratios)
         "every 50 batches split": {"batch_freq": 100, "split": True},
         "every 50 batches on 1000 probes split": {"batch_freq": 100, "batch_probe": 1000, "split": True}}
WINDOW = 50  # "paired": 50-batch windows, one with a snapshot at its start (every 100 batches), the next without
BACKENDS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}  # Keras backend -> the module it imports


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
    x, y = x[: args.rows], y[: args.rows]
    x = x[..., None].astype(np.float32)
    x /= 255
    probe = ((xt[: args.probe, ..., None] / 255.0).astype(np.float32), yt[: args.probe])
    keras.utils.set_random_seed(0)
    model = build(args.model)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks, logdir = [], tempfile.mkdtemp(prefix="bench_capture_")
    spent = {"setup": 0.0, "snapshots": [], "writer": 0.0, "windows": [], "forward": [],
             "flops": forward_flops(model), "rows": len(x)}
    options = {k: v for k, v in MODES[args.mode].items() if k != "split"}
    if _paired(args.mode):  # first in the list: a window's clock starts before its snapshot
        callbacks.append(_Windows(spent["windows"], spent.setdefault("cpu_windows", [])))
    if options:
        logger = ActivationLogger(os.path.join(logdir, "run"), probe=probe, **options)
        begin, snapshot, end = logger.on_train_begin, logger._snapshot, logger.on_train_end

        def timed_begin(*a, **k):  # planning: dry run, manifest, probe, projection matrices
            t = time.perf_counter()
            begin(*a, **k)
            spent["setup"] = time.perf_counter() - t

        def timed_snapshot(*a, **k):  # time spent inside snapshots, measured where it happens
            t = time.perf_counter()
            snapshot(*a, **k)
            spent["snapshots"].append(time.perf_counter() - t)

        def timed_end(*a, **k):  # waits for the snapshots still being written
            t = time.perf_counter()
            end(*a, **k)
            spent["setup"] += time.perf_counter() - t

        logger.on_train_begin, logger._snapshot, logger.on_train_end = timed_begin, timed_snapshot, timed_end
        if MODES[args.mode].get("split"):
            logger._snapshot = _alternate_forward_only(logger, timed_snapshot, spent["forward"])
        # the writer thread's CPU time (it also reduces each snapshot's last probe batch)
        part = next((p for p in ("_finish_snapshot", "_write_snapshot") if hasattr(logger, p)), None)
        if part:
            write = getattr(logger, part)

            def timed_write(*a, **k):
                t = time.thread_time()
                try:
                    return write(*a, **k)
                finally:
                    spent["writer"] += time.thread_time() - t

            setattr(logger, part, timed_write)
        callbacks.append(logger)
    rss_start = _reset_peak_rss()
    t0, c0 = time.perf_counter(), time.process_time()
    history = model.fit(x, y, epochs=args.epochs, batch_size=128, verbose=0, callbacks=callbacks)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if MODES[args.mode].get("embed"):  # the live embedding finishing after the fit (not part of the fit time)
        t = time.perf_counter()
        callbacks[0].wait_embeddings()
        spent["embed_lag"] = time.perf_counter() - t
    disk = sum(p.stat().st_size for p in Path(logdir).rglob("*") if p.is_file())
    snapshot_bytes = sum(p.stat().st_size for d in ("activations", "predictions")
                         for p in Path(logdir).glob(f"run/plugins/repviz/{d}/**/*") if p.is_file())
    shutil.rmtree(logdir)
    versions = f"keras {keras.version()}, {keras.backend.backend()} " + importlib.import_module(
        BACKENDS[keras.backend.backend()]).__version__
    print(json.dumps({"versions": versions, "wall": wall, "cpu": cpu, **spent, "disk": disk, "snapshot_bytes": snapshot_bytes,
                      "rss": _peak_rss(), "rss_start": rss_start, "accuracy": history.history["accuracy"][-1]}))


def _alternate_forward_only(logger, snapshot, times: list):
    """``logger._snapshot`` for the split modes: snapshot 0 and every second batch snapshot after it as they are,
    the others only the probe's forward pass that a snapshot runs (the same compiled capture function on the
    same probe batches, its outputs discarded once computed; their time appended to ``times``). With a snapshot
    every 100 batches, the 50-batch windows 1, 5, 9, ... start with a whole snapshot and 3, 7, 11, ... with its
    forward pass alone."""
    import keras

    calls = itertools.count()

    def split(step, rows=None, **info):
        call = next(calls)
        if call % 2 or call == 0:
            return snapshot(step, rows, **info)
        t = time.perf_counter()
        for batch, _ in logger._probe_batches(rows):
            if keras.backend.backend() == "jax":  # asynchronous dispatch: wait for the values
                import jax

                jax.block_until_ready(batch)
        times.append(time.perf_counter() - t)
        return None

    return split


def forward_flops(model) -> int:
    """Floating-point operations of one sample's forward pass, from the layers' shapes: 2 per multiply-add of the
    Dense and convolution layers (pooling, activations and biases, under 1 % here, left out)."""
    import keras

    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Dense):
            total += 2 * int(layer.kernel.shape[0]) * int(layer.units)
        elif isinstance(layer, keras.layers.Conv2D):
            kernel = np.prod(layer.kernel.shape)  # kh x kw x channels in x filters
            total += 2 * int(np.prod(layer.output.shape[1:-1])) * int(kernel)
    return total


def _paired(mode: str) -> bool:
    """Whether ``mode`` times 50-batch windows (every 100 batches: a snapshot window, then one without)."""
    return mode.endswith(("paired", "split"))


def _Windows(times: list, cpu_times: list):
    """A callback appending the wall time of every ``WINDOW`` consecutive training batches to ``times``, and the
    process's CPU time in it (every thread: training, the writer, the sketch) to ``cpu_times``."""
    import keras

    class Windows(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.batches, self.start, self.cpu = 0, None, None

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1
            if self.batches % WINDOW == 0:
                now, cpu = time.perf_counter(), time.process_time()
                if self.start is not None:
                    times.append(now - self.start)
                    cpu_times.append(cpu - self.cpu)
                self.start, self.cpu = now, cpu

    return Windows()


def paired_ratios(windows: list[float]) -> np.ndarray:
    """For each window that starts with a snapshot (odd ones: the snapshot comes every second window), its time
    against the mean of the windows either side, minus 1. Adjacent windows share the machine's load of the
    moment, which whole fits a minute apart do not."""
    w = np.asarray(windows)
    on = np.arange(1, len(w) - 1, 2)
    return w[on] / ((w[on - 1] + w[on + 1]) / 2) - 1


def paired_overhead(windows: list[float]) -> float:
    """The median of :func:`paired_ratios` of one fit."""
    return float(np.median(paired_ratios(windows)))


def split_ratios(windows: list[float]) -> dict[str, np.ndarray]:
    """For the split modes: per cycle of four 50-batch windows (a whole snapshot at the start of window
    ``c = 1, 5, 9, ...``, the forward pass alone at the start of ``c + 2``, none in ``c - 1``, ``c + 1``, ``c + 3``),
    the base (the mean of the three windows without) and, against it, the whole snapshot's window, the forward
    pass's window, and their difference: what the logger adds beyond the forward pass, in the same fit and the
    same few seconds. Also that difference and the forward pass's excess in seconds."""
    w = np.asarray(windows)
    c = np.arange(1, len(w) - 3, 4)
    base = (w[c - 1] + w[c + 1] + w[c + 3]) / 3
    return {"logger": w[c] / base - 1, "forward": w[c + 2] / base - 1, "beyond": (w[c] - w[c + 2]) / base,
            "beyond_s": w[c] - w[c + 2], "forward_s": w[c + 2] - base}


def report_split(model: str, mode: str, rounds: list[dict], args) -> list[str]:
    """The rows of the split table for ``mode`` (paired medians over the rounds, the set-up and final wait added as
    their share of the round's plain fit); with the whole probe also per-epoch snapshots, projected from the
    per-snapshot seconds of the same windows."""
    rs = [r[mode] for r in rounds]
    each = [split_ratios(r["windows"]) for r in rs]
    fixed = [r["setup"] / p["plain"]["wall"] for r, p in zip(rs, rounds)]
    plain = float(np.median([p["plain"]["wall"] for p in rounds]))
    load = float(np.median([r["load"] for r in rs]))
    probe = MODES[mode].get("batch_probe", args.probe)
    batches = 2 * WINDOW  # a paired window stands for a snapshot every WINDOW batches
    flops = rs[0]["flops"]
    share = probe * flops / (3 * flops * WINDOW * 128)
    # the cycles of all rounds pooled, each with its round's set-up and final wait added to the logger's windows
    pooled = {k: np.concatenate([e[k] + (f if k in ("logger", "beyond") else 0) for e, f in zip(each, fixed)])
              for k in each[0]}
    med = {k: float(np.median(v)) for k, v in pooled.items()}
    q1, q3 = np.percentile(pooled["beyond"], [25, 75])
    # the same on the process's CPU time per window: the work each adds, which a busy machine's other load slows
    # down but does not add to (training keeps both cores busy, so on a quiet machine CPU share ~ wall share)
    cpu = {k: np.concatenate([split_ratios(r["cpu_windows"])[k] for r in rs]) for k in ("logger", "forward", "beyond")}
    c1, c3 = np.percentile(cpu["beyond"], [25, 75])
    snap = float(np.median([np.median(r["snapshots"][1:]) for r in rs]))
    fwd_s = float(np.median([np.median(r["forward"]) for r in rs]))
    rows = [f"{model:<5} {f'every {batches // 2} batches, {probe} probes':<30} {plain:7.1f} {100 * med['logger']:+7.1f}% "
            f"{100 * med['forward']:+8.1f}% {100 * share:8.1f}% {100 * med['beyond']:+8.1f}% "
            f"{100 * np.median(cpu['logger']):+7.1f}% {100 * np.median(cpu['forward']):+7.1f}% "
            f"{100 * np.median(cpu['beyond']):+7.1f}% {load:5.2f}  (beyond: quartiles {100 * q1:+.1f} to "
            f"{100 * q3:+.1f}%, CPU {100 * c1:+.1f} to {100 * c3:+.1f}%, {len(pooled['beyond'])} cycles; on the "
            f"training thread a snapshot {snap:.3f} s, its forward pass {fwd_s:.3f} s; forward FLOPs "
            f"{probe * flops / 1e9:.2f} G per snapshot, training {3 * flops * WINDOW * 128 / 1e9:.2f} G per {WINDOW} "
            f"batches)"]
    if "batch_probe" not in MODES[mode]:  # the whole probe: what each per-epoch snapshot runs
        snaps = args.epochs + 1
        epoch_share = snaps * args.probe / (3 * rs[0]["rows"] * args.epochs)
        fwd = np.concatenate([snaps * e["forward_s"] / p["plain"]["wall"] for e, p in zip(each, rounds)])
        beyond_e = np.concatenate([(snaps * e["beyond_s"] + r["setup"]) / p["plain"]["wall"]
                                   for e, r, p in zip(each, rs, rounds)])
        # CPU: the extra CPU seconds of the snapshots (and of the set-up and final wait, counted as wall) against
        # the plain fit's CPU time
        cpu_e = [split_ratios(r["cpu_windows"]) for r in rs]
        fwd_c = np.concatenate([snaps * e["forward_s"] / p["plain"]["cpu"] for e, p in zip(cpu_e, rounds)])
        beyond_c = np.concatenate([(snaps * e["beyond_s"] + r["setup"]) / p["plain"]["cpu"]
                                   for e, r, p in zip(cpu_e, rs, rounds)])
        rows.append(f"{model:<5} {f'every epoch, {args.probe} probes':<30} {plain:7.1f} {'-':>8} "
                    f"{100 * float(np.median(fwd)):+8.1f}% {100 * epoch_share:8.1f}% {100 * float(np.median(beyond_e)):+8.1f}% "
                    f"{'-':>8} {100 * np.median(fwd_c):+7.1f}% {100 * np.median(beyond_c):+7.1f}% {load:5.2f}  "
                    f"({snaps} snapshots x the seconds per snapshot above, + set-up and final wait)")
    return rows


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


def missing_backend(backend: str) -> str | None:
    """Why ``backend`` cannot be measured here (its package is not installed), or None."""
    if importlib.util.find_spec(BACKENDS[backend]) is None:
        return f"{backend}: not measured, the {BACKENDS[backend]} package is not installed (pip install {backend})"
    return None


def run_one(model: str, mode: str, args, backend: str = "tensorflow") -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2",
           "CUDA_VISIBLE_DEVICES": "",
           "OMP_NUM_THREADS": str(args.threads), "TF_NUM_INTRAOP_THREADS": str(args.threads),
           "TF_NUM_INTEROP_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, __file__, "--worker", "--model", model, "--mode", mode, "--mnist", args.mnist,
           "--epochs", str(args.epochs), "--probe", str(args.probe), "--rows", str(args.rows)]
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{model}/{mode} on {backend} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": load}


def report(model: str, modes: list[str], rounds: list[dict]) -> dict[str, float]:
    """Print the rows of ``model``'s table from its ``rounds``; returns each mode's overhead against the plain fit
    (the paired estimate for the paired mode)."""
    overheads = {}
    for mode in modes:
        rs = [r[mode] for r in rounds]
        wall = float(np.median([r["wall"] for r in rs]))
        load = float(np.median([r["load"] for r in rs]))
        rss = float(np.median([r["rss"] for r in rs]))
        if mode == "plain":
            base_rss = rss
            print(f"{model:<5} {mode:<17} {wall:7.1f} {'-':>9} {'-':>5} {'-':>13} {'-':>6} {'-':>9} {'-':>7} {'-':>7} "
                  f"{rss / 2**20:4.0f} MB {'-':>10} {load:5.2f}", flush=True)
            continue
        # vs plain: median over rounds of (fit with logger / the same round's plain fit) - 1
        each = [r[mode]["wall"] / r["plain"]["wall"] - 1 for r in rounds]
        vs = overheads[mode] = float(np.median(each))
        snaps = len(rs[0]["snapshots"])
        spent = float(np.median([r["setup"] + sum(r["snapshots"]) for r in rs]))
        setup = float(np.median([r["setup"] for r in rs]))
        steady = float(np.median([np.median(r["snapshots"][1:] or r["snapshots"]) for r in rs]))
        per_disk = float(np.median([r["snapshot_bytes"] / max(len(r["snapshots"]), 1) for r in rs]))
        writer = float(np.median([r["writer"] for r in rs]))
        cpu = float(np.median([r[mode]["cpu"] / r["plain"]["cpu"] - 1 for r in rounds]))
        print(f"{model:<5} {mode:<17} {wall:7.1f} {100 * vs:+8.1f}% {snaps:>5} "
              f"{spent:6.2f} s {100 * spent / wall:4.1f}% {setup:5.2f}s {steady:7.3f} s {writer:5.2f}s {100 * cpu:+6.1f}% "
              f"{(rss - base_rss) / 2**20:+4.0f} MB {per_disk / 2**20:7.1f} MB {load:5.2f}", flush=True)
        print(f"      vs plain in each round: {', '.join(f'{100 * v:+.1f}%' for v in each)}")
        if mode.endswith("paired"):  # (the split modes have their own table)
            pairs = [paired_overhead(r[mode]["windows"]) for r in rounds]
            fixed = [r[mode]["setup"] / r["plain"]["wall"] for r in rounds]
            total = overheads[mode] = float(np.median([p + f for p, f in zip(pairs, fixed)]))
            pooled = np.concatenate([paired_ratios(r[mode]["windows"]) for r in rounds])
            q1, q2, q3 = np.percentile(pooled, [25, 50, 75])
            print(f"      every {WINDOW} batches, paired: a {WINDOW}-batch window starting with a snapshot against "
                  f"the windows either side, {', '.join(f'{100 * v:+.1f}%' for v in pairs)}; with the set-up "
                  f"and final wait: {100 * total:+.1f}% (median); all {len(pooled)} windows of the rounds: median "
                  f"{100 * q2:+.1f}% (quartiles {100 * q1:+.1f}% to {100 * q3:+.1f}%)")
        for r in rs:
            if "embed_lag" in r:
                print(f"      (live t-SNE: every snapshot embedded {r['embed_lag']:.1f} s after the fit ended)")
    return overheads


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--probe", type=int, default=2000)
    p.add_argument("--rows", type=int, default=60000, help="training rows (fewer for a quick look)")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--modes", default="every epoch,every 50 batches,every 50 batches paired",
                   help=f"comma-separated capture modes besides the plain fit, from {list(MODES)[1:]}")
    p.add_argument("--repeats", type=int, default=3, help="rounds of alternating runs; medians are reported")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--backend", default="tensorflow",
                   help=f"comma-separated Keras backends to measure, from {list(BACKENDS)}")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    modes = ["plain", *(m.strip() for m in args.modes.split(",") if m.strip())]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown --modes {unknown}; choose from {list(MODES)[1:]}")
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    if any(b not in BACKENDS for b in backends):
        raise SystemExit(f"unknown --backend {args.backend!r}; choose from {list(BACKENDS)}")
    print(f"MNIST {args.rows:,} train, batch 128, {args.epochs} epochs, probe {args.probe}, {args.threads} threads, "
          f"one process per run, median of {args.repeats} alternating runs")
    summary = []
    for backend in backends:
        why = missing_backend(backend)
        if why:
            print(why, flush=True)
            continue
        print(f"\nKERAS_BACKEND={backend}")
        head = (f"{'model':<5} {'capture':<17} {'fit s':>7} {'vs plain':>9} {'snap':>5} {'in logger':>13} "
                f"{'fixed':>6} {'per snap':>9} {'writer':>7} {'cpu':>7} {'+RSS':>7} {'disk/snap':>10} {'load':>5}")
        print(head + "\n" + "-" * len(head))
        for model in args.models.split(","):
            rounds = []
            for _ in range(args.repeats):  # alternate the modes, so a burst of load hits them alike
                rounds.append({mode: run_one(model, mode, args, backend) for mode in modes})
            print(f"({rounds[0]['plain']['versions']})")
            summary.append((backend, model, report(model, modes, rounds)))
            split = [row for mode in modes if MODES[mode].get("split") for row in report_split(model, mode, rounds, args)]
            if split:
                head = (f"{'model':<5} {'snapshots':<30} {'plain s':>7} {'logger':>8} {'forward':>9} {'FLOPs':>9} "
                        f"{'beyond':>9} {'CPU:log':>8} {'fwd':>8} {'beyond':>8} {'load':>5}")
                print("\nthe logger's cost split (paired: medians over the cycles of all rounds):\n" + head + "\n" + "-" * len(head))
                print("\n".join(split))
    if len(summary) > 1:
        print("\nper backend, against the plain fit on the same backend (medians):")
        for backend, model, overheads in summary:
            print(f"  {backend:<10} {model:<5} " + ", ".join(f"{mode} {100 * v:+.1f}%" for mode, v in overheads.items()))
    print("fit s: median fit wall time; vs plain: the fit's overhead against the plain fit of the same round "
          "(targets: every epoch <= 3%, every 50 batches on the CNN <= 10%); paired: the same overhead for every 50 batches measured within one fit, between neighbouring 50-batch windows (one fit captures every 100 batches), so that the machine's load changing between fits does not decide it; in logger: set-up, all snapshots and the final wait "
          "measured on the training thread, and its share of the fit; fixed: set-up and final wait; per snap: median snapshot after the first; writer: CPU time of the background "
          "writer thread (0 when writes happen inside the snapshots); cpu: the process's CPU time during the fit against "
          "the plain fit's (the work the logger adds, wherever it runs); "
          "+RSS: peak RSS during the fit over the plain fit's (target <= 150 MB); disk/snap: activations and "
          "predictions written per snapshot (target <= 12 MB for the CNN); load: 1-min load average at start")


if __name__ == "__main__":
    main()
