"""Scheduling baselines: the schedule priority of every node, given a placement.

* ``fifo``: every priority 0. The simulator breaks ties in topological order, so each
  device runs its ready kernels first-in first-out (what XLA's default order amounts to
  in the simulator).
* ``critical-path``: each node's *upward rank* (HEFT's ``rank_u``; Topcuoglu et al.,
  2002), the length of the longest path from the node to the end of the step::

      rank(u) = time(u) + max over successors v of (comm(u, v) + rank(v))

  where ``time`` is the node's unfused kernel time (:mod:`hlo_go.baselines.costs`) and
  ``comm`` the transfer time of ``u``'s output when ``u`` and ``v`` are on different
  devices (0 on one device; control edges carry no data). A device that is free runs
  the ready kernel with the largest rank: the one on the longest remaining path.

:func:`upward_rank` is one pass over the nodes in reverse topological order, compiled
with numba (:mod:`hlo_go.decisions._jit`).
"""

from __future__ import annotations

import numpy as np

from hlo_go.baselines.costs import reverse_topo, task_costs
from hlo_go.decisions import adjacency
from hlo_go.decisions._jit import jit
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster


@jit
def _upward_rank(
    order_rev: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    dsucc_ptr: np.ndarray,
    dsucc: np.ndarray,
    time: np.ndarray,
    bytes_out: np.ndarray,
    placement: np.ndarray,
    latency: np.ndarray,
    inv_bandwidth: np.ndarray,
    mean_latency: float,
    mean_inv_bandwidth: float,
) -> np.ndarray:
    """rank[u] = time[u] + max over successors (comm + rank); placement[0] < 0: mean comm."""
    n = order_rev.shape[0]
    rank = np.zeros(n, np.float64)
    use_mean = n > 0 and placement[0] < 0
    for i in range(n):
        u = order_rev[i]
        best = 0.0
        for j in range(succ_ptr[u], succ_ptr[u + 1]):  # control and data: order only
            r = rank[succ[j]]
            if r > best:
                best = r
        size = bytes_out[u]
        if size > 0:
            for j in range(dsucc_ptr[u], dsucc_ptr[u + 1]):
                v = dsucc[j]
                if use_mean:
                    comm = mean_latency + size * mean_inv_bandwidth
                else:
                    a = placement[u]
                    b = placement[v]
                    comm = latency[a, b] + size * inv_bandwidth[a, b] if a != b else 0.0
                r = comm + rank[v]
                if r > best:
                    best = r
        rank[u] = time[u] + best
    return rank


def upward_rank(
    graph: OpGraph, cluster: Cluster, placement: np.ndarray | None = None
) -> np.ndarray:
    """Every node's upward rank (longest time from its start to the end of the step).

    Args:
      graph: an OpGraph.
      cluster: the cluster whose cost model gives node and transfer times.
      placement: ``int[N]`` device per node: a node runs for its time on its device and
        a transfer costs its link's time. None: HEFT's averages (mean time over devices,
        mean link time for every edge).

    Returns:
      ``float64[N]`` seconds.

    Raises:
      ValueError: ``placement`` has the wrong shape or names a device the cluster lacks.
    """
    costs = task_costs(graph, cluster)
    n = graph.num_nodes
    if placement is None:
        time = costs.mean_time
        place = np.full(max(n, 1), -1, dtype=np.int64)
    else:
        place = np.asarray(placement, dtype=np.int64)
        if place.shape != (n,):
            raise ValueError(f"placement must have shape ({n},), got {place.shape}")
        if n and (place.min() < 0 or place.max() >= cluster.num_devices):
            raise ValueError(
                f"placement names devices outside 0..{cluster.num_devices - 1} "
                f"(cluster {cluster.name!r})"
            )
        time = costs.time[place, np.arange(n)] if n else costs.mean_time
    adj = adjacency(graph)
    return _upward_rank(
        reverse_topo(graph),
        adj.succ_ptr,
        adj.succ,
        adj.data_succ_ptr,
        adj.data_succ,
        np.ascontiguousarray(time, dtype=np.float64),
        graph.bytes_out.astype(np.float64),
        place,
        costs.latency,
        costs.inv_bandwidth,
        costs.mean_latency,
        costs.mean_inv_bandwidth,
    )


def fifo_priority(graph: OpGraph, cluster: Cluster, placement: np.ndarray) -> np.ndarray:
    """FIFO scheduling: ``float32[N]`` zeros (ties run in topological order).

    Args:
      graph: an OpGraph.
      cluster: the cluster (unused: FIFO ignores costs).
      placement: ``int[N]`` device per node (unused).

    Returns:
      ``float32[N]`` zeros.
    """
    del cluster, placement
    return np.zeros(graph.num_nodes, dtype=np.float32)


def critical_path_priority(graph: OpGraph, cluster: Cluster, placement: np.ndarray) -> np.ndarray:
    """Critical-path scheduling: each node's upward rank under ``placement``.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      placement: ``int[N]`` device per node.

    Returns:
      ``float32[N]`` upward ranks in microseconds (float32 keeps ~7 digits, so ranks
      closer than that tie and run in topological order).
    """
    return (upward_rank(graph, cluster, placement) * 1e6).astype(np.float32)
