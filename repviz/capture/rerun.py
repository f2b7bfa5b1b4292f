"""Which run a fit records into: the run in its directory when the fit continues that training, else a new run
beside it.

A run is one training. A fit continues the run in ``log_dir`` when the model starts from a state that training
reached in that run: the weights after one of its fits or at one of its epoch snapshots (their digests are kept
in the manifest's ``weights``). That is a second ``fit`` of the same model object (fine-tuning after training a
head, also after ``EarlyStopping(restore_best_weights=True)`` restored a snapshotted epoch), ``fit(initial_epoch=k)``
on it, a new logger on the same model, a model restored from a checkpoint of a snapshotted epoch. A model starting
from anything else is a new initialisation, the same script run again (also with a fixed seed: its initial
weights are where the run started, not a state it reached): it is recorded as a new run beside the old one,
``<run>-2`` (then ``-3``, ...), said in one line. Starting a new run rather than refusing keeps re-running a script
or a notebook cell working as it does without repviz, and the two trainings land side by side in the tab, where
they can be compared; splicing them into one run would make its "consecutive" snapshots those of unrelated
networks. A run that stored no digests (recorded before they were stored) is continued, as it was.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import numpy as np

from .. import store


def weights_digest(model: Any) -> str:
    """A digest of every weight of ``model`` (values, dtypes and shapes) in ``model.weights`` order, which Keras
    keeps in creation order whatever is frozen or unfrozen; variable names are left out, so a copy of the model
    built under other names (a restored checkpoint) has the same digest."""
    digest = hashlib.sha256()
    for w in model.weights:
        a = np.ascontiguousarray(w.numpy())
        digest.update(str((a.dtype.str, a.shape)).encode())
        digest.update(a.data)
    return digest.hexdigest()[:16]


def reached(manifest: dict, model: Any = None) -> dict:
    """The manifest's ``weights`` field with the digest of ``model``'s weights added to the states the run
    reached (None: the field as it is, created empty for a new run)."""
    states = list(_reached(manifest) or [])
    if model is not None and (digest := weights_digest(model)) not in states:
        states.append(digest)
    return {"reached": states}


def _reached(manifest: dict) -> list | None:
    weights = manifest.get("weights")
    return weights.get("reached") if isinstance(weights, dict) and isinstance(weights.get("reached"), list) else None


def writer_for_fit(writer: store.RunWriter, model_fingerprint: str, weights: list[str],
                   what: str = "fit") -> tuple[store.RunWriter, str | None]:
    """The writer of the run a fit starting from the weights ``weights`` (digests of states the model counts as
    its own: its weights now, and for :func:`repviz.record` the state it last recorded) records into, and the
    line saying so when it is not ``writer``'s: ``writer``'s run if the fit continues it (or it holds no
    snapshot), else the first of ``<run>-2``, ``<run>-3``, ... that the fit continues or that holds no snapshot. A
    run of another model in ``writer``'s directory is left to :meth:`RunWriter.begin` to refuse, as before."""
    first = writer
    for n in itertools.count(2):
        old = writer.stored_manifest()
        if old is None or writer.last_step() is None:
            break
        same_model = (old.get("fingerprint") or {}).get("model") == model_fingerprint
        states = _reached(old)
        if same_model and (states is None or any(w in states for w in weights)):
            break
        if not same_model and writer is first:
            break
        writer = first.beside(n)
    if writer is first:
        return writer, None
    return writer, (f"repviz: {str(first)!r} holds another training (the model does not start from a state that "
                    f"run reached), so this {what} is recorded as the new run {str(writer)!r}")
