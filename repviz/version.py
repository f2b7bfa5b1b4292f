"""The package version, in a module of its own so that cache keys can name it without importing the package."""

__version__ = "0.1.0"
