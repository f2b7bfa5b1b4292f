"""Laplacian eigenmaps and diffusion maps: scikit-learn (test-only), dense references, disconnected graphs."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import eigh
from scipy.spatial import procrustes
from scipy.spatial.distance import cdist
from sklearn.datasets import make_s_curve, make_swiss_roll
from sklearn.manifold import SpectralEmbedding as SkSpectral

from repviz.manifold import DiffusionMap, SpectralEmbedding
from repviz.manifold._eigen import eigsolve
from repviz.manifold._graph import knn_graph
from repviz.manifold.spectral import _floor_bridges


@pytest.fixture(scope="module")
def digits(digits):
    """The first 1,200 of the shared digits."""
    return digits[0][:1200]


@pytest.mark.parametrize("n", [600, 1200])  # dense path and Lanczos path
def test_matches_sklearn(digits, n):
    X = digits[:n]
    ours = SpectralEmbedding(n_neighbors=10, random_state=0).fit(X)
    # scikit-learn counts the point itself among its neighbours
    ref = SkSpectral(n_neighbors=11, affinity="nearest_neighbors", eigen_solver="arpack", random_state=0).fit(X)
    assert procrustes(ours.embedding_, ref.embedding_)[2] < 1e-4


def test_laplacians_against_dense_reference(swiss_roll):
    X = swiss_roll(500)
    est = SpectralEmbedding(affinity="heat", laplacian="normalized").fit(X)
    W = est.affinity_matrix_.toarray()
    deg = W.sum(1)
    L_sym = np.eye(len(X)) - W / np.sqrt(np.outer(deg, deg))
    w, V = eigh(L_sym, subset_by_index=(0, 2))
    np.testing.assert_allclose(est.eigenvalues_, w[1:], rtol=1e-6, atol=1e-10)
    assert procrustes(est.embedding_, V[:, 1:])[2] < 1e-8
    rw = SpectralEmbedding(affinity="heat", laplacian="random_walk").fit(X)
    w_gen, V_gen = eigh(np.diag(deg) - W, np.diag(deg), subset_by_index=(0, 2))  # L v = lambda D v
    np.testing.assert_allclose(rw.eigenvalues_, w_gen[1:], rtol=1e-6, atol=1e-10)
    assert procrustes(rw.embedding_, V_gen[:, 1:])[2] < 1e-8
    un = SpectralEmbedding(affinity="heat", laplacian="unnormalized").fit(X)
    w_un, V_un = eigh(np.diag(deg) - W, subset_by_index=(0, 2))
    np.testing.assert_allclose(un.eigenvalues_, w_un[1:], rtol=1e-6, atol=1e-10)
    assert procrustes(un.embedding_, V_un[:, 1:])[2] < 1e-8


def test_precomputed_equals_euclidean(digits):
    X = digits[:400]
    a = SpectralEmbedding(affinity="heat").fit_transform(X)
    b = SpectralEmbedding(affinity="heat", metric="precomputed").fit_transform(cdist(X, X))
    assert procrustes(a, b)[2] < 1e-6


def test_diffusion_map_against_dense_markov_matrix(swiss_roll):
    X = swiss_roll(400, random_state=1)
    dm = DiffusionMap(n_components=2, alpha=0.5, t=1.0).fit(X)
    # the same kernel densely: exp(-d²/eps) on the symmetric kNN graph, self-affinity 1
    G = knn_graph(X.astype(np.float32), 10, "euclidean")[0].toarray()
    K = np.where(G > 0, np.exp(-G ** 2 / dm.epsilon_), 0.0) + np.eye(len(X))
    q = K.sum(1) ** -0.5
    K_alpha = q[:, None] * K * q[None, :]
    P = K_alpha / K_alpha.sum(1, keepdims=True)
    lam = np.sort(np.linalg.eigvals(P).real)[::-1]
    np.testing.assert_allclose(dm.eigenvalues_, lam[1:3], rtol=1e-5)
    # the embedding columns are right eigenvectors of P scaled by lambda^t
    Y = dm.embedding_.astype(np.float64)
    np.testing.assert_allclose(P @ Y, Y * dm.eigenvalues_, rtol=1e-3, atol=1e-4 * np.abs(Y).max())
    dm2 = DiffusionMap(n_components=2, alpha=0.5, t=3.0).fit(X)
    np.testing.assert_allclose(dm2.embedding_, dm.embedding_ * dm.eigenvalues_ ** 2, rtol=1e-3,
                               atol=1e-4 * np.abs(Y).max())


def test_joined_components_connect_the_affinity(digits):
    X = np.vstack([digits[:200], digits[:200] + 1000.0])
    with pytest.warns(UserWarning):
        W = SpectralEmbedding(n_neighbors=5).fit(X).affinity_matrix_
    assert sp.csgraph.connected_components(W)[0] == 1


@pytest.mark.parametrize("Est, kwargs, match", [
    (SpectralEmbedding, dict(n_neighbors=400), r"n_neighbors \(400\) must be less than n_samples \(400\)"),
    (SpectralEmbedding, dict(laplacian="sym"), "The 'laplacian' parameter of SpectralEmbedding must be a str among"),
    (SpectralEmbedding, dict(gamma=0.0), r"The 'gamma' parameter of SpectralEmbedding must be a float in the range "
                                         r"\(0, inf\) or None"),
    (DiffusionMap, dict(alpha=2.0), r"The 'alpha' parameter of DiffusionMap must be a float in the range \[0, 1\]"),
    (DiffusionMap, dict(epsilon="median"), "The 'epsilon' parameter of DiffusionMap must be"),
    (DiffusionMap, dict(n_components=400), r"n_components \(400\) must be less than n_samples \(400\)"),
])
def test_bad_parameters(digits, Est, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Est(**kwargs).fit(digits[:400])


@pytest.mark.parametrize("solver", ["dense", "lobpcg"])
def test_eigensolvers_agree(digits, solver):
    ref = SpectralEmbedding(eigen_solver="arpack", random_state=0).fit(digits)
    other = SpectralEmbedding(eigen_solver=solver, random_state=0).fit(digits)
    np.testing.assert_allclose(other.eigenvalues_, ref.eigenvalues_, rtol=1e-5)
    assert procrustes(ref.embedding_, other.embedding_)[2] < 1e-6


def _two_rings(n, k, seed=0):
    """Affinity of two k-regular rings of n/2 points (random weights in (0, 1]) joined by one bridge of weight
    0, as a heat kernel of a long bridge gives; and the bridge alone."""
    rng = np.random.default_rng(seed)
    half = n // 2
    i = np.repeat(np.arange(n), k)
    j = (i % half + np.tile(np.arange(1, k + 1), n)) % half + (i // half) * half
    A = sp.csr_matrix((rng.uniform(0.01, 1.0, n * k), (i, j)), shape=(n, n))
    bridges = sp.csr_matrix(([1.0, 1.0], ([0, half], [half, 0])), shape=(n, n))
    W = (A.maximum(A.T) + 0 * bridges).tocsr()  # the bridge stored, with affinity 0
    W.sort_indices()
    return W, bridges


def test_floor_bridges_matches_dense_rule():
    W, bridges = _two_rings(60, 3)
    Wd, Bd = W.toarray(), bridges.toarray()
    floor = Wd[(Bd == 0) & (Wd > 0)].min()
    np.testing.assert_array_equal(_floor_bridges(W, bridges).toarray(), np.maximum(Wd, floor * (Bd > 0)))


def test_floor_bridges_memory_is_linear_in_edges():
    """Non-regression: ``W.multiply(bridges == 0)`` stored every zero of the n × n matrix (225 MiB at n = 3,000,
    quadratic in n); the peak must stay a small multiple of the stored edges."""
    for n in (4000, 16000):
        W, bridges = _two_rings(n, 10)
        tracemalloc.start()
        _floor_bridges(W, bridges)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"n={n}: nnz={W.nnz}, peak={peak / 2**20:.1f} MiB ({peak / W.nnz:.0f} bytes per edge)")
        assert peak < 120 * W.nnz  # n² / 8 bytes alone would be 2 MiB and 32 MiB; an entry costs 12 bytes


def test_largest_eigenpairs_of_a_clustered_top_fall_back_to_shift_invert():
    """Top eigenvalues 1 - 1e-9 j on a spectrum of width 2: Lanczos stalls; told the top, it shift-inverts.
    A diagonal matrix suffices: from a random start vector, Krylov methods see only the spectrum."""
    n = 3000
    w = np.concatenate([1.0 - 1e-9 * np.arange(8), np.linspace(-1.0, 0.99, n - 8)])
    A = sp.diags(w).tocsr()
    with pytest.raises(RuntimeError, match="the arpack eigensolver failed"):
        eigsolve(A, 3, largest=True, solver="arpack", max_iter=200, random_state=0)
    lam, V = eigsolve(A, 3, largest=True, solver="arpack", random_state=0, upper=1.0)
    np.testing.assert_allclose(lam, w[:3], rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.abs(V[:3]), np.eye(3), atol=1e-6)


def _dense_diffusion(X, eps, alpha=1.0):
    """DiffusionMap's eigenpairs (t=1, 2 components) from a dense eigendecomposition of the same operator."""
    G = knn_graph(X.astype(np.float32), 10, "euclidean")[0].toarray()
    K = np.where(G > 0, np.exp(-G ** 2 / eps), 0.0) + np.eye(len(X))
    q = K.sum(1) ** -alpha
    K_alpha = q[:, None] * K * q[None, :]
    s = np.sqrt(K_alpha.sum(1))
    lam, V = eigh(K_alpha / np.outer(s, s), subset_by_index=(len(X) - 3, len(X) - 1), driver="evx")
    lam, V = lam[::-1], V[:, ::-1]
    psi = V / s[:, None]
    return lam[1:], psi[:, 1:] * lam[1:]


