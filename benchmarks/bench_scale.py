"""Issue #30's scale benchmark: the bench CNN on MNIST with 50,000 probes, from capture to the tab.

    python benchmarks/bench_scale.py [--probes 50000] [--quick] [--rows 60000] [--jobs 1] [--peer-sample 4]
                                     [--batch-epochs 1] [--skip-browser] [--logdir DIR [--reuse]] [--tsne-memory]

The CNN of ``bench_capture.py`` (conv16-pool-conv32-pool-dense128-dense10) trains 4 epochs on the 60,000 MNIST
training digits; ``ActivationLogger`` records 4 layers (conv1, conv2, dense, probs) of ``--probes`` digits (the
10,000 test digits, then training digits) at epochs 0, 1, 2 and 4: run "epochs", 16 representations. Where
``ActivationLogger`` takes ``batch_probe``, a second run "batch50" snapshots every 50 batches a seeded 1,000-digit
subset for ``--batch-epochs`` epochs. Then ``repviz embed --method tsne,pca`` of "epochs", ``repviz meta
--include-input`` (16 representations + input), ``repviz similarity`` (the layers at the last snapshot, and one
layer over its snapshots), ``repviz info``, and the tab in headless Chromium with software WebGL (choosing an
embedding to its first complete draw, animation frames between snapshots, the 4 x 4 grid).

Each stage runs in its own process; its peak RSS is that of its largest process (``getrusage(RUSAGE_CHILDREN)``
in a process that only waits for it; for the tab, the TensorBoard server's own peak); disk is what the stage
added to the log directory.

Peers, in the same run: openTSNE (``n_jobs`` = all cores, ``random_state=0``) plus scikit-learn PCA fit
independently on ``--peer-sample`` K of the 16 representations, half before ``repviz embed`` and half after (so
a change in the machine's load hits both); the loop of 16 is extrapolated from their mean (said in the table;
K = 16 fits them all, ~20+ minutes at 50,000 points on 2 cores). The sample is taken from the continuation
snapshots (last snapshot of each layer first), so each peer fit also pairs with a continuation step of ours on
the same array (its sidecar seconds: read, fit and scores). Targets: continuation step <= 0.15x a full openTSNE
fit; ``repviz embed`` <= 0.2x the loop; peak RSS <= 2 GB; meta-SNE <= 60 s.

``--tsne-memory`` measures instead one t-SNE fit, one continuation step (the pipeline's settings) and one
openTSNE fit of a ``--probes`` x 64 array (ReLU of a seeded projection of the digits), in one process: the peak
RSS each adds over what was resident before it, and the repulsion method each used.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("conv1", "conv2", "dense", "probs")
EPOCHS = (0, 1, 2, 4)
# a process that runs argv[1:] and reports the peak RSS of its largest descendant (KB) on its last stderr line
_MEASURE = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
            "print('maxrss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(rc)")


def build():
    """The bench CNN of bench_capture.py, its layers named for the logger."""
    import keras

    L = keras.layers
    return keras.Sequential([keras.Input((28, 28, 1)), L.Conv2D(16, 3, activation="relu", name="conv1"),
                             L.MaxPooling2D(), L.Conv2D(32, 3, activation="relu", name="conv2"), L.MaxPooling2D(),
                             L.Flatten(), L.Dense(128, activation="relu", name="dense"),
                             L.Dense(10, activation="softmax", name="probs")])


def digits(args):
    """Training digits (x, y) and the probe (the test digits, then training digits), floats in [0, 1]."""
    with np.load(args.mnist, allow_pickle=False) as f:
        x, y, xt, yt = (f[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    xp = np.concatenate([xt, x])[: args.probes]
    yp = np.concatenate([yt, y])[: args.probes]
    scale = lambda a: (a[..., None] / 255.0).astype(np.float32)  # noqa: E731
    return scale(x[: args.rows]), y[: args.rows], scale(xp), yp


def worker_capture(args) -> None:
    import keras

    from repviz.capture import ActivationLogger

    x, y, xp, yp = digits(args)
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    if args.worker == "capture":
        logger = ActivationLogger(os.path.join(args.logdir, "epochs"), probe=(xp, yp), layers=list(LAYERS),
                                  freq=list(EPOCHS))
        epochs = EPOCHS[-1]
    else:
        logger = ActivationLogger(os.path.join(args.logdir, "batch50"), probe=(xp, yp), layers=list(LAYERS),
                                  batch_freq=50, batch_probe=1000)
        epochs = args.batch_epochs
    start = time.perf_counter()
    model.fit(x, y, epochs=epochs, batch_size=128, verbose=0, callbacks=[logger])
    print(json.dumps({"fit_s": time.perf_counter() - start}))


def peer_sample(steps: list[int], k: int) -> list[tuple[str, int]]:
    """K representations for the peer: continuation snapshots first (latest first, every layer), then the first."""
    order = [(layer, step) for step in steps[1:][::-1] for layer in LAYERS]
    return (order + [(layer, steps[0]) for layer in LAYERS])[:k]


def worker_peer(args) -> None:
    from openTSNE import TSNE
    from sklearn.decomposition import PCA

    from repviz.store import open_logdir

    run = open_logdir(args.logdir).run("epochs")
    out = []
    for item in args.items.split(","):
        layer, step = item.split(":")
        X = np.asarray(run.activations(layer, int(step)), dtype=np.float32)
        start = time.perf_counter()
        TSNE(n_jobs=os.cpu_count(), random_state=0).fit(X)
        tsne_s = time.perf_counter() - start
        PCA(2, random_state=0).fit_transform(X)
        out.append({"layer": layer, "step": int(step), "tsne_s": tsne_s,
                    "pca_s": time.perf_counter() - start - tsne_s, "load": os.getloadavg()[0]})
    print(json.dumps(out))


def _status_bytes(field: str, pid: str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def _reset_peak() -> int:
    """Reset this process's peak RSS (Linux ``clear_refs`` 5); returns the resident bytes now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_bytes("VmRSS")


