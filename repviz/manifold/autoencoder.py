"""Autoencoder embedding: a Keras multilayer autoencoder whose bottleneck is the embedding (Hinton &
Salakhutdinov 2006), the nonlinear generalisation of PCA (a linear autoencoder with squared loss spans the
principal subspace).

Keras is imported only inside :meth:`AutoencoderEmbedding.fit`, so importing :mod:`repviz.manifold` (and the
pipeline, the plugin) never loads TensorFlow. After fitting, the encoder's weights are kept as NumPy arrays and
:meth:`~AutoencoderEmbedding.transform` runs the encoder in NumPy: a fitted estimator pickles as plain arrays and
places new points without Keras.
"""

from __future__ import annotations

import numpy as np

from .._validation import RANDOM_STATE, Interval, Rule, check_array, check_n_features
from ._base import Estimator, rng_from

_HIDDEN = Rule(lambda v: isinstance(v, (tuple, list)) and all(isinstance(h, int) and not isinstance(h, bool)
                                                                and h >= 1 for h in v),
               "a tuple of positive ints (the hidden layer widths of the encoder)")


def _autoencoder(d: int, hidden: tuple, k: int, rng: np.random.Generator):
    """Encoder x -> (Dense relu)* -> Dense k (linear), decoder its mirror image -> Dense d (linear); every
    initializer seeded from ``rng``."""
    import keras

    def dense(units, activation=None):
        return keras.layers.Dense(units, activation=activation,
                                  kernel_initializer=keras.initializers.GlorotUniform(seed=int(rng.integers(2**31))))

    inputs = keras.Input((d,))
    h = inputs
    for units in hidden:
        h = dense(units, "relu")(h)
    code = dense(k)(h)
    h = code
    for units in hidden[::-1]:
        h = dense(units, "relu")(h)
    return keras.Model(inputs, dense(d)(h)), len(hidden) + 1


class AutoencoderEmbedding(Estimator):
    """Nonlinear dimensionality reduction by a Keras autoencoder: the bottleneck activations are the embedding.

    Cost: per epoch O(n (d h_1 + h_1 h_2 + ... + h_last k)) multiply-adds, twice (encoder and decoder) and three
    times that for the backward pass; memory O(parameters + batch_size d). ``transform``: one forward pass of
    the encoder in NumPy. Imports Keras (TensorFlow) when fitted.

    Parameters
    ----------
    n_components : int, default=2
        Width of the bottleneck.
    hidden : tuple of int, default=(256, 64)
        Widths of the encoder's ReLU layers (the decoder mirrors them).
    epochs : int, default=50
    batch_size : int, default=256
    learning_rate : float, default=1e-3
        Adam's step size.
    random_state : int, Generator or None, default=None
        Seeds the weight initialisation and the shuffling of every epoch.

    Attributes
    ----------
    encoder_weights_ : list of (W, b) float32 arrays
        The fitted encoder: ReLU after every layer but the last.
    mean_, scale_ : ndarray (n_features,), float
        Input standardisation (the mean, and one scale for all features, which keeps their relative sizes).
    loss_ : float
        Mean squared reconstruction error of the standardised data over the batches of the last epoch.
    embedding_ : ndarray (n_samples, n_components), float32 for float32 input, else float64

    References
    ----------
    Hinton & Salakhutdinov (2006), Reducing the dimensionality of data with neural networks. Science 313.
    """

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None, "left")],
        "hidden": [_HIDDEN],
        "epochs": [Interval(int, 1, None, "left")],
        "batch_size": [Interval(int, 1, None, "left")],
        "learning_rate": [Interval(float, 0, None, "neither")],
        "random_state": [RANDOM_STATE],
    }

    def __init__(self, n_components=2, *, hidden=(256, 64), epochs=50, batch_size=256, learning_rate=1e-3,
                 random_state=None):
        self.n_components = n_components
        self.hidden = hidden
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.random_state = random_state

    def fit(self, X, y=None):
        """Train the autoencoder on ``X`` (n_samples, n_features) and store the bottleneck as ``embedding_``."""
        self._validate_params()
        X = check_array(X, "AutoencoderEmbedding", min_samples=2)
        import keras  # here, not at the top: see the module docstring

        rng = rng_from(self.random_state)
        self.mean_ = X.mean(axis=0, dtype=np.float64)
        Xs = np.subtract(X, self.mean_, dtype=np.float64)
        self.scale_ = float(np.sqrt(np.mean(Xs**2))) or 1.0
        Xs = (Xs / self.scale_).astype(np.float32)
        model, n_encoder = _autoencoder(X.shape[1], tuple(self.hidden), self.n_components, rng)
        model.compile(optimizer=keras.optimizers.Adam(self.learning_rate), loss="mse")
        # Adam's slots made here: a first step that makes them is traced twice (half of a small fit's time)
        model.optimizer.build(model.trainable_variables)
        # our seeded shuffle, batch by batch: model.fit shuffles with Keras's global seed, and a PyDataset's
        # prefetching thread made repeated fits differ
        bs, losses = self.batch_size, []
        for _ in range(self.epochs):
            order = rng.permutation(len(Xs))
            losses = [float(model.train_on_batch(Xs[order[s:s + bs]], Xs[order[s:s + bs]]))
                      for s in range(0, len(Xs), bs)]
        self.loss_ = float(np.mean(losses))
        dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)][:n_encoder]
        self.encoder_weights_ = [tuple(np.asarray(w, dtype=np.float32) for w in layer.get_weights())
                                 for layer in dense]
        self.n_features_in_ = X.shape[1]
        self.embedding_ = self._encode(Xs)
        return self

    def _encode(self, Xs: np.ndarray) -> np.ndarray:
        h = Xs
        for i, (W, b) in enumerate(self.encoder_weights_):
            h = h @ W + b
            if i < len(self.encoder_weights_) - 1:
                np.maximum(h, 0, out=h)
        return h.astype(np.float32, copy=False)

    def transform(self, X) -> np.ndarray:
        """Bottleneck coordinates of new rows (the encoder, in NumPy). Time O(n (d h_1 + ... + h_last k))."""
        self._check_fitted()
        X = check_array(X, "AutoencoderEmbedding")
        check_n_features(self, X)
        return self._encode((np.subtract(X, self.mean_, dtype=np.float64) / self.scale_).astype(np.float32))
