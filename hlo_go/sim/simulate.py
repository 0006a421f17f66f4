"""``simulate``: the step time, memory and timeline of decisions on a cluster.

The semantics are DESIGN.md's, shared with the XLA lowering:

* **Fusion.** Nodes are grouped by :func:`hlo_go.decisions.fusion_groups` (priority
  order, legality, no cycles, size limit). A group runs as one kernel: one launch, its
  intermediates never touch memory (:mod:`hlo_go.sim.cost_model` gives its time).
  Cheap values other fused kernels read (broadcasts, cheap elementwise ops over the
  group's inputs: :data:`~hlo_go.decisions.legality.REGENERATED`) are recomputed by
  each of them, as the lowering does (:func:`hlo_go.xla.fusion.regenerate_shared`):
  such a value is written only for the step's output and unfused readers, and a fused
  reader reads what the value was computed from instead.
  A fused kernel computes a member at every read of it: a value a ``reduce-window`` of
  the kernel reads is computed ``OpGraph.operand_reads`` times per element (about 9 for
  a 3×3 window), compounding along fused windows, as XLA's loop emitter does.
* **Scheduling.** Each device keeps a ready queue; whenever the device is free it
  starts the ready kernel with the highest schedule priority (a group's priority is
  the largest of its members'); ties go to the kernel whose last member comes first
  in topological order (FIFO). Unfused views (tuple, get-tuple-element, bitcast, ...)
  and holders (parameter, constant) are free: they finish the moment they are ready,
  as instructions without priority do in :func:`hlo_go.xla.list_schedule`.
* **Placement.** A kernel runs on its nodes' device. A value used on another device is
  sent once per (value, destination device) when its kernel finishes; the transfer
  takes ``latency + bytes / bandwidth`` of that link and overlaps with compute. Link
  contention: a channel (a link, or the physical path several links share, see
  :class:`~hlo_go.sim.Link`) carries one transfer at a time, in request order.
  Control dependencies across devices cost nothing but order.
* **Memory.** A buffer lives on a device from its producer's start to its last
  consumer's end there (transfers out of it and consumers of views of it count as
  consumers); a transferred copy lives on the destination from the transfer's start to
  its last consumer's end there; parameters, constants and the step's output live
  for the whole step. A device whose peak exceeds its capacity is out of memory.

The sequential parts run compiled by numba when it is installed
(:mod:`hlo_go.decisions._jit`); preparing a graph for a cluster (adjacency, per-node
costs) is cached, so scoring many decisions on one graph pays it once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from hlo_go.decisions import (
    Adjacency,
    Decisions,
    FusionLimits,
    adjacency,
    fusion_groups,
    unfuse_large_matrices,
)
from hlo_go.decisions.fusion import DEFAULT_LIMITS
from hlo_go.decisions.legality import MAX_REGENERATED_CHAIN, REGENERATED
from hlo_go.graph import OpGraph
from hlo_go.sim import _engine
from hlo_go.sim.cluster import Cluster, LinkArrays
from hlo_go.sim.cost_model import NodeCosts, node_costs, node_kinds
from hlo_go.sim.result import SimResult, Timeline


class Prepared(NamedTuple):
    """What a graph costs on a cluster, independent of the decisions (cached).

    Attributes:
      graph: the graph.
      cluster: the cluster.
      adjacency: the graph's CSR adjacency.
      costs: per-node costs on the cluster's devices.
      kind: ``int8[N]`` node kinds (:func:`hlo_go.sim.node_kinds`).
      topo_order: ``int64[N]`` the graph's topological order.
      bytes_read: ``float64[N]``.
      bytes_written: ``float64[N]``.
      bytes_out: ``int64[N]``.
      links: the cluster's link matrices.
      launches: ``float64[N]`` kernels each node launches (``OpGraph.kernel_launches``, at
        least 1): a ``while`` pays the launch overhead for every kernel of every trip.
      regenerated: ``bool[N]`` nodes of opcodes a fusion recomputes rather than reads
        (:data:`hlo_go.decisions.legality.REGENERATED`).
      window_reads: ``float64[N]`` reads of each operand element (``OpGraph.operand_reads``):
        in a fused kernel, a member a reduce-window reads is computed once per read.
      kernel_models: per row of ``costs`` (device specification), the learned kernel
        cost model pricing its kernels (:mod:`hlo_go.sim.learned`), or None for the
        roofline; ``()`` when no device has one.
      fuses_large_matrices: ``bool[D]`` whether each device lets a large dot or
        convolution fuse (``Device.fuses_large_matrices``).
    """

    graph: OpGraph
    cluster: Cluster
    adjacency: Adjacency
    costs: NodeCosts
    kind: np.ndarray
    topo_order: np.ndarray
    bytes_read: np.ndarray
    bytes_written: np.ndarray
    bytes_out: np.ndarray
    links: LinkArrays
    launches: np.ndarray
    regenerated: np.ndarray
    window_reads: np.ndarray
    kernel_models: tuple
    fuses_large_matrices: np.ndarray


_CACHE: OrderedDict[tuple[int, Cluster], Prepared] = OrderedDict()
_CACHE_SIZE = 8


def prepare(graph: OpGraph, cluster: Cluster) -> Prepared:
    """The decision-independent arrays of a graph on a cluster, cached for the last few pairs.

    Args:
      graph: an OpGraph.
      cluster: a cluster.

    Returns:
      The :class:`Prepared` arrays.
    """
    key = (id(graph), cluster)
    hit = _CACHE.get(key)
    if hit is not None and hit.graph is graph:
        _CACHE.move_to_end(key)
        return hit
    costs = node_costs(graph, cluster)
    value = Prepared(
        graph,
        cluster,
        adjacency(graph),
        costs,
        node_kinds(graph),
        graph.topo_order.astype(np.int64),
        graph.bytes_read.astype(np.float64),
        graph.bytes_written.astype(np.float64),
        graph.bytes_out.astype(np.int64),
        cluster.link_arrays,
        np.maximum(graph.kernel_launches, 1).astype(np.float64),
        REGENERATED[graph.opcode],
        graph.operand_reads.astype(np.float64),
        _kernel_models(cluster, costs.spec),
        np.array([d.fuses_large_matrices for d in cluster.devices], dtype=bool),
    )
    _CACHE[key] = value
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def _kernel_models(cluster: Cluster, spec: np.ndarray) -> tuple:
    """The learned kernel model of each device specification (row of ``spec``), or ``()``
    when no device names one."""
    rows: dict[int, str] = {}
    for device, row in zip(cluster.devices, spec.tolist(), strict=True):
        rows.setdefault(row, device.kernel_model)
    if not any(rows.values()):
        return ()
    from hlo_go.sim.learned.predict import load_kernel_model

    return tuple(load_kernel_model(rows[r]) if rows[r] else None for r in range(len(rows)))


def _learned(
    prepared: Prepared,
    mptr: np.ndarray,
    members: np.ndarray,
    kdev: np.ndarray,
    kfree: np.ndarray,
    kdur: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Kernel durations with each device's learned model where it has one, and how many
    kernels it could not price (left at their roofline duration)."""
    from hlo_go.sim.learned.predict import kernel_subset, learned_durations

    out, fallback = kdur.copy(), 0
    if kdur.size == 0:
        return out, 0
    row = prepared.costs.spec[kdev]
    launches = np.maximum.reduceat(prepared.launches[members], mptr[:-1])
    for u, model in enumerate(prepared.kernel_models):
        if model is None:
            continue
        kernels = np.flatnonzero((row == u) & ~kfree)
        if kernels.size == 0:
            continue
        ptr, sub = kernel_subset(mptr, members, kernels)
        out[kernels], count = learned_durations(
            prepared.graph, model, ptr, sub, kdur[kernels], launches[kernels]
        )
        fallback += count
    return out, fallback


