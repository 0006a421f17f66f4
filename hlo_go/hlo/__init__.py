"""HLO text ⇄ IR, and per-instruction cost.

Public names::

    parse_hlo(text) -> HloModule        load_hlo(path) -> HloModule
    HloModule.to_text() -> str           HloParseError (a ValueError with .line, .column)
    HloComputation, HloInstruction       summarize(module) -> per-computation table
    Shape, Layout, parse_shape           ShapeSyntaxError (a ValueError)
    verify_module(module) -> HloModule   HloVerifyError (shapes, indices, dimensions, sizes)
    HloFileError (a bad or truncated .gz)
    instruction_cost, module_cost, Cost

Everything else (opcode sets, the IR's helper types) stays importable from here and from
its module (:mod:`~hlo_go.hlo.ir`, :mod:`~hlo_go.hlo.opcodes`, ...) but is not advertised.
"""

from hlo_go.hlo.cost import Cost, instruction_cost, module_cost
from hlo_go.hlo.cost import computation_cost as computation_cost
from hlo_go.hlo.ir import FrozenDict as FrozenDict
from hlo_go.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.ir import StackFrameTable as StackFrameTable
from hlo_go.hlo.ir import Unquoted as Unquoted
from hlo_go.hlo.opcodes import ELEMENTWISE_OPCODES as ELEMENTWISE_OPCODES
from hlo_go.hlo.opcodes import HOLDER_OPCODES as HOLDER_OPCODES
from hlo_go.hlo.opcodes import OPCODE_ARITY as OPCODE_ARITY
from hlo_go.hlo.opcodes import OPCODES as OPCODES
from hlo_go.hlo.opcodes import TRANSCENDENTAL_OPCODES as TRANSCENDENTAL_OPCODES
from hlo_go.hlo.opcodes import VIEW_OPCODES as VIEW_OPCODES
from hlo_go.hlo.parser import HloFileError, HloParseError, load_hlo, parse_hlo
from hlo_go.hlo.shape import Layout, Shape, ShapeSyntaxError, parse_shape
from hlo_go.hlo.shape import tuple_shape as tuple_shape
from hlo_go.hlo.summary import ComputationSummary as ComputationSummary
from hlo_go.hlo.summary import summarize
from hlo_go.hlo.verify import HloVerifyError, verify_module

__all__ = [
    "Cost",
    "HloComputation",
    "HloFileError",
    "HloInstruction",
    "HloModule",
    "HloParseError",
    "HloVerifyError",
    "Layout",
    "Shape",
    "ShapeSyntaxError",
    "instruction_cost",
    "load_hlo",
    "module_cost",
    "parse_hlo",
    "parse_shape",
    "summarize",
    "verify_module",
]
