"""What the comparison routes return, without HTTP: nearest neighbours in the original activation space,
neighbourhood change between two representations, trails across snapshots and density contours of a layout.

Pure functions of the catalog and plain arguments, like ``data.py``; every name is looked up in what the store
lists. k-NN graphs (numba, seconds at 20,000 points) are computed by :func:`compute_graph` in worker processes
(``JobManager.calls``, the two graphs of a pair side by side), never in TensorBoard's process, and cached in the
store, so the change between any two representations whose graphs are cached costs milliseconds (it is not
cached itself). Density contours are cached in the store too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from repviz.store import NotFoundError, Run

from .catalog import Catalog
from .data import BadRequest, _key, _layer, _one_of, coords_impl, label_codes

logger = logging.getLogger(__name__)

#: Bounds of the routes' parameters.
MAX_KNN = 50
MAX_CHANGE_K = 100
MAX_TRAILS = 500
MAX_LEVELS = 10
#: Up to this many probe points the k-NN graphs behind neighbourhood change are exact (blocked BLAS); above,
#: NN-descent (recall about 0.96 at k = 10 on 20,000 MNIST activations), which keeps two 20,000-point
#: representations within seconds on two cores where the exact O(n² d) search takes tens.
EXACT_MAX_N = 5000
#: Cells per axis of the density grid.
GRID = 128
_BLOCK_BYTES = 32 << 20


def _representation(catalog: Catalog, run_name: str, layer: str, step: int) -> tuple[Run, np.ndarray]:
    """The run and its stored activations of ``layer`` at ``step`` as (n, features), memory-mapped."""
    run = catalog.run(run_name)
    _one_of(step, run.steps(_layer(run, layer)), f"layer {layer!r} of run {run_name!r}")
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

def distances_to(X: np.ndarray, index: int) -> np.ndarray:
    """Euclidean distances (float64) from row ``index`` to every row of ``X``, in row blocks of bounded memory
    (a memory-mapped wide layer is never copied whole); non-finite values give +inf."""
    x = np.asarray(X[index], dtype=np.float64)
    out = np.empty(len(X))
    rows = max(1, _BLOCK_BYTES // max(1, 8 * X.shape[1]))
    for start in range(0, len(X), rows):
        block = np.asarray(X[start:start + rows], dtype=np.float64) - x
        out[start:start + rows] = np.sqrt(np.einsum("ij,ij->i", block, block))
    out[~np.isfinite(out)] = np.inf
    return out


def knn_impl(catalog: Catalog, run_name: str, layer: str, step: int, index: int, k: int) -> dict:
    """The ``k`` nearest probe points of point ``index`` (probe order) in the stored activations, nearest first
    (ties by index), without the point itself: exact, from the point's distances to all others."""
    _, X = _representation(catalog, run_name, layer, step)
    n = len(X)
    if not 0 <= index < n:
        raise BadRequest(f"index must be in [0, {n}); got {index}")
    _check_k(k, MAX_KNN, n)
    d = distances_to(X, index)
    order = np.argsort(d, kind="stable")
    order = order[order != index][:k]
    return {"index": index, "k": k, "neighbors": order.tolist(), "distances": d[order].tolist()}


# --------------------------------------------------------------------------------------------------------------
# Neighbourhood change
# --------------------------------------------------------------------------------------------------------------

def graph_variant(n: int, k: int) -> str:
    """How the k-NN graph of ``n`` points is computed and cached: ``"k<k>-exact"`` or ``"k<k>-nndescent"``."""
    return f"k{k}-{'exact' if n <= EXACT_MAX_N else 'nndescent'}"


def compute_graph(run: Run, layer: str, step: int, k: int) -> np.ndarray:
    """The k-NN graph (n, k) int32 of the stored activations, cached in the store (worker side: imports numba).

    A log directory that cannot be written (and no ``--repviz_out``) still gets its answer, uncached.
    """
    from repviz.neighbors import knn

    X = np.asarray(run.activations(layer, step), dtype=np.float32)
    X = X.reshape(X.shape[0], -1)
    variant = graph_variant(len(X), k)
    indices, _ = knn(X, k, method=variant.split("-")[1], random_state=0)
    indices = indices.astype(np.int32)
    try:
        run.write_neighbor_graph(layer, step, variant, indices)
    except OSError as e:
        logger.warning("repviz: k-NN graph of %r/%r step %d not cached: %s", run.name, layer, step, e)
    return indices


