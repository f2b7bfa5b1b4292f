"""A run keeps its colour when runs are added or removed, in the tab and in ``repviz export``: both derive it from
the run's name alone (the network group, the name before the first "/", picks the hue; the whole name a shade of
it), by one rule on each side that agree (issue #41, item 5)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from repviz import export

COLORS_JS = Path(__file__).resolve().parents[1] / "tb_plugin" / "tensorboard_plugin_repviz" / "static" / "colors.js"
NAMES = ["relu/seed0", "relu/seed1", "sigmoid/seed0", "sigmoid/seed1", "tanh", "mlp/deep/seed2", "évian/b", "",
         "cnn/seed98765432109876543210", "relu/seed2"]


def test_a_run_keeps_its_colour_and_style_when_runs_are_added():
    before = export._run_styles(["relu/seed0", "relu/seed1", "sigmoid/seed0"])
    after = export._run_styles(["elu/seed0", "elu/seed1", "relu/seed0", "relu/seed1", "sigmoid/seed0"])
    assert all(after[r][0] == before[r][0] for r in before)  # before: sigmoid/seed0 took the next tab10 colour


def test_the_group_picks_the_hue():
    palette = export._RUN_PALETTE
    for name in ["relu/seed0", "relu/seed1", "relu/x/y"]:
        colour = export.run_colour(name)
        # a shade of relu's hue: the same channel order as its base colour
        base = export.run_colour("relu")
        assert base in palette
        rank = lambda c: sorted(range(3), key=lambda i: int(c[1 + 2 * i:3 + 2 * i], 16))  # noqa: E731
        assert rank(colour) == rank(base), (name, colour, base)
    assert export.run_colour("tanh") in palette  # no group: the base colour itself
    assert len({export.run_colour(f"relu/seed{k}") for k in range(3)}) == 3  # three seeds, three shades


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the tab's colors.js")
def test_the_tab_and_export_give_every_run_the_same_colour():
    script = (f"import {{ runColor }} from {json.dumps(COLORS_JS.as_uri())};"
              f"console.log(JSON.stringify({json.dumps(NAMES)}.map(runColor)));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert json.loads(out) == [export.run_colour(n) for n in NAMES]
