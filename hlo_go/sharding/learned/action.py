"""The action space: which nodes and strategies the sharding policy decides.

``"core"`` (:attr:`~hlo_go.sharding.learned.ShardingPolicyConfig.action_space`, default):
the problem is first shrunk by the exact reductions of :mod:`hlo_go.sharding.reduction`
(the ILP's preprocessing: variable elimination of chains and trees, dominated strategies
pruned); the policy decides the core nodes among their remaining strategies, every
eliminated node then takes its best strategy given them (:meth:`Reduction.expand`), and
the reward sees the full choice. Since independent per-node sampling cannot coordinate a
whole chain of nodes switching layout together, this is what lets a factorized policy
reach such moves. ``"full"``: every node over all its strategies.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.learned.config import ShardingPolicyConfig
from hlo_go.sharding.problem import ShardingProblem
from hlo_go.sharding.reduction import Reduction, reduce_problem


class ActionProblem(NamedTuple):
    """The problem the policy's actions are scored on, over the graph's node ids.

    Attributes:
      problem: a :class:`~hlo_go.sharding.ShardingProblem` on the same nodes and
        strategy ids as ``sg.problem``. For the ``"core"`` action space, core nodes keep
        the strategies the reductions left, priced with the costs folded into them, and
        the core's edges; every other node has strategy 0 alone at cost 0 and no edge
        (its strategy is decided by :meth:`expand`); no memory constraint (the budget is
        checked on expanded choices).
      reduction: the :class:`~hlo_go.sharding.reduction.Reduction`, or None (``"full"``).
      constant: cost of the reduced parts: ``total_cost(sg.problem, expand(c)) ==
        total_cost(problem, c) + constant``.
    """

    problem: ShardingProblem
    reduction: Reduction | None
    constant: float

    def expand(self, actions: np.ndarray) -> np.ndarray:
        """Per-node actions ``int[..., n]`` → full choices ``int64[..., n]``."""
        actions = np.asarray(actions, np.int64)
        if self.reduction is None:
            return actions
        nodes = self.reduction.core.nodes
        flat = actions.reshape(-1, actions.shape[-1])
        out = np.stack([self.reduction.expand(a[nodes]) for a in flat]).astype(np.int64)
        return out.reshape(actions.shape)

    def restrict(self, choices: np.ndarray) -> np.ndarray:
        """Full choices ``int[..., n]`` → the actions that expand to them at core nodes
        (0 at every other node)."""
        choices = np.asarray(choices, np.int64)
        if self.reduction is None:
            return choices
        out = np.zeros_like(choices)
        nodes = self.reduction.core.nodes
        out[..., nodes] = choices[..., nodes]
        return out


def action_problem(sg: ShardingGraph, config: ShardingPolicyConfig) -> ActionProblem:
    """The problem the policy decides (see :class:`ActionProblem`).

    Args:
      sg: the prepared module.
      config: ``action_space``.

    Returns:
      The :class:`ActionProblem`.
    """
    problem = sg.problem
    if config.action_space == "full":
        return ActionProblem(problem, None, 0.0)
    reduction = reduce_problem(problem)
    core = reduction.core
    n = sg.num_nodes
    width = problem.node_cost.shape[1]
    counts = np.ones(n, np.int32)
    node_cost = np.full((n, width), np.inf)
    node_cost[:, 0] = 0.0
    for i, v in enumerate(core.nodes.tolist()):
        counts[v] = problem.num_strategies[v]
        node_cost[v] = np.inf
        node_cost[v, core.strategies[i]] = core.node_cost[i]
    matrices = []
    for (a, b), matrix in zip(core.edge_ends.tolist(), core.edge_cost, strict=True):
        u, v = int(core.nodes[a]), int(core.nodes[b])
        full = np.full((counts[u], counts[v]), np.inf)
        full[np.ix_(core.strategies[a], core.strategies[b])] = matrix
        matrices.append(full)
    ends = np.asarray(core.edge_ends, np.int64).reshape(-1, 2)
    embedded = ShardingProblem(
        num_strategies=counts,
        node_cost=node_cost,
        node_memory=np.where(counts[:, None] > np.arange(width), problem.node_memory, 0.0),
        edge_src=core.nodes[ends[:, 0]].astype(np.int32),
        edge_dst=core.nodes[ends[:, 1]].astype(np.int32),
        edge_cost=tuple(matrices),
        live_sets=(),
        memory_budget=math.inf,
    )
    return ActionProblem(embedded, reduction, float(core.constant))
