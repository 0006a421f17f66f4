"""``GOPolicy``: the GO policy network behind a functional, jit-compiled interface.

``params = policy.init(key, graph, num_devices=D_max)`` builds parameters for
clusters of up to ``D_max`` devices: the placement head has ``D_max`` outputs
and a call with ``num_devices=D ≤ D_max`` masks devices ``D .. D_max - 1`` out
(and tells the graph embedding ``D``, see :mod:`hlo_go.gonet.modulation`); a
cluster with more devices needs parameters built for it. ``D`` is a traced
argument, so changing it never recompiles.

Each method takes an :class:`~hlo_go.graph.OpGraph` (or a :class:`PolicyInput`
already made by :meth:`GOPolicy.prepare`, to skip the host-side padding), pads it
to its bucket (:func:`hlo_go.gonet.policy_bucket`) and calls a jitted function,
so a method compiles once per bucket: graphs of 60,000 and 70,000 nodes share one
program. :attr:`GOPolicy.trace_counts` counts the traces, per method.
"""

from __future__ import annotations

import collections
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.gonet.actions import bin_values, fusion_bins, priorities_to_bins
from hlo_go.gonet.config import PolicyConfig
from hlo_go.gonet.inputs import PolicyInput, prepare_input
from hlo_go.gonet.network import GONetwork
from hlo_go.graph import OpGraph

Params = Any
"""A Flax variable dict: ``{"params": ...}``."""


class PolicyEvaluation(NamedTuple):
    """Everything a policy-gradient update needs about given decisions.

    Attributes:
      log_prob: ``float32[]`` log-probability of the decisions (all tasks).
      entropy: ``float32[]`` summed entropy of the action distributions (all tasks).
      value: ``float32[]`` the value head's estimate for the graph.
      task_log_prob: task name -> ``float32[]``, ``log_prob`` by task.
      task_entropy: task name -> ``float32[]``, ``entropy`` by task.
    """

    log_prob: jax.Array
    entropy: jax.Array
    value: jax.Array
    task_log_prob: dict[str, jax.Array]
    task_entropy: dict[str, jax.Array]


def param_count(params: Params) -> int:
    """Number of scalar parameters in ``params``."""
    return int(sum(np.size(leaf) for leaf in jax.tree.leaves(params)))


_DEFAULT_CONFIG = PolicyConfig()


