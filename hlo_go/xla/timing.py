"""Timing helpers shared by hlo_go.xla.measure and the benchmarks.

Configurations are timed interleaved in one process (A B A B ...), after warm-up,
with the garbage collector disabled inside each timed call, and are summarized by
their median. Compare configurations by the ratio of medians, not by lone
absolute times: this host's speed drifts from minute to minute, and interleaving
spreads the drift over every configuration alike.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples of one configuration, in seconds."""

    name: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median of the samples."""
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        """Fastest sample."""
        return min(self.samples)

    @property
    def max(self) -> float:
        """Slowest sample."""
        return max(self.samples)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary: median, min, max and the raw samples."""
        return {
            "name": self.name,
            "median_s": self.median,
            "min_s": self.min,
            "max_s": self.max,
            "repeats": len(self.samples),
            "samples_s": list(self.samples),
        }


def time_call(fn: Callable[[], Any]) -> float:
    """Times one call of ``fn`` with the garbage collector off.

    A full collection runs first, outside the timed region, so garbage left by
    earlier calls is not charged to this one. The result of ``fn`` is dropped
    only after the clock stops.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
    del result
    return elapsed


def time_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    *,
    repeats: int,
    warmup: int = 1,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Timing]:
    """Times several configurations interleaved: A B A B ...

    Args:
      fns: configuration name -> zero-argument callable doing the work once.
      repeats: timed calls per configuration.
      warmup: untimed rounds run first (each configuration once per round).
      progress: called with a short line after each round, if given.

    Returns:
      Configuration name -> its :class:`Timing`, in the order of ``fns``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        for fn in fns.values():
            time_call(fn)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for round_index in range(repeats):
        for name, fn in fns.items():
            samples[name].append(time_call(fn))
        if progress is not None:
            done = ", ".join(f"{name} {s[-1]:.3f}s" for name, s in samples.items())
            progress(f"round {round_index + 1}/{repeats}: {done}")
    return {name: Timing(name, tuple(s)) for name, s in samples.items()}


def ratio(numerator: Timing, denominator: Timing) -> float:
    """Ratio of medians, ``numerator / denominator`` (> 1: numerator is slower)."""
    return numerator.median / denominator.median
