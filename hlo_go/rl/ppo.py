"""Generic PPO pieces (Optax), independent of any policy network.

Everything here works on arrays and on two user functions, so any policy can
reuse it (the GO policy of :mod:`hlo_go.rl.trainer`, the pass-ordering agent):

* an **evaluate function** ``evaluate_fn(params, data) -> (log_prob, entropy, value)``
  that scores a minibatch: ``data`` is any pytree whose leaves have a leading batch
  axis ``B`` (the actions taken, observations, ...), and the three results are
  ``float32[B]`` — or ``log_prob`` is ``float32[B, R]``, one log-probability per
  decision of a sample (a sample made of ``R`` decisions, ``log π(a) = Σ_r log π(a_r)``),
  with the batch's ``weights`` saying which decisions count;
* an Optax optimizer, usually :func:`make_optimizer` (gradient clipping + Adam).

The loss, for probability ratio ``r = exp(log π(a) - log π_old(a))``, advantages
``A`` (normalized to zero mean and unit variance by default), returns ``R`` and
values ``V``::

    L = -mean(min(r A, clip(r, 1-ε, 1+ε) A))       clipped surrogate
        + c_v * 0.5 * mean((V - R)^2)             value loss
        - c_e * mean(H)                           entropy bonus

With per-decision log-probabilities the surrogate has one ratio per decision,
``r_br = exp(log π(a_br) - log π_old(a_br))``, each clipped on its own and weighted by
its sample's advantage (as token-level PPO does for sequences)::

    L_clip = -(1/B) Σ_br w_br min(r_br A_b, clip(r_br, 1-ε, 1+ε) A_b)

(summed over a sample's decisions, as the joint log-probability is, so the policy's
gradient keeps its scale next to the value loss's). A sample of thousands of decisions
has a joint ratio that leaves ``[1-ε, 1+ε]`` after the smallest step, so the joint form
clips whole samples at once; the per-decision form keeps a trust region per decision
(``PPOConfig.ratio``).

:func:`ppo_update_step` takes one gradient step on one minibatch (:func:`ppo_grads`,
then :func:`ppo_apply`; data-parallel training averages the gradients in between);
:func:`minibatch_epochs` runs ``epochs`` shuffled passes of minibatches over a batch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

Params = Any
"""Any pytree of parameters."""

EvaluateFn = Callable[[Params, Any], tuple[jax.Array, jax.Array, jax.Array]]
"""``(params, data) -> (log_prob[B], entropy[B], value[B])`` for a minibatch ``data``."""


RATIOS = ("sample", "decision")
"""The levels of :attr:`PPOConfig.ratio`."""


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Hyperparameters of the PPO loss and update."""

    # ε of the clipped surrogate: the ratio π/π_old is clipped to [1-ε, 1+ε].
    clip_epsilon: float = 0.2
    # c_v, weight of the value loss 0.5 * (V - R)^2 in the total loss.
    value_coef: float = 0.5
    # c_e, weight of the entropy bonus (subtracted from the loss).
    entropy_coef: float = 0.01
    # Adam learning rate.
    learning_rate: float = 1e-3
    # Gradients are clipped to this global L2 norm before Adam (<= 0: no clipping).
    max_grad_norm: float = 1.0
    # Passes over each batch of samples.
    epochs: int = 4
    # Samples per gradient step; must divide the batch size (0: the whole batch).
    minibatch_size: int = 0
    # Normalize advantages over the whole batch (zero mean, unit std) before the epochs.
    normalize_advantages: bool = True
    # "sample": one probability ratio per sample (its decisions' log-probabilities
    # summed); "decision": one ratio per decision, each clipped on its own (the evaluate
    # function then returns log_prob[B, R] and the batch carries weights[B, R]).
    ratio: str = "sample"

    def __post_init__(self) -> None:
        for name in (
            "clip_epsilon",
            "value_coef",
            "entropy_coef",
            "learning_rate",
            "max_grad_norm",
        ):
            if not math.isfinite(getattr(self, name)):  # NaN passes every comparison below
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)}")
        if self.clip_epsilon <= 0:
            raise ValueError(f"clip_epsilon must be > 0, got {self.clip_epsilon}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if self.minibatch_size < 0:
            raise ValueError(f"minibatch_size must be >= 0, got {self.minibatch_size}")
        if self.ratio not in RATIOS:
            raise ValueError(f"ratio must be one of {RATIOS}, got {self.ratio!r}")
        for name in ("value_coef", "entropy_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


class PPOBatch(NamedTuple):
    """A batch of ``B`` samples to learn from.

    Attributes:
      data: pytree with leading axis ``B``, passed to the evaluate function.
      old_log_prob: ``float32[B]`` log-probabilities under the sampling policy, or
        ``float32[B, R]`` per decision.
      advantages: ``float32[B]``.
      returns: ``float32[B]`` targets of the value function.
      weights: with per-decision log-probabilities, ``float32[B, R]``: 1 for the
        decisions that count, 0 for the others (padding); None: all count.
    """

    data: Any
    old_log_prob: jax.Array
    advantages: jax.Array
    returns: jax.Array
    weights: jax.Array | None = None

    @property
    def size(self) -> int:
        """``B``."""
        return int(jnp.shape(self.old_log_prob)[0])


class LossInfo(NamedTuple):
    """The parts of the PPO loss (all ``float32[]``).

    Attributes:
      total: the loss minimized.
      policy: the clipped-surrogate loss.
      value: the value loss ``0.5 * mean((V - R)^2)``.
      entropy: mean entropy (the bonus before weighting).
      approx_kl: ``mean(log π_old - log π)``, an estimate of KL(π_old || π).
      clip_fraction: fraction of samples whose ratio was clipped.
      grad_norm: global gradient norm before clipping (0 where no gradient was taken).
    """

    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array
    grad_norm: jax.Array


def normalize_advantages(advantages: jax.Array, eps: float = 1e-8) -> jax.Array:
    """``(A - mean(A)) / (std(A) + eps)``; a batch of one is only centered (to 0).

    Args:
      advantages: ``float[B]``.
      eps: added to the standard deviation.

    Returns:
      ``float[B]`` with zero mean and (for ``B > 1`` and non-constant input) unit std.
    """
    advantages = jnp.asarray(advantages, jnp.float32)
    centered = advantages - jnp.mean(advantages)
    return centered / (jnp.std(advantages) + eps)


def clipped_surrogate(
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantages: jax.Array,
    clip_epsilon: float,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """PPO's clipped surrogate, as a loss to minimize.

    Args:
      log_prob: ``float[B]`` log π(a) under the current parameters, or ``float[B, R]``
        one per decision (each decision then has its own ratio).
      old_log_prob: the same under the sampling parameters.
      advantages: ``float[B]`` (one per sample), or ``log_prob``'s shape.
      clip_epsilon: ε.
      weights: ``float[B, R]`` (per-decision only): which decisions count.

    Returns:
      ``(loss, approx_kl, clip_fraction)``: ``-mean(min(r A, clip(r, 1-ε, 1+ε) A))``,
      ``mean(old_log_prob - log_prob)`` and the fraction of ``|r - 1| > ε``, means over
      every element. With ``weights``, the loss sums over each sample's counted
      decisions (then averages over samples) and the other two average over counted
      decisions.
    """
    log_ratio = log_prob - jax.lax.stop_gradient(old_log_prob)
    ratio = jnp.exp(log_ratio)
    advantages = jnp.reshape(advantages, advantages.shape + (1,) * (ratio.ndim - advantages.ndim))
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantages
    surrogate = jnp.minimum(unclipped, clipped)
    if weights is None:  # every element counts alike (e.g. per-element advantages)
        weights = jnp.ones_like(log_ratio)
        loss = -jnp.mean(surrogate)
    else:
        # summed over a sample's decisions, averaged over samples: the gradient has the
        # joint form's scale (a mean over decisions would shrink the policy's gradient
        # by the decision count, next to the value loss's)
        loss = -(surrogate * weights).sum() / log_ratio.shape[0]
    total = jnp.maximum(weights.sum(), 1.0)

    def mean(x: jax.Array) -> jax.Array:
        return (x * weights).sum() / total

    approx_kl = mean(-log_ratio)
    clip_fraction = mean((jnp.abs(ratio - 1.0) > clip_epsilon).astype(jnp.float32))
    return loss, jax.lax.stop_gradient(approx_kl), jax.lax.stop_gradient(clip_fraction)


def value_loss(values: jax.Array, returns: jax.Array) -> jax.Array:
    """``0.5 * mean((V - R)^2)``."""
    return 0.5 * jnp.mean(jnp.square(values - jax.lax.stop_gradient(returns)))


def entropy_bonus(entropy: jax.Array) -> jax.Array:
    """``mean(H)``: the bonus that :func:`ppo_loss` subtracts, weighted, from the loss."""
    return jnp.mean(entropy)


def ppo_loss(
    log_prob: jax.Array,
    entropy: jax.Array,
    values: jax.Array,
    old_log_prob: jax.Array,
    advantages: jax.Array,
    returns: jax.Array,
    config: PPOConfig,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, LossInfo]:
    """The PPO loss from arrays.

    Args:
      log_prob: ``float[B]`` current log-probabilities of the actions taken, or
        ``float[B, R]`` per decision.
      entropy: ``float[B]`` entropies of the current action distributions.
      values: ``float[B]`` current value estimates.
      old_log_prob: ``log_prob``'s shape, log-probabilities when sampled.
      advantages: ``float[B]`` (used as given: normalize them beforehand if wanted).
      returns: ``float[B]`` value targets.
      config: coefficients and ε.
      weights: ``float[B, R]``, which decisions count (per-decision only; None: all).

    Returns:
      ``(total, info)``.
    """
    policy, approx_kl, clip_fraction = clipped_surrogate(
        log_prob, old_log_prob, advantages, config.clip_epsilon, weights
    )
    v_loss = value_loss(values, returns)
    ent = entropy_bonus(entropy)
    total = policy + config.value_coef * v_loss - config.entropy_coef * ent
    info = LossInfo(total, policy, v_loss, ent, approx_kl, clip_fraction, jnp.zeros(()))
    return total, info


def make_optimizer(config: PPOConfig) -> optax.GradientTransformation:
    """Global-norm gradient clipping (``max_grad_norm``) followed by Adam."""
    adam = optax.adam(config.learning_rate)
    if config.max_grad_norm <= 0:
        return adam
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adam)


def ppo_grads(
    params: Params, batch: PPOBatch, evaluate_fn: EvaluateFn, config: PPOConfig
) -> tuple[Params, LossInfo]:
    """The gradient of the PPO loss on one minibatch (jit-compatible).

    Args:
      params: current parameters.
      batch: the minibatch (advantages as they enter the loss).
      evaluate_fn: ``(params, batch.data) -> (log_prob, entropy, value)``.
      config: loss coefficients.

    Returns:
      ``(grads, info)``: gradients shaped like ``params``, and the loss at ``params``
      (``info.grad_norm`` is the global norm of ``grads``).
    """

    def loss_fn(p: Params) -> tuple[jax.Array, LossInfo]:
        log_prob, entropy, value = evaluate_fn(p, batch.data)
        return ppo_loss(
            log_prob,
            entropy,
            value,
            batch.old_log_prob,
            batch.advantages,
            batch.returns,
            config,
            batch.weights,
        )

    (_, info), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    return grads, info._replace(grad_norm=optax.tree.norm(grads))


def ppo_apply(
    params: Params,
    opt_state: optax.OptState,
    grads: Params,
    optimizer: optax.GradientTransformation,
) -> tuple[Params, optax.OptState]:
    """Applies gradients with the optimizer: ``(params, opt_state)`` after the step."""
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def ppo_update_step(
    params: Params,
    opt_state: optax.OptState,
    batch: PPOBatch,
    evaluate_fn: EvaluateFn,
    optimizer: optax.GradientTransformation,
    config: PPOConfig,
) -> tuple[Params, optax.OptState, LossInfo]:
    """One gradient step of the PPO loss on one minibatch (jit-compatible):
    :func:`ppo_grads` then :func:`ppo_apply`.

    Args:
      params: current parameters.
      opt_state: the optimizer's state.
      batch: the minibatch (advantages as they enter the loss).
      evaluate_fn: ``(params, batch.data) -> (log_prob, entropy, value)``.
      optimizer: e.g. :func:`make_optimizer`.
      config: loss coefficients.

    Returns:
      ``(params, opt_state, info)`` after the step; ``info`` is the loss before it.
    """
    grads, info = ppo_grads(params, batch, evaluate_fn, config)
    params, opt_state = ppo_apply(params, opt_state, grads, optimizer)
    return params, opt_state, info


UpdateFn = Callable[[Params, optax.OptState, PPOBatch], tuple[Params, optax.OptState, LossInfo]]
"""``(params, opt_state, minibatch) -> (params, opt_state, info)``."""


def make_update_step(
    evaluate_fn: EvaluateFn, optimizer: optax.GradientTransformation, config: PPOConfig
) -> UpdateFn:
    """:func:`ppo_update_step` with its functions bound, jit-compiled."""

    def step(params: Params, opt_state: optax.OptState, batch: PPOBatch):
        return ppo_update_step(params, opt_state, batch, evaluate_fn, optimizer, config)

    return jax.jit(step)


def minibatch_epochs(
    params: Params,
    opt_state: optax.OptState,
    batch: PPOBatch,
    update_fn: UpdateFn,
    key: jax.Array,
    config: PPOConfig,
) -> tuple[Params, optax.OptState, list[LossInfo]]:
    """``config.epochs`` passes over ``batch``, each in a fresh random order of minibatches.

    Advantages are normalized over the whole batch first when
    ``config.normalize_advantages``.

    Args:
      params: current parameters.
      opt_state: the optimizer's state.
      batch: ``B`` samples.
      update_fn: one gradient step (:func:`make_update_step`).
      key: PRNG key for the shuffles.
      config: ``epochs``, ``minibatch_size``, ``normalize_advantages``.

    Returns:
      ``(params, opt_state, infos)``, one :class:`LossInfo` per gradient step.

    Raises:
      ValueError: ``minibatch_size`` does not divide ``B``.
    """
    size = batch.size
    mb = config.minibatch_size or size
    if size < 1 or size % mb:
        raise ValueError(f"minibatch_size {mb} must divide the batch size {size}")
    if config.normalize_advantages:
        batch = batch._replace(advantages=normalize_advantages(batch.advantages))
    infos: list[LossInfo] = []
    for epoch in range(config.epochs):
        order = (
            jax.random.permutation(jax.random.fold_in(key, epoch), size)
            if mb < size
            else jnp.arange(size)
        )
        for start in range(0, size, mb):
            index = order[start : start + mb]
            minibatch = jax.tree.map(lambda x, i=index: jnp.asarray(x)[i], batch)
            params, opt_state, info = update_fn(params, opt_state, minibatch)
            infos.append(info)
    return params, opt_state, infos
