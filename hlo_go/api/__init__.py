"""The decorator front door: ``@hlo_go.jit`` and its options.

Modules: :mod:`~hlo_go.api.jit` (the decorator and :class:`OptimizedFunction`),
:mod:`~hlo_go.api.options` (:class:`Options`), :mod:`~hlo_go.api.decide` (policy,
search or baseline decisions), :mod:`~hlo_go.api.cache` (decisions on disk by HLO
fingerprint and environment), :mod:`~hlo_go.api.record` (what ``.explain()`` reports),
:mod:`~hlo_go.api.signature` (input signatures and static arguments),
:mod:`~hlo_go.api.verdict` (the statistical keep rule), :mod:`~hlo_go.api.measure`
(interleaved timing by that rule), :mod:`~hlo_go.api.inputs` (finite check inputs).
"""

from hlo_go.api.cache import CacheWriteWarning, DecisionCache, environment, fingerprint
from hlo_go.api.decide import Candidate, Decided, candidates, decide
from hlo_go.api.jit import OptimizedFunction, jit
from hlo_go.api.options import LOWERABLE_TASKS, POLICY, Options, default_cache_dir
from hlo_go.api.record import HLO_GO, JAX_JIT, Record
from hlo_go.api.verdict import Estimate, Rule, Verdict, estimate, judge

__all__ = [
    "HLO_GO",
    "JAX_JIT",
    "LOWERABLE_TASKS",
    "POLICY",
    "CacheWriteWarning",
    "Candidate",
    "Decided",
    "DecisionCache",
    "Estimate",
    "OptimizedFunction",
    "Options",
    "Record",
    "Rule",
    "Verdict",
    "candidates",
    "decide",
    "default_cache_dir",
    "environment",
    "estimate",
    "fingerprint",
    "jit",
    "judge",
]
