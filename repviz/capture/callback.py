"""``ActivationLogger``: the Keras callback that records what chosen layers do on a fixed probe set during
training, and its batch-schedule variant.

The callback owns the Keras hooks and the order of events; what the probe is (:mod:`.probe`), which tensors are
recorded (:mod:`.layers`), how they are reduced (:mod:`.reduction`), when (:mod:`.schedule`) and how snapshots are
written (:mod:`.writer`) live beside it.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import keras
import numpy as np

from .. import _reduction, store
from .._validation import INTEGER, NONE, Rule, check_option, check_param, choices, param_error
from ..chief import ChiefOnly
from .layers import (
    check_callable,
    check_layers_spec,
    default_skips,
    model_fingerprint,
    model_outputs,
    recorded_tensors,
    run_recorded,
    select_layers,
    walk,
)
from .optimizer import build_slots
from .options import OWNER, POSITIVE, ProbeSet, Reduction, checked_reduction, grouped, user_stacklevel
from .probe import (
    batch_subset,
    check_ids,
    conform_probe,
    fingerprint,
    inputs_fingerprint,
    labels,
    probe_length,
    probe_metadata,
    shapes,
    split_probe,
    take,
    thumbnails,
    warn_nonfinite_inputs,
)
from .reduction import Capture, CaptureCall, auto_batch_rows, capture
from .rerun import reached, weights_digest, writer_for_fit
from .schedule import CostJudge, check_freq, epoch_scheduled, manifest_entry, warn_empty_schedule
from .writer import BackgroundWriter, SnapshotWriter, abandon

_STRING = Rule(lambda v: isinstance(v, str), "a str")


class _PicksScheduleVariant:
    """Makes ``ActivationLogger(..., batch_freq=n)`` an instance of the variant with a batch hook (see
    :func:`_with_batch_hook`). A base class of its own, so that ``inspect.signature`` shows the logger's
    ``__init__`` rather than this ``__new__``."""

    def __new__(cls, *args: Any, **kwargs: Any):
        if kwargs.get("batch_freq") is not None:
            cls = _with_batch_hook(cls)
        return super().__new__(cls)


class ActivationLogger(_PicksScheduleVariant, ChiefOnly, keras.callbacks.Callback):
    """Record the activations of chosen layers on a fixed probe set, before and during ``model.fit``.

    One instance logs one run (like ``keras.callbacks.TensorBoard(log_dir=...)``): a manifest, the probe set
    (ids, labels, uint8 thumbnails), one array per (layer, snapshot) and the model's predictions per snapshot,
    all under ``log_dir/plugins/repviz/``, readable without TensorFlow through :func:`repviz.open_logdir`.
    Snapshot 0 is taken before the first epoch. Each snapshot runs the model on the probe set in inference mode
    (``training=False``: Dropout off, BatchNorm statistics untouched) with the chosen layers' ``call`` wrapped,
    which reaches layers of subclassed and nested models, every call of a layer called twice and every output of
    a multi-output layer. A background thread writes each snapshot's last probe batch and stores the snapshot
    while training goes on.

    Parameters
    ----------
    log_dir : path
        The run directory. A directory that already holds a run of the same model and probe continues it when
        the model starts from a state that run reached (a second fit of the same model, ``initial_epoch=``, a new
        logger on it, a checkpoint of a snapshotted epoch); a new initialisation (the script run again) is
        recorded as a new run beside it, ``<log_dir>-2``, said in one line (:mod:`repviz.capture.rerun`), and
        ``logger.log_dir`` then names it. One of a different model or probe set is refused with
        ``IncompatibleRunError``.
    probe : ProbeSet, array, (x, y), tf.data.Dataset, generator or keras.utils.PyDataset
        Fixed inputs recorded at every snapshot, and how: a :class:`~repviz.capture.ProbeSet` (inputs, labels,
        ``size``, ``ids``, ``metadata``, ``batch_subset``, ``batch_size``; see there), or just the data, read as
        ``ProbeSet(x, y)`` for a pair ``(x, y)`` and ``ProbeSet(probe)`` otherwise (so pass ``(x, None)`` for a
        multi-input probe without labels). Inputs are numbers or, for a model that takes raw strings (a
        ``TextVectorization`` inside; TensorFlow only), strings: numpy ``<U`` or bytes, object arrays of ``str``,
        ``tf.constant`` strings, a string dataset. Strings go through the model as given, get no thumbnail and
        become the metadata column ``"text"`` (kind text: shown on hover, searched; stored as JSON, never
        pickled). Labels of any shape are stored by their target policy (:mod:`repviz.targets`: one class per
        example, multi-label, scalar, per pixel, per step), named in ``manifest["probe"]["target"]``.
    layers : None, str, layer class, callable or list of str / classes, default=None
        Which layers to record. Names are paths such as ``"dense"`` or ``"encoder/dense"`` for layers of nested
        models (a plain name is accepted when unique). Classes select by ``isinstance``; a callable gets each
        layer and returns True to keep it. None keeps the layers whose output is a representation: Dense,
        EinsumDense, Embedding, every convolution, pooling, activation layers (Activation, ReLU, LeakyReLU,
        PReLU, ELU, Softmax), RNN layers and their Bidirectional and TimeDistributed wrappers (a TimeDistributed
        layer once, never its inner layer per step), and Add and Multiply merges except one whose output goes
        only to an activation layer (see :func:`repviz.capture.layers.is_default`); it skips Dropout, Flatten,
        Reshape, normalisation, other merges and Input layers, whose output is (nearly) a copy of another's, and
        records no tensor twice (see :func:`repviz.capture.layers.duplicates`). It also keeps
        custom layers (classes defined outside Keras, such as a ``TransformerBlock``) and nested models, whose
        outputs are what their authors made them for, unless the output is the same tensor as one of their
        layers'. The manifest's ``skipped`` lists every layer left out with its reason (also outputs without a
        batch axis, such as a position embedding shared by every example), and ``repviz info`` prints it. A
        layer called several times is recorded once per call as ``name#0``, ``name#1``, ...; a layer with
        several outputs as ``name:0``, ``name:1``, ..., a nested model's by its output keys (``encoder/mean``).
    freq : int or list of int, default=1
        Epoch schedule: snapshot every ``freq`` epochs, or after the listed epochs (1 = after the first epoch;
        0, the state before training, is recorded anyway). Steps are epoch numbers, 0 being before training
        (``manifest['step_unit'] == 'epoch'``). Epochs are counted as ``fit`` counts them, so the schedule
        applies to each ``fit`` call: a later ``fit`` into the same run (a second ``fit`` call, fine-tuning after
        training a head) numbers its epochs from 1 again and continues the run's step count where it stopped:
        its epoch ``e`` is step ``last + e`` (``freq=[0, 2, 5]`` with two 3-epoch fits records steps 0, 2, then
        3, the state the first fit ended in, and 5), and its first snapshot is not taken again when the run
        holds it. ``manifest['fits']`` lists each fit's first and last step (``repviz info`` shows them);
        nothing stored is overwritten. ``fit(initial_epoch=k)`` resuming an interrupted run numbers its epochs
        from ``k + 1``, as ``fit`` does, and they are the run's steps.
    batch_freq : int, default=None
        Batch schedule instead: snapshot every ``batch_freq`` training batches; steps count batches since
        training began (``step_unit == 'batch'``). Only this variant overrides a batch hook, so epoch-only
        capture keeps Keras's asynchronous batch dispatch. Pass ``freq`` or ``batch_freq``, not both, unless
        ``ProbeSet(batch_subset=)`` is given (then the epochs ``freq`` names also end in a snapshot, of the whole
        probe). Each snapshot runs the probe set through the model, so a fine schedule costs in proportion to
        the probe's size: the logger times its snapshots against the training between them and warns once when
        they take more than a tenth of it.
    reduction : Reduction or dict, default=None
        How each recorded output is pooled, sketched when wide and stored: a :class:`~repviz.capture.Reduction`
        or a dict of its fields (``pooling``, ``max_width``, ``projection_dim``, ``dtype``; see there). None: its
        defaults.
    seed : int, default=0
        Seed of everything random the logger draws: the count sketches and the subset of ``batch_subset``.
    embed : str or list of str, default=None
        Also embed each new snapshot while training runs, with these methods (names of
        :data:`repviz.methods.METHODS`, e.g. ``"tsne"`` or ``["tsne", "pca"]``, default parameters, aligned
        across snapshots), so the TensorBoard tab shows the embeddings as they arrive. A background process
        (:mod:`repviz.follow`, at the lowest priority) computes them through :func:`repviz.embed_logdir`: the same
        embeddings under the same keys as ``repviz embed`` computes afterwards, which then finds them cached.
        ``fit`` never waits for it. ``on_train_end`` tells it that training is over and does not wait either: it
        embeds the snapshots left and exits on its own, also when the training script ends or crashes first (its
        input pipe closes). :meth:`wait_embeddings` waits for it.
    prediction_output : str, default=None
        Which output of a multi-output model is "the predictions" (what :meth:`repviz.store.Run.predictions`
        returns by default, used to colour by prediction): an output's name, i.e. its key for a dict of outputs,
        else the output layer's name (``model.output_names``). Every output is stored at every snapshot whatever
        the choice; None picks the first (in ``keras.tree.flatten`` order, so the first key in sorted order for
        a dict). An unknown name is refused before training, listing the model's outputs.
    model : keras.Model or layer, default=None
        Log this model (e.g. ``vae.encoder``) instead of the one being trained: its layers are recorded and the
        probe goes through it. For a model that trains through ``train_step`` and has no ``call()`` (the keras-io
        VAE), which cannot run on a probe itself.
    forward : callable, default=None
        ``forward(x) -> outputs`` run on each probe batch instead of ``model(x, training=False)``, e.g.
        ``lambda x: vae.decoder(vae.encoder(x)[2])``; the layers it calls (of ``model``) are recorded.
    **legacy
        The older flat keywords, still accepted with the same meaning and stored output, each setting one field
        of a group: ``probe_size``, ``probe_ids``, ``metadata``, ``batch_probe`` and ``batch_size`` are
        ``ProbeSet``'s ``size``, ``ids``, ``metadata``, ``batch_subset`` and ``batch_size``; ``pooling``,
        ``max_width``, ``projection_dim`` and ``dtype`` are ``Reduction``'s fields of the same names. A flat
        keyword cannot be combined with a group object passed for the same group.

    Examples
    --------
    >>> logger = ActivationLogger("logs/relu", probe=(x_test[:2000], y_test[:2000]))  # doctest: +SKIP
    >>> logger = ActivationLogger("logs/relu", probe=ProbeSet(x_test, y_test, size=2000),  # doctest: +SKIP
    ...                           reduction={"pooling": "avg"})
    >>> model.fit(x, y, epochs=10, callbacks=[logger])                                # doctest: +SKIP
    >>> repviz.open_logdir("logs").run("relu").activations("dense", 10).shape          # doctest: +SKIP
    (2000, 128)
    """

    def __init__(self, log_dir, probe: ProbeSet | Any, *, layers=None, freq: int | Sequence[int] | None = None,
                 batch_freq: int | None = None, reduction: Reduction | dict | None = None, seed: int = 0,
                 prediction_output: str | None = None, embed: str | Sequence[str] | None = None, model=None,
                 forward: Callable | None = None, **legacy: Any):
        super().__init__()
        self.log_dir = log_dir
        options, reduction, spelling = grouped(probe, reduction, legacy)
        check_param(options.size, [POSITIVE, NONE], *spelling.param("size"))
        self._x, self._y = split_probe(options.x, options.y, options.size)
        self.n_probe = probe_length(self._x, self._y)
        self.probe_ids = check_ids(options.ids, self.n_probe, spelling)
        self.metadata = probe_metadata(options.metadata, self._x, self.n_probe)
        warn_nonfinite_inputs(self._x, stacklevel=2)
        self.layers_spec = check_layers_spec(layers)
        if freq is not None and batch_freq is not None and options.batch_subset is None:
            raise ValueError(f"ActivationLogger takes an epoch schedule (freq={freq!r}) or a batch schedule "
                             f"(batch_freq={batch_freq!r}), not both; pass only one of them (or "
                             f"{spelling.keyword('batch_subset')} too, for whole-probe snapshots after those epochs "
                             f"and subset ones in between).")
        self.freq = check_freq(1 if freq is None else freq)
        self._mixed = freq is not None and batch_freq is not None  # epoch snapshots in a batch schedule
        self.batch_freq = check_param(batch_freq, [POSITIVE, NONE], "batch_freq", OWNER)
        self.reduction = checked_reduction(reduction, spelling)
        self.dtype = np.dtype(self.reduction.dtype)
        check_param(options.batch_size, [POSITIVE, NONE], *spelling.param("batch_size"))
        self.batch_size = None if options.batch_size is None else int(options.batch_size)
        if model is not None and not isinstance(model, keras.layers.Layer):
            raise param_error("model", OWNER, "a keras Model or Layer (e.g. vae.encoder)", model)
        if forward is not None and not callable(forward):
            raise param_error("forward", OWNER, "a callable x -> outputs", forward)
        self.logged_model, self.forward = model, forward
        self.seed = int(check_param(seed, [INTEGER], "seed", OWNER))
        self.prediction_output = check_param(prediction_output, [_STRING, NONE], "prediction_output", OWNER)
        self.embed = _check_embed(embed)
        self._subset, self._subset_info = self._batch_subset(options.batch_subset, spelling)
        self._writer = self._home = store.RunWriter(log_dir)  # _home: log_dir's run; _writer: the one recorded
        self._writer.check_writable()
        self._captures: list[Capture] | None = None
        self._marker_written = False
        self._follower: subprocess.Popen | None = None

    def _batch_subset(self, choice, spelling) -> tuple[np.ndarray | None, dict | None]:
        """The probe positions that batch snapshots record (None: all) and the manifest's note of the choice."""
        if choice is None:
            return None, None
        if self.batch_freq is None:
            raise ValueError(f"{spelling.param('batch_subset')[0]} chooses the probe points of batch snapshots and "
                             f"this logger takes none; pass batch_freq= too, or {spelling.keyword('size')} to record "
                             f"fewer points at every snapshot.")
        target, y = labels(self._y, []) if isinstance(self._y, np.ndarray) else (None, None)  # several: by chance
        classes = y if target is not None and target.kind == "class" and y.dtype.kind in "iub" else None
        return batch_subset(choice, self.n_probe, classes, self.seed, spelling)

    # ---------------------------------------------------------------------------------------------------------
    # Keras hooks
    # ---------------------------------------------------------------------------------------------------------
    def on_train_begin(self, logs=None):
        target = self._target()
        self._choose_run(target, [weights_digest(target)])
        self._open_run(target)
        build_slots(self.model)

    def _choose_run(self, target, states: list[str], what: str = "fit") -> None:
        """Record into the run in ``log_dir`` when ``target`` starts from one of the weight ``states`` that run
        reached, else into a new run beside it, said in one line (:mod:`repviz.capture.rerun`)."""
        writer, note = writer_for_fit(self._home, model_fingerprint(target), states, what)
        if note:  # a new initialisation: a new run beside log_dir's
            warnings.warn(note, RuntimeWarning, stacklevel=user_stacklevel())
        if str(writer) != str(self._writer):
            self._writer, self._marker_written, self._follower = writer, False, None
            self.log_dir = str(writer)  # where this fit records

    def _open_run(self, target, schedule: dict | None = None) -> None:
        """Plan the capture of ``target``, begin the chosen run (its manifest, probe and metadata) and start the
        snapshot machinery; ``schedule``: the manifest's entry when not the logger's own."""
        stored = self._writer.stored_manifest() or {}
        self._captures, self._outputs = self._plan(target, stored.get("layers") or {})
        self._batch_rows = self.batch_size or auto_batch_rows(self.n_probe, self._captures, self._outputs)
        if self._subset is not None:  # the inputs of batch snapshots, taken once
            self._subset_x = take(self._x, self._subset)
            self._subset_batch_rows = self.batch_size or auto_batch_rows(len(self._subset), self._captures,
                                                                         self._outputs)
        self._target_policy, stored_labels = labels(self._y, self._outputs)
        self._writer.begin(self._manifest(target, schedule))
        try:
            self._writer.write_probe(self.probe_ids, stored_labels, thumbnails(self._x))
            if self.metadata is not None:
                self._writer.write_metadata(self.metadata)
        except BaseException:
            self._writer.abandon()  # nothing stored: a retry with corrected data must not be refused
            raise
        if self.embed and (self._follower is None or self._follower.poll() is not None):
            from .. import follow  # the pipeline side; imports no numerical code

            self._follower = follow.start(*self._writer.reader_location(), self.embed)
        self._snapshots = SnapshotWriter(self._writer, self._captures, self._outputs, self.dtype)
        self._run_fn = None  # compiled on the first snapshot
        self._background = BackgroundWriter()
        self._first = True
        self._epoch = 0
        self._batches = 0
        self._offset = 0  # step of this fit's epoch 0 (a later fit into the run continues the count)
        self._warned: set[str] = set()

    def snapshot_now(self, step: int, states: Sequence[str] = ()) -> tuple[str, str]:
        """One snapshot of ``model=`` as it is now, stored as ``step``, outside any ``fit`` (what
        :func:`repviz.record` does): the run is chosen, planned, begun and finished as a fit's, so capture, store,
        probe, metadata and layer selection are the same. ``states``: digests of other weights the model counts as
        its own (the state it last recorded), so that it continues the run that holds them. A step the run holds
        already is refused before anything is written. Returns where a reader opens the run: the directory above
        it and its name."""
        target = self._target()
        if target is None:
            raise ValueError("snapshot_now records the model passed as ActivationLogger(..., model=); pass one")
        self._choose_run(target, [weights_digest(target), *states], "snapshot")
        stored = self._writer.stored_manifest() or {}
        held = self._writer.steps()
        same = (stored.get("fingerprint") or {}).get("model") == model_fingerprint(target)  # else begin refuses
        if same and int(step) in held:
            raise ValueError(f"run {self.log_dir!r} already holds step {int(step)} (it has steps "
                             f"{', '.join(map(str, held))}); record with another step= or into another log_dir")
        self._open_run(target, stored.get("schedule") or {"unit": "step", "by": "repviz.record"})
        try:
            self._snapshot(int(step))
        finally:
            self.on_train_end()
        return self._writer.reader_location()

    def _target(self):
        """The model whose layers are recorded: ``model=`` when given, else the one being trained."""
        return self.model if self.logged_model is None else self.logged_model

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        if self._first:  # snapshot 0 (or the resumed position when fit starts at initial_epoch > 0)
            self._first = False
            if self.batch_freq is None:
                warn_empty_schedule(self.freq, (self.params or {}).get("epochs"), epoch)
            last = self._writer.last_step()
            fits = list(self._writer.manifest.get("fits") or [])
            if self.batch_freq is None:
                # Where the run stopped: a fit starting below it continues the count (epoch e is step
                # offset + e), so a second fit overwrites nothing; fit(initial_epoch=k) resuming it does not move.
                ends = [s for s in (last, fits[-1].get("end_step") if fits else None) if isinstance(s, int)]
                self._offset = max(0, max(ends) - epoch) if ends else 0
                first = self._offset + epoch
                if first != last:  # else: the state the run's last snapshot holds
                    self._snapshot(first, epoch=epoch)
            else:
                # Batches since the run began: from the epoch when the epoch length is known, and never a step
                # the run already holds (a resumed generator of unknown length would otherwise restart at 0).
                self._batches = max(epoch * int(self.params.get("steps") or 0), -1 if last is None else last + 1)
                first = self._batches
                self._snapshot(first, epoch=epoch, batch=0)
            self._writer.update_manifest(fits=[*fits, {"first_step": first, "end_step": None,
                                                       "initial_epoch": int(epoch), "started": time.time()}],
                                         weights=reached(self._writer.manifest))

    def on_epoch_end(self, epoch, logs=None):
        step = epoch + 1
        if self.batch_freq is None and epoch_scheduled(self.freq, step):
            self._snapshot(self._offset + step, epoch=step)
        elif self._mixed and epoch_scheduled(self.freq, step):  # the whole probe, at the batch count
            self._snapshot(self._batches, epoch=step)
        else:
            return
        self._writer.update_manifest(weights=reached(self._writer.manifest, self._target()))  # a state to resume

    def on_train_end(self, logs=None):
        try:
            self._report(self._background.close())  # waits for the snapshots still being written
        finally:
            fits = list(self._writer.manifest.get("fits") or [])
            if fits and not self._first:
                end = self._batches if self.batch_freq is not None else self._offset + self._epoch + 1
                fits[-1] = {**fits[-1], "end_step": int(end)}
            self._writer.update_manifest(finished=time.time(), fits=fits,
                                         weights=reached(self._writer.manifest, self._target()))
            self._end_follower()

    def wait_embeddings(self, timeout: float | None = None) -> bool:
        """Wait until the background embedding of ``embed=`` has embedded every stored snapshot and exited (at most
        ``timeout`` seconds); True when it has, or when there is none. Training being over is implied: call it
        after ``fit`` (also after a ``fit`` that raised: the snapshots still being written are stored first, then
        embedded)."""
        background = getattr(self, "_background", None)
        if background is not None:
            self._report(background.close())
        follower = self._end_follower()
        if follower is None:
            return True
        try:
            follower.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _end_follower(self) -> subprocess.Popen | None:
        """Close the embedding process's input (no more snapshots); it finishes on its own."""
        follower = self._follower
        if follower is not None and follower.stdin is not None and not follower.stdin.closed:
            with contextlib.suppress(OSError):
                follower.stdin.close()
        return follower

    # ---------------------------------------------------------------------------------------------------------
    # Planning: which tensors, how reduced (checked on a 2-row dry run, before the first epoch)
    # ---------------------------------------------------------------------------------------------------------
    def _plan(self, model, recorded: dict) -> tuple[list[Capture], list]:
        """The tensors to record and how each is reduced; a layer ``recorded`` before (in the manifest of the run
        this fit continues) keeps its reduction."""
        paths = dict(walk(model))
        chosen, explicit = select_layers(paths, self.layers_spec)
        if self.forward is None:
            check_callable(model)
            self._x = conform_probe(model, self._x)
        n_head = min(2, self.n_probe)
        head = take(self._x, slice(None, n_head))
        try:
            # Twice: a model's first eager call may run its layers more than once while it builds itself.
            for _ in range(2):
                calls, outputs = run_recorded(model, self.forward, head, [layer for _, layer in chosen])
        except Exception as e:
            through = "forward=" if self.forward is not None else f"model {model.name!r}"
            raise ValueError(f"the probe (inputs of shape {shapes(self._x)}) does not fit {through}: running it "
                             f"on the probe failed with {type(e).__name__}: {e}") from e
        self._skipped = {} if self.layers_spec is not None else default_skips(paths, chosen, calls)
        tensors = recorded_tensors(chosen, calls, n_head, explicit, self._skipped, model.name, paths)
        captures = [capture(t, self.reduction, self.seed, recorded.get(t.name)) for t in tensors]
        if not captures:
            raise ValueError(f"none of the chosen layers of model {model.name!r} produced a per-sample output "
                             f"on the probe; available layers: {choices(paths)}")
        return captures, model_outputs(model, outputs, self.prediction_output)

    def _manifest(self, model, schedule: dict | None = None) -> dict:
        schedule = schedule or manifest_entry(self.freq, self.batch_freq, self._mixed)
        return {
            "fingerprint": {"model": model_fingerprint(model), "probe": fingerprint(self._x, self.probe_ids, self._y),
                            "inputs": inputs_fingerprint(self._x)},
            "model": {"name": model.name, "class": type(model).__name__, "params": int(model.count_params())},
            "layers": {c.name: {"class": type(c.layer).__name__, "layer": c.path, "call": c.call,
                                "output": c.output, "output_shape": [None, *c.sample_shape],
                                "stored_shape": [self.n_probe, c.width], "reduction": c.reduction}
                       for c in self._captures},
            "probe": {"n": self.n_probe, "shape": shapes(self._x), "has_labels": self._y is not None,
                      **({"target": self._target_policy.entry()} if self._target_policy else {})},
            "predictions": {"shape": [self.n_probe, *self._outputs[0].sample_shape], "output": self._outputs[0].name,
                            "outputs": {o.name: [self.n_probe, *o.sample_shape] for o in
                                        sorted(self._outputs, key=lambda o: o.index)}},
            "schedule": schedule, "step_unit": schedule["unit"], "dtype": self.dtype.name,
            **({"skipped": self._skipped} if self._skipped else {}),
            **({"batch_probe": self._subset_info} if self._subset_info else {}),
        }

    # ---------------------------------------------------------------------------------------------------------
    # Snapshots
    # ---------------------------------------------------------------------------------------------------------
    def _snapshot(self, step: int, rows: np.ndarray | None = None, **info: Any) -> None:
        """Run the probe (its positions ``rows`` only, when given) through the model on the training thread (the
        weights must not move meanwhile), appending each probe batch's outputs to the snapshot's files, and hand
        the last batch's outputs to the background writer as they are: it reduces them (on that one thread) and
        stores the snapshot while training goes on."""
        self._report(self._background.done())  # also raises here what failed in the writer since
        acts, preds = self._snapshots.blocks(step, self.n_probe if rows is None else len(rows))
        try:
            for batch, final in self._probe_batches(rows):
                if not final:
                    self._snapshots.append(batch, acts, preds)
        except BaseException:
            abandon(acts + preds)
            # The writer may still hold the snapshot before: once fit raises, what is on disk is final.
            with contextlib.suppress(BaseException):  # its own failure, if any, comes from the same cause
                self._background.close()
            raise
        last = [batch]  # the writer drops it once stored: the job itself must not keep it alive
        info = info if rows is None else {**info, "rows": rows}  # the store's rows= of every array
        self._background.submit(lambda: self._finish_snapshot(step, info, last, acts, preds),
                                lambda: abandon(acts + preds))

    def _probe_batches(self, rows: np.ndarray | None = None) -> Iterator[tuple[tuple, bool]]:
        """A snapshot's forward pass: the outputs of each probe batch (of the positions ``rows`` only, when given)
        as the capture function computes them, each with whether it is the last; nothing is stored (what
        ``benchmarks/bench_capture.py`` times as the probe's own cost)."""
        if self._run_fn is None:
            call = CaptureCall(self._target(), self.forward, self._captures, [o.index for o in self._outputs])
            self._run_fn = call.compiled(self._x)
            if any(c.sketch is not None for c in self._captures):
                _reduction.load_sketch_kernel().join()
        x, n, size = ((self._x, self.n_probe, self._batch_rows) if rows is None else
                      (self._subset_x, len(rows), self._subset_batch_rows))
        for start in range(0, n, size):
            yield self._run_fn(take(x, slice(start, start + size))), start + size >= n

    def _finish_snapshot(self, step: int, info: dict, last: list[tuple], acts: list[store.ArrayBlocks],
                         preds: list[store.ArrayBlocks]) -> list[dict]:
        """The writer's part of a snapshot: store its last probe batch, serially (the writer must not take the
        training threads' cores), then write it. The batch's backend outputs, the largest arrays of a snapshot,
        are released before the writes."""
        try:
            self._snapshots.append(last.pop(), acts, preds, threads=1)
            return self._write_snapshot(step, info, acts, preds)
        except BaseException:
            abandon(acts + preds)
            raise

    def _write_snapshot(self, step: int, info: dict, acts: list[store.ArrayBlocks],
                        preds: list[store.ArrayBlocks]) -> list[dict]:
        """Store one snapshot (on the writer thread; see :meth:`SnapshotWriter.store`), tell the embedding process
        and, once, TensorBoard; returns the activation records."""
        records = self._snapshots.store(step, info, acts, preds)
        if self._follower is not None:
            from ..follow import nudge

            nudge(self._follower)
        if not self._marker_written:
            self._writer.write_tensorboard_marker()
            self._marker_written = True
        return records

    def _report(self, records: list[dict]) -> None:
        for r in records:
            if r["nonfinite"] and r["layer"] not in self._warned:
                self._warned.add(r["layer"])
                hint = (" (float16 storage overflows beyond +-65504: use dtype='float32')"
                        if self.dtype == np.float16 else "")
                warnings.warn(f"layer {r['layer']!r} has {r['nonfinite']} non-finite activation value(s) at "
                              f"{self._writer.manifest['step_unit']} {r['step']}; they are stored as they are and "
                              f"counted in the record{hint}.", RuntimeWarning, stacklevel=user_stacklevel())


