"""The keep/drop rule of ``@hlo_go.jit`` (:mod:`hlo_go.api.verdict`) on synthetic timings:
noisy ties are never kept, clear wins are, slow candidates are dropped early, the budget
stops the race. No timing is measured here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hlo_go.api.verdict import (
    CONTINUE,
    DROP,
    KEEP,
    Rule,
    confirm,
    confirm_final,
    estimate,
    judge,
    log_ratios,
    sign_rank,
)

RULE = Rule(min_gain=0.02, confidence=0.99, min_pairs=3, max_pairs=40)


def race(
    speedups: dict[str, float],
    *,
    noise: float,
    seed: int,
    rule: Rule = RULE,
    round_s: float = 0.1,
    budget_s: float = math.inf,
    drift: float = 0.0,
):
    """Runs :func:`judge` round by round on lognormal samples: candidate ``c`` takes
    ``1 / speedups[c]`` of jax.jit's time; ``drift`` scales a whole round alike (a
    shared host's slow minutes), ``noise`` is each sample's own log-sd."""
    rng = np.random.default_rng(seed)
    reference: list[float] = []
    samples: dict[str, list[float]] = {c: [] for c in speedups}
    alive = list(speedups)
    elapsed = 0.0
    while True:
        level = math.exp(rng.normal(0, drift)) if drift else 1.0
        reference.append(level * math.exp(rng.normal(0, noise)))
        for c in speedups:
            samples[c].append(level / speedups[c] * math.exp(rng.normal(0, noise)))
        elapsed += round_s
        verdict = judge(
            reference,
            {c: samples[c] for c in alive},
            rule,
            elapsed_s=elapsed,
            budget_s=budget_s,
            next_round_s=round_s,
            comparisons=len(speedups),
        )
        alive = list(verdict.alive)
        if verdict.state != CONTINUE:
            return verdict, len(reference), elapsed


@pytest.mark.parametrize("noise", [0.02, 0.1, 0.3])
def test_noisy_ties_are_never_kept(noise):
    for seed in range(60):
        verdict, _, _ = race({"a": 1.0, "b": 1.0, "c": 1.0}, noise=noise, seed=seed, drift=0.2)
        assert verdict.state == DROP, (seed, verdict.reason)


def test_a_gain_smaller_than_min_gain_is_not_kept():
    for seed in range(40):
        verdict, _, _ = race({"a": 1.01}, noise=0.01, seed=seed)
        assert verdict.state == DROP, (seed, verdict.reason)


def test_clear_wins_are_kept_and_the_fastest_is_chosen():
    for seed in range(30):
        verdict, rounds, _ = race(
            {"slow": 0.8, "good": 1.3, "best": 1.6}, noise=0.05, seed=seed, drift=0.2
        )
        assert verdict.state == KEEP, (seed, verdict.reason)
        assert verdict.best == "best"
        assert rounds <= 10  # a clear win is decided in a few rounds


def test_rounds_adapt_to_the_noise():
    quiet = [race({"a": 1.3}, noise=0.005, seed=s)[1] for s in range(10)]
    noisy = [race({"a": 1.3}, noise=0.15, seed=s)[1] for s in range(10)]
    assert max(quiet) == RULE.min_pairs
    assert np.median(noisy) > np.median(quiet)


def test_slow_candidates_are_dropped_early():
    verdict, rounds, _ = race({"a": 0.7, "b": 0.75}, noise=0.05, seed=0)
    assert verdict.state == DROP and rounds <= RULE.looks()[1]
    assert "cannot" in verdict.reason or "can be" in verdict.reason


def test_the_budget_is_respected():
    budget = 1.0
    for seed in range(20):
        # a real but small gain under heavy noise: undecided until the budget ends
        verdict, _, elapsed = race({"a": 1.05}, noise=0.4, seed=seed, round_s=0.3, budget_s=budget)
        assert elapsed <= budget
        if verdict.state == DROP and "budget" in verdict.reason:
            assert verdict.best == "a"


def test_max_pairs_ends_an_undecided_race():
    rule = Rule(min_gain=0.0, min_pairs=3, max_pairs=6)
    verdict, rounds, _ = race({"a": 1.0}, noise=0.2, seed=3, rule=rule)
    assert rounds <= 6 and verdict.state == DROP


def test_estimate_bounds_and_validation():
    e = estimate([2.0, 2.0, 2.0, 2.1], [1.0, 1.0, 1.0, 1.05], confidence=0.95)
    assert e.speedup == pytest.approx(2.0) and e.lower == pytest.approx(2.0)
    one = estimate([2.0], [1.0], confidence=0.95)
    assert one.lower == 0.0 and one.upper == math.inf and one.pairs == 1
    assert log_ratios([2.0], [1.0])[0] == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="length"):
        log_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        log_ratios([0.0], [1.0])
    with pytest.raises(ValueError, match="min_pairs"):
        Rule(min_pairs=1)


def test_confirm_passes_a_real_win_and_fails_a_slower_executable():
    rng = np.random.default_rng(0)
    jit = np.exp(rng.normal(0, 0.05, 5))
    faster = jit / 1.3 * np.exp(rng.normal(0, 0.02, 5))
    slower = jit * 1.3 * np.exp(rng.normal(0, 0.02, 5))
    assert confirm(jit, faster)[0] is True
    assert confirm(jit, slower)[0] is False
    assert confirm(jit[:2], slower[:2])[0] is None  # fewer than min_pairs: undecided
    tie = jit * np.exp(rng.normal(0, 0.05, 5))
    passed, e = confirm(jit, tie)
    assert passed is None or passed is False or e.lower > 1.0
    assert not confirm_final(estimate(jit, slower, confidence=0.9))


def test_sign_rank_is_the_binomial_quantile():
    assert sign_rank(5, 0.01) == 0  # 1/32 > 0.01: five pairs cannot bound the median
    assert sign_rank(10, 0.001) == 1  # 1/1024 <= 0.001 < 11/1024
    for n, error in ((20, 0.01), (100, 0.0005), (400, 0.001)):
        k = sign_rank(n, error)
        assert stats.binom.cdf(k - 1, n, 0.5) <= error < stats.binom.cdf(k, n, 0.5)


def test_many_pairs_give_a_tight_distribution_free_interval():
    rng = np.random.default_rng(1)
    ref = np.exp(rng.normal(0, 0.05, 200))
    ours = ref / 1.05 * np.exp(rng.normal(0, 0.05, 200))
    e = estimate(ref, ours, confidence=0.999)
    assert e.method == "sign" and e.pairs == 200
    assert 1.0 < e.lower < 1.05 < e.upper < 1.1  # a few percent wide
    few = estimate(ref[:8], ours[:8], confidence=0.999)
    assert few.method == "t" and few.upper / few.lower > e.upper / e.lower


def test_noisy_ties_with_stretched_blocks_are_never_kept():
    """Heavy tails: now and then another process stretches one block of a pair 1.5-3x.
    The sign-test bounds of long races stay honest."""
    rule = Rule(min_gain=0.02, confidence=0.99, min_pairs=4, max_pairs=200)
    for seed in range(12):
        rng = np.random.default_rng(seed)
        n = 200
        ref = np.exp(rng.normal(0, 0.05, n))
        ours = np.exp(rng.normal(0, 0.05, n))
        for sample in (ref, ours):
            hit = rng.random(n) < 0.1
            sample[hit] *= rng.uniform(1.5, 3.0, hit.sum())
        for m in rule.looks():
            verdict = judge(ref[:m], {"a": ours[:m]}, rule, comparisons=1)
            assert verdict.state != KEEP, (seed, m, verdict.reason)


def test_a_small_real_gain_is_kept_once_enough_pairs_accumulate():
    rule = Rule(min_gain=0.02, confidence=0.99, min_pairs=4, max_pairs=200)
    kept_at = []
    for seed in range(10):
        verdict, rounds, _ = race({"a": 1.08}, noise=0.04, seed=seed, rule=rule)
        assert verdict.state == KEEP, (seed, verdict.reason)
        kept_at.append(rounds)
    assert min(kept_at) >= 8  # not at the first look: the interval needs pairs


def test_looks_are_planned_to_the_rounds_the_budget_holds():
    from hlo_go.api.measure import planned_pairs

    assert planned_pairs(4.0, 0.02, min_pairs=4, max_pairs=200) == 100
    assert planned_pairs(4.0, 3.0, min_pairs=4, max_pairs=200) == 4  # never under min_pairs
    assert planned_pairs(100.0, 0.001, min_pairs=4, max_pairs=200) == 200
    # fewer planned rounds, fewer looks: each look's bound is less strict
    short, long = Rule(max_pairs=4), Rule(max_pairs=200)
    assert short.looks() == (4,) and long.looks() == (4, 8, 16, 32, 64, 128, 200)
    assert short.per_look_confidence(1) < long.per_look_confidence(1)


def test_race_alternates_blocks_with_the_collector_off():
    import gc

    from hlo_go.api.measure import race

    calls: list[tuple[str, bool]] = []

    def block(name):
        def run():
            calls.append((name, gc.isenabled()))
            return sum(range(2000))

        return run

    rule = Rule(min_gain=0.5, min_pairs=4, max_pairs=8)
    verdict, samples, ref, _ = race(
        block("jit"), {"a": block("a")}, rule, budget_s=60.0, clock="cpu", calls=1
    )
    assert gc.isenabled()
    assert verdict.state != CONTINUE
    assert len(samples["a"]) == len(ref) >= rule.min_pairs
    assert not any(enabled for _, enabled in calls)
    timed = [name for name, _ in calls[2:]]  # after the warm-up round
    assert timed[:4] == ["jit", "a", "a", "jit"]  # the order alternates round by round


def test_a_race_looks_once_however_short_its_budget():
    from hlo_go.api.measure import race

    rule = Rule(min_gain=0.5, min_pairs=4, max_pairs=100)
    work = lambda: sum(range(5000))  # noqa: E731
    verdict, samples, ref, _ = race(work, {"a": work}, rule, budget_s=0.0, clock="cpu", calls=1)
    assert verdict.state == DROP and len(ref) == len(samples["a"]) >= rule.min_pairs
