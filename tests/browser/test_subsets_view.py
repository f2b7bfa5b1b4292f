"""Snapshots of a probe subset in the Repviz tab, in a real browser (fixtures in conftest.py, helpers in pagekit.py;
issue #30).

Run "sub" holds 2,000 probe points (ids 5000.., 4 classes of 500 in probe order) at epochs 0 and 2, and only the
points of classes 2 and 3 (probe positions 1000..1999) at epoch 1. Read from the page's own pixels: stepping from
the whole probe to the subset, the points of classes 0 and 1 fade out where they are (some frame shows them half
transparent) while the others move; stepping back they fade in. The info line says "1,000 of 2,000 points", and a
hovered point of the subset shows its own probe id. Run "big" (24,000 points) in the Grid: each cell draws a seeded
sample of 20,000 and says so, and draws the selected points outside its sample besides.
"""

from __future__ import annotations

import base64
import time

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()
MOTION = True  # points fading out of and back into a subset are tested frame by frame

from selenium.webdriver.common.by import By  # noqa: E402

from repviz.store import RunWriter, open_logdir  # noqa: E402

pytestmark = pytest.mark.slow
KEY = "pca-subsets00000"
N, FIRST_ID = 2000, 5000
SUBSET = np.arange(1000, 2000)  # classes 2 and 3
BIG, BIG_SUBSET = 24_000, np.r_[0:2000, 4000:24_000]  # 22,000 of 24,000


def _write(root, name, n, steps, classes=4, seed=0):
    """Run `name`: n probe points (ids FIRST_ID.., `classes` blocks of equal size), a 2-D layer "dense" at each
    step of `steps` ({step: rows or None}), its embedding the activations (class clusters moving each step)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) * classes // n
    writer = RunWriter(root / name)
    writer.begin({"fingerprint": {"model": name, "probe": "synthetic"}, "step_unit": "epoch",
                  "layers": {"dense": {"class": "Dense", "stored_shape": [n, 2], "output_shape": [None, 2],
                                       "reduction": {"kind": "none"}}}})
    writer.write_probe(np.arange(FIRST_ID, FIRST_ID + n), labels)
    run = open_logdir(root).run(name)
    run.embeddings.write_method(KEY, {"method": "pca", "params": {}, "align": "snapshots", "default": True})
    for step, rows in steps.items():
        rows = np.arange(n) if rows is None else np.sort(np.asarray(rows))
        angle = np.pi / 2 * (labels[rows] + 0.4 * step)
        Y = (np.stack([np.cos(angle), np.sin(angle)], 1) * 10 + rng.normal(size=(len(rows), 2))).astype(np.float32)
        writer.write_activation("dense", step, Y, rows=None if len(rows) == n else rows, epoch=step)
        run.embeddings.write(KEY, "dense", step, Y, {"method": "pca", "scores": {}})


@pytest.fixture(scope="module")
def logdir(server):
    root = server[0]
    _write(root, "sub", N, {0: None, 1: SUBSET, 2: None})
    _write(root, "big", BIG, {0: None, 1: BIG_SUBSET}, classes=10, seed=1)
    return root


def _orange(pixels) -> float:
    """How much orange (class 1, #f28e2b) is drawn: its redness summed over orange-hued pixels (half transparent
    counts half); the red of class 2 (#e15759, as much blue as green) is not orange."""
    rgb = pixels[..., :3].astype(float)
    r_g, g_b = rgb[..., 0] - rgb[..., 1], rgb[..., 1] - rgb[..., 2]
    return float(r_g[(r_g > 8) & (g_b > 0.5 * r_g)].sum())


# The same measure of each frame the page draws (the scatter copied at a quarter of its size), read in the page:
# a frame read from outside takes longer than the 0.7 s the animation lasts.
_RECORD = """
const canvas = document.querySelector("canvas.scatter");
const small = document.createElement("canvas");
small.width = Math.round(canvas.width / 4);
small.height = Math.round(canvas.height / 4);
const ctx = small.getContext("2d", { willReadFrequently: true });
const stats = window.__repvizStats;
const ended = stats.transitions + 1; // the count once the fade about to start has ended
let after = 0; // frames recorded since
window.__orange = [];
window.__midFrame = null;
window.__recorded = false;
const until = performance.now() + arguments[0] * 1000;
const tick = (now) => {
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, small.width, small.height);
  ctx.drawImage(canvas, 0, 0, small.width, small.height);
  const px = ctx.getImageData(0, 0, small.width, small.height).data;
  let sum = 0;
  for (let i = 0; i < px.length; i += 4) {
    const rg = px[i] - px[i + 1];
    if (rg > 8 && px[i + 1] - px[i + 2] > 0.5 * rg) sum += rg;
  }
  window.__orange.push(sum);
  const first = window.__orange[0];
  if (!window.__midFrame && Math.abs(sum - first / 2) < first / 5) window.__midFrame = canvas.toDataURL("image/png");
  if (stats.transitions >= ended) after += 1;
  if (after < 3 && now < until) requestAnimationFrame(tick);
  else window.__recorded = true;
};
requestAnimationFrame(tick);
"""


def _frames_while_stepping(driver, shots, name, seconds=30.0) -> list[float]:
    """Orange in each frame the page draws while the slider steps once, and in three frames after the fade has
    ended (at most `seconds`); the frame half way through the fade saved as `name`.png."""
    driver.execute_script(_RECORD, seconds)
    slider = driver.find_element(By.CSS_SELECTOR, '[data-testid="slider"]')
    slider.send_keys(pk.Keys.RIGHT if slider.get_attribute("value") == "0" else pk.Keys.LEFT)
    pk.wait(driver, lambda d: d.execute_script("return window.__recorded"), "the fade and three frames after it")
    mid = driver.execute_script("return window.__midFrame")
    if mid:
        (shots / f"{name}.png").write_bytes(base64.b64decode(mid.split(",", 1)[1]))
    return driver.execute_script("return window.__orange")


def _info(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, ".info-slot").text


def test_points_outside_the_subset_fade_out_and_back_in(tab, shots):
    pk.select(tab, "run", "sub")
    tab.find_element(By.CSS_SELECTOR, '[data-testid="slider"]').send_keys(pk.Keys.HOME)  # the run's first epoch
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N and "points (a probe subset)" not in _info(d), "the whole probe")
    time.sleep(1.0)  # any animation from the run picked first is over
    assert _orange(pk.canvas(tab)) > 0
    pk.shot(tab, shots, "subsets-1-whole")
    out = _frames_while_stepping(tab, shots, "subsets-fade-out-midway")
    pk.wait(tab, lambda d: pk.stats(d)["n"] == len(SUBSET), "the subset drawn")
    pk.shot(tab, shots, "subsets-2-subset")
    assert "1,000 of 2,000 points" in _info(tab)
    whole = out[0]
    assert whole > 0 and out[-1] < 0.02 * whole  # class 1 is not in the subset
    assert any(0.1 * whole < v < 0.9 * whole for v in out), out  # faded, not cut
    back = _frames_while_stepping(tab, shots, "subsets-fade-in-midway")
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N, "the whole probe again")
    assert back[0] < 0.02 * whole and back[-1] > 0.8 * whole
    assert any(0.1 * whole < v < 0.9 * whole for v in back), back
    assert "points (a probe subset)" not in _info(tab)


