"""Building blocks the corpus models share: LSTMs in two forms, conv + batch norm,
multi-head attention, and the transformer feed-forward block."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

Carry = tuple[jax.Array, jax.Array]


class LSTMCell(nn.Module):
    """An LSTM cell with one fused gate matmul over ``[x, h]`` (TensorFlow's layout).

    Attributes:
      hidden: state width.
      forget_bias: added to the forget gate's pre-activation.
    """

    hidden: int
    forget_bias: float = 1.0

    @nn.compact
    def __call__(self, carry: Carry, x: jax.Array) -> tuple[Carry, jax.Array]:
        c, h = carry
        gates = nn.Dense(4 * self.hidden, name="gates")(jnp.concatenate([x, h], axis=-1))
        i, g, f, o = jnp.split(gates, 4, axis=-1)
        c = nn.sigmoid(f + self.forget_bias) * c + nn.sigmoid(i) * jnp.tanh(g)
        h = nn.sigmoid(o) * jnp.tanh(c)
        return (c, h), h


def zero_carry(batch: int, hidden: int) -> Carry:
    """Zero ``(c, h)`` state."""
    zeros = jnp.zeros((batch, hidden), jnp.float32)
    return zeros, zeros


class LSTM(nn.Module):
    """One LSTM layer over a ``[batch, time, features]`` sequence.

    Both forms have the same parameters and compute the same values; they differ
    only in the graph: ``"unrolled"`` is a Python loop (one cell per time step in
    the HLO), ``"scan"`` is ``jax.lax.scan`` (one ``while`` loop).

    Attributes:
      hidden: state width.
      form: ``"unrolled"`` or ``"scan"``.
      reverse: run from the last time step to the first.
    """

    hidden: int
    form: str
    reverse: bool = False

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:
        carry = zero_carry(xs.shape[0], self.hidden)
        if self.form == "unrolled":
            cell = LSTMCell(self.hidden, name="cell")
            steps = range(xs.shape[1])
            outputs: list[jax.Array | None] = [None] * xs.shape[1]
            for t in reversed(steps) if self.reverse else steps:
                carry, outputs[t] = cell(carry, xs[:, t])
            return jnp.stack(outputs, axis=1)
        if self.form != "scan":
            raise ValueError(f"form must be 'unrolled' or 'scan', got {self.form!r}")
        scanned = nn.scan(
            LSTMCell,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=1,
            out_axes=1,
            reverse=self.reverse,
        )
        _, ys = scanned(self.hidden, name="cell")(carry, xs)
        return ys


class ConvBN(nn.Module):
    """Convolution (no bias), training-mode batch norm, optional ReLU.

    Attributes:
      features: output channels.
      kernel: kernel size.
      strides: strides.
      padding: ``"SAME"``, ``"VALID"`` or explicit pairs.
      relu: apply ReLU after the batch norm.
      groups: feature groups (``features`` groups = depthwise).
    """

    features: int
    kernel: Sequence[int]
    strides: Sequence[int] | int = 1
    padding: str | Sequence[tuple[int, int]] = "SAME"
    relu: bool = True
    groups: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Conv(
            self.features,
            tuple(self.kernel),
            strides=self.strides,
            padding=self.padding,
            use_bias=False,
            feature_group_count=self.groups,
        )(x)
        x = nn.BatchNorm(use_running_average=False, momentum=0.9, epsilon=1e-3)(x)
        return nn.relu(x) if self.relu else x


def causal_mask(length: int) -> jax.Array:
    """``[1, 1, length, length]`` boolean mask: position i sees positions ≤ i."""
    return jnp.tril(jnp.ones((length, length), bool))[None, None]


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention with separate (or fused) q/k/v projections.

    Attributes:
      heads: number of heads.
      fused_qkv: one ``Dense(3·d)`` for q, k and v (GPT-2's ``c_attn``) instead of three.
    """

    heads: int
    fused_qkv: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        batch, length, width = x.shape
        head_dim = width // self.heads
        if self.fused_qkv:
            q, k, v = jnp.split(nn.Dense(3 * width, name="qkv")(x), 3, axis=-1)
        else:
            q, k, v = (nn.Dense(width, name=n)(x) for n in ("query", "key", "value"))

        def heads(t: jax.Array) -> jax.Array:
            return t.reshape(batch, length, self.heads, head_dim)

        scores = jnp.einsum("bqhd,bkhd->bhqk", heads(q), heads(k)) / jnp.sqrt(head_dim)
        if mask is not None:
            scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
        weights = jax.nn.softmax(scores, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, heads(v)).reshape(batch, length, width)
        return nn.Dense(width, name="out")(out)


class FeedForward(nn.Module):
    """Position-wise ``Dense(inner) → activation → Dense(width)``.

    Attributes:
      inner: hidden width.
      activation: ``"gelu"`` or ``"relu"``.
    """

    inner: int
    activation: str = "gelu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.inner, name="fc_in")(x)
        h = nn.gelu(h) if self.activation == "gelu" else nn.relu(h)
        return nn.Dense(x.shape[-1], name="fc_out")(h)
