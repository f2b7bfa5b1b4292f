"""The shared validation layer: one wording for parameters, one set of array checks and tolerances."""

import subprocess
import sys

import numpy as np
import pytest

from repviz._validation import (
    NONE,
    SYMMETRY_RTOL,
    Interval,
    Options,
    check_array,
    check_distance_matrix,
    check_n_neighbors,
    check_option,
    check_param,
    validate_params,
)


@pytest.mark.parametrize("rules, value, match", [
    ([Interval(float, 0, None, "neither")], -3, r"^The 'p' parameter of Owner must be a float in the range "
                                               r"\(0, inf\)\. Got -3 instead\.$"),
    ([Interval(int, 1, 5, "both"), NONE], 2.5, r"must be an int in the range \[1, 5\] or None\. Got 2\.5 instead"),
    ([Options("a", "b")], "c", r"must be a str among \{'a', 'b'\}\. Got 'c' instead"),
    ([Interval(int, 1, None, "left")], True, r"Got True instead"),  # a bool is not an int here
])
def test_parameter_wording(rules, value, match):
    with pytest.raises(ValueError, match=match):
        check_param(value, rules, "p", "Owner")


def test_rules_accept_what_they_describe():
    assert check_param("a", [Interval(int, 1, None, "left"), Options("a")], "p", "Owner") == "a"
    assert check_option("b", ("a", "b"), "p", "Owner") == "b"
    validate_params({"k": np.int64(3), "x": None}, {"k": [Interval(int, 1, None, "left")], "x": [NONE]}, "Owner")
    with pytest.raises(ValueError, match="Got 'x' instead. Use y."):
        check_param("x", [Options("a")], "p", "Owner", hint="Use y.")


def test_array_checks():
    assert check_array([[1, 2]], "Owner").dtype == np.float32
    assert check_array(np.ones((2, 2)), "Owner", dtype=(np.float32, np.float64)).dtype == np.float64
    with pytest.raises(ValueError, match=r"contains NaN or infinity in 1 row\(s\) \(Owner needs finite values\)"):
        check_array([[1.0, np.inf], [0, 0]], "Owner")
    with pytest.raises(ValueError, match=r"n_neighbors \(4\) must be less than n_samples \(4\) in Owner"):
        check_n_neighbors(4, 4, "Owner")


def test_one_symmetry_tolerance():
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    within = D + np.array([[0, 0.5 * SYMMETRY_RTOL], [0, 0]])
    check_distance_matrix(within, "Owner", symmetric=True)
    with pytest.raises(ValueError, match=r"symmetric distance matrix; max \|D - D.T\| = 2e-05"):
        check_distance_matrix(D + np.array([[0, 2 * SYMMETRY_RTOL], [0, 0]]), "Owner", symmetric=True)
    with pytest.raises(ValueError, match=r"^Owner expects a square distance matrix \(n, n\); got shape \(2, 3\)"):
        check_distance_matrix(np.zeros((2, 3)), "Owner", precomputed=False)


def test_imports_numpy_only():
    code = "import sys, repviz._validation; print(any(m in sys.modules for m in ('numba', 'sklearn', 'scipy')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
