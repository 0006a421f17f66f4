"""The carryover benchmark's figures: a copy timed after a slow neighbour against
identical copies, per round order."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_carryover import ORDERS, graph_row, result


def _samples(a3_factor: float, rounds: int) -> dict[str, list[float]]:
    base = [1.0 + 0.01 * (i % 3) for i in range(rounds)]
    return {
        "A1": base,
        "A2": [b * 1.002 for b in base],
        "no-fusion": [b * 1.5 for b in base],
        "A3": [b * a3_factor * (1 + 0.002 * (-1) ** i) for i, b in enumerate(base)],
    }


def _record(graph: str, rotated: float, balanced: float, rounds: int = 8) -> dict[str, Any]:
    return {
        "graph": graph,
        "rounds": rounds,
        "samples_s": {"rotated": _samples(rotated, rounds), "balanced": _samples(balanced, rounds)},
    }


def test_a_copy_slowed_by_its_neighbour_is_named_per_order() -> None:
    row = graph_row(_record("slow", 1.05, 1.0), "rotated")
    assert row["after_no_fusion"] == pytest.approx(1.05, rel=5e-3)
    assert row["identical_spread"] == pytest.approx(1 / 1.002)
    assert row["no_fusion"] == pytest.approx(1.5 / 1.001, rel=1e-3)
    assert row["p (A3 vs A1)"] < 0.05
    out = result({"slow": _record("slow", 1.05, 1.0), "same": _record("same", 1.0, 1.0),
                  "broken": {"graph": "broken", "error": "died"}})  # fmt: skip
    assert out["slower_after_no_fusion_rotated"] == "slow"
    assert out["slower_after_no_fusion_balanced"] == "none"
    assert out["graphs"] == 2 and out["graphs_failed"] == "broken"
    assert 1.0 < out["after_no_fusion_median_rotated"] < 1.05
    assert out["after_no_fusion_median_balanced"] == pytest.approx(1.0, abs=3e-3)
    assert [r["order"] for r in out["rows"]] == [o for o in ORDERS for _ in range(2)]


def test_no_graphs_give_no_headline() -> None:
    out = result({})
    assert all(out[f"after_no_fusion_median_{o}"] is None for o in ORDERS)
    assert out["rows"] == []
