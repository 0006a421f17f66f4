"""Transformer-XL: segment-level recurrence with a memory of the previous segment's
hidden states, and relative positional attention (Dai et al., 2019), scaled down.

A training step reads one segment and the per-layer memories, and returns the
updated memories (gradient-stopped) with the new parameters.
"""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from hlo_corpus.layers import FeedForward
from hlo_corpus.workload import StepAndArgs, Workload, adam, cross_entropy, spec, training_step

CONFIG = {
    "vocab": 16384,
    "width": 512,
    "heads": 8,
    "head_dim": 64,
    "inner": 2048,
    "segment": 128,
    "memory": 128,
    "batch": 8,
}


def relative_positions(klen: int, width: int) -> jax.Array:
    """Sinusoidal embeddings of the relative distances ``klen-1, ..., 0``: ``[klen, width]``."""
    distances = jnp.arange(klen - 1, -1, -1.0)
    inv_freq = 1.0 / (10000 ** (jnp.arange(0.0, width, 2.0) / width))
    angles = distances[:, None] * inv_freq[None, :]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def rel_shift(x: jax.Array) -> jax.Array:
    """Aligns ``[b, h, q, k]`` scores by relative distance (the pad-reshape trick)."""
    b, h, q, k = x.shape
    x = jnp.pad(x, ((0, 0), (0, 0), (0, 0), (1, 0)))
    x = x.reshape(b, h, k + 1, q)[:, :, 1:]
    return x.reshape(b, h, q, k)


class RelativeAttention(nn.Module):
    """Relative multi-head attention over ``[memory, segment]`` (post-LayerNorm).

    Attributes:
      heads: attention heads.
      head_dim: width per head.
    """

    heads: int
    head_dim: int

    @nn.compact
    def __call__(
        self,
        h: jax.Array,
        memory: jax.Array,
        pos: jax.Array,
        r_w_bias: jax.Array,
        r_r_bias: jax.Array,
    ) -> jax.Array:
        b, qlen, width = h.shape
        mlen = memory.shape[1]
        klen = qlen + mlen
        n, d = self.heads, self.head_dim
        cat = jnp.concatenate([memory, h], axis=1)
        q, k, v = jnp.split(nn.Dense(3 * n * d, use_bias=False, name="qkv")(cat), 3, axis=-1)
        q = q[:, -qlen:].reshape(b, qlen, n, d)
        k = k.reshape(b, klen, n, d)
        v = v.reshape(b, klen, n, d)
        r = nn.Dense(n * d, use_bias=False, name="r")(pos).reshape(klen, n, d)
        content = jnp.einsum("bihd,bjhd->bhij", q + r_w_bias, k)
        position = rel_shift(jnp.einsum("bihd,jhd->bhij", q + r_r_bias, r))
        scores = (content + position) / jnp.sqrt(d)
        allowed = jnp.tril(jnp.ones((qlen, klen), bool), k=mlen)
        scores = jnp.where(allowed[None, None], scores, jnp.finfo(scores.dtype).min)
        probs = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhij,bjhd->bihd", probs, v).reshape(b, qlen, n * d)
        out = nn.Dense(width, use_bias=False, name="o")(out)
        return nn.LayerNorm(name="ln")(h + out)


class Layer(nn.Module):
    """Relative attention, then a post-LayerNorm ReLU feed-forward block.

    Attributes:
      heads: attention heads.
      head_dim: width per head.
      inner: feed-forward width.
    """

    heads: int
    head_dim: int
    inner: int

    @nn.compact
    def __call__(self, h, memory, pos, r_w_bias, r_r_bias):
        h = RelativeAttention(self.heads, self.head_dim, name="attn")(
            h, memory, pos, r_w_bias, r_r_bias
        )
        return nn.LayerNorm(name="ff_ln")(h + FeedForward(self.inner, "relu", name="ff")(h))


class TransformerXL(nn.Module):
    """Embedding, ``layers`` relative-attention layers with memories, tied softmax.

    Attributes:
      vocab: vocabulary size.
      width: model width.
      heads: attention heads.
      head_dim: width per head.
      inner: feed-forward width.
      layers: number of layers.
    """

    vocab: int
    width: int
    heads: int
    head_dim: int
    inner: int
    layers: int

    @nn.compact
    def __call__(self, tokens: jax.Array, memories: jax.Array) -> tuple[jax.Array, jax.Array]:
        embed = nn.Embed(self.vocab, self.width, name="embed")
        h = embed(tokens) * jnp.sqrt(self.width)
        qlen, mlen = tokens.shape[1], memories.shape[2]
        pos = relative_positions(qlen + mlen, self.width)
        bias_shape = (self.heads, self.head_dim)
        r_w_bias = self.param("r_w_bias", nn.initializers.zeros, bias_shape)
        r_r_bias = self.param("r_r_bias", nn.initializers.zeros, bias_shape)
        new_memories = []
        for i in range(self.layers):
            cat = jnp.concatenate([memories[i], h], axis=1)
            new_memories.append(jax.lax.stop_gradient(cat[:, -mlen:]))
            h = Layer(self.heads, self.head_dim, self.inner, name=f"layer_{i}")(
                h, memories[i], pos, r_w_bias, r_r_bias
            )
        return embed.attend(h), jnp.stack(new_memories)


def make(name: str, layers: int, overrides: dict | None = None) -> StepAndArgs:
    """The Transformer-XL training step with ``layers`` layers (``overrides`` on CONFIG)."""
    cfg = {**CONFIG, **(overrides or {})}
    model = TransformerXL(
        cfg["vocab"], cfg["width"], cfg["heads"], cfg["head_dim"], cfg["inner"], layers
    )
    b, q, m = cfg["batch"], cfg["segment"], cfg["memory"]
    batch = {
        "inputs": spec((b, q), "int32"),
        "targets": spec((b, q), "int32"),
        "memories": spec((layers, b, m, cfg["width"])),
    }

    def loss(params, state, batch):
        logits, memories = model.apply({"params": params}, batch["inputs"], batch["memories"])
        return cross_entropy(logits, batch["targets"]), (state, {"memories": memories})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["inputs"], b["memories"]),
        loss=loss,
        optimizer=adam(2.5e-4, clip=0.25),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """Transformer-XL with 2, 4 and 8 layers."""
    return [
        Workload(
            f"transformer_xl_l{n}",
            "transformer_xl",
            f"l{n}",
            "none",
            partial(make, f"transformer_xl_l{n}", n),
            {**CONFIG, "layers": n},
        )
        for n in (2, 4, 8)
    ]
