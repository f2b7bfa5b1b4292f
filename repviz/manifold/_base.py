"""Estimator plumbing shared by the manifold methods: parameters, validation at fit time, tags, output
containers, memory guard.

Follows scikit-learn's conventions without importing it: ``__init__`` only stores its arguments, a declarative
``_parameter_constraints`` table is checked when ``fit`` runs, ``get_params``/``set_params`` read the
``__init__`` signature, so ``sklearn.base.clone`` and ``parametrize_with_checks`` work on our estimators.
``__sklearn_tags__`` returns scikit-learn's ``Tags`` when scikit-learn is importable (its tools, such as
``check_is_fitted``, read them) and a namespace with the same fields otherwise. ``fit`` records
``feature_names_in_`` from a DataFrame's columns; ``fit_transform`` and ``transform`` return a pandas or polars
DataFrame when ``set_output(transform=...)`` or scikit-learn's ``config_context(transform_output=...)`` asks
(the configuration is read only when scikit-learn is already imported: it cannot be set otherwise).
The rules and the array checks themselves live in :mod:`repviz._validation`.

Dtypes follow scikit-learn's ``preserves_dtype`` contract. A class with ``_float64_numerics`` computes in
float64 when a call's output is float64 (:meth:`Estimator._numerics_dtype`); the others compute in float32. Where
a user's call leaves the estimator its output (and, after a fit, ``embedding_`` and the other public float
arrays) is cast to the input's dtype if the class preserves it, else to the first dtype it lists
(``_preserves_dtype``); widening float32 results to float64 is exact.
Calls an estimator makes inside another wrapped call (its own ``transform`` from ``fit``, a PCA inside a force
layout) are not cast: repviz's own code sees the float32 results it always had.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from .._validation import check_n_features, validate_params

_OUTPUTS = ("default", "pandas", "polars")
#: True while a wrapped fit/transform runs: calls made inside it are not at the user's boundary.
_INSIDE = contextvars.ContextVar("repviz_estimator_inside", default=False)


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute is used before ``fit`` (same bases as scikit-learn's)."""


