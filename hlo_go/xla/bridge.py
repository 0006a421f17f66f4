"""XLA's own parser, cost analysis, compiler and runner, by public names.

The functions are :mod:`hlo_go.xla._jaxlib`'s (the one module that touches private jaxlib
names); this module is where a user imports them from.
"""

from hlo_go.xla._jaxlib import (
    compile_hlo_text,
    run_executable,
    xla_accepts,
    xla_cost_analysis,
    xla_module_to_text,
    xla_parse,
    xla_verifies,
)

__all__ = [
    "compile_hlo_text",
    "run_executable",
    "xla_accepts",
    "xla_cost_analysis",
    "xla_module_to_text",
    "xla_parse",
    "xla_verifies",
]
