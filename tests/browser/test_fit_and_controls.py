"""Every view fits its layouts, every control answers and nothing stale stays, at 1280, 1600 and 1920 px wide, in a
real browser (fixtures in conftest.py, helpers in pagekit.py; issue #41).

Read from the page's own pixels and its stats: the points of Main, Grid and Runs stay inside their canvases with a
margin (and below the Main view's tools) whatever the panel's aspect ratio, and "Reset view" brings a zoomed view
back to that; the method menu of a run without embeddings starts with a placeholder, so its first "compute …"
entry starts a job; the hover card goes when the mouse leaves and when the view changes, the kNN panel when a
rectangle selects other points; the emptied card keeps its height only while the pointer is over the panels below
it; the meta map labels Method and Colour as its previews'; metadata keeps the header on one line and the card's
values whole; a run keeps its colour in the meta map when runs are added.
"""

from __future__ import annotations

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

import repviz  # noqa: E402
from repviz.export import run_colour  # noqa: E402

pytestmark = pytest.mark.slow
N, STEPS = 240, 3
TRAINED = ["relu/seed0", "relu/seed1", "sigmoid/seed0"]
LONG = "an-mlp-with-a-rather-long-name/seed-number-0"
SIZES = {1280: 800, 1600: 900, 1920: 1080}
MARGIN = 0.03  # the views keep 5 % and a point's radius; read with room for edges and antialiasing


def _write(new_run, run_dir, ids, seed=0, shift=0.0):
    """A run of one layer "hidden" (N probes of 8 features in four clusters at the corners of a square: a layout
    about as tall as wide, moved by `shift` along the first two features) and its predictions (all five colour modes in
    the header) at STEPS snapshots."""
    rng = np.random.default_rng(seed)
    writer = new_run(run_dir, layers={"hidden": (N, 8)})
    labels = np.arange(N) % 4
    writer.write_probe(ids, labels)
    corners = np.array([[-6, -6], [-6, 6], [6, -6], [6, 6]], dtype=np.float32)[labels]
    for step in range(STEPS):
        x = rng.normal(scale=0.8, size=(N, 8)).astype(np.float32)
        x[:, :2] += corners * (1 + 0.2 * step)
        x[:, :2] += shift
        writer.write_activation("hidden", step, x)
        writer.write_prediction(step, rng.dirichlet(np.ones(4), size=N).astype(np.float32))


@pytest.fixture(scope="module")
def logdir(server, new_run):
    """TRAINED and LONG embedded by PCA, run "fresh" with nothing embedded, metadata on relu/seed0 (long values), a
    meta-SNE map of TRAINED (classical MDS and t-SNE), and run "place/digits" (other probe ids) placed into relu/seed0's layouts."""
    from repviz.cli import main
    from repviz.meta import MetaSNE
    from repviz.store import write_metadata

    root = server[0]
    for k, name in enumerate([*TRAINED, LONG, "fresh"]):
        _write(new_run, root / name, np.arange(N), seed=k)
    # its rings beside the clusters, some beyond the layout's own points
    _write(new_run, root / "place/digits", np.arange(N, 2 * N), seed=9, shift=8.0)
    write_metadata(root / "relu/seed0", {"source": ["handwritten digit, scanned"] * N,
                                         "writer": [f"census employee {i % 7}" for i in range(N)]})
    report = repviz.embed_logdir(root, methods=["pca"], runs=[*TRAINED, LONG], progress=False)
    assert not report.failed, report.failed
    for embedding in ("mds", "tsne"):
        MetaSNE(transform="dist", metric="chord", embedding=embedding).fit(root, runs=TRAINED).save(root)
    assert main(["place", str(root), "--run", "place/digits", "--into", "relu/seed0", "--method", "pca"]) == 0
    return root


@pytest.fixture(scope="module", params=sorted(SIZES))
def sized(request, tab):
    """The tab at each width (the heights a laptop and two desktop screens have), on relu/seed0's PCA."""
    width = request.param
    tab.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": SIZES[width], "deviceScaleFactor": 1, "mobile": False})
    pk.wait(tab, lambda d: d.execute_script("return window.innerWidth") > 0.6 * width, "the resized page")
    _view(tab, "main")
    pk.select(tab, "run", "relu/seed0")
    pk.select(tab, "method", "pca")
    return tab, width


