"""The ``"policy"`` sharding method: the shipped policy's choice, fine-tuned on request,
refined."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig
from hlo_go.sharding.learned.infer import (
    DEFAULT_SAMPLES,
    GUIDE_WEIGHTS,
    choice_key,
    refined,
    shard_with_policy,
)
from hlo_go.sharding.learned.policy import policy_for
from hlo_go.sharding.learned.shipped import shipped_policy
from hlo_go.sharding.learned.train import train_sharding_policy
from hlo_go.sharding.refine import DEFAULT_REFINE_S, DEFAULT_WINDOW


def policy_method(
    sg: ShardingGraph,
    *,
    seed: int = 0,
    time_limit_s: float | None = None,
    params: Params | None = None,
    config: ShardingPolicyConfig | None = None,
    samples: int = DEFAULT_SAMPLES,
    finetune_steps: int = 0,
    with_prior: bool = True,
    guide_weights: Sequence[float] = GUIDE_WEIGHTS,
    refine_s: float = DEFAULT_REFINE_S,
    refine_window: int = DEFAULT_WINDOW,
) -> np.ndarray:
    """The ``"policy"`` (and ``"policy-ft"``) sharding method.

    Args:
      sg: the graph.
      seed: seed of sampling and fine-tuning.
      time_limit_s: stop fine-tuning after this many seconds (fine-tuning only).
      params: trained parameters; None: the shipped pre-trained policy
        (:func:`shipped_policy`).
      config: the configuration ``params`` belong to (with ``params`` only).
      samples: zero-shot, the best of the greedy decode and this many samples
        (:func:`shard_with_policy`).
      with_prior: the prior's choice is a candidate too (:func:`shard_with_policy`).
      guide_weights: so are the policy-guided greedy's choices with these weights
        (:func:`~hlo_go.sharding.learned.guided_choices`).
      finetune_steps: 0 decodes zero-shot; else PPO fine-tunes the parameters on ``sg``
        for this many steps (≤ :data:`~hlo_go.sharding.learned.MAX_FINETUNE_STEPS`) first, and the best of the
        fine-tuning's choices and the fine-tuned parameters' decode (as zero-shot:
        samples, prior and guided greedy), refined, or the zero-shot choice refined when
        cheaper, is returned.
      refine_s: then the choice is refined by exact re-optimization of windows of
        ``refine_window`` decided nodes for at most this many seconds
        (:func:`refined`; 0: not refined).
      refine_window: see ``refine_s``.

    Returns:
      ``int64[n]``, a strategy per node.
    """
    if params is None:
        params, config = shipped_policy()
    inputs = policy_for(config).prepare(sg)  # depends on the config only, not on params
    choice = shard_with_policy(
        sg, params, samples=samples, seed=seed, config=config, with_prior=with_prior,
        guide_weights=guide_weights, inputs=inputs,
    )  # fmt: skip
    zero_shot = refined(
        sg, choice, action=inputs.action, time_limit_s=refine_s, window=refine_window
    )
    if finetune_steps <= 0:
        return zero_shot
    result = train_sharding_policy(
        [("graph", sg)], steps=finetune_steps, seed=seed, progress=False, params=params,
        config=config, time_limit_s=time_limit_s,
    )  # fmt: skip
    tuned = result.best.get("graph", choice)
    decoded = shard_with_policy(
        sg, result.params, samples=samples, seed=seed, config=config, with_prior=with_prior,
        guide_weights=guide_weights, inputs=inputs,
    )  # fmt: skip
    best = min((tuned, decoded), key=lambda c: choice_key(sg, c))
    # Refinement ends in a local optimum that depends on its start: the fine-tuned
    # choice refined is not always cheaper than the zero-shot one refined, so both count.
    best = refined(sg, best, action=inputs.action, time_limit_s=refine_s, window=refine_window)
    return min((zero_shot, best), key=lambda c: choice_key(sg, c))
