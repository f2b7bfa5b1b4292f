"""The showcase (``repviz demo``, ``repviz export``): the seed checks on hand-made maps, the stratified probe and
the log-spaced schedule; then (slow) ``--quick`` end to end: train -> embed -> meta -> export -> the plugin's
routes, and two ``--quick`` runs giving the same numbers."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from repviz.cli import main
from repviz.datasets import stratified_indices
from repviz.meta import MetaResult, seed_checks

RUNS = {"a/s0": ("a", 0), "a/s1": ("a", 1), "b/s0": ("b", 0), "b/s1": ("b", 1)}
LAYERS = ("h1", "h2", "out")


def _map(close: dict | None = None, step: int = 1) -> MetaResult:
    """A hand-made map: each (architecture, layer) 10 apart, its two seeds 0.1 apart, each also at step 0 (far
    away) and an input landmark; ``close`` sets chosen distances at ``step`` (both ways)."""
    keys, pts = [("<input>", "input", 0)], [(100.0, 100.0)]
    for a, arch in enumerate("ab"):
        for j, layer in enumerate(LAYERS):
            for seed in (0, 1):
                keys += [(f"{arch}/s{seed}", layer, 0), (f"{arch}/s{seed}", layer, step)]
                pts += [(-50.0 - len(keys), 0.0), (30.0 * a, 10.0 * j + 0.1 * seed)]
    pts = np.array(pts)
    D = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    for (r1, l1), (r2, l2) in (close or {}).items():
        i, j = keys.index((r1, l1, step)), keys.index((r2, l2, step))
        D[i, j] = D[j, i] = 0.01
    return MetaResult(keys, pts.astype(np.float32), D, {"transform": "dist"})


def test_seed_checks_all_identified():
    checks = seed_checks(_map(), RUNS, output_layers={"out"})
    assert checks.step == 1
    assert (checks.layer_identification, checks.n_layers) == (1.0, 12)
    assert (checks.architecture_separation, checks.n_hidden) == (1.0, 8)
    assert checks.misses == []


def test_seed_checks_count_a_wrong_layer_and_a_wrong_architecture():
    close = {("a/s0", "h2"): ("a/s1", "h1"),  # right network, wrong layer
             ("b/s1", "out"): ("a/s0", "out"),  # wrong network, but output layers are not in separation
             ("b/s1", "h1"): ("a/s0", "h1")}  # wrong network
    checks = seed_checks(_map(close), RUNS, output_layers={"out"})
    pairs = [(x, y) for x, y in close.items()] + [(y, x) for x, y in close.items()]  # distances are symmetric
    assert sorted((m[0][:2], m[1][:2]) for m in checks.misses) == sorted(pairs)
    assert checks.layer_identification == pytest.approx(6 / 12)
    assert checks.architecture_separation == pytest.approx(6 / 8)


def test_seed_checks_ignore_runs_of_the_same_seed():
    """A same-seed run of another architecture, however close, is not a candidate (it may share initial weights)."""
    checks = seed_checks(_map({("b/s0", "h1"): ("a/s0", "h1")}), RUNS, output_layers={"out"})
    assert checks.misses == [] and checks.layer_identification == 1.0


def test_seed_checks_step_and_errors():
    result = _map()
    assert seed_checks(result, RUNS, step=0).step == 0
    with pytest.raises(ValueError, match="at least two seeds"):
        seed_checks(result, {"a/s0": ("a", 0), "b/s0": ("b", 0)})
    with pytest.raises(ValueError, match="share no snapshot"):
        seed_checks(result, {**RUNS, "c/s0": ("c", 0)})


def test_stratified_indices():
    labels = np.repeat(np.arange(10), [100] * 9 + [3])  # class 9 has only 3 rows
    idx = stratified_indices(labels, 205, random_state=1)
    assert len(idx) == len(set(idx)) == 205 and np.all(np.diff(idx) > 0)
    counts = np.bincount(labels[idx], minlength=10)
    assert counts[9] == 3 and counts[:9].max() - counts[:9].min() <= 1
    assert np.array_equal(idx, stratified_indices(labels, 205, random_state=1))
    assert not np.array_equal(idx, stratified_indices(labels, 205, random_state=2))
    with pytest.raises(ValueError, match="n=2000 rows requested but labels has 903"):
        stratified_indices(labels, 2000)


def test_log_spaced_epochs():
    from repviz.capture import log_spaced_epochs

    assert log_spaced_epochs(8, 4) == [1, 2, 4, 8]
    assert log_spaced_epochs(10, 5) == [1, 2, 3, 6, 10]
    assert log_spaced_epochs(2, 4) == [1, 2]
    with pytest.raises(ValueError, match="'epochs' parameter of log_spaced_epochs"):
        log_spaced_epochs(0, 3)


@pytest.mark.slow
def test_the_training_process_imports_tensorflow_without_its_start_up_lines_or_unused_packages():
    """Before: the demo printed TensorFlow's two start-up lines twice (each of its two native libraries prints
    them as it loads; TF_CPP_MIN_LOG_LEVEL does not reach them). The training process imports it with them held
    back; what else native code writes meanwhile still comes through. Keras imports matplotlib, pandas,
    scikit-learn, IPython and Pillow wherever they are installed (all of them are here); the training process
    leaves them out and still fits."""
    import importlib.util
    import subprocess
    import sys

    from repviz.demo import UNUSED_BY_TRAINING

    assert [name for name in ("matplotlib", "pandas", "sklearn") if importlib.util.find_spec(name) is None] == []
    code = ("import os, sys\nfrom repviz.demo import UNUSED_BY_TRAINING, _native_startup_held, _unused_packages_left_out\n"
            "_unused_packages_left_out()\nwith _native_startup_held():\n"
            "    import tensorflow\n    os.write(2, b'kept\\n')\nsys.stderr.write('after\\n')\n"
            "import keras, numpy as np\nmodel = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
            "model.compile('sgd', 'mse')\nmodel.fit(np.ones((8, 3)), np.ones((8, 2)), verbose=0)\n"
            "print(sorted(name for name in UNUSED_BY_TRAINING if sys.modules.get(name) is not None))\n")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": "tensorflow",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "absl::InitializeLog" not in done.stderr and "oneDNN" not in done.stderr, done.stderr
    assert done.stderr.startswith("kept\nafter\n"), done.stderr
    assert done.stdout.splitlines()[-1] == "[]", (UNUSED_BY_TRAINING, done.stdout)


# ----------------------------------------------------------------------------------------------------------------
# --quick end to end (slow: trains six small networks)
# ----------------------------------------------------------------------------------------------------------------

def _numbers(text: str) -> list[str]:
    """The summary's figures: accuracies, quality scores, check percentages (not the timings or paths)."""
    summary = text[text.index("test accuracy at the last epoch"):text.index("browse it:")]
    return re.findall(r"\d+\.\d+|\d+%", summary)


