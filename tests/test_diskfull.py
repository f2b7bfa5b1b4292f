"""A full disk under every writing command: one line naming the file and the bytes free, no traceback, and
nothing already stored lost.

The commands run on a real small filesystem: a tmpfs mounted in a private mount namespace (``unshare``, as an
unprivileged user where the kernel allows it), filled to a few kilobytes before the command starts. Where no
namespace can be made the end-to-end tests are skipped; the store's own test (a simulated ENOSPC) always runs.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from repviz.store import DiskFullError, save_array, save_json

_UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]
_ONE_LINE = r"^repviz {command}: error: cannot write {where}[^\n]*: disk full \(\d+ bytes free\); free some space " \
            r"and run it again\n$"


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run([*_UNSHARE, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


needs_small_fs = pytest.mark.skipif(not _namespaces(), reason="no private mount namespace here (unshare)")

# In the namespace: a 16 MB tmpfs at MNT holding a copy of SRC (if any), filled to FREE bytes, then the command;
# the stored files' digests before and after go to the test's directory (the tmpfs goes with the namespace).
_SCRIPT = r"""
set -e
mount -t tmpfs -o size=16m tmpfs "$MNT"
[ -n "$SRC" ] && cp -r "$SRC" "$MNT/logs"
digests() { (cd "$MNT" && find . -type f ! -name filler -print0 | sort -z | xargs -0 -r sha256sum) > "$1"; }
digests "$OUT/before"
avail=$(df -B1 --output=avail "$MNT" | tail -1)
head -c $((avail - FREE)) /dev/zero > "$MNT/filler"
set +e
"$PYTHON" "$@" > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/rc"
digests "$OUT/after"
"""


def _on_a_full_disk(tmp_path: Path, repo: Path, args: list[str], src: Path | None = None, free: int = 8192):
    """Run ``python ARGS`` (``{mnt}`` in them is the small filesystem's mount point) with ``free`` bytes left;
    returns (exit status, stderr, digests of the files before, after)."""
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    env = {**os.environ, "MNT": str(mnt), "OUT": str(out), "SRC": str(src or ""), "FREE": str(free),
           "PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    args = [a.replace("{mnt}", str(mnt)) for a in args]
    subprocess.run([*_UNSHARE, "sh", "-c", _SCRIPT.replace("FREE", "$FREE"), "sh", *args], env=env, check=True,
                   timeout=300)

    def digests(name: str) -> dict[str, str]:
        lines = (out / name).read_text().splitlines()
        return {path: digest for digest, path in (line.split(maxsplit=1) for line in lines)}

    return int((out / "rc").read_text()), (out / "stderr").read_text(), digests("before"), digests("after")


def _nothing_lost(before: dict[str, str], after: dict[str, str]) -> None:
    assert {p: d for p, d in after.items() if p in before} == before  # every stored file kept, unchanged
    assert not [p for p in after if p.endswith(".tmp")]  # and no temporary file left behind


@pytest.fixture(scope="module")
def logs(tmp_path_factory, cluster_run) -> Path:
    """Two runs of 300 probes x 64 features (1.3 MB of activations)."""
    root = tmp_path_factory.mktemp("diskfull") / "logs"
    for r in ("r1", "r2"):
        cluster_run(root / r, n=300, width=64)
    return root


@needs_small_fs
@pytest.mark.parametrize("command", ["embed", "meta"])
def test_embed_and_meta_on_a_full_disk_end_in_one_line(tmp_path, repo, logs, command):
    extra = ["--method", "pca"] if command == "embed" else []
    rc, err, before, after = _on_a_full_disk(tmp_path, repo, ["-m", "repviz.cli", command, "{mnt}/logs",
                                                               "--no-progress", *extra], src=logs)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert re.match(_ONE_LINE.format(command=command, where=re.escape(str(tmp_path / "mnt" / "logs"))), err), err
    _nothing_lost(before, after)


@needs_small_fs
def test_export_on_a_full_disk_ends_in_one_line(tmp_path, repo, logs):
    from repviz.pipeline import embed_logdir

    done = tmp_path / "embedded"
    shutil.copytree(logs, done)
    embed_logdir(done, ["pca"])
    rc, err, before, after = _on_a_full_disk(tmp_path, repo, ["-m", "repviz.cli", "export", str(done), "--out",
                                                               "{mnt}/figures"], free=4096)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert re.match(_ONE_LINE.format(command="export", where=re.escape(str(tmp_path / "mnt" / "figures"))), err)
    _nothing_lost(before, after)


_CAPTURE = """
import sys
import numpy as np
import keras
from repviz import ActivationLogger, open_logdir

rng = np.random.default_rng(0)
x = rng.random((500, 6), dtype=np.float32)
y = (x[:, :3].sum(axis=1) > x[:, 3:].sum(axis=1)).astype(np.int64)
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(128, activation="relu", name="hidden"),
                          keras.layers.Dense(2, activation="softmax", name="out")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
logger = ActivationLogger(sys.argv[1], probe=(x, y), embed=None)
try:
    model.fit(x, y, epochs=40, batch_size=100, verbose=0, callbacks=[logger])
except OSError as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    run = open_logdir(sys.argv[1] + "/..").run("run")
    print(f"{len(run.steps())} snapshots readable", file=sys.stderr)
    [run.activations("hidden", s).sum() for s in run.steps()]
"""


@needs_small_fs
def test_capture_on_a_full_disk_names_the_file_and_keeps_the_snapshots_before(tmp_path, repo):
    script = tmp_path / "fit.py"
    script.write_text(_CAPTURE)
    rc, err, _, after = _on_a_full_disk(tmp_path, repo, [str(script), "{mnt}/logs/run"], free=1 << 20)
    lines = err.splitlines()
    assert rc == 0 and re.match(rf"^DiskFullError: cannot write {re.escape(str(tmp_path / 'mnt' / 'logs' / 'run'))}"
                                r"\S+: disk full \(\d+ bytes free\); free some space and run it again$",
                                lines[-2]), err
    assert int(lines[-1].split()[0]) >= 2  # the snapshots stored before the disk filled are whole and readable
    assert not [p for p in after if p.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------------------------
# The store's atomic writer alone (no namespace needed)
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"),
                                     OSError("256000 requested and 158688 written")])  # numpy's short write
def test_the_atomic_writer_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch, failure):
    target, side = tmp_path / "a.npy", tmp_path / "a.json"
    save_array(target, np.arange(3.0))
    save_json(side, {"kept": True})

    def full(*args, **kwargs):
        raise failure

    monkeypatch.setattr(np.lib.format, "write_array", full)
    monkeypatch.setattr(Path, "write_text", full)
    for write, path in ((lambda: save_array(target, np.zeros(5)), target), (lambda: save_json(side, {}), side)):
        with pytest.raises(DiskFullError, match=rf"^cannot write {re.escape(str(path))}: disk full \(\d+ bytes "
                                                r"free\); free some space and run it again$") as caught:
            write()
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    monkeypatch.undo()
    np.testing.assert_array_equal(np.load(target), np.arange(3.0))
    assert json.loads(side.read_text()) == {"kept": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.npy"]  # no temporary file left


def test_other_write_errors_are_not_called_a_full_disk(tmp_path, monkeypatch):
    def failing(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(OSError, match="Input/output error") as caught:
        save_array(tmp_path / "a.npy", np.zeros(3))
    assert not isinstance(caught.value, DiskFullError)

