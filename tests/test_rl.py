"""Tests of hlo_go.rl: the PPO loss by hand, learning a known-optimal placement, bit-for-bit
resume, TensorBoard files, and the train / finetune / infer CLI."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.decisions import Decisions
from hlo_go.gonet import TASKS, PolicyConfig
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.rl import (
    GraphEnv,
    PPOBatch,
    PPOConfig,
    RewardConfig,
    TrainConfig,
    clipped_surrogate,
    finetune,
    infer,
    load_checkpoint,
    make_optimizer,
    make_update_step,
    minibatch_epochs,
    normalize_advantages,
    ppo_loss,
    pretrain,
    read_events,
    read_metrics,
    reward,
    train_one,
)
from hlo_go.rl.checkpoint import ResumeMismatchError
from hlo_go.rl.metrics import EventFileWriter, MetricsLogger
from hlo_go.sim import Cluster, Link, get_cluster, simulate
from hlo_go.sim.presets import V100_SXM2

# A small policy: the tests are about the learning machinery, not the network's size.
TINY = PolicyConfig(
    hidden_size=16, gnn_layers=1, num_heads=2, segment_length=16, segments_per_step=2
)


@pytest.fixture(scope="module")
def graph():
    from hlo_go.examples import example_path

    return build_graph(load_hlo(example_path()))


# -- PPO loss against a hand-computed example ------------------------------------------------


def test_ppo_loss_matches_hand_computation():
    log_prob = jnp.log(jnp.array([0.5, 0.2, 0.3]))
    old = jnp.log(jnp.array([0.25, 0.4, 0.3]))
    adv = jnp.array([1.0, -2.0, 0.5])
    values = jnp.array([0.0, 1.0, 2.0])
    returns = jnp.array([1.0, 1.0, 0.0])
    entropy = jnp.array([1.0, 2.0, 3.0])
    config = PPOConfig(clip_epsilon=0.2, value_coef=0.5, entropy_coef=0.1)
    total, info = ppo_loss(log_prob, entropy, values, old, adv, returns, config)
    # ratios 2.0, 0.5, 1.0; clipped 1.2, 0.8, 1.0
    # min(r A, clip(r) A): min(2, 1.2) = 1.2; min(-1, -1.6) = -1.6; 0.5
    policy = -(1.2 - 1.6 + 0.5) / 3
    value = 0.5 * (1.0 + 0.0 + 4.0) / 3
    ent = 2.0
    np.testing.assert_allclose(info.policy, policy, rtol=1e-6)
    np.testing.assert_allclose(info.value, value, rtol=1e-6)
    np.testing.assert_allclose(info.entropy, ent, rtol=1e-6)
    np.testing.assert_allclose(total, policy + 0.5 * value - 0.1 * ent, rtol=1e-6)
    np.testing.assert_allclose(info.clip_fraction, 2 / 3, rtol=1e-6)
    kl = np.mean(np.log([0.25, 0.4, 0.3]) - np.log([0.5, 0.2, 0.3]))
    np.testing.assert_allclose(info.approx_kl, kl, atol=1e-6)


def test_clipped_surrogate_gradient_vanishes_outside_the_clip_range():
    old = jnp.zeros(2)
    adv = jnp.array([1.0, -1.0])

    def loss(lp):
        return clipped_surrogate(lp, old, adv, 0.2)[0]

    # ratio e^0.5 > 1.2 with A > 0, and e^-0.5 < 0.8 with A < 0: both clipped, no gradient.
    np.testing.assert_allclose(jax.grad(loss)(jnp.array([0.5, -0.5])), [0.0, 0.0])
    # inside the range: d/dlp of -mean(r A) = -r A / 2
    np.testing.assert_allclose(jax.grad(loss)(jnp.zeros(2)), [-0.5, 0.5], rtol=1e-6)


def test_per_decision_ratio_matches_hand_computation():
    """Each decision has its own ratio, clipped on its own and weighted by its sample's
    advantage; decisions of weight 0 (padding) do not count."""
    # sample 0: decisions with ratios 2.0, 1.0 (and a padding row); sample 1: 0.5, 1.1
    old = jnp.log(jnp.array([[0.25, 0.5, 0.9], [0.4, 0.5, 0.9]]))
    new = jnp.log(jnp.array([[0.5, 0.5, 0.1], [0.2, 0.55, 0.1]]))
    weights = jnp.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    adv = jnp.array([1.0, -2.0])
    loss, kl, clip = clipped_surrogate(new, old, adv, 0.2, weights)
    # min(r A, clip(r) A): min(2, 1.2) = 1.2; 1.0; min(-1, -1.6) = -1.6; min(-2.2, -2.2)
    np.testing.assert_allclose(loss, -(1.2 + 1.0 - 1.6 - 2.2) / 2, rtol=1e-6)
    np.testing.assert_allclose(clip, 2 / 4, rtol=1e-6)
    lr = np.log([[0.5 / 0.25, 1.0], [0.2 / 0.4, 0.55 / 0.5]])
    np.testing.assert_allclose(kl, -lr.mean(), rtol=1e-5)
    # a clipped decision has no gradient; the others keep theirs (the joint ratio of
    # sample 0, 2.0, would have clipped both)
    grad = jax.grad(lambda lp: clipped_surrogate(lp, old, adv, 0.2, weights)[0])(old)
    np.testing.assert_allclose(grad, [[-0.5, -0.5, 0.0], [1.0, 1.0, 0.0]], rtol=1e-6)
    grad = jax.grad(lambda lp: clipped_surrogate(lp, old, adv, 0.2, weights)[0])(new)
    np.testing.assert_allclose(grad[0], [0.0, -0.5, 0.0], rtol=1e-6)
    with pytest.raises(ValueError, match="ratio"):
        PPOConfig(ratio="joint")


def test_normalize_advantages_and_bad_minibatch():
    a = normalize_advantages(jnp.array([1.0, 2.0, 3.0, 6.0]))
    np.testing.assert_allclose([float(a.mean()), float(a.std())], [0.0, 1.0], atol=1e-5)
    config = PPOConfig(minibatch_size=3)
    params = {"w": jnp.zeros(2)}
    opt = make_optimizer(config)

    def evaluate(p, data):
        lp = jax.nn.log_softmax(p["w"])[data]
        return lp, jnp.zeros_like(lp), jnp.zeros_like(lp)

    batch = PPOBatch(jnp.array([0, 1, 0, 1]), jnp.zeros(4), jnp.ones(4), jnp.ones(4))
    update = make_update_step(evaluate, opt, config)
    with pytest.raises(ValueError, match="must divide"):
        minibatch_epochs(params, opt.init(params), batch, update, jax.random.key(0), config)


def test_ppo_update_learns_a_bandit():
    config = PPOConfig(learning_rate=0.1, epochs=2, minibatch_size=4, entropy_coef=0.0)
    params = {"logits": jnp.zeros(3), "v": jnp.zeros(())}

    def evaluate(p, data):
        lp = jax.nn.log_softmax(p["logits"])
        ent = -jnp.sum(jnp.exp(lp) * lp)
        return lp[data], jnp.full(data.shape, ent), jnp.full(data.shape, p["v"])

    opt = make_optimizer(config)
    state = opt.init(params)
    update = make_update_step(evaluate, opt, config)
    key = jax.random.key(0)
    for _ in range(20):
        key, k1, k2 = jax.random.split(key, 3)
        actions = jax.random.categorical(k1, params["logits"], shape=(8,))
        r = (actions == 2).astype(jnp.float32)
        old = jax.nn.log_softmax(params["logits"])[actions]
        batch = PPOBatch(actions, old, r - params["v"], r)
        params, state, infos = minibatch_epochs(params, state, batch, update, k2, config)
    assert jax.nn.softmax(params["logits"])[2] > 0.9
    assert len(infos) == 4  # 2 epochs x 2 minibatches


# -- reward ---------------------------------------------------------------------------------


def test_reward_is_log_speedup_with_oom_penalty(graph):
    cluster = get_cluster("v100x4")
    result = simulate(graph, cluster, Decisions.default(graph))
    config = RewardConfig(oom_penalty=2.0)
    assert reward(result, result.step_time, config) == pytest.approx(0.0)
    assert reward(result, 2 * result.step_time, config) == pytest.approx(math.log(2))
    tiny = V100_SXM2.replace(memory_capacity=1024.0)
    small = Cluster("tiny-mem", (tiny,))
    oom = simulate(graph, small, Decisions.default(graph))
    assert oom.oom
    ratio = float(np.max(oom.peak_memory / oom.memory_capacity))
    expected = -math.log(oom.step_time / oom.step_time) - 2.0 - math.log(ratio)
    assert reward(oom, oom.step_time, config) == pytest.approx(expected)
    with pytest.raises(ValueError, match="reference_time"):
        reward(result, 0.0, config)


# -- learning a known-optimal placement ----------------------------------------------------


def _slow_fast_cluster() -> Cluster:
    slow = V100_SXM2.replace(
        name="slow",
        peak_flops={k: v / 50 for k, v in V100_SXM2.peak_flops.items()},
        matrix_flops={k: v / 50 for k, v in V100_SXM2.matrix_flops.items()},
        memory_bandwidth=V100_SXM2.memory_bandwidth / 50,
    )
    links = (Link(0, 1, 1e9, 1e-5), Link(1, 0, 1e9, 1e-5))
    return Cluster("slow-fast", (slow, V100_SXM2), links)


def _tiny_config(**changes) -> TrainConfig:
    # One configuration for every training test (and the CLI test's --config), so they
    # share one compiled agent (hlo_go.rl.agent_for) and compile once.
    base = TrainConfig(
        policy=TINY,
        samples=8,
        max_devices=4,
        progress=False,
        eval_every=5,
        checkpoint_every=0,
        ppo=PPOConfig(learning_rate=3e-3, epochs=2, entropy_coef=0.0),
    )
    return base.replace(**changes)


def test_learns_the_known_optimal_placement(graph, tmp_path):
    # Device 1 is 50x faster than device 0 and a transfer costs 10 us: the optimal
    # placement puts every node on device 1 (whatever the schedule and fusion).
    cluster = _slow_fast_cluster()
    n = graph.num_nodes
    all_fast = Decisions(np.ones(n, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32))
    t_fast = simulate(graph, cluster, all_fast).step_time
    t_slow = simulate(graph, cluster, Decisions.default(graph)).step_time
    assert t_slow > 3 * t_fast
    result = train_one(("cnn", graph), cluster, steps=25, out_dir=tmp_path, config=_tiny_config())
    res = result.graphs["cnn"]
    rows = read_metrics(tmp_path)
    first = np.mean([float(r["reward_mean"]) for r in rows[:3]])
    last = np.mean([float(r["reward_mean"]) for r in rows[-3:]])
    assert last > first + 0.5, (first, last)
    assert np.mean(res.greedy.placement == 1) >= 0.95
    assert res.best_time <= t_fast * 1.001
    assert res.greedy_time <= 1.2 * t_fast


def test_fixed_tasks_keep_their_decisions(graph):
    cluster = get_cluster("v100x4")
    n = graph.num_nodes
    fixed = Decisions(
        np.full(n, 2, np.int32), np.linspace(0, 1, n, dtype=np.float32), np.zeros(n, np.float32)
    )
    env = GraphEnv(graph, cluster, TINY, ["fusion"], fixed=fixed)
    size = env.inputs.bucket[0]
    actions = {t: np.ones((2, size), np.int32) for t in ("placement", "scheduling", "fusion")}
    for d in env.decisions(actions):
        np.testing.assert_array_equal(d.placement, fixed.placement)
        np.testing.assert_array_equal(d.schedule_priority, fixed.schedule_priority)
        np.testing.assert_allclose(d.fusion_priority, 1 / (TINY.priority_bins - 1))
    scores = env.score(env.decisions(actions))
    assert env.best_time == scores.step_times.min()
    with pytest.raises(ValueError, match="tasks"):
        GraphEnv(graph, cluster, TINY, [])


def test_agent_batches_agree_with_one_network_pass_per_sample(graph):
    """The agent's batched sample and score (shared pass once, ``lax.map`` over decision
    sets, jitted) agree with whole-network passes made one sample at a time, eagerly."""
    from hlo_go.rl import agent_for

    config = TrainConfig(samples=3, progress=False, policy=TINY)
    agent = agent_for(config)
    env = GraphEnv(graph, get_cluster("v100x4"), TINY, config.tasks)
    params = agent.policy.init(jax.random.key(0), env.inputs, config.max_devices)
    actions, log_prob, value = agent.sample(params, env, jax.random.key(1), 3)
    log_prob2, entropy, value2 = agent.evaluate(params, env, actions)
    np.testing.assert_allclose(log_prob2, log_prob, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(value2, value, rtol=1e-5)
    devices = jnp.asarray(env.num_devices, jnp.int32)
    keys = jax.random.split(jax.random.key(1), 3)
    for i in range(3):
        with jax.disable_jit():
            out = agent.network.apply(params, env.inputs.graphs, devices, key=keys[i])
        for task in actions:
            np.testing.assert_array_equal(np.asarray(out.actions[task]), actions[task][i])
        np.testing.assert_allclose(sum(out.log_prob.values()), log_prob[i], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(sum(out.entropy.values()), entropy[i], rtol=1e-4, atol=1e-3)
    assert len(set(np.round(log_prob, 3))) == 3  # three different decision sets


def test_sampling_temperature_moves_samples_toward_the_greedy_decisions(graph):
    """Samples at a low temperature are the greedy decisions; at 1 they differ from them on
    more decisions than at 0.5 (the same keys), and the default is 1."""
    from hlo_go.rl import agent_for

    config = TrainConfig(samples=4, progress=False, policy=TINY)
    agent = agent_for(config)
    env = GraphEnv(graph, get_cluster("v100x4"), TINY, config.tasks)
    params = agent.policy.init(jax.random.key(0), env.inputs, config.max_devices)
    greedy = agent.greedy(params, env)
    key = jax.random.key(5)
    real = np.asarray(env.inputs.graphs.nodes["mask"], bool)

    def differing(temperature: float | None) -> int:
        kw = {} if temperature is None else {"temperature": temperature}
        actions, _, _ = agent.sample(params, env, key, 4, **kw)
        return sum(int((actions[t][:, real] != greedy[t][:, real]).sum()) for t in actions)

    assert differing(1e-4) == 0
    assert differing(1.0) > differing(0.5) > 0
    assert differing(None) == differing(1.0)


def test_per_decision_log_probs_sum_to_the_samples(graph):
    """With ``ratio="decision"`` the agent's log-probabilities are per decision, under jit
    and eagerly: summed over the counted rows they are the per-sample ones, and padding
    rows and colocated non-leaders do not count."""
    from hlo_go.rl import agent_for

    sample = TrainConfig(samples=2, progress=False, policy=TINY)
    decision = sample.replace(ppo=dataclasses.replace(sample.ppo, ratio="decision"))
    env = GraphEnv(graph, get_cluster("v100x4"), TINY, sample.tasks)
    params = agent_for(sample).policy.init(jax.random.key(0), env.inputs, sample.max_devices)
    agent = agent_for(decision)
    actions, rows, _ = agent.sample(params, env, jax.random.key(1), 2)
    weights = agent.weights(env, 2)
    size = env.inputs.bucket[0]
    assert rows.shape == weights.shape == (2, len(sample.tasks) * size)
    assert agent_for(sample).weights(env, 2) is None
    total, _, _ = agent_for(sample).evaluate(params, env, actions)
    np.testing.assert_allclose(rows.sum(1), total, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(rows[weights == 0], 0.0)
    # scheduling and fusion count every real node; placement one row per group
    real = int(np.asarray(env.inputs.graphs.nodes["mask"]).sum())
    groups = len(set(np.asarray(env.inputs.graphs.nodes["colocation_group"])[:real]))
    assert weights[0].sum() == 2 * real + groups
    with jax.disable_jit():
        eager, _, _ = agent.evaluate(params, env, actions)
    np.testing.assert_allclose(eager, rows, rtol=1e-4, atol=1e-4)


def _assert_fresh_greedy_is(env: GraphEnv, config: TrainConfig, want: Decisions):
    """Fresh parameters' greedy decisions on ``env`` are ``want`` exactly; returns the
    ``(agent, params)``."""
    from hlo_go.rl import agent_for

    agent = agent_for(config)
    params = agent.policy.init(jax.random.key(0), env.inputs, config.max_devices)
    (greedy,) = env.decisions(agent.greedy(params, env))
    np.testing.assert_array_equal(greedy.placement, want.placement)
    np.testing.assert_array_equal(greedy.schedule_priority, want.schedule_priority)
    np.testing.assert_array_equal(greedy.fusion_priority, want.fusion_priority)
    return agent, params


def test_heuristic_prior_is_decided_greedily_and_explored_around(graph, tmp_path):
    """With ``prior_method``, the all-prior action is the heuristic's decisions exactly;
    a fresh policy with a large prior bias decides them greedily, in training and
    zero-shot from its checkpoint; samples stay near them."""
    from hlo_go.rl.compare import best, run_baselines
    from hlo_go.rl.prior import prior_decisions

    cluster = get_cluster("v100x4")
    top = best(run_baselines(graph, cluster))
    method, prior = prior_decisions(graph, cluster, "best")
    assert method == top.method
    assert simulate(graph, cluster, prior).step_time == pytest.approx(top.step_time, rel=1e-9)
    assert prior.schedule_priority.max() <= 1 and prior.fusion_priority.max() <= 1

    config = _tiny_config(prior_method="best", prior_bias=8.0)
    env = GraphEnv(graph, cluster, TINY, config.tasks, prior=prior, prior_bias=8.0)
    assert set(env.inputs.graphs.nodes) >= {"prior_placement", "prior_fusion", "prior_weight"}
    agent, params = _assert_fresh_greedy_is(env, config, prior)
    actions, _, _ = agent.sample(params, env, jax.random.key(1), 8)
    same = [np.mean(d.placement == prior.placement) for d in env.decisions(actions)]
    assert min(same) >= 0.9

    result = train_one(("g", graph), cluster, steps=2, out_dir=tmp_path / "p", config=config)
    assert result.graphs["g"].best_time <= top.step_time * (1 + 1e-9)
    assert load_checkpoint(tmp_path / "p").config.prior_method == "best"
    zero = infer(tmp_path / "p", graph, cluster)
    assert zero.greedy_time <= top.step_time * 1.05
    with pytest.raises(ValueError, match="search"):
        prior_decisions(graph, cluster, "simulated-annealing")


# -- checkpoints: resume continues bit-for-bit ------------------------------------------------


def test_the_prior_follows_the_best_decisions_seen(graph):
    """With an incumbent prior, the prior moves to the best decisions seen when they beat
    it (not to slower ones), and the greedy action of a strongly biased policy follows it."""
    from hlo_go.rl.prior import prior_decisions

    cluster = get_cluster("v100x4")
    prior = Decisions.default(graph)  # one device, FIFO, no fusion
    _, faster = prior_decisions(graph, cluster, "best")
    zigzag = prior._replace(placement=(graph.colocation_group % 2).astype(np.int32))
    env = GraphEnv(graph, cluster, TINY, TASKS, prior=prior, prior_bias=30.0)
    assert env.prior_time == pytest.approx(simulate(graph, cluster, prior).step_time)
    assert not env.follow_best()  # nothing seen yet
    env.score([zigzag])
    assert env.best_time > env.prior_time and not env.follow_best()
    assert env.prior is prior
    env.score([faster])
    assert env.best_time < env.prior_time
    assert env.follow_best() and env.prior is env.best
    assert env.prior_time == env.best_time
    _assert_fresh_greedy_is(env, _tiny_config(prior_method="best", prior_bias=30.0), faster)
    with pytest.raises(ValueError, match="prior_method"):
        TrainConfig(prior_follows_best=True)


@pytest.mark.parametrize("variant", ["default", "incumbent prior, per-decision ratio"])
def test_resume_continues_identically(graph, tmp_path, variant):
    cluster = get_cluster("v100x4")
    config = _tiny_config(checkpoint_every=2, eval_every=2)
    if variant != "default":
        ppo = dataclasses.replace(config.ppo, ratio="decision")
        config = config.replace(
            prior_method="best", prior_bias=4.0, prior_follows_best=True, ppo=ppo
        )
    full = train_one(("g", graph), cluster, steps=4, out_dir=tmp_path / "a", config=config)
    train_one(("g", graph), cluster, steps=2, out_dir=tmp_path / "b", config=config)
    assert load_checkpoint(tmp_path / "b").step == 2
    resumed = train_one(("g", graph), cluster, steps=4, out_dir=tmp_path / "b", config=config)
    assert [r["step"] for r in resumed.history] == [2, 3]
    for x, y in zip(jax.tree.leaves(full.params), jax.tree.leaves(resumed.params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    drop = {"wall_s"}
    a = [{k: v for k, v in r.items() if k not in drop} for r in read_metrics(tmp_path / "a")]
    b = [{k: v for k, v in r.items() if k not in drop} for r in read_metrics(tmp_path / "b")]
    assert a == b and len(a) == 4
    assert full.graphs["g"].best_time == resumed.graphs["g"].best_time
    # TensorBoard events are readable, with the logged scalars at every step
    steps = sorted(
        {s for f in (tmp_path / "a" / "tb").iterdir() for s, v in read_events(f) if "g/loss" in v}
    )
    assert steps == [0, 1, 2, 3]
    # a different seed gives different parameters
    other = train_one(
        ("g", graph), cluster, steps=2, out_dir=tmp_path / "c", config=config.replace(seed=1)
    )
    assert any(
        not np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(other.params), jax.tree.leaves(full.params), strict=True)
    )


def test_pretrain_across_clusters(graph, tmp_path):
    # One policy, PPO on each (graph, cluster) pair; each pair's reward and decisions are
    # its own cluster's, and resuming checks the clusters as it checks the graphs.
    clusters = [get_cluster("v100x4"), _slow_fast_cluster()]
    config = _tiny_config(checkpoint_every=2, graphs_per_batch=2)
    out = tmp_path / "both"
    result = pretrain([("g", graph)], clusters, steps=4, out_dir=out, config=config)
    assert set(result.graphs) == {"g@v100x4", "g@slow-fast"}
    assert {row["graph"] for row in result.history} == {"g@v100x4", "g@slow-fast"}
    assert result.graphs["g@slow-fast"].greedy.placement.max() < 2  # the 2-device cluster
    for name, cluster in (("g@v100x4", clusters[0]), ("g@slow-fast", clusters[1])):
        r = result.graphs[name]
        assert r.greedy_time == pytest.approx(simulate(graph, cluster, r.greedy).step_time)
    ckpt = load_checkpoint(out)
    assert ckpt.meta["cluster"] == "v100x4,slow-fast"
    assert ckpt.meta["clusters"] == ["v100x4", "slow-fast"]
    assert ckpt.meta["graphs"] == ["g@v100x4", "g@slow-fast"]
    resumed = pretrain([("g", graph)], clusters, steps=6, out_dir=out, config=config)
    assert [row["step"] for row in resumed.history] == [4, 5]
    with pytest.raises(ResumeMismatchError, match="'v100x4,slow-fast', not 'v100x4'"):
        pretrain([("g", graph)], clusters[:1], steps=8, out_dir=out, config=config)
    with pytest.raises(ValueError, match="differently named"):
        pretrain([("g", graph)], [clusters[0], clusters[0]], steps=1, out_dir=tmp_path / "x")
    with pytest.raises(ValueError, match="max_devices"):
        pretrain([graph], [clusters[0], get_cluster("v100x8")], steps=1,
                 out_dir=tmp_path / "y", config=config)  # fmt: skip


def test_finetune_and_infer_from_checkpoint(graph, tmp_path):
    cluster = get_cluster("v100x4")
    config = _tiny_config()
    train_one(("g", graph), cluster, steps=2, out_dir=tmp_path / "pre", config=config)
    zero = infer(tmp_path / "pre", graph, cluster)
    assert zero.step_time <= zero.greedy_time and zero.decisions.placement.max() < 4
    tuned = finetune(tmp_path / "pre", ("g", graph), cluster, steps=2, out_dir=tmp_path / "ft")
    assert tuned.step == 2 and (tmp_path / "ft" / "checkpoint.msgpack").exists()
    with pytest.raises(ValueError, match=r"1\.\.50"):
        finetune(tmp_path / "pre", graph, cluster, steps=51, out_dir=tmp_path / "x")
    with pytest.raises(FileNotFoundError):
        infer(tmp_path / "missing", graph, cluster)


def test_bad_inputs(graph, tmp_path):
    with pytest.raises(ValueError, match="tasks"):
        TrainConfig(tasks=("placement", "sharding"))
    with pytest.raises(ValueError, match="max_devices"):
        train_one(graph, get_cluster("v100x8"), steps=1, out_dir=tmp_path, config=_tiny_config())


def test_metrics_go_to_csv_and_tensorboard_event_files(tmp_path):
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    logger = MetricsLogger(tmp_path, ["step", "graph", "loss"])
    for step in range(3):
        logger.log(step, {"step": step, "graph": "g", "loss": 0.5 * step, "nan": math.nan})
    logger.close()
    first = logger.tensorboard.path
    # Non-finite scalars are skipped; the CSV writes only its columns.
    assert read_events(first) == [(0, {"g/loss": 0.0}), (1, {"g/loss": 0.5}), (2, {"g/loss": 1.0})]
    # Resuming at step 2 drops later CSV rows and asks TensorBoard to purge later events.
    logger = MetricsLogger(tmp_path, ["step", "graph", "loss"], resume_step=2)
    logger.log(2, {"step": 2, "graph": "g", "loss": 3.0})
    logger.close()
    second = logger.tensorboard.path
    assert second != first and first.exists()
    assert [r["loss"] for r in read_metrics(tmp_path)] == ["0.0", "0.5", "3.0"]
    assert read_events(second) == [(2, {"g/loss": 3.0})]
    purge = [
        e.step
        for e in map(Event.FromString, _tfrecord_payloads(second))
        if e.session_log.status == SessionLog.START
    ]
    assert purge == [2]
    # A corrupt record is a named error, not a wrong value.
    data = bytearray(second.read_bytes())
    data[-6] ^= 0xFF
    second.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="CRC"):
        read_events(second)
    writer = EventFileWriter(tmp_path / "tb2")
    writer.scalars(7, {"a": 1.0, "b": math.inf, "c": 2})
    writer.close()
    assert read_events(writer.path) == [(7, {"a": 1.0, "c": 2.0})]


def _tfrecord_payloads(path):
    from hlo_go.rl.metrics import _records

    return list(_records(path.read_bytes(), path))


def test_deprecated_crc_aliases_warn_and_work():
    import hlo_go.rl.metrics as metrics

    with pytest.warns(DeprecationWarning, match="tensorboardX"):
        assert metrics.crc32c(b"123456789") == 0xE3069283


# -- CLI --------------------------------------------------------------------------------------


def test_cli_train_finetune_infer(tmp_path, capsys):
    import dataclasses
    import json

    from hlo_go.cli import main
    from hlo_go.examples import example_path

    config = dataclasses.asdict(_tiny_config())
    (tmp_path / "config.json").write_text(json.dumps(config))
    hlo = str(example_path())
    common = ["--cluster", "v100x4", "--quiet", "--baselines", "single-device,xla-cpu-like"]
    run = tmp_path / "run"
    args = [
        "train",
        hlo,
        "--steps",
        "2",
        "--out",
        str(run),
        "--config",
        str(tmp_path / "config.json"),
    ]
    assert main([*args, *common]) == 0
    out = capsys.readouterr().out
    assert "GO best seen" in out and "xla-cpu-like" in out and "single-device" in out
    assert (run / "checkpoint.msgpack").exists() and (run / "metrics.csv").exists()
    assert any((run / "tb").iterdir())
    assert len(read_metrics(run)) == 2
    saved = np.load(run / "decisions_cnn_train_step.npz")
    assert saved["placement"].shape[0] > 0
    ft = ["finetune", str(run), hlo, "--steps", "1", "--out", str(tmp_path / "ft")]
    assert main([*ft, *common]) == 0
    assert "GO fine-tuned" in capsys.readouterr().out
    assert main(["infer", str(run), hlo, *common]) == 0
    assert "GO zero-shot" in capsys.readouterr().out
    prior = [*args[:5], str(tmp_path / "prior"), *args[6:], "--prior", "best", "--prior-bias", "8"]
    assert main([*prior, "--follow-best", "--ratio", "decision", *common]) == 0
    config = load_checkpoint(tmp_path / "prior").config
    assert (config.prior_method, config.prior_bias) == ("best", 8.0)
    assert config.prior_follows_best and config.ppo.ratio == "decision"
    no_prior = [*args[:5], str(tmp_path / "np"), *args[6:], "--follow-best"]
    assert main([*no_prior, *common]) == 2
    assert "prior_follows_best needs a prior_method" in capsys.readouterr().err
    # pre-training on two clusters, from the GO-one run's parameters and settings
    other = tmp_path / "other.hlo"
    other.write_text(example_path().read_text())
    both = tmp_path / "both"
    pre = ["train", hlo, str(other), "--steps", "2", "--out", str(both), "--init", str(run)]
    assert main([*pre, "--clusters", "v100x4,host-cpu-2", *common]) == 0
    out = capsys.readouterr().out
    assert "on host-cpu-2" in out and "on v100x4" in out
    assert (both / "decisions_other@host-cpu-2.npz").exists()
    ckpt = load_checkpoint(both)
    assert ckpt.meta["clusters"] == ["v100x4", "host-cpu-2"]
    assert ckpt.config.policy == load_checkpoint(run).config.policy
    one = ["train", hlo, "--steps", "1", "--out", str(tmp_path / "z"), "--clusters", "v100x4"]
    assert main([*one, *common]) == 2
    assert "for pre-training" in capsys.readouterr().err
    # an input that cannot be read: a clear error and exit code 1 (nothing trained)
    assert (
        main(["train", "no_such_graph", "--steps", "1", "--out", str(tmp_path / "x"), *common]) == 1
    )
    assert "neither a file nor a corpus graph" in capsys.readouterr().out
    # a bad flag: exit code 2, found when parsing
    bad = ["train", hlo, "--steps", "1", "--out", str(tmp_path / "y"), "--tasks", "placement,oops"]
    assert main([*bad, *common]) == 2
    assert "tasks must be" in capsys.readouterr().err
