"""The per-artifact :class:`~repviz.store.Run` methods the TensorBoard plugin still calls, each one line onto
:meth:`Run.artifact <repviz.store.Run.artifact>`. New code uses the artifact objects (``run.embeddings``,
``run.artifact(NEIGHBOR_GRAPH)``); this class goes once the plugin reads through its service."""

from __future__ import annotations

from typing import Any

import numpy as np

from .artifacts import DENSITY, NEIGHBOR_GRAPH, PLACED


class RunCompat:
    """Old names of :class:`~repviz.store.Run`'s artifact methods (see the module docstring)."""

    embeddings: Any
    artifact: Any

    def embedding_keys(self) -> list[str]:
        return self.embeddings.method_keys()

    def embedding_method(self, method_key: str) -> dict:
        return self.embeddings.method(method_key)

    def embedding_steps(self, method_key: str, layer: str) -> list[int]:
        return self.embeddings.steps(method_key, layer)

    def embedding_info(self, method_key: str, layer: str, step: int) -> dict:
        return self.embeddings.info(method_key, layer, step)

    def read_embedding(self, method_key: str, layer: str, step: int) -> np.ndarray:
        return self.embeddings.read(method_key, layer, step)

    def placed_layouts(self) -> list[tuple[str, str]]:
        return self.artifact(PLACED).keys(depth=2)

    def has_placed(self, into: str, method_key: str, layer: str, step: int) -> bool:
        return self.artifact(PLACED).has(into, method_key, layer, step)

    def neighbor_graph(self, layer: str, step: int, variant: str) -> np.ndarray | None:
        return self.artifact(NEIGHBOR_GRAPH).cached(layer, step, variant)

    def write_neighbor_graph(self, layer: str, step: int, variant: str, indices: np.ndarray) -> None:
        self.artifact(NEIGHBOR_GRAPH).write(layer, step, variant, indices)

    def density(self, method_key: str, layer: str, step: int, variant: str) -> dict | None:
        return self.artifact(DENSITY).cached(method_key, layer, step, variant)

    def write_density(self, method_key: str, layer: str, step: int, variant: str, contours: dict) -> None:
        self.artifact(DENSITY).write(method_key, layer, step, variant, contours)
