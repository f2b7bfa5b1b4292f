"""Helpers of the notebook tests (tests/notebook): a real JupyterLab server started by the test, and a notebook
driven through JupyterLab's own page in headless Chromium (cells run with Shift+Enter, outputs read from the DOM).

The server and browser fixtures are in conftest.py; the Chromium flags, waits and pixel readers are the tab tests'
(tests/browser/pagekit.py). A test module calls ``require_lab()`` first, which skips it with the reason when
JupyterLab, Chromium, its driver, Selenium or Pillow is missing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
from pagekit import actions, canvas, ink, require_browser, wait

try:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # require_browser() says what is missing
    pass

REPO = Path(__file__).resolve().parents[2]
#: Settings that keep a test's JupyterLab quiet and offline: no news or update toast, no extension manager.
SETTINGS = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True}}
PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/extensionmanager-extension": True,
                                      "@jupyterlab/apputils-extension:announcements": True}}
PROMPT_DONE = re.compile(r"\[\d+\]")


def require_lab() -> None:
    """Skip the calling test module unless JupyterLab can be started and driven in headless Chromium."""
    try:
        import jupyterlab  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError:
        pytest.skip("the notebook tests need jupyterlab (pip install '.[test]')", allow_module_level=True)
    require_browser()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A ``jupyter lab`` process on 127.0.0.1 and a free port with a token, rooted in a temporary directory, with
    its config, data, runtime, settings and workspaces in temporary directories too; in a process group of its own
    (its kernels are its children), so :meth:`stop` ends all of it."""

    def __init__(self, home: Path, env: dict | None = None):
        self.root = home / "root"
        self.token = os.urandom(12).hex()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        dirs = {name: home / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython")}
        for d in [self.root, *dirs.values()]:
            d.mkdir(parents=True, exist_ok=True)
        (dirs["config"] / "labconfig").mkdir()
        (dirs["config"] / "labconfig" / "page_config.json").write_text(json.dumps(PAGE_CONFIG))
        for name, values in SETTINGS.items():
            (dirs["settings"] / name).parent.mkdir(parents=True, exist_ok=True)
            (dirs["settings"] / name).write_text(json.dumps(values))
        path = os.pathsep.join(p for p in [str(REPO), str(REPO / "tb_plugin"), os.environ.get("PYTHONPATH")] if p)
        self.env = {**os.environ, "PYTHONPATH": path, "JUPYTER_CONFIG_DIR": str(dirs["config"]),
                    "JUPYTER_DATA_DIR": str(dirs["data"]), "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
                    "IPYTHONDIR": str(dirs["ipython"]), "JUPYTER_PLATFORM_DIRS": "1", "MPLBACKEND": "Agg",
                    "KERAS_BACKEND": os.environ.get("KERAS_BACKEND", "tensorflow"), "TF_CPP_MIN_LOG_LEVEL": "2",
                    **(env or {})}
        self.log_path = home / "jupyterlab.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             "--port-retries=0", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
             f"--LabApp.user_settings_dir={dirs['settings']}", f"--LabApp.workspaces_dir={dirs['workspaces']}",
             "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False",
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            cwd=self.root, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def api(self, path: str, method: str = "GET"):
        """A call of the server's REST API (JSON answer, or None when it has no body)."""
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.api("status")
                return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"JupyterLab did not answer /api/status; see {self.log_path}")
            time.sleep(0.2)

    def shut_kernels(self) -> None:
        """Shut down every session's kernel (what a test opened), waiting for the server to confirm."""
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")

    def stop(self) -> list[int]:
        """Shut the kernels down, then end the server's process group; returns the PIDs still alive after it (none,
        unless something leaked)."""
        import psutil

        try:
            self.shut_kernels()
        except OSError:
            pass
        group = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == self.proc.pid]
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        _, alive = psutil.wait_procs(group, timeout=10)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait(timeout=10)
        self._log.close()
        return [p.pid for p in psutil.wait_procs(alive, timeout=5)[1]]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of these code cells on the python3 kernel (written atomically: JupyterLab may read it at once)."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    tmp = path.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    tmp.replace(path)
    return path


