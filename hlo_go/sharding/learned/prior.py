"""The sharding policy's prior: greedy's choice on the action problem.

An untrained policy's greedy decode is this choice (the prior's logit bonus outweighs
fresh weights), so it is the baseline that measures what training adds (the
``core-greedy`` method of :mod:`hlo_go.sharding.methods`).
"""

from __future__ import annotations

import numpy as np

from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.greedy import solve_greedy
from hlo_go.sharding.learned.action import action_problem
from hlo_go.sharding.learned.config import ShardingPolicyConfig
from hlo_go.sharding.problem import ShardingProblem, total_cost


def greedy_hint(problem: ShardingProblem, valid: np.ndarray) -> np.ndarray:
    """The cheaper of :func:`~hlo_go.sharding.solve_greedy`'s choice and the replicated
    one (as the ``greedy`` method), ``int64[N]``."""
    found = np.asarray(solve_greedy(problem), np.int64)
    if not valid[:, 0].all():
        return found
    zeros = np.zeros_like(found)
    return zeros if total_cost(problem, zeros) < total_cost(problem, found) else found


def prior_choice(sg: ShardingGraph, config: ShardingPolicyConfig | None = None) -> np.ndarray:
    """The choice the greedy prior alone leads to: :func:`~hlo_go.sharding.solve_greedy`
    (or replicated, if cheaper) on the policy's action problem, expanded to every node.

    With the default ``"core"`` action space that is greedy on the exact reductions'
    core, every eliminated node following it optimally. An untrained policy's greedy
    decode is this choice (the prior's logit bonus outweighs fresh weights), so it is the
    baseline that measures what training adds (the ``core-greedy`` method).

    Args:
      sg: the graph.
      config: ``action_space`` (default :class:`ShardingPolicyConfig`).

    Returns:
      ``int64[n]``, a strategy per node.
    """
    action = action_problem(sg, config or ShardingPolicyConfig())
    return action.expand(greedy_hint(action.problem, valid_strategies(action.problem)))


def valid_strategies(problem: ShardingProblem) -> np.ndarray:
    """``bool[N, K]``: the finite-cost strategies of each node (strategy 0 if none)."""
    cost = np.asarray(problem.node_cost)
    counts = np.asarray(problem.num_strategies)
    valid = np.isfinite(cost) & (np.arange(cost.shape[1]) < counts[:, None])
    valid[~valid.any(1), 0] = True
    return valid