@pytest.fixture(scope="session")
def quick_demo(build_once):
    """``quick_demo() -> (logdir, printed)``: one ``repviz demo --quick`` per test session, shared by the workers."""

    def run(root: Path) -> None:
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["demo", str(root / "logs"), "--quick"])
        assert code == 0
        (root / "printed.txt").write_text(out.getvalue())

    def get() -> tuple[Path, str]:
        root = build_once("quick-demo", run)
        return root / "logs", (root / "printed.txt").read_text()

    return get


@pytest.fixture
def quick(quick_demo):
    return quick_demo()


@pytest.mark.slow
def test_quick_demo_writes_runs_maps_and_summary(quick):
    import repviz

    logs, text = quick
    logdir = repviz.open_logdir(logs)
    seeds = sorted(f"{a}/seed{s}" for a in ("sigmoid", "relu", "cnn") for s in (0, 1))
    assert sorted(logdir.runs) == sorted([*seeds, "relu/training-digits"])
    for name in seeds:
        run = logdir.run(name)
        assert run.steps() == [0, 1, 2]
        assert run.layers == (["conv1", "conv2", "dense", "softmax"] if name.startswith("cnn") else
                              ["hidden1", "hidden2", "softmax"])
        assert np.array_equal(np.bincount(run.probe.labels), [20] * 10)  # stratified: 20 per class
        assert run.probe.thumbnails.shape == (200, 28, 28) and run.activations("softmax", 2).shape == (200, 10)
        for method in ("pca", "tsne"):
            assert run.embedding("softmax", 2, method=method).shape == (200, 2)
    assert text.splitlines()[0].lstrip().startswith("sigmoid/seed0: 2 epochs on 2,000 digits, test accuracy")
    assert "embeddings: 120 computed, 0 cached, 0 failed" in text
    # the second probe set: 40 training digits recorded after training, placed into relu/seed0's t-SNE layouts
    placed, layout = logdir.run("relu/training-digits"), logdir.run("relu/seed0")
    assert placed.steps() == [2] and placed.embeddings.method_keys() == []
    coords, info = placed.placed("relu/seed0", layout.embeddings.key("tsne"), "hidden2", 2)
    assert coords.shape == (40, 2) and info["placed_into"]["run"] == "relu/seed0"
    assert re.search(r"placed 40 training digits \(relu/training-digits\) into the t-SNE layouts of relu/seed0 at "
                     r"epoch 2: 10-NN accuracy 0\.\d\d", text)
    for transform in ("dist", "cka"):
        meta = MetaResult.load(logs, f"meta-{transform}-chord-tsne")
        assert len(meta) == (4 * 2 + 3 * 4) * 3 + 1 and ("<input>", "input", 0) in meta.keys
    assert re.search(r"layer identification at epoch 2 .*: dist \d+% of 20, cka \d+% of 20", text)
    assert re.search(r"architecture separation at epoch 2 .*: dist \d+% of 14, cka \d+% of 14", text)
    assert "target: layer identification (cka) >= 90%:" in text
    assert re.search(r"layer identification from the CKA heatmaps at epoch 2 .*: sigmoid \d of 3, relu \d of 3, "
                     r"cnn \d of 4", text)
    assert f"browse it: tensorboard --logdir {logs}" in text


