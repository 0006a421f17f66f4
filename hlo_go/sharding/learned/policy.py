"""The sharding policy: the network behind jitted sample / greedy / log-prob functions.

Actions go through :func:`hlo_go.gonet.choose` (masked categorical, inverse-CDF
sampling). The network runs once per call: ``S`` samples are ``S`` draws from the same
logits, and scoring ``B`` action sets is one forward pass plus a gather.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from hlo_go.gonet import MASKED_LOGIT, choose
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig
from hlo_go.sharding.learned.features import ShardingInput, prepare_sharding_input
from hlo_go.sharding.learned.network import ShardingNetwork

INIT_STREAM = 2**31 - 1
"""``fold_in`` stream of the parameter key (training steps use 0, 1, ...)."""


class ShardingPolicy:
    """The sharding network behind jitted sample / greedy / log-prob / value functions.

    Each jitted function compiles once per bucket (:func:`hlo_go.gonet.policy_bucket`)
    and per sample count; :attr:`trace_counts` counts the traces. PPO updates are
    :class:`~hlo_go.sharding.learned.ShardingLearner`'s.

    Args:
      config: network sizes and reward settings.
    """

    def __init__(self, config: ShardingPolicyConfig | None = None) -> None:
        self.config = config or ShardingPolicyConfig()
        self.network = ShardingNetwork(self.config)
        self.traces: dict[str, int] = {}
        self._init_jit = jax.jit(self._init_fn)
        self._sample_jit = jax.jit(self._sample_fn, static_argnums=4)
        self._greedy_jit = jax.jit(self._greedy_fn)
        self._evaluate_jit = jax.jit(self._evaluate_fn)
        self._log_probs_jit = jax.jit(self._log_probs_fn)

    @property
    def trace_counts(self) -> dict[str, int]:
        """Function name -> times it was traced (= compiled) so far."""
        return dict(self.traces)

    def prepare(self, sg: ShardingGraph | ShardingInput) -> ShardingInput:
        """``sg``'s :class:`ShardingInput` (passed through if it already is one)."""
        return sg if isinstance(sg, ShardingInput) else prepare_sharding_input(sg, self.config)

    # -- jitted bodies --------------------------------------------------------------------

    def _count(self, name: str) -> None:
        self.traces[name] = self.traces.get(name, 0) + 1

    def _init_fn(self, key: jax.Array, graphs: Any, devices: jax.Array) -> Params:
        self._count("init")
        return self.network.init(key, graphs, devices)

    def _sample_fn(
        self, params: Params, graphs: Any, devices: jax.Array, key: jax.Array, count: int
    ):
        self._count("sample")
        logits, value = self.network.apply(params, graphs, devices)
        valid, mask = graphs.nodes["valid"], graphs.nodes["mask"]
        uniforms = jax.random.uniform(key, (count, logits.shape[0]), logits.dtype)
        choice = jax.vmap(lambda u: choose(logits, valid, mask, uniform=u))(uniforms)
        log_p = jax.nn.log_softmax(logits, axis=-1)
        rows = jnp.take_along_axis(log_p[None], choice.action[..., None], -1)[..., 0]
        return choice.action, choice.log_prob, rows * mask.astype(rows.dtype), value

    def _greedy_fn(self, params: Params, graphs: Any, devices: jax.Array):
        self._count("greedy")
        logits, _ = self.network.apply(params, graphs, devices)
        return choose(logits, graphs.nodes["valid"], graphs.nodes["mask"]).action

    def _log_probs_fn(self, params: Params, graphs: Any, devices: jax.Array):
        self._count("log_probs")
        logits, _ = self.network.apply(params, graphs, devices)
        return jax.nn.log_softmax(jnp.where(graphs.nodes["valid"], logits, MASKED_LOGIT), -1)

    def _scores(self, params: Params, graphs: Any, devices: jax.Array, actions: jax.Array):
        """``(log_prob[B], entropy[B], value[B])`` of per-position actions ``[B, P]``."""
        logits, value = self.network.apply(params, graphs, devices)
        valid, mask = graphs.nodes["valid"], graphs.nodes["mask"]
        choice = jax.vmap(lambda a: choose(logits, valid, mask, given=a))(actions)
        count = actions.shape[0]
        return choice.log_prob, choice.entropy, jnp.broadcast_to(value, (count,))

    def _row_scores(self, params: Params, graphs: Any, devices: jax.Array, actions: jax.Array):
        """Per-node ``(log_prob, entropy, value)``, ``float32[B, P]`` each (0 on padding)."""
        logits, value = self.network.apply(params, graphs, devices)
        log_p = jax.nn.log_softmax(logits, axis=-1)
        chosen = jnp.take_along_axis(log_p[None], actions[..., None].astype(jnp.int32), -1)
        entropy = -(jnp.exp(log_p) * log_p).sum(-1)
        counted = graphs.nodes["mask"].astype(log_p.dtype)
        shape = actions.shape
        return (
            chosen[..., 0] * counted,
            jnp.broadcast_to(entropy * counted, shape),
            jnp.broadcast_to(value, shape),
        )

    def _evaluate_fn(self, params: Params, graphs: Any, devices: jax.Array, actions: jax.Array):
        self._count("evaluate")
        return self._scores(params, graphs, devices, actions)

    # -- public ---------------------------------------------------------------------------

    @staticmethod
    def _devices(inputs: ShardingInput) -> jax.Array:
        return jnp.asarray(inputs.num_devices, jnp.int32)

    def init(self, key: jax.Array, sg: ShardingGraph | ShardingInput) -> Params:
        """Fresh parameters (their shapes do not depend on the graph).

        Args:
          key: PRNG key.
          sg: any sharding graph (fixes the input widths only).

        Returns:
          The variable dict ``{"params": ...}``.
        """
        inputs = self.prepare(sg)
        return self._init_jit(key, inputs.graphs, self._devices(inputs))

    def sample(
        self, params: Params, sg: ShardingGraph | ShardingInput, key: jax.Array, count: int
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """``count`` choices drawn from the policy.

        Args:
          params: from :meth:`init`.
          sg: the graph.
          key: PRNG key.
          count: samples ``S``.

        Returns:
          ``(choices, log_prob, value)``: ``int64[S, n]`` strategy per node (node-id
          order; with the core action space, eliminated nodes expanded), ``float32[S]``
          their log-probabilities, and the value estimate.
        """
        inputs = self.prepare(sg)
        actions, log_prob, _, value = self._sample_positions(params, inputs, key, count)
        return inputs.choices(actions), np.asarray(log_prob), float(value)

    def _sample_positions(
        self, params: Params, inputs: ShardingInput, key: jax.Array, count: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """``(actions int32[S, P], log_prob [S], per-position log_prob [S, P], value)``."""
        actions, log_prob, rows, value = jax.device_get(
            self._sample_jit(params, inputs.graphs, self._devices(inputs), key, int(count))
        )
        return actions, log_prob, rows, float(value)

    def greedy(self, params: Params, sg: ShardingGraph | ShardingInput) -> np.ndarray:
        """The most likely action of every node, as a full choice (``int64[n]``)."""
        inputs = self.prepare(sg)
        actions = self._greedy_jit(params, inputs.graphs, self._devices(inputs))
        return inputs.choices(jax.device_get(actions))

    def log_probs(self, params: Params, sg: ShardingGraph | ShardingInput) -> np.ndarray:
        """``log π(k | v)`` of every node and strategy, ``float32[n, K]`` (node ids; a
        strategy the node cannot take has a log-probability near ``MASKED_LOGIT``)."""
        inputs = self.prepare(sg)
        per_position = jax.device_get(
            self._log_probs_jit(params, inputs.graphs, self._devices(inputs))
        )
        out = np.empty((inputs.num_nodes, per_position.shape[1]), np.float32)
        out[inputs.order] = per_position[: inputs.num_nodes]
        return out

    def evaluate(
        self, params: Params, sg: ShardingGraph | ShardingInput, choices: np.ndarray
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(log_prob, entropy, value)``, ``float32[S]`` each, of choices ``int[S, n]``.

        With the core action space only core nodes' strategies are scored (the others
        follow from them); a strategy the reductions pruned has probability ~0.
        """
        inputs = self.prepare(sg)
        actions = inputs.to_positions(inputs.action.restrict(np.atleast_2d(choices)))
        return self._evaluate_jit(params, inputs.graphs, self._devices(inputs), actions)

    def log_prob(
        self, params: Params, sg: ShardingGraph | ShardingInput, choices: np.ndarray
    ) -> jax.Array:
        """``log π(choice)`` of each of choices ``int[S, n]`` (``float32[S]``)."""
        return self.evaluate(params, sg, choices)[0]

    def value(self, params: Params, sg: ShardingGraph | ShardingInput) -> float:
        """The value head's estimate for ``sg``."""
        inputs = self.prepare(sg)
        zero = np.zeros((1, inputs.num_nodes), np.int64)
        return float(self.evaluate(params, inputs, zero)[2][0])


_POLICIES: dict[ShardingPolicyConfig, ShardingPolicy] = {}


def policy_for(config: ShardingPolicyConfig | None = None) -> ShardingPolicy:
    """The :class:`ShardingPolicy` of a configuration, shared per process (so its jitted
    functions compile once per bucket)."""
    config = config or ShardingPolicyConfig()
    if config not in _POLICIES:
        _POLICIES[config] = ShardingPolicy(config)
    return _POLICIES[config]
