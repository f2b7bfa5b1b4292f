"""repviz: look inside neural networks.

Capture layer activations during Keras training (``ActivationLogger``, with its ``ProbeSet`` and ``Reduction``
options) or of any model without training (``record``), read them back without TensorFlow (``open_logdir``),
embed them (``repviz.manifold``), place other probes into their layouts (``place_run``), compare representations
(``repviz.meta``) and layers (``repviz.similarity``), and show it all in a notebook (``show``).
"""

from __future__ import annotations

from . import datasets  # light: numpy only (Keras is imported inside load_mnist when needed)
from .store import LogDir, NotFoundError, Run, open_logdir
from .version import __version__

__all__ = ["ActivationLogger", "LogDir", "NotFoundError", "ProbeSet", "Reduction", "Run", "SimilarityMatrix",
           "__version__", "datasets", "embed_logdir", "open_logdir", "place_run", "record", "show",
           "similarity_over_training"]


def __getattr__(name: str):
    # Keras/TensorFlow are imported only when the callback is asked for: reading, embedding and the
    # TensorBoard plugin never pay for them.
    if name in ("ActivationLogger", "ProbeSet", "Reduction", "record"):
        from . import capture

        return getattr(capture, name)
    if name == "embed_logdir":  # lazily too: the pipeline pulls in the numerics (numba)
        from .pipeline import embed_logdir

        return embed_logdir
    if name == "place_run":  # lazily: placing pulls in the numerics
        from .placement import place_run

        return place_run
    if name in ("similarity_over_training", "SimilarityMatrix"):  # lazily: computing pulls in numba
        from . import similarity

        return getattr(similarity, name)
    if name == "show":  # the notebook widget answers its page through the TensorBoard plugin's routes
        from tensorboard_plugin_repviz.widget import show

        return show
    raise AttributeError(f"module 'repviz' has no attribute {name!r}")
