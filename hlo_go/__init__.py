"""hlo-go: transferable graph optimizers for XLA HLO.

Subpackages: :mod:`hlo_go.hlo` (HLO text ⇄ IR, costs), :mod:`hlo_go.graph` (OpGraph and
padded GraphsTuples), :mod:`hlo_go.xla` (XLA bridges: compile hooks, fusion and schedule
lowering, profiling).
"""

from hlo_go.hlo import HloModule, HloParseError, load_hlo, parse_hlo

__version__ = "0.1.0"
__all__ = ["HloModule", "HloParseError", "__version__", "load_hlo", "parse_hlo"]
