"""The Repviz TensorBoard plugin: a route table of thin WSGI wrappers over ``data.py`` and ``jobs.py``.

Routes (relative to ``data/plugin/repviz/``; the contract with the page is in the project notes and README):
JSON ``runs``, ``info``, ``jobs``, ``meta_result``, ``knn``, ``density``, ``placed`` (other runs' probes placed into
a layout), ``similarity`` (404 while not computed),
``POST compute``, ``POST compute_meta``, ``POST compute_similarity``;
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
:data:`BODY_TIMEOUT` (400). A stored file that cannot be read (a damaged ``.npy``) answers 500 naming the file.
One limit is not ours: a request line over 64 KiB (a query string of that size) gets Python's ``http.server`` 414
page before TensorBoard or the plugin see the request; a parameter over 1,024 characters below that gets our 400.

Every route is one entry of :data:`ROUTES` (handler, methods, content type, parameters). Everything the plugin
needs from repviz comes through :mod:`repviz.service`. Importing this module imports no Keras, TensorFlow or numba
(the service names the methods without importing their estimators; the numerical code is loaded only inside the
worker processes that compute).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import posixpath
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import exceptions, wrappers

from repviz import service
from repviz.service import META_OPTIONS, PLUGIN_NAME, NotFoundError

from . import compare, data, metadata, similarity
from .catalog import Catalog
from .jobs import JobManager, StillComputing, TooManyJobs

logger = logging.getLogger(__name__)

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
_STATIC_PREFIX = f"/data/plugin/{PLUGIN_NAME}/static/"
_CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                  ".json": "application/json", ".map": "application/json", ".html": "text/html",
                  ".svg": "image/svg+xml", ".png": "image/png", ".txt": "text/plain", ".md": "text/plain",
                  ".wasm": "application/wasm"}
MAX_BODY = 4096  # bytes of a POST compute or compute_meta body
MAX_TRAILS_BODY = 64 << 10  # bytes of a POST trails body (500 indices)
BODY_TIMEOUT = 5.0  # seconds a POST body may pause between two reads (as nginx's client_body_timeout)
GET, POST = ("GET", "HEAD"), ("POST",)
_SAME_ORIGIN_FETCH = ("same-origin", "none")  # Sec-Fetch-Site of the tab's own fetches and of typed URLs
_ARRAY_CACHE = "private, no-cache"  # revalidated every time (a recomputed embedding keeps its URL), 304 if same


class HTTPError(Exception):
    def __init__(self, code: int, message: str, headers: list | None = None):
        super().__init__(message)
        self.code, self.headers = code, headers


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _dumps(obj) -> str:
    """Strict JSON (browsers reject NaN): non-finite numbers, such as a score that could not be computed, as null."""
    return json.dumps(_finite(obj), allow_nan=False, separators=(",", ":"))


def _json(request, obj, code: int = 200, headers=None) -> wrappers.Response:
    return http_util.Respond(request, _dumps(obj), "application/json", code=code, headers=headers)


def _error(request, code: int, message: str, headers=None) -> wrappers.Response:
    return _json(request, {"error": message}, code=code, headers=headers)


#: What reading a damaged stored file raises: numpy's header parsing (ValueError, EOFError, a TokenError from
#: its tokenizer), the file system (OSError), the store's own checks (ValueError).
_READ_ERRORS = (ValueError, OSError, EOFError, tokenize.TokenError)


def _damaged_file(error: BaseException) -> str | None:
    """The file whose reading raised ``error`` (the store's :class:`~repviz.store.DamagedFileError` and
    :class:`OSError` name it), or None."""
    filename = getattr(error, "filename", None)
    return None if filename is None else os.fsdecode(filename)


def _app(plugin: RepvizPlugin, name: str, route: Route) -> Callable:
    """The WSGI app of route ``name``: its handler with the values its parameters read (GET routes) or the JSON
    object of the body (POST routes); methods other than the route's, cross-site requests, bad bodies and every
    failure become a one-line JSON error."""

    @wrappers.Request.application
    def wsgi(request):
        try:
            if request.method not in route.methods:
                raise HTTPError(405, f"{request.path.rsplit('/', 1)[-1]} takes {' or '.join(route.methods)}, not "
                                     f"{request.method[:20]}", headers=[("Allow", ", ".join(route.methods))])
            if route.methods == POST:
                return _respond(request, route, route.handler(plugin, _json_body(request, route.max_body)))
            if not request.path.startswith(_STATIC_PREFIX):  # the page's files stay loadable from anywhere
                _same_origin(request)  # another site's page cannot make the browser start work or read data
            return _respond(request, route, route.handler(plugin, *(read(request) for read in route.params)))
        except HTTPError as e:
            return _error(request, e.code, str(e), e.headers)
        except data.BadRequest as e:
            return _error(request, 400, str(e))
        except NotFoundError as e:
            return _error(request, 404, str(e).splitlines()[0])
        except TooManyJobs as e:
            return _error(request, 429, str(e))
        except StillComputing as e:
            return _error(request, 503, str(e))
        except Exception as e:  # never a traceback page; the traceback goes to TensorBoard's log
            logger.exception("repviz plugin: %s failed", request.path)
            damaged = _damaged_file(e) if isinstance(e, _READ_ERRORS) else None
            if damaged is not None:
                reason = (str(e).strip().splitlines() or [""])[0][:200]
                return _error(request, 500, f"stored file {damaged!r} is damaged or unreadable "
                                            f"({type(e).__name__}: {reason})")
            return _error(request, 500, f"internal error ({type(e).__name__}); see TensorBoard's log")

    wsgi.__name__ = name
    return wsgi


def _arg(request, name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise data.BadRequest(f"missing parameter {name!r}")
    if len(value) > 1024:
        raise data.BadRequest(f"parameter {name!r} is too long ({len(value)} characters)")
    return value


def _int_arg(request, name: str, default: int | None = None) -> int:
    if default is not None and request.args.get(name) in (None, ""):
        return default
    value = _arg(request, name)
    try:
        number = int(value, 10)
    except ValueError:
        raise data.BadRequest(f"parameter {name!r} must be an integer; got {value[:40]!r}") from None
    if abs(number) >= 2**53:
        raise data.BadRequest(f"parameter {name!r} is out of range")
    return number


class _NotModified(wrappers.Response):
    """A 304 that keeps its Content-Type: werkzeug drops it, and TensorBoard's security check warns on every
    response without one (and plans to refuse them)."""

    def __init__(self, headers: dict, content_type: str):
        super().__init__(status=304, headers=headers)
        self._kept_type = content_type

    def get_wsgi_headers(self, environ):
        headers = super().get_wsgi_headers(environ)
        headers["Content-Type"] = self._kept_type
        return headers


def _same_origin(request) -> None:
    """Refuse (403) a request a browser sent from another site: its ``Sec-Fetch-Site`` when the browser sends one
    (the browser vouches for it, also behind a proxy that rewrites Host), else its ``Origin`` when present."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site not in _SAME_ORIGIN_FETCH:
            raise HTTPError(403, f"cross-site request refused (Sec-Fetch-Site: {site[:40]}); only the Repviz "
                                 f"tab's own page may call this route")
        return
    origin = request.headers.get("Origin")
    own = f"{request.scheme}://{request.host}"
    if origin is not None and origin.lower() != own.lower():
        raise HTTPError(403, f"cross-origin request refused (Origin {origin[:100]!r} is not {own[:100]!r}); only "
                             f"the Repviz tab's own page may call this route")


