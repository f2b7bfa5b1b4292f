"""The Repviz TensorBoard plugin: one route table over ``data.py``, ``compare.py``, ``similarity.py`` and ``jobs.py``.

Routes (relative to ``data/plugin/repviz/``; the contract with the page is in the project notes and README):
JSON ``runs``, ``info``, ``jobs``, ``meta_result``, ``knn``, ``density``, ``placed`` (other runs' probes placed into
a layout), ``similarity`` (404 while not computed),
``POST compute``, ``POST compute_meta``, ``POST compute_similarity`` (each job queued for the client the page's
``X-Repviz-Client`` header names), ``POST cancel`` (a job's id);
binary ``coords``, ``rows`` (the probe positions of a snapshot's rows: it may hold a subset of the probe),
``labels``, ``predictions``, ``ids``, ``thumbnails``, ``neighborhood_change``, ``POST trails``;
the page's files under ``static/``. Every error is JSON ``{"error": "one line"}`` with 400, 403, 404, 405, 413, 415,
429, 500 or 503, never a traceback page.

Each route takes its methods only (GET and HEAD, or POST; 405 with ``Allow`` otherwise). A POST must come from the
tab's own page, so that no other web page the user visits can queue work: ``Content-Type: application/json`` (415
otherwise: a cross-site "simple request" cannot send it without a CORS preflight, which gets 405), a
``Sec-Fetch-Site`` of ``same-origin`` or ``none`` when the browser sends one, else an ``Origin``, when present, equal
to the request's own scheme://host:port (403 otherwise). The same origin check holds for a GET of every route but
``static/`` (the page's files), so another page cannot start a k-NN graph through an ``<img>``, nor read data. A
POST body must declare a Content-Length within the route's bound (413) and arrive with no pause longer than
:data:`~.web.BODY_TIMEOUT` (400). A stored file that cannot be read (a damaged ``.npy``) answers 500 naming the file.
One limit is not ours: a request line over 64 KiB (a query string of that size) gets Python's ``http.server`` 414
page before TensorBoard or the plugin see the request; a parameter over 1,024 characters below that gets our 400.

Every route is one entry of :data:`ROUTES` (handler, methods, content type, parameters); the HTTP plumbing is
``web.py``. :func:`call` answers a route without HTTP through the same app (the notebook widget's transport).
Everything the plugin needs from repviz comes through :mod:`repviz.service`. Importing this module imports no Keras,
TensorFlow or numba (the service names the methods without importing their estimators; the numerical code is loaded
only inside the worker processes that compute).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import test as wsgi_request
from werkzeug import wrappers

from repviz import service
from repviz.service import META_OPTIONS, PLUGIN_NAME, NotFoundError

from . import compare, data, metadata, similarity, web
from .catalog import Catalog
from .jobs import DEFAULT_TIME_LIMIT, JobManager, StillComputing, TooManyJobs

logger = logging.getLogger(__name__)

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_BODY = 4096  # bytes of a POST compute or compute_meta body
MAX_TRAILS_BODY = 64 << 10  # bytes of a POST trails body (500 indices)


def _app(plugin: RepvizPlugin, name: str, route: Route) -> Callable:
    """The WSGI app of route ``name``: its handler with the values its parameters read (GET routes) or the JSON
    object of the body (POST routes); methods other than the route's, cross-site requests, bad bodies and every
    failure become a one-line JSON error."""

    @wrappers.Request.application
    def wsgi(request):
        try:
            if request.method not in route.methods:
                raise web.HTTPError(405, f"{request.path.rsplit('/', 1)[-1]} takes {' or '.join(route.methods)}, not "
                                     f"{request.method[:20]}", headers=[("Allow", ", ".join(route.methods))])
            if route.methods == web.POST:
                return _respond(request, route, route.handler(plugin, web.json_body(request, route.max_body),
                                                              *(read(request) for read in route.params)))
            if not request.path.startswith(web.STATIC_PREFIX):  # the page's files stay loadable from anywhere
                web.same_origin(request)  # another site's page cannot make the browser start work or read data
            return _respond(request, route, route.handler(plugin, *(read(request) for read in route.params)))
        except web.HTTPError as e:
            return web.error_response(request, e.code, str(e), e.headers)
        except data.BadRequest as e:
            return web.error_response(request, 400, str(e))
        except NotFoundError as e:
            return web.error_response(request, 404, str(e).splitlines()[0])
        except TooManyJobs as e:
            return web.error_response(request, 429, str(e))
        except StillComputing as e:
            return web.error_response(request, 503, str(e))
        except Exception as e:  # never a traceback page; the traceback goes to TensorBoard's log
            logger.exception("repviz plugin: %s failed", request.path)
            damaged = web.damaged_file(e) if isinstance(e, web.READ_ERRORS) else None
            if damaged is not None:
                reason = (str(e).strip().splitlines() or [""])[0][:200]
                return web.error_response(request, 500, f"stored file {damaged!r} is damaged or unreadable "
                                            f"({type(e).__name__}: {reason})")
            return web.error_response(request, 500, f"internal error ({type(e).__name__}); see TensorBoard's log")

    wsgi.__name__ = name
    return wsgi


# --------------------------------------------------------------------------------------------------------------
# The route table
# --------------------------------------------------------------------------------------------------------------

JSON, BINARY, STATIC = "application/json", "application/octet-stream", "by file extension"


@dataclass(frozen=True)
class Route:
    """One route: ``handler(plugin, *values)`` with the values ``params`` read from the request (GET routes), or
    ``handler(plugin, body, *values)`` with the JSON object of the body (POST routes, ``max_body`` bytes at most).

    A handler returns a response, or what ``content_type`` turns into one: for JSON an object, or (object, status);
    for BINARY an array, or (array, headers covered by the ETag).
    """

    handler: Callable
    methods: tuple[str, ...] = web.GET
    content_type: str = JSON
    params: tuple[Callable, ...] = ()
    max_body: int = 0


def _text(name: str) -> Callable:
    """A required query parameter (400 when missing, empty or over 1,024 characters)."""
    return lambda request: web.arg(request, name)


def _text_or(name: str, default: str | None) -> Callable:
    """An optional query parameter, ``default`` when missing or empty (the handler checks its value)."""
    return lambda request: request.args.get(name) or default


def _integer(name: str, default: int | None = None) -> Callable:
    """An integer query parameter below 2^53 in magnitude: required, or ``default`` when empty."""
    return lambda request: web.int_arg(request, name, default)


def _on_catalog(impl: Callable) -> Callable:
    """A handler calling ``impl(catalog, *values)``: the routes answered by ``data.py`` and ``compare.py``."""
    return lambda plugin, *values: impl(plugin.catalog, *values)


def _runs(plugin: RepvizPlugin, request) -> wrappers.Response:
    body, tag = plugin.catalog.cached("runs", lambda: web.indexed({**data.runs_impl(plugin.catalog,
                                                                                     sorted(service.METHODS)),
                                                                  "choices": service.choices()}))
    if request.if_none_match.contains_raw(tag):
        return web.NotModified({"ETag": tag, "Cache-Control": web.ARRAY_CACHE, "X-Content-Type-Options": "nosniff"},
                               "application/json")
    return http_util.Respond(request, body, "application/json", headers=[("ETag", tag)])


def _started(job_and_new: tuple[dict, bool]) -> tuple[dict, int]:
    job, new = job_and_new
    return {"job": job}, 202 if new else 200


def _compute(plugin: RepvizPlugin, body: dict, client: str) -> tuple[dict, int]:
    if not all(isinstance(body.get(k), str) for k in ("run", "layer", "method")):
        raise data.BadRequest("the body must be a JSON object with string fields run, layer and method")
    run = plugin.catalog.run(body["run"])
    if body["layer"] not in run.layers:
        raise NotFoundError(f"layer {body['layer']!r} is not in run {run.name!r}")
    if body["method"] not in service.METHODS:
        raise NotFoundError(f"method {body['method']!r} is not one of {sorted(service.METHODS)}")
    if not run.steps(body["layer"]):
        raise NotFoundError(f"layer {body['layer']!r} of run {run.name!r} has no snapshots yet")
    return _started(plugin.jobs.submit(run.name, body["layer"], body["method"], client))


def _compute_meta(plugin: RepvizPlugin, body: dict, client: str) -> tuple[dict, int]:
    chosen = {}
    for field, options in META_OPTIONS.items():
        value = body.get(field, options[0])
        if value not in options:
            raise data.BadRequest(f"{field} must be one of {list(options)}; got {str(value)[:40]!r}")
        chosen[field] = value
    if not plugin.catalog.runs():
        raise NotFoundError("the log directory holds no runs to compare")
    return _started(plugin.jobs.submit_meta(chosen["transform"], chosen["metric"], chosen["embedding"], client))


def _similarity(plugin: RepvizPlugin, request) -> dict | tuple[dict, int]:
    chosen = similarity.selection(plugin.catalog, request.args, step_required=True)
    matrix = similarity.stored_matrix(plugin.catalog, chosen)
    if matrix is None:
        return {"error": similarity.not_computed(chosen), "computed": False}, 404
    return matrix


def _compute_similarity(plugin: RepvizPlugin, body: dict, client: str) -> tuple[dict, int]:
    chosen = similarity.selection(plugin.catalog, body, step_required=False)
    return _started(plugin.jobs.submit_similarity(chosen.public(), similarity.job_steps(plugin.catalog, chosen),
                                                  client))


def _cancel(plugin: RepvizPlugin, body: dict, client: str) -> dict:
    if not isinstance(body.get("id"), str):
        raise data.BadRequest("the body must be a JSON object with a string field id (a job's, as the jobs route "
                              "lists them)")
    return {"job": plugin.jobs.cancel(body["id"], client)}


def _neighbor_change(plugin: RepvizPlugin, run, layer, step, run2, layer2, step2, k) -> tuple[np.ndarray, dict]:
    change = compare.neighbor_change_impl(plugin.catalog, (run, layer, step), (run2, layer2, step2), k,
                                          plugin.graphs)
    mean = float(change.mean()) if len(change) else 0.0
    return change, {"X-Repviz-Mean": repr(round(mean, 6))}


def _trails(plugin: RepvizPlugin, body: dict) -> tuple[np.ndarray, dict]:
    if not all(isinstance(body.get(k), str) for k in ("run", "layer", "key")):
        raise data.BadRequest("the body must be a JSON object with string fields run, layer, key and a list "
                              "indices")
    coords, steps = compare.trails_impl(plugin.catalog, body["run"], body["layer"], body["key"], body.get("indices"))
    return coords, {"X-Repviz-Steps": ",".join(map(str, steps))}


def _static(plugin: RepvizPlugin, request) -> wrappers.Response:
    path = web.static_path(STATIC_DIR, request.path)
    with open(path, "rb") as f:
        content = f.read()
    return http_util.Respond(request, content,
                             web.CONTENT_TYPES.get(os.path.splitext(path)[1].lower(), "application/octet-stream"))


def _request(request):
    """The request itself, for handlers that read more than plain parameters."""
    return request


RUN, LAYER, STEP, KEY = _text("run"), _text("layer"), _integer("step"), _text("key")
CLIENT = web.client

#: Every route of the tab (relative to ``data/plugin/repviz/``).
ROUTES: dict[str, Route] = {
    "runs": Route(_runs, params=(_request,)),
    "info": Route(_on_catalog(data.info_impl), params=(RUN, LAYER, STEP, _text_or("key", None))),
    "meta_result": Route(_on_catalog(data.meta_result_impl), params=(_text("name"),)),
    "compute": Route(_compute, web.POST, max_body=MAX_BODY, params=(CLIENT,)),
    "compute_meta": Route(_compute_meta, web.POST, max_body=MAX_BODY, params=(CLIENT,)),
    "similarity": Route(_similarity, params=(_request,)),
    "compute_similarity": Route(_compute_similarity, web.POST, max_body=MAX_BODY, params=(CLIENT,)),
    "cancel": Route(_cancel, web.POST, max_body=MAX_BODY, params=(CLIENT,)),
    "knn": Route(_on_catalog(compare.knn_impl), params=(RUN, LAYER, STEP, _integer("index"), _integer("k", 10))),
    "neighborhood_change": Route(_neighbor_change, content_type=BINARY,
                                 params=(RUN, LAYER, STEP, _text("run2"), _text("layer2"), _integer("step2"),
                                         _integer("k", 10))),
    "trails": Route(_trails, web.POST, BINARY, max_body=MAX_TRAILS_BODY),
    "density": Route(_on_catalog(compare.density_impl),
                     params=(RUN, LAYER, STEP, KEY, _text_or("by", "all"), _integer("levels", 4))),
    "placed": Route(_on_catalog(data.placed_impl), params=(RUN, LAYER, STEP, KEY)),
    "jobs": Route(lambda plugin: {"jobs": plugin.jobs.jobs()}),
    "coords": Route(_on_catalog(data.coords_impl), content_type=BINARY, params=(RUN, LAYER, STEP, KEY)),
    "labels": Route(_on_catalog(data.labels_impl), content_type=BINARY, params=(RUN,)),
    "predictions": Route(_on_catalog(data.predictions_impl), content_type=BINARY, params=(RUN, STEP)),
    "ids": Route(_on_catalog(data.ids_impl), content_type=BINARY, params=(RUN,)),
    "rows": Route(_on_catalog(data.rows_impl), content_type=BINARY, params=(RUN, LAYER, STEP)),
    "thumbnails": Route(_on_catalog(data.thumbnails_impl), content_type=BINARY,
                        params=(RUN, _integer("start", 0), _integer("count"))),
    "metadata": Route(_on_catalog(metadata.metadata_impl), params=(RUN,)),
    "static/*": Route(_static, content_type=STATIC, params=(_request,)),
}


def _respond(request, route: Route, reply) -> wrappers.Response:
    """The response of ``reply``, what ``route``'s handler returned."""
    if isinstance(reply, wrappers.Response):
        return reply
    if route.content_type == BINARY:
        array, headers = reply if isinstance(reply, tuple) else (reply, None)
        return web.binary(request, array, headers)
    obj, code = reply if isinstance(reply, tuple) else (reply, 200)
    return web.json_response(request, obj, code=code)


