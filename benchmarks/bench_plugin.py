"""The Repviz TensorBoard plugin: payloads, server time, and what it adds to TensorBoard's start-up.

    python benchmarks/bench_plugin.py [--n 70000] [--repeats 50] [--starts 3] [--skip-startup] [--skip-page]
    python benchmarks/bench_plugin.py --neighborhood [--nc-n 20000] [--mnist FILE]
    python benchmarks/bench_plugin.py --scale

A synthetic log directory is written through the store API (``RunWriter``, ``Run.embeddings.write``): one run of
``n`` probe points with 28x28 thumbnails, 10-class labels and predictions, one layer at 2 snapshots and a stored
2-D embedding of each. Then:

- server side, in this process through werkzeug's test client on TensorBoard's WSGI app: bytes and median
  time of ``coords`` (one embedding), ``labels``, ``predictions``, ``ids``, one ``thumbnails`` block, the
  ``runs`` index, and the ``coords`` revalidation (304); targets: one embedding <= 600 KB and <= 50 ms;
- TensorBoard start-up, each start in its own process, alternating with and without the plugin (the same
  TensorBoard, plugin lists given explicitly), median of ``--starts``: time from process start to the first
  served ``/data/plugins_listing``; target: the plugin adds < 0.5 s;
- the listing of a log directory of ``--runs`` runs: scan, ``is_active``, the ``runs`` index cold and unchanged. Start-up differences of a tenth of a second
  are noise on a shared machine, so the import of the plugin is also timed on its own;
- the page, in headless Chromium with software WebGL (SwiftShader, as CI has it; needs chromium, chromedriver and
  selenium, else these rows are skipped with the reason): a TensorBoard process serves runs of 100, 20,000 and
  ``n`` points; the page opens on the small one, then for each large run, time from choosing it in the run
  picker to its first complete draw (target < 1 s), then the frame intervals while it animates from one
  snapshot to the other (median and 90th percentile; target <= 33 ms at 20,000 points), and what a frame costs
  (from its start to its picture in the canvas: the intervals round that up to whole 16.7 ms display refreshes,
  so a saving shows there before it shows in the frame rate). All are read from ``window.__repvizStats``, which
  the page updates with ``performance.now()`` (see static/index.js).

- the comparing views (issue 12), in the same headless Chromium over a second log directory: a grid of 4 x 6 small
  multiples of 2,000 points (one shared WebGL context), time from choosing the Grid view to every cell drawn and
  the frame intervals while the mouse hovers points of one cell (each hover highlights that probe in all 24
  cells); the meta-SNE map of 500 representations with their trajectories, one complete draw
  (``--skip-compare`` leaves these out).
- ``--scale`` (issue 30), in the same headless Chromium: choosing a 100,000-point embedding to its first complete
  draw (target <= 1.5 s; from 50,000 points the main view draws square points, see static/scatter.js), the
  animation between two snapshots at 50,000 (>= 30 fps) and 100,000 points (>= 15 fps), a 4 x 4 grid of 50,000-point
  representations from choosing the Grid view to every cell drawn (<= 2 s; each cell draws its seeded sample of
  20,000), and the animation between 100,000 points and a snapshot of a probe subset of 50,000.
- ``--neighborhood`` (issue 12): neighbourhood change between two 20,000-point width-128 representations, server
  time cold and cached (target <= 2 s cold), against scikit-learn's exact k-NN (see :func:`neighborhood_rows`).

Each part is a function returning rows ``(measure, value, unit, target)``; ``main`` prints them as one table.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tb_plugin")]
KEY = "pca-bench000000"
Row = tuple[str, float, str, str]


def _synthetic_run(path: Path, name: str, n: int, layers=("dense",), width: int = 2, thumbnails: bool = False):
    """Run ``name`` of ``n`` probe points (10 random classes; 28x28 random thumbnails if asked) with Dense
    ``layers`` of ``width``, begun through the store, its embedding method ``KEY`` described; returns the writer,
    the run, the labels and the generator that drew them (seed 0)."""
    import numpy as np

    from repviz.store import RunWriter, open_logdir

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, n)
    writer = RunWriter(path / name)
    writer.begin({"fingerprint": {"model": name, "probe": "synthetic"}, "step_unit": "epoch",
                  "layers": {layer: {"class": "Dense", "stored_shape": [n, width], "output_shape": [None, width],
                                     "reduction": {"kind": "none"}} for layer in layers}})
    writer.write_probe(np.arange(n), labels,
                       rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) if thumbnails else None)
    run = open_logdir(path).run(name)
    run.embeddings.write_method(KEY, {"method": "pca", "params": {}, "align": "snapshots", "default": True})
    return writer, run, labels, rng


def write_logdir(path: Path, n: int) -> None:
    """One run of ``n`` points: probe, 2 snapshots of one layer, predictions and a stored embedding of each."""
    import numpy as np

    writer, run, labels, rng = _synthetic_run(path, "bench", n, width=16, thumbnails=True)
    for step in (0, 1):
        writer.write_activation("dense", step, rng.normal(size=(n, 16)).astype(np.float32), epoch=step)
        logits = rng.normal(size=(n, 10)).astype(np.float32)
        writer.write_prediction(step, np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))
        centres = rng.normal(size=(10, 2)) * 10
        Y = (centres[labels] + rng.normal(size=(n, 2))).astype(np.float32)
        run.embeddings.write(KEY, "dense", step, Y, {"method": "pca", "scores": {}})


def _median_ms(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def server_rows(logdir: Path, repeats: int) -> list[Row]:
    """Payload bytes and median server time of each route, through TensorBoard's WSGI app."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz.loader import RepvizLoader
    from werkzeug import test, wrappers

    plugin = RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    client = test.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    base = "/data/plugin/repviz/"
    start = time.perf_counter()
    assert client.get(base + "runs").status_code == 200
    rows: list[Row] = [("first runs index (listing scan)", 1000 * (time.perf_counter() - start), "ms", "")]
    routes = [("coords (one embedding)", f"coords?run=bench&layer=dense&step=1&key={KEY}", "<= 600 KB, <= 50 ms"),
              ("labels", "labels?run=bench", ""), ("predictions", "predictions?run=bench&step=1", ""),
              ("ids", "ids?run=bench", ""), ("thumbnails (1024)", "thumbnails?run=bench&start=0&count=1024", ""),
              ("runs index (cached)", "runs", "")]
    for name, route, target in routes:
        response = client.get(base + route)
        assert response.status_code == 200, (route, response.data[:200])
        rows.append((f"{name}: payload", len(response.data) / 1000, "KB", target.split(",")[0]))
        rows.append((f"{name}: server time (median of {repeats})",
                     _median_ms(lambda route=route: client.get(base + route), repeats), "ms",
                     target.split(", ")[-1] if target else ""))
    tag = client.get(base + routes[0][1]).headers["ETag"]
    rows.append(("coords revalidation (304)",
                 _median_ms(lambda: client.get(base + routes[0][1], headers={"If-None-Match": tag}), repeats), "ms",
                 ""))
    plugin.jobs.close()
    return rows