class Notebook:
    """One notebook open in JupyterLab's page: run cells with Shift+Enter and read their outputs."""

    def __init__(self, driver, lab: Lab, name: str, cells: list[str]):
        self.driver, self.lab, self.name = driver, lab, name
        write_notebook(lab.root / name, cells)
        driver.get(f"{lab.url}/lab/tree/{name}?reset&token={lab.token}")
        wait(driver, lambda d: len(self._cells()) == len(cells), f"notebook {name} with {len(cells)} cells", 120)
        self.wait_idle(timeout=120)
        self._hide_left_area()

    def _hide_left_area(self) -> None:
        """Give the notebook the page's width: the file browser's side area closed, as with Ctrl+B."""
        hidden = "const e = document.querySelector('#jp-left-stack'); return !e || e.classList.contains('lm-mod-hidden')"
        if not self.driver.execute_script(hidden):
            self.driver.find_element(By.CSS_SELECTOR, ".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
            wait(self.driver, lambda d: d.execute_script(hidden), "the left side area closed")

    def _cells(self):
        return self.driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")

    def cell(self, i: int):
        return self._cells()[i]

    def kernel_status(self) -> str:
        return self.driver.execute_script(
            "const e = document.querySelector('.jp-Notebook-ExecutionIndicator');"
            "return e ? e.getAttribute('data-status') : null") or ""

    def wait_idle(self, timeout: float = 120) -> None:
        """Wait until the kernel is started and idle (the toolbar's execution indicator)."""
        wait(self.driver, lambda d: not self._kernel_dialog() and self.kernel_status() == "idle", "an idle kernel",
             timeout)

    def _kernel_dialog(self) -> bool:
        """Accept JupyterLab's "Select Kernel" dialog (Python 3 chosen) where it shows one: it does when a kernel
        is slow to start on a busy machine. True when there was one."""
        buttons = self.driver.find_elements(By.CSS_SELECTOR, ".jp-Dialog .jp-Dialog-button.jp-mod-accept")
        for button in buttons:
            try:
                button.click()
            except WebDriverException:
                pass
        return bool(buttons)

    def prompt(self, i: int) -> str:
        return self.driver.execute_script(
            "return arguments[0].querySelector('.jp-InputPrompt').innerText", self.cell(i)).strip()

    def start(self, i: int) -> None:
        """Run cell ``i`` with Shift+Enter from its focused editor and return once the page shows the kernel took it
        (``[*]``, or a new execution count). A key press that reached no editor (the page still laying itself out)
        is pressed again; the page marks a queued cell at once, so one that was taken is never run twice."""
        before = self.prompt(i)

        def taken(_) -> bool:
            prompt = self.prompt(i)
            return "*" in prompt or (bool(PROMPT_DONE.search(prompt)) and prompt != before)

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._kernel_dialog():
                self.wait_idle()
            try:
                editor = self.cell(i).find_element(By.CSS_SELECTOR, ".jp-InputArea-editor .cm-content")
                self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", editor)
                editor.click()
                wait(self.driver, lambda d, e=editor: d.execute_script(
                    "return arguments[0].contains(document.activeElement)", e), f"cell {i}'s editor focused", 5)
                actions(self.driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
                wait(self.driver, taken, f"cell {i} queued", timeout=5)
                return
            except (AssertionError, WebDriverException):  # not laid out yet, or covered for a moment
                pass
        raise AssertionError(f"cell {i} did not start with Shift+Enter (prompt {self.prompt(i)!r})")

    def run(self, i: int, timeout: float = 120) -> str:
        """Run cell ``i`` and wait for it to finish; returns its output text. A cell that raised fails the test
        with its traceback's last line."""
        self.start(i)
        return self.finish(i, timeout)

    def finish(self, i: int, timeout: float = 120) -> str:
        wait(self.driver, lambda d: PROMPT_DONE.search(self.prompt(i)), f"cell {i} to finish", timeout)
        errors = self.cell(i).find_elements(By.CSS_SELECTOR, '[data-mime-type="application/vnd.jupyter.error"]')
        if errors:
            raise AssertionError(f"cell {i} raised: {errors[0].text.strip().splitlines()[-1:]}")
        return self.output(i)

    def screenshot(self, path: Path, i: int = 0) -> None:
        """Save the page as a PNG with cell ``i``'s output scrolled to the top of the notebook."""
        self.driver.switch_to.default_content()
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'})",
                                   self.cell(i).find_element(By.CSS_SELECTOR, ".jp-Cell-outputWrapper"))
        self.driver.save_screenshot(str(path))

    def output(self, i: int) -> str:
        return self.driver.execute_script(
            "return [...arguments[0].querySelectorAll('.jp-OutputArea-output')].map(e => e.innerText).join('\\n')",
            self.cell(i))

    def close(self) -> None:
        """Shut the notebook's kernel down (the next notebook starts its own)."""
        self.lab.shut_kernels()


def write_clusters(root: Path, name: str = "demo", n: int = 300, steps: int = 3) -> Path:
    """Run ``name`` under log directory ``root``, written through the store: ``n`` probe points in 10 classes with
    8x8 thumbnails, layer "dense" at epochs 0 .. steps - 1 and a stored 2-D embedding (key ``pca-lab``) of each
    snapshot, 10 clusters spreading out from one snapshot to the next (so a snapshot change moves every point)."""
    import numpy as np

    from repviz.store import RunWriter, open_logdir

    rng = np.random.default_rng(0)
    labels = np.arange(n) % 10
    writer = RunWriter(root / name)
    writer.begin({"fingerprint": {"model": name, "probe": "synthetic"}, "step_unit": "epoch",
                  "layers": {"dense": {"class": "Dense", "stored_shape": [n, 8], "output_shape": [None, 8],
                                       "reduction": {"kind": "none"}}}})
    writer.write_probe(np.arange(n), labels, rng.integers(0, 256, (n, 8, 8), dtype=np.uint8))
    run = open_logdir(root).run(name)
    run.embeddings.write_method("pca-lab", {"method": "pca", "params": {}, "align": "snapshots", "default": True})
    centres = rng.normal(size=(10, 2)) * 10
    for step in range(steps):
        writer.write_activation("dense", step, rng.normal(size=(n, 8)).astype(np.float32), epoch=step)
        Y = (centres[labels] * (1 + step) + rng.normal(size=(n, 2))).astype(np.float32)
        run.embeddings.write("pca-lab", "dense", step, Y, {"method": "pca", "scores": {}})
    return root


def enter_widget(driver, cell, timeout: float = 60) -> None:
    """Switch into the repviz widget's page shown in ``cell``'s output: its iframe started, drawn once, with points
    in the canvas, and the canvas no longer resized by the notebook laying out the new output (the same size at
    three looks in a row)."""
    frame = wait(driver, lambda d: [f for f in cell.find_elements(By.CSS_SELECTOR, "iframe.repviz-frame")
                                    if f.get_attribute("data-ready") == "1"], "the widget's page", timeout)[0]
    driver.switch_to.frame(frame)
    wait(driver, lambda d: (d.execute_script("return window.__repvizStats") or {}).get("draws", 0) >= 1,
         "the widget's first draw", timeout)
    sizes = []

    def settled(d) -> bool:
        sizes.append(d.execute_script("const c = document.querySelector('canvas.scatter');"
                                      "return c ? [c.width, c.height] : null"))
        return len(sizes) >= 3 and sizes[-1] is not None and sizes[-1] == sizes[-2] == sizes[-3]

    wait(driver, settled, "the widget's canvas at its size", timeout)
    wait(driver, lambda d: ink(canvas(d)).sum() > 300, "points in the widget's canvas", timeout)


def drag_lasso(driver, radius: float = 120, centre=(0, 0), points: int = 24) -> None:
    """Select with the lasso on the main scatter: a closed loop of ``radius`` CSS pixels round ``centre`` (from the
    canvas's centre); then the mouse off the plot and the mode back to panning."""
    import math

    driver.find_element(By.CSS_SELECTOR, '[data-name="mode"] [data-value="lasso"]').click()
    canvas = driver.find_element(By.CSS_SELECTOR, "canvas.scatter")
    loop = [(centre[0] + radius * math.cos(2 * math.pi * k / points),
             centre[1] + radius * math.sin(2 * math.pi * k / points)) for k in range(points + 1)]
    drag = actions(driver).move_to_element_with_offset(canvas, *map(round, loop[0])).click_and_hold()
    for (x0, y0), (x1, y1) in zip(loop, loop[1:]):
        drag = drag.move_by_offset(round(x1) - round(x0), round(y1) - round(y0)).pause(0.02)
    drag.release().perform()
    actions(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, '[data-testid="legend"]')).perform()
    driver.find_element(By.CSS_SELECTOR, '[data-name="mode"] [data-value="pan"]').click()
