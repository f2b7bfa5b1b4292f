"""Screenshots of every view of the Repviz tab at 1280, 1600 and 1920 px wide, to be looked at (issue #41).

On a copy of a demo's log directory (``repviz demo LOGDIR`` first) with two additions: a run under a long name (a
copy of ``relu/seed1``) and metadata on ``relu/seed0`` (two text columns with long values). Starts TensorBoard and
headless Chromium as the browser tests do (tests/browser/pagekit.py) and saves, per width: Main (t-SNE, by label),
Main coloured by a metadata column, Main with the placed training digits (rings), Main on the long-named run, Grid
(layers × snapshots), Grid (layers × runs, from the CNN: the MLPs' layers paired by depth), Runs, Meta map and
Similarity (a cell hovered: the pair's scatters).

    python benchmarks/shots_every_view.py --logdir /tmp/sg/logs            # PNGs under /tmp/repviz-shots/
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "browser"), str(ROOT), str(ROOT / "tb_plugin")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pagekit as pk  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

SIZES = {1280: 800, 1600: 900, 1920: 1080}
LONG = "an-mlp-with-a-rather-long-name/seed-number-0"
SETTLE = 2.0  # seconds for animations (700 ms) and late panels after what a shot waits for


def prepare(demo: Path, logs: Path) -> None:
    """The demo's log directory copied to `logs`, with the long-named run and metadata on relu/seed0."""
    from repviz.store import open_logdir, write_metadata

    if logs.exists():
        shutil.rmtree(logs)
    shutil.copytree(demo, logs)
    shutil.copytree(logs / "relu" / "seed1", logs / LONG)
    n = len(open_logdir(logs).run("relu/seed0").probe)
    write_metadata(logs / "relu" / "seed0", {"source": ["handwritten digit, scanned from a census form"] * n,
                                             "writer": [f"census employee number {i % 7}" for i in range(n)]})


def serve(logs: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tb_plugin"), os.environ.get("PYTHONPATH", "")])}
    log = open(tempfile.mktemp(prefix="tb-shots-", suffix=".log"), "w")
    proc = subprocess.Popen([sys.executable, "-c", pk.LAUNCH, "--logdir", str(logs), "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def listed(base: str, proc) -> None:
    """Wait until TensorBoard lists the plugin as enabled."""
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/data/plugins_listing", timeout=5) as r:
                if json.loads(r.read()).get("repviz", {}).get("enabled"):
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("TensorBoard did not list the Repviz plugin")
        time.sleep(0.5)


def browser(base: str):
    options = webdriver.ChromeOptions()
    options.binary_location = pk.CHROMIUM
    for flag in [*pk.CHROMIUM_FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='repviz-chromium-')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(pk.CHROMEDRIVER), options=options)
    deadline = time.monotonic() + 120
    while True:
        driver.get(f"{base}/#repviz")
        frames = driver.find_elements(By.CSS_SELECTOR, "iframe")
        if frames:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("TensorBoard did not show the Repviz tab")
        time.sleep(2)
    driver.switch_to.frame(frames[0])
    pk.wait(driver, lambda d: pk.stats(d)["draws"] >= 1, "the first draw", 120)
    return driver


def view(driver, name):
    driver.find_element(By.CSS_SELECTOR, f'[data-name="view"] [data-value="{name}"]').click()


def main_on(driver, run, colour="label"):
    view(driver, "main")
    pk.select(driver, "run", run)
    pk.select(driver, "method", "tsne")
    driver.find_element(By.CSS_SELECTOR, f'[data-name="color"] [data-value="{colour}"]').click()
    pk.wait(driver, lambda d: pk.ink(pk.canvas(d)).sum() > 500, "the main view drawn")


def shots(driver, out: Path, width: int) -> list[str]:
    """Every view at this width; the files written."""
    written = []

    def shot(name):
        time.sleep(SETTLE)
        pk.shot(driver, out, f"{width}-{name}")
        written.append(f"{width}-{name}.png")

    main_on(driver, "relu/seed0")
    shot("main")
    column = driver.find_element(By.CSS_SELECTOR, 'select[name="color-column"]')
    from selenium.webdriver.support.ui import Select

    Select(column).select_by_value("meta:writer")
    pk.wait(driver, lambda d: pk.ink(pk.canvas(d)).sum() > 500, "the metadata colours")
    pk.hover_until(driver, lambda d: "probe id" in pk.text(d, '[data-testid="hover"]'), "the hover card")
    shot("main-metadata")
    driver.find_element(By.CSS_SELECTOR, '[data-name="color"] [data-value="label"]').click()
    pk.wait(driver, lambda d: pk.text(d, '[data-testid="step"]').startswith("epoch 8"), "the last epoch")
    pk.wait(driver, lambda d: pk.ink(pk.canvas(d, "canvas.overlay-canvas")).sum() > 200, "the placed rings")
    shot("main-placed")
    main_on(driver, LONG)
    shot("main-long-name")
    view(driver, "grid")
    pk.select(driver, "grid-rows", "layers")
    pk.select(driver, "grid-cols", "snapshots")
    pk.wait(driver, lambda d: pk.stats(d)["gridCells"] > 0, "the grid")
    shot("grid-layers-snapshots")
    view(driver, "main")
    pk.select(driver, "run", "cnn/seed0")
    view(driver, "grid")
    pk.select(driver, "grid-cols", "runs")
    pk.wait(driver, lambda d: pk.stats(d)["gridCells"] > 20, "the layers × runs grid")
    shot("grid-layers-runs")
    view(driver, "runs")
    shot("runs")
    view(driver, "meta")
    pk.wait(driver, lambda d: pk.stats(d).get("metaPoints"), "the meta map")
    shot("meta")
    view(driver, "main")
    pk.select(driver, "run", "relu/seed0")
    view(driver, "similarity")
    pk.select(driver, "similarity-run", "relu/seed0")
    pk.select(driver, "similarity-run2", "relu/seed1")  # the pair the demo compared
    layout = pk.wait(driver, lambda d: pk.stats(d).get("similarityLayout"), "the heatmap")
    canvas = driver.find_element(By.CSS_SELECTOR, '[data-testid="similarity"]')
    x = layout["x"] + 1.5 * layout["cell"] - canvas.rect["width"] / 2
    y = layout["y"] + 1.5 * layout["cell"] - canvas.rect["height"] / 2
    ActionChains(driver).move_to_element_with_offset(canvas, x, y).pause(0.1).move_by_offset(1, 0).perform()
    try:
        pk.wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "canvas.pair-canvas")) == 2, "the pair", 30)
    except AssertionError as e:  # shot anyway: the picture says what is missing
        print(f"{width}: {e}", file=sys.stderr)
    shot("similarity")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True, type=Path, help="a demo's log directory (copied, not changed)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/repviz-shots"))
    parser.add_argument("--widths", type=int, nargs="*", default=sorted(SIZES))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    logs = args.out.parent / f"{args.out.name}-logs"
    prepare(args.logdir, logs)
    proc, base = serve(logs)
    driver = None
    try:
        listed(base, proc)
        driver = browser(base)
        for width in args.widths:
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": width, "height": SIZES[width], "deviceScaleFactor": 1, "mobile": False})
            for name in shots(driver, args.out, width):
                print(args.out / name, flush=True)
    finally:
        if driver is not None:
            driver.quit()
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()
