"""The plugin's run index and ``repviz info`` on a log directory of many runs that recorded nothing (issue #32,
item 9), and the cost of opening one run.

    python benchmarks/bench_index.py [--runs 10000] [--rounds 3] [--against OLD_CHECKOUT]

The log directory holds ``--runs`` runs begun through the store's run writer (a manifest of 4 layers, no probe and
no snapshot: fits that stopped while starting) and one run "full" (probe and 3 snapshots of 4 layers). Measured,
each round in a fresh process:

- the catalog's full scan, and the ``runs`` index built cold and rebuilt with nothing changed (what a client's
  poll costs once the index's cache has expired), median of 3;
- a request naming a run that does not exist (``labels?run=...``, through TensorBoard's WSGI app), each 1 s after
  the last (the old catalog rescanned for an unknown name at most once a second), median of 3;
- the time spent answering ``POLLS`` requests of the ``runs`` index made 0.5 s apart (a tab left open), background
  rescans included;
- ``repviz info``: lines printed and wall time;
- ``Run()`` of the full run: median of 2,000 opens.

With ``--against`` each round measures the other checkout first, then this one (alternating), and the table shows
the median over the rounds of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {f"l{i}": {"stored_shape": [100, 4]} for i in range(4)}
POLLS = 30  # requests of the runs index, 0.5 s apart


def write_logdir(path: Path, n_runs: int) -> None:
    """``n_runs`` runs that recorded nothing (``empty00000``, ...) and one run ``full`` with 3 snapshots."""
    import numpy as np

    from repviz.store import RunWriter

    for r in range(n_runs):
        RunWriter(path / f"empty{r:05d}").begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": LAYERS})
    writer = RunWriter(path / "full")
    writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": LAYERS})
    writer.write_probe(np.arange(100), np.arange(100) % 10)
    for step in range(3):
        for layer in LAYERS:
            writer.write_activation(layer, step, np.zeros((100, 4), np.float32))


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(logdir: Path) -> dict:
    """Every figure of one checkout (the one on ``sys.path``), in seconds (``run_open``: microseconds)."""
    import warnings

    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import data, loader
    from tensorboard_plugin_repviz.catalog import Catalog
    from werkzeug import test as wtest
    from werkzeug import wrappers

    from repviz.store import Run

    warnings.simplefilter("ignore")
    out = {}
    catalog = Catalog(str(logdir), ttl=3600)
    out["scan"] = _seconds(catalog.scan)
    out["index_cold"] = _seconds(lambda: data.runs_impl(catalog, []))
    out["index_rebuild"] = statistics.median(_seconds(lambda: data.runs_impl(catalog, [])) for _ in range(3))

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logdir)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    assert client.get("/data/plugin/repviz/runs").status_code == 200  # waits for the first scan
    unknown = []
    for i in range(3):
        time.sleep(1.05)
        start = time.perf_counter()
        status = client.get(f"/data/plugin/repviz/labels?run=no-such-run-{i}").status_code
        unknown.append(time.perf_counter() - start)
        assert status == 404, status
    out["unknown_run"] = statistics.median(unknown)
    spent = 0.0
    for _ in range(POLLS):  # a tab left open: the page polls the index
        start = time.perf_counter()
        assert client.get("/data/plugin/repviz/runs").status_code == 200
        spent += time.perf_counter() - start
        time.sleep(0.5)
    out["polls"] = spent
    plugin.jobs.close()

    start = time.perf_counter()
    info = subprocess.run([sys.executable, "-c", "import sys; from repviz.cli import main; sys.exit(main(sys.argv[1:]))",
                           "info", str(logdir)], capture_output=True, text=True, check=True, cwd=logdir.parent)
    out["info_seconds"] = time.perf_counter() - start
    out["info_lines"] = len(info.stdout.splitlines())

    root = logdir / "full" / "plugins" / "repviz"
    opens = []
    for _ in range(2000):
        start = time.perf_counter()
        Run(root, "full")
        opens.append(time.perf_counter() - start)
    out["run_open"] = 1e6 * statistics.median(opens)
    return out


def _measure_in(checkout: Path, logdir: Path) -> dict:
    """:func:`measure` in a fresh process importing repviz and the plugin from ``checkout``."""
    code = (f"import sys, json; sys.path[:0] = [{str(checkout)!r}, {str(checkout / 'tb_plugin')!r}, "
            f"{str(ROOT / 'benchmarks')!r}]; import bench_index; "
            f"print(json.dumps(bench_index.measure(__import__('pathlib').Path({str(logdir)!r}))))")
    env_path = f"{checkout}:{checkout / 'tb_plugin'}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": env_path}, cwd=logdir.parent)  # not a checkout's cwd
    return json.loads(done.stdout.strip().splitlines()[-1])


ROWS = [("scan", "catalog full scan", "s", 1), ("index_cold", "runs index, cold", "s", 1),
        ("index_rebuild", "runs index rebuilt, nothing changed (median of 3)", "s", 1),
        ("unknown_run", "request naming an unknown run (median of 3)", "s", 1),
        ("polls", f"{POLLS} polls of the runs index 0.5 s apart: time answering them", "s", 1),
        ("info_lines", "repviz info: lines printed", "", 0), ("info_seconds", "repviz info: wall time", "s", 1),
        ("run_open", "Run() of a run with 3 snapshots (median of 2,000)", "us", 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000, help="runs that recorded nothing")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per checkout (median)")
    ap.add_argument("--against", type=Path, help="another checkout (e.g. a git worktree of an old commit)")
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT)]
    with tempfile.TemporaryDirectory(prefix="repviz-bench-index-") as tmp:
        logdir = Path(tmp) / "logs"
        write_logdir(logdir, args.runs)
        checkouts = ([("old", args.against)] if args.against else []) + [("new", ROOT)]
        results: dict[str, list[dict]] = {label: [] for label, _ in checkouts}
        for r in range(args.rounds):
            for label, checkout in checkouts:
                results[label].append(_measure_in(checkout, logdir))
                print(f"round {r + 1} {label}: {json.dumps(results[label][-1])}", flush=True)
    print(f"\n{args.runs} runs that recorded nothing + 1 run of 3 snapshots; median of {args.rounds} rounds")
    print(f"| measure | {' | '.join(label for label, _ in checkouts)} |")
    print(f"|---|{'---|' * len(checkouts)}")
    for key, what, unit, digits in ROWS:
        values = [statistics.median(x[key] for x in results[label]) for label, _ in checkouts]
        cells = [f"{v:,.{3 if unit == 's' else digits}f} {unit}".strip() for v in values]
        print(f"| {what} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
