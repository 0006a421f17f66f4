"""Tests of fusion sweeps (hlo_go.rl.fusion_sweep): probabilities and priorities from
logits by hand, the cuts and their deduplication, errors, the greedy pass's fusion logits
against the greedy decode (jitted and eager), and zero-shot decoding with cuts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.decisions import Decisions
from hlo_go.gonet import PolicyConfig
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.rl import (
    FUSION_THRESHOLDS,
    TeacherJob,
    TrainConfig,
    agent_for,
    fusion_sweep,
    infer,
    make_examples,
    make_teachers,
    policy_fusion_thresholds,
    train_imitation,
)
from hlo_go.rl.fusion_sweep import fusing_priority, no_fuse_probability
from hlo_go.sim import get_cluster

TINY = PolicyConfig(hidden_size=16, gnn_layers=1, num_heads=2, segments_per_step=2)
# Four nodes, three bins (priorities 0, 0.5, 1). Probabilities of bin 0:
# softmax([2, 0, 0]) = 0.787, softmax([0, 0, 0]) = 1/3, softmax([0, 1, 3])[0] = 0.042,
# softmax([1, 0, 0]) = 0.576.
LOGITS = np.array([[2, 0, 0], [0, 0, 0], [0, 1, 3], [1, 0, 0]], np.float32)


def _base(fusion) -> Decisions:
    return Decisions(
        np.array([0, 1, 2, 3], np.int32),
        np.array([0.1, 0.2, 0.3, 0.4], np.float32),
        np.asarray(fusion, np.float32),
    )


def test_probabilities_and_priorities_by_hand():
    p = no_fuse_probability(LOGITS)
    e = np.exp(1.0)
    expected = [e**2 / (e**2 + 2), 1 / 3, 1 / (1 + e + e**3), e / (e + 2)]
    np.testing.assert_allclose(p, expected, rtol=1e-6)
    np.testing.assert_allclose(p, np.asarray(jax.nn.softmax(LOGITS)[:, 0]), rtol=1e-5)
    # The most likely bin other than 0: ties go to the lower bin.
    np.testing.assert_array_equal(fusing_priority(LOGITS), [0.5, 0.5, 1.0, 0.5])


def test_cuts_by_hand_keep_placement_and_schedule():
    greedy = _base([0.0, 0.5, 1.0, 0.0])  # the argmax decode of LOGITS
    cuts = fusion_sweep(greedy, LOGITS, (0.3, 0.5, 0.6, 0.7, 0.8, 0.9))
    # 0.3: node 2 only; 0.5: nodes 1, 2 (= greedy, left out); 0.6: + node 3;
    # 0.7 = 0.6 (left out); 0.8: all; 0.9 = 0.8 (left out).
    got = [c.fusion_priority.tolist() for c in cuts]
    assert got == [[0, 0, 1, 0], [0, 0.5, 1, 0.5], [0.5, 0.5, 1, 0.5]]
    for c in cuts:
        np.testing.assert_array_equal(c.placement, greedy.placement)
        np.testing.assert_array_equal(c.schedule_priority, greedy.schedule_priority)
        assert c.fusion_priority.dtype == np.float32
    assert fusion_sweep(greedy, LOGITS, ()) == []


def test_bad_thresholds_and_logits_are_refused():
    greedy = _base([0, 0, 0, 0])
    for bad in ((0.0,), (1.5,), (-0.1, 0.5)):
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            fusion_sweep(greedy, LOGITS, bad)
    with pytest.raises(ValueError, match="do not fit 4 nodes"):
        fusion_sweep(greedy, LOGITS[:3])
    assert all(0 < t <= 1 for t in FUSION_THRESHOLDS)


@pytest.fixture(scope="module")
def graph():
    from hlo_go.examples import example_path

    return build_graph(load_hlo(example_path()))


def test_greedy_pass_logits_give_the_greedy_fusion(graph):
    config = TrainConfig(policy=TINY, max_devices=4)
    agent = agent_for(config)
    from hlo_go.gonet import TASKS
    from hlo_go.rl import GraphEnv

    env = GraphEnv(graph, get_cluster("v100x4"), TINY, TASKS)
    params = agent.policy.init(jax.random.key(1), env.inputs, 4)
    passed = agent.greedy_pass(params, env)
    greedy = agent.greedy(params, env)
    for task in greedy:
        np.testing.assert_array_equal(passed.actions[task], greedy[task])
    assert passed.move_score is None
    mask = np.asarray(env.inputs.graphs.nodes["mask"], bool)
    logits = passed.fusion_logits
    assert logits.shape == (mask.size, TINY.priority_bins)
    np.testing.assert_array_equal(np.argmax(logits, 1)[mask], greedy["fusion"][0][mask])
    # The same logits eagerly, scoring the greedy actions.
    eager = agent.network.apply(
        params,
        env.inputs.graphs,
        jnp.asarray(4, jnp.int32),
        actions={t: jnp.asarray(a[0]) for t, a in greedy.items()},
    ).logits["fusion"]
    np.testing.assert_allclose(np.asarray(eager)[mask], logits[mask], rtol=1e-4, atol=1e-5)


def test_infer_with_cuts_is_never_slower_and_counts_its_simulations(graph, tmp_path):
    cluster = get_cluster("v100x4")
    graphs = {"cnn": graph}
    teachers = make_teachers(
        [TeacherJob("cnn", "v100x4", evaluations=40)], store=tmp_path / "store", graphs=graphs
    )
    config = TrainConfig(policy=TINY, progress=False, checkpoint_every=0)
    make_examples(teachers, config, graphs=graphs)
    out = tmp_path / "run"
    train_imitation(teachers, config, steps=5, graphs=graphs, out_dir=out)
    plain = infer(out, graph, cluster, fusion_thresholds=())
    assert plain.simulations == 1 and plain.step_time == plain.greedy_time
    swept = infer(out, graph, cluster)  # the default thresholds
    assert swept.greedy_time == plain.greedy_time
    assert swept.step_time <= plain.step_time
    assert 1 <= swept.simulations <= 1 + len(FUSION_THRESHOLDS)
    assert policy_fusion_thresholds(out) == FUSION_THRESHOLDS
    assert policy_fusion_thresholds(out, [0.9]) == (0.9,)
    one = infer(out, graph, cluster, fusion_thresholds=[1.0])  # everything fuses
    assert one.simulations in (1, 2) and one.step_time <= plain.step_time
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        infer(out, graph, cluster, fusion_thresholds=[2.0])
    placer = tmp_path / "placer"
    train_imitation(
        teachers,
        TrainConfig(policy=TINY, progress=False, tasks=("placement",)),
        steps=1,
        graphs=graphs,
        out_dir=placer,
    )
    assert policy_fusion_thresholds(placer) == ()
    with pytest.raises(ValueError, match="learns fusion"):
        infer(placer, graph, cluster, fusion_thresholds=[0.9])
