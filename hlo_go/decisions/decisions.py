"""The one action type shared by heuristics, search and the learned policy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph


class DecisionsError(ValueError, HloGoError):
    """Decisions that do not fit their graph or cluster (shape, dtype, range, colocation),
    or a decisions file that cannot be read."""


class Decisions(NamedTuple):
    """What an optimizer decides for every node of an :class:`~hlo_go.graph.OpGraph`.

    Attributes:
      placement: int32[N], the device each node runs on (0 .. num_devices-1).
      schedule_priority: float32[N]; when a device is free it runs the ready kernel
        with the highest priority (equal priorities: FIFO, i.e. topological order).
      fusion_priority: float32[N]; producer→consumer edges are considered for fusion
        in decreasing priority, and only edges with priority > 0 fuse (the exact rule
        is the fusion-grouping function of this package); 0 everywhere means no fusion.
    """

    placement: np.ndarray
    schedule_priority: np.ndarray
    fusion_priority: np.ndarray

    @staticmethod
    def default(graph: OpGraph) -> Decisions:
        """One device, FIFO order, no fusion."""
        n = graph.num_nodes
        return Decisions(
            np.zeros(n, np.int32),
            np.zeros(n, np.float32),
            np.zeros(n, np.float32),
        )

    def validate(self, graph: OpGraph, num_devices: int) -> Decisions:
        """Checks shapes, dtypes, ranges and colocation; returns self.

        Raises:
          DecisionsError: naming the first problem found.
        """
        n = graph.num_nodes
        for field in self._fields:
            value = getattr(self, field)
            if not isinstance(value, np.ndarray) or value.shape != (n,):
                shape = getattr(value, "shape", type(value).__name__)
                raise DecisionsError(
                    f"Decisions.{field} must be an array of shape ({n},), got {shape}"
                )
        if not np.issubdtype(self.placement.dtype, np.integer):
            raise DecisionsError(
                f"Decisions.placement must be integers, got {self.placement.dtype}"
            )
        if n and (self.placement.min() < 0 or self.placement.max() >= num_devices):
            bad = int(np.flatnonzero((self.placement < 0) | (self.placement >= num_devices))[0])
            raise DecisionsError(
                f"Decisions.placement[{bad}] = {self.placement[bad]} (node {graph.names[bad]!r}) "
                f"is not a device of a {num_devices}-device cluster"
            )
        for field in ("schedule_priority", "fusion_priority"):
            if not np.all(np.isfinite(getattr(self, field))):
                raise DecisionsError(f"Decisions.{field} has non-finite values")
        group = graph.colocation_group
        split = np.flatnonzero(self.placement != self.placement[group])
        if split.size:
            i = int(split[0])
            raise DecisionsError(
                f"node {graph.names[i]!r} must be on the same device as {graph.names[group[i]]!r} "
                f"(colocation), but placement puts them on {self.placement[i]} and "
                f"{self.placement[group[i]]}"
            )
        return self

    def fusion_groups(self, graph: OpGraph, **kwargs: object) -> np.ndarray:
        """The fusion grouping these decisions imply (:func:`hlo_go.decisions.fusion_groups`).

        Args:
          graph: the graph the decisions are for.
          **kwargs: ``output_dims`` and ``limits``, passed on.

        Returns:
          ``int32[N]``: each node's group, named by its smallest member.
        """
        from hlo_go.decisions.fusion import fusion_groups

        return fusion_groups(graph, self.placement, self.fusion_priority, **kwargs)  # type: ignore[arg-type]