def test_a_hovered_point_of_the_subset_shows_its_probe_id(tab, shots):
    pk.step_once(tab)
    pk.wait(tab, lambda d: pk.stats(d)["n"] == len(SUBSET), "the subset drawn")
    time.sleep(0.3)
    card = pk.hover_until(tab, lambda d: "probe id" in pk.text(d, '[data-testid="hover"]')
                          and pk.text(d, '[data-testid="hover"]'), "the hover card")
    ids = [int(w.strip("#,")) for w in card.replace("\n", " ").split() if w.strip("#,").isdigit()]
    assert any(FIRST_ID + SUBSET[0] <= i < FIRST_ID + N for i in ids), card
    assert not any(FIRST_ID <= i < FIRST_ID + SUBSET[0] for i in ids), card  # row i is not probe point i
    pk.shot(tab, shots, "subsets-3-hover")


def test_grid_cells_draw_a_seeded_sample_above_the_threshold(tab, shots):
    pk.select(tab, "run", "big")
    pk.wait(tab, lambda d: pk.stats(d)["n"] in (BIG, len(BIG_SUBSET)), "the big run")
    pk.click(tab, '[data-name="view"] [data-value="grid"]')
    notes = pk.wait(tab, lambda d: [t for t in pk.texts(d, '[data-testid="cell-note"]') if t] or None, "cell notes")
    pk.wait(tab, lambda d: len([t for t in pk.texts(d, '[data-testid="cell-note"]') if t]) == 2, "both notes")
    notes = pk.texts(tab, '[data-testid="cell-note"]')
    assert notes[0] == "20,000 of 24,000 drawn (seeded sample)"
    assert notes[1] == f"{len(BIG_SUBSET):,} of 24,000 points · 20,000 of {len(BIG_SUBSET):,} drawn (seeded sample)"
    for cell in tab.find_elements(By.CSS_SELECTOR, '[data-testid="cell"] canvas.cell-canvas'):
        assert pk.ink(pk.canvas_of(tab, cell)).sum() > 2000
    pk.shot(tab, shots, "subsets-4-grid")


def test_selected_points_outside_a_cells_sample_are_drawn_besides(tab, shots):
    pk.click(tab, '[data-name="view"] [data-value="main"]')
    pk.wait(tab, lambda d: pk.stats(d)["n"] in (BIG, len(BIG_SUBSET)), "the big run in the main view")
    pk.drag_rectangle(tab, (-300, -200), (30, 20))
    selected = int(pk.wait_text(tab, '[data-testid="selection-count"]', "a selection").replace(",", ""))
    assert 200 < selected < BIG // 2
    pk.click(tab, '[data-name="view"] [data-value="grid"]')

    def extras(driver):
        notes = pk.texts(driver, '[data-testid="cell-note"]')
        found = [int(n.split(" and ")[1].split()[0].replace(",", "")) for n in notes if " and " in n]
        return found if len(found) == 2 else None

    # About a sixth of the selection is outside each cell's sample of 20,000 (of 24,000 or 22,000 points).
    for extra in pk.wait(tab, extras, "the selected points drawn besides the samples"):
        assert 0.05 * selected < extra < 0.3 * selected
    pk.shot(tab, shots, "subsets-5-grid-selection")


def test_neighbourhood_change_against_a_subset_greys_the_points_it_lacks(tab, shots):
    pk.click(tab, '[data-name="view"] [data-value="main"]')
    pk.select(tab, "run", "sub")
    tab.find_element(By.CSS_SELECTOR, '[data-testid="slider"]').send_keys(pk.Keys.END)  # epoch 2: whole again
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N and "epoch 2" in pk.text(d, '[data-testid="step"]'), "epoch 2")
    pk.click(tab, '[data-name="color"] [data-value="change"]')
    # compared with epoch 1, which holds probe positions 1000..1999 only
    legend = pk.wait(tab, lambda d: "(grey)" in pk.text(d, '[data-testid="legend"]') and
                     pk.text(d, '[data-testid="legend"]'), "the change legend", 180)
    assert "1,000 not in the snapshot compared with (grey)" in legend
    pk.shot(tab, shots, "subsets-6-change")
