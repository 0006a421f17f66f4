"""Placement baselines: the device of every node.

* ``single-device``: everything on device 0.
* ``round-robin``: colocation groups dealt to devices in turn, in topological order.
* ``expert``: what a human expert does (the papers' "HP" placement): the model's
  layers (framework scopes from HLO ``op_name`` metadata, :mod:`hlo_go.baselines.scopes`)
  in forward order, cut into ``D`` contiguous stages balanced by compute; a layer's
  backward ops stay with its forward ones. Nodes without an op_name follow their
  neighbours (first consumer, else first producer).
* ``metis``: a ``D``-way partition by METIS (via ``pymetis``) of the undirected graph
  with colocation groups contracted: node weight = compute time (the simulator's
  unfused kernel time), edge weight = bytes carried. It balances compute and cuts
  few bytes, but ignores dependencies.
* ``heft``, ``m-etf``, ``m-sct``: list-scheduling placers
  (:mod:`hlo_go.baselines.list_scheduling`).

Every placer returns ``int32[N]`` with colocation groups on one device.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import numpy as np

from hlo_go.baselines.costs import compute_weights
from hlo_go.baselines.list_scheduling import list_schedule_placement
from hlo_go.baselines.scopes import scope_ids
from hlo_go.decisions import adjacency
from hlo_go.decisions._jit import jit
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster


def _colocated(graph: OpGraph, placement: np.ndarray) -> np.ndarray:
    """Each node on its colocation group's leader's device."""
    return np.ascontiguousarray(placement.astype(np.int32)[graph.colocation_group])


def single_device_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """Every node on device 0.

    Args:
      graph: an OpGraph.
      cluster: the cluster (unused).
      seed: unused.

    Returns:
      ``int32[N]`` zeros.
    """
    del cluster, seed
    return np.zeros(graph.num_nodes, dtype=np.int32)


def round_robin_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """Colocation groups dealt to devices 0, 1, ..., D-1, 0, ... in topological order.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      seed: unused.

    Returns:
      ``int32[N]``.
    """
    del seed
    group = graph.colocation_group
    leaders = graph.topo_order[group[graph.topo_order] == graph.topo_order]
    device = np.zeros(graph.num_nodes, dtype=np.int32)
    device[leaders] = np.arange(leaders.size) % cluster.num_devices
    return _colocated(graph, device)


def contiguous_split(weights: np.ndarray, parts: int) -> np.ndarray:
    """Cuts a sequence into ``parts`` contiguous chunks of about equal total weight.

    Args:
      weights: ``float[S]`` non-negative weight of each item, in sequence order.
      parts: the number of chunks.

    Returns:
      ``int32[S]`` non-decreasing chunk index per item: item ``i`` goes to the chunk its
      weight's midpoint falls in (equal counts when all weights are 0).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.size == 0:
        return np.zeros(0, dtype=np.int32)
    total = weights.sum()
    if total <= 0:
        weights = np.ones_like(weights)
        total = weights.sum()
    middle = np.cumsum(weights) - weights / 2
    return np.minimum((middle / total * parts).astype(np.int64), parts - 1).astype(np.int32)


@jit
def _fill_unplaced(
    device: np.ndarray,
    order: np.ndarray,
    dsucc_ptr: np.ndarray,
    dsucc: np.ndarray,
    dpred_ptr: np.ndarray,
    dpred: np.ndarray,
) -> None:
    """Gives every node with device -1 its first consumer's device (reverse topological
    pass), else its first producer's (forward pass), else 0."""
    n = order.shape[0]
    for i in range(n - 1, -1, -1):
        v = order[i]
        if device[v] < 0:
            for j in range(dsucc_ptr[v], dsucc_ptr[v + 1]):
                if device[dsucc[j]] >= 0:
                    device[v] = device[dsucc[j]]
                    break
    for i in range(n):
        v = order[i]
        if device[v] < 0:
            for j in range(dpred_ptr[v], dpred_ptr[v + 1]):
                if device[dpred[j]] >= 0:
                    device[v] = device[dpred[j]]
                    break
            if device[v] < 0:
                device[v] = 0


def expert_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """Layer-wise contiguous stages balanced by compute (the human expert's placement).

    Scopes come from ``graph.op_names`` (:func:`hlo_go.baselines.scopes.scope_ids`, at the
    shallowest depth with at least ``2 · D`` scopes, scopes with more than half a device's
    share of compute split into their sub-scopes), ordered by the topological position
    of their first node (forward order) and cut into ``D`` contiguous chunks of about equal
    compute (:func:`contiguous_split`). A graph without op_names is split the same way
    node by node in topological order.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      seed: unused.

    Returns:
      ``int32[N]``: every node of one scope on one device, and scopes in forward order on
      non-decreasing devices (up to colocation, which moves a node to its group's device).
    """
    del seed
    d = cluster.num_devices
    n = graph.num_nodes
    weights = compute_weights(graph, cluster)
    adj = adjacency(graph)
    ids, scopes = scope_ids(graph, min_scopes=2 * d, weights=weights, max_share=0.5 / d)
    device = np.full(n, -1, dtype=np.int64)
    if scopes:
        first = np.full(len(scopes), np.iinfo(np.int64).max, dtype=np.int64)
        named = ids >= 0
        np.minimum.at(first, ids[named], adj.position[named])
        order = np.argsort(first, kind="stable")
        scope_weight = np.bincount(ids[named], weights=weights[named], minlength=len(scopes))
        chunk = np.empty(len(scopes), dtype=np.int64)
        chunk[order] = contiguous_split(scope_weight[order], d)
        device[named] = chunk[ids[named]]
    else:
        topo = graph.topo_order
        device[topo] = contiguous_split(weights[topo], d)
    _fill_unplaced(
        device,
        graph.topo_order.astype(np.int64),
        adj.data_succ_ptr,
        adj.data_succ,
        adj.data_pred_ptr,
        adj.data_pred,
    )
    return _colocated(graph, device)


