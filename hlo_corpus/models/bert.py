"""BERT: a post-LayerNorm encoder transformer pre-trained with the masked-LM and
next-sentence heads (Devlin et al., 2019), scaled down."""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from hlo_corpus.layers import FeedForward, MultiHeadAttention
from hlo_corpus.workload import StepAndArgs, Workload, adam, cross_entropy, spec, training_step

CONFIG = {
    "vocab": 16384,
    "width": 512,
    "heads": 8,
    "length": 128,
    "batch": 16,
    "max_predictions": 20,
}


class EncoderLayer(nn.Module):
    """``ln(x + attn(x))``, then ``ln(x + ffn(x))``.

    Attributes:
      heads: attention heads.
    """

    heads: int

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        x = nn.LayerNorm(epsilon=1e-12, name="attention_ln")(
            x + MultiHeadAttention(self.heads, name="attention")(x, mask)
        )
        return nn.LayerNorm(epsilon=1e-12, name="output_ln")(
            x + FeedForward(4 * x.shape[-1], "gelu", name="ffn")(x)
        )


class BERT(nn.Module):
    """Embeddings, ``layers`` encoder layers, masked-LM and next-sentence heads.

    Attributes:
      vocab: vocabulary size.
      width: model width.
      heads: attention heads.
      layers: encoder layers.
      length: maximum sequence length.
    """

    vocab: int
    width: int
    heads: int
    layers: int
    length: int

    @nn.compact
    def __call__(
        self,
        tokens: jax.Array,
        segments: jax.Array,
        input_mask: jax.Array,
        masked_positions: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        words = nn.Embed(self.vocab, self.width, name="word_embeddings")
        positions = self.param(
            "position_embeddings", nn.initializers.normal(0.02), (self.length, self.width)
        )
        x = words(tokens) + positions[None, : tokens.shape[1]]
        x = x + nn.Embed(2, self.width, name="token_type_embeddings")(segments)
        x = nn.LayerNorm(epsilon=1e-12, name="embeddings_ln")(x)
        mask = (input_mask[:, None, None, :] > 0).astype(bool)
        for i in range(self.layers):
            x = EncoderLayer(self.heads, name=f"layer_{i}")(x, mask)

        picked = jnp.take_along_axis(x, masked_positions[..., None], axis=1)
        h = nn.gelu(nn.Dense(self.width, name="mlm_transform")(picked))
        h = nn.LayerNorm(epsilon=1e-12, name="mlm_ln")(h)
        bias = self.param("mlm_bias", nn.initializers.zeros, (self.vocab,))
        mlm_logits = words.attend(h) + bias

        pooled = jnp.tanh(nn.Dense(self.width, name="pooler")(x[:, 0]))
        nsp_logits = nn.Dense(2, name="nsp")(pooled)
        return mlm_logits, nsp_logits


def make(name: str, layers: int, overrides: dict | None = None) -> StepAndArgs:
    """The BERT pre-training step with ``layers`` layers (``overrides`` replace CONFIG keys)."""
    cfg = {**CONFIG, **(overrides or {})}
    model = BERT(cfg["vocab"], cfg["width"], cfg["heads"], layers, cfg["length"])
    b, n, p = cfg["batch"], cfg["length"], cfg["max_predictions"]
    batch = {
        "tokens": spec((b, n), "int32"),
        "segments": spec((b, n), "int32"),
        "input_mask": spec((b, n), "int32"),
        "masked_positions": spec((b, p), "int32"),
        "masked_ids": spec((b, p), "int32"),
        "masked_weights": spec((b, p)),
        "next_sentence": spec((b,), "int32"),
    }

    def inputs(batch):
        return (batch["tokens"], batch["segments"], batch["input_mask"], batch["masked_positions"])

    def loss(params, state, batch):
        mlm_logits, nsp_logits = model.apply({"params": params}, *inputs(batch))
        mlm = cross_entropy(mlm_logits, batch["masked_ids"], batch["masked_weights"])
        nsp = cross_entropy(nsp_logits, batch["next_sentence"])
        return mlm + nsp, (state, {"mlm_loss": mlm, "nsp_loss": nsp})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, *inputs(b)),
        loss=loss,
        optimizer=adam(1e-4, weight_decay=0.01),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """BERT with 2, 4 and 8 layers."""
    return [
        Workload(
            f"bert_l{n}",
            "bert",
            f"l{n}",
            "none",
            partial(make, f"bert_l{n}", n),
            {**CONFIG, "layers": n},
        )
        for n in (2, 4, 8)
    ]
