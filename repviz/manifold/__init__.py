"""Dimensionality-reduction methods with scikit-learn's estimator conventions."""

from .mds import classical_mds

__all__ = ["classical_mds"]
