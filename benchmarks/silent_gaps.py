"""How long a command stays silent when its output is a pipe (a notebook cell, a log file, CI), as `| ts` shows.

Runs each command with stdout and stderr into one pipe, reads it line by line as the lines arrive, and reports per
command: its duration, the number of lines, the longest stretch without a line (from the start, between lines, or
before the exit) and every stretch over the threshold, and the TensorFlow start-up lines it printed.

    python benchmarks/silent_gaps.py --logdir /tmp/demo-logs            # demo, then place, export, umap embed
    python benchmarks/silent_gaps.py --logdir /tmp/demo-logs --skip-demo --show

The commands are those of the README on the demo's log directory: ``repviz demo``, ``repviz place`` of the
placement example's run into its layouts (its placed points removed first: placed afresh), ``repviz export``
and ``repviz embed --method umap``. The commands after the demo write into the log directory: give a copy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACED = "relu/training-digits"  # the demo's placement example
TF_NOISE = re.compile(r"absl::InitializeLog|port\.cc:\d+\] oneDNN|cuda_|TF-TRT|rebuild TensorFlow")


def run(command: list[str], threshold: float, show: bool) -> dict:
    """Run `command`, its output a pipe; the gaps between its lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tb_plugin"),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user's shell has it
    start = last = time.monotonic()
    gaps, lines, noise = [], 0, []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                          env=env) as child:
        for line in child.stdout:
            now = time.monotonic()
            gaps.append((now - last, now - start, line.rstrip()[:100]))
            last, lines = now, lines + 1
            if TF_NOISE.search(line):
                noise.append(line.rstrip()[:100])
            if show:
                print(f"{now - start:7.1f} s  {line.rstrip()}", flush=True)
        code = child.wait()
    end = time.monotonic()
    gaps.append((end - last, end - start, "<exit>"))
    longest = max(gaps)
    return {"command": " ".join(command[2:]), "exit": code, "seconds": round(end - start, 1), "lines": lines,
            "longest_gap_s": round(longest[0], 1), "longest_gap_before": longest[2],
            "gaps_over_threshold": [(round(g, 1), round(at, 1), what) for g, at, what in gaps if g > threshold],
            "tf_startup_lines": noise}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True, type=Path)
    parser.add_argument("--threshold", type=float, default=10.0, help="seconds of silence reported (default 10)")
    parser.add_argument("--skip-demo", action="store_true", help="the log directory holds the demo already")
    parser.add_argument("--quick", action="store_true", help="repviz demo --quick")
    parser.add_argument("--only", nargs="*", help="demo, place, export, umap (default: all)")
    parser.add_argument("--show", action="store_true", help="print each line with its time")
    args = parser.parse_args()
    repviz = [sys.executable, "-m", "repviz.cli"]
    logdir = str(args.logdir)
    commands = {
        "demo": [*repviz, "demo", logdir, *(["--quick"] if args.quick else [])],
        "place": [*repviz, "place", logdir, "--run", PLACED, "--into", "relu/seed0"],
        "export": [*repviz, "export", logdir, "--out", str(args.logdir.parent / f"{args.logdir.name}-figures")],
        "umap": [*repviz, "embed", logdir, "--method", "umap"],
    }
    only = args.only or (list(commands)[1:] if args.skip_demo else list(commands))
    results = []
    for name in only:
        if name == "place":  # the demo placed them already: placed afresh
            for placed in args.logdir.glob(f"{PLACED}/plugins/repviz/placed"):
                shutil.rmtree(placed)
        results.append(run(commands[name], args.threshold, args.show))
    for r in results:
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
