"""The plugin's cached listing: is_active and the index do not walk the log directory on every call, new runs
appear after the time-to-live, unchanged runs keep their parsed records, and the loader keeps all samples."""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytest
from tensorboard_plugin_repviz import catalog as catalog_module
from tensorboard_plugin_repviz.catalog import Catalog
from tensorboard_plugin_repviz.loader import RepvizLoader

from repviz.store import NotFoundError, RunWriter


def _run(path, steps=(0,)):
    w = RunWriter(path)
    w.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {"a": {"stored_shape": [5, 2]}}})
    w.write_probe(np.arange(5))
    for s in steps:
        w.write_activation("a", s, np.zeros((5, 2), np.float32))
    return w


def _counting(monkeypatch):
    scans = []
    real = catalog_module.LogDir

    def counted(path, out=None):
        scans.append(path)
        return real(path, out)

    monkeypatch.setattr(catalog_module, "LogDir", counted)
    return scans


def _counting_summaries(monkeypatch) -> list[str]:
    """The names of the runs the index summarises from now on, in order."""
    from tensorboard_plugin_repviz import data

    built = []
    real = data._run_summary
    monkeypatch.setattr(data, "_run_summary", lambda run: built.append(run.name) or real(run))
    return built


def test_is_active_reuses_the_listing(tmp_path, monkeypatch):
    for i in range(30):
        _run(tmp_path / f"run{i:02d}")
    scans = _counting(monkeypatch)
    catalog = Catalog(str(tmp_path), ttl=60)
    assert all(catalog.is_active() for _ in range(200))
    assert len(scans) == 1
    assert len(catalog.runs()) == 30


def test_new_runs_appear_after_the_ttl(tmp_path):
    _run(tmp_path / "a")
    catalog = Catalog(str(tmp_path), ttl=0.2)
    assert list(catalog.runs()) == ["a"]
    old = catalog.runs()["a"]
    _run(tmp_path / "b")
    deadline = time.time() + 10
    while "b" not in catalog.runs() and time.time() < deadline:
        time.sleep(0.05)
    assert sorted(catalog.runs()) == ["a", "b"]
    assert catalog.runs()["a"] is old  # same manifest: the Run object (and its parsed records) is kept


def test_a_name_not_listed_is_looked_up_alone_never_by_a_rescan(tmp_path, monkeypatch):
    _run(tmp_path / "a")
    scans = _counting(monkeypatch)
    catalog = Catalog(str(tmp_path), ttl=60)
    assert list(catalog.runs()) == ["a"] and len(scans) == 1
    for _ in range(50):  # bad names cannot make the server walk the tree
        with pytest.raises(NotFoundError, match="'nope' is not in the log directory"):
            catalog.run("nope")
    _run(tmp_path / "group" / "new")  # created after the listing: served at once, and listed from then on
    assert catalog.run("group/new").name == "group/new"
    assert sorted(catalog.runs()) == ["a", "group/new"]
    assert len(scans) == 1