def _view(driver, name):
    pk.click(driver, f'[data-name="view"] [data-value="{name}"]')


def _box(pixels, top=0.0):
    """(left, top, right, bottom) margins of the inked points as shares of the canvas (top: below `top` pixels);
    None while fewer than 40 pixels are inked."""
    ys, xs = np.nonzero(pk.ink(pixels))
    if len(ys) < 40:
        return None
    h, w = pixels.shape[:2]
    return xs.min() / w, (ys.min() - top) / h, (w - 1 - xs.max()) / w, (h - 1 - ys.max()) / h


def _fits(pixels, top=0.0):
    box = _box(pixels, top)
    return box is not None and min(box) >= MARGIN


def _tools_bottom(driver) -> float:
    return driver.execute_script("const c = document.querySelector('canvas.scatter').getBoundingClientRect();"
                                 "return document.querySelector('.plot .tools').getBoundingClientRect().bottom - c.top")


def _main_fits(driver):
    """Whether the points and the rings of the points placed into the layout are inside the canvas, below the tools."""
    top = _tools_bottom(driver)
    return _fits(pk.canvas(driver), top) and _fits(pk.canvas(driver, "canvas.overlay-canvas"), top)


def _cells_fit(driver):
    """Whether every cell that draws an embedding shows all its points with a margin (and there is one)."""
    cells = [c for c in driver.find_elements(By.CSS_SELECTOR, '[data-testid="cell"]')
             if not c.get_attribute("data-message")]
    return bool(cells) and all(_fits(pk.canvas_of(driver, c.find_element(By.CSS_SELECTOR, "canvas.cell-canvas")))
                               for c in cells)


def _cell_boxes(driver):
    return [_box(pk.canvas_of(driver, c)) for c in driver.find_elements(By.CSS_SELECTOR, "canvas.cell-canvas")]


def _zoom_in(driver, selector):
    """Wheel-zoom into the middle of the first canvas matching `selector` until points leave it."""
    element = driver.find_element(By.CSS_SELECTOR, selector)
    for _ in range(6):
        driver.execute_script("""
            const c = arguments[0], r = c.getBoundingClientRect();
            c.dispatchEvent(new WheelEvent('wheel', {deltaY: -400, clientX: r.left + r.width / 2,
              clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));""", element)


def _away(driver):
    """The mouse off every plot (onto the header)."""
    pk.actions(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, "header.bar")).perform()


def test_main_grid_and_runs_fit_their_points_with_a_margin(sized, shots):
    tab, width = sized
    _away(tab)
    pk.wait(tab, _main_fits, f"every point of Main inside its canvas with a margin at {width} px")
    pk.shot(tab, shots, f"fit-main-{width}")
    for view in ("grid", "runs"):
        _view(tab, view)
        pk.wait(tab, _cells_fit, f"every point of each {view} cell inside it with a margin at {width} px "
                                 f"(margins {_cell_boxes(tab)})")
        pk.shot(tab, shots, f"fit-{view}-{width}")
    _view(tab, "meta")
    positions = pk.wait(tab, lambda d: pk.stats(d).get("metaPositions"), "the meta map drawn")
    w, h = tab.execute_script("const c = document.querySelector('canvas.meta-canvas'); return [c.clientWidth, c.clientHeight]")
    assert all(MARGIN * w <= x <= (1 - MARGIN) * w and MARGIN * h <= y <= (1 - MARGIN) * h for x, y, *_ in positions)
    pk.shot(tab, shots, f"fit-meta-{width}")
    _view(tab, "main")


def test_reset_view_fits_a_zoomed_view_again(sized, shots):
    tab, width = sized
    _away(tab)
    for view, canvas, fits in (("main", "canvas.scatter", _main_fits), ("grid", "canvas.cell-canvas", _cells_fit),
                               ("runs", "canvas.cell-canvas", _cells_fit)):
        _view(tab, view)
        pk.wait(tab, fits, f"{view} fitted")
        _zoom_in(tab, canvas)
        pk.wait(tab, lambda d, fits=fits: not fits(d), f"points off the zoomed {view} canvas")
        pk.click(tab, f'.view[data-name="{view}"] [data-testid="reset-view"]')
        pk.wait(tab, fits, f"{view} fitted again after Reset view")
    _view(tab, "main")


