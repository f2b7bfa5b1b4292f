"""examples/notebook.ipynb runs headless from top to bottom (nbclient, a real kernel, no browser) in a temporary
directory, offline: the digits ship with repviz."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

# looked up, not imported: only the worker that runs the notebook pays for the imports
_MISSING = [name for name in ("nbclient", "nbformat", "anywidget") if importlib.util.find_spec(name) is None]
if _MISSING:
    pytest.skip(f"the example notebook test needs {', '.join(_MISSING)} (pip install '.[test]')",
                allow_module_level=True)
pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
REPO = NOTEBOOK.parents[1]


def test_example_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in [str(REPO), str(REPO / "tb_plugin"), os.environ.get("PYTHONPATH")] if p))
    monkeypatch.setenv("KERAS_BACKEND", os.environ.get("KERAS_BACKEND", "tensorflow"))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no history written into the home directory
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = {i: "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
               for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    text = "\n".join(outputs.values())
    left = next((line for line in text.splitlines() if line.startswith("run ")), None)
    assert left is not None and re.fullmatch(r"run 'mlp', layer 'hidden2', embedding 'pca-\w+', step 5", left), left
    assert "probe digits are misclassified" in text
    assert "20 selected; labels [0, 0, 0, 20, 0, 0, 0, 0, 0, 0]" in text
    html = tmp_path / "mlp-hidden2.html"
    assert html.stat().st_size > 100_000 and b'id="repviz-data"' in html.read_bytes()
    assert any(o.get("data", {}).get("application/vnd.jupyter.widget-view+json") for c in nb.cells
               if c.cell_type == "code" for o in c.outputs), "the widget was not displayed"
