"""Every registered method's estimator keeps scikit-learn's dtype contract, declared in its tags: an input dtype
listed in ``preserves_dtype`` comes back (float64 in, float64 out; float32 in, float32 out), any other gives the
first listed; after a float64 fit every public float attribute is float64. Isomap, ClassicalMDS and MDS compute a
float64 output in float64 (and match scikit-learn at its float64 tolerance); the others compute in float32, so their
float64 results are the float32 ones widened, value for value."""

import numpy as np
import pytest
import scipy.sparse as sp

from repviz.methods import METHODS


def _classes() -> list[type]:
    classes = []
    for method in METHODS.values():
        try:
            cls = method.estimator_class()
        except ValueError:  # an optional extra (umap-learn) is missing
            continue
        if cls not in classes:
            classes.append(cls)
    return classes


#: Small, fast settings per class (on 80 digits).
SETTINGS = {
    "TSNE": {"perplexity": 5, "max_iter": 250}, "MDS": {"max_iter": 20}, "Sammon": {"max_iter": 20},
    "Isomap": {"n_neighbors": 12}, "LocallyLinearEmbedding": {"n_neighbors": 12},
    "ForceDirectedLayout": {"n_iter": 20}, "ElasticEmbedding": {"max_iter": 20},
    "AutoencoderEmbedding": {"hidden": (8,), "epochs": 2}, "UMAP": {"n_epochs": 20},
}
CLASSES = _classes()
SUPERVISED = {METHODS[name].estimator_class() for name in METHODS if METHODS[name].supervised}


def _estimator(cls):
    params = cls().get_params()
    kwargs = {k: v for k, v in {"random_state": 0, "n_components": 2}.items() if k in params}
    return cls(**kwargs, **SETTINGS.get(cls.__name__, {}))


def _expected(cls, dtype) -> np.dtype:
    preserved = cls().__sklearn_tags__().transformer_tags.preserves_dtype
    return np.dtype(np.dtype(dtype).name if np.dtype(dtype).name in preserved else preserved[0])


def _float_attributes(est) -> dict:
    """Public fitted float attributes (arrays, sparse matrices, numpy scalars; properties included)."""
    params = set(est.get_params())
    out = {}
    for name in dir(est):
        if name.startswith("_") or not name.endswith("_") or name in params:
            continue
        value = getattr(est, name)
        if isinstance(value, (np.ndarray, np.floating)) or sp.issparse(value):
            if value.dtype.kind == "f":
                out[name] = value
    return out


@pytest.fixture(scope="module")
def data(digits):
    """80 digits (integers 0..16: exact in float32, so every dtype holds the same values) and their labels."""
    return digits[0][:80], digits[1][:80]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_tags_declare_the_dtypes_kept(cls):
    preserved = cls().__sklearn_tags__().transformer_tags.preserves_dtype
    assert preserved == (["float32"] if cls.__name__ in ("TSNE", "SNE") else ["float64", "float32"])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_output_and_attribute_dtypes_follow_the_input(cls, data):
    X, labels = data
    y = labels if cls in SUPERVISED else None
    results = {}
    for dtype in (np.float32, np.float64, np.int64):
        expected = _expected(cls, dtype)
        est = _estimator(cls)
        Y = est.fit_transform(X.astype(dtype), y)
        assert Y.dtype == expected and est.embedding_.dtype == expected, dtype
        attributes = _float_attributes(est)
        if expected == np.float64:
            wrong = {name: v.dtype for name, v in attributes.items() if v.dtype != np.float64}
            assert not wrong, f"{cls.__name__} fitted on {np.dtype(dtype).name}: {wrong}"
        if hasattr(est, "transform"):
            for query in (np.float32, np.float64):
                assert est.transform(X[:5].astype(query)).dtype == _expected(cls, query)
        results[np.dtype(dtype).name] = Y
    if not cls._float64_numerics:  # float32 numerics whatever the input: the float32 result widened
        np.testing.assert_array_equal(results["float64"], results["float32"].astype(results["float64"].dtype))
    np.testing.assert_array_equal(results["int64"], results["float64"])  # integer input: float64, as float64


def test_inverse_transform_and_lazy_attributes_follow_the_fit():
    from repviz.manifold import PCA, ClassicalMDS

    X = np.random.default_rng(0).normal(size=(30, 5))
    pca = PCA(2).fit(X)
    assert pca.inverse_transform(pca.transform(X)).dtype == np.float64
    assert pca.inverse_transform(pca.transform(X).astype(np.float32)).dtype == np.float32
    # ClassicalMDS computes the dissimilarities of Euclidean data on first access only
    assert ClassicalMDS().fit(X).dissimilarity_matrix_.dtype == np.float64
    assert ClassicalMDS().fit(X.astype(np.float32)).dissimilarity_matrix_.dtype == np.float32


