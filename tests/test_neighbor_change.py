"""repviz.neighbor_change against independent references: scipy's distances, scikit-learn's brute-force
neighbours, Jaccard overlaps of Python sets."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import repviz.neighbor_change as change_module
from repviz.neighbor_change import (
    EXACT_MAX_N,
    distances_to,
    graph_method,
    nearest_to,
    neighbor_change,
    neighbor_graph,
)


def test_neighbor_change_by_hand_and_against_sets():
    a = np.array([[1, 2], [0, 2], [0, 1]])
    b = np.array([[2, 1], [2, 3], [3, 2]])
    np.testing.assert_allclose(neighbor_change(a, b), [0.0, 2 / 3, 1.0], rtol=1e-6)
    rng = np.random.default_rng(0)
    a = np.stack([rng.choice(30, 6, replace=False) for _ in range(50)])
    b = np.stack([rng.choice(30, 6, replace=False) for _ in range(50)])
    expected = [1 - len(set(x) & set(y)) / len(set(x) | set(y)) for x, y in zip(a, b)]
    change = neighbor_change(a, b)
    assert change.dtype == np.float32
    np.testing.assert_allclose(change, expected, rtol=1e-6)
    assert not neighbor_change(a, a).any()


def test_neighbor_change_refuses_graphs_of_different_shapes():
    with pytest.raises(ValueError, match=r"same shape \(n, k\); got \(3, 2\) and \(3, 4\)"):
        neighbor_change(np.zeros((3, 2), int), np.zeros((3, 4), int))


def test_distances_to_against_scipy_in_blocks(monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(97, 13)).astype(np.float32)
    X[40, 3] = np.nan
    monkeypatch.setattr(change_module, "_BLOCK_BYTES", 8 * 13 * 10)  # blocks of 10 rows
    d = distances_to(X, 7)
    expected = cdist(X[7:8].astype(np.float64), X.astype(np.float64))[0]
    assert d[40] == np.inf
    keep = np.arange(97) != 40
    np.testing.assert_allclose(d[keep], expected[keep], rtol=1e-12)


def test_nearest_to_against_brute_force_with_ties_by_index():
    neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 8))
    for index in (0, 57, 199):
        order, dist = nearest_to(X, index, 10)
        _, ref = neighbors.NearestNeighbors(n_neighbors=11, algorithm="brute").fit(X).kneighbors(X[index:index + 1])
        assert order.tolist() == [j for j in ref[0] if j != index][:10]
        np.testing.assert_allclose(dist, np.linalg.norm(X[order] - X[index], axis=1))
    line = np.array([[0.0], [1.0], [-1.0], [2.0], [-2.0]])  # equal distances: the lower row first
    assert nearest_to(line, 0, 4)[0].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("index, k, message", [(5, 2, r"index must be in \[0, 5\); got 5"),
                                               (0, 5, r"k must be in \[1, 4\] for 5 points; got 5"),
                                               (0, 0, r"k must be in \[1, 4\] for 5 points; got 0")])
def test_nearest_to_bounds(index, k, message):
    with pytest.raises(ValueError, match=message):
        nearest_to(np.zeros((5, 2)), index, k)


def test_graph_method_is_exact_up_to_the_bound():
    assert graph_method(EXACT_MAX_N) == "exact" and graph_method(EXACT_MAX_N + 1) == "nndescent"


def test_neighbor_graph_against_brute_force():
    neighbors = pytest.importorskip("sklearn.neighbors")
    X = np.random.default_rng(3).normal(size=(300, 4, 3))  # trailing axes flattened
    graph = neighbor_graph(X, 5)
    flat = X.reshape(300, -1)
    _, ref = neighbors.NearestNeighbors(n_neighbors=6, algorithm="brute").fit(flat).kneighbors(flat)
    assert graph.dtype == np.int32 and graph.shape == (300, 5)
    expected = [[j for j in row if j != i][:5] for i, row in enumerate(ref.tolist())]
    assert [sorted(row) for row in graph.tolist()] == [sorted(row) for row in expected]
