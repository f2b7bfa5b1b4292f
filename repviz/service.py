"""The TensorBoard tab's one door into repviz: what the plugin reads, computes and starts, in one module.

A TensorBoard plugin talks to a data provider rather than to the storage behind it; ``tensorboard_plugin_repviz``
imports this module and no other of repviz (``tests/test_plugin_imports.py`` checks it). It offers:

- the log directory and its runs: :class:`LogDir`, :func:`open_run`, :class:`Run` (layers, steps, probes,
  metadata, embeddings, placed points, cached k-NN graphs and density contours), the probe's classes and columns
  by its target policy (:func:`class_codes`, :func:`probe_columns`), :func:`checksum`,
  :func:`path_key`, and the errors the routes map to HTTP (:class:`NotFoundError`, :class:`ProbeMismatchError`);
- the choices the page offers and the server decides (:func:`choices`, :data:`METHODS`, :data:`META_OPTIONS`,
  :data:`MEASURES`, :data:`KERNELS`, :func:`measure_options`);
- stored cross-run results: :func:`meta_result`, :func:`cached_similarity`, :func:`shared_probe_ids` (ids and
  inputs checked), :func:`inputs_fingerprint`;
- the numerics of the comparison routes: :func:`nearest_to`, :func:`neighbor_graph`, :func:`neighbor_change`,
  :func:`graph_method`, :func:`common_rows`, :func:`density_contours`;
- the background jobs, by kind (:data:`JOBS`), run with their progress reported by :func:`run_job`;
- how an optional extra is installed (:func:`install_hint`: the notebook widget's anywidget).

Importing it loads no Keras, TensorFlow or numba: the jobs and the k-NN graph import them when they run, in the
plugin's worker processes.
"""

from __future__ import annotations

from collections.abc import Callable

from repviz.density import density_contours
from repviz.meta.options import EMBEDDINGS, METRICS, TRANSFORMS
from repviz.meta.result import MetaResult
from repviz.meta.sources import (
    INPUT_KEY,
    ProbeMismatchError,
    inputs_fingerprint,
    landmark_inputs,
    shared_probe_ids,
)
from repviz.metadata import Metadata, kinds_table
from repviz.methods import DEFAULT_METHOD, METHODS
from repviz.neighbor_change import graph_method, nearest_to, neighbor_change, neighbor_graph
from repviz.progress import ProgressState
from repviz.similarity.cache import measure_params
from repviz.similarity.matrix import cached_similarity
from repviz.similarity.options import KERNELS, RBF_SIGMA
from repviz.similarity.registry import DEFAULT_MEASURE, MEASURES
from repviz.store import (
    DENSITY,
    META_RESULT,
    NEIGHBOR_GRAPH,
    PLACED,
    PLUGIN_NAME,
    LogDir,
    NotFoundError,
    Probe,
    Run,
    checksum,
    open_logdir,
    open_run,
    path_key,
)
from repviz.subsets import common_rows
from repviz.targets import class_codes, with_target_column
from repviz.version import install_hint

__all__ = ["DEFAULT_MEASURE", "DENSITY", "INPUT_KEY", "JOBS", "KERNELS", "MEASURES", "META_OPTIONS", "META_RESULT",
           "METADATA_KINDS", "METHODS", "NEIGHBOR_GRAPH", "PLACED", "PLUGIN_NAME", "LogDir", "NotFoundError",
           "Probe", "ProbeMismatchError", "Run", "cached_similarity", "checksum", "choices", "class_codes",
           "common_rows", "density_contours", "graph_method", "inputs_fingerprint", "install_hint", "measure_options",
           "meta_result",
           "nearest_to", "neighbor_change", "neighbor_graph", "open_run", "path_key", "probe_columns", "run_job",
           "shared_probe_ids"]

#: How the tab draws each kind of metadata column (:func:`repviz.metadata.kinds_table`).
METADATA_KINDS = kinds_table()
#: The choices of a meta-SNE map, default first (those of ``repviz meta``).
META_OPTIONS = {"transform": TRANSFORMS, "metric": METRICS, "embedding": EMBEDDINGS}
#: The similarity options the tab offers besides the measure.
_SIMILARITY_OPTIONS = ("debiased", "kernel")
_JSON_SCALARS = (bool, int, float, str, type(None))


def measure_options(measure: str) -> list[str]:
    """Which of the tab's similarity options change ``measure``'s values, as its cache key says (CKA: the kernel
    and the estimator; Procrustes: none)."""
    params = measure_params(measure, kernel=KERNELS[0], debiased=True, sigma=RBF_SIGMA, batch_size=None,
                            random_state=0, n_probe=1)
    return [option for option in _SIMILARITY_OPTIONS if option in params]