def _read_body(request, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of the body, which must declare its Content-Length (413), arrive in full and pause
    no longer than :data:`BODY_TIMEOUT` between reads (400). The timeout is set on the connection's socket, which
    werkzeug's server (TensorBoard's) closes after each request, so it also bounds the server's draining of
    unread input."""
    if request.content_length is None or request.content_length > max_bytes:
        raise HTTPError(413, f"the body must be JSON of at most {max_bytes} bytes with a Content-Length")
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        sock.settimeout(BODY_TIMEOUT)
    try:
        return request.get_data(cache=False)
    except exceptions.ClientDisconnected:
        raise HTTPError(400, f"the body ended before its Content-Length of {request.content_length} bytes or "
                             f"paused for over {BODY_TIMEOUT:g} s") from None


def _json_body(request, max_bytes: int) -> dict:
    """The JSON object of the body of a POST from the tab's own page (403, 415, 413 or 400 otherwise)."""
    _same_origin(request)
    if request.mimetype != "application/json":
        raise HTTPError(415, f"the body must be sent as Content-Type application/json, not "
                             f"{request.mimetype[:60] or 'none'!r}")
    try:
        body = json.loads(_read_body(request, max_bytes))
    except (ValueError, UnicodeDecodeError):
        raise data.BadRequest("the body is not valid JSON") from None
    except RecursionError:
        raise data.BadRequest("the body's JSON is nested too deeply") from None
    if not isinstance(body, dict):
        raise data.BadRequest("the body must be a JSON object")
    return body


