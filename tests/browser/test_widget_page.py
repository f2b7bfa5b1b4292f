"""The notebook widget's front end in headless Chromium without Jupyter: a plain page renders the widget's own
module (notebook/host.js with the page bundle) twice, for two stand-in anywidget models whose messages this test
carries to and from two real widgets, so the page's requests are answered by the plugin's routes as in a kernel.
Both frames draw, a selection set from Python is drawn, one made in the page arrives in Python, and the two
widgets stay apart. (The lab helper's tests drive a real JupyterLab.)"""

from __future__ import annotations

import base64
import json
import time

import numpy as np
import pytest
from pagekit import canvas, chromium, drag_rectangle, hover_a_point, ink, require_browser

require_browser()
pytest.importorskip("anywidget")

import repviz  # noqa: E402

pytestmark = pytest.mark.slow
N = 200

# A stand-in for anywidget's model (get, set, save_changes, send, on, off): what it sends is queued in
# window.__outbox for the test, which answers through window.__deliver and sets traits through window.__setTrait.
FAKE_MODELS = """
window.__outbox = [];
const models = [];
function makeModel(which, traits) {
  const handlers = {};
  const emit = (event, ...args) => (handlers[event] || []).slice().forEach((f) => f(...args));
  const changed = new Set();
  const model = {
    get: (name) => traits[name],
    set(name, value) { traits[name] = value; changed.add(name); emit(`change:${name}`); },
    save_changes() {
      const state = {};
      for (const name of changed) {
        const v = traits[name];
        state[name] = ArrayBuffer.isView(v)
          ? { b64: btoa(String.fromCharCode(...new Uint8Array(v.buffer, v.byteOffset, v.byteLength))) } : v;
      }
      changed.clear();
      window.__outbox.push({ which, kind: "state", state });
    },
    send(content) { window.__outbox.push({ which, kind: "message", content }); },
    on(event, f) { (handlers[event] = handlers[event] || []).push(f); },
    off(event, f) { handlers[event] = (handlers[event] || []).filter((g) => g !== f); },
  };
  models.push({ model, emit, traits });
  return model;
}
window.__deliver = (which, content, b64) => {
  const bytes = b64 === null ? null : Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  models[which].emit("msg:custom", content, bytes ? [new DataView(bytes.buffer)] : []);
};
window.__setTrait = (which, name, value) => {
  const { traits, emit } = models[which];
  traits[name] = name === "selected" ? new DataView(Float64Array.from(value).buffer) : value;
  emit(`change:${name}`);
};
"""


@pytest.fixture(scope="module")
def widgets(tmp_path_factory, new_run):
    root = tmp_path_factory.mktemp("widget_page_logs")
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        writer = new_run(root / name, layers={"dense": (N, 4)})
        writer.write_probe(np.arange(N), np.arange(N) % 4, rng.integers(0, 255, (N, 4, 4), dtype=np.uint8))
        for step in range(2):
            centres = np.eye(4, dtype=np.float32)[np.arange(N) % 4] * 6
            writer.write_activation("dense", step, centres + rng.normal(size=(N, 4)).astype(np.float32))
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    shown = [repviz.show(root, run="a", height=560), repviz.show(root, run="b", height=560)]
    outboxes = [[] for _ in shown]
    for w, out in zip(shown, outboxes):
        w.send = lambda content, buffers=None, out=out: out.append((content, buffers))
    yield shown, outboxes
    for w in shown:
        w.close()


@pytest.fixture(scope="module")
def page(widgets, tmp_path_factory):
    """Headless Chromium on a plain page rendering the widget module for both widgets."""
    shown, _ = widgets
    traits = [{"run": w.run, "layer": w.layer, "method": w.method, "step": w.step, "view": w.view, "hovered": None,
               "height": w.height, "selected": None, "_runs": []} for w in shown]
    module = shown[0]._esm + FAKE_MODELS + "".join(
        f"{{ const el = document.createElement('div'); document.body.append(el); "
        f"render({{ model: makeModel({i}, {json.dumps(t)}), el }}); }}\n" for i, t in enumerate(traits))
    path = tmp_path_factory.mktemp("widget_page") / "page.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body style='margin:8px'>"
                    f"<script type='module'>{module}</script></body></html>", encoding="utf-8")
    assert "</script" not in module.lower()  # the module may sit inline in a page
    with chromium(1100, 1200) as driver:
        driver.get(path.as_uri())
        yield driver


def pump(driver, widgets, done, what, timeout=60):
    """Carry messages both ways (page requests to the widgets' handlers, their answers back, the page's trait
    changes into the widgets) until `done()` holds, in the top document."""
    shown, outboxes = widgets
    deadline = time.monotonic() + timeout
    while True:
        driver.switch_to.default_content()
        for item in driver.execute_script("return window.__outbox ? window.__outbox.splice(0) : []"):
            w = shown[item["which"]]
            if item["kind"] == "message":
                w._answer(item["content"])
            else:
                state = {k: memoryview(base64.b64decode(v["b64"])) if isinstance(v, dict) else v
                         for k, v in item["state"].items()}
                w.set_state(state)
        for which, out in enumerate(outboxes):
            while out:
                content, buffers = out.pop(0)
                assert all(isinstance(b, (bytes, memoryview)) for b in buffers or [])
                body = base64.b64encode(bytes(buffers[0])).decode() if buffers else None
                driver.execute_script("window.__deliver(arguments[0], arguments[1], arguments[2])", which, content, body)
        found = done()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def in_frame(driver, which, script):
    from selenium.webdriver.common.by import By

    driver.switch_to.default_content()
    frame = driver.find_elements(By.CSS_SELECTOR, "iframe.repviz-frame")[which]
    driver.switch_to.frame(frame)
    return driver.execute_script(script)


