"""Partitioning a placed graph into per-device segments (the MPMD runtime's plan).

A *segment* is a set of nodes placed on one device that runs as one executable.
:func:`partition` cuts the flattened entry computation of a module into segments
such that

* every node of a segment is on the segment's device;
* the segments form an acyclic DAG (a segment never waits, through other
  segments, on itself), so they can be dispatched in one topological order;
* a fused group (:meth:`hlo_go.decisions.Decisions.fusion_groups`) is never split;
* same-device nodes are merged into as few segments as acyclicity allows, so the
  number of dispatches stays small.

Values, not nodes, cross segment boundaries, and only array values do:

* ``tuple`` and ``get-tuple-element`` nodes compute nothing; they are resolved to
  the array *leaves* they name (:class:`Leaf`: a producer node and a tuple index
  path). A consumer of a tuple gets it rebuilt from leaves inside its own segment.
* entry ``parameter`` nodes are program inputs, put on every device that reads them
  before the segments run; they belong to no segment.
* small ``constant`` nodes are copied into every segment that reads them instead of
  being transferred (they belong to no segment unless they are program outputs).
* everything else (``while`` and ``conditional`` included, as whole units with their
  called computations) is a compute node of exactly one segment.

Algorithm: nodes are contracted into units (fused groups; a free node is its own
unit) and each unit gets a *stage*: the largest stage of its producers, plus one for a
producer on another device. Edges between different (device, stage) cells then go
to strictly larger stages, so cells form an acyclic DAG. Cells of one device are
then merged greedily, in stage order, whenever no path leads from one to the other
through a third cell (an exact reachability check). Finally segments are put in a
dispatch order by list scheduling: among segments whose producers are all
dispatched, the one with the highest schedule priority (the largest
``schedule_priority`` of its nodes) goes first; ties go to the earlier segment in
topological order.

Refused, with a :class:`PlacementError` naming the node: opcodes with side effects
or cross-device semantics (infeed/outfeed, send/recv, collectives, the stateful
``rng``/``rng-get-and-update-state``: a per-device executable cannot reproduce what
one program computes), tokens crossing devices, and tuple-shaped entry parameters.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import NamedTuple, Union

import numpy as np

from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph, flatten_entry
from hlo_go.graph.flatten import FlatEntry
from hlo_go.hlo import HloModule, Shape

# Opcodes a per-device segment cannot run with the meaning they have in one program.
REFUSED_OPCODES: dict[str, str] = {
    **dict.fromkeys(
        ("infeed", "outfeed", "send", "send-done", "recv", "recv-done"),
        "host/device communication has side effects tied to one program",
    ),
    **dict.fromkeys(
        (
            "all-reduce",
            "all-reduce-start",
            "all-reduce-done",
            "all-gather",
            "all-gather-start",
            "all-gather-done",
            "all-to-all",
            "reduce-scatter",
            "collective-permute",
            "collective-permute-start",
            "collective-permute-done",
            "collective-broadcast",
            "ragged-all-to-all",
        ),
        "collectives need an SPMD program across devices, not per-device segments",
    ),
    "rng": "XLA's 'rng' draws from a per-executable generator state, so a segment would "
    "not reproduce the reference results (use a counter-based PRNG such as jax.random)",
    "rng-get-and-update-state": "it reads and advances hidden per-executable RNG state",
}

# Constants up to this size are copied into each segment that reads them.
CLONE_CONSTANT_BYTES = 1 << 20

# Node kinds.
PARAMETER, CLONED, VIEW, COMPUTE = 0, 1, 2, 3
KIND_NAMES = ("parameter", "cloned constant", "view", "compute")


class PlacementError(ValueError, HloGoError):
    """Decisions that the MPMD runtime cannot run; the message names the node and why."""


class Leaf(NamedTuple):
    """One array value: the ``path`` element of node ``node``'s (possibly tuple) output.

    Attributes:
      node: producer node id in the OpGraph.
      path: tuple indices from the producer's output to this array (empty: the output).
    """

    node: int
    path: tuple[int, ...] = ()


# A node's value: a Leaf, or a (nested) tuple of values.
Structure = Union[Leaf, tuple["Structure", ...]]  # noqa: UP007 (recursive alias)


class Segment(NamedTuple):
    """One executable of the MPMD program.

    Attributes:
      index: position in the dispatch order (:attr:`Partition.segments`).
      device: the device index (a value of ``Decisions.placement``).
      nodes: compute node ids, in topological order.
      inputs: leaves read from outside: outputs of other segments or entry parameters,
        in the order of the segment module's parameters.
      cloned: constant node ids copied into this segment.
      outputs: leaves of this segment's nodes that other segments or the program's
        result read, in the order of the segment module's result tuple.
      priority: the largest schedule priority of its nodes.
    """

    index: int
    device: int
    nodes: tuple[int, ...]
    inputs: tuple[Leaf, ...]
    cloned: tuple[int, ...]
    outputs: tuple[Leaf, ...]
    priority: float


class Partition(NamedTuple):
    """A placed module cut into per-device segments.

    Attributes:
      segments: the segments in dispatch order (a topological order of the segment
        DAG, by schedule priority among the ready ones).
      segment_of: ``int32[N]`` the segment of each node (-1 for parameters, copied
        constants, tuples and get-tuple-elements).
      kind: ``int8[N]`` node kinds (:data:`PARAMETER`, :data:`CLONED`, :data:`VIEW`,
        :data:`COMPUTE`).
      edges: ``(producer segment, consumer segment)`` pairs of the segment DAG.
      outputs: the program's result as leaves, in flattened order.
      result: the program's result structure (nested tuples of leaves).
      structure: each node's value as a structure of leaves.
      flat: the flattened entry computation the node ids refer to.
      placement: ``int32[N]`` the placement the partition was made for.
      num_devices: the number of devices.
    """

    segments: tuple[Segment, ...]
    segment_of: np.ndarray
    kind: np.ndarray
    edges: tuple[tuple[int, int], ...]
    outputs: tuple[Leaf, ...]
    result: Structure
    structure: tuple[Structure, ...]
    flat: FlatEntry
    placement: np.ndarray
    num_devices: int

    @property
    def num_segments(self) -> int:
        """The number of segments (dispatches per run)."""
        return len(self.segments)

    def leaf_shape(self, leaf: Leaf) -> Shape:
        """The array shape of a leaf."""
        shape = self.flat.instructions[leaf.node].shape
        for index in leaf.path:
            shape = shape.tuple_shapes[index]
        return shape

    def cross_device_leaves(self) -> int:
        """How many (leaf, device) transfers one run makes between devices."""
        return sum(
            1
            for seg in self.segments
            for leaf in seg.inputs
            if self.kind[leaf.node] == COMPUTE and self.placement[leaf.node] != seg.device
        )


def leaves(structure: Structure) -> list[Leaf]:
    """The leaves of a structure, depth first."""
    if isinstance(structure, Leaf):
        return [structure]
    out: list[Leaf] = []
    stack: list[Structure] = [structure]
    while stack:
        item = stack.pop()
        if isinstance(item, Leaf):
            out.append(item)
        else:
            stack.extend(reversed(item))
    return out


def _shape_structure(node: int, shape: Shape, path: tuple[int, ...] = ()) -> Structure:
    if not shape.is_tuple:
        return Leaf(node, path)
    return tuple(_shape_structure(node, s, (*path, i)) for i, s in enumerate(shape.tuple_shapes))


def _node_kinds(flat: FlatEntry, groups: np.ndarray, output_nodes: set[int]) -> np.ndarray:
    n = len(flat.names)
    kind = np.full(n, COMPUTE, dtype=np.int8)
    group_size = np.bincount(groups, minlength=n)
    for v, instr in enumerate(flat.instructions):
        op = instr.opcode
        if op in REFUSED_OPCODES:
            raise PlacementError(
                f"node {flat.names[v]!r} ({op}) cannot run in per-device segments: "
                f"{REFUSED_OPCODES[op]}"
            )
        if op == "parameter":
            if instr.shape.is_tuple:
                raise PlacementError(
                    f"entry parameter {flat.names[v]!r} has a tuple shape ({instr.shape}); "
                    "the MPMD runtime takes array parameters only (flatten the arguments)"
                )
            kind[v] = PARAMETER
        elif op in ("tuple", "get-tuple-element"):
            kind[v] = VIEW
        elif (
            op == "constant"
            and group_size[groups[v]] == 1
            and v not in output_nodes
            and instr.shape.total_byte_size() <= CLONE_CONSTANT_BYTES
        ):
            kind[v] = CLONED
    return kind


def _structures(flat: FlatEntry, kind: np.ndarray) -> list[Structure]:
    structure: list[Structure] = []
    for v, instr in enumerate(flat.instructions):
        if kind[v] != VIEW:
            structure.append(_shape_structure(v, instr.shape))
        elif instr.opcode == "tuple":
            structure.append(tuple(structure[o] for o in flat.operands[v]))
        else:  # get-tuple-element
            operand = structure[flat.operands[v][0]]
            index = int(instr.attributes.get("index", "0"))
            if isinstance(operand, Leaf) or not 0 <= index < len(operand):
                raise PlacementError(
                    f"get-tuple-element {flat.names[v]!r} reads index {index} of a value "
                    "that is not a tuple of that size"
                )
            structure.append(operand[index])
    return structure


def _stages(
    order: list[int],
    unit_preds: list[set[int]],
    device: np.ndarray,
) -> dict[int, int]:
    stage: dict[int, int] = {}
    for u in order:
        s = 0
        for p in unit_preds[u]:
            s = max(s, stage[p] + (1 if device[p] != device[u] else 0))
        stage[u] = s
    return stage


def _unit_order(units: list[int], unit_preds: list[set[int]], n: int) -> list[int]:
    """Units in a topological order (Kahn's algorithm, smallest node id first)."""
    succs: dict[int, list[int]] = {}
    indegree = dict.fromkeys(units, 0)
    for u in units:
        for p in unit_preds[u]:
            succs.setdefault(p, []).append(u)
            indegree[u] += 1
    ready = [u for u in units if indegree[u] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for s in succs.get(u, ()):
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, s)
    if len(order) != len(units):
        raise PlacementError(
            "the fused groups form a cycle (a group is not convex); fusion grouping "
            "should never produce this"
        )
    return order


class _CellGraph:
    """The DAG of segments while same-device cells are merged."""

    def __init__(self, cells: list[tuple[int, int]], edges: set[tuple[int, int]]) -> None:
        self.succ: list[set[int]] = [set() for _ in cells]
        self.pred: list[set[int]] = [set() for _ in cells]
        for a, b in edges:
            self.succ[a].add(b)
            self.pred[b].add(a)
        self.alive = [True] * len(cells)

    def reaches(self, a: int, b: int, budget: int, *, indirectly: bool = False) -> bool | None:
        """Whether a path a -> ... -> b exists (``indirectly``: through some other cell);
        None when the search would scan more than ``budget`` edges."""
        if not indirectly and b in self.succ[a]:
            return True
        stack = [x for x in self.succ[a] if x != b]
        seen = set(stack)
        scanned = 0
        while stack:
            x = stack.pop()
            for y in self.succ[x]:
                scanned += 1
                if y == b:
                    return True
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
            if scanned > budget:
                return None
        return False

    def merge(self, a: int, b: int) -> None:
        """Merges cell ``a`` into cell ``b``."""
        for x in self.succ[a]:
            self.pred[x].discard(a)
            if x != b:
                self.pred[x].add(b)
                self.succ[b].add(x)
        for x in self.pred[a]:
            self.succ[x].discard(a)
            if x != b:
                self.succ[x].add(b)
                self.pred[b].add(x)
        self.succ[b].discard(b)
        self.pred[b].discard(b)
        self.succ[a], self.pred[a] = set(), set()
        self.alive[a] = False


def partition(
    module: HloModule,
    graph: OpGraph,
    placement: np.ndarray,
    *,
    schedule_priority: np.ndarray | None = None,
    fusion_groups: np.ndarray | None = None,
    num_devices: int | None = None,
    merge: bool = True,
    merge_budget: int = 200_000,
) -> Partition:
    """Cuts a placed module into an acyclic DAG of per-device segments.

    Args:
      module: the module (its entry computation is what ``graph`` was built from).
      graph: ``build_graph(module)``.
      placement: ``int[N]`` device per node.
      schedule_priority: ``float[N]`` (higher first); default all zero (topological order).
      fusion_groups: ``int[N]`` group per node (``Decisions.fusion_groups``): nodes of one
        group always share a segment. Default: no fusion.
      num_devices: the number of devices (default ``placement.max() + 1``).
      merge: merge same-device cells as far as acyclicity allows (False keeps one
        segment per (device, stage) cell: more dispatches, more overlap).
      merge_budget: the most edges one merge's reachability check may scan; a merge
        whose check would scan more is skipped (always safe).

    Returns:
      The :class:`Partition`.

    Raises:
      PlacementError: ``graph`` does not belong to ``module``, a fused group spans
        devices, or the module has an operation the runtime refuses (see the module
        docstring).
    """
    flat = flatten_entry(module)
    n = len(flat.names)
    if tuple(flat.names) != tuple(graph.names):
        raise PlacementError(
            f"the graph ({graph.num_nodes} nodes, module {graph.module_name!r}) was not built "
            f"from this module ({n} flattened nodes, module {module.name!r})"
        )
    placement = np.asarray(placement)
    if placement.shape != (n,) or not np.issubdtype(placement.dtype, np.integer):
        raise PlacementError(f"placement must be int[{n}], got {placement.dtype}{placement.shape}")
    if n and placement.min() < 0:
        bad = int(np.argmin(placement))
        raise PlacementError(f"placement[{bad}] = {placement[bad]} (node {flat.names[bad]!r})")
    num_devices = int(placement.max()) + 1 if num_devices is None else num_devices
    if n and placement.max() >= num_devices:
        bad = int(np.argmax(placement))
        raise PlacementError(
            f"placement[{bad}] = {placement[bad]} (node {flat.names[bad]!r}) is not one of "
            f"the {num_devices} devices"
        )
    priority = (
        np.zeros(n, np.float64)
        if schedule_priority is None
        else np.asarray(schedule_priority, np.float64)
    )
    groups = np.arange(n) if fusion_groups is None else np.asarray(fusion_groups, np.int64)
    split = np.flatnonzero(placement != placement[groups])
    if split.size:
        i = int(split[0])
        raise PlacementError(
            f"fused group of {flat.names[groups[i]]!r} spans devices "
            f"{placement[groups[i]]} and {placement[i]} (node {flat.names[i]!r})"
        )

    root_structure_kinds = np.full(n, COMPUTE, dtype=np.int8)
    for v, instr in enumerate(flat.instructions):
        if instr.opcode in ("tuple", "get-tuple-element"):
            root_structure_kinds[v] = VIEW
    # Program outputs decide which constants must be computed by a segment.
    pre = _structures(flat, root_structure_kinds)
    output_nodes = {leaf.node for leaf in leaves(pre[flat.root])}
    kind = _node_kinds(flat, groups, output_nodes)
    structure = _structures(flat, kind) if (kind == CLONED).any() else pre
    result = structure[flat.root]
    outputs = tuple(leaves(result))

    # Producers of each compute node: compute nodes owning the leaves it reads.
    compute = np.flatnonzero(kind == COMPUTE).tolist()
    reads: dict[int, list[Leaf]] = {}
    for v in compute:
        seen: dict[Leaf, None] = {}
        for o in flat.operands[v]:
            for leaf in leaves(structure[o]):
                seen[leaf] = None
        reads[v] = list(seen)
        for leaf in seen:
            shape = _leaf_shape(flat, leaf)
            if shape.dtype == "token" and placement[leaf.node] != placement[v]:
                raise PlacementError(
                    f"node {flat.names[v]!r} reads a token from {flat.names[leaf.node]!r} on "
                    "another device; tokens order side effects inside one program and cannot "
                    "cross devices"
                )

    # Units: fused groups of compute nodes.
    unit_of = groups
    unit_preds: list[set[int]] = [set() for _ in range(n)]
    units = sorted({int(unit_of[v]) for v in compute})
    for v in compute:
        u = int(unit_of[v])
        for leaf in reads[v]:
            if kind[leaf.node] == COMPUTE:
                p = int(unit_of[leaf.node])
                if p != u:
                    unit_preds[u].add(p)
    order = _unit_order(units, unit_preds, n)
    stage = _stages(order, unit_preds, placement)

    # Cells: (device, stage); cell ids in (stage, device) order.
    cell_keys = sorted({(stage[u], int(placement[u])) for u in units})
    cell_id = {key: i for i, key in enumerate(cell_keys)}
    cell_of_unit = {u: cell_id[(stage[u], int(placement[u]))] for u in units}
    edges = {
        (cell_of_unit[p], cell_of_unit[u])
        for u in units
        for p in unit_preds[u]
        if cell_of_unit[p] != cell_of_unit[u]
    }
    cells = _CellGraph(cell_keys, edges)
    owner = list(range(len(cell_keys)))  # cell -> the cell it was merged into
    if merge:
        by_device: dict[int, list[int]] = {}
        for i, (_, d) in enumerate(cell_keys):
            by_device.setdefault(d, []).append(i)
        for ids in by_device.values():
            current = ids[0]
            for nxt in ids[1:]:
                # Merged cells span several stages, so a path may also lead back from
                # ``nxt`` to ``current``; either way the merge would close a cycle.
                if (
                    cells.reaches(current, nxt, merge_budget, indirectly=True) is False
                    and cells.reaches(nxt, current, merge_budget) is False
                ):
                    cells.merge(current, nxt)
                    owner[current] = nxt
                current = nxt

    def find(c: int) -> int:
        while owner[c] != c:
            owner[c] = owner[owner[c]]
            c = owner[c]
        return c

    alive = [c for c in range(len(cell_keys)) if cells.alive[c]]
    members: dict[int, list[int]] = {c: [] for c in alive}
    for v in compute:
        members[find(cell_of_unit[int(unit_of[v])])].append(v)
    seg_priority = {c: max(float(priority[v]) for v in members[c]) for c in alive}
    first_node = {c: min(members[c]) for c in alive}

    # Dispatch order: list scheduling by priority over the cell DAG.
    indegree = {c: len(cells.pred[c]) for c in alive}
    ready = [(-seg_priority[c], first_node[c], c) for c in alive if indegree[c] == 0]
    heapq.heapify(ready)
    dispatch: list[int] = []
    while ready:
        _, _, c = heapq.heappop(ready)
        dispatch.append(c)
        for s in cells.succ[c]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (-seg_priority[s], first_node[s], s))
    if len(dispatch) != len(alive):  # pragma: no cover - guarded by construction
        raise PlacementError("internal error: the segment graph has a cycle")
    index_of = {c: i for i, c in enumerate(dispatch)}

    segment_of = np.full(n, -1, dtype=np.int32)
    for c in alive:
        segment_of[members[c]] = index_of[c]

    # Each segment's inputs, copied constants and outputs.
    needed_outside: dict[int, dict[Leaf, None]] = {i: {} for i in range(len(dispatch))}
    seg_inputs: dict[int, dict[Leaf, None]] = {i: {} for i in range(len(dispatch))}
    seg_cloned: dict[int, dict[int, None]] = {i: {} for i in range(len(dispatch))}
    for v in compute:
        s = int(segment_of[v])
        for leaf in reads[v]:
            k = kind[leaf.node]
            if k == CLONED:
                seg_cloned[s][leaf.node] = None
            elif k == PARAMETER:
                seg_inputs[s][leaf] = None
            elif segment_of[leaf.node] != s:
                seg_inputs[s][leaf] = None
                needed_outside[int(segment_of[leaf.node])][leaf] = None
    for leaf in outputs:
        if kind[leaf.node] == COMPUTE:
            needed_outside[int(segment_of[leaf.node])][leaf] = None
    segments = []
    for i, c in enumerate(dispatch):
        nodes = sorted(members[c])
        segments.append(
            Segment(
                index=i,
                device=int(placement[nodes[0]]),
                nodes=tuple(nodes),
                inputs=tuple(seg_inputs[i]),
                cloned=tuple(sorted(seg_cloned[i])),
                outputs=tuple(sorted(needed_outside[i])),
                priority=seg_priority[c],
            )
        )
    seg_edges = tuple(sorted({(index_of[a], index_of[b]) for a in alive for b in cells.succ[a]}))
    return Partition(
        segments=tuple(segments),
        segment_of=segment_of,
        kind=kind,
        edges=seg_edges,
        outputs=outputs,
        result=result,
        structure=tuple(structure),
        flat=flat,
        placement=placement.astype(np.int32),
        num_devices=num_devices,
    )


