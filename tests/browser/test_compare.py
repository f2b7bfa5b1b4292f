"""The comparison views of the Repviz tab in a real browser (fixtures in conftest.py, helpers in pagekit.py).

Read from the page's own pixels: the grid of small multiples draws every cell (one shared WebGL context), a hover
in one cell highlights the same probe point in another, a click on a cell opens it in the main view, runs are
shown side by side, the meta-SNE map draws its trajectories and a click on one of its points opens that
representation, a snapshot written while the page is open appears in the grid, and the views export as PNG.
In the main view: trails of a selection stay in register with pan and zoom, density contours draw, the
neighbourhood-change colouring lists the points that changed most, and a click lists a point's nearest neighbours.
"""

from __future__ import annotations

import base64
import time

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

from selenium.webdriver.common.by import By  # noqa: E402

import repviz  # noqa: E402
from repviz.store import RunWriter, open_logdir  # noqa: E402

pytestmark = pytest.mark.slow
META = "meta-dist-chord-mds"


@pytest.fixture(scope="module")
def logdir(server):
    """The main view's log directory, PCA of run "tanh" too, and a meta-SNE map with the input landmark."""
    from repviz.meta import MetaSNE

    root = server[0]
    xp = pk.write_logdir(root)
    repviz.embed_logdir(root, methods=["pca"], runs=["tanh"], progress=False)
    MetaSNE(transform="dist", metric="chord", embedding="mds").fit(root, inputs=xp).save(root)
    return root


def _view(driver, name):
    pk.click(driver, f'[data-name="view"] [data-value="{name}"]')


def _cells(driver):
    return driver.find_elements(By.CSS_SELECTOR, '[data-testid="cell"]')


def _cell_pixels(driver, i):
    return pk.canvas(driver, f'[data-testid="cell"]:nth-child({i + 1}) canvas.cell-canvas')


def _move_to(driver, element, x, y):
    """Move the mouse to (x, y) CSS pixels from the element's top left corner."""
    rect = element.rect
    pk.actions(driver).move_to_element_with_offset(element, x - rect["width"] / 2, y - rect["height"] / 2) \
        .pause(0.2).move_by_offset(1, 0).perform()


def _grid_drawn(driver, cells, before):
    pk.wait(driver, lambda d: pk.stats(d)["gridDraws"] > before and pk.stats(d)["gridCells"] == cells,
            f"a grid of {cells} cells drawn")


def test_grid_draws_every_cell(tab, shots):
    pk.select(tab, "method", "pca")
    pk.wait(tab, lambda d: "pca" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the PCA info line")
    before = pk.stats(tab)["gridDraws"]
    _view(tab, "grid")
    # Rows: the two layers with a PCA embedding; columns: the snapshots (epoch 0 before training, then 1..3).
    _grid_drawn(tab, 2 * (pk.EPOCHS + 1), before)
    assert len(_cells(tab)) == 2 * (pk.EPOCHS + 1)
    for i in range(len(_cells(tab))):
        ink = pk.ink(_cell_pixels(tab, i))
        assert ink.sum() > 300, f"cell {i} drew {ink.sum()} pixels"
    # Different snapshots, different pictures.
    assert np.abs(_cell_pixels(tab, 0).astype(int) - _cell_pixels(tab, pk.EPOCHS).astype(int)).sum() > 0
    assert tab.execute_script("return document.querySelectorAll('canvas.cell-canvas').length") == len(_cells(tab))
    # One WebGL context for the whole grid: the cells' canvases are 2-D ones the shared renderer copies into.
    assert tab.execute_script("return document.querySelector('canvas.cell-canvas').getContext('webgl') === null")
    pk.shot(tab, shots, "grid")


def test_hover_in_one_cell_highlights_the_point_in_another(tab, shots):
    cells = _cells(tab)
    source = cells[1].find_element(By.CSS_SELECTOR, "canvas")
    pixels = _cell_pixels(tab, 1)
    scale = pixels.shape[1] / source.rect["width"]
    x, y = pk.point_in(pixels)
    other = f'[data-testid="cell"]:nth-child({len(cells)}) canvas.cell-mark'
    _move_to(tab, source, x / scale, y / scale)
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="hover"] canvas.thumb'), "the thumbnail")
    time.sleep(0.3)
    # The last cell rings the same probe point (and draws a cross-hair through it) on its overlay.
    marked = pk.ink(pk.canvas(tab, other))
    assert marked.sum() > 20, f"only {marked.sum()} pixels marked in the last cell on hover"
    ys, xs = np.nonzero(marked)
    assert np.ptp(xs) > marked.shape[1] / 2 and np.ptp(ys) > marked.shape[0] / 2  # the cross-hair spans the cell
    pk.shot(tab, shots, "grid-hover")
    # Moving off the plot clears the marks.
    pk.actions(tab).move_to_element(tab.find_element(By.CSS_SELECTOR, '[data-testid="legend"]')).perform()
    pk.wait(tab, lambda d: pk.ink(pk.canvas(d, other)).sum() == 0, "the mark to clear")


