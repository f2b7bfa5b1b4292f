"""The saved form of a meta-SNE map, readable with numpy alone.

:class:`MetaResult` is what :class:`~repviz.meta.MetaSNE` returns, saves and the TensorBoard plugin reads back;
this module imports no numerical code (no numba, no ``repviz.manifold``), so reading a map stays cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..store import META_RESULT, DamagedFileError, LogDir, checksum
from .sources import Key


class Trajectory(NamedTuple):
    """The snapshots of one (run, layer) in step order: rows of the result, their steps and coordinates."""

    rows: np.ndarray
    steps: np.ndarray
    coords: np.ndarray


@dataclass
class MetaResult:
    """A meta-SNE map: row i is the representation ``keys[i]`` = (run, layer, step) at ``coords[i]``."""

    keys: list[Key]
    coords: np.ndarray
    distances: np.ndarray
    params: dict
    explained_variance: float | None = None
    robustness: float | None = None
    info: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.keys)

    def trajectories(self) -> dict[tuple[str, str], Trajectory]:
        """Snapshots of each (run, layer) ordered by step, for drawing training paths."""
        groups: dict[tuple[str, str], list[int]] = {}
        for i, (run, layer, _) in enumerate(self.keys):
            groups.setdefault((run, layer), []).append(i)
        out = {}
        for group, rows in groups.items():
            rows = np.array(sorted(rows, key=lambda i: self.keys[i][2]), dtype=np.intp)
            out[group] = Trajectory(rows, np.array([self.keys[i][2] for i in rows], dtype=np.int64),
                                    self.coords[rows])
        return out

    @staticmethod
    def default_name(params: dict) -> str:
        return f"meta-{params['transform']}-{params['metric']}-{params['embedding']}"

    def save(self, logdir: LogDir | str | os.PathLike, name: str | None = None) -> str:
        """Write the result into ``logdir`` (``plugins/repviz-meta/<name>/``); returns ``name``."""
        logdir = logdir if isinstance(logdir, LogDir) else LogDir(logdir)
        name = name or self.default_name(self.params)
        art = logdir.artifacts(name)
        coords = np.asarray(self.coords, dtype=np.float32)
        art.save_array(META_RESULT.coords, coords)
        art.save_array(META_RESULT.distances, np.asarray(self.distances, dtype=np.float64))
        # result.json last, naming the coordinates written first: a save killed in between leaves the old json
        # beside new coordinates, which :meth:`load` refuses.
        art.save_json(META_RESULT.result, {"keys": [list(k) for k in self.keys], "params": self.params,
                                      "explained_variance": self.explained_variance,
                                      "robustness": self.robustness, "info": self.info,
                                      "crc32": {"coords": checksum(coords)}})
        return name

    @classmethod
    def load(cls, logdir: LogDir | str | os.PathLike, name: str, *, mmap: bool = False) -> MetaResult:
        """Read a result written by :meth:`save`; nothing is unpickled.

        Arrays are loaded into memory, or memory-mapped with ``mmap=True`` (a reader that needs only the
        coordinates then never reads the R×R distances).

        A result whose files disagree (keys for another number of rows than the coordinates and distances hold,
        coordinates of another checksum than ``result.json`` names: a save interrupted), or whose ``result.json``
        is not as :meth:`save` writes it, raises
        :class:`~repviz.store.DamagedFileError` naming the file: it is never served or exported.
        """
        logdir = logdir if isinstance(logdir, LogDir) else LogDir(logdir)
        art = logdir.artifacts(name)
        meta = art.load_json(META_RESULT.result)
        keys = _keys(meta)
        if keys is None:
            raise DamagedFileError(art.path(META_RESULT.result), "is not a meta-SNE result (a JSON object of keys "
                                                            "[run, layer, step], params and scores); run repviz meta "
                                                            "again")
        coords = art.load_array(META_RESULT.coords, mmap=mmap)
        distances = art.load_array(META_RESULT.distances, mmap=mmap)
        for file, array, fits in ((META_RESULT.coords, coords, coords.ndim == 2 and coords.shape[1] >= 1),
                                  (META_RESULT.distances, distances, distances.shape[1:] == (len(keys),))):
            if not fits or len(array) != len(keys):
                raise DamagedFileError(art.path(META_RESULT.result), f"lists {len(keys)} keys, and {file} beside it "
                                                                f"holds shape {array.shape}; run repviz meta again")
        written = meta.get("crc32", {}).get("coords")  # none in a result saved before it was named
        if written is not None and written != checksum(coords):
            raise DamagedFileError(art.path(META_RESULT.result), f"was written with other coordinates than "
                                                            f"{META_RESULT.coords} beside it (a save interrupted); "
                                                            f"run repviz meta again")
        return cls(keys=keys, coords=coords, distances=distances, params=meta["params"],
                   explained_variance=meta.get("explained_variance"), robustness=meta.get("robustness"),
                   info=meta.get("info", {}))


def _keys(meta) -> list[Key] | None:
    """The (run, layer, step) keys of a parsed ``result.json``; None when it is not as :meth:`MetaResult.save`
    writes it."""
    if not (isinstance(meta, dict) and isinstance(meta.get("keys"), list) and isinstance(meta.get("params"), dict)
            and isinstance(meta.get("info", {}), dict)
            and isinstance(meta.get("crc32", {}), dict) and isinstance(meta.get("crc32", {}).get("coords", ""), str)
            and all(meta.get(k) is None or isinstance(meta[k], (int, float)) and not isinstance(meta[k], bool)
                    for k in ("explained_variance", "robustness"))):
        return None
    keys = meta["keys"]
    if not all(isinstance(k, list) and len(k) == 3 and isinstance(k[0], str) and isinstance(k[1], str)
               and isinstance(k[2], int) and not isinstance(k[2], bool) for k in keys):
        return None
    return [(r, lay, s) for r, lay, s in keys]
