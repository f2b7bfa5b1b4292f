"""Public names whose signature tools cannot read: ``(*args, **kwargs)`` or no signature at all (issue #41).

Walks ``repviz.__all__``, the ``__all__`` of every repviz module and package, and the public classes and functions
defined in the TensorBoard plugin's modules (exception classes aside: they take a message, as Python's own do); for each class or function asks ``inspect.signature`` (what
``help()``, IDE tooltips and a notebook's Shift-Tab show) and prints those that say nothing, then the count.

    python benchmarks/signature_count.py
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tb_plugin")]


def unreadable(obj) -> str | None:
    """Why `obj`'s signature says nothing (None when it names its parameters)."""
    try:
        params = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError) as e:
        return f"no signature ({e})"
    kinds = {p.kind for p in params}
    if params and kinds <= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
        return "(*args, **kwargs)"
    return None


def public(package: str, plugin: bool) -> dict[str, object]:
    """name -> object: the package's and its modules' `__all__` (plugin: the public names they define)."""
    found = {}
    root = importlib.import_module(package)
    modules = [root] + [importlib.import_module(m.name) for m in pkgutil.walk_packages(root.__path__, f"{package}.")
                        if not any(part.startswith("_") for part in m.name.split("."))]
    for module in modules:
        names = getattr(module, "__all__", None)
        if names is None and plugin:
            names = [n for n, v in vars(module).items() if not n.startswith("_")
                     and getattr(v, "__module__", None) == module.__name__]
        for name in names or []:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                found[f"{module.__name__}.{name}"] = obj
    return found


def main() -> None:
    names = {**public("repviz", plugin=False), **public("tensorboard_plugin_repviz", plugin=True)}
    # exceptions take their message as every built-in one does (BaseException's C constructor has no signature)
    errors = {n for n, obj in names.items() if inspect.isclass(obj) and issubclass(obj, BaseException)
              and "__init__" not in vars(obj) and "__new__" not in vars(obj)}
    bad = {name: why for name, obj in sorted(names.items()) if name not in errors and (why := unreadable(obj))}
    for name, why in bad.items():
        print(f"{name}: {why}")
    print(f"{len(bad)} of {len(names) - len(errors)} public classes and functions have a signature that names "
          f"nothing ({len(errors)} exception classes left out: they take one message, as Python's own do)")


if __name__ == "__main__":
    main()
