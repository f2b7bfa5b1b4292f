"""The similarity measures, by name: everything a matrix, its cache, its figure and the tab need to know about one.

As scikit-learn's ``PAIRWISE_DISTANCE_FUNCTIONS`` maps a metric's name to its function, :data:`MEASURES` maps a
measure's name to a :class:`Measure`: how its values are computed, whether they are similarities or distances,
its label, the options that change its values (its cache key), where the meta bank gives them exactly, and its
colour scale. Nothing else branches on a measure's name; a new measure is its function in
:mod:`repviz.similarity.measures` and one :func:`register_measure` call here.

Reading this module imports numpy only (the TensorBoard plugin lists the measures without numba): each compute
function imports :mod:`repviz.similarity.measures` when it first runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .._validation import check_option
from ..progress import ProgressCallback
from .options import AUTO_BATCH, AUTO_EXACT_PROBES, KERNELS, RBF_SIGMA

#: ``compute(reps_a, reps_b, params, n_probe, progress)``: the values between every representation of ``reps_a``
#: and of ``reps_b`` (None: ``reps_a`` itself), arrays of shape (n_probe, ...), as an (len(a), len(b)) array.
Compute = Callable[[Sequence[np.ndarray], Sequence[np.ndarray] | None, dict, int, ProgressCallback | None],
                   np.ndarray]


def _no_params(options: dict, n_probe: int, owner: str) -> dict:
    return {}


def _no_bank(params: dict, n_probe: int, max_probes: int) -> str | None:
    return None


def similarity_range(finite: np.ndarray) -> tuple[float, float]:
    """A similarity's colour range: up to 1 (identical), from 0 or the lowest value below it."""
    return min(0.0, float(finite.min()) if finite.size else 0.0), 1.0


def distance_range(finite: np.ndarray) -> tuple[float, float]:
    """A distance's colour range: from 0 (identical) to the largest value."""
    return 0.0, max(float(finite.max()) if finite.size else 1.0, 1e-12)


@dataclass(frozen=True)
class Measure:
    """How one measure compares representations.

    Attributes
    ----------
    name : str
        What users type (``measure="cka"``, ``--measure cka``) and the cache directory's prefix.
    compute : callable
        See :data:`Compute`; symmetric (the cache keeps one value per pair); raises ``ValueError`` naming the
        representations ``reps_a[i]``, ``reps_b[j]``.
    higher_is_similar : bool
        True for a similarity (a row's most similar column is its maximum), False for a distance (its minimum).
    label : callable
        ``label(params) -> str``: what the values are, e.g. ``"debiased linear CKA"``.
    unit : str
        Said after the label on a colour bar (``"angle, radians"``); "" for none.
    params : callable
        ``params(options, n_probe, owner) -> dict``: the options (``kernel``, ``debiased``, ``sigma``,
        ``batch_size``, ``random_state``) that change the values, checked and resolved; with the name, the cache key.
    bank : callable
        ``bank(params, n_probe, max_probes) -> str | None``: the meta bank transform whose vectors' cosine is
        exactly this measure (:mod:`repviz.similarity.compute`), or None.
    colour_range : callable
        ``colour_range(finite values) -> (vmin, vmax)`` of a heatmap.
    """

    name: str
    compute: Compute
    higher_is_similar: bool
    label: Callable[[dict], str]
    unit: str = ""
    params: Callable[[dict, int, str], dict] = _no_params
    bank: Callable[[dict, int, int], str | None] = _no_bank
    colour_range: Callable[[np.ndarray], tuple[float, float]] = distance_range

    def colour_label(self, params: dict) -> str:
        """What a colour bar measures, e.g. ``debiased linear CKA`` or ``Procrustes distance (angle, radians)``."""
        return self.label(params) + (f" ({self.unit})" if self.unit else "")


#: The registered measures, by name, the default first. Extend with :func:`register_measure`.
MEASURES: dict[str, Measure] = {}


