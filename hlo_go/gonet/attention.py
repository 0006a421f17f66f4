"""Segment-level recurrent attention over nodes in topological order (Transformer-XL).

Nodes, in topological order, are cut into segments of ``L`` nodes. A layer lets
each node of segment ``s`` attend to the nodes of its own segment and to a memory
of the ``M = mL`` nodes before it (the layer's inputs for segments ``s-m .. s-1``,
with stopped gradient), so cost and memory grow linearly with the node count.
With ``x_i`` the layer input of query node ``i`` and ``\\tilde x_j`` that of key node
``j`` (memory, then the segment; ``K = M + L`` keys), heads ``n = 1..h`` of width
``e = d / h``, and ``(γ, β)`` the layer's FiLM modulation
(:mod:`hlo_go.gonet.modulation`):

.. math::

    u = \\mathrm{LN}_1(\\tilde x) \\odot (1 + γ_1) + β_1, \\quad
    q_i = W_q u_i, \\; k_j = W_k u_j, \\; v_j = W_v u_j

    a_{ij} = \\frac{1}{\\sqrt e}\\Big[(q_i + c_u)^\\top k_j + (q_i + c_v)^\\top W_r R_{δ(i, j)}\\Big],
    \\qquad δ(i, j) = \\text{(position of } i) - \\text{(position of } j)

    y_i = x_i + W_o \\sum_j \\mathrm{softmax}_j(a_{ij} + \\mathrm{mask}_{ij}) \\, v_j

    z_i = y_i + W_2 \\, \\mathrm{gelu}\\big(W_1 (\\mathrm{LN}_2(y_i) \\odot (1 + γ_2) + β_2)\\big)

(per head; heads concatenated before ``W_o``). ``R_δ`` is the sinusoidal encoding
of the relative distance ``δ``, ``c_u``, ``c_v`` the two learned global biases of
Transformer-XL, and the mask removes padding and not-yet-computed memory keys and,
when ``causal`` (the default), keys after the query (``δ < 0``). Padding nodes sit
after every real node and are masked as keys, so they never reach a real query.

:class:`SegmentRecurrentStack` runs a stack of such layers with ``jax.lax.scan``
(``flax.linen.scan``) over blocks of ``G`` segments; the carry is each layer's
memory (the keys and values of its last ``M`` inputs), which is what makes the
recurrence: segment ``s`` reads layer ``l``'s inputs of segments ``s-m .. s-1``
whatever block they were computed in. Inside a block the ``G`` segments are
computed together, which only changes how the work is batched, not the result
(a test checks ``G = 1`` against ``G = 8``). Time and memory are linear in the
node count: ``O(N (M + L) d)`` for the scores, one block's worth live at a time.
The scan step is rematerialized (``flax.linen.remat``): the backward pass recomputes a
block's scores instead of stacking every block's, which cuts the gradient's time and
its memory.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from hlo_go.gonet.config import PolicyConfig

_NEG = -1e9  # added to masked scores: finite, so fully masked (padding) rows stay finite


def relative_encoding(distances: np.ndarray, width: int) -> np.ndarray:
    """Sinusoidal encodings of relative distances (Transformer-XL's ``R``).

    Args:
      distances: ``[P]`` signed distances.
      width: encoding width ``d`` (even).

    Returns:
      ``float32[P, d]``: ``[sin(δ ω_0) .. sin(δ ω_{d/2-1}), cos(δ ω_0) ..]`` with
      ``ω_k = 10000^{-2k/d}``.
    """
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, width, 2, dtype=np.float64) / width))
    angles = np.asarray(distances, np.float64)[:, None] * inv_freq[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1).astype(np.float32)


def rel_shift(scores: jnp.ndarray, num_keys: int) -> jnp.ndarray:
    """Aligns position scores to keys: ``out[..., i, j] = scores[..., i, L - 1 - i + j]``.

    ``scores[..., i, p]`` is query ``i``'s score for distance ``δ_p = K - 1 - p``;
    query ``i`` sits at stream position ``M + i`` and key ``j`` at ``j``, so it needs
    ``δ = M + i - j``, i.e. ``p = L - 1 - i + j``. Done with slices and reshapes only:
    row ``i`` of the result starts ``(L - 1) + i (P - 1)`` into the flattened scores.
    With ``P = K + L - 1`` (distances ``K - 1 .. -(L - 1)``) every entry is exact;
    with ``P = K + 1`` (distances ``K - 1 .. -1``, enough for causal attention) the
    entries with ``δ < 0`` hold other rows' scores and must be masked.

    Args:
      scores: ``[..., L, P]`` with ``K + 1 ≤ P ≤ K + L - 1``.
      num_keys: ``K``.

    Returns:
      ``[..., L, K]``.
    """
    *lead, length, width = scores.shape
    flat = scores.reshape(*lead, length * width)
    flat = flat[..., length - 1 : length - 1 + length * (width - 1)]
    return flat.reshape(*lead, length, width - 1)[..., :num_keys]


def film(u: jnp.ndarray, scale: jnp.ndarray, shift: jnp.ndarray) -> jnp.ndarray:
    """Feature-wise linear modulation ``u ⊙ (1 + scale) + shift``."""
    return u * (1.0 + scale) + shift


class FeedForward(nn.Module):
    """The position-wise block ``z = y + W_2 gelu(W_1 FiLM(LN(y)))``.

    Attributes:
      hidden_size: ``d``.
      multiplier: inner width ``multiplier * d``.
    """

    hidden_size: int
    multiplier: int

    @nn.compact
    def __call__(self, y: jnp.ndarray, scale: jnp.ndarray, shift: jnp.ndarray) -> jnp.ndarray:
        """Applies the block to ``y`` (``[..., d]``) with FiLM ``scale``, ``shift`` (``[d]``)."""
        u = film(nn.LayerNorm(name="norm")(y), scale, shift)
        u = nn.gelu(nn.Dense(self.multiplier * self.hidden_size, name="inner")(u))
        return y + nn.Dense(self.hidden_size, name="outer")(u)


class RelativeAttentionLayer(nn.Module):
    """One Transformer-XL layer on a block of ``G`` segments and their memory.

    The memory is kept as the keys and values of the ``M`` nodes before the block
    (``W_k u``, ``W_v u`` of the layer's inputs there), which is what attending to
    those inputs needs, projected once rather than once per segment that reads them.

    Attributes:
      config: sizes (``hidden_size``, ``num_heads``, ``segment_length``,
        ``memory_segments``, ``causal``, ``ffn_multiplier``).
    """

    config: PolicyConfig

    @nn.compact
    def __call__(
        self,
        x: jnp.ndarray,
        x_mask: jnp.ndarray,
        memory: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray],
        modulation: jnp.ndarray,
    ) -> tuple[jnp.ndarray, tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]]:
        """Applies the layer.

        Args:
          x: ``float32[G, L, d]`` layer inputs of ``G`` consecutive segments.
          x_mask: ``bool[G, L]`` True for real nodes.
          memory: ``(keys, values, mask)`` of the ``M`` nodes before the block:
            ``float32[h, M, e]`` twice, and ``bool[M]`` True where a real node's.
          modulation: ``float32[4, d]``: FiLM scale and shift of the attention
            sublayer, then of the feed-forward sublayer.

        Returns:
          ``(y, next_memory)``: the outputs ``float32[G, L, d]`` and the memory of
          the next block (the last ``M`` nodes of memory + block, gradient stopped).
        """
        cfg = self.config
        g, length, d = x.shape
        heads, width = cfg.num_heads, d // cfg.num_heads
        m = cfg.memory_segments
        mem_len = m * length
        keys_len = mem_len + length

        u = film(nn.LayerNorm(name="norm")(x), modulation[0], modulation[1])
        # Head-major layout [h, G, L, e] throughout: every score matrix is contiguous per head.
        q = nn.DenseGeneral((heads, width), name="query")(u).transpose(2, 0, 1, 3)
        kv = nn.DenseGeneral((2, heads, width), name="key_value")(u)
        k = kv[..., 0, :, :].transpose(2, 0, 1, 3)
        v = kv[..., 1, :, :].transpose(2, 0, 1, 3)

        # Keys of segment s: the m segments before it (memory, gradient stopped), then s.
        mem_k, mem_v, mem_mask = memory  # [h, M, e] twice, [M]

        def windows(cached: jnp.ndarray, new: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
            flat = jnp.concatenate([cached, new.reshape(heads, g * length, width)], axis=1)
            stream = flat.reshape(heads, g + m, length, width)
            past = [jax.lax.stop_gradient(stream[:, j : j + g]) for j in range(m)]
            window = jnp.concatenate([*past, new], axis=2)  # [h, G, K, e]
            return window, jax.lax.stop_gradient(flat[:, g * length :])

        keys, next_k = windows(mem_k, k)
        values, next_v = windows(mem_v, v)
        stream_mask = jnp.concatenate([mem_mask, x_mask.reshape(g * length)], axis=0)
        stream_mask = stream_mask.reshape(g + m, length)
        key_mask = jnp.concatenate([stream_mask[j : j + g] for j in range(m + 1)], axis=1)
        next_mask = stream_mask.reshape(-1)[g * length :]

        # Causal: distances K - 1 .. -1 suffice (rel_shift's wrapped entries are all masked).
        low = -1 if cfg.causal else -(length - 1)
        distances = np.arange(keys_len - 1, low - 1, -1)
        r = nn.DenseGeneral((heads, width), use_bias=False, name="relative")(
            jnp.asarray(relative_encoding(distances, d))
        ).transpose(1, 0, 2)  # [h, P, e]
        bias_u = self.param("content_bias", nn.initializers.zeros, (heads, width))
        bias_v = self.param("position_bias", nn.initializers.zeros, (heads, width))
        scale = 1.0 / math.sqrt(width)
        content = jnp.einsum("hgle,hgke->hglk", (q + bias_u[:, None, None]) * scale, keys)
        q_position = ((q + bias_v[:, None, None]) * scale).reshape(heads, g * length, width)
        position = jnp.einsum("hne,hpe->hnp", q_position, r)
        position = rel_shift(position.reshape(heads, g, length, -1), keys_len)
        scores = content + position  # [h, G, L, K]

        allowed = key_mask[None, :, None, :]  # [1, G, 1, K]
        if cfg.causal:
            causal = np.arange(keys_len)[None, :] <= mem_len + np.arange(length)[:, None]
            allowed = allowed & causal[None, None]
        scores = jnp.where(allowed, scores, _NEG)
        weights = jax.nn.softmax(scores, axis=-1)
        attended = jnp.einsum("hglk,hgke->glhe", weights, values)
        y = x + nn.DenseGeneral(d, axis=(-2, -1), name="output")(attended)
        if cfg.ffn_multiplier:
            y = FeedForward(d, cfg.ffn_multiplier, name="ffn")(y, modulation[2], modulation[3])
        return y, (next_k, next_v, next_mask)


class _BlockStep(nn.Module):
    """One scan step: every layer of the stack on one block of segments."""

    config: PolicyConfig

    @nn.compact
    def __call__(
        self,
        carry: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray],
        block: tuple[jnp.ndarray, jnp.ndarray],
        modulation: jnp.ndarray,
    ) -> tuple[tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray], jnp.ndarray]:
        mem_k, mem_v, mem_mask = carry  # [layers, h, M, e] twice, [M]
        x, x_mask = block  # [G, L, d], [G, L]
        next_k, next_v = [], []
        next_mask = mem_mask
        for layer in range(self.config.attention_layers):
            x, (k, v, next_mask) = RelativeAttentionLayer(self.config, name=f"layer_{layer}")(
                x, x_mask, (mem_k[layer], mem_v[layer], mem_mask), modulation[layer]
            )
            next_k.append(k)
            next_v.append(v)
        return (jnp.stack(next_k), jnp.stack(next_v), next_mask), x


class SegmentRecurrentStack(nn.Module):
    """``attention_layers`` Transformer-XL layers over all nodes, scanned over segment blocks.

    Attributes:
      config: sizes; ``segments_per_step`` is the block size ``G`` (reduced to a
        divisor of the segment count for small graphs).
    """

    config: PolicyConfig

    @nn.compact
    def __call__(self, x: jnp.ndarray, mask: jnp.ndarray, modulation: jnp.ndarray) -> jnp.ndarray:
        """Applies the stack to every node.

        Args:
          x: ``float32[N, d]`` inputs in topological order; ``N`` a multiple of ``L``.
          mask: ``bool[N]`` True for real nodes.
          modulation: ``float32[layers, 4, d]`` FiLM scales and shifts per layer.

        Returns:
          ``float32[N, d]``.
        """
        cfg = self.config
        if cfg.attention_layers == 0:
            return x
        n, d = x.shape
        length = cfg.segment_length
        if n % length:
            raise ValueError(f"{n} nodes are not a whole number of {length}-node segments")
        segments = n // length
        g = math.gcd(segments, cfg.segments_per_step)
        blocks = x.reshape(segments // g, g, length, d)
        block_masks = mask.reshape(segments // g, g, length)
        heads = cfg.num_heads
        memory_shape = (cfg.attention_layers, heads, cfg.memory_length, d // heads)
        carry = (
            jnp.zeros(memory_shape, x.dtype),
            jnp.zeros(memory_shape, x.dtype),
            jnp.zeros((cfg.memory_length,), bool),
        )
        scan = nn.scan(
            nn.remat(_BlockStep, prevent_cse=False),
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=(0, nn.broadcast),
            out_axes=0,
        )
        _, out = scan(cfg, name="step")(carry, (blocks, block_masks), modulation)
        return out.reshape(n, d)


class FeedForwardStack(nn.Module):
    """The ``attention=False`` ablation: ``attention_layers`` position-wise blocks only.

    Attributes:
      config: sizes (``hidden_size``, ``attention_layers``, ``ffn_multiplier``).
    """

    config: PolicyConfig

    @nn.compact
    def __call__(self, x: jnp.ndarray, mask: jnp.ndarray, modulation: jnp.ndarray) -> jnp.ndarray:
        """Same signature as :class:`SegmentRecurrentStack`; nodes do not interact."""
        del mask
        multiplier = max(self.config.ffn_multiplier, 1)
        for layer in range(self.config.attention_layers):
            x = FeedForward(self.config.hidden_size, multiplier, name=f"layer_{layer}")(
                x, modulation[layer, 2], modulation[layer, 3]
            )
        return x