@pytest.mark.parametrize("data, n", [("blob", 500), ("blob", 2000), ("blob", 3000), ("swiss roll", 2000),
                                     ("S-curve", 1000)])
def test_diffusion_map_converges_and_matches_dense(data, n):
    """Non-regression: on a 3-D Gaussian blob of 3,000 points ARPACK's Lanczos found 0 of 3 eigenvectors (the
    top eigenvalues lie within 1e-6 of 1); every case must now match a dense eigendecomposition."""
    if data == "blob":
        X = np.random.default_rng(0).standard_normal((n, 3))
    else:
        X = (make_swiss_roll if data == "swiss roll" else make_s_curve)(n, random_state=0)[0]
    dm = DiffusionMap(n_neighbors=10, eigen_solver="arpack", random_state=0).fit(X)
    lam, Y = _dense_diffusion(X, dm.epsilon_)
    np.testing.assert_allclose(dm.eigenvalues_, lam, rtol=1e-9)
    assert procrustes(dm.embedding_, Y)[2] < 1e-6


def _rbf(X, gamma):
    return np.exp(-gamma * cdist(X, X, "sqeuclidean"))


def test_rbf_precomputed_and_callable_affinities_match_sklearn(digits):
    X = digits[:300].astype(np.float64)
    gamma = 1e-3
    rbf = SpectralEmbedding(affinity="rbf", gamma=gamma, random_state=0).fit(X)
    np.testing.assert_allclose(rbf.affinity_matrix_, _rbf(X, gamma), rtol=1e-12)
    pre = SpectralEmbedding(affinity="precomputed", random_state=0).fit(_rbf(X, gamma))
    pre_sparse = SpectralEmbedding(affinity="precomputed", random_state=0).fit(sp.csr_matrix(_rbf(X, gamma)))
    call = SpectralEmbedding(affinity=lambda Z: _rbf(Z, gamma), random_state=0).fit(X)
    for other in (pre, pre_sparse, call):
        np.testing.assert_allclose(other.embedding_, rbf.embedding_, rtol=1e-5, atol=1e-6)
    ref = SkSpectral(affinity="rbf", gamma=gamma, eigen_solver="arpack", random_state=0).fit(X)
    assert procrustes(rbf.embedding_, ref.embedding_)[2] < 1e-8
    default = SpectralEmbedding(affinity="rbf", random_state=0).fit(X[:100] / 16)
    np.testing.assert_allclose(default.affinity_matrix_, _rbf(X[:100] / 16, 1 / 64), rtol=1e-12)  # 1/n_features


