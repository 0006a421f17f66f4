"""The shipped GPU GO policy (``v100x4`` and ``h100x8``, one network) on a family it was
never trained on (issue 43): on each of its clusters, its own
zero-shot decisions (greedy, its confidence cuts, a climb along its move head's ranking;
no heuristic input) differ from every standard heuristic's and are faster in simulation
than each of them."""

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
