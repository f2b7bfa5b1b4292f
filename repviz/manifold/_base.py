"""Estimator plumbing shared by the manifold methods: parameters, validation at fit time, memory guard.

Follows scikit-learn's conventions without importing it: ``__init__`` only stores its arguments, a declarative
``_parameter_constraints`` table is checked when ``fit`` runs, ``get_params``/``set_params`` read the
``__init__`` signature, so ``sklearn.base.clone`` and ``parametrize_with_checks`` work on our estimators.
The rules and the array checks themselves live in :mod:`repviz._validation`.
"""

from __future__ import annotations

import inspect
import os

import numpy as np

from .._validation import validate_params


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute is used before ``fit`` (same bases as scikit-learn's)."""


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
        validate_params(vars(self), self._parameter_constraints, type(self).__name__)

    def _check_fitted(self, attribute: str = "embedding_") -> None:
        if not hasattr(self, attribute):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                                 f"appropriate arguments before using this estimator.")

    def fit_transform(self, X, y=None, **fit_params) -> np.ndarray:
        """Fit to ``X`` and return ``embedding_`` (``fit_params``, e.g. t-SNE's ``progress``, go to ``fit``)."""
        return self.fit(X, y, **fit_params).embedding_


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

