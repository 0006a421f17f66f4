"""ResNet with ResNet-50-style bottleneck blocks and batch norm (He et al., 2016)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from hlo_corpus.layers import ConvBN
from hlo_corpus.workload import (
    StepAndArgs,
    Workload,
    cross_entropy,
    momentum_sgd,
    spec,
    training_step,
)

VARIANTS: dict[str, dict] = {
    "26": {"stages": (2, 2, 2, 2), "width": 32, "image": 128, "batch": 16, "classes": 1000},
    "50": {"stages": (3, 4, 6, 3), "width": 64, "image": 224, "batch": 8, "classes": 1000},
}


class Bottleneck(nn.Module):
    """1×1 → 3×3 (strided) → 1×1 (4× wider), projection shortcut where shapes change.

    Attributes:
      width: the bottleneck width (the block outputs ``4 * width`` channels).
      stride: stride of the 3×3 convolution.
    """

    width: int
    stride: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = ConvBN(self.width, (1, 1), name="conv1")(x)
        y = ConvBN(self.width, (3, 3), self.stride, name="conv2")(y)
        y = ConvBN(4 * self.width, (1, 1), relu=False, name="conv3")(y)
        if x.shape != y.shape:
            x = ConvBN(4 * self.width, (1, 1), self.stride, relu=False, name="shortcut")(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    """7×7 stem, max pool, four stages of bottlenecks, global average pool, classifier.

    Attributes:
      stages: bottleneck blocks per stage.
      width: first stage's bottleneck width (doubles per stage).
      classes: number of classes.
    """

    stages: Sequence[int]
    width: int
    classes: int

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = ConvBN(self.width, (7, 7), 2, name="stem")(images)
        x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
        for s, blocks in enumerate(self.stages):
            for b in range(blocks):
                stride = 2 if s > 0 and b == 0 else 1
                x = Bottleneck(self.width * 2**s, stride, name=f"stage{s + 1}_block{b + 1}")(x)
        return nn.Dense(self.classes, name="fc")(jnp.mean(x, axis=(1, 2)))


def make(name: str, variant: str, overrides: dict | None = None) -> StepAndArgs:
    """The ResNet training step of ``variant`` (``overrides`` replace its config keys)."""
    cfg = {**VARIANTS[variant], **(overrides or {})}
    model = ResNet(cfg["stages"], cfg["width"], cfg["classes"])
    batch = {
        "images": spec((cfg["batch"], cfg["image"], cfg["image"], 3)),
        "labels": spec((cfg["batch"],), "int32"),
    }

    def loss(params, state, batch):
        logits, new_state = model.apply(
            {"params": params, **state}, batch["images"], mutable=["batch_stats"]
        )
        return cross_entropy(logits, batch["labels"]), (new_state, {})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["images"]),
        loss=loss,
        optimizer=momentum_sgd(0.1),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """ResNet-26 and ResNet-50."""
    return [
        Workload(
            f"resnet_{v}",
            "resnet",
            v,
            "none",
            partial(make, f"resnet_{v}", v),
            {**cfg, "stages": list(cfg["stages"])},
        )
        for v, cfg in VARIANTS.items()
    ]
