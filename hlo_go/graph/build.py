"""``build_graph``: HloModule → OpGraph."""

from __future__ import annotations

import heapq

import numpy as np

from hlo_go.graph.colocation import colocation_groups
from hlo_go.graph.costs import LoopCosting
from hlo_go.graph.features import FUSION_KINDS, NodeFacts, dtype_class, node_features
from hlo_go.graph.flatten import flatten_entry
from hlo_go.graph.layout import layout_features
from hlo_go.graph.opgraph import OpGraph
from hlo_go.graph.trip_count import DEFAULT_TRIP_COUNT
from hlo_go.graph.vocab import opcode_ids
from hlo_go.hlo import FrozenDict, HloInstruction, HloModule, Shape, verify_module
from hlo_go.hlo.attributes import dot_dims
from hlo_go.hlo.cost import window_reads as reduce_window_reads

_FUSION_KIND_CODES = {kind: i + 1 for i, kind in enumerate(FUSION_KINDS)}


def _shape_facts(shape: Shape) -> tuple[int, int, int, int, bool, int]:
    """(bytes, elements, rank, tuple size, is tuple, dtype class) of an output shape."""
    leaves = shape.leaves()
    arrays = [leaf for leaf in leaves if leaf.is_array]
    first = arrays[0] if arrays else None
    return (
        sum(leaf.byte_size() for leaf in arrays),
        sum(leaf.num_elements for leaf in arrays),
        first.rank if first is not None else 0,
        len(shape.tuple_shapes) if shape.is_tuple else 0,
        shape.is_tuple,
        dtype_class(first.dtype if first is not None else "other"),
    )


def _topological_order(n: int, senders: np.ndarray, receivers: np.ndarray) -> np.ndarray:
    """A topological order of nodes ``0..n-1`` (smallest ready id first: the identity
    when every edge already goes from a smaller to a larger id).

    Raises:
      ValueError: the edges form a cycle.
    """
    if not senders.size or (senders < receivers).all():
        return np.arange(n, dtype=np.int32)
    successors: list[list[int]] = [[] for _ in range(n)]
    for s, r in zip(senders.tolist(), receivers.tolist(), strict=True):
        successors[s].append(r)
    indegree = np.bincount(receivers, minlength=n).tolist()
    ready = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for succ in successors[node]:
            indegree[succ] -= 1
            if indegree[succ] == 0:
                heapq.heappush(ready, succ)
    if len(order) != n:
        raise ValueError(
            f"the flattened entry computation has a dependency cycle "
            f"({n - len(order)} nodes on or after it); control-predecessors may form one"
        )
    return np.asarray(order, dtype=np.int32)