class Estimator:
    """Base class: parameter handling, validation at fit time, tags, feature names, output containers and
    ``fit_transform`` returning ``embedding_``."""

    _parameter_constraints: dict = {}
    #: Whether ``fit`` takes scipy sparse input (the tags say so).
    _accepts_sparse = False
    #: Input dtypes whose outputs keep them (scikit-learn's ``preserves_dtype`` tag); any other input dtype gives
    #: the first. Outputs are cast at the boundary (module docstring).
    _preserves_dtype: tuple[str, ...] = ("float64", "float32")
    #: Whether a float64 output is computed in float64 (scikit-learn's precision; n × n arrays take twice the
    #: memory) rather than in float32 and widened.
    _float64_numerics = False

    def __init_subclass__(cls, **kwargs):
        """Wrap the ``fit``, ``transform``, ``fit_transform`` and ``inverse_transform`` a subclass defines
        (feature names, output container, dtype)."""
        super().__init_subclass__(**kwargs)
        for name, wrap in (("fit", _recording_feature_names), ("transform", _wrapped_output),
                           ("fit_transform", _wrapped_output), ("inverse_transform", _dtype_boundary)):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_repviz_wrapped", False):
                setattr(cls, name, wrap(method))

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
        validate_params(vars(self), self._parameter_constraints, type(self).__name__)

    def _check_fitted(self, attribute: str = "embedding_") -> None:
        if not hasattr(self, attribute):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                                 f"appropriate arguments before using this estimator.")

    def fit_transform(self, X, y=None, **fit_params) -> np.ndarray:
        """Fit to ``X`` and return ``embedding_`` (``fit_params``, e.g. t-SNE's ``progress``, go to ``fit``)."""
        return self.fit(X, y, **fit_params).embedding_

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "embedding_") or hasattr(self, "n_features_in_")

    def _output_dtype(self, X) -> np.dtype:
        """The dtype of what a call on ``X`` returns: X's if the class preserves it, else the first preserved."""
        dtype = getattr(X, "dtype", None)
        if dtype is None and hasattr(X, "dtypes"):  # a DataFrame: its columns' common numpy dtype, if any
            try:
                dtype = np.result_type(*X.dtypes)
            except (TypeError, ValueError):
                dtype = None
        names = self._preserves_dtype
        return np.dtype(dtype.name if dtype is not None and dtype.name in names else names[0])

    def _numerics_dtype(self, X) -> np.dtype:
        """The dtype to compute in for input ``X``: float64 if the class has ``_float64_numerics`` and the output
        is float64, else float32 (float32 input always gives float32 numerics)."""
        wide = self._float64_numerics and self._output_dtype(X) == np.float64
        return np.dtype(np.float64 if wide else np.float32)

    def _cast_fitted(self, dtype: np.dtype) -> None:
        """``embedding_`` as ``dtype``, and the other public float32 arrays (dense or sparse) and scalars widened
        to float64 when ``dtype`` is float64. Statistics repviz computes in float64 stay float64 for float32 input
        (its transforms use them as they are)."""
        self._fitted_dtype = dtype
        parameters = self._get_param_names()  # the elastic embedding's lambda_ is one
        for name, value in list(vars(self).items()):
            if name.startswith("_") or not name.endswith("_") or name in parameters:
                continue
            if name == "embedding_" or (dtype == np.float64 and getattr(value, "dtype", None) == np.float32):
                setattr(self, name, _as_dtype(value, dtype))

    def _as_fitted_dtype(self, value):
        """An attribute computed after the fit (on first access) widened as :meth:`_cast_fitted` widens."""
        widen = getattr(self, "_fitted_dtype", None) == np.float64
        return _as_dtype(value, np.dtype(np.float64)) if widen else value

    def __sklearn_tags__(self):
        """scikit-learn's ``Tags`` of a transformer that needs no ``y``, preserves the dtypes of
        ``_preserves_dtype``, takes a precomputed (pairwise) matrix when ``metric`` or ``affinity`` is
        "precomputed"; a namespace with the same fields when scikit-learn is not installed."""
        pairwise = (getattr(self, "metric", None) == "precomputed"
                    or getattr(self, "affinity", None) in ("precomputed", "precomputed_nearest_neighbors"))
        try:
            from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags
        except ImportError:
            InputTags, Tags, TargetTags, TransformerTags = (SimpleNamespace,) * 4
        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(preserves_dtype=list(self._preserves_dtype)),
                    regressor_tags=None,
                    classifier_tags=None, input_tags=InputTags(pairwise=pairwise, sparse=self._accepts_sparse),
                    array_api_support=False, no_validation=False, non_deterministic=False, requires_fit=True,
                    _skip_test=False)

    def set_output(self, *, transform: str | None = None):
        """Container of ``transform``/``fit_transform`` outputs: "default" (ndarray), "pandas" or "polars"
        (a DataFrame with :meth:`get_feature_names_out` as columns); None leaves it unchanged."""
        if transform is not None:
            if transform not in _OUTPUTS:
                raise ValueError(f"set_output(transform=...) must be one of {_OUTPUTS}; got {transform!r}.")
            # scikit-learn's attribute name, which its clone() copies
            self._sklearn_output_config = {"transform": transform}
        return self

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Output column names, ``<lowercase class name><i>`` as scikit-learn names them."""
        self._check_fitted()
        if input_features is not None:
            _check_input_features(self, input_features)
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.embedding_.shape[1])], dtype=object)


def _check_input_features(est, input_features) -> None:
    names = np.asarray(input_features, dtype=object)
    known = getattr(est, "feature_names_in_", None)
    if known is not None and not np.array_equal(names, known):
        raise ValueError("input_features is not equal to feature_names_in_")
    if len(names) != getattr(est, "n_features_in_", len(names)):
        raise ValueError(f"input_features should have length equal to number of features "
                         f"({est.n_features_in_}), got {len(names)}")


def _column_names(X) -> np.ndarray | None:
    """A DataFrame's column names if all are strings (scikit-learn's rule), else None."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "shape"):
        return None
    names = np.asarray(list(columns), dtype=object)
    return names if len(names) and all(isinstance(c, str) for c in names) else None


