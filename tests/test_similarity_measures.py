"""Layer-similarity measures against references written here from the papers' formulas (explicit n×n matrices).

- HSIC, biased: tr(K H L H) / (n-1)², H = I - 11ᵀ/n (Gretton et al. 2005; Kornblith et al. 2019, eq. 3).
- HSIC, unbiased (Song et al. 2007, eq. 5): with K̃, L̃ the Gram matrices with their diagonal set to 0,
  [tr(K̃L̃) + 1ᵀK̃1·1ᵀL̃1 / ((n-1)(n-2)) - 2/(n-2)·1ᵀK̃L̃1] / (n(n-3)).
- CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)); RBF kernel exp(-d²/(2σ²)), σ = sigma × median pair distance.
- Minibatch CKA (Nguyen et al. 2021): ΣHSIC(K_b, L_b) / sqrt(ΣHSIC(K_b, K_b) ΣHSIC(L_b, L_b)) over the
  documented split (numpy's default_rng(seed).permutation(n), cut into ceil(n / batch_size) near-equal parts).
- Procrustes (Williams et al. 2021): arccos of max over orthogonal Q of ⟨X, Y Q⟩, the representations centred,
  unit-norm and zero-padded to a common width; Q = U Vᵀ from the SVD of Xᵀ Y.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform

from repviz.meta import representation_distances
from repviz.meta.vectors import probe_pairs, representation_vectors
from repviz.similarity import measures
from repviz.similarity.measures import (
    cka_matrix,
    linear_cka,
    minibatch_cka,
    procrustes_distance,
    procrustes_matrix,
    rbf_cka,
)

# --- references ------------------------------------------------------------------------------------------------

def hsic_biased(K, L):
    n = len(K)
    H = np.eye(n) - np.ones((n, n)) / n
    return np.trace(K @ H @ L @ H) / (n - 1) ** 2


def hsic_unbiased(K, L):
    n = len(K)
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * (one @ Kt @ Lt @ one)) / (n * (n - 3))


def ref_cka(K, L, debiased):
    hsic = hsic_unbiased if debiased else hsic_biased
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def gram_linear(X):
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    return X @ X.T


def gram_rbf(X, sigma):
    d = pdist(np.asarray(X, dtype=np.float64).reshape(len(X), -1))
    return np.exp(-squareform(d) ** 2 / (2 * (sigma * np.median(d)) ** 2))


def ref_minibatch(X, Y, batch_size, seed, debiased, gram=gram_linear):
    hsic = hsic_unbiased if debiased else hsic_biased
    n = len(X)
    sums = np.zeros(3)
    for b in np.array_split(np.random.default_rng(seed).permutation(n), -(-n // batch_size)):
        K, L = gram(X[b]), gram(Y[b])
        sums += [hsic(K, L), hsic(K, K), hsic(L, L)]
    return sums[0] / np.sqrt(sums[1] * sums[2])


def ref_procrustes(X, Y):
    X, Y = (np.asarray(Z, dtype=np.float64).reshape(len(Z), -1) for Z in (X, Y))
    w = max(X.shape[1], Y.shape[1])
    X, Y = (np.pad(Z - Z.mean(0), ((0, 0), (0, w - Z.shape[1]))) for Z in (X, Y))
    X, Y = X / np.linalg.norm(X), Y / np.linalg.norm(Y)
    U, _, Vt = np.linalg.svd(Y.T @ X)
    Q = U @ Vt  # the rotation of Y that best matches X
    return np.arccos(min(1.0, np.sum(X * (Y @ Q))))


def related(n, p, q, seed=0, dtype=np.float32):
    """X (n, p) with some structure and Y (n, q) a noisy nonlinear function of it."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) @ rng.normal(size=(3, p)) + 0.5 * rng.normal(size=(n, p)) + 2.0
    Y = np.tanh(X @ rng.normal(size=(p, q)) / np.sqrt(p)) + 0.3 * rng.normal(size=(n, q))
    return X.astype(dtype), Y.astype(dtype)


def digit_layers(n=300):
    """Real layer activations: 8×8 digits through two random ReLU layers (widths 64 -> 256 -> 32)."""
    from sklearn.datasets import load_digits

    x = load_digits().data[:n] / 16.0
    rng = np.random.default_rng(0)
    h1 = np.maximum(x @ rng.normal(size=(64, 256)) / 8 + 0.1, 0)
    h2 = np.maximum(h1 @ rng.normal(size=(256, 32)) / 16, 0)
    return [a.astype(np.float32) for a in (x, h1, h2)]