def many_runs_rows(path: Path, n_runs: int) -> list[Row]:
    """The listing on a log directory of ``n_runs`` runs (4 layers x 10 snapshots, 2 embedding methods each):
    a full scan, ``is_active`` and the ``runs`` index built cold and again with nothing changed."""
    import numpy as np
    from tensorboard_plugin_repviz import data
    from tensorboard_plugin_repviz.catalog import Catalog

    from repviz.store import RunWriter, open_logdir

    n, zeros = 500, np.zeros((500, 4), np.float32)
    for r in range(n_runs):
        writer = RunWriter(path / f"run{r:03d}")
        writer.begin({"fingerprint": {"model": "m", "probe": "p"},
                      "layers": {f"l{i}": {"stored_shape": [n, 4]} for i in range(4)}})
        writer.write_probe(np.arange(n), np.arange(n) % 10)
        for s in range(10):
            for i in range(4):
                writer.write_activation(f"l{i}", s, zeros)
    for run in open_logdir(path).runs.values():
        for key in ("pca-0000000000", "tsne-0000000000"):
            run.embeddings.write_method(key, {"method": key.split("-")[0]})
            for i in range(4):
                for s in range(10):
                    run.embeddings.write(key, f"l{i}", s, zeros[:, :2], {})
    catalog = Catalog(str(path), ttl=3600)
    start = time.perf_counter()
    catalog.scan()
    rows: list[Row] = [(f"{n_runs} runs: listing scan", 1000 * (time.perf_counter() - start), "ms", "background")]
    rows.append((f"{n_runs} runs: is_active (median of 100)", _median_ms(catalog.is_active, 100), "ms", "cheap"))
    start = time.perf_counter()
    data.runs_impl(catalog, [])
    rows.append((f"{n_runs} runs: runs index, cold", 1000 * (time.perf_counter() - start), "ms", ""))
    rows.append((f"{n_runs} runs: runs index, unchanged (median of 5)",
                 _median_ms(lambda: data.runs_impl(catalog, []), 5), "ms", ""))
    return rows


