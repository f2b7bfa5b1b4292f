"""The saved form of a meta-SNE map, readable with numpy alone.

:class:`MetaResult` is what :class:`~repviz.meta.MetaSNE` returns, saves and the TensorBoard plugin reads back;
this module imports no numerical code (no numba, no ``repviz.manifold``), so reading a map stays cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..store import LogDir
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
        art.save_array("coords.npy", np.asarray(self.coords, dtype=np.float32))
        art.save_array("distances.npy", np.asarray(self.distances, dtype=np.float64))
        # result.json last: a result whose json exists has its arrays.
        art.save_json("result.json", {"keys": [list(k) for k in self.keys], "params": self.params,
                                      "explained_variance": self.explained_variance,
                                      "robustness": self.robustness, "info": self.info})
        return name

    @classmethod
    def load(cls, logdir: LogDir | str | os.PathLike, name: str, *, mmap: bool = False) -> MetaResult:
        """Read a result written by :meth:`save`; nothing is unpickled.

        Arrays are loaded into memory, or memory-mapped with ``mmap=True`` (a reader that needs only the
        coordinates then never reads the R×R distances).
        """
        logdir = logdir if isinstance(logdir, LogDir) else LogDir(logdir)
        art = logdir.artifacts(name)
        meta = art.load_json("result.json")
        return cls(keys=[(str(r), str(lay), int(s)) for r, lay, s in meta["keys"]],
                   coords=art.load_array("coords.npy", mmap=mmap),
                   distances=art.load_array("distances.npy", mmap=mmap), params=meta["params"],
                   explained_variance=meta.get("explained_variance"), robustness=meta.get("robustness"),
                   info=meta.get("info", {}))
