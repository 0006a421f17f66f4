"""Reinforcement learning for graph optimization: PPO (Optax) and the GO trainers.

Public names::

    PPOConfig, PPOBatch, LossInfo                      hyperparameters, a batch, loss parts
    ppo_loss, clipped_surrogate, value_loss, entropy_bonus, normalize_advantages
    make_optimizer, ppo_update_step, make_update_step, minibatch_epochs

Module by concept: :mod:`~hlo_go.rl.ppo` (generic PPO, any policy).
"""

from hlo_go.rl.ppo import (
    EvaluateFn,
    LossInfo,
    PPOBatch,
    PPOConfig,
    UpdateFn,
    clipped_surrogate,
    entropy_bonus,
    make_optimizer,
    make_update_step,
    minibatch_epochs,
    normalize_advantages,
    ppo_loss,
    ppo_update_step,
    value_loss,
)

__all__ = [
    "EvaluateFn",
    "LossInfo",
    "PPOBatch",
    "PPOConfig",
    "UpdateFn",
    "clipped_surrogate",
    "entropy_bonus",
    "make_optimizer",
    "make_update_step",
    "minibatch_epochs",
    "normalize_advantages",
    "ppo_loss",
    "ppo_update_step",
    "value_loss",
]
