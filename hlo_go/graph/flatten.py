"""Flattening: a module's entry computation with every ``call`` inlined.

The flattened entry is what XLA's ``CallInliner`` pass would make of it: each
``call`` instruction is replaced by the instructions of the computation it calls,
recursively (calls inside callees are inlined too); the callee's parameters
become the call's operands and the callee's root takes the call's place. So
the flattened instruction count is::

    count(comp) = Σ over instructions i of comp:
                    count(callee) - parameters(callee)   if i is a call
                    1                                    otherwise

and every other instruction (``parameter``, ``constant``, ``tuple``,
``get-tuple-element``, ``bitcast``, ``fusion``, ``while``, ``conditional``, ...)
stays one node, dead ones included (as :func:`hlo_go.hlo.module_cost` counts
them; XLA's pass also deletes instructions that inlining leaves dead, e.g. unused
``get-tuple-element`` instructions, so its count can be a little lower). The bodies of
``while``, ``conditional``, ``fusion``, reductions and async operations are not
flattened: those instructions stay single nodes.

Inlined instructions are named ``call/instr``: the call-site name, a ``/``, and
the callee's instruction name (``outer/inner/instr`` for nested calls). HLO names
never contain ``/``, so flattened names are unique.

Control predecessors follow the inlining: a dependency on a ``call`` becomes a
dependency on the node that takes its place (its callee's root), and a ``call``'s
own control predecessors become control predecessors of every node inlined
from it.
"""

from __future__ import annotations

from typing import NamedTuple

from hlo_go.hlo import HloComputation, HloInstruction, HloModule


class FlatEntry(NamedTuple):
    """The flattened entry computation, one entry per node in definition order.

    Attributes:
      names: unique node names (``call/instr`` for inlined instructions).
      instructions: the HLO instruction of each node.
      computations: the computation each node's instruction belongs to.
      operands: node ids of each node's operands, in operand order (repeats kept).
      control_predecessors: node ids each node must run after, without data.
      root: node id of the entry's root (after inlining).
    """

    names: list[str]
    instructions: list[HloInstruction]
    computations: list[HloComputation]
    operands: list[list[int]]
    control_predecessors: list[list[int]]
    root: int


def _callee(module: HloModule, call: HloInstruction) -> HloComputation:
    value = call.attributes.get("to_apply")
    names = [value.strip().lstrip("%")] if value is not None else list(call.called_computations)
    if len(names) != 1 or names[0] not in module.computations:
        raise ValueError(f"call {call.name!r} does not name one computation of the module")
    return module.computations[names[0]]


def flatten_entry(module: HloModule) -> FlatEntry:
    """Flattens the module's entry computation, inlining every ``call``.

    Args:
      module: a parsed module.

    Returns:
      The :class:`FlatEntry`; nodes are numbered in definition order, which puts
      every node after its data operands.

    Raises:
      ValueError: a ``call`` names no computation of the module, or calls nest
        deeper than the module has computations (a cycle).
    """
    flat = FlatEntry([], [], [], [], [], -1)
    pending: list[tuple[range, tuple[str, ...], dict[str, int]]] = []
    root = _inline(module, module.entry, "", None, flat, pending, 0)
    # Control predecessors are resolved last: the text may name ones defined later.
    for nodes, names, ids in pending:
        predecessors = [ids[name] for name in names if name in ids]
        for node in nodes:
            flat.control_predecessors[node].extend(p for p in predecessors if p != node)
    return flat._replace(root=root)


def _inline(
    module: HloModule,
    comp: HloComputation,
    prefix: str,
    arguments: list[int] | None,
    flat: FlatEntry,
    pending: list[tuple[range, tuple[str, ...], dict[str, int]]],
    depth: int,
) -> int:
    """Appends ``comp``'s nodes to ``flat``; returns the node id of its root.

    ``arguments`` are the node ids standing for ``comp``'s parameters (None for the
    entry, whose parameters are nodes). Control predecessors are queued on
    ``pending`` as (receiving nodes, names, name -> id scope).
    """
    if depth > len(module.computations):
        raise ValueError(f"calls nest deeper than the module's computations at {prefix!r}")
    ids: dict[str, int] = {}
    names, instructions, computations = flat.names, flat.instructions, flat.computations
    operands_of, control_of = flat.operands, flat.control_predecessors
    for instr in comp.instructions:
        op = instr.opcode
        if op == "parameter" and arguments is not None:
            number = instr.parameter_number or 0
            if number >= len(arguments):
                raise ValueError(
                    f"parameter {instr.name!r} of {comp.name!r} has no argument at the call site"
                )
            ids[instr.name] = arguments[number]
            continue
        operands = [ids[name] for name in instr.operands]
        first = len(names)
        if op == "call":
            callee = _callee(module, instr)
            ids[instr.name] = _inline(
                module, callee, f"{prefix}{instr.name}/", operands, flat, pending, depth + 1
            )
        else:
            ids[instr.name] = first
            names.append(prefix + instr.name)
            instructions.append(instr)
            computations.append(comp)
            operands_of.append(operands)
            control_of.append([])
        if instr.control_predecessors:
            pending.append((range(first, len(names)), instr.control_predecessors, ids))
    return ids[comp.root_name]
