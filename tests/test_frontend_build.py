"""The vendored regl-scatterplot bundle and the notebook widget's page bundle are exactly what
tb_plugin/frontend/build.mjs makes from the lock file and the tab's sources.

Rebuilds in a temporary directory with ``npm ci`` (registry needed; about 10-30 s) and compares bytes, so a hand
edit of a bundle, or a lock file changed without rebuilding, fails here. Without rebuilding, the page bundle's
banner names the checksum of the sources it was made from: a tab module edited without rebuilding fails at once.
"""

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRONTEND = ROOT / "tb_plugin" / "frontend"
STATIC = ROOT / "tb_plugin" / "tensorboard_plugin_repviz" / "static"
VENDOR = STATIC / "vendor"
NOTEBOOK = ROOT / "tb_plugin" / "tensorboard_plugin_repviz" / "notebook"
OUTPUTS = ("regl-scatterplot.js", "LICENSES.txt")
REBUILD = "run `npm ci && node build.mjs` in tb_plugin/frontend"
_OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network", re.IGNORECASE)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm and node are needed to rebuild the vendored bundle")
    work = tmp_path_factory.mktemp("frontend")
    for name in ("package.json", "package-lock.json", "build.mjs", "page.js"):
        shutil.copy(FRONTEND / name, work / name)
    try:
        install = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=work,
                                 capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip("npm ci took over 4 minutes: the registry is unreachable or too slow")
    if install.returncode != 0:
        if _OFFLINE.search(install.stderr):
            pytest.skip(f"the npm registry is unreachable: {install.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"npm ci failed:\n{install.stderr}")
    out = work / "out"
    subprocess.run([node, "build.mjs", str(out), str(out / "notebook")], cwd=work, check=True, capture_output=True,
                   timeout=120, env={**os.environ, "REPVIZ_STATIC": str(STATIC)})
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", OUTPUTS)
def test_vendored_file_is_reproduced_byte_for_byte(rebuilt, name):
    assert (rebuilt / name).read_bytes() == (VENDOR / name).read_bytes(), (
        f"static/vendor/{name} differs from a fresh build: {REBUILD}")


@pytest.mark.slow
def test_the_widget_page_is_reproduced_byte_for_byte(rebuilt):
    assert (rebuilt / "notebook" / "page.js").read_bytes() == (NOTEBOOK / "page.js").read_bytes(), (
        f"notebook/page.js differs from a fresh build: {REBUILD}")


def _sources_checksum() -> str:
    """The checksum build.mjs writes in the page's banner: each file under static/ (path, NUL, bytes, NUL, in path
    order), then page.js."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.rglob("*"), key=lambda p: p.relative_to(STATIC).as_posix()):
        if path.is_file():
            digest.update(path.relative_to(STATIC).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(b"page.js\0" + (FRONTEND / "page.js").read_bytes())
    return digest.hexdigest()


def test_the_widget_page_was_built_from_the_tab_as_it_is():
    banner = (NOTEBOOK / "page.js").read_text(encoding="utf-8").splitlines()[:3]
    assert banner[2] == f"// sources sha256 {_sources_checksum()}", (
        f"the tab's modules (static/) or frontend/page.js changed since notebook/page.js was built: {REBUILD}")


def test_the_widget_page_carries_the_licences_of_what_it_bundles():
    page = (NOTEBOOK / "page.js").read_text(encoding="utf-8")
    packages = re.findall(r"([@\w./-]+)@\d+\.\d+\.\d+", page.splitlines()[1])
    assert "regl-scatterplot" in packages
    for package in packages:
        assert re.search(rf"^// {re.escape(package)} \d+\.\d+\.\d+ \(\w+", page, re.MULTILINE), package


def test_licences_cover_every_bundled_package():
    bundle_head = (VENDOR / "regl-scatterplot.js").read_text(encoding="utf-8").splitlines()[1]
    packages = re.findall(r"([@\w./-]+)@\d+\.\d+\.\d+", bundle_head)
    licences = (VENDOR / "LICENSES.txt").read_text(encoding="utf-8")
    assert "regl-scatterplot" in packages and "regl" in packages
    for package in packages:
        assert re.search(rf"^{re.escape(package)} \d+\.\d+\.\d+ \(\w+", licences, re.MULTILINE), package


def test_bundle_never_starts_blob_workers_at_our_settings():
    # The page sets spatialIndexUseWorker: false and never showPointConnections; both worker paths need blob:
    # URLs that TensorBoard's CSP blocks. Guard the page's side of it.
    static = VENDOR.parent
    scatter = (static / "scatter.js").read_text(encoding="utf-8")
    assert "spatialIndexUseWorker: false" in scatter
    for module in static.glob("*.js"):
        assert "showPointConnection" not in module.read_text(encoding="utf-8"), module.name