def _check_feature_names(est, X) -> None:
    """scikit-learn's rule for data after fit: other column names raise, names present on one side only warn."""
    fitted, names = getattr(est, "feature_names_in_", None), _column_names(X)
    owner = type(est).__name__
    if fitted is None and names is not None:
        warnings.warn(f"X has feature names, but {owner} was fitted without feature names", UserWarning,
                      stacklevel=3)
    elif fitted is not None and names is None:
        warnings.warn(f"X does not have valid feature names, but {owner} was fitted with feature names",
                      UserWarning, stacklevel=3)
    elif fitted is not None and not np.array_equal(fitted, names):
        raise ValueError(f"The feature names should match those that were passed during fit; {owner} was fitted "
                         f"with {list(fitted)[:5]}... and got {list(names)[:5]}...")


def _as_dtype(value, dtype: np.dtype):
    """A float array (dense or scipy sparse) or numpy float scalar as ``dtype``; anything else unchanged."""
    if isinstance(value, np.floating):
        return dtype.type(value)
    if (isinstance(value, np.ndarray) or sp.issparse(value)) and value.dtype.kind == "f" and value.dtype != dtype:
        return value.astype(dtype)
    return value


@contextlib.contextmanager
def _call():
    """Marks a wrapped call as running; yields whether it is the outermost one (the user's boundary). A context
    manager rather than a function that calls the method, so warnings' stack levels still reach the user's line."""
    token = _INSIDE.set(True)
    try:
        yield token.old_value is not True
    finally:
        _INSIDE.reset(token)


def _dtype_boundary(method):
    """``method``'s array output cast to the dtype its input asks for, at the user's boundary."""
    @functools.wraps(method)
    def wrapper(self, X, *args, **kwargs):
        with _call() as outermost:
            result = method(self, X, *args, **kwargs)
        return _as_dtype(result, self._output_dtype(X)) if outermost else result

    wrapper._repviz_wrapped = True
    return wrapper


def _recording_feature_names(fit):
    @functools.wraps(fit)
    def wrapper(self, X, *args, **kwargs):
        names = _column_names(X)
        with _call() as outermost:
            result = fit(self, X, *args, **kwargs)
        if outermost:
            self._cast_fitted(self._output_dtype(X))
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return result

    wrapper._repviz_wrapped = True
    return wrapper


def _output_container(est) -> str:
    """The container ``est`` should return: its ``set_output`` choice, else scikit-learn's global configuration
    if scikit-learn has been imported, else "default"."""
    own = getattr(est, "_sklearn_output_config", {}).get("transform")
    if own is not None:
        return own
    if "sklearn" in sys.modules:
        return sys.modules["sklearn"].get_config().get("transform_output", "default")
    return "default"


def _wrapped_output(method):
    @functools.wraps(method)
    def wrapper(self, X, *args, **kwargs):
        if method.__name__ == "transform" and hasattr(self, "n_features_in_"):
            _check_feature_names(self, X)
            shape = X.shape if hasattr(X, "shape") else np.asarray(X).shape
            if len(shape) == 2:
                check_n_features(self, SimpleNamespace(shape=shape))
        fitting = method.__name__ == "fit_transform"
        names = _column_names(X) if fitting else None
        with _call() as outermost:
            result = method(self, X, *args, **kwargs)
        if names is not None:
            self.feature_names_in_ = names
        if outermost:
            dtype = self._output_dtype(X)
            if fitting:
                fitted = vars(self).get("embedding_")
                self._cast_fitted(dtype)
                result = self.embedding_ if result is fitted else result
            result = result if isinstance(result, tuple) else _as_dtype(result, dtype)
        container = _output_container(self)
        if container == "default" or isinstance(result, tuple) or type(result).__name__ == "DataFrame":
            return result
        columns = list(self.get_feature_names_out())
        if container == "pandas":
            import pandas as pd

            return pd.DataFrame(result, columns=columns, index=getattr(X, "index", None) if
                                type(X).__name__ == "DataFrame" else None, copy=False)
        import polars as pl

        return pl.DataFrame(result, schema=columns, orient="row")

    wrapper._repviz_wrapped = True
    return wrapper


Estimator.fit_transform = _wrapped_output(Estimator.fit_transform)


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return a is b


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