def test_a_rectangle_in_one_cell_selects_the_same_points_in_every_cell(tab):
    last = len(_cells(tab)) - 1
    before = _cell_pixels(tab, last)
    pk.click(tab, '[data-name="gridmode"] [data-value="rectangle"]')
    canvas = _cells(tab)[0].find_element(By.CSS_SELECTOR, "canvas.cell-canvas")
    width, height = canvas.rect["width"], canvas.rect["height"]
    drag = pk.actions(tab).move_to_element_with_offset(canvas, -0.45 * width, -0.45 * height).click_and_hold()
    for _ in range(9):
        drag = drag.move_by_offset(0.06 * width, 0.06 * height).pause(0.03)
    drag.release().perform()
    selected = int(pk.wait_text(tab, '[data-testid="selection-count"]', "a selection").replace(",", ""))
    assert 0 < selected < pk.N_PROBE
    pk.click(tab, '[data-name="gridmode"] [data-value="pan"]')
    pk.actions(tab).move_to_element(tab.find_element(By.CSS_SELECTOR, '[data-testid="legend"]')).perform()
    time.sleep(0.3)
    # The last cell (another layer, another snapshot) shows the same points selected: the others are dimmed.
    changed = (np.abs(before.astype(int) - _cell_pixels(tab, last).astype(int)).sum(axis=-1) > 60).sum()
    assert changed > 200
    pk.click(tab, '//section[@data-testid="selection"]//button[text()="Clear"]', By.XPATH)


def test_click_on_a_cell_opens_it_in_the_main_view(tab):
    cell = pk.EPOCHS + 2  # second row (layer "probs"), second column (epoch 1)
    title = pk.texts(tab, '[data-testid="cell"] .cell-title')[cell]
    assert "probs" in title and "epoch 1" in title
    draws = pk.stats(tab)["draws"]
    # A poll may rebuild the grid between finding the title and clicking it: find it again then.
    pk.wait(tab, lambda d: _cells(d)[cell].find_element(By.CSS_SELECTOR, ".cell-title").click() or True, "the click")
    pk.wait(tab, lambda d: pk.stats(d)["draws"] > draws, "the main view's draw")
    assert tab.find_element(By.CSS_SELECTOR, ".repviz").get_attribute("data-view") == "main"
    assert tab.find_element(By.CSS_SELECTOR, 'select[name="layer"]').get_attribute("value") == "probs"
    assert pk.text(tab, '[data-testid="step"]') == "epoch 1"


def test_runs_side_by_side(tab, shots):
    pk.select(tab, "layer", "hidden")
    before = pk.stats(tab)["gridDraws"]
    _view(tab, "runs")
    _grid_drawn(tab, 2, before)
    titles = pk.texts(tab, '[data-testid="cell"] .cell-title')
    assert titles[0].startswith("relu · hidden") and titles[1].startswith("tanh · hidden")
    for i in range(2):
        assert pk.ink(_cell_pixels(tab, i)).sum() > 300
    pk.shot(tab, shots, "runs")


def test_meta_map_draws_trajectories_and_a_click_opens_a_representation(tab, shots):
    _view(tab, "meta")
    pk.wait(tab, lambda d: pk.stats(d)["metaDraws"] > 0 and pk.stats(d)["metaPoints"] > 0, "the meta map")
    stats = pk.stats(tab)
    # 2 runs x 2 layers x 4 snapshots, and the input landmark; one trajectory per (run, layer).
    assert stats["metaPoints"] == 2 * 2 * (pk.EPOCHS + 1) + 1
    assert stats["metaTrajectories"] == 4
    assert "explained variance" in pk.text(tab, '[data-testid="meta-figures"]')
    pixels = pk.canvas(tab, '[data-testid="meta"]')
    meta = tab.find_element(By.CSS_SELECTOR, '[data-testid="meta"]')
    scale = pixels.shape[1] / meta.rect["width"]
    ink = pk.ink(pixels)
    assert ink.sum() > 1000
    # The trajectory of relu/hidden: ink along the segment from its first snapshot to the next.
    positions = [p for p in stats["metaPositions"] if p[2] == "relu" and p[3] == "hidden"]
    positions.sort(key=lambda p: p[4])
    (x0, y0), (x1, y1) = positions[0][:2], positions[1][:2]
    along = [ink[int(round((y0 + t * (y1 - y0)) * scale)), int(round((x0 + t * (x1 - x0)) * scale))]
             for t in np.linspace(0.25, 0.75, 9)]
    assert sum(along) >= 6, "no trajectory line between consecutive snapshots"
    pk.shot(tab, shots, "meta")
    # Hover previews that representation; a click opens it in the main view.
    target = positions[-1]
    _move_to(tab, meta, target[0], target[1])
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="preview-canvas"]'), "the preview")
    assert pk.ink(pk.canvas(tab, '[data-testid="preview-canvas"]')).sum() > 100
    pk.shot(tab, shots, "meta-hover")
    draws = pk.stats(tab)["draws"]
    pk.actions(tab).click().perform()
    pk.wait(tab, lambda d: pk.stats(d)["draws"] > draws, "the main view's draw")
    assert tab.find_element(By.CSS_SELECTOR, ".repviz").get_attribute("data-view") == "main"
    assert tab.find_element(By.CSS_SELECTOR, 'select[name="run"]').get_attribute("value") == "relu"
    assert tab.find_element(By.CSS_SELECTOR, 'select[name="layer"]').get_attribute("value") == "hidden"
    assert pk.text(tab, '[data-testid="step"]') == f"epoch {target[4]}"