def stats(driver, which):
    return in_frame(driver, which, "return window.__repvizStats || {draws: 0}")


def selection_text(driver, which):
    return in_frame(driver, which, "const e = document.querySelector('.selection-slot'); return e ? e.innerText : ''")


def test_both_widgets_draw_in_their_own_frames(page, widgets, tmp_path_factory):
    pump(page, widgets, lambda: all(stats(page, i)["draws"] >= 1 for i in (0, 1)), "both frames' first draw")
    page.switch_to.default_content()
    ready = page.execute_script("return [...document.querySelectorAll('.repviz-widget iframe.repviz-frame')]"
                                ".map((f) => [f.dataset.ready, f.dataset.webgl, f.offsetHeight])")
    assert ready == [["1", "1", 560], ["1", "1", 560]]
    for which, run in ((0, "a"), (1, "b")):
        assert stats(page, which)["n"] == N
        assert in_frame(page, which, "return document.querySelector('select[name=run]').value") == run
        in_frame(page, which, "return 0")
        assert ink(canvas(page)).sum() > 500  # points drawn in this frame's canvas
    shots = tmp_path_factory.mktemp("widget_shots")
    page.switch_to.default_content()
    page.save_screenshot(str(shots / "two-widgets.png"))
    print(f"\nscreenshot: {shots / 'two-widgets.png'}")


def test_a_selection_goes_both_ways_and_stays_in_its_widget(page, widgets):
    shown, _ = widgets
    pump(page, widgets, lambda: stats(page, 0)["draws"] >= 1, "the first draw")
    page.switch_to.default_content()
    page.execute_script("window.__setTrait(0, 'selected', arguments[0])", [1, 2, 3])  # as if set in Python
    pump(page, widgets, lambda: "3 of 200 points" in selection_text(page, 0), "the selection set from Python")
    assert "3 of" not in selection_text(page, 1)
    in_frame(page, 0, "return 0")
    drag_rectangle(page)
    count = pump(page, widgets, lambda: len(shown[0].selected) > 3 and len(shown[0].selected), "the page's selection")
    assert f"{count} of 200 points" in selection_text(page, 0)
    assert shown[0].selected.dtype == np.int64 and len(shown[1].selected) == 0


def test_hover_and_step_reach_python_and_a_step_set_in_python_is_shown(page, widgets):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    shown, _ = widgets
    pump(page, widgets, lambda: stats(page, 1)["draws"] >= 1, "the first draw")
    in_frame(page, 1, "return 0")
    hover_a_point(page)
    hovered = pump(page, widgets, lambda: shown[1].hovered, "the hovered probe id in Python")
    assert 0 <= hovered < N and shown[0].hovered is None
    page.switch_to.default_content()
    page.execute_script("window.__setTrait(1, 'step', 0)")  # as if set in Python
    pump(page, widgets, lambda: "epoch 0" in in_frame(page, 1, "return document.querySelector('footer').innerText"),
         "step 0 shown")
    in_frame(page, 1, "return 0")
    page.find_element(By.CSS_SELECTOR, "footer input[type=range]").send_keys(Keys.END)  # the page's own slider
    assert pump(page, widgets, lambda: shown[1].step == 1, "the page's step in Python")


def test_the_static_export_draws_and_moves_without_a_kernel(page, widgets, tmp_path_factory):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    shown, _ = widgets
    shown[0].selected = [5, 6]
    path = shown[0].save_html(tmp_path_factory.mktemp("export") / "view.html")
    page.switch_to.default_content()
    page.get(path.as_uri())
    until(lambda: page.execute_script("return (window.__repvizStats || {}).draws") >= 1, "the export's first draw")
    assert "2 of 200 points" in page.execute_script("return document.querySelector('.selection-slot').innerText")
    page.find_element(By.CSS_SELECTOR, "footer input[type=range]").send_keys(Keys.HOME)  # a snapshot from the file
    until(lambda: "epoch 0" in page.execute_script("return document.querySelector('footer').innerText"), "step 0")
    until(lambda: page.execute_script("return window.__repvizStats.transitions") >= 1, "the animated transition")
    hover_a_point(page)
    until(lambda: page.find_elements(By.CSS_SELECTOR, ".hover canvas.thumb"), "a thumbnail from the file")
    assert page.execute_script("return [...document.querySelectorAll('.error')].map((e) => e.innerText)") == []


def until(condition, what, timeout=30):
    """Wait for `condition()` (the export answers by itself: nothing to carry)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
