"""The policy's action distributions: masked categoricals, colocation, priority bins.

Every decision is a categorical over a few choices per node, computed from the
task's logits ``ℓ_v``:

* placement: ``D_max`` logits per node; devices ``d ≥ D`` (the cluster at hand)
  are masked out. A colocation group ``C`` (nodes that must share a device) makes
  one choice from the mean of its members' logits,
  ``\\bar ℓ_C = \\frac{1}{|C|} \\sum_{v \\in C} ℓ_v``, and every member takes it; its
  log-probability and entropy count once per group.
* scheduling and fusion priority: ``B`` logits per node over bins ``b = 0 .. B-1``,
  bin ``b`` meaning priority ``b / (B - 1)`` (so fusion bin 0 = "do not fuse").

The log-probability of a whole decision is the sum over counted rows (groups, or
nodes) of ``log softmax(ℓ)[a]``, over the three tasks.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jraph
import numpy as np

MASKED_LOGIT = -1e9
"""Logit given to an invalid choice: never sampled, finite so gradients stay finite."""


def bin_values(num_bins: int) -> np.ndarray:
    """``float32[B]``, the priority each bin stands for: ``b / (B - 1)``."""
    return (np.arange(num_bins) / (num_bins - 1)).astype(np.float32)


def priorities_to_bins(priority: np.ndarray, num_bins: int) -> np.ndarray:
    """The nearest bin of each priority (values outside ``[0, 1]`` clip to the ends).

    Args:
      priority: priorities, as :class:`~hlo_go.decisions.Decisions` holds them.
      num_bins: ``B``.

    Returns:
      ``int32`` bins, exact for priorities the policy produced.
    """
    bins = np.rint(np.asarray(priority, np.float64) * (num_bins - 1))
    return np.clip(bins, 0, num_bins - 1).astype(np.int32)


def fusion_bins(priority: np.ndarray, num_bins: int) -> np.ndarray:
    """The bins of fusion priorities: :func:`priorities_to_bins`, except that a positive
    priority takes at least bin 1.

    A fusion priority of 0 means "do not fuse" (:func:`hlo_go.decisions.fusion_groups`
    fuses an edge only where both ends are positive), so a small positive priority must
    not round to bin 0: a heuristic whose priorities span orders of magnitude
    (``priority-fusion``'s, scaled to the largest) would otherwise read as fusing almost
    nothing.

    Returns:
      ``int32`` bins, 0 exactly where the priority is not positive; exact for priorities
      the policy produced.
    """
    positive = np.asarray(priority, np.float64) > 0
    return np.where(positive, np.maximum(priorities_to_bins(priority, num_bins), 1), 0).astype(
        np.int32
    )


class Choice(NamedTuple):
    """One task's actions with their log-probabilities and entropies.

    Attributes:
      action: ``int32[N]`` the choice of every row.
      log_prob: ``float32[]`` sum of ``log p(action)`` over counted rows.
      entropy: ``float32[]`` sum of the distributions' entropies over counted rows.
      row_log_prob: ``float32[N]`` each row's ``log p(action)``, 0 where not counted
        (``log_prob`` is its sum).
    """

    action: jnp.ndarray
    log_prob: jnp.ndarray
    entropy: jnp.ndarray
    row_log_prob: jnp.ndarray


def choose(
    logits: jnp.ndarray,
    valid: jnp.ndarray,
    counted: jnp.ndarray,
    *,
    uniform: jnp.ndarray | None = None,
    given: jnp.ndarray | None = None,
) -> Choice:
    """Samples (``uniform``), takes the mode (neither) or scores ``given`` actions.

    Args:
      logits: ``float32[N, A]``.
      valid: ``bool[A]`` or ``bool[N, A]``, False for choices that may not be taken.
      counted: ``bool[N]`` rows whose log-probability and entropy count.
      uniform: ``float32[N]`` draws from ``U[0, 1)``: sample each row from the
        masked categorical by inverse CDF (see :func:`inverse_cdf_sample`).
      given: ``int32[N]`` actions to score instead of choosing.

    Returns:
      The :class:`Choice`.
    """
    logits = jnp.where(valid, logits, MASKED_LOGIT)
    log_p = jax.nn.log_softmax(logits, axis=-1)
    if given is not None:
        action = given.astype(jnp.int32)
    elif uniform is not None:
        action = inverse_cdf_sample(uniform, jnp.exp(log_p), valid)
    else:
        action = _first_max(logits)
    chosen = jnp.take_along_axis(log_p, action[:, None], axis=-1)[:, 0]
    entropy = -(jnp.exp(log_p) * log_p).sum(-1)
    weight = counted.astype(log_p.dtype)
    rows = chosen * weight
    return Choice(action, rows.sum(), (entropy * weight).sum(), rows)


def inverse_cdf_sample(uniform: jnp.ndarray, probs: jnp.ndarray, valid: jnp.ndarray) -> jnp.ndarray:
    """One draw per row: the first ``a`` with ``Σ_{b ≤ a} p_b > u · Σ_b p_b``.

    Exact categorical sampling from one uniform ``u`` per row (rather than one
    Gumbel per choice, as ``jax.random.categorical`` draws), and sums instead of
    an arg-max reduction: both several times cheaper on CPU for ``N`` in the 10⁵s.
    Choices of probability 0 (masked) are never drawn: the count stops before a
    flat stretch of the CDF, and the last valid choice bounds it against rounding.

    Args:
      uniform: ``float32[N]`` draws from ``U[0, 1)``.
      probs: ``float32[N, A]`` probabilities (rows sum to about 1).
      valid: ``bool[A]`` or ``bool[N, A]`` choices that may be drawn.

    Returns:
      ``int32[N]``.
    """
    cdf = jnp.cumsum(probs, axis=-1)
    u = uniform * cdf[..., -1]
    drawn = (cdf <= u[..., None]).sum(-1)
    last_valid = jnp.where(valid, jnp.arange(probs.shape[-1]), 0).max(-1)
    return jnp.minimum(drawn, last_valid).astype(jnp.int32)


def _first_max(logits: jnp.ndarray) -> jnp.ndarray:
    """``argmax`` over the last axis (first index on ties), without a variadic reduction."""
    best = logits.max(-1, keepdims=True)
    index = jnp.arange(logits.shape[-1], dtype=jnp.int32)
    return jnp.where(logits == best, index, logits.shape[-1]).min(-1).astype(jnp.int32)


def colocated_log_probs(logits: jnp.ndarray, valid: jnp.ndarray, group: jnp.ndarray) -> jnp.ndarray:
    """``float32[N, A]``: the log-probabilities :func:`choose_colocated` chooses from, one
    row per colocation group (row ``g``: group ``g``'s, the mean of its rows' logits; rows
    that name no group hold meaningless values).

    Args:
      logits: ``float32[N, A]``.
      valid: ``bool[A]``.
      group: ``int32[N]`` the group of each row, named by one of its rows.
    """
    pooled = jraph.segment_mean(logits, group, logits.shape[0])
    return jax.nn.log_softmax(jnp.where(valid, pooled, MASKED_LOGIT), axis=-1)


def group_leaders(group: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """``bool[N]``: the real rows that name their colocation group (one per group), the
    rows whose placement is counted (works on NumPy and JAX arrays alike)."""
    rows = np.arange(group.shape[0], dtype=group.dtype)
    return mask & (group == rows)


def choose_colocated(
    logits: jnp.ndarray,
    valid: jnp.ndarray,
    group: jnp.ndarray,
    mask: jnp.ndarray,
    *,
    uniform: jnp.ndarray | None = None,
    given: jnp.ndarray | None = None,
) -> Choice:
    """:func:`choose` with one choice per colocation group, copied to every member.

    Args:
      logits: ``float32[N, A]``.
      valid: ``bool[A]``.
      group: ``int32[N]`` the group of each row, named by one of its rows.
      mask: ``bool[N]`` True for real rows.
      uniform: as in :func:`choose` (the group's row's draw is used).
      given: as in :func:`choose`; the group's row's action is the one scored.

    Returns:
      The :class:`Choice`, ``action`` constant over each group.
    """
    n = logits.shape[0]
    pooled = jraph.segment_mean(logits, group, n)  # row g: mean over group g
    choice = choose(pooled, valid, group_leaders(group, mask), uniform=uniform, given=given)
    return choice._replace(action=choice.action[group])
