"""The decorator front door: ``@hlo_go.jit`` and its options.

Modules: :mod:`~hlo_go.api.jit` (the decorator and :class:`OptimizedFunction`),
:mod:`~hlo_go.api.options` (:class:`Options`), :mod:`~hlo_go.api.decide` (policy,
search or baseline decisions), :mod:`~hlo_go.api.cache` (decisions on disk by HLO
fingerprint), :mod:`~hlo_go.api.record` (what ``.explain()`` reports),
:mod:`~hlo_go.api.signature` (input signatures and static arguments).
"""

from hlo_go.api.cache import DecisionCache, fingerprint
from hlo_go.api.decide import Decided, decide
from hlo_go.api.jit import OptimizedFunction, jit
from hlo_go.api.options import LOWERABLE_TASKS, Options, default_cache_dir
from hlo_go.api.record import HLO_GO, JAX_JIT, Record

__all__ = [
    "HLO_GO",
    "JAX_JIT",
    "LOWERABLE_TASKS",
    "Decided",
    "DecisionCache",
    "OptimizedFunction",
    "Options",
    "Record",
    "decide",
    "default_cache_dir",
    "fingerprint",
    "jit",
]
