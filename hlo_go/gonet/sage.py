"""GraphSAGE over an OpGraph's dataflow edges, with jraph's segment operations.

Node ``v`` starts from its features ``x_v`` (the 41 columns of
:mod:`hlo_go.graph.features`, and with ``PolicyConfig.timeline_features`` the 3 of
:mod:`hlo_go.graph.timeline`) and its opcode id ``o_v``:

.. math::

    h_v^{(0)} = \\mathrm{LN}(W_x x_v + E_{o_v} + b)

and each of the ``K`` layers mixes in its producers ``in(v)`` and consumers
``out(v)`` with the mean aggregator (one per direction) and the max-pool
aggregator (over both), then adds the result to the layer's input:

.. math::

    \\bar h^{in}_v = \\frac{1}{\\max(1, |in(v)|)} \\sum_{u \\in in(v)} h_u, \\qquad
    \\bar h^{out}_v = \\frac{1}{\\max(1, |out(v)|)} \\sum_{w \\in out(v)} h_w

    p_v = \\max\\big(0, \\max_{u \\in in(v) \\cup out(v)} \\mathrm{relu}(W_p h_u + b_p)\\big)

    h_v^{(k+1)} = \\mathrm{LN}\\big(h_v^{(k)} + \\mathrm{relu}(W_k
        [h_v^{(k)} \\,\\|\\, \\bar h^{in}_v \\,\\|\\, \\bar h^{out}_v \\,\\|\\, p_v] + b_k)\\big)

(the ``max(0, ·)`` is exact for non-empty neighborhoods, whose pooled messages are
already ≥ 0, and gives 0 for isolated nodes). Every parameter is shared by all
nodes and graphs (inductive: nothing is per graph or per node id). Edge bytes are
not a separate input: an edge carries its producer's output, already a node
feature (``log_bytes_out``). Padding edges join padding nodes only (the
:func:`~hlo_go.graph.to_graphs_tuple` convention), so padding never reaches a
real node.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import jraph

from hlo_go.gonet.config import PolicyConfig
from hlo_go.graph import NUM_OPCODES


class SageLayer(nn.Module):
    """One GraphSAGE layer: mean (in, out) and max-pool aggregators, residual, layer norm.

    Attributes:
      hidden_size: ``d``, width of ``h``.
    """

    hidden_size: int

    @nn.compact
    def __call__(
        self,
        h: jnp.ndarray,
        edges_in: tuple[jnp.ndarray, jnp.ndarray],
        edges_out: tuple[jnp.ndarray, jnp.ndarray],
        inv_in_degree: jnp.ndarray,
        inv_out_degree: jnp.ndarray,
    ) -> jnp.ndarray:
        """Applies the layer.

        Args:
          h: ``float32[N, d]`` node embeddings.
          edges_in: ``(senders, receivers)``, ``int32[E]`` each, sorted by receiver.
          edges_out: the same edges sorted by sender.
          inv_in_degree: ``float32[N, 1]``, ``1 / max(1, |in(v)|)``.
          inv_out_degree: ``float32[N, 1]``, ``1 / max(1, |out(v)|)``.

        Returns:
          ``float32[N, d]``, the next layer's embeddings.
        """
        n = h.shape[0]
        (src_in, dst_in), (src_out, dst_out) = edges_in, edges_out

        def gather(values: jnp.ndarray, into: jnp.ndarray, ids: jnp.ndarray, reduce):
            return reduce(values[into], ids, n, indices_are_sorted=True)

        mean_in = gather(h, src_in, dst_in, jraph.segment_sum) * inv_in_degree
        mean_out = gather(h, dst_out, src_out, jraph.segment_sum) * inv_out_degree
        pooled = nn.relu(nn.Dense(self.hidden_size, name="pool")(h))
        pool = jnp.maximum(
            gather(pooled, src_in, dst_in, jraph.segment_max),
            gather(pooled, dst_out, src_out, jraph.segment_max),
        )
        pool = jnp.maximum(pool, 0.0)
        mixed = jnp.concatenate([h, mean_in, mean_out, pool], axis=-1)
        update = nn.relu(nn.Dense(self.hidden_size, name="update")(mixed))
        return nn.LayerNorm(name="norm")(h + update)


class SageEncoder(nn.Module):
    """Input embedding and ``K`` GraphSAGE layers over a padded ``jraph.GraphsTuple``.

    Attributes:
      config: supplies ``hidden_size`` and ``gnn_layers``.
    """

    config: PolicyConfig

    @nn.compact
    def __call__(self, graphs: jraph.GraphsTuple) -> jnp.ndarray:
        """Embeds every node.

        Args:
          graphs: the policy input (:class:`hlo_go.gonet.PolicyInput` ``.graphs``):
          edges sorted by receiver, ``edges["sender_order"]`` sorting them by sender.

        Returns:
          ``float32[N, d]`` node embeddings ``h^{(K)}`` (padding rows are finite but
          meaningless).
        """
        d = self.config.hidden_size
        features = graphs.nodes["features"]
        opcode = graphs.nodes["opcode"]
        h = nn.Dense(d, name="features")(features) + nn.Embed(NUM_OPCODES, d, name="opcode")(opcode)
        h = nn.LayerNorm(name="input_norm")(h)
        if self.config.gnn_layers == 0:
            return h
        n = h.shape[0]
        edges_in = (graphs.senders, graphs.receivers)
        order = graphs.edges["sender_order"]
        edges_out = (graphs.senders[order], graphs.receivers[order])
        ones = jnp.ones(graphs.senders.shape, h.dtype)
        in_degree = jraph.segment_sum(ones, edges_in[1], n, indices_are_sorted=True)
        out_degree = jraph.segment_sum(ones, edges_out[0], n, indices_are_sorted=True)
        inv_in = (1.0 / jnp.maximum(in_degree, 1.0))[:, None]
        inv_out = (1.0 / jnp.maximum(out_degree, 1.0))[:, None]
        for k in range(self.config.gnn_layers):
            h = SageLayer(d, name=f"layer_{k}")(h, edges_in, edges_out, inv_in, inv_out)
        return h
