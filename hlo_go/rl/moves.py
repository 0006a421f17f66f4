"""Single moves: one colocation group placed on another device, scored by the simulator.

On the simulated GPU clusters much of what a long search finds over the best heuristic
is a few such moves (``docs/rl.md`` has the figures). This module is what the policy's
move head (``PolicyConfig(move_head=True)``) is trained on and decodes with:

- :func:`move_targets`: where a group goes when moved: the other device with the least
  work (flops) under the base decisions.
- :func:`label_moves`: for one graph and base decisions (in training, the best heuristic's),
  the simulated gain ``log(t_base / t_moved)`` of moving each of a set of candidate groups
  (the largest by flops, and some others at random): the labels of the head's listwise
  loss (:func:`move_target_distribution`).
- :func:`best_move`: base decisions and a ranked list of groups to try: simulate each
  group moved, return the fastest (never slower than the base). :func:`climb_moves`: the
  same list tried in turn, each move kept when it pays (hill climbing along the ranking;
  what the policy decodes with). The policy ranks the groups by its head's scores;
  :func:`largest_groups` ranks them by flops (the baseline a learned ranking has to beat
  at the same number of simulations).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from hlo_go.baselines.search import score
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster, simulate_batch

LABELED_LARGEST = 192
"""Groups labeled per graph by :func:`label_moves`: this many of the largest by flops..."""

LABELED_OTHERS = 64
"""...and this many others at random (so the head also learns what small moves do)."""

TARGET_TEMPERATURE = 0.01
"""Temperature of the head's target distribution over candidates, ``softmax(gain / T)``
(gains are log step-time ratios: 0.01 is a 1 % gain)."""


class MoveLabels(NamedTuple):
    """Simulated single-move gains on one graph.

    Attributes:
      groups: ``int32[C]`` colocation group ids (``OpGraph.colocation_group`` values).
      targets: ``int32[C]`` the device each group is moved to.
      gains: ``float32[C]`` ``log(t_base / t_moved)`` (> 0: the move pays), with the
        search objective (:func:`hlo_go.baselines.search.score`) as ``t``.
      base_time: the base decisions' objective, seconds.
    """

    groups: np.ndarray
    targets: np.ndarray
    gains: np.ndarray
    base_time: float


def group_ids(graph: OpGraph) -> np.ndarray:
    """``int32[G]`` the graph's colocation group ids, ascending."""
    return np.unique(np.asarray(graph.colocation_group)).astype(np.int32)


def group_flops(graph: OpGraph) -> np.ndarray:
    """``float64[N]``: per group id (indexed by the id, a node id), its nodes' total flops
    (0 at ids that name no group)."""
    group = np.asarray(graph.colocation_group)
    return np.bincount(
        group, weights=np.asarray(graph.flops, np.float64), minlength=graph.num_nodes
    )


def largest_groups(graph: OpGraph, count: int | None = None) -> np.ndarray:
    """``int32[≤ count]`` group ids by total flops, largest first (ties: lower id)."""
    return ranked_by_score(graph, group_flops(graph), count)


def move_targets(graph: OpGraph, placement: np.ndarray, num_devices: int) -> np.ndarray:
    """``int32[N]``: per group id, the device its group goes to when moved: the other
    device with the least flops placed on it (lowest id on ties); its own with one device.

    Args:
      graph: the graph.
      placement: ``int32[N]`` each node's device (colocated nodes share one).
      num_devices: ``D``.
    """
    placement = np.asarray(placement, np.int64)
    if num_devices < 2:
        return placement.astype(np.int32)
    load = np.bincount(
        placement, weights=np.asarray(graph.flops, np.float64), minlength=num_devices
    )[:num_devices]
    order = np.lexsort((np.arange(num_devices), load))
    first, second = order[0], order[1]
    return np.where(placement == first, second, first).astype(np.int32)


def moved(decisions: Decisions, graph: OpGraph, group: int, device: int) -> Decisions:
    """``decisions`` with colocation group ``group`` placed on ``device``."""
    placement = np.array(decisions.placement, np.int32)
    placement[np.asarray(graph.colocation_group) == group] = device
    return Decisions(placement, decisions.schedule_priority, decisions.fusion_priority).for_graph(
        graph
    )


def single_moves(
    graph: OpGraph,
    base: Decisions,
    groups: Sequence[int] | np.ndarray,
    num_devices: int,
    targets: np.ndarray | None = None,
) -> list[Decisions]:
    """``base`` with each of ``groups`` moved, one at a time: one decision set per group.

    Args:
      graph: the graph.
      base: the decisions the moves start from.
      groups: group ids.
      num_devices: ``D``.
      targets: ``int32[N]`` per group id, its device when moved (default
        :func:`move_targets` of ``base``).
    """
    if targets is None:
        targets = move_targets(graph, np.asarray(base.placement), num_devices)
    return [moved(base, graph, int(g), int(targets[g])) for g in groups]


