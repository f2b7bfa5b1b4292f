"""The answers the page needs to show one choice without asking again: a static export embeds them, a live widget
pushes them while its kernel is busy (the main view's; the Similarity view's heatmaps for an export of it). Each is
a route's own answer (:func:`~.plugin.call`), keyed by the request the page makes for it (route and parameters, as
``static/model.js`` spells them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .plugin import Reply, RepvizPlugin, call

THUMBNAIL_BLOCK = 256  # thumbnails per request, as static/model.js asks for them


@dataclass(frozen=True)
class Answer:
    """One request of the page (route and parameters) and the route's reply to it."""

    route: str
    params: dict
    reply: Reply


def run_named(index: dict, name: str | None) -> dict | None:
    """The run called ``name`` in the run index (None when it is not listed)."""
    return next((r for r in index["runs"] if r["name"] == name), None)


def embedding_steps(run: dict, layer: str, key: str) -> list[int]:
    """The stored steps of embedding ``key`` of ``layer`` in ``run`` (an index entry)."""
    found = next((e for e in run["embeddings"] if e["key"] == key), None)
    return list(found["steps"].get(layer, [])) if found else []


def at_or_before(steps: list[int], step: int) -> int:
    """The last of sorted ``steps`` at or before ``step``, else the first (static/choice.js's stepAtOrBefore)."""
    return max((s for s in steps if s <= step), default=steps[0])


def _requests(index: dict, run_name: str, layer: str, key: str, steps: Iterable[int] | None) -> Iterator[tuple]:
    """(route, params) of what the main view asks for (run, layer, key) at ``steps`` (None: every stored one),
    and once per run the probe's labels, ids, metadata and thumbnails."""
    run = run_named(index, run_name)
    if run is None:
        return
    wanted = embedding_steps(run, layer, key) if steps is None else list(steps)
    yield "labels", {"run": run_name}
    yield "ids", {"run": run_name}
    if run.get("metadata"):
        yield "metadata", {"run": run_name}
    if run.get("has_thumbnails"):
        for start in range(0, run["n_probe"], THUMBNAIL_BLOCK):
            yield "thumbnails", {"run": run_name, "start": start, "count": THUMBNAIL_BLOCK}
    predicted = run.get("prediction_steps") or []
    for step in sorted({at_or_before(predicted, t) for t in wanted}) if predicted else []:
        yield "predictions", {"run": run_name, "step": step}
    for step in wanted:
        yield "coords", {"run": run_name, "layer": layer, "step": step, "key": key}
        yield "info", {"run": run_name, "layer": layer, "step": step, "key": key}
        yield "placed", {"run": run_name, "layer": layer, "step": step, "key": key}


def view_answers(plugin: RepvizPlugin, index: dict, run: str, layer: str, key: str,
                 steps: Iterable[int] | None = None) -> Iterator[Answer]:
    """The answers the main view needs for (run, layer, key) at ``steps`` (None: every stored step, so the
    snapshot slider works), those that fail left out (the page shows the route's error when it asks)."""
    n_probe = (run_named(index, run) or {}).get("n_probe")
    for route, params in _requests(index, run, layer, key, steps):
        reply = call(plugin, route, params)
        if reply.status != 200:
            continue
        yield Answer(route, params, reply)
        shape = reply.headers.get("X-Repviz-Shape", "")
        if route == "coords" and shape and int(shape.split(",")[0]) != n_probe:  # a subset: its probe positions
            rows = {k: params[k] for k in ("run", "layer", "step")}
            rows_reply = call(plugin, "rows", rows)
            if rows_reply.status == 200:
                yield Answer("rows", rows, rows_reply)


def similarity_answers(plugin: RepvizPlugin, index: dict, runs: list[str]) -> Iterator[Answer]:
    """The stored heatmaps (layers × layers) of ``runs[0]`` against ``runs[1]`` (or, as the Similarity view picks
    it, another run of the same probe set, else itself) at every snapshot, as the view asks for them at first: its
    first measure and kernel, debiased. Heatmaps not computed are left out."""
    run = run_named(index, runs[0]) if runs else None
    if run is None:
        return
    other = runs[1] if len(runs) > 1 else next((r["name"] for r in index["runs"] if r["name"] != run["name"]
                                                and r["probe_group"] == run["probe_group"]), run["name"])
    choices = index["choices"]["similarity"]
    for step in sorted({s for layer in run["layers"] for s in layer["steps"]}):
        params = {"mode": "layers", "run": run["name"], "run2": other, "measure": choices["measure"][0],
                  "kernel": choices["kernel"][0], "debiased": "1", "step": step}
        reply = call(plugin, "similarity", params)
        if reply.status == 200:
            yield Answer("similarity", params, reply)
