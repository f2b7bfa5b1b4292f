"""Probe metadata in the Repviz tab, in a real browser (fixtures in conftest.py, helpers in pagekit.py; issue #27).

A text-probe run (sentences through a small token model, logged with ``metadata=``): hovering a point shows its
sentence and its columns, colouring by a metadata column changes the picture and its legend (categories, then a
number's scale), a search for a word selects exactly the sentences holding it (highlighted, counted) and "hide the
rest" leaves only them drawn.
"""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

from selenium.common.exceptions import ElementNotInteractableException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.slow
TOPICS = {
    "animals": "cat dog horse bird mouse tiger lion fish",
    "weather": "rain snow wind storm cloud sun fog cold",
    "food": "bread cheese apple soup rice pasta salad cake",
}
FILLER = "the a one some big small old new".split()
N = 150


def _sentences(rng) -> tuple[list[str], list[int]]:
    texts, topics = [], []
    for i in range(N):
        topic = i % 3
        words = list(TOPICS)[topic]
        own = TOPICS[words].split()
        length = int(rng.integers(4, 9))
        texts.append(" ".join(rng.choice(own + FILLER, size=length)).capitalize() + ".")
        topics.append(topic)
    return texts, topics


@pytest.fixture(scope="module")
def probe_text():
    rng = np.random.default_rng(0)
    texts, topics = _sentences(rng)
    return texts, topics, rng


@pytest.fixture(scope="module")
def logdir(server, probe_text):
    """Run "text": a bag-of-words model over token ids, its probe logged with text, source, length and score
    columns, embedded by PCA; run "zz-damaged" the same with its metadata file torn."""
    import keras

    import repviz

    root = server[0]
    texts, topics, rng = probe_text
    vocab = sorted({w.strip(".").lower() for t in texts for w in t.split()})
    index = {w: i + 1 for i, w in enumerate(vocab)}
    x = np.zeros((N, 8), dtype=np.int32)
    for i, t in enumerate(texts):
        ids = [index[w.strip(".").lower()] for w in t.split()]
        x[i, :len(ids)] = ids
    y = np.asarray(topics)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,), dtype="int32"), keras.layers.Embedding(len(vocab) + 1, 16, name="emb"),
                              keras.layers.GlobalAveragePooling1D(name="pool"),
                              keras.layers.Dense(3, activation="softmax", name="out")])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    score = rng.normal(size=N)
    score[::10] = math.nan
    metadata = {"text": texts, "source": [["web", "book", "news"][i % 5 % 3] for i in range(N)],
                "length": [len(t.split()) for t in texts], "score": score}
    for run in ("text", "zz-damaged"):
        logger = repviz.ActivationLogger(root / run, probe=(x, y), layers=["pool"], metadata=metadata)
        model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=[logger])
    (root / "zz-damaged/plugins/repviz/probe/metadata.json").write_text('{"columns": [')  # torn
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    return root


def _changed(a, b) -> int:
    return int((np.abs(a.astype(int) - b.astype(int)).sum(axis=-1) > 30).sum())


def test_hover_shows_the_text_and_columns(tab, shots, probe_text):
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N, "the draw of the text run")
    shown = pk.hover_until(tab, lambda d: (pk.texts(d, '[data-testid="hover-text"]') or [""])[0], "the hover text")
    assert shown in probe_text[0]  # one of the sentences, in full
    card = pk.text(tab, '[data-testid="hover"]')
    for field in ("source", "length", "score", "probe id"):
        assert field in card
    assert not tab.find_elements(By.CSS_SELECTOR, '[data-testid="hover"] .thumb')  # a text card, no thumbnail box
    pk.shot(tab, shots, "metadata-1-hover")


def test_colour_by_a_metadata_column(tab, shots):
    before = pk.canvas(tab)
    pk.select(tab, "color-column", "source")
    pk.wait(tab, lambda d: pk.text(d, '[data-testid="legend"]').startswith("source"), "the source legend")
    legend = pk.text(tab, '[data-testid="legend"]')
    assert {"web", "book", "news"} <= set(legend.split())
    assert sum(int(w) for w in legend.split() if w.isdigit()) == N
    pk.wait(tab, lambda d: _changed(before, pk.canvas(d)) > 200, "the points recoloured by source")
    pk.shot(tab, shots, "metadata-2-source")
    by_source = pk.canvas(tab)
    pk.select(tab, "color-column", "score")
    pk.wait(tab, lambda d: pk.text(d, '[data-testid="legend"]').startswith("score"), "the score legend")
    legend = pk.text(tab, '[data-testid="legend"]')
    assert "15 missing" in legend  # every tenth score is NaN: grey, and said so
    assert tab.find_elements(By.CSS_SELECTOR, '[data-testid="legend"] .ramp')
    pk.wait(tab, lambda d: _changed(by_source, pk.canvas(d)) > 200, "the points recoloured by score")
    pk.shot(tab, shots, "metadata-3-score")
    # the Grid's cells colour by the column too (one row, 3 snapshots)
    before = pk.stats(tab)["gridDraws"]
    pk.click(tab, '[data-name="view"] [data-value="grid"]')
    pk.wait(tab, lambda d: pk.stats(d)["gridDraws"] > before and pk.stats(d)["gridCells"] == 3, "the grid drawn")
    pk.shot(tab, shots, "metadata-3b-grid")
    pk.click(tab, '[data-name="view"] [data-value="main"]')


