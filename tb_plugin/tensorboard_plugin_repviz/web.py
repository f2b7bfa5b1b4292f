"""The HTTP plumbing of the plugin's routes: reading parameters and JSON bodies, refusing cross-site requests,
and writing strict JSON, binary arrays with ETags (304 when unchanged) and the page's static files.

A bad parameter or body is a :class:`~.BadRequest` (400); the other refusals are :class:`HTTPError` with their
status. Nothing here knows a route: ``plugin.py`` holds the table.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import posixpath
import re
import tokenize

import numpy as np
from tensorboard.backend import http_util
from werkzeug import exceptions, wrappers

from repviz.service import PLUGIN_NAME

from .data import BadRequest, etag

STATIC_PREFIX = f"/data/plugin/{PLUGIN_NAME}/static/"
CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                 ".json": "application/json", ".map": "application/json", ".html": "text/html",
                 ".svg": "image/svg+xml", ".png": "image/png", ".txt": "text/plain", ".md": "text/plain",
                 ".wasm": "application/wasm"}
BODY_TIMEOUT = 5.0  # seconds a POST body may pause between two reads (as nginx's client_body_timeout)
GET, POST = ("GET", "HEAD"), ("POST",)
_SAME_ORIGIN_FETCH = ("same-origin", "none")  # Sec-Fetch-Site of the tab's own fetches and of typed URLs
ARRAY_CACHE = "private, no-cache"  # revalidated every time (a recomputed embedding keeps its URL), 304 if same
CLIENT_HEADER = "X-Repviz-Client"  # the id a page load of the tab makes for itself, for the fair job queue
_CLIENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


def dumps(obj) -> str:
    """Strict JSON (browsers reject NaN): non-finite numbers, such as a score that could not be computed, as null."""
    return json.dumps(_finite(obj), allow_nan=False, separators=(",", ":"))


def json_response(request, obj, code: int = 200, headers=None) -> wrappers.Response:
    return http_util.Respond(request, dumps(obj), "application/json", code=code, headers=headers)


def error_response(request, code: int, message: str, headers=None) -> wrappers.Response:
    return json_response(request, {"error": message}, code=code, headers=headers)


#: What reading a damaged stored file raises: numpy's header parsing (ValueError, EOFError, a TokenError from
#: its tokenizer), the file system (OSError), the store's own checks (ValueError).
READ_ERRORS = (ValueError, OSError, EOFError, tokenize.TokenError)


def damaged_file(error: BaseException) -> str | None:
    """The file whose reading raised ``error`` (the store's :class:`~repviz.store.DamagedFileError` and
    :class:`OSError` name it), or None."""
    filename = getattr(error, "filename", None)
    return None if filename is None else os.fsdecode(filename)


def arg(request, name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise BadRequest(f"missing parameter {name!r}")
    if len(value) > 1024:
        raise BadRequest(f"parameter {name!r} is too long ({len(value)} characters)")
    return value


def client(request) -> str:
    """Who asks, for the job queue's fairness: the page's own id (:data:`CLIENT_HEADER`), else the remote
    address (a script, or a page of another version)."""
    own = request.headers.get(CLIENT_HEADER, "")
    return f"tab:{own}" if _CLIENT_ID.fullmatch(own) else f"address:{request.remote_addr or 'unknown'}"


def int_arg(request, name: str, default: int | None = None) -> int:
    if default is not None and request.args.get(name) in (None, ""):
        return default
    value = arg(request, name)
    try:
        number = int(value, 10)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer; got {value[:40]!r}") from None
    if abs(number) >= 2**53:
        raise BadRequest(f"parameter {name!r} is out of range")
    return number


class NotModified(wrappers.Response):
    """A 304 that keeps its Content-Type: werkzeug drops it, and TensorBoard's security check warns on every
    response without one (and plans to refuse them)."""

    def __init__(self, headers: dict, content_type: str):
        super().__init__(status=304, headers=headers)
        self._kept_type = content_type

    def get_wsgi_headers(self, environ):
        headers = super().get_wsgi_headers(environ)
        headers["Content-Type"] = self._kept_type
        return headers


def same_origin(request) -> None:
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


def json_body(request, max_bytes: int) -> dict:
    """The JSON object of the body of a POST from the tab's own page (403, 415, 413 or 400 otherwise)."""
    same_origin(request)
    if request.mimetype != "application/json":
        raise HTTPError(415, f"the body must be sent as Content-Type application/json, not "
                             f"{request.mimetype[:60] or 'none'!r}")
    try:
        body = json.loads(_read_body(request, max_bytes))
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("the body's JSON is nested too deeply") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def binary(request, array: np.ndarray, headers: dict | None = None) -> wrappers.Response:
    """A little-endian array as ``application/octet-stream`` with its shape, a strong ETag and 304 support;
    ``headers`` are added (and covered by the ETag)."""
    extra = headers or {}
    tag = etag(array) if not extra else etag(array)[:-1] + "-" + \
        hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8] + '"'
    headers = {"ETag": tag, "Cache-Control": ARRAY_CACHE, "X-Repviz-Shape": ",".join(map(str, array.shape)),
               "X-Content-Type-Options": "nosniff", **extra}
    if request.if_none_match.contains_raw(tag):
        return NotModified(headers, "application/octet-stream")
    body = b"" if request.method == "HEAD" else np.ascontiguousarray(array).tobytes()
    return wrappers.Response(body, status=200, headers=headers, content_type="application/octet-stream")


def static_path(root: str, request_path: str) -> str:
    """The file under ``root`` that ``request_path`` names, or ``HTTPError`` 400/404.

    Refused: anything outside ``/data/plugin/repviz/static/``, ``..`` or ``.`` segments, backslashes, NUL, empty
    segments, and paths that leave ``root`` once symbolic links are resolved.
    """
    if not request_path.startswith(STATIC_PREFIX):
        raise HTTPError(404, "not a static file")
    rel = request_path[len(STATIC_PREFIX):]
    parts = rel.split("/")
    if not rel or "\\" in rel or "\x00" in rel or any(p in ("", ".", "..") for p in parts):
        raise HTTPError(400, "bad static file path")
    root = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(root, posixpath.normpath(rel)))
    if os.path.commonpath([candidate, root]) != root or not os.path.isfile(candidate):
        raise HTTPError(404, f"no static file {rel[:200]!r}")
    return candidate


def indexed(index: dict) -> tuple[str, str]:
    body = dumps(index)
    return body, '"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"'
