"""Placement by list scheduling: HEFT, and Baechi's memory-aware m-ETF and m-SCT.

All three simulate a schedule while they place, with the simulator's unfused node times
and link times (:mod:`hlo_go.baselines.costs`), and are memory-aware: a node goes to a
device only if the bytes live there afterwards fit in its memory.

* ``heft`` (Topcuoglu, Hariri & Wu, 2002): nodes in decreasing upward rank (mean costs;
  a topological order); each goes to the device where it would *finish* earliest,
  counting the transfers of its inputs from other devices. This is HEFT without
  insertion into idle gaps: a device runs its nodes in the order they were placed.
* ``m-etf`` (Baechi, Jeon et al., SoCC 2020; after Hwang et al.'s ETF, 1989): repeatedly
  among *all ready* nodes and all devices, the pair that can *start* earliest is placed
  (ties: larger upward rank). Ready = every predecessor placed.
* ``m-sct`` (Baechi; after Hanen & Munier's small-communication-time heuristic): m-ETF
  plus *favourite children*: each node's heaviest output edge (by bytes) to a kernel,
  matched greedily so that a node has at most one favourite child and a child one
  favourite parent. When placing a parent makes its favourite child ready, the child is
  placed right after it on the same device (if it fits), saving that transfer.

Memory (liveness during the list schedule): a node's output occupies its device from
its placement until its last consumer is placed; a copy occupies each other device that
reads it for as long; parameters and constants, and the step's output, stay for the
whole step. A node that fits nowhere goes to the device with the most free memory (the
simulator then reports the OOM).

Parameters and constants that feed nothing else are not placed up front: each follows
its first consumer (a weight lives where it is used), unless a colocation group ties it
to other nodes. Colocation groups (:attr:`OpGraph.colocation_group`) go wholly where
their first placed member goes.

The loops are compiled with numba; ``m-etf`` scans the ready list on every step
(``O(N · ready · D)``), about a second on the corpus's 58k-node graph.
"""

from __future__ import annotations

import numpy as np

from hlo_go.baselines.costs import task_costs
from hlo_go.baselines.scheduling import upward_rank
from hlo_go.decisions import adjacency
from hlo_go.decisions._jit import jit
from hlo_go.graph import OpGraph
from hlo_go.sim import HOLDER, VIEW, Cluster, node_kinds

HEFT, ETF, SCT = 0, 1, 2
_MODES = {"heft": HEFT, "m-etf": ETF, "m-sct": SCT}


@jit
def _ready_time(
    v: int,
    d: int,
    dev: np.ndarray,
    finish: np.ndarray,
    dpred_ptr: np.ndarray,
    dpred: np.ndarray,
    dpred_bytes: np.ndarray,
    cpred_ptr: np.ndarray,
    cpred: np.ndarray,
    latency: np.ndarray,
    inv_bw: np.ndarray,
) -> float:
    """When every input of ``v`` can be on device ``d`` (unplaced deferred inputs: 0)."""
    ready = 0.0
    for j in range(dpred_ptr[v], dpred_ptr[v + 1]):
        p = dpred[j]
        a = dev[p]
        if a < 0:
            continue
        t = finish[p]
        if a != d:
            t += latency[a, d] + dpred_bytes[j] * inv_bw[a, d]
        if t > ready:
            ready = t
    for j in range(cpred_ptr[v], cpred_ptr[v + 1]):
        p = cpred[j]
        if dev[p] >= 0 and finish[p] > ready:
            ready = finish[p]
    return ready


@jit
def _need(
    v: int,
    d: int,
    dev: np.ndarray,
    mem: np.ndarray,
    copied: np.ndarray,
    dpred_ptr: np.ndarray,
    dpred: np.ndarray,
) -> float:
    """Bytes placing ``v`` on ``d`` adds there: its output, and inputs not yet on ``d``."""
    need = mem[v]
    for j in range(dpred_ptr[v], dpred_ptr[v + 1]):
        p = dpred[j]
        if dev[p] < 0 or (dev[p] != d and not copied[p, d]):
            need += mem[p]
    return need


