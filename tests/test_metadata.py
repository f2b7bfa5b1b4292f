"""Probe metadata (issue #27): columns validated against the probe, stored once through the store and read back
exactly (unicode text, NaN numbers, categories), refused in one line when they do not fit, a damaged file reported
in one line with the rest of the run readable, and served by the plugin under names checked against the log
directory."""

from __future__ import annotations

import json
import math
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from repviz.cli import main
from repviz.metadata import columns_from, parse_tsv
from repviz.store import DamagedFileError, NotFoundError, RunWriter, open_run, write_metadata

TEXTS = ["naïve café ☕", "日本語のテキスト", "plain words", "tab\tand \"quotes\"", "émoji 🎉", ""]
COLUMNS = {
    "text": TEXTS,
    "source": ["web", "book", "web", "news", "book", "web"],
    "score": [0.5, float("nan"), 2.25, -1.0, None, 1e300],
    "length": [12, 8, 11, 15, 7, 0],
    "flag": [True, False, True, True, False, False],
}


def _run(tmp_path, name="r", n=6, labels=None):
    writer = RunWriter(tmp_path / name)
    writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {}})
    writer.write_probe(np.arange(100, 100 + n), labels)
    return writer


def test_round_trip_keeps_unicode_nan_and_kinds(tmp_path):
    _run(tmp_path).write_metadata(columns_from(COLUMNS, 6))
    md = open_run(tmp_path, "r").probe.metadata
    assert list(md) == list(COLUMNS)
    assert md["text"].tolist() == TEXTS
    assert md.kinds == {"text": "text", "source": "category", "score": "number", "length": "number",
                        "flag": "category"}
    score = md["score"]
    assert score.dtype == np.float64 and np.isnan(score[[1, 4]]).all()
    np.testing.assert_array_equal(score[[0, 2, 3, 5]], [0.5, 2.25, -1.0, 1e300])
    assert md["length"].dtype == np.int64 and md["length"].tolist() == COLUMNS["length"]
    assert md["flag"].dtype == bool and md["flag"].tolist() == COLUMNS["flag"]
    assert [c["distinct"] for c in md.summary()] == [6, 3, 4, 6, 2]  # NaN is not a value
    with pytest.raises(ValueError):
        md["text"][0] = "changed"  # read-only
    raw = (tmp_path / "r/plugins/repviz/probe/metadata.json").read_text()
    assert "NaN" not in raw and json.loads(raw)["columns"][2]["values"][1] is None  # strict JSON


def test_inference_and_explicit_kinds():
    md = columns_from({"label": [3, 1, 3, 1, 2, 2, 1, 3], "word": list("abababab"), "id": list("abcdefgh")}, 8)
    assert md.kinds == {"label": "category", "word": "category", "id": "text"}
    md = columns_from({"label": [3, 1, 3, 1, 2, 2, 1, 3]}, 8, kinds={"label": "number"})
    assert md.kinds == {"label": "number"}
    with pytest.raises(ValueError, match="'id' holds strings, which cannot be a 'number'"):
        columns_from({"id": list("abcdefgh")}, 8, kinds={"id": "number"})


def test_wrong_length_and_mixed_types_are_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError) as e:
        columns_from({"text": TEXTS, "source": ["a", "b"]}, 6)
    assert str(e.value) == ("metadata column 'source' has 2 values but the probe has 6 examples; give one value "
                            "per probe example, in probe order")
    with pytest.raises(ValueError, match="'mixed' mixes int, str") as e:
        columns_from({"mixed": [1, "a", 2, "b", 3, "c"]}, 6)
    assert "\n" not in str(e.value)
    _run(tmp_path)
    with pytest.raises(ValueError, match="'text' has 5 values but the probe has 6"):
        write_metadata(tmp_path / "r", {"text": TEXTS[:5]})
    assert not (tmp_path / "r/plugins/repviz/probe/metadata.json").exists()  # nothing written


def test_write_metadata_after_capture_replaces_and_needs_a_run(tmp_path):
    _run(tmp_path)
    write_metadata(tmp_path / "r", COLUMNS)
    write_metadata(tmp_path / "r", {"topic": ["a", "b", "a", "b", "a", "b"]})
    assert dict(open_run(tmp_path, "r").probe.metadata.kinds) == {"topic": "category"}
    with pytest.raises(NotFoundError, match="holds no repviz run"):
        write_metadata(tmp_path / "nothing", COLUMNS)


