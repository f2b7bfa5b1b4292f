"""Data for examples and tests: MNIST from a local file, the Keras cache or download, or a bundled subset.

``load_mnist`` never needs the network: when neither a path nor the Keras cache is available and the download
site cannot be reached within a few seconds, it falls back to 6,000 training and 1,000 test digits of real MNIST
shipped inside the package (``BUNDLED_MNIST``: 600 / 100 per class drawn with a fixed seed; MNIST by Y. LeCun,
C. Cortes and C. Burges, CC BY-SA 3.0). A one-line notice on stderr says which data was used.

Also ``stratified_indices`` (a probe set with every class equally represented) and ``thumbnails`` (uint8 images
for hover previews from any image-like probe array).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import numpy as np

BUNDLED_MNIST = Path(__file__).parent / "data" / "mnist_subset.npz"
_KERAS_URL_HOST = "storage.googleapis.com"
_MAX_THUMBNAIL = 64

MnistSplits = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def load_mnist(path: str | os.PathLike | None = None, *, download: bool = True,
               timeout: float = 3.0) -> MnistSplits:
    """MNIST as ``(x_train, y_train), (x_test, y_test)``: uint8 images (n, 28, 28) and uint8 labels.

    Parameters
    ----------
    path : path, default=None
        A local ``.npz`` with keys ``x_train, y_train, x_test, y_test`` (e.g. ``BUNDLED_MNIST``). When None: the
        Keras cache (``~/.keras/datasets/mnist.npz``) if present, else a Keras download if ``download`` and the
        site answers within ``timeout`` seconds, else the bundled subset (6,000 / 1,000 digits).
    download : bool, default=True
        Whether to try downloading when the Keras cache is empty.
    timeout : float, default=3.0
        Seconds to wait for the download site before falling back to the bundled subset.
    """
    if path is not None:
        if Path(path).resolve() == BUNDLED_MNIST.resolve():
            return _load_bundled()
        return _load_npz(path, f"MNIST from {str(path)!r}")
    cache = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets" / "mnist.npz"
    if cache.exists() or (download and _reachable(_KERAS_URL_HOST, timeout)):
        try:
            import keras

            data = keras.datasets.mnist.load_data()
            _notice(f"MNIST via keras.datasets ({len(data[0][0]):,} train / {len(data[1][0]):,} test digits)")
            return data
        except Exception as e:  # any failure of the online path (network, corrupt cache) falls back
            _notice(f"keras.datasets.mnist failed ({type(e).__name__}: {e}); falling back")
    return _load_bundled()


def _load_bundled() -> MnistSplits:
    return _load_npz(BUNDLED_MNIST, "the MNIST subset bundled with repviz (CC BY-SA 3.0)")


def _load_npz(path: str | os.PathLike, what: str) -> MnistSplits:
    if not Path(path).exists():
        raise FileNotFoundError(f"no MNIST file at {str(path)!r}; pass path=None to use the Keras cache, a "
                                f"download or the bundled subset")
    with np.load(path, allow_pickle=False) as f:
        missing = {"x_train", "y_train", "x_test", "y_test"} - set(f.files)
        if missing:
            raise ValueError(f"{str(path)!r} lacks the arrays {sorted(missing)}; it has {sorted(f.files)}")
        data = (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])
    _notice(f"{what}: {len(data[0][0]):,} train / {len(data[1][0]):,} test digits")
    return data


def _reachable(host: str, timeout: float) -> bool:
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _notice(message: str) -> None:
    print(f"repviz: using {message}", file=sys.stderr)


def stratified_indices(labels, n: int, *, random_state: int = 0) -> np.ndarray:
    """Indices of ``n`` rows of ``labels`` with the classes as equally represented as they can be, in
    increasing order (so they can serve as stable probe ids).

    Each class gets ``n // k`` rows (k classes), the first ``n % k`` classes one more; rows are drawn at random
    within each class (seeded by ``random_state``). A class with too few rows gives all it has and the rest
    is drawn from the other classes, still evenly.
    """
    labels = np.asarray(labels).ravel()
    if not 1 <= n <= len(labels):
        raise ValueError(f"n={n} rows requested but labels has {len(labels)}; ask for between 1 and {len(labels)}")
    rng = np.random.default_rng(random_state)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)]
    take = [0] * len(pools)
    for _ in range(n):  # round robin over the classes that have rows left: as even as the data allows
        c = min((i for i in range(len(pools)) if take[i] < len(pools[i])), key=lambda i: (take[i], i))
        take[c] += 1
    return np.sort(np.concatenate([p[:t] for p, t in zip(pools, take)])).astype(np.int64)


def thumbnails(x: np.ndarray) -> np.ndarray | None:
    """uint8 thumbnails of an image-like array, or None when ``x`` does not look like images.

    Accepted: (n, H, W) grey, (n, H, W, C) with C in 1/3/4 (channel last), and flat (n, D) where D is a square
    (784 -> 28x28). Floats in [0, 1] are scaled by 255, other ranges min-max scaled over the whole set. Images
    larger than 64 pixels on a side are subsampled by a stride, so thumbnails stay small.
    """
    x = np.asarray(x)
    if x.dtype.kind not in "uif" or x.ndim < 2 or len(x) == 0:
        return None
    if x.ndim == 2:
        side = int(round(np.sqrt(x.shape[1])))
        if side * side != x.shape[1] or side < 4:
            return None
        x = x.reshape(len(x), side, side)
    elif x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    elif not (x.ndim == 3 or (x.ndim == 4 and x.shape[-1] in (3, 4))):
        return None
    stride = max(1, -(-max(x.shape[1:3]) // _MAX_THUMBNAIL))
    x = x[:, ::stride, ::stride]
    if x.dtype == np.uint8:
        return np.ascontiguousarray(x)
    x = x.astype(np.float32)
    finite = x[np.isfinite(x)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if lo >= 0 and hi <= 1:
        lo, hi = 0.0, 1.0
    scaled = (np.nan_to_num(x, nan=lo, posinf=hi, neginf=lo) - lo) / max(hi - lo, 1e-12)
    return np.clip(np.round(scaled * 255), 0, 255).astype(np.uint8)
