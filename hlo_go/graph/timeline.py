"""Where each node falls in time when every node has a device of its own.

The policy's node features (:mod:`hlo_go.graph.features`) describe a node and, through
message passing, its neighbourhood; they do not say which heavy nodes could run at the
same time as others, a fact of the whole graph that decides whether moving a node to
another device pays. :func:`timeline_features` gives it, from an as-soon-as-possible
(ASAP) and an as-late-as-possible (ALAP) schedule of the graph on unboundedly many
identical devices with free transfers, under one fixed, device-independent duration per
node (:func:`node_durations`). Columns, in order (:data:`TIMELINE_FEATURE_NAMES`):

====  ========================  ================================================================
  0   timeline_start            the node's ASAP start ÷ the schedule's length, in [0, 1]
  1   timeline_slack            (ALAP start − ASAP start) ÷ the schedule's length, in [0, 1]:
                                0 on a critical path
  2   timeline_concurrency      log(1 + the mean number of other nodes running while the node
                                runs, in the ASAP schedule)
====  ========================  ================================================================

Every column is a ratio of times, so the fixed durations' scale does not matter, only
their proportions. The schedules follow data and control edges. Cost: two passes over
the edges in topological order and one sort of the start and finish times.
"""

from __future__ import annotations

import numpy as np

from hlo_go.graph.opgraph import OpGraph

TIMELINE_FEATURE_NAMES: tuple[str, ...] = (
    "timeline_start",
    "timeline_slack",
    "timeline_concurrency",
)
NUM_TIMELINE_FEATURES = len(TIMELINE_FEATURE_NAMES)

# The fixed machine the durations assume: flops at 1e12 a second, memory traffic at 1e11
# bytes a second (ten flops a byte, between a CPU's and an accelerator's balance), and
# 1 µs a node.
FLOPS_PER_SECOND = 1e12
BYTES_PER_SECOND = 1e11
SECONDS_PER_NODE = 1e-6


def node_durations(graph: OpGraph) -> np.ndarray:
    """``float64[N]`` each node's duration on the fixed machine, seconds: the larger of
    its flops and its bytes read and written at the fixed rates, plus 1 µs (loops count
    their trip counts, :mod:`hlo_go.graph.costs`)."""
    flops = np.asarray(graph.flops, np.float64) / FLOPS_PER_SECOND
    traffic = (
        np.asarray(graph.bytes_read, np.float64) + np.asarray(graph.bytes_written, np.float64)
    ) / BYTES_PER_SECOND
    return np.maximum(flops, traffic) + SECONDS_PER_NODE


def _neighbours(graph: OpGraph) -> tuple[list[list[int]], list[list[int]]]:
    """Per node, its distinct predecessors and successors over data and control edges."""
    senders = np.concatenate([graph.senders, graph.control_senders]).astype(np.int64)
    receivers = np.concatenate([graph.receivers, graph.control_receivers]).astype(np.int64)
    preds: list[list[int]] = [[] for _ in range(graph.num_nodes)]
    succs: list[list[int]] = [[] for _ in range(graph.num_nodes)]
    for s, r in set(zip(senders.tolist(), receivers.tolist(), strict=True)):
        preds[r].append(s)
        succs[s].append(r)
    return preds, succs


def asap_alap(graph: OpGraph, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(float64[N] ASAP start, float64[N] ALAP start)`` of every node, with unboundedly
    many devices and free transfers.

    Args:
      graph: the graph.
      durations: ``float64[N]`` each node's duration.
    """
    preds, succs = _neighbours(graph)
    order = [int(v) for v in graph.topo_order]
    dur = durations.tolist()
    finish = [0.0] * graph.num_nodes
    start = [0.0] * graph.num_nodes
    for v in order:
        begin = max((finish[u] for u in preds[v]), default=0.0)
        start[v] = begin
        finish[v] = begin + dur[v]
    length = max(finish, default=0.0)
    late = [0.0] * graph.num_nodes
    for v in reversed(order):
        end = min((late[w] for w in succs[v]), default=length)
        late[v] = end - dur[v]
    return np.asarray(start), np.asarray(late)


def mean_concurrency(start: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """``float64[N]``: per node, the mean number of *other* nodes running while it runs,
    each node running over ``[start, start + duration)``."""
    finish = start + durations
    times = np.unique(np.concatenate([start, finish]))
    change = np.zeros(times.size)
    np.add.at(change, np.searchsorted(times, start), 1.0)
    np.add.at(change, np.searchsorted(times, finish), -1.0)
    running = np.cumsum(change)[:-1]  # nodes running over each [times[k], times[k+1])
    busy = np.concatenate([[0.0], np.cumsum(running * np.diff(times))])  # ∫ running dt
    overlap = busy[np.searchsorted(times, finish)] - busy[np.searchsorted(times, start)]
    return np.maximum(overlap - durations, 0.0) / durations


def timeline_features(graph: OpGraph) -> np.ndarray:
    """The ``float32[N, 3]`` matrix of :data:`TIMELINE_FEATURE_NAMES` (module docstring).

    Args:
      graph: the graph.

    Returns:
      One row per node id.
    """
    if graph.num_nodes == 0:
        return np.zeros((0, NUM_TIMELINE_FEATURES), np.float32)
    durations = node_durations(graph)
    start, late = asap_alap(graph, durations)
    length = float(np.max(start + durations))
    out = np.empty((graph.num_nodes, NUM_TIMELINE_FEATURES), np.float32)
    out[:, 0] = start / length
    out[:, 1] = np.clip((late - start) / length, 0.0, 1.0)
    out[:, 2] = np.log1p(mean_concurrency(start, durations))
    return out
