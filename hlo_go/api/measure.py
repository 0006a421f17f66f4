"""Timing candidates against ``jax.jit`` in interleaved rounds, by the rule of
:mod:`hlo_go.api.verdict`.

Each round times ``jax.jit``'s executable and every candidate still in the race once, in
an order rotated from round to round (:func:`hlo_go.xla.timing.time_call`: garbage
collector off inside the timed region). A sample of a short function is several calls in
a row (:func:`calls_per_sample`), so the clock's and the collector's overheads do not
swamp the difference.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from hlo_go.api.verdict import CONTINUE, Estimate, Rule, Verdict, confirm, confirm_final, judge
from hlo_go.xla.timing import time_call

# A timed sample of a short function is several calls, about this long...
SAMPLE_S = 0.01
# ...and at most this many calls.
MAX_CALLS_PER_SAMPLE = 200


def choose_clock(clock: str) -> str:
    """``"cpu"`` or ``"wall"`` for :attr:`Options.clock` (``"auto"``: CPU time when this
    process may run on one core only, where it counts this process's work alone)."""
    if clock != "auto":
        return clock
    try:
        pinned = len(os.sched_getaffinity(0)) == 1
    except AttributeError:  # not Linux
        pinned = False
    return "cpu" if pinned else "wall"


def calls_per_sample(one_call_s: float) -> int:
    """Calls per timed sample for a function taking ``one_call_s`` a call."""
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_S / max(one_call_s, 1e-7))))


def _timed(run: Callable[[], Any], calls: int, clock: str) -> float:
    return time_call(run, clock=clock) / calls  # type: ignore[arg-type]


def race(
    reference: Callable[[], Any],
    candidates: Mapping[str, Callable[[], Any]],
    rule: Rule,
    *,
    budget_s: float,
    clock: str,
    calls: int,
) -> tuple[Verdict, dict[str, list[float]], list[float], float]:
    """Times ``reference`` (``jax.jit``) and ``candidates`` interleaved until
    :func:`~hlo_go.api.verdict.judge` keeps or drops.

    Args:
      reference: one sample of ``jax.jit``'s executable (``calls`` calls, blocking).
      candidates: name -> one sample of that candidate.
      rule: the keep rule.
      budget_s: seconds the rounds may take.
      clock: ``"cpu"`` or ``"wall"``.
      calls: calls per sample (times are divided by it).

    Returns:
      ``(verdict, candidate samples, reference samples, seconds)``, times per call.
    """
    began = time.perf_counter()
    ref: list[float] = []
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    alive = list(candidates)
    round_s = 0.0
    while True:
        start = time.perf_counter()
        order = ["\0reference", *alive]
        shift = len(ref) % len(order)
        for name in order[shift:] + order[:shift]:
            if name == "\0reference":
                ref.append(_timed(reference, calls, clock))
            else:
                samples[name].append(_timed(candidates[name], calls, clock))
        round_s = max(round_s, time.perf_counter() - start) if ref[1:] else 0.0
        elapsed = time.perf_counter() - began
        verdict = judge(
            ref,
            {name: samples[name] for name in alive},
            rule,
            elapsed_s=elapsed,
            budget_s=budget_s,
            next_round_s=round_s if len(ref) > 1 else time.perf_counter() - start,
            comparisons=len(candidates),
        )
        if verdict.state != CONTINUE:
            return verdict, samples, ref, elapsed
        alive = list(verdict.alive)


def recheck(
    reference: Callable[[], Any],
    candidate: Callable[[], Any],
    *,
    budget_s: float,
    clock: str,
    calls: int,
    max_rounds: int = 12,
) -> tuple[bool, Estimate, int]:
    """The short re-check of a cached verdict (:func:`hlo_go.api.verdict.confirm`): at
    least three interleaved rounds, then until decided, the budget or ``max_rounds``.

    Returns:
      ``(passed, estimate, rounds)``.
    """
    began = time.perf_counter()
    ref: list[float] = []
    ours: list[float] = []
    while True:
        if len(ref) % 2 == 0:
            ref.append(_timed(reference, calls, clock))
            ours.append(_timed(candidate, calls, clock))
        else:
            ours.append(_timed(candidate, calls, clock))
            ref.append(_timed(reference, calls, clock))
        passed, e = confirm(ref, ours)
        if passed is not None:
            return passed, e, len(ref)
        spent = time.perf_counter() - began
        if len(ref) >= 3 and (
            spent * (len(ref) + 1) / len(ref) > budget_s or len(ref) >= max_rounds
        ):
            return confirm_final(e), e, len(ref)
