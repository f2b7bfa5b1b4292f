"""What the comparison routes return, without HTTP: nearest neighbours in the original activation space,
neighbourhood change between two representations, trails across snapshots and density contours of a layout.

Route glue: names checked against what the store lists, bounds checked, results cached in the store; the numerics
are :mod:`repviz.neighbor_change` and :mod:`repviz.density`, which Python users and ``repviz export`` can call too.
k-NN graphs (numba, seconds at 20,000 points) are computed by :func:`compute_graph` in worker processes
(``JobManager.calls``, the two graphs of a pair side by side), never in TensorBoard's process, and cached in the
store, so the change between any two representations whose graphs are cached costs milliseconds (it is not
cached itself). Density contours are cached in the store too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from repviz.service import (
    DENSITY,
    NEIGHBOR_GRAPH,
    NotFoundError,
    ProbeMismatchError,
    Run,
    common_rows,
    density_contours,
    graph_method,
    nearest_to,
    neighbor_change,
    neighbor_graph,
    shared_probe_ids,
)

from .catalog import Catalog
from .data import BadRequest, coords_impl, known_key, known_layer, known_step, label_codes

logger = logging.getLogger(__name__)

#: Bounds of the routes' parameters.
MAX_KNN = 50
MAX_CHANGE_K = 100
MAX_TRAILS = 500
MAX_LEVELS = 10


def _representation(catalog: Catalog, run_name: str, layer: str, step: int) -> tuple[Run, np.ndarray]:
    """The run and its stored activations of ``layer`` at ``step`` as (n, features), memory-mapped."""
    run = catalog.run(run_name)
    known_step(step, run.steps(known_layer(run, layer)), f"layer {layer!r} of run {run_name!r}")
    X = run.activations(layer, step)
    return run, X.reshape(X.shape[0], -1)


def _check_k(k: int, bound: int, n: int) -> int:
    top = min(bound, n - 1)
    if not 1 <= k <= top:
        raise BadRequest(f"k must be in [1, {top}] ({n} probe points, at most {bound}); got {k}")
    return k


# --------------------------------------------------------------------------------------------------------------
# Nearest neighbours of one point
# --------------------------------------------------------------------------------------------------------------

def knn_impl(catalog: Catalog, run_name: str, layer: str, step: int, index: int, k: int) -> dict:
    """The ``k`` nearest probe points of probe point ``index`` in the stored activations, nearest first (ties by
    position), without the point itself: exact, from the point's distances to all others. Indices are positions
    in the probe; a snapshot of a probe subset answers for, and with, the points it holds."""
    run, X = _representation(catalog, run_name, layer, step)
    rows, n = run.rows(layer, step), len(run.probe)
    if not 0 <= index < n:
        raise BadRequest(f"index must be in [0, {n}); got {index}")
    row = int(np.searchsorted(rows, index))
    if row >= len(rows) or rows[row] != index:
        raise BadRequest(f"index must be one of the {len(rows)} probe points of this snapshot; got {index}")
    _check_k(k, MAX_KNN, len(X))
    order, distances = nearest_to(X, row, k)
    return {"index": index, "k": k, "neighbors": rows[order].tolist(), "distances": distances.tolist()}


# --------------------------------------------------------------------------------------------------------------
# Neighbourhood change
# --------------------------------------------------------------------------------------------------------------

def graph_variant(n: int, k: int) -> str:
    """How the k-NN graph of ``n`` points is computed and cached: ``"k<k>-exact"`` or ``"k<k>-nndescent"``."""
    return f"k{k}-{graph_method(n)}"


def compute_graph(run: Run, layer: str, step: int, k: int, where: np.ndarray | None = None) -> np.ndarray:
    """The k-NN graph (n, k) int32 of the stored activations, cached in the store (worker side: imports numba).

    ``where`` (rows of the snapshot) restricts it to those rows (the points two snapshots of different probe
    subsets share): that graph, indices into ``where``, is not cached. A log directory that cannot be written
    (and no ``--repviz_out``) still gets its answer, uncached.
    """
    X = run.activations(layer, step)
    if where is not None:
        return neighbor_graph(np.asarray(X[where]), k, random_state=0)
    variant = graph_variant(len(X), k)
    indices = neighbor_graph(X, k, random_state=0)
    try:
        run.artifact(NEIGHBOR_GRAPH).write(layer, step, variant, indices)
    except OSError as e:
        logger.warning("repviz: k-NN graph of %r/%r step %d not cached: %s", run.name, layer, step, e)
    return indices


def neighbor_change_impl(catalog: Catalog, first: tuple[str, str, int], second: tuple[str, str, int], k: int,
                             compute: Callable[[list[tuple], int], list[np.ndarray]]) -> np.ndarray:
    """Neighbourhood change (n,) float32 between two representations, each given as (run, layer, step), one value
    per row of the first (its probe subset's order).

    ``compute(representations, k)`` returns the graphs of those given as (run, layer, step) or, restricted to some
    of their rows, (run, layer, step, rows) that are not cached yet (the plugin passes one that runs
    :func:`compute_graph` in worker processes, side by side). Snapshots of different probe subsets are compared
    on the points they share (k-NN graphs among those points only); the first's other points get NaN.
    """
    (run_a, X_a), (run_b, _) = (_representation(catalog, *first), _representation(catalog, *second))
    try:  # the same probe ids and, where capture stored their digest, the same probe inputs
        shared_probe_ids(run_a, run_b, "neighbourhood change compares the same probe points")
    except ProbeMismatchError as e:
        raise BadRequest(str(e)) from None
    _check_k(k, MAX_CHANGE_K, len(X_a))
    pair = [(run_a, first[1], first[2]), (run_b, second[1], second[2])]
    for run, layer, step in pair:
        if run.record(layer, step).get("nonfinite"):
            raise BadRequest(f"layer {layer!r} of run {run.name!r} has non-finite activations at step {step}; its "
                             f"neighbourhoods are undefined")
    rows = [run.rows(layer, step) for run, layer, step in pair]
    if not np.array_equal(rows[0], rows[1]):
        return _subset_change(pair, rows, k, compute)
    graphs = [run.artifact(NEIGHBOR_GRAPH).cached(layer, step, graph_variant(len(X_a), k))
              for run, layer, step in pair]
    missing = [rep for rep, graph in zip(pair, graphs) if graph is None]
    computed = iter(compute(list(dict.fromkeys(missing)), k) if missing else [])
    new = {rep: next(computed) for rep in dict.fromkeys(missing)}
    graphs = [graph if graph is not None else new[rep] for rep, graph in zip(pair, graphs)]
    return neighbor_change(np.asarray(graphs[0]), np.asarray(graphs[1]))


def _subset_change(pair: list[tuple[Run, str, int]], rows: list[np.ndarray], k: int,
                   compute: Callable[[list[tuple], int], list[np.ndarray]]) -> np.ndarray:
    """Neighbourhood change of two snapshots of different probe subsets on the points they share (NaN for the
    first's other rows); the graphs among those points are computed each time (not cached)."""
    common, where = common_rows(rows)
    _check_k(k, MAX_CHANGE_K, len(common))
    graphs = compute([(*rep, w) for rep, w in zip(pair, where)], k)
    out = np.full(len(rows[0]), np.nan, dtype="<f4")
    out[where[0]] = neighbor_change(np.asarray(graphs[0]), np.asarray(graphs[1]))
    return out


# --------------------------------------------------------------------------------------------------------------
# Trails
# --------------------------------------------------------------------------------------------------------------

def check_indices(indices, n: int) -> np.ndarray:
    """A JSON list of 1 to ``MAX_TRAILS`` probe indices in [0, n) as int64, else ``BadRequest``."""
    if not isinstance(indices, list) or not all(type(i) is int for i in indices):
        raise BadRequest("indices must be a JSON list of integers (probe order)")
    if not 1 <= len(indices) <= MAX_TRAILS:
        raise BadRequest(f"trails take at most {MAX_TRAILS} points; got {len(indices)}")
    outside = next((i for i in indices if not 0 <= i < n), None)  # before numpy, which overflows past int64
    if outside is not None:
        raise BadRequest(f"indices must be in [0, {n}); got {str(outside)[:40]}")
    return np.asarray(indices, dtype=np.int64)


def trails_impl(catalog: Catalog, run_name: str, layer: str, key: str, indices) -> tuple[np.ndarray, list[int]]:
    """The 2-D coordinates (n_steps, m, 2) float32 of probe points ``indices`` (positions in the probe) in
    embedding ``key`` of ``layer`` at every stored step, in step order, and the steps; NaN at a step whose
    snapshot of a probe subset does not hold the point."""
    run = catalog.run(run_name)
    steps = run.embeddings.steps(known_key(run, key), known_layer(run, layer))
    if not steps:
        raise NotFoundError(f"embedding {key!r} of run {run_name!r} has no snapshots of layer {layer!r}")
    points = check_indices(indices, len(run.probe))
    out = np.full((len(steps), len(points), 2), np.nan, dtype="<f4")
    for i, step in enumerate(steps):
        Y = run.embeddings.read(key, layer, step)
        rows = run.rows(layer, step)
        if not len(rows):
            continue
        at = np.minimum(np.searchsorted(rows, points), len(rows) - 1)
        held = rows[at] == points
        out[i, held] = 0.0
        out[i, held, :min(2, Y.shape[1])] = Y[at[held], :2]
    return out, steps


# --------------------------------------------------------------------------------------------------------------
# Density contours
# --------------------------------------------------------------------------------------------------------------

def density_impl(catalog: Catalog, run_name: str, layer: str, step: int, key: str, by: str, levels: int) -> dict:
    """Density contours of a stored 2-D embedding, overall (``by="all"``) or per class (``by="class"``), in the
    coordinates of the coords route: for each mass v in ``levels``, the lines around the highest-density region
    holding that fraction of the points (:func:`repviz.density.density_contours`). Cached in the store."""
    if by not in ("all", "class"):
        raise BadRequest(f"by must be 'all' or 'class'; got {by[:40]!r}")
    if not 1 <= levels <= MAX_LEVELS:
        raise BadRequest(f"levels must be in [1, {MAX_LEVELS}]; got {levels}")
    Y = coords_impl(catalog, run_name, layer, step, key).astype(np.float64)  # checks every name
    run = catalog.run(run_name)
    variant = f"{by}-l{levels}"
    cached = run.artifact(DENSITY).cached(key, layer, step, variant)
    if cached is not None:
        return cached
    classes = label_codes(run.probe)[0][run.rows(layer, step)] if by == "class" else None
    out = density_contours(Y, classes, levels)
    try:
        run.artifact(DENSITY).write(key, layer, step, variant, out)
    except OSError as e:
        logger.warning("repviz: density of %r/%r step %d not cached: %s", run_name, layer, step, e)
    return out