SHAPES = [(40, 100, 300), (300, 10, 25), (120, 5, 400), (200, 30, 50), (60, 60, 8)]  # n < w, n > w, mixed


# --- agreement with the references ------------------------------------------------------------------------------

@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_linear_cka_matches_reference(shape, debiased):
    X, Y = related(*shape)
    expected = ref_cka(gram_linear(X), gram_linear(Y), debiased)
    assert linear_cka(X, Y, debiased=debiased) == pytest.approx(expected, abs=1e-6)


def test_linear_cka_takes_float16_and_trailing_axes():
    X, Y = related(50, 12, 20)
    X16, Y4 = X.astype(np.float16), Y.reshape(50, 4, 5)
    expected = ref_cka(gram_linear(X16), gram_linear(Y), True)
    assert linear_cka(X16, Y4, debiased=True) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("sigma", [0.3, 0.8])
@pytest.mark.parametrize("shape", SHAPES[:3])
def test_rbf_cka_matches_reference(shape, sigma, debiased):
    X, Y = related(*shape, seed=1)
    expected = ref_cka(gram_rbf(X, sigma), gram_rbf(Y, sigma), debiased)
    assert rbf_cka(X, Y, sigma=sigma, debiased=debiased) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize(("n", "batch_size", "seed"), [(400, 100, 0), (403, 64, 7), (90, 200, 3)])
def test_minibatch_cka_matches_reference(n, batch_size, seed, debiased):
    X, Y = related(n, 30, 12, seed=2)
    expected = ref_minibatch(X, Y, batch_size, seed, debiased)
    got = minibatch_cka(X, Y, batch_size=batch_size, random_state=seed, debiased=debiased)
    assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("debiased", [False, True])
def test_minibatch_rbf_cka_matches_reference_with_each_batch_bandwidth(debiased):
    X, Y = related(300, 20, 9, seed=12)
    expected = ref_minibatch(X, Y, 64, 5, debiased, gram=lambda Z: gram_rbf(Z, 0.5))
    got = cka_matrix([X], [Y], kernel="rbf", sigma=0.5, debiased=debiased, batch_size=64, random_state=5)
    assert got[0, 0] == pytest.approx(expected, abs=1e-6)


def test_minibatch_cka_sums_hsic_rather_than_averaging_cka():
    """The mean of per-batch CKAs (a known library bug) is a different, batch-size-dependent number."""
    X, Y = related(400, 30, 12, seed=2)
    perm = np.random.default_rng(0).permutation(400)
    mean_of_ckas = np.mean([ref_cka(gram_linear(X[b]), gram_linear(Y[b]), True)
                            for b in np.array_split(perm, 8)])
    got = minibatch_cka(X, Y, batch_size=50, random_state=0)
    assert got == pytest.approx(ref_minibatch(X, Y, 50, 0, True), abs=1e-6)
    assert abs(got - mean_of_ckas) > 1e-4


def test_measures_match_reference_on_real_layer_activations():
    layers = digit_layers()
    for X in layers:
        for Y in layers:
            for debiased in (False, True):
                assert linear_cka(X, Y, debiased=debiased) == pytest.approx(
                    ref_cka(gram_linear(X), gram_linear(Y), debiased), abs=1e-6)
                assert rbf_cka(X, Y, debiased=debiased) == pytest.approx(
                    ref_cka(gram_rbf(X, 0.8), gram_rbf(Y, 0.8), debiased), abs=1e-6)
            assert minibatch_cka(X, Y, batch_size=64, random_state=1) == pytest.approx(
                ref_minibatch(X, Y, 64, 1, True), abs=1e-6)
            assert procrustes_distance(X, Y) == pytest.approx(ref_procrustes(X, Y), abs=1e-6)
    x, h1, h2 = layers
    assert linear_cka(x, h1, debiased=True) > linear_cka(x, np.random.default_rng(0).normal(size=h1.shape),
                                                          debiased=True) + 0.3


# --- minibatches and the exact value ---------------------------------------------------------------------------