def neighborhood_change(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, 1 - Jaccard overlap of two k-NN index sets: rows of ``a`` and ``b`` (n, k), no repeats in a row.

    Both rows are sorted together; an index in both sets shows as two equal neighbours.
    """
    k = a.shape[1]
    both = np.sort(np.concatenate([a, b], axis=1), axis=1)
    common = np.count_nonzero(both[:, 1:] == both[:, :-1], axis=1)
    return (1.0 - common / (2 * k - common)).astype("<f4")


def neighborhood_change_impl(catalog: Catalog, first: tuple[str, str, int], second: tuple[str, str, int], k: int,
                             compute: Callable[[list[tuple[Run, str, int]], int], list[np.ndarray]]) -> np.ndarray:
    """Neighbourhood change (n,) float32 between two representations, each given as (run, layer, step).

    ``compute(representations, k)`` returns the graphs of those given as (run, layer, step) that are not cached
    yet (the plugin passes one that runs :func:`compute_graph` in worker processes, side by side).
    """
    (run_a, X_a), (run_b, _) = (_representation(catalog, *first), _representation(catalog, *second))
    if run_a is not run_b and not np.array_equal(np.asarray(run_a.probe.ids), np.asarray(run_b.probe.ids)):
        raise BadRequest(f"runs {run_a.name!r} and {run_b.name!r} hold different probe sets (ids or order); "
                         f"neighbourhood change compares the same probe points")
    _check_k(k, MAX_CHANGE_K, len(X_a))
    pair = [(run_a, first[1], first[2]), (run_b, second[1], second[2])]
    for run, layer, step in pair:
        if run.record(layer, step).get("nonfinite"):
            raise BadRequest(f"layer {layer!r} of run {run.name!r} has non-finite activations at step {step}; its "
                             f"neighbourhoods are undefined")
    graphs = [run.neighbor_graph(layer, step, graph_variant(len(X_a), k)) for run, layer, step in pair]
    missing = [rep for rep, graph in zip(pair, graphs) if graph is None]
    computed = iter(compute(list(dict.fromkeys(missing)), k) if missing else [])
    new = {rep: next(computed) for rep in dict.fromkeys(missing)}
    graphs = [graph if graph is not None else new[rep] for rep, graph in zip(pair, graphs)]
    return neighborhood_change(np.asarray(graphs[0]), np.asarray(graphs[1]))


# --------------------------------------------------------------------------------------------------------------
# Trails
# --------------------------------------------------------------------------------------------------------------

def check_indices(indices, n: int) -> np.ndarray:
    """A JSON list of 1 to ``MAX_TRAILS`` probe indices in [0, n) as int64, else ``BadRequest``."""
    if not isinstance(indices, list) or not all(type(i) is int for i in indices):
        raise BadRequest("indices must be a JSON list of integers (probe order)")
    if not 1 <= len(indices) <= MAX_TRAILS:
        raise BadRequest(f"trails take at most {MAX_TRAILS} points; got {len(indices)}")
    out = np.asarray(indices, dtype=np.int64)
    if out.min() < 0 or out.max() >= n:
        raise BadRequest(f"indices must be in [0, {n}); got {int(out.min() if out.min() < 0 else out.max())}")
    return out


def trails_impl(catalog: Catalog, run_name: str, layer: str, key: str, indices) -> tuple[np.ndarray, list[int]]:
    """The 2-D coordinates (n_steps, m, 2) float32 of points ``indices`` in embedding ``key`` of ``layer`` at every
    stored step, in step order, and the steps."""
    run = catalog.run(run_name)
    steps = run.embedding_steps(_key(run, key), _layer(run, layer))
    if not steps:
        raise NotFoundError(f"embedding {key!r} of run {run_name!r} has no snapshots of layer {layer!r}")
    rows = check_indices(indices, len(run.read_embedding(key, layer, steps[0])))
    out = np.zeros((len(steps), len(rows), 2), dtype="<f4")
    for i, step in enumerate(steps):
        Y = run.read_embedding(key, layer, step)
        out[i, :, :min(2, Y.shape[1])] = Y[rows, :2]
    return out, steps


# --------------------------------------------------------------------------------------------------------------
# Density contours
# --------------------------------------------------------------------------------------------------------------

def mass_levels(levels: int) -> list[float]:
    """The enclosed probability masses of ``levels`` contours, e.g. 4 -> [0.2, 0.4, 0.6, 0.8]."""
    return [round((i + 1) / (levels + 1), 6) for i in range(levels)]


def kde_grid(Y: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Gaussian KDE of the points ``Y`` (m, 2) on the grid of cell centres ``xs`` × ``ys`` (ny, nx), normalised
    to sum 1: points binned into cells, then smoothed with a Gaussian of Scott's bandwidth per axis
    (std · m^(-1/6)); binning moves a point by at most half a cell."""
    from scipy.ndimage import gaussian_filter

    dx, dy = xs[1] - xs[0], ys[1] - ys[0]
    edges_x = np.append(xs - dx / 2, xs[-1] + dx / 2)
    edges_y = np.append(ys - dy / 2, ys[-1] + dy / 2)
    counts, _, _ = np.histogram2d(Y[:, 1], Y[:, 0], bins=(edges_y, edges_x))
    h = np.maximum(Y.std(axis=0) * len(Y) ** (-1 / 6), [dx / 2, dy / 2])
    z = gaussian_filter(counts, sigma=(h[1] / dy, h[0] / dx), mode="constant", truncate=4.0)
    total = z.sum()
    return z / total if total > 0 else z


def mass_thresholds(z: np.ndarray, masses: list[float]) -> list[float]:
    """Density values whose superlevel sets hold the given fractions of the mass of ``z`` (highest-density
    regions): the region {z >= t} of the contour at t holds that mass."""
    values = np.sort(z.ravel())[::-1]
    cumulative = np.cumsum(values)
    cumulative /= cumulative[-1]
    return [float(values[min(np.searchsorted(cumulative, m), len(values) - 1)]) for m in masses]


def _paths(lines: list[np.ndarray], decimals: int) -> list[list[float]]:
    return [np.round(line[np.isfinite(line).all(axis=1)], decimals).ravel().tolist() for line in lines
            if len(line) >= 2]


def density_impl(catalog: Catalog, run_name: str, layer: str, step: int, key: str, by: str, levels: int) -> dict:
    """Density contours of a stored 2-D embedding, overall (``by="all"``) or per class (``by="class"``), in the
    coordinates of the coords route: for each mass v in ``levels``, the lines around the highest-density region
    holding that fraction of the points (KDE :func:`kde_grid`, lines by contourpy). Cached in the store."""
    import contourpy

    if by not in ("all", "class"):
        raise BadRequest(f"by must be 'all' or 'class'; got {by[:40]!r}")
    if not 1 <= levels <= MAX_LEVELS:
        raise BadRequest(f"levels must be in [1, {MAX_LEVELS}]; got {levels}")
    Y = coords_impl(catalog, run_name, layer, step, key).astype(np.float64)  # checks every name
    run = catalog.run(run_name)
    variant = f"{by}-l{levels}"
    cached = run.density(key, layer, step, variant)
    if cached is not None:
        return cached
    finite = np.isfinite(Y).all(axis=1)
    masses = mass_levels(levels)
    out = {"levels": masses, "contours": []}
    if finite.sum() >= 3:
        lo, hi = Y[finite].min(axis=0), Y[finite].max(axis=0)
        span = np.maximum(hi - lo, 1e-6 * max(1.0, float(np.abs(Y[finite]).max())))
        lo, hi = lo - 0.25 * span, hi + 0.25 * span  # room for the smoothed tails
        xs, ys = (np.linspace(lo[a] + (hi[a] - lo[a]) / (2 * GRID), hi[a] - (hi[a] - lo[a]) / (2 * GRID), GRID)
                  for a in range(2))
        decimals = int(max(0, 4 - np.floor(np.log10(span.max()))))
        if by == "all":
            groups = [(None, finite)]
        else:
            codes = label_codes(run.probe.labels, len(Y))[0]
            groups = [(int(c), finite & (codes == c)) for c in np.unique(codes[codes >= 0])]
        for cls, rows in groups:
            if rows.sum() < 3:
                continue
            z = kde_grid(Y[rows], xs, ys)
            generator = contourpy.contour_generator(xs, ys, z)
            for mass, threshold in zip(masses, mass_thresholds(z, masses)):
                out["contours"].append({"class": cls, "level": mass,
                                        "paths": _paths(generator.lines(threshold), decimals)})
    try:
        run.write_density(key, layer, step, variant, out)
    except OSError as e:
        logger.warning("repviz: density of %r/%r step %d not cached: %s", run_name, layer, step, e)
    return out
