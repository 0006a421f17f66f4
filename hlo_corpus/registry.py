"""The corpus's graphs, in order: the GO paper's six families, then the pass-ordering
paper's three."""

from __future__ import annotations

from functools import cache

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
from hlo_corpus.workload import Workload

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
