"""``record``: one snapshot of any Keras model without training it (a pretrained backbone, a saved model), through
the callback's own capture, so that it can be embedded, mapped and compared as a run recorded during ``fit``."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Any

import keras

from .. import store
from .._validation import INTEGER, Rule, check_param, param_error
from .callback import ActivationLogger
from .options import ProbeSet, Reduction
from .rerun import weights_digest

_STEP = Rule(lambda v: INTEGER(v) and v >= 0, "an int >= 0")

#: The weights each model object last recorded, per run directory: a model changed by a training loop of the
#: user's own between two calls continues its run rather than starting a new one beside it.
_LAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record(model: Any, probe: ProbeSet | Any, log_dir: str | os.PathLike, step: int = 0, *, layers=None,
           reduction: Reduction | dict | None = None, seed: int = 0, prediction_output: str | None = None,
           forward: Callable | None = None, **legacy: Any) -> store.Run:
    """Record what the layers of ``model`` do on ``probe`` now, as snapshot ``step`` of the run ``log_dir``.

    The same capture, store, probe, metadata and layer-selection rules as :class:`ActivationLogger` (its
    parameters of the same names mean the same), without ``fit``: the model runs on the probe in inference mode
    once. Several calls with other ``step`` values add snapshots to the same run (the same model object, also
    after a training loop of your own between the calls; or the same weights). A step the run holds already is
    refused in one line. Another model of the same architecture whose weights that run never held is recorded as
    a new run beside it, ``<log_dir>-2``, said in one line, as a script run again is; a model of another
    architecture into the same ``log_dir`` is refused (:class:`~repviz.store.IncompatibleRunError`): give each
    architecture its own run directory under one log directory to compare them.

    Parameters
    ----------
    model : keras.Model or layer
        Any model that can run on the probe (a ``keras.applications`` backbone, a keras-hub model, a loaded
        ``.keras`` file); ``forward=`` for one without ``call()``.
    probe : ProbeSet, array, (x, y), tf.data.Dataset, generator or keras.utils.PyDataset
        The fixed inputs, as :class:`ActivationLogger` takes them.
    log_dir : path
        The run directory (e.g. ``"logs/resnet50"``); ``"logs"`` is then the log directory to open.
    step : int, default=0
        The snapshot's step (``manifest["step_unit"]`` is ``"step"`` for a run begun by ``record``; a run begun
        by ``fit`` keeps its unit).
    layers, reduction, seed, prediction_output, forward, **legacy
        As for :class:`ActivationLogger`.

    Returns
    -------
    Run
        The run recorded into (:class:`repviz.store.Run`, opened in the directory above it: ``run.name`` is
        ``log_dir``'s last part, or ``<that>-2``, ... when a new run was begun beside it).

    Examples
    --------
    >>> import keras, numpy as np, repviz                                            # doctest: +SKIP
    >>> x = np.random.default_rng(0).random((500, 64, 64, 3), dtype=np.float32)      # doctest: +SKIP
    >>> for name in ("MobileNetV3Small", "EfficientNetB0"):                          # doctest: +SKIP
    ...     net = getattr(keras.applications, name)(weights=None, input_shape=(64, 64, 3))
    ...     repviz.record(net, x, f"logs/{name}")
    >>> from repviz.similarity import similarity                                    # doctest: +SKIP
    >>> print(similarity("logs", runs=("MobileNetV3Small", "EfficientNetB0")).table())  # doctest: +SKIP
    """
    if not isinstance(model, keras.layers.Layer):
        raise param_error("model", "record", "a keras Model or Layer", model)
    step = int(check_param(step, [_STEP], "step", "record"))
    logger = ActivationLogger(log_dir, probe, layers=layers, reduction=reduction, seed=seed,
                              prediction_output=prediction_output, model=model, forward=forward, **legacy)
    last = _LAST.get(model, {}).get(str(log_dir))  # a Keras layer: hashable by identity, weakly referenced
    where = logger.snapshot_now(step, [] if last is None else [last])
    _LAST.setdefault(model, {})[str(log_dir)] = weights_digest(model)
    return store.open_run(*where)