def test_the_header_and_the_hover_card_keep_their_layout_with_metadata(sized, shots):
    tab, width = sized
    # relu/seed0 has metadata: the header has its column menu, and still "Export PNG" on the view switch's line
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, 'select[name="color-column"]'), "the column menu")
    # a run written through the store without its layers' classes: the layer menu shows their names alone
    assert pk.texts(tab, 'select[name="layer"] option') == ["hidden"]
    # (at 1280 px the colour controls and the button go to a second line together)
    tops = tab.execute_script("return ['[data-control=\"colour\"]', '[data-testid=\"export-png\"]', "
                              "'select[name=\"color-column\"]', '[data-name=\"view\"]']"
                              ".map(s => document.querySelector(s).getBoundingClientRect().top)")
    lines = tops if width >= 1600 else tops[:3]
    assert max(lines) - min(lines) < 10, f"the header wraps at {width} px: tops {tops}"
    pk.hover_until(tab, lambda d: "census employee" in pk.text(d, '[data-testid="hover"]'), "a card with metadata")
    # every word of a value on one line: the card breaks at spaces
    split = tab.execute_script("""
        const out = [];
        for (const dd of document.querySelectorAll('[data-testid="hover"] :is(dt, dd:not(.placed))')) {
          for (const word of dd.textContent.split(' ')) {
            const probe = document.createElement('span');
            probe.style.whiteSpace = 'nowrap';
            probe.textContent = word;
            dd.append(probe);
            if (probe.getBoundingClientRect().width > dd.clientWidth + 0.5) out.push(word);
            probe.remove();
          }
          const range = document.createRange();
          range.selectNodeContents(dd.firstChild);
          const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
          if (lines.size > dd.textContent.split(' ').length) out.push(dd.textContent);
        }
        return out;""")
    assert split == [], f"values split mid-word at {width} px: {split}"
    pk.shot(tab, shots, f"hover-metadata-{width}")


def test_the_first_compute_entry_starts_a_job(tab, shots):
    pk.select(tab, "run", "fresh")
    menu = pk.wait(tab, lambda d: [Select(m) for m in d.find_elements(By.CSS_SELECTOR, 'select[name="method"]')
                                   if Select(m).first_selected_option.text.startswith("choose")], "the placeholder")[0]
    first = next(o for o in menu.options if o.get_attribute("value").startswith("compute:"))
    assert " — " in first.text and first.get_attribute("title"), first.text  # what the method is, in one line
    name = first.get_attribute("value")[8:]
    menu.select_by_value(first.get_attribute("value"))
    job = pk.wait_text(tab, '[data-testid="job"]', f"the job computing {name}")
    assert name in job
    pk.shot(tab, shots, "compute-first-entry")
    pk.click(tab, '[data-testid="cancel-job"]')
    pk.wait(tab, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="job"]'), "the job cancelled")