def _unique_edges(lists: list[list[int]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(senders, receivers) with one edge per distinct (source, target) pair, grouped
    by target in id order and by first occurrence within a target."""
    sources: list[int] = []
    counts = np.zeros(n, dtype=np.int64)
    for node, items in enumerate(lists):
        if items:
            unique = list(dict.fromkeys(items)) if len(items) > 1 else items
            sources.extend(unique)
            counts[node] = len(unique)
    senders = np.asarray(sources, dtype=np.int32)
    receivers = np.repeat(np.arange(n, dtype=np.int32), counts)
    return senders, receivers


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _matrix_kind(instr: HloInstruction) -> int:
    """``OpGraph.matrix_kind`` of one instruction (not looking inside fusions)."""
    if instr.opcode in ("dot", "ragged-dot"):
        return 1
    if instr.opcode == "custom-call" and dot_dims(instr) is not None:
        return 1  # an XLA:GPU GEMM library call
    if instr.opcode != "convolution":
        return 0
    groups = (
        instr.attributes.get("feature_group_count"),
        instr.attributes.get("batch_group_count"),
    )
    return 3 if any(g not in (None, "1") for g in groups) else 2


def build_graph(
    module: HloModule,
    *,
    default_trip_count: int = DEFAULT_TRIP_COUNT,
    validate: bool = False,
) -> OpGraph:
    """The OpGraph of a module: its entry computation flattened and featurized.

    Works on any module XLA prints: unoptimized or optimized, fused or not,
    scheduled, with async operations, collectives, custom calls, tuples,
    conditionals and nested calls.

    * Nodes: every instruction of the entry computation with ``call``\\ s inlined
      recursively (:mod:`hlo_go.graph.flatten`): parameters, constants, tuples,
      get-tuple-elements and bitcasts included, so the node count equals the
      flattened instruction count.
    * ``while`` and ``conditional`` stay one macro node each; a ``while`` costs
      trip count × (body + condition), a ``conditional`` its most expensive branch
      (:mod:`hlo_go.graph.costs`, :mod:`hlo_go.graph.trip_count`). A ``fusion`` is one
      node costing its fused body's aggregate, as XLA counts it.
    * Data edges: one per distinct (producer, consumer) pair, carrying the
      producer's output bytes. ``control-predecessors`` become control edges.
    * Features: :mod:`hlo_go.graph.features`; per-dimension shape and layout facts:
      :mod:`hlo_go.graph.layout`; colocation groups: :mod:`hlo_go.graph.colocation`.

    Args:
      module: a parsed module (:func:`hlo_go.hlo.parse_hlo`).
      default_trip_count: the trip count of loops whose count is neither in XLA's
        backend config nor inferable from the loop (flagged by the
        ``trip_count_unknown`` feature).
      validate: run :meth:`OpGraph.validate` before returning.

    Returns:
      The :class:`OpGraph`; node ids follow definition order, which is topological.

    Raises:
      HloVerifyError: the module is not valid HLO (:func:`hlo_go.hlo.verify_module`:
        operand shapes, tuple indices, dimension numbers, sizes that overflow int64).
      ValueError: the module is malformed (a call naming no computation, a
        dependency cycle through control predecessors).
    """
    verify_module(module)  # before any costing or int64 array: named errors, located
    flat = flatten_entry(module)
    n = len(flat.names)
    costing = LoopCosting(module, default_trip_count=default_trip_count)
    computations = module.computations

    flops = [0.0] * n
    transcendentals = [0.0] * n
    bytes_read = [0.0] * n
    bytes_written = [0.0] * n
    shape_rows: list[tuple[int, int, int, int, bool, int]] = [None] * n  # type: ignore[list-item]
    num_operands = np.zeros(n, dtype=np.int32)
    fusion_kind = np.zeros(n, dtype=np.int8)
    fused_instructions = np.zeros(n, dtype=np.int32)
    trip_count = np.ones(n, dtype=np.int64)
    launches = np.zeros(n, dtype=np.int64)
    matrix_kind = np.zeros(n, dtype=np.int8)
    window_reads = np.ones(n, dtype=np.float64)
    trip_unknown = np.zeros(n, dtype=bool)
    branches = np.zeros(n, dtype=np.int32)
    shape_cache: dict[int, tuple[int, int, int, int, bool, int]] = {}

    instruction_cost = costing.instruction
    for i, (instr, comp) in enumerate(zip(flat.instructions, flat.computations, strict=True)):
        cost = instruction_cost(comp, instr)
        launches[i] = costing.launches(comp, instr)
        flops[i], transcendentals[i], bytes_read[i], bytes_written[i] = cost
        shape = instr.shape
        row = shape_cache.get(id(shape))
        if row is None:
            row = shape_cache[id(shape)] = _shape_facts(shape)
        shape_rows[i] = row
        num_operands[i] = len(instr.operands)
        op = instr.opcode
        matrix_kind[i] = _matrix_kind(instr)
        if op == "fusion":
            fusion_kind[i] = _FUSION_KIND_CODES.get(instr.attributes.get("kind", ""), 0)
            called = instr.called_computations
            if called and called[0] in computations:
                fused = computations[called[0]].instructions
                fused_instructions[i] = len(fused)
                matrix_kind[i] = max((_matrix_kind(inner) for inner in fused), default=0)
        elif op == "reduce-window" and flat.operands[i]:
            operand = flat.instructions[flat.operands[i][0]].shape
            window_reads[i] = max(1.0, reduce_window_reads(instr, operand))
        elif op == "while":
            trips = costing.trip_count(comp, instr)
            trip_count[i] = trips.count
            trip_unknown[i] = not trips.known
        elif op == "conditional":
            branches[i] = len(instr.called_computations)

    opcode = opcode_ids([instr.opcode for instr in flat.instructions])
    shape_table = np.array(shape_rows, dtype=np.int64).reshape(n, 6)
    bytes_out = np.ascontiguousarray(shape_table[:, 0])
    senders, receivers = _unique_edges(flat.operands, n)
    control_senders, control_receivers = _unique_edges(flat.control_predecessors, n)
    edge_bytes = bytes_out[senders]
    topo_order = _topological_order(
        n,
        np.concatenate([senders, control_senders]),
        np.concatenate([receivers, control_receivers]),
    )
    first_operand = np.fromiter(
        (ops[0] if ops else -1 for ops in flat.operands), dtype=np.int32, count=n
    )
    facts = NodeFacts(
        opcode=opcode,
        flops=np.asarray(flops, dtype=np.float64),
        transcendentals=np.asarray(transcendentals, dtype=np.float64),
        bytes_read=np.asarray(bytes_read, dtype=np.float64),
        bytes_written=np.asarray(bytes_written, dtype=np.float64),
        bytes_out=bytes_out,
        elements=shape_table[:, 1],
        rank=shape_table[:, 2].astype(np.int32),
        tuple_size=shape_table[:, 3].astype(np.int32),
        is_tuple=shape_table[:, 4].astype(bool),
        dtype_class=shape_table[:, 5].astype(np.int8),
        num_operands=num_operands,
        fusion_kind=fusion_kind,
        fused_instructions=fused_instructions,
        trip_count=trip_count,
        trip_count_unknown=trip_unknown,
        branches=branches,
        root=flat.root,
        senders=senders,
        receivers=receivers,
        edge_bytes=edge_bytes,
        topo_order=topo_order,
    )
    graph = OpGraph(
        names=tuple(flat.names),
        node_index=FrozenDict(zip(flat.names, range(n), strict=True)),
        opcode=_readonly(opcode),
        features=_readonly(node_features(facts)),
        flops=_readonly(facts.flops),
        transcendentals=_readonly(facts.transcendentals),
        bytes_read=_readonly(facts.bytes_read),
        bytes_written=_readonly(facts.bytes_written),
        bytes_out=_readonly(bytes_out),
        trip_count=_readonly(trip_count),
        senders=_readonly(senders),
        receivers=_readonly(receivers),
        edge_bytes=_readonly(edge_bytes),
        control_senders=_readonly(control_senders),
        control_receivers=_readonly(control_receivers),
        topo_order=_readonly(topo_order),
        colocation_group=_readonly(colocation_groups(opcode, first_operand)),
        root=flat.root,
        module_name=module.name,
        op_names=tuple(str(i.metadata.get("op_name", "")) for i in flat.instructions),
        launches=_readonly(launches),
        matrix_kind=_readonly(matrix_kind),
        window_reads=_readonly(window_reads),
        layout_features=_readonly(
            layout_features(
                module, flat.instructions, flat.computations, facts.flops, senders, receivers
            )
        ),
    )
    return graph.validate() if validate else graph
