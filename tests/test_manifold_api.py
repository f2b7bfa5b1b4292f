"""Every manifold estimator follows scikit-learn's conventions: __init__ only stores keyword-only arguments,
get_params/set_params/clone work, fit validates and returns self, fit_transform returns embedding_."""

import inspect

import numpy as np
import pytest
from sklearn.base import clone

import repviz.manifold as manifold

ESTIMATORS = [manifold.PCA, manifold.ProbabilisticPCA, manifold.KernelPCA, manifold.ClassicalMDS, manifold.MDS,
              manifold.Sammon, manifold.Isomap, manifold.LocallyLinearEmbedding, manifold.SpectralEmbedding,
              manifold.DiffusionMap, manifold.ForceDirectedLayout, manifold.LinearDiscriminantAnalysis,
              manifold.Whitening, manifold.FastICA, manifold.SlowFeatureAnalysis, manifold.AutoencoderEmbedding,
              manifold.ElasticEmbedding]
#: Parameters whose names end with "_" although they are not fitted attributes: the elastic embedding's lambda_
#: (the issue's name for its λ; "lambda" is a Python keyword). scikit-learn is told by __sklearn_is_fitted__.
PARAMETERS_ENDING_IN_UNDERSCORE = {"lambda_"}


@pytest.fixture(scope="module")
def data(digits):
    """The first 150 of the shared digits (float32) and their labels."""
    return digits[0][:150].astype(np.float32), digits[1][:150]


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda e: e.__name__)
def test_conventions(Est, data):
    params = list(inspect.signature(Est.__init__).parameters.values())[1:]
    positional = [p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert positional in ([], ["n_components"])
    est = Est()
    assert not [k for k in vars(est) if k.endswith("_") and k not in PARAMETERS_ENDING_IN_UNDERSCORE]
    cloned = clone(est)
    assert cloned.get_params() == est.get_params()
    X, y = data
    kwargs = {"max_iter": 5} if Est in (manifold.MDS, manifold.Sammon) else {}
    if Est is manifold.ForceDirectedLayout:
        kwargs = {"n_iter": 5, "random_state": 0}
    if Est in (manifold.LocallyLinearEmbedding, manifold.Isomap):
        kwargs = {"n_neighbors": 12}
    if Est is manifold.AutoencoderEmbedding:
        kwargs = {"hidden": (16,), "epochs": 3, "random_state": 0}
    if Est is manifold.ElasticEmbedding:
        kwargs = {"max_iter": 20, "random_state": 0}
    if Est is manifold.FastICA:  # a random start
        kwargs = {"random_state": 0}
    est = Est(**kwargs)
    assert est.fit(X, y) is est
    assert est.embedding_.shape[0] == len(X) and est.embedding_.dtype == np.float32
    assert np.isfinite(est.embedding_).all()
    np.testing.assert_array_equal(Est(**kwargs).fit_transform(X, y), est.embedding_)
    with pytest.raises(ValueError, match=f"Invalid parameter 'bogus' for estimator {Est.__name__}"):
        est.set_params(bogus=1)


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda e: e.__name__)
def test_invalid_n_components_is_reported_at_fit(Est, data):
    est = Est(n_components=-1)  # accepted by __init__ (it only stores)
    with pytest.raises(ValueError, match=f"The 'n_components' parameter of {Est.__name__} must be an int"):
        est.fit(*data)


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda e: e.__name__)
def test_non_finite_input(Est, data):
    X = data[0].copy()
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        Est().fit(X, data[1])


@pytest.mark.parametrize("Est", [manifold.Isomap, manifold.SpectralEmbedding, manifold.DiffusionMap,
                                 manifold.ForceDirectedLayout], ids=lambda e: e.__name__)
def test_the_neighbors_option_reaches_the_knn_search(Est, data):
    """``neighbors`` goes to :func:`repviz.neighbors.knn` as its ``method``: NN-descent refuses distances there."""
    X = data[0][:60].astype(np.float64)
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    assert Est(metric="precomputed", n_neighbors=12, neighbors="exact").fit(D).embedding_.shape == (60, 2)
    with pytest.raises(ValueError, match="method='nndescent' needs feature vectors, not a precomputed distance"):
        Est(metric="precomputed", n_neighbors=12, neighbors="nndescent").fit(D)


@pytest.mark.filterwarnings("error::scipy.sparse.SparseEfficiencyWarning")
@pytest.mark.parametrize("Est", [manifold.Isomap, manifold.SpectralEmbedding, manifold.DiffusionMap,
                                 manifold.ForceDirectedLayout], ids=lambda e: e.__name__)
def test_a_disconnected_graph_is_joined_with_a_warning_or_refused(Est, digits):
    X = np.vstack([digits[0][:300], digits[0][:300] + 1000.0])  # two copies, far apart
    kwargs = {"n_iter": 50, "random_state": 0} if Est is manifold.ForceDirectedLayout else {}
    with pytest.warns(UserWarning, match="has 2 connected components; joining them"):
        est = Est(n_neighbors=15, **kwargs).fit(X)
    assert est.n_connected_components_ == 2 and np.isfinite(est.embedding_).all()
    with pytest.raises(ValueError, match="has 2 connected components. Increase n_neighbors"):
        Est(n_neighbors=15, connect=False, **kwargs).fit(X)
