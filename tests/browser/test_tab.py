"""The Repviz tab's main view in a real browser (fixtures in conftest.py, helpers in pagekit.py).

What a person would check by hand, read from the page's own pixels: points are drawn, hovering shows the input's
thumbnail, the snapshot slider changes the picture, a rectangle selection survives a snapshot change, a method
missing from the store is computed on demand, a traversal URL gets no file, and with no meta-SNE map stored the
Meta map view computes one.
"""

from __future__ import annotations

import time

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()
MOTION = True  # the snapshot slider's change is tested as an animation

from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.slow
N_PROBE, EPOCHS = pk.N_PROBE, pk.EPOCHS



def test_pick_a_layer_draws_every_point(tab, shots):
    labels = pk.wait(tab, lambda d: pk.texts(d, 'select[name="layer"] option'), "the layer menu")
    assert labels == ["hidden · Dense", "probs · Dense"]  # each layer's name and class
    pk.select(tab, "layer", "hidden")
    pk.select(tab, "method", "tsne")
    pk.wait(tab, lambda d: "trustworthiness" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the info line")
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N_PROBE, "the draw of the hidden layer")

    def spread(driver) -> bool:
        """300 points of a few pixels each: thousands of coloured pixels, spread over the plot, not one blot (read
        once the switch from PCA has finished animating)."""
        ink = pk.ink(pk.canvas(driver))
        rows, cols = np.nonzero(ink)
        return ink.sum() > 2000 and np.ptp(rows) > ink.shape[0] / 3 and np.ptp(cols) > ink.shape[1] / 4

    pk.wait(tab, spread, "the points spread over the plot", timeout=20)
    legend = pk.text(tab, '[data-testid="legend"]')
    assert "Label" in legend and sum(int(w) for w in legend.split()[1:] if w.isdigit()) >= N_PROBE
    pk.shot(tab, shots, "1-layer")


def test_hover_shows_the_thumbnail_and_prediction(tab, shots):
    thumb = pk.hover_until(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="hover"] canvas.thumb'),
                           "the thumbnail")
    image = pk.canvas(tab, '[data-testid="hover"] canvas.thumb')
    assert image.shape[:2] == (28, 28) and image[..., :3].std() > 20  # a digit, not a blank square
    card = pk.text(tab, '[data-testid="hover"]')
    for field in ("label", "prediction", "confidence", "probe id"):
        assert field in card
    assert thumb[0].is_displayed()
    pk.shot(tab, shots, "2-hover")


_COUNT_FRAMES = """
window.__frameRequests = 0;
const ask = window.requestAnimationFrame.bind(window);
window.requestAnimationFrame = (callback) => { window.__frameRequests += 1; return ask(callback); };
"""


def test_an_idle_tab_asks_for_no_frames_and_wakes_on_input(tab):
    """regl-scatterplot's renderer takes every animation frame, which kept an idle tab busy (about 5 % of a core in
    software WebGL). The page runs its frames for about a second after anything that may change the picture, then
    asks for none until the next input or draw."""
    tab.execute_script(_COUNT_FRAMES)

    def quiet(d) -> bool:
        before = d.execute_script("return window.__frameRequests")
        time.sleep(1.5)
        return d.execute_script("return window.__frameRequests") == before

    pk.wait(tab, quiet, "the frames to stop once nothing changes", timeout=30)
    woken = tab.execute_script("return window.__frameRequests")
    pk.hover_until(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="hover"] canvas.thumb'),
                   "the thumbnail of a hovered point")  # hover is found on a frame: frames run again
    assert tab.execute_script("return window.__frameRequests") > woken
    pk.wait(tab, quiet, "the frames to stop again", timeout=30)


def test_slider_changes_the_picture(tab, shots):
    before = pk.canvas(tab)
    step_before = pk.text(tab, '[data-testid="step"]')
    pk.step_once(tab)
    after = pk.canvas(tab)
    assert pk.text(tab, '[data-testid="step"]') != step_before
    assert (np.abs(before.astype(int) - after.astype(int)).sum(axis=-1) > 30).sum() > 500
    assert pk.stats(tab)["transitionFrames"]  # animated (frames drawn between the two layouts), not a jump
    pk.shot(tab, shots, "3-slider")
    # Play runs to the last snapshot and stops there.
    transitions = pk.stats(tab)["transitions"]
    pk.click(tab, '[data-testid="play"]')
    pk.wait(tab, lambda d: pk.stats(d)["transitions"] > transitions and
          d.find_element(By.CSS_SELECTOR, '[data-testid="play"]').text == "▶", "play to reach the end")
    assert pk.text(tab, '[data-testid="step"]') == f"epoch {EPOCHS}"


def _rectangle_select(driver) -> int:
    pk.drag_rectangle(driver)
    return _selected(driver)


