"""The learned sharding policy (hlo_go.sharding.policy) on a tiny MLP training step.

The module is a 2-layer MLP's SGD step lowered by ``jax.jit`` (unoptimized HLO), sharded
on a 2x4 mesh of the h100x8 preset. The network is shrunk (width 16, one GNN layer,
16-node segments) so a compile takes a few seconds.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.hlo import parse_hlo
from hlo_go.policy import MASKED_LOGIT, PolicyConfig
from hlo_go.sharding import Mesh, build_sharding, get, total_cost
from hlo_go.sharding.policy import (
    MAX_STRATEGIES,
    NODE_FEATURE_NAMES,
    STRATEGY_FEATURE_NAMES,
    ShardingPolicyConfig,
    finetune,
    load_policy,
    policy_for,
    policy_method,
    save_policy,
    shard_with_policy,
    strategy_features,
    train_sharding_policy,
)
from hlo_go.sim import get_cluster

SMALL = ShardingPolicyConfig(
    network=PolicyConfig(
        hidden_size=16, gnn_layers=1, num_heads=2, segment_length=16, segments_per_step=4
    )
)


def _mlp_step_text() -> str:
    def loss(params, x, y):
        w1, b1, w2, b2 = params
        hidden = jax.nn.relu(x @ w1 + b1)
        return jnp.mean(jnp.square(hidden @ w2 + b2 - y))

    def step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    params = (
        jnp.zeros((32, 64)),
        jnp.zeros((64,)),
        jnp.zeros((64, 8)),
        jnp.zeros((8,)),
    )
    return jax.jit(step).lower(params, jnp.zeros((16, 32)), jnp.zeros((16, 8))).as_text(
        dialect="hlo"
    )


@pytest.fixture(scope="module")
def sg():
    return build_sharding(parse_hlo(_mlp_step_text()), Mesh.parse("2x4"), get_cluster("h100x8"))


@pytest.fixture(scope="module")
def params(sg):
    return policy_for(SMALL).init(jax.random.key(0), sg)


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


def test_samples_never_take_masked_strategies(sg, params):
    policy = policy_for(SMALL)
    # No prior: near-uniform logits, so any leak past K_v would show up.
    flat = jax.tree.map(lambda x: x, params)
    flat["params"]["prior_scale"] = jnp.zeros(())
    choices, log_prob, _ = policy.sample(flat, sg, jax.random.key(1), 64)
    counts = sg.problem.num_strategies
    assert choices.shape == (64, sg.num_nodes)
    assert (choices >= 0).all() and (choices < counts[None, :]).all()
    assert np.isfinite(log_prob).all()
    assert all(np.isfinite(total_cost(sg.problem, c)) for c in choices)
    # Every choosable strategy does get drawn somewhere (the mask is not too tight).
    multi = np.flatnonzero(counts > 1)
    assert any(len(np.unique(choices[:, v])) > 1 for v in multi)
    inputs = policy.prepare(sg)
    logits, _ = policy.network.apply(flat, inputs.graphs, jnp.asarray(8))
    invalid = ~inputs.graphs.nodes["valid"]
    assert np.all(np.asarray(logits)[invalid] == MASKED_LOGIT)


def test_log_prob_jit_matches_eager(sg, params):
    policy = policy_for(SMALL)
    choices, log_prob, _ = policy.sample(params, sg, jax.random.key(2), 4)
    jitted = np.asarray(policy.log_prob(params, sg, choices))
    np.testing.assert_allclose(jitted, log_prob, rtol=1e-4, atol=1e-3)
    inputs = policy.prepare(sg)
    with jax.disable_jit():
        eager = policy._scores(
            params, inputs.graphs, jnp.asarray(8, jnp.int32), inputs.to_positions(choices)
        )[0]
    np.testing.assert_allclose(np.asarray(eager), jitted, rtol=1e-4, atol=1e-3)
    # Per-node log-probabilities (local credit) sum to the same totals.
    rows = policy._row_scores(
        params, inputs.graphs, jnp.asarray(8, jnp.int32), inputs.to_positions(choices)
    )[0]
    np.testing.assert_allclose(np.asarray(rows).sum(1), jitted, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("credit", ["local", "global"])
def test_ppo_steps_improve(sg, credit):
    config = dataclasses.replace(SMALL, credit=credit, eval_every=4)
    result = train_sharding_policy([("mlp", sg)], steps=8, samples=8, config=config, progress=False)
    replicated = total_cost(sg.problem, get("replicated")(sg))
    assert result.best_cost["mlp"] <= replicated + 1e-15
    assert total_cost(sg.problem, result.best["mlp"]) == pytest.approx(result.best_cost["mlp"])
    curve = result.curve("mlp")
    assert len(curve["step"]) == 8
    assert np.all(np.diff(curve["best_cost"]) <= 0)
    assert curve["reward_mean"][-2:].mean() >= curve["reward_mean"][:2].mean() - 1e-6


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
    # The registry's entry point, zero-shot with given parameters (default config sizes).
    default = policy_for().init(jax.random.key(0), sg)
    choice = policy_method(sg, params=default)
    assert choice.shape == (sg.num_nodes,) and np.isfinite(total_cost(sg.problem, choice))


def test_config_round_trip_and_checks():
    assert ShardingPolicyConfig.from_dict(SMALL.to_dict()) == SMALL
    with pytest.raises(ValueError):
        ShardingPolicyConfig(prior="greedy", greedy_features=False)
    with pytest.raises(ValueError):
        ShardingPolicyConfig(credit="nope")