@pytest.mark.slow
def test_quick_demo_export_and_plugin_routes(quick, tmp_path):
    import repviz

    pytest.importorskip("matplotlib")
    from urllib.parse import quote

    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from tensorboard_plugin_repviz import loader
    from werkzeug import test as wtest
    from werkzeug import wrappers

    logs, _ = quick
    assert main(["export", str(logs), "--out", str(tmp_path / "fig")]) == 0
    files = {p.name for p in (tmp_path / "fig").iterdir()}
    for stem in ["meta-dist-chord-tsne", "meta-cka-chord-tsne",
                 *(f"layer-{layer}-{m}" for layer in ("hidden1", "hidden2", "softmax", "conv1", "conv2", "dense")
                   for m in ("pca", "tsne"))]:
        assert {f"{stem}.png", f"{stem}.svg"} <= files
    for stem in [*(f"similarity-{arch}_seed0-vs-{arch}_seed1-step2" for arch in ("sigmoid", "relu", "cnn")),
                 "similarity-relu_training-digits-vs-relu_training-digits-step2"]:  # the placed set: its own layers
        assert {f"{stem}.{ext}" for ext in ("png", "svg", "csv", "json")} <= files
    assert len(files) == 14 * 2 + 2 + 4 * 4
    rows = list(csv.DictReader(open(tmp_path / "fig" / "quality.csv")))
    assert len(rows) == 20 * 2 and {r["step"] for r in rows} == {"2"}
    assert all(0.5 < float(r["trustworthiness"]) <= 1 for r in rows)

    plugin = loader.RepvizLoader().load(base_plugin.TBContext(logdir=str(logs)))
    client = wtest.Client(application.TensorBoardWSGI([plugin]), wrappers.Response)
    base = "/data/plugin/repviz/"
    try:
        index = json.loads(client.get(base + "runs").get_data())
        runs = {run["name"]: run for run in index["runs"]}
        assert len(runs) == 7 and set(index["meta"]) == {"meta-dist-chord-tsne", "meta-cka-chord-tsne"}
        r = client.get(base + "meta_result?name=meta-cka-chord-tsne")
        assert r.status_code == 200 and len(json.loads(r.get_data())["keys"]) == 61
        (tsne,) = [e for e in runs["cnn/seed1"]["embeddings"] if e["method"] == "tsne"]
        r = client.get(base + f"coords?run={quote('cnn/seed1', safe='')}&layer=conv2&step=2&key={tsne['key']}")
        stored = repviz.open_logdir(logs).run("cnn/seed1").embeddings.read(tsne["key"], "conv2", 2)
        assert r.status_code == 200 and r.get_data() == np.asarray(stored, "<f4").tobytes()
        assert client.get(base + f"labels?run={quote('relu/seed0', safe='')}").status_code == 200
    finally:
        plugin.jobs.close()


