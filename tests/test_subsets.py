"""Probe subsets: a snapshot that stores some of the probe's points, and the points snapshots share."""

from __future__ import annotations

import numpy as np
import pytest

from repviz.store import DamagedFileError, open_logdir
from repviz.subsets import common_rows, stratified_subset


def test_a_snapshot_of_a_subset_reads_back_with_its_rows(tmp_path, new_run):
    writer = new_run(tmp_path / "r", layers={"dense": (10, 2)})
    writer.write_probe(np.arange(100, 110), np.arange(10) % 2)
    full = np.arange(20, dtype=np.float32).reshape(10, 2)
    writer.write_activation("dense", 0, full)
    writer.write_activation("dense", 1, full[[1, 4, 7]], rows=np.array([1, 4, 7]))
    writer.write_activation("dense", 2, full[[1, 4, 7]] + 1, rows=[1, 4, 7])
    writer.write_prediction(1, np.ones((3, 2), np.float32), rows=[1, 4, 7])
    run = open_logdir(tmp_path).run("r")
    np.testing.assert_array_equal(run.rows("dense", 0), np.arange(10))
    np.testing.assert_array_equal(run.rows("dense", 1), [1, 4, 7])
    np.testing.assert_array_equal(run.probe.ids[run.rows("dense", 2)], [101, 104, 107])
    np.testing.assert_array_equal(run.activations("dense", 1), full[[1, 4, 7]])
    np.testing.assert_array_equal(run.prediction_rows(1), [1, 4, 7])
    assert len(list((tmp_path / "r").rglob("subsets/*.npy"))) == 1  # one file per distinct subset


@pytest.mark.parametrize("rows", [[4, 1, 7], [1, 1, 7], [-1, 4, 7], [1, 4]], ids=["unsorted", "repeated",
                                                                                  "negative", "short"])
def test_rows_that_are_not_one_increasing_position_per_row_are_refused(tmp_path, new_run, rows):
    writer = new_run(tmp_path / "r", layers={"dense": (10, 2)})
    with pytest.raises(ValueError, match="increasing positions"):
        writer.write_activation("dense", 0, np.zeros((3, 2), np.float32), rows=rows)


def test_a_damaged_subset_file_is_named(tmp_path, new_run):
    writer = new_run(tmp_path / "r", layers={"dense": (10, 2)})
    writer.write_probe(np.arange(10))
    rec = writer.write_activation("dense", 0, np.zeros((3, 2), np.float32), rows=[1, 4, 7])
    np.save(_rows_file(tmp_path, rec), np.array([1, 4, 70]))
    with pytest.raises(DamagedFileError, match="positions into the probe"):
        open_logdir(tmp_path).run("r").rows("dense", 0)


def _rows_file(tmp_path, rec):
    return next(tmp_path.rglob(rec["rows"].split("/")[-1]))


def test_common_rows_finds_the_shared_points_in_each():
    common, where = common_rows([np.array([0, 2, 3, 5, 9]), np.array([2, 5, 7, 9]), np.arange(10)])
    np.testing.assert_array_equal(common, [2, 5, 9])
    np.testing.assert_array_equal(where[0], [1, 3, 4])
    np.testing.assert_array_equal(where[1], [0, 1, 3])
    np.testing.assert_array_equal(where[2], [2, 5, 9])


def test_a_stratified_subset_keeps_class_proportions_and_its_seed():
    labels = np.repeat([0, 1, 2], [500, 300, 200])
    rows = stratified_subset(1000, 100, labels, random_state=3)
    assert np.all(np.diff(rows) > 0) and len(rows) == 100
    np.testing.assert_array_equal(np.bincount(labels[rows]), [50, 30, 20])
    np.testing.assert_array_equal(rows, stratified_subset(1000, 100, labels, random_state=3))
    assert not np.array_equal(rows, stratified_subset(1000, 100, labels, random_state=4))
    np.testing.assert_array_equal(stratified_subset(10, 50), np.arange(10))
