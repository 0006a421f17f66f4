"""Output heads: per-node action logits and the graph's value.

For a task's final embeddings ``z_v`` and the graph embedding ``c``
(:mod:`hlo_go.gonet.modulation`):

.. math::

    ℓ_v = W_2 \\, \\mathrm{relu}(W_1 \\mathrm{LN}(z_v) + b_1) + b_2 \\qquad
    V = w_2^\\top \\mathrm{relu}(W_3 c + b_3) + b_4

with ``ℓ_v`` of width ``D_max`` (placement) or ``B`` (priority bins).
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp


class ActionHead(nn.Module):
    """Per-node logits over ``num_actions`` choices.

    Attributes:
      hidden_size: ``d``.
      num_actions: ``A``.
    """

    hidden_size: int
    num_actions: int

    @nn.compact
    def __call__(self, z: jnp.ndarray) -> jnp.ndarray:
        """Maps ``float32[N, d]`` to ``float32[N, A]``."""
        u = nn.relu(nn.Dense(self.hidden_size, name="hidden")(nn.LayerNorm(name="norm")(z)))
        return nn.Dense(self.num_actions, name="logits")(u)


class ValueHead(nn.Module):
    """The value ``V`` (expected return) of a graph, from its embedding ``c``.

    Attributes:
      hidden_size: ``d``.
    """

    hidden_size: int

    @nn.compact
    def __call__(self, context: jnp.ndarray) -> jnp.ndarray:
        """Maps ``float32[d]`` to ``float32[]``."""
        u = nn.relu(nn.Dense(self.hidden_size, name="hidden")(context))
        return nn.Dense(1, name="value")(u)[0]
