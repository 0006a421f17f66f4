"""The sharding policy's configuration: network sizes, prior, action space, credit.

Fresh parameters lean towards a prior (:attr:`ShardingPolicyConfig.prior`): with
``"greedy"`` (default) a learnable scalar ``ρ`` (initialized to ``prior_bias``) multiplies
the greedy indicator of the strategy features, so untrained samples explore around
greedy's choice, as the GO trainer's ``prior_bias`` starts near a baseline
(``"replicated"``: around strategy 0; ``"none"``: the network's own initialization).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hlo_go.gonet import PolicyConfig
from hlo_go.rl.ppo import PPOConfig

Params = Any
"""A Flax variable dict: ``{"params": ...}``."""

MAX_MESH_AXES = 3
"""Mesh axes the strategy features describe (further axes are folded into the last)."""

PRIORS = ("greedy", "replicated", "none")
"""What fresh parameters may lean towards (:attr:`ShardingPolicyConfig.prior`)."""

ACTION_SPACES = ("core", "full")
"""What the policy decides (:attr:`ShardingPolicyConfig.action_space`)."""

CREDITS = ("local", "global")
"""Credit assignment schemes (:attr:`ShardingPolicyConfig.credit`)."""


@dataclasses.dataclass(frozen=True)
class ShardingPolicyConfig:
    """Sizes of the sharding network and the settings of its reward."""

    # The GO network's sizes and switches (hidden size, GNN depth, attention, FiLM,
    # buckets); the task fields (task_order, priority_bins, task_recurrence) are unused.
    network: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    # D_max of the graph embedding's device-count one-hot; meshes of up to this many devices.
    max_devices: int = 64
    # Describe strategies relative to the greedy solver's choice too (is_greedy, regret).
    greedy_features: bool = True
    # What fresh parameters lean towards: "greedy" (greedy's choice), "replicated"
    # (strategy 0) or "none" (the network's initialization alone).
    prior: str = "greedy"
    # Initial value of the learnable scale of the prior indicator in the logits.
    prior_bias: float = 4.0
    # Method whose cost is the reward's t_ref: "dp", "greedy", "replicated", "megatron" or
    # "core-greedy" (hlo_go.sharding.learned.train.REFERENCES).
    reference: str = "dp"
    # Reward of a choice that breaks the memory budget or has infinite cost.
    infeasible_reward: float = -3.0
    # Score the greedy decode (and keep it if best) every this many steps of a graph.
    eval_every: int = 10
    # Action space: "core" (the nodes and strategies left by the exact reductions of
    # hlo_go.sharding.reduction; eliminated nodes follow their neighbours optimally) or
    # "full" (every node, every strategy).
    action_space: str = "core"
    # Credit assignment: "local" (each node's advantage from its own cost and its edges',
    # per-node PPO ratios) or "global" (GO's: one reward per sampled choice).
    credit: str = "local"

    def __post_init__(self) -> None:
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        if self.prior == "greedy" and not self.greedy_features:
            raise ValueError("prior='greedy' needs greedy_features=True")
        if self.action_space not in ACTION_SPACES:
            raise ValueError(
                f"action_space must be one of {ACTION_SPACES}, got {self.action_space!r}"
            )
        if self.credit not in CREDITS:
            raise ValueError(f"credit must be one of {CREDITS}, got {self.credit!r}")
        if self.max_devices < 1 or self.eval_every < 1:
            raise ValueError("max_devices and eval_every must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly nested dict (see :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ShardingPolicyConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        network = dict(data.pop("network"))
        network["task_order"] = tuple(network["task_order"])
        return ShardingPolicyConfig(network=PolicyConfig(**network), **data)


def default_ppo() -> PPOConfig:
    """The PPO settings of sharding training: 4 epochs, whole-batch steps, no entropy bonus."""
    # No entropy bonus: it sums over every node, so it would swamp the surrogate.
    return PPOConfig(epochs=4, minibatch_size=0, learning_rate=1e-3, entropy_coef=0.0)
