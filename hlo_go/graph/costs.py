"""Node costs with loop trip counts applied: the cost of every node of an OpGraph.

:func:`hlo_go.hlo.instruction_cost` follows XLA's HloCostAnalysis, which counts a
``while`` loop's body and condition once. A graph node stands for all the work
its instruction does in one run of the module, so :class:`LoopCosting` differs
from it for control flow, and only there:

* ``while``: trip count × (cost of the body + cost of the condition), where the
  trip count comes from :func:`hlo_go.graph.trip_count.while_trip_count` (XLA's
  ``known_trip_count``, else inferred from the loop's counter, else
  ``default_trip_count``). The condition's final, exiting evaluation is not
  counted.
* ``conditional``: the most expensive branch, as XLA's HloCostAnalysis takes it:
  the maximum flops and the maximum transcendentals over branches, and the
  bytes read and written of the branch that accesses the most bytes. (A mean
  would need branch probabilities HLO does not carry; the maximum is the cost
  of the worst case and what XLA reports.)
* ``call``: the callee's cost.

The cost of a computation is the sum over its instructions of these rules, so
loops nested in loop bodies, calls and branches multiply out: a loop of 3 trips
inside a loop of 5 trips counts its body 15 times. Every other instruction
(``fusion`` included: its fused body's aggregate the XLA way) costs exactly
what :func:`hlo_go.hlo.instruction_cost` says.
"""

from __future__ import annotations

from hlo_go.graph.trip_count import DEFAULT_TRIP_COUNT, TripCount, while_trip_count
from hlo_go.hlo import (
    HOLDER_OPCODES,
    VIEW_OPCODES,
    Cost,
    HloComputation,
    HloInstruction,
    HloModule,
    instruction_cost,
)

# Opcodes that launch no work of their own (views of buffers, and buffers that exist
# before the run).
_NO_LAUNCH: frozenset[str] = VIEW_OPCODES | HOLDER_OPCODES

_ZERO = Cost()
_CONTROL_FLOW = frozenset({"while", "conditional", "call"})


def _callee(value: str) -> str:
    return value.strip().lstrip("%")


def max_branch_cost(costs: list[Cost]) -> Cost:
    """The cost of a ``conditional`` from its branches' costs (XLA's maximum rule).

    Args:
      costs: one cost per branch.

    Returns:
      Maximum flops, maximum transcendentals, and the bytes read and written of the
      branch with the most bytes accessed; zero for no branches.
    """
    if not costs:
        return _ZERO
    most_bytes = max(costs, key=lambda cost: cost.bytes_accessed)
    return Cost(
        max(cost.flops for cost in costs),
        max(cost.transcendentals for cost in costs),
        most_bytes.bytes_read,
        most_bytes.bytes_written,
    )


class LoopCosting:
    """Trip-count-aware costs of one module's instructions (memoized per computation).

    Args:
      module: the module.
      default_trip_count: the trip count of loops whose count is unknown.
    """

    def __init__(self, module: HloModule, *, default_trip_count: int = DEFAULT_TRIP_COUNT) -> None:
        self.module = module
        self.default_trip_count = default_trip_count
        self._computations: dict[str, Cost] = {}
        self._launches: dict[str, int] = {}
        self._trips: dict[tuple[str, str], TripCount] = {}

    def trip_count(self, comp: HloComputation, loop: HloInstruction) -> TripCount:
        """The trip count of a ``while`` in ``comp`` (see :mod:`hlo_go.graph.trip_count`)."""
        key = (comp.name, loop.name)
        trips = self._trips.get(key)
        if trips is None:
            trips = while_trip_count(self.module, comp, loop, default=self.default_trip_count)
            self._trips[key] = trips
        return trips

    def computation(self, name: str) -> Cost:
        """Cost of one run of a computation: the sum of its instructions' costs."""
        cost = self._computations.get(name)
        if cost is None:
            comp = self.module.computations[name]
            total = [0.0, 0.0, 0.0, 0.0]
            for instr in comp.instructions:
                c = self.instruction(comp, instr)
                total[0] += c.flops
                total[1] += c.transcendentals
                total[2] += c.bytes_read
                total[3] += c.bytes_written
            cost = Cost(*total)
            self._computations[name] = cost
        return cost

    def computation_launches(self, name: str) -> int:
        """Kernels one run of a computation launches (see :meth:`launches`)."""
        count = self._launches.get(name)
        if count is None:
            comp = self.module.computations[name]
            count = sum(self.launches(comp, instr) for instr in comp.instructions)
            self._launches[name] = count
        return count

    def launches(self, comp: HloComputation, instr: HloInstruction) -> int:
        """Kernels an instruction launches over one run of ``comp``.

        0 for views and holders (``tuple``, ``parameter``, ...); a ``while`` 1 (its own)
        plus trip count × those of its body and condition; a ``conditional`` 1 plus its
        largest branch's; a ``call`` its callee's; any other instruction (a fusion
        included) 1.

        Args:
          comp: the computation holding ``instr``.
          instr: the instruction.

        Returns:
          The count.
        """
        op = instr.opcode
        if op in _NO_LAUNCH:
            return 0
        attrs = instr.attributes
        if op == "while":
            inner = self.computation_launches(_callee(attrs["body"]))
            inner += self.computation_launches(_callee(attrs["condition"]))
            return 1 + self.trip_count(comp, instr).count * inner
        if op == "conditional":
            branches = [self.computation_launches(b) for b in instr.called_computations]
            return 1 + max(branches, default=0)
        if op == "call" and instr.called_computations:
            return sum(self.computation_launches(c) for c in instr.called_computations)
        return 1

    def instruction(self, comp: HloComputation, instr: HloInstruction) -> Cost:
        """Cost of an instruction over one run of ``comp``, loop trip counts applied.

        Args:
          comp: the computation holding ``instr``.
          instr: the instruction.

        Returns:
          Its :class:`~hlo_go.hlo.Cost` by the rules of this module's docstring.
        """
        op = instr.opcode
        if op not in _CONTROL_FLOW:
            return instruction_cost(self.module, instr, comp)
        attrs = instr.attributes
        if op == "while":
            body = self.computation(_callee(attrs["body"]))
            cond = self.computation(_callee(attrs["condition"]))
            return (body + cond).scaled(float(self.trip_count(comp, instr).count))
        if op == "conditional":
            return max_branch_cost([self.computation(b) for b in instr.called_computations])
        called = instr.called_computations
        if not called:
            return instruction_cost(self.module, instr, comp)
        return sum((self.computation(name) for name in called), _ZERO)
