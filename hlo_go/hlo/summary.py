"""A per-computation summary of a module: instruction counts, flops, bytes."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from hlo_go.hlo.cost import Cost, instruction_cost
from hlo_go.hlo.ir import HloModule


class ComputationSummary(NamedTuple):
    """What one computation holds and costs (its own instructions, callees included
    the way XLA's cost analysis includes them)."""

    name: str
    is_entry: bool
    instructions: int
    top_opcodes: tuple[tuple[str, int], ...]
    cost: Cost


def summarize(module: HloModule, *, top: int = 3) -> list[ComputationSummary]:
    """One row per computation, in text order.

    Args:
      module: the module.
      top: how many of the most frequent opcodes to list per computation.
    """
    rows = []
    for comp in module.computations.values():
        cost = Cost()
        for instr in comp.instructions:
            cost = cost + instruction_cost(module, instr, comp)
        counts = Counter(i.opcode for i in comp.instructions if i.opcode != "parameter")
        rows.append(
            ComputationSummary(
                name=comp.name,
                is_entry=comp.name == module.entry_name,
                instructions=len(comp.instructions),
                top_opcodes=tuple(counts.most_common(top)),
                cost=cost,
            )
        )
    return rows
