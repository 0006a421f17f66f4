"""The confirming re-measure of a subject (``searched``, the host policy) against the best
heuristic: which heuristic is taken from the first measurement, the paired test, and the
summary."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_lowering_confirm import (
    RESULTS_VERSION,
    best_heuristics,
    kept_results,
    paired_test,
    partial_path,
    result,
)
from tests.bench_rows import rows


def _with_fusions(graph: dict[str, Any], fusions: int) -> dict[str, Any]:
    return {"rows": [{**r, "fusions": fusions} for r in graph["rows"]]}


def test_the_best_heuristic_is_the_fastest_correct_one_of_lowering() -> None:
    lowering = {
        "a": _with_fusions(
            rows("a", no_fusion=0.5, xla_cpu_like=1.0, fuse_all_legal=0.9, priority_fusion=0.95,
                 searched=1.0),
            40,
        ),  # no-fusion is not a fusing heuristic: fuse-all-legal is the best
        "b": _with_fusions(rows("b", fuse_all_legal=None, priority_fusion=1.1, searched=1.0), 7),
        "c": _with_fusions(rows("c", fuse_all_legal=1.0, searched=None), 3),  # searched wrong
        "d": {"graph": "d", "error": "died", "rows": []},
    }  # fmt: skip
    out = best_heuristics(lowering, "searched")
    assert sorted(out) == ["a", "b"]
    assert out["a"]["best"] == "fuse-all-legal"
    assert out["a"]["ratio"] == pytest.approx(0.9)
    assert out["a"]["subject_fusions"] == 40
    assert out["b"]["best"] == "priority-fusion"
    assert out["b"]["ratio"] == pytest.approx(1.1)


def test_paired_test_sees_a_consistent_difference_and_not_noise() -> None:
    searched = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98]
    slower_best = [1.1 * s for s in searched]  # every round 10 % slower: searched faster
    out = paired_test(slower_best, searched)
    assert out["paired_ratio_median"] == pytest.approx(1.1)
    assert out["p"] < 0.05
    alike = paired_test([1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.03, 0.97], searched)
    assert alike["p"] > 0.05
    assert paired_test([1.0], [2.0])["p"] is None
    assert paired_test([1.0, 2.0], [1.0, 2.0])["p"] == 1.0


def test_summary_counts_only_correct_graphs_and_names_significant_ones() -> None:
    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98]

    def record(best_factor: float, correct: bool = True) -> dict[str, Any]:
        best = [best_factor * s for s in base]
        return {
            "best": "fuse-all-legal",
            "best_s": sorted(best)[4],
            "subject_s": sorted(base)[4],
            "best_samples_s": best,
            "subject_samples_s": base,
            "fusions": {"policy": 5, "fuse-all-legal": 6},
            "checks": {"policy": {"correct": correct}, "fuse-all-legal": {"correct": True}},
        }

    first = {
        g: {"best": "fuse-all-legal", "ratio": r, "subject_fusions": 5}
        for g, r in (("fast", 0.9), ("slow", 0.95), ("wrong", 1.0), ("died", 1.0))
    }
    confirmed = {
        "fast": record(1.2),  # searched 1.2x faster in every round
        "slow": record(0.8),  # searched 1.25x slower in every round
        "wrong": record(2.0, correct=False),
        "died": {"graph": "died", "error": "the measuring process died"},
    }
    out = result(confirmed, first, "policy")
    assert out["policy_graphs_confirmed"] == 2
    assert out["policy_vs_best_heuristic_confirmed_geomean"] == pytest.approx((1.2 * 0.8) ** 0.5)
    assert out["policy_vs_best_heuristic_first_geomean_same_graphs"] == pytest.approx(
        (0.9 * 0.95) ** 0.5
    )
    assert out["policy_faster_significant"] == "fast"
    assert out["policy_slower_significant"] == "slow"
    assert [r["same decisions"] for r in out["rows"] if "same decisions" in r] == [True] * 3
    assert result({}, {}, "searched")["searched_vs_best_heuristic_confirmed_geomean"] is None


def test_each_subject_keeps_its_own_partial_file() -> None:
    paths = {partial_path(s) for s in ("searched", "policy")}
    paths |= {partial_path(s, quick=True) for s in ("searched", "policy")}
    assert len(paths) == 4
    assert partial_path("searched").name == "lowering_confirm.partial.json"


def test_a_cached_graph_is_measured_again_when_the_subject_decides_otherwise() -> None:
    first = {
        g: {"best": "fuse-all-legal", "subject_fusions": 40} for g in ("same", "moved", "other")
    }
    first["other"]["best"] = "xla-cpu-like"
    cached = {
        g: {"version": RESULTS_VERSION, "best": "fuse-all-legal", "rounds": 10,
            "fusions": {"fuse-all-legal": 38, "searched": 40}}
        for g in ("same", "moved", "other", "gone")
    }  # fmt: skip
    cached["moved"]["fusions"] = {"fuse-all-legal": 38, "searched": 41}
    assert set(kept_results(cached, first, "searched", rounds=10)) == {"same"}
    assert kept_results(cached, first, "searched", rounds=3) == {}
