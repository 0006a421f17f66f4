"""Tests of hlo_go.gonet: the GO policy network (shapes, padding, jit, gradients, sampling)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.decisions import Decisions
from hlo_go.examples import example_path
from hlo_go.gonet import (
    GOPolicy,
    PolicyConfig,
    PolicyInput,
    SegmentRecurrentStack,
    bin_values,
    choose,
    choose_colocated,
    colocated_log_probs,
    fusion_bins,
    param_count,
    policy_bucket,
    prepare_input,
    priorities_to_bins,
    rel_shift,
)
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import load_hlo, parse_hlo

# One xdist group: the module's fixtures are expensive, so one worker sets them up once
# (the suite runs with --dist loadgroup; every other test is spread on its own).
pytestmark = pytest.mark.xdist_group("policy")

# Small sizes: compiles stay around a second, and graphs of ~100 nodes span several
# segments and scan steps, so memory and recurrence are exercised.
SMALL = PolicyConfig(
    hidden_size=16,
    gnn_layers=1,
    num_heads=2,
    segment_length=8,
    segments_per_step=4,
    priority_bins=5,
)


@pytest.fixture(scope="module")
def cnn() -> OpGraph:
    """The bundled CNN training step (63 nodes)."""
    return build_graph(load_hlo(example_path()))


@pytest.fixture(scope="module")
def lstm() -> OpGraph:
    """An LSTM scan training step, unoptimized: 152 nodes, 25 of them colocated."""
    import hlo_samples

    graph = build_graph(parse_hlo(hlo_samples.hlo_text("lstm_scan_train_step", "unoptimized")))
    assert (graph.colocation_group != np.arange(graph.num_nodes)).sum() > 10
    return graph


@pytest.fixture(scope="module")
def policy() -> GOPolicy:
    return GOPolicy(SMALL)


@pytest.fixture(scope="module")
def params(policy: GOPolicy, lstm: OpGraph):
    return policy.init(jax.random.PRNGKey(0), lstm, num_devices=8)


def _random_params(policy: GOPolicy, graph: OpGraph, max_devices: int, seed: int):
    """Parameters of the right structure drawn with numpy: no init compile (tests of configs)."""
    network = policy.network(max_devices)
    graphs = policy.prepare(graph).graphs
    shapes = jax.eval_shape(
        lambda key: network.init(key, graphs, jnp.int32(max_devices)), jax.random.PRNGKey(0)
    )
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda s: (0.2 * rng.standard_normal(s.shape)).astype(s.dtype), shapes)


def _edges_dropped(graph: OpGraph, count: int) -> OpGraph:
    """The same nodes with the last ``count`` data edges removed (still a valid graph)."""
    keep = slice(0, graph.num_edges - count)
    return graph._replace(
        senders=graph.senders[keep],
        receivers=graph.receivers[keep],
        edge_bytes=graph.edge_bytes[keep],
    ).validate()


# -- inputs -------------------------------------------------------------------------------------


def test_bucket_sizes_are_whole_segments_with_bounded_padding():
    config = PolicyConfig()
    for n, e in [(1, 0), (63, 96), (10_000, 18_000), (56_232, 100_454), (80_000, 150_000)]:
        bucket = policy_bucket(n, e, config)
        assert bucket.n_node > n and bucket.n_node % config.segment_length == 0
        assert bucket.n_edge >= max(e, 1)
        if n > 4 * config.segment_length:
            assert bucket.n_node <= 1.25 * (n + 1) + 1
    assert policy_bucket(80_000, 150_000, config).n_node == 81_920


def test_prepare_relabels_into_topological_order(lstm: OpGraph):
    inputs = prepare_input(lstm, SMALL)
    graphs, n = inputs.graphs, lstm.num_nodes
    assert inputs.num_nodes == n and inputs.bucket == policy_bucket(n, lstm.num_edges, SMALL)[:2]
    position = np.empty(n, np.int64)
    position[lstm.topo_order] = np.arange(n)
    np.testing.assert_array_equal(graphs.nodes["features"][:n], lstm.features[lstm.topo_order])
    assert graphs.nodes["mask"][:n].all() and not graphs.nodes["mask"][n:].any()
    real = graphs.edges["mask"]
    assert (graphs.senders[real] < graphs.receivers[real]).all()  # edges go forward
    got = zip(graphs.senders[real].tolist(), graphs.receivers[real].tolist(), strict=True)
    want = zip(position[lstm.senders].tolist(), position[lstm.receivers].tolist(), strict=True)
    assert sorted(got) == sorted(want)
    assert (np.diff(graphs.receivers) >= 0).all()
    assert (np.diff(graphs.senders[graphs.edges["sender_order"]]) >= 0).all()
    group = graphs.nodes["colocation_group"][:n]
    np.testing.assert_array_equal(group, position[lstm.colocation_group[lstm.topo_order]])
    values = np.arange(n) * 10
    np.testing.assert_array_equal(inputs.to_nodes(inputs.to_positions(values)), values)


# -- shapes, decisions, log-probabilities ---------------------------------------------------------


def test_output_shapes_and_valid_decisions(policy: GOPolicy, params, lstm: OpGraph):
    assert GOPolicy.max_devices(params) == 8
    assert param_count(params) > 0
    decisions, log_prob = policy.sample(params, lstm, jax.random.PRNGKey(1), num_devices=4)
    n = lstm.num_nodes
    assert decisions.placement.shape == (n,) and decisions.placement.dtype == np.int32
    assert decisions.schedule_priority.shape == (n,)
    assert decisions.fusion_priority.shape == (n,)
    decisions.validate(lstm, 4)
    bins = set(bin_values(SMALL.priority_bins).tolist())
    assert set(decisions.schedule_priority.tolist()) <= bins
    assert set(decisions.fusion_priority.tolist()) <= bins
    assert log_prob.shape == () and np.isfinite(log_prob) and log_prob < 0
    greedy = policy.greedy(params, lstm, num_devices=4)
    greedy.validate(lstm, 4)
    value = policy.value(params, lstm, num_devices=4)
    assert value.shape == () and np.isfinite(value)
    evaluation = policy.evaluate(params, lstm, decisions, num_devices=4)
    assert set(evaluation.task_log_prob) == {"placement", "scheduling", "fusion"}
    assert evaluation.entropy > 0
    np.testing.assert_allclose(evaluation.value, value, rtol=1e-5)


def test_log_prob_of_sampled_decisions_matches_sample(policy: GOPolicy, params, lstm: OpGraph):
    for seed, devices in [(2, 8), (3, 3), (4, 1)]:
        decisions, log_prob = policy.sample(params, lstm, jax.random.PRNGKey(seed), devices)
        np.testing.assert_allclose(
            policy.log_prob(params, lstm, decisions, devices), log_prob, rtol=1e-5, atol=1e-3
        )
    # Another decision scores differently.
    other = decisions._replace(schedule_priority=1.0 - decisions.schedule_priority)
    assert abs(float(policy.log_prob(params, lstm, other, 1)) - float(log_prob)) > 1e-3


def test_sampling_respects_device_mask_and_colocation(policy: GOPolicy, params, lstm: OpGraph):
    group = lstm.colocation_group
    for devices in (1, 2, 5, 8):
        seen = set()
        for seed in range(4):
            decisions, _ = policy.sample(params, lstm, jax.random.PRNGKey(seed), devices)
            decisions.validate(lstm, devices)
            assert decisions.placement.max() < devices
            np.testing.assert_array_equal(decisions.placement, decisions.placement[group])
            seen |= set(decisions.placement.tolist())
        assert seen == set(range(devices))  # every allowed device gets used by someone
    with pytest.raises(ValueError, match=r"built for 1\.\.8"):
        policy.sample(params, lstm, jax.random.PRNGKey(0), num_devices=9)


def test_greedy_is_the_mode(policy: GOPolicy, params, lstm: OpGraph):
    greedy = policy.greedy(params, lstm, num_devices=3)
    greedy.validate(lstm, 3)
    best = policy.log_prob(params, lstm, greedy, 3)
    for seed in range(3):
        _, log_prob = policy.sample(params, lstm, jax.random.PRNGKey(seed), 3)
        assert log_prob <= best + 1e-4


def test_colocated_choice_counts_each_group_once():
    logits = jnp.asarray(np.random.default_rng(0).standard_normal((6, 4)), jnp.float32)
    group = jnp.asarray([0, 0, 2, 2, 2, 5])
    mask = jnp.asarray([True] * 5 + [False])
    valid = jnp.asarray([True, True, True, False])
    uniform = jax.random.uniform(jax.random.PRNGKey(0), (6,))
    choice = choose_colocated(logits, valid, group, mask, uniform=uniform)
    action = np.asarray(choice.action)
    assert action[0] == action[1] and action[2] == action[3] == action[4] and action.max() < 3
    expected = 0.0
    for members in ([0, 1], [2, 3, 4]):
        pooled = np.asarray(logits)[members].mean(0)[:3]
        log_p = pooled - np.log(np.exp(pooled).sum())
        expected += log_p[action[members[0]]]
    np.testing.assert_allclose(choice.log_prob, expected, rtol=1e-5)


def test_colocated_log_probs_are_what_the_colocated_choice_scores():
    logits = jnp.asarray(np.random.default_rng(1).standard_normal((6, 4)), jnp.float32)
    group = jnp.asarray([0, 0, 2, 2, 2, 5])
    mask = jnp.asarray([True] * 5 + [False])
    valid = jnp.asarray([True, True, True, False])
    given = jnp.asarray([1, 1, 2, 2, 2, 0])
    for fn in (colocated_log_probs, jax.jit(colocated_log_probs)):
        log_p = np.asarray(fn(logits, valid, group))
        assert np.all(log_p[:, 3] < -1e8)  # an invalid device has no probability
        np.testing.assert_allclose(np.exp(log_p[[0, 2, 5]]).sum(-1), 1.0, rtol=1e-5)
        choice = choose_colocated(logits, valid, group, mask, given=given)
        np.testing.assert_allclose(choice.log_prob, log_p[0, 1] + log_p[2, 2], rtol=1e-5)


def test_inverse_cdf_sampling_follows_the_distribution():
    logits = jnp.tile(jnp.asarray([[0.0, 1.0, -1.0, 2.0, 0.5]]), (40_000, 1))
    valid = jnp.asarray([True, True, True, True, False])
    uniform = jax.random.uniform(jax.random.PRNGKey(0), (40_000,))
    choice = choose(logits, valid, jnp.ones(40_000, bool), uniform=uniform)
    counts = np.bincount(np.asarray(choice.action), minlength=5) / 40_000
    probs = np.asarray(jax.nn.softmax(jnp.where(valid, logits[0], -1e9)))
    assert counts[4] == 0
    np.testing.assert_allclose(counts, probs, atol=0.01)
    mode = choose(logits, valid, jnp.ones(40_000, bool))
    assert (np.asarray(mode.action) == 3).all()


def test_priority_bins_round_trip():
    values = bin_values(7)
    assert values[0] == 0.0 and values[-1] == 1.0
    np.testing.assert_array_equal(priorities_to_bins(values, 7), np.arange(7))
    np.testing.assert_array_equal(priorities_to_bins(np.array([-3.0, 0.49, 9.0]), 3), [0, 1, 2])


def test_fusion_bins_keep_what_fuses_apart_from_what_does_not():
    """A small positive fusion priority still fuses: it must not round to bin 0 (which
    does not), as ``priority-fusion``'s priorities scaled to their largest would."""
    values = bin_values(16)
    np.testing.assert_array_equal(fusion_bins(values, 16), np.arange(16))  # exact
    priority = np.array([0.0, 1e-4, 0.02, 0.5, 1.0, 7.0, -1.0])
    bins = fusion_bins(priority, 16)
    np.testing.assert_array_equal(bins, [0, 1, 1, 8, 15, 15, 0])
    np.testing.assert_array_equal(bins > 0, priority > 0)
    assert priorities_to_bins(priority, 16)[1] == 0  # the generic rounding loses it


