"""Lowering decisions into XLA's own compile, and measuring them against XLA's default.

What a user calls: :func:`program` (a jax function, a ``Lowered`` or an HLO module, with its
pre-fusion :attr:`Program.graph`, the graph to decide on), :func:`lower` /
:meth:`Program.lower` (fusion and schedule decisions swapped into XLA's compile),
:func:`measure` / :func:`measure_many` (outputs checked, then timed against XLA's default),
:func:`capture_prefusion`, :func:`apply_fusion`, :func:`apply_schedule`,
:func:`compile_with`, :func:`profile_lowered`, and :func:`run_placed` /
:func:`measure_placed` (a placement over several devices). This package lowers decisions
it is given; :mod:`hlo_go.methods` turns method names into decisions.

Faces: :mod:`hlo_go.xla.placed` (placed, MPMD execution over several devices),
:mod:`hlo_go.xla.spmd` (SPMD partitioning by XLA); every other name lives in its module
(:mod:`~hlo_go.xla.fusion`, :mod:`~hlo_go.xla.schedule`, :mod:`~hlo_go.xla.hooks`,
:mod:`~hlo_go.xla.inputs`, :mod:`~hlo_go.xla.arbiter`, :mod:`~hlo_go.xla.passes`,
:mod:`~hlo_go.xla.timing`, ...). Names this package exported before keep working for one
release, with a ``DeprecationWarning`` naming their home.
"""

import importlib
import warnings
from typing import Any

from hlo_go.xla.fusion import (
    FusionError,
    apply_fusion,
)
from hlo_go.xla.hooks import (
    capture_prefusion,
)
from hlo_go.xla.lowering import (
    MEMORY_ORDER,
    DecisionsMismatchError,
    Executable,
    LoweringError,
    Order,
    Program,
    compile_hlo,
    lower,
    program,
)
from hlo_go.xla.measure import (
    Measurement,
    Variant,
    measure,
    measure_many,
    outputs_match,
)
from hlo_go.xla.optimized import OptimizedModuleError, recover_prefusion
from hlo_go.xla.placed import (
    measure_placed,
    run_placed,
)
from hlo_go.xla.profile import (
    profile_lowered,
)
from hlo_go.xla.schedule import (
    ScheduleError,
    apply_schedule,
    compile_with,
)
from hlo_go.xla.support import (
    unsupported_reasons,
)

__all__ = [
    "MEMORY_ORDER",
    "DecisionsMismatchError",
    "Executable",
    "FusionError",
    "LoweringError",
    "Measurement",
    "OptimizedModuleError",
    "Order",
    "Program",
    "ScheduleError",
    "Variant",
    "apply_fusion",
    "apply_schedule",
    "capture_prefusion",
    "compile_hlo",
    "compile_with",
    "lower",
    "measure",
    "measure_many",
    "measure_placed",
    "outputs_match",
    "profile_lowered",
    "program",
    "recover_prefusion",
    "run_placed",
    "unsupported_reasons",
]

# Names exported here before, by the module of hlo_go.xla that holds them now.
_MOVED: dict[str, str] = {
    "ArraySharding": "spmd",
    "COLLECTIVE_KINDS": "spmd",
    "CPU_EMITTER_NOT_FUSIBLE": "fusion",
    "ElidedConstantsWarning": "inputs",
    "InstructionProfile": "profile",
    "Leaf": "placed",
    "NOT_FUSIBLE": "fusion",
    "PREFUSION_COMPILER_OPTIONS": "hooks",
    "Partition": "placed",
    "PassFailedError": "passes",
    "PassNotRunError": "passes",
    "PipelinePass": "passes",
    "PlacedArguments": "placed",
    "PlacedProgram": "placed",
    "PlacementError": "placed",
    "RunStats": "placed",
    "Segment": "placed",
    "SpmdCheck": "spmd",
    "SpmdExecutable": "spmd",
    "Timing": "timing",
    "WIDENING_FACTOR": "arbiter",
    "WRAPPED_COMPILER_OPTIONS": "hooks",
    "adopt_control_flow": "fusion",
    "as_accurate_as_reference": "arbiter",
    "canonicalize_hlo": "passes",
    "capture_prefusion_lowered": "hooks",
    "capture_prefusion_with": "hooks",
    "check_placed_outputs": "placed",
    "check_spmd": "spmd",
    "collective_bytes": "spmd",
    "compile_hlo_text": "bridge",
    "compile_hooked": "schedule",
    "compile_placed": "placed",
    "compile_replacing": "hooks",
    "compile_spmd": "spmd",
    "count_collectives": "spmd",
    "discover_pipeline": "passes",
    "elided_constants": "inputs",
    "fan_in_scale": "inputs",
    "float64_outputs": "arbiter",
    "float64_reference": "placed",
    "hlo_hook": "hooks",
    "in_pinned_process": "timing",
    "index_bounds": "index_bounds",
    "list_schedule": "schedule",
    "memory_schedule": "schedule",
    "partition": "placed",
    "passes_run": "passes",
    "peak_bytes": "schedule",
    "pin_to_cpu": "timing",
    "placed_module": "placed",
    "random_arguments": "inputs",
    "random_array": "inputs",
    "random_inputs": "inputs",
    "regenerate_shared": "fusion",
    "run_executable": "bridge",
    "run_hlo_passes": "passes",
    "run_spmd": "spmd",
    "spmd_devices": "spmd",
    "strip_shardings": "spmd",
    "time_interleaved": "timing",
    "time_spmd": "spmd",
    "training_inputs": "inputs",
    "unfused_reference": "placed",
    "unwrap_fusions": "fusion",
    "wrap_alone": "fusion",
    "wrap_named": "fusion",
    "xla_accepts": "bridge",
    "xla_verifies": "bridge",
    "xla_cost_analysis": "bridge",
    "xla_module_to_text": "bridge",
    "xla_parse": "bridge",
}
# Names exported here before whose home is now above this package (hlo_go.methods).
_TO_METHODS: dict[str, object] = {"HOST_CLUSTER": "host-cpu-1", "SEARCHED": "searched"}


def __getattr__(name: str) -> Any:
    """Old names, for one release: the value from its new home, with a DeprecationWarning."""
    if name in _MOVED:
        module = f"hlo_go.xla.{_MOVED[name]}"
        warnings.warn(
            f"hlo_go.xla.{name} is deprecated; import it from {module}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), name)
    if name in _TO_METHODS:
        warnings.warn(
            f"hlo_go.xla.{name} is deprecated; use hlo_go.methods.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return _TO_METHODS[name]
    if name == "searched_tasks":
        raise AttributeError(
            "hlo_go.xla.searched_tasks moved to hlo_go.methods.searched_tasks (method names "
            "are resolved above hlo_go.xla)"
        )
    raise AttributeError(f"module 'hlo_go.xla' has no attribute {name!r}")
