"""From an HLO module to a sharding problem: strategies per node, their costs, the edges.

:func:`build_sharding` inlines the entry computation's ``call``\\ s (so one strategy per
instruction is one annotation of the module), enumerates each instruction's strategies
(:mod:`hlo_go.sharding.strategies`) and prices them on a cluster:

* node cost: kernel launch + the node's one-device time (the simulator's cost model,
  ``max(compute, memory)``) divided by the pieces its work is split into, + the
  collectives it runs itself (a contracting split's all-reduce);
* edge cost: the collectives that reshard the producer's output into the spec the
  consumer's strategy reads (:func:`hlo_go.sharding.spec.reshard_collectives`);
* memory: the bytes of each node's output per device, and live sets at checkpoints of
  the program order for the per-device memory constraint.

SPMD runs the same program on every device, one op at a time, so the step time of a
choice is the sum of node and edge costs (:func:`hlo_go.sharding.simulate_sharding`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from hlo_go import baselines
from hlo_go.graph import OpGraph, build_graph
from hlo_go.graph.flatten import flatten_entry
from hlo_go.hlo import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.ir import reachable_computations
from hlo_go.sharding.mesh import AxisLinks, Mesh
from hlo_go.sharding.problem import ShardingProblem
from hlo_go.sharding.spec import ShardSpec, reshard_collectives, shards
from hlo_go.sharding.strategies import MAX_STRATEGIES, Strategy, enumerate_strategies
from hlo_go.sim import KERNEL, Cluster, node_costs, node_kinds

# Memory checkpoints: evenly spaced positions of the program order, plus the peak of the
# replicated program.
MEMORY_CHECKPOINTS = 24


class ShardingGraph(NamedTuple):
    """A module prepared for sharding decisions on one mesh and cluster.

    ``N`` is the node count (the instructions of the inlined entry computation, in text
    order), ``E`` the number of (producer, consumer, operand slot) edges.

    Attributes:
      module: the module with its entry's ``call``\\ s inlined; node ``i`` is entry
        instruction ``i``.
      graph: its :class:`~hlo_go.graph.OpGraph` (same node numbering).
      mesh: the logical mesh.
      cluster: the cluster costs come from (its first ``mesh.size`` devices).
      links: per-axis collective latency and bandwidth.
      strategies: per node, its :class:`~hlo_go.sharding.strategies.Strategy` list.
      edge_slot: ``int32[E]`` the operand position of each edge at its consumer.
      base_s: ``float64[N]`` one-device seconds of each node without launch overhead.
      launch_s: ``float64[N]`` launch overhead of each node (0 for views and holders).
      operands: per node, the node ids of its operands, in operand order.
      live_first: ``int64[N]`` the first program position each node's output is live at
        (0 for parameters).
      live_last: ``int64[N]`` the last (the end for the program's outputs).
      problem: the :class:`~hlo_go.sharding.problem.ShardingProblem` the methods solve.
    """

    module: HloModule
    graph: OpGraph
    mesh: Mesh
    cluster: Cluster
    links: AxisLinks
    strategies: tuple[tuple[Strategy, ...], ...]
    edge_slot: np.ndarray
    base_s: np.ndarray
    launch_s: np.ndarray
    operands: tuple[tuple[int, ...], ...]
    live_first: np.ndarray
    live_last: np.ndarray
    problem: ShardingProblem

    @property
    def num_nodes(self) -> int:
        return len(self.strategies)

    def output_spec(self, node: int, choice: np.ndarray) -> ShardSpec | None:
        """The spec node ``node`` writes under ``choice``."""
        return self.strategies[node][int(choice[node])].output


def inline_calls(module: HloModule) -> HloModule:
    """The module with every ``call`` of its entry computation inlined (recursively).

    Inlined instructions are renamed ``<call>.<instr>`` (a numeric suffix keeps names
    unique); the callee's root takes the call's place. Other computations are kept.
    """
    if not any(i.opcode == "call" for i in module.entry):
        return module
    flat = flatten_entry(module)
    taken = {i.name for _, i in module.instructions()}
    names: list[str] = []
    for name, instr in zip(flat.names, flat.instructions, strict=True):
        new = name.replace("/", ".") if "/" in name else instr.name
        if "/" in name:
            base, k = new, 1
            while new in taken:
                new, k = f"{base}.{k}", k + 1
            taken.add(new)
        names.append(new)
    instructions = []
    for i, instr in enumerate(flat.instructions):
        instructions.append(
            instr.replace(
                name=names[i],
                operands=tuple(names[j] for j in flat.operands[i]),
                control_predecessors=tuple(names[j] for j in flat.control_predecessors[i]),
            )
        )
    entry = HloComputation(
        module.entry.name,
        tuple(_forward_tuples(instructions, names[flat.root])),
        names[flat.root],
        module.entry.execution_thread,
    )
    computations = dict(module.computations)
    computations[module.entry_name] = entry
    used = reachable_computations(computations, module.entry_name)
    computations = {k: v for k, v in computations.items() if k in used}
    return HloModule(
        module.name, computations, module.entry_name, module.attributes, module.stack_frames
    )


# Instructions kept even when nothing uses them.
_SIDE_EFFECTS = frozenset({
    "parameter", "custom-call", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
    "after-all", "add-dependency",
})  # fmt: skip


def _forward_tuples(instructions: list[HloInstruction], root: str) -> list[HloInstruction]:
    """``get-tuple-element(tuple(a, b), index=1)`` read as ``b`` (calls that return tuples
    leave these when inlined), then instructions nothing uses removed (as XLA's
    simplifier and DCE would)."""
    by_name = {x.name: x for x in instructions}
    alias: dict[str, str] = {}
    for x in instructions:
        if x.opcode == "get-tuple-element" and x.operands:
            source = by_name.get(alias.get(x.operands[0], x.operands[0]))
            if source is not None and source.opcode == "tuple":
                index = int(x.attributes.get("index", "-1"))
                if 0 <= index < len(source.operands):
                    alias[x.name] = alias.get(source.operands[index], source.operands[index])
    if not alias:
        return instructions
    rewritten = [
        x.replace(
            operands=tuple(alias.get(o, o) for o in x.operands),
            control_predecessors=tuple(alias.get(o, o) for o in x.control_predecessors),
        )
        for x in instructions
        if x.name not in alias or x.name == root
    ]
    live = {root}
    for x in reversed(rewritten):
        if x.name in live or x.opcode in _SIDE_EFFECTS:
            live.add(x.name)
            live.update(x.operands)
            live.update(x.control_predecessors)
    return [x for x in rewritten if x.name in live]


class _SpecTable:
    """Ids for specs of one rank and the affine reshard cost ``a + b * bytes`` between
    every pair, filled in on first use."""

    def __init__(self, mesh: Mesh, links: AxisLinks) -> None:
        self.mesh, self.links = mesh, links
        self.ids: dict[ShardSpec, int] = {}
        self.specs: list[ShardSpec] = []
        self._a = np.full((0, 0), np.nan)
        self._b = np.full((0, 0), np.nan)

    def id(self, spec: ShardSpec) -> int:
        found = self.ids.get(spec)
        if found is None:
            found = self.ids[spec] = len(self.specs)
            self.specs.append(spec)
        return found

    def cost(self, src: np.ndarray, dst: np.ndarray, nbytes: float) -> np.ndarray:
        """``[len(src), len(dst)]`` reshard seconds between spec ids."""
        size = len(self.specs)
        if self._a.shape[0] < size:
            grow = max(size, 2 * self._a.shape[0])
            a, b = np.full((grow, grow), np.nan), np.full((grow, grow), np.nan)
            old = self._a.shape[0]
            a[:old, :old], b[:old, :old] = self._a, self._b
            self._a, self._b = a, b
        pairs = np.ix_(src, dst)
        missing = np.isnan(self._a[pairs])
        if missing.any():
            for i, j in itertools.product(np.unique(src), np.unique(dst)):
                if np.isnan(self._a[i, j]):
                    self._a[i, j], self._b[i, j] = self._affine(self.specs[i], self.specs[j])
        return self._a[pairs] + nbytes * self._b[pairs]

    def _affine(self, src: ShardSpec, dst: ShardSpec) -> tuple[float, float]:
        # Cost is affine in bytes: evaluate at 0 and at 1 byte... of a unit that keeps
        # floating point exact enough (1 MB).
        unit = 1e6
        zero = sum(
            self.links.cost(k, s, a) for k, s, a in reshard_collectives(src, dst, 0.0, self.mesh)
        )
        one = sum(
            self.links.cost(k, s, a) for k, s, a in reshard_collectives(src, dst, unit, self.mesh)
        )
        return zero, (one - zero) / unit


def _node_times(graph: OpGraph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """(one-device seconds without launch, launch seconds) per node, on device 0.

    XLA fuses after partitioning, so a launch is charged once per fusion group of the
    ``fuse-all-legal`` grouping (at the group's first node), not once per instruction.
    """
    costs = node_costs(graph, cluster)
    row = costs.spec[0]
    memory = (graph.bytes_read + graph.bytes_written) / (
        costs.bandwidth[0] * costs.memory_efficiency[row]
    )
    kernel = node_kinds(graph) == KERNEL
    base = np.where(kernel, np.maximum(costs.compute_s[row], memory), 0.0)
    groups = baselines.get("fuse-all-legal")(graph, cluster).fusion_groups(graph)
    first = groups == np.arange(graph.num_nodes)
    launch = np.where(kernel & first, costs.launch_s[0] * np.maximum(graph.kernel_launches, 1), 0.0)
    return base.astype(np.float64), launch.astype(np.float64)


def _live_range(
    num_nodes: int, senders: np.ndarray, receivers: np.ndarray, root: int, params: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) program position each node's output is live at."""
    first = np.arange(num_nodes)
    first[params] = 0
    last = np.arange(num_nodes)
    np.maximum.at(last, senders, receivers)
    last[root] = num_nodes - 1
    # The root's operands are the program's outputs: live to the end.
    last[senders[receivers == root]] = num_nodes - 1
    return first, last


def build_sharding(
    module: HloModule,
    mesh: Mesh,
    cluster: Cluster,
    *,
    memory_budget: float | None = None,
    max_strategies: int = MAX_STRATEGIES,
) -> ShardingGraph:
    """Enumerates and prices the sharding strategies of a module's instructions.

    Args:
      module: a parsed module (unoptimized HLO is what the SPMD partitioner sees; any
        module works).
      mesh: the logical mesh.
      cluster: a cluster with at least ``mesh.size`` devices; device 0's figures price
        compute, the links between mesh neighbours price collectives.
      memory_budget: bytes per device the choice must fit in (default: device 0's
        memory capacity).
      max_strategies: most strategies kept per node.

    Returns:
      The :class:`ShardingGraph`.
    """
    module = inline_calls(module)
    graph = build_graph(module)
    links = AxisLinks.of(cluster, mesh)
    entry = module.entry
    instructions: Sequence[HloInstruction] = entry.instructions
    index = {instr.name: i for i, instr in enumerate(instructions)}
    root = index[entry.root_name]
    strategies = tuple(
        tuple(
            enumerate_strategies(
                instr,
                [instructions[index[o]].shape for o in instr.operands],
                mesh,
                is_root=i == root,
                module=module,
                max_strategies=max_strategies,
            )
        )
        for i, instr in enumerate(instructions)
    )
    base, launch = _node_times(graph, cluster)
    n = len(instructions)
    k_max = max(len(s) for s in strategies)
    counts = np.array([len(s) for s in strategies], dtype=np.int32)
    node_cost = np.full((n, k_max), np.inf)
    node_memory = np.zeros((n, k_max))
    out_bytes = np.array(
        [instr.shape.byte_size() if instr.shape.is_array else 0 for instr in instructions],
        dtype=np.float64,
    )
    for v, options in enumerate(strategies):
        for k, s in enumerate(options):
            node_cost[v, k] = (
                launch[v]
                + base[v] / mesh.axes_size(s.work_axes)
                + sum(links.cost(kind, size, axes) for kind, size, axes in s.collectives)
            )
            if s.output is not None:
                node_memory[v, k] = out_bytes[v] / shards(s.output, mesh)
    # Edges: one per (producer, consumer, operand slot).
    tables: dict[int, _SpecTable] = {}
    src, dst, slot, matrices = [], [], [], []
    for v, instr in enumerate(instructions):
        for j, name in enumerate(instr.operands):
            u = index[name]
            needs = [s.operands[j] for s in strategies[v]]
            gives = [s.output for s in strategies[u]]
            if all(x is None for x in needs) or all(x is None for x in gives):
                continue
            rank = instructions[u].shape.rank
            table = tables.setdefault(rank, _SpecTable(mesh, links))
            src_ids = np.array([table.id(g) for g in gives])
            dst_ids = np.array([table.id(x) if x is not None else -1 for x in needs])
            matrix = np.zeros((len(gives), len(needs)))
            real = dst_ids >= 0
            matrix[:, real] = table.cost(src_ids, dst_ids[real], out_bytes[u])
            src.append(u)
            dst.append(v)
            slot.append(j)
            matrices.append(matrix)
    edge_src = np.array(src, dtype=np.int32)
    edge_dst = np.array(dst, dtype=np.int32)
    params = np.array(
        [i for i, x in enumerate(instructions) if x.opcode == "parameter"], dtype=np.int64
    )
    first, last = _live_range(n, edge_src, edge_dst, root, params)
    live_sets = _checkpoints(first, last, node_memory[:, 0])
    budget = float(cluster.devices[0].memory_capacity if memory_budget is None else memory_budget)
    problem = ShardingProblem(
        num_strategies=counts,
        node_cost=node_cost,
        node_memory=node_memory,
        edge_src=edge_src,
        edge_dst=edge_dst,
        edge_cost=tuple(matrices),
        live_sets=live_sets,
        memory_budget=budget,
    )
    operands = tuple(tuple(index[o] for o in instr.operands) for instr in instructions)
    return ShardingGraph(
        module, graph, mesh, cluster, links, strategies, np.array(slot, dtype=np.int32),
        base, launch, operands, first, last, problem,
    )  # fmt: skip


def live_bytes(first: np.ndarray, last: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """``float64[N]``: bytes live at each program position, each node's ``nbytes`` counted
    from ``first`` to ``last``."""
    n = len(first)
    delta = np.zeros(n + 1)
    np.add.at(delta, first, nbytes)
    np.add.at(delta, last + 1, -nbytes)
    return np.cumsum(delta)[:n]


def _checkpoints(first: np.ndarray, last: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Live sets at evenly spaced positions and at the replicated program's peak."""
    n = len(first)
    if n == 0:
        return ()
    positions = set(np.linspace(0, n - 1, num=min(n, MEMORY_CHECKPOINTS)).astype(int).tolist())
    positions.add(int(np.argmax(live_bytes(first, last, nbytes))))
    return tuple(
        np.flatnonzero((first <= t) & (last >= t) & (nbytes > 0)).astype(np.int32)
        for t in sorted(positions)
    )
