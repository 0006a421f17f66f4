"""Fusion sweeps: the policy's own fusion probabilities, cut at several confidence levels.

The greedy decode fuses a node when its most likely fusion bin is not bin 0 ("do not
fuse"). On a family it never saw, the network is often unsure about a few dozen nodes
(``P(no fuse)`` between 0.5 and 0.9) and leaving them unfused can cost several percent
(``docs/rl.md``). A sweep keeps the network's ranking of nodes by ``P(no fuse)`` and tries
a few cut points instead of one: for each threshold ``τ``, every node with
``P(no fuse) < τ`` fuses, at the priority of its most likely fusing bin, and the others do
not. :func:`hlo_go.rl.infer` simulates each cut and keeps the fastest (never slower than
the greedy decisions). No heuristic is read: every candidate is a decode of the network's
distribution, placement and schedule unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.gonet.actions import bin_values

FUSION_THRESHOLDS: tuple[float, ...] = (0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
"""Cut points :func:`hlo_go.rl.infer` tries by default (each one simulation, unless two
give the same decisions): ``P(no fuse) < τ`` fuses."""


def no_fuse_probability(logits: np.ndarray) -> np.ndarray:
    """``float64[N]``: each node's probability of fusion bin 0, from ``float32[N, B]`` logits."""
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p[:, 0] / p.sum(axis=1)


def fusing_priority(logits: np.ndarray) -> np.ndarray:
    """``float32[N]``: the priority of each node's most likely bin other than 0."""
    logits = np.asarray(logits)
    return bin_values(logits.shape[1])[1 + np.argmax(logits[:, 1:], axis=1)]


def check_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    """``thresholds`` as a tuple, each in ``(0, 1]``.

    Raises:
      ValueError: a threshold outside ``(0, 1]``.
    """
    out = tuple(float(t) for t in thresholds)
    bad = [t for t in out if not 0.0 < t <= 1.0]
    if bad:
        raise ValueError(f"fusion thresholds must lie in (0, 1], got {bad}")
    return out


def fusion_sweep(
    decisions: Decisions,
    logits: np.ndarray,
    thresholds: Sequence[float] = FUSION_THRESHOLDS,
) -> list[Decisions]:
    """``decisions`` with their fusion cut from the policy's fusion logits at each threshold.

    Args:
      decisions: the base decisions (the greedy decode); placement and schedule are kept.
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
    logits = np.asarray(logits)
    if logits.ndim != 2 or logits.shape[0] != decisions.fusion_priority.shape[0]:
        raise ValueError(
            f"fusion logits of shape {logits.shape} do not fit "
            f"{decisions.fusion_priority.shape[0]} nodes"
        )
    no_fuse = no_fuse_probability(logits)
    fusing = fusing_priority(logits)
    seen = [np.asarray(decisions.fusion_priority, np.float32)]
    out = []
    for tau in thresholds:
        fusion = np.where(no_fuse < tau, fusing, 0.0).astype(np.float32)
        if any(np.array_equal(fusion, s) for s in seen):
            continue
        seen.append(fusion)
        out.append(decisions._replace(fusion_priority=fusion))
    return out