def test_calls_inside_a_fit_are_not_cast():
    """The cast is at the user's boundary: estimators called inside a fit (a PCA inside a force layout, an
    estimator's own transform) return repviz's float32 results as they always did."""
    from repviz.manifold import PCA
    from repviz.manifold._base import Estimator

    class Outer(Estimator):
        def fit(self, X, y=None):
            self._inner = PCA(2).fit_transform(np.asarray(X, dtype=np.float64))
            self.embedding_ = self._inner
            return self

    X = np.random.default_rng(0).normal(size=(30, 5))
    assert PCA(2).fit_transform(X).dtype == np.float64
    outer = Outer().fit(X.astype(np.float32))
    assert outer._inner.dtype == np.float32 and outer.embedding_.dtype == np.float32
    assert Outer().fit(X).embedding_.dtype == np.float64


def _signed_like(Y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``Y`` with each column's sign flipped to agree with ``ref`` (embeddings are defined up to reflections)."""
    return Y * np.where(np.sum(Y * ref, axis=0) < 0, -1.0, 1.0)


def _close(ours: np.ndarray, ref: np.ndarray) -> None:
    """scikit-learn's float64 tolerance (``assert_allclose``'s rtol=1e-7), with an atol far below it for entries
    near zero."""
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())


def test_float64_isomap_matches_scikit_learn():
    """Float64 input: float64 kNN distances, geodesics and eigensolve, so the embedding, the geodesics, new points'
    places and the reconstruction error are scikit-learn's to float64 rounding (float32 numerics miss by 1e-6)."""
    from sklearn.datasets import make_s_curve
    from sklearn.manifold import Isomap as SkIsomap

    from repviz.manifold import Isomap

    X = make_s_curve(200, random_state=0)[0]
    Q = X[:20] + 0.01 * np.random.default_rng(0).normal(size=(20, 3))
    for kwargs in (dict(n_neighbors=8), dict(n_neighbors=None, radius=0.6)):
        ours, ref = Isomap(**kwargs).fit(X), SkIsomap(**kwargs).fit(X)
        assert ours.dist_matrix_.dtype == np.float64
        _close(ours.dist_matrix_, ref.dist_matrix_)
        _close(_signed_like(ours.embedding_, ref.embedding_), ref.embedding_)
        _close(_signed_like(ours.transform(Q), ref.transform(Q)), ref.transform(Q))
        assert ours.reconstruction_error() == pytest.approx(ref.reconstruction_error(), rel=1e-7)


def test_float64_classical_mds_matches_scikit_learn():
    from sklearn.datasets import load_iris
    from sklearn.manifold import ClassicalMDS as SkClassicalMDS
    from sklearn.metrics import pairwise_distances

    from repviz.manifold import ClassicalMDS

    X = load_iris().data
    for metric, data in (("euclidean", X), ("manhattan", X), ("precomputed", pairwise_distances(X))):
        ours, ref = ClassicalMDS(metric=metric).fit(data), SkClassicalMDS(metric=metric).fit(data)
        _close(_signed_like(ours.embedding_, ref.embedding_), ref.embedding_)
        _close(ours.eigenvalues_, ref.eigenvalues_)


def test_float64_mds_matches_scikit_learn():
    """The same SMACOF steps from the same classical start (eps=0: every one of the max_iter steps runs in both)
    give scikit-learn's layout, and ``stress_`` is that of the float64 layout returned."""
    from sklearn.datasets import load_iris
    from sklearn.manifold import MDS as SkMDS

    from repviz.manifold import MDS

    X = load_iris().data[::3]
    ours = MDS(max_iter=30, eps=0.0).fit(X)
    ref = SkMDS(init="classical_mds", n_init=1, max_iter=30, eps=0.0).fit(X)
    _close(_signed_like(ours.embedding_, ref.embedding_), ref.embedding_)
    Y = ours.embedding_
    d = np.sqrt(((Y[:, None] - Y[None]) ** 2).sum(-1))
    delta = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    assert ours.stress_ == pytest.approx(0.5 * ((d - delta) ** 2).sum(), rel=1e-10)


@pytest.mark.parametrize("name", ["Isomap", "ClassicalMDS", "MDS"])
def test_float32_input_keeps_float32_numerics(name, data):
    """Float32 input (what the pipeline passes) is computed in float32 as before: float32 arrays throughout, and
    results within float32 rounding of the float64 ones, not equal to them."""
    import repviz.manifold as manifold

    X = data[0][:60]
    est32, est64 = (_estimator(getattr(manifold, name)).fit(X.astype(dtype)) for dtype in (np.float32, np.float64))
    assert est32.embedding_.dtype == np.float32
    assert all(v.dtype != np.float64 or v.ndim < 2 for v in _float_attributes(est32).values())
    scale = np.abs(est64.embedding_).max()
    np.testing.assert_allclose(_signed_like(est32.embedding_.astype(np.float64), est64.embedding_),
                               est64.embedding_, atol=1e-3 * scale)
    assert not np.array_equal(est32.embedding_.astype(np.float64), est64.embedding_)
