"""The Similarity view of the Repviz tab in a real browser (fixtures in conftest.py, helpers in pagekit.py).

Two seeds of one five-layer network, their layer × layer CKA stored at every epoch. Read from the page's own
pixels: the heatmap draws (cells, labels, colour bar), hovering a cell draws both representations' scatters, the
snapshot slider changes the picture, a click opens the pair in the Runs view, one layer's snapshot × snapshot
matrix, not computed yet, is computed by the button's background job, and a network with a dead layer, recorded
without training (``repviz.record``), is drawn with a hatched hole whose hover says why, which the layer list
leaves out.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

import repviz  # noqa: E402

pytestmark = pytest.mark.slow
LAYERS = ["dense_1", "dense_2", "dense_3", "dense_4", "probs"]


def _train(run_dir, seed, x, y, xp, yp):
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(),
                              *[keras.layers.Dense(w, activation="relu", name=name)
                                for name, w in zip(LAYERS, (64, 48, 32, 16))],
                              keras.layers.Dense(10, activation="softmax", name="probs")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    logger = repviz.ActivationLogger(run_dir, probe=(xp, yp), layers=LAYERS)
    model.fit(x, y, epochs=pk.EPOCHS, batch_size=64, verbose=0, callbacks=[logger])


@pytest.fixture(scope="module")
def logdir(server):
    """Runs "seed0" and "seed1" (same probe), PCA of every layer, debiased linear CKA between them at every epoch."""
    from repviz.datasets import BUNDLED_MNIST, load_mnist
    from repviz.similarity import similarity

    root = server[0]
    (x, y), (xt, yt) = load_mnist(BUNDLED_MNIST)
    x, y = x[:1500].astype(np.float32) / 255, y[:1500]
    xp, yp = xt[:pk.N_PROBE].astype(np.float32) / 255, yt[:pk.N_PROBE]
    for seed in (0, 1):
        _train(root / f"seed{seed}", seed, x, y, xp, yp)
    repviz.record(_dead_net(), (xp, yp), root / "zdead")  # after the seeds in the index: not their default pair
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    for step in range(pk.EPOCHS + 1):
        similarity(root, ("seed0", "seed1"), step)
    similarity(root, ("zdead", "seed1"), 0)
    return root


def _dead_net():
    """Untrained, with a dead ReLU layer (every unit off on every probe) beside the path to its output."""
    import keras

    inp = keras.Input((28, 28))
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(keras.layers.Flatten()(inp))
    dead = keras.layers.Dense(8, activation="relu", name="dead",
                              bias_initializer=keras.initializers.Constant(-1000.0))(hidden)
    both = keras.layers.Concatenate(name="both")([hidden, dead])
    return keras.Model(inp, keras.layers.Dense(10, activation="softmax", name="probs")(both))


@pytest.fixture(scope="module")
def view(tab):
    pk.click(tab, '[data-name="view"] [data-value="similarity"]')
    # seed1 may join the runs index after seed0 (both are recorded while TensorBoard runs): the view then moves
    # from seed0 against itself to the pair
    pk.wait(tab, lambda d: (pk.stats(d).get("similarityShown") or {}).get("runs") == ["seed0", "seed1"],
            "the heatmap of seed0 against seed1")
    return tab


def _heatmap(driver) -> np.ndarray:
    return pk.canvas(driver, '[data-testid="similarity"]')


def _move_to_cell(driver, i, j):
    """The mouse over the centre of cell (row i, column j)."""
    layout = pk.stats(driver)["similarityLayout"]
    canvas = driver.find_element(By.CSS_SELECTOR, '[data-testid="similarity"]')
    x = layout["x"] + (j + 0.5) * layout["cell"] - canvas.rect["width"] / 2
    y = layout["y"] + (i + 0.5) * layout["cell"] - canvas.rect["height"] / 2
    pk.actions(driver).move_to_element_with_offset(canvas, x, y).pause(0.1).move_by_offset(1, 0).perform()
    return canvas


def test_the_heatmap_draws_cells_labels_and_colour_bar(view, shots):
    pixels = _heatmap(view)
    layout = pk.stats(view)["similarityLayout"]
    assert (layout["n"], layout["m"]) == (len(LAYERS), len(LAYERS))
    scale = pixels.shape[1] / view.find_element(By.CSS_SELECTOR, '[data-testid="similarity"]').rect["width"]
    x0, y0, side = (round(v * scale) for v in (layout["x"], layout["y"], layout["cell"] * len(LAYERS)))
    grid = pixels[y0 + 2:y0 + side - 2, x0 + 2:x0 + side - 2]
    assert pk.ink(grid).mean() > 0.97  # every cell coloured (viridis has no white)
    colours = {tuple(c) for c in grid[::max(1, side // 40), ::max(1, side // 40), :3].reshape(-1, 3)}
    assert len(colours) > 5  # values differ: not one flat colour
    left, bar = pixels[y0:y0 + side, :x0 - 4], pixels[y0:y0 + side, x0 + side + 10:]
    assert pk.ink(left).sum() > 300  # row labels
    assert pk.ink(bar).sum() > 1000  # the colour bar, its ticks and title
    assert "Hover a cell" in pk.text(view, '[data-testid="pair"]')
    summary = pk.text(view, '[data-testid="similarity-summary"]')
    assert "Layer identification:" in summary and "of 5 layers of run seed0" in summary
    pk.shot(view, shots, "similarity-1-heatmap")


def test_hover_on_a_cell_shows_both_scatters_and_the_value(view, shots):
    _move_to_cell(view, 1, 2)
    pk.wait(view, lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="pair"] canvas.pair-canvas')) == 2,
            "the two scatters")
    pk.wait(view, lambda d: pk.stats(d).get("similarityPairs", 0) > 0, "the scatters drawn")
    for side in (0, 1):
        ink = pk.ink(pk.canvas(view, f'[data-testid="pair"] canvas[data-side="{side}"]'))
        assert ink.sum() > 300 and np.ptp(np.nonzero(ink)[0]) > ink.shape[0] / 4  # points, spread out
    card = pk.text(view, '[data-testid="pair"]')
    assert "seed0 · dense_2\nepoch 3 · pca" in card and "seed1 · dense_3\nepoch 3 · pca" in card
    assert "null" not in card  # before: a cell without a hole wrote "null" under the value
    value = float(pk.text(view, '[data-testid="pair-value"]'))
    assert 0 < value <= 1
    pk.shot(view, shots, "similarity-2-hover")


def test_a_point_hovered_in_one_scatter_is_ringed_in_both_and_shown_in_the_hover_card(view, shots):
    left, right = (f'[data-testid="pair"] canvas[data-side="{side}"]' for side in (0, 1))
    before = pk.canvas(view, right)
    pixels = pk.canvas(view, left)
    canvas = view.find_element(By.CSS_SELECTOR, left)
    scale = pixels.shape[1] / canvas.rect["width"]
    x, y = (v / scale for v in pk.point_in(pixels))
    pk.actions(view).move_to_element_with_offset(canvas, x - canvas.rect["width"] / 2,
                                                   y - canvas.rect["height"] / 2).perform()
    pk.wait(view, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="hover"] canvas.thumb'), "the thumbnail")
    assert "probe id" in pk.text(view, '[data-testid="hover"]')
    after = pk.canvas(view, right)  # the same probe point ringed in the other run's scatter
    assert (np.abs(before.astype(int) - after.astype(int)).sum(axis=-1) > 30).sum() > 20
    pk.shot(view, shots, "similarity-3-linked-hover")


def test_the_slider_changes_the_picture(view, shots):
    before = _heatmap(view)
    slider = view.find_element(By.CSS_SELECTOR, '[data-testid="similarity-slider"]')
    assert pk.text(view, '[data-testid="similarity-step"]') == f"epoch {pk.EPOCHS}"
    pk.set_motion(view, True)
    try:
        slider.send_keys(Keys.LEFT)  # one snapshot back
        pk.wait(view, lambda d: (pk.stats(d).get("similarityShown") or {}).get("step") == pk.EPOCHS - 1,
                "the snapshot")
        frames = pk.stats(view).get("similarityTweenFrames", 0)
        pk.wait(view, lambda d: pk.stats(d).get("similarityTweenFrames", 0) > frames + 2, "the animation")
        time.sleep(0.4)  # the animation ends
    finally:
        pk.set_motion(view, False)
    after = _heatmap(view)
    assert (np.abs(before.astype(int) - after.astype(int)).sum(axis=-1) > 30).sum() > 200
    pk.shot(view, shots, "similarity-4-slider")


def test_with_reduced_motion_the_slider_draws_the_next_matrix_at_once(view):
    """A user who prefers reduced motion (this module's browser says so) sees the next snapshot's matrix in one
    draw, without the tween."""
    before = _heatmap(view)
    view.find_element(By.CSS_SELECTOR, '[data-testid="similarity-slider"]').send_keys(Keys.RIGHT)
    pk.wait(view, lambda d: (pk.stats(d).get("similarityShown") or {}).get("step") == pk.EPOCHS, "the snapshot")
    frames = pk.stats(view).get("similarityTweenFrames", 0)
    shown = _heatmap(view)
    time.sleep(0.4)  # the tween's time and more
    assert pk.stats(view).get("similarityTweenFrames", 0) == frames
    assert np.array_equal(shown, _heatmap(view))
    assert (np.abs(before.astype(int) - shown.astype(int)).sum(axis=-1) > 30).sum() > 200
    view.find_element(By.CSS_SELECTOR, '[data-testid="similarity-slider"]').send_keys(Keys.LEFT)  # as it was
    pk.wait(view, lambda d: (pk.stats(d).get("similarityShown") or {}).get("step") == pk.EPOCHS - 1, "the snapshot")


def test_a_click_opens_the_pair_in_the_runs_view(view):
    _move_to_cell(view, 0, 1)
    pk.actions(view).click().perform()  # where the mouse is
    pk.wait(view, lambda d: d.find_element(By.CSS_SELECTOR, ".repviz").get_attribute("data-view") == "runs",
            "the Runs view")
    titles = pk.wait(view, lambda d: pk.texts(d, ".cell-title") if len(pk.texts(d, ".cell-title")) == 2 else None,
                     "the pair's cells")
    assert titles[0].startswith("seed0 · dense_1") and titles[1].startswith("seed1 · dense_2")
    pk.click(view, '[data-name="view"] [data-value="similarity"]')


def test_one_layer_over_training_is_computed_on_demand(view, shots):
    pk.click(view, '[data-name="similarity-mode"] [data-value="steps"]')
    button = pk.wait(view, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="compute-similarity"]'),
                     "the offer to compute")
    offer = pk.text(view, ".sim-heat .overlay")
    assert "not computed yet" in offer and "repviz similarity LOGDIR --runs seed0 --layer dense_1" in offer
    pk.shot(view, shots, "similarity-5-offer")
    button[0].click()
    pk.wait(view, lambda d: (pk.stats(d).get("similarityShown") or {}).get("rows") == pk.EPOCHS + 1,
            "the snapshot × snapshot matrix", 180)
    assert pk.ink(_heatmap(view)).sum() > 5000
    # what the job did, not the read after it (before: "every value from the cache" right after the job)
    notes = pk.texts(view, '[data-testid="similarity-note"]')
    assert any(re.fullmatch(r"just computed by the background job: computed \d+ value\(s\), read \d+ from the cache",
                            n) for n in notes), notes
    pk.shot(view, shots, "similarity-6-over-training")


def test_a_dead_layer_is_a_hatched_hole_that_says_why_and_can_be_left_out(view, shots):
    """Before: the matrix of a network with a dead layer failed whole (exit 2, a failed job). Now its row is a
    grey hatched hole, the hover says why, and the layer list leaves it out of the picture."""
    pk.click(view, '[data-name="similarity-mode"] [data-value="layers"]')
    pk.select(view, "similarity-run", "zdead")
    pk.wait(view, lambda d: (pk.stats(d).get("similarityShown") or {}).get("runs") == ["zdead", "seed1"],
            "the dead network against seed1")
    pk.wait(view, lambda d: pk.stats(d).get("similarityHoles") == len(LAYERS), "the hole drawn")
    layout = pk.stats(view)["similarityLayout"]
    assert (layout["n"], layout["m"]) == (3, len(LAYERS))
    pixels = _heatmap(view)
    scale = pixels.shape[1] / view.find_element(By.CSS_SELECTOR, '[data-testid="similarity"]').rect["width"]
    x, y, side = (round(v * scale) for v in (layout["x"], layout["y"] + layout["cell"], layout["cell"]))
    hole = pixels[y + 3:y + side - 3, x + 3:x + side - 3, :3].reshape(-1, 3).astype(int)
    grey = np.abs(hole - 224).max(axis=1) < 8  # the hole's fill, #e0e0e0
    lines = np.abs(hole - 158).max(axis=1) < 30  # its hatching, #9e9e9e
    assert grey.mean() > 0.4 and lines.mean() > 0.05, (grey.mean(), lines.mean())
    canvas = _move_to_cell(view, 1, 2)
    reason = pk.wait_text(view, '[data-testid="pair-hole"]', "the hole's reason")
    assert reason.startswith("dead (zdead, step 0) is left out: constant: every probe point has the same activations")
    assert canvas.get_attribute("title") == reason and pk.text(view, '[data-testid="pair-value"]') == "–"
    assert "Left out (empty cells): dead (constant" in pk.text(view, '[data-testid="similarity-left-out"]')
    pk.shot(view, shots, "similarity-7-hole")
    pk.click(view, '[data-testid="similarity-layers"] summary')
    pk.click(view, '[data-testid="hide-left-out"]')
    pk.wait(view, lambda d: pk.stats(d)["similarityLayout"]["n"] == 2, "the dead layer left out")
    assert pk.stats(view)["similarityHoles"] == 0
    assert "Layers shown: 6 of 7" in pk.text(view, '[data-testid="similarity-layers"]')
    pk.click(view, '[data-testid="similarity-layers"] input[value="dense_1"]')
    pk.wait(view, lambda d: pk.stats(d)["similarityLayout"]["m"] == len(LAYERS) - 1, "dense_1 left out too")
    pk.shot(view, shots, "similarity-8-left-out")