@pytest.mark.slow
def test_two_quick_runs_give_the_same_numbers(quick_demo, tmp_path, capsys):
    assert main(["demo", str(tmp_path / "again"), "--quick"]) == 0  # meanwhile another worker may run the first
    _, first = quick_demo()
    printed = capsys.readouterr()
    assert _numbers(printed.out) == _numbers(first)
    assert "WARNING" not in printed.err, printed.err  # TensorFlow's retracing warning came twice
    assert len(_numbers(first)) > 50


@pytest.mark.slow
def test_a_second_demo_into_the_same_directory_trains_new_runs_beside_the_first(tmp_path, monkeypatch):
    """A log directory that holds the demo's runs gets the new trainings as `<run>-2` (never spliced onto the
    first), and the demo's later steps read those (``cfg.runs``, ``cfg.accuracy``). Two of the architectures: the
    one whose second probe set is placed and one more."""
    import repviz
    import repviz.demo
    from repviz.demo import DemoConfig, train_networks

    monkeypatch.setattr(repviz.demo, "ARCHITECTURES", ("relu", "cnn"))

    def train() -> DemoConfig:
        cfg = DemoConfig.quick_config(tmp_path / "logs", epochs=1, n_probe=20, n_train=100, snapshots=1)
        train_networks(cfg, out=lambda line: None)
        return cfg

    first, second = train(), train()
    assert sorted(first.runs) == sorted(f"{a}/seed{s}" for a in ("relu", "cnn") for s in (0, 1))
    assert sorted(second.runs) == sorted(f"{name}-2" for name in first.runs)
    assert second.runs["cnn/seed1-2"] == ("cnn", 1) and set(second.accuracy) == set(second.runs)
    assert (first.placed, second.placed) == (("relu/training-digits", "relu/seed0"),
                                             ("relu/training-digits-2", "relu/seed0-2"))
    logdir = repviz.open_logdir(tmp_path / "logs")
    assert all(logdir.run(name).steps() == [0, 1] for name in [*first.runs, *second.runs])


def test_runs_embedded_while_the_others_train_are_counted_as_computed(tmp_path, cluster_run):
    """The demo embeds each network's run as soon as it is trained (EmbeddingWhileTraining, in a thread of the
    main process); the embedding step then finds them stored and still says they were computed by the demo."""
    import time

    from repviz.demo import DemoConfig, EmbeddingWhileTraining, embed_layers

    for name in ("a", "b"):
        cluster_run(tmp_path / name, layers=("h",), steps=range(2), n=60)
    cfg = DemoConfig(tmp_path, jobs=1, runs={"a": ("x", 0), "b": ("x", 1)})
    embedding = EmbeddingWhileTraining(cfg)
    embedding.add("a")
    deadline = time.monotonic() + 120
    while not cfg.embedded and time.monotonic() < deadline:
        time.sleep(0.05)
    embedding.stop()
    assert [r.computed for r in cfg.embedded] == [4]  # run a: PCA and t-SNE at two snapshots
    lines = []
    embed_layers(cfg, lines.append)
    assert lines[0].startswith("embeddings: 8 computed, 0 cached, 0 failed in ")
    assert {row["run"] for row in cfg.scores} == {"a", "b"}


