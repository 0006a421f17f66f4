"""Fine-tuning: a few PPO steps of given (e.g. pre-trained) parameters on one graph."""

from __future__ import annotations

from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig
from hlo_go.sharding.learned.train import ShardingTrainResult, train_sharding_policy

DEFAULT_FINETUNE_STEPS = 20
"""Fine-tuning steps of the ``"policy-ft"`` method."""

MAX_FINETUNE_STEPS = 50
"""Fine-tuning is the paper's few-step regime: at most this many steps."""


def finetune(
    sg: ShardingGraph,
    params: Params,
    *,
    steps: int = 20,
    samples: int = 16,
    seed: int = 0,
    learning_rate: float = 1e-3,
    progress: bool = False,
    config: ShardingPolicyConfig | None = None,
) -> ShardingTrainResult:
    """Trains given (e.g. pre-trained) parameters further on one graph, at most 50 steps.

    Args:
      sg: the graph.
      params: the starting parameters.
      steps: 1..50.
      samples: choices per step.
      seed: seed of the samples.
      learning_rate: Adam's learning rate (fresh optimizer state).
      progress: show a tqdm bar.
      config: the configuration ``params`` belong to (default :class:`ShardingPolicyConfig`).

    Returns:
      The :class:`ShardingTrainResult` (graph name ``"graph"``).
    """
    if not 1 <= steps <= MAX_FINETUNE_STEPS:
        raise ValueError(f"fine-tuning takes 1..{MAX_FINETUNE_STEPS} steps, got {steps}")
    return train_sharding_policy(
        [("graph", sg)], steps=steps, samples=samples, seed=seed,
        learning_rate=learning_rate, progress=progress, params=params, config=config,
    )  # fmt: skip
