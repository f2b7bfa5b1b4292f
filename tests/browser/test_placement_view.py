"""Probes placed into another run's layout, in the Repviz tab, in a real browser (fixtures in conftest.py, helpers in
pagekit.py; issue #29).

One MNIST model is trained with two ActivationLoggers: run "digits" (300 test digits, embedded by t-SNE) and run
"more-digits" (100 other test digits). ``repviz place`` puts the second set into the first's layouts; the tab draws
them as hollow rings in their class colour over the layout, names them in a note, and a hovered ring shows its own
digit, marked as placed.
"""

from __future__ import annotations

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.slow
N_NEW = 100


@pytest.fixture(scope="module")
def logdir(server):
    import keras

    import repviz
    from repviz.cli import main
    from repviz.datasets import BUNDLED_MNIST, load_mnist

    root = server[0]
    (x, y), (xt, yt) = load_mnist(BUNDLED_MNIST)
    x, y, xt = x[:1500].astype(np.float32) / 255, y[:1500], xt.astype(np.float32) / 255
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(name="flat"),
                              keras.layers.Dense(32, activation="relu", name="hidden"),
                              keras.layers.Dense(10, activation="softmax", name="probs")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    loggers = [repviz.ActivationLogger(root / "digits", probe=(xt[:300], yt[:300]), layers=["hidden"]),
               repviz.ActivationLogger(root / "more-digits", probe=(xt[300:300 + N_NEW], yt[300:300 + N_NEW]),
                                       layers=["hidden"], probe_ids=np.arange(300, 300 + N_NEW))]
    model.fit(x, y, epochs=2, batch_size=64, verbose=0, callbacks=loggers)
    repviz.embed_logdir(root, methods=["tsne"], params={"tsne": {"max_iter": 400}}, runs=["digits"],
                        progress=False)
    assert main(["place", str(root), "--run", "more-digits", "--into", "digits"]) == 0
    return root


def _ring_centres(pixels: np.ndarray) -> list[tuple[int, int]]:
    """Centres of the hollow rings on the overlay: an empty pixel with ink 4 to 5 pixels away on all four sides."""
    ink = pixels[..., 3] > 0
    ring = lambda dy, dx: np.roll(ink, (-dy, -dx), axis=(0, 1))  # noqa: E731  ink at (y + dy, x + dx)
    around = [ring(0, 4) | ring(0, 5), ring(0, -4) | ring(0, -5), ring(4, 0) | ring(5, 0), ring(-4, 0) | ring(-5, 0)]
    ys, xs = np.nonzero(~ink & np.logical_and.reduce(around))
    return [(int(y), int(x)) for y, x in zip(ys, xs) if 10 < y < ink.shape[0] - 10 and 10 < x < ink.shape[1] - 10]


def test_placed_points_are_rings_over_the_layout_they_were_placed_into(tab, shots):
    pk.select(tab, "run", "digits")
    pk.select(tab, "method", "tsne")
    note = pk.wait_text(tab, '[data-testid="placed-note"]', "the placed points' note")
    assert f"more-digits: {N_NEW} points placed into this layout" in note and "10-NN accuracy" in note
    overlay = tab.find_element(By.CSS_SELECTOR, '[data-testid="overlay"]')
    pixels = pk.wait(tab, lambda d: [p for p in [pk.canvas_of(d, overlay)] if len(_ring_centres(p)) >= 20],
                     "rings drawn on the overlay")[0]
    dark = (pixels[..., 3] > 200) & (pixels[..., :3].astype(int).sum(axis=-1) < 3 * 60)
    colored = (pixels[..., 3] > 200) & (np.ptp(pixels[..., :3].astype(int), axis=-1) > 80)
    assert dark.sum() > 200 and colored.sum() > 200  # a dark rim and the class colour inside it
    pk.shot(tab, shots, "placement-1-rings")


def test_a_hovered_ring_shows_its_own_digit_marked_as_placed(tab, shots):
    overlay = tab.find_element(By.CSS_SELECTOR, '[data-testid="overlay"]')
    element = tab.find_element(By.CSS_SELECTOR, "canvas.scatter")
    centres = _ring_centres(pk.canvas_of(tab, overlay))
    y, x = centres[len(centres) // 2]
    pk.actions(tab).move_to_element_with_offset(element, x - element.rect["width"] / 2,
                                                  y - element.rect["height"] / 2).pause(0.2).move_by_offset(1, 0).perform()
    placed = pk.wait_text(tab, '[data-testid="hover-placed"]', "the hover card of a placed point")
    assert placed == "into digits"
    fields = pk.texts(tab, '[data-testid="hover"] dd')
    assert any(f.isdigit() and 300 <= int(f) < 300 + N_NEW for f in fields)  # a probe id of the second set
    pk.shot(tab, shots, "placement-2-hover")


def test_a_class_hidden_in_the_legend_hides_its_placed_points_too(tab, shots):
    overlay = tab.find_element(By.CSS_SELECTOR, '[data-testid="overlay"]')
    ink = lambda d: int((pk.canvas_of(d, overlay)[..., 3] > 0).sum())  # noqa: E731
    before = ink(tab)
    only = tab.find_elements(By.CSS_SELECTOR, '[data-testid="legend"] li .solo')[0]  # shown on hover
    tab.execute_script("arguments[0].click()", only)  # only the digit 0
    pk.wait(tab, lambda d: 0 < ink(d) < 0.4 * before, "only the rings of the digit 0")
    pk.shot(tab, shots, "placement-3-only-zero")
    pk.click(tab, '[data-testid="legend"] h3 button')  # show all
    pk.wait(tab, lambda d: ink(d) > 0.9 * before, "every ring again")


def test_the_placed_run_itself_points_to_the_layout_it_was_placed_into(tab):
    pk.select(tab, "run", "more-digits")
    hint = pk.wait(tab, lambda d: [t for t in [pk.text(d, ".overlay")] if "placed into" in t], "the empty state")[0]
    assert "Its points are placed into the layouts of run digits" in hint
    pk.select(tab, "run", "digits")
