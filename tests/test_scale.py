"""Engines on data at extreme but finite scales (issue 10 item 16).

Scale-invariant methods give the same layout at any scale, those whose output scales with the input (Isomap, MDS,
Sammon) the same layout times the scale, and a method whose kernel is absolute (KernelPCA) says why it cannot.
Before the inputs were rescaled, t-SNE failed at 1e20 ("axis 1 index ... exceeds matrix dimension"), Isomap and
diffusion maps raised, SMACOF returned an all-zero layout at 1e-15 and LLE, Hessian LLE, spectral embedding and
Sammon returned other layouts.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import procrustes

from repviz._validation import SAFE_EXPONENT, rescaled
from repviz.manifold import (
    MDS,
    TSNE,
    ClassicalMDS,
    DiffusionMap,
    ForceDirectedLayout,
    Isomap,
    KernelPCA,
    LocallyLinearEmbedding,
    Sammon,
    SpectralEmbedding,
)
from repviz.metrics import trustworthiness

SCALES = [1e-30, 1e-15, 1e20, 1e30]

# name: (estimator factory, output scales with the input, largest Procrustes disparity against scale 1; None: a
# stochastic layout that float32 round-off of the scaled input moves, so its trustworthiness is compared instead)
ENGINES = {
    "isomap": (lambda: Isomap(n_neighbors=10), True, 1e-9),
    "isomap-landmarks": (lambda: Isomap(n_neighbors=10, n_landmarks=50, random_state=0), True, 1e-9),
    "lle": (lambda: LocallyLinearEmbedding(n_neighbors=10, random_state=0), False, 1e-9),
    "hessian-lle": (lambda: LocallyLinearEmbedding(n_neighbors=10, method="hessian", random_state=0), False, 1e-9),
    "spectral": (lambda: SpectralEmbedding(random_state=0), False, 1e-9),
    "spectral-heat": (lambda: SpectralEmbedding(affinity="heat", random_state=0), False, 1e-9),
    "diffusion": (lambda: DiffusionMap(random_state=0), False, 1e-9),
    "cmds-precomputed": (lambda: ClassicalMDS(metric="precomputed"), True, 1e-9),
    "smacof": (lambda: MDS(random_state=0), True, 1e-9),
    "sammon": (lambda: Sammon(), True, 1e-9),
    "force": (lambda: ForceDirectedLayout(random_state=0), False, None),
    "tsne": (lambda: TSNE(random_state=0), False, None),
}


@pytest.fixture(scope="module")
def roll(swiss_roll):
    """A Swiss roll of 200 points, centred, at unit spread, float32 (scale 1: the reference)."""
    X = swiss_roll(200)
    return ((X - X.mean(0)) / X.std()).astype(np.float32)


def _input(name, X, scale):
    X = X.astype(np.float64) * scale
    if name.endswith("precomputed"):
        X = np.sqrt(np.square(X[:, None] - X[None]).sum(-1))
    return X.astype(np.float32)


@pytest.mark.parametrize("name", ENGINES)
def test_layout_does_not_depend_on_the_input_scale(roll, name):
    make, equivariant, tol = ENGINES[name]
    reference = make().fit_transform(_input(name, roll, 1.0)).astype(np.float64)
    for scale in SCALES:
        Y = make().fit_transform(_input(name, roll, scale)).astype(np.float64)
        assert np.isfinite(Y).all() and np.ptp(Y) > 0, (name, scale)
        if tol is None:
            assert trustworthiness(roll, Y) > trustworthiness(roll, reference) - 0.02, (name, scale)
            assert 0.7 < np.ptp(Y) / np.ptp(reference) < 1.4, (name, scale)
            continue
        assert procrustes(reference, Y)[2] < tol, (name, scale)
        np.testing.assert_allclose(np.ptp(Y) / np.ptp(reference), scale if equivariant else 1.0, rtol=1e-3,
                                   err_msg=f"{name} at {scale:g}")


def test_absolute_parameters_follow_the_rescaling(roll):
    """A radius, an rbf gamma, a diffusion epsilon and an MDS init are in the input's units."""
    big = roll * np.float32(2.0**40)
    a = Isomap(n_neighbors=None, radius=1.0).fit_transform(roll)
    b = Isomap(n_neighbors=None, radius=2.0**40).fit_transform(big)
    np.testing.assert_allclose(b / 2.0**40, a, rtol=1e-4, atol=1e-5)
    a = SpectralEmbedding(affinity="heat", gamma=3.0, random_state=0).fit_transform(roll)
    b = SpectralEmbedding(affinity="heat", gamma=3.0 / 2.0**80, random_state=0).fit_transform(big)
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    d = DiffusionMap(epsilon=0.5, random_state=0).fit(roll)
    e = DiffusionMap(epsilon=0.5 * 2.0**80, random_state=0).fit(big)
    np.testing.assert_allclose(e.embedding_, d.embedding_, rtol=1e-4, atol=1e-6)
    assert e.epsilon_ == pytest.approx(0.5 * 2.0**80)
    init = ClassicalMDS().fit_transform(roll)
    a = MDS(init=init, max_iter=5).fit(roll)
    b = MDS(init=init * 2.0**40, max_iter=5).fit(big)
    np.testing.assert_allclose(b.embedding_ / 2.0**40, a.embedding_, rtol=1e-4, atol=1e-5)
    assert b.stress_ == pytest.approx(a.stress_ * 2.0**80, rel=1e-4)


def test_rescaled_is_exact_and_only_outside_the_safe_range():
    X = np.random.default_rng(1).normal(size=(50, 4)).astype(np.float32)
    assert rescaled(X)[1] == 1.0 and rescaled(X)[0] is X
    assert rescaled(X * 2.0 ** (SAFE_EXPONENT + 5), "cosine")[1] == 1.0
    assert rescaled(np.ones((5, 3), np.float32))[1] == 1.0
    for shift in (SAFE_EXPONENT + 5, -SAFE_EXPONENT - 5, 100, -100):
        big = X * np.float32(2.0**shift)
        Y, scale = rescaled(big)
        assert Y.dtype == np.float32 and np.log2(scale) == round(np.log2(scale))
        np.testing.assert_array_equal(Y * np.float32(scale), big)  # a power of two: no rounding
        assert 2.0**-SAFE_EXPONENT <= np.ptp(Y, axis=0).max() <= 2.0**SAFE_EXPONENT


@pytest.mark.parametrize("scale, what", [(1e20, "the identity"), (1e-15, "all ones")])
def test_kernel_pca_says_why_it_cannot(roll, scale, what):
    with pytest.raises(ValueError, match=f"is {what} .* Pass gamma near 1 / median squared distance"):
        KernelPCA(kernel="rbf").fit(roll * np.float32(scale))
    Y = KernelPCA(kernel="rbf", gamma=1.0 / (scale * scale)).fit_transform(roll * np.float32(scale))
    assert np.isfinite(Y).all() and np.ptp(Y) > 0
