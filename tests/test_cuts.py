"""Tests of confidence cuts (hlo_go.rl.cuts): probabilities and priorities from logits by
hand, fusion and placement cuts and their deduplication, errors, the greedy pass's logits
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
    PLACEMENT_THRESHOLDS,
    TeacherJob,
    TrainConfig,
    agent_for,
    fusion_cuts,
    infer,
    make_examples,
    make_teachers,
    placement_cuts,
    policy_cuts,
    train_imitation,
)
from hlo_go.rl.cuts import fusing_priority, group_confidence, main_device, no_fuse_probability
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
    cuts = fusion_cuts(greedy, LOGITS, (0.3, 0.5, 0.6, 0.7, 0.8, 0.9))
    # 0.3: node 2 only; 0.5: nodes 1, 2 (= greedy, left out); 0.6: + node 3;
    # 0.7 = 0.6 (left out); 0.8: all; 0.9 = 0.8 (left out).
    got = [c.fusion_priority.tolist() for c in cuts]
    assert got == [[0, 0, 1, 0], [0, 0.5, 1, 0.5], [0.5, 0.5, 1, 0.5]]
    for c in cuts:
        np.testing.assert_array_equal(c.placement, greedy.placement)
        np.testing.assert_array_equal(c.schedule_priority, greedy.schedule_priority)
        assert c.fusion_priority.dtype == np.float32
    assert fusion_cuts(greedy, LOGITS, ()) == []


def test_bad_thresholds_and_logits_are_refused(graph):
    greedy = _base([0, 0, 0, 0])
    for bad in ((0.0,), (1.5,), (-0.1, 0.5)):
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            fusion_cuts(greedy, LOGITS, bad)
    with pytest.raises(ValueError, match="do not fit 4 nodes"):
        fusion_cuts(greedy, LOGITS[:3])
    with pytest.raises(ValueError, match="placement logits"):
        placement_cuts(Decisions.default(graph), graph, np.zeros((3, 4)), 4)
    assert all(0 < t <= 1 for t in (*FUSION_THRESHOLDS, *PLACEMENT_THRESHOLDS))


@pytest.fixture(scope="module")
def graph():
    from hlo_go.examples import example_path

    return build_graph(load_hlo(example_path()))


def test_placement_cuts_by_hand(graph):
    n = graph.num_nodes
    groups = np.asarray(graph.colocation_group)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(n, 8)).astype(np.float32)  # 8 = max devices; 4 count
    logits[:, 4:] = 50.0  # devices the cluster does not have never count
    # the greedy device of each group: the argmax of its mean logits over 4 devices
    ids = np.unique(groups)
    mean = {g: logits[groups == g, :4].mean(0) for g in ids}
    placement = np.array([np.argmax(mean[g]) for g in groups], np.int32)
    base = Decisions(placement, np.zeros(n, np.float32), np.zeros(n, np.float32))
    confidence = group_confidence(graph, logits, placement, 4)
    for v in (0, n // 2, n - 1):
        p = np.exp(mean[groups[v]] - mean[groups[v]].max())
        assert confidence[v] == pytest.approx(p[placement[v]] / p.sum(), rel=1e-6)
    flops = np.bincount(placement, weights=np.asarray(graph.flops, float), minlength=4)
    main = main_device(graph, placement)
    assert main == int(np.argmax(flops))
    cuts = placement_cuts(base, graph, logits, 4, (0.3, 0.5, 1.0))
    expected = [np.where(confidence < t, main, placement) for t in (0.3, 0.5, 1.0)]
    distinct = []
    for e in expected:
        if not any(np.array_equal(e, d) for d in [placement, *distinct]):
            distinct.append(e)
    assert [c.placement.tolist() for c in cuts] == [d.tolist() for d in distinct]
    assert cuts and np.all(cuts[-1].placement == main)  # τ = 1: everything on the main device
    for c in cuts:
        c.validate(graph, 4)  # colocated nodes still share a device
        np.testing.assert_array_equal(c.fusion_priority, base.fusion_priority)
    assert placement_cuts(base, graph, logits, 1) == []  # one device: nothing to cut


def test_greedy_pass_logits_give_the_greedy_decisions(graph):
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
    nodes = env.inputs.to_nodes
    placement = nodes(greedy["placement"][0])
    confidence = group_confidence(graph, nodes(passed.placement_logits), placement, 4)
    assert np.all(confidence >= 0.25 - 1e-9)  # the greedy device is the most likely of 4
    # The same logits eagerly, scoring the greedy actions.
    eager = agent.network.apply(
        params,
        env.inputs.graphs,
        jnp.asarray(4, jnp.int32),
        actions={t: jnp.asarray(a[0]) for t, a in greedy.items()},
    ).logits
    np.testing.assert_allclose(
        np.asarray(eager["fusion"])[mask], logits[mask], rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(eager["placement"])[mask], passed.placement_logits[mask], rtol=1e-4, atol=1e-5
    )


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
    plain = infer(out, graph, cluster, cuts=False)
    assert plain.simulations == 1 and plain.step_time == plain.greedy_time
    cut = infer(out, graph, cluster)  # cuts by default
    assert cut.greedy_time == plain.greedy_time and cut.step_time <= plain.step_time
    assert 1 <= cut.simulations <= 1 + len(PLACEMENT_THRESHOLDS) + len(FUSION_THRESHOLDS)
    assert policy_cuts(out) and not policy_cuts(out, False)
    placer = tmp_path / "placer"
    train_imitation(
        teachers,
        TrainConfig(policy=TINY, progress=False, tasks=("scheduling",)),
        steps=1,
        graphs=graphs,
        out_dir=placer,
    )
    assert not policy_cuts(placer)  # nothing to cut in a schedule-only policy
    assert infer(placer, graph, cluster).simulations == 1
