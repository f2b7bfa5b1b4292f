"""Similarity values cached in the log directory, per measure and options, so only new pairs are computed.

One :class:`~repviz.store.Artifacts` directory per measure and options (``similarity-<measure>-<hash>`` under
``<logdir>/plugins/repviz-meta/``), holding every value computed so far between the representations it has met::

    values.npy    (R, R) float64, symmetric; NaN where the pair was never computed
    index.json    {"ids": [identity, ...], "keys": {identity: [run, layer, step]}, "params": {...},
                   "crc32": checksum of values.npy, "left_out": {identity: reason}}

``left_out`` names the representations found not comparable (constant over the probe, non-finite, unreadable) and
why, so a matrix with such holes is answered from the cache like any other.

A representation's identity is its key with the checksum and shape of its data (:attr:`Stored.identity`), so a
snapshot recorded again is a new representation. Every measure is symmetric, so one triangle serves A × B and
B × A. Writes are atomic; an index that does not name the checksum of the values beside it (two writers at once,
a kill between the renames) drops the cache rather than trusting it, and a save first merges what another writer
stored meanwhile.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..store import SIMILARITY_CACHE, Artifacts, LogDir, NotFoundError, checksum
from .registry import get_measure
from .sources import Stored


def measure_params(measure: str, kernel: str, debiased: bool, sigma: float, batch_size: int | None,
                   random_state: int, n_probe: int, owner: str = "similarity") -> dict:
    """The options that change a measure's values (its cache key), checked and resolved by the measure
    (:attr:`Measure.params <repviz.similarity.registry.Measure.params>`)."""
    options = dict(kernel=kernel, debiased=debiased, sigma=sigma, batch_size=batch_size, random_state=random_state)
    return get_measure(measure, owner).params(options, n_probe, owner)


def cache_artifacts(logdir: LogDir, measure: str, params: dict) -> Artifacts:
    """The cache directory of one measure and its options."""
    digest = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    return logdir.artifacts(f"similarity-{measure}-{digest}")


class SimilarityCache:
    """The values of one measure between every pair of representations computed so far (NaN: not yet)."""

    def __init__(self, artifacts: Artifacts, params: dict | None = None):
        self.artifacts = artifacts
        self.params = dict(params or {})
        self.ids: list[str] = []
        self.keys: dict[str, list] = {}
        self.values = np.zeros((0, 0))
        self.left_out: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        try:
            index = self.artifacts.load_json(SIMILARITY_CACHE.index)
            values = np.array(self.artifacts.load_array(SIMILARITY_CACHE.values, mmap=False), dtype=np.float64)
        except NotFoundError:
            return
        ids = index.get("ids", []) if isinstance(index, dict) else []
        if values.shape != (len(ids),) * 2 or index.get("crc32") != checksum(values):
            return  # torn or foreign: recompute rather than trust
        self.ids, self.values = list(ids), values
        self.keys = {i: index.get("keys", {}).get(i) for i in self.ids}
        left_out = index.get("left_out")
        self.left_out = {i: why for i, why in left_out.items() if isinstance(why, str)} \
            if isinstance(left_out, dict) else {}

    def _positions(self, ids: list[str]) -> np.ndarray:
        pos = {v: i for i, v in enumerate(self.ids)}
        return np.array([pos.get(i, -1) for i in ids], dtype=np.intp)

    def get(self, rows: list[Stored], cols: list[Stored]) -> np.ndarray:
        """The cached values (len(rows), len(cols)); NaN where not cached."""
        out = np.full((len(rows), len(cols)), np.nan)
        ri, ci = self._positions([r.identity for r in rows]), self._positions([c.identity for c in cols])
        ok_r, ok_c = ri >= 0, ci >= 0
        out[np.ix_(ok_r, ok_c)] = self.values[np.ix_(ri[ok_r], ci[ok_c])]
        return out

    def _grow(self, ids: list[str]) -> None:
        """Rows and columns of NaN for the ``ids`` not in the cache yet."""
        known = set(self.ids)
        new = [i for i in dict.fromkeys(ids) if i not in known]
        if new:
            grown = np.full((len(self.ids) + len(new),) * 2, np.nan)
            grown[:len(self.ids), :len(self.ids)] = self.values
            self.ids, self.values = self.ids + new, grown

    def put(self, rows: list[Stored], cols: list[Stored], block: np.ndarray) -> None:
        """Record ``block[i, j]`` as the value of (rows[i], cols[j]) and of (cols[j], rows[i])."""
        self._grow([r.identity for r in rows + cols])
        self.keys.update({r.identity: list(r.key) for r in rows + cols})
        ri, ci = self._positions([r.identity for r in rows]), self._positions([c.identity for c in cols])
        self.values[np.ix_(ri, ci)] = block
        self.values[np.ix_(ci, ri)] = np.asarray(block).T

    def save(self) -> None:
        """Write the cache atomically, first taking in the values another writer stored since it was read."""
        disk = SimilarityCache(self.artifacts)
        self.left_out = {**disk.left_out, **self.left_out}
        if disk.ids:
            self._grow(disk.ids)
            for i in disk.ids:
                self.keys.setdefault(i, disk.keys.get(i))
            at = self._positions(disk.ids)
            here = self.values[np.ix_(at, at)]
            self.values[np.ix_(at, at)] = np.where(np.isnan(here), disk.values, here)
        self.artifacts.save_array(SIMILARITY_CACHE.values, self.values)
        self.artifacts.save_json(SIMILARITY_CACHE.index, {"ids": self.ids, "keys": self.keys, "params": self.params,
                                                "crc32": checksum(self.values), "left_out": self.left_out})
