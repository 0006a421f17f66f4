"""The sharding network: the GO network with a pointer head over sharding strategies.

It reuses the GO modules of :mod:`hlo_go.gonet` by import:

* encoder: :class:`~hlo_go.gonet.SageEncoder` (GraphSAGE) over the OpGraph's features
  plus a few per-node strategy summaries (:mod:`~hlo_go.sharding.learned.features`);
* graph embedding :class:`~hlo_go.gonet.GraphContext` (cluster size = mesh size) and
  :class:`~hlo_go.gonet.ValueHead`;
* one :class:`~hlo_go.gonet.FiLMGenerator` row modulating the
  :class:`~hlo_go.gonet.SegmentRecurrentStack` (Transformer-XL over the topological
  order), as for one GO task;
* a **pointer head**: strategy ``k`` of node ``v`` is described by features ``s_{v,k}``
  (:func:`~hlo_go.sharding.learned.strategy_features`) and scored by a small MLP of the
  node's embedding and the strategy's, ``ℓ_{v,k} = w^⊤ relu(W_h relu(W_z LN(z_v) + W_s
  s_{v,k})) + b + ρ · prior_{v,k}``, so the same weights score strategies of any graph
  (a fixed 32-way linear head would not: slot ``k`` means different things on different
  nodes); ``ℓ_{v,k}`` is masked to :data:`~hlo_go.gonet.MASKED_LOGIT` for ``k ≥ K_v``
  and for forbidden (infinite-cost) strategies.

The head is not autoregressive (as in GO, every node's strategy is drawn independently
given the embeddings), so the network runs **once** per step.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import jraph

from hlo_go.gonet import (
    MASKED_LOGIT,
    FeedForwardStack,
    FiLMGenerator,
    GraphContext,
    SageEncoder,
    SegmentRecurrentStack,
    ValueHead,
)
from hlo_go.sharding.learned.config import ShardingPolicyConfig


class ShardingNetwork(nn.Module):
    """GraphSAGE, FiLM-modulated segment-recurrent attention, pointer head, value head.

    Attributes:
      config: the policy configuration.
    """

    config: ShardingPolicyConfig

    @nn.compact
    def __call__(
        self, graphs: jraph.GraphsTuple, num_devices: jnp.ndarray
    ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Strategy logits of every node, and the graph's value.

        Args:
          graphs: :attr:`ShardingInput.graphs`.
          num_devices: ``int32[]``, the mesh's device count.

        Returns:
          ``(logits, value)``: ``float32[P, K]`` with invalid strategies at
          :data:`~hlo_go.gonet.MASKED_LOGIT`, and ``float32[]``.
        """
        cfg = self.config.network
        d = cfg.hidden_size
        mask = graphs.nodes["mask"]
        h = SageEncoder(cfg, name="encoder")(graphs)
        context = GraphContext(d, self.config.max_devices, name="context")(h, mask, num_devices)
        value = ValueHead(d, name="value_head")(context)
        layers = max(cfg.attention_layers, 1)
        if cfg.modulation:
            modulation = FiLMGenerator(d, 1, cfg.attention_layers, name="film")(context)[0]
        else:
            modulation = jnp.zeros((layers, 4, d), h.dtype)
        stack = SegmentRecurrentStack if cfg.attention else FeedForwardStack
        z = stack(cfg, name="stack")(h, mask, modulation)
        query = nn.Dense(d, name="node_query")(nn.LayerNorm(name="head_norm")(z))
        keys = nn.Dense(d, name="strategy_embed")(graphs.nodes["strategy"])
        u = nn.relu(query[:, None, :] + keys)
        u = nn.relu(nn.Dense(d, name="head_hidden")(u))
        logits = nn.Dense(1, name="head_logit")(u)[..., 0]
        scale = self.param(
            "prior_scale", nn.initializers.constant(self.config.prior_bias), (), jnp.float32
        )
        logits = logits + scale * graphs.nodes["prior"]
        return jnp.where(graphs.nodes["valid"], logits, MASKED_LOGIT), value