def test_cards_previews_and_neighbours_clear_when_what_they_describe_goes(tab, shots):
    _view(tab, "main")
    pk.select(tab, "run", "relu/seed0")
    pk.select(tab, "method", "pca")
    empty = lambda d: "Hover a point" in pk.text(d, '[data-testid="hover"]')  # noqa: E731
    pk.hover_until(tab, lambda d: "probe id" in pk.text(d, '[data-testid="hover"]'), "the hover card")
    _away(tab)
    pk.wait(tab, empty, "the card gone when the mouse left the plot")
    pk.hover_until(tab, lambda d: "probe id" in pk.text(d, '[data-testid="hover"]'), "the hover card again")
    _view(tab, "grid")
    pk.wait(tab, empty, "the card gone with the view")
    # the meta map's preview goes with the view too
    _view(tab, "meta")
    positions = pk.wait(tab, lambda d: pk.stats(d).get("metaPositions"), "the meta map drawn")
    canvas = tab.find_element(By.CSS_SELECTOR, "canvas.meta-canvas")
    x, y = positions[0][:2]
    pk.actions(tab).move_to_element_with_offset(canvas, x - canvas.rect["width"] / 2, y - canvas.rect["height"] / 2) \
        .pause(0.2).move_by_offset(1, 0).perform()
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="preview"]'), "the preview")
    _view(tab, "similarity")
    pk.wait(tab, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="preview"]'), "the preview gone")
    hidden = tab.execute_script("return ['run', 'layer', 'method'].map(c => getComputedStyle("
                                "document.querySelector(`[data-control=\"${c}\"]`)).display)")
    # the Similarity view picks its own runs and layer; its pair's scatters take the main view's method (their
    # captions say which) and the colour the header's control, labelled for them (before: Method and "Colour")
    assert hidden == ["none", "none", "none"]
    assert pk.text(tab, '[data-control="colour"] > span').startswith("Colour of the pair's scatters")
    pk.shot(tab, shots, "similarity-controls")
    # a click lists a point's neighbours; a rectangle selecting other points ends that
    _view(tab, "main")
    pk.hover_until(tab, lambda d: "probe id" in pk.text(d, '[data-testid="hover"]'), "a point under the mouse")
    pk.actions(tab).click().perform()
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="knn"]'), "the nearest neighbours")
    _drag_around_a_cluster(tab)
    pk.wait(tab, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="selection-count"]'), "a rectangle's points")
    pk.wait(tab, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="knn"]'), "the neighbours gone")
    pk.shot(tab, shots, "knn-cleared")


def _label(driver, control) -> str:
    return pk.text(driver, f'[data-control="{control}"] > span')


def test_the_meta_maps_method_and_colour_say_they_draw_its_previews(tab, shots):
    labels = lambda d: (_label(d, "method"), _label(d, "colour"))  # noqa: E731
    _view(tab, "main")
    pk.wait(tab, lambda d: labels(d) == ("Method", "Colour"), "the main view's plain labels")
    # the map draws every run and layer: its Method and Colour are the previews' (before: "Method" and "Colour")
    _view(tab, "meta")
    pk.wait(tab, lambda d: pk.stats(d).get("metaPositions"), "the meta map drawn")
    pk.wait(tab, lambda d: labels(d) == ("Method of the previews", "Colour of the previews"), "the meta map's labels")
    pk.shot(tab, shots, "meta-controls")
    _view(tab, "similarity")
    pk.wait(tab, lambda d: _label(d, "colour") == "Colour of the pair's scatters", "the Similarity view's label")
    _view(tab, "main")
    pk.wait(tab, lambda d: labels(d) == ("Method", "Colour"), "the plain labels again")


def _card_heights(driver) -> tuple[float, float]:
    """(the hover card's slot, the card in it) heights in CSS pixels."""
    return tuple(driver.execute_script("const card = document.querySelector('[data-testid=\"hover\"]');"
                                       "return [card.parentElement, card].map(e => e.getBoundingClientRect().height)"))


def _hover_a_tall_card(driver) -> float:
    """Hover a point of relu/seed0 (a card with metadata, taller than the empty one); its slot's height."""
    pk.hover_until(driver, lambda d: "census employee" in pk.text(d, '[data-testid="hover"]'), "a card with metadata")
    return _card_heights(driver)[0]


def _collapsed(driver) -> bool:
    slot, card = _card_heights(driver)
    return "Hover a point" in pk.text(driver, '[data-testid="hover"]') and abs(slot - card) < 1


def test_the_empty_card_keeps_its_height_only_for_a_pointer_on_its_way_to_the_panels(tab, shots):
    _view(tab, "main")
    pk.select(tab, "run", "relu/seed0")
    pk.select(tab, "method", "pca")
    _away(tab)
    pk.wait(tab, _collapsed, "the empty card at its own height")
    empty = _card_heights(tab)[1]
    tall = _hover_a_tall_card(tab)
    assert tall > empty + 20, (tall, empty)
    # the mouse leaves for the header: the card collapses (before: the empty card kept the tall height for good)
    _away(tab)
    pk.wait(tab, _collapsed, f"the empty card back to its own height (slot and card: {_card_heights(tab)})")
    pk.shot(tab, shots, "card-collapsed")
    # the mouse goes to the panels below: they stay where they were while it is over them
    tall, top = _to_the_panels_from_a_tall_card(tab)
    assert "Hover a point" in pk.text(tab, '[data-testid="hover"]')
    assert abs(_card_heights(tab)[0] - tall) < 0.5 and abs(_legend_top(tab) - top) < 0.5
    pk.shot(tab, shots, "card-held-over-panels")
    _away(tab)
    pk.wait(tab, _collapsed, "the card collapsed once the pointer left the panels")
    # a new view (here by keyboard, the pointer still over the panels) builds new panels: the card collapses at once
    _to_the_panels_from_a_tall_card(tab)
    tab.execute_script("arguments[0].click()", tab.find_element(By.CSS_SELECTOR, '[data-name="view"] [data-value="grid"]'))
    assert _collapsed(tab), _card_heights(tab)
    _view(tab, "main")


