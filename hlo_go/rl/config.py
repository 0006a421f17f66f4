"""``TrainConfig``: every setting of the GO trainers, in one frozen dataclass."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hlo_go.gonet import TASKS, PolicyConfig
from hlo_go.rl.ppo import PPOConfig
from hlo_go.rl.reward import RewardConfig


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of :func:`hlo_go.rl.train_one`, :func:`~hlo_go.rl.pretrain` and
    :func:`~hlo_go.rl.finetune`."""

    # The tasks learned jointly (a subset of placement, scheduling, fusion); the others
    # keep the environment's fixed decisions (default: one device, FIFO, no fusion).
    tasks: tuple[str, ...] = TASKS
    # K, decision sets sampled per graph per training step (scored with simulate_batch).
    samples: int = 16
    # Seed of the parameters and of every sample: step s uses fold_in(key(seed), s), so a
    # run resumed from a checkpoint continues bit-for-bit.
    seed: int = 0
    # PPO loss and update settings (epochs, minibatch size, learning rate, clipping). No
    # entropy bonus by default: the entropy is summed over every node's decision, so even a
    # small coefficient outweighs the surrogate on large graphs and stops learning.
    # Learning rate 1e-4: a decision set's log-probability sums thousands of node
    # decisions, so at 1e-3 the first update of GO-one on transformer_xl_l2 (1,365 nodes)
    # had approx. KL 25 and every sample clipped, and the policy's entropy grew over
    # training; at 1e-4, KL 0.01-0.1 and a quarter of the samples clipped.
    ppo: PPOConfig = dataclasses.field(
        default_factory=lambda: PPOConfig(
            epochs=2, minibatch_size=0, learning_rate=1e-4, entropy_coef=0.0
        )
    )
    # How simulated step times become rewards (the OOM penalty).
    reward: RewardConfig = dataclasses.field(default_factory=RewardConfig)
    # The policy network's sizes and switches.
    policy: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    # A prior at the baseline "one device, fuse everything legal": fresh parameters get this
    # logit bias on device 0 of the placement head and on the highest bin of the fusion
    # head, so early samples explore near that baseline instead of uniformly at random
    # (0: the network's own initialization, as in the paper). Not applied to parameters
    # loaded from a checkpoint.
    prior_bias: float = 0.0
    # A heuristic prior instead (hlo_go.rl.prior): "best" (the fastest standard heuristic
    # on each graph) or a non-search baseline name. Each graph's policy input then carries
    # that heuristic's decisions and the logits get prior_bias on each node's prior action,
    # for fresh and loaded parameters alike: the policy learns a residual over it. "":
    # the parameter prior above.
    prior_method: str = ""
    # With prior_method: after each step, move a graph's prior to the best decisions seen
    # when they beat it (an incumbent prior), so samples explore around the best so far
    # rather than around the heuristic. False: the prior stays the heuristic's.
    prior_follows_best: bool = False
    # Which end of the fusion head the prior leans to: "all" (the highest bin: fuse every
    # legal edge; good where launches dominate, e.g. GPUs) or "none" (bin 0: fuse nothing,
    # the reference; good where a wrong fusion is costly, e.g. a matmul fused on a CPU).
    prior_fusion: str = "all"
    # D_max, devices the placement head is built for (clusters of 1..D_max devices).
    max_devices: int = 8
    # Pre-training: steps before switching to the next batch of graphs (paper: 1000).
    switch_every: int = 1000
    # Pre-training: graphs per batch; the steps of a batch visit its graphs in turn.
    graphs_per_batch: int = 4
    # Evaluate the greedy decisions every this many steps (and at the last step).
    eval_every: int = 10
    # Save a checkpoint every this many steps (and at the last step); 0: last step only.
    checkpoint_every: int = 50
    # Show a tqdm progress bar.
    progress: bool = True

    def __post_init__(self) -> None:
        from hlo_go.rl.env import check_tasks

        object.__setattr__(self, "tasks", check_tasks(self.tasks))
        for name in ("samples", "max_devices", "switch_every", "graphs_per_batch", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.samples < 2:
            raise ValueError(f"samples must be >= 2 (advantages need a spread), got {self.samples}")
        if not math.isfinite(self.prior_bias):
            raise ValueError(f"prior_bias must be a finite number, got {self.prior_bias}")
        if self.prior_bias < 0:
            raise ValueError(f"prior_bias must be >= 0, got {self.prior_bias}")
        if self.prior_fusion not in ("all", "none"):
            raise ValueError(f"prior_fusion must be 'all' or 'none', got {self.prior_fusion!r}")
        if self.prior_follows_best and not self.prior_method:
            raise ValueError("prior_follows_best needs a prior_method")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        mb = self.ppo.minibatch_size
        if mb and self.samples % mb:
            raise ValueError(f"ppo.minibatch_size {mb} must divide samples {self.samples}")

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly nested dict (see :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        policy = dict(data.pop("policy"))
        policy["task_order"] = tuple(policy["task_order"])
        return TrainConfig(
            tasks=tuple(data.pop("tasks")),
            ppo=PPOConfig(**data.pop("ppo")),
            reward=RewardConfig(**data.pop("reward")),
            policy=PolicyConfig(**policy),
            **data,
        )
