"""The statistical rule :func:`hlo_go.jit` keeps an executable by: pure functions of timings.

Timing runs in interleaved rounds: each round times ``jax.jit``'s executable and every
candidate once, in a rotated order, so a slow minute of a shared host stretches all of
them alike. Round ``i`` gives each candidate one *pair* ``(jit_i, ours_i)``, and its
log-ratio ``log(jit_i / ours_i)`` (> 0: ours is faster). The pairs of a candidate are
summarized by a paired one-sided Student-t interval on the mean log-ratio
(:func:`estimate`): ``exp(mean ± t * sd / sqrt(n))`` bounds the speedup.

:func:`judge` decides after each round:

* **keep** the leading candidate (the best point estimate) when the lower bound of its
  speedup and its median pair both exceed ``1 + min_gain``;
* **drop** a candidate whose upper bound is below ``1 + min_gain`` (it cannot win), and
  stay with ``jax.jit`` when none is left, when ``max_pairs`` rounds are done, or when
  another round would overrun the measurement budget;
* otherwise **continue**: the number of rounds adapts to the noise.

Bounds are only looked at after ``min_pairs``, ``2 min_pairs``, ``4 min_pairs``, ...
rounds (:meth:`Rule.looks`) and when measuring must end. The one-sided error
``1 - confidence`` is divided among the candidates and the looks (Bonferroni), so
neither racing several candidates nor looking repeatedly makes a noisy tie more likely
to be kept.

:func:`confirm` is the short re-check of a cached verdict in a new process: it passes
unless the pairs show the executable is not faster than ``jax.jit``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

KEEP: Literal["keep"] = "keep"
DROP: Literal["drop"] = "drop"
CONTINUE: Literal["continue"] = "continue"
State = Literal["keep", "drop", "continue"]


@dataclass(frozen=True)
class Rule:
    """Parameters of :func:`judge`.

    Attributes:
      min_gain: keep only a speedup whose lower bound exceeds ``1 + min_gain``.
      confidence: one-sided confidence of each bound, before it is divided among the
        candidates (Bonferroni).
      min_pairs: rounds before anything is kept or dropped.
      max_pairs: rounds after which measuring stops (inconclusive: ``jax.jit`` stays).
    """

    min_gain: float = 0.02
    confidence: float = 0.99
    min_pairs: int = 3
    max_pairs: int = 40

    def __post_init__(self) -> None:
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"min_gain must be in [0, 1), got {self.min_gain}")
        if not 0.5 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0.5, 1), got {self.confidence}")
        if not 2 <= self.min_pairs <= self.max_pairs:
            raise ValueError(
                f"need 2 <= min_pairs <= max_pairs, got {self.min_pairs}, {self.max_pairs}"
            )

    def looks(self) -> tuple[int, ...]:
        """The round counts after which the bounds are looked at (and ``max_pairs``)."""
        counts, n = [], self.min_pairs
        while n < self.max_pairs:
            counts.append(n)
            n *= 2
        return (*counts, self.max_pairs)

    def per_look_confidence(self, comparisons: int) -> float:
        """The confidence of each bound: the error divided among ``comparisons``
        candidates and every look (one more for an end forced by the budget)."""
        looks = len(self.looks()) + 1
        return 1.0 - (1.0 - self.confidence) / (max(1, comparisons) * looks)

    @property
    def threshold(self) -> float:
        """The speedup a kept executable's lower bound must exceed."""
        return 1.0 + self.min_gain


@dataclass(frozen=True)
class Estimate:
    """A candidate's speedup over ``jax.jit`` from its interleaved pairs.

    Attributes:
      speedup: ``exp`` of the mean log-ratio (> 1: the candidate is faster).
      lower: lower confidence bound of the speedup (0 with fewer than two pairs).
      upper: upper confidence bound (inf with fewer than two pairs).
      median: ``exp`` of the median log-ratio.
      pairs: how many pairs.
    """

    speedup: float
    lower: float
    upper: float
    median: float
    pairs: int


def log_ratios(reference: Sequence[float], candidate: Sequence[float]) -> np.ndarray:
    """``log(reference_i / candidate_i)`` of paired samples (> 0: the candidate is faster).

    Raises:
      ValueError: samples of different lengths, or a sample that is not positive.
    """
    ref, cand = np.asarray(reference, np.float64), np.asarray(candidate, np.float64)
    if ref.shape != cand.shape or ref.ndim != 1:
        raise ValueError(f"paired samples differ in length: {ref.shape} vs {cand.shape}")
    if np.any(~(ref > 0)) or np.any(~(cand > 0)):
        raise ValueError("timing samples must be positive and finite")
    return np.log(ref) - np.log(cand)


