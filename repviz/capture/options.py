"""The grouped options of :class:`~repviz.capture.ActivationLogger`: what the probe is (:class:`ProbeSet`) and how each
recorded output is reduced and stored (:class:`Reduction`), and the one table that maps the logger's older flat
keywords onto them.

The groups only hold what they are given, as scikit-learn's estimators do; the logger checks them when it is
built, naming each parameter as the user spelled it (``probe_size`` or ``ProbeSet``'s ``size``). No Keras here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from .._validation import NONE, Interval, check_option, check_param, param_error

OWNER = "ActivationLogger"
POSITIVE = Interval(int, 1, None, "left")

#: Pooling policies ``Reduction(pooling=)`` takes (see :mod:`repviz.capture.reduction`).
POLICIES = ("avg", "mean", "max", "first", "last", "flatten")


@dataclass(eq=False)
class ProbeSet:
    """The fixed inputs an :class:`~repviz.capture.ActivationLogger` records at every snapshot, and how.

    Parameters
    ----------
    x : array, list or dict of arrays, tf.data.Dataset, generator or keras.utils.PyDataset
        What ``model.fit`` accepts as ``x``: a list of arrays for a multi-input model, or a dict keyed by input
        name (matched to ``model.inputs`` by name, as Keras does); an array one rank short of its input whose last
        axis is 1 (``(n, 28, 28)`` for ``Input((28, 28, 1))``) gets that axis, as Keras's ``fit`` adds it. A
        dataset, generator or ``PyDataset`` yields batches as for ``fit`` (``x``, ``(x, y)`` or
        ``(x, y, sample_weight)``): its first ``size`` examples are taken once, with their labels when it yields
        ``y`` (a generator is consumed that far: pass a fresh one).
    y : array, dict or list of arrays, default=None
        Labels: class ids, or one-hot rows that are stored as class ids; for a multi-output model also its
        targets as ``fit`` takes them, a dict by output name or a list in output order, of which the
        ``prediction_output``'s are stored as the labels. None for a dataset (it yields its own).
    size : int, default=None
        At most this many probe rows: the first ``size`` of an array probe; for a dataset, generator or
        ``PyDataset`` None means 1,000.
    ids : array of int, default=None
        Stable ids of the probe rows (e.g. their indices in the test set), used to match probes across runs;
        default ``0..n-1``.
    metadata : mapping or pandas DataFrame, default=None
        Per-example columns stored once with the probe (``{"text": [...], "source": [...], "score": [...]}``:
        strings, numbers, booleans; see :mod:`repviz.metadata`), one value per probe example; the tab colours by,
        searches and shows them. :func:`repviz.store.write_metadata` adds or replaces them later.
    batch_subset : int or array of int, default=None
        With ``batch_freq``: the batch snapshots record only this many probe points (a subset drawn once with the
        logger's ``seed``, each class in proportion to its count when the probe has class labels), or the probe
        positions given; the snapshot each fit starts from records the whole probe, and so do the snapshots after
        the epochs ``freq`` names when it is given too (a batch snapshot due at such an epoch's end is that
        snapshot; steps still count batches). Only the subset runs through the model at batch snapshots, which is
        what makes a fine schedule with a large probe affordable. The stored snapshots say which points they hold
        (:meth:`repviz.store.Run.rows`); embeddings, alignment and comparisons use the points snapshots share.
        The manifest's ``batch_probe`` records the choice (``n``, ``seed``, ``by``). A size not below the probe's
        records the whole probe (with a warning when larger).
    batch_size : int, default=None
        Probe rows per inference batch (as ``model.predict(batch_size=)``); bounds the memory a snapshot needs.
        None: the probe set in the fewest equal batches that keep one batch of the recorded outputs, at full
        width before the sketch, within 96 MB (at least 16 rows). Fewer, larger batches run the probe faster,
        and a short last batch costs nearly as much as a full one.
    """

    x: Any
    y: Any = None
    size: int | None = field(default=None, kw_only=True)
    ids: Any = field(default=None, kw_only=True)
    metadata: Any = field(default=None, kw_only=True)
    batch_subset: int | Any = field(default=None, kw_only=True)
    batch_size: int | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class Reduction:
    """How an :class:`~repviz.capture.ActivationLogger` turns each recorded output into the stored rows: pooled
    over positions, count-sketched when wide, stored in ``dtype``. Pass it, or a dict of these fields, as
    ``reduction=``.

    Parameters
    ----------
    pooling : None, str or dict, default=None
        How an output with a position axis becomes one vector per example, before anything else.
        ``"avg"`` / ``"max"``: global pooling over the positions of a sequence ``(T, d)`` or the spatial axes of a
        map ``(H, W, C)`` (channel last): ``d`` or ``C`` values. For sequences also ``"mean"`` (the mean over the
        positions the Keras mask keeps, when the layer carries one: the padding of
        ``Embedding(mask_zero=True)`` is left out), ``"first"`` (position 0: a CLS token), ``"last"`` (the last
        unmasked position: an RNN's last step), and ``"max"`` (over the unmasked positions); ``"flatten"`` keeps
        every position. None: sequences ``(n, T, d)`` get ``"mean"`` (mask-aware: it keeps the classes'
        neighbourhoods best, where ``first``/``last`` lose them on embedding layers and ``flatten`` mixes
        positions), and so do outputs of more axes with a sequence axis (``TimeDistributed`` outputs, attention
        projections and scores, outputs with a Keras mask; see
        :func:`repviz.capture.layers.sequence_axis`), pooled over it; maps of rank >= 3 are flattened. A dict
        maps layer names to policies (the rest get the default). The manifest records each layer's pooling as its
        reduction (``sequence_mean_pooling``, ...), which ``repviz info`` and the tab's info line show.
    max_width : int, default=None
        Outputs whose flattened width exceeds this are reduced to ``projection_dim`` columns by a count sketch
        (each column added with a random sign to one of ``projection_dim`` columns: a sparse Johnson-Lindenstrauss
        transform that keeps pairwise distances, which is what every embedding here uses, at the cost of one pass
        over the row). It is seeded per layer (from the logger's ``seed``) and fixed for the run, so snapshots
        stay comparable, and recorded in the manifest; a resumed run keeps the reduction each layer was recorded
        with. None means ``2 * projection_dim``, so stored widths stay near ``projection_dim``.
    projection_dim : int, default=256
        Width after the sketch; at most ``max_width``. Distances change by at most about
        ``1 / sqrt(2 * projection_dim)`` (4.4% at 256, 3.1% at 512); the disk per snapshot grows with it
        (2,000 probes x 256 float32 = 2 MB per wide layer).
    dtype : {"float32", "float16"}, default="float32"
        Storage type. Activations are computed in float32 whatever the model's precision (mixed-precision outputs
        are upcast, not reinterpreted); float16 halves the disk use and stores values beyond +-65504 as inf, which
        the record counts and a warning reports.
    """

    pooling: str | dict | None = None
    max_width: int | None = None
    projection_dim: int = 256
    dtype: str = "float32"


#: The flat keywords ``ActivationLogger`` took before its options were grouped: (group, field) each sets.
LEGACY = {"probe_size": ("probe", "size"), "probe_ids": ("probe", "ids"), "metadata": ("probe", "metadata"),
          "batch_probe": ("probe", "batch_subset"), "batch_size": ("probe", "batch_size"),
          "pooling": ("reduction", "pooling"), "max_width": ("reduction", "max_width"),
          "projection_dim": ("reduction", "projection_dim"), "dtype": ("reduction", "dtype")}
_OLD_NAME = {f: old for old, (_, f) in LEGACY.items()}
_GROUP = {f: group for _, (group, f) in LEGACY.items()}
_CLASS = {"probe": "ProbeSet", "reduction": "Reduction"}


@dataclass(frozen=True)
class Spelling:
    """How the user named the grouped options: the groups in ``flat`` came as the older flat keywords (or their
    defaults), so their errors name ``probe_size`` of ActivationLogger rather than ``size`` of ProbeSet."""

    flat: frozenset[str]

    def param(self, name: str) -> tuple[str, str]:
        """(parameter, owner) of group field ``name`` for :func:`repviz._validation.check_param`."""
        group = _GROUP[name]
        return (_OLD_NAME[name], OWNER) if group in self.flat else (name, _CLASS[group])

    def keyword(self, name: str) -> str:
        """Group field ``name`` as the user passes it: ``probe_size=`` or ``ProbeSet(size=)``."""
        group = _GROUP[name]
        return f"{_OLD_NAME[name]}=" if group in self.flat else f"{_CLASS[group]}({name}=)"


def grouped(probe: Any, reduction: Any, legacy: dict[str, Any]) -> tuple[ProbeSet, Reduction, Spelling]:
    """The options of ``probe=``, ``reduction=`` and the older flat keywords ``legacy`` as one :class:`ProbeSet` and
    one :class:`Reduction`. A bare probe (an array, ``(x, y)``, a dataset, ...) is ``ProbeSet(x, y)`` as before, a
    pair always read as ``(x, y)``; a flat keyword (other than None) may not repeat an option its group object
    already holds."""
    unknown = sorted(set(legacy) - set(LEGACY))
    if unknown:
        raise TypeError(f"ActivationLogger() got an unexpected keyword argument {unknown[0]!r}")
    flat = set()
    if not isinstance(probe, ProbeSet):
        flat.add("probe")
        probe = ProbeSet(*probe) if isinstance(probe, tuple) and len(probe) == 2 else ProbeSet(probe)
    if reduction is None:
        flat.add("reduction")
        reduction = Reduction()
    elif isinstance(reduction, dict):
        names = {f.name for f in fields(Reduction)}
        if not set(reduction) <= names:
            raise param_error("reduction", OWNER, f"a Reduction or a dict with keys among {sorted(names)}",
                              reduction)
        reduction = Reduction(**reduction)
    elif not isinstance(reduction, Reduction):
        raise param_error("reduction", OWNER, "None, a Reduction or a dict of its options", reduction)
    groups = {"probe": probe, "reduction": reduction}
    for old, value in legacy.items():
        group, name = LEGACY[old]
        if group not in flat and value is None:  # a wrapper passing the flat default along
            continue
        if group not in flat:
            raise ValueError(f"{old}= sets {_CLASS[group]}'s {name!r}, and {group}= is a {_CLASS[group]}: pass "
                             f"{_CLASS[group]}({name}=...) instead")
        groups[group] = replace(groups[group], **{name: value})
    return groups["probe"], groups["reduction"], Spelling(frozenset(flat))


def checked_reduction(r: Reduction, spelling: Spelling) -> Reduction:
    """``r`` checked (model-free), with ``max_width`` resolved."""
    dtype = check_option(r.dtype, ("float32", "float16"), *spelling.param("dtype"))
    check_param(r.max_width, [POSITIVE, NONE], *spelling.param("max_width"))
    check_param(r.projection_dim, [POSITIVE], *spelling.param("projection_dim"))
    max_width = 2 * r.projection_dim if r.max_width is None else r.max_width
    if r.projection_dim > max_width:
        raise ValueError(f"projection_dim ({r.projection_dim}) must not exceed max_width ({max_width}): a "
                         f"projection would then widen the layers it is meant to shrink.")
    return Reduction(check_pooling(r.pooling, spelling), int(max_width), int(r.projection_dim), dtype)


def check_pooling(pooling: Any, spelling: Spelling) -> str | dict | None:
    """``pooling`` checked: None, a policy of :data:`POLICIES`, or a dict of layer name -> policy (copied)."""
    if pooling is None or (isinstance(pooling, str) and pooling in POLICIES):
        return pooling
    if isinstance(pooling, dict) and all(isinstance(k, str) and v in POLICIES for k, v in pooling.items()):
        return dict(pooling)
    raise param_error(*spelling.param("pooling"), f"None, one of {list(POLICIES)} or a dict of layer name -> one "
                      f"of them", pooling)


_LIBRARIES = {"repviz", "keras", "tensorflow", "jax", "torch", "optree", "contextlib"}


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning about these options, or about what they record, point at the user's
    line (the logger's construction or the ``fit`` call): the first frame outside repviz, Keras and the
    backends."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARIES:
        frame, level = frame.f_back, level + 1
    return level


def is_int(v: Any) -> bool:
    """An int or numpy integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)
