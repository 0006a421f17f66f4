"""Fusion baselines: the fusion priority of every node, given a placement.

Fusion priorities feed the one fusion rule of the project
(:func:`hlo_go.decisions.fusion_groups`): an edge fuses only if both ends have priority
> 0, edges are tried in decreasing ``min(priority[producer], priority[consumer])``, and a
merge happens only when legal (same device, fusible kinds, convex, reductions as
outputs, one output shape, at most ``max_nodes`` members). A baseline therefore chooses
*which nodes may fuse* and *in what order edges are tried*; legality is always enforced.

* ``no-fusion``: every priority 0.
* ``fuse-all-legal``: every node priority 1 (every legal merge, in edge order).
* ``xla-cpu-like``: rules modelled on XLA's CPU fusion pass (``CpuInstructionFusion``):

  - only *loop-fusible* kinds take part: elementwise ops, broadcast, reshape, bitcast,
    transpose, slice, dynamic-slice, dynamic-update-slice, concatenate, pad, reverse,
    iota, gather, copy, reduce (as a group's output only) and constants;
  - no non-scalar constants (XLA keeps them as buffers);
  - size threshold: a ``dot``/``convolution`` takes part only when it is small
    (:func:`hlo_go.decisions.large_matrix_nodes`: XLA:CPU's 16 KiB
    ``kFusionThresholdBytes``); big ones stay library calls;
  - never fuse an *expensive* producer (transcendental or division-like elementwise
    ops, XLA's ``IsExpensive``) into a consumer that *reuses its elements* (a broadcast
    that replicates elements, dot, convolution, reduce-window, gather, select-and-scatter;
    XLA's ``ReusesOperandElements``): fusing would recompute it per reuse. Priorities are
    per node, so the producer is taken out of fusion altogether (it is small: its
    consumer replicates it);
  - order: producers late in the graph first (XLA walks consumers from the root up):
    priority ``1 + position / N``.
* ``priority-fusion``: greedy by simulated benefit, like XLA GPU's ``PriorityFusion``:
  each producer→consumer edge's benefit is the simulator's time of the two kernels
  apart minus their time fused (launch saved, the intermediate's write and read
  saved; the fused-matrix efficiency for matrix ops), a node's priority is its best
  benefit (nodes with no beneficial edge stay out), then buckets of the lowest-priority
  nodes are taken out while the simulated step time improves.
"""

from __future__ import annotations

import numpy as np

from hlo_go.decisions import fusible_nodes
from hlo_go.decisions.legality import MATRIX_OPCODES, OUTPUT_ONLY, large_matrix_nodes
from hlo_go.graph import FEATURE_NAMES, OPCODE_VOCAB, OpGraph
from hlo_go.hlo import ELEMENTWISE_OPCODES
from hlo_go.sim import KERNEL, Cluster, node_costs, node_kinds

LOOP_FUSIBLE_OPCODES: frozenset[str] = ELEMENTWISE_OPCODES | frozenset({
    "broadcast", "reshape", "bitcast", "transpose", "slice", "dynamic-slice",
    "dynamic-update-slice", "concatenate", "pad", "reverse", "iota", "gather", "copy",
    "reduce", "constant", "bitcast-convert",
})  # fmt: skip
EXPENSIVE_OPCODES: frozenset[str] = frozenset({
    "atan2", "divide", "cbrt", "cosine", "erf", "exponential", "exponential-minus-one",
    "log", "log-plus-one", "logistic", "power", "remainder", "rsqrt", "sine", "sqrt", "tan",
    "tanh", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh",
})  # fmt: skip
REUSING_OPCODES: frozenset[str] = frozenset({
    "broadcast", "dot", "convolution", "reduce-window", "gather", "select-and-scatter",
})  # fmt: skip


def _table(names: frozenset[str]) -> np.ndarray:
    return np.array([name in names for name in OPCODE_VOCAB], dtype=bool)


_LOOP_FUSIBLE = _table(LOOP_FUSIBLE_OPCODES)
_EXPENSIVE = _table(EXPENSIVE_OPCODES)
_REUSING = _table(REUSING_OPCODES)
_MATRIX = _table(MATRIX_OPCODES)
_CONSTANT = _table(frozenset({"constant"}))
_BROADCAST = _table(frozenset({"broadcast"}))
_LOG_ELEMENTS = FEATURE_NAMES.index("log_elements")


