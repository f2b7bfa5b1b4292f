"""repviz's notebook widget: the Repviz tab's own page in a notebook cell (an AnyWidget), linked to Python.

The front end (``notebook/host.js``) shows the tab's page (``notebook/page.js``, the tab's modules bundled) in an
iframe of its own; each request the page makes comes to the kernel as a custom message and is answered by the
plugin's route (:func:`~.plugin.call`: the same names checked, the same errors), its body sent back as a binary
buffer (points never travel as JSON lists). The choices the page shares are traits, synced both ways:
``selected`` (probe ids, a numpy int64 array), ``hovered``, ``step``, ``run``, ``layer``, ``method`` (an
embedding key) and ``view``. Requests are answered on a few threads, so a slow one (a k-NN graph) does not hold
the others, nor the kernel.

While a cell runs (``model.fit``), the kernel reads no message from the page; :meth:`RepvizWidget.push` sends from
any thread what changed (the run index, and the answers the current choice needs at new snapshots), so a widget
shown before training can follow it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tensorboard.plugins import base_plugin

from repviz.service import install_hint

from . import live
from .answers import Answer, embedding_steps, run_named, view_answers
from .plugin import Reply, RepvizPlugin, call
from .standalone import ASSETS, MAX_BYTES, export_html, page_text

try:
    import anywidget
    import traitlets
except ImportError:  # show() says how to install it
    anywidget = None

VIEWS = ("main", "grid", "runs", "meta", "similarity")
REQUEST_THREADS = 4


def module_text() -> str:
    """The widget's ES module: the front end, with the page bundle as its ``PAGE`` string."""
    return f"const PAGE = {json.dumps(page_text())};\n" + (ASSETS / "host.js").read_text(encoding="utf-8")


def _ids_to_json(ids: np.ndarray, _widget) -> memoryview:
    """Probe ids as float64 bytes (a binary buffer; the page keys points by float64 ids, exact below 2^53)."""
    return memoryview(np.ascontiguousarray(ids, dtype="<f8").view(np.uint8))


def _ids_from_json(value, _widget) -> np.ndarray:
    if value is None:
        return np.zeros(0, dtype=np.int64)
    if isinstance(value, (list, tuple)):
        return np.asarray(value, dtype=np.int64)
    return np.frombuffer(bytes(value), dtype="<f8").astype(np.int64)


def _names(items) -> str:
    return ", ".join(repr(i) for i in items) or "none"


def resolve(index: dict, logdir: str, run: str | None, layer: str | None, method: str | None,
            step: int | None) -> dict:
    """The run, layer, embedding key and step that exist, the given ones checked (one-line ``ValueError`` naming
    what exists) and the others chosen as the page chooses them (static/choice.js's resolveCurrent): the first
    run, its first layer with an embedding, the default method's embedding, the last snapshot."""
    runs = index["runs"]
    if not runs:
        raise ValueError(f"the log directory {logdir!r} holds no repviz run yet; record one with ActivationLogger or "
                         f"repviz.record")
    if run is None:
        run = runs[0]["name"]
    found = run_named(index, run)
    if found is None:
        raise ValueError(f"run {run!r} is not in {logdir!r}; it has: {_names(r['name'] for r in runs)}")
    layers = [entry["name"] for entry in found["layers"]]

    def stored(name: str) -> list[dict]:
        return [e for e in found["embeddings"] if e["steps"].get(name)]

    if layer is None:
        layer = next((name for name in layers if stored(name)), layers[0] if layers else None)
    elif layer not in layers:
        raise ValueError(f"layer {layer!r} is not in run {run!r}; it has: {_names(layers)}")
    embeddings = stored(layer) if layer is not None else []
    if method is None:
        default = index["choices"].get("default_method")
        chosen = next((e for e in embeddings if e["default"] and e["method"] == default), None) or next(
            (e for e in embeddings if e["default"]), None) or (embeddings[0] if embeddings else None)
    else:
        chosen = next((e for e in embeddings if e["key"] == method), None) or next(
            (e for e in embeddings if e["method"] == method and e["default"]), None) or next(
            (e for e in embeddings if e["method"] == method), None)
        if chosen is None:
            have = ", ".join(f"{e['method']} (key {e['key']!r})" for e in embeddings) or "none"
            raise ValueError(f"method {method!r} has no embedding of layer {layer!r} in run {run!r}; stored: "
                             f"{have} (compute one with `repviz embed` or from the "
                             f"widget's Method menu)")
    key = chosen["key"] if chosen else None
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, np.integer))):
        raise ValueError(f"step must be an integer snapshot step; got {step!r}")
    steps = embedding_steps(found, layer, key) if key else []
    if step is None and steps:
        step = steps[-1]
    return {"run": run, "layer": layer, "method": key, "step": None if step is None else int(step)}