def worker_tab(args) -> None:
    """Choosing the largest embedding to its first complete draw, animation frames, the grid; the server's peak."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_plugin import _chromium, _free_port, _serve_logdir, _stop, _until
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    chrome, reason = _chromium()
    if chrome is None:
        print(json.dumps({"skipped": reason}))
        return
    n, result = args.probes, {}
    port = _free_port()
    proc = _serve_logdir(str(args.logdir), port)

    def choose(name: str, prefix: str) -> None:
        menu = Select(chrome.find_element(By.CSS_SELECTOR, f'select[name="{name}"]'))
        menu.select_by_visible_text(next(o.text for o in menu.options if o.text.startswith(prefix)))

    def drawn(what: str) -> float:
        _until(chrome, f"return window.__repvizStats.draws > {draws} && window.__repvizStats.n === {n}", what, 300)
        return chrome.execute_script("return window.__repvizStats.drawnMs")

    try:
        chrome.get(f"http://127.0.0.1:{port}/data/plugin_entry.html?name=repviz")
        _until(chrome, "return window.__repvizStats && document.querySelector('select[name=\"run\"]')", "the page")
        draws = chrome.execute_script("return window.__repvizStats.draws")
        _until(chrome, "return [...document.querySelectorAll('select[name=\"run\"] option')]"
                       ".some(o => o.textContent.startsWith('epochs'))", "the run epochs")
        if chrome.execute_script("return document.querySelector('select[name=\"run\"]').value") == "epochs":
            draws = 0  # the page opened on it: the time is from the page's start
        choose("run", "epochs")
        result["run_ms"] = drawn("the run epochs")
        result["method_ms"] = []
        for method in ("pca", "tsne", "pca", "tsne"):
            draws = chrome.execute_script("return window.__repvizStats.draws")
            choose("method", method)
            result["method_ms"].append(drawn(f"the {method} embedding"))
        frames = []
        slider = chrome.find_element(By.CSS_SELECTOR, '[data-testid="slider"]')
        for _ in range(3):
            before = chrome.execute_script("return window.__repvizStats.transitions")
            slider.send_keys(Keys.RIGHT if slider.get_attribute("value") == "0" else Keys.LEFT)
            _until(chrome, f"return window.__repvizStats.transitions > {before}", "a transition", 120)
            frames += chrome.execute_script("return window.__repvizStats.transitionFrames")
        result["frames_ms"] = sorted(frames)
        chrome.execute_script("window.__repvizStats.gridDraws = 0;")
        chrome.find_element(By.CSS_SELECTOR, '[data-name="view"] [data-value="grid"]').click()
        _until(chrome, "return window.__repvizStats.gridDraws > 0 && window.__repvizStats.gridCells > 0", "the grid",
               300)
        stats = chrome.execute_script("return window.__repvizStats")
        result["grid_ms"], result["grid_cells"] = stats["gridDrawnMs"], stats["gridCells"]
        result["grid_stats"] = {k: v for k, v in stats.items() if k.startswith("grid") or "sub" in k.lower()
                                or "perf" in k.lower()}
        result["server_peak_mb"] = _status_bytes("VmHWM", str(proc.pid)) / 2**20
    finally:
        chrome.quit()
        _stop(proc)
    print(json.dumps(result))


def worker_tsne_memory(args) -> None:
    """Peak RSS added by a t-SNE fit, a continuation step and an openTSNE fit of an n x 64 array."""
    from openTSNE import TSNE as OpenTSNE

    from repviz.manifold import TSNE
    from repviz.manifold.tsne.continuation import continue_embedding
    from repviz.methods import METHODS

    _, _, xp, _ = digits(args)
    rng = np.random.default_rng(0)
    pixels = xp.reshape(len(xp), -1)
    X = np.maximum(pixels @ rng.normal(size=(784, 64)).astype(np.float32) / 28, 0)
    X2 = X + 0.1 * X.std() * rng.normal(size=X.shape).astype(np.float32)  # the next snapshot
    out = {"n": len(X), "data_mb": X.nbytes / 2**20}
    params = {**TSNE().get_params(), "random_state": 0, "n_jobs": os.cpu_count()}
    base = _reset_peak()
    start = time.perf_counter()
    fit = TSNE(**params).fit(X)
    out["fit"] = {"s": time.perf_counter() - start, "peak_mb": (_status_bytes("VmHWM") - base) / 2**20,
                  "method": fit.method_, "n_iter": int(fit.n_iter_)}
    previous = fit.embedding_
    base = _reset_peak()
    start = time.perf_counter()
    embedding, start_kind = continue_embedding(X2, previous, params, METHODS["tsne"].continuation)
    out["step"] = {"s": time.perf_counter() - start, "peak_mb": (_status_bytes("VmHWM") - base) / 2**20,
                   "method": embedding.method, "n_iter": int(embedding.n_iter), "start": start_kind,
                   "counts": getattr(embedding._repulsion, "counts", None)}
    base = _reset_peak()
    start = time.perf_counter()
    OpenTSNE(n_jobs=os.cpu_count(), random_state=0).fit(X2)
    out["openTSNE"] = {"s": time.perf_counter() - start, "peak_mb": (_status_bytes("VmHWM") - base) / 2**20}
    print(json.dumps(out))


WORKERS = {"capture": worker_capture, "capture-batch": worker_capture, "peer": worker_peer, "tab": worker_tab,
           "tsne-memory": worker_tsne_memory}


def _env(threads: int) -> dict:
    t = str(threads)
    return {**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "MKL_NUM_THREADS": t,
            "NUMBA_NUM_THREADS": t, "TF_NUM_INTRAOP_THREADS": t, "TF_NUM_INTEROP_THREADS": "1"}


def _disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class Stages:
    """Runs each stage in its own measured process and keeps its table row."""

    def __init__(self, args):
        self.args, self.rows, self.notes = args, [], []

    def run(self, name: str, cmd: list[str], target: str = "") -> str:
        before = _disk(self.args.logdir)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True,
                             env=_env(os.cpu_count() or 1), cwd=ROOT)
        wall = time.perf_counter() - start
        if out.returncode:
            sys.exit(f"stage {name} failed ({' '.join(cmd[:6])} ...):\n{out.stderr[-3000:]}")
        rss = int(out.stderr.strip().splitlines()[-1].split()[1]) / 1024
        self.rows.append([name, wall, rss, (_disk(self.args.logdir) - before) / 2**20, load, target])
        print(f"  {name}: {wall:.1f} s", flush=True)
        return out.stdout

    def worker(self, name: str, mode: str, extra: list[str] = (), target: str = "") -> dict | list:
        a = self.args
        cmd = [sys.executable, __file__, "--worker", mode, "--logdir", str(a.logdir), "--probes", str(a.probes),
               "--rows", str(a.rows), "--mnist", a.mnist, "--batch-epochs", str(a.batch_epochs), *extra]
        return json.loads(self.run(name, cmd, target).strip().splitlines()[-1])

    def cli(self, name: str, *argv: str, target: str = "") -> str:
        return self.run(name, [sys.executable, "-m", "repviz.cli", *argv], target)

    def print(self) -> None:
        head = f"{'stage':<52} {'wall s':>8} {'peak RSS MB':>12} {'disk +MB':>9} {'load':>5}  target"
        print("\n" + head + "\n" + "-" * len(head))
        for name, wall, rss, disk, load, target in self.rows:
            print(f"{name:<52} {wall:>8.1f} {rss:>12.0f} {disk:>9.1f} {load:>5.2f}  {target}")
        for note in self.notes:
            print(note)


def switch_lines(text: str) -> list[str]:
    """Lines of a command's output that report an automatic large-probe switch."""
    words = ("sampl", "minibatch", "batch", "subset", "common")
    return [line.strip() for line in text.splitlines() if any(w in line.lower() for w in words)]