def no_fusion_priority(
    graph: OpGraph, cluster: Cluster, placement: np.ndarray, schedule: np.ndarray
) -> np.ndarray:
    """``float32[N]`` zeros: nothing fuses.

    Args:
      graph: an OpGraph.
      cluster: unused.
      placement: unused.
      schedule: unused.

    Returns:
      Zeros.
    """
    del cluster, placement, schedule
    return np.zeros(graph.num_nodes, dtype=np.float32)


def fuse_all_legal_priority(
    graph: OpGraph, cluster: Cluster, placement: np.ndarray, schedule: np.ndarray
) -> np.ndarray:
    """``float32[N]`` ones on fusible nodes: every legal merge, in the graph's edge order.

    Args:
      graph: an OpGraph.
      cluster: unused.
      placement: unused.
      schedule: unused.

    Returns:
      1 for fusible nodes, 0 elsewhere.
    """
    del cluster, placement, schedule
    return fusible_nodes(graph).astype(np.float32)


def expensive_nodes(graph: OpGraph) -> np.ndarray:
    """XLA's expensive elementwise ops.

    Args:
      graph: an OpGraph.

    Returns:
      ``bool[N]``: :data:`EXPENSIVE_OPCODES` and any other non-matrix node that computes
      transcendentals.
    """
    return _EXPENSIVE[graph.opcode] | (graph.transcendentals > 0) & ~_MATRIX[graph.opcode]


def reuses_operand(graph: OpGraph) -> np.ndarray:
    """Which data edges' consumers read each producer element more than once.

    A broadcast reuses its operand when it makes more elements than it reads; dots,
    convolutions, reduce-windows, gathers and select-and-scatters always may.

    Args:
      graph: an OpGraph.

    Returns:
      ``bool[E]``, aligned with ``graph.senders``.
    """
    elements = graph.features[:, _LOG_ELEMENTS]
    src, dst = graph.senders, graph.receivers
    op = graph.opcode[dst]
    grows = elements[dst] > elements[src]
    return np.where(_BROADCAST[op], grows, _REUSING[op])


def xla_cpu_like_eligible(graph: OpGraph) -> np.ndarray:
    """The nodes ``xla-cpu-like`` lets take part in fusion (module docstring).

    Args:
      graph: an OpGraph.

    Returns:
      ``bool[N]``.
    """
    op = graph.opcode
    elements = np.expm1(graph.features[:, _LOG_ELEMENTS].astype(np.float64))
    eligible = fusible_nodes(graph) & _LOOP_FUSIBLE[op]
    eligible &= ~(_CONSTANT[op] & (elements > 1.5))  # no non-scalar constants
    small_matrix = _MATRIX[op] & ~large_matrix_nodes(graph)
    eligible |= fusible_nodes(graph) & small_matrix
    # Never fuse an expensive producer into a consumer that reuses its elements.
    bad = expensive_nodes(graph)[graph.senders] & reuses_operand(graph)
    eligible[graph.senders[bad]] = False
    return eligible


def xla_cpu_like_priority(
    graph: OpGraph, cluster: Cluster, placement: np.ndarray, schedule: np.ndarray
) -> np.ndarray:
    """XLA:CPU-like fusion (module docstring).

    Args:
      graph: an OpGraph.
      cluster: unused (the rules look at kinds and sizes, not at the device).
      placement: unused (fusion grouping keeps groups on one device).
      schedule: unused.

    Returns:
      ``float32[N]``: ``1 + position / N`` for eligible nodes, 0 elsewhere.
    """
    del cluster, placement, schedule
    n = graph.num_nodes
    position = np.empty(n, dtype=np.float64)
    position[graph.topo_order] = np.arange(n)
    eligible = xla_cpu_like_eligible(graph)
    return np.where(eligible, 1.0 + position / max(n, 1), 0.0).astype(np.float32)


