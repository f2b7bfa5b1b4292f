"""The target policy (repviz.targets): each label shape's kind, what is stored, and what readers get from it."""

import numpy as np
import pytest

from repviz.metadata import Metadata
from repviz.targets import (
    POLICIES,
    TARGET_COLUMN,
    class_codes,
    class_labels,
    decide,
    read_target,
    scalar_values,
    with_target_column,
)

rng = np.random.default_rng(0)


@pytest.mark.parametrize("y, output, kind, stored_shape", [
    (np.array([0, 2, 1]), (3,), "class", ()),
    (np.array(["cat", "dog", "cat"]), None, "class", ()),
    (np.array([0.0, 1.0, 1.0]), (1,), "class", ()),  # a sigmoid's 0/1 labels, as floats
    (np.array([0.0, 2.0, 1.0]), (3,), "class", ()),  # class ids as floats for a softmax
    (np.array([0.0, 2.0, 5.0]), (1,), "scalar", ()),  # integral values for one output unit: a regression
    (rng.random((4, 1)), (1,), "scalar", ()),
    (np.eye(3)[[0, 2, 1]], (3,), "class", ()),  # one-hot: the argmax
    (np.array([[1, 0, 1], [0, 0, 1]]), (3,), "multilabel", (3,)),
    (rng.random((4, 5)), (5,), "vector", (5,)),
    (np.eye(3)[rng.integers(0, 3, (4, 8, 8))], (8, 8, 3), "per_pixel", (8, 8)),  # one-hot masks: a class map
    (rng.integers(0, 3, (4, 8, 8)), (8, 8, 3), "per_pixel", (8, 8)),  # sparse masks, as given
    (rng.random((4, 6, 1)), (6, 1), "per_step", (6, 1)),
    (rng.random((4, 6)), (6, 1), "per_step", (6,)),
    (rng.integers(0, 9, (4, 6)), (6, 9), "per_step", (6,)),  # a token per step
    (rng.random((4, 6, 1)), None, "per_step", (6, 1)),  # no output known: the axes before the last
])
def test_each_label_shape_has_a_policy(y, output, kind, stored_shape):
    target, stored = decide(y, output)
    assert target.kind == kind and target.kind in POLICIES
    assert target.shape == y.shape[1:] and stored.shape == (len(y), *stored_shape)
    assert target.entry() == {"kind": kind, "shape": list(y.shape[1:]), "stored_shape": list(stored_shape)}


def test_class_labels_are_stored_as_before():
    """One class per example is stored exactly as the capture always stored it (results and caches unchanged)."""
    ints = np.array([3, 1, 2], dtype=np.int32)
    assert decide(ints)[1].dtype == np.int64 and decide(ints)[1].tolist() == [3, 1, 2]
    onehot = np.eye(4)[[3, 0]]
    assert decide(onehot)[1].dtype == np.int64 and decide(onehot)[1].tolist() == [3, 0]
    floats = np.array([[1.0], [0.0]], dtype=np.float32)
    assert decide(floats)[1].dtype == np.float32 and decide(floats)[1].tolist() == [1.0, 0.0]


def test_only_class_targets_give_classes_and_only_scalars_values():
    y = np.array([0.5, 1.5, 2.5])
    target = decide(y, (1,))[0]
    assert class_labels(y, target) is None and class_codes(y, target, 3)[0].tolist() == [-1] * 3
    np.testing.assert_array_equal(scalar_values(y, target), y)
    masks = rng.integers(0, 2, (3, 4, 4))
    target = decide(masks, (4, 4, 2))[0]
    assert class_labels(masks, target) is None and class_codes(masks, target, 3)[0].tolist() == [-1] * 3
    assert scalar_values(masks, target) is None
    labels = np.array(["b", "a", "b"])
    codes, names = class_codes(labels, decide(labels)[0], 3)
    assert codes.tolist() == [1, 0, 1] and names == ["a", "b"]


def test_a_run_recorded_before_the_policy_gets_it_from_its_stored_labels():
    stored = np.eye(2)[rng.integers(0, 2, (3, 4, 4))]  # the raw one-hot masks the capture kept
    target = read_target(None, stored, (4, 4, 2))
    assert target.kind == "per_pixel" and target.stored_shape == (4, 4, 2) and class_labels(stored, target) is None
    assert read_target({"kind": "scalar", "shape": []}, np.array([1, 0]), None).kind == "scalar"  # the manifest's
    assert read_target({"kind": "unknown"}, np.array([1, 0]), None).kind == "class"  # not a policy: decided
    assert read_target(None, None, None) is None


def test_a_scalar_target_is_a_number_column_unless_one_has_its_name():
    y = np.array([0.5, 1.5])
    target = decide(y, (1,))[0]
    columns = with_target_column(Metadata({"source": np.array(["a", "b"])}, {"source": "category"}), y, target)
    assert list(columns) == ["source", TARGET_COLUMN] and columns.kinds[TARGET_COLUMN] == "number"
    given = Metadata({TARGET_COLUMN: np.array(["x", "y"])}, {TARGET_COLUMN: "text"})
    assert with_target_column(given, y, target) is given
    assert target.index()["column"] == TARGET_COLUMN and target.index()["colours"] == "scale"
