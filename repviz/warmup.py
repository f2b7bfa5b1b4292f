"""Compile the numerical kernels ahead of need, in a background process, so that the first embedding after
training does not wait for the compiler.

numba compiles each kernel at its first call in a process and, with ``cache=True``, stores the machine code
beside its module (or under ``NUMBA_CACHE_DIR``), where later processes load it in milliseconds. On an empty
cache (a new install, an upgrade) the first t-SNE, Isomap or meta-SNE of a process therefore waits seconds for
the compiler. :func:`start` spawns a low-priority process that runs the same code paths on a tiny log directory
(the pipeline's chains with alignment, the quality scores, meta-SNE) while the model trains, which fills the
cache; :func:`warm` is what it runs.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import warnings
from collections.abc import Sequence

import numpy as np

from .workers import background_process

#: Methods warmed when none are named: what ``repviz demo`` computes.
DEFAULT_METHODS = ("tsne", "pca")


def warm(methods: Sequence[str] = DEFAULT_METHODS, *, meta: bool = True) -> dict[str, float]:
    """Run each method of :data:`repviz.pipeline.METHODS` through the pipeline on a tiny log directory (four
    snapshots, so the aligned continuation runs too), then meta-SNE on it (classical MDS and t-SNE maps); returns
    seconds per stage. Also runs each method's warm-up policy (:attr:`repviz.methods.Method.warm_with`: t-SNE's
    FFT repulsion, which the tiny input would not reach and larger probe sets use)."""
    from .methods import METHODS
    from .pipeline import embed_logdir
    from .store import RunWriter

    seconds = {}
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="repviz-warmup-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny input lowers t-SNE's perplexity, with a warning nobody needs
        writer = RunWriter(os.path.join(tmp, "warmup"))
        writer.begin({"fingerprint": {"model": "warmup", "probe": "warmup"},
                      "layers": {"layer": {"stored_shape": [60, 8]}}})
        labels = np.repeat(np.arange(3), 20)
        writer.write_probe(np.arange(60), labels)
        base = rng.normal(size=(60, 8)).astype(np.float32) + 4 * np.eye(3, 8, dtype=np.float32)[labels]
        for step in range(4):
            writer.write_activation("layer", step, base + 0.1 * step * rng.normal(size=base.shape).astype(np.float32))
        for method in methods:
            start = time.perf_counter()
            embed_logdir(tmp, [method], jobs=1, progress=False)
            seconds[method] = time.perf_counter() - start
        for method in methods:  # what the tiny input does not reach, as the method's registration says
            warm_more = METHODS[method].warm_function()
            seconds |= {f"{method} ({kernel})": s for kernel, s in (warm_more() if warm_more else {}).items()}
        if meta:
            from .meta import MetaSNE

            start = time.perf_counter()
            for embedding in ("mds", "tsne"):
                MetaSNE(embedding=embedding, cache=False).fit(tmp)
            seconds["meta"] = time.perf_counter() - start
    return seconds


def start(methods: Sequence[str] = DEFAULT_METHODS, *, meta: bool = True) -> subprocess.Popen | None:
    """Start :func:`warm` in a background process at the lowest CPU priority; returns it (None if it could not
    start: warming is an optimisation, never a failure). Its output is discarded."""
    code = f"from repviz.warmup import warm; warm({list(methods)!r}, meta={meta!r})"
    try:
        return background_process(["-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    except OSError:
        return None
