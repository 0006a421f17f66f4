"""The corpus beyond its 30 graphs: size and shape variants of every family, and
paper-scale placement settings. Pure data: nothing here imports JAX or Flax, so the
names, families and configs list instantly; :mod:`hlo_corpus.registry` turns a spec
into a :class:`~hlo_corpus.workload.Workload`.

Splits:

* ``"base"``: the 30 committed graphs (``hlo_corpus/data``); not listed here.
* ``"variants"``: 208 training graphs, 20-24 per family: layers, widths, sequence
  lengths, batch sizes (and image sizes, cells, filters, stacks where the family has
  them) on fixed grids, with names that spell the knobs (``gpt2_l3_w256_s128_b8``).
* ``"placement"``: the GO/HDP papers' model sizes and batch sizes
  (``gnmt_paper_l8``), where one device runs out of memory or is much slower than a
  good placement on ``v100x4``/``h100x8``.

A spec's ``config`` holds the knobs it sets; the model's own defaults
(``CONFIG``/``VARIANTS`` of its module) fill in the rest when it is built, and the
index of the built graph records the whole merged config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import product
from types import MappingProxyType
from typing import Any

SPLITS = ("base", "variants", "placement")
# The family order of the corpus (the GO paper's six, then the pass-ordering paper's three).
FAMILIES = (
    "inception_v3",
    "amoebanet",
    "rnnlm",
    "gnmt",
    "transformer_xl",
    "wavenet",
    "gpt2",
    "bert",
    "resnet",
)
# The full networks' Inception-v3 (A, C, E) blocks and AmoebaNet stages (the models'
# BLOCKS and STAGES; repeated here so that listing specs needs no JAX).
INCEPTION_BLOCKS = (3, 4, 2)
AMOEBANET_STAGES = 3
# ResNet depth -> bottleneck blocks per stage.
RESNET_STAGES = {14: (1, 1, 1, 1), 26: (2, 2, 2, 2), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}


@dataclass(frozen=True)
class GraphSpec:
    """One graph outside the base corpus, before it is built.

    Attributes:
      name: unique name, the stem of its stored files (``[a-z0-9_]+``).
      family: model family (one of :data:`FAMILIES`).
      split: ``"variants"`` or ``"placement"``.
      variant: the size part of the name (``"l3_w256_s128_b8"``).
      form: ``"unrolled"``, ``"scan"`` or ``"none"`` (as :class:`Workload.form`).
      config: the hyper-parameters it sets over the family's defaults.
    """

    name: str
    family: str
    split: str
    variant: str
    form: str
    config: Mapping[str, Any] = field(default_factory=dict)


def _half_grid(*axes: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The half of the full grid whose axis indices sum to an even number (a balanced
    half-fraction: every pair of axes still meets in every combination of values)."""
    out = []
    for indices in product(*(range(len(a)) for a in axes)):
        if sum(indices) % 2 == 0:
            out.append(tuple(a[i] for a, i in zip(axes, indices, strict=True)))
    return out


def _spec(family: str, variant: str, config: dict, *, form: str = "none") -> GraphSpec:
    suffix = "" if form == "none" else f"_{form}"
    name = f"{family}_{variant}{suffix}"
    return GraphSpec(name, family, "variants", variant, form, MappingProxyType(config))