@jit
def _commit(
    v: int,
    d: int,
    fin: float,
    dev: np.ndarray,
    finish: np.ndarray,
    free: np.ndarray,
    avail: np.ndarray,
    live: np.ndarray,
    mem: np.ndarray,
    permanent: np.ndarray,
    copied: np.ndarray,
    remaining: np.ndarray,
    group: np.ndarray,
    group_dev: np.ndarray,
    dpred_ptr: np.ndarray,
    dpred: np.ndarray,
) -> None:
    """Places ``v`` on ``d`` finishing at ``fin``, and updates memory."""
    num_devices = avail.shape[0]
    dev[v] = d
    finish[v] = fin
    if not free[v] and fin > avail[d]:
        avail[d] = fin
    if group_dev[group[v]] < 0:
        group_dev[group[v]] = d
    live[d] += mem[v]
    for j in range(dpred_ptr[v], dpred_ptr[v + 1]):
        p = dpred[j]
        if dev[p] < 0:  # a deferred parameter or constant follows its first consumer
            dev[p] = d
            finish[p] = 0.0
            live[d] += mem[p]
            if group_dev[group[p]] < 0:
                group_dev[group[p]] = d
        elif dev[p] != d and not copied[p, d]:
            copied[p, d] = True
            live[d] += mem[p]
        remaining[p] -= 1
        if remaining[p] == 0 and not permanent[p]:
            live[dev[p]] -= mem[p]
            for e in range(num_devices):
                if copied[p, e]:
                    live[e] -= mem[p]
    if remaining[v] == 0 and not permanent[v]:
        live[d] -= mem[v]