def simulate(
    graph: OpGraph,
    cluster: Cluster,
    decisions: Decisions,
    *,
    limits: FusionLimits = DEFAULT_LIMITS,
    output_dims: np.ndarray | None = None,
    group: np.ndarray | None = None,
    validate: bool = True,
) -> SimResult:
    """Simulates one step of a graph on a cluster under the given decisions.

    Args:
      graph: an OpGraph.
      cluster: the cluster (:func:`hlo_go.sim.get_cluster`, :func:`hlo_go.sim.load_cluster`).
      decisions: placement, schedule priority and fusion priority per node.
      limits: fusion grouping limits.
      output_dims: exact output-dimension keys for fusion legality
        (:func:`hlo_go.decisions.module_output_dims`); default the graph-only proxy.
      group: a fusion grouping to use instead of the one ``decisions.fusion_priority``
        implies (``int[N]``, equal labels = one group; it must be legal, see
        :func:`hlo_go.decisions.check_fusion_groups`).
      validate: check ``decisions`` against the graph and cluster first.

    Returns:
      The :class:`SimResult`.

    Raises:
      ValueError: invalid decisions (when ``validate``).
    """
    if validate:
        decisions.validate(graph, cluster.num_devices)
    prepared = prepare(graph, cluster)
    placement = np.asarray(decisions.placement, dtype=np.int64)
    if group is None:
        priority = decisions.fusion_priority
        if not prepared.fuses_large_matrices.all():  # as the lowering for XLA:CPU does
            priority = unfuse_large_matrices(
                graph, priority, where=~prepared.fuses_large_matrices[placement]
            )
        group = fusion_groups(graph, placement, priority, output_dims=output_dims, limits=limits)
    return _run(prepared, placement, decisions.schedule_priority, np.asarray(group))


def simulate_batch(
    graph: OpGraph,
    cluster: Cluster,
    candidates: Sequence[Decisions],
    *,
    limits: FusionLimits = DEFAULT_LIMITS,
    output_dims: np.ndarray | None = None,
    validate: bool = True,
) -> list[SimResult]:
    """Simulates several candidate decisions for one graph on one cluster.

    The graph is prepared once (:func:`prepare`); each candidate is then grouped and
    simulated on its own.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      candidates: K decisions.
      limits: fusion grouping limits.
      output_dims: exact output-dimension keys for fusion legality.
      validate: check every candidate first.

    Returns:
      K :class:`SimResult`\\ s, in the order of ``candidates``.
    """
    prepare(graph, cluster)
    return [
        simulate(graph, cluster, d, limits=limits, output_dims=output_dims, validate=validate)
        for d in candidates
    ]


