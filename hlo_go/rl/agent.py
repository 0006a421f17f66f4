"""``GOAgent``: the GO policy wired to PPO — batched sampling, scoring and updates.

One jitted function samples ``K`` decision sets at once and one jitted function takes a
PPO gradient step on a minibatch of them. Both split the network in two
(:meth:`hlo_go.gonet.GONetwork.shared`, :meth:`~hlo_go.gonet.GONetwork.decide`): the
part no action depends on (GraphSAGE encoder, value, modulation, the first task's
attention stack and logits) runs once per graph, and the rest runs once per decision
set in a ``lax.map`` (on CPU, serial sets beat ``vmap``, whose batched attention
contractions are slower than ``K`` plain ones), and the attention scan is rematerialized
in the backward pass (:class:`hlo_go.gonet.SegmentRecurrentStack`); ``python -m
benchmarks rl`` times an iteration (``iteration_10k_s``). Both compile once per graph
bucket (:func:`hlo_go.gonet.policy_bucket`). :meth:`GOAgent.grads` and
:meth:`GOAgent.apply_grads` split the update step in two, for data-parallel training
(:mod:`hlo_go.rl.distributed`), which averages the gradients in between.

With ``ppo.ratio == "decision"`` the log-probabilities are per decision: ``[K, R]``
with ``R = len(tasks) * P`` (the learned tasks' rows, in ``tasks`` order), and
:meth:`GOAgent.weights` says which of the ``R`` count.

Only the tasks being learned count: the log-probability and entropy of a decision set
are summed over those tasks, and the other tasks' actions are replaced by the
environment's fixed decisions before scoring. (The network decides tasks in order,
each conditioned on the previous ones' actions; when a fixed task comes before a
learned one, the learned task was sampled conditioned on the network's own choice
for the fixed task, so the sampling log-probabilities are recomputed on the actions
actually used.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from hlo_go.gonet import TASKS, GONetwork, GOPolicy, PolicyInput
from hlo_go.gonet.actions import group_leaders
from hlo_go.gonet.network import NetworkOutput, SharedPass
from hlo_go.rl.env import GraphEnv, check_tasks
from hlo_go.rl.ppo import LossInfo, PPOBatch, PPOConfig, ppo_apply, ppo_grads, ppo_update_step

Params = Any


def decision_weights(inputs: PolicyInput, tasks: Sequence[str]) -> np.ndarray:
    """Which per-position decisions of ``tasks`` count: ``float32[len(tasks) * P]``, the
    tasks' rows in ``tasks`` order, 1 for real nodes (for placement, only each colocation
    group's leader, the row its one choice is scored at) and 0 for padding."""
    nodes = inputs.graphs.nodes
    mask = np.asarray(nodes["mask"], bool)
    leaders = group_leaders(np.asarray(nodes["colocation_group"]), mask)
    rows = np.concatenate([leaders if t == "placement" else mask for t in tasks])
    return rows.astype(np.float32)


NO_MOVE_HEAD = (
    "this policy has no move head (PolicyConfig(move_head=True)): train one with "
    "hlo_go.rl.train_imitation to decode with moves"
)


class GreedyPass(NamedTuple):
    """What one greedy pass of the network gives a zero-shot decode.

    Attributes:
      actions: task -> ``int32[1, P]`` the most likely actions (fixed tasks replaced).
      move_score: ``float32[P]`` the move head's score of each position's colocation group
        (:attr:`hlo_go.gonet.network.SharedPass.move_score`); None without a move head.
      placement_logits: ``float32[P, D_max]`` the placement task's logits
        (:mod:`hlo_go.rl.cuts`); None when placement is not learned.
      fusion_logits: ``float32[P, B]`` the fusion task's logits under the greedy
        placement and schedule (:mod:`hlo_go.rl.cuts`); None when fusion is not learned.
    """

    actions: dict[str, np.ndarray]
    move_score: np.ndarray | None
    placement_logits: np.ndarray | None
    fusion_logits: np.ndarray | None


