"""Confidence cuts: the policy's own probabilities, cut at several levels instead of one.

The greedy decode takes each decision's most likely choice, however unsure the network is
of it. On a family it never saw, some of those choices are close calls that can cost a lot
(``docs/rl.md``): groups placed off the main device with a probability barely above the
other devices', nodes left unfused with ``P(no fuse)`` just above one half. A cut keeps the
network's ranking of its decisions by confidence and tries a few cut points:

- :func:`placement_cuts`: for each threshold ``τ``, every colocation group whose greedy
  device has probability below ``τ`` goes to the main device (the one the greedy decode
  gives the most flops); the confident groups stay where the network put them.
- :func:`fusion_cuts`: for each threshold ``τ``, every node with ``P(no fuse) < τ`` fuses,
  at the priority of its most likely fusing bin, and the others do not.

:func:`hlo_go.rl.infer` simulates the cuts and keeps the fastest (never slower than the
greedy decisions). No heuristic is read: every candidate is a decode of the network's own
distributions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.gonet.actions import bin_values
from hlo_go.graph import OpGraph

FUSION_THRESHOLDS: tuple[float, ...] = (0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
"""Cut points of :func:`fusion_cuts` that :func:`hlo_go.rl.infer` tries: nodes with
``P(no fuse) < τ`` fuse."""

PLACEMENT_THRESHOLDS: tuple[float, ...] = (0.5, 0.7, 0.9)
"""Cut points of :func:`placement_cuts` that :func:`hlo_go.rl.infer` tries: groups whose
greedy device has probability below ``τ`` go to the main device."""


def check_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    """``thresholds`` as a tuple, each in ``(0, 1]``.

    Raises:
      ValueError: a threshold outside ``(0, 1]``.
    """
    out = tuple(float(t) for t in thresholds)
    bad = [t for t in out if not 0.0 < t <= 1.0]
    if bad:
        raise ValueError(f"cut thresholds must lie in (0, 1], got {bad}")
    return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def _check_rows(logits: np.ndarray, nodes: int, what: str) -> np.ndarray:
    logits = np.asarray(logits)
    if logits.ndim != 2 or logits.shape[0] != nodes:
        raise ValueError(f"{what} logits of shape {logits.shape} do not fit {nodes} nodes")
    return logits


def no_fuse_probability(logits: np.ndarray) -> np.ndarray:
    """``float64[N]``: each node's probability of fusion bin 0, from ``float32[N, B]`` logits."""
    return _softmax(logits)[:, 0]


def fusing_priority(logits: np.ndarray) -> np.ndarray:
    """``float32[N]``: the priority of each node's most likely bin other than 0."""
    logits = np.asarray(logits)
    return bin_values(logits.shape[1])[1 + np.argmax(logits[:, 1:], axis=1)]


def _distinct(base: np.ndarray, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``arrays`` less those equal to ``base`` or to an earlier one, in order."""
    seen, out = [base], []
    for a in arrays:
        if not any(np.array_equal(a, s) for s in seen):
            seen.append(a)
            out.append(a)
    return out


def fusion_cuts(
    decisions: Decisions,
    logits: np.ndarray,
    thresholds: Sequence[float] = FUSION_THRESHOLDS,
) -> list[Decisions]:
    """``decisions`` with their fusion cut from the policy's fusion logits at each threshold.

    Args:
      decisions: the base decisions; placement and schedule are kept.
      logits: ``float32[N, B]`` the policy's fusion logits per node (bin ``b`` is priority
        ``b / (B - 1)``, bin 0 "do not fuse").
      thresholds: cut points; for each ``τ``, nodes with ``P(no fuse) < τ`` fuse.

    Returns:
      One decision set per distinct cut, in ``thresholds`` order; cuts that equal the base's
      fusion, or an earlier cut's, are left out.

    Raises:
      ValueError: a threshold outside ``(0, 1]``, or logits with another node count.
    """
    thresholds = check_thresholds(thresholds)
    logits = _check_rows(logits, decisions.fusion_priority.shape[0], "fusion")
    no_fuse, fusing = no_fuse_probability(logits), fusing_priority(logits)
    fusions = [np.where(no_fuse < t, fusing, 0.0).astype(np.float32) for t in thresholds]
    base = np.asarray(decisions.fusion_priority, np.float32)
    return [decisions._replace(fusion_priority=f) for f in _distinct(base, fusions)]


def group_confidence(
    graph: OpGraph, logits: np.ndarray, placement: np.ndarray, num_devices: int
) -> np.ndarray:
    """``float64[N]``: per node, the probability its colocation group gives the device it
    is on, from the group's mean placement logits over the ``num_devices`` devices (the
    distribution the policy chooses a group's device from)."""
    logits = _check_rows(logits, graph.num_nodes, "placement")[:, :num_devices]
    groups = np.asarray(graph.colocation_group)
    _, member = np.unique(groups, return_inverse=True)
    sums = np.zeros((member.max() + 1, num_devices))
    np.add.at(sums, member, logits.astype(np.float64))
    mean = sums / np.bincount(member)[:, None]
    probability = _softmax(mean)[member]
    return probability[np.arange(graph.num_nodes), np.asarray(placement, np.int64)]


def main_device(graph: OpGraph, placement: np.ndarray) -> int:
    """The device with the most flops under ``placement`` (the lowest on ties)."""
    placement = np.asarray(placement, np.int64)
    load = np.bincount(placement, weights=np.asarray(graph.flops, np.float64))
    return int(np.argmax(load)) if load.size else 0


def placement_cuts(
    decisions: Decisions,
    graph: OpGraph,
    logits: np.ndarray,
    num_devices: int,
    thresholds: Sequence[float] = PLACEMENT_THRESHOLDS,
) -> list[Decisions]:
    """``decisions`` with the groups the policy is unsure of placed on the main device.

    Args:
      decisions: the base decisions (the greedy decode); schedule and fusion are kept.
      graph: their graph.
      logits: ``float32[N, D_max]`` the policy's placement logits per node.
      num_devices: ``D``, the cluster's devices (the first ``D`` logits count).
      thresholds: cut points; for each ``τ``, groups whose device has probability below
        ``τ`` (:func:`group_confidence`) go to :func:`main_device`.

    Returns:
      One decision set per distinct cut, in ``thresholds`` order; cuts that equal the base's
      placement, or an earlier cut's, are left out (none with one device).

    Raises:
      ValueError: a threshold outside ``(0, 1]``, or logits with another node count.
    """
    thresholds = check_thresholds(thresholds)
    if num_devices < 2:
        return []
    placement = np.asarray(decisions.placement, np.int32)
    confidence = group_confidence(graph, logits, placement, num_devices)
    main = main_device(graph, placement)
    placements = [np.where(confidence < t, main, placement).astype(np.int32) for t in thresholds]
    return [decisions._replace(placement=p) for p in _distinct(placement, placements)]
