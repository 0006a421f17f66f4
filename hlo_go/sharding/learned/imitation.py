"""Imitation pre-training of the sharding policy: learning a teacher's choices.

PPO from scratch (:func:`hlo_go.sharding.learned.train_sharding_policy`) starts from the
greedy prior and, with one strategy drawn per node independently, rarely samples the
coordinated changes (a whole block switching from data to tensor parallelism) that make
the ILP's choices better than greedy's (``docs/sharding.md``). So the policy is first
taught by a teacher,
as learned-sharding work commonly does: on training graphs, the ILP's choice
(:func:`hlo_go.sharding.solve_ilp`, time-limited) is the target, and the network is
trained to put its probability on the teacher's strategy at every decided node (the
core nodes of the ``"core"`` action space), by cross-entropy::

    L(θ) = − Σ_v w_v log π_θ(a*_v | G) / Σ_v w_v

with ``a*`` the teacher's strategy and ``w_v = 1`` where that strategy is one the policy
can choose (0 where the reductions pruned it as dominated, and on padding). PPO can
then fine-tune the result on the simulator's reward. At inference the network alone
decides, zero-shot, on graphs neither the teacher nor the training saw.

Public names: :class:`ImitationExample`, :func:`imitation_targets`,
:func:`train_imitation`, :class:`ImitationResult`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from hlo_go.rl.checkpoint import restore_params
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig
from hlo_go.sharding.learned.features import ShardingInput
from hlo_go.sharding.learned.policy import INIT_STREAM, ShardingPolicy, policy_for
from hlo_go.sharding.problem import total_cost


class ImitationExample(NamedTuple):
    """One training graph and its teacher's choice.

    Attributes:
      name: a label (e.g. ``"gpt2_l4@h100x8"``).
      sg: the sharding graph.
      choice: ``int[n]``, the teacher's strategy per node.
    """

    name: str
    sg: ShardingGraph
    choice: np.ndarray


class ImitationResult(NamedTuple):
    """The outcome of :func:`train_imitation`.

    Attributes:
      params: the trained parameters.
      config: the policy configuration they belong to.
      history: one row per step: ``step``, ``graph``, ``loss``, ``accuracy`` (share of
        weighted nodes whose most likely strategy is the teacher's), ``wall_s``.
      seconds: training wall-clock seconds.
    """

    params: Params
    config: ShardingPolicyConfig
    history: list[dict[str, Any]]
    seconds: float


def imitation_targets(inputs: ShardingInput, choice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The per-position targets and weights of a teacher's choice.

    Args:
      inputs: the graph's :class:`~hlo_go.sharding.learned.ShardingInput`.
      choice: ``int[n]``, the teacher's strategy per node (node ids).

    Returns:
      ``(targets int32[P], weights float32[P])``: the teacher's action at each position
      (0 where not decided by the policy), and 1 where the policy decides the node and
      can choose the teacher's strategy, else 0.
    """
    choice = np.asarray(choice, np.int64)
    if choice.shape != (inputs.num_nodes,):
        raise ValueError(f"choice has shape {choice.shape}; the graph has {inputs.num_nodes} nodes")
    targets = inputs.to_positions(inputs.action.restrict(choice))
    nodes = inputs.graphs.nodes
    valid = np.asarray(nodes["valid"])
    decided = np.asarray(nodes["mask"]).astype(bool)
    choosable = valid[np.arange(targets.shape[0]), np.minimum(targets, valid.shape[1] - 1)]
    weights = (decided & choosable & (targets < valid.shape[1])).astype(np.float32)
    return targets.astype(np.int32), weights


class _Imitator:
    """The jitted cross-entropy step of one policy configuration (compiles per bucket)."""

    def __init__(self, policy: ShardingPolicy, optimizer: optax.GradientTransformation) -> None:
        self.policy, self.optimizer = policy, optimizer
        self.step = jax.jit(self._step)

    def _loss(self, params: Params, graphs: Any, devices: jax.Array, targets, weights):
        logits, _ = self.policy.network.apply(params, graphs, devices)
        log_p = jax.nn.log_softmax(logits, axis=-1)
        chosen = jnp.take_along_axis(log_p, targets[:, None], -1)[:, 0]
        total = jnp.maximum(weights.sum(), 1.0)
        loss = -(chosen * weights).sum() / total
        hits = (jnp.argmax(logits, axis=-1) == targets).astype(weights.dtype)
        return loss, (hits * weights).sum() / total

    def _step(self, params, opt_state, graphs, devices, targets, weights):
        (loss, accuracy), grads = jax.value_and_grad(self._loss, has_aux=True)(
            params, graphs, devices, targets, weights
        )
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, accuracy


def train_imitation(
    examples: Sequence[ImitationExample],
    *,
    steps: int,
    learning_rate: float = 1e-3,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    params: Params | None = None,
    config: ShardingPolicyConfig | None = None,
    progress: bool = True,
) -> ImitationResult:
    """Trains the sharding policy to choose as a teacher did, visiting graphs in turn.

    Args:
      examples: training graphs with their teacher's choices.
      steps: Adam steps (one graph each, round robin).
      learning_rate: Adam's learning rate.
      max_grad_norm: global gradient-norm clip.
      seed: seed of fresh parameters.
      params: start from these parameters (default: fresh ones).
      config: the policy configuration (default :class:`ShardingPolicyConfig`).
      progress: show a tqdm bar.

    Returns:
      The :class:`ImitationResult`.

    Raises:
      ValueError: no examples, ``steps < 1``, or a choice that does not fit its graph.
    """
    if not examples:
        raise ValueError("train_imitation needs at least one example")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    policy = policy_for(config)
    prepared = []
    for example in examples:
        inputs = policy.prepare(example.sg)
        targets, weights = imitation_targets(inputs, example.choice)
        prepared.append((example.name, inputs, jnp.asarray(targets), jnp.asarray(weights)))
    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(learning_rate))
    imitator = _Imitator(policy, optimizer)
    template = policy.init(jax.random.fold_in(jax.random.key(seed), INIT_STREAM), prepared[0][1])
    params = template if params is None else restore_params(template, params)
    opt_state = optimizer.init(params)
    history: list[dict[str, Any]] = []
    began = time.perf_counter()
    bar = tqdm(total=steps, desc="sharding imitation", disable=not progress)
    try:
        for step in range(steps):
            name, inputs, targets, weights = prepared[step % len(prepared)]
            devices = jnp.asarray(inputs.num_devices, jnp.int32)
            params, opt_state, loss, accuracy = imitator.step(
                params, opt_state, inputs.graphs, devices, targets, weights
            )
            row = {
                "step": step,
                "graph": name,
                "loss": float(loss),
                "accuracy": float(accuracy),
                "wall_s": time.perf_counter() - began,
            }
            history.append(row)
            bar.update(1)
            bar.set_postfix(graph=name, loss=f"{row['loss']:.3f}", acc=f"{row['accuracy']:.2f}")
    finally:
        bar.close()
    return ImitationResult(params, policy.config, history, time.perf_counter() - began)


def teacher_gap(example: ImitationExample, choice: np.ndarray) -> float:
    """Relative cost of ``choice`` over the teacher's (``cost / teacher − 1``)."""
    teacher = total_cost(example.sg.problem, np.asarray(example.choice))
    return total_cost(example.sg.problem, np.asarray(choice)) / teacher - 1.0
