"""``GONetwork``: the whole GO policy network as one Flax module.

For a graph whose nodes are in topological order, with ``D`` devices and
parameters built for ``D_max ≥ D``, tasks ``t_1, t_2, t_3`` (``task_order``;
default placement → scheduling → fusion):

.. math::

    h = \\mathrm{GraphSAGE}(x, o)                        \\quad \\text{node embeddings (sage)}

    c = \\mathrm{Context}(h, D), \\; V = \\mathrm{Value}(c)  \\quad \\text{graph embedding, value}

    (γ, β)^t = \\mathrm{FiLM}_t(c)                       \\quad \\text{per-task modulation}

    z^t = \\mathrm{XL}(x^t + τ_t;\\, (γ, β)^t)           \\quad \\text{shared attention stack}

    a^t_v \\sim \\mathrm{softmax}(\\mathrm{Head}_t(z^t_v) + \\mathrm{mask})  \\quad \\text{actions}

    x^{t_1} = h, \\; x^{t_{k+1}} = z^{t_k} + E_{t_k}[a^{t_k}]  \\quad \\text{task recurrence}

    m_g = \\mathrm{mean}_{v \\in g} \\mathrm{Move}(h_v + z^{t_1}_v)  \\quad \\text{move score of group } g

``E_t`` embeds task ``t``'s actions (device ids, or priority bins), ``τ_t`` is a
learned task embedding, and ``XL`` is the segment-recurrent Transformer-XL stack
of :mod:`hlo_go.gonet.attention`, one set of weights for every task. Placement
is sampled once per colocation group (:mod:`hlo_go.gonet.actions`).

Ablations (:class:`~hlo_go.gonet.PolicyConfig`): ``attention=False`` replaces
``XL`` by position-wise feed-forward blocks; ``modulation=False`` fixes
``γ = β = 0``; ``task_recurrence=False`` gives every task ``x^t = h``;
``gnn_layers`` sets the GraphSAGE depth. The move head (``move_head=True``) scores each
colocation group for one move to another device (:mod:`hlo_go.rl.moves`); it is read
once per graph and changes no action.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from hlo_go.gonet.actions import Choice, choose, choose_colocated
from hlo_go.gonet.attention import FeedForwardStack, SegmentRecurrentStack
from hlo_go.gonet.config import PolicyConfig
from hlo_go.gonet.heads import ActionHead, ValueHead
from hlo_go.gonet.modulation import FiLMGenerator, GraphContext
from hlo_go.gonet.sage import SageEncoder


class NetworkOutput(NamedTuple):
    """What one pass of :class:`GONetwork` decides and scores.

    Attributes:
      actions: task name -> ``int32[N]`` action per position (device id for
        placement, bin for scheduling and fusion); padding rows are meaningless.
      log_prob: task name -> ``float32[]`` log-probability of its actions.
      entropy: task name -> ``float32[]`` summed entropy of its distributions.
      value: ``float32[]`` the value head's estimate.
      row_log_prob: task name -> ``float32[N]`` each decision's log-probability (0 for
        rows that do not count: padding, and colocated rows other than their group's).
      logits: task name -> ``float32[N, A]`` each row's logits, as the choice was made
        from them (prior added, tempered; placement chooses from its group's mean row).
    """

    actions: dict[str, jnp.ndarray]
    log_prob: dict[str, jnp.ndarray]
    entropy: dict[str, jnp.ndarray]
    value: jnp.ndarray
    row_log_prob: dict[str, jnp.ndarray]
    logits: dict[str, jnp.ndarray]


class SharedPass(NamedTuple):
    """The part of a pass that every decision set for one graph shares.

    Attributes:
      embedding: ``float32[N, d]`` node embeddings ``h``.
      value: ``float32[]`` the value head's estimate.
      modulation: ``float32[tasks, layers, 4, d]`` FiLM scales and shifts per task.
      first_z: ``float32[N, d]`` the first task's stack output (its input
        ``h + τ_1`` depends on no action).
      first_logits: ``float32[N, A]`` the first task's logits.
      move_score: ``float32[N]`` the move head's score of each row's colocation group
        (the same on every member; higher: moving the group to another device is
        expected to gain more), or None without a move head.
    """

    embedding: jnp.ndarray
    value: jnp.ndarray
    modulation: jnp.ndarray
    first_z: jnp.ndarray
    first_logits: jnp.ndarray
    move_score: jnp.ndarray | None = None


def with_prior(logits: jnp.ndarray, graphs: jraph.GraphsTuple, task: str) -> jnp.ndarray:
    """``logits`` (``float32[N, A]``) plus the graph's prior for ``task``, if it has one.

    A prior (:mod:`hlo_go.rl.prior`) is part of the input, not of the parameters:
    ``nodes["prior_<task>"]`` (``int32[N]``) names each node's prior action, and
    ``nodes["prior_weight"]`` (``float32[N]``, 0 on padding) is the logit added to it.
    The policy then learns a residual over the prior's decisions.
    """
    if f"prior_{task}" not in graphs.nodes:
        return logits
    prior = jax.nn.one_hot(graphs.nodes[f"prior_{task}"], logits.shape[-1], dtype=logits.dtype)
    return logits + graphs.nodes["prior_weight"][:, None].astype(logits.dtype) * prior


class GONetwork(nn.Module):
    """Encoder, graph context, shared task stack, heads and value head.

    Attributes:
      config: the policy configuration.
      max_devices: ``D_max``, the width of the placement head.
    """

    config: PolicyConfig
    max_devices: int

    def setup(self) -> None:
        cfg = self.config
        d = cfg.hidden_size
        num_tasks = len(cfg.task_order)
        self.encoder = SageEncoder(cfg)
        self.context = GraphContext(d, self.max_devices)
        self.value_head = ValueHead(d)
        if cfg.modulation:
            self.film = FiLMGenerator(d, num_tasks, cfg.attention_layers)
        stack = SegmentRecurrentStack if cfg.attention else FeedForwardStack
        self.stack = stack(cfg)
        self.task_embedding = self.param(
            "task_embedding", nn.initializers.normal(0.02), (num_tasks, d)
        )
        sizes = {
            "placement": self.max_devices,
            "scheduling": cfg.priority_bins,
            "fusion": cfg.priority_bins,
        }
        self.heads = {task: ActionHead(d, sizes[task]) for task in cfg.task_order}
        self.action_embeddings = {
            task: nn.Embed(sizes[task], d, embedding_init=nn.initializers.normal(0.02))
            for task in cfg.task_order
        }
        if cfg.move_head:
            self.move_head = ActionHead(d, 1)

    def encode(
        self, graphs: jraph.GraphsTuple, num_devices: jnp.ndarray
    ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Node embeddings ``h`` (``[N, d]``) and graph embedding ``c`` (``[d]``)."""
        h = self.encoder(graphs)
        return h, self.context(h, graphs.nodes["mask"], num_devices)

    def value(self, graphs: jraph.GraphsTuple, num_devices: jnp.ndarray) -> jnp.ndarray:
        """The value head's estimate ``V`` (``float32[]``)."""
        _, context = self.encode(graphs, num_devices)
        return self.value_head(context)

    def shared(self, graphs: jraph.GraphsTuple, num_devices: jnp.ndarray) -> SharedPass:
        """Everything that does not depend on the actions: computed once per graph.

        Decision sets for one graph (``K`` samples, or a PPO minibatch) differ only
        from the first task's choice on: the encoder, value, modulation and the first
        task's stack and logits are the same for all of them.

        Args:
          graphs: the policy input.
          num_devices: ``int32[]``, ``D``.

        Returns:
          The :class:`SharedPass`.
        """
        cfg = self.config
        h, context = self.encode(graphs, num_devices)
        layers = max(cfg.attention_layers, 1)
        if cfg.modulation:
            modulation = self.film(context)
        else:
            modulation = jnp.zeros((len(cfg.task_order), layers, 4, cfg.hidden_size), h.dtype)
        first = cfg.task_order[0]
        z = self.stack(h + self.task_embedding[0], graphs.nodes["mask"], modulation[0])
        move = None
        if cfg.move_head:
            group = graphs.nodes["colocation_group"]
            per_row = self.move_head(h + z)[:, 0]
            move = jraph.segment_mean(per_row, group, h.shape[0])[group]
        return SharedPass(h, self.value_head(context), modulation, z, self.heads[first](z), move)

    def decide(
        self,
        shared: SharedPass,
        graphs: jraph.GraphsTuple,
        num_devices: jnp.ndarray,
        *,
        key: jax.Array | None = None,
        actions: dict[str, jnp.ndarray] | None = None,
        temperature: float = 1.0,
    ) -> NetworkOutput:
        """Decides every task in order, from the graph's :meth:`shared` pass.

        Args:
          shared: ``shared(graphs, num_devices)``.
          graphs: the policy input (:class:`hlo_go.gonet.PolicyInput` ``.graphs``).
          num_devices: ``int32[]``, ``D`` (1 .. ``max_devices``).
          key: sample the actions with this PRNG key.
          actions: score these actions (task name -> ``int32[N]``) instead. With
            neither ``key`` nor ``actions``, each task takes its most likely action.
          temperature: with ``key``, sample from ``softmax(logits / temperature)`` (below
            1: fewer decisions away from the most likely ones); log-probabilities and
            entropies are then the tempered distribution's. Training samples at 1.

        Returns:
          The :class:`NetworkOutput`.
        """
        cfg = self.config
        mask = graphs.nodes["mask"]
        group = graphs.nodes["colocation_group"]
        h = shared.embedding
        num_tasks = len(cfg.task_order)
        n = h.shape[0]
        uniforms = (
            jax.random.uniform(key, (num_tasks, n), h.dtype)
            if key is not None
            else [None] * num_tasks
        )
        device_valid = jnp.arange(self.max_devices) < num_devices
        bin_valid = jnp.ones((cfg.priority_bins,), bool)

        out_actions: dict[str, jnp.ndarray] = {}
        log_prob: dict[str, jnp.ndarray] = {}
        entropy: dict[str, jnp.ndarray] = {}
        row_log_prob: dict[str, jnp.ndarray] = {}
        task_logits: dict[str, jnp.ndarray] = {}
        z, logits = shared.first_z, shared.first_logits  # the first task's, precomputed
        x = h  # the next task's stack input
        for k, task in enumerate(cfg.task_order):
            if k > 0:
                z = self.stack(x + self.task_embedding[k], mask, shared.modulation[k])
                logits = self.heads[task](z)
            logits = with_prior(logits, graphs, task)
            if key is not None and temperature != 1.0:
                logits = logits / temperature
            given = None if actions is None else actions[task]
            choice: Choice
            if task == "placement":
                choice = choose_colocated(
                    logits, device_valid, group, mask, uniform=uniforms[k], given=given
                )
            else:
                choice = choose(logits, bin_valid, mask, uniform=uniforms[k], given=given)
            out_actions[task] = choice.action
            log_prob[task] = choice.log_prob
            entropy[task] = choice.entropy
            row_log_prob[task] = choice.row_log_prob
            task_logits[task] = logits
            if k + 1 < num_tasks:
                recur = cfg.task_recurrence
                x = z + self.action_embeddings[task](choice.action) if recur else h
        return NetworkOutput(
            out_actions, log_prob, entropy, shared.value, row_log_prob, task_logits
        )

    def __call__(
        self,
        graphs: jraph.GraphsTuple,
        num_devices: jnp.ndarray,
        *,
        key: jax.Array | None = None,
        actions: dict[str, jnp.ndarray] | None = None,
    ) -> NetworkOutput:
        """Decides every task in order: :meth:`decide` (same arguments, and the same
        :class:`NetworkOutput`) after :meth:`shared`."""
        shared = self.shared(graphs, num_devices)
        return self.decide(shared, graphs, num_devices, key=key, actions=actions)
