"""The import structure of docs/ARCHITECTURE.md: floors, no cycles, no private names across modules.

Read from the source with ``ast`` (imports inside functions included: a lazy import still ties two modules), so a
module that imports back up a floor, a cycle, or a private name borrowed from another module fails here with the
offending import named.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"repviz": REPO / "repviz", "tensorboard_plugin_repviz": REPO / "tb_plugin" / "tensorboard_plugin_repviz"}

# The floors of docs/ARCHITECTURE.md, lowest first: a module may import modules of its own floor or below. The
# first pattern that matches a module's name gives its floor ("pkg.*" matches the package and everything in it).
FLOORS = [
    ("foundations", ["repviz.version", "repviz._validation", "repviz._kernels", "repviz._rows", "repviz.progress",
                     "repviz.workers", "repviz.store", "repviz.metadata", "repviz.datasets", "repviz.align", "repviz.chief",
                     "repviz.networks", "repviz.subsets", "repviz.meta.options", "repviz.similarity.options"]),
    ("numerics", ["repviz.neighbors", "repviz.metrics", "repviz.manifold.*", "repviz.density",
                  "repviz.neighbor_change", "repviz._reduction", "repviz.narrow", "repviz.meta._kernels",
                  "repviz.meta.vectors",
                  "repviz.similarity.measures"]),
    ("registry and executors", ["repviz.methods", "repviz.executors"]),
    ("work on a log directory", ["repviz.chains", "repviz.planning", "repviz.continuation", "repviz.placement",
                                 "repviz.meta.*",
                                 "repviz.similarity.*"]),
    ("pipeline and cluster", ["repviz.pipeline", "repviz.distributed"]),
    ("applications", ["repviz.capture", "repviz.follow", "repviz.warmup", "repviz.export", "repviz.demo",
                      "repviz.similarity.figures", "repviz.service"]),
    ("entry points", ["repviz.cli", "repviz"]),
    ("TensorBoard plugin", ["tensorboard_plugin_repviz.*"]),
]

# Third-party packages a module must not import, even lazily (the reason is in docs/ARCHITECTURE.md).
FORBIDDEN = {
    "repviz.store": {"keras", "tensorflow"},
    "repviz.capture": {"dask", "distributed"},
    "repviz.service": {"keras", "tensorflow", "numba"},
    "tensorboard_plugin_repviz.*": {"keras", "tensorflow", "repviz.capture"},
}
# Only these may import Dask.
DASK = {"repviz.distributed"}


def _modules() -> dict[str, Path]:
    found = {}
    for root in PACKAGES.values():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _matches(module: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return module == pattern[:-2] or module.startswith(pattern[:-1])
    return module == pattern


def floor_of(module: str) -> int:
    for i, (_, patterns) in enumerate(FLOORS):
        if any(_matches(module, p) for p in patterns):
            return i
    raise LookupError(f"{module} is on no floor of tests/test_layering.py's FLOORS; add it where it belongs "
                      f"(and to docs/ARCHITECTURE.md)")


class Import:
    """One imported name: the module it comes from, the name (None for ``import x``), and where."""

    def __init__(self, source: str, target: str, name: str | None, line: int):
        self.source, self.target, self.name, self.line = source, target, name, line

    def __repr__(self) -> str:
        what = self.target if self.name is None else f"{self.name} from {self.target}"
        return f"{self.source}:{self.line} imports {what}"

    @property
    def module(self) -> str:
        """The module this import ties ``source`` to (a submodule when the name is one)."""
        if self.name is not None and f"{self.target}.{self.name}" in MODULES:
            return f"{self.target}.{self.name}"
        return self.target


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            found += [Import(module, target, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [Import(module, alias.name, None, node.lineno) for alias in node.names]
    return found


def internal(imports: list[Import]) -> list[Import]:
    return [i for i in imports if i.module in MODULES and i.module != i.source]


ALL_IMPORTS = {m: imports_of(m) for m in MODULES}


def upward(imports: dict[str, list[Import]]) -> list[str]:
    """Imports that run up a floor."""
    return [f"{i} (floor '{FLOORS[floor_of(i.source)][0]}' -> '{FLOORS[floor_of(i.module)][0]}')"
            for found in imports.values() for i in internal(found) if floor_of(i.module) > floor_of(i.source)]


def cycle(imports: dict[str, list[Import]]) -> list[str]:
    """One import cycle (the modules along it), or [] if there is none."""
    # a package's __init__ importing its own submodules is how a package exports them, not a cycle
    graph = {m: sorted({i.module for i in internal(found) if not i.module.startswith(m + ".")})
             for m, found in imports.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for t in graph.get(m, []):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def borrowed(imports: dict[str, list[Import]]) -> list[str]:
    """Private names imported from another module (a private module, ``from . import _kernels``, is fine)."""
    return [repr(i) for found in imports.values() for i in internal(found)
            if i.name is not None and i.name.startswith("_") and not i.name.startswith("__") and i.module == i.target]


def banned(imports: dict[str, list[Import]]) -> list[str]:
    """Imports of packages a module must keep out (:data:`FORBIDDEN`, Dask outside :data:`DASK`)."""
    found = []
    for module, its in imports.items():
        names = set().union(*(names for pattern, names in FORBIDDEN.items() if _matches(module, pattern)))
        if module not in DASK:
            names |= {"dask", "distributed"}
        found += [repr(i) for i in its if any(i.module == b or i.module.startswith(b + ".") for b in names)]
    return found


def test_every_module_is_on_a_floor():
    for module in MODULES:
        floor_of(module)


@pytest.mark.parametrize("check", [upward, cycle, borrowed, banned])
def test_the_tree_keeps_the_rule(check):
    assert not (found := check(ALL_IMPORTS)), "\n".join(found)


def test_each_rule_catches_what_it_names():
    """Synthetic imports that break each rule are found (so a passing tree means something)."""
    def imp(source, target, name=None):
        return Import(source, target, name, 1)

    assert upward({"repviz.store": [imp("repviz.store", "repviz.pipeline", "embed_logdir")]})
    assert cycle({"repviz.chains": [imp("repviz.chains", "repviz.planning", "resume")],
                  "repviz.planning": [imp("repviz.planning", "repviz.chains", "run_chain")]}) == [
        "repviz.chains", "repviz.planning", "repviz.chains"]
    assert borrowed({"repviz.metrics": [imp("repviz.metrics", "repviz.neighbors", "_private")]})
    assert not borrowed({"repviz.meta.bank": [imp("repviz.meta.bank", "repviz.meta", "_kernels")]})
    assert banned({"repviz.pipeline": [imp("repviz.pipeline", "dask.distributed", "Client")]})
    assert banned({"tensorboard_plugin_repviz.plugin": [imp("tensorboard_plugin_repviz.plugin", "repviz.capture",
                                                            "ActivationLogger")]})
    assert not banned({"repviz.distributed": [imp("repviz.distributed", "distributed", None)]})