def test_minibatch_cka_with_one_batch_is_exact_and_error_shrinks_with_the_batch_size():
    X, Y = related(1200, 40, 20, seed=3)
    exact = linear_cka(X, Y, debiased=True)
    assert minibatch_cka(X, Y, batch_size=1200) == pytest.approx(exact, abs=1e-12)
    errors = [np.mean([abs(minibatch_cka(X, Y, batch_size=b, random_state=s) - exact) for s in range(4)])
              for b in (50, 200, 600)]
    assert errors[0] > errors[1] > errors[2] > 0, errors


def test_minibatch_cka_converges_to_full_batch_cka_as_the_batch_count_grows():
    """Fixed minibatches of 60 probes, k of them: the estimate approaches the full-batch unbiased CKA of all
    probes (which estimates the same population value) as k grows; the biased per-batch estimator would not."""
    X, Y = related(3840, 30, 15, seed=4)
    full = linear_cka(X, Y, debiased=True)
    errors = {}
    for k in (2, 8, 64):
        values = [minibatch_cka(X[o:o + 60 * k], Y[o:o + 60 * k], batch_size=60, random_state=o)
                  for o in range(0, 3840 - 60 * k + 1, 60 * k)[:6]]
        errors[k] = np.sqrt(np.mean((np.array(values) - full) ** 2))
    assert errors[2] > errors[8] > errors[64], errors
    assert errors[64] < 0.01, errors
    biased = minibatch_cka(X, Y, batch_size=60, debiased=False)
    assert biased - linear_cka(X, Y, debiased=False) > 3 * errors[64]


# --- invariances ---------------------------------------------------------------------------------------------------

def _measures():
    return {"linear": lambda A, B: linear_cka(A, B), "linear debiased": lambda A, B: linear_cka(A, B, debiased=True),
            "rbf": lambda A, B: rbf_cka(A, B), "rbf debiased": lambda A, B: rbf_cka(A, B, debiased=True),
            "minibatch": lambda A, B: minibatch_cka(A, B, batch_size=64)}


@pytest.mark.parametrize("measure", list(_measures()))
def test_cka_invariant_to_orthogonal_maps_isotropic_scaling_translation_not_to_general_linear_maps(measure):
    f = _measures()[measure]
    X, Y = related(150, 12, 20, seed=5, dtype=np.float64)
    rng = np.random.default_rng(5)
    Qx, Qy = (np.linalg.qr(rng.normal(size=(w, w)))[0] for w in (12, 20))
    base = f(X, Y)
    for A, B in [(X @ Qx, Y), (X, Y @ Qy), (7.5 * X, Y), (X, 0.01 * Y), (-3 * X @ Qx, 2 * Y @ Qy),
                 (X + 1e4, Y - 3e3)]:  # translations too, however far from 0
        assert f(A, B) == pytest.approx(base, abs=1e-9)
    # an invertible but anisotropic map (condition number 1e3 in a random basis) changes the value
    M = Qx @ np.diag(np.logspace(0, 3, 12)) @ np.linalg.qr(rng.normal(size=(12, 12)))[0]
    assert abs(f(X @ M, Y) - base) > 1e-2


def test_debiased_cka_of_independent_features_is_near_zero_where_the_biased_one_is_not():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(100, 500)), rng.normal(size=(100, 500))
    assert linear_cka(X, Y) > 0.7
    assert abs(linear_cka(X, Y, debiased=True)) < 0.02
    assert abs(cka_matrix([X], [Y])[0, 0]) < 0.02


# --- Procrustes -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_procrustes_distance_matches_reference(shape):
    X, Y = related(*shape, seed=8)
    assert procrustes_distance(X, Y) == pytest.approx(ref_procrustes(X, Y), abs=1e-6)


