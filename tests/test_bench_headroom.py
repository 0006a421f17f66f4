"""The headroom benchmark's summary: a search that accepted nothing gains 1 by construction."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_headroom import result


def _record(family: str, accepted: int, heuristic_s: float, found_s: float) -> dict[str, Any]:
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
