"""The learned sharding policy: the GO network with a pointer head over sharding strategies.

**Design choice.** Sharding is *not* added to :data:`hlo_go.gonet.TASKS`. The three GO
tasks share one action format (a fixed-width categorical per node, embedded and fed to
the next task), one decision type (:class:`~hlo_go.decisions.Decisions`: placement,
schedule and fusion priorities) and one environment (:mod:`hlo_go.rl.env`, scored by
the event simulator on a cluster); the trainer, agent, checkpoints and CLI all assume
those. A sharding decision differs in each: a node has ``K_v ≤ 32`` strategies whose
meaning changes from node to node, it needs per-strategy inputs, and it is scored by
:func:`hlo_go.sharding.problem.total_cost` on a :class:`~hlo_go.sharding.ShardingGraph`.
Widening TASKS would have changed every one of those interfaces, so this package is
self-contained and *reuses the GO modules by import*.

Module by concept:

* :mod:`~hlo_go.sharding.learned.config`: :class:`ShardingPolicyConfig`;
* :mod:`~hlo_go.sharding.learned.action`: the action space (:func:`action_problem`);
* :mod:`~hlo_go.sharding.learned.prior`: the greedy prior (:func:`prior_choice`);
* :mod:`~hlo_go.sharding.learned.features`: what the network sees
  (:func:`strategy_features`, :func:`prepare_sharding_input`);
* :mod:`~hlo_go.sharding.learned.network`: :class:`ShardingNetwork`;
* :mod:`~hlo_go.sharding.learned.policy`: :class:`ShardingPolicy` (jitted sampling,
  decoding, scoring), :func:`policy_for`;
* :mod:`~hlo_go.sharding.learned.learner`: PPO updates (:class:`ShardingLearner`);
* :mod:`~hlo_go.sharding.learned.train`: PPO training (:func:`train_sharding_policy`);
* :mod:`~hlo_go.sharding.learned.finetune`: a few steps on one graph (:func:`finetune`);
* :mod:`~hlo_go.sharding.learned.imitation`: learning a teacher's (the ILP's) choices;
* :mod:`~hlo_go.sharding.learned.infer`: zero-shot choices (:func:`shard_with_policy`,
  :func:`guided_choices`, :func:`refined`);
* :mod:`~hlo_go.sharding.learned.method`: the ``"policy"`` method (:func:`policy_method`);
* :mod:`~hlo_go.sharding.learned.checkpoint`: :func:`save_policy`, :func:`load_policy`;
* :mod:`~hlo_go.sharding.learned.shipped`: the shipped pre-trained policy
  (:func:`shipped_policy`).

The methods that use it (``policy``, ``policy-ft``, ``core-greedy``) are registered in
:mod:`hlo_go.sharding.methods`; ``python -m hlo_go.sharding.pretrain`` trains it.
"""

from hlo_go.sharding.learned.action import ActionProblem, action_problem
from hlo_go.sharding.learned.checkpoint import load_policy, save_policy
from hlo_go.sharding.learned.config import (
    ACTION_SPACES,
    CREDITS,
    MAX_MESH_AXES,
    PRIORS,
    Params,
    ShardingPolicyConfig,
)
from hlo_go.sharding.learned.features import (
    NODE_FEATURE_NAMES,
    STRATEGY_FEATURE_NAMES,
    TIME_SCALE_S,
    ShardingInput,
    StrategyFeatures,
    prepare_sharding_input,
    strategy_features,
)
from hlo_go.sharding.learned.finetune import DEFAULT_FINETUNE_STEPS, MAX_FINETUNE_STEPS, finetune
from hlo_go.sharding.learned.imitation import (
    ImitationExample,
    ImitationResult,
    imitation_targets,
    teacher_gap,
    train_imitation,
)
from hlo_go.sharding.learned.infer import (
    DEFAULT_SAMPLES,
    GUIDE_WEIGHTS,
    GUIDED_DESCENT_ROUNDS,
    guided_choices,
    refined,
    shard_with_policy,
)
from hlo_go.sharding.learned.learner import ShardingLearner, learner_for
from hlo_go.sharding.learned.method import policy_method
from hlo_go.sharding.learned.network import ShardingNetwork
from hlo_go.sharding.learned.policy import ShardingPolicy, policy_for
from hlo_go.sharding.learned.prior import prior_choice
from hlo_go.sharding.learned.shipped import shipped_policy
from hlo_go.sharding.learned.train import (
    REFERENCES,
    ShardingTrainResult,
    train_sharding_policy,
)

__all__ = [
    "ACTION_SPACES",
    "CREDITS",
    "DEFAULT_FINETUNE_STEPS",
    "DEFAULT_SAMPLES",
    "GUIDED_DESCENT_ROUNDS",
    "GUIDE_WEIGHTS",
    "MAX_FINETUNE_STEPS",
    "MAX_MESH_AXES",
    "NODE_FEATURE_NAMES",
    "PRIORS",
    "REFERENCES",
    "STRATEGY_FEATURE_NAMES",
    "TIME_SCALE_S",
    "ActionProblem",
    "ImitationExample",
    "ImitationResult",
    "Params",
    "ShardingInput",
    "ShardingLearner",
    "ShardingNetwork",
    "ShardingPolicy",
    "ShardingPolicyConfig",
    "ShardingTrainResult",
    "StrategyFeatures",
    "action_problem",
    "finetune",
    "guided_choices",
    "imitation_targets",
    "learner_for",
    "load_policy",
    "policy_for",
    "policy_method",
    "prepare_sharding_input",
    "prior_choice",
    "refined",
    "save_policy",
    "shard_with_policy",
    "shipped_policy",
    "strategy_features",
    "teacher_gap",
    "train_imitation",
    "train_sharding_policy",
]