def test_sklearns_neighbour_counts_include_the_point_itself(digits):
    """"nearest_neighbors" and "precomputed_nearest_neighbors" count the point itself, as scikit-learn does; a
    precomputed graph with more stored neighbours is cut to n_neighbors."""
    from sklearn.neighbors import KNeighborsTransformer

    X = digits[:400]
    binary = SpectralEmbedding(n_neighbors=10, random_state=0).fit(X)
    sk_name = SpectralEmbedding(affinity="nearest_neighbors", n_neighbors=11, random_state=0).fit(X)
    np.testing.assert_array_equal(sk_name.embedding_, binary.embedding_)
    assert sk_name.n_neighbors_ == 10
    for stored in (11, 20):
        graph = KNeighborsTransformer(n_neighbors=stored, mode="distance").fit_transform(X)
        pre = SpectralEmbedding(affinity="precomputed_nearest_neighbors", n_neighbors=11, random_state=0).fit(graph)
        np.testing.assert_allclose(pre.embedding_, binary.embedding_, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="counts the point itself among its n_neighbors"):
        SpectralEmbedding(affinity="nearest_neighbors", n_neighbors=1).fit(X)


@pytest.mark.parametrize("Est", [SpectralEmbedding, DiffusionMap])
def test_sparse_data_equals_dense(digits, Est):
    X = digits[:400]
    dense = Est(random_state=0).fit(X)
    sparse = Est(random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(sparse.embedding_, dense.embedding_, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("affinity, match", [
    (np.array([[0, 1, 2], [1, 0, 1], [0, 1, 0]], dtype=float), r"must be symmetric; max \|A - A.T\| = 2"),
    (np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=float), "has 2 connected components"),
    (-np.ones((3, 3)), "must be non-negative"),
])
def test_bad_affinity_matrices(affinity, match):
    with pytest.raises(ValueError, match=match):
        SpectralEmbedding(n_components=1, affinity="precomputed").fit(affinity)


def test_eigen_tol_and_solver_spellings(digits):
    X = digits[:400]
    ref = SpectralEmbedding(random_state=0).fit(X).embedding_
    loose = SpectralEmbedding(eigen_solver="lobpcg", eigen_tol=1e-8, random_state=0).fit(X).embedding_
    assert procrustes(ref, loose)[2] < 1e-6
    np.testing.assert_array_equal(SpectralEmbedding(eigen_solver=None, random_state=0).fit(X).embedding_, ref)
    with pytest.raises(ValueError, match="The eigen_solver was set to 'amg', but pyamg is not available"):
        SpectralEmbedding(eigen_solver="amg").fit(X)


def test_pipeline_cache_key_kept():
    """eigen_tol="auto" (the old tol=0) and n_jobs leave the pipeline's spectral key, and so its cached results,
    as they were (the key at b37e822)."""
    from repviz.methods import resolve

    assert resolve("spectral").key == "spectral-a532d37ce4"
    assert resolve("spectral", {"eigen_tol": 1e-3}).key != "spectral-a532d37ce4"
