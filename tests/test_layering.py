"""The import structure of docs/ARCHITECTURE.md: floors, no cycles, no private names across modules.

Read from the source with ``ast``, so a module that imports back up a floor, a cycle, a private name borrowed from
another module, or a package it must keep out fails here with the offending line named. An import is any way one
module reaches another: ``import`` statements (inside functions too: a lazy import still ties two modules), a
``"package.module:attr"`` string that a registry loads later, a package's lazy ``_EXPORTS`` table, and a private
name read through a module's attribute (``store._choices``). A call of ``importlib.import_module`` or
``__import__`` whose target this file cannot read is refused unless :data:`DYNAMIC` names the module and why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"repviz": REPO / "repviz", "tensorboard_plugin_repviz": REPO / "tb_plugin" / "tensorboard_plugin_repviz"}

# The floors of docs/ARCHITECTURE.md, lowest first: a module may import modules of its own floor or below. The
# most specific pattern that matches a module's name gives its floor: an exact name before "pkg.*", and a longer
# "pkg.*" before a shorter one ("pkg.*" matches the package and everything in it).
FLOORS = [
    ("foundations", ["repviz.version", "repviz._validation", "repviz._jit", "repviz._kernels", "repviz._rows",
                     "repviz.progress", "repviz.workers", "repviz.store.*", "repviz.metadata", "repviz.targets", "repviz.datasets",
                     "repviz.align", "repviz.chief", "repviz.networks", "repviz.subsets", "repviz.meta.options", "repviz.similarity.options"]),
    ("numerics", ["repviz.neighbors", "repviz.metrics", "repviz.manifold.*", "repviz.density",
                  "repviz.neighbor_change", "repviz._reduction", "repviz._sketch_kernel", "repviz.narrow", "repviz.meta._kernels",
                  "repviz.meta.vectors",
                  "repviz.similarity.measures"]),
    ("registry and executors", ["repviz.methods", "repviz.executors", "repviz.similarity.registry"]),
    ("work on a log directory", ["repviz.chains", "repviz.planning", "repviz.placement",
                                 "repviz.meta.*",
                                 "repviz.similarity.*"]),
    ("pipeline and cluster", ["repviz.pipeline", "repviz.distributed"]),
    ("applications", ["repviz.capture.*", "repviz.follow", "repviz.warmup", "repviz.export", "repviz.demo",
                      "repviz.similarity.figures", "repviz.service"]),
    ("entry points", ["repviz.cli"]),
    ("TensorBoard plugin", ["tensorboard_plugin_repviz.*"]),
    # the package's face re-exports lazily from every floor, the notebook widget (on the plugin's floor) included
    ("package API", ["repviz"]),
]

# Third-party packages a module must not import, even lazily (the reason is in docs/ARCHITECTURE.md).
FORBIDDEN = {
    "repviz.store.*": {"keras", "tensorflow"},
    "repviz.capture.*": {"dask", "distributed"},
    "repviz.service": {"keras", "tensorflow", "numba"},
    "tensorboard_plugin_repviz.*": {"keras", "tensorflow", "repviz.capture"},
}
# Only these may import Dask.
DASK = {"repviz.distributed"}
# Only these may import Keras or TensorFlow (docs/ARCHITECTURE.md): capture, the datasets Keras users load, the
# showcase's networks and the autoencoder estimator, which trains a Keras model.
KERAS = {"repviz.capture", "repviz.capture.*", "repviz.datasets", "repviz.networks", "repviz.manifold.autoencoder"}
# Modules that call importlib.import_module with a target computed at run time, and where this file reads it.
DYNAMIC = {"repviz.methods": "loads the 'package.module:attr' targets of its registrations, read here as imports "
                           "of the module whose string names them"}


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


def _specificity(pattern: str) -> tuple[int, int]:
    """An exact name is more specific than any "pkg.*"; a longer "pkg.*" more than a shorter one."""
    return (0 if pattern.endswith(".*") else 1, len(pattern))


def floor_of(module: str) -> int:
    matched = [(_specificity(p), i) for i, (_, patterns) in enumerate(FLOORS) for p in patterns if _matches(module, p)]
    if not matched:
        raise LookupError(f"{module} is on no floor of tests/test_layering.py's FLOORS; add it where it belongs "
                          f"(and to docs/ARCHITECTURE.md)")
    return max(matched)[1]


class Import:
    """One way ``source`` reaches another module: the module, the name taken (None for ``import x``), and where."""

    def __init__(self, source: str, target: str, name: str | None, line: int, how: str = "imports"):
        self.source, self.target, self.name, self.line, self.how = source, target, name, line, how

    def __repr__(self) -> str:
        what = self.target if self.name is None else f"{self.name} from {self.target}"
        return f"{self.source}:{self.line} {self.how} {what}"

    @property
    def module(self) -> str:
        """The module this import ties ``source`` to (a submodule when the name is one)."""
        if self.name is not None and f"{self.target}.{self.name}" in MODULES:
            return f"{self.target}.{self.name}"
        return self.target


# "package.module:attr", as a registry spells what it loads later (the module part must name a package of ours)
_TARGET = re.compile(r"((?:" + "|".join(PACKAGES) + r")(?:\.\w+)*):(\w*)")
_DYNAMIC_CALLS = {"import_module", "__import__"}


def _string_target(node: ast.AST, inside_fstring: set[int]) -> tuple[str, str] | None:
    """(module, attr) of a "package.module:attr" string, or of an f-string that starts "package.module:"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstring:
        found = _TARGET.fullmatch(node.value)
        return (found.group(1), found.group(2)) if found and found.group(2) else None
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        found = _TARGET.fullmatch(str(node.values[0].value))
        return (found.group(1), found.group(2)) if found else None
    return None


