"""The notebook harness itself, on a minimal AnyWidget of its own: JupyterLab starts, a cell shows the widget, a
click in the page reaches Python and a value set from Python reaches the page."""

from __future__ import annotations

import pytest
from labkit import require_lab

require_lab()
pytestmark = pytest.mark.slow

from selenium.webdriver.common.by import By  # noqa: E402

COUNTER = '''
import anywidget, traitlets
class Counter(anywidget.AnyWidget):
    _esm = """
    export default { render({ model, el }) {
      const b = document.createElement("button");
      b.className = "counter";
      const show = () => { b.textContent = `count ${model.get("value")}`; };
      b.onclick = () => { model.set("value", model.get("value") + 1); model.save_changes(); };
      model.on("change:value", show); show(); el.appendChild(b);
    } };"""
    value = traitlets.Int(0).tag(sync=True)
w = Counter()
w
'''


def test_widget_round_trip(notebook, lab_browser, lab_shots):
    nb = notebook("counter.ipynb", [COUNTER, "print('value', w.value)", "w.value = 41"])
    nb.run(0)
    button = nb.cell(0).find_element(By.CSS_SELECTOR, "button.counter")
    assert button.text == "count 0"
    button.click()
    button.click()
    assert "value 2" in nb.run(1)
    nb.run(2)
    nb.driver.find_element(By.CSS_SELECTOR, "button.counter")
    assert nb.cell(0).find_element(By.CSS_SELECTOR, "button.counter").text == "count 41"
    lab_browser.save_screenshot(str(lab_shots / "harness-counter.png"))
