"""repviz.show in a real JupyterLab: the widget draws in a cell's output, a lasso selection made in the page arrives
in Python as ``w.selected``, a selection set from Python is drawn, and the snapshot slider moves the points and
sets ``w.step``. The log directory is written through the store (no training)."""

from __future__ import annotations

import numpy as np
import pytest
from labkit import drag_lasso, enter_widget, require_lab, write_clusters

require_lab()
pytestmark = pytest.mark.slow

import pagekit as pk  # noqa: E402

N = 300
SHOW = "import numpy as np, repviz\nw = repviz.show('logs', run='demo', layer='dense')\nw"


@pytest.fixture(scope="module")
def logs(lab):
    return write_clusters(lab.root / "logs", n=N)


def _changed(a: np.ndarray, b: np.ndarray) -> int:
    """Pixels that differ visibly between two canvas pictures."""
    return int((np.abs(a.astype(int) - b.astype(int)).sum(axis=-1) > 30).sum())


def test_lasso_selection_reaches_python_and_python_selection_is_drawn(notebook, logs, lab_browser, lab_shots):
    nb = notebook("selection.ipynb", [SHOW, "print('selected', len(w.selected), w.selected.dtype)",
                                      "w.selected = np.arange(0, 300, 10)  # the probe ids of class 0"])
    nb.run(0)
    driver = lab_browser
    enter_widget(driver, nb.cell(0))
    assert pk.stats(driver)["n"] == N  # and points drawn (enter_widget waits for them)

    drag_lasso(driver, radius=150)
    in_page = int(pk.wait_text(driver, '[data-testid="selection-count"]', "a lasso selection").replace(",", ""))
    assert 0 < in_page < N
    driver.switch_to.default_content()
    driver.save_screenshot(str(lab_shots / "widget-1-lasso.png"))
    assert nb.run(1).strip() == f"selected {in_page} int64"

    driver.switch_to.frame(nb.cell(0).find_element("css selector", "iframe.repviz-frame"))
    lassoed = pk.canvas(driver)
    driver.switch_to.default_content()
    nb.run(2)
    driver.switch_to.frame(nb.cell(0).find_element("css selector", "iframe.repviz-frame"))
    pk.wait(driver, lambda d: pk.text(d, '[data-testid="selection-count"]') == "30", "the selection set from Python")
    # Drawn: the picture changes (class 0 alone stays bright, the rest is dimmed).
    pk.wait(driver, lambda d: _changed(lassoed, pk.canvas(d)) > 1000, "the selection from Python drawn")
    nb.screenshot(lab_shots / "widget-2-selected-from-python.png")


def test_snapshot_slider_moves_points_and_sets_step(notebook, logs, lab_browser, lab_shots):
    nb = notebook("slider.ipynb", [SHOW, "print('step', w.step)", "w.step = 0"])
    nb.run(0)
    driver = lab_browser
    enter_widget(driver, nb.cell(0))
    assert pk.text(driver, '[data-testid="step"]') == "epoch 2"  # the last snapshot first
    before = pk.canvas(driver)
    pk.step_once(driver)  # back one snapshot, animated
    assert pk.stats(driver)["transitionFrames"], "the snapshot change was not animated"
    assert pk.text(driver, '[data-testid="step"]') == "epoch 1"
    assert _changed(before, pk.canvas(driver)) > 500, "the points did not move"
    driver.switch_to.default_content()
    assert nb.run(1).strip() == "step 1"
    # And from Python: the page follows w.step, animating to it.
    nb.run(2)
    driver.switch_to.frame(nb.cell(0).find_element("css selector", "iframe.repviz-frame"))
    pk.wait(driver, lambda d: pk.text(d, '[data-testid="step"]') == "epoch 0", "the step set from Python")
    nb.screenshot(lab_shots / "widget-3-step-from-python.png")
