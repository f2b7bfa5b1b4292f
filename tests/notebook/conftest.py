"""Fixtures of the notebook tests: one real JupyterLab server per test session (its kernels run this checkout's
repviz) and headless Chromium (software WebGL) on its page. Each test opens a notebook of its own, so tests do not
depend on each other's kernel; the kernel is shut down when the test ends and the server's whole process group
when the session ends. Screenshots go to a temporary directory (printed at the end, or ``REPVIZ_SCREENSHOTS``).
"""

from __future__ import annotations

import pytest
from labkit import Lab, Notebook
from pagekit import chromium, screenshot_dir


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A started JupyterLab (:class:`labkit.Lab`), answering /api/status; stopped with its kernels at the end, and
    no process of its group may outlive it."""
    server = Lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.wait_ready()
        yield server
    finally:
        leaked = server.stop()
    assert not leaked, f"processes of the JupyterLab server outlived it: {leaked}"


@pytest.fixture(scope="session")
def lab_browser(lab):
    with chromium(1280, 900, motion=True) as driver:  # a snapshot change is tested as an animation
        yield driver


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.failed_call = report.failed
    return report


@pytest.fixture
def notebook(request, lab, lab_browser, lab_shots):
    """``notebook(name, cells) -> Notebook``: a notebook of these code cells written into the server's root and
    opened in the page with its kernel idle; its kernel is shut down when the test ends (the page is saved as
    ``failed-<test>.png`` first if the test failed)."""
    opened = []

    def open_(name: str, cells: list[str]) -> Notebook:
        opened.append(Notebook(lab_browser, lab, name, cells))
        return opened[-1]

    yield open_
    if getattr(request.node, "failed_call", True):
        lab_browser.save_screenshot(str(lab_shots / f"failed-{request.node.name}.png"))
    for nb in opened:
        nb.close()


@pytest.fixture(scope="session")
def lab_shots():
    out = screenshot_dir("repviz-tab-lab-")
    yield out
    print(f"\nscreenshots of the notebook tests: {out}")
