"""Timing helpers for the benchmarks: re-exported from :mod:`hlo_go.xla.timing`."""

from hlo_go.xla.timing import Timing, ratio, time_call, time_interleaved

__all__ = ["Timing", "ratio", "time_call", "time_interleaved"]
