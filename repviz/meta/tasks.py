"""meta-SNE's work as executor tasks: representation vectors and Gram blocks, the R×R matrix assembled here.

- Vectors: one task per representation whose vectors are not banked yet; the worker reads the activations from
  the log directory (of a snapshot of a probe subset, the compared points) and writes each transform's vector
  into its bank (the same files and ids as :func:`repviz.meta.distances.add_vectors`).
- Distances: the rows of the new vectors against all vectors, cut into blocks of vectors; one task per pair of
  blocks reads both from the bank and returns their float64 dot products (:func:`repviz.meta.bank.block_gram`).
  This process assembles them and goes on exactly as the local bank does (cosines, near pairs recomputed from the
  difference, the cache index), so the incremental cache works the same.

The executor (:mod:`repviz.executors`; e.g. :class:`repviz.distributed.DaskExecutor`) is passed in; the banks
live in the log directory, which it has checked its workers see (:meth:`~repviz.executors.Executor.prepare`).
Blocks: about sqrt(2 · workers) per side, so the triangle of block pairs gives every worker about one task's worth
of equal work while each vector is read that many times (reading, not arithmetic, is what a shared filesystem
limits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..chains import verified_activations
from ..executors import Executor
from ..progress import ProgressCallback, report
from ..store import Artifacts, LogDir
from .bank import Gram, VectorBank, block_gram, save_vector
from .distances import add_vectors, vector_id
from .sources import Representation
from .vectors import PairSample, representation_vectors


def _bare(artifacts: Artifacts) -> Artifacts:
    """The same directory without the headers this process has read (a task carries only the location)."""
    return Artifacts(artifacts.root, artifacts.fallback)


def _vectors_task(task: tuple, advance, threads: int) -> tuple[int, str | None]:
    """Bank the vectors of one representation: (i, None), or (i, why it cannot be compared)."""
    i, run, layer, step, where, label, targets, pairs = task
    try:
        X = verified_activations(run, layer, step)
        vectors = representation_vectors(X if where is None else X[where], list(targets), pairs, name=label)
    except ValueError as e:
        return i, str(e)
    for t, (artifacts, length, vid) in targets.items():
        save_vector(artifacts, length, vid, vectors[t])
    return i, None


def _ignore(n: int) -> None:
    """Tasks here report no progress of their own: each finished task is one unit."""


def add_vectors_with(executor: Executor, logdir: LogDir, reps: list[Representation],
                     banks: Mapping[str, VectorBank], pairs: PairSample | None,
                     progress: ProgressCallback | None = None
                     ) -> tuple[list[Representation], list[tuple[Representation, str]]]:
    """:func:`repviz.meta.distances.add_vectors` with the log directory's representations computed as tasks by
    ``executor`` (others, such as the input landmark, here); invalid ones are left out with the reason."""
    shipped = {t: _bare(bank.artifacts) for t, bank in banks.items()}
    tasks, here = [], []
    for i, rep in enumerate(reps):
        todo = {t: (shipped[t], bank.length, vector_id(rep, t)) for t, bank in banks.items()
                if vector_id(rep, t) not in bank}
        if todo and rep.key[0] in logdir.runs:
            run, layer, step = rep.key
            tasks.append((i, logdir.run(run), layer, step, rep.where, rep.label, todo, pairs))
        elif todo:
            here.append(i)
    done = len(reps) - len(tasks) - len(here)
    report(progress, "vectors", done, len(reps))
    why: dict[int, str] = {}
    for i in here:
        _, skipped = add_vectors([reps[i]], banks, pairs, skip_invalid=True)
        if skipped:
            why[i] = skipped[0][1]
        done += 1
        report(progress, "vectors", done, len(reps))

    def lost(task: tuple, error: Exception) -> tuple[int, str]:
        return task[0], str(error)

    for i, reason in executor.map(_vectors_task, tasks, _ignore, lost):
        if reason is not None:
            why[i] = reason
        done += 1
        report(progress, "vectors", done, len(reps))
    for i, rep in enumerate(reps):
        if i not in why:
            for t, bank in banks.items():
                bank.info.setdefault(vector_id(rep, t), {"key": list(rep.key), "checksum": rep.checksum})
    return [rep for i, rep in enumerate(reps) if i not in why], [(reps[i], why[i]) for i in sorted(why)]


def _gram_task(task: tuple, advance, threads: int) -> tuple[tuple[int, int], np.ndarray]:
    """The dot products of one pair of vector blocks, tagged with where they go."""
    where, artifacts, rows, cols, length, block_bytes = task
    return where, block_gram(artifacts, rows, cols, length, block_bytes)


def _blocks(start: int, stop: int, size: int) -> list[range]:
    return [range(s, min(s + size, stop)) for s in range(start, stop, size)]


def gram_with(executor: Executor, bank: VectorBank) -> Gram:
    """A ``gram`` for :meth:`VectorBank.sq_chords` that computes the dot products as block tasks by
    ``executor``."""

    def gram(vids: list[str], first_new: int, progress: ProgressCallback | None) -> np.ndarray:
        R = len(vids)
        workers = max(1, executor.workers)
        size = max(1, math.ceil(R / math.ceil(math.sqrt(2 * workers))))
        old, new = _blocks(0, first_new, size), _blocks(first_new, R, size)
        artifacts = _bare(bank.artifacts)
        tasks = [((P.start, Q.start), artifacts, [vids[i] for i in P], None if Q is P else [vids[i] for i in Q],
                  bank.length, bank.block_bytes) for p, P in enumerate(new) for Q in old + new[:p + 1]]
        G = np.zeros((R - first_new, R))

        def lost(task: tuple, error: Exception):
            raise RuntimeError(f"a block of the Gram matrix was lost ({error}); lower block_bytes or give the "
                               f"workers more memory") from error

        report(progress, "distances", 0, len(tasks))
        for b, ((p0, q0), block) in enumerate(executor.map(_gram_task, tasks, _ignore, lost)):
            rows, cols = slice(p0 - first_new, p0 - first_new + block.shape[0]), slice(q0, q0 + block.shape[1])
            G[rows, cols] = block
            if q0 >= first_new and q0 != p0:  # a block of new against new: its mirror image too
                G[q0 - first_new:q0 - first_new + block.shape[1], p0:p0 + block.shape[0]] = block.T
            report(progress, "distances", b + 1, len(tasks))
        return G

    return gram
