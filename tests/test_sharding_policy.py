"""The learned sharding policy (hlo_go.sharding.learned) on a tiny MLP training step.

The module is the SGD step of a self-attention layer and a 2-layer MLP, lowered by
``jax.jit`` (unoptimized HLO) and sharded on a 2x4 mesh of the h100x8 preset (its reduced
core keeps a few nodes, so the core action space has decisions to make). The network is
shrunk (width 16, one GNN layer, 16-node segments) so a compile takes seconds.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.gonet import MASKED_LOGIT, PolicyConfig
from hlo_go.hlo import parse_hlo
from hlo_go.sharding import Mesh, build_sharding, get, total_cost
from hlo_go.sharding.learned import (
    NODE_FEATURE_NAMES,
    STRATEGY_FEATURE_NAMES,
    ShardingPolicyConfig,
    action_problem,
    finetune,
    load_policy,
    policy_for,
    policy_method,
    prior_choice,
    save_policy,
    shard_with_policy,
    shipped_policy,
    strategy_features,
    train_sharding_policy,
)
from hlo_go.sharding.strategies import MAX_STRATEGIES
from hlo_go.sim import get_cluster

# Shrunk to compile fast; the core action space with local credit (the defaults) and no
# attention stack (FULL has it).
SMALL = ShardingPolicyConfig(
    network=PolicyConfig(
        hidden_size=16,
        gnn_layers=1,
        num_heads=2,
        segment_length=16,
        segments_per_step=4,
        attention=False,
    )
)
# Every node and strategy, and GO's credit (one reward per sample): same parameters.
FULL = dataclasses.replace(SMALL, action_space="full", credit="global")
# FULL with the segment-recurrent attention stack (forward passes only: compiles fast).
ATTENTION = dataclasses.replace(FULL, network=dataclasses.replace(SMALL.network, attention=True))


def _step_text() -> str:
    """An SGD step of a one-head self-attention layer followed by a 2-layer MLP."""

    def loss(params, x, y):
        wq, wk, w1, b1, w2, b2 = params
        scores = (x @ wq) @ (x @ wk).T
        mixed = jax.nn.softmax(scores) @ x
        hidden = jax.nn.relu(mixed @ w1 + b1)
        return jnp.mean(jnp.square(hidden @ w2 + b2 - y))

    def step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    params = (
        jnp.zeros((32, 32)),
        jnp.zeros((32, 32)),
        jnp.zeros((32, 64)),
        jnp.zeros((64,)),
        jnp.zeros((64, 8)),
        jnp.zeros((8,)),
    )
    lowered = jax.jit(step).lower(params, jnp.zeros((16, 32)), jnp.zeros((16, 8)))
    return lowered.as_text(dialect="hlo")


@pytest.fixture(scope="module")
def sg():
    return build_sharding(parse_hlo(_step_text()), Mesh.parse("2x4"), get_cluster("h100x8"))


@pytest.fixture(scope="module")
def params(sg):
    return policy_for(SMALL).init(jax.random.key(0), sg)


@pytest.fixture(scope="module")
def attention_params(sg):
    return policy_for(ATTENTION).init(jax.random.key(0), sg)


def _without_prior(params):
    """``params`` with the prior's scale at 0: the network's own, near-uniform logits."""
    out = jax.tree.map(lambda x: x, params)
    out["params"]["prior_scale"] = jnp.zeros(())
    return out


def test_features_shapes_and_mask(sg):
    feats = strategy_features(sg, SMALL)
    n = sg.num_nodes
    assert feats.strategy.shape == (n, MAX_STRATEGIES, len(STRATEGY_FEATURE_NAMES))
    assert feats.node.shape == (n, len(NODE_FEATURE_NAMES))
    assert np.isfinite(feats.strategy).all() and np.isfinite(feats.node).all()
    counts = sg.problem.num_strategies
    beyond = np.arange(MAX_STRATEGIES)[None, :] >= counts[:, None]
    assert not feats.valid[beyond].any()
    assert feats.valid[:, 0].all()
    # The greedy prior marks exactly one valid strategy per node.
    np.testing.assert_array_equal(feats.prior.sum(1), np.ones(n))
    assert feats.valid[feats.prior > 0].all()


@pytest.mark.parametrize("full", [False, True], ids=["core", "full"])
def test_samples_never_take_masked_strategies(sg, request, full):
    policy = policy_for(ATTENTION if full else SMALL)
    # No prior: near-uniform logits, so any leak past K_v would show up.
    flat = _without_prior(request.getfixturevalue("attention_params" if full else "params"))
    inputs = policy.prepare(sg)
    actions, log_prob, _, _ = policy._sample_positions(flat, inputs, jax.random.key(1), 8)
    valid = inputs.graphs.nodes["valid"]
    assert np.take_along_axis(valid[None], actions[..., None], -1).all()
    assert np.isfinite(log_prob).all()
    # Every node with a choice does get different strategies (the mask is not too tight).
    multi = np.flatnonzero(valid.sum(1) > 1)
    assert multi.size and any(len(np.unique(actions[:, p])) > 1 for p in multi)
    logits, _ = jax.jit(policy.network.apply)(flat, inputs.graphs, jnp.asarray(8))
    assert np.all(np.asarray(logits)[~valid] == MASKED_LOGIT)
    # Full choices: every node within its K_v, and the core's cost plus the constant.
    choices = inputs.choices(actions)
    counts = sg.problem.num_strategies
    assert (choices >= 0).all() and (choices < counts[None, :]).all()
    node_actions = inputs.to_nodes(actions)
    for a, c in zip(node_actions, choices, strict=True):
        expected = total_cost(inputs.action.problem, a) + inputs.action.constant
        assert total_cost(sg.problem, c) == pytest.approx(expected, rel=1e-9)


def test_full_action_space_features(sg):
    config = dataclasses.replace(SMALL, action_space="full")
    action = action_problem(sg, config)
    assert action.problem is sg.problem and action.reduction is None
    feats = strategy_features(sg, config, action.problem)
    counts = sg.problem.num_strategies
    assert (feats.valid.sum(1) == counts).all()


def test_log_prob_jit_matches_eager(sg, attention_params):
    params = attention_params
    policy = policy_for(ATTENTION)
    choices, log_prob, _ = policy.sample(params, sg, jax.random.key(2), 4)
    jitted = np.asarray(policy.log_prob(params, sg, choices))
    np.testing.assert_allclose(jitted, log_prob, rtol=1e-5, atol=1e-4)
    # Eagerly: log-softmax, gather and sum in numpy from the network's logits.
    inputs = policy.prepare(sg)
    logits, _ = jax.jit(policy.network.apply)(params, inputs.graphs, jnp.asarray(8, jnp.int32))
    logits = np.asarray(logits, np.float64)
    log_p = logits - logits.max(1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
    actions = inputs.to_positions(choices)
    rows = np.take_along_axis(log_p[None], actions[..., None], -1)[..., 0]
    eager = (rows * inputs.graphs.nodes["mask"]).sum(1)
    np.testing.assert_allclose(eager, jitted, rtol=1e-4, atol=1e-3)
    # Per-node log-probabilities (local credit) sum to the same totals.
    per_node = jax.jit(policy._row_scores)(
        params, inputs.graphs, jnp.asarray(8, jnp.int32), actions
    )[0]
    np.testing.assert_allclose(np.asarray(per_node).sum(1), jitted, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("full", [False, True], ids=["core-local", "full-global"])
def test_ppo_steps_improve(sg, params, full):
    config = FULL if full else SMALL
    start = _without_prior(params)
    # 16 samples a step: with 8, the full-global network found nothing as cheap as
    # replication in 6 steps when XLA ran on one core (its sums, and so its samples, differ
    # with the thread count), though it did on two.
    result = train_sharding_policy(
        [("mlp", sg)], steps=6, samples=16, learning_rate=1e-2, params=start, config=config,
        progress=False,
    )  # fmt: skip
    replicated = total_cost(sg.problem, get("replicated")(sg))
    assert result.best_cost["mlp"] <= replicated + 1e-15
    assert total_cost(sg.problem, result.best["mlp"]) == pytest.approx(result.best_cost["mlp"])
    curve = result.curve("mlp")
    assert len(curve["step"]) == 6
    assert np.all(np.diff(curve["best_cost"]) <= 0)
    if not full:  # local credit learns fast enough to show in 6 steps
        assert curve["reward_mean"][-2:].mean() > curve["reward_mean"][:2].mean() + 0.1


def test_save_load_round_trip(sg, params, tmp_path):
    path = save_policy(tmp_path / "policy.msgpack", params, SMALL)
    loaded, config = load_policy(path)
    assert config == SMALL
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(loaded), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(
        shard_with_policy(sg, params, config=SMALL), shard_with_policy(sg, loaded, config=config)
    )
    (tmp_path / "bad.msgpack").write_bytes(b"\x80")
    with pytest.raises(ValueError):
        load_policy(tmp_path / "bad.msgpack")


def test_inference_and_method(sg, params):
    greedy = shard_with_policy(sg, params, config=SMALL)
    assert greedy.shape == (sg.num_nodes,)
    best = shard_with_policy(sg, params, samples=8, config=SMALL)
    assert total_cost(sg.problem, best) <= total_cost(sg.problem, greedy)
    with pytest.raises(ValueError, match="fine-tuning"):
        finetune(sg, params, steps=51, config=SMALL)
    # The registry's entry point, zero-shot with given parameters: the greedy decode, or
    # the best of it and samples; then refined by windows (never costlier).
    choice = policy_method(sg, params=params, config=SMALL, samples=0, guide_weights=(), refine_s=0)
    np.testing.assert_array_equal(choice, greedy)
    refined = policy_method(sg, params=params, config=SMALL, samples=0, guide_weights=())
    assert total_cost(sg.problem, refined) <= total_cost(sg.problem, greedy) + 1e-12
    assert choice.shape == (sg.num_nodes,) and np.isfinite(total_cost(sg.problem, choice))
    sampled = policy_method(sg, params=params, config=SMALL, samples=4)
    assert total_cost(sg.problem, sampled) <= total_cost(sg.problem, greedy)
    # Fine-tuned first: never worse than zero-shot with the same samples.
    tuned = policy_method(sg, params=params, config=SMALL, samples=4, finetune_steps=2)
    assert total_cost(sg.problem, tuned) <= total_cost(sg.problem, sampled)


def test_log_probs_are_the_networks_normalized_over_valid_strategies(sg, params):
    policy = policy_for(SMALL)
    inputs = policy.prepare(sg)
    log_p = policy.log_probs(params, inputs)
    assert log_p.shape[0] == sg.num_nodes
    valid = inputs.to_nodes(np.asarray(inputs.graphs.nodes["valid"]).T).T.astype(bool)  # [n, K]
    np.testing.assert_allclose(np.exp(np.where(valid, log_p, -np.inf)).sum(1), 1.0, rtol=1e-5)
    assert (log_p[~valid] < MASKED_LOGIT / 2).all()
    # The jitted function against the network applied eagerly.
    logits, _ = policy.network.apply(params, inputs.graphs, jnp.asarray(inputs.num_devices))
    eager = jax.nn.log_softmax(jnp.where(inputs.graphs.nodes["valid"], logits, MASKED_LOGIT))
    np.testing.assert_allclose(log_p[inputs.order], np.asarray(eager)[: sg.num_nodes], atol=1e-5)


def test_guided_choices_run_greedy_on_biased_costs_then_descend(sg, params):
    from hlo_go.sharding.greedy import solve_greedy
    from hlo_go.sharding.learned import GUIDED_DESCENT_ROUNDS, guided_choices

    action = action_problem(sg, SMALL)
    # λ = 0: greedy's own choice on the action problem, then descent on the true costs.
    (plain,) = guided_choices(sg, params, weights=(0.0,), config=SMALL)
    greedy = solve_greedy(action.problem)
    expected = solve_greedy(action.problem, prefer=greedy, max_rounds=GUIDED_DESCENT_ROUNDS)
    np.testing.assert_array_equal(plain, action.expand(np.asarray(expected, np.int64)))
    # A huge λ: the network's preferences decide the greedy pass; the descent on the true
    # costs can only lower the cost of that choice.
    log_p = policy_for(SMALL).log_probs(params, sg)
    (leaning,) = guided_choices(sg, params, weights=(1e9,), config=SMALL)
    width = action.problem.node_cost.shape[1]
    allowed = np.isfinite(action.problem.node_cost)
    decode = action.expand(np.argmax(np.where(allowed, log_p[:, :width], -np.inf), axis=1))
    assert total_cost(sg.problem, leaning) <= total_cost(sg.problem, decode) * (1 + 1e-12)
    # The policy method considers them: never costlier than the prior or any of them.
    chosen = policy_method(sg, params=params, config=SMALL, samples=0, guide_weights=(0.0, 1e9))
    cost = total_cost(sg.problem, chosen)
    assert cost <= min(total_cost(sg.problem, c) for c in (plain, leaning, prior_choice(sg, SMALL)))


def test_untrained_decode_is_the_prior(sg, params):
    """Fresh weights decode to the prior's choice: what ``core-greedy`` returns."""
    np.testing.assert_array_equal(
        shard_with_policy(sg, params, config=SMALL), prior_choice(sg, SMALL)
    )
    np.testing.assert_array_equal(get("core-greedy")(sg), prior_choice(sg))
    # No costlier than greedy's own choice on the whole graph (its core is greedy's
    # problem, the rest is optimal given it).
    assert total_cost(sg.problem, prior_choice(sg)) <= total_cost(sg.problem, get("greedy")(sg)) * (
        1 + 1e-9
    )


