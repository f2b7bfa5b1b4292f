"""Estimator plumbing shared by the manifold methods: parameters, validation, input checks, memory guard.

Follows scikit-learn's conventions without importing it: ``__init__`` only stores its arguments, a declarative
``_parameter_constraints`` table is checked when ``fit`` runs, ``get_params``/``set_params`` read the
``__init__`` signature, so ``sklearn.base.clone`` and ``parametrize_with_checks`` work on our estimators.
"""

from __future__ import annotations

import inspect
import numbers
import os

import numpy as np


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute is used before ``fit`` (same bases as scikit-learn's)."""


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


class _Described:
    def __init__(self, test, text: str):
        self.test, self.text = test, text

    def __call__(self, value) -> bool:
        return self.test(value)

    def __str__(self) -> str:
        return self.text


BOOLEAN = _Described(lambda v: isinstance(v, (bool, np.bool_)), "an instance of 'bool'")
NONE = _Described(lambda v: v is None, "None")
RANDOM_STATE = _Described(
    lambda v: v is None or (isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v < 2**32)
    or isinstance(v, (np.random.RandomState, np.random.Generator)),
    "an int in the range [0, 4294967295], a numpy random generator or None")
ARRAY_LIKE = _Described(lambda v: isinstance(v, (np.ndarray, list, tuple)), "an array-like")


class Estimator:
    """Base class: parameter handling, validation at fit time and ``fit_transform`` returning ``embedding_``."""

    _parameter_constraints: dict = {}

    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self")

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        valid = self._get_param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"Invalid parameter {key!r} for estimator {type(self).__name__}. "
                                 f"Valid parameters are: {valid!r}.")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not (isinstance(v, type(defaults.get(k))) and _same(v, defaults.get(k)))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def _validate_params(self) -> None:
        for name, constraints in self._parameter_constraints.items():
            value = getattr(self, name)
            if not any(c(value) for c in constraints):
                rule = ", ".join(str(c) for c in constraints[:-1])
                rule = f"{rule} or {constraints[-1]}" if rule else str(constraints[-1])
                raise ValueError(f"The {name!r} parameter of {type(self).__name__} must be {rule}. "
                                 f"Got {value!r} instead.")

    def _check_fitted(self, attribute: str = "embedding_") -> None:
        if not hasattr(self, attribute):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                                 f"appropriate arguments before using this estimator.")

    def fit_transform(self, X, y=None) -> np.ndarray:
        """Fit to ``X`` and return ``embedding_``."""
        return self.fit(X, y).embedding_


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return a is b


def check_array(X, owner: str, *, min_samples: int = 1, dtype=np.float32, name: str = "X") -> np.ndarray:
    """Dense, finite, 2-D C-contiguous array of ``dtype``, with scikit-learn's wording for bad input."""
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise TypeError("A sparse matrix was passed, but dense data is required. Use X.toarray() to convert "
                        "to a dense numpy array.")
    X = np.asarray(X)
    if np.iscomplexobj(X):
        raise ValueError("Complex data not supported")
    if X.dtype.kind == "O":
        X = X.astype(dtype)
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead: {name} with shape {X.shape}. "
                         f"Reshape your data either using array.reshape(-1, 1) if your data has a single "
                         f"feature or array.reshape(1, -1) if it contains a single sample.")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    X = np.ascontiguousarray(X, dtype=dtype)
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required "
                         f"by {owner}.")
    if X.shape[0] < min_samples:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a minimum of "
                         f"{min_samples} is required by {owner}.")
    if not np.isfinite(X).all():
        raise ValueError(f"Input {name} contains NaN or infinity ({owner} needs finite values); remove or "
                         f"impute them first.")
    return X


def check_n_features(estimator, X: np.ndarray) -> None:
    if X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
                         f"{estimator.n_features_in_} features as input.")


def check_precomputed(D: np.ndarray, owner: str) -> None:
    """A precomputed distance matrix must be square and non-negative."""
    if D.shape[0] != D.shape[1]:
        raise ValueError(f"With metric='precomputed', {owner} expects a square distance matrix (n, n); "
                         f"got shape {D.shape}.")
    if (D < 0).any():
        raise ValueError(f"With metric='precomputed', {owner} expects non-negative distances; "
                         f"the smallest entry is {float(D.min())}.")


def rng_from(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    return np.random.default_rng(random_state)


#: Largest dense allocation (bytes) a method makes before refusing; override with REPVIZ_MAX_DENSE_BYTES.
DEFAULT_MAX_DENSE_BYTES = 8 << 30


def check_dense_memory(n_bytes: float, owner: str, what: str, alternative: str) -> None:
    """Refuse a dense allocation larger than the budget, naming what needed it and what to use instead."""
    limit = int(os.environ.get("REPVIZ_MAX_DENSE_BYTES", DEFAULT_MAX_DENSE_BYTES))
    if n_bytes > limit:
        raise MemoryError(f"{owner} would need {n_bytes / 2**30:.1f} GiB for {what}, more than the "
                          f"{limit / 2**30:.1f} GiB budget (environment variable REPVIZ_MAX_DENSE_BYTES). "
                          f"{alternative}")
