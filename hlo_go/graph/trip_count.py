"""Trip counts of ``while`` loops: read from XLA's backend config or inferred from the loop.

XLA writes ``backend_config={"known_trip_count":{"n":"5"}}`` on the loops of
optimized modules whose trip count it proved. Unoptimized text (JAX's lowering of
``scan`` and ``fori_loop``) has no such config, so :func:`while_trip_count` infers
the count from the loop itself when the loop has the usual counter form:

* The condition's root is a ``compare`` (or a ``fusion`` whose fused root is one)
  of two scalar integer values.
* One side is a *counter*: loop-state element ``k`` plus a constant offset, where
  the body's root is a ``tuple`` whose element ``k`` is element ``k`` of the incoming
  state plus (``add``) or minus (``subtract``) a nonzero constant step.
* The other side is *invariant*: an integer constant, or a state element that the
  body passes through unchanged.
* The initial values of both state elements are integer constants in the ``tuple``
  the ``while`` takes as its operand. When that operand is a parameter of a
  computation with a single ``call`` site (XLA:CPU wraps small loops in such
  calls), the caller's operand is followed instead.

Values are followed through ``copy``, ``bitcast``, ``convert`` and ``reshape``,
through ``get-tuple-element`` of the loop state, and into fusions (fusion
parameters stand for the fusion's operands). With counter value ``v_t = v_0 + t·s``
before iteration ``t`` and bound ``b``, the loop runs while ``v_t <dir> b``:
``LT``: ⌈(b - v_0) / s⌉, ``LE``: ⌊(b - v_0) / s⌋ + 1 (for ``s > 0``), ``GT``/``GE``
mirrored for ``s < 0``, ``NE``: (b - v_0) / s when that is a whole number ≥ 0,
``EQ``: 1 if v_0 = b else 0; and 0 whenever the condition fails at the start. A
counter on the right-hand side flips the direction. Any other loop (a
data-dependent bound, a counter that never reaches its bound, a condition of
another form) has an unknown trip count: :func:`while_trip_count` then reports
``default`` with ``source="unknown"``.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

from hlo_go.hlo import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.attributes import int_literal, known_trip_count

# The trip count a loop gets when neither its backend config nor its form tells.
DEFAULT_TRIP_COUNT = 1

# Trip-count sources, as TripCount.source reports them.
FROM_BACKEND_CONFIG = "backend_config"
FROM_CONDITION = "condition"
UNKNOWN = "unknown"

_PASS_THROUGH = frozenset({"copy", "bitcast", "convert", "reshape"})
_FLIPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE", "EQ": "EQ"}
_MAX_DEPTH = 64


class TripCount(NamedTuple):
    """How many times a ``while`` loop's body runs.

    Attributes:
      count: the trip count (the default when unknown).
      source: ``"backend_config"`` (XLA's ``known_trip_count``), ``"condition"``
        (inferred from the loop's counter), or ``"unknown"`` (``count`` is the default).
    """

    count: int
    source: str

    @property
    def known(self) -> bool:
        """Whether the count was read or inferred rather than defaulted."""
        return self.source != UNKNOWN


class _LoopState:
    """Stands for the loop-state tuple (parameter 0 of a loop's condition or body)."""


_LOOP_STATE = _LoopState()

# A scalar integer value as (state element index or None for a constant, offset).
_Affine = tuple[int | None, int]
_Value = _Affine | _LoopState | None


def _called(module: HloModule, instr: HloInstruction) -> HloComputation | None:
    called = instr.called_computations
    if len(called) != 1 or called[0] not in module.computations:
        return None
    return module.computations[called[0]]


def _value(
    module: HloModule,
    comp: HloComputation,
    name: str,
    params: dict[int, _Value],
    depth: int = 0,
) -> _Value:
    """What an instruction computes, as an affine function of the loop state, if it can tell.

    Args:
      module: the module.
      comp: the computation holding ``name``.
      name: instruction name.
      params: parameter number -> its value (``_LOOP_STATE`` for the loop state).
      depth: recursion depth (a guard).

    Returns:
      ``(k, c)`` for "state element k plus c", ``(None, c)`` for the constant c,
      ``_LOOP_STATE`` for the loop state itself, or None when unknown.
    """
    if depth > _MAX_DEPTH or name not in comp:
        return None
    instr = comp.instruction(name)
    op = instr.opcode
    if op == "parameter":
        return params.get(instr.parameter_number or 0)
    if op == "constant":
        literal = int_literal(instr)
        return None if literal is None else (None, literal)
    if not instr.operands and op != "fusion":
        return None
    if op == "get-tuple-element":
        base = _value(module, comp, instr.operands[0], params, depth + 1)
        if base is _LOOP_STATE and "index" in instr.attributes:
            return (int(instr.attributes["index"]), 0)
        return None
    if op in _PASS_THROUGH:
        if instr.shape.dims or instr.shape.is_tuple:
            return None
        inner = _value(module, comp, instr.operands[0], params, depth + 1)
        return inner if isinstance(inner, tuple) else None
    if op in ("add", "subtract") and len(instr.operands) == 2:
        a = _value(module, comp, instr.operands[0], params, depth + 1)
        b = _value(module, comp, instr.operands[1], params, depth + 1)
        if not isinstance(a, tuple) or not isinstance(b, tuple):
            return None
        if op == "subtract":
            return (a[0], a[1] - b[1]) if b[0] is None else None
        if a[0] is None:
            return (b[0], a[1] + b[1])
        return (a[0], a[1] + b[1]) if b[0] is None else None
    if op == "fusion":
        fused = _called(module, instr)
        if fused is None:
            return None
        inner_params = {
            i: _value(module, comp, operand, params, depth + 1)
            for i, operand in enumerate(instr.operands)
        }
        return _value(module, fused, fused.root_name, inner_params, depth + 1)
    return None


def _comparison(
    module: HloModule, comp: HloComputation, name: str, params: dict[int, _Value], depth: int = 0
) -> tuple[str, _Value, _Value] | None:
    """``(direction, lhs, rhs)`` of the compare that computes ``name``, if it is one."""
    if depth > _MAX_DEPTH:
        return None
    instr = comp.instruction(name)
    if instr.opcode == "compare" and len(instr.operands) == 2:
        direction = instr.attributes.get("direction", "")
        lhs = _value(module, comp, instr.operands[0], params)
        rhs = _value(module, comp, instr.operands[1], params)
        return direction, lhs, rhs
    if instr.opcode == "fusion":
        fused = _called(module, instr)
        if fused is None:
            return None
        inner_params = {
            i: _value(module, comp, operand, params) for i, operand in enumerate(instr.operands)
        }
        return _comparison(module, fused, fused.root_name, inner_params, depth + 1)
    return None


def _step(module: HloModule, body: HloComputation, index: int) -> int | None:
    """How much the body adds to state element ``index`` per iteration (0: unchanged)."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    value = _value(module, body, root.operands[index], {0: _LOOP_STATE})
    if not isinstance(value, tuple) or value[0] != index:
        return None
    return value[1]


def _initial(
    module: HloModule, init: tuple[HloComputation, HloInstruction], index: int
) -> int | None:
    """The constant initial value of state element ``index``, if the init tuple shows one."""
    comp, tuple_instr = init
    if tuple_instr.opcode != "tuple" or index >= len(tuple_instr.operands):
        return None
    value = _value(module, comp, tuple_instr.operands[index], {})
    if isinstance(value, tuple) and value[0] is None:
        return value[1]
    return None


def _call_sites(module: HloModule) -> dict[str, list[tuple[HloComputation, HloInstruction]]]:
    """Computation name -> the ``call`` instructions calling it (memoized per module)."""
    key = id(module)
    entry = _CALL_SITES.get(key)
    if entry is not None and entry[0]() is module:
        return entry[1]
    sites: dict[str, list[tuple[HloComputation, HloInstruction]]] = {}
    for comp, instr in module.instructions():
        if instr.opcode == "call":
            for name in instr.called_computations:
                sites.setdefault(name, []).append((comp, instr))
    _CALL_SITES[key] = (weakref.ref(module, lambda _: _CALL_SITES.pop(key, None)), sites)
    return sites


_CALL_SITES: dict[int, tuple[weakref.ref[HloModule], dict]] = {}


def _through_call_parameters(
    module: HloModule, comp: HloComputation, instr: HloInstruction
) -> tuple[HloComputation, HloInstruction]:
    """Follows a parameter of a computation with one ``call`` site to the caller's operand."""
    for _ in range(_MAX_DEPTH):
        if instr.opcode != "parameter":
            break
        sites = _call_sites(module).get(comp.name, [])
        if len(sites) != 1:
            break
        caller, call = sites[0]
        number = instr.parameter_number or 0
        if number >= len(call.operands) or call.operands[number] not in caller:
            break
        comp, instr = caller, caller.instruction(call.operands[number])
    return comp, instr


def _trips(direction: str, start: int, step: int, bound: int) -> int | None:
    """Iterations of ``v = start; while v <direction> bound: v += step``, None if unbounded."""
    if direction == "LT" and step > 0:
        return max(0, -(-(bound - start) // step))
    if direction == "LE" and step > 0:
        return max(0, (bound - start) // step + 1)
    if direction == "GT" and step < 0:
        return max(0, -(-(start - bound) // -step))
    if direction == "GE" and step < 0:
        return max(0, (start - bound) // -step + 1)
    if direction == "NE" and step != 0:
        distance = bound - start
        if distance % step == 0 and distance // step >= 0:
            return distance // step
    if direction == "EQ" and step != 0:
        return 1 if start == bound else 0
    if direction in ("LT", "LE", "GT", "GE", "NE", "EQ"):
        stops_at_once = {
            "LT": start >= bound,
            "LE": start > bound,
            "GT": start <= bound,
            "GE": start < bound,
            "NE": start == bound,
            "EQ": start != bound,
        }[direction]
        if stops_at_once:
            return 0
    return None


def infer_trip_count(
    module: HloModule,
    comp: HloComputation,
    loop: HloInstruction,
    *,
    init: tuple[HloComputation, HloInstruction] | None = None,
) -> int | None:
    """The trip count of a ``while`` inferred from its condition, body and init tuple.

    Args:
      module: the module holding the loop.
      comp: the computation holding ``loop``.
      loop: the ``while`` instruction.
      init: where the loop's initial state is built, as (computation, instruction).
        None: ``loop``'s operand in ``comp``; when that is a parameter of a
        computation called from exactly one ``call`` (XLA:CPU wraps small loops in
        such calls), the caller's operand instead, repeatedly.

    Returns:
      The trip count when the loop has the counter form this module's docstring
      describes, else None.
    """
    cond_name = loop.attributes.get("condition", "").strip().lstrip("%")
    body_name = loop.attributes.get("body", "").strip().lstrip("%")
    if cond_name not in module.computations or body_name not in module.computations:
        return None
    cond, body = module.computations[cond_name], module.computations[body_name]
    if init is None:
        if not loop.operands or loop.operands[0] not in comp:
            return None
        init = _through_call_parameters(module, comp, comp.instruction(loop.operands[0]))
    comparison = _comparison(module, cond, cond.root_name, {0: _LOOP_STATE})
    if comparison is None:
        return None
    direction, lhs, rhs = comparison
    if not isinstance(lhs, tuple) or not isinstance(rhs, tuple):
        return None

    def resolve(side: _Affine) -> tuple[int, int] | None:
        """(initial value, step) of one side of the compare."""
        index, offset = side
        if index is None:
            return offset, 0
        start = _initial(module, init, index)
        step = _step(module, body, index)
        if start is None or step is None:
            return None
        return start + offset, step

    left, right = resolve(lhs), resolve(rhs)
    if left is None or right is None:
        return None
    if left[1] != 0 and right[1] == 0:
        return _trips(direction, left[0], left[1], right[0])
    if right[1] != 0 and left[1] == 0:
        return _trips(_FLIPPED.get(direction, ""), right[0], right[1], left[0])
    return None


def while_trip_count(
    module: HloModule,
    comp: HloComputation,
    loop: HloInstruction,
    *,
    init: tuple[HloComputation, HloInstruction] | None = None,
    default: int = DEFAULT_TRIP_COUNT,
) -> TripCount:
    """How many times a ``while`` loop's body runs.

    Args:
      module: the module holding the loop.
      comp: the computation holding ``loop``.
      loop: the ``while`` instruction.
      init: where the initial state is built, if not ``loop``'s operand in ``comp``
        (see :func:`infer_trip_count`).
      default: the count reported when it is neither given nor inferable.

    Returns:
      XLA's ``known_trip_count`` from the backend config when present; else the
      count inferred by :func:`infer_trip_count`; else ``default`` with
      ``source="unknown"``.
    """
    known = known_trip_count(loop.backend_config)
    if known is not None:
        return TripCount(known, FROM_BACKEND_CONFIG)
    inferred = infer_trip_count(module, comp, loop, init=init)
    if inferred is not None:
        return TripCount(inferred, FROM_CONDITION)
    return TripCount(default, UNKNOWN)
