"""The corpus's graphs, in order: the GO paper's six families, then the pass-ordering
paper's three; and the workloads of the variant and placement specs
(:mod:`hlo_corpus.variants`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import Any

from hlo_corpus.models import (
    amoebanet,
    bert,
    gnmt,
    gpt2,
    inception,
    resnet,
    rnnlm,
    transformer_xl,
    wavenet,
)
from hlo_corpus.variants import FAMILIES as FAMILIES
from hlo_corpus.variants import GraphSpec, specs
from hlo_corpus.workload import StepAndArgs, Workload

_MODULES = (inception, amoebanet, rnnlm, gnmt, transformer_xl, wavenet, gpt2, bert, resnet)


@cache
def _workloads() -> tuple[Workload, ...]:
    out = tuple(w for module in _MODULES for w in module.workloads())
    names = [w.name for w in out]
    if len(set(names)) != len(names):
        raise RuntimeError(f"duplicate workload names in {names}")
    return out


def all_workloads() -> list[Workload]:
    """Every workload, in corpus order."""
    return list(_workloads())


# family -> make(name, spec config) through the model module's own ``make`` (its
# ``overrides`` replace the module's defaults; a named base variant for the image models).
_MAKERS: dict[str, Callable[[str, dict[str, Any]], StepAndArgs]] = {
    "inception_v3": lambda name, c: inception.make(name, "base", c),
    "amoebanet": lambda name, c: amoebanet.make(name, "n2_f16", c),
    "rnnlm": lambda name, c: rnnlm.make(name, c["layers"], c["form"], c),
    "gnmt": lambda name, c: gnmt.make(name, c["layers"], c["form"], c),
    "transformer_xl": lambda name, c: transformer_xl.make(name, c["layers"], c),
    "wavenet": lambda name, c: wavenet.make(name, c["stacks"], c),
    "gpt2": lambda name, c: gpt2.make(name, c["layers"], c),
    "bert": lambda name, c: bert.make(name, c["layers"], c),
    "resnet": lambda name, c: resnet.make(name, "26", {**c, "stages": tuple(c["stages"])}),
}
# family -> the defaults a spec's config may override.
_DEFAULTS: dict[str, Callable[[], dict[str, Any]]] = {
    "inception_v3": lambda: {**inception.VARIANTS["base"], "blocks": list(inception.BLOCKS)},
    "amoebanet": lambda: {**amoebanet.VARIANTS["n2_f16"], "stages": amoebanet.STAGES},
    "rnnlm": lambda: {**rnnlm.CONFIG, "layers": 0},
    "gnmt": lambda: {**gnmt.CONFIG, "layers": 0},
    "transformer_xl": lambda: {**transformer_xl.CONFIG, "layers": 0},
    "wavenet": lambda: {**wavenet.CONFIG, "stacks": 0},
    "gpt2": lambda: {**gpt2.CONFIG, "layers": 0},
    "bert": lambda: {**bert.CONFIG, "layers": 0},
    "resnet": lambda: {**resnet.VARIANTS["26"], "stages": []},
}


def spec_workload(spec: GraphSpec) -> Workload:
    """The workload of a variant or placement spec.

    Raises:
      ValueError: the spec sets a key its family's model does not have.
    """
    defaults = _DEFAULTS[spec.family]()
    unknown = sorted(set(spec.config) - set(defaults))
    if unknown:
        raise ValueError(f"{spec.name}: unknown {spec.family} config keys {unknown}")
    config = {**defaults, **spec.config}
    if isinstance(config.get("stages"), tuple):
        config["stages"] = list(config["stages"])
    make = partial(_MAKERS[spec.family], spec.name, {**config, "form": spec.form})
    return Workload(spec.name, spec.family, spec.variant, spec.form, make, config)


@cache
def _extra_workloads() -> tuple[Workload, ...]:
    return tuple(spec_workload(s) for s in specs())


def extra_workloads(split: str | None = None) -> list[Workload]:
    """The workloads of the ``"variants"`` or ``"placement"`` split (None: both), in order."""
    wanted = {s.name for s in specs(split)}
    return [w for w in _extra_workloads() if w.name in wanted]
