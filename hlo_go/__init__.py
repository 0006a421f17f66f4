"""hlo-go: transferable graph optimizers for XLA HLO.

Front doors: ``@hlo_go.jit`` (:mod:`hlo_go.api`), :func:`hlo_go.load_policy` (shipped
pretrained policies, :mod:`hlo_go.pretrained`) and the ``hlo-go`` command.

Subpackages: :mod:`hlo_go.hlo` (HLO text ⇄ IR, costs), :mod:`hlo_go.graph` (OpGraph and
padded GraphsTuples), :mod:`hlo_go.xla` (XLA bridges: compile hooks, fusion and schedule
lowering, profiling).
"""

from hlo_go.api import OptimizedFunction, Options, jit
from hlo_go.errors import HloGoError, HloGoWarning
from hlo_go.hlo import HloModule, HloParseError, load_hlo, parse_hlo
from hlo_go.pretrained import load_policy

__version__ = "0.2.0"
__all__ = [
    "HloGoError",
    "HloGoWarning",
    "HloModule",
    "HloParseError",
    "OptimizedFunction",
    "Options",
    "__version__",
    "jit",
    "load_hlo",
    "load_policy",
    "parse_hlo",
]