def test_policy_fits_a_tight_memory_budget(sg, params):
    """The network does not see memory; under a budget its decode (here: the prior's
    choice, which needs more) is made feasible before it is returned."""
    from hlo_go.sharding import simulate_sharding

    budget = 0.6 * simulate_sharding(sg, get("dp")(sg)).peak_memory
    tight = sg._replace(problem=sg.problem._replace(memory_budget=budget))
    assert simulate_sharding(tight, prior_choice(tight, SMALL)).oom
    for samples in (0, 4):
        choice = policy_method(tight, params=params, config=SMALL, samples=samples)
        assert not simulate_sharding(tight, choice).oom


def test_shipped_policy_decodes_zero_shot(sg):
    params, config = shipped_policy()
    assert config.network.hidden_size > SMALL.network.hidden_size  # the full-size network
    choice = get("policy")(sg)
    assert choice.shape == (sg.num_nodes,)
    assert np.isfinite(total_cost(sg.problem, choice))
    np.testing.assert_array_equal(choice, policy_method(sg, params=params, config=config))


def test_config_round_trip_and_checks():
    assert ShardingPolicyConfig.from_dict(SMALL.to_dict()) == SMALL
    with pytest.raises(ValueError):
        ShardingPolicyConfig(prior="greedy", greedy_features=False)
    with pytest.raises(ValueError):
        ShardingPolicyConfig(credit="nope")