def register_measure(name: str, compute: Compute, *, higher_is_similar: bool, label: str | Callable[[dict], str],
                     unit: str = "", params: Callable[[dict, int, str], dict] | None = None,
                     bank: Callable[[dict, int, int], str | None] | None = None,
                     colour_range: Callable[[np.ndarray], tuple[float, float]] | None = None) -> Measure:
    """Make a measure available to :func:`repviz.similarity.similarity`, ``repviz similarity`` and the tab
    (see :class:`Measure`; ``label`` may be a fixed string; ``colour_range`` defaults by ``higher_is_similar``)."""
    measure = Measure(name, compute, bool(higher_is_similar), label if callable(label) else (lambda _: label), unit,
                      params or _no_params, bank or _no_bank,
                      colour_range or (similarity_range if higher_is_similar else distance_range))
    MEASURES[name] = measure
    return measure


def get_measure(name: str, owner: str = "similarity") -> Measure:
    """The registered measure ``name``, or the standard error listing them."""
    return MEASURES[check_option(name, tuple(MEASURES), "measure", owner)]


# --- CKA ----------------------------------------------------------------------------------------------------

#: (kernel, debiased) -> the meta bank transform whose cosine is that CKA. RBF CKA is not among them: the bank's
#: ``rbf_cka`` bandwidth is the median probe distance, the measures' a fraction ``sigma`` of it.
BANK_TRANSFORMS = {("linear", False): "cka", ("linear", True): "ucka"}


def _cka_params(options: dict, n_probe: int, owner: str) -> dict:
    """CKA's key: the kernel, the estimator, the RBF bandwidth, and the batch size and seed when minibatches are
    used. ``batch_size=None`` is resolved as :func:`~repviz.similarity.measures.cka_matrix` would for one
    representation: exact up to ``AUTO_EXACT_PROBES`` probes, batches of ``AUTO_BATCH`` above, so a value does
    not depend on which other representations were computed with it. A batch of at least ``n_probe`` is exact."""
    kernel, sigma, batch_size = options["kernel"], options["sigma"], options["batch_size"]
    check_option(kernel, KERNELS, "kernel", owner)
    params = {"kernel": kernel, "debiased": bool(options["debiased"])}
    if kernel == "rbf":
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma > 0:
            raise ValueError(f"The 'sigma' parameter of {owner} must be a float > 0. Got {sigma!r} instead.")
        params["sigma"] = float(sigma)
    if batch_size is None:
        batch_size = None if n_probe <= AUTO_EXACT_PROBES else AUTO_BATCH
    elif isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 8:
        raise ValueError(f"The 'batch_size' parameter of {owner} must be an int >= 8 or None. "
                         f"Got {batch_size!r} instead.")
    if batch_size is not None and batch_size < n_probe:
        params |= {"batch_size": int(batch_size), "random_state": int(options["random_state"])}
    return params


def _cka_bank(params: dict, n_probe: int, max_probes: int) -> str | None:
    if "batch_size" in params or n_probe > max_probes:
        return None
    return BANK_TRANSFORMS.get((params["kernel"], params["debiased"]))


def _cka(reps_a, reps_b, params: dict, n_probe: int, progress: ProgressCallback | None) -> np.ndarray:
    from .measures import cka_matrix

    # every probe in one batch when exact (params without batch_size), whatever the count of representations
    return cka_matrix(reps_a, reps_b, kernel=params["kernel"], debiased=params["debiased"],
                      batch_size=params.get("batch_size", max(8, n_probe)),
                      random_state=params.get("random_state", 0), progress=progress,
                      sigma=params.get("sigma", RBF_SIGMA))


def _cka_label(params: dict) -> str:
    return f"{'debiased' if params.get('debiased') else 'biased'} {params.get('kernel', 'linear')} CKA"


def _procrustes(reps_a, reps_b, params: dict, n_probe: int, progress: ProgressCallback | None) -> np.ndarray:
    from .measures import procrustes_matrix

    return procrustes_matrix(reps_a, reps_b, progress=progress)


# Centred kernel alignment (Kornblith et al. 2019): 1 = the same up to rotation and scale.
register_measure("cka", _cka, higher_is_similar=True, label=_cka_label, params=_cka_params, bank=_cka_bank)
# The orthogonal Procrustes shape distance (Williams et al. 2021): 0 = the same up to rotation, translation, scale.
register_measure("procrustes", _procrustes, higher_is_similar=False, label="Procrustes distance",
                 unit="angle, radians")

#: The measure used when none is named.
DEFAULT_MEASURE = "cka"
