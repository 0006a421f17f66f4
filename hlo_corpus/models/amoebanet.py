"""AmoebaNet-A (Real et al., 2019): a NASNet-style network of evolved normal and
reduction cells, CIFAR layout (stem, N normal cells, reduction, N normal, reduction,
N normal), scaled down. The config key ``stages`` (default 3) keeps the first 1-3
stages.

Each cell reads the two previous cells' outputs, squares them to ``filters``
channels, then builds five hidden states, each the sum of two operations on
earlier states; the states nobody consumed are concatenated as the output.
"""

from __future__ import annotations

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

# The evolved AmoebaNet-A genotype: operation pairs and the hidden states they read
# (0: the previous cell, 1: the one before, 2+: states built earlier in the cell).
NORMAL_OPS = (
    "avg_pool_3x3", "max_pool_3x3", "separable_3x3_2", "none", "none",
    "avg_pool_3x3", "separable_3x3_2", "separable_5x5_2", "avg_pool_3x3", "separable_3x3_2",
)  # fmt: skip
NORMAL_INPUTS = (0, 0, 1, 1, 0, 1, 0, 2, 5, 0)
REDUCTION_OPS = (
    "separable_3x3_2", "avg_pool_3x3", "max_pool_3x3", "separable_7x7_2", "max_pool_3x3",
    "max_pool_3x3", "separable_3x3_2", "1x7_7x1", "avg_pool_3x3", "separable_7x7_2",
)  # fmt: skip
REDUCTION_INPUTS = (1, 0, 0, 2, 1, 0, 4, 0, 1, 0)

# Stages of the full network (each but the first opens with a reduction cell).
STAGES = 3
VARIANTS: dict[str, dict] = {
    "n2_f16": {"cells": 2, "filters": 16, "image": 32, "batch": 32, "classes": 10},
    "n6_f36": {"cells": 6, "filters": 36, "image": 32, "batch": 32, "classes": 10},
}


class SeparableConv(nn.Module):
    """NASNet's ``separable_KxK_2``: (ReLU, depthwise K×K, pointwise 1×1, BN) twice,
    the first one strided.

    Attributes:
      filters: output channels.
      kernel: K.
      stride: stride of the first depthwise convolution.
    """

    filters: int
    kernel: int
    stride: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(2):
            x = nn.relu(x)
            x = nn.Conv(
                x.shape[-1],
                (self.kernel, self.kernel),
                strides=self.stride if i == 0 else 1,
                feature_group_count=x.shape[-1],
                use_bias=False,
                name=f"depthwise_{i}",
            )(x)
            x = ConvBN(self.filters, (1, 1), relu=False, name=f"pointwise_{i}")(x)
        return x


class FactorizedReduce(nn.Module):
    """Halves the spatial size: ReLU, two 1×1 stride-2 convolutions on offset grids,
    concatenated, batch norm.

    Attributes:
      filters: output channels.
    """

    filters: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(x)
        half = self.filters // 2
        a = nn.Conv(half, (1, 1), strides=2, use_bias=False, name="path_0")(x)
        shifted = jnp.pad(x[:, 1:, 1:], ((0, 0), (0, 1), (0, 1), (0, 0)))
        b = nn.Conv(self.filters - half, (1, 1), strides=2, use_bias=False, name="path_1")(shifted)
        return nn.BatchNorm(use_running_average=False, momentum=0.9, epsilon=1e-3)(
            jnp.concatenate([a, b], axis=-1)
        )


class Operation(nn.Module):
    """One named cell operation.

    Attributes:
      op: operation name from the genotype.
      filters: output channels.
      stride: 1, or 2 in a reduction cell when reading the cell's inputs.
    """

    op: str
    filters: int
    stride: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if self.op.startswith("separable_"):
            k = int(self.op.split("_")[1].split("x")[0])
            return SeparableConv(self.filters, k, self.stride, name="sep")(x)
        if self.op in ("avg_pool_3x3", "max_pool_3x3"):
            pool = nn.avg_pool if self.op == "avg_pool_3x3" else nn.max_pool
            return pool(x, (3, 3), (self.stride, self.stride), padding="SAME")
        if self.op == "1x7_7x1":
            x = nn.relu(x)
            x = nn.Conv(self.filters, (1, 7), (1, self.stride), use_bias=False, name="conv_1x7")(x)
            x = nn.Conv(self.filters, (7, 1), (self.stride, 1), use_bias=False, name="conv_7x1")(x)
            return nn.BatchNorm(use_running_average=False, momentum=0.9, epsilon=1e-3)(x)
        if self.op == "none":
            return x if self.stride == 1 else FactorizedReduce(self.filters, name="reduce")(x)
        raise ValueError(f"unknown operation {self.op!r}")


