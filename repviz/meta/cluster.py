"""meta-SNE on a Dask cluster: representation vectors and Gram blocks as tasks, the R×R matrix on the client.

- Vectors: one task per representation whose vectors are not banked yet; the worker reads the activations from
  the log directory and writes each transform's vector into its bank (the same files and ids as
  :func:`repviz.meta.distances.add_vectors`).
- Distances: the rows of the new vectors against all vectors, cut into blocks of vectors; one task per pair of
  blocks reads both from the bank and returns their float64 dot products (:func:`repviz.meta.bank.block_gram`).
  The client assembles them and goes on exactly as the local bank does (cosines, near pairs recomputed from the
  difference, the cache index), so the incremental cache works the same.

The banks live in the log directory, which every worker sees (checked by :func:`repviz.distributed.
check_workers_see` before this runs). Blocks: about sqrt(2 · workers) per side, so the triangle of block pairs
gives every worker about one task's worth of equal work while each vector is read that many times (reading, not
arithmetic, is what a shared filesystem limits).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

import numpy as np

from ..distributed import in_completion_order, worker_threads
from ..progress import ProgressCallback, report
from ..store import Artifacts, LogDir
from .bank import Gram, VectorBank, block_gram, save_vector
from .distances import add_vectors, vector_id
from .sources import Representation
from .vectors import PairSample, representation_vectors


def _bare(artifacts: Artifacts) -> Artifacts:
    """The same directory without the headers this process has read (a task carries only the location)."""
    return Artifacts(artifacts.root, artifacts.fallback)


def _vectors_task(i: int, run, layer: str, step: int, label: str, targets: dict[str, tuple],
                  pairs) -> tuple[int, str | None]:
    """On a worker: bank the vectors of representation ``i``; (i, None) or (i, why it cannot be compared)."""
    with worker_threads():
        try:
            vectors = representation_vectors(run.activations(layer, step), list(targets), pairs, name=label)
        except ValueError as e:
            return i, str(e)
        for t, (artifacts, length, vid) in targets.items():
            save_vector(artifacts, length, vid, vectors[t])
    return i, None


def add_vectors_on(client, logdir: LogDir, reps: list[Representation], banks: Mapping[str, VectorBank],
                   pairs: PairSample | None, progress: ProgressCallback | None = None
                   ) -> tuple[list[Representation], list[tuple[Representation, str]]]:
    """:func:`repviz.meta.distances.add_vectors` with the log directory's representations computed as tasks on
    ``client`` (others, such as the input landmark, here); invalid ones are left out with the reason."""
    pairs_ref = None if pairs is None else client.scatter(pairs, broadcast=True)
    shipped = {t: _bare(bank.artifacts) for t, bank in banks.items()}
    futures, sent, here = [], [], []
    for i, rep in enumerate(reps):
        todo = {t: (shipped[t], bank.length, vector_id(rep, t)) for t, bank in banks.items()
                if vector_id(rep, t) not in bank}
        if todo and rep.key[0] in logdir.runs:
            run, layer, step = rep.key
            futures.append(client.submit(_vectors_task, i, logdir.run(run), layer, step, rep.label, todo, pairs_ref,
                                         pure=False, key=f"repviz-vectors-{uuid.uuid4().hex}"))
            sent.append(i)
        elif todo:
            here.append(i)
    done = len(reps) - len(sent) - len(here)
    report(progress, "vectors", done, len(reps))
    why: dict[int, str] = {}
    for i in here:
        _, skipped = add_vectors([reps[i]], banks, pairs, skip_invalid=True)
        if skipped:
            why[i] = skipped[0][1]
        done += 1
        report(progress, "vectors", done, len(reps))

    def lost(j: int) -> tuple[int, str]:
        return sent[j], "its Dask workers died every time its vector was computed (e.g. out of memory)"

    for i, reason in in_completion_order(client, futures, lost):
        if reason is not None:
            why[i] = reason
        done += 1
        report(progress, "vectors", done, len(reps))
    for i, rep in enumerate(reps):
        if i not in why:
            for t, bank in banks.items():
                bank.info.setdefault(vector_id(rep, t), {"key": list(rep.key), "checksum": rep.checksum})
    return [rep for i, rep in enumerate(reps) if i not in why], [(reps[i], why[i]) for i in sorted(why)]


def _gram_task(where: tuple[int, int], artifacts, rows: list[str], cols: list[str] | None, length: int,
               block_bytes: int) -> tuple[tuple[int, int], np.ndarray]:
    """On a worker: the dot products of one pair of vector blocks, tagged with where they go."""
    with worker_threads():
        return where, block_gram(artifacts, rows, cols, length, block_bytes)


def _blocks(start: int, stop: int, size: int) -> list[range]:
    return [range(s, min(s + size, stop)) for s in range(start, stop, size)]


def cluster_gram(client, bank: VectorBank) -> Gram:
    """A ``gram`` for :meth:`VectorBank.sq_chords` that computes the dot products as block tasks on ``client``."""

    def gram(vids: list[str], first_new: int, progress: ProgressCallback | None) -> np.ndarray:
        R = len(vids)
        workers = max(1, len(client.scheduler_info()["workers"]))
        size = max(1, math.ceil(R / math.ceil(math.sqrt(2 * workers))))
        old, new = _blocks(0, first_new, size), _blocks(first_new, R, size)
        artifacts = _bare(bank.artifacts)
        futures = []
        for p, P in enumerate(new):
            for Q in old + new[:p + 1]:
                cols = None if Q is P else [vids[i] for i in Q]
                futures.append(client.submit(_gram_task, (P.start, Q.start), artifacts, [vids[i] for i in P],
                                             cols, bank.length, bank.block_bytes, pure=False,
                                             key=f"repviz-gram-{uuid.uuid4().hex}"))
        G = np.zeros((R - first_new, R))

        def lost(j: int):
            raise RuntimeError("the Dask workers computing a block of the Gram matrix died every time it was tried "
                               "(e.g. out of memory); lower block_bytes or give the workers more memory")

        report(progress, "distances", 0, len(futures))
        for b, ((p0, q0), block) in enumerate(in_completion_order(client, futures, lost)):
            rows, cols = slice(p0 - first_new, p0 - first_new + block.shape[0]), slice(q0, q0 + block.shape[1])
            G[rows, cols] = block
            if q0 >= first_new and q0 != p0:  # a block of new against new: its mirror image too
                G[q0 - first_new:q0 - first_new + block.shape[1], p0:p0 + block.shape[0]] = block.T
            report(progress, "distances", b + 1, len(futures))
        return G

    return gram