def _leaf_shape(flat: FlatEntry, leaf: Leaf) -> Shape:
    shape = flat.instructions[leaf.node].shape
    for index in leaf.path:
        shape = shape.tuple_shapes[index]
    return shape


def check_partition(
    part: Partition, fusion_groups: Sequence[int] | np.ndarray | None = None
) -> None:
    """Checks a partition's invariants (used by the tests; cheap enough to call anywhere).

    Checked: every compute node is in exactly one segment on its placed device; the
    segment DAG's edges go forward in dispatch order (so it is acyclic) and cover every
    cross-segment data dependency; fused groups are not split; each segment's inputs
    come from earlier segments or parameters.

    Raises:
      AssertionError: naming the first violation.
    """
    n = len(part.flat.names)
    seg = part.segment_of
    for v in range(n):
        if part.kind[v] == COMPUTE:
            assert seg[v] >= 0, f"compute node {part.flat.names[v]!r} is in no segment"
            assert part.segments[seg[v]].device == part.placement[v], (
                f"node {part.flat.names[v]!r} is on device {part.placement[v]} but its segment "
                f"on {part.segments[seg[v]].device}"
            )
        else:
            assert seg[v] == -1, f"{KIND_NAMES[part.kind[v]]} {part.flat.names[v]!r} in a segment"
    for a, b in part.edges:
        assert a < b, f"segment edge {a} -> {b} goes backward in dispatch order"
    edge_set = set(part.edges)
    for s in part.segments:
        for leaf in s.inputs:
            if part.kind[leaf.node] == COMPUTE:
                src = int(seg[leaf.node])
                assert src < s.index, f"segment {s.index} reads from later segment {src}"
                assert (src, s.index) in edge_set, f"missing segment edge {src} -> {s.index}"
                assert leaf in part.segments[src].outputs, f"{leaf} is not an output of {src}"
    if fusion_groups is not None:
        groups = np.asarray(fusion_groups)
        compute = part.kind == COMPUTE
        bad = np.flatnonzero(compute & (seg != seg[groups]))
        assert not bad.size, f"fused group of node {part.flat.names[bad[0]]!r} is split"