def test_procrustes_distance_is_a_metric():
    rng = np.random.default_rng(9)
    X, _ = related(60, 20, 5, seed=9, dtype=np.float64)
    reps = [X, np.tanh(X), X[:, :8], rng.normal(size=(60, 100)), np.maximum(X @ rng.normal(size=(20, 90)), 0),
            X + 0.3 * rng.normal(size=X.shape), rng.normal(size=(60, 3))]
    Q = np.linalg.qr(rng.normal(size=(20, 20)))[0]
    for copy in (X, X @ Q, 4.0 * X @ Q - 2.0, np.hstack([X @ Q, np.zeros((60, 5))])):
        assert procrustes_distance(X, copy) == pytest.approx(0.0, abs=1e-6)
    D = procrustes_matrix(reps)
    assert np.all(np.diag(D) == 0) and np.array_equal(D, D.T)
    assert D[np.triu_indices(len(reps), 1)].min() > 1e-2
    for i, j in zip(*np.triu_indices(len(reps), 1)):
        assert procrustes_distance(reps[j], reps[i]) == pytest.approx(D[i, j], abs=1e-12)
    for i, j, k in rng.integers(0, len(reps), size=(500, 3)):
        assert D[i, k] <= D[i, j] + D[j, k] + 1e-9
    assert D.max() <= np.pi / 2


def test_procrustes_matrix_recomputes_what_does_not_fit(monkeypatch):
    reps = [related(40, w, 5, seed=w)[0] for w in (3, 30, 70)]
    whole, cross = procrustes_matrix(reps), procrustes_matrix(reps[:1], reps[1:])
    monkeypatch.setattr(measures, "STACK_BYTES", 0)
    np.testing.assert_array_equal(procrustes_matrix(reps), whole)
    np.testing.assert_array_equal(procrustes_matrix(reps[:1], reps[1:]), cross)
    np.testing.assert_array_equal(cross, whole[:1, 1:])


# --- matrices ----------------------------------------------------------------------------------------------------

def _layers(n=80, seed=10):
    rng = np.random.default_rng(seed)
    X, Y = related(n, 16, 40, seed=seed)
    return [X, Y, np.maximum(X @ rng.normal(size=(16, 200)), 0).astype(np.float32), Y[:, :3],
            rng.normal(size=(n, 2, 3)).astype(np.float32)]


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("debiased", [False, True])
def test_cka_matrix_equals_the_pairwise_functions(kernel, debiased):
    reps = _layers()
    pair = (lambda A, B: linear_cka(A, B, debiased=debiased)) if kernel == "linear" else (
        lambda A, B: rbf_cka(A, B, debiased=debiased))
    expected = np.array([[pair(A, B) for B in reps] for A in reps])
    M = cka_matrix(reps, kernel=kernel, debiased=debiased)
    np.testing.assert_allclose(M, expected, atol=1e-9)
    assert np.array_equal(M, M.T) and np.all(np.diag(M) == 1)
    np.testing.assert_allclose(cka_matrix(reps[:2], reps[2:], kernel=kernel, debiased=debiased),
                               expected[:2, 2:], atol=1e-9)


def test_cka_matrix_in_minibatches_equals_minibatch_cka_and_reads_memmaps(tmp_path):
    reps = _layers(n=300)
    paths = []
    for i, X in enumerate(reps):
        paths.append(tmp_path / f"{i}.npy")
        np.save(paths[-1], X)
    maps = [np.load(p, mmap_mode="r") for p in paths]
    events = []
    M = cka_matrix(maps[:3], maps[3:], batch_size=64, random_state=2, progress=lambda *e: events.append(e))
    expected = [[minibatch_cka(A, B, batch_size=64, random_state=2) for B in reps[3:]] for A in reps[:3]]
    np.testing.assert_allclose(M, expected, atol=1e-12)
    assert events[-1][:3] == ("similarity", 5 * 5, 5 * 5)  # 5 minibatches of 60 × 5 representations
    np.testing.assert_allclose(procrustes_matrix(maps[:2], maps[2:]),
                               [[procrustes_distance(A, B) for B in reps[2:]] for A in reps[:2]], atol=1e-12)