def move_gains(
    graph: OpGraph,
    cluster: Cluster,
    base: Decisions,
    groups: Sequence[int] | np.ndarray,
    targets: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """``(float32[C] log(t_base / t_moved) per group, t_base)``, by simulation
    (:func:`single_moves`; ``t`` is the search objective)."""
    candidates = single_moves(graph, base, groups, cluster.num_devices, targets)
    base_time, *times = (score(r) for r in simulate_batch(graph, cluster, [base, *candidates]))
    return np.log(base_time / np.asarray(times, np.float64)).astype(np.float32), float(base_time)


def label_moves(
    graph: OpGraph,
    cluster: Cluster,
    base: Decisions,
    *,
    largest: int = LABELED_LARGEST,
    others: int = LABELED_OTHERS,
    seed: int = 0,
) -> MoveLabels:
    """The simulated gains of moving the ``largest`` groups with the most flops, and
    ``others`` more drawn at random (seeded), each to its :func:`move_targets` device.

    With one device there is nothing to move: empty labels.
    """
    empty = np.zeros(0, np.int32)
    if cluster.num_devices < 2:
        return MoveLabels(empty, empty, np.zeros(0, np.float32), 0.0)
    ranked = largest_groups(graph)
    rest = ranked[largest:]
    rng = np.random.default_rng(seed)
    extra = rng.choice(rest, size=min(others, rest.size), replace=False) if rest.size else empty
    groups = np.concatenate([ranked[:largest], np.sort(extra)]).astype(np.int32)
    targets = move_targets(graph, np.asarray(base.placement), cluster.num_devices)
    gains, base_time = move_gains(graph, cluster, base, groups, targets)
    return MoveLabels(groups, targets[groups].astype(np.int32), gains, base_time)


def move_target_distribution(
    labels: MoveLabels, graph: OpGraph, temperature: float = TARGET_TEMPERATURE
) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the move head's target and mask: ``(float32[N] softmax(gain / T) at
    each labeled group's id node, 0 elsewhere; float32[N] 1 at those nodes)``.

    The head's score is constant over a group, so one row (the node that names the
    group) carries each group's label.
    """
    target = np.zeros(graph.num_nodes, np.float32)
    mask = np.zeros(graph.num_nodes, np.float32)
    if labels.groups.size:
        logits = labels.gains.astype(np.float64) / temperature
        p = np.exp(logits - logits.max())
        target[labels.groups] = (p / p.sum()).astype(np.float32)
        mask[labels.groups] = 1.0
    return target, mask


def ranked_by_score(
    graph: OpGraph, node_scores: np.ndarray, count: int | None = None
) -> np.ndarray:
    """``int32[≤ count]`` group ids (all with None) by a per-node score (read at the node
    naming each group), highest first (ties: lower id)."""
    ids = group_ids(graph)
    values = np.asarray(node_scores, np.float64)[ids]
    return ids[np.lexsort((ids, -values))][:count]


def best_move(
    graph: OpGraph, cluster: Cluster, base: Decisions, groups: Sequence[int] | np.ndarray
) -> tuple[Decisions, float, int]:
    """The fastest of ``base`` and ``base`` with each of ``groups`` moved (one at a time,
    to its :func:`move_targets` device), by the search objective.

    Returns:
      ``(decisions, objective in seconds, simulations run)``.
    """
    candidates = [base]
    if cluster.num_devices > 1:
        candidates += single_moves(graph, base, groups, cluster.num_devices)
    times = [score(r) for r in simulate_batch(graph, cluster, candidates)]
    best = int(np.argmin(times))  # the first of equals: the base before any move
    return candidates[best], float(times[best]), len(candidates)


def climb_moves(
    graph: OpGraph,
    cluster: Cluster,
    base: Decisions,
    groups: Sequence[int] | np.ndarray,
    *,
    evaluate: Callable[[Decisions], float] | None = None,
    base_value: float | None = None,
) -> tuple[Decisions, float, int]:
    """Hill climbing along a ranking: each of ``groups`` in turn is moved (to its
    :func:`move_targets` device under the decisions so far), and the move is kept when it
    lowers the objective. Moves that pay add up, where :func:`best_move` keeps one.

    Args:
      graph: the graph.
      cluster: the cluster.
      base: the decisions to start from.
      groups: group ids, in the order to try them.
      evaluate: the objective of decisions, lower is better (default: the search
        objective, :func:`hlo_go.baselines.search.score`, of a simulation).
      base_value: ``evaluate(base)`` if known (else it is evaluated).

    Returns:
      ``(decisions, their objective, simulations run)``.
    """
    if evaluate is None:
        evaluate = functools.partial(_objective, graph, cluster)
    runs = 0
    if base_value is None:
        base_value, runs = evaluate(base), 1
    current, value = base, float(base_value)
    if cluster.num_devices < 2:
        return current, value, runs
    for group in groups:
        targets = move_targets(graph, np.asarray(current.placement), cluster.num_devices)
        candidate = moved(current, graph, int(group), int(targets[int(group)]))
        candidate_value = float(evaluate(candidate))
        runs += 1
        if candidate_value < value:
            current, value = candidate, candidate_value
    return current, value, runs


def _objective(graph: OpGraph, cluster: Cluster, decisions: Decisions) -> float:
    return score(simulate_batch(graph, cluster, [decisions])[0])
