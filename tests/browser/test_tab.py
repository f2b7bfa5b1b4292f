"""The Repviz tab in a real browser: headless Chromium (software WebGL) through Selenium, served by a real
TensorBoard process over a log directory written by the real callback and embedded by the pipeline.

What a person would check by hand, read from the page's own pixels: points are drawn, hovering shows the input's
thumbnail, the snapshot slider changes the picture, a rectangle selection survives a snapshot change, a method
missing from the store is computed on demand, and a traversal URL gets no file. Screenshots go to a temporary
directory (printed at the end of the session, see ``REPVIZ_SCREENSHOTS`` to choose it).

Needs ``chromium`` and ``chromedriver`` (Debian: ``apt-get install chromium chromium-driver``; CI installs them);
skipped with the reason when they are missing.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("headless browser tests need chromium and chromedriver on PATH "
                "(Debian: apt-get install chromium chromium-driver)", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install '.[test]')")
Image = pytest.importorskip("PIL.Image", reason="Pillow reads the canvas pixels")

from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

import repviz  # noqa: E402
from repviz.datasets import BUNDLED_MNIST, load_mnist  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
N_PROBE = 300
EPOCHS = 3
# Software WebGL (SwiftShader through ANGLE): what CI machines without a GPU have.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--window-size=1280,800"]
# Start TensorBoard with the plugin from this checkout (an installed wheel registers it by entry point instead).
LAUNCH = textwrap.dedent("""
    import sys
    from tensorboard import default, program
    from tensorboard_plugin_repviz.loader import RepvizLoader
    tb = program.TensorBoard(plugins=default.get_static_plugins() + [RepvizLoader()])  # installed or not
    tb.configure(argv=sys.argv)
    sys.exit(tb.main())
""")


def _train(run_dir, activation, x, y, xp, yp):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(32, activation=activation, name="hidden"),
                              keras.layers.Dense(10, activation="softmax", name="probs")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    logger = repviz.ActivationLogger(run_dir, probe=(xp, yp), layers=["hidden", "probs"])
    model.fit(x, y, epochs=EPOCHS, batch_size=64, verbose=0, callbacks=[logger])


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
    (x, y), (xt, yt) = load_mnist(BUNDLED_MNIST)
    x, y = x[:1500].astype(np.float32) / 255, y[:1500]
    xp, yp = xt[:N_PROBE].astype(np.float32) / 255, yt[:N_PROBE]
    _train(root / "relu", "relu", x, y, xp, yp)
    _train(root / "tanh", "tanh", x, y, xp, yp)
    repviz.embed_logdir(root, methods=["pca"], runs=["relu"], progress=False)
    repviz.embed_logdir(root, methods=["tsne"], params={"tsne": {"max_iter": 400}}, runs=["relu"],
                        layers=["hidden"], progress=False)
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
    out = Path(os.environ.get("REPVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix="repviz-tab-"))
    out.mkdir(parents=True, exist_ok=True)
    yield out
    print(f"\nscreenshots of the Repviz tab: {out}")


@pytest.fixture(scope="module")
def browser(tensorboard):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="repviz-chromium-")
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def tab(browser, tensorboard):
    """TensorBoard's own page on the Repviz tab, switched into the plugin's iframe, first picture drawn."""
    browser.get(f"{tensorboard}/#repviz")
    frame = WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "iframe"))[0]
    assert "plugin_entry.html?name=repviz" in frame.get_attribute("src")
    browser.switch_to.frame(frame)
    _wait(browser, lambda d: _stats(d)["draws"] >= 1, "the first draw")
    return browser


# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------

def _wait(driver, condition, what, timeout=60):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)
    except TimeoutException:
        errors = driver.find_elements(By.CSS_SELECTOR, '[data-testid="error"], .job.failed')
        raise AssertionError(f"timed out waiting for {what}; page says: {[e.text for e in errors]}") from None


def _stats(driver) -> dict:
    return driver.execute_script("return window.__repvizStats || {draws: 0, transitions: 0}")


def _canvas(driver, selector="canvas.scatter") -> np.ndarray:
    """The canvas's own pixels (RGBA) as the page drew them."""
    url = driver.execute_script(f"return document.querySelector({selector!r}).toDataURL('image/png')")
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGBA")
    return np.asarray(image)


def _ink(pixels: np.ndarray) -> np.ndarray:
    """Mask of pixels where something was drawn (opaque and not the white background)."""
    rgb = pixels[..., :3].astype(int)
    return (pixels[..., 3] > 0) & (rgb.sum(axis=-1) < 3 * 235)


