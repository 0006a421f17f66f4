"""The learned agent: a small Flax policy over graph summary + pass history, trained by PPO.

The policy is an MLP over :func:`hlo_go.passes.observe.observe` (mean OpGraph
node features, relative op count, action counts, last action, progress) with a
categorical head over the actions and a value head. It is trained on one module
(as in the pass-ordering paper: the agent searches that module's order space),
with the generic PPO loss and update of :mod:`hlo_go.rl.ppo`; the best episode
prefix seen while training is the answer. Rewards are per-step op-count
reductions, returns undiscounted rewards-to-go, advantages returns minus values.
"""

from __future__ import annotations

import dataclasses
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import log_softmax

from hlo_go.passes.env import DEFAULT_CONFIG, PassEnvConfig, PassState, step
from hlo_go.passes.observe import observation_size, observe
from hlo_go.passes.search import Progress, SearchResult, _Best
from hlo_go.rl import PPOBatch, PPOConfig, make_optimizer, make_update_step, minibatch_epochs


@dataclasses.dataclass(frozen=True)
class PassPPOConfig:
    """Options of the PPO pass-ordering agent.

    Attributes:
      hidden: width of the policy's two hidden layers.
      episodes_per_update: episodes collected between PPO updates.
      ppo: loss and optimizer hyperparameters (:class:`hlo_go.rl.PPOConfig`).
      seed: PRNG seed (initialization and action sampling).
    """

    hidden: int = 64
    episodes_per_update: int = 4
    ppo: PPOConfig = dataclasses.field(
        default_factory=lambda: PPOConfig(learning_rate=3e-3, entropy_coef=0.02, epochs=4)
    )
    seed: int = 0


class PassPolicy(nn.Module):
    """MLP policy: observation -> (action logits, value)."""

    hidden: int
    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = nn.tanh(nn.Dense(self.hidden)(obs))
        x = nn.tanh(nn.Dense(self.hidden)(x))
        logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.zeros)(x)
        value = nn.Dense(1)(x)[..., 0]
        return logits, value


def ppo_search(
    start: PassState,
    budget: int,
    config: PassEnvConfig = DEFAULT_CONFIG,
    agent: PassPPOConfig | None = None,
    *,
    progress: Progress | None = None,
) -> SearchResult:
    """Trains a fresh policy on ``start``'s module for ``budget`` environment steps.

    Returns:
      The best episode prefix seen while training.
    """
    agent = agent if agent is not None else PassPPOConfig()
    num_actions = len(config.action_names)
    policy = PassPolicy(agent.hidden, num_actions)
    key = jax.random.PRNGKey(agent.seed)
    key, init_key = jax.random.split(key)
    params = policy.init(init_key, jnp.zeros((1, observation_size(num_actions)), jnp.float32))
    optimizer = make_optimizer(agent.ppo)
    opt_state = optimizer.init(params)

    def evaluate(p, data):
        logits, value = policy.apply(p, data["obs"])
        log_probs = jax.nn.log_softmax(logits)
        taken = jnp.take_along_axis(log_probs, data["actions"][:, None], axis=1)[:, 0]
        entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
        return taken, entropy, value

    update = make_update_step(evaluate, optimizer, agent.ppo)
    forward = jax.jit(policy.apply)
    rng = np.random.default_rng(agent.seed)
    best = _Best(start)
    used, curve, t0, episodes = 0, [], time.perf_counter(), 0
    while used < budget:
        obs_list, act_list, logp_list, value_list, return_list = [], [], [], [], []
        for _ in range(agent.episodes_per_update):
            if used >= budget:
                break
            state, states, rewards = start, [], []
            for _ in range(min(config.max_steps, budget - used)):
                obs = observe(state, config)
                logits, value = forward(params, obs[None])
                log_probs = log_softmax(np.asarray(logits[0], np.float64))
                probs = np.exp(log_probs)
                action = int(rng.choice(num_actions, p=probs / probs.sum()))
                state, reward, _, _ = step(state, action, config)
                used += 1
                obs_list.append(obs)
                act_list.append(action)
                logp_list.append(log_probs[action])
                value_list.append(float(value[0]))
                rewards.append(reward)
                states.append(state)
            return_list.extend(np.cumsum(np.asarray(rewards)[::-1])[::-1].tolist())
            best.offer(start, states)
            curve.append(best.state.op_count)
            episodes += 1
        returns = np.asarray(return_list, np.float32)
        values = np.asarray(value_list, np.float32)
        batch = PPOBatch(
            data={
                "obs": jnp.asarray(np.stack(obs_list)),
                "actions": jnp.asarray(act_list, jnp.int32),
            },
            old_log_prob=jnp.asarray(logp_list, jnp.float32),
            advantages=jnp.asarray(returns - values),
            returns=jnp.asarray(returns),
        )
        key, epoch_key = jax.random.split(key)
        params, opt_state, _ = minibatch_epochs(
            params,
            opt_state,
            batch,
            update,
            epoch_key,
            dataclasses.replace(agent.ppo, minibatch_size=0),
        )
        if progress:
            progress(
                f"ppo: {used}/{budget} steps, {episodes} episodes, best {best.state.op_count}, "
                f"batch mean return {float(returns.mean()):+.4f}"
            )
    return best.result("ppo", start, used, t0, curve)