# -- padding, jit, compiles, gradients ------------------------------------------------------------


def _perturb_padding(inputs: PolicyInput, seed: int) -> PolicyInput:
    rng = np.random.default_rng(seed)
    graphs = inputs.graphs
    pad = ~graphs.nodes["mask"]
    features = graphs.nodes["features"].copy()
    features[pad] = 100 * rng.standard_normal((pad.sum(), features.shape[1]))
    opcode = graphs.nodes["opcode"].copy()
    opcode[pad] = rng.integers(0, 100, pad.sum())
    log_bytes = graphs.edges["log_bytes"].copy()
    log_bytes[~graphs.edges["mask"]] = 50.0
    nodes = {**graphs.nodes, "features": features, "opcode": opcode}
    edges = {**graphs.edges, "log_bytes": log_bytes}
    return inputs._replace(graphs=graphs._replace(nodes=nodes, edges=edges))


def test_padding_never_changes_real_outputs(policy: GOPolicy, params, lstm: OpGraph):
    inputs = policy.prepare(lstm)
    assert inputs.bucket[0] - lstm.num_nodes >= 8  # at least a segment of padding
    perturbed = _perturb_padding(inputs, seed=0)
    decisions, _ = policy.sample(params, inputs, jax.random.PRNGKey(5), 6)
    a = policy.evaluate(params, inputs, decisions, 6)
    b = policy.evaluate(params, perturbed, decisions, 6)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
    g1 = policy.greedy(params, inputs, 6)
    g2 = policy.greedy(params, perturbed, 6)
    s1, lp1 = policy.sample(params, inputs, jax.random.PRNGKey(9), 6)
    s2, lp2 = policy.sample(params, perturbed, jax.random.PRNGKey(9), 6)
    np.testing.assert_allclose(lp1, lp2, rtol=1e-5, atol=1e-5)
    for x, y in zip((*g1, *s1), (*g2, *s2), strict=True):
        np.testing.assert_array_equal(x, y)