def _shot(driver, shots, name):
    driver.switch_to.default_content()
    driver.save_screenshot(str(shots / f"{name}.png"))
    driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe"))


def _select(driver, name, text_prefix):
    select = Select(driver.find_element(By.CSS_SELECTOR, f'select[name="{name}"]'))
    for option in select.options:
        if option.text.startswith(text_prefix):
            select.select_by_visible_text(option.text)
            return
    raise AssertionError(f"no {name} option starting with {text_prefix!r}: {[o.text for o in select.options]}")


def _step_once(driver):
    """One snapshot back (forward from the first) with the keyboard, waiting for the animated transition."""
    before = _stats(driver)["transitions"]
    slider = driver.find_element(By.CSS_SELECTOR, '[data-testid="slider"]')
    slider.send_keys(Keys.RIGHT if slider.get_attribute("value") == "0" else Keys.LEFT)
    _wait(driver, lambda d: _stats(d)["transitions"] > before, "the snapshot transition")


# --------------------------------------------------------------------------------------------------------------
# tests (one browser session, in file order)
# --------------------------------------------------------------------------------------------------------------

def test_pick_a_layer_draws_every_point(tab, shots):
    _select(tab, "layer", "hidden")
    _select(tab, "method", "tsne")
    _wait(tab, lambda d: "trustworthiness" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the info line")
    _wait(tab, lambda d: _stats(d)["n"] == N_PROBE, "the draw of the hidden layer")
    ink = _ink(_canvas(tab))
    # 300 points of a few pixels each: thousands of coloured pixels, spread over the plot, not one blot.
    assert ink.sum() > 2000
    rows, cols = np.nonzero(ink)
    assert np.ptp(rows) > ink.shape[0] / 3 and np.ptp(cols) > ink.shape[1] / 4
    legend = tab.find_element(By.CSS_SELECTOR, '[data-testid="legend"]').text
    assert "Label" in legend and sum(int(w) for w in legend.split()[1:] if w.isdigit()) >= N_PROBE
    _shot(tab, shots, "1-layer")


def test_hover_shows_the_thumbnail_and_prediction(tab, shots):
    pixels = _canvas(tab)
    canvas = tab.find_element(By.CSS_SELECTOR, "canvas.scatter")
    scale = pixels.shape[1] / canvas.rect["width"]
    # The centre of a drawn point: an inked pixel whose neighbourhood is inked too.
    ink = _ink(pixels)
    solid = ink[2:-2, 2:-2] & ink[:-4, 2:-2] & ink[4:, 2:-2] & ink[2:-2, :-4] & ink[2:-2, 4:]
    ys, xs = np.nonzero(solid)
    y, x = (ys[len(ys) // 2] + 2) / scale, (xs[len(xs) // 2] + 2) / scale
    ActionChains(tab).move_to_element_with_offset(canvas, x - canvas.rect["width"] / 2,
                                                  y - canvas.rect["height"] / 2).pause(0.2).move_by_offset(1, 0).perform()
    thumb = _wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="hover"] canvas.thumb'), "the thumbnail")
    image = _canvas(tab, '[data-testid="hover"] canvas.thumb')
    assert image.shape[:2] == (28, 28) and image[..., :3].std() > 20  # a digit, not a blank square
    card = tab.find_element(By.CSS_SELECTOR, '[data-testid="hover"]').text
    for field in ("label", "prediction", "confidence", "probe id"):
        assert field in card
    assert thumb[0].is_displayed()
    _shot(tab, shots, "2-hover")


def test_slider_changes_the_picture(tab, shots):
    before = _canvas(tab)
    step_before = tab.find_element(By.CSS_SELECTOR, '[data-testid="step"]').text
    _step_once(tab)
    after = _canvas(tab)
    assert tab.find_element(By.CSS_SELECTOR, '[data-testid="step"]').text != step_before
    assert (np.abs(before.astype(int) - after.astype(int)).sum(axis=-1) > 30).sum() > 500
    assert _stats(tab)["transitionFrames"]  # animated (frames drawn between the two layouts), not a jump
    _shot(tab, shots, "3-slider")
    # Play runs to the last snapshot and stops there.
    transitions = _stats(tab)["transitions"]
    tab.find_element(By.CSS_SELECTOR, '[data-testid="play"]').click()
    _wait(tab, lambda d: _stats(d)["transitions"] > transitions and
          d.find_element(By.CSS_SELECTOR, '[data-testid="play"]').text == "▶", "play to reach the end")
    assert tab.find_element(By.CSS_SELECTOR, '[data-testid="step"]').text == f"epoch {EPOCHS}"


def _rectangle_select(driver) -> int:
    driver.find_element(By.CSS_SELECTOR, '[data-name="mode"] [data-value="rectangle"]').click()
    canvas = driver.find_element(By.CSS_SELECTOR, "canvas.scatter")
    drag = ActionChains(driver).move_to_element_with_offset(canvas, -160, -130).click_and_hold()
    for _ in range(10):
        drag = drag.move_by_offset(32, 26).pause(0.03)
    drag.release().perform()
    # Mouse off the plot: no hover highlight in the pixels compared below.
    ActionChains(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, '[data-testid="legend"]')).perform()
    driver.find_element(By.CSS_SELECTOR, '[data-name="mode"] [data-value="pan"]').click()
    return _selected(driver)


def _selected(driver) -> int:
    count = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="selection-count"]'), "a selection")
    return int(count[0].text.replace(",", ""))


