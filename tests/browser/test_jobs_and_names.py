"""A job cancelled from the tab, and names that would spoof the page, in a real browser (fixtures in conftest.py,
helpers in pagekit.py; issue #40, items 4 and 8).

The status bar says how long a job has run of its time limit, and its Cancel button stops it on the server. A run
and a layer named with bidirectional controls (a right-to-left override makes "evil\\u202egnp.exe" read as
"evilexe.png") are shown with the controls escaped in every text and attribute of the page and in the download's
file name; the selection's CSV quotes cells that a spreadsheet would run as formulas and keeps numbers as numbers.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pagekit as pk
import pytest

pk.require_browser()

from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.slow
SPOOF, LAYER = "evil\u202egnp.exe", "out\u2067put\u2069"
N, N_BIG = 60, 4000
BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
NOTES = ["=1+1", "+cmd", "@SUM(A1)", "-x", "plain", "-1.5"]


@pytest.fixture(scope="module")
def logdir(server, new_run):
    """Run SPOOF: layer LAYER (N probes, 2 snapshots, PCA) with a metadata column "note" of formula-like texts and
    a number column "score"; run "big": N_BIG probes of 64 features at 5 snapshots (PCA stored; a t-SNE of it
    takes minutes, which the test cancels)."""
    import repviz
    from repviz.store import write_metadata

    root = server[0]
    rng = np.random.default_rng(0)
    writer = new_run(root / SPOOF, layers={LAYER: (N, 8)})
    writer.write_probe(np.arange(N), np.arange(N) % 3)
    for step in range(2):
        writer.write_activation(LAYER, step, rng.normal(size=(N, 8)).astype(np.float32))
    write_metadata(root / SPOOF, {"note": [NOTES[i % len(NOTES)] for i in range(N)],
                                  "score": [-1.5 if i % 2 else 2.25 for i in range(N)]})
    writer = new_run(root / "big", layers={"wide": (N_BIG, 64)})
    writer.write_probe(np.arange(N_BIG), np.arange(N_BIG) % 10)
    for step in range(5):
        writer.write_activation("wide", step, rng.normal(size=(N_BIG, 64)).astype(np.float32))
    repviz.embed_logdir(root, methods=["pca"], progress=False)
    return root


def _jobs(tab) -> list[dict]:
    return tab.execute_async_script("fetch('jobs').then(r => r.json()).then(b => arguments[arguments.length - 1](b.jobs))")


def test_the_cancel_button_stops_a_running_job(tab, shots):
    pk.select(tab, "run", "big")
    pk.select(tab, "method", "compute tsne")
    when = pk.wait(tab, lambda d: [t for t in pk.texts(d, '[data-testid="job-when"]')
                                   if re.fullmatch(r"running \d+ s of at most 1800 s", t)], "the running job's time")
    assert when
    pk.shot(tab, shots, "jobs-1-running")
    [job] = [j for j in _jobs(tab) if j["method"] == "tsne"]
    assert job["state"] == "running"
    pk.click(tab, '[data-testid="cancel-job"]')
    pk.wait(tab, lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="job"]'), "the job gone from the bar")
    assert [j["state"] for j in _jobs(tab) if j["id"] == job["id"]] == ["cancelled"]
    assert not tab.find_elements(By.CSS_SELECTOR, '[data-testid="error"], .job.failed')


def test_bidi_controls_in_names_are_shown_escaped(tab, shots):
    pk.select(tab, "run", "evil")
    pk.select(tab, "method", "pca")
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N, "the spoofing run drawn")
    options = tab.execute_script("return [...document.querySelectorAll('select[name=run] option')].map(o => o.text)")
    assert "evil\\u202egnp.exe (60)" in options
    layers = tab.execute_script("return [...document.querySelectorAll('select[name=layer] option')].map(o => o.text)")
    assert layers and layers[0].startswith("out\\u2067put\\u2069")
    raw = tab.execute_script("""
        const texts = [document.body.textContent];
        for (const e of document.querySelectorAll('[title], [aria-label], [placeholder]')) {
          texts.push(e.getAttribute('title') || '', e.getAttribute('aria-label') || '', e.getAttribute('placeholder') || '');
        }
        return texts.join('\\n');
    """)
    assert "evil\\u202egnp.exe" in raw and not BIDI.search(raw)
    pk.shot(tab, shots, "jobs-2-names")


def test_the_csv_quotes_formulas_and_keeps_numbers(tab):
    pk.wait(tab, lambda d: pk.stats(d)["n"] == N, "the spoofing run drawn")
    tab.execute_script("""
        const make = URL.createObjectURL;
        URL.createObjectURL = (blob) => { window.__csvBlob = blob; return make(blob); };
        const click = HTMLAnchorElement.prototype.click;
        HTMLAnchorElement.prototype.click = function () { window.__csvName = this.download; return click.call(this); };
    """)
    pk.drag_rectangle(tab)
    pk.wait(tab, lambda d: d.find_elements(By.XPATH, '//section[@data-testid="selection"]//button[text()="Export CSV"]'),
            "the selection bar")
    pk.click(tab, '//section[@data-testid="selection"]//button[text()="Export CSV"]', By.XPATH)
    pk.wait(tab, lambda d: d.execute_script("return Boolean(window.__csvBlob)"), "the CSV download")
    text = tab.execute_async_script("window.__csvBlob.text().then(arguments[arguments.length - 1])")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and list(rows[0]) == ["probe_id", "label", "prediction", "confidence", "note", "score"]
    for row in rows:
        note = NOTES[int(row["probe_id"]) % len(NOTES)]
        assert row["note"] == (note if note in ("plain", "-1.5") else "'" + note)
        assert row["score"] in ("-1.5", "2.25")
    name = tab.execute_script("return window.__csvName")
    assert name.startswith("repviz-selection-evil\\u202egnp.exe-") and not BIDI.search(name)