_SERVE = """
import sys
from tensorboard import default, program
plugins = default.get_static_plugins()
if sys.argv[1] == "with":
    sys.path[:0] = sys.argv[4:]
    from tensorboard_plugin_repviz.loader import RepvizLoader
    plugins = plugins + [RepvizLoader()]
tb = program.TensorBoard(plugins=plugins)
tb.configure(argv=[None, "--logdir", sys.argv[2], "--host", "127.0.0.1", "--port", sys.argv[3]])
tb.main()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_seconds(logdir: Path, with_plugin: bool) -> float:
    """Seconds from process start to a served plugin listing (that lists repviz, with the plugin)."""
    port = _free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, "with" if with_plugin else "without", str(logdir),
                             str(port), str(ROOT), str(ROOT / "tb_plugin")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - start < 120:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=10) as r:
                    listing = json.loads(r.read())
                elapsed = time.perf_counter() - start
                if with_plugin and not listing.get("repviz", {}).get("enabled"):
                    raise RuntimeError(f"repviz is not enabled in the listing: {listing.get('repviz')}")
                return elapsed
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"tensorboard exited with {proc.returncode}") from None
                time.sleep(0.05)
        raise RuntimeError("tensorboard did not start within 120 s")
    finally:
        proc.kill()  # nothing to save: no graceful stop needed
        proc.wait()


_IMPORT = """
import sys, time
sys.path[:0] = sys.argv[1:]
from tensorboard import default  # what TensorBoard has imported before it loads dynamic plugins
default.get_static_plugins()
t = time.perf_counter()
from tensorboard_plugin_repviz.plugin import RepvizPlugin
print(time.perf_counter() - t, sorted(m for m in sys.modules if m.split(".")[0] in ("keras", "tensorflow", "numba")))
"""


def import_rows(starts: int) -> list[Row]:
    """Seconds to import the plugin into a process that has TensorBoard's server loaded, median of ``starts``."""
    times = []
    for _ in range(starts + 1):  # the first run writes the bytecode caches: not counted
        out = subprocess.run([sys.executable, "-c", _IMPORT, str(ROOT), str(ROOT / "tb_plugin")], check=True,
                             capture_output=True, text=True).stdout.split(" ", 1)
        if out[1].strip() != "[]":
            raise RuntimeError(f"importing the plugin loaded {out[1].strip()}")
        times.append(float(out[0]))
    times = times[1:]
    return [(f"import of the plugin, after TensorBoard's own plugins (median of {starts})", 1000 * statistics.median(times), "ms",
             "no keras/tensorflow/numba")]


def startup_rows(logdir: Path, starts: int) -> list[Row]:
    """TensorBoard start-up to a served /data/plugins_listing, alternating without and with the plugin."""
    _start_seconds(logdir, False)  # warm the file cache and bytecode once, not counted
    without, with_ = [], []
    for _ in range(starts):
        without.append(_start_seconds(logdir, False))
        with_.append(_start_seconds(logdir, True))
    a, b = statistics.median(without), statistics.median(with_)
    return [(f"TensorBoard start-up without the plugin (median of {starts})", a, "s", ""),
            (f"TensorBoard start-up with the plugin (median of {starts})", b, "s", ""),
            ("added by the plugin", b - a, "s", "< 0.5 s")]


PAGE_SIZES = (100, 20_000)  # besides --n: the page opens on the first; the others are measured


def _chromium():
    """A headless Chromium driver at 1280x800 with software WebGL, or the reason there is none."""
    import shutil

    binary, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if binary is None or driver is None:
        return None, "chromium or chromedriver is not on PATH"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "selenium is not installed"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='bench-chromium-')}"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    return chrome, ""


def _until(chrome, condition, what: str, timeout: float = 60):
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        value = chrome.execute_script(condition)
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError(f"the page did not show {what} within {timeout} s")


