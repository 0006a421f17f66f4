"""Bridges to XLA: compiling, parsing and costing HLO with XLA's own code."""

from hlo_go.xla._jaxlib import xla_accepts, xla_cost_analysis, xla_module_to_text, xla_parse

__all__ = ["xla_accepts", "xla_cost_analysis", "xla_module_to_text", "xla_parse"]
