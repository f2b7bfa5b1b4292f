"""``ActivationLogger``: a Keras callback that records what chosen layers do on a fixed probe set during training.

How it captures: for each snapshot the model runs on the probe set in inference mode (``training=False``, so
Dropout is off and BatchNorm statistics are untouched), in batches, while the chosen layers' ``call`` is
temporarily wrapped to keep its outputs. Unlike a side model over ``layer.output``, this reaches layers of
subclassed models and of nested models, sees every call of a layer that is called twice, and every output of a
multi-output layer. Each output is flattened per sample (globally pooled first on request) and, when wide, reduced
by a seeded count sketch fixed for the run (:mod:`repviz._reduction`, a numba kernel over the batch's numpy view),
and written to the snapshot's files batch by batch (:class:`repviz.store.ArrayBlocks`: no snapshot is ever held
whole in memory, whatever the probe's size). A background thread reduces and writes the last probe batch of each
snapshot and stores the snapshot while training goes on, so the training thread waits only for the forward passes
and the other batches.

This is the only Keras-aware module of repviz.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import queue
import subprocess
import sys
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from . import _reduction, store
from ._validation import INTEGER, NONE, Interval, Rule, check_option, check_param, param_error
from .chief import ChiefOnly
from .datasets import thumbnails
from .metadata import columns_from
from .subsets import stratified_subset

_SKETCH_KERNEL = _reduction.load_sketch_kernel()  # while the script goes on to load data and build its model

_FLOAT16_MAX = float(np.finfo(np.float16).max)


def _default_types() -> tuple[type, ...]:
    L = keras.layers
    return (
        L.Dense, L.EinsumDense, L.Embedding,
        L.Conv1D, L.Conv2D, L.Conv3D, L.Conv1DTranspose, L.Conv2DTranspose, L.Conv3DTranspose,
        L.SeparableConv1D, L.SeparableConv2D, L.DepthwiseConv1D, L.DepthwiseConv2D,
        L.MaxPooling1D, L.MaxPooling2D, L.MaxPooling3D, L.AveragePooling1D, L.AveragePooling2D,
        L.AveragePooling3D, L.GlobalMaxPooling1D, L.GlobalMaxPooling2D, L.GlobalMaxPooling3D,
        L.GlobalAveragePooling1D, L.GlobalAveragePooling2D, L.GlobalAveragePooling3D,
        L.Activation, L.ReLU, L.LeakyReLU, L.PReLU, L.ELU, L.Softmax, L.RNN, L.Bidirectional, L.TimeDistributed,
    )


_POSITIVE = Interval(int, 1, None, "left")
_STRING = Rule(lambda v: isinstance(v, str), "a str")


def _param_error(param: str, rule: str, value: Any) -> ValueError:
    return param_error(param, "ActivationLogger", rule, value)


def log_spaced_epochs(epochs: int, n: int) -> list[int]:
    """About ``n`` epochs from 1 to ``epochs``, spaced evenly on a log scale (the last always included), for
    ``ActivationLogger(freq=...)``: representations change fastest early in training, so early snapshots are
    dense. Snapshot 0, before training, is taken anyway.

    >>> log_spaced_epochs(8, 4)
    [1, 2, 4, 8]
    """
    check_param(epochs, [_POSITIVE], "epochs", "log_spaced_epochs")
    check_param(n, [_POSITIVE], "n", "log_spaced_epochs")
    return sorted({int(round(e)) for e in np.geomspace(1, epochs, min(n, epochs))})


@dataclass
class _Capture:
    """One captured tensor: call ``call`` of ``layer``, flat output ``output``; how it is reduced and stored."""

    name: str
    path: str
    layer: Any
    call: int
    output: int
    sample_shape: tuple[int, ...]
    pooling: str | None  # a reduction kind of _POOLING_KINDS, or None
    flat_width: int  # columns after pooling, before the random reduction
    sketch: Any  # count sketch, applied to the flat output in numpy: (bucket, sign) per column, or None
    reduction: dict
    width: int  # stored columns


@dataclass
class _Output:
    """One output of the model, stored per snapshot: its name, position in the flattened outputs, sample shape."""

    name: str
    index: int
    sample_shape: tuple[int, ...]


class ActivationLogger(ChiefOnly, keras.callbacks.Callback):
    """Record the activations of chosen layers on a fixed probe set, before and during ``model.fit``.

    One instance logs one run (like ``keras.callbacks.TensorBoard(log_dir=...)``): a manifest, the probe set
    (ids, labels, uint8 thumbnails), one array per (layer, snapshot) and the model's predictions per snapshot,
    all under ``log_dir/plugins/repviz/``, readable without TensorFlow through :func:`repviz.open_logdir`.
    Snapshot 0 is taken before the first epoch. Each snapshot costs one inference pass over the probe set.

    Parameters
    ----------
    log_dir : path
        The run directory. A directory that already holds a run of the same model and probe continues it
        (resumed training); one of a different model or probe set is refused with ``IncompatibleRunError``.
    probe : array, (x, y), tf.data.Dataset, generator or keras.utils.PyDataset
        Fixed inputs recorded at every snapshot, with optional labels ``y`` (class ids, or one-hot rows that
        are stored as class ids; for a multi-output model also its targets as ``fit`` takes them, a dict by output
        name or a list in output order, of which the ``prediction_output``'s are stored as the labels). What
        ``model.fit`` accepts as ``x``: ``x`` may be a list of arrays for a
        multi-input model, or a dict keyed by input name (matched to ``model.inputs`` by name, as Keras does);
        an array one rank short of its input whose last axis is 1 (``(n, 28, 28)`` for ``Input((28, 28, 1))``)
        gets that axis, as Keras's ``fit`` adds it. Pass ``(x, None)`` for a multi-input probe without labels,
        since a bare pair is read as ``(x, y)``. A dataset, generator or ``PyDataset`` yields batches as for
        ``fit`` (``x``, ``(x, y)`` or ``(x, y, sample_weight)``): its first ``probe_size`` examples are taken once,
        with their labels when it yields ``y`` (a generator is consumed that far: pass a fresh one).
    probe_size : int, default=None
        At most this many probe rows: the first ``probe_size`` of an array probe; for a dataset, generator or
        ``PyDataset`` None means 1,000.
    layers : None, str, layer class, callable or list of str / classes, default=None
        Which layers to record. Names are paths such as ``"dense"`` or ``"encoder/dense"`` for layers of nested
        models (a plain name is accepted when unique). Classes select by ``isinstance``; a callable gets each
        layer and returns True to keep it. None keeps the layers whose output is a representation: Dense,
        EinsumDense, Embedding, every convolution, pooling, activation layers (Activation, ReLU, LeakyReLU,
        PReLU, ELU, Softmax), RNN layers and their Bidirectional and TimeDistributed wrappers; it skips
        Dropout, Flatten, Reshape, normalisation, merging and Input layers, whose output is (nearly) a copy of
        another's, and records no tensor twice (see
        :func:`_duplicates`). It also keeps custom layers (classes defined outside Keras, such as a
        ``TransformerBlock``) and nested models, whose outputs are what their authors made them for, unless the
        output is the same tensor as one of their layers'. The manifest's ``skipped`` lists every layer left out
        with its reason (also outputs without a batch axis, such as a position embedding shared by every example),
        and ``repviz info`` prints it. A layer called several times is recorded
        once per call as ``name#0``, ``name#1``, ...; a layer with several outputs as ``name:0``, ``name:1``, ...
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
        ``batch_probe`` is given (then the epochs ``freq`` names also end in a snapshot, of the whole probe). Each
        snapshot runs the probe set through the model, so a fine schedule costs in proportion to the probe's
        size (``batch_probe`` records fewer points at batch snapshots): the logger times its snapshots against
        the training between them and warns once when they take more than a tenth of it.
    batch_probe : int or array of int, default=None
        With ``batch_freq``: the batch snapshots record only this many probe points (a subset drawn once with
        ``seed``, each class in proportion to its count when the probe has class labels), or the probe positions
        given; the snapshot each fit starts from records the whole probe, and so do the snapshots after the
        epochs ``freq`` names when it is given too (a batch snapshot due at such an epoch's end is that
        snapshot; steps still count batches). Only the subset runs through the model
        at batch snapshots, which is what makes a fine schedule with a large probe affordable. The stored
        snapshots say which points they hold (:meth:`repviz.store.Run.rows`); embeddings, alignment and
        comparisons use the points snapshots share. The manifest's ``batch_probe`` records the choice
        (``n``, ``seed``, ``by``). A size not below the probe's records the whole probe (with a warning when
        larger).
    probe_ids : array of int, default=None
        Stable ids of the probe rows (e.g. their indices in the test set), used to match probes across runs;
        default ``0..n-1``.
    dtype : {"float32", "float16"}, default="float32"
        Storage type. Activations are computed in float32 whatever the model's precision (mixed-precision
        outputs are upcast, not reinterpreted); float16 halves the disk use and stores values beyond +-65504
        as inf, which the record counts and a warning reports.
    max_width : int, default=None
        Outputs whose flattened width exceeds this are reduced to ``projection_dim`` columns by a count sketch
        (each column added with a random sign to one of ``projection_dim`` columns: a sparse Johnson-Lindenstrauss
        transform that keeps pairwise distances, which is what every embedding here uses, at the cost of one
        pass over the row). It is seeded per layer and fixed for the run, so snapshots stay comparable, and
        recorded in the manifest; a resumed run keeps the reduction each layer was recorded with. None means
        ``2 * projection_dim``, so stored widths stay near ``projection_dim``.
    projection_dim : int, default=256
        Width after the sketch; at most ``max_width``. Distances change by at most about
        ``1 / sqrt(2 * projection_dim)`` (4.4% at 256, 3.1% at 512; a median relative error of 2.4-3.9% at 256
        on the conv and pooling layers of an MNIST CNN, see ``benchmarks/bench_reduction.py``); the disk per
        snapshot grows with it (2,000 probes x 256 float32 = 2 MB per wide layer).
    pooling : None, str or dict, default=None
        How an output with a position axis becomes one vector per example, before anything else.
        ``"avg"`` / ``"max"``: global pooling over the positions of a sequence ``(T, d)`` or the spatial axes of a
        map ``(H, W, C)`` (channel last): ``d`` or ``C`` values. For sequences also ``"mean"`` (the mean over
        the positions the Keras mask keeps, when the layer carries one: the padding of ``Embedding(mask_zero=True)``
        is left out), ``"first"`` (position 0: a CLS token), ``"last"`` (the last unmasked position: an RNN's
        last step), and ``"max"`` (over the unmasked positions); ``"flatten"`` keeps every position. None:
        sequences ``(n, T, d)`` get ``"mean"`` (mask-aware): on every sequence layer of a token transformer and a
        BiLSTM it kept the classes' neighbourhoods best or within 0.005 of the best (10-NN accuracy 0.993-0.998),
        where ``first``/``last`` lose them on the embedding layers (0.28-0.51) and ``flatten`` mixes positions
        (``benchmarks/bench_sequence_pooling.py``); maps of rank >= 3 are flattened. A dict maps layer names to
        policies (the rest get the default). The manifest records each layer's pooling as its reduction
        (``sequence_mean_pooling``, ...), which ``repviz info`` and the tab's info line show.
    batch_size : int, default=None
        Probe rows per inference batch; bounds the memory a snapshot needs. None: the probe set in the fewest
        equal batches that keep one batch of the recorded outputs, at full width before the sketch, within
        96 MB (at least 16 rows; two batches of 1,000 for the MNIST CNN of ``benchmarks/bench_capture.py``,
        which records 18,340 values per digit, the whole probe set for an MLP). Fewer, larger batches run the
        probe faster: the CNN's forward pass over 2,000 digits takes about a third less time in batches of
        1,000 than of 256, and a short last batch costs nearly as much as a full one.
    seed : int, default=0
        Seed of the random projections.
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
    metadata : mapping or pandas DataFrame, default=None
        Per-example columns stored once with the probe (``{"text": [...], "source": [...], "score": [...]}``:
        strings, numbers, booleans; see :mod:`repviz.metadata`), one value per probe example; the tab colours by,
        searches and shows them. :func:`repviz.store.write_metadata` adds or replaces them later.

    Examples
    --------
    >>> logger = ActivationLogger("logs/relu", probe=(x_test[:2000], y_test[:2000]))  # doctest: +SKIP
    >>> model.fit(x, y, epochs=10, callbacks=[logger])                                # doctest: +SKIP
    >>> repviz.open_logdir("logs").run("relu").activations("dense", 10).shape          # doctest: +SKIP
    (2000, 128)
    """

    def __new__(cls, *args: Any, **kwargs: Any):
        if kwargs.get("batch_freq") is not None:
            cls = _with_batch_hook(cls)
        return super().__new__(cls)

    def __init__(self, log_dir, probe, *, probe_size: int | None = None, layers=None,
                 freq: int | Sequence[int] | None = None, batch_freq: int | None = None, probe_ids=None,
                 dtype: str = "float32", max_width: int | None = None, projection_dim: int = 256,
                 pooling: str | dict | None = None, batch_size: int | None = None, seed: int = 0,
                 prediction_output: str | None = None, embed: str | Sequence[str] | None = None, model=None,
                 forward: Callable | None = None, metadata: Any = None,
                 batch_probe: int | Sequence[int] | np.ndarray | None = None):
        super().__init__()
        self.log_dir = log_dir
        check_param(probe_size, [_POSITIVE, NONE], "probe_size", "ActivationLogger")
        self._x, self._y = _split_probe(probe, probe_size)
        self.n_probe = _probe_length(self._x, self._y)
        self.probe_ids = _check_ids(probe_ids, self.n_probe)
        self.metadata = None if metadata is None else columns_from(metadata, self.n_probe)
        _warn_nonfinite_inputs(self._x)
        self.layers_spec = _check_layers_spec(layers)
        if freq is not None and batch_freq is not None and batch_probe is None:
            raise ValueError(f"ActivationLogger takes an epoch schedule (freq={freq!r}) or a batch schedule "
                             f"(batch_freq={batch_freq!r}), not both; pass only one of them (or batch_probe= too, "
                             f"for whole-probe snapshots after those epochs and subset ones in between).")
        self.freq = _check_freq(1 if freq is None else freq)
        self._mixed = freq is not None and batch_freq is not None  # epoch snapshots in a batch schedule
        self.batch_freq = check_param(batch_freq, [_POSITIVE, NONE], "batch_freq", "ActivationLogger")
        self.dtype = np.dtype(check_option(dtype, ("float32", "float16"), "dtype", "ActivationLogger"))
        check_param(max_width, [_POSITIVE, NONE], "max_width", "ActivationLogger")
        check_param(projection_dim, [_POSITIVE], "projection_dim", "ActivationLogger")
        check_param(batch_size, [_POSITIVE, NONE], "batch_size", "ActivationLogger")
        max_width = 2 * projection_dim if max_width is None else max_width
        if projection_dim > max_width:
            raise ValueError(f"projection_dim ({projection_dim}) must not exceed max_width ({max_width}): a "
                             f"projection would then widen the layers it is meant to shrink.")
        self.max_width, self.projection_dim = int(max_width), int(projection_dim)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.pooling = _check_pooling(pooling)
        if model is not None and not isinstance(model, keras.layers.Layer):
            raise _param_error("model", "a keras Model or Layer (e.g. vae.encoder)", model)
        if forward is not None and not callable(forward):
            raise _param_error("forward", "a callable x -> outputs", forward)
        self.logged_model, self.forward = model, forward
        self.seed = int(check_param(seed, [INTEGER], "seed", "ActivationLogger"))
        self.prediction_output = check_param(prediction_output, [_STRING, NONE], "prediction_output",
                                             "ActivationLogger")
        self.embed = _check_embed(embed)
        self._subset, self._subset_info = self._batch_subset(batch_probe)
        self._writer = store.RunWriter(log_dir)
        self._writer.check_writable()
        self._captures: list[_Capture] | None = None
        self._marker_written = False
        self._follower: subprocess.Popen | None = None

    # ---------------------------------------------------------------------------------------------------------
    # Keras hooks
    # ---------------------------------------------------------------------------------------------------------
    def on_train_begin(self, logs=None):
        stored = self._writer.stored_manifest() or {}
        target = self._target()
        self._captures, self._outputs = self._plan(target, stored.get("layers") or {})
        self._batch_rows = self.batch_size or _auto_batch_rows(self.n_probe, self._captures, self._outputs)
        if self._subset is not None:  # the inputs of batch snapshots, taken once
            self._subset_x = keras.tree.map_structure(lambda a: a[self._subset], self._x)
            self._subset_batch_rows = self.batch_size or _auto_batch_rows(len(self._subset), self._captures,
                                                                          self._outputs)
        self._writer.begin(self._manifest(target))
        try:
            self._writer.write_probe(self.probe_ids, self._labels(), self._thumbnails())
            if self.metadata is not None:
                self._writer.write_metadata(self.metadata)
        except BaseException:
            self._writer.abandon()  # nothing stored: a retry with corrected data must not be refused
            raise
        if self.embed and (self._follower is None or self._follower.poll() is not None):
            from . import follow  # the pipeline side; imports no numerical code

            self._follower = follow.start(*self._writer.reader_location(), self.embed)
        self._run_fn = None  # compiled on the first snapshot
        self._background = _BackgroundWriter()
        self._first = True
        self._epoch = 0
        self._batches = 0
        self._offset = 0  # step of this fit's epoch 0 (a later fit into the run continues the count)
        self._warned: set[str] = set()

    def _target(self):
        """The model whose layers are recorded: ``model=`` when given, else the one being trained."""
        return self.model if self.logged_model is None else self.logged_model

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        if self._first:  # snapshot 0 (or the resumed position when fit starts at initial_epoch > 0)
            self._first = False
            self._warn_empty_schedule(epoch)
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
                                                       "initial_epoch": int(epoch), "started": time.time()}])

    def _warn_empty_schedule(self, initial_epoch: int) -> None:
        """Warn when an epoch list names none of the epochs this fit runs (``initial_epoch + 1`` to ``epochs``)."""
        epochs = (self.params or {}).get("epochs")
        if self.batch_freq is None and isinstance(self.freq, list) and epochs and not any(
                initial_epoch < f <= epochs for f in self.freq):
            runs = f"the {epochs} epoch(s)" if not initial_epoch else f"epochs {initial_epoch + 1}-{epochs}"
            warnings.warn(f"freq={self.freq} schedules no snapshot within {runs} of this fit; only the snapshot "
                          f"before training will be recorded", RuntimeWarning, stacklevel=_user_stacklevel())

    def _epoch_scheduled(self, epoch: int) -> bool:
        """Whether ``freq`` asks for a snapshot after epoch ``epoch`` (1 = the first) of a fit."""
        return epoch % self.freq == 0 if _is_int(self.freq) else epoch in self.freq

    def on_epoch_end(self, epoch, logs=None):
        step = epoch + 1
        if self.batch_freq is None and self._epoch_scheduled(step):
            self._snapshot(self._offset + step, epoch=step)
        elif self._mixed and self._epoch_scheduled(step):  # the whole probe, at the batch count
            self._snapshot(self._batches, epoch=step)

    def on_train_end(self, logs=None):
        try:
            self._report(self._background.close())  # waits for the snapshots still being written
        finally:
            fits = list(self._writer.manifest.get("fits") or [])
            if fits and not self._first:
                end = self._batches if self.batch_freq is not None else self._offset + self._epoch + 1
                fits[-1] = {**fits[-1], "end_step": int(end)}
            self._writer.update_manifest(finished=time.time(), fits=fits)
            self._end_follower()

    def wait_embeddings(self, timeout: float | None = None) -> bool:
        """Wait until the background embedding of ``embed=`` has embedded every stored snapshot and exited (at most
        ``timeout`` seconds); True when it has, or when there is none. Training being over is implied: call it
        after ``fit`` (also after a ``fit`` that raised, whose snapshots are then embedded)."""
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
    def _plan(self, model, recorded: dict) -> tuple[list[_Capture], list[_Output]]:
        """The tensors to record and how each is reduced; a layer ``recorded`` before (in the manifest of the run
        this fit continues) keeps its reduction."""
        paths = dict(_walk(model))
        chosen, explicit = _select_layers(paths, self.layers_spec)
        if self.forward is None:
            _check_callable(model)
            self._x = _conform_probe(model, self._x)
        n_head = min(2, self.n_probe)
        head = keras.tree.map_structure(lambda a: a[:n_head], self._x)
        try:
            # Twice: a model's first eager call may run its layers more than once while it builds itself.
            for _ in range(2):
                calls, outputs = self._forward(model, head, [layer for _, layer in chosen])
        except Exception as e:
            through = "forward=" if self.forward is not None else f"model {model.name!r}"
            raise ValueError(f"the probe (inputs of shape {_shapes(self._x)}) does not fit {through}: running it "
                             f"on the probe failed with {type(e).__name__}: {e}") from e
        self._skipped = {}
        if self.layers_spec is None:
            chosen_ids = {id(layer) for _, layer in chosen}
            self._skipped = {p: f"a {type(layer).__name__}: not in the default set (see layers=); name it in "
                                f"layers= to record it"
                             for p, layer in paths.items() if id(layer) not in chosen_ids}
            self._skipped.update(_duplicates(chosen, calls))
            self._skipped.update(_container_copies(chosen, calls, self._skipped))
        captures = []
        for path, layer in chosen:
            if path in self._skipped:
                continue
            results = calls[id(layer)]
            if not results:
                if path in explicit:
                    raise ValueError(f"layer {path!r} is not called when model {model.name!r} runs on the probe, "
                                     f"so it has no activations to record; choose another layer.")
                self._skipped[path] = "not called when the model runs on the probe"
            for c, result in enumerate(results):
                flat = keras.tree.flatten(result)
                batched = [i for i, t in enumerate(flat) if _is_batched(t, n_head)]
                for i, t in enumerate(flat):
                    if i not in batched:
                        where = path + (f"#{c}" if len(results) > 1 else "") + (f":{i}" if len(flat) > 1 else "")
                        self._skipped[where] = (f"output of shape {tuple(getattr(t, 'shape', ()))} has no batch "
                                                f"axis (the same for every example)")
                for o, i in enumerate(batched):
                    name = path + (f"#{c}" if len(results) > 1 else "") + (f":{o}" if len(batched) > 1 else "")
                    captures.append(self._capture(name, path, layer, c, i, tuple(flat[i].shape[1:]),
                                                  recorded.get(name)))
        if not captures:
            raise ValueError(f"none of the chosen layers of model {model.name!r} produced a per-sample output "
                             f"on the probe; available layers: {store._choices(paths)}")
        return captures, self._plan_outputs(model, outputs)

    def _plan_outputs(self, model, outputs) -> list[_Output]:
        """The model's outputs to store, the primary one (``prediction_output``) first."""
        flat = keras.tree.flatten_with_path(outputs)
        names = _output_names(model, [path for path, _ in flat])
        found = [_Output(name, i, tuple(int(s) for s in t.shape[1:])) for i, (name, (_, t)) in
                 enumerate(zip(names, flat))]
        choice = found[0].name if self.prediction_output is None else self.prediction_output
        primary = [o for o in found if o.name == choice]
        if not primary:
            raise _param_error("prediction_output", f"one of the outputs of model {model.name!r} "
                               f"({store._choices(names)})", choice)
        return primary + [o for o in found if o.name != choice]

    def _capture(self, name: str, path: str, layer, call: int, output: int, shape: tuple[int, ...],
                 recorded: dict | None = None) -> _Capture:
        if recorded and recorded.get("output_shape") == [None, *shape]:
            reduction = recorded.get("reduction") or {"kind": "none"}  # resumed: snapshots stay comparable
        else:
            reduction = self._new_reduction(name, shape)
        kind = reduction["kind"]
        pooling = reduction.get("before", kind)
        pooling = pooling if pooling in _POOLING_KINDS else None
        width = int(shape[-1]) if pooling else int(np.prod(shape, dtype=np.int64))
        sketch = None
        if kind == _reduction.COUNT_SKETCH:
            plan = _reduction.count_sketch_plan(width, reduction["dim"], reduction["seed"])
            sketch = _reduction.count_sketch_columns(*plan, width, reduction["dim"])
        elif kind != "none" and pooling is None:
            raise ValueError(f"layer {name!r} of this run was recorded with the reduction {kind!r}, which this "
                             f"version of repviz cannot continue; record into a new run directory")
        stored = reduction["dim"] if sketch is not None else width
        return _Capture(name, path, layer, call, output, shape, pooling, width, sketch, reduction, stored)

    def _new_reduction(self, name: str, shape: tuple[int, ...]) -> dict:
        """The reduction of a layer recorded for the first time, as the manifest stores it."""
        kind = _pooling_kind(self.pooling, name, shape)
        width = int(shape[-1]) if kind else int(np.prod(shape, dtype=np.int64))
        reduction: dict = {"kind": kind, "dim": width} if kind else {"kind": "none"}
        if width <= self.max_width:
            return reduction
        return {"kind": _reduction.COUNT_SKETCH, "dim": self.projection_dim,
                "seed": [self.seed, zlib.crc32(name.encode())], "in_width": width, "before": reduction["kind"]}

    def _manifest(self, model) -> dict:
        arch = [(path, type(layer).__name__, [list(w.shape) for w in layer.weights]) for path, layer in _walk(model)]
        digest = hashlib.sha256()
        for a in [*keras.tree.flatten(self._x), self.probe_ids, *_leaves(self._y)]:
            digest.update(str((a.dtype.str, a.shape)).encode())
            digest.update(np.ascontiguousarray(a).data)
        schedule = ({"unit": "batch", "every": self.batch_freq, **({"after_epochs": self.freq} if self._mixed else {})}
                    if self.batch_freq is not None else
                    {"unit": "epoch", "every" if _is_int(self.freq) else "epochs": self.freq})
        return {
            "fingerprint": {"model": _hash([type(model).__name__, arch]), "probe": digest.hexdigest()[:16]},
            "model": {"name": model.name, "class": type(model).__name__, "params": int(model.count_params())},
            "layers": {c.name: {"class": type(c.layer).__name__, "layer": c.path, "call": c.call,
                                "output": c.output, "output_shape": [None, *c.sample_shape],
                                "stored_shape": [self.n_probe, c.width], "reduction": c.reduction}
                       for c in self._captures},
            "probe": {"n": self.n_probe, "shape": _shapes(self._x), "has_labels": self._y is not None},
            "predictions": {"shape": [self.n_probe, *self._outputs[0].sample_shape], "output": self._outputs[0].name,
                            "outputs": {o.name: [self.n_probe, *o.sample_shape] for o in
                                        sorted(self._outputs, key=lambda o: o.index)}},
            "schedule": schedule, "step_unit": schedule["unit"], "dtype": self.dtype.name,
            **({"skipped": self._skipped} if self._skipped else {}),
            **({"batch_probe": self._subset_info} if self._subset_info else {}),
        }

    def _batch_subset(self, batch_probe) -> tuple[np.ndarray | None, dict | None]:
        """The probe positions that batch snapshots record (None: all) and the manifest's note of the choice."""
        if batch_probe is None:
            return None, None
        if self.batch_freq is None:
            raise ValueError("batch_probe chooses the probe points of batch snapshots and this logger takes none; "
                             "pass batch_freq= too, or probe_size= to record fewer points at every snapshot.")
        n = self.n_probe
        if _is_int(batch_probe):
            check_param(batch_probe, [_POSITIVE], "batch_probe", "ActivationLogger")
            if batch_probe > n:
                warnings.warn(f"batch_probe={batch_probe} exceeds the probe's {n} points; batch snapshots record "
                              f"the whole probe", RuntimeWarning, stacklevel=_user_stacklevel())
            labels = self._labels()
            classes = labels if labels is not None and labels.dtype.kind in "iub" else None
            rows = stratified_subset(n, int(batch_probe), classes, random_state=self.seed)
            info = {"n": len(rows), "seed": self.seed, "by": "random" if classes is None else "class"}
        else:
            rows = np.asarray(batch_probe)
            if rows.ndim != 1 or not len(rows) or rows.dtype.kind not in "iu" or rows.min() < 0 or \
                    rows.max() >= n or len(np.unique(rows)) != len(rows):
                raise ValueError(f"batch_probe must be a size or distinct positions into the probe (0 to {n - 1}); "
                                 f"got an array of dtype {rows.dtype}, shape {rows.shape}")
            rows = np.sort(rows).astype(np.int64)
            info = {"n": len(rows), "by": "positions"}
        return (None, None) if len(rows) == n else (rows, info)

    def _labels(self) -> np.ndarray | None:
        y = self._y
        if y is None:
            return None
        if not isinstance(y, np.ndarray):  # one target per output, as fit takes them: the primary output's
            y = _primary_target(y, self._outputs)
        if y.ndim == 2 and y.shape[1] > 1:  # one-hot (or scores): store the class id
            return np.argmax(y, axis=1).astype(np.int64)
        y = y.reshape(len(y), -1)[:, 0] if y.ndim == 2 else y
        return y.astype(np.int64) if y.dtype.kind in "iub" else y

    def _thumbnails(self) -> np.ndarray | None:
        x = self._x
        if not isinstance(x, np.ndarray):
            return None
        return _line_thumbnails(x) if x.ndim == 3 and x.shape[2] == 1 else thumbnails(x)

    # ---------------------------------------------------------------------------------------------------------
    # Snapshots
    # ---------------------------------------------------------------------------------------------------------
    def _forward(self, model, x, layers: list) -> tuple[dict[int, list], Any]:
        """Run ``model(x, training=False)`` with ``layers``' ``call`` wrapped (each once, however often listed);
        returns the model's outputs and, per layer id, the outputs of each of its calls in order."""
        calls: dict[int, list] = {id(layer): [] for layer in layers}
        with contextlib.ExitStack() as stack:
            for layer in {id(layer): layer for layer in layers}.values():
                stack.enter_context(_recording(layer, calls[id(layer)]))
            outputs = model(x, training=False) if self.forward is None else self.forward(x)
        return calls, outputs

    def _capture_fn(self, model) -> Callable:
        """``x -> (reduced outputs, predictions)`` for one probe batch. On the TensorFlow backend a
        ``tf.function`` traced once per model: the input signature leaves the batch dimension free (the last
        probe batch is shorter), the wrappers run once, while tracing, and each snapshot runs one graph."""
        run = _CaptureCall(self._forward, model, self._captures, [o.index for o in self._outputs])
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            signature = keras.tree.map_structure(
                lambda a: tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype)), self._x)
            return tf.function(run, input_signature=[signature], autograph=False)
        return run

    def _snapshot(self, step: int, rows: np.ndarray | None = None, **info: Any) -> None:
        """Run the probe (its positions ``rows`` only, when given) through the model on the training thread (the
        weights must not move meanwhile), appending each probe batch's outputs to the snapshot's files, and hand
        the last batch's outputs to the background writer as they are: it reduces them (on that one thread) and
        stores the snapshot while training goes on."""
        self._report(self._background.done())  # also raises here what failed in the writer since
        n = self.n_probe if rows is None else len(rows)
        named = len(self._outputs) > 1  # a single-output run writes what it always did: no output name
        acts = [self._writer.activation_blocks(c.name, step, (n, c.width), self.dtype) for c in self._captures]
        preds = [self._writer.prediction_blocks(step, (n, *o.sample_shape), output=o.name if named else None,
                                                primary=i == 0) for i, o in enumerate(self._outputs)]
        try:
            for batch, final in self._probe_batches(rows):
                if not final:
                    self._store_batch(batch, acts, preds)
        except BaseException:
            _abandon(acts + preds)
            raise
        last = [batch]  # the writer drops it once stored: the job itself must not keep it alive
        info = info if rows is None else {**info, "rows": rows}  # the store's rows= of every array
        self._background.submit(lambda: self._finish_snapshot(step, info, last, acts, preds))

    def _probe_batches(self, rows: np.ndarray | None = None) -> Iterator[tuple[tuple, bool]]:
        """A snapshot's forward pass: the outputs of each probe batch (of the positions ``rows`` only, when given)
        as the capture function computes them, each with whether it is the last; nothing is stored (what
        ``benchmarks/bench_capture.py`` times as the probe's own cost)."""
        if self._run_fn is None:
            self._run_fn = self._capture_fn(self._target())
            _SKETCH_KERNEL.join()
        x, n, size = ((self._x, self.n_probe, self._batch_rows) if rows is None else
                      (self._subset_x, len(rows), self._subset_batch_rows))
        for start in range(0, n, size):
            yield self._run_fn(keras.tree.map_structure(lambda a, s=start: a[s:s + size], x)), start + size >= n

    def _store_batch(self, batch: tuple, acts: list[store.ArrayBlocks], preds: list[store.ArrayBlocks],
                     threads: int | None = None) -> None:
        """Append one probe batch's outputs (recorded layers, model outputs) to the snapshot's files,
        count-sketching the wide layers (on ``threads`` threads; None: numba's)."""
        flat, predicted = batch
        for c, r, a in zip(self._captures, flat, acts):
            r = _host_view(r)
            if c.sketch is not None:
                sketched = np.empty((len(r), c.width), np.float32)
                _reduction.apply_count_sketch(r, *c.sketch, sketched, threads)
                r = sketched
            a.write(r)
        for r, a in zip(predicted, preds):
            a.write(_host_view(r))

    def _finish_snapshot(self, step: int, info: dict, last: list[tuple], acts: list[store.ArrayBlocks],
                         preds: list[store.ArrayBlocks]) -> list[dict]:
        """The writer's part of a snapshot: store its last probe batch, serially (the writer must not take the
        training threads' cores), then write it. The batch's backend outputs, the largest arrays of a snapshot,
        are released before the writes."""
        try:
            self._store_batch(last.pop(), acts, preds, threads=1)
            return self._write_snapshot(step, info, acts, preds)
        except BaseException:
            _abandon(acts + preds)
            raise

    def _write_snapshot(self, step: int, info: dict, acts: list[store.ArrayBlocks],
                        preds: list[store.ArrayBlocks]) -> list[dict]:
        """Store one snapshot (on the writer thread); returns the activation records. Each array is renamed into
        place before its record is appended, and the primary prediction comes last: a snapshot counts once it is
        there, so a crash leaves only complete snapshots."""
        records = [self._writer.write_activation(c.name, step, a, **info) for c, a in zip(self._captures, acts)]
        named = len(self._outputs) > 1
        for i in reversed(range(len(self._outputs))):
            self._writer.write_prediction(step, preds[i], output=self._outputs[i].name if named else None,
                                          primary=i == 0, **info)
        if self._follower is not None:
            from .follow import nudge

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
                              f"counted in the record{hint}.", RuntimeWarning, stacklevel=_user_stacklevel())