class GOPolicy:
    """The GO policy: GraphSAGE, segment-recurrent attention, FiLM, multi-task heads.

    Args:
      config: sizes and ablation switches.
    """

    def __init__(self, config: PolicyConfig = _DEFAULT_CONFIG) -> None:
        self.config = config
        self._traces: collections.Counter[str] = collections.Counter()
        self._bin_values = bin_values(config.priority_bins)
        self._param_shapes: dict[int, Params] = {}
        self._init_jit = jax.jit(self._init_fn, static_argnums=3)
        self._sample_jit = jax.jit(self._sample_fn)
        self._greedy_jit = jax.jit(self._greedy_fn)
        self._evaluate_jit = jax.jit(self._evaluate_fn)
        self._value_jit = jax.jit(self._value_fn)

    # -- helpers ----------------------------------------------------------------------------

    @property
    def trace_counts(self) -> dict[str, int]:
        """Method name -> times its jitted function was traced (= compiled) so far."""
        return dict(self._traces)

    @staticmethod
    def max_devices(params: Params) -> int:
        """``D_max``, the device count ``params`` were built for."""
        return int(params["params"]["heads_placement"]["logits"]["kernel"].shape[-1])

    def network(self, max_devices: int) -> GONetwork:
        """The Flax module, for parameters built for ``max_devices``."""
        return GONetwork(self.config, max_devices)

    def prepare(self, graph: OpGraph | PolicyInput) -> PolicyInput:
        """``graph`` padded to its bucket and relabeled into topological order."""
        if isinstance(graph, PolicyInput):
            return graph
        return prepare_input(graph, self.config)

    def _devices(self, params: Params, num_devices: int | None) -> jax.Array:
        most = self.max_devices(params)
        count = most if num_devices is None else int(num_devices)
        if not 1 <= count <= most:
            raise ValueError(
                f"num_devices={count}, but these parameters were built for 1..{most} devices "
                "(init with a larger num_devices for bigger clusters)"
            )
        return jnp.asarray(count, jnp.int32)

    def _decisions(self, inputs: PolicyInput, actions: dict[str, jax.Array]) -> Decisions:
        placement, schedule, fusion = jax.device_get(
            (actions["placement"], actions["scheduling"], actions["fusion"])
        )
        return Decisions(
            inputs.to_nodes(placement).astype(np.int32),
            self._bin_values[inputs.to_nodes(schedule)],
            self._bin_values[inputs.to_nodes(fusion)],
        )

    def _actions(self, inputs: PolicyInput, decisions: Decisions) -> dict[str, np.ndarray]:
        bins = self.config.priority_bins
        return {
            "placement": inputs.to_positions(np.asarray(decisions.placement, np.int32)),
            "scheduling": inputs.to_positions(
                priorities_to_bins(decisions.schedule_priority, bins)
            ),
            "fusion": inputs.to_positions(fusion_bins(decisions.fusion_priority, bins)),
        }

    # -- jitted bodies (the Python runs once per trace) ---------------------------------------

    def _init_fn(self, key: jax.Array, graphs: Any, num_devices: jax.Array, max_devices: int):
        self._traces["init"] += 1
        return self.network(max_devices).init(key, graphs, num_devices)

    def _apply(self, params: Params, graphs: Any, num_devices: jax.Array, **kwargs: Any):
        return self.network(self.max_devices(params)).apply(params, graphs, num_devices, **kwargs)

    def _sample_fn(self, params: Params, graphs: Any, num_devices: jax.Array, key: jax.Array):
        self._traces["sample"] += 1
        out = self._apply(params, graphs, num_devices, key=key)
        return out.actions, sum(out.log_prob.values())

    def _greedy_fn(self, params: Params, graphs: Any, num_devices: jax.Array):
        self._traces["greedy"] += 1
        return self._apply(params, graphs, num_devices).actions

    def _evaluate_fn(self, params: Params, graphs: Any, num_devices: jax.Array, actions: Any):
        self._traces["evaluate"] += 1
        out = self._apply(params, graphs, num_devices, actions=actions)
        return PolicyEvaluation(
            sum(out.log_prob.values()),
            sum(out.entropy.values()),
            out.value,
            out.log_prob,
            out.entropy,
        )

    def _value_fn(self, params: Params, graphs: Any, num_devices: jax.Array):
        self._traces["value"] += 1
        network = self.network(self.max_devices(params))
        return network.apply(params, graphs, num_devices, method=GONetwork.value)

    # -- public methods ---------------------------------------------------------------------

    def init(self, key: jax.Array, graph: OpGraph | PolicyInput, num_devices: int = 8) -> Params:
        """Fresh parameters for clusters of up to ``num_devices`` devices.

        Args:
          key: PRNG key.
          graph: any graph (parameters do not depend on its size: it fixes shapes only).
          num_devices: ``D_max``, the placement head's width.

        Returns:
          The variable dict ``{"params": ...}``.
        """
        if num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices}")
        inputs = self.prepare(graph)
        return self._init_jit(key, inputs.graphs, jnp.asarray(num_devices, jnp.int32), num_devices)

    def param_shapes(self, graph: OpGraph | PolicyInput, num_devices: int = 8) -> Params:
        """The shapes and dtypes of :meth:`init`'s parameters (``jax.ShapeDtypeStruct``
        leaves), traced without compiling, once per ``num_devices``: the template a
        checkpoint is restored into.

        Args:
          graph: any graph (the parameters' shapes do not depend on it).
          num_devices: ``D_max``, the placement head's width.
        """
        if num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices}")
        if num_devices not in self._param_shapes:
            inputs = self.prepare(graph)
            self._param_shapes[num_devices] = jax.eval_shape(
                functools.partial(self._init_fn, max_devices=num_devices),
                jax.random.key(0),
                inputs.graphs,
                jnp.asarray(num_devices, jnp.int32),
            )
        return self._param_shapes[num_devices]

    def sample(
        self,
        params: Params,
        graph: OpGraph | PolicyInput,
        key: jax.Array,
        num_devices: int | None = None,
    ) -> tuple[Decisions, jax.Array]:
        """Samples decisions for every node.

        Args:
          params: from :meth:`init`.
          graph: the graph to decide for.
          key: PRNG key.
          num_devices: ``D`` (default: ``D_max``); placements use devices ``0 .. D-1``.

        Returns:
          ``(decisions, log_prob)``: decisions that pass ``decisions.validate(graph, D)``
          (colocation groups share a device) and their log-probability (``float32[]``).
        """
        inputs = self.prepare(graph)
        devices = self._devices(params, num_devices)
        actions, log_prob = self._sample_jit(params, inputs.graphs, devices, key)
        return self._decisions(inputs, actions), log_prob

    def greedy(
        self, params: Params, graph: OpGraph | PolicyInput, num_devices: int | None = None
    ) -> Decisions:
        """The most likely action of every task (each task conditioned on the previous ones').

        Args:
          params: from :meth:`init`.
          graph: the graph to decide for.
          num_devices: ``D`` (default: ``D_max``).

        Returns:
          Decisions valid for ``graph`` and ``D`` devices.
        """
        inputs = self.prepare(graph)
        actions = self._greedy_jit(params, inputs.graphs, self._devices(params, num_devices))
        return self._decisions(inputs, actions)

    def evaluate(
        self,
        params: Params,
        graph: OpGraph | PolicyInput,
        decisions: Decisions,
        num_devices: int | None = None,
    ) -> PolicyEvaluation:
        """Log-probability, entropy and value for given decisions (differentiable in ``params``).

        Priorities are read as their nearest bin (exact for the policy's own
        decisions); a colocation group is scored by its representative's placement
        (the node naming the group), which :meth:`sample` gives every member.

        Args:
          params: from :meth:`init`.
          graph: the graph the decisions are for.
          decisions: placement, schedule and fusion priorities of every node.
          num_devices: ``D`` (default: ``D_max``).

        Returns:
          The :class:`PolicyEvaluation`.
        """
        inputs = self.prepare(graph)
        actions = self._actions(inputs, decisions)
        return self._evaluate_jit(
            params, inputs.graphs, self._devices(params, num_devices), actions
        )

    def log_prob(
        self,
        params: Params,
        graph: OpGraph | PolicyInput,
        decisions: Decisions,
        num_devices: int | None = None,
    ) -> jax.Array:
        """``log π(decisions | graph, D)`` (``float32[]``; see :meth:`evaluate`)."""
        return self.evaluate(params, graph, decisions, num_devices).log_prob

    def value(
        self, params: Params, graph: OpGraph | PolicyInput, num_devices: int | None = None
    ) -> jax.Array:
        """The value head's estimate for ``graph`` on ``D`` devices (``float32[]``)."""
        inputs = self.prepare(graph)
        return self._value_jit(params, inputs.graphs, self._devices(params, num_devices))
