"""RNNLM: an LSTM language model (embedding → stacked LSTMs → softmax over the vocabulary).

Zaremba et al.'s PTB setup, scaled down: 35-step sequences, tied-free softmax.
"""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax

from hlo_corpus.layers import LSTM
from hlo_corpus.workload import StepAndArgs, Workload, adam, cross_entropy, spec, training_step

CONFIG = {"vocab": 10000, "hidden": 512, "batch": 16, "steps": 35}


class RNNLM(nn.Module):
    """Embedding, ``layers`` LSTMs, output projection.

    Attributes:
      vocab: vocabulary size.
      hidden: embedding and state width.
      layers: number of LSTM layers.
      form: ``"unrolled"`` or ``"scan"``.
    """

    vocab: int
    hidden: int
    layers: int
    form: str

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.hidden, name="embed")(tokens)
        for i in range(self.layers):
            x = LSTM(self.hidden, self.form, name=f"lstm_{i}")(x)
        return nn.Dense(self.vocab, name="softmax")(x)


def make(name: str, layers: int, form: str, overrides: dict | None = None) -> StepAndArgs:
    """The RNNLM training step: ``layers`` LSTMs in ``form``, ``overrides`` on CONFIG."""
    cfg = {**CONFIG, **(overrides or {})}
    model = RNNLM(cfg["vocab"], cfg["hidden"], layers, form)
    shape = (cfg["batch"], cfg["steps"])
    batch = {"inputs": spec(shape, "int32"), "targets": spec(shape, "int32")}

    def loss(params, state, batch):
        logits = model.apply({"params": params}, batch["inputs"])
        return cross_entropy(logits, batch["targets"]), (state, {})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["inputs"]),
        loss=loss,
        optimizer=adam(1e-3, clip=5.0),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """RNNLM with 2, 4 and 8 layers, each unrolled and scanned."""
    return [
        Workload(
            f"rnnlm_l{n}_{form}",
            "rnnlm",
            f"l{n}",
            form,
            partial(make, f"rnnlm_l{n}_{form}", n, form),
            {**CONFIG, "layers": n},
        )
        for n in (2, 4, 8)
        for form in ("unrolled", "scan")
    ]
