"""A widget shown before ``model.fit`` in the same kernel follows the training: in a real JupyterLab, each snapshot
the ActivationLogger stores (embedded by ``embed="pca"`` in the background) reaches the page while the fit cell is
still running. A callback of the test holds each epoch's end until the page has shown that epoch's snapshot, so
the test waits for what it checks instead of racing a fast fit."""

from __future__ import annotations

import pytest
from labkit import require_lab

require_lab()
pytestmark = pytest.mark.slow

import pagekit as pk  # noqa: E402

EPOCHS = 3
SETUP = '''
import os, time
import keras, numpy as np, repviz
from repviz.datasets import BUNDLED_MNIST, load_mnist
(x, y), (xt, yt) = load_mnist(BUNDLED_MNIST)
x, y = x[:1500].astype("float32") / 255, y[:1500]
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(), keras.layers.Dense(32, activation="relu", name="hidden"),
                          keras.layers.Dense(10, activation="softmax", name="probs")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
logger = repviz.ActivationLogger("live/mlp", probe=(xt[:200].astype("float32") / 255, yt[:200]), layers=["hidden"], embed="pca")

class Gate(keras.callbacks.Callback):
    """Hold each epoch's end until the test has seen its snapshot in the page (file live/seen-EPOCH)."""
    def on_epoch_end(self, epoch, logs=None):
        deadline = time.monotonic() + 180
        while not os.path.exists(f"live/seen-{epoch}") and time.monotonic() < deadline:
            time.sleep(0.05)
'''
FIT = f'model.fit(x, y, epochs={EPOCHS}, batch_size=64, verbose=0, callbacks=[logger, Gate()])\nlogger.wait_embeddings(120)'


def _slider(driver) -> tuple[int, str]:
    """(the snapshot slider's last position, the step shown) in the widget's page; (-1, "") before its first run."""
    return driver.execute_script(
        "const s = document.querySelector('[data-testid=\"slider\"]'), t = document.querySelector('[data-testid=\"step\"]');"
        "return [s && !s.closest('[hidden]') ? Number(s.max) : -1, t ? t.innerText : '']")


def test_widget_follows_a_fit_in_the_same_kernel(notebook, lab, lab_browser, lab_shots):
    nb = notebook("live.ipynb", [SETUP, "w = repviz.show('live')\nw", FIT, "print('step', w.step, 'of', w.run)"])
    nb.run(0, timeout=180)
    nb.run(1)
    driver = lab_browser
    frame = nb.cell(1).find_element("css selector", "iframe.repviz-frame")
    pk.wait(driver, lambda d: frame.get_attribute("data-ready") == "1", "the waiting widget's page")
    nb.start(2)
    seen, pictures = [], 0
    for epoch in range(EPOCHS):
        # Snapshot 0 (before training) and the one of this epoch: epoch + 2 snapshots, the newest drawn.
        driver.switch_to.frame(frame)

        def drawn(d, epoch=epoch, pictures=pictures):
            stats, slider = pk.stats(d), _slider(d)
            return slider[0] == epoch + 1 and stats["draws"] + stats["transitions"] > pictures and (slider, stats)

        (last, shown), stats = pk.wait(driver, drawn, f"the snapshot of epoch {epoch} drawn in the page", 180)
        pictures = stats["draws"] + stats["transitions"]
        pk.wait(driver, lambda d: pk.ink(pk.canvas(d)).sum() > 300, f"the points of epoch {epoch}")
        driver.switch_to.default_content()
        assert "*" in nb.prompt(2), "the fit cell finished before its snapshot was seen: nothing was live"
        seen.append(shown)
        if epoch == 1:
            nb.screenshot(lab_shots / "live-mid-fit.png", 1)
        (lab.root / "live" / f"seen-{epoch}").touch()
    assert seen == [f"epoch {e + 1}" for e in range(EPOCHS)]
    nb.finish(2, timeout=180)
    assert nb.run(3).strip() == f"step {EPOCHS} of mlp"
