"""The embedding methods the pipeline knows, their parameters and the cache keys of their results.

This is what the callback, the TensorBoard plugin and the CLI need to know about a method without computing
anything: :data:`METHODS` (extended with :func:`register_method`), :func:`resolve` (a request checked, merged with
the defaults and named by its key) and :func:`request_id` (what a user asked for, so that a repeated request finds
its key without importing the numerical code). A method's registration also owns its policies: how a chain
continues from the previous snapshot and how new points are placed into a stored layout. Estimators and policies
are named ``"module:attr"`` and imported only when used (they load numba, and UMAP an optional extra);
``tests/test_layering.py`` reads those strings as imports of this module.

A key is ``<method>-<hash>``; the hash covers the method, every parameter that changes the result (the
estimator's full ``get_params()`` except ``n_jobs``/``verbose``), the alignment mode, the continuation parameters
and :data:`PIPELINE_VERSION`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ._validation import check_option
from .version import __version__

#: Bumped when the pipeline's output for the same inputs and parameters changes; part of every cache key.
PIPELINE_VERSION = 1

ALIGN_MODES = ("snapshots", "layers", "none")

# Parameters that change speed or logging, never the result: left out of the cache key.
_NOT_HASHED = frozenset({"n_jobs", "verbose"})


@dataclass(frozen=True)
class Method:
    """How the pipeline runs one manifold method.

    Attributes
    ----------
    name : str
        What users type (``--method tsne``).
    target : str
        ``"module:Class"`` of a scikit-learn-style estimator, imported only when the method is used.
    align : {"init", "procrustes"}
        "init": the estimator accepts ``init=`` an earlier embedding and continues from it;
        "procrustes": results are rotated onto the previous one after fitting.
    defaults : dict
        Pipeline defaults that override the estimator's (e.g. ``random_state=0`` so runs are reproducible).
    continuation : dict
        Parameters used instead of the defaults when continuing from an earlier embedding ("init" only).
    supervised : bool
        The estimator is fitted with the probe labels as ``y`` (e.g. LDA).
    continue_with : str or None
        ``"module:function"`` that continues from an earlier embedding ("init" only), called as
        ``function(X, previous, params, continuation, memo) -> (Y, diagnostics)``, ``memo`` a dict the chain
        keeps from one snapshot to the next of the same points (holding ``"knn_indices"``, the previous
        snapshot's kNN graph, where its fit exposed one as ``knn_indices_``); None: the estimator itself, with
        the continuation parameters and ``init=previous``.
    place_with : str or None
        ``"module:function"`` that places new points into a stored layout that does not move, called as
        ``function(params, X_fit, Y_fit, X_new) -> (coords, how)`` (``params``: the layout's estimator
        parameters; ``how``: a JSON-able description); None: :mod:`repviz.placement` refits the estimator and uses
        its ``transform`` where it has one.
    warm_with : str or None
        ``"module:function"`` that compiles what :mod:`repviz.warmup`'s tiny run of the method does not reach,
        called as ``function() -> {kernel: seconds}``; None: nothing more.
    fixed : dict
        Values hashed (and described) with the parameters although the estimator no longer takes them: a
        parameter that moved out of the estimator without changing any result keeps the keys, and so the cached
        results, it had.
    added : dict
        Parameters the estimator gained later, with the value at which its results are what they were before:
        left out of the hash while they have it, so the keys, and the cached results, stay.
    description : str
        One line saying what the method is (``"kernel PCA"``): the tab's method menu shows it.
    """

    name: str
    target: str
    align: str
    defaults: dict = field(default_factory=dict)
    continuation: dict = field(default_factory=dict)
    supervised: bool = False
    continue_with: str | None = None
    fixed: dict = field(default_factory=dict)
    added: dict = field(default_factory=dict)
    place_with: str | None = None
    warm_with: str | None = None
    description: str = ""

    def estimator_class(self) -> type:
        """The estimator class (imported now)."""
        return _load(self.target, self.name)

    def continuation_function(self) -> Callable | None:
        """The function that continues a chain (imported now), or None if the estimator does."""
        return self._policy(self.continue_with)

    def placement_function(self) -> Callable | None:
        """The function that places new points into a fixed layout (imported now), or None."""
        return self._policy(self.place_with)

    def warm_function(self) -> Callable | None:
        """The function that compiles what a tiny run does not reach (imported now), or None."""
        return self._policy(self.warm_with)

    def _policy(self, target: str | None) -> Callable | None:
        return None if target is None else _load(target, self.name)


def _load(target: str, method: str):
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"method {method!r} is not available: cannot import {target} ({e})") from e


#: The registered methods, by name. Extend with :func:`register_method`.
METHODS: dict[str, Method] = {}


def register_method(name: str, target: str, *, align: str, defaults: dict | None = None,
                    continuation: dict | None = None, supervised: bool = False,
                    continue_with: str | None = None, fixed: dict | None = None, added: dict | None = None,
                    place_with: str | None = None, warm_with: str | None = None, description: str = "") -> Method:
    """Make an estimator available to the pipeline (and to ``repviz embed --method NAME``).

    ``target`` is ``"module:Class"``, imported lazily; the class follows scikit-learn's conventions
    (``get_params``, ``fit_transform``). The other arguments are :class:`Method`'s attributes.
    """
    check_option(align, ("init", "procrustes"), "align", "register_method")
    if (continuation or continue_with) and align != "init":
        raise ValueError(f"continuation parameters apply to align='init' methods only; {name!r} has align={align!r}")
    method = Method(name, target, align, dict(defaults or {}), dict(continuation or {}), supervised, continue_with,
                    dict(fixed or {}), dict(added or {}), place_with, warm_with, description)
    METHODS[name] = method
    return method


# t-SNE continuing from the previous snapshot (repviz.manifold.tsne.continuation). It moves points far less than
# independent fits; a lower learning rate would move them even less but follow real changes of the representation
# more slowly. tol=2e-2 stops once the iterations left could lower the KL by about 2 %, the bound its final KL
# keeps against 300 plain iterations (docs/MEASUREMENTS.md).
register_method("tsne", "repviz.manifold:TSNE", align="init", defaults={"random_state": 0},
                description="t-SNE: t-distributed stochastic neighbour embedding",
                continuation={"rescale_init": False, "early_exaggeration_iter": 0, "max_iter": 300, "tol": 2e-2,
                              "neighbour_start": 120},
                continue_with="repviz.manifold.tsne.continuation:continue_tsne",
                place_with="repviz.manifold.tsne.transform:place_into_layout",
                warm_with="repviz.manifold.tsne.optimize:warm_kernels",
                # fixed: what the key holds beyond get_params(): the continuation policy's own parameters (TSNE
                # parameters once, same results), the learning-rate rule and the FFT grid policy (each changed the
                # layouts, so each is part of the key; docs/MEASUREMENTS.md)
                fixed={"neighbour_start": None, "rescale_init": "auto",
                       "auto_learning_rate": "min(200, n/1.5) floor",
                       "fft_grid": "follows the layout"},
                # scikit-learn's options, off at these values: the results and keys they leave as they were
                added={"metric_params": None, "n_iter_without_progress": None, "min_grad_norm": 0.0})
# Iterative stress minimisers continue from the previous layout as it is.
register_method("mds", "repviz.manifold:MDS", align="init", defaults={"random_state": 0},
                description="multidimensional scaling by stress (SMACOF)")
register_method("sammon", "repviz.manifold:Sammon", align="init", defaults={"random_state": 0},
                description="Sammon mapping: stress weighted towards small distances")
# scikit-learn's options that leave the results as they were at these values
_ADDED = {"isomap": {"p": 2, "metric_params": None, "path_method": "auto", "neighbors_algorithm": "auto"},
          "cmds": {"metric_params": None}, "spectral": {"eigen_tol": "auto"}}
# SpectralEmbedding's tol became scikit-learn's eigen_tol ("auto" is the old 0.0)
_FIXED = {"spectral": {"tol": 0.0}}
for _name, _target, _about in (
        ("pca", "PCA", "principal component analysis"),
        ("cmds", "ClassicalMDS", "classical multidimensional scaling"),
        ("isomap", "Isomap", "Isomap: geodesic distances along the kNN graph"),
        ("lle", "LocallyLinearEmbedding", "locally linear embedding"),
        ("spectral", "SpectralEmbedding", "spectral embedding (Laplacian eigenmaps)"),
        ("diffusion", "DiffusionMap", "diffusion map"),
        ("kpca", "KernelPCA", "kernel PCA"),
        ("force", "ForceDirectedLayout", "force-directed layout of the kNN graph")):
    register_method(_name, f"repviz.manifold:{_target}", align="procrustes", defaults={"random_state": 0},
                    added=_ADDED.get(_name), fixed=_FIXED.get(_name), description=_about)
register_method("lda", "repviz.manifold:LinearDiscriminantAnalysis", align="procrustes",
                defaults={"n_components": 2}, supervised=True,
                description="linear discriminant analysis: the directions that separate the labels")
# The elastic embedding continues from the previous layout as it is, with fewer iterations (it starts near a
# minimum). The other new methods are fitted anew and rotated onto the previous snapshot. SFA reads the probe
# points in their stored order as its sequence.
register_method("ee", "repviz.manifold:ElasticEmbedding", align="init", defaults={"random_state": 0},
                continuation={"max_iter": 100}, description="elastic embedding")
for _name, _target, _about in (("ica", "FastICA", "independent component analysis"),
                               ("sfa", "SlowFeatureAnalysis", "slow feature analysis of the probe in its order"),
                               ("autoencoder", "AutoencoderEmbedding", "an autoencoder's 2-D bottleneck")):
    register_method(_name, f"repviz.manifold:{_target}", align="procrustes",
                    defaults={"random_state": 0, "n_components": 2}, description=_about)
register_method("whiten", "repviz.manifold:Whitening", align="procrustes", defaults={"n_components": 2},
                description="whitening: decorrelated features of unit variance")
# UMAP through umap-learn, an optional extra (repviz.manifold.umap says what to install when it is missing). Each
# snapshot starts from the previous layout for 50 epochs at learning rate 0.1, which moves points less than more
# epochs at a higher rate, at the same quality (docs/MEASUREMENTS.md).
register_method("umap", "repviz.manifold.umap:UMAP", align="init", defaults={"random_state": 0},
                continuation={"n_epochs": 50, "learning_rate": 0.1},
                place_with="repviz.manifold.umap:place_into_layout",
                description="UMAP: uniform manifold approximation and projection")


#: The method that embeds when none is named: the CLI's, the pipeline's and the tab's first choice.
DEFAULT_METHOD = "tsne"


def params_hash(obj: Any) -> str:
    """A stable 10-hex-digit hash of JSON-able ``obj`` (key order and int/float spelling of whole numbers do
    not matter; the same on every machine and Python version)."""
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    return obj


@dataclass(frozen=True)
class Resolved:
    """One method with its full parameters, ready to run; ``key`` names its results in the store."""

    method: Method
    params: dict  # every estimator parameter, as passed to it
    align: str
    default: bool  # pipeline defaults (no user parameters, align="snapshots"): what `run.embedding(...)` prefers

    @cached_property
    def key(self) -> str:
        """``<method>-<hash>``: the hash covers what changes the result (see the module docstring)."""
        return f"{self.method.name}-{params_hash({k: v for k, v in self.describe().items() if k != 'default'})}"

    @property
    def chain_align(self) -> str | None:
        """How each representation is tied to the previous one in its chain ("init", "procrustes" or None)."""
        return None if self.align == "none" else self.method.align

    def describe(self) -> dict:
        added = self.method.added
        hashed = {**self.method.fixed, **{k: v for k, v in self.params.items() if k not in _NOT_HASHED
                                          and not (k in added and _canonical(v) == _canonical(added[k]))}}
        return {"method": self.method.name, "params": hashed, "align": self.align, "default": self.default,
                "continuation": self.method.continuation if self.chain_align == "init" else {},
                "pipeline_version": PIPELINE_VERSION}


def _scalar(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.generic))


def check_method(name: str, align: str) -> None:
    """Raise ``ValueError`` for an unknown method name or alignment mode."""
    check_option(align, ALIGN_MODES, "align", "embed_logdir")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}")


def resolve(name: str, params: dict | None = None, align: str = "snapshots") -> Resolved:
    """Check a method name and user parameters, merge in the defaults, and compute the cache key.

    Raises ``ValueError`` with one clear line for an unknown method, an unknown parameter, an invalid value, or a
    parameter the alignment sets itself.
    """
    check_method(name, align)
    method = METHODS[name]
    cls = method.estimator_class()
    accepted = cls().get_params()
    params = dict(params or {})
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r} for method {name!r}; it accepts: "
                         f"{', '.join(sorted(accepted))}")
    if method.align == "init" and align != "none" and "init" in params:
        raise ValueError(f"the 'init' parameter of {name!r} is set by the pipeline to continue from the previous "
                         f"embedding (align={align!r}); pass align='none' to choose the initialisation yourself")
    full = {**accepted, **{k: v for k, v in method.defaults.items() if k in accepted}, **params}
    estimator = cls(**full)
    if hasattr(estimator, "_validate_params"):
        estimator._validate_params()
    for k, v in full.items():
        if k not in _NOT_HASHED and not (_scalar(v) or (isinstance(v, (tuple, list)) and all(map(_scalar, v)))):
            raise ValueError(f"the {k!r} parameter of {name!r} must be a number, string, bool, None or a tuple of "
                             f"those for the pipeline to cache results by it; got a {type(v).__name__}")
    # "default" is a property of the values, not of how they were given: whiten=False spelled out is the default.
    defaults = {**accepted, **{k: v for k, v in method.defaults.items() if k in accepted}}
    default = align == "snapshots" and all(_canonical(full[k]) == _canonical(defaults[k])
                                           for k in full if k not in _NOT_HASHED)
    return Resolved(method, full, align, default=default)


def request_id(name: str, params: dict | None, align: str) -> str:
    """A hash of what the user asked for (not of what it resolves to), valid for this version of repviz."""
    return params_hash({"method": name, "params": dict(params or {}), "align": align,
                        "repviz_version": __version__, "pipeline_version": PIPELINE_VERSION})