def estimate(
    reference: Sequence[float], candidate: Sequence[float], *, confidence: float
) -> Estimate:
    """The paired one-sided t-interval of the speedup (see the module docstring).

    Args:
      reference: ``jax.jit``'s samples, one per round.
      candidate: the candidate's samples of the same rounds.
      confidence: one-sided confidence of each bound.
    """
    r = log_ratios(reference, candidate)
    n = len(r)
    if n == 0:
        return Estimate(1.0, 0.0, math.inf, 1.0, 0)
    mean, median = float(r.mean()), float(np.median(r))
    if n < 2:
        return Estimate(math.exp(mean), 0.0, math.inf, math.exp(median), n)
    half = float(stats.t.ppf(confidence, n - 1)) * float(r.std(ddof=1)) / math.sqrt(n)
    return Estimate(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), math.exp(median), n
    )


@dataclass(frozen=True)
class Verdict:
    """What :func:`judge` decided after a round.

    Attributes:
      state: ``"keep"`` (``best`` wins), ``"drop"`` (``jax.jit`` stays) or ``"continue"``.
      best: the kept candidate (``"keep"``), else the leading one still measured, or None.
      estimates: every candidate's :class:`Estimate`.
      alive: candidates not yet dropped.
      reason: one line a person reads.
    """

    state: State
    best: str | None
    estimates: dict[str, Estimate]
    alive: tuple[str, ...]
    reason: str


def judge(
    reference: Sequence[float],
    candidates: Mapping[str, Sequence[float]],
    rule: Rule,
    *,
    elapsed_s: float = 0.0,
    budget_s: float = math.inf,
    next_round_s: float = 0.0,
    comparisons: int | None = None,
) -> Verdict:
    """Keep, drop or measure another round (see the module docstring).

    Args:
      reference: ``jax.jit``'s samples, one per round so far.
      candidates: name -> that candidate's samples of the same rounds (candidates
        dropped earlier may be left out).
      rule: the :class:`Rule`.
      elapsed_s: seconds measuring has taken so far.
      budget_s: seconds measuring may take in all.
      next_round_s: the expected length of one more round.
      comparisons: how many candidates the race started with (the Bonferroni divisor;
        default ``len(candidates)``).
    """
    k = comparisons if comparisons is not None else len(candidates)
    confidence = rule.per_look_confidence(k)
    estimates = {
        name: estimate(reference, samples, confidence=confidence)
        for name, samples in candidates.items()
    }
    n = len(reference)
    threshold = rule.threshold
    ending = n >= rule.max_pairs or elapsed_s + next_round_s > budget_s
    look = n >= rule.min_pairs and (n in rule.looks() or ending)
    if not look:
        alive = tuple(estimates)
    else:
        alive = tuple(name for name, e in estimates.items() if e.upper > threshold)
    if not alive:
        best = max(estimates, key=lambda c: estimates[c].speedup) if estimates else None
        shown = f" (best {best}: {describe(estimates[best])})" if best else ""
        return Verdict(
            DROP, best, estimates, alive,
            f"no candidate can be {threshold:.2f}x faster than jax.jit{shown}",
        )  # fmt: skip
    leader = max(alive, key=lambda c: estimates[c].speedup)
    lead = estimates[leader]
    if look and lead.lower > threshold and lead.median > threshold:
        return Verdict(
            KEEP, leader, estimates, alive,
            f"{leader} {describe(lead)} > {threshold:.2f}x over {n} interleaved rounds",
        )  # fmt: skip
    if ending:
        why = f"{n} rounds" if n >= rule.max_pairs else f"the {budget_s:.3g} s budget"
        return Verdict(
            DROP, leader, estimates, alive,
            f"not shown {threshold:.2f}x faster than jax.jit within {why} "
            f"(best {leader}: {describe(lead)})",
        )  # fmt: skip
    return Verdict(CONTINUE, leader, estimates, alive, f"{leader} {describe(lead)}")


def confirm(
    reference: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.9,
    min_pairs: int = 3,
) -> tuple[bool | None, Estimate]:
    """Re-checks a cached verdict: is the executable still not slower than ``jax.jit``?

    Args:
      reference: ``jax.jit``'s samples, one per round.
      candidate: the cached executable's samples of the same rounds.
      confidence: one-sided confidence of the bounds.
      min_pairs: rounds before anything is concluded.

    Returns:
      ``(passed, estimate)``: ``passed`` is True once the lower bound of the speedup is
      above 1, False once its upper bound is below 1 or (with ``min_pairs`` rounds) its
      point estimate is, None while undecided.
    """
    e = estimate(reference, candidate, confidence=confidence)
    if e.pairs < min_pairs:
        return None, e
    if e.lower > 1.0:
        return True, e
    if e.upper < 1.0:
        return False, e
    return None, e


def confirm_final(estimate_: Estimate) -> bool:
    """The re-check's answer when its rounds ran out undecided: passed when the point
    estimate and the median pair both still show a speedup."""
    return estimate_.speedup > 1.0 and estimate_.median > 1.0


def describe(e: Estimate) -> str:
    """``speedup [lower, upper]`` as text."""
    if e.pairs < 2:
        return f"{e.speedup:.3f}x ({e.pairs} pair)"
    upper = f"{e.upper:.3f}" if e.upper < 1e3 else "inf"
    return f"{e.speedup:.3f}x [{e.lower:.3f}, {upper}]"
