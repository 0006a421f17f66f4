"""GNMT: an LSTM encoder-decoder with attention (Wu et al., 2016), scaled down.

Encoder: a bidirectional bottom layer, then unidirectional layers, residual
connections from the third layer up. Decoder: the bottom layer's output queries
a normalized Bahdanau attention over the encoder outputs; the attention context
feeds every decoder layer (GNMT's attention wiring); teacher forcing; softmax
over the target vocabulary.
"""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from hlo_corpus.layers import LSTM, Carry, LSTMCell, zero_carry
from hlo_corpus.workload import StepAndArgs, Workload, adam, cross_entropy, spec, training_step

CONFIG = {"vocab": 8192, "hidden": 256, "batch": 16, "source_steps": 48, "target_steps": 48}


class BahdanauAttention(nn.Module):
    """Normalized additive attention: ``v·tanh(keys + W q + b)``, softmax over source.

    Attributes:
      units: attention width.
    """

    units: int

    @nn.compact
    def __call__(self, query: jax.Array, keys: jax.Array, values: jax.Array) -> jax.Array:
        q = nn.Dense(self.units, use_bias=False, name="query")(query)
        g = self.param("g", nn.initializers.constant(self.units**-0.5), ())
        v = self.param("v", nn.initializers.normal(self.units**-0.5), (self.units,))
        b = self.param("b", nn.initializers.zeros, (self.units,))
        v = g * v / jnp.linalg.norm(v)
        scores = jnp.sum(v * jnp.tanh(keys + q[:, None, :] + b), axis=-1)
        weights = jax.nn.softmax(scores, axis=-1)
        return jnp.einsum("bs,bsd->bd", weights, values)


class DecoderStep(nn.Module):
    """One decoder time step through all layers.

    Attributes:
      hidden: state width.
      layers: decoder layers.
    """

    hidden: int
    layers: int

    @nn.compact
    def __call__(
        self,
        carry: tuple[tuple[Carry, ...], jax.Array],
        x: jax.Array,
        keys: jax.Array,
        values: jax.Array,
    ) -> tuple[tuple[tuple[Carry, ...], jax.Array], jax.Array]:
        states, context = carry
        state, h = LSTMCell(self.hidden, name="cell_0")(
            states[0], jnp.concatenate([x, context], -1)
        )
        new_states = [state]
        context = BahdanauAttention(self.hidden, name="attention")(h, keys, values)
        for i in range(1, self.layers):
            state, out = LSTMCell(self.hidden, name=f"cell_{i}")(
                states[i], jnp.concatenate([h, context], -1)
            )
            new_states.append(state)
            h = out + h if i >= 2 else out
        return (tuple(new_states), context), h


class GNMT(nn.Module):
    """Encoder-decoder with attention.

    Attributes:
      vocab: source and target vocabulary size.
      hidden: state width.
      layers: encoder layers = decoder layers.
      form: ``"unrolled"`` or ``"scan"``.
    """

    vocab: int
    hidden: int
    layers: int
    form: str

    @nn.compact
    def __call__(self, source: jax.Array, target_in: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.hidden, name="source_embed")(source)
        half = self.hidden // 2
        forward = LSTM(half, self.form, name="encoder_0_fw")(x)
        backward = LSTM(half, self.form, reverse=True, name="encoder_0_bw")(x)
        x = jnp.concatenate([forward, backward], axis=-1)
        for i in range(1, self.layers):
            out = LSTM(self.hidden, self.form, name=f"encoder_{i}")(x)
            x = out + x if i >= 2 else out
        keys = nn.Dense(self.hidden, use_bias=False, name="memory_layer")(x)

        y = nn.Embed(self.vocab, self.hidden, name="target_embed")(target_in)
        batch = source.shape[0]
        carry = (
            tuple(zero_carry(batch, self.hidden) for _ in range(self.layers)),
            jnp.zeros((batch, self.hidden), jnp.float32),
        )
        if self.form == "unrolled":
            step = DecoderStep(self.hidden, self.layers, name="decoder")
            outputs = []
            for t in range(y.shape[1]):
                carry, h = step(carry, y[:, t], keys, x)
                outputs.append(h)
            hs = jnp.stack(outputs, axis=1)
        else:
            scanned = nn.scan(
                DecoderStep,
                variable_broadcast="params",
                split_rngs={"params": False},
                in_axes=(1, nn.broadcast, nn.broadcast),
                out_axes=1,
            )
            _, hs = scanned(self.hidden, self.layers, name="decoder")(carry, y, keys, x)
        return nn.Dense(self.vocab, name="softmax")(hs)


def make(name: str, layers: int, form: str, overrides: dict | None = None) -> StepAndArgs:
    """The GNMT training step: ``layers`` layers in ``form``, ``overrides`` on CONFIG."""
    cfg = {**CONFIG, **(overrides or {})}
    model = GNMT(cfg["vocab"], cfg["hidden"], layers, form)
    src = spec((cfg["batch"], cfg["source_steps"]), "int32")
    tgt = spec((cfg["batch"], cfg["target_steps"]), "int32")
    batch = {"source": src, "target_in": tgt, "target_out": tgt}

    def loss(params, state, batch):
        logits = model.apply({"params": params}, batch["source"], batch["target_in"])
        return cross_entropy(logits, batch["target_out"]), (state, {})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["source"], b["target_in"]),
        loss=loss,
        optimizer=adam(1e-3, clip=5.0),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """GNMT with 2, 4 and 8 layers, each unrolled and scanned."""
    return [
        Workload(
            f"gnmt_l{n}_{form}",
            "gnmt",
            f"l{n}",
            form,
            partial(make, f"gnmt_l{n}_{form}", n, form),
            {**CONFIG, "layers": n},
        )
        for n in (2, 4, 8)
        for form in ("unrolled", "scan")
    ]
