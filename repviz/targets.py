"""The target policy: what a probe's labels are, how they are stored, and where they colour points.

``fit`` takes targets of any shape; each probe's labels get one policy, named in the manifest
(``manifest["probe"]["target"] = {"kind", "shape", "stored_shape"}``) and decided from the labels and the shape of
the model's primary output (:func:`decide`):

==========================================  ==============  ==================================  ===========
labels (per example)                        policy          stored                              colour
==========================================  ==============  ==================================  ===========
an integer, bool or string                  ``class``       as given                            by class
one-hot or probability rows ``(k,)``        ``class``       the argmax                          by class
a 0/1 matrix ``(k,)``, rows not one-hot     ``multilabel``  as given                            none
a float ``()`` or ``(1,)``                  ``scalar``      as given (one value)                by value
a value or class per position of an         ``per_pixel``   as given; one-hot channels: the     none
image ``(H, W[, C])``                                       argmax
a value or class per step ``(T[, C])``      ``per_step``    as given; one-hot channels: the     none
                                                            argmax
other float rows ``(k,)``                   ``vector``      as given                            none
==========================================  ==============  ==================================  ===========

A float label whose values are non-negative integers is a class when the model's output is wider than one unit
or the values are 0 and 1 (a sigmoid's), else a scalar. Only class targets give the embeddings' k-NN accuracy and
a supervised method's labels; no policy stops an embedding. Runs recorded before the policy have it decided from
their stored labels when read (:func:`read_target`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .metadata import Metadata


@dataclass(frozen=True)
class Policy:
    """One kind of target: how the tab colours points by it (``"palette"``: a colour per class, ``"scale"``: a
    continuous scale, None: not used for colour) and what it is."""

    name: str
    colours: str | None
    description: str


#: The kinds of target, by name.
POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy("class", "palette", "one class per example"),
    Policy("multilabel", None, "several binary labels per example"),
    Policy("scalar", "scale", "one number per example"),
    Policy("per_pixel", None, "a value or class per image position"),
    Policy("per_step", None, "a value or class per sequence step"),
    Policy("vector", None, "several numbers per example"),
)}
#: The number column of a scalar target's values in the tab (:func:`with_target_column`).
TARGET_COLUMN = "target"
_TOLERANCE = 1e-3  # a probability row sums to 1 within this


@dataclass(frozen=True)
class Target:
    """The policy of one probe's labels: its kind (a name of :data:`POLICIES`), the labels' shape per example as
    given and as stored."""

    kind: str
    shape: tuple[int, ...]
    stored_shape: tuple[int, ...]

    @property
    def policy(self) -> Policy:
        return POLICIES[self.kind]

    def entry(self) -> dict:
        """The manifest's form (``manifest["probe"]["target"]``)."""
        return {"kind": self.kind, "shape": list(self.shape), "stored_shape": list(self.stored_shape)}

    def index(self) -> dict:
        """The tab's form (the run index): :meth:`entry`, how it colours points (``colours``) and the metadata
        column that holds its values (``column``, for a scalar)."""
        return {**self.entry(), "colours": self.policy.colours,
                "column": TARGET_COLUMN if self.kind == "scalar" else None}

    def describe(self) -> str:
        """One line: the kind, what it means, the shape per example and whether it colours points."""
        colour = {"palette": "colours by class", "scale": "colours by value"}.get(self.policy.colours,
                                                                                   "not used for colour")
        shape = f", {' x '.join(map(str, self.shape))} per example" if self.shape else ""
        return f"{self.kind} ({self.policy.description}{shape}; {colour})"


def decide(y: np.ndarray, output_shape: Sequence[int] | None = None) -> tuple[Target, np.ndarray]:
    """The policy of labels ``y`` (n, ...) for a model whose primary output has ``output_shape`` per example (None:
    unknown), and the array to store (see the module's table)."""
    y = np.asarray(y)
    n, shape = len(y), tuple(int(s) for s in y.shape[1:])
    out = None if output_shape is None else tuple(int(s) for s in output_shape)
    if shape in ((), (1,)):
        flat = y.reshape(n)
        stored = flat.astype(np.int64) if flat.dtype.kind in "iub" else flat
        return Target("class" if _is_class(flat, out) else "scalar", shape, ()), stored
    if len(shape) == 1 and _probabilities(y):
        return Target("class", shape, ()), np.argmax(y, axis=1).astype(np.int64)
    positions = _positions(shape, out)
    if positions:
        kind = "per_step" if positions == 1 else "per_pixel"
        if len(shape) == positions + 1 and shape[-1] > 1 and _probabilities(y.reshape(-1, shape[-1])):
            y = np.argmax(y, axis=-1).astype(np.min_scalar_type(shape[-1] - 1))  # a class per position
        return Target(kind, shape, tuple(y.shape[1:])), y
    binary = y.dtype.kind == "b" or (y.dtype.kind in "iuf" and np.isin(y, (0, 1)).all())
    return Target("multilabel" if binary else "vector", shape, shape), y