def _stop(proc: subprocess.Popen) -> None:
    """Terminate a served TensorBoard, killing it if it does not exit within 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def _serve_logdir(logdir: str, port: int) -> subprocess.Popen:
    """TensorBoard with the plugin on ``logdir`` at 127.0.0.1:``port``, returned once it serves its plugin listing."""
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, "with", logdir, str(port), str(ROOT), str(ROOT / "tb_plugin")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = time.perf_counter()
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=10).close()
            return proc
        except OSError:
            if time.perf_counter() - start > 120:
                proc.kill()
                raise RuntimeError("tensorboard did not start within 120 s") from None
            time.sleep(0.1)


def choice_rows(chrome, run: str, size: int, draw_target: str = "", frame_target: str = "",
                prefix: str = "page") -> list[Row]:
    """In a page already open on another run (the driver inside its document): time from choosing ``run`` of
    ``size`` points in the run picker to its first complete draw, then the frame intervals and costs of three
    animations between its two snapshots, as ``window.__repvizStats`` reports them."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    label = f"{size:,} points"
    Select(chrome.find_element(By.CSS_SELECTOR, 'select[name="run"]')).select_by_value(run)
    _until(chrome, f"return window.__repvizStats.n === {size}", label)
    rows = [(f"{prefix}: choice to first complete draw, {label}",
             chrome.execute_script("return window.__repvizStats.drawnMs"), "ms", draw_target)]
    frames, costs = [], []
    slider = chrome.find_element(By.CSS_SELECTOR, '[data-testid="slider"]')
    for _ in range(3):  # back and forth between the two snapshots
        before = chrome.execute_script("return window.__repvizStats.transitions")
        slider.send_keys(Keys.RIGHT if slider.get_attribute("value") == "0" else Keys.LEFT)
        _until(chrome, f"return window.__repvizStats.transitions > {before}", f"a transition of {label}")
        frames += chrome.execute_script("return window.__repvizStats.transitionFrames")
        costs += chrome.execute_script("return window.__repvizStats.transitionFrameMs")
    frames.sort()
    rows.append((f"{prefix}: animation frame interval, {label} (median of {len(frames)})",
                 statistics.median(frames), "ms", frame_target))
    rows.append((f"{prefix}: animation frame rate, {label} (from the median interval)",
                 1000 / statistics.median(frames), "fps", ""))
    rows.append((f"{prefix}: animation frame interval, {label} (90th percentile)",
                 frames[int(0.9 * (len(frames) - 1))], "ms", ""))
    rows.append((f"{prefix}: animation frame cost, {label} (median of {len(costs)}, start to picture)",
                 statistics.median(costs), "ms", ""))
    return rows


def page_rows(n: int, sizes: tuple[int, ...] = PAGE_SIZES, targets: dict | None = None) -> list[Row]:
    """Choice-to-draw time and animation frame intervals of the page, at ``sizes[1:]`` and ``n`` points (the page
    opens on ``sizes[0]``); ``targets``: {size: (draw target, frame target)}."""
    chrome, reason = _chromium()
    if chrome is None:
        print(f"page rows skipped: {reason}")
        return []

    sizes = [*sizes, n]
    targets = targets or {20_000: ("< 1000 ms", "<= 33 ms")}
    rows: list[Row] = []
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        for i, size in enumerate(sizes):
            write_logdir(Path(tmp) / f"{i}-{size}", size)
        proc = _serve_logdir(tmp, port)
        try:
            chrome.get(f"http://127.0.0.1:{port}/data/plugin_entry.html?name=repviz")
            _until(chrome, f"return window.__repvizStats && window.__repvizStats.n === {sizes[0]}", "the first run")
            for i, size in enumerate(sizes[1:], start=1):
                rows += choice_rows(chrome, f"{i}-{size}/bench", size, *targets.get(size, ("< 1000 ms", "")))
        finally:
            chrome.quit()
            _stop(proc)
    return rows


# --- issue 12: the comparing views (grid of small multiples, meta-SNE map) in headless Chromium ---------------
GRID_LAYERS, GRID_STEPS, GRID_N = 4, 6, 2000
META_RUNS, META_LAYERS, META_STEPS = 5, 10, 10  # 500 representations