class GOAgent:
    """Batched sampling and PPO updates of a :class:`~hlo_go.gonet.GOPolicy`.

    Args:
      policy: the policy.
      max_devices: ``D_max`` of its parameters.
      tasks: the tasks learned (a subset of :data:`hlo_go.gonet.TASKS`).
      ppo: loss coefficients.
      optimizer: the Optax optimizer the update steps apply.
    """

    def __init__(
        self,
        policy: GOPolicy,
        max_devices: int,
        tasks: tuple[str, ...],
        ppo: PPOConfig,
        optimizer: optax.GradientTransformation,
    ) -> None:
        self.policy = policy
        self.max_devices = int(max_devices)
        self.tasks = check_tasks(tasks)
        self.ppo = ppo
        self.optimizer = optimizer
        self.network = policy.network(self.max_devices)
        self._sample_jit = jax.jit(self._sample_fn, static_argnames="temperature")
        self._score_jit = jax.jit(self._score_fn)
        self._update_jit = jax.jit(self._update_fn)
        self._grads_jit = jax.jit(self._grads_fn)
        self._apply_jit = jax.jit(self._apply_fn)
        self._greedy_jit = jax.jit(self._greedy_fn)
        self._greedy_pass_jit = jax.jit(self._greedy_pass_fn)

    # -- jitted bodies ------------------------------------------------------------------

    def _shared(self, params: Params, graphs: Any, devices: jax.Array) -> SharedPass:
        return self.network.apply(params, graphs, devices, method=GONetwork.shared)

    def _decide(
        self, params: Params, shared: SharedPass, graphs: Any, devices: jax.Array, **kw: Any
    ) -> NetworkOutput:
        return self.network.apply(params, shared, graphs, devices, method=GONetwork.decide, **kw)

    def _log_prob(self, out: NetworkOutput) -> jax.Array:
        """The learned tasks' log-probability: ``float32[]``, or ``float32[R]`` per decision."""
        if self.ppo.ratio == "decision":
            return jnp.concatenate([out.row_log_prob[t] for t in self.tasks])
        return sum(out.log_prob[t] for t in self.tasks)

    def _scores(self, params: Params, graphs: Any, devices: jax.Array, actions: Any):
        """``(log_prob[B] or [B, R], entropy[B], value[B])`` of actions ``[B, P]`` per task."""
        shared = self._shared(params, graphs, devices)

        def one(acts: dict[str, jax.Array]):
            out = self._decide(params, shared, graphs, devices, actions=acts)
            entropy = sum(out.entropy[t] for t in self.tasks)
            return self._log_prob(out), entropy, out.value

        return jax.lax.map(one, actions)

    def _sample_fn(
        self,
        params: Params,
        graphs: Any,
        devices: jax.Array,
        keys: jax.Array,
        fixed: Any,
        temperature: float = 1.0,
    ):
        shared = self._shared(params, graphs, devices)

        def one(key: jax.Array):
            out = self._decide(params, shared, graphs, devices, key=key, temperature=temperature)
            return out.actions, self._log_prob(out), out.value

        actions, log_prob, value = jax.lax.map(one, keys)
        if len(self.tasks) < len(TASKS):
            count = keys.shape[0]
            actions = {
                t: actions[t]
                if t in self.tasks
                else jnp.broadcast_to(fixed[t], (count, *fixed[t].shape))
                for t in TASKS
            }
            log_prob, _, value = self._scores(params, graphs, devices, actions)
        return actions, log_prob, value

    def _greedy_fn(self, params: Params, graphs: Any, devices: jax.Array):
        return self.network.apply(params, graphs, devices).actions

    def _greedy_pass_fn(self, params: Params, graphs: Any, devices: jax.Array):
        shared = self._shared(params, graphs, devices)
        out = self._decide(params, shared, graphs, devices)
        return out.actions, shared.move_score, out.logits["placement"], out.logits["fusion"]

    def _score_fn(self, params: Params, graphs: Any, devices: jax.Array, actions: Any):
        return self._scores(params, graphs, devices, actions)

    def _update_fn(
        self,
        params: Params,
        opt_state: optax.OptState,
        graphs: Any,
        devices: jax.Array,
        batch: PPOBatch,
    ):
        def evaluate(p: Params, data: Any):
            return self._scores(p, graphs, devices, data)

        return ppo_update_step(params, opt_state, batch, evaluate, self.optimizer, self.ppo)

    def _grads_fn(self, params: Params, graphs: Any, devices: jax.Array, batch: PPOBatch):
        def evaluate(p: Params, data: Any):
            return self._scores(p, graphs, devices, data)

        return ppo_grads(params, batch, evaluate, self.ppo)

    def _apply_fn(self, params: Params, opt_state: optax.OptState, grads: Params):
        return ppo_apply(params, opt_state, grads, self.optimizer)

    # -- public -------------------------------------------------------------------------

    def _devices(self, env: GraphEnv) -> jax.Array:
        if env.num_devices > self.max_devices:
            raise ValueError(
                f"cluster {env.cluster.name!r} has {env.num_devices} devices, but the policy's "
                f"parameters were built for at most {self.max_devices}"
            )
        return jnp.asarray(env.num_devices, jnp.int32)

    def sample(
        self,
        params: Params,
        env: GraphEnv,
        key: jax.Array,
        count: int,
        *,
        temperature: float = 1.0,
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """``count`` decision sets for ``env``'s graph, as per-position actions.

        Args:
          params: the policy's parameters.
          env: the graph and cluster.
          key: PRNG key.
          count: how many.
          temperature: sample from ``softmax(logits / temperature)`` (see
            :meth:`hlo_go.gonet.GONetwork.decide`); PPO samples at 1.

        Returns:
          ``(actions, log_prob, value)``: task -> ``int32[K, P]`` (fixed tasks already
          replaced), ``float32[K]`` log-probabilities of the learned tasks (``[K, R]``
          per decision with ``ppo.ratio == "decision"``), ``float32[K]``.
        """
        keys = jax.random.split(key, count)
        actions, log_prob, value = self._sample_jit(
            params,
            env.inputs.graphs,
            self._devices(env),
            keys,
            env.fixed_actions,
            temperature=float(temperature),
        )
        return jax.device_get((actions, log_prob, value))

    def weights(self, env: GraphEnv, count: int) -> np.ndarray | None:
        """Which decisions count, for a :class:`~hlo_go.rl.PPOBatch` of ``count`` samples.

        Returns:
          ``float32[count, R]`` with ``ppo.ratio == "decision"`` (0 for padding rows and
          for colocated nodes other than their group's leader), else None.
        """
        if self.ppo.ratio != "decision":
            return None
        rows = decision_weights(env.inputs, self.tasks)
        return np.broadcast_to(rows, (count, rows.size))

    def evaluate(
        self, params: Params, env: GraphEnv, actions: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(log_prob, entropy, value)`` (``float32[B]`` each; ``log_prob`` is
        ``[B, R]`` per decision) of per-position actions."""
        return jax.device_get(
            self._score_jit(params, env.inputs.graphs, self._devices(env), actions)
        )

    def greedy(self, params: Params, env: GraphEnv) -> dict[str, np.ndarray]:
        """The policy's most likely actions (``[1, P]`` per task, fixed tasks replaced)."""
        return self._with_fixed(self._greedy(params, env), env)

    def _with_fixed(self, actions: dict[str, np.ndarray], env: GraphEnv) -> dict[str, np.ndarray]:
        """One decision set's actions as ``[1, P]`` per task, the fixed tasks' replaced."""
        return {
            t: (a if t in self.tasks else env.fixed_actions[t])[None] for t, a in actions.items()
        }

    def greedy_pass(self, params: Params, env: GraphEnv) -> GreedyPass:
        """:meth:`greedy`'s actions, the move head's scores and the placement and fusion
        logits, from one pass of the network (:class:`GreedyPass`)."""
        actions, scores, placement, fusion = jax.device_get(
            self._greedy_pass_jit(params, env.inputs.graphs, self._devices(env))
        )
        return GreedyPass(
            self._with_fixed(actions, env),
            None if scores is None else np.asarray(scores),
            np.asarray(placement) if "placement" in self.tasks else None,
            np.asarray(fusion) if "fusion" in self.tasks else None,
        )

    def move_scores(self, params: Params, env: GraphEnv) -> np.ndarray:
        """The move head's score of each position's colocation group (``float32[P]``).

        Raises:
          ValueError: the policy has no move head (``PolicyConfig.move_head``).
        """
        scores = self.greedy_pass(params, env).move_score
        if scores is None:
            raise ValueError(NO_MOVE_HEAD)
        return scores

    def _greedy(self, params: Params, env: GraphEnv) -> dict[str, np.ndarray]:
        return jax.device_get(self._greedy_jit(params, env.inputs.graphs, self._devices(env)))

    def update(
        self,
        params: Params,
        opt_state: optax.OptState,
        env: GraphEnv,
        batch: PPOBatch,
        key: jax.Array,
    ) -> tuple[Params, optax.OptState, list[LossInfo]]:
        """``ppo.epochs`` passes of minibatch PPO steps on ``batch`` (see
        :func:`hlo_go.rl.ppo.minibatch_epochs`)."""
        from hlo_go.rl.ppo import minibatch_epochs

        graphs, devices = env.inputs.graphs, self._devices(env)

        def step(p: Params, s: optax.OptState, mb: PPOBatch):
            return self._update_jit(p, s, graphs, devices, mb)

        return minibatch_epochs(params, opt_state, batch, step, key, self.ppo)

    def grads(self, params: Params, env: GraphEnv, minibatch: PPOBatch) -> tuple[Params, LossInfo]:
        """The PPO gradient on one minibatch, without applying it (jitted; see
        :func:`hlo_go.rl.ppo.ppo_grads`): ``(grads, info)``. Data-parallel training
        averages these over workers before :meth:`apply_grads`."""
        return self._grads_jit(params, env.inputs.graphs, self._devices(env), minibatch)

    def apply_grads(
        self, params: Params, opt_state: optax.OptState, grads: Params
    ) -> tuple[Params, optax.OptState]:
        """One optimizer step with given gradients (jitted; see
        :func:`hlo_go.rl.ppo.ppo_apply`): ``(params, opt_state)``."""
        return self._apply_jit(params, opt_state, grads)
