"""WaveNet: stacks of dilated causal convolutions with gated activations, residual and
skip connections, over µ-law-quantized audio (van den Oord et al., 2016), scaled down."""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax

from hlo_corpus.workload import StepAndArgs, Workload, adam, cross_entropy, spec, training_step

CONFIG = {
    "quantization": 256,
    "residual": 32,
    "dilation_channels": 32,
    "skip": 128,
    "layers_per_stack": 10,
    "samples": 4096,
    "batch": 4,
}


def causal_conv(features: int, dilation: int, name: str) -> nn.Conv:
    """A width-2 causal convolution with the given dilation (left padding only)."""
    return nn.Conv(features, (2,), kernel_dilation=(dilation,), padding=[(dilation, 0)], name=name)


class ResidualLayer(nn.Module):
    """``tanh(conv_f) * sigmoid(conv_g)``, then 1×1 convolutions to residual and skip.

    Attributes:
      dilation: dilation of the causal convolution.
      residual: residual channels.
      dilation_channels: gate channels.
      skip: skip channels.
    """

    dilation: int
    residual: int
    dilation_channels: int
    skip: int

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        f = causal_conv(self.dilation_channels, self.dilation, "filter")(x)
        g = causal_conv(self.dilation_channels, self.dilation, "gate")(x)
        z = nn.tanh(f) * nn.sigmoid(g)
        skip = nn.Conv(self.skip, (1,), name="skip")(z)
        return x + nn.Conv(self.residual, (1,), name="residual")(z), skip


class WaveNet(nn.Module):
    """Causal input convolution, ``stacks`` × ``layers_per_stack`` residual layers
    (dilations 1, 2, 4, ... per stack), summed skips → ReLU → 1×1 → ReLU → 1×1 logits.

    Attributes:
      stacks: number of dilation cycles.
      layers_per_stack: layers per cycle.
      quantization: number of µ-law levels (classes).
      residual: residual channels.
      dilation_channels: gate channels.
      skip: skip channels.
    """

    stacks: int
    layers_per_stack: int
    quantization: int
    residual: int
    dilation_channels: int
    skip: int

    @nn.compact
    def __call__(self, samples: jax.Array) -> jax.Array:
        x = jax.nn.one_hot(samples, self.quantization)
        x = causal_conv(self.residual, 1, "input")(x)
        skips = 0.0
        for s in range(self.stacks):
            for i in range(self.layers_per_stack):
                x, skip = ResidualLayer(
                    2**i, self.residual, self.dilation_channels, self.skip, name=f"s{s}_l{i}"
                )(x)
                skips = skips + skip
        h = nn.Conv(self.skip, (1,), name="post1")(nn.relu(skips))
        return nn.Conv(self.quantization, (1,), name="post2")(nn.relu(h))


def make(name: str, stacks: int, overrides: dict | None = None) -> StepAndArgs:
    """The WaveNet training step with ``stacks`` stacks (``overrides`` replace CONFIG keys)."""
    cfg = {**CONFIG, **(overrides or {})}
    model = WaveNet(
        stacks,
        cfg["layers_per_stack"],
        cfg["quantization"],
        cfg["residual"],
        cfg["dilation_channels"],
        cfg["skip"],
    )
    batch = {"audio": spec((cfg["batch"], cfg["samples"] + 1), "int32")}

    def loss(params, state, batch):
        logits = model.apply({"params": params}, batch["audio"][:, :-1])
        return cross_entropy(logits, batch["audio"][:, 1:]), (state, {})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["audio"][:, :-1]),
        loss=loss,
        optimizer=adam(1e-3),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """WaveNet with 2, 4 and 8 stacks of 10 dilated layers."""
    return [
        Workload(
            f"wavenet_s{n}",
            "wavenet",
            f"s{n}",
            "none",
            partial(make, f"wavenet_s{n}", n),
            {**CONFIG, "stacks": n},
        )
        for n in (2, 4, 8)
    ]
