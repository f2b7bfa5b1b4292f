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
    with pytest.raises(ValueError, match="method='nndescent' needs dense feature vectors .* not metric='precomputed'"):
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


ALL = ESTIMATORS + [manifold.TSNE, manifold.SNE]


@pytest.mark.parametrize("Est", ALL, ids=lambda e: e.__name__)
def test_scikit_learn_tools_read_the_tags(Est):
    """check_is_fitted reads __sklearn_tags__ (it raised AttributeError), then __sklearn_is_fitted__."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils import get_tags
    from sklearn.utils.validation import check_is_fitted

    with pytest.raises(NotFittedError, match=f"This {Est.__name__} instance is not fitted yet"):
        check_is_fitted(Est())
    tags = get_tags(Est())
    assert tags.requires_fit and not tags.target_tags.required
    assert tags.transformer_tags.preserves_dtype == (["float32"] if Est in (manifold.TSNE, manifold.SNE)
                                                     else ["float64", "float32"])
    assert not tags.input_tags.pairwise


def test_tags_without_scikit_learn(monkeypatch):
    """With scikit-learn not importable the tags are a namespace with the same fields."""
    monkeypatch.setitem(__import__("sys").modules, "sklearn.utils", None)
    tags = manifold.MDS(metric="precomputed").__sklearn_tags__()
    assert tags.input_tags.pairwise and tags.requires_fit
    assert tags.transformer_tags.preserves_dtype == ["float64", "float32"]
    for affinity, pairwise in (("precomputed_nearest_neighbors", True), ("precomputed", True), ("rbf", False)):
        assert manifold.SpectralEmbedding(affinity=affinity).__sklearn_tags__().input_tags.pairwise is pairwise


def test_feature_names_out_and_output_containers(data):
    X = data[0][:80]
    est = manifold.Isomap(n_neighbors=12)
    Y = est.fit_transform(X)
    np.testing.assert_array_equal(est.get_feature_names_out(), ["isomap0", "isomap1"])
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ == 64
    with pytest.raises(ValueError, match="X has 3 features, but Isomap is expecting 64 features as input"):
        est.transform(X[:5, :3])  # checked by the base class for every transform
    with pytest.raises(ValueError, match="input_features should have length equal to number of features"):
        est.get_feature_names_out(["a"])
    with pytest.raises(ValueError, match=r"set_output\(transform=...\) must be one of"):
        est.set_output(transform="xarray")
    assert isinstance(manifold.PCA().set_output(transform="default").fit_transform(X), np.ndarray)
    assert clone(manifold.PCA().set_output(transform="pandas"))._sklearn_output_config == {"transform": "pandas"}
    assert type(Y) is np.ndarray


def test_pandas_output_and_feature_names_in(data):
    pd = pytest.importorskip("pandas")
    from sklearn import config_context

    X = data[0][:80]
    frame = pd.DataFrame(X, columns=[f"pixel{i}" for i in range(64)], index=np.arange(100, 180))
    est = manifold.PCA().set_output(transform="pandas")
    out = est.fit_transform(frame)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["pca0", "pca1"]
    np.testing.assert_array_equal(out.index, frame.index)
    np.testing.assert_array_equal(est.feature_names_in_, frame.columns)
    np.testing.assert_array_equal(out.to_numpy(), manifold.PCA().fit_transform(X))
    with pytest.raises(ValueError, match="The feature names should match those that were passed during fit"):
        est.transform(frame.rename(columns={"pixel0": "other"}))
    with pytest.warns(UserWarning, match="X does not have valid feature names, but PCA was fitted with"):
        est.transform(X)
    with config_context(transform_output="pandas"):  # the global configuration is honoured
        tsne = manifold.TSNE(perplexity=10, max_iter=250, random_state=0).fit_transform(frame)
        assert isinstance(tsne, pd.DataFrame) and list(tsne.columns) == ["tsne0", "tsne1"]
    assert isinstance(manifold.MDS(max_iter=5).fit_transform(frame), np.ndarray)  # back to the default