if anywidget is not None:

    class RepvizWidget(anywidget.AnyWidget):
        """The Repviz tab's views of one log directory in a notebook cell; made by :func:`show`.

        Traits (synced with the page both ways; ``observe`` them): ``selected`` (int64 array of probe ids),
        ``hovered`` (probe id or None), ``run``, ``layer``, ``method`` (an embedding key), ``step``, ``view``
        (``"main"``, ``"grid"``, ``"runs"``, ``"meta"`` or ``"similarity"``) and ``height`` (pixels).
        """

        _esm = module_text()
        selected = traitlets.Any(np.zeros(0, dtype=np.int64)).tag(sync=True, to_json=_ids_to_json,
                                                                   from_json=_ids_from_json)
        hovered = traitlets.Int(None, allow_none=True).tag(sync=True)
        run = traitlets.Unicode(None, allow_none=True).tag(sync=True)
        layer = traitlets.Unicode(None, allow_none=True).tag(sync=True)
        method = traitlets.Unicode(None, allow_none=True).tag(sync=True)
        step = traitlets.Int(None, allow_none=True).tag(sync=True)
        view = traitlets.Enum(VIEWS, "main").tag(sync=True)
        height = traitlets.Int(640).tag(sync=True)
        _runs = traitlets.List(traitlets.Unicode(), []).tag(sync=True)

        def __init__(self, plugin: RepvizPlugin, **state):
            self._plugin = plugin
            self._from_page = threading.local()
            self._pool = ThreadPoolExecutor(REQUEST_THREADS, thread_name_prefix="repviz-widget")
            self._pushed: set[str] = set()  # the answers push() has sent (each snapshot once)
            self._pushing = threading.Lock()
            super().__init__(**state)
            self.on_msg(self._on_message)

        @property
        def logdir(self) -> str:
            """The log directory shown."""
            return self._plugin.catalog.path

        def index(self) -> dict:
            """The run index as the page reads it (the ``runs`` route)."""
            return call(self._plugin, "runs").json()

        # --- the page's requests ------------------------------------------------------------------------------

        def _on_message(self, _widget, content: dict, _buffers) -> None:
            if isinstance(content, dict) and content.get("type") == "request":
                self._pool.submit(self._answer, content)

        def _answer(self, content: dict) -> None:
            body, params, headers = content.get("body"), content.get("params"), content.get("headers")
            try:
                reply = call(self._plugin, str(content.get("route", "")), params if isinstance(params, dict) else {},
                             method=str(content.get("method") or "GET"),
                             headers=headers if isinstance(headers, dict) else {},
                             body=body if isinstance(body, str) else None)
            except Exception as e:  # a malformed message: the page gets one line, never waits forever
                reply = Reply(400, {"Content-Type": "application/json"},
                              json.dumps({"error": f"bad request from the page ({type(e).__name__})"}).encode())
            self.send({"type": "response", "id": content.get("id"), "status": reply.status,
                       "headers": reply.headers}, buffers=[reply.body])
            if reply.status == 200:  # the page holds it: a live update does not push it again
                self._pushed.add(_key(Answer(str(content.get("route", "")), content.get("params") or {}, reply)))

        def push(self, data: bool = True) -> None:
            """Send the page the run index now, and with ``data`` what the current choice needs at snapshots not
            sent yet; the page redraws from them. Safe from any thread: what a live update calls while
            ``model.fit`` holds the kernel (the page's own requests wait for the cell to finish)."""
            with self._pushing:
                self._plugin.catalog.scan()  # the listing as it is now, not as the last poll cached it
                index_reply = call(self._plugin, "runs")
                answers = [Answer("runs", {}, index_reply)]
                if data and self.run and self.layer and self.method:
                    fresh = [a for a in view_answers(self._plugin, index_reply.json(), self.run, self.layer,
                                                     self.method) if _key(a) not in self._pushed]
                    self._pushed.update(_key(a) for a in fresh)
                    answers += fresh
            self.send({"type": "push", "refresh": True,
                       "entries": [{"route": a.route, "params": a.params, "status": a.reply.status,
                                    "headers": a.reply.headers, "once": a.route == "runs"} for a in answers]},
                      buffers=[a.reply.body for a in answers])

        def save_html(self, path: str | os.PathLike, steps: Sequence[int] | None = None,
                      max_bytes: int = MAX_BYTES) -> Path:
            """Write the widget as it is now (view, choice, selection) into one HTML file that opens without a
            kernel: the page and the answers it needs at every snapshot (or only ``steps``) embedded. Refuses, in
            one line, a file over ``max_bytes`` (100 MB)."""
            state = {"view": self.view, "run": self.run, "layer": self.layer, "method": self.method,
                     "step": self.step, "selected": self.selected, "runs": self._runs}
            return export_html(self._plugin, state, path, steps=steps, max_bytes=max_bytes)

        # --- traits set from Python are checked; the page's are taken as they come ----------------------------

        def set_state(self, sync_data):
            self._from_page.active = True
            try:
                super().set_state(sync_data)
            finally:
                self._from_page.active = False

        def _checking(self) -> bool:
            return not getattr(self._from_page, "active", False) and getattr(self, "_plugin", None) is not None

        @traitlets.validate("selected")
        def _check_selected(self, proposal):
            ids = np.asarray(proposal["value"] if proposal["value"] is not None else [])
            if ids.ndim != 1 or not (ids.size == 0 or np.issubdtype(ids.dtype, np.integer)):
                raise traitlets.TraitError(f"selected must be a 1-D array of integer probe ids; got "
                                           f"{ids.dtype} of shape {ids.shape}")
            ids = ids.astype(np.int64)
            if self._checking() and ids.size and self.run:
                known = np.frombuffer(call(self._plugin, "ids", {"run": self.run}).body, dtype="<f8")
                unknown = ids[~np.isin(ids, known)]
                if unknown.size:
                    raise traitlets.TraitError(
                        f"probe ids {unknown[:5].tolist()}{' …' if unknown.size > 5 else ''} are not in run "
                        f"{self.run!r} ({known.size} probe points, ids {int(known.min())} … {int(known.max())})")
            return ids

        @traitlets.validate("run", "layer", "method", "step")
        def _check_choice(self, proposal):
            value, name = proposal["value"], proposal["trait"].name
            if not self._checking() or value is None:
                return value
            current = {"run": self.run, "layer": self.layer, "method": self.method, "step": self.step, name: value}
            if name == "run":
                current.update(layer=None, method=None, step=None)
            elif name == "layer":
                current.update(method=None)
            try:
                return resolve(self.index(), self.logdir, **current)[name]
            except ValueError as e:
                raise traitlets.TraitError(str(e)) from None

        def close(self):
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._plugin.jobs.close()
            super().close()


