"""HLO modules of MPMD segments: one module per segment, compiled for its device.

A segment's module has one parameter per incoming leaf (in :attr:`Segment.inputs`
order) and returns a tuple of its outgoing leaves (:attr:`Segment.outputs` order).
Its body holds the segment's nodes with their operands renamed, the constants it
copies, ``get-tuple-element`` chains for leaves of tuple-valued nodes, ``tuple``
instructions rebuilding tuples that a node reads (e.g. a ``while``'s state), and
every computation the nodes call (loop bodies and conditions, branches, reducers).

``bitcast`` is rewritten as ``transpose`` / ``reshape`` / ``transpose``
(:func:`expand_bitcast`): an optimized module's bitcast reinterprets bytes under
its operand's and result's *layouts*, but the HLO → StableHLO path that compiles
HLO text drops layouts (measured on jaxlib 0.10.2: a rank-changing bitcast does not
convert at all, and a transposing one would silently compute the wrong values). The
logical equivalent compiles everywhere and XLA turns it back into a bitcast or copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from hlo_go.hlo import FrozenDict, HloComputation, HloInstruction, HloModule, Shape, tuple_shape
from hlo_go.hlo.shape import DTYPE_BITS
from hlo_go.xla.fusion import apply_fusion
from hlo_go.xla.mpmd import CLONED, COMPUTE, PARAMETER, Leaf, Partition, Segment, Structure

_NAME_OK = re.compile(r"[^A-Za-z0-9_.\-]")


def _default_order(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def _major_to_minor(shape: Shape) -> tuple[int, ...]:
    if shape.layout is None or len(shape.layout.minor_to_major) != shape.rank:
        return tuple(range(shape.rank))
    return tuple(reversed(shape.layout.minor_to_major))


def expand_bitcast(
    instr: HloInstruction, operand_shape: Shape, fresh: Callable[[str], str]
) -> list[HloInstruction]:
    """A ``bitcast`` as logical ops: transpose to the operand's physical order, reshape
    to the result's physical dimensions, transpose to the result's logical order.

    Args:
      instr: the bitcast (array shapes of equal element type and count).
      operand_shape: its operand's shape, with layout.
      fresh: returns an unused instruction name for a stem.

    Returns:
      The instructions replacing it; the last one has ``instr``'s name and shape.
    """
    out = instr.shape
    src_order = _major_to_minor(operand_shape)
    dst_order = _major_to_minor(out)
    steps: list[HloInstruction] = []
    current, current_dims = instr.operands[0], operand_shape.dims
    if operand_shape.dtype != out.dtype:
        # A bitcast may also reinterpret the element type (e.g. u32 -> f32).
        if DTYPE_BITS.get(operand_shape.dtype) != DTYPE_BITS.get(out.dtype):
            raise ValueError(
                f"bitcast {instr.name!r} from {operand_shape} to {out} changes the element "
                "width; the MPMD runtime cannot express it without layouts"
            )
        name = fresh(f"{instr.name}.converted")
        steps.append(
            HloInstruction(
                name,
                "bitcast-convert",
                Shape(out.dtype, operand_shape.dims, layout=operand_shape.layout),
                (current,),
            )
        )
        current = name
    if src_order != tuple(range(operand_shape.rank)):
        dims = tuple(operand_shape.dims[d] for d in src_order)
        name = fresh(f"{instr.name}.physical")
        steps.append(
            HloInstruction(
                name,
                "transpose",
                Shape(out.dtype, dims),
                (current,),
                FrozenDict({"dimensions": "{" + ",".join(map(str, src_order)) + "}"}),
            )
        )
        current, current_dims = name, dims
    physical_out = tuple(out.dims[d] for d in dst_order)
    final_transpose = dst_order != tuple(range(out.rank))
    if current_dims != physical_out or not final_transpose:
        last = not final_transpose
        name = instr.name if last else fresh(f"{instr.name}.reshaped")
        shape = out if last else Shape(out.dtype, physical_out)
        steps.append(HloInstruction(name, "reshape", shape, (current,), metadata=instr.metadata))
        current = name
    if final_transpose:
        inverse = tuple(dst_order.index(i) for i in range(out.rank))
        steps.append(
            HloInstruction(
                instr.name,
                "transpose",
                out,
                (current,),
                FrozenDict({"dimensions": "{" + ",".join(map(str, inverse)) + "}"}),
                metadata=instr.metadata,
            )
        )
    return steps


def expand_bitcasts(comp: HloComputation, taken: set[str]) -> HloComputation:
    """A computation with every array ``bitcast`` replaced by :func:`expand_bitcast`."""
    if not any(i.opcode == "bitcast" for i in comp.instructions):
        return comp
    shapes = {i.name: i.shape for i in comp.instructions}
    fresh = _fresh_names(taken)
    out: list[HloInstruction] = []
    for instr in comp.instructions:
        operand = shapes.get(instr.operands[0]) if instr.operands else None
        if instr.opcode == "bitcast" and operand is not None and operand.is_array:
            out.extend(expand_bitcast(instr, operand, fresh))
        else:
            out.append(instr)
    return HloComputation(comp.name, tuple(out), comp.root_name, comp.execution_thread)


def portable_module(module: HloModule) -> HloModule:
    """``module`` with bitcasts expanded in every computation, so that it compiles through
    :func:`hlo_go.xla.bridge.compile_hlo_text` (HLO → StableHLO) with its meaning intact."""
    taken = {i.name for _, i in module.instructions()} | set(module.computations)
    computations = FrozenDict(
        (name, expand_bitcasts(comp, taken)) for name, comp in module.computations.items()
    )
    attributes = FrozenDict(
        (k, v) for k, v in module.attributes.items() if k not in _DROPPED_HEADER
    )
    return HloModule(module.name, computations, module.entry_name, attributes, module.stack_frames)


# Header attributes that describe the whole program, not a segment of it, or that the
# expanded module no longer satisfies.
_DROPPED_HEADER = frozenset(
    {"entry_computation_layout", "is_scheduled", "input_output_alias", "buffer_donor"}
)


def _fresh_names(taken: set[str]) -> Callable[[str], str]:
    counter = [0]

    def fresh(stem: str) -> str:
        stem = _NAME_OK.sub("_", stem)
        name = stem
        while name in taken:
            counter[0] += 1
            name = f"{stem}.{counter[0]}"
        taken.add(name)
        return name

    return fresh


def called_computations(module: HloModule, roots: Iterable[HloInstruction]) -> list[str]:
    """Names of the computations ``roots`` call, transitively, in the module's text order
    (callees before callers)."""
    needed: set[str] = set()
    stack = [c for i in roots for c in i.called_computations]
    while stack:
        name = stack.pop()
        if name in needed or name not in module.computations:
            continue
        needed.add(name)
        for instr in module.computations[name].instructions:
            stack.extend(instr.called_computations)
    return [name for name in module.computations if name in needed]


def segment_module(
    module: HloModule,
    part: Partition,
    segment: Segment,
    *,
    donate: Sequence[int] = (),
    fusion_groups: np.ndarray | None = None,
    callee_cache: dict[str, HloComputation] | None = None,
) -> HloModule:
    """The HLO module of one segment.

    Args:
      module: the module the partition was made from.
      part: the partition.
      segment: one of ``part.segments``.
      donate: parameter numbers whose buffers the segment may reuse for an output of
        the same shape (written as ``input_output_alias``); a parameter with no
        matching output is left alone.
      fusion_groups: ``int[N]`` group per node; groups of two or more nodes of this
        segment become ``kLoop`` fusions (:func:`hlo_go.xla.apply_fusion`).
      callee_cache: computations already made portable, by name (shared across segments).

    Returns:
      The segment's module: parameters ``inputs``, result ``tuple(outputs)``.
    """
    flat = part.flat
    structure = part.structure
    taken: set[str] = set(module.computations)
    fresh = _fresh_names(taken)
    in_segment = set(segment.nodes)
    name_of: dict[int, str] = {}
    for v in (*segment.cloned, *segment.nodes):
        name_of[v] = fresh(flat.names[v].replace("/", "."))
    body: list[HloInstruction] = []
    shape_of: dict[str, Shape] = {}

    def emit(instr: HloInstruction) -> None:
        body.append(instr)
        shape_of[instr.name] = instr.shape

    param_of: dict[Leaf, str] = {}
    for k, leaf in enumerate(segment.inputs):
        name = fresh(f"in{k}.{flat.names[leaf.node].replace('/', '.')}")
        param_of[leaf] = name
        emit(HloInstruction(name, "parameter", part.leaf_shape(leaf), parameter_number=k))
    for v in segment.cloned:
        emit(flat.instructions[v].replace(name=name_of[v], control_predecessors=(), sharding=None))

    gte_of: dict[Leaf, str] = {}
    tuple_of: dict[int, str] = {}

    def leaf_name(leaf: Leaf) -> str:
        if leaf.node in in_segment or part.kind[leaf.node] == CLONED:
            if not leaf.path:
                return name_of[leaf.node]
            cached = gte_of.get(leaf)
            if cached is not None:
                return cached
            parent = leaf_name(Leaf(leaf.node, leaf.path[:-1]))
            name = fresh(f"{name_of[leaf.node]}.gte{'.'.join(map(str, leaf.path))}")
            emit(
                HloInstruction(
                    name,
                    "get-tuple-element",
                    part.leaf_shape(leaf),
                    (parent,),
                    FrozenDict({"index": str(leaf.path[-1])}),
                )
            )
            gte_of[leaf] = name
            return name
        return param_of[leaf]

    def value_name(value: Structure) -> str:
        if isinstance(value, Leaf):
            return leaf_name(value)
        cached = tuple_of.get(id(value))
        if cached is not None:
            return cached
        parts = [value_name(v) for v in value]
        shapes = [shape_of[p] for p in parts]
        name = fresh("tuple")
        emit(HloInstruction(name, "tuple", tuple_shape(shapes), tuple(parts)))
        tuple_of[id(value)] = name
        return name

    expansion: dict[str, list[str]] = {}
    for v in segment.nodes:
        instr = flat.instructions[v]
        operands = tuple(value_name(structure[o]) for o in flat.operands[v])
        controls = tuple(
            name_of[c] for c in flat.control_predecessors[v] if c in in_segment and c != v
        )
        new = instr.replace(
            name=name_of[v], operands=operands, control_predecessors=controls, sharding=None
        )
        if instr.opcode == "bitcast" and instr.shape.is_array:
            expanded = expand_bitcast(new, shape_of[operands[0]], fresh)
            for e in expanded:
                emit(e)
            expansion[new.name] = [e.name for e in expanded]
        else:
            emit(new)

    out_names = [leaf_name(leaf) for leaf in segment.outputs]
    root_shape = tuple_shape([part.leaf_shape(leaf) for leaf in segment.outputs])
    root_name = fresh("outputs")
    body.append(HloInstruction(root_name, "tuple", root_shape, tuple(out_names)))
    entry_name = fresh(f"segment_{segment.index}")
    entry = HloComputation(entry_name, tuple(body), root_name)

    cache = {} if callee_cache is None else callee_cache
    computations: dict[str, HloComputation] = {}
    all_taken = taken | {i.name for i in body}
    for name in called_computations(module, body):
        comp = cache.get(name)
        if comp is None:
            comp = cache[name] = expand_bitcasts(module.computations[name], all_taken)
        computations[name] = comp
    computations[entry_name] = entry
    attributes: dict[str, str] = {}
    aliases = _aliases(
        [part.leaf_shape(leaf) for leaf in segment.inputs],
        [part.leaf_shape(leaf) for leaf in segment.outputs],
        donate,
    )
    if aliases:
        # A one-element result tuple reaches XLA as a plain array (the StableHLO path
        # untuples it), so its alias has the empty output index.
        single = len(segment.outputs) == 1
        attributes["input_output_alias"] = (
            "{ "
            + ", ".join(f"{{{'' if single else o}}}: ({p}, {{}}, may-alias)" for p, o in aliases)
            + " }"
        )
    seg_module = HloModule(
        _NAME_OK.sub("_", f"{module.name}.segment_{segment.index}.device_{segment.device}"),
        FrozenDict(computations),
        entry_name,
        FrozenDict(attributes),
        module.stack_frames,
    )
    if fusion_groups is not None:
        groups = _single_output(entry, _segment_groups(segment, fusion_groups, name_of, expansion))
        if groups:
            seg_module = apply_fusion(seg_module, groups)
    return seg_module


def _single_output(entry: HloComputation, groups: list[list[str]]) -> list[list[str]]:
    """The groups with one output (one member read outside the group).

    A multi-output ``kLoop`` fusion does not survive the HLO → StableHLO compile path
    (measured on jaxlib 0.10.2: XLA aborts on a missing layout), so those groups are
    left for XLA to fuse; they still run in one segment.
    """
    users: dict[str, list[str]] = {}
    for instr in entry.instructions:
        for operand in instr.operands:
            users.setdefault(operand, []).append(instr.name)
    kept = []
    for group in groups:
        members = set(group)
        outputs = [m for m in group if any(u not in members for u in users.get(m, ()))]
        if len(outputs) <= 1:
            kept.append(group)
    return kept


def _aliases(
    inputs: Sequence[Shape], outputs: Sequence[Shape], donate: Sequence[int]
) -> list[tuple[int, int]]:
    """(parameter, output index) pairs: each donated parameter aliased to an unclaimed
    output of the same type, dimensions and layout."""
    free: dict[str, list[int]] = {}
    for o, shape in enumerate(outputs):
        if shape.is_array:
            free.setdefault(shape.to_text(), []).append(o)
    pairs: list[tuple[int, int]] = []
    for p in donate:
        slots = free.get(inputs[p].to_text())
        if slots:
            pairs.append((p, slots.pop(0)))
    return pairs


def donated_aliases(
    part: Partition, segment: Segment, donate: Sequence[int]
) -> list[tuple[int, int]]:
    """The (parameter, output) aliases :func:`segment_module` writes for ``donate``."""
    return _aliases(
        [part.leaf_shape(leaf) for leaf in segment.inputs],
        [part.leaf_shape(leaf) for leaf in segment.outputs],
        donate,
    )


def _segment_groups(
    segment: Segment,
    fusion_groups: np.ndarray,
    name_of: Mapping[int, str],
    expansion: Mapping[str, list[str]],
) -> list[list[str]]:
    members: dict[int, list[str]] = {}
    for v in segment.nodes:
        name = name_of[v]
        members.setdefault(int(fusion_groups[v]), []).extend(expansion.get(name, [name]))
    return [g for g in members.values() if len(g) > 1]


def is_program_input(part: Partition, leaf: Leaf) -> bool:
    """Whether a leaf is an entry parameter (a program input)."""
    return part.kind[leaf.node] == PARAMETER


def is_computed(part: Partition, leaf: Leaf) -> bool:
    """Whether a leaf is produced by some segment."""
    return part.kind[leaf.node] == COMPUTE
