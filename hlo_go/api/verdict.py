"""The statistical rule :func:`hlo_go.jit` keeps an executable by: pure functions of timings.

Timing runs in interleaved rounds (:func:`hlo_go.api.measure.race`). A round times one
*block* of ``jax.jit``'s executable and one block of every candidate still raced, in an
order rotated from round to round; a block is as many calls in a row as take a few tens
of milliseconds (one call of a slower function). Round ``i`` gives each candidate one
*pair* ``(jit_i, ours_i)`` of block times, taken moments apart, and its log-ratio
``r_i = log(jit_i / ours_i)`` (> 0: ours is faster): a slow minute of a shared host
stretches both blocks of a pair alike and cancels in ``r_i``.

A candidate's speedup over ``jax.jit`` is summarized from its log-ratios
(:func:`estimate`) by one-sided confidence bounds that tighten as pairs accumulate:

* with :data:`SIGN_MIN_PAIRS` pairs or more, on the median log-ratio, distribution-free:
  order statistics of the ``r_i`` at binomial quantiles (the sign test), which a few
  blocks stretched by another process cannot move far;
* with fewer, the paired Student-t interval on the mean log-ratio,
  ``mean ± t * sd / sqrt(n)``.

:func:`judge` decides after each round. At a *look* (after ``min_pairs``,
``2 min_pairs``, ``4 min_pairs``, ... rounds, :meth:`Rule.looks`, and when measuring must
end):

* **keep** the leading candidate (the best point estimate) when the lower bound of its
  speedup and its median pair both exceed ``1 + min_gain`` (when measuring ends, the
  best of the candidates that do);
* **drop** a candidate whose upper bound is below ``1 + min_gain`` (it cannot win), and
  stay with ``jax.jit`` when none is left, or when ``max_pairs`` rounds are done or
  another round would overrun the measurement budget;
* otherwise **continue**: the number of rounds adapts to the noise.

The one-sided error ``1 - confidence`` is divided among the candidates and the looks
(Bonferroni), so neither racing several candidates nor looking repeatedly makes a noisy
tie more likely to be kept.

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

# Pairs from which the bounds are the sign test's (distribution-free, on the median)
# rather than Student's t (on the mean).
SIGN_MIN_PAIRS = 20


@dataclass(frozen=True)
class Rule:
    """Parameters of :func:`judge`.

    Attributes:
      min_gain: keep only a speedup whose lower bound exceeds ``1 + min_gain``.
      confidence: one-sided confidence of each bound, before it is divided among the
        candidates and the looks (Bonferroni).
      min_pairs: rounds before anything is kept or dropped.
      max_pairs: rounds after which measuring stops (inconclusive: ``jax.jit`` stays).
        The looks are planned up to it, so a ``max_pairs`` near the rounds the budget
        allows spends no confidence on looks that never come.
    """

    min_gain: float = 0.02
    confidence: float = 0.99
    min_pairs: int = 4
    max_pairs: int = 200

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
      speedup: the point estimate (> 1: the candidate is faster): ``exp`` of the median
        log-ratio when the bounds are the sign test's, of the mean log-ratio when they
        are Student's t.
      lower: lower confidence bound of the speedup (0 when too few pairs bound it).
      upper: upper confidence bound (inf when too few pairs bound it).
      median: ``exp`` of the median log-ratio.
      pairs: how many pairs.
      method: ``"sign"``, ``"t"``, or ``""`` with fewer than two pairs.
    """

    speedup: float
    lower: float
    upper: float
    median: float
    pairs: int
    method: str = ""


def log_ratios(reference: Sequence[float], candidate: Sequence[float]) -> np.ndarray:
    """``log(reference_i / candidate_i)`` of paired samples (> 0: the candidate is faster).

    Raises:
      ValueError: samples of different lengths, or a sample that is not positive.
    """
    ref, cand = np.asarray(reference, np.float64), np.asarray(candidate, np.float64)
    if ref.shape != cand.shape or ref.ndim != 1:
        raise ValueError(f"paired samples differ in length: {ref.shape} vs {cand.shape}")
    if np.any(~(ref > 0)) or np.any(~(cand > 0)) or not np.all(np.isfinite(ref * cand)):
        raise ValueError("timing samples must be positive and finite")
    return np.log(ref) - np.log(cand)


def sign_rank(pairs: int, error: float) -> int:
    """The 1-based rank ``k`` of the sign-test bound: the largest ``k`` with
    ``P(Binomial(pairs, 1/2) <= k - 1) <= error`` (0 when even ``k = 1`` is too likely).

    The ``k``-th smallest of ``pairs`` independent log-ratios exceeds their median with
    probability at most ``error`` (and the ``k``-th largest falls below it likewise).
    """
    if pairs < 1:
        return 0
    cdf = stats.binom.cdf(np.arange(pairs), pairs, 0.5)
    return int(np.count_nonzero(cdf <= error))


def estimate(
    reference: Sequence[float], candidate: Sequence[float], *, confidence: float
) -> Estimate:
    """The speedup and its one-sided bounds from paired samples (module docstring).

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
    error = 1.0 - confidence
    k = sign_rank(n, error) if n >= SIGN_MIN_PAIRS else 0
    if k:
        ordered = np.sort(r)
        low, high = float(ordered[k - 1]), float(ordered[n - k])
        return Estimate(math.exp(median), math.exp(low), _exp(high), math.exp(median), n, "sign")
    half = float(stats.t.ppf(confidence, n - 1)) * float(r.std(ddof=1)) / math.sqrt(n)
    return Estimate(
        math.exp(mean), math.exp(mean - half), _exp(mean + half), math.exp(median), n, "t"
    )


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


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
    alive = tuple(estimates)
    if look:
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
    if look:
        winners = [
            name
            for name in alive
            if estimates[name].lower > threshold and estimates[name].median > threshold
        ]
        # the leader when it is shown faster; another only when measuring ends
        if leader in winners or (winners and ending):
            best = leader if leader in winners else max(winners, key=lambda c: estimates[c].speedup)
            return Verdict(
                KEEP, best, estimates, alive,
                f"{best} {describe(estimates[best])} > {threshold:.2f}x over {n} "
                "interleaved rounds",
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
      above 1, False once its upper bound is below 1, None while undecided.
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