def test_a_snapshot_written_while_the_page_is_open_appears_in_the_grid(tab, logdir):
    pk.select(tab, "run", "relu")
    pk.select(tab, "layer", "hidden")
    pk.select(tab, "method", "pca")
    before = pk.stats(tab)["gridDraws"]
    _view(tab, "grid")
    _grid_drawn(tab, 2 * (pk.EPOCHS + 1), before)
    run = open_logdir(logdir).run("relu")
    writer = RunWriter(logdir / "relu")
    writer.begin(run.manifest)  # the same fingerprint: training goes on
    step = pk.EPOCHS + 1
    grown = np.asarray(run.activations("hidden", pk.EPOCHS)) * 1.5
    writer.write_activation("hidden", step, grown.astype(np.float32), epoch=step)
    repviz.embed_logdir(logdir, methods=["pca"], runs=["relu"], layers=["hidden"], progress=False)
    _grid_drawn(tab, 2 * (pk.EPOCHS + 2), before)
    titles = pk.texts(tab, '[data-testid="cell"] .cell-title')
    assert titles[pk.EPOCHS + 1] == f"hidden · epoch {step}"
    # the column may come with the snapshot's index entry a poll before its embedding: wait for its points
    pk.wait(tab, lambda d: pk.ink(_cell_pixels(d, pk.EPOCHS + 1)).sum() > 300, "the new snapshot's points")