def _legend_top(driver) -> float:
    return driver.execute_script("return document.querySelector('[data-testid=\"legend\"]').getBoundingClientRect().top")


def _to_the_panels_from_a_tall_card(driver) -> tuple[float, float]:
    """Hover a tall card, then move onto the legend's title and wait until the card is held for the pointer there;
    (the card's slot's height, the legend's top) before the move."""
    tall = _hover_a_tall_card(driver)
    top = _legend_top(driver)
    pk.actions(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, '[data-testid="legend"] h3')).perform()
    pk.wait(driver, lambda d: d.execute_script("return document.querySelector('[data-testid=\"hover\"]')"
                                               ".parentElement.dataset.held") == "pointer",
            "the card held for the pointer over the panels")
    return tall, top


def _drag_around_a_cluster(driver):
    """A rectangle around the points in the top-left quarter of the main scatter (pagekit.drag_rectangle)."""
    ink = pk.ink(pk.canvas(driver))
    h, w = ink.shape
    ys, xs = np.nonzero(ink[: h // 2, : w // 2])
    left, top, right, bottom = xs.min() - 12, ys.min() - 12, xs.max() + 12, ys.max() + 12
    pk.drag_rectangle(driver, start=(int(left - w / 2), int(top - h / 2)),
                      step=(int((right - left) / 10) + 1, int((bottom - top) / 10) + 1))


def test_a_map_says_explained_variance_only_where_it_is_the_classical_mds_map(tab):
    _view(tab, "meta")
    figures = lambda d: pk.text(d, '[data-testid="meta-figures"]')  # noqa: E731
    assert "explained variance" in pk.wait(tab, lambda d: "representations" in figures(d) and figures(d), "the mds map")
    pk.select(tab, "meta", "meta-dist-chord-tsne")
    shown = pk.wait(tab, lambda d: pk.stats(d)["metaPoints"] and "representations" in figures(d) and figures(d),
                    "the t-SNE map")
    assert "explained variance" not in shown  # t-SNE's map shows no share of the variance
    pk.select(tab, "meta", "meta-dist-chord-mds")


def _legend_colours(driver) -> dict[str, str]:
    return driver.execute_script("""
        const out = {};
        for (const li of document.querySelectorAll('aside .panels [data-testid="legend"] li')) {
          out[li.querySelector('.name').textContent] = getComputedStyle(li.querySelector('.swatch')).backgroundColor;
        }
        return out;""")


def _rgb(hex_colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)))


def test_runs_keep_their_colours_when_runs_are_added(tab, shots, logdir, new_run):
    _view(tab, "meta")
    before = pk.wait(tab, lambda d: [c for c in [_legend_colours(d)] if set(c) == set(TRAINED)], "the map's legend")[0]
    assert before == {name: _rgb(run_colour(name)) for name in TRAINED}  # the tab's rule is export's
    pk.shot(tab, shots, "meta-colours-before")
    for k, name in enumerate(["elu/seed0", "elu/seed1"]):  # sorted before every run shown
        _write(new_run, logdir / name, np.arange(N), seed=20 + k)
    # (the run menu is hidden on the meta map: its options read by value)
    pk.wait(tab, lambda d: "elu/seed1" in d.execute_script(
        "return [...document.querySelector('select[name=run]').options].map(o => o.value)"), "the new runs")
    _view(tab, "main")
    _view(tab, "meta")
    after = pk.wait(tab, lambda d: [c for c in [_legend_colours(d)] if set(c) == set(TRAINED)], "the legend again")[0]
    pk.shot(tab, shots, "meta-colours-after")
    assert after == before
