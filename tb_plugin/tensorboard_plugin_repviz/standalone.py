"""A static export of the notebook widget: one HTML file that opens without a kernel or a server.

The file holds the page bundle inline and the answers the shown choice needs (the run index; the run's labels, ids,
metadata, thumbnails and predictions; the embedding's coordinates, info and placed points at every snapshot, so the
slider works; for the Similarity view, its computed heatmaps at every snapshot), each a route's own reply with its
body in base64, answered by the page from that table. What it does not hold (another run, a k-NN query) answers with
one line saying so.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from pathlib import Path

from .answers import Answer, similarity_answers, view_answers
from .plugin import RepvizPlugin, call

ASSETS = Path(__file__).resolve().parent / "notebook"
MAX_BYTES = 100 << 20


def page_text() -> str:
    """The page bundle (``notebook/page.js``, made by ``tb_plugin/frontend/build.mjs``)."""
    return (ASSETS / "page.js").read_text(encoding="utf-8")


def _entry(answer: Answer) -> dict:
    binary = not answer.reply.headers.get("Content-Type", "").startswith("application/json")
    body = base64.b64encode(answer.reply.body).decode("ascii") if binary else answer.reply.body.decode("utf-8")
    return {"route": answer.route, "params": {k: str(v) for k, v in answer.params.items()},
            "status": answer.reply.status, "headers": answer.reply.headers, "body": body, "base64": binary}


def _script_json(value) -> str:
    """JSON that cannot end the <script> element holding it (every "<" escaped)."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def export_html(plugin: RepvizPlugin, state: dict, path: str | os.PathLike, *, steps: Iterable[int] | None = None,
                max_bytes: int = MAX_BYTES) -> Path:
    """Write ``state`` (``view``, ``run``, ``layer``, ``method``, ``step``, ``selected``: probe ids, ``runs``) of the
    log directory ``plugin`` serves into one HTML file at ``path`` (atomically), with every snapshot of the
    embedding or only ``steps``. Refuses, in one line, a file over ``max_bytes`` bytes."""
    index_reply = call(plugin, "runs")
    answers = [Answer("runs", {}, index_reply)]
    index = index_reply.json()
    if state.get("view") == "similarity":
        answers += similarity_answers(plugin, index, list(state.get("runs") or [state.get("run")]))
    if state.get("run") and state.get("layer") and state.get("method"):
        answers += view_answers(plugin, index, state["run"], state["layer"], state["method"],
                                None if steps is None else sorted(set(steps)))
    page = page_text()
    entries, size = [], len(page)
    for answer in answers:
        entries.append(_entry(answer))
        size += len(entries[-1]["body"])
        if size > max_bytes:
            raise ValueError(f"the export would be over {max_bytes / 1e6:.0f} MB (already {size / 1e6:.0f} MB at "
                             f"{answer.route} of step {answer.params.get('step', '-')}); export fewer snapshots "
                             f"(save_html(path, steps=[...])) or raise max_bytes")
    initial = {"view": state.get("view") or "main", "run": state.get("run"), "layer": state.get("layer"),
               "method": state.get("method"), "step": state.get("step"),
               "selectedIds": [int(i) for i in state.get("selected", [])], "runs": list(state.get("runs") or [])}
    title = " · ".join(str(part) for part in ("repviz", state.get("run"), state.get("layer")) if part)
    html = ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + _escape(title) + "</title></head><body>\n"
            "<script type=\"application/json\" id=\"repviz-data\">" + _script_json({"initial": initial,
                                                                                     "entries": entries}) +
            "</script>\n<script type=\"module\">" + page + "</script>\n</body></html>\n")
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        temporary.write_text(html, encoding="utf-8")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