def sidecar_seconds(logdir: Path) -> dict:
    """Seconds of each t-SNE representation of run "epochs" from the sidecars embed wrote (read, fit, scores)."""
    from repviz.store import open_logdir

    run = open_logdir(logdir).run("epochs")
    key = run.embeddings.key("tsne")
    return {(layer, step): run.embeddings.info(key, layer, step)["seconds"]
            for layer in run.layers for step in run.embeddings.steps(key, layer)}


def capture_stages(st: Stages, args) -> None:
    """Run "epochs", and run "batch50" where ActivationLogger takes batch_probe."""
    from repviz.capture import ActivationLogger

    fit = st.worker("capture: fit 4 epochs, snapshots at 0,1,2,4", "capture")
    st.notes.append(f"capture: model.fit (logger included) {fit['fit_s']:.1f} s")
    if "batch_probe" in inspect.signature(ActivationLogger.__init__).parameters:  # the class has a __new__
        fit = st.worker(f"capture: batch_freq=50, batch_probe=1000, {args.batch_epochs} epoch(s)", "capture-batch")
        st.notes.append(f"capture batch50: model.fit (logger included) {fit['fit_s']:.1f} s")
    else:
        print("  capture batch_freq=50 with batch_probe=1000 skipped: ActivationLogger has no batch_probe option")


