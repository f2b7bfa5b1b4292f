"""The background warm-up that compiles the numerical kernels while a model trains."""

import subprocess
import sys

from repviz import warmup


def test_warm_runs_every_stage_on_a_tiny_log_directory():
    seconds = warmup.warm(["tsne", "pca"])
    assert set(seconds) == {"tsne", "pca", "tsne (fft)", "meta"}
    assert all(s >= 0 for s in seconds.values())


def test_start_runs_in_a_low_priority_process_that_exits_cleanly(tmp_path):
    proc = warmup.start(["pca"], meta=False)
    assert proc is not None
    assert proc.wait(timeout=300) == 0


def test_importing_repviz_does_not_start_anything():
    out = subprocess.run([sys.executable, "-c", "import repviz, repviz.warmup, sys; "
                          "print('numba' in sys.modules, 'tensorflow' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
