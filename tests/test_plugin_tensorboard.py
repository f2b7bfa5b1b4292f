"""A real ``tensorboard`` process on 127.0.0.1: the Repviz tab is listed, enabled for a repviz log directory and
disabled for an empty one; its routes answer through TensorBoard's own server (default data loading and
``--load_fast=false``)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from repviz.store import RunWriter

pytestmark = pytest.mark.skipif(
    not any(ep.name == "repviz" for ep in entry_points(group="tensorboard_plugins")),
    reason="the tensorboard_plugins entry point 'repviz' is not registered in this environment "
           "(install the package: pip install '.[cpu,test]' or pip install -e .)")


# From a checkout, the package may be registered (an egg-info in the working directory) but importable only
# through pytest's `pythonpath`: hand that on to the server process.
_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(Path(__file__).resolve().parents[1] / "tb_plugin"), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)  # the path is sent as written (no client-side normalisation of "..")
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@contextlib.contextmanager
def tensorboard(logdir, *extra):
    port = _free_port()
    log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a pipe nobody reads could fill and block it
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host",
                             "127.0.0.1", "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=log, env=_ENV)
    try:
        deadline = time.time() + 90
        while True:
            with contextlib.suppress(OSError):
                status, _ = _get(port, "/data/plugins_listing")
                if status == 200:
                    break
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"tensorboard exited with {proc.returncode}: {log.read()[-2000:]}")
            if time.time() > deadline:
                raise AssertionError("tensorboard did not serve /data/plugins_listing within 90 s")
            time.sleep(0.3)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _listing(port: int, want_enabled: bool, timeout: float = 30) -> dict:
    """The repviz entry of the plugin listing, polled until ``enabled`` is what we expect (TensorBoard loads
    event files in the background) or the time is up."""
    deadline = time.time() + timeout
    while True:
        status, body = _get(port, "/data/plugins_listing")
        entry = json.loads(body).get("repviz")
        if entry is not None and entry["enabled"] == want_enabled or time.time() > deadline:
            return entry
        time.sleep(0.5)


def _repviz_logdir(path):
    w = RunWriter(path / "run_a")
    w.begin({"fingerprint": {"model": "m", "probe": "p"}, "step_unit": "epoch",
             "layers": {"dense": {"class": "Dense", "stored_shape": [20, 4]}}})
    w.write_probe(np.arange(20), np.arange(20) % 2)
    w.write_activation("dense", 0, np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32), epoch=0)
    return path


# TensorBoard's two data loaders; the second server also takes the plugin's own flag (each server imports TensorFlow,
# about 4 s of CPU, so the flags share one)
@pytest.mark.parametrize("extra", [(), ("--load_fast=false", "--repviz_out", "{tmp}/results")])
def test_tab_enabled_for_repviz_logdir_and_routes_served(tmp_path, extra):
    extra = [arg.format(tmp=tmp_path) for arg in extra]
    with tensorboard(_repviz_logdir(tmp_path), *extra) as port:
        entry = _listing(port, want_enabled=True)
        assert entry is not None and entry["enabled"] is True and entry["tab_name"] == "Repviz"
        assert entry["loading_mechanism"] == {"type": "IFRAME", "module_path": "/data/plugin/repviz/static/index.js"}
        status, body = _get(port, "/data/plugin/repviz/runs")
        assert status == 200 and [r["name"] for r in json.loads(body)["runs"]] == ["run_a"]
        for path in ("/data/plugin/repviz/static/../plugin.py", "/data/plugin/repviz/static/%2e%2e/plugin.py",
                     "/data/plugin/repviz/labels?run=../run_a"):
            status, body = _get(port, path)
            assert status in (400, 404) and b"import" not in body, path


def test_tab_disabled_for_empty_logdir(tmp_path):
    with tensorboard(tmp_path, "--load_fast=false") as port:
        entry = _listing(port, want_enabled=False, timeout=5)
        assert entry is not None and entry["enabled"] is False