def _binary(request, array: np.ndarray, headers: dict | None = None) -> wrappers.Response:
    """A little-endian array as ``application/octet-stream`` with its shape, a strong ETag and 304 support;
    ``headers`` are added (and covered by the ETag)."""
    extra = headers or {}
    tag = data.etag(array) if not extra else data.etag(array)[:-1] + "-" + \
        hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8] + '"'
    headers = {"ETag": tag, "Cache-Control": _ARRAY_CACHE, "X-Repviz-Shape": ",".join(map(str, array.shape)),
               "X-Content-Type-Options": "nosniff", **extra}
    if request.if_none_match.contains_raw(tag):
        return _NotModified(headers, "application/octet-stream")
    body = b"" if request.method == "HEAD" else np.ascontiguousarray(array).tobytes()
    return wrappers.Response(body, status=200, headers=headers, content_type="application/octet-stream")


# --------------------------------------------------------------------------------------------------------------
# The route table
# --------------------------------------------------------------------------------------------------------------

JSON, BINARY, STATIC = "application/json", "application/octet-stream", "by file extension"


@dataclass(frozen=True)
class Route:
    """One route: ``handler(plugin, *values)`` with the values ``params`` read from the query (GET routes), or
    ``handler(plugin, body)`` with the JSON object of the body (POST routes, ``max_body`` bytes at most).

    A handler returns a response, or what ``content_type`` turns into one: for JSON an object, or (object, status);
    for BINARY an array, or (array, headers covered by the ETag).
    """

    handler: Callable
    methods: tuple[str, ...] = GET
    content_type: str = JSON
    params: tuple[Callable, ...] = ()
    max_body: int = 0


def _text(name: str, default: str | None = ...) -> Callable:
    """A query parameter: required (400 when missing or over 1,024 characters), or ``default`` when empty."""
    if default is ...:
        return lambda request: _arg(request, name)
    return lambda request: request.args.get(name) or default


def _integer(name: str, default: int | None = None) -> Callable:
    """An integer query parameter below 2^53 in magnitude: required, or ``default`` when empty."""
    return lambda request: _int_arg(request, name, default)


def _on_catalog(impl: Callable) -> Callable:
    """A handler calling ``impl(catalog, *values)``: the routes answered by ``data.py`` and ``compare.py``."""
    return lambda plugin, *values: impl(plugin.catalog, *values)


def _runs(plugin: RepvizPlugin, request) -> wrappers.Response:
    index = plugin.catalog.cached("runs", lambda: _indexed({**data.runs_impl(plugin.catalog, sorted(service.METHODS)),
                                                            "choices": service.choices()}))
    body, tag = index
    if request.if_none_match.contains_raw(tag):
        return _NotModified({"ETag": tag, "Cache-Control": _ARRAY_CACHE, "X-Content-Type-Options": "nosniff"},
                            "application/json")
    return http_util.Respond(request, body, "application/json", headers=[("ETag", tag)])


def _started(job_and_new: tuple[dict, bool]) -> tuple[dict, int]:
    job, new = job_and_new
    return {"job": job}, 202 if new else 200


def _compute(plugin: RepvizPlugin, body: dict) -> tuple[dict, int]:
    if not all(isinstance(body.get(k), str) for k in ("run", "layer", "method")):
        raise data.BadRequest("the body must be a JSON object with string fields run, layer and method")
    run = plugin.catalog.run(body["run"])
    if body["layer"] not in run.layers:
        raise NotFoundError(f"layer {body['layer']!r} is not in run {run.name!r}")
    if body["method"] not in service.METHODS:
        raise NotFoundError(f"method {body['method']!r} is not one of {sorted(service.METHODS)}")
    if not run.steps(body["layer"]):
        raise NotFoundError(f"layer {body['layer']!r} of run {run.name!r} has no snapshots yet")
    return _started(plugin.jobs.submit(run.name, body["layer"], body["method"]))


def _compute_meta(plugin: RepvizPlugin, body: dict) -> tuple[dict, int]:
    chosen = {}
    for field, options in META_OPTIONS.items():
        value = body.get(field, options[0])
        if value not in options:
            raise data.BadRequest(f"{field} must be one of {list(options)}; got {str(value)[:40]!r}")
        chosen[field] = value
    if not plugin.catalog.runs():
        raise NotFoundError("the log directory holds no runs to compare")
    return _started(plugin.jobs.submit_meta(chosen["transform"], chosen["metric"], chosen["embedding"]))


def _similarity(plugin: RepvizPlugin, request) -> dict | tuple[dict, int]:
    chosen = similarity.selection(plugin.catalog, request.args, step_required=True)
    matrix = similarity.stored_matrix(plugin.catalog, chosen)
    if matrix is None:
        return {"error": similarity.not_computed(chosen), "computed": False}, 404
    return matrix