def edge_fusion_benefit(graph: OpGraph, cluster: Cluster, placement: np.ndarray) -> np.ndarray:
    """``float64[E]`` seconds saved by fusing each data edge's two ends into one kernel.

    Time apart: both nodes' one-node kernel times on their device. Time fused: one launch
    plus the roofline of the pair with the fused (matrix) compute times (the producer's
    once per read of its elements: a reduce-window's ``OpGraph.operand_reads``) and the edge's
    bytes neither written (when the consumer is the producer's only user) nor read.
    Edges that cannot fuse (an end not fusible, different devices, a reduction read
    inside the group) get ``-inf``.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      placement: ``int[N]`` device per node.

    Returns:
      The benefits.
    """
    costs = node_costs(graph, cluster)
    placement = np.asarray(placement, dtype=np.int64)
    spec = costs.spec[placement]
    idx = np.arange(graph.num_nodes)
    launch = costs.launch_s[placement]
    bandwidth = costs.bandwidth[placement]
    compute = costs.compute_s[spec, idx]
    fused_compute = costs.fused_compute_s[spec, idx]
    meff = costs.memory_efficiency[spec, idx]
    fmeff = costs.fused_memory_efficiency[spec, idx]
    moved = graph.bytes_read + graph.bytes_written
    kernel = node_kinds(graph) == KERNEL
    alone = np.where(kernel, launch + np.maximum(compute, moved / (bandwidth * meff)), 0.0)
    s, r = graph.senders, graph.receivers
    out_degree = np.bincount(s, minlength=graph.num_nodes)
    edge = graph.edge_bytes.astype(np.float64)
    saved = np.minimum(edge, graph.bytes_read[r]) + np.where(
        out_degree[s] == 1, np.minimum(edge, graph.bytes_written[s]), 0.0
    )
    fused_bytes = np.maximum(moved[s] + moved[r] - saved, 0.0)
    fused = launch[r] + np.maximum(
        fused_compute[s] * graph.operand_reads[r] + fused_compute[r],
        fused_bytes / (bandwidth[r] * np.minimum(fmeff[s], fmeff[r])),
    )
    benefit = alone[s] + alone[r] - fused
    fusible = fusible_nodes(graph)
    legal = fusible[s] & fusible[r] & (placement[s] == placement[r]) & ~OUTPUT_ONLY[graph.opcode[s]]
    return np.where(legal, benefit, -np.inf)


def priority_fusion_priority(
    graph: OpGraph,
    cluster: Cluster,
    placement: np.ndarray,
    schedule: np.ndarray,
    *,
    budget: int | None = None,
    buckets: int = 8,
) -> np.ndarray:
    """Greedy fusion by simulated benefit (module docstring).

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      placement: ``int[N]`` device per node.
      schedule: ``float[N]`` schedule priorities (used by the refining simulations).
      budget: the most simulations the refinement may run (default ``buckets + 1``).
      buckets: how many quantile buckets of nodes the refinement tries to take out.

    Returns:
      ``float32[N]`` priorities: a node's best edge benefit in microseconds (> 0), or 0.
    """
    from hlo_go.decisions import Decisions
    from hlo_go.sim import simulate

    n = graph.num_nodes
    benefit = edge_fusion_benefit(graph, cluster, placement)
    best = np.full(n, -np.inf)
    np.maximum.at(best, graph.senders, benefit)
    np.maximum.at(best, graph.receivers, benefit)
    priority = np.where(best > 0, best * 1e6, 0.0).astype(np.float32)
    # Floor: positive benefits below float32 resolution must stay > 0.
    priority[(best > 0) & (priority <= 0)] = np.float32(1e-30)
    limit = buckets + 1 if budget is None else int(budget)
    if limit < 2 or not (priority > 0).any():
        return priority
    placement = np.asarray(placement, dtype=np.int32)
    schedule = np.asarray(schedule, dtype=np.float32)

    def step_time(p: np.ndarray) -> float:
        return simulate(graph, cluster, Decisions(placement, schedule, p), validate=False).step_time

    current = step_time(priority)
    runs = 1
    on = np.flatnonzero(priority > 0)
    order = on[np.argsort(priority[on], kind="stable")]
    for chunk in np.array_split(order, min(buckets, order.size)):
        if runs >= limit:
            break
        trial = priority.copy()
        trial[chunk] = 0.0
        t = step_time(trial)
        runs += 1
        if t < current:
            priority, current = trial, t
    return priority