def _lazy_exports(tree: ast.Module) -> list[tuple[str, int]]:
    """The submodules of a package's lazy ``_EXPORTS = {name: submodule}`` table, with the table's line."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "_EXPORTS" and isinstance(node.value, ast.Dict)):
            return [(v.value, node.lineno) for v in node.value.values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def _called_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _parse(module: str, source: str | None = None) -> tuple[ast.Module, str]:
    path = MODULES.get(module)
    text = source if source is not None else path.read_text()
    package = module if (path is not None and path.name == "__init__.py") else module.rpartition(".")[0]
    return ast.parse(text, str(path or module)), package


def imports_of(module: str, source: str | None = None) -> list[Import]:
    """Every way ``module`` reaches another (``source`` stands in for its file, for the rule tests)."""
    tree, package = _parse(module, source)
    inside_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            found += [Import(module, target, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [Import(module, alias.name, None, node.lineno) for alias in node.names]
        elif (target := _string_target(node, inside_fstring)) is not None:
            name, attr = target
            found.append(Import(module, name, attr or None, node.lineno, "loads by string"))
        elif (isinstance(node, ast.Call) and _called_name(node) in _DYNAMIC_CALLS and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            name = node.args[0].value
            if name.startswith("."):
                name = f"{package}{name}" if name != "." else package
            found.append(Import(module, name, None, node.lineno, "loads by string"))
    found += [Import(module, package, sub, line, "exports lazily") for sub, line in _lazy_exports(tree)]
    return found


def unseen_loads(module: str, source: str | None = None) -> list[str]:
    """Calls of import_module/__import__ whose target this file cannot read (nor the module's lazy table)."""
    tree, _ = _parse(module, source)
    lazy = bool(_lazy_exports(tree))
    return [f"{module}:{node.lineno} loads a module named at run time ({_called_name(node)}); spell the target as "
            f"a constant or a 'package.module:attr' string, or name the module in DYNAMIC"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _called_name(node) in _DYNAMIC_CALLS
            and not (node.args and isinstance(node.args[0], ast.Constant)) and not lazy and module not in DYNAMIC]


def private_attributes(module: str, source: str | None = None) -> list[str]:
    """Private names read through another module's attribute: ``from repviz import store; store._choices()``."""
    tree, _ = _parse(module, source)
    bound = {}  # local name -> the module of ours it is bound to
    for i in imports_of(module, source):
        if i.how != "imports":
            continue
        if i.name is None:
            if i.module in MODULES:
                bound[i.target.partition(".")[0]] = i.target.partition(".")[0]
        elif i.module in MODULES and i.module != i.target:
            bound[i.name] = i.module
    aliases = {}
    for node in ast.walk(tree):
        for alias in getattr(node, "names", []) if isinstance(node, (ast.Import, ast.ImportFrom)) else []:
            if alias.asname:
                aliases[alias.asname] = bound.get(alias.name, alias.name)
    bound.update({k: v for k, v in aliases.items() if v in MODULES})

    def dotted(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return bound.get(node.id)
        if isinstance(node, ast.Attribute) and (base := dotted(node.value)) is not None:
            return f"{base}.{node.attr}" if f"{base}.{node.attr}" in MODULES else None
        return None

    return [f"{module}:{node.lineno} reads {node.attr} of {owner}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
            and (owner := dotted(node.value)) is not None and owner != module]


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
    """Imports of packages a module must keep out (:data:`FORBIDDEN`, Dask outside :data:`DASK`, Keras and
    TensorFlow outside :data:`KERAS`)."""
    found = []
    for module, its in imports.items():
        names = set().union(*(names for pattern, names in FORBIDDEN.items() if _matches(module, pattern)))
        if module not in DASK:
            names |= {"dask", "distributed"}
        if not any(_matches(module, pattern) for pattern in KERAS):
            names |= {"keras", "tensorflow"}
        found += [repr(i) for i in its if any(i.module == b or i.module.startswith(b + ".") for b in names)]
    return found


def test_every_module_is_on_a_floor():
    for module in MODULES:
        floor_of(module)


@pytest.mark.parametrize("check", [upward, cycle, borrowed, banned])
def test_the_tree_keeps_the_rule(check):
    assert not (found := check(ALL_IMPORTS)), "\n".join(found)


def test_no_private_name_is_read_through_a_module():
    assert not (found := [f for m in MODULES for f in private_attributes(m)]), "\n".join(found)


def test_every_module_loaded_by_name_is_seen():
    assert not (found := [f for m in MODULES for f in unseen_loads(m)]), "\n".join(found)


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


def test_a_private_name_read_through_an_attribute_is_caught():
    """The first former blind spot: ``store._choices(...)`` borrowed a private name without importing it."""
    for source in ("from repviz import store\nstore._choices([])\n",
                   "import repviz.store as s\ns._choices([])\n",
                   "import repviz.store\nrepviz.store._choices([])\n"):
        assert private_attributes("repviz.pipeline", source) == [
            "repviz.pipeline:2 reads _choices of repviz.store"], source
    assert not private_attributes("repviz.pipeline", "from repviz import store\nstore.__name__, store.open_run\n")


def test_a_module_loaded_by_a_string_is_an_import():
    """The second former blind spot: modules loaded through importlib or a registry's "module:attr" string."""
    registry = 'register_method("x", "repviz.cli:main")\nregister_method("y", f"repviz.pipeline:{name}")\n'
    found = imports_of("repviz.store", registry)
    assert [(i.module, i.how) for i in found] == [("repviz.cli", "loads by string"),
                                                  ("repviz.pipeline", "loads by string")]
    assert not imports_of("repviz.store", 'print(f"repviz: using {name}")\nprint("repviz: done")\n')
    assert upward({"repviz.store": found})
    lazy = '_EXPORTS = {"f": "cli"}\n'
    assert [i.module for i in imports_of("repviz", lazy)] == ["repviz.cli"]
    constant = 'import importlib\nimportlib.import_module("repviz.cli")\n'
    assert upward({"repviz.store": imports_of("repviz.store", constant)})
    computed = 'import importlib\nname = "repviz.cli"\nimportlib.import_module(name)\n'
    assert unseen_loads("repviz.store", computed)
    assert not unseen_loads("repviz.methods", computed)


def test_a_module_takes_its_most_specific_floor():
    """The third former blind spot: "repviz.similarity.*" matched before "repviz.similarity.figures", so the
    figures module sat on the floor below the one the doc gives it."""
    assert FLOORS[floor_of("repviz.similarity.figures")][0] == "applications"
    assert FLOORS[floor_of("repviz.similarity.options")][0] == "foundations"
    assert FLOORS[floor_of("repviz.meta.vectors")][0] == "numerics"
    assert FLOORS[floor_of("repviz.meta.sources")][0] == "work on a log directory"


def test_keras_stays_in_its_modules():
    """Only the modules in KERAS may import Keras or TensorFlow, even lazily."""
    assert banned({"repviz.export": [imp_ for imp_ in imports_of("repviz.export", "def f():\n    import keras\n")]})
    assert banned({"repviz.metadata": imports_of("repviz.metadata", "from tensorflow import constant\n")})
    assert not banned({"repviz.datasets": imports_of("repviz.datasets", "import keras\n")})
