"""The plugin's one door into repviz: ``tensorboard_plugin_repviz`` imports ``repviz.service`` and no other repviz
module, and importing the service stays light (no Keras, TensorFlow or numba), as TensorBoard loads it at start-up.

Read from the source with ``ast`` (imports inside functions included), so a new ``from repviz.store import ...`` in
the plugin fails here with the import named.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "tb_plugin" / "tensorboard_plugin_repviz"
SERVICE = "repviz.service"


def repviz_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a repviz module in ``source``; ``from repviz import x`` names
    ``repviz.x``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "repviz":
                found += [(node.lineno, f"repviz.{alias.name}") for alias in node.names]
            elif node.module.startswith("repviz."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names
                      if alias.name == "repviz" or alias.name.startswith("repviz.")]
    return found


def test_the_plugin_imports_only_the_service_from_repviz():
    outside = [f"{path.relative_to(REPO)}:{line} imports {module}"
               for path in sorted(PLUGIN.rglob("*.py"))
               for line, module in repviz_imports(path.read_text()) if module != SERVICE]
    assert not outside, "the plugin reaches repviz through repviz.service only:\n" + "\n".join(outside)


def test_the_check_catches_each_spelling():
    assert repviz_imports("from repviz.store import Run") == [(1, "repviz.store")]
    assert repviz_imports("def f():\n    import repviz.pipeline") == [(2, "repviz.pipeline")]
    assert repviz_imports("from repviz import service, store") == [(1, "repviz.service"), (1, "repviz.store")]
    assert repviz_imports("from . import data\nfrom repviz.service import Run") == [(2, "repviz.service")]


def test_importing_the_service_loads_no_heavy_module():
    code = ("import sys, repviz.service; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('keras', 'tensorflow', 'numba', 'torch', 'jax')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