@jit
def _list_schedule(
    mode: int,
    order: np.ndarray,
    rank: np.ndarray,
    time: np.ndarray,
    free: np.ndarray,
    deferred: np.ndarray,
    mem: np.ndarray,
    permanent: np.ndarray,
    latency: np.ndarray,
    inv_bw: np.ndarray,
    capacity: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pred_ptr: np.ndarray,
    dpred_ptr: np.ndarray,
    dpred: np.ndarray,
    dpred_bytes: np.ndarray,
    cpred_ptr: np.ndarray,
    cpred: np.ndarray,
    dsucc_ptr: np.ndarray,
    group: np.ndarray,
    fav_child: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Places every node; returns (device, finish time) per node."""
    num_devices = time.shape[0]
    n = time.shape[1]
    dev = np.full(n, -1, np.int64)
    finish = np.zeros(n, np.float64)
    group_dev = np.full(n, -1, np.int64)
    avail = np.zeros(num_devices, np.float64)
    live = np.zeros(num_devices, np.float64)
    copied = np.zeros((n, num_devices), np.bool_)
    remaining = (dsucc_ptr[1:] - dsucc_ptr[:-1]).astype(np.int64)
    ready_at = np.zeros((n, num_devices), np.float64)

    if mode == HEFT:
        for i in range(n):
            v = order[i]
            if deferred[v]:
                continue
            forced = group_dev[group[v]]
            best_d = -1
            best_fin = np.inf
            best_start = 0.0
            most_free = -1
            most_room = -np.inf
            for d in range(num_devices):
                if forced >= 0 and d != forced:
                    continue
                ready = _ready_time(
                    v, d, dev, finish, dpred_ptr, dpred, dpred_bytes, cpred_ptr, cpred,
                    latency, inv_bw,
                )  # fmt: skip
                start = ready if free[v] else max(ready, avail[d])
                fin = start + time[d, v]
                room = capacity[d] - live[d] - _need(v, d, dev, mem, copied, dpred_ptr, dpred)
                if room > most_room:
                    most_room = room
                    most_free = d
                if (room >= 0.0 or forced >= 0) and fin < best_fin:
                    best_fin = fin
                    best_d = d
                    best_start = start
            if best_d < 0:  # fits nowhere: the device with the most room
                best_d = most_free
                ready = _ready_time(
                    v, best_d, dev, finish, dpred_ptr, dpred, dpred_bytes, cpred_ptr, cpred,
                    latency, inv_bw,
                )  # fmt: skip
                best_start = ready if free[v] else max(ready, avail[best_d])
                best_fin = best_start + time[best_d, v]
            _commit(
                v, best_d, best_fin, dev, finish, free, avail, live, mem, permanent, copied,
                remaining, group, group_dev, dpred_ptr, dpred,
            )  # fmt: skip
    else:
        indeg = (pred_ptr[1:] - pred_ptr[:-1]).astype(np.int64)
        ready_list = np.empty(n, np.int64)
        pos = np.full(n, -1, np.int64)
        nready = 0
        free_stack = np.empty(n, np.int64)
        nfree = 0
        for v in range(n):
            if deferred[v]:
                for j in range(succ_ptr[v], succ_ptr[v + 1]):
                    indeg[succ[j]] -= 1
        for v in range(n):
            if not deferred[v] and indeg[v] == 0:
                if free[v]:
                    free_stack[nfree] = v
                    nfree += 1
                else:
                    ready_list[nready] = v
                    pos[v] = nready
                    nready += 1
        placed = 0
        for v in range(n):
            if deferred[v]:
                placed += 1
        while placed < n:
            if nfree > 0:  # views and holders take no time: place them at once
                nfree -= 1
                v = free_stack[nfree]
                forced = group_dev[group[v]]
                best_d = forced
                best_t = np.inf
                for d in range(num_devices):
                    if forced >= 0 and d != forced:
                        continue
                    t = _ready_time(
                        v, d, dev, finish, dpred_ptr, dpred, dpred_bytes, cpred_ptr, cpred,
                        latency, inv_bw,
                    )  # fmt: skip
                    if t < best_t:
                        best_t = t
                        best_d = d
                chosen = v
                fin = best_t
            else:
                if nready == 0:  # cannot happen in a DAG
                    break
                best_d = -1
                chosen = -1
                best_start = np.inf
                best_rank = -np.inf
                fb_v = -1
                fb_d = -1
                fb_room = -np.inf
                for k in range(nready):
                    v = ready_list[k]
                    forced = group_dev[group[v]]
                    for d in range(num_devices):
                        if forced >= 0 and d != forced:
                            continue
                        start = max(avail[d], ready_at[v, d])
                        if start > best_start or (start == best_start and rank[v] <= best_rank):
                            continue
                        room = (
                            capacity[d] - live[d] - _need(v, d, dev, mem, copied, dpred_ptr, dpred)
                        )
                        if room < 0.0 and forced < 0:
                            if room > fb_room:
                                fb_room = room
                                fb_v = v
                                fb_d = d
                            continue
                        best_start = start
                        best_rank = rank[v]
                        chosen = v
                        best_d = d
                if chosen < 0:
                    chosen = fb_v
                    best_d = fb_d
                    best_start = max(avail[best_d], ready_at[chosen, best_d])
                fin = best_start + time[best_d, chosen]
                k = pos[chosen]
                nready -= 1
                last = ready_list[nready]
                ready_list[k] = last
                pos[last] = k
                pos[chosen] = -1
            # Place ``chosen`` (and, for m-SCT, a chain of favourite children).
            while True:
                _commit(
                    chosen, best_d, fin, dev, finish, free, avail, live, mem, permanent,
                    copied, remaining, group, group_dev, dpred_ptr, dpred,
                )  # fmt: skip
                placed += 1
                urgent = -1
                for j in range(succ_ptr[chosen], succ_ptr[chosen + 1]):
                    s = succ[j]
                    indeg[s] -= 1
                    if indeg[s] == 0:
                        for d in range(num_devices):
                            ready_at[s, d] = _ready_time(
                                s, d, dev, finish, dpred_ptr, dpred, dpred_bytes, cpred_ptr,
                                cpred, latency, inv_bw,
                            )  # fmt: skip
                        if free[s]:
                            free_stack[nfree] = s
                            nfree += 1
                        else:
                            ready_list[nready] = s
                            pos[s] = nready
                            nready += 1
                            if mode == SCT and s == fav_child[chosen]:
                                urgent = s
                if urgent < 0 or free[chosen]:
                    break
                d = best_d
                forced = group_dev[group[urgent]]
                if forced >= 0 and forced != d:
                    break
                room = capacity[d] - live[d] - _need(urgent, d, dev, mem, copied, dpred_ptr, dpred)
                if room < 0.0:
                    break
                start = max(avail[d], ready_at[urgent, d])
                fin = start + time[d, urgent]
                chosen = urgent
                k = pos[chosen]
                nready -= 1
                last = ready_list[nready]
                ready_list[k] = last
                pos[last] = k
                pos[chosen] = -1
    for v in range(n):
        if dev[v] < 0:  # a deferred node nothing used
            g = group_dev[group[v]]
            dev[v] = g if g >= 0 else 0
    return dev, finish


@jit
def _favourite_children(
    order: np.ndarray, senders: np.ndarray, receivers: np.ndarray, kernel: np.ndarray
) -> np.ndarray:
    """Greedy matching of edges (heaviest first, ``order``): child per parent, or -1."""
    n = kernel.shape[0]
    child = np.full(n, -1, np.int64)
    has_parent = np.zeros(n, np.bool_)
    for e in order:
        s = senders[e]
        r = receivers[e]
        if kernel[s] and kernel[r] and child[s] < 0 and not has_parent[r]:
            child[s] = r
            has_parent[r] = True
    return child


def favourite_children(graph: OpGraph) -> np.ndarray:
    """m-SCT's favourite child of every node (``int64[N]``, -1 for none).

    Args:
      graph: an OpGraph.

    Returns:
      For each node, the kernel it sends its heaviest matched edge to: edges are taken
      in decreasing bytes and kept when neither the parent has a favourite child nor the
      child a favourite parent yet (both ends kernels).
    """
    kernel = node_kinds(graph) == 0
    order = np.argsort(-graph.edge_bytes, kind="stable")
    return _favourite_children(
        order.astype(np.int64), graph.senders.astype(np.int64),
        graph.receivers.astype(np.int64), kernel,
    )  # fmt: skip


def list_schedule_placement(
    graph: OpGraph, cluster: Cluster, algorithm: str
) -> tuple[np.ndarray, np.ndarray]:
    """Places a graph by list scheduling.

    Args:
      graph: an OpGraph.
      cluster: the cluster (node times, link times, memory capacities).
      algorithm: ``"heft"``, ``"m-etf"`` or ``"m-sct"`` (module docstring).

    Returns:
      ``(placement int32[N], finish float64[N])``: the device of every node (colocation
      respected) and when the heuristic's own schedule finishes it.

    Raises:
      ValueError: unknown algorithm.
    """
    if algorithm not in _MODES:
        raise ValueError(f"unknown list-scheduling algorithm {algorithm!r}; known: {list(_MODES)}")
    n = graph.num_nodes
    if n == 0:
        return np.zeros(0, np.int32), np.zeros(0)
    costs = task_costs(graph, cluster)
    adj = adjacency(graph)
    kinds = node_kinds(graph)
    rank = upward_rank(graph, cluster)
    position = adj.position
    order = np.lexsort((position, -rank)).astype(np.int64)
    group = graph.colocation_group.astype(np.int64)
    group_size = np.bincount(group, minlength=n)
    no_preds = (adj.pred_ptr[1:] - adj.pred_ptr[:-1]) == 0
    deferred = (kinds == HOLDER) & no_preds & (group_size[group] == 1)
    mem = np.where(kinds == VIEW, 0, graph.bytes_out).astype(np.float64)
    permanent = kinds == HOLDER
    permanent[graph.root] = True
    fav = favourite_children(graph) if algorithm == "m-sct" else np.full(n, -1, np.int64)
    dev, finish = _list_schedule(
        _MODES[algorithm],
        order,
        rank,
        costs.time,
        costs.free,
        deferred,
        mem,
        permanent,
        costs.latency,
        costs.inv_bandwidth,
        costs.capacity,
        adj.succ_ptr,
        adj.succ.astype(np.int64),
        adj.pred_ptr,
        adj.data_pred_ptr,
        adj.data_pred.astype(np.int64),
        adj.data_pred_bytes.astype(np.float64),
        adj.control_pred_ptr,
        adj.control_pred.astype(np.int64),
        adj.data_succ_ptr,
        group,
        fav,
    )
    placement = dev.astype(np.int32)[graph.colocation_group]
    return placement, finish