class Cell(nn.Module):
    """A normal or reduction cell.

    Attributes:
      filters: channels of every hidden state.
      reduction: halve the spatial size (stride 2 on the cell's inputs).
    """

    filters: int
    reduction: bool

    @nn.compact
    def __call__(self, prev: jax.Array, prev_prev: jax.Array) -> jax.Array:
        if prev_prev.shape[1] != prev.shape[1]:
            prev_prev = FactorizedReduce(self.filters, name="squeeze_1")(prev_prev)
        else:
            prev_prev = ConvBN(self.filters, (1, 1), name="squeeze_1")(nn.relu(prev_prev))
        prev = ConvBN(self.filters, (1, 1), name="squeeze_0")(nn.relu(prev))
        ops, inputs = (
            (REDUCTION_OPS, REDUCTION_INPUTS) if self.reduction else (NORMAL_OPS, NORMAL_INPUTS)
        )
        states = [prev, prev_prev]
        used = [False] * (2 + len(ops) // 2)
        for c in range(len(ops) // 2):
            pair = []
            for j in (2 * c, 2 * c + 1):
                index = inputs[j]
                used[index] = True
                stride = 2 if self.reduction and index < 2 else 1
                op = Operation(ops[j], self.filters, stride, name=f"comb{c}_{j % 2}")
                pair.append(op(states[index]))
            states.append(pair[0] + pair[1])
        unused = [s for s, u in zip(states[2:], used[2:], strict=True) if not u]
        return jnp.concatenate(unused, axis=-1)


class AmoebaNet(nn.Module):
    """Stem, ``stages`` stages of ``cells`` normal cells with a reduction cell between
    stages (doubling ``filters``), ReLU, global average pool, classifier.

    Attributes:
      cells: normal cells per stage.
      filters: first stage's filters.
      classes: number of classes.
      stages: how many stages (1-3).
    """

    cells: int
    filters: int
    classes: int
    stages: int = STAGES

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x = ConvBN(3 * self.filters, (3, 3), relu=False, name="stem")(images)
        prev, prev_prev = x, x
        filters, index = self.filters, 0
        for stage in range(self.stages):
            if stage > 0:
                filters *= 2
                out = Cell(filters, True, name=f"cell_{index}")(prev, prev_prev)
                prev, prev_prev, index = out, prev, index + 1
            for _ in range(self.cells):
                out = Cell(filters, False, name=f"cell_{index}")(prev, prev_prev)
                prev, prev_prev, index = out, prev, index + 1
        x = jnp.mean(nn.relu(prev), axis=(1, 2))
        return nn.Dense(self.classes, name="fc")(x)


def make(name: str, variant: str, overrides: dict | None = None) -> StepAndArgs:
    """The AmoebaNet training step of ``variant`` (``overrides`` replace its config keys)."""
    cfg = {**VARIANTS[variant], **(overrides or {})}
    stages = int(cfg.get("stages", STAGES))
    if not 1 <= stages <= STAGES:
        raise ValueError(f"stages {stages} must be 1, 2 or 3")
    model = AmoebaNet(cfg["cells"], cfg["filters"], cfg["classes"], stages)
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
        optimizer=momentum_sgd(0.024, weight_decay=5e-4),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """AmoebaNet-A with 2 and 6 normal cells per stage."""
    return [
        Workload(f"amoebanet_{v}", "amoebanet", v, "none", partial(make, f"amoebanet_{v}", v), cfg)
        for v, cfg in VARIANTS.items()
    ]
