"""The CSV files of ``repviz export`` and ``repviz similarity --out`` open in a spreadsheet as data, never as
formulas: a name starting with =, +, -, @, a tab or a carriage return gets a leading single quote (OWASP's advice),
numbers such as -1.5 stay numbers (issue #40, item 8)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from repviz import export
from repviz.similarity.result import RepKey, SimilarityMatrix

NAMES = ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\tx", "\rx", "plain", "-"]
SAFE = ["'" + n for n in NAMES[:6]] + ["plain", "'-"]


def _read(path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_similarity_csv_quotes_formula_labels_and_keeps_numbers(tmp_path):
    rows = [RepKey("a", name, 1) for name in NAMES]
    cols = [RepKey("b", "x", 1), RepKey("b", "-y", 1)]
    values = np.array([[-1.5, 0.25]] * len(NAMES))
    paths = export.write_matrix(SimilarityMatrix(values, rows, cols, "cka", {"kernel": "linear"}), tmp_path,
                                formats=())
    table = _read(paths[0])
    assert table[0] == ["", "x", "'-y"]
    assert [row[0] for row in table[1:]] == SAFE
    assert all(row[1:] == ["-1.5", "0.25"] for row in table[1:])


def test_quality_csv_quotes_formula_names_and_keeps_numbers(tmp_path):
    rows = [{"run": name, "layer": "-dense", "method": "pca", "step": 3, "trustworthiness": -0.5,
             "continuity": 0.9, "knn_preservation": None, "knn_accuracy": 1.0} for name in NAMES]
    csv_path, _ = export._write_tables(rows, tmp_path)
    table = _read(csv_path)
    assert table[0] == ["run", "layer", "method", "step", *export.SCORES]
    assert [row[0] for row in table[1:]] == SAFE
    assert table[1][1:] == ["'-dense", "pca", "3", "-0.5", "0.9", "", "1.0"]
