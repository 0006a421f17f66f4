"""A heuristic prior: the policy learns a residual over a baseline's decisions.

With :attr:`hlo_go.rl.TrainConfig.prior_method` set, every graph the trainers see gets
that baseline's decisions (``"best"``: the fastest of the standard heuristics on the
graph's cluster, :func:`hlo_go.rl.compare.heuristic_names`), and the policy's logits get
``prior_bias`` added on each node's prior action — its device, schedule bin and fusion
bin (:func:`hlo_go.gonet.network.with_prior`). Fresh parameters then decide (greedily)
what the heuristic decides, samples explore around it, and PPO learns where to depart
from it. The prior is part of the input, not of the parameters, so a pre-trained policy
gets the unseen graph's own heuristic prior zero-shot.

Without ``prior_method`` the older prior applies: a bias in fresh parameters toward
"one device, fuse everything legal" (:func:`hlo_go.rl.trainer.apply_prior`).
"""

from __future__ import annotations

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.gonet import PolicyInput, fusion_bins, priorities_to_bins
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster

BEST = "best"
"""``prior_method`` naming the fastest standard heuristic on each graph."""


def prior_decisions(graph: OpGraph, cluster: Cluster, method: str) -> tuple[str, Decisions]:
    """The prior's decisions for ``graph`` on ``cluster``.

    Args:
      graph: the graph.
      cluster: the cluster.
      method: :data:`BEST`, or a non-search :func:`hlo_go.baselines.get` name.

    Returns:
      ``(method, decisions)``, the method being the heuristic chosen for ``BEST``;
      schedule and fusion priorities scaled into ``[0, 1]`` (same orders, same step
      time).

    Raises:
      ValueError: a search method (a prior must be cheap and deterministic).
      hlo_go.baselines.UnknownMethodError: an unknown method name (a ``KeyError``).
    """
    from hlo_go.baselines import get
    from hlo_go.baselines.report import run_method
    from hlo_go.rl.compare import best, run_baselines

    out: list[Decisions] = []
    if method == BEST:
        rows = run_baselines(graph, cluster, decisions_out=out)
        chosen = rows.index(best(rows))
        method, decisions = rows[chosen].method, out[chosen]
    elif get(method).kind == "search":
        raise ValueError(f"prior_method {method!r} is a search; a prior must be a heuristic")
    else:
        run_method(graph, cluster, method, decisions_out=out)
        decisions = out[0]
    return method, Decisions(
        decisions.placement,
        _unit_scale(decisions.schedule_priority),
        _unit_scale(decisions.fusion_priority),
    )


def _unit_scale(priority: np.ndarray) -> np.ndarray:
    """Non-negative priorities divided by their largest, into the policy's ``[0, 1]``
    bins: the ready-queue and edge-visiting orders, and which are 0 (unfused), stay."""
    priority = np.asarray(priority, np.float64)
    top = float(priority.max(initial=0.0))
    return (priority / top if top > 0 else priority).astype(np.float32)


def prior_nodes(
    inputs: PolicyInput, decisions: Decisions, *, bins: int, weight: float
) -> dict[str, np.ndarray]:
    """The node fields :func:`~hlo_go.gonet.network.with_prior` reads, per position.

    Args:
      inputs: the graph's policy input.
      decisions: the prior's decisions (per node).
      bins: the policy's priority bins.
      weight: the logit added to each prior action (``prior_bias``).

    Returns:
      ``prior_placement``, ``prior_scheduling``, ``prior_fusion`` (``int32[P]``) and
      ``prior_weight`` (``float32[P]``, 0 on padding).
    """
    real = np.full(inputs.num_nodes, weight, np.float32)
    return {
        "prior_placement": inputs.to_positions(decisions.placement.astype(np.int32)),
        "prior_scheduling": inputs.to_positions(
            priorities_to_bins(decisions.schedule_priority, bins).astype(np.int32)
        ),
        "prior_fusion": inputs.to_positions(
            fusion_bins(decisions.fusion_priority, bins).astype(np.int32)
        ),
        "prior_weight": inputs.to_positions(real),
    }


def with_prior_input(
    inputs: PolicyInput, decisions: Decisions, *, bins: int, weight: float
) -> PolicyInput:
    """``inputs`` with the prior's node fields added (:func:`prior_nodes`)."""
    nodes = {**inputs.graphs.nodes, **prior_nodes(inputs, decisions, bins=bins, weight=weight)}
    return inputs._replace(graphs=inputs.graphs._replace(nodes=nodes))