def test_export_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.delitem(sys.modules, "repviz.export", raising=False)
    (tmp_path / "logs").mkdir()
    assert main(["export", str(tmp_path / "logs"), "--out", str(tmp_path / "fig")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == 'repviz export: error: repviz export needs matplotlib; install it with: pip install ".[export]" in the repviz checkout, or pip install "matplotlib>=3.8"'
    assert not Path(tmp_path / "fig").exists()


def test_serve_starts_tensorboard_on_localhost_instead_of_printing(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    import repviz.demo

    started = []

    class FakeTensorBoard:
        def __init__(self, argv):
            started.append(argv)

        def wait(self):
            return 0

    monkeypatch.setattr(repviz.demo, "run_demo", lambda cfg: cfg)  # the training is tested above
    monkeypatch.setattr(subprocess, "Popen", FakeTensorBoard)
    assert main(["demo", str(tmp_path), "--quick", "--serve", "--port", "7007"]) == 0
    assert started == [[sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path), "--host", "127.0.0.1",
                        "--port", "7007"]]
    assert "browse it:" not in capsys.readouterr().out


def test_export_writes_grids_maps_and_tables_from_the_store(tmp_path, new_run):
    """A hand-made log directory (two seeds of one layer, a t-SNE key, a meta-SNE map): the expected files (the
    seeds' CKA heatmap among them), the table read back from the stored scores, layer names made safe for file
    names."""
    pytest.importorskip("matplotlib")
    from repviz.export import export_figures
    from repviz.store import open_logdir

    rng = np.random.default_rng(0)
    for run in ("net/seed0", "net/seed1"):
        w = new_run(tmp_path / "logs" / run, {"enc/dense#0": (30, 4)})
        w.write_probe(np.arange(30), np.arange(30) % 3)
        for step in (0, 1):
            w.write_activation("enc/dense#0", step, rng.normal(size=(30, 4)).astype(np.float32))
        stored = open_logdir(tmp_path / "logs").run(run)
        stored.embeddings.write_method("tsne-abc", {"method": "tsne", "params": {}})
        for step in (0, 1):
            stored.embeddings.write("tsne-abc", "enc/dense#0", step, rng.normal(size=(30, 2)),
                                   {"scores": {"trustworthiness": 0.9 + step / 100, "knn_accuracy": 0.5}})
    keys = [("<input>", "input", 0)] + [(r, "enc/dense#0", s) for r in ("net/seed0", "net/seed1") for s in (0, 1)]
    MetaResult(keys, rng.normal(size=(5, 2)).astype(np.float32), np.ones((5, 5)),
               {"transform": "cka", "embedding": "tsne"}).save(tmp_path / "logs", "meta-cka-chord-tsne")

    events = []
    written = export_figures(tmp_path / "logs", tmp_path / "fig", formats=["png", "svg"],
                             progress=lambda *event: events.append(event))
    assert events == [("figures", 0, 3, "tsne enc/dense#0"), ("figures", 1, 3, "meta-cka-chord-tsne"),
                      ("figures", 2, 3, "similarity heatmaps"), ("figures", 3, 3, "")]
    names = sorted(p.name for p in written)
    assert names == sorted(p.name for p in (tmp_path / "fig").iterdir()) == [
        "layer-enc_dense_0-tsne.png", "layer-enc_dense_0-tsne.svg", "meta-cka-chord-tsne.png",
        "meta-cka-chord-tsne.svg", "quality.csv", "quality.md"] + [
        f"similarity-net_seed0-vs-net_seed1-step1.{ext}" for ext in ("csv", "json", "png", "svg")]
    assert (tmp_path / "fig" / "layer-enc_dense_0-tsne.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(open(tmp_path / "fig" / "quality.csv")))
    assert [(r["run"], r["layer"], r["method"], r["step"], r["trustworthiness"], r["continuity"]) for r in rows] == [
        ("net/seed0", "enc/dense#0", "tsne", "1", "0.91", ""), ("net/seed1", "enc/dense#0", "tsne", "1", "0.91", "")]
    assert "| net/seed0 | enc/dense#0 | tsne | 1 | 0.910 | - | - | 0.500 |" in (tmp_path / "fig" / "quality.md").read_text()
    with pytest.raises(ValueError, match="figure formats \\['docx'\\] are not supported"):
        export_figures(tmp_path / "logs", tmp_path / "fig", formats=["docx"])


def test_export_pairs_the_seeds_of_a_network_and_not_a_probe_set_placed_into_it(tmp_path, new_run):
    """Runs of one group recorded on other inputs (a second probe set, to place) are not its seeds."""
    from repviz.export import run_pairs
    from repviz.store import open_logdir

    for run, inputs in (("net/seed0", "digits"), ("net/seed1", "digits"), ("net/test-digits", "other digits")):
        w = new_run(tmp_path / run, fingerprint={"model": "net", "probe": inputs, "inputs": inputs})
        w.write_probe(np.arange(30), np.arange(30) % 3)
        w.write_activation("dense", 0, np.zeros((30, 4), np.float32))
    assert run_pairs(open_logdir(tmp_path)) == [("net/seed0", "net/seed1"), ("net/test-digits", "net/test-digits")]
