"""The shipped GO policies on families they were never trained on (issue 43): the GPU
policy (``v100x4`` and ``h100x8``, one network) on each of its clusters, and the
``host-cpu`` policy on both host simulators (roofline and learned kernel model). Their own
zero-shot decisions (greedy, confidence cuts, a climb along the move head's ranking where
there is one; no heuristic input) differ from every standard heuristic's and are faster in
simulation than each of them."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_go import corpus, load_policy
from hlo_go.graph import build_graph
from hlo_go.pretrained import policy_path
from hlo_go.rl import DEFAULT_MOVES, infer
from hlo_go.rl.compare import heuristic_names, run_baselines
from hlo_go.sim import get_cluster

HELD_OUT = "gpt2"


@pytest.fixture(scope="module")
def policy():
    return load_policy("v100x4")


def test_the_shipped_policy_never_saw_the_held_out_family(policy):
    assert policy.config.policy.move_head
    assert policy.meta["kind"] == "imitation"
    assert sorted(policy.meta["clusters"]) == ["h100x8", "v100x4"]
    assert policy_path("h100x8") == policy_path("v100x4")  # one network for both
    families = {corpus.family(label.split("@")[0]) for label in policy.meta["graphs"]}
    assert HELD_OUT not in families and len(families) >= 6


@pytest.mark.parametrize(
    ("name", "cluster_name"),
    [("gpt2_l2", "v100x4"), ("gpt2_l4", "v100x4"), ("gpt2_l2", "h100x8")],
)
def test_on_a_held_out_graph_it_beats_every_heuristic(policy, name, cluster_name):
    graph = build_graph(corpus.load(name, "prefusion"))
    cluster = get_cluster(cluster_name)
    found = infer(policy, graph, cluster)  # greedy, cuts, a climb of DEFAULT_MOVES moves
    assert DEFAULT_MOVES > 0 and not found.oom
    names = heuristic_names()
    decided: list = []
    rows = run_baselines(graph, cluster, names, decisions_out=decided)
    assert len(rows) == len(names) >= 5
    for row, decisions in zip(rows, decided, strict=True):
        same = all(
            np.array_equal(
                np.asarray(getattr(found.decisions, f)), np.asarray(getattr(decisions, f))
            )
            for f in ("placement", "schedule_priority", "fusion_priority")
        )
        assert not same, f"the policy decided as {row.method} did"
        assert found.step_time < row.step_time, (row.method, row.step_time, found.step_time)


# The shipped host-cpu policy: fusion and scheduling on one core, taught on the learned
# cost model's simulator with bert and gnmt held out (measured on XLA:CPU by
# ``python -m benchmarks host_policy``).
HOST_HELD_OUT = ("bert", "gnmt")


@pytest.fixture(scope="module")
def host_policy():
    return load_policy("host-cpu")


def test_the_shipped_host_policy_never_saw_its_held_out_families(host_policy):
    assert host_policy.meta["kind"] == "imitation"
    assert host_policy.meta["cluster"] == "host-cpu-1-learned"
    assert set(host_policy.config.tasks) == {"scheduling", "fusion"}
    families = {corpus.family(label.split("@")[0]) for label in host_policy.meta["graphs"]}
    assert not families & set(HOST_HELD_OUT) and len(families) >= 6


# On gnmt_l2_scan, priced by the model it was taught on, it beats every heuristic; on
# bert_l2, priced by the roofline, its kernels are fuse-all-legal's (its priorities differ)
# and it ties that heuristic, faster than the others.
@pytest.mark.parametrize(
    ("name", "cluster_name", "strict"),
    [("gnmt_l2_scan", "host-cpu-1-learned", True), ("bert_l2", "host-cpu-1", False)],
)
def test_on_a_held_out_graph_the_host_policy_beats_every_heuristic(
    host_policy, name, cluster_name, strict
):
    graph = build_graph(corpus.load(name, "prefusion"))
    cluster = get_cluster(cluster_name)
    found = infer(host_policy, graph, cluster)  # greedy and its confidence cuts
    names = heuristic_names()
    decided: list = []
    rows = run_baselines(graph, cluster, names, decisions_out=decided)
    assert len(rows) == len(names) >= 5
    for row, decisions in zip(rows, decided, strict=True):
        same = np.array_equal(
            np.asarray(found.decisions.fusion_priority), np.asarray(decisions.fusion_priority)
        )
        assert not same, f"the policy fused as {row.method} did"
        if strict:
            assert found.step_time < row.step_time, (row.method, row.step_time, found.step_time)
        else:
            assert found.step_time <= row.step_time, (row.method, row.step_time, found.step_time)