def test_grid_exports_as_png(tab):
    tab.execute_script("""
        const make = URL.createObjectURL;
        URL.createObjectURL = (blob) => { window.__pngBlob = blob; return make(blob); };
    """)
    pk.click(tab, '[data-testid="export-png"]')
    pk.wait(tab, lambda d: d.execute_script("return Boolean(window.__pngBlob)"), "the PNG")
    data = tab.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const reader = new FileReader();
        reader.onload = () => done(reader.result);
        reader.readAsDataURL(window.__pngBlob);
    """)
    png = base64.b64decode(data.split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    exported = pk.stats(tab)["exported"]
    assert exported["view"] == "grid" and exported["width"] > 500
    from io import BytesIO

    image = np.asarray(pk.Image.open(BytesIO(png)).convert("RGBA"))
    assert pk.ink(image).sum() > 3000  # the cells' pictures, not an empty frame


def _rectangle_select(driver, selector="canvas.scatter") -> int:
    pk.click(driver, '[data-name="mode"] [data-value="rectangle"]')
    canvas = driver.find_element(By.CSS_SELECTOR, selector)
    drag = pk.actions(driver).move_to_element_with_offset(canvas, -160, -130).click_and_hold()
    for _ in range(10):
        drag = drag.move_by_offset(32, 26).pause(0.03)
    drag.release().perform()
    pk.click(driver, '[data-name="mode"] [data-value="pan"]')
    return int(pk.wait_text(driver, '[data-testid="selection-count"]', "a selection").replace(",", ""))


def _overlay_ink(driver, before: int) -> int:
    pk.wait(driver, lambda d: pk.stats(d)["overlayDraws"] > before, "an overlay layer")
    time.sleep(0.3)  # drawn at the next animation frame
    return int(pk.ink(pk.canvas(driver, '[data-testid="overlay"]')).sum())


def test_trails_of_the_selection_across_snapshots(tab, shots):
    _view(tab, "main")
    pk.select(tab, "run", "relu")
    pk.select(tab, "layer", "hidden")
    pk.select(tab, "method", "tsne")
    pk.wait(tab, lambda d: "tsne" in d.find_element(By.CSS_SELECTOR, ".info-slot").text, "the t-SNE info line")
    assert 0 < _rectangle_select(tab) <= 500
    before = pk.stats(tab)["overlayDraws"]
    pk.click(tab, '[data-testid="trails"]')
    assert _overlay_ink(tab, before) > 300
    # In register with pan and zoom: the overlay moves with the points.
    drawn = pk.canvas(tab, '[data-testid="overlay"]')
    pk.actions(tab).move_to_element(tab.find_element(By.CSS_SELECTOR, "canvas.scatter")).click_and_hold() \
        .move_by_offset(80, 40).release().perform()
    time.sleep(0.4)
    moved = pk.canvas(tab, '[data-testid="overlay"]')
    ys, xs = np.nonzero(pk.ink(drawn))
    ys2, xs2 = np.nonzero(pk.ink(moved))
    assert abs((xs2.mean() - xs.mean()) - 80) < 8 and abs((ys2.mean() - ys.mean()) - 40) < 8
    pk.shot(tab, shots, "trails")
    pk.click(tab, ".tools .reset")
    pk.click(tab, '[data-testid="trails"]')


def test_density_contours(tab, shots):
    before = pk.stats(tab)["overlayDraws"]
    pk.click(tab, '[data-testid="contours"]')
    assert _overlay_ink(tab, before) > 300
    pk.shot(tab, shots, "contours")
    pk.click(tab, '[data-testid="contours"]')


def test_neighbourhood_change_colours_lists_and_neighbours(tab, shots):
    pk.step_once(tab)  # not the first snapshot: there is a previous one to compare with
    plain = pk.canvas(tab)
    draws = pk.stats(tab)["draws"]
    pk.click(tab, '[data-name="color"] [data-value="change"]')
    pk.wait(tab, lambda d: pk.stats(d)["draws"] > draws, "the change colouring")
    assert "Neighbourhood change" in pk.text(tab, '[data-testid="legend"]')
    assert (np.abs(plain.astype(int) - pk.canvas(tab).astype(int)).sum(axis=-1) > 60).sum() > 300
    changed = pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="changed"] li'), "the list")
    assert len(changed) == 12
    values = [float(v) for v in pk.texts(tab, '[data-testid="changed"] li .count')]
    assert values == sorted(values, reverse=True) and 0 < values[0] <= 1
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="changed"] canvas.mini'), "thumbnails")
    # A click on one: its 10 nearest neighbours in the original space, listed and ringed in the plot.
    before = pk.stats(tab)["overlayDraws"]
    changed[0].find_element(By.CSS_SELECTOR, "button").click()
    neighbours = pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="knn"] li'), "the neighbours")
    assert len(neighbours) == 10
    assert _overlay_ink(tab, before) > 100
    pk.shot(tab, shots, "change")
    pk.click(tab, '[data-name="color"] [data-value="label"]')


def test_a_poll_landing_during_the_grids_first_draw_lets_it_finish(tab, logdir):
    """The run index changing while the grid's cells wait on their data (here run "tanh" gains a snapshot) leaves
    the grid's cells as they were: the draw under way finishes them."""
    _view(tab, "main")
    pk.select(tab, "run", "relu")
    pk.select(tab, "layer", "hidden")
    pk.select(tab, "method", "tsne")
    # every request but the run index's poll waits 5 s, longer than the 3 s between polls
    tab.execute_script("""
        const send = window.fetch;
        window.__repvizFetch = send;
        window.fetch = (url, init) => String(url).startsWith("runs") ? send(url, init)
            : new Promise((ok) => setTimeout(ok, 5000)).then(() => send(url, init));
    """)
    try:
        before = pk.stats(tab)["gridDraws"]
        _view(tab, "grid")
        run = open_logdir(logdir).run("tanh")
        writer = RunWriter(logdir / "tanh")
        writer.begin(run.manifest)
        writer.write_activation("hidden", pk.EPOCHS + 1, np.asarray(run.activations("hidden", pk.EPOCHS)),
                                epoch=pk.EPOCHS + 1)
        pk.wait(tab, lambda d: pk.stats(d)["gridDraws"] > before, "the grid drawn", timeout=30)
    finally:
        tab.execute_script("window.fetch = window.__repvizFetch")
    titles = pk.texts(tab, '[data-testid="cell"] .cell-title')
    drawn = [i for i, title in enumerate(titles) if title.startswith("hidden · epoch") and int(title.split()[-1]) <= pk.EPOCHS]
    assert len(drawn) == pk.EPOCHS + 1
    for i in drawn:
        assert pk.ink(_cell_pixels(tab, i)).sum() > 300, f"cell {i} ({titles[i]}) drew nothing"
