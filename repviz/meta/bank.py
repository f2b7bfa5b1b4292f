"""Representation vectors on disk and the cached distances between all of them.

A :class:`VectorBank` is one directory (an :class:`~repviz.store.Artifacts`) of unit-norm float32 vectors, one
``.npy`` file per representation, plus the squared chord distances between every pair of them::

    <id>.npy       one vector (length,) float32
    chord2.npy     (R, R) float64 squared chord distances between the vectors listed in index.json
    norms2.npy     (R,) float64 squared norms of the stored (float32-rounded) vectors
    index.json     {"rows": [id, ...], "length": m, "info": {id: {...}}}

The R×R distances come from one Gram matrix accumulated in float64 over column blocks of the vectors, read from
disk block by block (memory O(R · block), never the R × m matrix: 300 vectors of 2,000 probes are 2.4 GB).
Nearly identical vectors (1 - cos < ``near``) have their distance recomputed from the difference, because
2 - 2 cos cancels there. New vectors add rows and columns; the cached ones are never recomputed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg.blas import dsyrk

from ..progress import ProgressCallback, report
from ..store import VECTOR_BANK, Artifacts, NotFoundError, checksum
from . import _kernels

#: ``gram(vids, first_new, progress)``: the float64 dot products (R - first_new, R) of ``vids[first_new:]`` with
#: all of ``vids`` (the whole symmetric matrix when ``first_new`` is 0).
Gram = Callable[[list[str], int, ProgressCallback | None], np.ndarray]


def save_vector(artifacts: Artifacts, length: int, vid: str, vector: np.ndarray) -> None:
    """Store one float32 vector of ``length`` (atomically) as ``<vid>.npy`` in ``artifacts``."""
    vector = np.asarray(vector, dtype=np.float32)
    if vector.shape != (length,):
        raise ValueError(f"vector {vid!r} has shape {vector.shape}; this bank holds vectors of length {length}")
    artifacts.save_array(VECTOR_BANK.vector(vid), vector)


def check_vector(artifacts: Artifacts, vid: str, length: int) -> None:
    """Refuse a stored vector that is not float32 of ``length`` (a cache written by something else)."""
    shape, dtype = artifacts.header(VECTOR_BANK.vector(vid))
    if shape != (length,) or dtype != np.float32:
        raise ValueError(f"vector {vid!r} in {artifacts.location!r} holds {dtype} {shape}, not float32 "
                         f"({length},); delete the directory to rebuild the cache")


def read_columns(artifacts: Artifacts, vids: list[str], start: int, out: np.ndarray) -> None:
    """Fill ``out`` (len(vids), w) float32 with columns [start, start + w) of the vectors, by plain reads (a
    memory map would keep every page it touched resident)."""
    for row, vid in zip(out, vids):
        artifacts.read_into(VECTOR_BANK.vector(vid), row, start)


def column_step(length: int, n_rows: int, block_bytes: int) -> int:
    """Columns per block so that ``n_rows`` rows of a block fit ``block_bytes`` as float32 plus float64."""
    return min(length, max(1024, block_bytes // (12 * max(1, n_rows))))


def block_gram(artifacts: Artifacts, rows: list[str], cols: list[str] | None, length: int,
               block_bytes: int = 256 << 20) -> np.ndarray:
    """Dot products (len(rows), len(cols)) of two sets of stored vectors, accumulated in float64 over column
    blocks (``cols=None``: the rows with themselves, symmetric). One task of a Gram matrix computed in blocks
    (:mod:`repviz.meta.cluster`); memory O((rows + cols) · block)."""
    for vid in rows + (cols or []):
        check_vector(artifacts, vid, length)
    both = rows if cols is None else rows + cols
    step = column_step(length, len(both), block_bytes)
    buf32 = np.empty(len(both) * step, dtype=np.float32)
    buf64 = np.empty(buf32.size)
    G = np.zeros((len(rows), len(rows)), order="F") if cols is None else np.zeros((len(rows), len(cols)))
    for start in range(0, length, step):
        width = min(step, length - start)
        B32 = buf32[:len(both) * width].reshape(len(both), width)
        read_columns(artifacts, both, start, B32)
        B = buf64[:B32.size].reshape(B32.shape)
        B[...] = B32  # float64: nearly identical vectors cancel in float32
        if cols is None:
            G = dsyrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=0, overwrite_c=1)
        else:
            G += B[:len(rows)] @ B[len(rows):].T
    return mirror_upper(G) if cols is None else G


def mirror_upper(A: np.ndarray, *, average: bool = False, block: int = 512) -> np.ndarray:
    """``A`` made exactly symmetric in place, block by block (no n × n temporary): its upper triangle copied onto
    the lower one, or (``average``) both replaced by their mean. Returns ``A``."""
    n = len(A)
    for i in range(0, n, block):
        for j in range(i, n, block):
            upper, lower = A[i:i + block, j:j + block], A[j:j + block, i:i + block]
            if average:
                m = (upper + lower.T) / 2
            elif i == j:
                m = np.triu(upper) + np.triu(upper, 1).T
            else:
                m = upper.copy()
            upper[...] = m
            lower[...] = m.T
    return A


class VectorBank:
    """Unit-norm representation vectors in one directory, with their pairwise squared chord distances cached.

    Parameters
    ----------
    artifacts : Artifacts
        The directory (e.g. ``logdir.artifacts("vectors-dist-...")``, or a temporary one).
    length : int
        Length every vector has (a bank holds vectors of one transform over one probe set).
    block_bytes : int, default=256 MiB
        Memory for one column block of all vectors (float32 read buffer plus its float64 copy).
    near : float, default=1e-4
        Pairs with 1 - cos below this get their distance recomputed directly from the difference.
    """

    def __init__(self, artifacts: Artifacts, length: int, *, block_bytes: int = 256 << 20, near: float = 1e-4):
        self.artifacts = artifacts
        self.length = int(length)
        self.block_bytes = int(block_bytes)
        self.near = float(near)
        self._checked: set[str] = set()
        self._load_index()

    # index ----------------------------------------------------------------------------------------------------
    def _load_index(self) -> None:
        self.rows: list[str] = []
        self.info: dict[str, dict] = {}
        self.chord2 = np.zeros((0, 0))
        self.norms2 = np.zeros(0)
        try:
            index = self.artifacts.load_json(VECTOR_BANK.index)
            chord2 = self.artifacts.load_array(VECTOR_BANK.chord2, mmap=False)
            norms2 = self.artifacts.load_array(VECTOR_BANK.norms2, mmap=False)
        except NotFoundError:
            return
        rows = index.get("rows", [])
        # The index names the checksums of the matrices it belongs with: a cache torn between its files (two
        # writers at once, a kill between the renames) or of another length is dropped, not trusted.
        if (index.get("length") != self.length or chord2.shape != (len(rows),) * 2 or norms2.shape != (len(rows),)
                or index.get("crc32") != {"chord2": checksum(chord2), "norms2": checksum(norms2)}):
            return
        keep = [i for i, r in enumerate(rows) if r in self]
        self.rows = [rows[i] for i in keep]
        self.chord2 = chord2 if len(keep) == len(rows) else chord2[np.ix_(keep, keep)]
        self.norms2 = norms2[keep]
        self.info = {r: index.get("info", {}).get(r, {}) for r in self.rows}

    def _save_index(self) -> None:
        self.artifacts.save_array(VECTOR_BANK.chord2, self.chord2)
        self.artifacts.save_array(VECTOR_BANK.norms2, self.norms2)
        self.artifacts.save_json(VECTOR_BANK.index, {"rows": self.rows, "length": self.length, "info": self.info,
                                                "crc32": {"chord2": checksum(self.chord2),
                                                          "norms2": checksum(self.norms2)}})

    # vectors --------------------------------------------------------------------------------------------------
    def __contains__(self, vid: str) -> bool:
        """The vector ``vid`` is stored whole (a truncated file is rebuilt, not trusted)."""
        name = VECTOR_BANK.vector(vid)
        return self.artifacts.intact(name) and self.artifacts.header(name)[0] == (self.length,)

    def add(self, vid: str, vector: np.ndarray, info: dict | None = None) -> None:
        """Store one vector (atomically) under the id ``vid``; its distances are computed by :meth:`sq_chords`."""
        save_vector(self.artifacts, self.length, vid, vector)
        self.info[vid] = dict(info or {})

    def vector(self, vid: str) -> np.ndarray:
        """One stored vector, memory-mapped."""
        return self.artifacts.load_array(VECTOR_BANK.vector(vid))

    def _read_block(self, vids: list[str], start: int, out: np.ndarray) -> None:
        """Fill ``out`` (len(vids), w) float32 with columns [start, start + w) of the vectors."""
        for vid in vids:
            if vid not in self._checked:
                check_vector(self.artifacts, vid, self.length)
                self._checked.add(vid)
        read_columns(self.artifacts, vids, start, out)

    def _blocks(self, n_rows: int) -> range:
        return range(0, self.length, column_step(self.length, n_rows, self.block_bytes))

    # distances ------------------------------------------------------------------------------------------------
    def sq_chords(self, vids: list[str], progress: ProgressCallback | None = None,
                  gram: Gram | None = None) -> np.ndarray:
        """Squared chord distances ||v̂_a - v̂_b||² (R, R) float64 between the stored vectors ``vids``.

        Vectors not yet in the cached matrix add rows to it (time O(k · R_all · length) for k new vectors);
        the cache is saved before returning. When ``vids`` are all the bank's vectors in its order, the bank's own
        matrix is returned (no R × R copy): do not modify it while the bank is in use. ``gram`` computes the dot
        products of the new rows instead of this process (:func:`repviz.meta.tasks.gram_with`); it is called as
        ``self._gram`` is.
        """
        missing = [v for v in vids if v not in self]
        if missing:
            raise NotFoundError(f"{len(missing)} vector(s) are not in {self.artifacts.location!r}, e.g. "
                                f"{missing[0]!r}; add them first")
        cached = set(self.rows)
        new = [v for v in dict.fromkeys(vids) if v not in cached]
        if new:
            self._extend(new, progress, gram or self._gram)
        if vids == self.rows:
            return self.chord2
        pos = {v: i for i, v in enumerate(self.rows)}
        ix = np.array([pos[v] for v in vids], dtype=np.intp)
        return self.chord2[np.ix_(ix, ix)]

    def _extend(self, new: list[str], progress: ProgressCallback | None, gram: Gram) -> None:
        old = len(self.rows)
        everyone = self.rows + new
        G = gram(everyone, old, progress)  # (k, R_all): new rows against everyone
        norms2 = np.concatenate([self.norms2, np.diagonal(G[:, old:]).copy()])
        # in place, G -> cosines -> squared chords (the peak memory of a large map is a few R x R matrices)
        cos = G
        for i, row in enumerate(cos):
            row /= np.sqrt(norms2[old + i] * norms2)
        cos[np.arange(len(new)), old + np.arange(len(new))] = 1.0
        near = np.argwhere(cos > 1.0 - self.near)
        rows2 = cos
        rows2 *= -2.0
        rows2 += 2.0
        np.maximum(rows2, 0.0, out=rows2)
        I, J = near[:, 0] + old, near[:, 1]
        # each unordered pair once, as (i, j) with i > j; i is always a new row
        pairs = np.unique(np.stack([np.maximum(I, J), np.minimum(I, J)], axis=1)[I != J], axis=0)
        if len(pairs):
            values = self._direct(everyone, norms2, pairs[:, 0], pairs[:, 1], progress)
            rows2[pairs[:, 0] - old, pairs[:, 1]] = values
            both_new = pairs[:, 1] >= old
            rows2[pairs[both_new, 1] - old, pairs[both_new, 0]] = values[both_new]
        if old:
            chord2 = np.empty((len(everyone), len(everyone)))
            chord2[:old, :old] = self.chord2
            chord2[old:, :] = rows2
            chord2[:old, old:] = rows2[:, :old].T
            mirror_upper(chord2[old:, old:], average=True)  # exact symmetry
        else:  # every row is new: the rows are the matrix
            chord2 = mirror_upper(rows2, average=True)
        self.rows, self.norms2, self.chord2 = everyone, norms2, chord2
        self._save_index()

    def _gram(self, vids: list[str], first_new: int, progress: ProgressCallback | None) -> np.ndarray:
        """Dot products (float64) of vectors ``vids[first_new:]`` with all of ``vids``, in column blocks."""
        R, k = len(vids), len(vids) - first_new
        blocks = self._blocks(R)
        buf32 = np.empty(R * min(blocks.step, self.length), dtype=np.float32)
        # Accumulate in float64: nearly identical late snapshots cancel to 0 in float32.
        buf64 = np.empty(buf32.size if first_new == 0 else 0, dtype=np.float64)
        G = np.zeros((R, R), order="F") if first_new == 0 else np.zeros((k, R))
        for b, start in enumerate(blocks):
            width = min(blocks.step, self.length - start)
            B32 = buf32[:R * width].reshape(R, width)
            self._read_block(vids, start, B32)
            if first_new == 0:
                B = buf64[:R * width].reshape(R, width)
                B[...] = B32
                G = dsyrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=0, overwrite_c=1)  # upper triangle of B Bᵀ
            else:
                _kernels.cross_dots(B32[first_new:], B32, G)
            report(progress, "distances", b + 1, len(blocks))
        if first_new == 0:
            G = mirror_upper(G).T  # C order: symmetric, so its transpose is itself
        return G

    def _direct(self, vids: list[str], norms2: np.ndarray, I: np.ndarray, J: np.ndarray,
                progress: ProgressCallback | None) -> np.ndarray:
        """||v_i/|v_i| - v_j/|v_j|||² summed in float64 over column blocks, for the listed pairs only."""
        used = np.unique(np.concatenate([I, J]))
        li, lj = np.searchsorted(used, I), np.searchsorted(used, J)
        scale = 1.0 / np.sqrt(norms2[used])[:, None]
        out = np.zeros(len(I))
        names = [vids[int(g)] for g in used]
        blocks = self._blocks(len(used))
        buf = np.empty(len(used) * min(blocks.step, self.length), dtype=np.float32)
        for b, start in enumerate(blocks):
            width = min(blocks.step, self.length - start)
            B32 = buf[:len(used) * width].reshape(len(used), width)
            self._read_block(names, start, B32)
            B = B32 * scale
            for p in range(len(I)):
                d = B[li[p]] - B[lj[p]]
                out[p] += d @ d
            report(progress, "near pairs", b + 1, len(blocks))
        return out