def test_shipped_policy_is_the_pretrained_file():
    from hlo_go.pretrained import sharding_policy_path
    from hlo_go.sharding.learned import load_policy

    path = sharding_policy_path()
    assert path.name == "sharding.msgpack" and path.parent.name == "pretrained"
    _, config = load_policy(path)
    assert config == shipped_policy()[1]


def test_unknown_reference_method_is_named(sg):
    with pytest.raises(KeyError, match="nope"):
        train_sharding_policy(
            [sg], steps=1, samples=2, config=dataclasses.replace(SMALL, reference="nope"),
            progress=False,
        )  # fmt: skip


def test_deprecated_policy_module_warns_and_re_exports():
    import importlib
    import sys

    import hlo_go.sharding.learned as learned

    for name in ("hlo_go.sharding.policy", "hlo_go.sharding.imitation"):
        sys.modules.pop(name, None)
        with pytest.warns(DeprecationWarning, match="hlo_go.sharding.learned"):
            module = importlib.import_module(name)
        assert module.train_imitation is learned.train_imitation
    assert sys.modules["hlo_go.sharding.policy"].policy_method is learned.policy_method


def test_learned_never_imports_the_methods_registry():
    """Method registration is sharding.methods' (above learned/): no import of it, at
    module level or inside a function, from any module of learned/."""
    import ast
    from pathlib import Path

    import hlo_go.sharding.learned as learned

    for path in Path(learned.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(
                n.startswith(("hlo_go.sharding.methods", "hlo_go.sharding.policy"))
                or n == "hlo_go.sharding"
                for n in names
            ), f"{path.name} imports {names}"
