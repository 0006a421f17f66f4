"""The reward: step time relative to a per-graph reference, with an OOM penalty.

For a simulated step time ``t`` and the graph's reference time ``t_ref`` (by default
the step time of :meth:`hlo_go.decisions.Decisions.default`: one device, FIFO, no
fusion)::

    r = -log(t / t_ref)                                    fits in memory
    r = -log(t / t_ref) - oom_penalty - log(m / c)         out of memory

where ``m / c`` is the largest ratio of peak memory to capacity over the devices
(``> 1`` when out of memory). A decision that runs out of memory is therefore always
worse, by at least ``oom_penalty``, than one of the same speed that fits, and the
further over capacity, the worse. ``-log`` makes rewards scale-free across graphs:
a 2x speedup is worth ``log 2`` on a 1 ms graph and on a 1 s graph alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from hlo_go.sim import SimResult


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """How simulated results become rewards."""

    # Subtracted from the reward of a decision that runs out of memory (plus log(m / c)).
    oom_penalty: float = 1.0

    def __post_init__(self) -> None:
        if not self.oom_penalty >= 0:  # NaN too
            raise ValueError(f"oom_penalty must be >= 0, got {self.oom_penalty}")


def memory_ratio(result: SimResult) -> float:
    """Largest peak memory / capacity over the devices (``> 1`` means out of memory)."""
    capacity = np.maximum(np.asarray(result.memory_capacity, np.float64), 1.0)
    return float(np.max(np.asarray(result.peak_memory, np.float64) / capacity))


def reward(result: SimResult, reference_time: float, config: RewardConfig) -> float:
    """The reward of one simulated result (see the module docstring).

    Args:
      result: the simulation of one decision set.
      reference_time: ``t_ref`` of the graph, seconds (> 0).
      config: the OOM penalty.

    Returns:
      The reward.

    Raises:
      ValueError: a non-positive reference or step time.
    """
    if not reference_time > 0:
        raise ValueError(f"reference_time must be > 0, got {reference_time}")
    if not result.step_time > 0:
        raise ValueError(f"step_time must be > 0, got {result.step_time}")
    value = -float(np.log(result.step_time / reference_time))
    if result.oom:
        value -= config.oom_penalty + max(0.0, float(np.log(memory_ratio(result))))
    return value


def rewards(
    results: Sequence[SimResult], reference_time: float, config: RewardConfig
) -> np.ndarray:
    """:func:`reward` of each result, as ``float32[K]``."""
    return np.asarray([reward(r, reference_time, config) for r in results], np.float32)
