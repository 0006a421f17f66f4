"""Bridges to XLA: compiling, parsing, running and costing HLO with XLA's own code."""

from hlo_go.xla._jaxlib import (
    compile_hlo_text,
    run_executable,
    xla_accepts,
    xla_cost_analysis,
    xla_module_to_text,
    xla_parse,
)
from hlo_go.xla.hooks import (
    PREFUSION_COMPILER_OPTIONS,
    capture_prefusion,
    capture_prefusion_lowered,
    hlo_hook,
)
from hlo_go.xla.inputs import random_array, random_inputs

__all__ = [
    "PREFUSION_COMPILER_OPTIONS",
    "capture_prefusion",
    "capture_prefusion_lowered",
    "compile_hlo_text",
    "hlo_hook",
    "random_array",
    "random_inputs",
    "run_executable",
    "xla_accepts",
    "xla_cost_analysis",
    "xla_module_to_text",
    "xla_parse",
]
