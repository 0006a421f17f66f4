"""Tests of single moves (hlo_go.rl.moves) and the GO policy's move head: targets, moved
groups, simulated gains against direct simulation, labels, the head's target distribution
and loss, the head under jit, and imitation + zero-shot decoding with moves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.baselines.search import score
from hlo_go.decisions import Decisions
from hlo_go.gonet import GOPolicy, PolicyConfig
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.rl import (
    DEFAULT_MOVES,
    TeacherJob,
    TrainConfig,
    agent_for,
    decode_bases,
    infer,
    load_checkpoint,
    make_examples,
    make_teachers,
    refine_moves,
)
from hlo_go.rl.imitation import move_loss, train_imitation
from hlo_go.rl.moves import (
    best_move,
    climb_moves,
    group_flops,
    group_ids,
    label_moves,
    largest_groups,
    move_gains,
    move_target_distribution,
    move_targets,
    moved,
    ranked_by_score,
    single_moves,
)
from hlo_go.sim import get_cluster, simulate

TINY = PolicyConfig(hidden_size=16, gnn_layers=1, num_heads=2, segments_per_step=2)
MOVER = PolicyConfig(hidden_size=16, gnn_layers=1, num_heads=2, segments_per_step=2, move_head=True)


@pytest.fixture(scope="module")
def graph():
    from hlo_go.examples import example_path

    return build_graph(load_hlo(example_path()))


@pytest.fixture(scope="module")
def cluster():
    return get_cluster("v100x4")


def _on_one_device(graph) -> Decisions:
    n = graph.num_nodes
    return Decisions(
        np.zeros(n, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    ).for_graph(graph)


def test_targets_go_to_the_least_loaded_other_device(graph):
    n = graph.num_nodes
    assert (move_targets(graph, np.zeros(n, np.int32), 4) == 1).all()
    assert (move_targets(graph, np.zeros(n, np.int32), 1) == 0).all()
    # The largest group alone on device 1: devices 2 and 3 are empty, 2 comes first.
    top = largest_groups(graph, 1)[0]
    placement = np.where(np.asarray(graph.colocation_group) == top, 1, 0).astype(np.int32)
    assert (move_targets(graph, placement, 4) == 2).all()
    # Device 0 emptied of flops: groups on 0 go to device 2, the others to device 0.
    flops = np.asarray(graph.flops)
    placement = np.where(flops > 0, 1, 0).astype(np.int32)
    expected = np.where(placement == 0, 2, 0)
    np.testing.assert_array_equal(move_targets(graph, placement, 3), expected)


def test_largest_groups_rank_by_total_flops(graph):
    ids = group_ids(graph)
    assert set(ids) == set(np.asarray(graph.colocation_group))
    ranked = largest_groups(graph)
    totals = group_flops(graph)[ranked]
    assert sorted(ranked) == sorted(ids)
    assert (np.diff(totals) <= 0).all()
    assert list(largest_groups(graph, 3)) == list(ranked[:3])
    by_score = ranked_by_score(graph, np.asarray(graph.flops, np.float64) * 0 + 1.0, 4)
    assert list(by_score) == sorted(ids)[:4]  # all equal: lowest ids first


def test_moved_moves_the_whole_group_and_nothing_else(graph):
    group = np.asarray(graph.colocation_group)
    sizes = np.bincount(group)
    g = int(np.argmax(sizes))
    base = _on_one_device(graph)
    after = moved(base, graph, g, 3)
    placement = np.asarray(after.placement)
    assert (placement[group == g] == 3).all() and (placement[group != g] == 0).all()
    np.testing.assert_array_equal(after.schedule_priority, base.schedule_priority)


def test_gains_are_simulated_log_ratios_and_best_move_never_slower(graph, cluster):
    base = _on_one_device(graph)
    groups = largest_groups(graph, 5)
    gains, base_time = move_gains(graph, cluster, base, groups)
    assert base_time == pytest.approx(simulate(graph, cluster, base).step_time)
    for g, gain in zip(groups, gains, strict=True):
        t = simulate(graph, cluster, moved(base, graph, int(g), 1)).step_time
        assert gain == pytest.approx(np.log(base_time / t), rel=1e-5, abs=1e-7)
    found, found_time, runs = best_move(graph, cluster, base, groups)
    assert runs == 6
    assert found_time == pytest.approx(base_time * np.exp(-max(0.0, float(gains.max()))))
    if gains.max() <= 0:
        assert found is base
    # One device: nothing to move, one simulation.
    _, one_time, one_runs = best_move(graph, get_cluster("host-cpu-1"), base, groups)
    assert one_runs == 1 and one_time > 0
    assert len(single_moves(graph, base, groups, 4)) == 5


def test_climb_keeps_each_move_that_pays_as_a_hand_climb_does(graph, cluster):
    base = _on_one_device(graph)
    groups = largest_groups(graph, 8)
    found, value, runs = climb_moves(graph, cluster, base, groups)
    assert runs == 1 + len(groups)
    # The same climb by hand: each group to the least-loaded other device under the
    # decisions so far, kept when the objective drops.
    current, best = base, score(simulate(graph, cluster, base))
    kept = 0
    for g in groups:
        target = move_targets(graph, current.placement, 4)[g]
        candidate = moved(current, graph, int(g), int(target))
        t = score(simulate(graph, cluster, candidate))
        if t < best:
            current, best, kept = candidate, t, kept + 1
    assert value == pytest.approx(best, rel=1e-9)
    np.testing.assert_array_equal(found.placement, current.placement)
    assert value <= score(simulate(graph, cluster, base))
    # Moves that pay add up: never worse than the best single move of the same groups.
    assert value <= best_move(graph, cluster, base, groups)[1] * (1 + 1e-9)
    # A given objective and base value: only the moves are evaluated, through it.
    calls = []

    def counted(d: Decisions) -> float:
        calls.append(d)
        return score(simulate(graph, cluster, d))

    _, again, again_runs = climb_moves(
        graph,
        cluster,
        base,
        groups,
        evaluate=counted,
        base_value=score(simulate(graph, cluster, base)),
    )
    assert again == pytest.approx(value) and again_runs == len(calls) == len(groups)
    one = climb_moves(graph, get_cluster("host-cpu-1"), base, groups, base_value=1.0)
    assert one[1:] == (1.0, 0)


def test_labels_and_their_target_distribution(graph, cluster):
    base = _on_one_device(graph)
    labels = label_moves(graph, cluster, base, largest=4, others=3, seed=1)
    ranked = largest_groups(graph)
    assert list(labels.groups[:4]) == list(ranked[:4])
    assert len(set(labels.groups)) == labels.groups.size == min(7, ranked.size)
    assert set(labels.groups[4:]) <= set(ranked[4:])
    assert (labels.targets == 1).all()
    again = label_moves(graph, cluster, base, largest=4, others=3, seed=1)
    np.testing.assert_array_equal(again.groups, labels.groups)
    np.testing.assert_array_equal(again.gains, labels.gains)
    target, mask = move_target_distribution(labels, graph)
    assert mask.sum() == labels.groups.size and (target[mask == 0] == 0).all()
    assert target.sum() == pytest.approx(1.0)
    assert np.argmax(target) == labels.groups[np.argmax(labels.gains)]
    empty = label_moves(graph, get_cluster("host-cpu-1"), base)
    assert empty.groups.size == 0
    target, mask = move_target_distribution(empty, graph)
    assert target.sum() == 0 and mask.sum() == 0


def test_move_loss_by_hand():
    score = jnp.array([0.0, 0.0, 5.0])
    target = jnp.array([1.0, 0.0, 0.0])
    mask = jnp.array([1.0, 1.0, 0.0])  # the third row is not labeled: it does not count
    assert float(move_loss(score, target, mask)) == pytest.approx(np.log(2.0), rel=1e-6)
    assert float(jax.jit(move_loss)(score, target, mask)) == pytest.approx(np.log(2.0), rel=1e-6)
    assert float(move_loss(score, target * 0, mask * 0)) == 0.0


def test_move_head_scores_a_group_alike_under_jit_and_eagerly(graph):
    policy = GOPolicy(MOVER)
    inputs = policy.prepare(graph)
    params = policy.init(jax.random.key(0), inputs, 4)
    assert "move_head" in params["params"]
    assert "move_head" not in GOPolicy(TINY).init(jax.random.key(0), inputs, 4)["params"]
    agent = agent_for(TrainConfig(policy=MOVER, max_devices=4))
    network = agent.network
    from hlo_go.gonet.network import GONetwork

    devices = jnp.asarray(4, jnp.int32)
    eager = network.apply(params, inputs.graphs, devices, method=GONetwork.shared).move_score
    jitted = jax.jit(lambda p: network.apply(p, inputs.graphs, devices, method=GONetwork.shared))(
        params
    ).move_score
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-5, atol=1e-6)
    group = np.asarray(inputs.graphs.nodes["colocation_group"])
    scores = np.asarray(eager)
    np.testing.assert_allclose(scores, scores[group], rtol=1e-6)
    tiny_agent = agent_for(TrainConfig(policy=TINY, max_devices=4))
    assert (
        tiny_agent.network.apply(
            GOPolicy(TINY).init(jax.random.key(0), inputs, 4),
            inputs.graphs,
            devices,
            method=GONetwork.shared,
        ).move_score
        is None
    )


def test_imitation_trains_the_move_head_and_infer_decodes_with_it(graph, cluster, tmp_path):
    graphs = {"cnn": graph}
    teachers = make_teachers(
        [TeacherJob("cnn", "v100x4", evaluations=60)], store=tmp_path / "store", graphs=graphs
    )
    config = TrainConfig(policy=MOVER, progress=False, checkpoint_every=0)
    (example,) = make_examples(teachers, config, graphs=graphs)
    assert example.move_mask.sum() > 0
    assert example.move_target.sum() == pytest.approx(1.0, rel=1e-5)
    agent = agent_for(config)
    params = agent.policy.init(jax.random.key(0), example.env.inputs, config.max_devices)

    def loss(p) -> float:
        scores = agent.move_scores(p, example.env)
        return float(move_loss(scores, example.move_target, example.move_mask))

    out = tmp_path / "run"
    result = train_imitation(
        teachers, config, steps=40, graphs=graphs, out_dir=out, learning_rate=3e-3
    )
    assert loss(result.params) < loss(params)
    zero = infer(out, graph, cluster, moves=0, cuts=False)
    found = infer(out, graph, cluster, moves=4, cuts=False)
    assert found.step_time <= zero.step_time == found.greedy_time
    # By default a policy with a move head tries DEFAULT_MOVES of them.
    assert DEFAULT_MOVES == 16
    default = infer(out, graph, cluster, cuts=False)
    assert default.step_time <= found.step_time and default.simulations <= 1 + DEFAULT_MOVES
    with pytest.raises(ValueError, match="move head"):
        agent_for(TrainConfig(policy=TINY)).move_scores(result.params, example.env)
    no_head = tmp_path / "plain"
    train_imitation(teachers, TrainConfig(policy=TINY, progress=False), steps=1, graphs=graphs,
                    out_dir=no_head)  # fmt: skip
    with pytest.raises(ValueError, match="move head"):
        infer(no_head, graph, cluster, moves=2)


def test_refine_moves_labels_moves_from_the_networks_own_decode(graph, cluster, tmp_path):
    graphs = {"cnn": graph}
    teachers = make_teachers(
        [TeacherJob("cnn", "v100x4", evaluations=60)], store=tmp_path / "store", graphs=graphs
    )
    config = TrainConfig(policy=MOVER, progress=False, checkpoint_every=0)
    train_imitation(teachers, config, steps=10, graphs=graphs, out_dir=tmp_path / "run")
    ckpt = load_checkpoint(tmp_path / "run")
    bases = decode_bases(ckpt, teachers, graphs=graphs)
    own = infer(ckpt, graph, cluster, moves=0).decisions
    assert list(bases) == ["cnn@v100x4"]
    np.testing.assert_array_equal(bases["cnn@v100x4"].placement, own.placement)
    np.testing.assert_array_equal(bases["cnn@v100x4"].fusion_priority, own.fusion_priority)
    # the examples' move labels are the simulated single moves from those decisions
    (example,) = make_examples(teachers, config, graphs=graphs, move_bases=bases)
    labels = label_moves(graph, cluster, own.validate(graph, cluster.num_devices))
    target, mask = move_target_distribution(labels, graph)
    np.testing.assert_allclose(example.move_target, example.env.inputs.to_positions(target))
    np.testing.assert_array_equal(example.move_mask, example.env.inputs.to_positions(mask))
    # refining starts from the checkpoint's parameters (unchanged at learning rate 0)
    refine_moves(
        ckpt, teachers, steps=2, graphs=graphs, out_dir=tmp_path / "ref", learning_rate=0.0
    )
    refined = load_checkpoint(tmp_path / "ref")
    assert refined.meta["imitation"]["init_step"] == 10
    assert refined.meta["imitation"]["move_labels_from"] == "given decisions"
    for a, b in zip(
        jax.tree_util.tree_leaves(refined.params),
        jax.tree_util.tree_leaves(ckpt.params),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="network settings"):
        train_imitation(teachers, TrainConfig(policy=TINY, progress=False), steps=1, graphs=graphs,
                        init=ckpt)  # fmt: skip
    plain = ckpt._replace(config=TrainConfig(policy=TINY))
    with pytest.raises(ValueError, match="move head"):
        refine_moves(plain, teachers, steps=1, graphs=graphs)
