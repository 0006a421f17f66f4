"""The decide benchmark runs (on its 4 smallest graphs): every row's decodes are never
slower in simulation than the greedy decisions, and it counts their simulations. No
timing is asserted."""

from __future__ import annotations

from benchmarks.bench_decide import run
from hlo_go.rl import DEFAULT_MOVES, FUSION_THRESHOLDS, PLACEMENT_THRESHOLDS


def test_quick_run_decodes_every_graph() -> None:
    result = run(quick=True)
    assert result["graphs"] == len(result["rows"]) == 4
    assert result["moves"] == DEFAULT_MOVES and result["executables"] > 0
    for row in result["rows"]:
        assert row["vs_greedy"] >= 1.0 and row["moves_vs_greedy"] >= 1.0, row
        cuts = len(PLACEMENT_THRESHOLDS) + len(FUSION_THRESHOLDS)
        assert 1 <= row["moves_simulations"] <= 1 + cuts + DEFAULT_MOVES, row
        assert row["warm_s"] > 0 and row["moves_warm_s"] > 0
