"""Run the installed scikit-learn's own ``sklearn/manifold/tests`` against repviz.manifold's estimators.

Copies ``sklearn/manifold/tests/*.py`` into a temporary directory, points the estimator imports at repviz
(``from sklearn.manifold import TSNE`` and ``from sklearn import manifold`` resolve to a module in which
repviz's classes replace scikit-learn's; scikit-learn's functions and private helpers stay its own), skips the
tests of scikit-learn's private helpers and function-only API (listed in ``SKIPPED`` with a reason each), runs
pytest and prints collected / passed / failed / skipped per file. Failures are listed with their first line.

Usage: ``python benchmarks/sklearn_manifold_suite.py [test_mds.py ...] [--failures] [--skips] [--float32]
[pytest options]`` (``--float32`` also runs scikit-learn's float32 parametrisations, which it skips by default).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import sklearn

#: repviz.manifold classes that take the place of scikit-learn's.
ESTIMATORS = ("ClassicalMDS", "MDS", "Isomap", "LocallyLinearEmbedding", "SpectralEmbedding", "TSNE")

_PRIVATE = "tests scikit-learn's private helper {}, not an estimator"
_FUNCTION = "tests scikit-learn's function-only API {} (repviz offers the estimator)"

#: test-name patterns (fnmatch on the function name) skipped per file, with the reason.
SKIPPED: dict[str, dict[str, str]] = {
    "test_mds.py": {
        "test_smacof": _FUNCTION.format("smacof"),
        "test_smacof_error": _FUNCTION.format("smacof"),
        "test_nonmetric_lower_normalized_stress": _FUNCTION.format("smacof"),
        "test_normed_stress": _FUNCTION.format("smacof"),
        "test_isotonic_outofbounds": _FUNCTION.format("smacof"),
        "test_normalized_stress_auto": _PRIVATE.format("_smacof_single (mocked)"),
        "test_future_warning_init_and_metric": "tests scikit-learn's deprecation cycle (dissimilarity=, "
                                               "metric=True/False, init='warn'), which repviz never had",
    },
    "test_locally_linear.py": {
        "test_barycenter_kneighbors_graph": _PRIVATE.format("barycenter_kneighbors_graph"),
    },
    "test_spectral_embedding.py": {
        "test_sparse_graph_connected_component": _PRIVATE.format("_graph_connected_component"),
        "test_spectral_embedding_first_eigen_vector": _FUNCTION.format("spectral_embedding"),
        "test_spectral_eigen_tol_auto": _PRIVATE.format("eigensolver call (mocked)"),
        "test_spectral_embedding_unnormalized": _FUNCTION.format("spectral_embedding(norm_laplacian=False)"),
        "test_spectral_embedding_deterministic": _FUNCTION.format("spectral_embedding"),
        "test_fallback_amg": _FUNCTION.format("spectral_embedding(eigen_solver='amg')"),
        "test_spectral_embedding_amg_solver_failure": _FUNCTION.format("spectral_embedding(eigen_solver='amg')"),
        "test_connectivity": _PRIVATE.format("_graph_is_connected"),
    },
    "test_t_sne.py": {
        "test_gradient_descent_stops": _PRIVATE.format("_gradient_descent"),
        "test_binary_search*": _PRIVATE.format("_binary_search_perplexity"),
        "test_binary_perplexity_stability": _PRIVATE.format("_binary_search_perplexity"),
        "test_gradient": _PRIVATE.format("_kl_divergence"),
        "test_trustworthiness*": _FUNCTION.format("trustworthiness (a metric, not t-SNE)"),
        "test_answer_gradient_*": _PRIVATE.format("_kl_divergence_bh"),
        "test_skip_num_points_gradient": _PRIVATE.format("_kl_divergence_bh"),
        "test_gradient_bh_multithread_match_sequential": _PRIVATE.format("_kl_divergence_bh"),
    },
}

_SHIM = '''"""sklearn.manifold with repviz's estimators in place of scikit-learn's (written by the suite runner)."""
import types

import sklearn.manifold as _sk
import repviz.manifold as _rv

globals().update({k: v for k, v in vars(_sk).items() if not k.startswith("__")})
_SWAP = {name: getattr(_rv, name) for name in %r}
globals().update(_SWAP)


def _swapped(module):
    ns = types.SimpleNamespace(**{k: v for k, v in vars(module).items() if not k.startswith("__")})
    for name, cls in _SWAP.items():
        if hasattr(ns, name):
            setattr(ns, name, cls)
    return ns


for _name in ("_mds", "_isomap", "_locally_linear", "_spectral_embedding", "_t_sne", "_classical_mds"):
    if hasattr(_sk, _name):
        globals()[_name] = _swapped(getattr(_sk, _name))
'''

_CONFTEST = '''import fnmatch

import pytest

SKIPPED = %r


def pytest_collection_modifyitems(config, items):
    for item in items:
        rules = SKIPPED.get(item.path.name, {})
        name = item.originalname if hasattr(item, "originalname") else item.name
        for pattern, reason in rules.items():
            if fnmatch.fnmatch(name, pattern):
                item.add_marker(pytest.mark.skip(reason="[repviz runner] " + reason))
                break
'''


def swap_imports(source: str) -> str:
    """``source`` with scikit-learn's manifold imports pointed at the shim module ``_repviz_manifold``."""
    lines = []
    for line in source.splitlines(keepends=True):
        if line.startswith("from sklearn.manifold import"):
            line = line.replace("from sklearn.manifold import", "from _repviz_manifold import", 1)
        elif line.startswith("from sklearn import "):
            names = [n.strip() for n in line.split("import", 1)[1].split(",")]
            if "manifold" in names:
                names.remove("manifold")
                line = f"from sklearn import {', '.join(names)}\nimport _repviz_manifold as manifold\n"
        lines.append(line)
    return "".join(lines)


