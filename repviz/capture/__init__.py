"""Capture: the Keras callback that records what chosen layers do on a fixed probe set during training.

How it captures: for each snapshot the model runs on the probe set in inference mode (``training=False``, so
Dropout is off and BatchNorm statistics are untouched), in batches, while the chosen layers' ``call`` is
temporarily wrapped to keep its outputs. Unlike a side model over ``layer.output``, this reaches layers of
subclassed models and of nested models, sees every call of a layer that is called twice, and every output of a
multi-output layer. Each output is flattened per sample (pooled first where it has positions) and, when wide,
reduced by a seeded count sketch fixed for the run, then written to the snapshot's files batch by batch through
the store. A background thread reduces and writes the last probe batch of each snapshot and stores the snapshot
while training goes on, so the training thread waits only for the forward passes and the other batches.

Modules, one job each: :mod:`.callback` (``ActivationLogger`` and its batch-schedule variant: the Keras hooks),
:mod:`.options` (the grouped options :class:`ProbeSet` and :class:`Reduction`, and the older flat keywords mapped
onto them), :mod:`.probe` (taking, conforming and labelling the probe; its fingerprints), :mod:`.layers` (walking
the model, choosing and naming the recorded tensors), :mod:`.reduction` (pooling, the count sketch),
:mod:`.schedule` (when snapshots are taken), :mod:`.writer` (snapshots written through the store) and
:mod:`.rerun` (whether a fit continues the run in its directory or is a new run beside it) and :mod:`.record`
(``record``: one snapshot of a model without training, through the callback's machinery).
Keras is imported here (and in :mod:`repviz.datasets`, :mod:`repviz.networks` and
:mod:`repviz.manifold.autoencoder`), never in the store or the TensorBoard plugin.
"""

from .callback import ActivationLogger
from .options import ProbeSet, Reduction
from .record import record
from .schedule import log_spaced_epochs

__all__ = ["ActivationLogger", "ProbeSet", "Reduction", "log_spaced_epochs", "record"]
