"""Padding an ``OpGraph`` into the policy's input: a GraphsTuple in topological order.

The policy sees nodes by their position in the graph's ``topo_order`` (the order
its attention runs in), so the padded ``jraph.GraphsTuple`` from
:func:`hlo_go.graph.to_graphs_tuple` is relabeled on the host: position ``p`` holds
node ``topo_order[p]``, padding nodes come after every real node, and edges and
colocation groups name positions. Outputs are mapped back to node ids with the
same permutation (:meth:`PolicyInput.to_nodes`).

Bucket sizes (one compile per bucket): with ``q = buckets_per_octave`` and
``p`` the next power of two of ``n + 1`` (one padding node at least), the node
bucket is ``n + 1`` rounded up to a multiple of ``max(p / 2q, L)`` (``L`` the
segment length), so a bucket wastes at most ``1 / q`` of the graph on padding and
is a whole number of segments; edges are rounded alike (unit ``max(p_e / 2q, 1)``).
"""

from __future__ import annotations

from typing import NamedTuple

import jraph
import numpy as np

from hlo_go.gonet.config import PolicyConfig
from hlo_go.graph import (
    NUM_TIMELINE_FEATURES,
    Bucket,
    OpGraph,
    next_power_of_two,
    timeline_features,
    to_graphs_tuple,
)


def _round_up(count: int, per_octave: int, floor: int) -> int:
    power = next_power_of_two(count)
    unit = max(power // (2 * per_octave), floor, 1)
    return -(-count // unit) * unit


def policy_bucket(num_nodes: int, num_edges: int, config: PolicyConfig) -> Bucket:
    """The padded sizes the policy runs a graph at.

    Args:
      num_nodes: real nodes.
      num_edges: real data edges.
      config: supplies ``buckets_per_octave`` and ``segment_length``.

    Returns:
      ``Bucket(n_node, n_edge, 2)``: ``n_node > num_nodes`` a multiple of
      ``segment_length``; ``n_edge >= max(num_edges, 1)``.
    """
    n_node = _round_up(num_nodes + 1, config.buckets_per_octave, config.segment_length)
    n_edge = _round_up(max(num_edges, 1), config.buckets_per_octave, 1)
    return Bucket(n_node, n_edge, 2)


class PolicyInput(NamedTuple):
    """One graph, padded and relabeled into topological positions.

    Attributes:
      graphs: the ``jraph.GraphsTuple`` of :func:`~hlo_go.graph.to_graphs_tuple`
        (numpy arrays; ``nodes``: ``features``, ``opcode``, ``colocation_group``,
        ``mask``; ``edges``: ``log_bytes``, ``mask``) with node ``p`` the graph's
        ``topo_order[p]`` and ``senders``, ``receivers``, ``colocation_group`` naming
        positions. Edges are sorted by receiver, and ``edges["sender_order"]``
        (``int32[E]``) is the permutation that sorts them by sender. This is the
        only part that goes to the device.
      order: ``int32[n]``, the node id at each real position (``topo_order``).
      num_nodes: ``n``, the real nodes.
    """

    graphs: jraph.GraphsTuple
    order: np.ndarray
    num_nodes: int

    @property
    def bucket(self) -> tuple[int, int]:
        """(padded nodes, padded edges): the shapes a jitted policy compiles for."""
        return (
            int(self.graphs.nodes["features"].shape[0]),
            int(self.graphs.senders.shape[0]),
        )

    def to_nodes(self, values: np.ndarray) -> np.ndarray:
        """Per-position values (padded) → per-node values (``[n, ...]``, node-id order)."""
        values = np.asarray(values)
        out = np.empty((self.num_nodes, *values.shape[1:]), dtype=values.dtype)
        out[self.order] = values[: self.num_nodes]
        return out

    def to_positions(self, values: np.ndarray, fill: float | int = 0) -> np.ndarray:
        """Per-node values (``[n, ...]``) → per-position values padded with ``fill``."""
        values = np.asarray(values)
        size = self.bucket[0]
        out = np.full((size, *values.shape[1:]), fill, dtype=values.dtype)
        out[: self.num_nodes] = values[self.order]
        return out


def prepare_input(graph: OpGraph, config: PolicyConfig) -> PolicyInput:
    """Pads ``graph`` to its :func:`policy_bucket` and relabels it into topological positions.

    Args:
      graph: the graph to decide for.
      config: the policy's configuration (bucket rounding, segment length; with
        ``timeline_features``, :func:`hlo_go.graph.timeline_features` are appended to
        the feature columns, padding rows 0).

    Returns:
      The :class:`PolicyInput`.
    """
    n = graph.num_nodes
    padded = to_graphs_tuple(graph, bucket=policy_bucket(n, graph.num_edges, config))
    size = padded.nodes["features"].shape[0]
    order = np.asarray(graph.topo_order, dtype=np.int32)
    perm = np.concatenate([order, np.arange(n, size, dtype=np.int32)])
    position = np.empty(size, dtype=np.int32)
    position[perm] = np.arange(size, dtype=np.int32)
    nodes = padded.nodes
    features = nodes["features"]
    if config.timeline_features:
        extra = np.zeros((size, NUM_TIMELINE_FEATURES), np.float32)
        extra[:n] = timeline_features(graph)
        features = np.concatenate([features, extra], axis=1)
    senders = position[padded.senders]
    receivers = position[padded.receivers]
    # Edges sorted by receiver, with the order that sorts them by sender: jraph's
    # segment sums and maxes run faster over sorted segment ids.
    by_receiver = np.argsort(receivers, kind="stable")
    senders, receivers = senders[by_receiver], receivers[by_receiver]
    edges = {name: value[by_receiver] for name, value in padded.edges.items()}
    edges["sender_order"] = np.argsort(senders, kind="stable").astype(np.int32)
    relabeled = padded._replace(
        nodes={
            "features": features[perm],
            "opcode": nodes["opcode"][perm],
            "colocation_group": position[nodes["colocation_group"][perm]],
            "mask": nodes["mask"][perm],
        },
        edges=edges,
        senders=senders,
        receivers=receivers,
    )
    return PolicyInput(relabeled, order, n)
