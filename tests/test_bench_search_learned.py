"""The search_learned benchmark's summary: each search against the best correct heuristic."""

from __future__ import annotations

import pytest
from bench_rows import rows as _rows

from benchmarks.bench_search_learned import RESULTS_VERSION, reusable, summarize, versus_best


def test_search_against_the_best_correct_heuristic() -> None:
    per_graph = {
        "a_l2": _rows("a_l2", xla_cpu_like=0.9, fuse_all_legal=0.8, priority_fusion=None,
                      searched=1.0, searched_learned=0.8),
        "b_l2": _rows("b_l2", xla_cpu_like=1.0, searched=0.5, searched_learned=None),
        "c_l2": _rows("c_l2", searched=0.5),  # no heuristic: left out
    }  # fmt: skip
    assert versus_best(per_graph, "searched") == pytest.approx({"a_l2": 0.8, "b_l2": 2.0})
    assert versus_best(per_graph, "searched-learned") == pytest.approx({"a_l2": 1.0})
    got = summarize(per_graph, heldout={"b_l2"})
    assert got["searched_vs_best_heuristic_geomean"] == pytest.approx((0.8 * 2.0) ** 0.5)
    assert got["searched_vs_best_heuristic_heldout_geomean"] == pytest.approx(2.0)
    assert got["searched_faster_than_best_heuristic"] == 1
    assert got["searched_learned_graphs"] == 1
    assert got["searched_learned_vs_best_heuristic_heldout_geomean"] is None


def test_resume_drops_graphs_of_another_model_or_version() -> None:
    per_graph = {
        "a": {"version": RESULTS_VERSION, "model_sha256": "m1"},
        "b": {"version": RESULTS_VERSION, "model_sha256": "m0"},
        "c": {"version": RESULTS_VERSION - 1, "model_sha256": "m1"},
        "d": {"version": RESULTS_VERSION},  # before models were recorded
    }
    assert list(reusable(per_graph, "m1")) == ["a"]