def _selected(driver) -> int:
    return int(pk.wait_text(driver, '[data-testid="selection-count"]', "a selection").replace(",", ""))


def test_rectangle_selection_survives_snapshot_and_method_changes(tab, shots):
    selected = _rectangle_select(tab)
    assert 0 < selected < N_PROBE
    pk.step_once(tab)
    assert _selected(tab) == selected
    pk.select(tab, "method", "pca")
    pk.wait(tab, lambda d: "pca" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the PCA info line")
    assert _selected(tab) == selected
    pk.shot(tab, shots, "4-selection")
    # The selection is drawn (the other points are dimmed): clearing it changes the picture.
    with_selection = pk.canvas(tab)
    pk.click(tab, '//section[@data-testid="selection"]//button[text()="Clear"]', By.XPATH)
    pk.wait(tab, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="selection-count"]'), "the clear")
    time.sleep(0.3)
    assert (np.abs(with_selection.astype(int) - pk.canvas(tab).astype(int)).sum(axis=-1) > 30).sum() > 1000
    assert _rectangle_select(tab) > 0  # for the run change below


def test_colour_modes_and_legend_toggles(tab):
    pk.click(tab, '[data-name="color"] [data-value="correct"]')
    legend = pk.wait(tab, lambda d: "correct" in d.find_element(By.CSS_SELECTOR, '[data-testid="legend"]').text and
                   d.find_element(By.CSS_SELECTOR, '[data-testid="legend"]'), "the correct/wrong legend")
    before = pk.ink(pk.canvas(tab)).sum()
    legend.find_elements(By.CSS_SELECTOR, "li .swatch-button")[0].click()  # hide the correct ones
    time.sleep(0.5)
    assert pk.ink(pk.canvas(tab)).sum() < before
    pk.click(tab, '[data-name="color"] [data-value="label"]')


def test_run_without_embeddings_says_what_to_do_and_computes_on_demand(tab, shots):
    pk.select(tab, "run", "tanh")
    assert "repviz embed" in pk.wait_text(tab, '[data-testid="empty"]', "the empty state")
    pk.select(tab, "method", "compute pca")
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="job"], .job.failed'), "the job indicator")
    pk.shot(tab, shots, "5-computing")
    pk.wait(tab, lambda d: "pca" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the computed embedding", 120)
    pk.wait(tab, lambda d: pk.ink(pk.canvas(d)).sum() > 2000, "the computed embedding's points")
    # The same probe ids: the selection made on run "relu" is still there.
    assert _selected(tab) > 0
    pk.shot(tab, shots, "6-computed")


def test_selection_exports_as_csv(tab):
    selected = _selected(tab)
    # Keep the Blob the page hands to the download link, and read it back.
    tab.execute_script("""
        const make = URL.createObjectURL;
        URL.createObjectURL = (blob) => { window.__csvBlob = blob; return make(blob); };
    """)
    # the box is built anew when the index or the selection changes: a button found just before is asked again
    pk.wait(tab, lambda d: d.find_element(By.XPATH, '//section[@data-testid="selection"]//button[text()="Export CSV"]')
            .click() or True, "a click on Export CSV")
    # The export reads the run's arrays first (a busy machine may take a moment).
    pk.wait(tab, lambda d: d.execute_script("return Boolean(window.__csvBlob)"), "the CSV download")
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


def test_meta_map_offers_to_compute_one(tab, shots):
    pk.click(tab, '[data-name="view"] [data-value="meta"]')

    def started(d) -> bool:  # the job, or its map already (a warm cache computes it between two polls)
        return bool(d.find_elements(By.CSS_SELECTOR, '[data-testid="job"], .job.failed')) or \
            pk.stats(d).get("metaPoints", 0) > 0

    for attempt in range(3):  # under load CI once saw no job after a click on the offer: the page offers it again
        pk.click(tab, '[data-testid="compute-meta"]')  # found again if a poll rebuilds the offer meanwhile
        try:
            pk.wait(tab, started, "the job indicator or the map", timeout=20)
            break
        except AssertionError:
            if attempt == 2 or not tab.find_elements(By.CSS_SELECTOR, '[data-testid="compute-meta"]'):
                raise
    pk.shot(tab, shots, "7-meta-computing")
    pk.wait(tab, lambda d: pk.stats(d).get("metaPoints", 0) > 0, "the computed meta-SNE map", 240)
    assert not tab.find_elements(By.CSS_SELECTOR, ".job.failed")
    assert "explained variance" in pk.text(tab, '[data-testid="meta-figures"]')
    assert "compared on all" in pk.text(tab, '[data-testid="meta-note"]')  # the map says which points it compared
    assert pk.ink(pk.canvas(tab, '[data-testid="meta"]')).sum() > 500
    pk.shot(tab, shots, "8-meta-computed")
