"""Probes that were not in a layout's fit, placed into it: ``repviz place LOGDIR --run NEW --into RUN``.

A second probe set of the same model (another ``ActivationLogger`` with another probe, or inputs logged later, such
as misclassified test digits) is drawn into the stored layout of run RUN at the same layer and snapshot: the
representation of NEW at (layer, step) is transformed into RUN's layout of (layer, step) by the layout's method.

- Methods registered with a placement policy (:attr:`repviz.methods.Method.place_with`) place against the stored
  layout as it is, which does not move: t-SNE by openTSNE's ``transform`` (:func:`repviz.manifold.tsne.transform.place`,
  perplexity 5), UMAP by umap-learn's (:func:`repviz.manifold.umap.place`), with the layout's own parameters. Each
  new point is drawn to its nearest points of the fit, and new points do not see each other.
- Methods with a ``transform`` (Isomap, LLE, PCA, kernel PCA, LDA, ICA, SFA, whitening, the autoencoder) are
  fitted again on RUN's activations with the stored parameters (deterministic: their ``random_state``); their
  ``transform`` places the new points and the Procrustes map that takes the refit onto the stored layout (the
  pipeline's alignment) takes them along. How far the refit was from the stored layout is recorded
  (``refit_displacement``, :func:`repviz.align.mean_displacement`; 0 when it reproduced it).
- MDS, Sammon, the elastic embedding, spectral, diffusion and force-directed layouts have no out-of-sample rule:
  refused in one line.

The result is stored as NEW's placed points (``run.artifact(repviz.store.PLACED)``), never as a fitted embedding:
the pipeline never lists or continues from them, and their sidecar names the layout they were placed into (run,
key, layer, step, the checksums of RUN's activations and layout). A layout computed again makes them stale; the
next ``place`` computes them again, and one up to date is not computed twice. Points the store reads as damaged
(a pair torn by a kill between its two files, another number of points than NEW's snapshot, a coordinate beyond
float32) are placed again too; coordinates that are not finite as float32 are never stored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .align import mean_displacement, procrustes_rotation
from .chains import verified_activations
from .methods import METHODS, Method
from .progress import ProgressCallback, report
from .store import PLACED, DamagedFileError, LogDir, NotFoundError, Run, checksum, open_logdir
from .targets import class_labels


@dataclass(frozen=True)
class Placed:
    """Points placed into a layout: their coordinates and how they were placed (the sidecar's ``how``)."""

    coords: np.ndarray
    how: dict


def place_points(method: str, params: dict, X_fit, Y_fit, X_new, labels_fit=None) -> Placed:
    """Place the rows of ``X_new`` into the layout ``Y_fit`` of ``X_fit`` computed by the registered ``method``
    with the estimator parameters ``params`` (as stored with the layout); ``labels_fit`` for a supervised method.
    See the module docstring for how each method places."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(sorted(METHODS))}")
    X_fit, X_new = np.asarray(X_fit, dtype=np.float32), np.asarray(X_new, dtype=np.float32)
    Y_fit = np.asarray(Y_fit, dtype=np.float32)
    if X_new.shape[1] != X_fit.shape[1]:
        raise ValueError(f"the new points have {X_new.shape[1]} features and the layout's {X_fit.shape[1]}; they "
                         f"must come from the same layer of the same model")
    policy = METHODS[method].placement_function()
    if policy is not None:
        placed = Placed(*policy(params, X_fit, Y_fit, X_new))
    else:
        placed = _place_by_refit(METHODS[method], params, X_fit, Y_fit, X_new, labels_fit)
    with np.errstate(over="ignore"):
        coords = np.asarray(placed.coords, dtype=np.float32)
    if not np.isfinite(coords).all():  # checked as stored: a value beyond float32's range becomes infinite
        raise ValueError(f"placing by {method} gave non-finite coordinates (NaN, infinity or beyond float32's "
                         f"range); the layout cannot take these points")
    return Placed(coords, placed.how)


def _place_by_refit(method: Method, params: dict, X_fit, Y_fit, X_new, labels_fit) -> Placed:
    cls = method.estimator_class()
    if not hasattr(cls, "transform"):
        placing = sorted(name for name, m in METHODS.items()
                         if m.place_with is not None or hasattr(_class_or_none(m), "transform"))
        raise ValueError(f"method {method.name!r} has no rule for placing new points (no transform); place into a "
                         f"layout of {', '.join(placing)}")
    if X_fit.shape[1] < Y_fit.shape[1]:
        raise ValueError(f"the layer has {X_fit.shape[1]} unit(s), fewer than the layout's {Y_fit.shape[1]} "
                         f"dimensions: its layout is the values themselves, not a {method.name} fit")
    if method.supervised and labels_fit is None:
        raise ValueError(f"{method.name} needs the probe labels of the layout's run, and it stored none")
    known = cls().get_params()
    estimator = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in known})
    refit = np.asarray(estimator.fit_transform(X_fit, labels_fit if method.supervised else None), dtype=np.float64)
    if refit.shape != Y_fit.shape:
        raise ValueError(f"the {method.name} refit has shape {refit.shape}, the stored layout {Y_fit.shape}; "
                         f"compute the layout again with `repviz embed`")
    rotation = procrustes_rotation(refit, Y_fit)
    centre, target = refit.mean(axis=0), Y_fit.astype(np.float64).mean(axis=0)
    onto = (lambda Z: (np.asarray(Z, dtype=np.float64) - centre) @ rotation + target)  # noqa: E731
    coords = onto(estimator.transform(X_new)).astype(np.float32)
    moved = round(mean_displacement(onto(refit), Y_fit), 6)
    return Placed(coords, {"transform": f"{method.name}: its transform after a refit, rotated onto the stored "
                                        f"layout", "refit_displacement": moved})


def _class_or_none(method: Method):
    try:
        return method.estimator_class()
    except ValueError:  # an optional extra that is not installed
        return None


def _matrix(run: Run, layer: str, step: int) -> np.ndarray:
    X = np.asarray(verified_activations(run, layer, step), dtype=np.float32)
    X = X.reshape(X.shape[0], -1)
    if not np.isfinite(X).all():
        raise ValueError(f"run {run.name!r}: layer {layer!r} at step {step} holds non-finite activations; nothing "
                         f"can be placed from or into it")
    return X


def _labels(run: Run, layer: str, step: int) -> np.ndarray | None:
    probe = run.probe
    labels = class_labels(probe.labels, probe.target)
    return None if labels is None else labels[run.rows(layer, step)]


def _check_same_model(new: Run, into: Run, layer: str) -> None:
    a, b = (r.manifest.get("fingerprint", {}).get("model") for r in (new, into))
    if a and b and a != b:
        raise ValueError(f"runs {new.name!r} and {into.name!r} hold different models; points are placed into a "
                         f"layout of the same model's layers")
    if layer not in new.layers:
        raise NotFoundError(f"layer {layer!r} of the layout is not in run {new.name!r}; it has: "
                            f"{', '.join(new.layers)}")
    shapes = [r.layer_info(layer).get("stored_shape", [None])[1:] for r in (new, into)]
    reductions = [r.layer_info(layer).get("reduction", {"kind": "none"}) for r in (new, into)]
    if shapes[0] != shapes[1] or reductions[0] != reductions[1]:
        raise ValueError(f"layer {layer!r} is stored differently in runs {new.name!r} ({shapes[0]}, "
                         f"{reductions[0]}) and {into.name!r} ({shapes[1]}, {reductions[1]}); its points cannot be "
                         f"compared")


def _pairs(new: Run, into: Run, key: str, layers: list[str] | None, steps: list[int] | None) -> list[tuple[str, int]]:
    """The (layer, step) of ``into``'s layout ``key`` that ``new`` also holds, restricted to ``layers``/``steps``."""
    have = [layer for layer in into.layers if into.embeddings.steps(key, layer)]
    if not have:  # the key is described but holds no snapshot: an embedding stopped early, or its files were removed
        raise NotFoundError(f"run {into.name!r} holds no snapshot of its {key!r} layouts; compute them first "
                            f"(repviz embed LOGDIR --runs {into.name} with the same method), then place")
    for layer in layers or []:
        if layer not in have:
            raise NotFoundError(f"run {into.name!r} has no {key!r} layout of layer {layer!r}; it has layouts of: "
                                f"{', '.join(have) or 'none'}")
    pairs = []
    for layer in layers or [layer for layer in have if layer in new.layers]:
        _check_same_model(new, into, layer)
        shared = sorted(set(into.embeddings.steps(key, layer)) & set(new.steps(layer)))
        pairs += [(layer, s) for s in shared if steps is None or s in steps]
    if not pairs:
        laid = sorted({s for layer in have for s in into.embeddings.steps(key, layer)})
        raise NotFoundError(f"run {new.name!r} holds no snapshot at the steps of run {into.name!r}'s {key!r} layouts"
                            f"{' ' + repr(steps) if steps else ''}: placing needs the same layer at the same step "
                            f"(its steps: {new.steps()}; the layouts': {laid})")
    return pairs


def place_run(logdir: str | LogDir, run: str, into: str, method: str = "tsne", params: dict | None = None, *,
              layers: list[str] | None = None, steps: list[int] | None = None,
              progress: ProgressCallback | None = None) -> list[dict]:
    """Place run ``run``'s probe points into run ``into``'s stored layouts of ``method`` (a name, with ``params``
    telling several apart, or a key) at every (layer, step) both hold, or those of ``layers``/``steps``; store them
    as ``run``'s placed points. Returns one row per (layer, step): status ``placed``, ``cached`` (up to date) or
    ``failed`` (with its error), the count, and the 10-NN accuracy of the placed points among the layout's classes
    next to that of the layout's own points, when both runs have labels. ``progress`` receives
    ``("place", done, total, layer)`` events (:mod:`repviz.progress`).

    >>> place_run("logs", "test-digits", into="relu", method="tsne")   # doctest: +SKIP
    """
    log = logdir if isinstance(logdir, LogDir) else open_logdir(logdir)
    if run == into:
        raise ValueError(f"run {run!r} is placed into another run's layout; its own points are in its own layout")
    new, target = log.run(run), log.run(into)
    key = target.embeddings.key(method, params)
    described = target.embeddings.method(key)
    name = described.get("method", key.rsplit("-", 1)[0])
    stored_params = described.get("params", {})
    rows = []
    pairs = _pairs(new, target, key, layers, steps)
    for done, (layer, step) in enumerate(pairs):
        report(progress, "place", done, len(pairs), f"{layer} step {step}")
        start = time.perf_counter()
        try:
            rows.append(_place_one(new, target, key, name, stored_params, layer, step, start))
        except (ValueError, OSError, NotFoundError) as e:
            rows.append({"layer": layer, "step": step, "status": "failed", "error": f"{type(e).__name__}: {e}"})
    report(progress, "place", len(pairs), len(pairs))
    return rows


def _place_one(new: Run, into: Run, key: str, method: str, params: dict, layer: str, step: int,
               start: float) -> dict:
    Y_fit = np.asarray(into.embeddings.read(key, layer, step))
    source = {"crc32": new.record(layer, step)["crc32"], "into_crc32": into.record(layer, step)["crc32"],
              "layout_crc32": checksum(Y_fit)}
    if new.artifact(PLACED).has(into.name, key, layer, step):
        try:
            coords, info = new.placed(into.name, key, layer, step)
        except DamagedFileError:  # a pair torn by a kill, a file of the wrong length: placed again
            info = {}
        if info.get("source") == source:
            return {"layer": layer, "step": step, "status": "cached", "n": len(coords), **info.get("scores", {})}
    X_fit, X_new = _matrix(into, layer, step), _matrix(new, layer, step)
    labels_fit, labels_new = _labels(into, layer, step), _labels(new, layer, step)
    placed = place_points(method, params, X_fit, Y_fit, X_new, labels_fit)
    scores = {}
    if labels_fit is not None and labels_new is not None and len(Y_fit) > 10:
        from .metrics import knn_accuracy, placed_knn_accuracy

        scores = {"knn_accuracy": placed_knn_accuracy(Y_fit, labels_fit, placed.coords, labels_new),
                  "layout_knn_accuracy": knn_accuracy(Y_fit, labels_fit)}
    info = {"placed_into": {"run": into.name, "key": key, "method": method, "layer": layer, "step": step},
            "source": source, "how": placed.how, "scores": scores,
            "seconds": round(time.perf_counter() - start, 3)}
    new.artifact(PLACED).write(into.name, key, layer, step, placed.coords, info)
    return {"layer": layer, "step": step, "status": "placed", "n": len(placed.coords), **scores}
