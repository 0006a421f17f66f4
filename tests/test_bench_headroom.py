"""The headroom benchmark's summary: a search that accepted nothing gains 1 by construction."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_headroom import result


def _record(
    family: str,
    accepted: int,
    heuristic_s: float,
    found_s: float,
    rounds: tuple[list[float], list[float]] | None = None,
) -> dict[str, Any]:
    samples = {}
    if rounds:
        samples = {"heuristic_samples_s": rounds[0], "found_samples_s": rounds[1]}
    return {
        "family": family,
        "best_heuristic": "priority-fusion",
        "search": {"accepted": accepted, "measured": 10, "illegal": 0, "final_correct": True},
        "remeasure": {
            "rounds": 12,
            "heuristic_s": heuristic_s,
            "found_s": found_s,
            "gain": heuristic_s / found_s,
            "paired_gain_p25": 0.9,
            "paired_gain_p75": 1.1,
            "checks": {"heuristic": {"correct": True}, "found": {"correct": True}},
            **samples,
        },
    }


def test_gain_is_one_where_the_search_kept_the_heuristic() -> None:
    per_graph = {
        "a": _record("x", accepted=0, heuristic_s=1.0, found_s=1.04),  # identical lowerings
        "b": _record("y", accepted=2, heuristic_s=1.21, found_s=1.0),
    }
    out = result(per_graph, ("a", "b", "c"), candidates=10)
    rows = {r["graph"]: r for r in out["rows"]}
    assert rows["a"]["gain"] == 1.0 and rows["a"]["measured_ratio"] == pytest.approx(
        1 / 1.04, abs=1e-4
    )
    assert rows["b"]["gain"] == pytest.approx(1.21)
    assert rows["c"] == {"graph": "c", "note": "not run"}
    assert out["headroom_geomean"] == pytest.approx(1.21**0.5, abs=1e-4)
    assert out["graphs"] == 2 and out["families"] == 2


def test_only_gains_a_test_supports_count_in_the_supported_headroom() -> None:
    steady = ([1.2, 1.21, 1.19, 1.2, 1.22, 1.2], [1.0, 1.0, 0.99, 1.01, 1.0, 1.0])
    noisy = ([1.3, 0.9, 1.2, 0.95, 1.25, 0.9], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    per_graph = {
        "steady": _record("x", accepted=1, heuristic_s=1.2, found_s=1.0, rounds=steady),
        "noisy": _record("y", accepted=1, heuristic_s=1.1, found_s=1.0, rounds=noisy),
        "kept": _record("z", accepted=0, heuristic_s=1.0, found_s=1.0),
    }
    out = result(per_graph, ("steady", "noisy", "kept"), candidates=10)
    rows = {r["graph"]: r for r in out["rows"]}
    assert rows["steady"]["p_found_faster"] < 0.05 < rows["noisy"]["p_found_faster"]
    assert rows["kept"]["p_found_faster"] is None
    assert out["headroom_geomean"] == pytest.approx((1.2 * 1.1) ** (1 / 3), abs=1e-4)
    assert out["headroom_geomean_supported"] == pytest.approx(1.2 ** (1 / 3), abs=1e-4)
    assert out["wins_supported"] == 1
