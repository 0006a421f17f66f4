"""Timing candidates against ``jax.jit`` in interleaved rounds of short blocks, by the rule
of :mod:`hlo_go.api.verdict`.

A *block* is ``calls`` calls of one executable in a row, blocking on the last
(:func:`calls_per_sample` sizes it to about :data:`SAMPLE_S`; a slower function's block
is one call). Each round times one block of ``jax.jit``'s executable and one of every
candidate still raced, in an order rotated from round to round (A B, B A, ...), so the
blocks of a pair are moments apart. The garbage collector is off for the whole race
(a collection inside a block would be charged to it, and a full collection before each
block costs more than the block).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hlo_go.api.verdict import CONTINUE, Estimate, Rule, Verdict, confirm, confirm_final, judge
from hlo_go.xla.timing import CLOCKS

# A block of a short function is several calls, about this long...
SAMPLE_S = 0.02
# ...and at most this many calls.
MAX_CALLS_PER_SAMPLE = 200
# Blocks shorter than this get one untimed warm-up round before the race.
WARMUP_BELOW_S = 0.1
# The budget holds at least this many times the rounds before the rule's first look,
# each as long as the longest of them.
FIRST_LOOK_SLACK = 1.25


def choose_clock(clock: str, platform: str = "cpu") -> str:
    """``"cpu"`` or ``"wall"`` for :attr:`Options.clock` (``"auto"``: CPU time when this
    process may run on one core only, where it counts this process's work alone, and the
    program runs on the CPU: a GPU's work is on no CPU clock, so there it is wall time)."""
    if clock != "auto":
        return clock
    if platform != "cpu":
        return "wall"
    try:
        pinned = len(os.sched_getaffinity(0)) == 1
    except AttributeError:  # not Linux
        pinned = False
    return "cpu" if pinned else "wall"


def calls_per_sample(one_call_s: float) -> int:
    """Calls per timed block for a function taking ``one_call_s`` a call."""
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_S / max(one_call_s, 1e-7))))


def planned_pairs(budget_s: float, block_s: float, *, min_pairs: int, max_pairs: int) -> int:
    """The rounds a race can plan its looks up to: those of ``jax.jit`` and one candidate
    that fit ``budget_s`` (at least ``min_pairs``, at most ``max_pairs``)."""
    fit = int(budget_s / max(2.0 * block_s, 1e-9))
    return max(min_pairs, min(max_pairs, fit))


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _timed(run: Callable[[], Any], calls: int, now: Callable[[], float]) -> float:
    start = now()
    result = run()
    elapsed = now() - start
    del result
    return elapsed / calls


def race(
    reference: Callable[[], Any],
    candidates: Mapping[str, Callable[[], Any]],
    rule: Rule,
    *,
    budget_s: float,
    clock: str,
    calls: int,
    warmup: bool = True,
    block_s: float | None = None,
) -> tuple[Verdict, dict[str, list[float]], list[float], float]:
    """Times ``reference`` (``jax.jit``) and ``candidates`` in interleaved blocks until
    :func:`~hlo_go.api.verdict.judge` keeps or drops.

    Args:
      reference: one block of ``jax.jit``'s executable (``calls`` calls, blocking).
      candidates: name -> one block of that candidate.
      rule: the keep rule; after the first round its looks are planned up to the
        rounds of ``jax.jit`` and one candidate the rest of the budget holds
        (:func:`planned_pairs`, at most ``rule.max_pairs``), before any look, with
        blocks as long as the shorter of ``block_s`` and the first round's.
      budget_s: seconds the rounds may take (at least :data:`FIRST_LOOK_SLACK` times
        ``rule.min_pairs`` rounds as long as the longest before the first look, so that
        the rule looks at least once).
      clock: ``"cpu"`` or ``"wall"``.
      calls: calls per block (times are divided by it).
      warmup: run one untimed round first.
      block_s: the expected seconds of one block (None: the first round's).

    Returns:
      ``(verdict, candidate samples, reference samples, seconds)``, times per call.
    """
    now = CLOCKS[clock]
    began = time.perf_counter()
    ref: list[float] = []
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    alive = list(candidates)
    with _collector_off():
        if warmup:
            for fn in (reference, *candidates.values()):
                fn()
        round_s = 0.0
        while True:
            start = time.perf_counter()
            order = ["\0reference", *alive]
            shift = len(ref) % len(order)
            for name in order[shift:] + order[:shift]:
                if name == "\0reference":
                    ref.append(_timed(reference, calls, now))
                else:
                    samples[name].append(_timed(candidates[name], calls, now))
            # the next round: as long as the longest so far with this many executables, or
            # as the rounds so far on average (with the rule's own time between them)
            round_s = max(round_s, time.perf_counter() - start)
            round_s = max(round_s, (time.perf_counter() - began) / len(ref))
            if len(ref) < rule.min_pairs:  # room for the rounds before the first look
                budget_s = max(budget_s, FIRST_LOOK_SLACK * rule.min_pairs * round_s)
            if len(ref) == 1:  # plan the looks to the rounds the budget holds (none yet)
                planned = planned_pairs(
                    budget_s - (time.perf_counter() - began),
                    min(block_s or math.inf, round_s / len(order)),
                    min_pairs=rule.min_pairs,
                    max_pairs=rule.max_pairs,
                )
                rule = dataclasses.replace(rule, max_pairs=planned)
            elapsed = time.perf_counter() - began
            verdict = judge(
                ref,
                {name: samples[name] for name in alive},
                rule,
                elapsed_s=elapsed,
                budget_s=budget_s,
                next_round_s=round_s,
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
    max_rounds: int = 40,
) -> tuple[bool, Estimate, int]:
    """The short re-check of a cached verdict (:func:`hlo_go.api.verdict.confirm`): at
    least three interleaved pairs of blocks, then until decided, the budget or
    ``max_rounds``.

    Returns:
      ``(passed, estimate, rounds)``.
    """
    now = CLOCKS[clock]
    began = time.perf_counter()
    ref: list[float] = []
    ours: list[float] = []
    with _collector_off():
        while True:
            if len(ref) % 2 == 0:
                ref.append(_timed(reference, calls, now))
                ours.append(_timed(candidate, calls, now))
            else:
                ours.append(_timed(candidate, calls, now))
                ref.append(_timed(reference, calls, now))
            passed, e = confirm(ref, ours)
            if passed is not None:
                return passed, e, len(ref)
            spent = time.perf_counter() - began
            if len(ref) >= 3 and (
                spent * (len(ref) + 1) / len(ref) > budget_s or len(ref) >= max_rounds
            ):
                return confirm_final(e), e, len(ref)