def read_target(entry: object, labels: np.ndarray | None, output_shape: Sequence[int] | None = None) -> Target | None:
    """The target of a stored probe: the manifest's ``entry`` when it names a policy, else decided from the stored
    ``labels`` (a run recorded before the policy); None without labels."""
    if labels is None:
        return None
    if isinstance(entry, dict) and entry.get("kind") in POLICIES:
        shape = entry.get("shape") or []
        return Target(entry["kind"], tuple(shape), tuple(labels.shape[1:]))
    stored = tuple(int(s) for s in labels.shape[1:])
    return Target(decide(labels, output_shape)[0].kind, stored, stored)


def class_labels(labels: np.ndarray | None, target: Target | None) -> np.ndarray | None:
    """One class label per example (as stored) for a class target, else None: what k-NN accuracy and supervised
    methods use."""
    if labels is None or target is None or target.kind != "class":
        return None
    labels = np.asarray(labels)
    return labels.argmax(axis=1) if labels.ndim == 2 and labels.shape[1] > 1 else labels.reshape(len(labels))


def class_codes(labels: np.ndarray | None, target: Target | None, n: int) -> tuple[np.ndarray, list[str] | None]:
    """Class codes (int32, -1 = none) and class names (None when the labels are already integer codes) of a class
    target; every code -1 for any other target or none.

    Strings are numbered in sorted order; integral floats are codes.
    """
    labels = class_labels(labels, target)
    if labels is None:
        return np.full(n, -1, dtype=np.int32), None
    if labels.dtype.kind in "US":
        names, codes = np.unique(labels, return_inverse=True)
        return codes.astype(np.int32), [str(x) for x in names]
    if labels.dtype.kind in "iub" or (labels.dtype.kind == "f" and np.all(np.isfinite(labels))
                                      and np.all(labels == np.round(labels)) and np.all(labels >= 0)):
        return labels.astype(np.int32), None
    return np.full(n, -1, dtype=np.int32), None


def scalar_values(labels: np.ndarray | None, target: Target | None) -> np.ndarray | None:
    """One float64 value per example for a scalar target (what the tab colours on a scale), else None."""
    if labels is None or target is None or target.kind != "scalar":
        return None
    return np.asarray(labels, dtype=np.float64).reshape(len(labels))


def _is_class(flat: np.ndarray, out: tuple[int, ...] | None) -> bool:
    """Whether one label per example is a class: integers, booleans, strings; floats that are non-negative
    integers, unless the model has a single output unit and they are more than 0 and 1 (a regression)."""
    if flat.dtype.kind in "iubUS":
        return True
    if flat.dtype.kind != "f" or not np.all(np.isfinite(flat)) or np.any(flat < 0) or \
            np.any(flat != np.round(flat)):
        return False
    single = out is not None and int(np.prod(out, dtype=np.int64)) <= 1
    return not single or bool(np.isin(flat, (0, 1)).all())


def _probabilities(rows: np.ndarray) -> bool:
    """Whether every row of ``rows`` (m, k) is a probability vector (one-hot included): k > 1, non-negative
    numbers summing to 1."""
    if rows.dtype.kind not in "iubf" or rows.shape[-1] < 2 or not len(rows):
        return False
    rows = rows.astype(np.float64, copy=False)
    return bool(np.all(rows >= 0) and np.all(np.abs(rows.sum(axis=-1) - 1) < _TOLERANCE))


def _positions(shape: tuple[int, ...], out: tuple[int, ...] | None) -> int:
    """How many leading axes of a label of ``shape`` per example are positions (steps of a sequence, pixels of
    an image): those of the model's output (all its axes but the last) when the label starts with them; else every
    axis but the last of a label of rank 2 or more; 0 for a row (rank 1)."""
    if out is not None and len(out) >= 2 and shape[:len(out) - 1] == out[:-1]:
        return len(out) - 1
    return len(shape) - 1 if len(shape) >= 2 else 0


def with_target_column(metadata: Metadata, labels: np.ndarray | None, target: Target | None) -> Metadata:
    """``metadata`` with a scalar target's values as the number column :data:`TARGET_COLUMN` (what the tab
    colours by value and searches), unless a column has that name; as it is for any other target."""
    values = scalar_values(labels, target)
    if values is None or TARGET_COLUMN in metadata:
        return metadata
    return Metadata({**metadata, TARGET_COLUMN: values}, {**metadata.kinds, TARGET_COLUMN: "number"})
