"""PPO updates of the sharding policy.

PPO from :mod:`hlo_go.rl.ppo`: clipped surrogate, value loss, entropy bonus (off by
default), Optax Adam with gradient clipping (:func:`~hlo_go.rl.ppo.ppo_update_step`),
and :func:`~hlo_go.rl.ppo.minibatch_epochs` for global credit.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from hlo_go.rl.ppo import (
    LossInfo,
    PPOBatch,
    PPOConfig,
    make_optimizer,
    minibatch_epochs,
    ppo_update_step,
)
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig, default_ppo
from hlo_go.sharding.learned.features import ShardingInput
from hlo_go.sharding.learned.policy import ShardingPolicy, policy_for


class ShardingLearner:
    """PPO updates of a :class:`ShardingPolicy` (one jitted step per bucket).

    Args:
      policy: the policy.
      ppo: PPO loss and optimizer settings.
    """

    def __init__(self, policy: ShardingPolicy, ppo: PPOConfig) -> None:
        self.policy, self.ppo = policy, ppo
        self.optimizer = make_optimizer(ppo)
        self._update_jit = jax.jit(self._update_fn)

    def _update_fn(
        self,
        params: Params,
        opt_state: optax.OptState,
        graphs: Any,
        devices: jax.Array,
        batch: PPOBatch,
    ):
        self.policy._count("update")

        scores = (
            self.policy._row_scores if self.policy.config.credit == "local" else self.policy._scores
        )

        def evaluate(p: Params, data: jax.Array):
            return scores(p, graphs, devices, data)

        return ppo_update_step(params, opt_state, batch, evaluate, self.optimizer, self.ppo)

    def update(
        self,
        params: Params,
        opt_state: optax.OptState,
        inputs: ShardingInput,
        batch: PPOBatch,
        key: jax.Array,
    ) -> tuple[Params, optax.OptState, list[LossInfo]]:
        """``ppo.epochs`` passes of PPO steps on ``batch``.

        ``batch.data`` holds actions ``int32[B, P]`` by position. With global credit the
        other fields are ``float32[B]`` (one reward per choice) and the epochs run through
        :func:`hlo_go.rl.ppo.minibatch_epochs`; with local credit they are
        ``float32[B, P]`` per-node advantages (already normalized), and each epoch is one
        whole-batch step of the same PPO loss over the ``B × P`` per-node ratios.
        """
        graphs, devices = inputs.graphs, self.policy._devices(inputs)
        if self.policy.config.credit == "local":
            infos = []
            for _ in range(self.ppo.epochs):
                params, opt_state, info = self._update_jit(
                    params, opt_state, graphs, devices, batch
                )
                infos.append(info)
            return params, opt_state, infos

        def step(p: Params, s: optax.OptState, mb: PPOBatch):
            return self._update_jit(p, s, graphs, devices, mb)

        return minibatch_epochs(params, opt_state, batch, step, key, self.ppo)


_LEARNERS: dict[tuple[ShardingPolicyConfig, PPOConfig], ShardingLearner] = {}


def learner_for(
    config: ShardingPolicyConfig | None = None, ppo: PPOConfig | None = None
) -> ShardingLearner:
    """The :class:`ShardingLearner` of a configuration and PPO settings, shared per process."""
    key = (config or ShardingPolicyConfig(), ppo or default_ppo())
    if key not in _LEARNERS:
        _LEARNERS[key] = ShardingLearner(policy_for(key[0]), key[1])
    return _LEARNERS[key]