def _compute_similarity(plugin: RepvizPlugin, body: dict) -> tuple[dict, int]:
    chosen = similarity.selection(plugin.catalog, body, step_required=False)
    return _started(plugin.jobs.submit_similarity(chosen.public(), similarity.job_steps(plugin.catalog, chosen)))


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
    path = static_path(STATIC_DIR, request.path)
    with open(path, "rb") as f:
        content = f.read()
    return http_util.Respond(request, content,
                             _CONTENT_TYPES.get(os.path.splitext(path)[1].lower(), "application/octet-stream"))


def _request(request):
    """The request itself, for handlers that read more than plain parameters."""
    return request


RUN, LAYER, STEP, KEY = _text("run"), _text("layer"), _integer("step"), _text("key")

#: Every route of the tab (relative to ``data/plugin/repviz/``).
ROUTES: dict[str, Route] = {
    "runs": Route(_runs, params=(_request,)),
    "info": Route(_on_catalog(data.info_impl), params=(RUN, LAYER, STEP, _text("key", None))),
    "meta_result": Route(_on_catalog(data.meta_result_impl), params=(_text("name"),)),
    "compute": Route(_compute, POST, max_body=MAX_BODY),
    "compute_meta": Route(_compute_meta, POST, max_body=MAX_BODY),
    "similarity": Route(_similarity, params=(_request,)),
    "compute_similarity": Route(_compute_similarity, POST, max_body=MAX_BODY),
    "knn": Route(_on_catalog(compare.knn_impl), params=(RUN, LAYER, STEP, _integer("index"), _integer("k", 10))),
    "neighborhood_change": Route(_neighbor_change, content_type=BINARY,
                                 params=(RUN, LAYER, STEP, _text("run2"), _text("layer2"), _integer("step2"),
                                         _integer("k", 10))),
    "trails": Route(_trails, POST, BINARY, max_body=MAX_TRAILS_BODY),
    "density": Route(_on_catalog(compare.density_impl),
                     params=(RUN, LAYER, STEP, KEY, _text("by", "all"), _integer("levels", 4))),
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
        return _binary(request, array, headers)
    obj, code = reply if isinstance(reply, tuple) else (reply, 200)
    return _json(request, obj, code=code)


class RepvizPlugin(base_plugin.TBPlugin):
    """The Repviz tab: runs, layers, snapshots and embeddings of a repviz log directory."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        logdir = getattr(context, "logdir", "") or ""
        out = getattr(getattr(context, "flags", None), "repviz_out", None) or None
        # Both are cheap to build: the listing and the worker processes start on first use.
        self.catalog = Catalog(logdir, out=out)
        self.jobs = JobManager(logdir, out=out)

    def get_plugin_apps(self):
        self.catalog.prefetch()  # TensorBoard builds the routes at start-up: list the log directory meanwhile
        return {f"/{name}": _app(self, name, route) for name, route in ROUTES.items()}

    def is_active(self) -> bool:
        return self.catalog.is_active()

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/static/index.js", tab_name="Repviz")

    def graphs(self, representations: list, k: int) -> list[np.ndarray]:
        """k-NN graphs computed side by side in the job manager's worker processes (a graph asked for by
        concurrent requests is computed once); a representation may name the rows it is restricted to."""
        return self.jobs.calls([(("graph", run.name, layer, step, k, *map(data.etag, where)), compare.compute_graph,
                                 (run, layer, step, k, *where)) for run, layer, step, *where in representations])


def static_path(root: str, request_path: str) -> str:
    """The file under ``root`` that ``request_path`` names, or ``HTTPError`` 400/404.

    Refused: anything outside ``/data/plugin/repviz/static/``, ``..`` or ``.`` segments, backslashes, NUL, empty
    segments, and paths that leave ``root`` once symbolic links are resolved.
    """
    if not request_path.startswith(_STATIC_PREFIX):
        raise HTTPError(404, "not a static file")
    rel = request_path[len(_STATIC_PREFIX):]
    parts = rel.split("/")
    if not rel or "\\" in rel or "\x00" in rel or any(p in ("", ".", "..") for p in parts):
        raise HTTPError(400, "bad static file path")
    root = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(root, posixpath.normpath(rel)))
    if os.path.commonpath([candidate, root]) != root or not os.path.isfile(candidate):
        raise HTTPError(404, f"no static file {rel[:200]!r}")
    return candidate


def _indexed(index: dict) -> tuple[str, str]:
    body = _dumps(index)
    return body, '"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"'