class _CaptureCall:
    """The function that ``ActivationLogger._capture_fn`` compiles: the model's forward pass with the chosen
    layers recorded, each capture flattened (see :func:`_reduce`). A callable object rather than a closure:
    TensorFlow counts traces per Python code object, so the closures of several models in one process, each
    traced once, would add up to its "triggered tf.function retracing" warning."""

    def __init__(self, forward: Callable, model, captures: list[_Capture], outputs: list[int]):
        self.forward, self.model, self.captures, self.outputs = forward, model, captures, outputs
        self.layers = [c.layer for c in captures]

    def __call__(self, x):
        calls, outputs = self.forward(self.model, x, self.layers)
        reduced = [_reduce(keras.tree.flatten(calls[id(c.layer)][c.call])[c.output], c) for c in self.captures]
        flat = keras.tree.flatten(outputs)
        return reduced, [keras.ops.cast(flat[i], "float32") for i in self.outputs]


class _BackgroundWriter:
    """One thread that runs the snapshot writes handed to it, in order, at most ``depth`` waiting besides the one
    being written (so memory stays bounded: the training thread waits when the disk falls behind).

    A failed write stops the writes after it (a later snapshot must not be stored without an earlier one) and is
    raised on the training thread by the next :meth:`submit`, :meth:`done` or :meth:`close`.
    """

    def __init__(self, depth: int = 1):
        self._jobs: queue.Queue = queue.Queue(maxsize=depth)
        self._finished: list = []
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="repviz-writer", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            if self._error is None:
                try:
                    results = job()
                except BaseException as e:  # handed to the training thread
                    self._error = e
                    continue
                with self._lock:
                    self._finished.extend(results)

    def submit(self, job: Callable[[], list]) -> None:
        """Queue ``job`` (returns a list of results); blocks while ``depth`` jobs wait."""
        self._raise()
        self._jobs.put(job)

    def done(self) -> list:
        """The results of the jobs finished since the last call."""
        self._raise()
        with self._lock:
            finished, self._finished = self._finished, []
        return finished

    def close(self) -> list:
        """Wait for every queued job, stop the thread and return :meth:`done`."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()
        return self.done()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            error.add_note("(raised while repviz's background writer stored a snapshot; the snapshots before it "
                           "are complete)")
            raise error


_COST_SHARE = 0.10  # a batch schedule whose snapshots take more than this share of the training time warns once,
_COST_SNAPSHOTS = 3  # judged on the medians over this many snapshots


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
    """The every-``batch_freq``-batches variant; the only one with a batch hook (see ``batch_freq``). Fine
    schedules can cost much more than their users expect, so it measures each snapshot against the training
    time since the previous one and warns once when the snapshots take more than a tenth of it."""

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._costs: list[tuple[float, float]] | None = []  # (snapshot, training before it), seconds
        self._since: float | None = None

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        ends_epoch = self._mixed and batch + 1 == self.params.get("steps") and self._epoch_scheduled(self._epoch + 1)
        if self._batches % self.batch_freq == 0 and not ends_epoch:  # else on_epoch_end takes the whole probe
            start = time.perf_counter()
            self._snapshot(self._batches, self._subset, epoch=self._epoch, batch=batch + 1)
            self._judge_cost(start, time.perf_counter())

    def _judge_cost(self, start: float, end: float) -> None:
        if self._since is not None and self._costs is not None:
            self._costs.append((end - start, start - self._since))
            if len(self._costs) == _COST_SNAPSHOTS:
                snapshot, training = np.median(self._costs, axis=0)
                self._costs = None  # once per fit
                if snapshot > _COST_SHARE * training:
                    every = "batch" if self.batch_freq == 1 else f"{self.batch_freq} batches"
                    warnings.warn(f"a snapshot every {every} takes {1e3 * snapshot:.0f} ms on the training thread, "
                                  f"{snapshot / training:.0%} of the {training:.2f} s of training before it: training "
                                  f"runs at least that much slower. A larger batch_freq, or fewer probe points "
                                  f"(batch_probe=: the forward pass costs in proportion to its rows), costs less.",
                                  RuntimeWarning,
                                  stacklevel=_user_stacklevel())
        self._since = end


# -------------------------------------------------------------------------------------------------------------
# Helpers
# -------------------------------------------------------------------------------------------------------------

def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised here point at the user's line (the ``fit`` call): the
    first frame outside repviz, Keras and the backends."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARIES:
        frame, level = frame.f_back, level + 1
    return level


_LIBRARIES = {"repviz", "keras", "tensorflow", "jax", "torch", "optree", "contextlib"}


def _line_thumbnails(x: np.ndarray, height: int = 32, width: int = 64) -> np.ndarray:
    """uint8 line plots (black on white, ``height`` rows) of series ``x`` (n, T, 1), each over its own range, T
    binned to at most ``width`` means: the hover picture of a time-series probe."""
    n, steps = x.shape[:2]
    v = np.nan_to_num(x.reshape(n, steps).astype(np.float32))
    edges = np.linspace(0, steps, min(width, steps) + 1).astype(np.int64)
    means = np.add.reduceat(v, edges[:-1], axis=1) / np.diff(edges)
    lo, hi = means.min(axis=1, keepdims=True), means.max(axis=1, keepdims=True)
    rows = np.round((height - 1) * (hi - means) / np.maximum(hi - lo, 1e-12)).astype(np.int64)
    before = np.concatenate([rows[:, :1], rows[:, :-1]], axis=1)  # a vertical stroke joins consecutive points
    r = np.arange(height)[None, :, None]
    on = (r >= np.minimum(before, rows)[:, None, :]) & (r <= np.maximum(before, rows)[:, None, :])
    return np.where(on, 0, 255).astype(np.uint8)


@contextlib.contextmanager
def _recording(layer, sink: list):
    """Temporarily replace ``layer.call`` by a wrapper that appends each output to ``sink``."""
    original = layer.call

    def call(*args, **kwargs):
        out = original(*args, **kwargs)
        sink.append(out)
        return out

    object.__setattr__(layer, "call", call)  # an instance attribute, bypassing Keras's attribute tracking
    try:
        yield
    finally:
        del layer.__dict__["call"]


def _reduce(tensor, c: _Capture):
    """Flatten one batch of a captured output to (batch, flat width) float32 on the backend side, pooled on
    request; the count sketch follows in numpy."""
    ops = keras.ops
    x = ops.cast(tensor, "float32")
    if c.pooling in ("global_avg_pooling", "global_max_pooling"):
        axes = tuple(range(1, len(x.shape) - 1))
        x = ops.mean(x, axis=axes) if c.pooling == "global_avg_pooling" else ops.max(x, axis=axes)
    elif c.pooling:
        x = _pool_sequence(x, _keras_mask(tensor), c.pooling.split("_")[1])
    return ops.reshape(x, (-1, c.flat_width))


_SEQUENCE_DEFAULT = "mean"  # pooling=None for (n, T, d) outputs: see benchmarks/bench_sequence_pooling.py
_POLICIES = ("avg", "mean", "max", "first", "last", "flatten")
#: The stored reduction kind of each policy for sequences (n, T, d) and maps (n, H, W, C), as the manifest says.
_SEQUENCE_KINDS = {"avg": "global_avg_pooling",
                   **{p: f"sequence_{p}_pooling" for p in ("mean", "max", "first", "last")}}
_MAP_KINDS = {"avg": "global_avg_pooling", "mean": "global_avg_pooling", "max": "global_max_pooling"}
_POOLING_KINDS = {*_SEQUENCE_KINDS.values(), *_MAP_KINDS.values()}


def _pooling_kind(pooling, name: str, shape: tuple[int, ...]) -> str | None:
    """The reduction kind that ``pooling=`` gives layer ``name`` of sample shape ``shape``; None: flattened. A
    dict names layers (``name`` or the layer path before ``#``/``:``); the rest get the default."""
    if isinstance(pooling, dict):
        pooling = pooling.get(name, pooling.get(name.split("#")[0].split(":")[0]))
    if len(shape) == 2:
        return _SEQUENCE_KINDS.get(_SEQUENCE_DEFAULT if pooling is None else pooling)
    return _MAP_KINDS.get(pooling) if len(shape) > 2 else None


def _keras_mask(tensor):
    """The Keras mask (batch, T) a layer attached to its output, or None. Keras keeps it on the tensor, or in a
    table by tensor id where the tensor takes no attribute (JAX arrays); only its own reader knows both."""
    try:
        from keras.src.backend.common.masking import get_keras_mask
    except ImportError:  # pragma: no cover - a Keras that moved it
        return getattr(tensor, "_keras_mask", None)
    return get_keras_mask(tensor)


def _pool_sequence(x, mask, policy: str):
    """Pool (batch, T, d) over T by ``policy``, leaving out the positions ``mask`` (batch, T) drops: the mean or
    max over the kept ones, the first position, or the last kept one (0 for an example with none kept)."""
    ops = keras.ops
    if policy == "first":
        return x[:, 0]
    if mask is None:
        mask = ops.ones(ops.shape(x)[:2], "float32")
    m = ops.cast(mask, "float32")
    if policy == "mean":
        return ops.sum(x * m[:, :, None], axis=1) / ops.maximum(ops.sum(m, axis=1, keepdims=True), 1.0)
    if policy == "max":
        kept = ops.where(m[:, :, None] > 0, x, ops.full_like(x, -np.inf))
        return ops.where(ops.sum(m, axis=1, keepdims=True) > 0, ops.max(kept, axis=1), ops.zeros_like(x[:, 0]))
    positions = ops.cast(ops.arange(ops.shape(x)[1]), "float32")[None, :] * m + m  # kept position + 1, else 0
    last = ops.cast(ops.maximum(ops.argmax(positions, axis=1), 0), "int32")
    picked = ops.take_along_axis(x, last[:, None, None], axis=1)[:, 0]
    return ops.where(ops.sum(m, axis=1, keepdims=True) > 0, picked, ops.zeros_like(picked))


_BATCH_BYTES = 96 << 20  # batch_size=None: the full-width outputs of one probe batch fit in this


def _auto_batch_rows(n: int, captures: list[_Capture], outputs: list[_Output]) -> int:
    """Probe rows per batch for ``batch_size=None`` (see :class:`ActivationLogger`): the fewest batches within
    the memory budget, of equal size (a short last batch costs nearly a whole call)."""
    values = sum(c.flat_width for c in captures) + sum(int(np.prod(o.sample_shape)) for o in outputs)
    most = max(16, _BATCH_BYTES // (4 * max(1, values)))
    batches = -(-n // most)
    return int(-(-n // batches))


def _abandon(blocks: list[store.ArrayBlocks]) -> None:
    """Delete the temporary files of a snapshot that failed (the arrays already stored stay)."""
    for b in blocks:
        b.abandon()


def _host_view(tensor) -> np.ndarray:
    """A backend tensor as a numpy array, without a copy where the backend allows (TensorFlow's CPU tensors:
    ``keras.ops.convert_to_numpy`` copies, which cost a CNN snapshot more than its sketch)."""
    if keras.backend.backend() == "tensorflow":
        return np.asarray(tensor)
    return keras.ops.convert_to_numpy(tensor)


def _is_batched(t, n: int) -> bool:
    shape = getattr(t, "shape", None)
    return shape is not None and len(shape) >= 1 and shape[0] == n


def _walk(layer, prefix: str = "", seen: set | None = None):
    """(path, layer) for every layer inside ``layer``, depth first, in model order; shared layers once."""
    seen = set() if seen is None else seen
    if isinstance(layer, keras.Model):
        children = layer.layers  # graph order for Functional and Sequential
    else:  # sublayers of a custom layer, in the order they were assigned
        children = layer._flatten_layers(include_self=False, recursive=False)
    for child in children:
        if id(child) in seen or isinstance(child, keras.layers.InputLayer):
            continue
        seen.add(id(child))
        path = prefix + child.name
        yield path, child
        yield from _walk(child, path + "/", seen)


def _select_layers(paths: dict[str, Any], spec) -> tuple[list[tuple[str, Any]], set[str]]:
    """Resolve ``layers=`` against the model's layer paths; returns the choice and the explicitly named paths."""
    if spec is None:
        types = _default_types()
        return [(p, layer) for p, layer in paths.items() if isinstance(layer, types) or _is_container(layer)], set()
    items = spec if isinstance(spec, list) else [spec]
    by_name: dict[str, list[str]] = {}
    for p, layer in paths.items():
        by_name.setdefault(layer.name, []).append(p)
    chosen: dict[str, Any] = {}
    explicit: set[str] = set()
    for item in items:
        if isinstance(item, str):
            if item in paths:
                found = [item]
            elif len(by_name.get(item, [])) == 1:
                found = by_name[item]
            elif item in by_name:
                raise ValueError(f"layer name {item!r} is ambiguous: it matches {by_name[item]}; pass one of "
                                 f"these paths instead.")
            else:
                raise ValueError(f"layer {item!r} is not in the model; available layers: "
                                 f"{store._choices(paths)}")
            explicit.update(found)
            chosen.update((p, paths[p]) for p in found)
        elif isinstance(item, type):
            chosen.update((p, layer) for p, layer in paths.items() if isinstance(layer, item))
        else:
            chosen.update((p, layer) for p, layer in paths.items() if item(layer))
    if not chosen:
        raise ValueError(f"layers={spec!r} selects no layer of the model; available layers: "
                         f"{store._choices(paths)}")
    return [(p, layer) for p, layer in paths.items() if p in chosen], explicit


def _duplicates(chosen: list[tuple[str, Any]], calls: dict[int, list]) -> dict[str, str]:
    """The layers of the default set that would record a tensor already recorded, with the reason: layer ``B`` is
    skipped when (1) in the model's layer graph (Functional and Sequential models) it is called once, on the one
    output of a layer ``A`` that is recorded (or itself skipped as a copy of a recorded layer), (2) it applies
    the identity (``Activation("linear")``) or ReLU after an ``A`` that already ends in ReLU (``Conv2D(...,
    activation="relu")`` then ``ReLU()`` or ``Activation("relu")``; ReLU is idempotent), and (3) the outputs of
    ``A`` and ``B`` on the planning dry run are equal. A reshape (``Flatten``, ``Reshape``) is never in the default
    set, so the pooling output a ``Flatten`` reshapes is recorded once, under the pooling layer."""
    paths = {id(layer): path for path, layer in chosen}
    origin: dict[int, int] = {}  # id of a skipped layer -> id of the recorded layer whose tensor it repeats
    skipped = {}
    for path, layer in chosen:
        a = _producer(layer)
        if a is None or id(a) not in paths:
            continue
        kind, before = _final_activation(layer), _final_activation(a)
        if not (kind == "linear" or kind == before == "relu"):
            continue
        source = origin.get(id(a), id(a))
        mine, theirs = calls[id(layer)], calls[source]
        if len(mine) == len(theirs) == 1 and _same_values(mine[0], theirs[0]):
            origin[id(layer)] = source
            what = "the identity" if kind == "linear" else "ReLU to an output that already ends in ReLU"
            skipped[path] = f"same tensor as {paths[source]!r} ({type(layer).__name__} applies {what})"
    return skipped


def _producer(layer):
    """The layer whose one output is ``layer``'s one input in the model's graph, else None."""
    nodes = getattr(layer, "_inbound_nodes", None) or []
    if len(nodes) != 1 or len(nodes[0].arguments.keras_tensors) != 1 or len(nodes[0].parent_nodes) != 1:
        return None
    parent = nodes[0].parent_nodes[0]
    return parent.operation if len(parent.outputs) == 1 else None


def _final_activation(layer) -> str | None:
    """``"relu"`` or ``"linear"`` when ``layer``'s output ends in that function (with its default arguments)."""
    if isinstance(layer, keras.layers.ReLU):
        plain = layer.max_value is None and not layer.negative_slope and not layer.threshold
        return "relu" if plain else None
    fn = getattr(layer, "activation", None)
    return {id(keras.activations.relu): "relu", id(keras.activations.linear): "linear"}.get(id(fn))


def _same_values(a, b) -> bool:
    a, b = (keras.ops.convert_to_numpy(t) for t in (a, b))
    return a.size == b.size and np.array_equal(a.reshape(-1), b.reshape(-1))


def _output_names(model, paths: list[tuple]) -> list[str]:
    """A name per flattened model output: the key path for dict outputs, else the output layer's name
    (``model.output_names`` of a Functional model, the last layer of a Sequential one), else ``output_<i>``;
    positions where names would repeat."""
    if paths and all(any(isinstance(k, str) for k in path) for path in paths):
        names = ["/".join(str(k) for k in path) for path in paths]
    elif isinstance(model, keras.Sequential) and model.layers:
        names = [model.layers[-1].name]
    else:
        try:
            names = [str(n) for n in model.output_names]
        except (AttributeError, ValueError):  # subclassed models name no outputs
            names = []
        if len(names) != len(paths):
            names = [f"output_{i}" for i in range(len(paths))]
    return names if len(set(names)) == len(names) else [f"output_{i}" for i in range(len(paths))]


def _is_container(layer) -> bool:
    """A nested model or a custom layer (a class defined outside Keras): recorded by default."""
    return isinstance(layer, keras.Model) or type(layer).__module__.split(".")[0] != "keras"


def _container_copies(chosen: list[tuple[str, Any]], calls: dict[int, list], skipped: dict) -> dict[str, str]:
    """The nested models and custom layers of the default set whose output is the same tensor as that of a
    recorded layer inside them (a nested Sequential's output is its last layer's): the inner one is recorded."""
    copies = {}
    for path, layer in chosen:
        mine = [keras.tree.flatten(r) for r in calls[id(layer)]]
        if not _is_container(layer) or path in skipped or not mine:
            continue
        for inner, other in chosen:
            theirs = [keras.tree.flatten(r) for r in calls[id(other)]]
            if (inner.startswith(path + "/") and inner not in skipped and len(theirs) == len(mine)
                    and all(len(a) == len(b) and all(map(_same_values, a, b)) for a, b in zip(mine, theirs))):
                copies[path] = f"same tensor as {inner!r} (the {type(layer).__name__}'s output is that layer's)"
                break
    return copies


def _check_callable(model) -> None:
    """Refuse, naming the way out, a model that trains through ``train_step`` and has no ``call()``."""
    if isinstance(model, keras.Model) and type(model).call is keras.Model.call:
        parts = [f"{model.name}.{a}" for a, v in vars(model).items()
                 if isinstance(v, keras.layers.Layer) and not a.startswith("_")]
        which = f" (it has {', '.join(parts)})" if parts else ""
        raise ValueError(f"model {model.name!r} has no call() (it trains through train_step), so no probe can run "
                         f"through it; log one of its models with ActivationLogger(..., model={model.name}.encoder)"
                         f"{which} or pass forward=lambda x: ...")


def _conform_probe(model, x):
    """The probe as the model's ``fit`` reads it: a dict matched to ``model.inputs`` by input name (not in
    sorted-key order), an array one rank short of an input whose last axis is 1 expanded (one rank long with a
    last axis of 1, squeezed), as Keras's Functional models adjust their inputs. Refused only where Keras
    would refuse it: another count of arrays, another rank or size."""
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):  # subclassed models declare none: the dry run checks them
        return x
    if not inputs:
        return x
    struct = getattr(model, "_inputs_struct", None)  # a Functional model's inputs as declared (list or dict)
    keys = [i.name for i in inputs]
    named = isinstance(x, dict) and not isinstance(struct, dict) and set(keys) <= set(x)
    arrays = [x[k] for k in keys] if named else keras.tree.flatten(x)
    if len(arrays) != len(inputs):
        raise ValueError(f"the probe has {len(arrays)} input array(s) but model {model.name!r} takes {len(inputs)} "
                         f"({', '.join(keys)}); pass them as a list in that order or a dict keyed by these names.")
    fixed = []
    for a, inp in zip(arrays, inputs):
        want = tuple(inp.shape[1:])
        if a.ndim == len(want) and want and want[-1] == 1:
            a = a[..., None]
        elif a.ndim == len(want) + 2 and a.shape[-1] == 1:
            a = a[..., 0]
        if a.ndim - 1 != len(want) or any(w is not None and w != s for w, s in zip(want, a.shape[1:])):
            raise ValueError(f"the probe's input {inp.name!r} has shape {a.shape} but model {model.name!r} expects "
                             f"{(None, *want)} (so would its fit); pass probe inputs shaped like the training "
                             f"inputs.")
        fixed.append(a)
    if named:
        return dict(zip(keys, fixed))
    return keras.tree.pack_sequence_as(x, fixed) if isinstance(x, (list, tuple, dict)) else fixed[0]


_STREAM_ROWS = 1000  # probe_size=None: the examples taken from a dataset, generator or PyDataset


def _split_probe(probe, size: int | None = None) -> tuple[Any, np.ndarray | None]:
    if _is_stream(probe):
        x, y = _take_examples(probe, size or _STREAM_ROWS)
    elif isinstance(probe, tuple) and len(probe) == 2:
        x, y = probe
    else:
        x, y = probe, None
    try:
        x = keras.tree.map_structure(np.asarray, x)
    except Exception as e:
        raise _param_error("probe", "an array, a list/dict of arrays, a pair (x, y), a tf.data.Dataset, a generator "
                           "or a keras.utils.PyDataset", type(probe)) from e
    for a in keras.tree.flatten(x):
        if a.dtype.kind not in "biuf":
            raise ValueError(f"probe inputs must be numeric arrays (as model.fit takes them); got dtype {a.dtype}")
    y = None if y is None else _targets(y)
    if size is not None:
        x = keras.tree.map_structure(lambda a: a[:size], x)
        y = None if y is None else keras.tree.map_structure(lambda a: a[:size], y)
    return x, y


def _targets(y) -> Any:
    """The probe's labels as arrays: one array, or a dict / list of arrays with one target per model output (as
    ``fit`` takes them for a multi-output model; the primary output's become the labels, see ``_labels``)."""
    if isinstance(y, dict) or (isinstance(y, (list, tuple)) and y and all(np.ndim(t) >= 1 for t in y)):
        return keras.tree.map_structure(np.asarray, y)
    return np.asarray(y)


def _leaves(y) -> list[np.ndarray]:
    """The label arrays of ``y`` (none for None)."""
    return [] if y is None else keras.tree.flatten(y)


def _primary_target(y, outputs: list[_Output]) -> np.ndarray:
    """The target of the primary output (``outputs[0]``) among ``y``'s, one per output: by output name for a dict,
    by position (as ``keras.tree.flatten`` orders the outputs) for a list."""
    if isinstance(y, dict):
        if outputs[0].name not in y:
            raise ValueError(f"the probe's labels are keyed {sorted(y)} but the recorded output is "
                             f"{outputs[0].name!r}; key them by output name, or pass the labels of one output")
        return np.asarray(y[outputs[0].name])
    flat = keras.tree.flatten(y)
    if len(flat) != len(outputs):
        raise ValueError(f"the probe has {len(flat)} label arrays but the model has {len(outputs)} outputs; pass one "
                         f"per output, as fit takes them, or the labels of one output")
    return flat[outputs[0].index]


def _is_stream(probe) -> bool:
    """A dataset, generator or PyDataset (batches to iterate), not arrays."""
    if isinstance(probe, (list, tuple, dict, np.ndarray, str, bytes)) or hasattr(probe, "shape"):
        return False
    return isinstance(probe, keras.utils.PyDataset) or hasattr(probe, "__iter__")


def _take_examples(source, n: int) -> tuple[Any, np.ndarray | None]:
    """The first ``n`` examples of the batches a dataset, generator or PyDataset yields (as ``fit`` reads them:
    ``x``, ``(x, y)`` or ``(x, y, sample_weight)``), as numpy arrays."""
    if isinstance(source, keras.utils.PyDataset):
        batches = (source[i] for i in range(len(source)))
    elif hasattr(source, "as_numpy_iterator"):  # tf.data
        batches = source.as_numpy_iterator()
    else:
        batches = iter(source)
    xs, ys, rows = [], [], 0
    for batch in batches:
        x, y, _ = keras.utils.unpack_x_y_sample_weight(tuple(batch) if isinstance(batch, list) else batch)
        x = keras.tree.map_structure(keras.ops.convert_to_numpy, x)
        xs.append(x)
        ys.append(None if y is None else keras.tree.map_structure(keras.ops.convert_to_numpy, y))
        rows += len(keras.tree.flatten(x)[0])
        if rows >= n:
            break
    if not xs:
        raise ValueError("the probe dataset yielded no batch; pass one that yields the examples to record")
    x = keras.tree.map_structure(lambda *a: np.concatenate(a)[:n], *xs)
    y = None if any(v is None for v in ys) else keras.tree.map_structure(lambda *a: np.concatenate(a)[:n], *ys)
    return x, y


def _probe_length(x, y) -> int:
    lengths = {len(a) if a.ndim else 0 for a in keras.tree.flatten(x)}
    if len(lengths) != 1:
        raise ValueError(f"probe input arrays differ in length: {sorted(lengths)}")
    n = lengths.pop()
    if n == 0:
        raise ValueError("the probe is empty (0 rows); pass at least one input row, e.g. probe=x_test[:2000].")
    for t in _leaves(y):
        if len(t) != n:
            raise ValueError(f"the probe has {n} input rows but {len(t)} labels")
    return n


def _warn_nonfinite_inputs(x) -> None:
    """Warn about NaN/infinite probe inputs now: a network may hide them (some CPU kernels turn ReLU(NaN) into
    0), so the activations alone would not tell."""
    bad = sum(int(a.size - np.count_nonzero(np.isfinite(a))) for a in keras.tree.flatten(x)
              if isinstance(a, np.ndarray) and a.dtype.kind in "fc")
    if bad:
        warnings.warn(f"the probe inputs hold {bad} non-finite value(s) (NaN or infinity); activations computed "
                      f"from them may be NaN, or silently finite, depending on the layers and the CPU",
                      RuntimeWarning, stacklevel=3)


def _check_ids(ids, n: int) -> np.ndarray:
    if ids is None:
        return np.arange(n, dtype=np.int64)
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu" or ids.shape != (n,):
        raise ValueError(f"probe_ids must be {n} integers (one per probe row); got dtype {ids.dtype}, "
                         f"shape {ids.shape}")
    if len(np.unique(ids)) != n:
        raise ValueError(f"probe_ids must be unique; {n - len(np.unique(ids))} are repeated")
    return ids.astype(np.int64)


def _check_layers_spec(spec):
    if spec is None or isinstance(spec, (str, type)) or (callable(spec) and not isinstance(spec, (list, tuple))):
        return spec
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(s, (str, type)) for s in spec):
        return list(spec)
    raise _param_error("layers", "None, a layer name, a layer class, a callable or a non-empty list of names "
                       "and classes", spec)


def _check_freq(freq):
    if _is_int(freq) and freq >= 1:
        return int(freq)
    if isinstance(freq, (list, tuple)) and freq and all(_is_int(f) and f >= 0 for f in freq):
        return sorted({int(f) for f in freq})
    raise _param_error("freq", "an int >= 1 (every N epochs) or a non-empty list of epoch numbers >= 0", freq)


def _check_pooling(pooling):
    if pooling is None or (isinstance(pooling, str) and pooling in _POLICIES):
        return pooling
    if isinstance(pooling, dict) and all(isinstance(k, str) and v in _POLICIES for k, v in pooling.items()):
        return dict(pooling)
    raise _param_error("pooling", f"None, one of {list(_POLICIES)} or a dict of layer name -> one of them",
                       pooling)


def _check_embed(embed) -> list[str]:
    if embed is None:
        return []
    from .methods import METHODS  # light: the registry of names, no estimator

    methods = [embed] if isinstance(embed, str) else embed
    if not isinstance(methods, (list, tuple)) or not methods:
        raise _param_error("embed", f"None, a method name or a non-empty list of them ({sorted(METHODS)})", embed)
    return [check_option(m, sorted(METHODS), "embed", "ActivationLogger") for m in dict.fromkeys(methods)]


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _shapes(x) -> Any:
    return keras.tree.map_structure(lambda a: [int(s) for s in a.shape], x)


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]