def _inception() -> list[GraphSpec]:
    """(A, C, E) block counts x width; image size and batch alternate. The full network's
    variants keep the names they had before the block counts were a knob."""
    out = []
    blocks_grid = ((1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1), INCEPTION_BLOCKS)
    grid = product(blocks_grid, (0.25, 0.5, 0.75, 1.0))
    for i, (blocks, width) in enumerate(grid):
        image, batch = (149, 224)[i % 2], (8, 16)[(i // 2) % 2]
        config: dict[str, Any] = {"width": width, "image": image, "batch": batch}
        variant = f"m{round(width * 1000)}_i{image}_b{batch}"
        if blocks != INCEPTION_BLOCKS:
            config["blocks"] = list(blocks)
            variant = "a{}c{}e{}_".format(*blocks) + variant
        out.append(_spec("inception_v3", variant, config))
    return out


def _amoebanet() -> list[GraphSpec]:
    """(stages, normal cells per stage) x filters; batch alternates. Three-stage
    variants keep the names they had before the stage count was a knob."""
    out = []
    grid = product(((1, 2), (1, 3), (2, 1), (2, 2), (AMOEBANET_STAGES, 1)), (16, 24, 32, 40))
    for i, ((stages, cells), filters) in enumerate(grid):
        batch = (16, 32)[i % 2]
        config: dict[str, Any] = {"cells": cells, "filters": filters, "batch": batch}
        variant = f"n{cells}_f{filters}_b{batch}"
        if stages != AMOEBANET_STAGES:
            config["stages"] = stages
            variant = f"s{stages}_{variant}"
        out.append(_spec("amoebanet", variant, config))
    return out


def _recurrent(
    family: str,
    layers: Sequence[int],
    steps: Sequence[int],
    hidden: Sequence[int],
    step_keys: Sequence[str],
) -> list[GraphSpec]:
    """Every (layers, steps) cell in both forms; widths cycle over the cells, batch 16 or
    32 alternates with the layers."""
    out = []
    forms = ("unrolled", "scan")
    for (li, n), (si, s), form in product(enumerate(layers), enumerate(steps), forms):
        h, b = hidden[(li + si) % len(hidden)], (16, 32)[li % 2]
        config = {"layers": n, "hidden": h, "batch": b, **dict.fromkeys(step_keys, s)}
        out.append(_spec(family, f"l{n}_h{h}_s{s}_b{b}", config, form=form))
    return out


def _transformer(family: str, seqs: Sequence[int], batches: Sequence[int]) -> list[GraphSpec]:
    """A half grid of layers x width x sequence length x batch; 64-wide heads."""
    out = []
    for layers, width, seq, batch in _half_grid((2, 3, 4, 6, 8, 12), (256, 512), seqs, batches):
        config: dict[str, Any] = {"layers": layers, "width": width, "heads": width // 64}
        if family == "gpt2":
            config.update(context=seq, batch=batch)
        elif family == "bert":
            config.update(length=seq, batch=batch, max_predictions=seq * 20 // 128)
        else:
            config.update(head_dim=64, inner=4 * width, segment=seq, memory=seq, batch=batch)
        out.append(_spec(family, f"l{layers}_w{width}_s{seq}_b{batch}", config))
    return out


def _wavenet() -> list[GraphSpec]:
    out = []
    for (si, stacks), (li, per_stack), residual in product(
        enumerate((1, 2, 3, 4)), enumerate((6, 8, 10)), (32, 64)
    ):
        samples = (2048, 4096)[(si + li) % 2]
        batch = (2, 4)[si % 2]
        config = {"stacks": stacks, "layers_per_stack": per_stack, "residual": residual,
                  "dilation_channels": residual, "skip": 4 * residual, "samples": samples,
                  "batch": batch}  # fmt: skip
        variant = f"s{stacks}_l{per_stack}_r{residual}_t{samples}_b{batch}"
        out.append(_spec("wavenet", variant, config))
    return out


def _resnet() -> list[GraphSpec]:
    out = []
    for (di, depth), (wi, width), (ii, image) in product(
        enumerate(RESNET_STAGES), enumerate((16, 32, 64)), enumerate((64, 128))
    ):
        batch = (8, 16)[(di + wi + ii) % 2]
        config = {"stages": list(RESNET_STAGES[depth]), "width": width, "image": image,
                  "batch": batch}  # fmt: skip
        out.append(_spec("resnet", f"{depth}_w{width}_i{image}_b{batch}", config))
    return out


def _paper(family: str, tag: str, config: dict, form: str = "none") -> GraphSpec:
    name, variant = f"{family}_paper_{tag}", f"paper_{tag}"
    return GraphSpec(name, family, "placement", variant, form, MappingProxyType(config))


# The GO and HDP papers' model sizes (hidden 2048 RNNLM at batch 64, hidden 1024 GNMT at
# batch 128, full-width Inception-v3, ...), as graphs here: unrolled recurrences, as the
# papers' TensorFlow graphs were. docs/rl.md reports which of them make one device out
# of memory or slower than the best heuristic placement in the simulator.
_PAPER = (
    ("rnnlm", "l2", {"layers": 2, "hidden": 2048, "batch": 64, "steps": 35}, "unrolled"),
    ("rnnlm", "l4", {"layers": 4, "hidden": 2048, "batch": 64, "steps": 35}, "unrolled"),
    ("rnnlm", "l8", {"layers": 8, "hidden": 2048, "batch": 64, "steps": 35}, "unrolled"),
    ("gnmt", "l2", {"layers": 2, "hidden": 1024, "batch": 128, "vocab": 32000,
                    "source_steps": 40, "target_steps": 40}, "unrolled"),
    ("gnmt", "l4", {"layers": 4, "hidden": 1024, "batch": 128, "vocab": 32000,
                    "source_steps": 40, "target_steps": 40}, "unrolled"),
    ("gnmt", "l8", {"layers": 8, "hidden": 1024, "batch": 128, "vocab": 32000,
                    "source_steps": 40, "target_steps": 40}, "unrolled"),
    ("transformer_xl", "l4", {"layers": 4, "width": 1024, "heads": 16, "head_dim": 64,
                              "inner": 4096, "segment": 512, "memory": 512, "batch": 32,
                              "vocab": 32768}, "none"),
    ("transformer_xl", "l8", {"layers": 8, "width": 1024, "heads": 16, "head_dim": 64,
                              "inner": 4096, "segment": 512, "memory": 512, "batch": 16,
                              "vocab": 32768}, "none"),
    ("inception_v3", "b64", {"width": 1.0, "image": 299, "batch": 64}, "none"),
    ("wavenet", "s4", {"stacks": 4, "layers_per_stack": 10, "residual": 64,
                       "dilation_channels": 64, "skip": 256, "samples": 16384,
                       "batch": 8}, "none"),
    ("amoebanet", "n6_f64", {"cells": 6, "filters": 64, "image": 32, "batch": 128}, "none"),
)  # fmt: skip


@cache
def _all() -> tuple[GraphSpec, ...]:
    out = [
        *_inception(),
        *_amoebanet(),
        *_recurrent("rnnlm", (1, 2, 3, 4), (20, 35, 50), (256, 512, 1024), ("steps",)),
        *_recurrent("gnmt", (2, 3, 4, 5), (12, 24, 36), (256, 512),
                    ("source_steps", "target_steps")),
        *_transformer("transformer_xl", (64, 128), (4, 8)),
        *_transformer("gpt2", (128, 256), (4, 8)),
        *_transformer("bert", (64, 128), (8, 16)),
        *_wavenet(),
        *_resnet(),
        *(_paper(*row) for row in _PAPER),
    ]  # fmt: skip
    order = {f: i for i, f in enumerate(FAMILIES)}
    out.sort(key=lambda s: (SPLITS.index(s.split), order[s.family]))  # stable: grid order
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise RuntimeError("duplicate variant names")
    return tuple(out)


def specs(split: str | None = None) -> tuple[GraphSpec, ...]:
    """The specs of ``split`` (``"variants"`` or ``"placement"``; None: both), in order."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
    return tuple(s for s in _all() if split is None or s.split == split)


@cache
def _by_name() -> dict[str, GraphSpec]:
    return {s.name: s for s in _all()}


def get_spec(name: str) -> GraphSpec | None:
    """The spec called ``name``, or None when no variant or placement graph has it."""
    return _by_name().get(name)


__all__ = ["FAMILIES", "RESNET_STAGES", "SPLITS", "GraphSpec", "get_spec", "specs"]