def prepare(dest: Path, files: list[Path]) -> None:
    (dest / "_repviz_manifold.py").write_text(_SHIM % (ESTIMATORS,))
    (dest / "conftest.py").write_text(_CONFTEST % (SKIPPED,))
    for f in files:
        (dest / f.name).write_text(swap_imports(f.read_text()))


def summarise(report: Path) -> tuple[dict[str, dict[str, int]], list[tuple[str, str, str]], Counter]:
    """Per-file counts, the failures (file, test, first line of the message) and the reasons of scikit-learn's own
    skips with their counts, from a JUnit XML report."""
    counts: dict[str, dict[str, int]] = {}
    failures = []
    sklearn_skips: Counter = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        file = case.get("classname", "").split(".")[0] + ".py"
        c = counts.setdefault(file, {"collected": 0, "passed": 0, "failed": 0, "skipped (runner)": 0,
                                     "skipped (sklearn)": 0})
        c["collected"] += 1
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            c["failed"] += 1
            message = (bad.get("message") or bad.text or "").strip().splitlines()
            failures.append((file, case.get("name"), message[0][:200] if message else ""))
        elif skip is not None:
            reason = skip.get("message") or ""
            key = "skipped (runner)" if "[repviz runner]" in reason else "skipped (sklearn)"
            c[key] += 1
            if key == "skipped (sklearn)":
                sklearn_skips[reason.splitlines()[0] if reason else "?"] += 1
        else:
            c["passed"] += 1
    return counts, failures, sklearn_skips


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="test files to run (default: all)")
    parser.add_argument("--failures", action="store_true", help="list every failure with its message")
    parser.add_argument("--skips", action="store_true", help="list the runner's skips with their reasons")
    parser.add_argument("--float32", action="store_true",
                        help="also run scikit-learn's float32 parametrisations (SKLEARN_RUN_FLOAT32_TESTS=1)")
    args, extra = parser.parse_known_args()  # the rest (e.g. -k expr, -x) goes to pytest
    source = Path(sklearn.__file__).parent / "manifold" / "tests"
    files = sorted(p for p in source.glob("test_*.py") if not args.files or p.name in args.files)
    if args.skips:
        for file, rules in SKIPPED.items():
            for pattern, reason in rules.items():
                print(f"{file}::{pattern}: {reason}")
        return 0
    with tempfile.TemporaryDirectory(prefix="repviz_sk_suite_") as tmp:
        tmp = Path(tmp)
        prepare(tmp, files)
        report = tmp / "report.xml"
        # scikit-learn's conftest provides its fixtures (global_dtype, global_random_seed) and skip rules
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sklearn.conftest",
               "--rootdir", str(tmp),
               f"--junitxml={report}", "-o", "junit_family=xunit1", *extra, *(str(tmp / f.name) for f in files)]
        env = {**os.environ, **({"SKLEARN_RUN_FLOAT32_TESTS": "1"} if args.float32 else {})}
        subprocess.run(cmd, cwd=tmp, stdout=subprocess.DEVNULL, check=False, env=env)
        if not report.exists():
            print("pytest wrote no report; run it by hand in", tmp)
            return 2
        counts, failures, sklearn_skips = summarise(report)
    print(f"scikit-learn {sklearn.__version__} sklearn/manifold/tests against repviz.manifold")
    cols = ["collected", "passed", "failed", "skipped (runner)", "skipped (sklearn)"]
    print(f"| {'file':<26} | " + " | ".join(cols) + " |")
    print("|" + "-" * 28 + "|" + "|".join("-" * (len(c) + 2) for c in cols) + "|")
    total = dict.fromkeys(cols, 0)
    for file in sorted(counts):
        row = counts[file]
        for c in cols:
            total[c] += row[c]
        print(f"| {file:<26} | " + " | ".join(f"{row[c]:>{len(c)}}" for c in cols) + " |")
    print(f"| {'total':<26} | " + " | ".join(f"{total[c]:>{len(c)}}" for c in cols) + " |")
    for reason, count in sklearn_skips.most_common():
        print(f"skipped by scikit-learn ({count}): {reason}")
    if args.failures:
        for file, name, message in failures:
            print(f"FAILED {file}::{name}: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
