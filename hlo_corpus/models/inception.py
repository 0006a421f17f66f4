"""Inception-v3 (Szegedy et al., 2016) with a width multiplier: the stem, 3 × A,
reduction B, 4 × C (factorized 7×7), reduction D, 2 × E (expanded filter banks),
the auxiliary classifier, label smoothing and RMSProp. The config key ``blocks``
(default ``(3, 4, 2)``) sets how many A, C and E blocks a variant has."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from hlo_corpus.layers import ConvBN
from hlo_corpus.workload import StepAndArgs, Workload, spec, training_step

# Inception-v3's A, C and E block counts.
BLOCKS = (3, 4, 2)
VARIANTS: dict[str, dict] = {
    "small": {"width": 0.25, "image": 149, "batch": 8, "classes": 1000},
    "base": {"width": 0.5, "image": 299, "batch": 8, "classes": 1000},
}


class Branches(nn.Module):
    """Runs each branch (a sequence of conv specs and ``"avg"`` (3×3, stride 1) or
    ``"max_s2"`` (3×3, stride 2) pooling) on the input and concatenates the outputs on channels.

    A conv spec is ``(channels, kernel, stride, padding)``; a branch whose last
    element is a tuple of specs ends in parallel convolutions, concatenated
    (Inception-E's expanded filter bank).

    Attributes:
      branches: the branch specs.
      width: channel multiplier.
    """

    branches: Sequence[Sequence]
    width: float

    def channels(self, c: int) -> int:
        return max(8, int(c * self.width))

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        outputs = []
        for b, branch in enumerate(self.branches):
            y = x
            for j, layer in enumerate(branch):
                name = f"b{b}_{j}"
                if layer == "avg":
                    y = nn.avg_pool(y, (3, 3), padding="SAME")
                elif layer == "max_s2":
                    y = nn.max_pool(y, (3, 3), (2, 2), padding="VALID")
                elif isinstance(layer[0], tuple):
                    y = jnp.concatenate(
                        [
                            ConvBN(self.channels(c), k, s, p, name=f"{name}_{i}")(y)
                            for i, (c, k, s, p) in enumerate(layer)
                        ],
                        axis=-1,
                    )
                else:
                    c, k, s, p = layer
                    y = ConvBN(self.channels(c), k, s, p, name=name)(y)
            outputs.append(y)
        return jnp.concatenate(outputs, axis=-1)


S, V = "SAME", "VALID"


def block_a(pool: int):
    return [
        [(64, (1, 1), 1, S)],
        [(48, (1, 1), 1, S), (64, (5, 5), 1, S)],
        [(64, (1, 1), 1, S), (96, (3, 3), 1, S), (96, (3, 3), 1, S)],
        ["avg", (pool, (1, 1), 1, S)],
    ]


BLOCK_B = [
    [(384, (3, 3), 2, V)],
    [(64, (1, 1), 1, S), (96, (3, 3), 1, S), (96, (3, 3), 2, V)],
    ["max_s2"],
]


def block_c(c7: int):
    return [
        [(192, (1, 1), 1, S)],
        [(c7, (1, 1), 1, S), (c7, (1, 7), 1, S), (192, (7, 1), 1, S)],
        [
            (c7, (1, 1), 1, S),
            (c7, (7, 1), 1, S),
            (c7, (1, 7), 1, S),
            (c7, (7, 1), 1, S),
            (192, (1, 7), 1, S),
        ],
        ["avg", (192, (1, 1), 1, S)],
    ]


BLOCK_D = [
    [(192, (1, 1), 1, S), (320, (3, 3), 2, V)],
    [(192, (1, 1), 1, S), (192, (1, 7), 1, S), (192, (7, 1), 1, S), (192, (3, 3), 2, V)],
    ["max_s2"],
]

_EXPAND = ((384, (1, 3), 1, S), (384, (3, 1), 1, S))
BLOCK_E = [
    [(320, (1, 1), 1, S)],
    [(384, (1, 1), 1, S), _EXPAND],
    [(448, (1, 1), 1, S), (384, (3, 3), 1, S), _EXPAND],
    ["avg", (192, (1, 1), 1, S)],
]


class InceptionV3(nn.Module):
    """Inception-v3; returns ``(logits, aux_logits)``.

    Attributes:
      width: channel multiplier.
      classes: number of classes.
      blocks: how many A, C and E blocks (at most 3, 4 and 2).
    """

    width: float
    classes: int
    blocks: tuple[int, int, int] = BLOCKS

    def channels(self, c: int) -> int:
        return max(8, int(c * self.width))

    @nn.compact
    def __call__(self, images: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = self.channels
        x = ConvBN(c(32), (3, 3), 2, V, name="stem_1")(images)
        x = ConvBN(c(32), (3, 3), 1, V, name="stem_2")(x)
        x = ConvBN(c(64), (3, 3), 1, S, name="stem_3")(x)
        x = nn.max_pool(x, (3, 3), (2, 2), padding="VALID")
        x = ConvBN(c(80), (1, 1), 1, V, name="stem_4")(x)
        x = ConvBN(c(192), (3, 3), 1, V, name="stem_5")(x)
        x = nn.max_pool(x, (3, 3), (2, 2), padding="VALID")
        a, c_blocks, e = self.blocks
        for i, pool in enumerate((32, 64, 64)[:a]):
            x = Branches(block_a(pool), self.width, name=f"mixed_5{'bcd'[i]}")(x)
        x = Branches(BLOCK_B, self.width, name="mixed_6a")(x)
        for i, c7 in enumerate((128, 160, 160, 192)[:c_blocks]):
            x = Branches(block_c(c7), self.width, name=f"mixed_6{'bcde'[i]}")(x)

        aux = nn.avg_pool(x, (5, 5), (3, 3), padding="VALID")
        aux = ConvBN(c(128), (1, 1), name="aux_conv0")(aux)
        aux = ConvBN(c(768), aux.shape[1:3], padding="VALID", name="aux_conv1")(aux)
        aux_logits = nn.Dense(self.classes, name="aux_fc")(aux.reshape(aux.shape[0], -1))

        x = Branches(BLOCK_D, self.width, name="mixed_7a")(x)
        for i in range(e):
            x = Branches(BLOCK_E, self.width, name=f"mixed_7{'bc'[i]}")(x)
        logits = nn.Dense(self.classes, name="fc")(jnp.mean(x, axis=(1, 2)))
        return logits, aux_logits


def smoothed_cross_entropy(logits: jax.Array, labels: jax.Array, smoothing: float = 0.1):
    """Softmax cross entropy against label-smoothed one-hot targets."""
    targets = optax.smooth_labels(jax.nn.one_hot(labels, logits.shape[-1]), smoothing)
    return jnp.mean(optax.softmax_cross_entropy(logits, targets))


def make(name: str, variant: str, overrides: dict | None = None) -> StepAndArgs:
    """The Inception-v3 training step of ``variant`` (``overrides`` replace its config keys)."""
    cfg = {**VARIANTS[variant], **(overrides or {})}
    blocks = tuple(cfg.get("blocks", BLOCKS))
    if len(blocks) != 3 or not all(1 <= n <= m for n, m in zip(blocks, BLOCKS, strict=True)):
        raise ValueError(f"blocks {blocks} must be three counts of A, C, E in 1..{BLOCKS}")
    model = InceptionV3(cfg["width"], cfg["classes"], blocks)
    batch = {
        "images": spec((cfg["batch"], cfg["image"], cfg["image"], 3)),
        "labels": spec((cfg["batch"],), "int32"),
    }

    def loss(params, state, batch):
        (logits, aux_logits), new_state = model.apply(
            {"params": params, **state}, batch["images"], mutable=["batch_stats"]
        )
        value = smoothed_cross_entropy(logits, batch["labels"])
        value = value + 0.4 * smoothed_cross_entropy(aux_logits, batch["labels"])
        return value, (new_state, {})

    return training_step(
        name,
        init=lambda rng, b: model.init(rng, b["images"]),
        loss=loss,
        optimizer=optax.rmsprop(0.045, decay=0.9, eps=1.0),
        batch=batch,
    )


def workloads() -> list[Workload]:
    """Inception-v3 at width 0.25 (149×149 images) and 0.5 (299×299)."""
    return [
        Workload(
            f"inception_v3_{v}",
            "inception_v3",
            v,
            "none",
            partial(make, f"inception_v3_{v}", v),
            cfg,
        )
        for v, cfg in VARIANTS.items()
    ]