def test_a_name_is_found_alone_only_where_the_walk_finds_it(tmp_path):
    """What the walk of the log directory would not list is not found by name either: a run outside it, one
    reached through a link to a directory, one inside a run's data, a name spelled another way."""
    logs = tmp_path / "logs"
    _run(logs / "a")
    _run(tmp_path / "outside")
    _run(logs / "a" / "plugins" / "repviz" / "activations" / "nested")
    (logs / "link").symlink_to(logs / "a", target_is_directory=True)
    (logs / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    catalog = Catalog(str(logs), ttl=60)
    assert list(catalog.runs()) == ["a"]
    for name in ("../outside", str(tmp_path / "outside"), "link", "out", "a/plugins/repviz/activations/nested",
                 "a/", "./a", "a//", "", ".", "a/.."):
        with pytest.raises(NotFoundError):
            catalog.run(name)
    assert list(catalog.runs()) == ["a"]


def test_background_rescans_are_spaced_by_the_scan_duration(tmp_path, monkeypatch):
    """A log directory whose scan takes seconds is not walked again every ``ttl``."""
    _run(tmp_path / "a")
    scans = _counting(monkeypatch)
    monkeypatch.setattr(Catalog, "SCAN_SPACING", 1e9)
    catalog = Catalog(str(tmp_path), ttl=0)
    for _ in range(20):
        catalog.runs()
        time.sleep(0.005)
    assert len(scans) == 1


@pytest.mark.parametrize("spacing, builds", [(0.0, 5), (1e9, 1)])
def test_a_cached_value_is_kept_for_a_multiple_of_its_build_time(tmp_path, monkeypatch, spacing, builds):
    """The runs index of a huge log directory is not rebuilt on every poll once its ttl has passed."""
    monkeypatch.setattr(Catalog, "SCAN_SPACING", spacing)
    catalog, built = Catalog(str(tmp_path), ttl=60), []

    def build():
        time.sleep(0.001)
        built.append(1)
        return len(built)

    for _ in range(5):
        catalog.cached("index", build, ttl=0)
    assert len(built) == builds


def test_not_a_directory_lists_nothing(tmp_path):
    assert not Catalog(str(tmp_path / "missing")).is_active()
    assert not Catalog("").is_active()
    assert not Catalog(str(tmp_path)).is_active()


def test_loader_keeps_all_samples_unless_the_user_chose():
    flags = argparse.Namespace(samples_per_plugin={})
    RepvizLoader().fix_flags(flags)
    assert flags.samples_per_plugin == {"repviz": 0}
    flags = argparse.Namespace(samples_per_plugin={"repviz": 5})
    RepvizLoader().fix_flags(flags)
    assert flags.samples_per_plugin == {"repviz": 5}


def test_run_stamp_changes_with_every_listed_change(tmp_path):
    """``Run.stamp`` (the store addition the plugin's index cache relies on) follows records and embeddings."""
    from repviz.store import open_logdir

    writer = _run(tmp_path / "r")
    run = open_logdir(tmp_path).run("r")
    seen = {run.stamp()}
    assert run.stamp() in seen  # stable while nothing changes

    def changed():
        stamp = run.stamp()
        assert stamp not in seen
        seen.add(stamp)

    writer.write_activation("a", 1, np.ones((5, 2), np.float32))
    changed()
    for key, step in (("pca-1", 0), ("pca-1", 1), ("tsne-2", 0)):  # a new key, a new step of it, another key
        time.sleep(0.01)  # directory mtimes have at least this resolution everywhere we run
        run.embeddings.write(key, "a", step, np.zeros((5, 2), np.float32), {})
        changed()


def test_log_directory_walk_finds_nested_runs_and_skips_run_data(tmp_path):
    for name in ("a", "group/b", "group/deeper/c"):
        _run(tmp_path / name)
    _run(tmp_path / "a" / "plugins" / "repviz" / "activations" / "nested")  # inside a run's data: not a run
    from repviz.store import open_logdir

    assert sorted(open_logdir(tmp_path).runs) == ["a", "group/b", "group/deeper/c"]


def test_index_rebuilds_a_run_only_when_it_changed(tmp_path, monkeypatch):
    from tensorboard_plugin_repviz import data

    writers = {name: _run(tmp_path / name) for name in ("a", "b")}
    built = _counting_summaries(monkeypatch)
    catalog = Catalog(str(tmp_path), ttl=60)
    data.runs_impl(catalog, [])
    data.runs_impl(catalog, [])
    assert sorted(built) == ["a", "b"]
    writers["b"].write_activation("a", 1, np.ones((5, 2), np.float32))
    index = data.runs_impl(catalog, [])
    assert sorted(built) == ["a", "b", "b"]
    assert [lay["steps"] for lay in index["runs"][1]["layers"]] == [[0, 1]]


def test_run_without_probe_yet_is_left_out_of_the_index(tmp_path):
    from tensorboard_plugin_repviz import data

    _run(tmp_path / "ok")
    RunWriter(tmp_path / "starting").begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {}})
    index = data.runs_impl(Catalog(str(tmp_path)), [])
    assert [r["name"] for r in index["runs"]] == ["ok"]


def test_a_run_left_out_of_the_index_is_not_summarised_again_until_it_changes(tmp_path, monkeypatch):
    """A run that cannot be summarised yet (no probe) is cached like a summary, keyed by the same stamp: an index
    of thousands of runs that recorded nothing does not try each again on every rebuild; its probe lists it."""
    from tensorboard_plugin_repviz import data

    _run(tmp_path / "ok")
    writer = RunWriter(tmp_path / "starting")
    writer.begin({"fingerprint": {"model": "m", "probe": "p"}, "layers": {"a": {"stored_shape": [5, 2]}}})
    built = _counting_summaries(monkeypatch)
    catalog = Catalog(str(tmp_path), ttl=60)
    for _ in range(3):
        assert [r["name"] for r in data.runs_impl(catalog, [])["runs"]] == ["ok"]
    assert sorted(built) == ["ok", "starting"]
    writer.write_probe(np.arange(5))
    assert [r["name"] for r in data.runs_impl(catalog, [])["runs"]] == ["ok", "starting"]
