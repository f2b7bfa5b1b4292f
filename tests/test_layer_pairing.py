"""The tab pairs the layers of two runs of one architecture by position, whatever names Keras gave them.

Keras names layers per process (``re_lu_10`` in one instance, ``re_lu_26`` in another), so pairing by name sends a
run's second layer to another run's first where names coincide by chance. ``static/choice.js``'s ``layerFor``
(which the views use to carry the current layer over to another run) is run here under node on run-index entries.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

CHOICE = Path(__file__).resolve().parents[1] / "tb_plugin" / "tensorboard_plugin_repviz" / "static" / "choice.js"


def _run(names, classes=("Dense", "ReLU", "Dense"), widths=(8, 8, 2)):
    return {"layers": [{"name": n, "class": c, "stored_shape": [100, w]} for n, c, w in zip(names, classes, widths)]}


def _layer_for(tmp_path, run, from_run, name):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is needed to run the tab's choice.js")
    shutil.copy(CHOICE, tmp_path / "choice.mjs")
    script = tmp_path / "main.mjs"
    script.write_text(f"import {{ layerFor }} from './choice.mjs';\n"
                      f"console.log(JSON.stringify(layerFor({json.dumps(run)}, {json.dumps(from_run)}, "
                      f"{json.dumps(name)})));\n")
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("name, want", [("dense_1", "dense_2"), ("re_lu_10", "re_lu_26"), ("dense_2", "dense_3")])
def test_one_architecture_named_apart_pairs_by_position(tmp_path, name, want):
    """Before: 'dense_2' (third layer of a) went to 'dense_2' (first layer of b), the name both happen to hold."""
    a = _run(["dense_1", "re_lu_10", "dense_2"])
    b = _run(["dense_2", "re_lu_26", "dense_3"])
    assert _layer_for(tmp_path, b, a, name) == want


def test_other_architectures_pair_by_name_then_depth(tmp_path):
    a = _run(["dense_1", "re_lu_10", "dense_2"])
    other = _run(["conv", "dense_1", "pool", "out"], ("Conv2D", "Dense", "MaxPooling2D", "Dense"), (64, 8, 16, 2))
    assert _layer_for(tmp_path, other, a, "dense_1") == "dense_1"  # the same name
    assert _layer_for(tmp_path, other, a, "dense_2") == "out"  # the same relative depth
