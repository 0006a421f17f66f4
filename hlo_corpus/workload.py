"""What a corpus workload is, and the one training-step shape they all share.

Every workload is a full training step of a Flax (linen) model: forward pass,
loss, ``jax.grad``, an Optax update, and (where the model has them) updated
batch-norm statistics or recurrent memories. Arguments are abstract
(``jax.ShapeDtypeStruct``, from ``jax.eval_shape``), so building a workload never
runs anything expensive: it only traces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import optax

# The one PRNG seed of the corpus. Parameters are never materialized (only their
# shapes are traced), but the seed fixes what `init` traces, and keeps it fixed.
SEED = 0

FORMS = ("unrolled", "scan", "none")

PyTree = Any
# A training step and its abstract arguments, as ``Workload.make`` returns them.
StepAndArgs = tuple[Callable[..., Any], tuple[Any, ...]]
# loss(params, model_state, batch) -> (loss, (new_model_state, extra_outputs))
LossFn = Callable[[PyTree, PyTree, PyTree], tuple[jax.Array, tuple[PyTree, PyTree]]]


@dataclass(frozen=True)
class Workload:
    """One graph of the corpus.

    Attributes:
      name: unique name, also the stem of the stored files (``[a-z0-9_]+``).
      family: model family, e.g. ``"gnmt"``.
      variant: size variant within the family, e.g. ``"l8"``.
      form: ``"unrolled"`` (recurrence as a Python loop), ``"scan"``
        (``jax.lax.scan``: a ``while`` loop) or ``"none"`` (no recurrence).
      make: builds ``(step_fn, args)``: the training step and its abstract arguments.
      config: the hyper-parameters ``make`` uses (recorded in the index).
    """

    name: str
    family: str
    variant: str
    form: str
    make: Callable[[], StepAndArgs]
    config: Mapping[str, Any] = field(default_factory=dict)

    def lower(self) -> jax.stages.Lowered:
        """``jax.jit(step).lower(*args)``; the HLO module is named ``jit_<name>``."""
        step, args = self.make()
        return jax.jit(step).lower(*args)


def spec(shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    """An abstract array argument."""
    return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


def zeros_like_spec(tree: PyTree) -> PyTree:
    """Concrete zeros for a tree of specs (only ever used under tracing)."""
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), tree)


def training_step(
    name: str,
    *,
    init: Callable[[jax.Array, PyTree], PyTree],
    loss: LossFn,
    optimizer: optax.GradientTransformation,
    batch: PyTree,
) -> StepAndArgs:
    """A training step and its abstract arguments.

    Args:
      name: the step function's name (XLA names the module ``jit_<name>``).
      init: ``init(rng, batch) -> variables`` (a Flax variables dict with ``"params"``
        and possibly other collections such as ``"batch_stats"``).
      loss: ``loss(params, model_state, batch) -> (loss, (new_model_state, outputs))``
        where ``model_state`` holds the non-parameter collections.
      optimizer: the Optax transformation applied to the gradients.
      batch: abstract inputs (a tree of ``jax.ShapeDtypeStruct``).

    Returns:
      ``(step, (params, model_state, opt_state, batch))`` where
      ``step(params, model_state, opt_state, batch) -> (params, model_state,
      opt_state, loss, outputs)``.
    """
    variables = jax.eval_shape(lambda rng: init(rng, zeros_like_spec(batch)), jax.random.key(SEED))
    variables = dict(variables)
    params = variables.pop("params")
    model_state = variables
    opt_state = jax.eval_shape(optimizer.init, params)

    def step(params, model_state, opt_state, batch):
        grad_fn = jax.value_and_grad(loss, has_aux=True)
        (value, (new_state, outputs)), grads = grad_fn(params, model_state, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, new_state, opt_state, value, outputs

    step.__name__ = step.__qualname__ = name
    return step, (params, model_state, opt_state, batch)


def cross_entropy(
    logits: jax.Array, labels: jax.Array, weights: jax.Array | None = None
) -> jax.Array:
    """Mean (or ``weights``-weighted mean) softmax cross entropy over integer labels."""
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    if weights is None:
        return jnp.mean(losses)
    return jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def adam(
    learning_rate: float = 1e-3, *, clip: float | None = None, weight_decay: float = 0.0
) -> optax.GradientTransformation:
    """Adam(W), optionally after global-norm gradient clipping (the RNN recipes)."""
    tx = (
        optax.adamw(learning_rate, weight_decay=weight_decay)
        if weight_decay
        else optax.adam(learning_rate)
    )
    if clip is None:
        return tx
    return optax.chain(optax.clip_by_global_norm(clip), tx)


def momentum_sgd(
    learning_rate: float = 0.1, *, weight_decay: float = 1e-4
) -> optax.GradientTransformation:
    """SGD with Nesterov momentum and L2 weight decay (the CNN recipes)."""
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        optax.sgd(learning_rate, momentum=0.9, nesterov=True),
    )
