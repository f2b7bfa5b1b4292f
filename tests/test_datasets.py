"""MNIST loading (never over the network in tests) and thumbnails."""

import numpy as np
import pytest

from repviz.datasets import BUNDLED_MNIST, load_mnist, thumbnails


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """An empty Keras cache and no network (every connection refused); the Keras loader raises if called anyway."""
    import socket

    import keras

    def fail(*args, **kwargs):
        raise OSError("network disabled in tests")

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setattr(socket, "create_connection", fail)
    monkeypatch.setattr(keras.datasets.mnist, "load_data", fail)
    return tmp_path


def test_bundled_subset_is_real_stratified_mnist():
    assert BUNDLED_MNIST.stat().st_size < 3 * 2**20
    (x, y), (xt, yt) = load_mnist(BUNDLED_MNIST)
    assert x.shape == (6000, 28, 28) and xt.shape == (1000, 28, 28)
    assert x.dtype == np.uint8 and y.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(y), np.full(10, 600))
    np.testing.assert_array_equal(np.bincount(yt), np.full(10, 100))
    assert 30 < x.mean() < 40  # MNIST's mean intensity is about 33


def test_fallback_to_bundled_without_network(no_network, capsys):
    (x, _), (xt, _) = load_mnist()
    assert len(x) == 6000 and len(xt) == 1000
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "repviz: using the MNIST subset bundled with repviz" in err


def test_fallback_when_cached_keras_loader_fails(no_network, capsys):
    cache = no_network / "keras_home" / "datasets"
    cache.mkdir(parents=True)
    (cache / "mnist.npz").write_bytes(b"corrupt")
    (x, _), _ = load_mnist()
    assert len(x) == 6000
    err = capsys.readouterr().err
    assert "keras.datasets.mnist failed (OSError: network disabled in tests); falling back" in err


def test_keras_cache_is_used_when_present(no_network, monkeypatch, capsys):
    import keras

    cache = no_network / "keras_home" / "datasets"
    cache.mkdir(parents=True)
    (cache / "mnist.npz").write_bytes(b"")
    fake = (np.zeros((3, 28, 28), np.uint8), np.zeros(3, np.uint8)), (np.zeros((2, 28, 28), np.uint8),
                                                                      np.zeros(2, np.uint8))
    monkeypatch.setattr(keras.datasets.mnist, "load_data", lambda: fake)
    assert load_mnist() is fake
    assert "MNIST via keras.datasets (3 train / 2 test digits)" in capsys.readouterr().err


def test_local_path(tmp_path, capsys):
    path = tmp_path / "m.npz"
    np.savez(path, x_train=np.ones((4, 28, 28), np.uint8), y_train=np.arange(4, dtype=np.uint8),
             x_test=np.ones((2, 28, 28), np.uint8), y_test=np.arange(2, dtype=np.uint8))
    (x, y), (xt, yt) = load_mnist(path)
    assert x.shape == (4, 28, 28) and list(yt) == [0, 1]
    assert f"MNIST from {str(path)!r}: 4 train / 2 test digits" in capsys.readouterr().err
    np.savez(tmp_path / "bad.npz", x_train=np.ones(2))
    with pytest.raises(ValueError, match=r"lacks the arrays \['x_test', 'y_test', 'y_train'\]"):
        load_mnist(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="no MNIST file at"):
        load_mnist(tmp_path / "missing.npz")


@pytest.mark.parametrize("shape, want", [((5, 28, 28), (5, 28, 28)), ((5, 784), (5, 28, 28)),
                                         ((5, 28, 28, 1), (5, 28, 28)), ((5, 32, 32, 3), (5, 32, 32, 3)),
                                         ((5, 256, 256), (5, 64, 64)), ((5, 10), None), ((5, 8, 8, 7), None)])
def test_thumbnail_shapes(shape, want):
    t = thumbnails(np.random.default_rng(0).random(shape, dtype=np.float32))
    assert (None if t is None else t.shape) == want
    assert t is None or t.dtype == np.uint8


def test_thumbnail_scaling():
    def image(values, dtype=np.float32):  # one 4x4 image whose first row holds ``values``
        a = np.zeros((1, 4, 4), dtype)
        a[0, 0] = values
        return a

    np.testing.assert_array_equal(thumbnails(image([0.0, 0.5, 1.0, 1.0]))[0, 0], [0, 128, 255, 255])
    wide = image([-1.0, 0.0, 1.0, np.nan])  # min-max scaled; NaN shown as the minimum
    np.testing.assert_array_equal(thumbnails(wide)[0, 0], [0, 128, 255, 0])
    raw = image([0, 1, 2, 3], np.uint8)
    np.testing.assert_array_equal(thumbnails(raw), raw)  # uint8 kept as it is
