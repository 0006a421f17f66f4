"""The learned kernel cost model's network: GraphSAGE-style message passing over a
kernel's members, pooling, an MLP, on top of the roofline.

For a kernel with member embeddings ``h_v`` (from its node features and an opcode
embedding), each of ``L`` layers passes messages along the kernel's edges (both
directions, the edge features saying which and how many bytes):

.. math::

    m_{uv} = \\mathrm{relu}(W_m [h_u \\,\\|\\, e_{uv}] + b_m), \\qquad
    h_v \\leftarrow \\mathrm{LN}\\big(h_v + \\mathrm{relu}(W [h_v \\,\\|\\,
        \\mathrm{mean}_u\\, m_{uv} \\,\\|\\, \\max_u m_{uv}] + b)\\big)

then the members are pooled (mean and max) and, with the kernel's global features,
fed to an MLP whose output ``r`` corrects the roofline: the predicted log seconds are
``log t_roofline + r``. A model that has learned nothing predicts the roofline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from hlo_go.graph import NUM_OPCODES


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the network.

    Attributes:
      hidden: width of member embeddings and messages.
      layers: message-passing layers.
      opcode_embedding: width of the opcode embedding (projected to ``hidden``).
      mlp: width of the readout MLP's first layer (the second is half).
    """

    hidden: int = 64
    layers: int = 3
    opcode_embedding: int = 16
    mlp: int = 128

    def as_dict(self) -> dict[str, int]:
        """JSON-able form."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ModelConfig:
        """The inverse of :meth:`as_dict` (unknown keys refused by ``TypeError``)."""
        return ModelConfig(**{k: int(v) for k, v in data.items()})


class _Layer(nn.Module):
    hidden: int

    @nn.compact
    def __call__(
        self,
        h: jnp.ndarray,
        edges: jnp.ndarray,
        senders: jnp.ndarray,
        receivers: jnp.ndarray,
        inv_degree: jnp.ndarray,
    ) -> jnp.ndarray:
        n = h.shape[0]
        messages = nn.relu(
            nn.Dense(self.hidden, name="message")(jnp.concatenate([h[senders], edges], axis=-1))
        )
        mean = jraph.segment_sum(messages, receivers, n) * inv_degree
        top = jnp.maximum(jraph.segment_max(messages, receivers, n), 0.0)
        update = nn.relu(
            nn.Dense(self.hidden, name="update")(jnp.concatenate([h, mean, top], axis=-1))
        )
        return nn.LayerNorm(name="norm")(h + update)


class KernelNet(nn.Module):
    """Predicts log seconds per kernel from a padded batch
    (:func:`hlo_go.sim.learned.features.pad_batch`).

    Attributes:
      config: the sizes.
    """

    config: ModelConfig

    @nn.compact
    def __call__(self, graphs: jraph.GraphsTuple) -> jnp.ndarray:
        """Applies the network.

        Args:
          graphs: the padded batch.

        Returns:
          ``float32[n_graph]`` predicted log seconds (padding graphs' values are
          meaningless).
        """
        c = self.config
        features = graphs.nodes["features"]
        n = features.shape[0]
        g = graphs.n_node.shape[0]
        opcode = nn.Embed(NUM_OPCODES, c.opcode_embedding, name="opcode")(graphs.nodes["opcode"])
        h = nn.Dense(c.hidden, name="input")(jnp.concatenate([features, opcode], axis=-1))
        h = nn.LayerNorm(name="input_norm")(nn.relu(h))
        degree = jraph.segment_sum(jnp.ones(graphs.receivers.shape, h.dtype), graphs.receivers, n)
        inv_degree = (1.0 / jnp.maximum(degree, 1.0))[:, None]
        for k in range(c.layers):
            h = _Layer(c.hidden, name=f"layer_{k}")(
                h, graphs.edges, graphs.senders, graphs.receivers, inv_degree
            )
        node_graph = jnp.repeat(jnp.arange(g), graphs.n_node, total_repeat_length=n)
        count = jnp.maximum(graphs.n_node, 1).astype(h.dtype)[:, None]
        mean = jraph.segment_sum(h, node_graph, g) / count
        top = jraph.segment_max(h, node_graph, g)
        top = jnp.where(graphs.n_node[:, None] > 0, top, 0.0)
        glob = nn.LayerNorm(name="global_norm")(
            nn.Dense(c.hidden, name="global")(graphs.globals["features"])
        )
        x = jnp.concatenate([mean, top, glob], axis=-1)
        x = nn.relu(nn.Dense(c.mlp, name="mlp_0")(x))
        x = nn.relu(nn.Dense(c.mlp // 2, name="mlp_1")(x))
        residual = nn.Dense(1, name="out", kernel_init=nn.initializers.zeros)(x)[:, 0]
        return graphs.globals["base"] + residual


def init_params(config: ModelConfig, example: jraph.GraphsTuple, *, seed: int = 0) -> Any:
    """Fresh parameters of a :class:`KernelNet` for batches shaped like ``example``."""
    return KernelNet(config).init(jax.random.PRNGKey(seed), example)["params"]
