"""The vendored regl-scatterplot bundle is exactly what tb_plugin/frontend/build.mjs makes from the lock file.

Rebuilds in a temporary directory with ``npm ci`` (registry needed; about 10-30 s) and compares bytes, so a hand
edit of the vendored file, or a lock file changed without rebuilding, fails here.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRONTEND = ROOT / "tb_plugin" / "frontend"
VENDOR = ROOT / "tb_plugin" / "tensorboard_plugin_repviz" / "static" / "vendor"
OUTPUTS = ("regl-scatterplot.js", "LICENSES.txt")
_OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network", re.IGNORECASE)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm and node are needed to rebuild the vendored bundle")
    work = tmp_path_factory.mktemp("frontend")
    for name in ("package.json", "package-lock.json", "build.mjs"):
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
    subprocess.run([node, "build.mjs", str(out)], cwd=work, check=True, capture_output=True, timeout=120)
    return out


@pytest.mark.parametrize("name", OUTPUTS)
def test_vendored_file_is_reproduced_byte_for_byte(rebuilt, name):
    assert (rebuilt / name).read_bytes() == (VENDOR / name).read_bytes(), (
        f"static/vendor/{name} differs from a fresh build: run `npm ci && node build.mjs` in tb_plugin/frontend")


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
