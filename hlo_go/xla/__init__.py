"""Bridges to XLA: compiling, parsing, running and costing HLO with XLA's own code."""

from hlo_go.xla._jaxlib import (
    compile_hlo_text,
    run_executable,
    xla_accepts,
    xla_cost_analysis,
    xla_module_to_text,
    xla_parse,
)
from hlo_go.xla.fusion import NOT_FUSIBLE, FusionError, apply_fusion
from hlo_go.xla.hooks import (
    PREFUSION_COMPILER_OPTIONS,
    capture_prefusion,
    capture_prefusion_lowered,
    compile_replacing,
    hlo_hook,
)
from hlo_go.xla.inputs import random_array, random_inputs
from hlo_go.xla.measure import Measurement, measure, outputs_match
from hlo_go.xla.mpmd import Leaf, Partition, PlacementError, Segment, partition
from hlo_go.xla.passes import (
    PassFailedError,
    PassNotRunError,
    PipelinePass,
    canonicalize_hlo,
    discover_pipeline,
    passes_run,
    run_hlo_passes,
)
from hlo_go.xla.placed import (
    PlacedArguments,
    PlacedProgram,
    RunStats,
    compile_placed,
    measure_placed,
    placed_module,
    run_placed,
)
from hlo_go.xla.profile import InstructionProfile, profile_lowered
from hlo_go.xla.schedule import ScheduleError, apply_schedule, compile_with, list_schedule
from hlo_go.xla.timing import Timing, time_interleaved

__all__ = [
    "NOT_FUSIBLE",
    "PREFUSION_COMPILER_OPTIONS",
    "FusionError",
    "InstructionProfile",
    "Leaf",
    "Measurement",
    "Partition",
    "PassFailedError",
    "PassNotRunError",
    "PipelinePass",
    "PlacedArguments",
    "PlacedProgram",
    "PlacementError",
    "RunStats",
    "ScheduleError",
    "Segment",
    "Timing",
    "apply_fusion",
    "apply_schedule",
    "canonicalize_hlo",
    "capture_prefusion",
    "capture_prefusion_lowered",
    "compile_hlo_text",
    "compile_placed",
    "compile_replacing",
    "compile_with",
    "discover_pipeline",
    "hlo_hook",
    "list_schedule",
    "measure",
    "measure_placed",
    "outputs_match",
    "partition",
    "passes_run",
    "placed_module",
    "profile_lowered",
    "random_array",
    "random_inputs",
    "run_executable",
    "run_hlo_passes",
    "run_placed",
    "time_interleaved",
    "xla_accepts",
    "xla_cost_analysis",
    "xla_module_to_text",
    "xla_parse",
]
