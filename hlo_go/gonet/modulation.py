"""Feature modulation: a graph-level embedding sets every task layer's FiLM scale and shift.

The graph embedding pools the GNN's node embeddings ``h_v`` over the ``n`` real
nodes and appends the cluster size ``D`` (one-hot over the ``D_max`` devices the
parameters were built for):

.. math::

    c = \\mathrm{relu}\\Big(W_c \\big[\\tfrac{1}{n}\\textstyle\\sum_v h_v \\,\\|\\,
        \\max_v h_v \\,\\|\\, \\mathrm{onehot}(D - 1)\\big] + b_c\\Big)

and one linear map turns it into a scale and a shift for each sublayer (attention,
feed-forward) of each layer ``l`` of each task ``t``:

.. math::

    [γ^{t,l}_1, β^{t,l}_1, γ^{t,l}_2, β^{t,l}_2] =
        W^{t,l}_γ \\, \\mathrm{relu}(W_f c + b_f) + b^{t,l}_γ

applied as ``u ⊙ (1 + γ) + β`` to the sublayer's normalized input
(:func:`hlo_go.gonet.attention.film`). ``W_γ`` and ``b_γ`` start at zero, so an untrained
network is unmodulated. The task layers share their weights (the multi-task
stack); the per-task FiLM is what lets the same weights behave differently per
task and per graph family ("parameter superposition") at the cost of one small
matrix rather than a copy of the network. ``c`` is also the value head's input.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp


class GraphContext(nn.Module):
    """The graph embedding ``c`` from node embeddings and the cluster size.

    Attributes:
      hidden_size: ``d``, width of ``c``.
      max_devices: ``D_max``, the device count the parameters were built for.
    """

    hidden_size: int
    max_devices: int

    @nn.compact
    def __call__(self, h: jnp.ndarray, mask: jnp.ndarray, num_devices: jnp.ndarray) -> jnp.ndarray:
        """Pools real nodes and encodes the device count.

        Args:
          h: ``float32[N, d]`` node embeddings.
          mask: ``bool[N]`` True for real nodes.
          num_devices: ``int32[]``, ``D`` (1 .. ``D_max``).

        Returns:
          ``float32[d]``.
        """
        weight = mask.astype(h.dtype)[:, None]
        mean = (h * weight).sum(0) / jnp.maximum(weight.sum(), 1.0)
        peak = jnp.where(mask[:, None], h, -jnp.inf).max(0)
        peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
        devices = (jnp.arange(self.max_devices) == num_devices - 1).astype(h.dtype)
        pooled = jnp.concatenate([mean, peak, devices])
        return nn.relu(nn.Dense(self.hidden_size, name="context")(pooled))


class FiLMGenerator(nn.Module):
    """Per-task, per-layer FiLM parameters from the graph embedding.

    Attributes:
      hidden_size: ``d``.
      num_tasks: tasks ``T``.
      num_layers: layers per task stack (at least 1 row is produced).
    """

    hidden_size: int
    num_tasks: int
    num_layers: int

    @nn.compact
    def __call__(self, context: jnp.ndarray) -> jnp.ndarray:
        """Maps ``c`` (``[d]``) to ``float32[T, layers, 4, d]`` (γ₁, β₁, γ₂, β₂)."""
        layers = max(self.num_layers, 1)
        hidden = nn.relu(nn.Dense(self.hidden_size, name="hidden")(context))
        out = nn.Dense(
            self.num_tasks * layers * 4 * self.hidden_size,
            kernel_init=nn.initializers.zeros,
            name="scale_shift",
        )(hidden)
        return out.reshape(self.num_tasks, layers, 4, self.hidden_size)
