"""The ``repviz`` command: ``info`` on a store-written log directory, ``demo`` end to end (offline)."""

import errno
import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from repviz import open_logdir
from repviz.cli import main
from repviz.meta import MetaResult
from repviz.store import RunWriter


def test_info_lists_runs_layers_shapes_snapshots(tmp_path, capsys):
    w = RunWriter(tmp_path / "relu")
    w.begin({"fingerprint": {"model": "m", "probe": "p"}, "model": {"name": "relu_mlp"}, "probe": {"n": 4},
             "step_unit": "epoch",
             "layers": {"dense": {"stored_shape": [4, 3], "output_shape": [None, 3], "reduction": {"kind": "none"}},
                        "conv": {"stored_shape": [4, 2], "output_shape": [None, 5, 5, 8],
                                 "reduction": {"kind": "count_sketch", "dim": 2}}}})
    rng = np.random.default_rng(0)
    for step in range(8):  # rows that differ: a constant snapshot would be listed as such
        w.write_activation("dense", step, rng.normal(size=(4, 3)).astype(np.float32))
        w.write_activation("conv", step, np.full((4, 2), np.nan, np.float32) if step == 7 else
                           rng.normal(size=(4, 2)).astype(np.float32))
    assert main(["info", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("run 'relu': model relu_mlp, probe n=4, 8 snapshot(s) (epochs 0, 1, ..., 7), ")
    assert out[1].split() == ["dense", "(4,", "3)", "8", "snapshot(s)"]
    assert "(count_sketch from [None, 5, 5, 8]) 8 snapshot(s), 8 non-finite value(s)!" in out[2]


def test_info_names_the_output_the_predictions_are(tmp_path, capsys, new_run):
    w = new_run(tmp_path / "multi", {"dense": (4, 3)}, model={"name": "two_heads"}, probe={"n": 4},
                predictions={"shape": [4, 10], "output": "digits", "outputs": {"digits": [4, 10], "aux": [4, 1]}})
    w.write_activation("dense", 0, np.zeros((4, 3), np.float32))
    unnamed = new_run(tmp_path / "unnamed", {}, predictions={"shape": [4, 2]})  # a store-written run naming no output
    unnamed.write_prediction(0, np.zeros((4, 2), np.float32))
    assert main(["info", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  predictions: output 'digits' (4, 10); also stored: 'aux' (4, 1)" in out
    assert "  predictions: (4, 2)" in out


def test_info_missing_logdir_is_one_clear_line(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == f"repviz info: error: log directory {str(tmp_path / 'nope')!r} " \
                                              f"does not exist"


def test_demo_options_offline(tmp_path, capsys, monkeypatch):
    """The demo's own options (--epochs, --probe, --seed, --jobs) reach its configuration beside --quick's sizes,
    and the probe they ask for is drawn from the bundled digits; the --quick run end to end is
    tests/test_showcase.py."""
    import repviz.demo

    ran = []
    monkeypatch.setattr(repviz.demo, "run_demo", ran.append)
    assert main(["demo", str(tmp_path / "logs"), "--quick", "--epochs", "1", "--probe", "100", "--seed", "3",
                 "--jobs", "1"]) == 0
    (cfg,) = ran
    assert (cfg.epochs, cfg.n_probe, cfg.seed, cfg.jobs) == (1, 100, 3, 1)
    assert (cfg.quick, cfg.n_train, cfg.snapshots, cfg.n_seeds, cfg.logdir) == (True, 2000, 2, 2, str(tmp_path / "logs"))
    digits = repviz.demo.load_digits(cfg)
    assert "using the MNIST subset bundled with repviz" in capsys.readouterr().err
    assert digits.x.shape == (2000, 28, 28) and np.array_equal(np.bincount(digits.yt[digits.probe]), [10] * 10)
    assert repviz.demo.run_name("cnn", cfg.seed + 1) == "cnn/seed4"


@pytest.mark.parametrize("args, match", [(["--probe", "5000"], "--probe must be between 1 and the 1000 test digits"),
                                         (["--epochs", "0"], "--epochs must be >= 1; got 0"),
                                         (["--seeds", "1"], "--seeds must be >= 2 (the checks compare seeds); got 1")])
def test_demo_bad_arguments(tmp_path, capsys, monkeypatch, args, match):
    """Said before any process starts (the training process and the compiler's warm-up cost seconds)."""
    import multiprocessing

    import repviz.warmup

    def started(*args, **kwargs):
        raise AssertionError("a process was started for a demo that cannot run")

    monkeypatch.setattr(repviz.warmup, "start", started)
    monkeypatch.setattr(multiprocessing, "get_context", started)
    assert main(["demo", str(tmp_path / "logs"), *args]) == 2
    assert match in capsys.readouterr().err


def test_info_into_a_closed_pipe_ends_quietly(tmp_path, new_run, repo):
    """Non-regression: `repviz info LOG | head -1` ended in a BrokenPipeError traceback."""
    new_run(tmp_path / "run0", {f"layer_{i}": (30, 4) for i in range(3000)})  # more output than a pipe buffers
    out = subprocess.run(f"{sys.executable} -m repviz.cli info --all {tmp_path} | head -1", shell=True,
                         capture_output=True, text=True, cwd=repo)
    assert out.stdout.startswith("run 'run0'") and out.stderr == ""


def test_info_sums_up_runs_that_recorded_nothing_and_long_lists(tmp_path, capsys, new_run):
    """Issue #32: 10,000 runs that recorded nothing printed 50,000 lines. Each long list is summed up in one line;
    --all lists everything."""
    for i in range(53):
        new_run(tmp_path / f"r{i:02d}").write_activation("dense", 0, np.zeros((30, 4), np.float32))
    for i in range(30):
        new_run(tmp_path / f"starting{i:02d}", {f"l{j}": (30, 4) for j in range(4)})
    wide = new_run(tmp_path / "a_wide", {f"l{j:02d}": (30, 2) for j in range(15)})
    for j in range(15):
        X = np.random.default_rng(j).normal(size=(30, 2)).astype(np.float32)
        wide.write_activation(f"l{j:02d}", 0, np.zeros_like(X) if j == 13 else X)  # l13: constant (dead)
    run = open_logdir(tmp_path).run("a_wide")
    for k in range(8):
        run.embeddings.write(f"pca-{k}", "l00", 0, np.zeros((30, 2), np.float32), {})

    assert main(["info", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    runs = [line for line in out if line.startswith("run ")]
    assert len(runs) == 50 and runs[0].startswith("run 'a_wide'") and runs[-1].startswith("run 'r48'")
    assert "4 more run(s) with snapshots: 'r49', 'r50', 'r51', 'r52' (--all lists them)" in out
    assert ("30 run(s) with nothing recorded yet: 'starting00', 'starting01', 'starting02', 'starting03', "
            "'starting04', ... (30 in all) (--all lists them)") in out
    assert "  3 more layer(s): 'l12', 'l13', 'l14' (--all lists them)" in out
    assert "  1 of them constant at some snapshot (left out): 'l13'" in out
    assert "  embeddings: pca-0, pca-1, pca-2, pca-3, pca-4, pca-5" in out  # keys without a stored description
    assert "  2 more embedding method(s) (--all lists them)" in out
    # a_wide: 1 + 12 layers + 2 + the embeddings + 1; 49 runs of one layer: 2 lines each; the two summing-up lines
    assert len(out) == 17 + 49 * 2 + 2

    assert main(["info", "--all", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len([line for line in out if line.startswith("run ")]) == 84
    assert len(out) == (1 + 15 + 1) + 53 * 2 + 30 * 5 and not any("more" in line for line in out)
    assert "  embeddings: " + ", ".join(f"pca-{k}" for k in range(8)) in out


@pytest.mark.parametrize("command, option", [("embed", "--steps"), ("embed", "--layers"), ("embed", "--runs"),
                                             ("meta", "--runs"), ("meta", "--layers")])
def test_an_empty_selection_is_an_error(tmp_path, capsys, command, option, small_logdir):
    """Non-regression: `--steps ""` did nothing and exited 0."""
    small_logdir(tmp_path)
    assert main([command, str(tmp_path), option, ""]) == 2
    assert f"{option} was given but names nothing" in capsys.readouterr().err


def test_a_logdir_that_is_a_file_says_so(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    assert main(["info", str(tmp_path / "f")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_warnings_are_one_line_each_without_source_paths(tmp_path, capsys, small_logdir, new_run):
    small_logdir(tmp_path, runs=("a", "b"))
    (new_run(tmp_path / "c").root / "manifest.json").write_text("[]")  # damaged on disk: no store call writes this
    assert main(["info", str(tmp_path)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("repviz info: warning: skipped run 'c': ") and "holds a JSON list" in err[0]


def test_meta_lists_left_out_representations_once(tmp_path, capsys, small_logdir, new_run):
    small_logdir(tmp_path)
    new_run(tmp_path / "a").write_activation("dense", 3, np.full((30, 4), np.nan, np.float32))
    assert main(["meta", str(tmp_path), "--no-robustness", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count("('a', 'dense', 3)") == 1 and "warning" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only directories")
def test_a_read_only_logdir_is_one_line(tmp_path, capsys, small_logdir):
    small_logdir(tmp_path)
    for p in [tmp_path, *tmp_path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o555)
    try:
        assert main(["embed", str(tmp_path), "--method", "pca"]) == 2
        err = capsys.readouterr().err
        assert "Permission denied" in err and "--out DIR" in err
    finally:
        for p in [tmp_path, *tmp_path.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)


def test_meta_ignores_a_run_killed_before_its_probe_was_stored(tmp_path, capsys, small_logdir, new_run):
    """Non-regression: a manifest without probe ids gave a FileNotFoundError traceback from `repviz meta`."""
    small_logdir(tmp_path, runs=("a",))
    new_run(tmp_path / "b", fingerprint={"model": "m2"})
    assert main(["meta", str(tmp_path), "--no-robustness", "--no-progress"]) == 0
    assert "3 representations of 30 probes from run(s) a" in capsys.readouterr().out


def test_results_can_be_written_outside_a_read_only_logdir(tmp_path, capsys, small_logdir):
    """Non-regression: a read-only log directory had no way out (users keep shared experiment directories
    read-only); --out writes results elsewhere and reads both as one overlay."""
    logs, out = small_logdir(tmp_path / "logs", runs=("a", "b")), tmp_path / "results"
    assert main(["embed", str(logs), "--method", "pca", "--steps", "0,1"]) == 0  # some results in the log dir
    before = {p: p.stat().st_mtime_ns for p in logs.rglob("*")}
    assert main(["embed", str(logs), "--method", "pca", "--out", str(out)]) == 0
    assert "2 computed, 4 cached" in capsys.readouterr().out  # step 2 of each run; steps 0-1 read from logs
    assert main(["meta", str(logs), "--no-robustness", "--no-progress", "--out", str(out)]) == 0
    assert {p: p.stat().st_mtime_ns for p in logs.rglob("*")} == before  # nothing written into the log dir
    overlay = open_logdir(logs, out=out)
    run = overlay.run("a")
    assert run.embeddings.steps(run.embeddings.key("pca"), "dense") == [0, 1, 2]
    assert run.embedding("dense", 2, "pca").shape == (30, 2) and run.embedding("dense", 0, "pca").shape == (30, 2)
    assert MetaResult.load(overlay, "meta-dist-chord-mds").coords.shape == (6, 2)
    assert "meta-dist-chord-mds" not in open_logdir(logs).artifact_names()
    assert main(["info", str(logs), "--out", str(out)]) == 0 and "  embeddings: pca\n" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["embed", "meta"])
def test_scheduler_without_dask_names_the_extra(tmp_path, capsys, monkeypatch, command, new_run):
    w = new_run(tmp_path / "r1", {"d": (4, 3)})
    w.write_probe(np.arange(4))
    w.write_activation("d", 0, np.eye(4, 3, dtype=np.float32))
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now fails, as when not installed
    assert main([command, str(tmp_path), "--scheduler", "local[2]"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"repviz {command}: error: running on a Dask cluster needs "
                                               f"dask.distributed, which is not installed")
    assert err[0].endswith('install it with: pip install ".[dask]" in the repviz checkout, or pip install '
                           '"dask[distributed]>=2024.1"')


# --- messages of the directory options (--out, --results, --figures) --------------------------------------------

@pytest.mark.parametrize("command", [
    ["embed", "{logs}", "--method", "pca", "--out", "{file}"],
    ["embed", "{logs}", "--method", "pca", "--out", "{file}/below"],
    ["meta", "{logs}", "--no-progress", "--out", "{file}"],
    ["info", "{logs}", "--out", "{file}"],
    ["place", "{logs}", "--run", "a", "--into", "b", "--out", "{file}"],
    ["similarity", "{logs}", "--runs", "a", "--figures", "{file}"],
    ["similarity", "{logs}", "--runs", "a", "--results", "{file}"],
    ["export", "{logs}", "--out", "{file}"]])
def test_a_directory_option_naming_a_file_is_one_line(tmp_path, capsys, small_logdir, command):
    """Non-regression: --out naming a file gave "[Errno 17] File exists" or "[Errno 20] Not a directory"."""
    logs, file = small_logdir(tmp_path / "logs", runs=("a", "b")), tmp_path / "notes.txt"
    file.write_text("not a directory")
    assert main([arg.format(logs=logs, file=file) for arg in command]) == 2
    option = command[-2]
    assert capsys.readouterr().err.splitlines() == [f"repviz {command[0]}: error: {option} must be a directory: "
                                                    f"{file} is a file"]


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("command, option", [(["embed", "--method", "pca"], "--out"),
                                             (["meta", "--no-progress"], "--out"),
                                             (["similarity", "--runs", "a"], "--results")])
def test_a_log_directory_that_cannot_be_written_names_the_way_out(tmp_path, capsys, monkeypatch, small_logdir, code,
                                                                  command, option):
    """Non-regression: a read-only file system gave a bare "[Errno 30] Read-only file system" (only a
    PermissionError got the hint), and similarity's hint named --out, its figures folder, not --results."""
    from repviz.store import files

    logs = small_logdir(tmp_path / "logs")

    def refuse(path):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(files, "temp_beside", refuse)
    assert main([command[0], str(logs), *command[1:]]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"repviz {command[0]}: error: [Errno {code}] ")
    assert err[0].endswith(f" (write the results elsewhere with {option} DIR)")


def test_similarity_writes_its_figures_with_figures_and_still_with_out(tmp_path, capsys, small_logdir):
    """--out is where results go when the log directory is read-only in every other command; in similarity it
    was the figures folder: now --figures, the old spelling kept with one line saying so."""
    pytest.importorskip("matplotlib")
    logs = small_logdir(tmp_path / "logs")
    assert main(["similarity", str(logs), "--runs", "a", "--no-progress", "--figures", str(tmp_path / "new")]) == 0
    assert capsys.readouterr().err == "" and {p.suffix for p in (tmp_path / "new").iterdir()} >= {".csv", ".png"}
    assert main(["similarity", str(logs), "--runs", "a", "--no-progress", "--out", str(tmp_path / "old")]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "repviz similarity: warning: --out is deprecated here, use --figures DIR for the figures (--results DIR keeps "
        "the cache outside a read-only log directory)"]
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == sorted(p.name for p in (tmp_path / "new").iterdir())


def test_placing_into_layouts_without_snapshots_says_what_to_do(tmp_path, capsys, small_logdir):
    """Non-regression: a layout key whose snapshots were all gone (an embedding stopped early, files removed) said
    "... (its steps: [0, 1, 2]; the layouts': [])"."""
    logs = small_logdir(tmp_path / "logs", runs=("a", "b"))
    assert main(["embed", str(logs), "--method", "pca", "--runs", "b"]) == 0
    for snapshot in (logs / "b").rglob("embeddings/*/*/*.npy"):
        snapshot.unlink()
    capsys.readouterr()
    assert main(["place", str(logs), "--run", "a", "--into", "b", "--method", "pca"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("repviz place: error: run 'b' holds no snapshot of its 'pca-")
    assert err[0].endswith("layouts; compute them first (repviz embed LOGDIR --runs b with the same method), then "
                           "place")
