"""The package version, in a module of its own so that cache keys can name it without importing the package; and
how the package and its optional extras are installed, said once for every message that tells a user."""

__version__ = "0.1.0"

#: The distribution's name (pyproject.toml's ``[project] name``; the import name is ``repviz``). The package
#: index's ``repviz`` is an unrelated project, so no message may send a user there.
DISTRIBUTION = "repviz-toolkit"

#: What each optional extra of pyproject.toml adds, for the users who add it by hand.
EXTRAS = {"export": "matplotlib>=3.8", "dask": "dask[distributed]>=2024.1", "umap": "umap-learn>=0.5.5",
          "notebook": "anywidget>=0.9"}


def install_hint(extra: str) -> str:
    """How to install the optional ``extra``, as the README installs repviz (from its checkout), or its package
    alone: ``pip install ".[umap]" in the repviz checkout, or pip install "umap-learn>=0.5.5"``."""
    return f'pip install ".[{extra}]" in the repviz checkout, or pip install "{EXTRAS[extra]}"'
