"""The lowering benchmark's bookkeeping: where results are cached, and what the two
allocators' measurements say about page-faulting temporaries in."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_lowering import (
    PARTIAL,
    against_best_heuristic,
    compare_allocators,
    partial_path,
)


def _row(variant: str, time_s: float, base_s: float, **extra: Any) -> dict[str, Any]:
    return {
        "variant": variant,
        "correct": True,
        "time_s": time_s,
        "baseline_time_s": base_s,
        "relative": time_s / base_s,
        "repeats": 5,
        **extra,
    }


def test_each_allocator_has_its_own_cache() -> None:
    assert partial_path("system") == PARTIAL
    assert partial_path("retain").name == "lowering_retain.partial.json"
    assert partial_path("retain", quick=True).name == "lowering_retain.partial.quick.json"


def test_page_fault_cost_is_the_time_difference_per_megabyte() -> None:
    mb = 1_000_000
    # XLA's default: 100 MB of temporaries, 1.00 s under retain, 1.05 s under system
    # (0.5 ms/MB); searched: 300 MB, 0.95 s and 1.10 s (0.5 ms/MB); priority-fusion:
    # 200 MB, 1.00 s and 1.06 s (0.3 ms/MB, and its default again 0.5 ms/MB).
    retain = {
        "g": {
            "rows": [
                _row("searched", 0.95, 1.0, temp_bytes=300 * mb, baseline_temp_bytes=100 * mb),
                _row("priority-fusion", 1.0, 1.0, temp_bytes=200 * mb,
                     baseline_temp_bytes=100 * mb),
                _row("no-fusion", 2.0, 1.0, temp_bytes=900 * mb, baseline_temp_bytes=100 * mb),
            ]
        },
        "only-retain": {"rows": [_row("searched", 1.0, 1.0, temp_bytes=mb,
                                      baseline_temp_bytes=mb)]},
    }  # fmt: skip
    system = {
        "g": {
            "rows": [
                _row("searched", 1.10, 1.05),
                _row("priority-fusion", 1.06, 1.05),
                {**_row("no-fusion", 3.0, 1.05), "repeats": 1},  # timed apart: no estimate
            ]
        }
    }
    out = compare_allocators(retain, system)
    assert out["page_fault_estimates"] == 4
    assert out["page_fault_ms_per_MB"] == pytest.approx(0.5)  # median of .5 .5 .3 .5
    (row,) = out["searched_by_allocator"]
    assert row == {
        "graph": "g",
        "system": round(1.10 / 1.05, 3),
        "retain": 0.95,
        "temp_MB": 300.0,
        "default_temp_MB": 100.0,
    }
    assert compare_allocators(retain, {})["page_fault_ms_per_MB"] is None


def test_searched_is_judged_against_each_graphs_fastest_heuristic() -> None:
    def graph(searched: float, **heuristics: float) -> dict[str, Any]:
        times = {
            "no-fusion": 2.0,
            "xla-cpu-like": 1.0,
            "fuse-all-legal": 1.0,
            "priority-fusion": 1.0,
        } | {k.replace("_", "-"): v for k, v in heuristics.items()}
        rows = [_row(v, t, 1.0) for v, t in (times | {"searched": searched}).items()]
        return {"rows": rows}  # fmt: skip

    per_graph = {
        "a": graph(0.5, fuse_all_legal=0.4),  # best heuristic 0.4: searched 0.8x
        "b": graph(0.5),  # best heuristic 1.0: searched 2x
        "c": {"rows": [_row("searched", 0.1, 1.0)]},  # no heuristics timed: left out
        "d": {**graph(0.5), "rows": [{**r, "correct": r["variant"] != "searched"}
                                     for r in graph(0.5)["rows"]]},  # searched wrong: out
    }  # fmt: skip
    out = against_best_heuristic(per_graph)
    assert out["graphs_compared"] == 2
    assert out["searched_vs_best_heuristic_geomean"] == pytest.approx((0.8 * 2.0) ** 0.5)
    assert out["searched_faster_than_best_heuristic"] == "1/2"
    assert out["best_heuristic_speedup_geomean"] == pytest.approx((2.5 * 1.0) ** 0.5)
    assert out["no_fusion_speedup_geomean"] == pytest.approx(0.5)
    assert out["searched_speedup_geomean"] == pytest.approx(2.0)
    assert against_best_heuristic({})["searched_vs_best_heuristic_geomean"] is None
