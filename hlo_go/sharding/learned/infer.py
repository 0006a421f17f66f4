"""Inference: the sharding policy's choice for a graph, without training (zero-shot).

The network's decode, samples, the prior's choice and the policy-guided greedy
(:func:`guided_choices`) are candidates; the cheapest feasible one wins, and
:func:`refined` improves it by exact re-optimization of windows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np

from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.greedy import fit_memory, solve_greedy
from hlo_go.sharding.learned.action import ActionProblem, action_problem
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig
from hlo_go.sharding.learned.features import ShardingInput
from hlo_go.sharding.learned.policy import policy_for
from hlo_go.sharding.learned.prior import greedy_hint, valid_strategies
from hlo_go.sharding.problem import total_cost
from hlo_go.sharding.refine import DEFAULT_REFINE_S, DEFAULT_WINDOW, refine
from hlo_go.sharding.simulate import fits_memory
from hlo_go.sharding.strategies import MAX_STRATEGIES

DEFAULT_SAMPLES = 8
"""Samples :func:`~hlo_go.sharding.learned.policy_method` draws zero-shot besides the greedy decode."""

GUIDE_WEIGHTS: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
"""The weights ``λ`` of :func:`guided_choices` that the ``"policy"`` method tries."""

GUIDED_DESCENT_ROUNDS = 20
"""Rounds of coordinate descent on the true costs that end :func:`guided_choices`."""


def _prior_actions(inputs: ShardingInput) -> np.ndarray:
    """The prior's per-node actions on ``inputs``' action problem (see :func:`~hlo_go.sharding.learned.prior_choice`):
    the hint its features were computed with, or else computed now."""
    if inputs.hint is not None:
        return inputs.hint
    problem = inputs.action.problem
    return greedy_hint(problem, valid_strategies(problem))


def guided_choices(
    sg: ShardingGraph | ShardingInput,
    params: Params,
    *,
    weights: Sequence[float] = GUIDE_WEIGHTS,
    config: ShardingPolicyConfig | None = None,
) -> np.ndarray:
    """Policy-guided greedy: the greedy pass and coordinate descent of
    :func:`~hlo_go.sharding.solve_greedy` on the action problem with node costs biased
    towards the network's preferences, then coordinate descent on the true costs.

    The network draws each node's strategy independently. Where it has learned that a
    block should switch layout together (a teacher's channel split, say) but is unsure
    on a few of its nodes, its decode mixes layouts and pays resharding at each seam.
    Here the node cost of strategy ``k`` of node ``v`` becomes
    ``c_v(k) - λ · s · log π(k | v)``, with ``s`` the prior's cost per decided node (a
    time scale of the graph), and the greedy pass decides each node given the
    neighbours already decided: it follows the network where that is coherent and
    cheap, and its neighbours' layouts where not. Coordinate descent on the true costs
    then only lowers the cost. ``λ → 0`` is greedy's own choice (the prior, when cheaper
    than replicated), large ``λ`` the network's decode made coherent.

    Args:
      sg: the graph (or its prepared input).
      params: the network's parameters.
      weights: the ``λ`` values, one choice each.
      config: the configuration ``params`` belong to (default :class:`ShardingPolicyConfig`).

    Returns:
      ``int64[len(weights), n]``, a full choice per weight.
    """
    policy = policy_for(config)
    inputs = policy.prepare(sg)
    problem = inputs.action.problem
    log_p = np.zeros(problem.node_cost.shape, np.float64)
    width = min(problem.node_cost.shape[1], MAX_STRATEGIES)
    log_p[:, :width] = policy.log_probs(params, inputs)[:, :width]
    decided = int((np.asarray(problem.num_strategies) > 1).sum())
    scale = total_cost(problem, _prior_actions(inputs)) / max(decided, 1)
    finite = np.isfinite(problem.node_cost)
    out = []
    for weight in weights:
        biased = np.where(finite, problem.node_cost - weight * scale * log_p, np.inf)
        leaning = solve_greedy(problem._replace(node_cost=biased))
        settled = solve_greedy(problem, prefer=leaning, max_rounds=GUIDED_DESCENT_ROUNDS)
        out.append(inputs.action.expand(np.asarray(settled, np.int64)))
    return np.stack(out) if out else np.zeros((0, inputs.num_nodes), np.int64)


def shard_with_policy(
    sg: ShardingGraph,
    params: Params,
    *,
    samples: int = 0,
    seed: int = 0,
    config: ShardingPolicyConfig | None = None,
    with_prior: bool = False,
    guide_weights: Sequence[float] = (),
    inputs: ShardingInput | None = None,
) -> np.ndarray:
    """The policy's choice for a graph, without training (zero-shot).

    Args:
      sg: the graph.
      params: trained parameters.
      samples: 0 for the greedy decode; else the best (lowest ``total_cost``, feasible
        first) of the greedy decode and ``samples`` samples.
      seed: PRNG seed of the samples.
      config: the configuration ``params`` belong to (default :class:`ShardingPolicyConfig`).
      with_prior: also consider the prior's choice (:func:`~hlo_go.sharding.learned.prior_choice`), so that the
        result is never costlier than it (a trained policy that leaves its prior where
        that does not pay on an unseen graph falls back to it).
      guide_weights: also consider :func:`guided_choices` with these weights.
      inputs: ``sg``'s prepared input, when the caller has it already
        (``policy_for(config).prepare(sg)``; None: prepared here).

    When no candidate fits the memory budget, each is made feasible by
    :func:`hlo_go.sharding.greedy.fit_memory` (its strategies kept wherever they fit)
    and the cheapest result is returned.

    Returns:
      ``int64[n]``, a strategy per node.
    """
    policy = policy_for(config)
    inputs = policy.prepare(sg) if inputs is None else inputs
    candidates = [policy.greedy(params, inputs)[None]]
    if samples > 0:
        candidates.append(policy.sample(params, inputs, jax.random.key(seed), samples)[0])
    if with_prior:
        candidates.append(inputs.action.expand(_prior_actions(inputs))[None])
    if guide_weights:
        candidates.append(guided_choices(inputs, params, weights=guide_weights, config=config))
    best = min(np.concatenate(candidates), key=lambda c: choice_key(sg, c))
    if fits_memory(sg, best):
        return best
    # Nothing fits the budget (the network does not see memory): each candidate made
    # memory-feasible, keeping its strategies wherever they fit (fit_memory).
    fitted = [fit_memory(sg, c) for c in np.concatenate(candidates)]
    return min(fitted, key=lambda c: choice_key(sg, c))


def refined(
    sg: ShardingGraph,
    choice: np.ndarray,
    *,
    config: ShardingPolicyConfig | None = None,
    action: ActionProblem | None = None,
    time_limit_s: float = DEFAULT_REFINE_S,
    window: int = DEFAULT_WINDOW,
) -> np.ndarray:
    """``choice`` improved by :func:`hlo_go.sharding.refine.refine` on the policy's
    action problem (the reductions' core, the other nodes following it optimally).

    Moves that break the memory budget are refused; a choice that does not fit the
    budget to begin with is returned as it is, and so is one that refinement does not
    make cheaper.

    Args:
      sg: the graph.
      choice: ``int[n]``, a full choice.
      config: whose ``action_space`` the refinement works in (default
        :class:`ShardingPolicyConfig`).
      action: ``action_problem(sg, config)`` when the caller has it already.
      time_limit_s: the refinement's time limit (0 or less: ``choice`` unchanged).
      window: decided nodes per window.

    Returns:
      ``int64[n]``, a full choice no costlier than ``choice``.
    """
    choice = np.asarray(choice, np.int64)
    if time_limit_s <= 0 or choice_key(sg, choice)[0]:
        return choice
    if action is None:
        action = action_problem(sg, policy_for(config).config)
    if not math.isfinite(total_cost(action.problem, action.restrict(choice))):
        # A core strategy the reductions pruned (e.g. one fit_memory chose): windows of
        # the whole problem instead.
        action = ActionProblem(sg.problem, None, 0.0)
    bounded = math.isfinite(sg.problem.memory_budget)

    def fits(actions: np.ndarray) -> bool:
        return not bounded or fits_memory(sg, action.expand(actions))

    actions = refine(
        action.problem, action.restrict(choice), window=window, time_limit_s=time_limit_s,
        accept=fits,
    )  # fmt: skip
    return min((choice, action.expand(actions)), key=lambda c: choice_key(sg, c))


def choice_key(sg: ShardingGraph, choice: np.ndarray) -> tuple[bool, float]:
    """Sort key of choices: feasible ones first (peak over every program position),
    then by ``total_cost``.

    Args:
      sg: the graph.
      choice: ``int[n]``, a full choice.

    Returns:
      ``(infeasible, cost)``.
    """
    cost = total_cost(sg.problem, choice)
    return (not (math.isfinite(cost) and fits_memory(sg, choice)), cost)