def write_compare_logdir(path: Path) -> None:
    """Run "grid": 4 layers x 6 snapshots of 2,000 points, each with a stored 2-D embedding; runs "m0".."m4" of
    10 layers x 10 snapshots (small activations) and a stored meta-SNE map of their 500 representations, each
    (run, layer) a random-walk trajectory."""
    import numpy as np

    from repviz.meta.result import MetaResult
    from repviz.store import RunWriter, open_logdir

    rng = np.random.default_rng(0)
    n = GRID_N
    labels = rng.integers(0, 10, n)
    layers = {f"l{i}": {"class": "Dense", "stored_shape": [n, 8], "output_shape": [None, 8],
                        "reduction": {"kind": "none"}} for i in range(GRID_LAYERS)}
    writer = RunWriter(path / "grid")
    writer.begin({"fingerprint": {"model": "grid", "probe": "synthetic"}, "step_unit": "epoch", "layers": layers})
    writer.write_probe(np.arange(n), labels, rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
    run = open_logdir(path).run("grid")
    run.embeddings.write_method(KEY, {"method": "pca", "params": {}, "align": "snapshots", "default": True})
    for layer in layers:
        for step in range(GRID_STEPS):
            writer.write_activation(layer, step, rng.normal(size=(n, 8)).astype(np.float32), epoch=step)
            centres = rng.normal(size=(10, 2)) * (3 + step)
            Y = (centres[labels] + rng.normal(size=(n, 2))).astype(np.float32)
            run.embeddings.write(KEY, layer, step, Y, {"method": "pca", "scores": {}})
    keys, coords = [], []
    small = 50
    for r in range(META_RUNS):
        w = RunWriter(path / f"m{r}")
        w.begin({"fingerprint": {"model": f"m{r}", "probe": "synthetic"}, "step_unit": "epoch",
                 "layers": {f"l{i}": {"class": "Dense", "stored_shape": [small, 2], "output_shape": [None, 2],
                                      "reduction": {"kind": "none"}} for i in range(META_LAYERS)}})
        w.write_probe(np.arange(small), np.arange(small) % 10)
        for i in range(META_LAYERS):
            walk = np.cumsum(rng.normal(size=(META_STEPS, 2)), axis=0) + rng.normal(size=2) * 10
            for step in range(META_STEPS):
                w.write_activation(f"l{i}", step, rng.normal(size=(small, 2)).astype(np.float32), epoch=step)
                keys.append((f"m{r}", f"l{i}", step))
                coords.append(walk[step])
    MetaResult(keys=keys, coords=np.asarray(coords, np.float32), distances=np.zeros((len(keys), len(keys))),
               params={"transform": "dist", "metric": "chord", "embedding": "mds"}, explained_variance=0.5).save(path)


_RAF_RECORDER = """
window.__benchFrames = [];
let last = null;
const tick = (now) => {
  if (last !== null) window.__benchFrames.push(now - last);
  last = now;
  if (window.__benchFrames.length < 100000 && !window.__benchStop) requestAnimationFrame(tick);
};
window.__benchStop = false;
requestAnimationFrame(tick);
"""


def compare_page_rows(repeats: int = 3) -> list[Row]:
    """The grid of 4 x 6 small multiples of 2,000 points (one shared WebGL context): time from choosing the
    Grid view to every cell drawn (median of ``repeats`` openings), and frame intervals while the mouse moves
    over points of one cell (each hover re-draws the highlighted point in all 24 cells); the meta-SNE map of 500
    representations with 50 trajectories: one complete draw (median of ``repeats``)."""
    chrome, reason = _chromium()
    if chrome is None:
        print(f"compare page rows skipped: {reason}")
        return []
    import base64
    import io

    import numpy as np
    from PIL import Image
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    rows: list[Row] = []
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        write_compare_logdir(Path(tmp))
        proc = _serve_logdir(tmp, port)
        try:
            chrome.get(f"http://127.0.0.1:{port}/data/plugin_entry.html?name=repviz")
            _until(chrome, f"return window.__repvizStats && window.__repvizStats.n === {GRID_N}", "the grid run")

            def view(name):
                chrome.find_element(By.CSS_SELECTOR, f'[data-name="view"] [data-value="{name}"]').click()

            cells = GRID_LAYERS * GRID_STEPS
            grid_ms, layout_ms = [], []
            for _ in range(repeats + 1):  # the first opening fetches the 24 embeddings; later ones redraw them
                view("main")
                chrome.execute_script("window.__repvizStats.gridDraws = 0;")
                view("grid")
                _until(chrome, f"return window.__repvizStats.gridDraws > 0 && window.__repvizStats.gridCells === {cells}",
                       "the grid")
                grid_ms.append(chrome.execute_script("return window.__repvizStats.gridDrawnMs"))
                layout_ms.append(chrome.execute_script("return window.__repvizStats.gridLayoutMs"))
            label = f"grid {GRID_LAYERS} x {GRID_STEPS} of {GRID_N:,} points"
            rows.append((f"{label}: view chosen to every cell drawn, first (fetch + draw)", grid_ms[0], "ms", ""))
            rows.append((f"{label}: of which creating the 24 plots (first)", layout_ms[0], "ms", ""))
            rows.append((f"{label}: view chosen to every cell drawn, again (median of {repeats})",
                         statistics.median(grid_ms[1:]), "ms", ""))
            # Points to hover: the centres of drawn points in the first cell.
            canvas = chrome.find_element(By.CSS_SELECTOR, '[data-testid="cell"] canvas')
            url = chrome.execute_script("return arguments[0].toDataURL('image/png')", canvas)
            pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")).astype(int)
            ink = pixels.sum(axis=-1) < 3 * 200
            solid = ink[1:-1, 1:-1] & ink[:-2, 1:-1] & ink[2:, 1:-1] & ink[1:-1, :-2] & ink[1:-1, 2:]
            ys, xs = np.nonzero(solid)
            scale = pixels.shape[1] / canvas.rect["width"]
            picks = np.random.default_rng(0).choice(len(xs), size=min(40, len(xs)), replace=False)
            chrome.execute_script(_RAF_RECORDER)
            actions = ActionChains(chrome, duration=0)
            for p in picks:
                actions.move_to_element_with_offset(canvas, (xs[p] + 1) / scale - canvas.rect["width"] / 2,
                                                    (ys[p] + 1) / scale - canvas.rect["height"] / 2).pause(0.05)
            actions.perform()
            frames = sorted(chrome.execute_script("window.__benchStop = true; return window.__benchFrames"))
            rows.append((f"grid: frame interval while hovering (median of {len(frames)})", statistics.median(frames),
                         "ms", "interactive"))
            rows.append(("grid: frame interval while hovering (90th percentile)", frames[int(0.9 * (len(frames) - 1))],
                         "ms", ""))
            rows.append(("grid: frame interval while hovering (longest)", frames[-1], "ms", ""))
            view("meta")
            _until(chrome, "return window.__repvizStats.metaPoints === 500", "the meta map")
            rows.append(("meta map of 500 representations: view chosen to first draw (fetch + draw)",
                         chrome.execute_script("return window.__repvizStats.metaShownMs"), "ms", ""))
            meta_ms = []
            for _ in range(repeats):
                before = chrome.execute_script("return window.__repvizStats.metaDraws")
                chrome.execute_script("window.dispatchEvent(new Event('resize'))")
                _until(chrome, f"return window.__repvizStats.metaDraws > {before}", "a meta map draw")
                meta_ms.append(chrome.execute_script("return window.__repvizStats.metaDrawnMs"))
            trajectories = chrome.execute_script("return window.__repvizStats.metaTrajectories")
            rows.append((f"meta map of 500 representations, {trajectories} trajectories: one complete draw "
                         f"(median of {repeats})", statistics.median(meta_ms), "ms", ""))
        finally:
            chrome.quit()
            _stop(proc)
    return rows


# --- issue 30: the tab at 100,000 points -----------------------------------------------------------------------
SCALE_GRID = (4, 4, 50_000)  # layers, snapshots, points
SCALE_TARGETS = {1_000: ("", "reference: the cost of a frame itself"), 50_000: ("", "<= 33 ms (30 fps)"),
                 100_000: ("<= 1500 ms", "<= 67 ms (15 fps)")}


def write_subset_logdir(path: Path, n: int) -> None:
    """Run "fade": ``n`` points at epoch 0, a seeded half of them at epoch 1 (a snapshot of a probe subset), all
    again at epoch 2, each with a stored embedding (class clusters that move)."""
    import numpy as np

    from repviz.subsets import stratified_subset

    writer, run, labels, rng = _synthetic_run(path, "fade", n)
    half = stratified_subset(n, n // 2, labels, random_state=0)
    for step, rows in ((0, None), (1, half), (2, None)):
        held = np.arange(n) if rows is None else rows
        Y = (rng.normal(size=(10, 2))[labels[held]] * 10 + rng.normal(size=(len(held), 2))).astype(np.float32)
        writer.write_activation("dense", step, Y, rows=rows, epoch=step)
        run.embeddings.write(KEY, "dense", step, Y, {"method": "pca", "scores": {}})


def scale_rows(repeats: int = 2) -> list[Row]:
    """The tab at scale (issue 30), in headless Chromium with software WebGL: a 4 x 4 grid of 50,000-point
    representations, time from choosing the Grid view to every cell drawn (each cell draws its seeded sample of
    20,000), first (fetch + draw) and again; the animation from a 100,000-point snapshot to one of a probe subset
    of 50,000 and back (frame intervals). The choice-to-draw and whole-probe animation rows at 1,000 (what a frame
    costs whatever it draws, on this machine now), 50,000 and 100,000 points come from :func:`page_rows`."""
    chrome, reason = _chromium()
    if chrome is None:
        print(f"scale rows skipped: {reason}")
        return []
    import numpy as np
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    layers, steps, n = SCALE_GRID
    rows: list[Row] = []
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        writer, run, labels, rng = _synthetic_run(Path(tmp), "grid", n, [f"l{i}" for i in range(layers)])
        for i in range(layers):
            for step in range(steps):
                Y = (rng.normal(size=(10, 2))[labels] * (3 + step) + rng.normal(size=(n, 2))).astype(np.float32)
                writer.write_activation(f"l{i}", step, Y, epoch=step)
                run.embeddings.write(KEY, f"l{i}", step, Y, {"method": "pca", "scores": {}})
        write_subset_logdir(Path(tmp), 100_000)
        proc = _serve_logdir(tmp, port)
        try:
            chrome.get(f"http://127.0.0.1:{port}/data/plugin_entry.html?name=repviz")
            _until(chrome, "return window.__repvizStats && window.__repvizStats.draws > 0", "the first run", 120)

            def view(name):
                chrome.find_element(By.CSS_SELECTOR, f'[data-name="view"] [data-value="{name}"]').click()

            Select(chrome.find_element(By.CSS_SELECTOR, 'select[name="run"]')).select_by_value("grid")
            _until(chrome, f"return window.__repvizStats.n === {n}", "the grid run", 120)
            grid_ms = []
            for _ in range(repeats + 1):
                view("main")
                chrome.execute_script("window.__repvizStats.gridDraws = 0;")
                view("grid")
                _until(chrome, f"return window.__repvizStats.gridDraws > 0 && window.__repvizStats.gridCells === "
                               f"{layers * steps}", "the grid", 120)
                grid_ms.append(chrome.execute_script("return window.__repvizStats.gridDrawnMs"))
            label = f"grid {layers} x {steps} of {n:,} points (20,000 drawn per cell)"
            rows.append((f"{label}: view chosen to every cell drawn, first (fetch + draw)", grid_ms[0], "ms",
                         "<= 2000 ms"))
            rows.append((f"{label}: again (median of {repeats})", statistics.median(grid_ms[1:]), "ms", ""))
            view("main")
            Select(chrome.find_element(By.CSS_SELECTOR, 'select[name="run"]')).select_by_value("fade")
            slider = chrome.find_element(By.CSS_SELECTOR, '[data-testid="slider"]')
            slider.send_keys(Keys.HOME)
            _until(chrome, "return window.__repvizStats.n === 100000", "the whole snapshot", 120)
            frames, costs = [], []
            for key, size in ((Keys.RIGHT, 50_000), (Keys.LEFT, 100_000)) * 2:
                before = chrome.execute_script("return window.__repvizStats.transitions")
                slider.send_keys(key)
                _until(chrome, f"return window.__repvizStats.transitions > {before} && "
                               f"window.__repvizStats.n === {size}", "a transition to or from the subset", 120)
                frames += chrome.execute_script("return window.__repvizStats.transitionFrames")
                costs += chrome.execute_script("return window.__repvizStats.transitionFrameMs")
            frames.sort()
            label = "100,000 points <-> a subset of 50,000 (shared points move, the others fade)"
            rows.append((f"page: animation frame interval, {label} (median of {len(frames)})",
                         statistics.median(frames), "ms", "<= 67 ms (15 fps)"))
            rows.append((f"page: animation frame rate, {label}", 1000 / statistics.median(frames), "fps", ""))
            rows.append((f"page: animation frame cost, {label} (median of {len(costs)}, start to picture)",
                         statistics.median(costs), "ms", ""))
        finally:
            chrome.quit()
            _stop(proc)
    return rows


def neighborhood_rows(path: Path, mnist: str | None, n: int = 20_000, width: int = 128, repeats: int = 3) -> list[Row]:
    """Neighbourhood change (k = 10) between two ``n``-point representations of width ``width``: server time
    through the WSGI app, cold (no graph cached; the worker process already started, its start-up timed on its
    own) and cached, median of ``repeats`` fresh log directories; the peer is scikit-learn's exact brute-force
    k-NN of the same two arrays in this process, and the k-NN recall of the graphs the route used against it.
    The worker's CPU time is reported too: on a machine shared with other work it tells what the wall time would
    be on idle cores (about CPU time / cores).

    The representations are two ReLU layers of random weights (He initialisation) on MNIST digits
    (``--mnist FILE``, else :func:`repviz.datasets.load_mnist`): the structure of real activations, which
    Gaussian noise lacks (NN-descent needs neighbourhoods to exist).
    """
    import numpy as np
    import psutil
    from sklearn.neighbors import NearestNeighbors
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz.compare import graph_variant
    from tensorboard_plugin_repviz.loader import RepvizLoader
    from werkzeug import test, wrappers

    from repviz.datasets import load_mnist
    from repviz.store import RunWriter, open_logdir

    (x, _), _ = load_mnist(mnist, download=False)
    if len(x) < n:
        raise SystemExit(f"--nc-n {n} needs {n} digits; the MNIST found has {len(x)} (pass --mnist FILE)")
    rng = np.random.default_rng(0)
    x = x[:n].reshape(n, -1).astype(np.float32) / 255
    first = np.maximum(x @ (rng.normal(size=(x.shape[1], width)) * np.sqrt(2 / x.shape[1])), 0).astype(np.float32)
    second = np.maximum(first @ (rng.normal(size=(width, width)) * np.sqrt(2 / width)), 0).astype(np.float32)
    base = "/data/plugin/repviz/"
    route = "neighborhood_change?run=nc&layer=dense&step=0&run2=nc&layer2=dense&step2=1&k=10"
    starts, colds, cpus, cached, recalls = [], [], [], [], []
    peers = []
    for rep in range(repeats):
        logdir = path / f"nc-{rep}"
        for name, size in (("warm", 100), ("nc", n)):
            writer = RunWriter(logdir / name)
            writer.begin({"fingerprint": {"model": "nc", "probe": name},
                          "layers": {"dense": {"stored_shape": [size, width]}}})
            writer.write_probe(np.arange(size))
            for step, array in enumerate((first, second)):
                writer.write_activation("dense", step, array[:size], epoch=step)
        plugin = RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
        client = test.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        try:
            start = time.perf_counter()  # starts the worker process (numba, kernels loaded) on a tiny run
            warm = route.replace("run=nc", "run=warm").replace("run2=nc", "run2=warm")
            assert client.get(base + warm).status_code == 200
            starts.append(time.perf_counter() - start)
            workers = psutil.Process().children(recursive=True)
            cpu = sum(sum(w.cpu_times()[:2]) for w in workers)
            start = time.perf_counter()
            response = client.get(base + route)
            colds.append(time.perf_counter() - start)
            cpus.append(sum(sum(w.cpu_times()[:2]) for w in workers) - cpu)
            assert response.status_code == 200, response.data[:300]
            cached.append(_median_ms(lambda client=client: client.get(base + route), 5) / 1000)
        finally:
            plugin.jobs.close()
        run = open_logdir(logdir).run("nc")
        start = time.perf_counter()
        exact = [NearestNeighbors(n_neighbors=11, algorithm="brute").fit(a).kneighbors(a)[1][:, 1:]
                 for a in (first, second)]
        peers.append(time.perf_counter() - start)
        for step, ref in enumerate(exact):
            graph = run.artifact("neighbor_graph").cached("dense", step, graph_variant(n, 10))
            recalls.append(float(np.mean((graph[:, :, None] == ref[:, None, :]).any(axis=2))))
    cold, peer = statistics.median(colds), statistics.median(peers)
    label = f"{n:,} x {width}, k = 10"
    return [(f"neighbourhood change {label}: worker start (first request, tiny run)", statistics.median(starts),
             "s", ""),
            (f"neighbourhood change {label}: cold (both graphs computed), median of {repeats}", cold, "s", "<= 2 s"),
            (f"neighbourhood change {label}: cold, CPU time of the worker (both cores), median",
             statistics.median(cpus), "s", ""),
            (f"neighbourhood change {label}: cached, median", statistics.median(cached), "s", "cached"),
            (f"peer: scikit-learn exact brute-force k-NN of both, median of {repeats}", peer, "s", ""),
            ("cold ratio: peer / ours", peer / cold, "x", ""),
            (f"k-NN recall of the graphs used ({graph_variant(n, 10)}) vs exact, min", min(recalls), "", "")]


def print_table(rows: list[Row]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>10}  unit  target")
    for name, value, unit, target in rows:
        print(f"{name:<{width}}  {value:>10.3f}  {unit:<4}  {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=70_000, help="probe points")
    ap.add_argument("--repeats", type=int, default=50, help="requests per route (median)")
    ap.add_argument("--starts", type=int, default=3, help="TensorBoard starts per variant (median)")
    ap.add_argument("--runs", type=int, default=300, help="runs in the listing benchmark (0: skip it)")
    ap.add_argument("--skip-startup", action="store_true", help="no import and TensorBoard start-up rows")
    ap.add_argument("--skip-page", action="store_true", help="no browser rows")
    ap.add_argument("--skip-compare", action="store_true", help="no browser rows of the grid and the meta map")
    ap.add_argument("--scale", action="store_true",
                    help="only the tab at scale (issue 30): choice to draw and animation at 50,000 and 100,000 "
                         "points, a 4 x 4 grid of 50,000, the animation to a probe subset")
    ap.add_argument("--neighborhood", action="store_true",
                    help="only the neighbourhood-change rows (20,000 x 128 representations; --nc-n to change n)")
    ap.add_argument("--nc-n", type=int, default=20_000, help="points of the neighbourhood-change representations")
    ap.add_argument("--mnist", help="MNIST .npz for the neighbourhood-change rows (default: repviz.datasets)")
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.scale:
        load = os.getloadavg()[0]
        rows = page_rows(100_000, sizes=(100, 1_000, 50_000), targets=SCALE_TARGETS) + scale_rows()
        print(f"{os.cpu_count()} cores, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
              f"(other processes share them); headless Chromium, software WebGL (SwiftShader), 1280 x 800")
        print_table(rows)
        return
    if args.neighborhood:
        with tempfile.TemporaryDirectory() as tmp:
            rows = neighborhood_rows(Path(tmp), args.mnist, args.nc_n)
        print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other processes share them)")
        print_table(rows)
        return
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp)
        write_logdir(logdir / "one", args.n)
        rows = server_rows(logdir / "one", args.repeats)
        if args.runs:
            rows += many_runs_rows(logdir / "many", args.runs)
        if not args.skip_startup:
            rows += import_rows(args.starts) + startup_rows(logdir / "one", args.starts)
    if not args.skip_page:
        rows += page_rows(args.n)
    if not args.skip_compare:
        rows += compare_page_rows()
    print(f"n = {args.n} points, {os.cpu_count()} cores")
    print_table(rows)


if __name__ == "__main__":
    main()