@functools.cache
def _with_batch_hook(cls: type) -> type:
    """``cls`` with the batch hook of :class:`_BatchActivationLogger`: itself for the plain logger, a subclass of
    both under the same name for a user's subclass (whose own overrides come first)."""
    if issubclass(cls, _BatchActivationLogger):
        return cls
    if cls is ActivationLogger:
        return _BatchActivationLogger
    return type(cls.__name__, (cls, _BatchActivationLogger), {"__module__": cls.__module__,
                                                             "__qualname__": cls.__qualname__})


class _BatchActivationLogger(ActivationLogger):
    """The every-``batch_freq``-batches variant; the only one with a batch hook (see ``batch_freq``), which
    judges each snapshot's cost against the training before it (:class:`repviz.capture.schedule.CostJudge`)."""

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._cost = CostJudge(self.batch_freq)

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        ends_epoch = (self._mixed and batch + 1 == self.params.get("steps")
                      and epoch_scheduled(self.freq, self._epoch + 1))
        if self._batches % self.batch_freq == 0 and not ends_epoch:  # else on_epoch_end takes the whole probe
            start = time.perf_counter()
            self._snapshot(self._batches, self._subset, epoch=self._epoch, batch=batch + 1)
            self._cost.judge(start, time.perf_counter())


def _check_embed(embed) -> list[str]:
    if embed is None:
        return []
    from ..methods import METHODS  # light: the registry of names, no estimator

    methods = [embed] if isinstance(embed, str) else embed
    if not isinstance(methods, (list, tuple)) or not methods:
        raise param_error("embed", OWNER, f"None, a method name or a non-empty list of them ({sorted(METHODS)})",
                          embed)
    return [check_option(m, sorted(METHODS), "embed", OWNER) for m in dict.fromkeys(methods)]