def _search_for(driver, text):
    """Type ``text`` into the search box, again on a fresh box if the page rebuilt it under the typing (the Main
    view, shown again, builds its panels anew)."""
    def typed(d):
        try:
            box = d.find_element(By.CSS_SELECTOR, '[data-testid="search"]')
            box.clear()
            box.send_keys(text)
            return box.get_attribute("value") == text
        except (StaleElementReferenceException, ElementNotInteractableException):
            return False
    pk.wait(driver, typed, f"{text!r} typed into the search box")


def test_search_finds_a_word_and_hides_the_rest(tab, shots, probe_text):
    texts = probe_text[0]
    expected = sum(bool(re.search("cat", t, re.IGNORECASE)) for t in texts)
    assert 0 < expected < N
    before = pk.canvas(tab)
    _search_for(tab, "cat")
    count = pk.wait(tab, lambda d: pk.texts(d, '[data-testid="search-count"]'), "the search count")[0]
    assert int(count) == expected
    assert int(pk.text(tab, '[data-testid="selection-count"]')) == expected  # the shared selection
    pk.wait(tab, lambda d: _changed(before, pk.canvas(d)) > 100, "the matches highlighted")
    pk.hover_a_point(tab)
    pk.shot(tab, shots, "metadata-4-search")
    all_ink = pk.ink(pk.canvas(tab)).sum()
    pk.click(tab, '[data-testid="only"]')
    pk.wait(tab, lambda d: pk.ink(pk.canvas(d)).sum() < 0.6 * all_ink, "the other points hidden")
    # only matches are drawn: the card shows a sentence with the word marked
    pk.hover_until(tab, lambda d: [m.lower() for m in pk.texts(d, '[data-testid="hover-text"] mark')][:1] == ["cat"],
                   "the match marked in the hover text")
    pk.shot(tab, shots, "metadata-5-only")
    # a regular expression on one column
    pk.select(tab, "search-column", "text")
    _search_for(tab, "/^(cat|dog) /i")
    expected = sum(bool(re.search("^(cat|dog) ", t, re.IGNORECASE)) for t in texts)
    pk.wait(tab, lambda d: pk.texts(d, '[data-testid="search-count"]') == [str(expected)], "the regex count")


def test_export_csv_carries_the_columns(tab, probe_text):
    texts = probe_text[0]
    tab.execute_script("""
        const make = URL.createObjectURL;
        URL.createObjectURL = (blob) => { window.__csvBlob = blob; return make(blob); };
    """)
    selected = int(pk.text(tab, '[data-testid="selection-count"]'))
    pk.click(tab, '//section[@data-testid="selection"]//button[text()="Export CSV"]', By.XPATH)
    text = tab.execute_async_script("window.__csvBlob.text().then(arguments[arguments.length - 1])")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == selected and list(rows[0]) == ["probe_id", "label", "prediction", "confidence", "text",
                                                       "source", "length", "score"]
    for row in rows:
        assert row["text"] == texts[int(row["probe_id"])] and re.search("^(cat|dog) ", row["text"], re.IGNORECASE)


def test_a_damaged_metadata_file_is_one_line_and_the_run_draws(tab, shots):
    draws = pk.stats(tab)["draws"]
    pk.select(tab, "run", "zz-damaged")
    pk.wait(tab, lambda d: pk.stats(d)["draws"] > draws and pk.stats(d)["n"] == N, "the damaged run drawn")
    line = pk.wait_text(tab, '[data-testid="search-box"] .warn', "the metadata error")
    assert "metadata.json is not valid JSON" in line and "\n" not in line
    assert not tab.find_elements(By.CSS_SELECTOR, 'select[name="color-column"]')
    pk.shot(tab, shots, "metadata-6-damaged")