def choices() -> dict:
    """What the page offers that the server decides: every registered embedding method with its alignment and
    pipeline defaults (JSON scalars), the options of a meta-SNE map and of a similarity heatmap, default first,
    and which options each measure takes. The page spells none of them itself."""
    methods = [{"name": m.name, "align": m.align, "supervised": m.supervised, "description": m.description,
                "defaults": {k: v for k, v in m.defaults.items() if isinstance(v, _JSON_SCALARS)}}
               for _, m in sorted(METHODS.items())]
    similarity = {"measure": list(MEASURES), "kernel": list(KERNELS),
                  "similarities": [m for m in MEASURES if MEASURES[m].higher_is_similar],
                  "options": {m: measure_options(m) for m in MEASURES}}
    return {"methods": methods, "default_method": DEFAULT_METHOD,
            "meta": {field: list(options) for field, options in META_OPTIONS.items()}, "similarity": similarity}


def probe_columns(probe: Probe) -> Metadata:
    """The probe's metadata columns as the tab shows them: those stored, and a scalar target's values as a number
    column (:func:`repviz.targets.with_target_column`)."""
    return with_target_column(probe.metadata, probe.labels, probe.target)


def meta_result(log: LogDir, name: str) -> MetaResult:
    """The stored meta-SNE map ``name`` of ``log``, memory-mapped."""
    return MetaResult.load(log, name, mmap=True)


# --------------------------------------------------------------------------------------------------------------
# Background jobs: each takes the log directory, a progress reporter and its own arguments, and returns the key
# of what it stored (or None), how many results it stored and the one-line failures it skipped.
# --------------------------------------------------------------------------------------------------------------

def _embed(log: LogDir, progress: ProgressState, run: str, layer: str, method: str) -> dict:
    """Embed one (run, layer) with ``method`` at every snapshot, as ``repviz embed`` does."""
    from repviz.pipeline import embed_logdir

    result = embed_logdir(log, methods=[method], runs=[run], layers=[layer], progress=False, on_progress=progress)
    return {"key": result.keys.get(method), "stored": result.computed + result.cached,
            "failures": result.failure_lines()}


def _meta(log: LogDir, progress: ProgressState, transform: str, metric: str, embedding: str) -> dict:
    """Compute and save the meta-SNE map of every run (with the input landmark when the probe has thumbnails,
    like ``repviz meta --include-input``); its key is the saved result's name."""
    from repviz.meta import MetaSNE

    first = next(iter(log.runs.values()), None)
    inputs = None if first is None else landmark_inputs(first.probe)
    result = MetaSNE(transform, metric, embedding, robustness=True, progress=progress).fit(log, inputs=inputs)
    return {"key": result.save(log), "stored": 1, "failures": []}


def _similarity(log: LogDir, progress: ProgressState, chosen: dict, steps: list[int] | None) -> dict:
    """Compute into the similarity cache the heatmaps ``chosen`` names (``runs``, ``layer``, ``measure``,
    ``kernel``, ``debiased``): of its runs' layers at each of ``steps``, or (``steps`` None) of its layer over
    training."""
    from repviz.similarity import similarity, similarity_over_training

    options = {k: chosen[k] for k in ("measure", "kernel", "debiased")}
    if steps is None:
        similarity_over_training(log, chosen["runs"][0], chosen["layer"], progress=progress, **options)
    else:
        for i, step in enumerate(steps):  # one matrix per snapshot: the progress counts snapshots
            progress("heatmaps", i, len(steps), f"step {step}")
            similarity(log, chosen["runs"], step, **options)
        progress("heatmaps", len(steps), len(steps), "done")
    return {"key": None, "stored": 1 if steps is None else len(steps), "failures": []}


#: The background jobs by kind: ``JOBS[kind](log, progress, *args)``.
JOBS: dict[str, Callable[..., dict]] = {"embed": _embed, "meta": _meta, "similarity": _similarity}


def run_job(kind: str, logdir: str, out: str | None, sink: Callable[[dict], None], *args) -> dict:
    """Run job ``kind`` on the log directory ``logdir`` (results written to ``out`` if given), handing ``sink`` a
    progress snapshot at most every quarter second; returns :data:`JOBS`' answer with the last snapshot
    (``progress``)."""
    state = ProgressState(sink, min_interval=0.25)
    return {**JOBS[kind](open_logdir(logdir, out), state, *args), "progress": state.snapshot()}