def test_bucket_size_does_not_change_outputs(policy: GOPolicy, params, lstm: OpGraph):
    """More padding (a coarser bucket, other scan block sizes) gives the same numbers."""
    fine = policy
    coarse = GOPolicy(dataclasses.replace(SMALL, buckets_per_octave=1, segments_per_step=8))
    assert fine.prepare(lstm).bucket != coarse.prepare(lstm).bucket
    decisions, log_prob = fine.sample(params, lstm, jax.random.PRNGKey(6), 5)
    a = fine.evaluate(params, lstm, decisions, 5)
    b = coarse.evaluate(params, lstm, decisions, 5)
    np.testing.assert_allclose(a.log_prob, log_prob, rtol=1e-5, atol=1e-3)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-3)


def test_jit_matches_eager(policy: GOPolicy, params, lstm: OpGraph):
    decisions, _ = policy.sample(params, lstm, jax.random.PRNGKey(7), 8)
    jitted = policy.evaluate(params, lstm, decisions, 8)
    with jax.disable_jit():
        eager = policy.evaluate(params, lstm, decisions, 8)
    for x, y in zip(jax.tree.leaves(jitted), jax.tree.leaves(eager), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


def test_one_compile_per_bucket(policy: GOPolicy, params, cnn: OpGraph, lstm: OpGraph):
    fresh = GOPolicy(SMALL)
    fewer_edges = _edges_dropped(cnn, 7)
    assert fresh.prepare(fewer_edges).bucket == fresh.prepare(cnn).bucket
    for graph, devices in [(cnn, 8), (fewer_edges, 3), (cnn, 1)]:
        fresh.value(params, graph, devices)
    assert fresh.trace_counts == {"value": 1}
    fresh.value(params, lstm, 4)  # another bucket
    fresh.value(params, lstm, 2)
    assert fresh.trace_counts == {"value": 2}
    # Sampling: other graphs of a bucket already compiled (and other device counts) add none.
    policy.sample(params, lstm, jax.random.PRNGKey(0), 8)
    before = policy.trace_counts["sample"]
    lstm_fewer_edges = _edges_dropped(lstm, 5)
    assert policy.prepare(lstm_fewer_edges).bucket == policy.prepare(lstm).bucket
    policy.sample(params, lstm_fewer_edges, jax.random.PRNGKey(1), 3)
    policy.sample(params, lstm, jax.random.PRNGKey(2), 1)
    assert policy.trace_counts["sample"] == before


def test_gradients_are_finite(policy: GOPolicy, params, lstm: OpGraph):
    decisions, _ = policy.sample(params, lstm, jax.random.PRNGKey(8), 4)

    def loss(p):
        out = policy.evaluate(p, lstm, decisions, 4)
        return -out.log_prob - 0.01 * out.entropy + out.value**2

    grads = jax.grad(loss)(params)
    leaves = jax.tree.leaves(grads)
    assert all(np.isfinite(leaf).all() for leaf in leaves)
    norms = jax.tree.map(lambda g: float(jnp.abs(g).sum()), grads["params"])
    for part in ("encoder", "stack", "film", "heads_placement", "heads_fusion", "value_head"):
        assert sum(jax.tree.leaves(norms[part])) > 0, part


# -- segment-level recurrence ---------------------------------------------------------------------


def _stack_outputs(config: PolicyConfig, x: np.ndarray):
    """The stack's function of its input, with fixed random parameters, jitted."""
    stack = SegmentRecurrentStack(config)
    mask = jnp.ones(x.shape[0], bool)
    film = jnp.asarray(
        0.1 * np.random.default_rng(0).standard_normal((config.attention_layers, 4, x.shape[1])),
        jnp.float32,
    )
    shapes = jax.eval_shape(stack.init, jax.random.PRNGKey(0), jnp.asarray(x), mask, film)
    rng = np.random.default_rng(1)
    variables = jax.tree.map(lambda s: (0.3 * rng.standard_normal(s.shape)).astype(s.dtype), shapes)
    return jax.jit(lambda x: stack.apply(variables, x, mask, film))


def test_memory_reaches_exactly_the_previous_segments():
    length, d = 8, 16
    x = np.random.default_rng(0).standard_normal((6 * length, d)).astype(np.float32)
    for memory in (1, 2):
        config = dataclasses.replace(SMALL, memory_segments=memory, segments_per_step=2)
        apply = _stack_outputs(config, x)
        base = np.asarray(apply(x))
        changed = x.copy()
        changed[length : 2 * length] += 1.0  # segment 1
        delta = np.abs(np.asarray(apply(changed)) - base).reshape(6, length, d).max(axis=(1, 2))
        assert delta[0] == 0  # causal: earlier segments never see later ones
        for segment in range(2, 6):
            assert (delta[segment] > 0) == (segment - 1 <= memory), (memory, segment, delta)


def test_memory_gradient_is_stopped():
    length, d = 8, 16
    x = np.random.default_rng(1).standard_normal((4 * length, d)).astype(np.float32)
    apply = _stack_outputs(dataclasses.replace(SMALL, memory_segments=1), x)
    grad = jax.grad(lambda x: apply(x)[3 * length :].sum())(jnp.asarray(x))
    grad = np.abs(np.asarray(grad)).reshape(4, length, d).sum(axis=(1, 2))
    assert grad[3] > 0 and grad[0] == grad[1] == grad[2] == 0


def test_scan_block_size_does_not_change_results():
    """Memory carried across scan steps = memory within a step: the recurrence is exact."""
    x = np.random.default_rng(2).standard_normal((16 * 8, 16)).astype(np.float32)
    outs = [
        np.asarray(
            _stack_outputs(dataclasses.replace(SMALL, segments_per_step=g, memory_segments=2), x)(x)
        )
        for g in (1, 8)
    ]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_rel_shift_aligns_distances(causal: bool):
    length, memory = 4, 8
    keys = memory + length
    width = keys + 1 if causal else keys + length - 1
    distances = np.arange(keys - 1, keys - 1 - width, -1).astype(np.float32)
    out = np.asarray(rel_shift(jnp.asarray(np.tile(distances, (2, length, 1))), keys))[0]
    wanted = memory + np.arange(length)[:, None] - np.arange(keys)[None, :]
    used = wanted >= 0 if causal else np.ones_like(wanted, bool)
    np.testing.assert_array_equal(out[used], wanted[used])


# -- configurations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"attention": False, "gnn_layers": 0, "task_recurrence": False, "modulation": False},
        {
            "attention_layers": 2,
            "memory_segments": 2,
            "causal": False,
            "ffn_multiplier": 0,
            "task_order": ("fusion", "placement", "scheduling"),
        },
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_ablation_configs_run(changes, lstm: OpGraph):
    policy = GOPolicy(dataclasses.replace(SMALL, **changes))
    params = _random_params(policy, lstm, max_devices=4, seed=0)
    names = set(params["params"])
    assert ("film" in names) == policy.config.modulation
    assert any("action_embeddings" in name for name in names) == policy.config.task_recurrence
    decisions, log_prob = policy.sample(params, lstm, jax.random.PRNGKey(1), 3)
    decisions.validate(lstm, 3)
    assert np.isfinite(log_prob)
    if "task_order" in changes:  # another chain of tasks: scoring must follow it too
        np.testing.assert_allclose(
            policy.log_prob(params, lstm, decisions, 3), log_prob, rtol=1e-5, atol=1e-3
        )


def test_config_validation():
    with pytest.raises(ValueError, match="permutation"):
        PolicyConfig(task_order=("placement", "fusion"))
    with pytest.raises(ValueError, match="multiple of num_heads"):
        PolicyConfig(hidden_size=10, num_heads=4)
    with pytest.raises(ValueError, match="power of two"):
        PolicyConfig(segment_length=48)


def test_default_decisions_score(policy: GOPolicy, params, lstm: OpGraph):
    """Decisions from elsewhere (here: the default) can be scored too."""
    log_prob = policy.log_prob(params, lstm, Decisions.default(lstm), 2)
    assert np.isfinite(log_prob)
