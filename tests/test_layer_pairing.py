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


def _call(tmp_path, function, *args):
    """choice.js's `function` called under node on JSON arguments; its result."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is needed to run the tab's choice.js")
    shutil.copy(CHOICE, tmp_path / "choice.mjs")
    script = tmp_path / "main.mjs"
    script.write_text(f"import {{ {function} }} from './choice.mjs';\n"
                      f"console.log(JSON.stringify({function}({', '.join(json.dumps(a) for a in args)})));\n")
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def _layer_for(tmp_path, run, from_run, name):
    return _call(tmp_path, "layerFor", run, from_run, name)


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


def test_a_run_with_fewer_layers_shows_each_layer_once_beside_another_architecture(tmp_path):
    """The Grid's layers × runs: a 2-layer MLP beside a 4-layer CNN's rows. Before, the MLP's layers filled all
    four rows (each twice, paired by depth without a word); now each shows once, said to be paired by depth, and
    the rows whose layer is already shown above say so (gridview.js)."""
    cnn = _run(["conv", "pool", "dense", "out"], ("Conv2D", "MaxPooling2D", "Dense", "Dense"), (64, 16, 8, 2))
    mlp = _run(["hidden", "logits"], ("Dense", "Dense"), (8, 2))
    pairs = _call(tmp_path, "layersAcross", mlp, cnn, ["conv", "pool", "dense", "out"])
    assert pairs == [{"layer": "hidden", "how": "depth"}, {"layer": "hidden", "how": "above"},
                     {"layer": "logits", "how": "depth"}, {"layer": "logits", "how": "above"}]
    twin = _run(["dense_9", "re_lu_3", "dense_10"])  # one architecture named apart: every layer, by position
    assert _call(tmp_path, "layersAcross", twin, _run(["dense_1", "re_lu_10", "dense_2"]),
                 ["dense_1", "re_lu_10", "dense_2"]) == [{"layer": n, "how": "same"} for n in ("dense_9", "re_lu_3", "dense_10")]