def main_bench(args) -> None:
    st = Stages(args)
    cores = os.cpu_count() or 1
    print(f"{args.probes:,} probes, CNN on {args.rows:,} MNIST digits, layers {', '.join(LAYERS)}, snapshots at "
          f"epochs {EPOCHS}; {cores} cores, embed --jobs {args.jobs}; load average {os.getloadavg()[0]:.2f} "
          f"(other processes may share the machine)", flush=True)
    if args.reuse:  # the captures of an earlier run of this script; what the later stages wrote goes
        for results in (args.logdir / "epochs" / "plugins" / "repviz" / "embeddings",
                        args.logdir / "plugins" / "repviz-meta"):
            shutil.rmtree(results, ignore_errors=True)
        print("  capture: reused from --logdir (its embeddings, meta-SNE and similarity results removed)")
    else:
        capture_stages(st, args)
    from repviz.store import open_logdir

    steps = open_logdir(args.logdir).run("epochs").steps(LAYERS[0])
    sample = peer_sample(steps, args.peer_sample)
    half = (len(sample) + 1) // 2
    peers = []
    if sample[:half]:
        peers += st.worker(f"peer: openTSNE + PCA, {half} of 16 (before embed)", "peer",
                           ["--items", ",".join(f"{layer}:{step}" for layer, step in sample[:half])])
    st.cli("repviz embed --method tsne,pca (16 representations)", "embed", str(args.logdir), "--method", "tsne,pca",
           "--runs", "epochs", "--jobs", str(args.jobs), "--no-progress", target="<= 0.2x loop, <= 2 GB")
    embed_s = st.rows[-1][1]
    if sample[half:]:
        peers += st.worker(f"peer: openTSNE + PCA, {len(sample) - half} of 16 (after embed)", "peer",
                           ["--items", ",".join(f"{layer}:{step}" for layer, step in sample[half:])])
    meta = st.cli("repviz meta --include-input (17 representations)", "meta", str(args.logdir), "--runs", "epochs",
                  "--include-input", "--no-progress", target="<= 60 s, <= 2 GB")
    sim = st.cli("repviz similarity (4 x 4 layers, last snapshot)", "similarity", str(args.logdir),
                 "--runs", "epochs", "--no-progress")
    sim += st.cli(f"repviz similarity --layer {LAYERS[2]} (4 x 4 snapshots)", "similarity", str(args.logdir),
                  "--runs", "epochs", "--layer", LAYERS[2], "--no-progress")
    info = st.cli("repviz info", "info", str(args.logdir))
    for name, text in (("meta", meta), ("similarity", sim), ("info", info)):
        st.notes += [f"{name} says: {line}" for line in switch_lines(text)]
    tab = None if args.skip_browser else st.worker("tab: headless Chromium (server peak RSS: see below)", "tab",
                                                     target="draw <= 1.5 s at 100k; grid <= 2 s")
    st.print()
    print(f"log directory: {_disk(args.logdir) / 2**20:.0f} MB in all")
    ours = sidecar_seconds(args.logdir)
    if peers:
        ratios = [ours[(p["layer"], p["step"])] / p["tsne_s"] for p in peers if (p["layer"], p["step"]) in ours]
        per_fit = statistics.mean(p["tsne_s"] + p["pca_s"] for p in peers)
        loop = 16 * per_fit
        extrapolated = "" if len(peers) == 16 else f" (extrapolated from {len(peers)} of 16 fits)"
        print(f"peer loop of 16 openTSNE + PCA fits: {loop:.0f} s{extrapolated}; repviz embed / loop: "
              f"{embed_s / loop:.2f}x (target <= 0.2x)")
        for p in peers:
            mine = ours.get((p["layer"], p["step"]))
            kind = "continuation step" if p["step"] != steps[0] else "first fit"
            print(f"  {p['layer']} @ {p['step']}: openTSNE {p['tsne_s']:.1f} s, PCA {p['pca_s']:.2f} s; ours "
                  f"({kind}, sidecar incl. read + scores) {mine:.1f} s = {mine / p['tsne_s']:.2f}x; load "
                  f"{p['load']:.2f}")
        if ratios:
            print(f"t-SNE step / openTSNE full fit of the same array: median {statistics.median(ratios):.2f}x "
                  f"(target <= 0.15x for continuation steps)")
    first = [s for (layer, step), s in ours.items() if step == steps[0]]
    later = [s for (layer, step), s in ours.items() if step != steps[0]]
    print(f"ours: first snapshot median {statistics.median(first):.1f} s, continuation step median "
          f"{statistics.median(later):.1f} s ({len(later)} steps)")
    if tab:
        if "skipped" in tab:
            print(f"tab skipped: {tab['skipped']}")
        else:
            frames = tab["frames_ms"]
            print(f"tab at {args.probes:,} points: run chosen to first complete draw {tab['run_ms']:.0f} ms; method "
                  f"chosen to draw {', '.join(f'{m:.0f}' for m in tab['method_ms'])} ms; animation frame median "
                  f"{statistics.median(frames):.0f} ms ({1000 / statistics.median(frames):.0f} fps, "
                  f"{len(frames)} frames); grid of {tab['grid_cells']} cells first drawn {tab['grid_ms']:.0f} ms; "
                  f"TensorBoard server peak RSS {tab['server_peak_mb']:.0f} MB")
            print(f"tab grid stats: {json.dumps(tab['grid_stats'])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mnist", default=str(ROOT.parent / "shared" / "data" / "mnist.npz"))
    p.add_argument("--probes", type=int, default=50_000, help="probe digits: the 10,000 test digits, then training")
    p.add_argument("--quick", action="store_true", help="5,000 probes, 10,000 training digits, 2 peer fits")
    p.add_argument("--rows", type=int, default=60_000, help="training digits")
    p.add_argument("--jobs", type=int, default=1, help="repviz embed --jobs")
    p.add_argument("--peer-sample", type=int, default=4, metavar="K",
                   help="openTSNE fits on K of the 16 representations (16: the whole loop, no extrapolation)")
    p.add_argument("--batch-epochs", type=int, default=1, help="epochs of the batch_freq=50 run")
    p.add_argument("--skip-browser", action="store_true", help="no tab stage")
    p.add_argument("--logdir", type=Path, help="keep the log directory here (default: a temporary one, removed)")
    p.add_argument("--reuse", action="store_true",
                   help="--logdir holds this script's captures already: skip them, and remove its embeddings, "
                        "meta-SNE and similarity results before computing them again")
    p.add_argument("--tsne-memory", action="store_true",
                   help="only: peak memory of one t-SNE fit and one continuation step of a --probes x 64 array")
    p.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--items", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.probes, args.rows, args.peer_sample = 5_000, 10_000, min(args.peer_sample, 2)
    if not 1 <= args.peer_sample <= 16:
        p.error(f"--peer-sample must be between 1 and 16; got {args.peer_sample}")
    if args.worker:
        return WORKERS[args.worker](args)
    if args.reuse and not (args.logdir and (args.logdir / "epochs").is_dir()):
        p.error("--reuse needs --logdir, a log directory this script wrote (with run 'epochs')")
    if args.tsne_memory:
        out = subprocess.run([sys.executable, __file__, "--worker", "tsne-memory", "--probes", str(args.probes),
                              "--mnist", args.mnist], capture_output=True, text=True, env=_env(os.cpu_count() or 1))
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['n']:,} x 64 float32 ({r['data_mb']:.0f} MB); {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.2f}; peak RSS added over what was resident before each:")
        for name in ("fit", "step", "openTSNE"):
            e = r[name]
            extra = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("s", "peak_mb"))
            print(f"  {name:<9} {e['s']:7.1f} s  +{e['peak_mb']:6.0f} MB  {extra}")
        print(f"continuation step / openTSNE fit: {r['step']['s'] / r['openTSNE']['s']:.2f}x")
        return None
    temporary = args.logdir is None
    args.logdir = args.logdir or Path(tempfile.mkdtemp(prefix="bench_scale_"))
    try:
        main_bench(args)
    finally:
        if temporary:
            shutil.rmtree(args.logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
