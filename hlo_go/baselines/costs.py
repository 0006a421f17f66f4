"""What the heuristics believe a node and a transfer cost: the simulator's own cost model.

Placement and scheduling heuristics (HEFT, m-ETF, m-SCT, critical path, METIS weights)
need a time per node and per edge before anything is fused or scheduled. They take the
simulator's numbers for an unfused node (:func:`hlo_go.sim.node_costs`, the same roofline
``launch + max(compute, bytes / (bandwidth · efficiency))`` the simulator charges a
one-node kernel) and a transfer's ``latency + bytes / bandwidth`` on the link between
two devices. Views and holders (tuples, bitcasts, parameters, constants) cost nothing,
as in the simulator.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlo_go.decisions import graph_cached
from hlo_go.graph import OpGraph
from hlo_go.sim import KERNEL, Cluster, node_costs, node_kinds


class TaskCosts(NamedTuple):
    """Per-node and per-transfer costs of a graph on a cluster (``D`` devices).

    Attributes:
      time: ``float64[D, N]`` seconds node ``i`` runs on device ``d`` unfused (0 for
        views and holders).
      mean_time: ``float64[N]`` ``time`` averaged over devices.
      free: ``bool[N]`` views and holders (no kernel, no time).
      latency: ``float64[D, D]`` link latency (0 on the diagonal).
      inv_bandwidth: ``float64[D, D]`` seconds per byte of each link (0 on the diagonal).
      mean_latency: the mean latency over links (0 for one device).
      mean_inv_bandwidth: the mean seconds per byte over links (0 for one device).
      capacity: ``float64[D]`` device memory in bytes.
    """

    time: np.ndarray
    mean_time: np.ndarray
    free: np.ndarray
    latency: np.ndarray
    inv_bandwidth: np.ndarray
    mean_latency: float
    mean_inv_bandwidth: float
    capacity: np.ndarray

    def mean_edge_time(self, edge_bytes: np.ndarray) -> np.ndarray:
        """Average time of moving values between two distinct devices.

        Args:
          edge_bytes: bytes per value.

        Returns:
          Seconds per value (0 for empty values).
        """
        return np.where(
            edge_bytes > 0, self.mean_latency + edge_bytes * self.mean_inv_bandwidth, 0.0
        )


def task_costs(graph: OpGraph, cluster: Cluster) -> TaskCosts:
    """The :class:`TaskCosts` of a graph on a cluster (cached per graph and cluster).

    Args:
      graph: an OpGraph.
      cluster: the cluster.

    Returns:
      The costs.
    """
    per_cluster: dict[Cluster, TaskCosts] = graph_cached(graph, "baselines.task_costs", _new_dict)
    if cluster not in per_cluster:
        per_cluster[cluster] = _build(graph, cluster)
    return per_cluster[cluster]


def _new_dict(graph: OpGraph) -> dict:
    return {}


def _build(graph: OpGraph, cluster: Cluster) -> TaskCosts:
    costs = node_costs(graph, cluster)
    kernel = node_kinds(graph) == KERNEL
    moved = graph.bytes_read + graph.bytes_written
    d = cluster.num_devices
    time = np.zeros((d, graph.num_nodes), dtype=np.float64)
    for dev in range(d):
        u = costs.spec[dev]
        memory = moved / (costs.bandwidth[dev] * costs.memory_efficiency[u])
        time[dev] = np.where(
            kernel, costs.launch_s[dev] + np.maximum(costs.compute_s[u], memory), 0.0
        )
    links = cluster.link_arrays
    off = ~np.eye(d, dtype=bool)
    latency = np.where(off, links.latency, 0.0)
    inv_bandwidth = np.where(off, 1.0 / links.bandwidth, 0.0)
    return TaskCosts(
        time=time,
        mean_time=time.mean(axis=0),
        free=~kernel,
        latency=latency,
        inv_bandwidth=inv_bandwidth,
        mean_latency=float(latency[off].mean()) if d > 1 else 0.0,
        mean_inv_bandwidth=float(inv_bandwidth[off].mean()) if d > 1 else 0.0,
        capacity=costs.capacity.copy(),
    )


def compute_weights(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """The load a placer balances.

    Args:
      graph: an OpGraph.
      cluster: the cluster.

    Returns:
      ``float64[N]`` each node's unfused kernel time, averaged over devices.
    """
    return task_costs(graph, cluster).mean_time


def data_edges(graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data edges.

    Args:
      graph: an OpGraph.

    Returns:
      ``(senders, receivers, bytes)`` as int64 arrays.
    """
    return (
        graph.senders.astype(np.int64),
        graph.receivers.astype(np.int64),
        graph.edge_bytes.astype(np.int64),
    )


def reverse_topo(graph: OpGraph) -> np.ndarray:
    """The graph's topological order, reversed.

    Args:
      graph: an OpGraph.

    Returns:
      ``int64[N]`` node ids.
    """
    return np.ascontiguousarray(graph.topo_order[::-1].astype(np.int64))