def _run(
    prepared: Prepared, placement: np.ndarray, priority: np.ndarray, group: np.ndarray
) -> SimResult:
    graph, adj, costs, links = prepared.graph, prepared.adjacency, prepared.costs, prepared.links
    d = prepared.cluster.num_devices
    (
        kid,
        mptr,
        members,
        kdev,
        kprio,
        kdur,
        kfree,
        kbytes,
        materialized,
        ksucc_ptr,
        ksucc,
        indeg,
        t_node,
        t_dst,
        t_src,
        t_chan,
        t_dur,
        t_bytes,
        thead,
        tnext,
        tsucc_ptr,
        tsucc,
        ktr_ptr,
        ktr,
    ) = _engine.build_kernels(
        group.astype(np.int64, copy=False),
        prepared.topo_order,
        placement,
        np.asarray(priority, dtype=np.float64),
        prepared.kind,
        costs.spec,
        costs.compute_s,
        costs.memory_efficiency,
        costs.fused_compute_s,
        costs.fused_memory_efficiency,
        prepared.bytes_read,
        prepared.bytes_written,
        prepared.bytes_out,
        adj.data_succ_ptr,
        adj.data_succ,
        adj.data_pred_ptr,
        adj.data_pred,
        adj.data_pred_bytes,
        adj.control_pred_ptr,
        adj.control_pred,
        int(graph.root),
        costs.launch_s,
        prepared.launches,
        prepared.regenerated,
        prepared.window_reads,
        MAX_REGENERATED_CHAIN,
        costs.bandwidth,
        links.bandwidth,
        links.latency,
        links.channel,
    )
    fallback = 0
    if any(model is not None for model in prepared.kernel_models):
        kdur, fallback = _learned(prepared, mptr, members, kdev, kfree, kdur)
    kstart, kend, kss, kse, tstart, tend, tss, tse, step_times, last_step, finished = (
        _engine.run_events(
            d,
            links.num_channels,
            kdev,
            kprio,
            kdur,
            kfree,
            indeg,
            ksucc_ptr,
            ksucc,
            ktr_ptr,
            ktr,
            t_chan,
            t_dur,
            tsucc_ptr,
            tsucc,
        )
    )
    if finished != kdev.shape[0]:  # cannot happen for a legal grouping of a DAG
        raise RuntimeError(
            f"simulation deadlocked: {kdev.shape[0] - finished} kernels never became ready "
            "(is the fusion grouping convex?)"
        )
    end_step = int(last_step) + 1
    step_time = float(step_times[last_step]) if last_step > 0 else 0.0
    buf_node, buf_dev, buf_bytes, buf_alloc, buf_free, buf_copy, peak = _engine.liveness(
        prepared.topo_order,
        kid,
        prepared.kind,
        kdev,
        kfree,
        materialized,
        prepared.bytes_out,
        adj.data_succ_ptr,
        adj.data_succ,
        int(graph.root),
        kss,
        kse,
        t_node,
        t_dst,
        thead,
        tnext,
        tss,
        tse,
        end_step,
        d,
    )
    times = np.empty(end_step + 1, dtype=np.float64)
    times[:end_step] = step_times[:end_step]
    times[end_step] = step_time
    launched = ~kfree
    busy = np.bincount(kdev[launched], weights=kdur[launched], minlength=d)
    capacity = costs.capacity
    timeline = Timeline(
        node_kernel=kid.astype(np.int32),
        kernel_ptr=mptr,
        kernel_nodes=members,
        kernel_device=kdev.astype(np.int32),
        kernel_start=kstart,
        kernel_end=kend,
        kernel_priority=kprio,
        kernel_bytes=kbytes,
        kernel_free=kfree,
        transfer_node=t_node.astype(np.int32),
        transfer_src=t_src.astype(np.int32),
        transfer_dst=t_dst.astype(np.int32),
        transfer_channel=t_chan.astype(np.int32),
        transfer_bytes=t_bytes,
        transfer_start=tstart,
        transfer_end=tend,
        buffer_node=buf_node.astype(np.int32),
        buffer_device=buf_dev.astype(np.int32),
        buffer_bytes=buf_bytes,
        buffer_alloc=times[buf_alloc],
        buffer_free=times[buf_free],
        buffer_copy=buf_copy,
        channel_names=tuple(links.channel_label(c) for c in range(links.num_channels)),
    )
    return SimResult(
        step_time=step_time,
        busy_time=busy,
        peak_memory=peak,
        memory_capacity=capacity,
        oom=bool((peak > capacity).any()),
        bytes_moved=int(t_bytes.sum()),
        num_kernels=int(np.count_nonzero(launched)),
        fusion_group=group.astype(np.int32, copy=False),
        timeline=timeline,
        fallback_kernels=fallback,
    )
