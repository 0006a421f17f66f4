"""The heuristic_choice benchmark's figures: which heuristic a simulator picks, what the
pick costs measured, and the ranking against the measurement."""

from __future__ import annotations

import pytest

from benchmarks.bench_heuristic_choice import BEFORE_FIX, choice, measured, simulators, summarize


def test_only_graphs_with_every_variant_measured_correct() -> None:
    rows = [
        {"graph": "a", "variant": v, "correct": True, "relative": r}
        for v, r in (("xla-cpu-like", 0.9), ("fuse-all-legal", 0.8),
                     ("priority-fusion", 0.85), ("no-fusion", 1.2), ("searched", 0.7))
    ] + [
        {"graph": "b", "variant": "xla-cpu-like", "correct": True, "relative": 1.0},
        {"graph": "b", "variant": "fuse-all-legal", "correct": False, "relative": 0.5},
    ]  # fmt: skip
    got = measured({"rows": rows})
    assert list(got) == ["a"]
    assert got["a"] == {"xla-cpu-like": 0.9, "fuse-all-legal": 0.8, "priority-fusion": 0.85,
                        "no-fusion": 1.2}  # fmt: skip


def test_the_pick_its_regret_and_the_ranking() -> None:
    times = {"xla-cpu-like": 0.9, "fuse-all-legal": 0.8, "priority-fusion": 0.85, "no-fusion": 1.2}
    right = choice({"xla-cpu-like": 3.0, "fuse-all-legal": 1.0, "priority-fusion": 2.0,
                    "no-fusion": 4.0}, times)  # fmt: skip
    assert right["pick"] == right["measured_best"] == "fuse-all-legal"
    assert right["regret"] == 1.0 and right["tau"] == pytest.approx(1.0)
    # fuse-all-legal priced far too slow: it picks xla-cpu-like, measured 0.9 / 0.8
    wrong = choice({"xla-cpu-like": 1.0, "fuse-all-legal": 50.0, "priority-fusion": 2.0,
                    "no-fusion": 4.0}, times)  # fmt: skip
    assert wrong["pick"] == "xla-cpu-like" and not wrong["picks_measured_best"]
    assert wrong["regret"] == pytest.approx(0.9 / 0.8)
    assert wrong["tau"] < right["tau"]
    got = summarize({"g1": {"s": right}, "g2": {"s": wrong}}, ["s"])
    assert got["s_picks_measured_best"] == 1
    assert got["s_regret_geomean"] == pytest.approx((0.9 / 0.8) ** 0.5)
    assert got["s_regret_max"] == pytest.approx(0.9 / 0.8)


def test_the_ablation_is_the_roofline_with_large_matrices_fused() -> None:
    sims = simulators()
    roofline, before = sims["host-cpu-1"], sims[BEFORE_FIX]
    assert not any(d.fuses_large_matrices for d in roofline.devices)
    assert all(d.fuses_large_matrices for d in before.devices)
    assert [d.replace(fuses_large_matrices=False) for d in before.devices] == list(roofline.devices)
