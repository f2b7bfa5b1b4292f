"""Helpers of the browser tests (tests/browser): what a test does with the page, read from its own pixels.

Fixtures (TensorBoard process, log directory, Chromium) are in conftest.py; a test module calls
``require_browser()`` first, which skips it with the reason when Chromium, its driver, Selenium or Pillow is
missing (Debian: ``apt-get install chromium chromium-driver``; CI installs them).
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

try:
    from PIL import Image
    from selenium import webdriver
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # require_browser() says what is missing
    webdriver = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
N_PROBE = 300
MOVE_MS = 10  # how long a pointer move of the tests' mouse takes
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


def train(run_dir, activation, x, y, xp, yp):
    """A small MNIST model trained EPOCHS epochs with the real callback on probe (xp, yp)."""
    import keras

    import repviz

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(32, activation=activation, name="hidden"),
                              keras.layers.Dense(10, activation="softmax", name="probs")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    logger = repviz.ActivationLogger(run_dir, probe=(xp, yp), layers=["hidden", "probs"])
    model.fit(x, y, epochs=EPOCHS, batch_size=64, verbose=0, callbacks=[logger])


def write_logdir(root):
    """Run "relu": PCA of both layers and t-SNE of "hidden" at every epoch; run "tanh" (same probe): nothing
    embedded. Returns the probe inputs."""
    import repviz
    from repviz.datasets import BUNDLED_MNIST, load_mnist

    (x, y), (xt, yt) = load_mnist(BUNDLED_MNIST)
    x, y = x[:1500].astype(np.float32) / 255, y[:1500]
    xp, yp = xt[:N_PROBE].astype(np.float32) / 255, yt[:N_PROBE]
    train(root / "relu", "relu", x, y, xp, yp)
    train(root / "tanh", "tanh", x, y, xp, yp)
    repviz.embed_logdir(root, methods=["pca"], runs=["relu"], progress=False)
    repviz.embed_logdir(root, methods=["tsne"], params={"tsne": {"max_iter": 400}}, runs=["relu"],
                        layers=["hidden"], progress=False)
    return xp


def require_browser() -> None:
    """Skip the calling test module unless headless Chromium can be driven."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("headless browser tests need chromium and chromedriver on PATH "
                    "(Debian: apt-get install chromium chromium-driver)", allow_module_level=True)
    if webdriver is None:
        pytest.skip("selenium and Pillow are not installed (pip install '.[test]')", allow_module_level=True)



@contextlib.contextmanager
def chromium(width=1280, height=800, motion=False):
    """Headless Chromium (software WebGL) with a profile of its own and a viewport of `width` × `height` CSS pixels;
    quit and its profile removed on exit. Without `motion` it tells the page that its user prefers reduced motion, so
    the page's animations take one frame (software WebGL drew about 40 frames for each): a module that tests an
    animation asks for motion."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.unhandled_prompt_behavior = "accept"  # "leave the page?" of a notebook left with unsaved outputs
    profile = tempfile.mkdtemp(prefix="repviz-chromium-")
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    set_motion(driver, motion)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def set_motion(driver, motion: bool) -> None:
    """Tell the page whether its user lets it animate (``prefers-reduced-motion``), from the next animation on."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "prefers-reduced-motion", "value": "no-preference" if motion else "reduce"}]})


def actions(driver) -> ActionChains:
    """Selenium's ActionChains with a pointer move of MOVE_MS: at Selenium's default of 250 ms a move, a drag of ten
    moves took three seconds of waiting, and every hover half a second."""
    return ActionChains(driver, duration=MOVE_MS)


