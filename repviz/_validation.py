"""One validation layer for every part of repviz: declarative parameter rules and array checks, one wording.

Parameters are checked against a table of rules in the style of scikit-learn's ``_parameter_constraints``
(:class:`Interval`, :class:`Options`, :data:`BOOLEAN`, ...), and a value that breaks every rule raises::

    The 'perplexity' parameter of TSNE must be a float in the range (0, inf). Got -3 instead.

that is: parameter, owner, rule, the value received, and where useful what to do. Errors that depend on the
data give both numbers ("n_neighbors (50) must be less than n_samples (50) in knn").

Arrays are checked once, at the boundary: :func:`check_array` (dense, finite, 2-D, numeric, converted to the
dtype the numerics want), :func:`check_distance_matrix` (square, non-negative and, where the method needs it,
symmetric within one relative tolerance, :data:`SYMMETRY_RTOL`), :func:`check_n_neighbors` and
:func:`check_n_components` (both numbers in the message), and :func:`rescaled` (data at an extreme scale brought
to one the float32 engines handle, by an exact power of two). Only numpy is imported, so the store, the pipeline,
the capture callback and the TensorBoard plugin can use it without loading numba or scikit-learn.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

#: Largest relative asymmetry max |D - D.T| / max |D| accepted in a distance matrix that must be symmetric
#: (float32 round-off of distances computed in two orders stays far below it).
SYMMETRY_RTOL = 1e-5

#: Data whose spread lies outside [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT] is rescaled by :func:`rescaled`: float32
#: squared distances overflow near a spread of 1e19 and fall below the solvers' absolute floors near 1e-15.
SAFE_EXPONENT = 20

# --- parameter rules ---------------------------------------------------------------------------------------

class Interval:
    """Numbers of ``kind`` (int or float) in a range; ``closed`` in {"left", "right", "both", "neither"}."""

    def __init__(self, kind: type, low=None, high=None, closed: str = "both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def __call__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.kind is int and not isinstance(value, numbers.Integral):
            return False
        if self.low is not None and (value < self.low or (value == self.low and self.closed in ("right", "neither"))):
            return False
        return self.high is None or not (value > self.high
                                         or (value == self.high and self.closed in ("left", "neither")))

    def __str__(self) -> str:
        left = "[" if self.closed in ("left", "both") and self.low is not None else "("
        right = "]" if self.closed in ("right", "both") and self.high is not None else ")"
        low = "-inf" if self.low is None else self.low
        high = "inf" if self.high is None else self.high
        noun = "an int" if self.kind is int else "a float"
        return f"{noun} in the range {left}{low}, {high}{right}"


class Options:
    """One of a fixed set of strings."""

    def __init__(self, *options: str):
        self.options = options

    def __call__(self, value) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return "a str among {" + ", ".join(repr(o) for o in self.options) + "}"


class Rule:
    """Any test with its description, for rules that are neither an interval nor a set of strings."""

    def __init__(self, test: Callable[[Any], bool], text: str):
        self.test, self.text = test, text

    def __call__(self, value) -> bool:
        return self.test(value)

    def __str__(self) -> str:
        return self.text


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


BOOLEAN = Rule(lambda v: isinstance(v, (bool, np.bool_)), "an instance of 'bool'")
NONE = Rule(lambda v: v is None, "None")
INTEGER = Rule(_is_int, "an int")
RANDOM_STATE = Rule(
    lambda v: v is None or (_is_int(v) and 0 <= v < 2**32)
    or isinstance(v, (np.random.RandomState, np.random.Generator)),
    "an int in the range [0, 4294967295], a numpy random generator or None")
ARRAY_LIKE = Rule(lambda v: isinstance(v, (np.ndarray, list, tuple)), "an array-like")


def describe(rules: Iterable[Callable[[Any], bool]]) -> str:
    """The rules as one phrase: "a, b or c"."""
    texts = [str(r) for r in rules]
    return f"{', '.join(texts[:-1])} or {texts[-1]}" if len(texts) > 1 else texts[0]


def param_error(name: str, owner: str, rule: str, value: Any, hint: str = "") -> ValueError:
    """The one wording of a bad parameter: parameter, owner, rule, value received, then ``hint`` if any."""
    return ValueError(f"The {name!r} parameter of {owner} must be {rule}. Got {value!r} instead."
                      + (f" {hint}" if hint else ""))


def check_param(value, rules, name: str, owner: str, hint: str = ""):
    """Return ``value`` if it satisfies one of ``rules``, else raise :func:`param_error`."""
    if not any(r(value) for r in rules):
        raise param_error(name, owner, describe(rules), value, hint)
    return value


def validate_params(params: Mapping[str, Any], constraints: Mapping[str, list], owner: str) -> None:
    """Check every parameter named in ``constraints`` (a scikit-learn-style table) against its rules."""
    for name, rules in constraints.items():
        check_param(params[name], rules, name, owner)


def check_option(value, options: Iterable[str], name: str, owner: str) -> str:
    """``value`` if it is one of the strings ``options``, else the standard error listing them."""
    return check_param(value, [Options(*options)], name, owner)


def choices(items: Iterable[Any]) -> str:
    """``items`` as an error message lists the choices: their reprs, comma-separated, at most 20 then how many in
    all; "none" when there are none."""
    shown = [repr(i) for i in items]
    if not shown:
        return "none"
    return ", ".join(shown[:20]) + (f", ... ({len(shown)} in all)" if len(shown) > 20 else "")


# --- arrays ------------------------------------------------------------------------------------------------

def check_array(X, owner: str, *, min_samples: int = 1, dtype=np.float32, name: str = "X") -> np.ndarray:
    """Dense, finite, 2-D, C-contiguous numeric array, with scikit-learn's wording for bad input.

    ``dtype`` is one dtype to convert to, or a tuple of accepted dtypes (an array of another dtype is
    converted to the first), as in scikit-learn.
    """
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise TypeError("A sparse matrix was passed, but dense data is required. Use X.toarray() to convert "
                        "to a dense numpy array.")
    accepted = tuple(np.dtype(d) for d in (dtype if isinstance(dtype, (tuple, list)) else (dtype,)))
    X = np.asarray(X)
    if np.iscomplexobj(X):
        raise ValueError("Complex data not supported")
    if X.dtype.kind == "O":
        X = X.astype(accepted[0])
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead: {name} with shape {X.shape}. "
                         f"Reshape your data either using array.reshape(-1, 1) if your data has a single "
                         f"feature or array.reshape(1, -1) if it contains a single sample.")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    X = np.ascontiguousarray(X, dtype=X.dtype if X.dtype in accepted else accepted[0])
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required "
                         f"by {owner}.")
    if X.shape[0] < min_samples:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a minimum of "
                         f"{min_samples} is required by {owner}.")
    if not np.isfinite(X).all():
        bad = int(np.count_nonzero(~np.isfinite(X).all(axis=1)))
        raise ValueError(f"Input {name} contains NaN or infinity in {bad} row(s) ({owner} needs finite values); "
                         f"remove or impute them first.")
    return X


def check_n_features(estimator, X: np.ndarray) -> None:
    """``X`` has as many columns as the data the estimator was fitted on."""
    if X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
                         f"{estimator.n_features_in_} features as input.")


def check_distance_matrix(D: np.ndarray, owner: str, *, symmetric: bool = False, precomputed: bool = True,
                          zero_diagonal: bool = False) -> None:
    """A distance matrix must be square and non-negative and, with ``symmetric``, equal to its transpose
    within :data:`SYMMETRY_RTOL` of its largest entry; with ``zero_diagonal``, its diagonal must be zero within
    the same tolerance. ``precomputed``: the matrix came as ``X`` with ``metric="precomputed"`` (the messages say
    so). ``D`` is a finite 2-D array (:func:`check_array`)."""
    where = "With metric='precomputed', " if precomputed else ""
    if D.shape[0] != D.shape[1]:
        raise ValueError(f"{where}{owner} expects a square distance matrix (n, n); got shape {D.shape} (the "
                         f"array must be 2-dimensional and square).")
    if (D < 0).any():
        raise ValueError(f"{where}{owner} expects non-negative distances (all distances should be positive or "
                         f"zero); the smallest entry is {float(D.min())}.")
    if symmetric and D.size:
        asym = float(np.abs(D - D.T).max())
        scale = float(D.max())
        if asym > SYMMETRY_RTOL * max(scale, 1e-30):
            raise ValueError(f"{where}{owner} expects a symmetric distance matrix; max |D - D.T| = {asym:.3g} "
                             f"(max(D) = {scale:.3g}). Array must be symmetric: pass (D + D.T) / 2 if the "
                             f"asymmetry is numerical noise.")
    if zero_diagonal and D.size:
        diag = float(np.abs(np.diagonal(D)).max())
        if diag > SYMMETRY_RTOL * max(float(D.max()), 1e-30):
            raise ValueError(f"{where}{owner} expects a distance matrix with a zero diagonal; the largest diagonal "
                             f"entry is {diag:.3g}. Set it to zero if D holds distances.")


def check_n_neighbors(n_neighbors, n_samples: int, owner: str = "knn") -> int:
    """Validate ``n_neighbors`` against the number of points, with both numbers in the message."""
    check_param(n_neighbors, [Interval(int, 1, None, "left")], "n_neighbors", owner)
    if n_neighbors >= n_samples:
        raise ValueError(f"n_neighbors ({n_neighbors}) must be less than n_samples ({n_samples}) in {owner}; "
                         f"pass a smaller n_neighbors or more points.")
    return int(n_neighbors)


def check_n_components(n_components: int, n_samples: int, owner: str) -> int:
    """An embedding of ``n_samples`` points has fewer than ``n_samples`` dimensions."""
    if n_components >= n_samples:
        raise ValueError(f"n_components ({n_components}) must be less than n_samples ({n_samples}) in {owner}.")
    return int(n_components)


def rescaled(X: np.ndarray, metric: str = "euclidean") -> tuple[np.ndarray, float]:
    """``X / scale`` and ``scale``: the power of two that brings the spread of ``X`` (its largest column range; the
    largest distance for a precomputed matrix) into [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT].

    ``scale`` is 1.0 (and ``X`` is returned as it is) when the spread is already there, when ``X`` is constant and
    for the cosine metric, which ignores scale. Dividing by a power of two is exact in floating point, so a
    scale-invariant method gives the same result at any scale, and one whose output scales with its input
    (Isomap, MDS) multiplies its result by ``scale``.
    """
    if metric == "cosine" or X.size == 0:
        return X, 1.0
    spread = float(np.max(X.max(axis=0).astype(np.float64) - X.min(axis=0)))
    if spread == 0 or 2.0 ** -SAFE_EXPONENT <= spread <= 2.0 ** SAFE_EXPONENT:
        return X, 1.0
    scale = 2.0 ** round(math.log2(spread))
    return (X / X.dtype.type(scale)).astype(X.dtype, copy=False), scale
