"""Artifact kinds declared once (repviz.store.artifacts): a declaration is all a new per-snapshot artifact needs to be
written, read, checked and listed inside its run, and the built-in kinds keep the files they always had."""

import json
import os

import numpy as np
import pytest

from repviz import store
from repviz.store import ArtifactKind, RunWriter, open_logdir

FP = {"model": "m1", "probe": "p1"}


def _fault(array: np.ndarray) -> str | None:
    return None if array.ndim == 1 else f"holds shape {array.shape}, not one value per probe point"


#: A toy per-snapshot artifact, declared here and nowhere else: one saliency value per probe point.
SALIENCY = ArtifactKind("saliency", "saliency/{method_key}/{layer}/{step}.npy", "a saliency map",
                        "compute it again", sidecar={"method": lambda v: isinstance(v, str)}, check=_fault,
                        dtype="float32")


def _run(tmp_path, out=None):
    w = RunWriter(tmp_path / "logs" / "run")
    w.begin({"fingerprint": FP, "step_unit": "epoch", "layers": {"block/conv": {"stored_shape": [5, 3]}}})
    w.write_probe(np.arange(5))
    w.write_activation("block/conv", 3, np.ones((5, 3), np.float32))
    return open_logdir(tmp_path / "logs", out=out).run("run")


def test_a_declared_kind_is_written_read_and_listed(tmp_path):
    run = _run(tmp_path)
    saliency = run.artifact(SALIENCY)
    assert not saliency.has("grad", "block/conv", 3) and saliency.steps("grad", "block/conv") == []
    saliency.write("grad", "block/conv", 3, np.arange(5), {"method": "grad"})
    path = run.root / "saliency" / "grad" / store.path_key("block/conv") / "3.npy"
    assert saliency.path("grad", "block/conv", 3) == path and path.with_suffix(".json").exists()
    got = saliency.read("grad", "block/conv", 3)
    assert got.dtype == np.float32 and isinstance(got, np.memmap)
    np.testing.assert_array_equal(got, np.arange(5))
    assert saliency.info("grad", "block/conv", 3) == {"method": "grad"}
    assert saliency.steps("grad", "block/conv") == [3] and saliency.keys() == [("grad",)]
    assert saliency.keys(depth=2) == [("grad", store.path_key("block/conv"))]
    assert saliency.cached("grad", "block/conv", 3) is not None


def test_a_declared_kind_is_checked_as_declared(tmp_path):
    run = _run(tmp_path)
    saliency = run.artifact(SALIENCY)
    with pytest.raises(store.NotFoundError, match="run 'run' has no saliency stored for"):
        saliency.read("grad", "block/conv", 3)
    saliency.write("grad", "block/conv", 3, np.ones((5, 2)), {"method": 7})
    with pytest.raises(store.DamagedFileError, match="not one value per probe point; compute it again"):
        saliency.read("grad", "block/conv", 3)
    with pytest.raises(store.DamagedFileError, match="is not a saliency map's sidecar .method of the wrong type"):
        saliency.info("grad", "block/conv", 3)
    assert saliency.cached("grad", "block/conv", 3) is None


def test_a_declared_kind_keeps_inside_its_run(tmp_path):
    run = _run(tmp_path)
    saliency = run.artifact(SALIENCY)
    secret = tmp_path / "secret.npy"
    np.save(secret, np.arange(5, dtype=np.float32))
    path = saliency.path("grad", "block/conv", 3, write=True)
    path.parent.mkdir(parents=True)
    os.symlink(secret, path)
    with pytest.raises(store.UnsafeFileError, match="resolves outside its run"):
        saliency.read("grad", "block/conv", 3)
    assert saliency.cached("grad", "block/conv", 3) is None
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, run.root / "saliency" / "linked")
    with pytest.warns(RuntimeWarning, match="linked resolves outside"):
        assert saliency.keys() == [("grad",)]
    with pytest.raises(store.UnsafeFileError):
        saliency.write("linked", "block/conv", 3, np.arange(5), {"method": "grad"})
    assert not list(outside.iterdir())


def test_a_declared_kind_writes_under_out_and_reads_both(tmp_path):
    own = _run(tmp_path)
    own.artifact(SALIENCY).write("grad", "block/conv", 3, np.arange(5), {"method": "grad"})
    run = _run(tmp_path, out=tmp_path / "out")
    saliency = run.artifact(SALIENCY)
    np.testing.assert_array_equal(saliency.read("grad", "block/conv", 3), np.arange(5))
    saliency.write("grad", "block/conv", 4, np.arange(5), {"method": "grad"})
    assert saliency.path("grad", "block/conv", 4).is_relative_to(tmp_path / "out")
    assert saliency.steps("grad", "block/conv") == [3, 4]


def test_kinds_are_found_by_name_and_declared_once():
    assert store.KINDS["embedding"] is store.EMBEDDING and store.declare(store.PLACED) is store.PLACED
    with pytest.raises(ValueError, match="already declared"):
        store.declare(ArtifactKind("placed", "elsewhere/{step}.npy", "x", "y"))


