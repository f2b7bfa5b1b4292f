"""repviz: look inside neural networks.

Capture layer activations during Keras training (``ActivationLogger``), read them back without TensorFlow
(``open_logdir``), embed them (``repviz.manifold``) and compare representations (``repviz.meta``).
"""

from __future__ import annotations

from . import datasets  # light: numpy only (Keras is imported inside load_mnist when needed)
from .store import LogDir, NotFoundError, Run, open_logdir
from .version import __version__

__all__ = ["ActivationLogger", "LogDir", "NotFoundError", "Run", "__version__", "datasets", "embed_logdir",
           "open_logdir"]


def __getattr__(name: str):
    # Keras/TensorFlow are imported only when the callback is asked for: reading, embedding and the
    # TensorBoard plugin never pay for them.
    if name == "ActivationLogger":
        from .capture import ActivationLogger

        return ActivationLogger
    if name == "embed_logdir":  # lazily too: the pipeline pulls in the numerics (numba)
        from .pipeline import embed_logdir

        return embed_logdir
    raise AttributeError(f"module 'repviz' has no attribute {name!r}")
