"""Every install hint names what the README installs: the checkout (``pip install ".[extra]"``) or the
distribution ``repviz-toolkit``, never the package index's ``repviz``, an unrelated project."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from repviz.version import DISTRIBUTION, EXTRAS, install_hint

REPO = Path(__file__).resolve().parent.parent
#: ``pip install "NAME[extra,...]"`` (quoted or not), NAME possibly "." (the checkout).
_HINT = re.compile(r"""pip install\s+["']?([\w.-]*)\[([\w,\s-]+)\]""")


def _texts() -> dict[str, str]:
    """The package's messages and docstrings, the plugin, the docs and the CI script."""
    paths = [*REPO.glob("repviz/**/*.py"), *REPO.glob("tb_plugin/**/*.py"), *REPO.glob("tb_plugin/**/static/*.js"),
             *REPO.glob("*.md"), *REPO.glob("docs/*.md"), REPO / ".ci" / "run", REPO / "pyproject.toml"]
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in paths if p.is_file()}


def test_no_hint_names_a_package_other_than_the_one_the_readme_installs():
    """Non-regression: messages said pip install "repviz[umap]" and "repviz[export]", which installs the index's
    unrelated repviz."""
    ours = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    elsewhere = []
    for name, text in _texts().items():
        elsewhere += [f"{name}: {m.group(0)}" for m in re.finditer(r"repviz\[", text)]
        for m in _HINT.finditer(text):
            extras = {e.strip() for e in m.group(2).split(",")}
            if extras <= ours and m.group(1) not in (".", DISTRIBUTION):
                elsewhere.append(f"{name}: {m.group(0)}")
    assert elsewhere == []


def test_the_distribution_and_its_extras_are_those_of_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION != "repviz"
    for extra, requirement in EXTRAS.items():
        assert requirement in project["optional-dependencies"][extra]
    assert install_hint("umap") == 'pip install ".[umap]" in the repviz checkout, or pip install "umap-learn>=0.5.5"'