def test_the_built_in_kinds_keep_their_files(tmp_path):
    """The on-disk layout of every built-in kind, spelled out: caches and results of older versions stay valid."""
    run = _run(tmp_path)
    crc = run.record("block/conv", 3)["crc32"]
    conv = store.path_key("block/conv")
    run.embeddings.write("pca-1", "block/conv", 3, np.zeros((5, 2)), {"scores": {}})
    emb_crc = store.checksum(np.zeros((5, 2), np.float32))
    expected = {
        run.embeddings.path("pca-1", "block/conv", 3): f"embeddings/pca-1/{conv}/3.npy",
        run.artifact("placed").path("other", "pca-1", "block/conv", 3): f"placed/other/pca-1/{conv}/3.npy",
        run.artifact("neighbor_graph").path("block/conv", 3, "k10-exact"):
            f"cache/neighbors/{conv}/3-k10-exact-{crc}.npy",
        run.artifact("density").path("pca-1", "block/conv", 3, "class-l4"):
            f"cache/density/pca-1/{conv}/3-class-l4-{emb_crc}.json",
    }
    for path, rel in expected.items():
        assert path == run.root / rel
    assert (store.META_RESULT, store.VECTOR_BANK, store.SIMILARITY_CACHE) == (
        ("result.json", "coords.npy", "distances.npy"), ("index.json", "chord2.npy", "norms2.npy"),
        ("index.json", "values.npy"))
    assert store.VECTOR_BANK.vector("a-1") == "a-1.npy"


def test_choices_lists_what_a_message_offers():
    from repviz._validation import choices

    assert choices([]) == "none" and choices(["a", "b"]) == "'a', 'b'"
    assert choices(range(25)).endswith("... (25 in all)")


class _Killed(BaseException):
    """A kill between two writes (a BaseException: nothing on the way catches it)."""


def _kill_at_the_array_write(monkeypatch) -> None:
    from repviz.store import artifacts

    def save_array(path, array):
        raise _Killed(path)

    monkeypatch.setattr(artifacts, "save_array", save_array)


def test_a_pair_torn_between_its_two_writes_is_damaged(tmp_path, monkeypatch):
    """The sidecar is written first and names the array it goes with (checksum, shape): killed before the array
    is replaced, the new sidecar beside the old array is read as damaged (read, info) or missing (cached), never
    as the new pair; a sidecar written before sidecars named their array is taken as it is."""
    run = _run(tmp_path)
    saliency = run.artifact(SALIENCY)
    saliency.write("grad", "block/conv", 3, np.arange(5), {"method": "grad"})
    sidecar = saliency.path("grad", "block/conv", 3).with_suffix(".json")
    assert json.loads(sidecar.read_text())["array"] == {"crc32": store.checksum(np.arange(5, dtype=np.float32)),
                                                        "shape": [5]}
    assert saliency.info("grad", "block/conv", 3) == {"method": "grad"}  # the pair's entry is the store's own
    with monkeypatch.context() as patch:
        _kill_at_the_array_write(patch)
        with pytest.raises(_Killed):
            saliency.write("grad", "block/conv", 3, np.arange(5) * 2, {"method": "grad2"})
    assert json.loads(sidecar.read_text())["method"] == "grad2"  # the new sidecar, the old array
    for reader in (saliency.read, saliency.info, saliency.read_pair):
        with pytest.raises(store.DamagedFileError, match="is not the array its sidecar was written with .* "
                                                         "compute it again"):
            reader("grad", "block/conv", 3)
    assert saliency.cached("grad", "block/conv", 3) is None
    sidecar.write_text(json.dumps({"method": "old"}))  # written before sidecars named their array
    np.testing.assert_array_equal(saliency.read("grad", "block/conv", 3), np.arange(5))
    assert saliency.info("grad", "block/conv", 3) == {"method": "old"}


def test_stored_embeddings_killed_between_their_two_writes_are_computed_again(tmp_path, cluster_run, monkeypatch):
    """Embeddings share the write order (sidecar, then array): a torn pair is no cached result; the next embed
    computes it again and the pair then reads."""
    from repviz.pipeline import embed_logdir

    cluster_run(tmp_path / "logs" / "r", layers=("a",), steps=range(2), n=40)
    embed_logdir(tmp_path / "logs", ["pca"], progress=False)
    run = open_logdir(tmp_path / "logs").run("r")
    key = run.embeddings.key("pca")
    before = np.array(run.embeddings.read(key, "a", 1))
    with monkeypatch.context() as patch:
        _kill_at_the_array_write(patch)
        with pytest.raises(_Killed):
            run.embeddings.write(key, "a", 1, before + 9.0, {**run.embeddings.info(key, "a", 1), "seconds": 9.0})
    assert not run.embeddings.intact(key, "a", 1, 40)
    with pytest.raises(store.DamagedFileError, match="is not the array its sidecar was written with"):
        run.embedding("a", 1, method="pca")
    result = embed_logdir(tmp_path / "logs", ["pca"], progress=False)
    assert (result.computed, result.cached) == (1, 1)
    np.testing.assert_allclose(run.embeddings.read(key, "a", 1), before, atol=1e-5)
    assert run.embeddings.info(key, "a", 1)["seconds"] != 9.0
