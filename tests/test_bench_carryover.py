"""The carryover benchmark's figures: a copy timed after a slow neighbour against two
identical copies."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_carryover import graph_row, result


def _record(graph: str, a3_factor: float, rounds: int = 8) -> dict[str, Any]:
    base = [1.0 + 0.01 * (i % 3) for i in range(rounds)]
    return {
        "graph": graph,
        "rounds": rounds,
        "samples_s": {
            "A1": base,
            "A2": [b * 1.002 for b in base],
            "no-fusion": [b * 1.5 for b in base],
            "A3": [b * a3_factor * (1 + 0.002 * (-1) ** i) for i, b in enumerate(base)],
        },
    }


def test_a_copy_slowed_by_its_neighbour_is_named_and_an_unaffected_one_is_not() -> None:
    row = graph_row(_record("slow", 1.05))
    assert row["after_no_fusion"] == pytest.approx(1.05, rel=5e-3)
    assert row["identical_spread"] == pytest.approx(1 / 1.002)
    assert row["no_fusion"] == pytest.approx(1.5 / 1.001, rel=1e-3)
    assert row["p (A3 vs A1)"] < 0.05
    out = result({"slow": _record("slow", 1.05), "same": _record("same", 1.0),
                  "broken": {"graph": "broken", "error": "died"}})  # fmt: skip
    assert out["slower_after_no_fusion"] == "slow"
    assert out["graphs"] == 2
    assert out["graphs_failed"] == "broken"
    assert 1.0 < out["after_no_fusion_median"] < 1.05
    assert out["identical_spread_max"] == pytest.approx(1.002)


def test_no_graphs_give_no_headline() -> None:
    out = result({})
    assert out["after_no_fusion_median"] is None
    assert out["slower_after_no_fusion"] == "none"
