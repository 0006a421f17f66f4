"""The workload corpus: Flax training steps of the GO and pass-ordering papers'
models, and their stored HLO modules.

Public names::

    DATA_DIR, INDEX_PATH         where the gzip-compressed modules and index.json live
    workloads() -> list[Workload]  every graph's generator, in corpus order (imports Flax)
    get_workload(name) -> Workload

Read stored graphs with :mod:`hlo_go.corpus` (``load``, ``text``, ``info``); rebuild
them with ``hlo-go corpus build``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hlo_corpus.workload import Workload

ROOT = Path(__file__).resolve().parent
DATA_DIR = ROOT / "data"
INDEX_PATH = ROOT / "index.json"


def workloads() -> list[Workload]:
    """Every corpus workload, in corpus order (imports the Flax models on first use)."""
    from hlo_corpus.registry import all_workloads

    return all_workloads()


def get_workload(name: str) -> Workload:
    """The workload called ``name`` (KeyError if there is none)."""
    for w in workloads():
        if w.name == name:
            return w
    raise KeyError(name)


__all__ = ["DATA_DIR", "INDEX_PATH", "ROOT", "get_workload", "workloads"]