@dataclass(frozen=True)
class Reply:
    """A route's answer as its HTTP response carries it: status, headers, body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        """The body of a JSON answer, decoded."""
        return json.loads(self.body)


def call(plugin: RepvizPlugin, route: str, params: dict | None = None, *, method: str = "GET",
         headers: dict | None = None, body: bytes | str | None = None) -> Reply:
    """Answer one request of the page without HTTP, through the route's own WSGI app: the same parameters read, the
    same names checked, the same handler, errors, ETags and 304s as TensorBoard serves. A request made this way
    carries no ``Origin`` or ``Sec-Fetch-Site``, so the cross-site checks (an HTTP matter) pass; the page's files
    are no route here (the widget ships its page)."""
    if route not in ROUTES or route.endswith("*"):
        return Reply(404, {"Content-Type": JSON}, web.dumps({"error": f"no route {route[:60]!r}"}).encode())
    environ = wsgi_request.EnvironBuilder(path=f"/data/plugin/{PLUGIN_NAME}/{route}", method=method,
                                          query_string={k: str(v) for k, v in (params or {}).items()},
                                          headers=headers, data=body).get_environ()
    response = wrappers.Response.from_app(plugin.app(route), environ, buffered=True)
    return Reply(response.status_code, dict(response.headers), response.get_data())


class RepvizPlugin(base_plugin.TBPlugin):
    """The Repviz tab: runs, layers, snapshots and embeddings of a repviz log directory."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        logdir = getattr(context, "logdir", "") or ""
        flags = getattr(context, "flags", None)
        out = getattr(flags, "repviz_out", None) or None
        # Both are cheap to build: the listing and the worker processes start on first use.
        self.catalog = Catalog(logdir, out=out)
        self.jobs = JobManager(logdir, out=out,
                               time_limit=getattr(flags, "repviz_job_limit", None) or DEFAULT_TIME_LIMIT)

        self._apps: dict[str, Callable] = {}

    def get_plugin_apps(self):
        self.catalog.prefetch()  # TensorBoard builds the routes at start-up: list the log directory meanwhile
        return {f"/{name}": self.app(name) for name in ROUTES}

    def app(self, name: str) -> Callable:
        """The WSGI app of route ``name`` (built once)."""
        if name not in self._apps:
            self._apps[name] = _app(self, name, ROUTES[name])
        return self._apps[name]

    def is_active(self) -> bool:
        return self.catalog.is_active()

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/static/index.js", tab_name="Repviz")

    def graphs(self, representations: list, k: int) -> list[np.ndarray]:
        """k-NN graphs computed side by side in the job manager's worker processes (a graph asked for by
        concurrent requests is computed once); a representation may name the rows it is restricted to."""
        return self.jobs.calls([(("graph", run.name, layer, step, k, *map(data.etag, where)), compare.compute_graph,
                                 (run, layer, step, k, *where)) for run, layer, step, *where in representations])


