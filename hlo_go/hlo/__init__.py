"""HLO text ⇄ IR, and per-instruction cost.

Public names::

    parse_hlo(text) -> HloModule        load_hlo(path) -> HloModule
    HloModule.to_text() -> str           HloParseError (a ValueError with .line, .column)
    verify_module(module) -> HloModule   HloVerifyError (shapes, indices, dimensions, sizes)
    HloFileError (a bad or truncated .gz)
    Shape, Layout, parse_shape           instruction_cost, module_cost, Cost
"""

from hlo_go.hlo.cost import Cost, computation_cost, instruction_cost, module_cost
from hlo_go.hlo.ir import (
    FrozenDict,
    HloComputation,
    HloInstruction,
    HloModule,
    StackFrameTable,
    Unquoted,
)
from hlo_go.hlo.opcodes import (
    ELEMENTWISE_OPCODES,
    HOLDER_OPCODES,
    OPCODE_ARITY,
    OPCODES,
    TRANSCENDENTAL_OPCODES,
    VIEW_OPCODES,
)
from hlo_go.hlo.parser import HloFileError, HloParseError, load_hlo, parse_hlo
from hlo_go.hlo.shape import Layout, Shape, ShapeSyntaxError, parse_shape, tuple_shape
from hlo_go.hlo.summary import ComputationSummary, summarize
from hlo_go.hlo.verify import HloVerifyError, verify_module

__all__ = [
    "ELEMENTWISE_OPCODES",
    "HOLDER_OPCODES",
    "OPCODES",
    "OPCODE_ARITY",
    "TRANSCENDENTAL_OPCODES",
    "VIEW_OPCODES",
    "ComputationSummary",
    "Cost",
    "FrozenDict",
    "HloComputation",
    "HloFileError",
    "HloInstruction",
    "HloModule",
    "HloParseError",
    "HloVerifyError",
    "Layout",
    "Shape",
    "ShapeSyntaxError",
    "StackFrameTable",
    "Unquoted",
    "computation_cost",
    "instruction_cost",
    "load_hlo",
    "module_cost",
    "parse_hlo",
    "parse_shape",
    "summarize",
    "tuple_shape",
    "verify_module",
]