@pytest.mark.parametrize("debiased", [False, True])
def test_cka_matrix_in_groups_when_the_gram_matrices_do_not_fit_at_once(monkeypatch, debiased):
    """A memory bound of about three packed Gram matrices: groups of one, columns recomputed, same values."""
    reps = _layers(n=100) + _layers(n=100, seed=11)
    whole = cka_matrix(reps, debiased=debiased, batch_size=40)
    cross = cka_matrix(reps[:3], reps[3:], debiased=debiased, batch_size=40)
    monkeypatch.setattr(measures, "STACK_BYTES", 3 * 8 * 34 * 33 // 2)
    events = []
    np.testing.assert_allclose(cka_matrix(reps, debiased=debiased, batch_size=40,
                                          progress=lambda *e: events.append(e)), whole, atol=1e-12)
    assert events[-1][1] == events[-1][2] == 3 * (10 + 9 + 8 + 7 + 6 + 5 + 4 + 3 + 2 + 1)  # 3 batches
    np.testing.assert_allclose(cka_matrix(reps[:3], reps[3:], debiased=debiased, batch_size=40), cross, atol=1e-12)


def test_ucka_vectors_cosine_is_debiased_linear_cka():
    reps = _layers(n=120)
    vectors = [representation_vectors(X, ["ucka"])["ucka"].astype(np.float64) for X in reps]
    cosines = np.array([[u @ v for v in vectors] for u in vectors])
    np.testing.assert_allclose(cosines, cka_matrix(reps), atol=2e-6)
    # the meta bank's chord distance gives it as 1 - chord²/2
    D = representation_distances(reps, transform="ucka")
    np.testing.assert_allclose(1 - D ** 2 / 2, cka_matrix(reps), atol=2e-6)
    # a pair "sample" holding every pair takes the sampled path and gives the same vectors
    every = probe_pairs(120, 120 * 119 // 2)
    sampled = [representation_vectors(X, ["ucka"], every)["ucka"] for X in reps]
    np.testing.assert_allclose(np.array(sampled), np.array(vectors), atol=1e-6)


# --- refusals --------------------------------------------------------------------------------------------------

def test_refusals_name_what_is_wrong():
    X, Y = related(50, 4, 6)
    with pytest.raises(ValueError, match=r"reps_b\[0\] has 49 probes but reps_a\[0\] has 50"):
        cka_matrix([X], [Y[:49]])
    with pytest.raises(ValueError, match="Y has 49 probes but X has 50"):
        linear_cka(X, Y[:49])
    with pytest.raises(ValueError, match="Y has 49 probes but X has 50"):
        minibatch_cka(X, Y[:49])
    with pytest.raises(ValueError, match="'sigma' parameter of rbf_cka must be a float > 0. Got 0"):
        rbf_cka(X, Y, sigma=0)
    with pytest.raises(ValueError, match="'kernel' parameter of cka_matrix"):
        cka_matrix([X], kernel="cosine")
    with pytest.raises(ValueError, match="The .batch_size. parameter of cka_matrix must be an int >= 8"):
        cka_matrix([X], batch_size=4)
    with pytest.raises(ValueError, match=r"Gram matrices of 14,000 probes take 4.4 GiB for two representations .* smaller batch_size"):
        cka_matrix([np.zeros((14000, 1))] * 2, batch_size=14000)
    with pytest.raises(ValueError, match="contains NaN"):
        linear_cka(np.where(X > 3, np.nan, X), Y, debiased=True)
    for kernel in ("linear", "rbf"):
        with pytest.raises(ValueError, match=r"reps_a\[1\] contains NaN or infinity"):
            cka_matrix([X, np.where(Y > 1, np.inf, Y)], kernel=kernel)
    with pytest.raises(ValueError, match=r"^reps_b\[1\]: all probe points coincide"):
        cka_matrix([X], [Y, np.ones((50, 2))], debiased=False)
    with pytest.raises(ValueError, match=r"^reps_b\[1\]: more than half of the probe pairs coincide"):
        cka_matrix([X], [Y, np.ones((50, 2))], kernel="rbf")
    with pytest.raises(ValueError, match="constant over the probes"):
        procrustes_distance(np.ones((50, 3)), Y)
    with pytest.raises(ValueError, match="needs at least 4"):
        linear_cka(X[:3], Y[:3], debiased=True)
    # two centred points always have the same shape: every biased CKA was 1 and every Procrustes distance 0
    for kernel in ("linear", "rbf"):
        with pytest.raises(ValueError, match=r"^reps_a\[0\] has 2 probe\(s\); this measure needs at least 3$"):
            cka_matrix([X[:2], Y[:2]], kernel=kernel, debiased=False)
    with pytest.raises(ValueError, match=r"^X has 2 probe\(s\); this measure needs at least 3$"):
        rbf_cka(X[:2], Y[:2])
    with pytest.raises(ValueError, match=r"^reps_a\[0\] has 2 probe\(s\); this measure needs at least 3$"):
        procrustes_matrix([X[:2], Y[:2]])
