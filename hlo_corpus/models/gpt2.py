"""GPT-2: a pre-LayerNorm decoder-only transformer with learned positions and tied
input/output embeddings (Radford et al., 2019), scaled down."""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax

from hlo_corpus.layers import FeedForward, MultiHeadAttention, causal_mask
from hlo_corpus.workload import StepAndArgs, Workload, adam, cross_entropy, spec, training_step

CONFIG = {"vocab": 16384, "width": 512, "heads": 8, "context": 256, "batch": 8}


class Block(nn.Module):
    """``x + attn(ln(x))``, then ``x + mlp(ln(x))``.

    Attributes:
      heads: attention heads.
    """

    heads: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        mask = causal_mask(x.shape[1])
        x = x + MultiHeadAttention(self.heads, fused_qkv=True, name="attn")(
            nn.LayerNorm(name="ln_1")(x), mask
        )
        return x + FeedForward(4 * x.shape[-1], "gelu", name="mlp")(nn.LayerNorm(name="ln_2")(x))


class GPT2(nn.Module):
    """Token + position embeddings, ``layers`` blocks, final LayerNorm, tied logits.

    Attributes:
      vocab: vocabulary size.
      width: model width.
      heads: attention heads.
      layers: number of blocks.
      context: maximum sequence length.
    """

    vocab: int
    width: int
    heads: int
    layers: int
    context: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        wte = nn.Embed(self.vocab, self.width, name="wte")
        wpe = self.param("wpe", nn.initializers.normal(0.01), (self.context, self.width))
        x = wte(tokens) + wpe[None, : tokens.shape[1]]
        for i in range(self.layers):
            x = Block(self.heads, name=f"h_{i}")(x)
        return wte.attend(nn.LayerNorm(name="ln_f")(x))


def make(name: str, layers: int, overrides: dict | None = None) -> StepAndArgs:
    """The GPT-2 training step with ``layers`` blocks (``overrides`` replace CONFIG keys)."""
    cfg = {**CONFIG, **(overrides or {})}
    model = GPT2(cfg["vocab"], cfg["width"], cfg["heads"], layers, cfg["context"])
    tokens = spec((cfg["batch"], cfg["context"] + 1), "int32")
    batch = {"tokens": tokens}

    def loss(params, state, batch):
        logits = model.apply({"params": params}, batch["tokens"][:, :-1])
        return cross_entropy(logits, batch["tokens"][:, 1:]), (state, {})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["tokens"][:, :-1]),
        loss=loss,
        optimizer=adam(2.5e-4, weight_decay=0.01),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """GPT-2 with 2, 4 and 8 layers."""
    return [
        Workload(
            f"gpt2_l{n}",
            "gpt2",
            f"l{n}",
            "none",
            partial(make, f"gpt2_l{n}", n),
            {**CONFIG, "layers": n},
        )
        for n in (2, 4, 8)
    ]