def test_tsv_with_a_header_like_the_projector(tmp_path, capsys):
    path = tmp_path / "meta.tsv"
    path.write_text("text\tsource\tscore\tlength\nhello wörld\tweb\t0.5\t3\nbonjour\tbook\t\t4\n", encoding="utf-8")
    cols = parse_tsv(path.read_text(encoding="utf-8"))
    assert cols["text"] == ["hello wörld", "bonjour"] and cols["length"] == [3, 4]
    assert cols["score"][0] == 0.5 and math.isnan(cols["score"][1])
    with pytest.raises(ValueError, match="bad.tsv line 2 has 1 cells but the header names 2 columns"):
        parse_tsv("a\tb\n1\n", "bad.tsv")
    _run(tmp_path, n=2)
    assert main(["metadata", str(tmp_path), "r", str(path)]) == 0  # the CLI: a run's name in a log directory
    out = capsys.readouterr().out  # two examples: two distinct values are no categories
    assert "text (text, 2 distinct), source (text, 2 distinct), score (number, 1 distinct), length (number" in out
    md = open_run(tmp_path, "r").probe.metadata
    assert md["text"].tolist() == ["hello wörld", "bonjour"] and np.isnan(md["score"][1])
    (tmp_path / "long.tsv").write_text("text\na\nb\nc\n")
    assert main(["metadata", str(tmp_path), "r", str(tmp_path / "long.tsv")]) == 2
    assert capsys.readouterr().err.strip() == ("repviz metadata: error: metadata column 'text' has 3 values but the "
                                               "probe has 2 examples; give one value per probe example, in probe order")


@pytest.mark.parametrize("content", ["{not json", '{"columns": [{"name": "t", "kind": "text", "type": "str", '
                                                  '"values": ["too", "short"]}]}', '[1, 2]'])
def test_damaged_file_is_one_line_and_the_probe_stays_readable(tmp_path, capsys, content):
    _run(tmp_path, labels=np.arange(6) % 2).write_metadata(columns_from(COLUMNS, 6))
    path = tmp_path / "r/plugins/repviz/probe/metadata.json"
    path.write_text(content)
    probe = open_run(tmp_path, "r").probe
    np.testing.assert_array_equal(probe.ids, np.arange(100, 106))  # the rest is usable
    np.testing.assert_array_equal(probe.labels, np.arange(6) % 2)
    with pytest.raises(DamagedFileError) as e:
        _ = probe.metadata
    assert e.value.filename == str(path) and "\n" not in str(e.value)
    assert main(["info", "--all", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"metadata: {path} " in out and len([line for line in out.splitlines() if "metadata" in line]) == 1


def test_info_lists_columns(tmp_path, capsys):
    _run(tmp_path).write_metadata(columns_from(COLUMNS, 6))
    main(["info", "--all", str(tmp_path)])
    assert ("metadata: text (text, 6 distinct), source (category, 3 distinct), score (number, 4 distinct), "
            "length (number, 6 distinct), flag (category, 2 distinct)") in capsys.readouterr().out


def test_a_link_leading_out_of_the_run_is_refused(tmp_path):
    _run(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(columns_from({"t": list("abcdef")}, 6).to_json()))
    os.symlink(outside, tmp_path / "r/plugins/repviz/probe/metadata.json")
    probe = open_run(tmp_path, "r").probe
    assert len(probe) == 6
    with pytest.raises(NotFoundError, match="outside"):
        _ = probe.metadata


def test_activation_logger_stores_metadata_once(tmp_path):
    import keras

    import repviz

    rng = np.random.default_rng(0)
    x, y = rng.random((6, 4), dtype=np.float32), np.arange(6) % 2
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="d"), keras.layers.Dense(2, name="o")])
    model.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match="'text' has 5 values but the probe has 6"):
        repviz.ActivationLogger(tmp_path / "bad", probe=(x, y), metadata={"text": TEXTS[:5]})
    logger = repviz.ActivationLogger(tmp_path / "r", probe=(x, y), metadata=COLUMNS)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[logger])
    md = open_run(tmp_path, "r").probe.metadata
    assert md["text"].tolist() == TEXTS and md.kinds["source"] == "category"


