"""Fixtures of the browser tests: a real TensorBoard process over a log directory written by the real callback
and embedded by the pipeline, and headless Chromium (software WebGL) on its Repviz tab. Module-scoped: each test
module gets its own server, log directory and browser, so what one module writes cannot change another's page.
Screenshots go to a temporary directory (printed at the end, or ``REPVIZ_SCREENSHOTS``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
from pagekit import LAUNCH, chromium, screenshot_dir, stats, wait, write_logdir

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A TensorBoard process on 127.0.0.1 and a free port over a log directory still empty (it starts while the
    runs are trained); stopped by its PID."""
    root = tmp_path_factory.mktemp("tab_logs")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tb_plugin"),
                                                        os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path_factory.mktemp("tb") / "tensorboard.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "--logdir", str(root), "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    yield root, f"http://127.0.0.1:{port}", proc, log.name
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def logdir(server):
    """Run "relu": PCA of both layers and t-SNE of "hidden" at every epoch; run "tanh" (same probe): nothing
    embedded."""
    root = server[0]
    write_logdir(root)
    return root


@pytest.fixture(scope="module")
def tensorboard(server, logdir):
    """The base URL, once TensorBoard lists the plugin as enabled for the written log directory."""
    _, base, proc, log = server
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{base}/data/plugins_listing", timeout=5) as r:
                listing = json.loads(r.read())
            if listing.get("repviz", {}).get("enabled"):
                return base
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"TensorBoard did not list the plugin as enabled; see {log}")
        time.sleep(0.3)


@pytest.fixture(scope="module")
def shots():
    out = screenshot_dir("repviz-tab-")
    yield out
    print(f"\nscreenshots of the Repviz tab: {out}")


@pytest.fixture(scope="module")
def browser(request, tensorboard):
    """Chromium for the module; with the page's animations on where the module says ``MOTION = True``."""
    with chromium(motion=getattr(request.module, "MOTION", False)) as driver:
        yield driver


@pytest.fixture(scope="module")
def tab(browser, tensorboard):
    """TensorBoard's own page on the Repviz tab, switched into the plugin's iframe, first picture drawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{tensorboard}/#repviz")
    frame = WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "iframe"))[0]
    assert "plugin_entry.html?name=repviz" in frame.get_attribute("src")
    browser.switch_to.frame(frame)
    wait(browser, lambda d: stats(d)["draws"] >= 1, "the first draw")
    return browser


