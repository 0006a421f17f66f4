"""The one action type shared by heuristics, search and the learned policy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlo_go.decisions.adjacency import graph_cached
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph

# The fields of :class:`Decisions` that hold one value per node (what a file of decisions holds).
ARRAY_FIELDS: tuple[str, ...] = ("placement", "schedule_priority", "fusion_priority")


class GraphMismatchError(ValueError, HloGoError):
    """Decisions made for one graph, used with another (their fingerprints differ).

    Attributes:
      made_for: the fingerprint of the graph the decisions were made for.
      given: the fingerprint of the graph they were used with.
    """

    def __init__(self, message: str, *, made_for: str | None, given: str) -> None:
        super().__init__(message)
        self.made_for = made_for
        self.given = given


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
      graph_fingerprint: :attr:`~hlo_go.graph.OpGraph.fingerprint` of the graph the
        decisions were made for; None where not known (decisions built by hand). Set by
        :meth:`default`, :meth:`for_graph` and :meth:`validate`; a graph with another
        fingerprint refuses them (:class:`GraphMismatchError`).
    """

    placement: np.ndarray
    schedule_priority: np.ndarray
    fusion_priority: np.ndarray
    graph_fingerprint: str | None = None

    @staticmethod
    def default(graph: OpGraph) -> Decisions:
        """One device, FIFO order, no fusion."""
        n = graph.num_nodes
        return Decisions(
            np.zeros(n, np.int32),
            np.zeros(n, np.float32),
            np.zeros(n, np.float32),
            graph_fingerprint=graph_fingerprint(graph),
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-node arrays by field name (:data:`ARRAY_FIELDS`): what a file of
        decisions holds (``np.savez(path, **decisions.arrays())``)."""
        return {field: getattr(self, field) for field in ARRAY_FIELDS}

    def for_graph(self, graph: OpGraph) -> Decisions:
        """These decisions marked as made for ``graph`` (its fingerprint set).

        Raises:
          GraphMismatchError: they already carry another graph's fingerprint.
        """
        self.check_graph(graph)
        fingerprint = graph_fingerprint(graph)
        if self.graph_fingerprint == fingerprint:
            return self
        return self._replace(graph_fingerprint=fingerprint)

    def check_graph(self, graph: OpGraph, *, what: str = "the graph") -> None:
        """Raises if these decisions were made for another graph than ``graph``.

        Decisions without a fingerprint pass (only :meth:`validate`'s shape checks apply).

        Args:
          graph: the graph they are about to be used with.
          what: how the message names ``graph`` (e.g. ``"jit_f's pre-fusion graph"``).

        Raises:
          GraphMismatchError: naming both graphs by fingerprint and node count.
        """
        if self.graph_fingerprint is None:
            return
        fingerprint = graph_fingerprint(graph)
        if self.graph_fingerprint != fingerprint:
            raise GraphMismatchError(
                f"decisions made for graph {self.graph_fingerprint} "
                f"({np.shape(self.placement)[0]} nodes) do not fit {what} "
                f"{graph.module_name!r} (graph {fingerprint}, {graph.num_nodes} nodes)",
                made_for=self.graph_fingerprint,
                given=fingerprint,
            )

    def validate(self, graph: OpGraph, num_devices: int) -> Decisions:
        """Checks the graph they were made for, shapes, dtypes, ranges and colocation.

        Returns:
          The decisions, marked as made for ``graph`` (:meth:`for_graph`).

        Raises:
          GraphMismatchError: they carry another graph's fingerprint.
          DecisionsError: naming the first problem found (a ``ValueError``).
        """
        self.check_graph(graph)
        n = graph.num_nodes
        for field in ARRAY_FIELDS:
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
        return self.for_graph(graph)

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


def graph_fingerprint(graph: OpGraph) -> str:
    """``graph.fingerprint``, computed once per graph (for the last few graphs)."""
    return graph_cached(graph, "fingerprint", lambda g: g.fingerprint)
