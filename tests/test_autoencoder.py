"""Autoencoder embedding: a small case that beats PCA, determinism, transform, and the TensorFlow-free import."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from repviz.manifold import PCA, AutoencoderEmbedding
from repviz.metrics import trustworthiness


@pytest.fixture(scope="module")
def digits(digits):
    """The first 600 of the shared digits, float32."""
    return digits[0][:600].astype(np.float32)


@pytest.fixture(scope="module")
def fitted(digits):
    return AutoencoderEmbedding(hidden=(64, 16), epochs=60, batch_size=64, random_state=0).fit(digits)


def test_beats_pca_on_a_small_case(digits, fitted):
    t_ae = trustworthiness(digits, fitted.embedding_, 10)
    t_pca = trustworthiness(digits, PCA(2).fit_transform(digits), 10)
    print(f"digits (600): trustworthiness autoencoder {t_ae:.4f}, PCA {t_pca:.4f}")
    assert t_ae > t_pca
    assert fitted.embedding_.dtype == np.float32 and fitted.embedding_.shape == (600, 2)


def test_seeded_fits_repeat_and_transform_places_points(digits, fitted):
    again = AutoencoderEmbedding(hidden=(64, 16), epochs=60, batch_size=64, random_state=0).fit(digits)
    np.testing.assert_array_equal(again.embedding_, fitted.embedding_)
    np.testing.assert_allclose(fitted.transform(digits[:50]), fitted.embedding_[:50], atol=1e-5)
    copy = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(copy.transform(digits[:5]), fitted.transform(digits[:5]))


def test_bad_hidden_is_refused(digits):
    with pytest.raises(ValueError, match="The 'hidden' parameter of AutoencoderEmbedding must be a tuple of positive"):
        AutoencoderEmbedding(hidden=(64, 0)).fit(digits)


def test_import_of_the_numerics_loads_no_tensorflow(repo):
    code = textwrap.dedent("""
        import sys
        import repviz.manifold
        from repviz.manifold import AutoencoderEmbedding
        AutoencoderEmbedding(hidden=(8,)).get_params()
        print([m for m in ("keras", "tensorflow") if m in sys.modules])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "[]"