def test_rectangle_selection_survives_snapshot_and_method_changes(tab, shots):
    selected = _rectangle_select(tab)
    assert 0 < selected < N_PROBE
    _step_once(tab)
    assert _selected(tab) == selected
    _select(tab, "method", "pca")
    _wait(tab, lambda d: "pca" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the PCA info line")
    assert _selected(tab) == selected
    _shot(tab, shots, "4-selection")
    # The selection is drawn (the other points are dimmed): clearing it changes the picture.
    with_selection = _canvas(tab)
    tab.find_element(By.XPATH, '//section[@data-testid="selection"]//button[text()="Clear"]').click()
    _wait(tab, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="selection-count"]'), "the clear")
    time.sleep(0.3)
    assert (np.abs(with_selection.astype(int) - _canvas(tab).astype(int)).sum(axis=-1) > 30).sum() > 1000
    assert _rectangle_select(tab) > 0  # for the run change below


def test_colour_modes_and_legend_toggles(tab):
    tab.find_element(By.CSS_SELECTOR, '[data-name="color"] [data-value="correct"]').click()
    legend = _wait(tab, lambda d: "correct" in d.find_element(By.CSS_SELECTOR, '[data-testid="legend"]').text and
                   d.find_element(By.CSS_SELECTOR, '[data-testid="legend"]'), "the correct/wrong legend")
    before = _ink(_canvas(tab)).sum()
    legend.find_elements(By.CSS_SELECTOR, "li .swatch-button")[0].click()  # hide the correct ones
    time.sleep(0.5)
    assert _ink(_canvas(tab)).sum() < before
    tab.find_element(By.CSS_SELECTOR, '[data-name="color"] [data-value="label"]').click()


def test_run_without_embeddings_says_what_to_do_and_computes_on_demand(tab, shots):
    _select(tab, "run", "tanh")
    empty = _wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="empty"]'), "the empty state")
    assert "repviz embed" in empty[0].text
    _select(tab, "method", "compute pca")
    _wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="job"], .job.failed'), "the job indicator")
    _shot(tab, shots, "5-computing")
    _wait(tab, lambda d: "pca" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the computed embedding", 120)
    assert _ink(_canvas(tab)).sum() > 2000
    # The same probe ids: the selection made on run "relu" is still there.
    assert _selected(tab) > 0
    _shot(tab, shots, "6-computed")


def test_selection_exports_as_csv(tab):
    selected = _selected(tab)
    # Keep the Blob the page hands to the download link, and read it back.
    tab.execute_script("""
        const make = URL.createObjectURL;
        URL.createObjectURL = (blob) => { window.__csvBlob = blob; return make(blob); };
    """)
    tab.find_element(By.XPATH, '//section[@data-testid="selection"]//button[text()="Export CSV"]').click()
    text = tab.execute_async_script("window.__csvBlob.text().then(arguments[arguments.length - 1])")
    lines = text.strip().splitlines()
    assert lines[0] == "probe_id,label,prediction,confidence"
    assert len(lines) == selected + 1
    probe_id, label, prediction, confidence = (v.strip('"') for v in lines[1].split(","))
    assert int(probe_id) >= 0 and 0 <= int(label) <= 9 and 0 <= int(prediction) <= 9 and 0 < float(confidence) <= 1


def test_traversal_urls_get_no_file(tab):
    statuses = tab.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const urls = ["static/..%2f..%2fplugin.py", "static/%2e%2e/plugin.py", "coords?run=..%2f..&layer=x&step=0&key=k",
                      "thumbnails?run=%2fetc%2fpasswd&start=0&count=1", "static/..%5c..%5cplugin.py"];
        Promise.all(urls.map(u => fetch(u).then(async r => [r.status, await r.text()]))).then(done);
    """)
    for status, body in statuses:
        assert status in (400, 404), (status, body[:200])
        assert "import" not in body and "root:" not in body
