"""The host_policy benchmark's summary and kernel agreement (no timings)."""

from __future__ import annotations

import numpy as np
import pytest
from bench_rows import rows as _rows

from benchmarks.bench_host_policy import (
    RESULTS_VERSION,
    group_agreement,
    reusable,
    summarize,
)
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import parse_hlo

CHAIN = """HloModule m
ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] exponential(p)
  b = f32[1024] negate(a)
  ROOT c = f32[1024] add(b, p)
}
"""


@pytest.fixture
def tiny_chain() -> OpGraph:
    return build_graph(parse_hlo(CHAIN), validate=True)


def test_policy_against_the_best_correct_heuristic_and_each() -> None:
    per_graph = {
        "a": _rows("a", xla_cpu_like=0.9, fuse_all_legal=0.8, priority_fusion=None, policy=1.0),
        "b": _rows("b", xla_cpu_like=1.0, fuse_all_legal=1.2, policy=0.5),
        "c": _rows("c", xla_cpu_like=1.0, policy=None),  # the policy wrong: left out
    }
    got = summarize(per_graph)
    assert got["policy_vs_best_heuristic"] == pytest.approx({"a": 0.8, "b": 2.0})
    assert got["policy_vs_best_heuristic_geomean"] == pytest.approx((0.8 * 2.0) ** 0.5)
    assert got["policy_faster_than_best_heuristic"] == 1
    assert got["policy_graphs"] == 2 and got["policy_correct"] == 2
    by = got["policy_vs_heuristic_geomean"]
    assert by["xla-cpu-like"] == pytest.approx((0.9 * 2.0) ** 0.5)
    assert by["fuse-all-legal"] == pytest.approx((0.8 * 2.4) ** 0.5)
    assert by["priority-fusion"] is None
    assert 0.0 < got["p_policy_slower"] <= 1.0


def test_one_sided_test_says_slower_only_when_the_policy_is() -> None:
    slower = {g: _rows(g, xla_cpu_like=1.0, policy=1.1 + i / 100) for i, g in enumerate("abcdef")}
    faster = {g: _rows(g, xla_cpu_like=1.0, policy=0.9 - i / 100) for i, g in enumerate("abcdef")}
    assert summarize(slower)["p_policy_slower"] < 0.05
    assert summarize(faster)["p_policy_slower"] > 0.5


def test_group_agreement_counts_nodes_in_the_same_kernel(tiny_chain) -> None:
    graph = tiny_chain
    n = graph.num_nodes
    zeros = np.zeros(n, np.int32)
    fused = Decisions(zeros, np.zeros(n, np.float32), np.ones(n, np.float32))
    unfused = Decisions(zeros, np.zeros(n, np.float32), np.zeros(n, np.float32))
    assert group_agreement(graph, fused, fused) == 1.0
    assert group_agreement(graph, unfused, unfused) == 1.0
    # Fused, the three elementwise ops are one kernel led by its first; unfused, each is
    # its own: the parameter and that leader agree, the other two do not.
    assert group_agreement(graph, fused, unfused) == pytest.approx(2 / 4)


def test_resume_drops_graphs_of_another_policy_or_version() -> None:
    per_graph = {
        "a": {"version": RESULTS_VERSION, "policy_sha256": "p1"},
        "b": {"version": RESULTS_VERSION, "policy_sha256": "p0"},
        "c": {"version": RESULTS_VERSION - 1, "policy_sha256": "p1"},
    }
    assert list(reusable(per_graph, "p1")) == ["a"]