def _key(answer: Answer) -> str:
    return json.dumps([answer.route, sorted((k, str(v)) for k, v in answer.params.items())])


def show(logdir: str | os.PathLike, run: str | None = None, layer: str | None = None, method: str | None = None,
         step: int | None = None, view: str = "main", runs: Sequence[str] | None = None, height: int = 640):
    """The Repviz tab's views of ``logdir`` as a notebook widget (JupyterLab, Notebook 7, VS Code, Colab).

    Parameters
    ----------
    logdir : path
        A repviz log directory (what ``ActivationLogger`` writes to). One with no run yet, or not made yet, gives
        a widget that waits for the first run; the widget follows what lands while a cell trains (:mod:`.live`).
    run, layer, method, step : optional
        What the main view shows first: a run, one of its layers, an embedding (a method name such as ``"tsne"``,
        or a stored key) and a snapshot step (the one at or before it is shown). Missing ones are chosen as the
        tab chooses them; a name that does not exist raises one ``ValueError`` line naming those that do.
    view : {"main", "grid", "runs", "meta", "similarity"}, default="main"
    runs : sequence of str, optional
        The run, or two runs, the Similarity view compares first.
    height : int, default=640
        The widget's height in pixels.

    Returns
    -------
    RepvizWidget
        Its traits ``selected``, ``hovered``, ``run``, ``layer``, ``method``, ``step`` and ``view`` follow the page
        and set it; ``save_html`` writes a copy that opens without a kernel.

    Examples
    --------
    >>> w = repviz.show("logs", run="cnn/seed0", layer="conv1")  # doctest: +SKIP
    >>> w.selected = [3, 14, 15]  # doctest: +SKIP
    """
    if anywidget is None:
        raise ImportError(f"repviz.show needs anywidget: {install_hint('notebook')}")
    path = os.fspath(logdir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"log directory {path!r} is a file (give the directory ActivationLogger writes to)")
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}; got {view!r}")
    plugin = RepvizPlugin(base_plugin.TBContext(logdir=path))
    index = call(plugin, "runs").json()
    runs = list(runs or [])
    for name in runs:
        if run_named(index, name) is None:
            raise ValueError(f"run {name!r} is not in {path!r}; it has: {_names(r['name'] for r in index['runs'])}")
    if not index["runs"] and run is None and not runs:  # nothing recorded yet: the widget waits, as TensorBoard does
        state = {}
    else:
        state = resolve(index, path, run if run is not None or not runs else runs[0], layer, method, step)
    widget = RepvizWidget(plugin, **state, view=view, _runs=runs, height=int(height))
    live.follow(widget, plugin, resolve, layer=layer, method=method, step=step)
    return widget


__all__ = ["VIEWS", "module_text", "resolve", "show"]
