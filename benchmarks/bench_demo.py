"""`repviz demo` end to end: wall time, the time of each step (read off when its line appears) and the resident
memory of every process of its tree (polled), median of REPEATS runs into fresh log directories.

    python benchmarks/bench_demo.py [--quick] [--repeats 3] [--empty-cache]

Peak memory is reported for the largest single process (what a machine must hold at once for one of them) and for
the whole tree at one moment. ``--empty-cache`` points NUMBA_CACHE_DIR at a new directory per run (a fresh install).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

# The first words of the line each step prints when it ends.
STEPS = {"training": "cnn/seed1", "embeddings": "embeddings:", "placement": "placed ",
         "meta-SNE": "meta-SNE (cka)", "similarity": "layer similarity"}


def poll(pid: int, peaks: dict, stop: threading.Event) -> None:
    """The largest resident set of each process of the tree (by pid) and of the whole tree, every 20 ms."""
    root = psutil.Process(pid)
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        total = 0
        for p in procs:
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            peaks[p.pid] = max(peaks.get(p.pid, 0), rss)
        peaks["tree"] = max(peaks.get("tree", 0), total)
        stop.wait(0.02)


def one(args, repeat: int) -> dict:
    env = dict(os.environ)
    if args.empty_cache:
        env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-demo-numba-")
    logdir = tempfile.mkdtemp(prefix="bench-demo-")
    cmd = [sys.executable, "-m", "repviz.cli", "demo", logdir, *(["--quick"] if args.quick else [])]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peaks: dict = {}
    stop = threading.Event()
    poller = threading.Thread(target=poll, args=(proc.pid, peaks, stop))
    poller.start()
    marks = {}
    for line in proc.stdout:
        for step, prefix in STEPS.items():
            if line.strip().startswith(prefix) and step not in marks:
                marks[step] = time.perf_counter() - start
    proc.wait()
    wall = time.perf_counter() - start
    stop.set()
    poller.join()
    if proc.returncode:
        raise SystemExit(f"repviz demo exited with {proc.returncode}")
    times, before = {}, 0.0
    for step in STEPS:
        if step in marks:
            times[step], before = marks[step] - before, marks[step]
    times["summary and exit"] = wall - before
    tree = peaks.pop("tree", 0)
    largest = sorted(peaks.items(), key=lambda kv: -kv[1])
    row = {"wall": wall, **times, "peak main GB": peaks.get(proc.pid, 0) / 1e9,
           "peak largest GB": largest[0][1] / 1e9, "peak second GB": largest[1][1] / 1e9 if len(largest) > 1 else 0,
           "peak tree GB": tree / 1e9}
    print(f"run {repeat}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--empty-cache", action="store_true")
    args = parser.parse_args()
    rows = [one(args, r) for r in range(args.repeats)]
    print("median: " + ", ".join(f"{k} {statistics.median(r.get(k, 0) for r in rows):.2f}" for k in rows[0]))


if __name__ == "__main__":
    main()
