"""Upper bounds of integer entry parameters that a module uses as indices.

A random integer input is only meaningful if it indexes inside the table it selects
from. JAX's ``take`` / ``take_along_axis`` gathers check their indices against the
table's size (``compare(i, n - 1), direction=LE``) and fill NaN where they are out of
range, so a BERT step given a segment id of 3 for a two-row token-type table returns
NaN in almost every output. :func:`index_bounds` finds such bounds in the HLO itself,
for any frontend, from three kinds of use:

- ``compare(i, K)`` against an integer constant (or a broadcast of one): ``LE K`` and
  ``GE`` with the operands swapped bound ``i`` by ``K + 1``; ``LT K`` / swapped ``GT``
  by ``K``;
- ``gather(table, i)`` with one start index: ``table``'s size along the indexed
  dimension, less the slice size, plus one;
- ``dynamic-slice(table, ..., i, ...)``: likewise for the dimension ``i`` starts.

A use counts through the ops that move an index's values without changing them
(bitcast, reshape, broadcast, transpose, copy, slice, integer converts, and the value
operands of ``select``, which is how JAX wraps negative indices).
"""

from __future__ import annotations

from collections.abc import Callable

from hlo_go.hlo import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.attributes import int_list, int_literal

# Ops whose result holds (some of) their first operand's values, unchanged.
_CARRIERS = frozenset({"bitcast", "reshape", "broadcast", "transpose", "copy", "slice"})

# An instruction's users in one computation: name -> [(user, operand position)].
_Users = dict[str, list[tuple[HloInstruction, int]]]

# A value being followed: (computation, instruction name, stack of (caller, call site)).
_Place = tuple[HloComputation, str, tuple[tuple[HloComputation, HloInstruction], ...]]

# compare direction -> (bound offset when the index is the left operand, when right).
_COMPARE_BOUNDS = {"LE": (1, None), "LT": (0, None), "GE": (None, 1), "GT": (None, 0)}


def _is_int(instr: HloInstruction) -> bool:
    return instr.shape.dtype.startswith(("s", "u"))


def _int_constant(comp: HloComputation, name: str) -> int | None:
    """The value of a scalar integer constant, or of a broadcast of one; else None."""
    instr = comp.instruction(name)
    if instr.opcode == "broadcast" and len(instr.operands) == 1:
        instr = comp.instruction(instr.operands[0])
    return int_literal(instr) if instr.opcode == "constant" else None


def _use_bound(comp: HloComputation, user: HloInstruction, position: int) -> int | None:
    """The bound that one use of an index value (operand ``position`` of ``user``) puts on
    it, or None when the use says nothing."""
    if user.opcode == "compare" and len(user.operands) == 2:
        offsets = _COMPARE_BOUNDS.get(user.attributes.get("direction", ""))
        constant = _int_constant(comp, user.operands[1 - position])
        if offsets is None or constant is None:
            return None
        offset = offsets[position]
        return None if offset is None else constant + offset
    if user.opcode == "gather" and position == 1:
        index_map = int_list(user.attributes.get("start_index_map"))
        sizes = int_list(user.attributes.get("slice_sizes"))
        table = comp.instruction(user.operands[0]).shape
        if len(index_map) != 1 or len(sizes) != len(table.dims):
            return None
        return table.dims[index_map[0]] - sizes[index_map[0]] + 1
    if user.opcode == "dynamic-slice" and position >= 1:
        sizes = int_list(user.attributes.get("dynamic_slice_sizes"))
        table = comp.instruction(user.operands[0]).shape
        dim = position - 1
        if dim >= len(sizes) or dim >= len(table.dims):
            return None
        return table.dims[dim] - sizes[dim] + 1
    return None


def _carries(comp: HloComputation, user: HloInstruction, position: int) -> bool:
    """Whether ``user``'s result holds operand ``position``'s values unchanged."""
    if user.opcode in _CARRIERS:
        return position == 0
    if user.opcode == "convert":
        return _is_int(user)
    if user.opcode == "select":
        return position in (1, 2)
    return False


def index_bounds(module: HloModule) -> dict[int, int]:
    """Exclusive upper bounds of the entry's integer parameters used as indices.

    Uses are followed into the computations that ``call`` and ``fusion`` instructions
    pass a value to (JAX's unoptimized modules wrap each ``take`` in a call).

    Args:
      module: any HLO module.

    Returns:
      ``{parameter number: bound}`` for each integer entry parameter whose values some
      use bounds (the tightest bound of all its uses, at least 1); parameters with no
      bounding use are absent.
    """
    users: dict[str, _Users] = {}

    def users_in(comp: HloComputation) -> _Users:
        if comp.name not in users:
            table: _Users = {}
            for instr in comp.instructions:
                for position, operand in enumerate(instr.operands):
                    table.setdefault(operand, []).append((instr, position))
            users[comp.name] = table
        return users[comp.name]

    bounds: dict[int, int] = {}
    for param in module.entry.parameters:
        if not _is_int(param) or param.parameter_number is None:
            continue
        bound = _tightest_bound(module, users_in, param.name)
        if bound is not None:
            bounds[param.parameter_number] = bound
    return bounds


def _tightest_bound(
    module: HloModule, users_in: Callable[[HloComputation], _Users], name: str
) -> int | None:
    """The tightest bound any use puts on the values of the entry instruction ``name``,
    following carriers, and calls in and out (the stack of call sites keeps a callee
    shared by several calls from mixing their values); None when no use bounds them."""
    found: list[int] = []
    start: _Place = (module.entry, name, ())
    frontier, seen = [start], {_key(start)}
    while frontier:
        comp, value, stack = frontier.pop()
        reached: list[_Place] = []
        if value == comp.root_name and stack:
            caller, call = stack[-1]
            reached.append((caller, call.name, stack[:-1]))
        for user, position in users_in(comp).get(value, ()):
            bound = _use_bound(comp, user, position)
            if bound is not None and bound >= 1:
                found.append(bound)
            if _carries(comp, user, position):
                reached.append((comp, user.name, stack))
            callee = _callee_parameter(module, user, position)
            if callee is not None:
                reached.append((*callee, (*stack, (comp, user))))
        for place in reached:
            if _key(place) not in seen:
                seen.add(_key(place))
                frontier.append(place)
    return min(found) if found else None


def _key(place: _Place) -> tuple[str, ...]:
    comp, value, stack = place
    return (comp.name, value, *(call.name for _, call in stack))


def _callee_parameter(
    module: HloModule, user: HloInstruction, position: int
) -> tuple[HloComputation, str] | None:
    """The parameter that operand ``position`` of a ``call`` or ``fusion`` becomes in the
    computation it calls, or None for other ops."""
    if user.opcode not in ("call", "fusion"):
        return None
    called = user.called_computations
    if len(called) != 1 or called[0] not in module.computations:
        return None
    callee = module.computations[called[0]]
    for param in callee.parameters:
        if param.parameter_number == position:
            return callee, param.name
    return None