def test_a_pandas_frame_gives_its_columns_with_pandas_missing_values():
    """A DataFrame as metadata: each pandas dtype read as its values (pandas' NA is missing, as None is), kinds as
    for a mapping; a column of dates is refused in one line saying what to do. Non-regression: the "string" and
    "boolean" dtypes' pd.NA was refused as a value of another type ("mixes NAType, str")."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({
        "text": ["a b", "c", None, "d", "e", "f"],
        "source": pd.Categorical(["x", None, "y", "x", "y", "x"]),
        "level": pd.Categorical([1, 2, 1, 2, 1, 2]),
        "score": [0.5, np.nan, 0.25, 1.0, -2.0, 3.0],
        "count": pd.array([1, None, 3, 4, 5, 6], dtype="Int64"),
        "words": pd.array(["a", None, "b", "c", "d", "e"], dtype="string"),
        "flag": pd.array([True, None, True, True, False, True], dtype="boolean"),
        "ok": [True, False, True, True, False, True],
    }, index=[10, 11, 12, 13, 14, 15])  # the frame's index plays no part: values in row order
    md = columns_from(frame, 6)
    expected = {"text": ["a b", "c", "", "d", "e", "f"], "source": ["x", "", "y", "x", "y", "x"],
                "level": [1, 2, 1, 2, 1, 2], "words": ["a", "", "b", "c", "d", "e"],
                "flag": ["True", "", "True", "True", "False", "True"], "ok": [True, False, True, True, False, True]}
    for name, values in expected.items():
        assert md[name].tolist() == values, name
    np.testing.assert_array_equal(md["score"], [0.5, np.nan, 0.25, 1.0, -2.0, 3.0])
    np.testing.assert_array_equal(md["count"], [1, np.nan, 3, 4, 5, 6])
    assert md.kinds == {"text": "text", "source": "category", "level": "category", "score": "number",
                        "count": "number", "words": "text", "flag": "category", "ok": "category"}
    with pytest.raises(ValueError) as e:
        columns_from(pd.DataFrame({"when": pd.date_range("2020-01-01", periods=6)}), 6)
    assert str(e.value) == ("metadata column 'when' holds datetime values; give strings, numbers or booleans (e.g. "
                            "convert it with .astype(str))")


# --------------------------------------------------------------------------------------------------------------
# The plugin
# --------------------------------------------------------------------------------------------------------------

@pytest.fixture
def client(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    _run(tmp_path, "text").write_metadata(columns_from(COLUMNS, 6))
    _run(tmp_path, "plain")
    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(tmp_path)))
    yield wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    plugin.jobs.close()


def _get(client, route):
    return client.get("/data/plugin/repviz/" + route)


def test_route_serves_columns_and_the_index_lists_them(client):
    r = _get(client, "metadata?run=text")
    assert r.status_code == 200, r.data
    body = json.loads(r.data)  # strict JSON: NaN as null
    assert body["n"] == 6 and [c["name"] for c in body["columns"]] == list(COLUMNS)
    by = {c["name"]: c for c in body["columns"]}
    assert by["text"]["values"] == TEXTS and by["text"]["kind"] == "text"
    assert by["score"]["values"] == [0.5, None, 2.25, -1.0, None, 1e300]
    assert by["flag"]["values"] == COLUMNS["flag"] and by["source"]["distinct"] == 3
    runs = {r["name"]: r for r in json.loads(_get(client, "runs").data)["runs"]}
    assert [c["name"] for c in runs["text"]["metadata"]] == list(COLUMNS)
    assert runs["text"]["metadata"][1] == {"name": "source", "kind": "category", "distinct": 3}
    assert runs["plain"]["metadata"] == [] and runs["plain"]["metadata_error"] is None
    assert json.loads(_get(client, "metadata?run=plain").data)["columns"] == []


@pytest.mark.parametrize("query, code", [("metadata?run=nope", 404), ("metadata?run=../text", 404),
                                         ("metadata", 400), ("metadata?run=/etc", 404)])
def test_route_checks_names(client, query, code):
    r = _get(client, query)
    assert r.status_code == code and "\n" not in json.loads(r.data)["error"]


def test_damaged_metadata_keeps_the_run_in_the_index(client, tmp_path):
    path = tmp_path / "text/plugins/repviz/probe/metadata.json"
    path.write_text("{torn")
    os.utime(path.parent, ns=(1, 1))  # another stamp: the index is rebuilt
    runs = {r["name"]: r for r in json.loads(_get(client, "runs").data)["runs"]}
    assert runs["text"]["metadata"] == [] and str(path) in runs["text"]["metadata_error"]
    r = _get(client, "metadata?run=text")
    assert r.status_code == 500 and "is damaged" in json.loads(r.data)["error"]


# --------------------------------------------------------------------------------------------------------------
# Long values, oversized files and the edge cases of the input
# --------------------------------------------------------------------------------------------------------------

def test_a_long_value_costs_its_length_not_n_times_it(tmp_path):
    """Non-regression: every reader built a fixed-width array of n x (longest value) x 4 bytes (a 200,000-char
    value on 200 probes: 160 MB); text columns are now object arrays of str, read back exactly."""
    _run(tmp_path, n=200)
    values = [f"t{i}" for i in range(200)]
    values[7] = "é" * 200_000
    write_metadata(tmp_path / "r", {"text": values})
    md = open_run(tmp_path, "r").probe.metadata
    assert md["text"].nbytes < 10_000 and md["text"].tolist() == values
    assert md.summary() == [{"name": "text", "kind": "text", "distinct": 200}]
    with pytest.raises(ValueError):
        md["text"][0] = "changed"  # still read-only


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the peak memory is read from /proc")
def test_a_50_mb_value_leaves_info_and_the_index_fast_and_small(tmp_path):
    """The target: a run with a 50 MB value is one line of `repviz info` and listed by /runs with the other runs,
    each in under 5 s of CPU time (not wall time: shared machines) and (info, in a process of its own) under
    500 MB. Before: a MemoryError traceback from write_metadata, from `repviz info`, and a 500 for /runs."""
    import subprocess
    import sys
    import time

    for name in ("big", "plain"):
        writer = _run(tmp_path, name, n=200)
        writer.write_activation("d", 0, np.zeros((200, 2), np.float32))
    values = [f"t{i}" for i in range(200)]
    values[3] = "x" * 50_000_000
    write_metadata(tmp_path / "big", {"text": values})
    del values
    # the peak of this process image (VmHWM): getrusage's ru_maxrss keeps the parent's peak across exec
    code = ("import sys, time; from repviz.cli import main; start = time.process_time(); "
            "code = main(['info', sys.argv[1]]); print('cpu', time.process_time() - start, 'peak', "
            "next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM'))); "
            "sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "metadata: text (text, 200 distinct)" in done.stdout
    cpu, peak = done.stdout.split("cpu ")[1].split(" peak ")
    assert float(cpu) < 5 and int(peak) < 500 * 1024  # seconds, KiB
    pytest.importorskip("tensorboard")
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(tmp_path)))
    try:
        client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
        start = time.process_time()
        r = _get(client, "runs")
        assert r.status_code == 200 and time.process_time() - start < 5
        runs = {r["name"]: r for r in json.loads(r.data)["runs"]}
        assert set(runs) == {"big", "plain"} and runs["big"]["metadata"][0]["distinct"] == 200
        assert _get(client, "metadata?run=plain").status_code == 200
    finally:
        plugin.jobs.close()


def test_an_oversized_file_is_refused_in_one_line_for_that_run_only(tmp_path, capsys, monkeypatch):
    """A metadata file over the stated cap (repviz.metadata.MAX_FILE_BYTES) is neither written (one ValueError
    line, nothing stored) nor read (that run's metadata is damaged; the probe and the other runs are not)."""
    import repviz.metadata
    import repviz.store.run

    _run(tmp_path, "big").write_metadata(columns_from(COLUMNS, 6))
    _run(tmp_path, "other").write_metadata(columns_from(COLUMNS, 6))
    monkeypatch.setattr(repviz.metadata, "MAX_FILE_BYTES", 500)
    with pytest.raises(ValueError) as e:
        write_metadata(tmp_path / "other", {"text": ["x" * 600] + TEXTS[1:]})
    assert "over the 0 MiB repviz stores (its longest value: 600 characters in column 'text')" in str(e.value)
    assert "\n" not in str(e.value) and open_run(tmp_path, "other").probe.metadata["text"].tolist() == TEXTS
    monkeypatch.setattr(repviz.store.run, "MAX_FILE_BYTES", 500)
    (tmp_path / "other/plugins/repviz/probe/metadata.json").write_text('{"columns": []}')
    with pytest.raises(DamagedFileError, match="bytes, over the 500 bytes repviz reads from it; write it again"):
        _ = open_run(tmp_path, "big").probe.metadata
    assert main(["info", "--all", str(tmp_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "metadata" in line]
    assert len(lines) == 1 and "big/plugins/repviz/probe/metadata.json is " in lines[0]


def test_a_tsv_cell_of_any_length_is_read(tmp_path):
    """Non-regression: a cell over csv's 131,072-character field limit raised a _csv.Error traceback."""
    long = "w" * 200_000
    assert parse_tsv(f"text\tn\n{long}\t1\nshort\t2\n") == {"text": [long, "short"], "n": [1, 2]}
    path = tmp_path / "long.tsv"
    path.write_text(f"text\n{long}\nb\n")
    _run(tmp_path, n=2)
    assert main(["metadata", str(tmp_path), "r", str(path)]) == 0
    assert open_run(tmp_path, "r").probe.metadata["text"].tolist() == [long, "b"]


def test_tsv_line_endings_empty_lines_and_a_byte_order_mark(tmp_path):
    """Lines end in \\n, \\r\\n or \\r, empty lines are skipped, quotes are characters (the Projector's TSV); a
    UTF-8 byte order mark, as spreadsheets write it, is not part of the first column's name."""
    assert parse_tsv('a\tb\r\n"x\t1\r\n\ry\t2\n\n') == {"a": ['"x', "y"], "b": [1, 2]}
    path = tmp_path / "excel.tsv"
    path.write_text("label\tscore\ncat\t1.5\ndog\t2\n", encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    _run(tmp_path, n=2)
    write_metadata(tmp_path / "r", path)
    assert list(open_run(tmp_path, "r").probe.metadata) == ["label", "score"]


def test_a_column_named_twice_is_refused_in_one_line(tmp_path, capsys):
    """Non-regression: a TSV header naming a column twice silently dropped one, a DataFrame with two columns of
    one name raised AttributeError; both are refused naming the column (rename one: pandas' read_csv calls the
    second 'name.1')."""
    with pytest.raises(ValueError) as e:
        parse_tsv("a\tb\ta\n1\t2\t3\n", "dup.tsv")
    assert str(e.value) == ("dup.tsv's header names metadata column 'a' twice (columns 1 and 3); give each column "
                            "its own name")
    (tmp_path / "dup.tsv").write_text("a\tb\ta\n1\t2\t3\n4\t5\t6\n")
    _run(tmp_path, n=2)
    assert main(["metadata", str(tmp_path), "r", str(tmp_path / "dup.tsv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "names metadata column 'a' twice" in err and "\n" not in err
    with pytest.raises(ValueError, match="the mapping names metadata column '1' twice"):
        columns_from({1: [1, 2], "1": [3, 4]}, 2)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([[1, "x"], [2, "y"]], columns=["v", "v"])
    with pytest.raises(ValueError) as e:
        columns_from(frame, 2)
    assert str(e.value) == ("the DataFrame names metadata column 'v' twice (columns 1 and 2); give each column its "
                            "own name")


def test_infinities_are_refused_when_written_and_missing_when_read(tmp_path, client):
    """Non-regression: infinities were stored as JSON Infinity (not JSON), counted as values by `repviz info` and
    shown as missing by the tab. Now refused in one line when written (from a mapping, a DataFrame or a TSV); a
    file written before holding them reads them as missing, as the tab shows them, so the counts agree."""
    with pytest.raises(ValueError) as e:
        columns_from({"x": [1.0, math.inf, 2.0, -math.inf]}, 4)
    assert str(e.value) == ("metadata column 'x' holds 2 infinite value(s) (the first at example 1); give finite "
                            "numbers, NaN or None for a missing one (e.g. frame.replace([np.inf, -np.inf], np.nan))")
    with pytest.raises(ValueError, match="'x' holds 1 infinite"):
        columns_from({"x": np.array([1.0, np.inf])}, 2)
    with pytest.raises(ValueError, match="'s' holds 1 infinite"):
        columns_from(parse_tsv("s\n1.5\ninf\n"), 2)
    path = tmp_path / "text/plugins/repviz/probe/metadata.json"
    doc = json.loads(path.read_text())
    doc["columns"][2]["values"] = [0.5, "INF", 2.0, "-INF", 2.0, None]
    path.write_text(json.dumps(doc).replace('"INF"', "Infinity").replace('"-INF"', "-Infinity"))
    os.utime(path.parent, ns=(1, 1))  # another stamp: the index is rebuilt
    md = open_run(tmp_path, "text").probe.metadata
    np.testing.assert_array_equal(md["score"], [0.5, np.nan, 2.0, np.nan, 2.0, np.nan])
    runs = {r["name"]: r for r in json.loads(_get(client, "runs").data)["runs"]}
    assert runs["text"]["metadata"][2] == {"name": "score", "kind": "number", "distinct": 2}
    served = json.loads(_get(client, "metadata?run=text").data)["columns"][2]["values"]
    assert served == [0.5, None, 2.0, None, 2.0, None]
    json.dumps(md.to_json(), allow_nan=False)  # written again: strict JSON


def test_an_integer_beyond_64_bits_is_one_line():
    with pytest.raises(ValueError, match="metadata column 'n' holds an integer outside the 64-bit range"):
        columns_from({"n": [1, 2**70]}, 2)
