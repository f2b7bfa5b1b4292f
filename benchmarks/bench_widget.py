"""The notebook widget beside the TensorBoard tab: first draw and animation frames at 1,000, 20,000 and 100,000
points, and the bytes its front end adds to the package.

    python benchmarks/bench_widget.py [--sizes 1000 20000 100000] [--skip-tab]

Both are timed the same way (bench_plugin.choice_rows): the page opens on a run of 100 points; for each size, time
from choosing its run in the run picker to its first complete draw, then the frame intervals and costs of three
animations between its two snapshots, read from ``window.__repvizStats`` (static/index.js). The tab runs in
TensorBoard (bench_plugin.page_rows); the widget runs in a real JupyterLab started here (tests/notebook/labkit.py:
temporary root, token, offline), ``repviz.show`` in a notebook cell, its requests answered by the kernel over the
widget's messages. Both in headless Chromium with software WebGL (SwiftShader), 1280 x 800; the widget's canvas
is a little smaller (the notebook's margins). Needs chromium, chromedriver and the test extra (selenium,
jupyterlab, anywidget).
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tb_plugin"), str(ROOT / "tests" / "notebook")]

from bench_plugin import Row, _chromium, _until, choice_rows, page_rows, print_table, write_logdir  # noqa: E402

OPEN = 100  # points of the run the page opens on


def widget_rows(sizes: list[int]) -> list[Row]:
    """Choice-to-draw and animation rows of the widget in JupyterLab, at ``sizes`` points."""
    chrome, reason = _chromium()
    if chrome is None:
        print(f"widget rows skipped: {reason}")
        return []
    from labkit import Lab, Notebook, enter_widget

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            for i, size in enumerate([OPEN, *sizes]):
                write_logdir(lab.root / "logs" / f"{i}-{size}", size)
            lab.wait_ready()
            nb = Notebook(chrome, lab, "bench.ipynb",
                          [f"import repviz\nw = repviz.show('logs', run='0-{OPEN}/bench')\nw"])
            nb.run(0)
            enter_widget(chrome, nb.cell(0))
            _until(chrome, f"return window.__repvizStats.n === {OPEN}", "the first run")
            for i, size in enumerate(sizes, start=1):
                rows += choice_rows(chrome, f"{i}-{size}/bench", size, prefix="widget")
        finally:
            chrome.quit()
            lab.stop()
    return rows


def size_rows() -> list[Row]:
    """Bytes of the widget's front end in the package (notebook/: the page bundle and the host module), as files
    and gzip-compressed (about what a wheel, a zip, stores)."""
    files = sorted((ROOT / "tb_plugin" / "tensorboard_plugin_repviz" / "notebook").glob("*.js"))
    raw = sum(f.stat().st_size for f in files)
    packed = sum(len(gzip.compress(f.read_bytes(), 9)) for f in files)
    names = ", ".join(f.name for f in files)
    return [(f"front end in the package ({names})", raw / 1000, "kB", ""),
            ("front end in the package, gzip -9", packed / 1000, "kB", "")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 20_000, 100_000], help="points per run")
    ap.add_argument("--skip-tab", action="store_true", help="the widget alone")
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    load = os.getloadavg()[0]
    sizes = sorted(args.sizes)
    rows = [] if args.skip_tab else page_rows(sizes[-1], sizes=(OPEN, *sizes[:-1]))
    rows += widget_rows(sizes) + size_rows()
    print(f"{os.cpu_count()} cores, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
          f"(other processes share them); headless Chromium, software WebGL (SwiftShader), 1280 x 800")
    print_table(rows)


if __name__ == "__main__":
    main()