def metis_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """A ``D``-way METIS partition: compute-balanced, few bytes cut.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      seed: METIS's random seed.

    Returns:
      ``int32[N]``.
    """
    parts = metis_parts(graph, compute_weights(graph, cluster), cluster.num_devices, seed=seed)
    return _colocated(graph, parts)


def metis_parts(
    graph: OpGraph, node_weight: np.ndarray, parts: int, *, seed: int = 0
) -> np.ndarray:
    """METIS k-way partition of a graph with its colocation groups contracted.

    Args:
      graph: an OpGraph.
      node_weight: ``float[N]`` weight per node (summed per colocation group, scaled to
        integers keeping proportions; every vertex weighs at least 1).
      parts: the number of parts.
      seed: METIS's random seed.

    Returns:
      ``int64[N]`` part per node, members of a colocation group in one part.
    """
    import pymetis

    n = graph.num_nodes
    if parts <= 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    leaders, vertex = np.unique(graph.colocation_group, return_inverse=True)
    k = leaders.size
    if k <= parts:
        return vertex.astype(np.int64) % parts
    w = np.bincount(vertex, weights=np.asarray(node_weight, np.float64), minlength=k)
    total = w.sum()
    vweights = 1 + (np.floor(w / total * 1e8) if total > 0 else np.zeros(k))
    a = vertex[graph.senders].astype(np.int64)
    b = vertex[graph.receivers].astype(np.int64)
    keep = a != b
    a, b = a[keep], b[keep]
    eb = graph.edge_bytes[keep].astype(np.float64)
    # Undirected: both directions, parallel edges merged by summing their bytes.
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    key, inverse = np.unique(src * k + dst, return_inverse=True)
    summed = np.bincount(inverse, weights=np.concatenate([eb, eb]))
    src, dst = key // k, key % k
    scale = 5e8 / max(summed.sum(), 1.0)
    eweights = np.maximum(1, np.floor(summed * scale)).astype(np.int64)
    xadj = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=k), out=xadj[1:])
    options = pymetis.Options(seed=int(seed))
    with _quiet_c_output():
        _, membership = pymetis.part_graph(
            parts,
            pymetis.CSRAdjacency(adj_starts=xadj.tolist(), adjacent=dst.tolist()),
            vweights=vweights.astype(np.int64).tolist(),
            eweights=eweights.tolist(),
            options=options,
        )
    membership = np.asarray(membership, dtype=np.int64)
    if membership.shape != (k,) or membership.min() < 0 or membership.max() >= parts:
        raise RuntimeError(
            f"METIS returned an invalid {parts}-way partition of {graph.module_name!r} "
            f"({membership.shape[0]} labels for {k} vertices)"
        )
    return membership[vertex]


@contextlib.contextmanager
def _quiet_c_output() -> Iterator[None]:
    """Silences what C code writes to file descriptors 1 and 2 (METIS prints warnings
    such as "Cannot bisect a graph with 0 vertices" when a part would be empty)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def heft_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """HEFT (earliest finish time in upward-rank order), memory-aware.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      seed: unused (deterministic).

    Returns:
      ``int32[N]``.
    """
    del seed
    return list_schedule_placement(graph, cluster, "heft")[0]


def m_etf_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """Baechi's m-ETF (earliest start among all ready nodes), memory-aware.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      seed: unused (deterministic).

    Returns:
      ``int32[N]``.
    """
    del seed
    return list_schedule_placement(graph, cluster, "m-etf")[0]


def m_sct_placement(graph: OpGraph, cluster: Cluster, *, seed: int = 0) -> np.ndarray:
    """Baechi's m-SCT (m-ETF with favourite children kept on their parent's device).

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      seed: unused (deterministic).

    Returns:
      ``int32[N]``.
    """
    del seed
    return list_schedule_placement(graph, cluster, "m-sct")[0]


def cut_bytes(graph: OpGraph, placement: np.ndarray) -> int:
    """Bytes carried by data edges whose ends are on different devices.

    Args:
      graph: an OpGraph.
      placement: ``int[N]`` device per node.

    Returns:
      The total.
    """
    placement = np.asarray(placement)
    cut = placement[graph.senders] != placement[graph.receivers]
    return int(graph.edge_bytes[cut].sum())
