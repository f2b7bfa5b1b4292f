"""Digest of every derived result of a log directory, to show that a change of code left results bit for bit.

    python benchmarks/results_digest.py capture DIR        # record a small log directory (two seeds, a placed set)
    python benchmarks/results_digest.py derive DIR         # every method, meta transform, measure and placement
    python benchmarks/results_digest.py digest DIR > a.tsv # one line per file: path, bytes, sha256

Run `capture` once, copy DIR for each checkout, `derive` each copy with that checkout on PYTHONPATH, and compare the
digests (`diff a.tsv b.tsv`): the same lines mean the same results and the same cache keys (they are the folder
names). Files that hold a time or a duration (TensorBoard's event files, progress and timing fields) are left out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

#: Files whose bytes hold a wall-clock time or a duration, so that two identical computations still differ.
_TIMED = ("events.out.tfevents",)
_TIMED_JSON_KEYS = ("seconds", "time", "elapsed", "created", "started", "finished", "wall", "duration")


def capture(logdir: Path) -> None:
    """Two seeds of a small MLP on 300 bundled digits, with metadata of every kind, and the first seed's network
    on 200 other digits as a run to place."""
    import keras
    import numpy as np

    import repviz
    from repviz.datasets import load_mnist

    (x_train, y_train), (x_test, y_test) = load_mnist(download=False)
    x_train, y_train = x_train[:1000].reshape(-1, 784) / 255.0, y_train[:1000]
    probe, labels = x_test[:300].reshape(-1, 784) / 255.0, y_test[:300]
    other, other_labels = x_test[300:500].reshape(-1, 784) / 255.0, y_test[300:500]
    metadata = {"parity": np.where(labels % 2 == 0, "even", "odd"),
                "note": [f"digit {d} #{i}" for i, d in enumerate(labels)],
                "ink": probe.sum(axis=1)}
    for seed in (0, 1):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(32, activation="relu", name="hidden"),
                                  keras.layers.Dense(10, activation="softmax", name="probs")])
        model.compile("adam", "sparse_categorical_crossentropy")
        loggers = [repviz.ActivationLogger(str(logdir / f"mlp/seed{seed}"), (probe, labels), freq=1,
                                           metadata=metadata)]
        if seed == 0:
            loggers.append(repviz.ActivationLogger(str(logdir / "mlp/placed"), (other, other_labels), freq=1))
        model.fit(x_train, y_train, epochs=2, batch_size=100, verbose=0, callbacks=loggers)


def derive(logdir: Path) -> None:
    """Every embedding method, meta-SNE transform and embedding, similarity measure and placement."""
    from repviz.meta.options import EMBEDDINGS, TRANSFORMS
    from repviz.methods import METHODS

    def repviz(*args: str, quiet: bool = True) -> None:
        subprocess.run([sys.executable, "-m", "repviz.cli", *args, *(["--no-progress"] if quiet else [])],
                       check=False)

    repviz("embed", str(logdir), "--method", ",".join(METHODS), "--runs", "mlp/seed0,mlp/seed1")
    for transform in TRANSFORMS:
        repviz("meta", str(logdir), "--transform", transform, "--runs", "mlp/seed0,mlp/seed1", "--include-input")
    for embedding in EMBEDDINGS:
        repviz("meta", str(logdir), "--embedding", embedding, "--runs", "mlp/seed0,mlp/seed1")
    for args in (["--measure", "cka"], ["--measure", "cka", "--kernel", "rbf"], ["--measure", "cka", "--biased"],
                 ["--measure", "procrustes"]):
        repviz("similarity", str(logdir), "--runs", "mlp/seed0,mlp/seed1", *args)
        repviz("similarity", str(logdir), "--runs", "mlp/seed0", "--layer", "hidden", *args)
    for method in ("tsne", "pca", "isomap", "umap"):
        repviz("place", str(logdir), "--run", "mlp/placed", "--into", "mlp/seed0", "--method", method,
               quiet=False)


def _similarity_cache(path: Path) -> bytes | None:
    """A similarity cache's values in the order of their representation ids (the file keeps them in the order
    they were computed, which worker processes may change); None for any other file."""
    import numpy as np

    index = path.with_name("index.json")
    if path.name not in ("values.npy", "index.json") or not path.parent.name.startswith("similarity-"):
        return None
    meta = json.loads(index.read_text())
    order = np.argsort(meta["ids"])
    if path.name == "index.json":
        return json.dumps({**meta, "ids": sorted(meta["ids"]), "crc32": None}, sort_keys=True).encode()
    values = np.load(path, allow_pickle=False)
    return np.ascontiguousarray(values[np.ix_(order, order)]).tobytes()


def _untimed(path: Path) -> bytes:
    if (canonical := _similarity_cache(path)) is not None:
        return canonical
    data = path.read_bytes()
    if path.suffix != ".json":
        return data
    try:
        obj = json.loads(data)
    except ValueError:
        return data

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if not any(t in k.lower() for t in _TIMED_JSON_KEYS)}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return json.dumps(strip(obj), sort_keys=True).encode()


def digest(logdir: Path) -> None:
    for path in sorted(p for p in logdir.rglob("*") if p.is_file()):
        if any(t in path.name for t in _TIMED):
            continue
        data = _untimed(path)
        print(f"{path.relative_to(logdir)}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("capture", "derive", "digest"))
    parser.add_argument("logdir", type=Path)
    args = parser.parse_args()
    {"capture": capture, "derive": derive, "digest": digest}[args.action](args.logdir)


if __name__ == "__main__":
    main()
