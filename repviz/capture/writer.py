"""Snapshots written through the store: each snapshot's arrays appended probe batch by probe batch
(:class:`repviz.store.ArrayBlocks`: no snapshot is ever held whole in memory), then stored in an order that leaves
only complete snapshots after a crash; and the background thread that writes a snapshot's last batch and stores
it while training goes on.
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import store
from .layers import Output
from .reduction import Capture, host_view, sketch_rows


class SnapshotWriter:
    """The files of one run's snapshots: the recorded tensors ``captures`` and the model ``outputs`` (the primary
    prediction first), stored in ``dtype`` through ``run``."""

    def __init__(self, run: store.RunWriter, captures: list[Capture], outputs: list[Output], dtype: np.dtype):
        self.run, self.captures, self.outputs, self.dtype = run, captures, outputs, dtype
        self.named = len(outputs) > 1  # a single-output run writes what it always did: no output name

    def blocks(self, step: int, n: int) -> tuple[list[store.ArrayBlocks], list[store.ArrayBlocks]]:
        """The block files of snapshot ``step`` of ``n`` probe rows: one per capture, one per model output."""
        acts = [self.run.activation_blocks(c.name, step, (n, c.width), self.dtype) for c in self.captures]
        preds = [self.run.prediction_blocks(step, (n, *o.sample_shape), output=o.name if self.named else None,
                                            primary=i == 0) for i, o in enumerate(self.outputs)]
        return acts, preds

    def append(self, batch: tuple, acts: list[store.ArrayBlocks], preds: list[store.ArrayBlocks],
               threads: int | None = None) -> None:
        """Append one probe batch's outputs (reduced captures, model outputs) to the snapshot's files,
        count-sketching the wide layers (on ``threads`` threads; None: numba's)."""
        flat, predicted = batch
        for c, r, a in zip(self.captures, flat, acts):
            a.write(sketch_rows(host_view(r), c, threads))
        for r, a in zip(predicted, preds):
            a.write(host_view(r))

    def store(self, step: int, info: dict, acts: list[store.ArrayBlocks],
              preds: list[store.ArrayBlocks]) -> list[dict]:
        """Store one snapshot; returns the activation records. Each array is renamed into place before its record
        is appended, and the primary prediction comes last: a snapshot counts once it is there, so a crash leaves
        only complete snapshots."""
        records = [self.run.write_activation(c.name, step, a, **info) for c, a in zip(self.captures, acts)]
        for i in reversed(range(len(self.outputs))):
            self.run.write_prediction(step, preds[i], output=self.outputs[i].name if self.named else None,
                                      primary=i == 0, **info)
        return records


def abandon(blocks: list[store.ArrayBlocks]) -> None:
    """Delete the temporary files of a snapshot that failed (the arrays already stored stay)."""
    for b in blocks:
        b.abandon()


#: The writers whose thread may still hold a snapshot; each is finished when the interpreter exits.
_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _finish_live_writers() -> None:
    """Store the snapshots still being written when a script ends, also after ``fit`` raised (Keras then calls no
    ``on_train_end``): the writer's thread is a daemon, which the interpreter would stop mid-snapshot."""
    for writer in list(_LIVE):
        with contextlib.suppress(BaseException):
            writer.close()


class BackgroundWriter:
    """One thread that runs the snapshot writes handed to it, in order, at most ``depth`` waiting besides the one
    being written (so memory stays bounded: the training thread waits when the disk falls behind).

    A failed write stops the writes after it (a later snapshot must not be stored without an earlier one: each
    job skipped is discarded instead) and is raised on the training thread by the next :meth:`submit`, :meth:`done`
    or :meth:`close`. The thread is a daemon, so a training that hangs cannot keep the interpreter alive; what it
    still holds is stored at exit.
    """

    def __init__(self, depth: int = 1):
        self._jobs: queue.Queue = queue.Queue(maxsize=depth)
        self._finished: list = []
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="repviz-writer", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    def _work(self) -> None:
        while (queued := self._jobs.get()) is not None:
            job, discard = queued
            if self._error is not None:
                with contextlib.suppress(BaseException):
                    discard()
                continue
            try:
                results = job()
            except BaseException as e:  # handed to the training thread
                self._error = e
                continue
            with self._lock:
                self._finished.extend(results)

    def submit(self, job: Callable[[], list], discard: Callable[[], None]) -> None:
        """Queue ``job`` (returns a list of results), and ``discard``, which undoes what was prepared for it if a
        failed job before it means it will not run; blocks while ``depth`` jobs wait."""
        self._raise()
        self._jobs.put((job, discard))

    def done(self) -> list[Any]:
        """The results of the jobs finished since the last call."""
        self._raise()
        with self._lock:
            finished, self._finished = self._finished, []
        return finished

    def close(self) -> list[Any]:
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
