"""Batching OpGraphs into one padded ``jraph.GraphsTuple`` of a fixed-size bucket.

A jitted function compiles once per distinct input shape. Padding every batch to
one of a few bucket sizes (by default the next power of two of the node and edge
counts) bounds the number of compiles: two batches in the same bucket share one
compiled program. Padding follows jraph's convention (``jraph.pad_with_graphs``):
padding nodes and edges belong to an extra padding graph after the real ones,
and padding edges connect the first padding node to itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jraph
import numpy as np

from hlo_go.graph.opgraph import OpGraph


class Bucket(NamedTuple):
    """Padded sizes of a batch.

    Attributes:
      n_node: total nodes after padding (at least the real nodes + 1).
      n_edge: total edges after padding (at least the real edges).
      n_graph: total graphs after padding (at least the real graphs + 1).
    """

    n_node: int
    n_edge: int
    n_graph: int


def next_power_of_two(x: int) -> int:
    """The smallest power of two ≥ ``x`` (1 for ``x`` ≤ 1)."""
    return 1 << max(0, int(x) - 1).bit_length()


def power_of_two_bucket(num_nodes: int, num_edges: int, num_graphs: int) -> Bucket:
    """The default bucket of a batch.

    Args:
      num_nodes: real nodes in the batch.
      num_edges: real edges in the batch.
      num_graphs: real graphs in the batch.

    Returns:
      ``Bucket(next_power_of_two(num_nodes + 1), next_power_of_two(num_edges),
      num_graphs + 1)``: room for at least one padding node, and one padding graph.
    """
    return Bucket(next_power_of_two(num_nodes + 1), next_power_of_two(num_edges), num_graphs + 1)


def _resolve_bucket(
    bucket: Bucket | tuple[int, ...] | None, num_nodes: int, num_edges: int, num_graphs: int
) -> Bucket:
    if bucket is None:
        return power_of_two_bucket(num_nodes, num_edges, num_graphs)
    sizes = tuple(int(x) for x in bucket)
    if len(sizes) == 2:
        sizes = (*sizes, num_graphs + 1)
    if len(sizes) != 3:
        raise ValueError(
            f"bucket must be (n_node, n_edge) or (n_node, n_edge, n_graph), got {bucket}"
        )
    result = Bucket(*sizes)
    if (
        result.n_node < num_nodes + 1
        or result.n_edge < num_edges
        or result.n_graph < num_graphs + 1
    ):
        raise ValueError(
            f"bucket {result} is too small for {num_graphs} graph(s) with {num_nodes} nodes and "
            f"{num_edges} edges: it needs n_node ≥ {num_nodes + 1}, n_edge ≥ {num_edges}, "
            f"n_graph ≥ {num_graphs + 1} (one padding node and one padding graph)"
        )
    return result


def to_graphs_tuple(
    graphs: OpGraph | Sequence[OpGraph],
    *,
    bucket: Bucket | tuple[int, ...] | None = None,
) -> jraph.GraphsTuple:
    """Batches OpGraphs into one ``jraph.GraphsTuple`` padded to a bucket's sizes.

    With ``G`` real graphs and bucket sizes ``(N, E, B)`` (all numpy arrays, on the
    host; a jitted consumer moves them to its device):

    * ``nodes``: a dict of
      - ``"features"``: ``float32[N, F]`` the graphs' ``OpGraph.features`` stacked, zeros
        for padding nodes;
      - ``"opcode"``: ``int32[N]`` opcode vocabulary ids, 0 for padding;
      - ``"colocation_group"``: ``int32[N]`` ``OpGraph.colocation_group`` shifted to batch
        node ids (a padding node's group is its own id);
      - ``"mask"``: ``bool[N]`` True for real nodes.
    * ``edges``: a dict of
      - ``"log_bytes"``: ``float32[E]`` log1p of ``OpGraph.edge_bytes``, 0 for padding;
      - ``"mask"``: ``bool[E]`` True for real edges.
    * ``senders``, ``receivers``: ``int32[E]`` batch node ids (each graph's ids shifted
      by the nodes before it); padding edges go from the first padding node to itself.
    * ``n_node``, ``n_edge``: ``int32[B]`` per-graph counts: the ``G`` real graphs, then
      one padding graph holding all padding nodes and edges, then empty graphs.
    * ``globals``: a dict with ``"mask"``: ``bool[B]`` True for real graphs.

    Args:
      graphs: one OpGraph or a sequence of them (same feature count).
      bucket: padded sizes: a :class:`Bucket`, ``(n_node, n_edge)`` (then
        ``n_graph = G + 1``) or ``(n_node, n_edge, n_graph)``; None (default) picks
        :func:`power_of_two_bucket`, the next powers of two.

    Returns:
      The padded ``jraph.GraphsTuple``.

    Raises:
      ValueError: no graphs, graphs with different feature counts, or a bucket
        smaller than the batch plus one padding node and one padding graph.
    """
    if isinstance(graphs, OpGraph):
        graphs = [graphs]
    graphs = list(graphs)
    if not graphs:
        raise ValueError("to_graphs_tuple needs at least one graph")
    widths = {g.features.shape[1] for g in graphs}
    if len(widths) != 1:
        raise ValueError(f"graphs have different feature counts: {sorted(widths)}")
    width = widths.pop()
    counts = np.array([g.num_nodes for g in graphs], dtype=np.int64)
    edge_counts = np.array([g.num_edges for g in graphs], dtype=np.int64)
    num_nodes, num_edges, num_graphs = int(counts.sum()), int(edge_counts.sum()), len(graphs)
    n_node, n_edge, n_graph = _resolve_bucket(bucket, num_nodes, num_edges, num_graphs)

    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    features = np.zeros((n_node, width), dtype=np.float32)
    opcode = np.zeros(n_node, dtype=np.int32)
    group = np.arange(n_node, dtype=np.int32)
    senders = np.full(n_edge, num_nodes, dtype=np.int32)
    receivers = np.full(n_edge, num_nodes, dtype=np.int32)
    log_bytes = np.zeros(n_edge, dtype=np.float32)
    node_at = edge_at = 0
    for g, offset in zip(graphs, offsets.tolist(), strict=True):
        nodes, edges = g.num_nodes, g.num_edges
        features[node_at : node_at + nodes] = g.features
        opcode[node_at : node_at + nodes] = g.opcode
        group[node_at : node_at + nodes] = g.colocation_group + offset
        senders[edge_at : edge_at + edges] = g.senders + offset
        receivers[edge_at : edge_at + edges] = g.receivers + offset
        log_bytes[edge_at : edge_at + edges] = np.log1p(g.edge_bytes.astype(np.float64))
        node_at += nodes
        edge_at += edges

    node_mask = np.zeros(n_node, dtype=bool)
    node_mask[:num_nodes] = True
    edge_mask = np.zeros(n_edge, dtype=bool)
    edge_mask[:num_edges] = True
    graph_mask = np.zeros(n_graph, dtype=bool)
    graph_mask[:num_graphs] = True
    n_node_array = np.zeros(n_graph, dtype=np.int32)
    n_node_array[:num_graphs] = counts
    n_node_array[num_graphs] = n_node - num_nodes
    n_edge_array = np.zeros(n_graph, dtype=np.int32)
    n_edge_array[:num_graphs] = edge_counts
    n_edge_array[num_graphs] = n_edge - num_edges
    return jraph.GraphsTuple(
        nodes={
            "features": features,
            "opcode": opcode,
            "colocation_group": group,
            "mask": node_mask,
        },
        edges={"log_bytes": log_bytes, "mask": edge_mask},
        senders=senders,
        receivers=receivers,
        n_node=n_node_array,
        n_edge=n_edge_array,
        globals={"mask": graph_mask},
    )
