"""Every registered method's estimator keeps scikit-learn's dtype contract, declared in its tags: an input dtype
listed in ``preserves_dtype`` comes back (float64 in, float64 out; float32 in, float32 out), any other gives the
first listed; after a float64 fit every public float attribute is float64. The numerics stay float32: the float64
results are the float32 ones widened, value for value."""

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
    # the numerics are float32 whatever the input: the other results are the float32 one widened
    np.testing.assert_array_equal(results["float64"], results["float32"].astype(results["float64"].dtype))
    np.testing.assert_array_equal(results["int64"], results["float64"])


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
