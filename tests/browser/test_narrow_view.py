"""A 1-wide layer in the Repviz tab, in a real browser (fixtures in conftest.py, helpers in pagekit.py; issue #27).

A binary classifier's sigmoid output ``(n, 1)`` is embedded like any layer (PCA and t-SNE: 0 failures) and drawn as
its values along x with a strip per class along y: two bands of points, the info line saying so, the positive class
further right once trained, and a snapshot change that moves the points along x only. The run is fitted twice (a
second ``fit`` continuing the step count): the step label says which fit trained the snapshot shown.
"""

from __future__ import annotations

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

pytestmark = pytest.mark.slow
N = 200


@pytest.fixture(scope="module")
def logdir(server):
    """Run "binary": an MLP with a sigmoid output "score" trained on two noisy classes by two fits (2 epochs, then
    1: steps 0-2, then 3), every layer embedded by PCA and t-SNE."""
    import keras

    import repviz

    root = server[0]
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 600)
    x = (rng.normal(size=(600, 10)) + 1.2 * y[:, None]).astype(np.float32)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu", name="hidden"),
                              keras.layers.Dense(1, activation="sigmoid", name="score")])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy")
    logger = repviz.ActivationLogger(root / "binary", probe=(x[:N], y[:N]), layers=["hidden", "score"])
    for epochs in (2, 1):
        model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, callbacks=[logger])
    report = repviz.embed_logdir(root, methods=["pca", "tsne"], params={"tsne": {"max_iter": 300}}, progress=False)
    assert not report.failed, report.failed
    return root


def _bands(pixels) -> list[tuple[int, int]]:
    """The horizontal bands of drawn rows: (first, last) row of each run of rows holding ink, apart by more than
    a twentieth of the canvas's height (the view is fitted to the canvas: a strip's points may stand apart)."""
    rows = np.flatnonzero(pk.ink(pixels).sum(axis=1) > 0)
    if not len(rows):
        return []
    cuts = np.flatnonzero(np.diff(rows) > pixels.shape[0] / 20)
    return [(int(a), int(b)) for a, b in zip(np.r_[rows[0], rows[cuts + 1]], np.r_[rows[cuts], rows[-1]])]


def test_a_sigmoid_output_is_two_strips_along_its_values(tab, shots):
    pk.select(tab, "layer", "score")
    pk.select(tab, "method", "pca")
    info = pk.wait(tab, lambda d: [t for t in [pk.text(d, ".info-slot")] if "1-D" in t], "the 1-D info line")[0]
    assert "x = its values, y = a strip per class" in info
    # read once the switch of layer and method has finished animating
    pixels = pk.wait(tab, lambda d: [p for p in [pk.canvas(d)] if pk.stats(d)["n"] == N and len(_bands(p)) == 2],
                     "two strips of points")[0]
    pk.shot(tab, shots, "narrow-1-strips")
    top, bottom = _bands(pixels)
    ink = pk.ink(pixels)
    assert np.ptp(np.flatnonzero(ink.any(axis=0))) > ink.shape[1] / 3  # spread along x: the values
    # trained: one class lies further right than the other (their mean columns differ by a tenth of the width)
    cols = [np.nonzero(ink[a:b + 1])[1].mean() for a, b in (top, bottom)]
    assert abs(cols[0] - cols[1]) > ink.shape[1] / 10


def _edge_profile(ink: np.ndarray, col: int, step: int) -> np.ndarray:
    """Inked pixels per column from edge column `col` inward (`step` +1 from the left, -1 from the right), 9
    columns, in the rows around the ink of column `col`."""
    rows = np.flatnonzero(ink[:, col])
    band = ink[max(rows[0] - 8, 0):rows[-1] + 9]
    return np.array([band[:, col + step * k].sum() for k in range(9)])


def test_the_points_at_the_extremes_are_drawn_whole(tab):
    """The leftmost and rightmost points are whole discs inside the canvas: from each edge of the ink inward the
    inked height grows to the disc's diameter (a disc cut at its centre is tallest at its edge; the picture was
    cut where the plot's buffer, sized to the screen and not to the canvas, ended)."""
    pk.select(tab, "layer", "score")
    pk.select(tab, "method", "pca")
    pixels = pk.wait(tab, lambda d: [p for p in [pk.canvas(d)] if pk.stats(d)["n"] == N and len(_bands(p)) == 2],
                     "two strips of points")[0]
    ink = pk.ink(pixels)
    cols = np.flatnonzero(ink.any(axis=0))
    left, right = int(cols[0]), int(cols[-1])
    assert left > 0.03 * ink.shape[1] and right < 0.97 * ink.shape[1]  # the fitted view's margin
    for col, step in ((left, 1), (right, -1)):
        profile = _edge_profile(ink, col, step)
        assert profile[0] < profile.max(), (col, profile)


def test_a_snapshot_change_moves_the_points_along_x_only(tab, shots):
    """From the last snapshot (trained by the second fit) to the one before (the first fit's last)."""
    # the fit joins the step label once the run's index entry (its fits) has reached the page
    pk.wait(tab, lambda d: pk.text(d, '[data-testid="step"]') == "epoch 3 · fit 2 of 2", "the last step's label")
    before = pk.canvas(tab)
    pk.step_once(tab)
    pk.wait(tab, lambda d: pk.text(d, '[data-testid="step"]') == "epoch 2 · fit 1 of 2",  # fit 1's result
            "the step where fit 2 began")
    after = pk.wait(tab, lambda d: [p for p in [pk.canvas(d)] if (p != before).any()], "the picture changed")[0]
    assert [len(_bands(p)) for p in (before, after)] == [2, 2]
    for (a0, b0), (a1, b1) in zip(_bands(before), _bands(after)):  # the strips stay where they were
        assert abs(a0 - a1) <= 4 and abs(b0 - b1) <= 4
    pk.shot(tab, shots, "narrow-2-step")


def test_with_reduced_motion_a_snapshot_change_is_one_frame(tab):
    """This module's browser says its user prefers reduced motion: the points reach the next snapshot's layout at
    the next frame instead of moving there over 700 ms (about 40 frames)."""
    before = pk.canvas(tab)
    pk.step_once(tab)
    assert len(pk.stats(tab)["transitionFrames"]) <= 2
    pk.wait(tab, lambda d: (pk.canvas(d) != before).any(), "the next snapshot drawn")