def screenshot_dir(prefix: str) -> Path:
    """Where a test module's screenshots go: ``REPVIZ_SCREENSHOTS``, else a new temporary directory."""
    out = Path(os.environ.get("REPVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix=prefix))
    out.mkdir(parents=True, exist_ok=True)
    return out


def wait(driver, condition, what, timeout=60):
    try:
        # Parts of the page are rebuilt when their data changes: an element found just before is asked again.
        return WebDriverWait(driver, timeout, poll_frequency=0.1,
                             ignored_exceptions=[StaleElementReferenceException]).until(condition)
    except TimeoutException:
        errors = driver.find_elements(By.CSS_SELECTOR, '[data-testid="error"], .job.failed')
        raise AssertionError(f"timed out waiting for {what}; page says: {[e.text for e in errors]}") from None


def click(driver, selector: str, by: str = "css selector") -> None:
    """Click the element matching `selector` (CSS, or `by` another of Selenium's locators), found again if the page
    rebuilt it between being found and clicked (the header's controls and the selection box are rebuilt whenever a
    poll of the run index lands)."""

    def clicked(d) -> bool:
        try:
            d.find_element(by, selector).click()
            return True
        except (NoSuchElementException, StaleElementReferenceException):
            return False

    wait(driver, clicked, f"a click on {selector}")


def stats(driver) -> dict:
    return driver.execute_script("return window.__repvizStats || {draws: 0, transitions: 0}")


def text(driver, selector) -> str:
    """The rendered text of the first element matching `selector`, read in one step: the page rebuilds parts of
    itself when a poll lands, so an element found and then read in two calls can go stale in between."""
    found = driver.execute_script(f"const e = document.querySelector({selector!r}); return e && e.innerText")
    if found is None:
        raise AssertionError(f"nothing on the page matches {selector}")
    return found


def texts(driver, selector) -> list[str]:
    """The rendered text of every element matching `selector`, read in one step (see `text`)."""
    return driver.execute_script(f"return [...document.querySelectorAll({selector!r})].map(e => e.innerText)")


def wait_text(driver, selector, what) -> str:
    """Wait until an element matching `selector` shows some text, and return that text."""
    return wait(driver, lambda d: (texts(d, selector) or [""])[0], what)


def canvas(driver, selector="canvas.scatter") -> np.ndarray:
    """The canvas's own pixels (RGBA) as the page drew them."""
    url = driver.execute_script(f"return document.querySelector({selector!r}).toDataURL('image/png')")
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGBA")
    return np.asarray(image)


def canvas_of(driver, element) -> np.ndarray:
    """The pixels (RGBA) of canvas `element` as the page drew them."""
    url = driver.execute_script("return arguments[0].toDataURL('image/png')", element)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGBA"))


def ink(pixels: np.ndarray) -> np.ndarray:
    """Mask of pixels where something was drawn (opaque and not the white background)."""
    rgb = pixels[..., :3].astype(int)
    return (pixels[..., 3] > 0) & (rgb.sum(axis=-1) < 3 * 235)


def point_in(pixels) -> tuple[float, float]:
    """The centre (canvas pixels) of a drawn point: an inked pixel whose neighbourhood is inked too."""
    ink_ = ink(pixels)
    solid = ink_[1:-1, 1:-1] & ink_[:-2, 1:-1] & ink_[2:, 1:-1] & ink_[1:-1, :-2] & ink_[1:-1, 2:]
    ys, xs = np.nonzero(solid)
    assert len(ys), "no drawn point found"
    return xs[len(xs) // 2] + 1, ys[len(ys) // 2] + 1


def hover_a_point(driver) -> None:
    """Move the mouse onto a drawn point of the main scatter: the centre of a point whose 2-pixel neighbourhood is
    inked (away from rings and edges), then one pixel on so that the page sees a move."""
    pixels = wait(driver, lambda d: [p for p in [canvas(d)] if ink(p).sum() > 300], "drawn points")[0]
    element = driver.find_element(By.CSS_SELECTOR, "canvas.scatter")
    scale = pixels.shape[1] / element.rect["width"]
    ink_ = ink(pixels)
    solid = ink_[2:-2, 2:-2] & ink_[:-4, 2:-2] & ink_[4:, 2:-2] & ink_[2:-2, :-4] & ink_[2:-2, 4:]
    ys, xs = np.nonzero(solid)
    y, x = (ys[len(ys) // 2] + 2) / scale, (xs[len(xs) // 2] + 2) / scale
    actions(driver).move_to_element_with_offset(element, x - element.rect["width"] / 2,
                                                y - element.rect["height"] / 2).pause(0.2).move_by_offset(1, 0).perform()


def hover_until(driver, condition, what, timeout=60):
    """Hover a drawn point (:func:`hover_a_point`) until ``condition`` holds: a hover that lands while the page
    redraws its points (a poll of the run index, an animation) is moved again, instead of waiting on a card that
    will not come. Returns what ``condition`` returned."""
    deadline = time.monotonic() + timeout
    while True:
        hover_a_point(driver)
        try:
            return wait(driver, condition, what, timeout=min(5.0, max(0.1, deadline - time.monotonic())))
        except AssertionError:
            if time.monotonic() >= deadline:
                raise


def drag_rectangle(driver, start=(-160, -130), step=(32, 26)) -> None:
    """Select with the rectangle tool on the main scatter: a drag from `start` (CSS pixels from its centre) in ten
    moves of `step`; then the mouse off the plot (no hover highlight in pixels read next) and back to panning."""
    click(driver, '[data-name="mode"] [data-value="rectangle"]')
    canvas = driver.find_element(By.CSS_SELECTOR, "canvas.scatter")
    drag = actions(driver).move_to_element_with_offset(canvas, *start).click_and_hold()
    for _ in range(10):
        drag = drag.move_by_offset(*step).pause(0.03)
    drag.release().perform()
    actions(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, '[data-testid="legend"]')).perform()
    click(driver, '[data-name="mode"] [data-value="pan"]')


def shot(driver, shots, name):
    driver.switch_to.default_content()
    driver.save_screenshot(str(shots / f"{name}.png"))
    driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe"))


def select(driver, name, text_prefix, timeout=60):
    """Choose the first option of picker `name` starting with `text_prefix`, once the page offers it (a run written
    while TensorBoard runs joins the run index at its next refresh). The page rebuilds its pickers when the run
    index changes, so a picker that went stale is found again."""

    def chosen(d) -> bool:
        try:
            menu = Select(d.find_element(By.CSS_SELECTOR, f'select[name="{name}"]'))
            text = next((o.text for o in menu.options if o.text.startswith(text_prefix)), None)
            if text is not None:
                menu.select_by_visible_text(text)
            return text is not None
        except StaleElementReferenceException:
            return False

    wait(driver, chosen, f"a {name} option starting with {text_prefix!r}", timeout)


def step_once(driver):
    """One snapshot back (forward from the first) with the keyboard, waiting for the animated transition."""
    before = stats(driver)["transitions"]
    slider = driver.find_element(By.CSS_SELECTOR, '[data-testid="slider"]')
    slider.send_keys(Keys.RIGHT if slider.get_attribute("value") == "0" else Keys.LEFT)
    wait(driver, lambda d: stats(d)["transitions"] > before, "the snapshot transition")
