"""The workload corpus as stored: HLO modules of the paper's models, and their index.

Public names::

    names() -> list[str]                  info(name) -> dict (the index entry)
    load(name, stage) -> HloModule        text(name, stage) -> str
    path(name, stage) -> Path             index() -> dict (the whole index.json)
    STAGES = ("unoptimized", "prefusion") UnknownGraphError (a KeyError)

Stages: ``"unoptimized"`` is JAX's lowering (``lowered.as_text(dialect="hlo")``);
``"prefusion"`` is XLA's optimized module with fusion disabled, captured before
scheduling — the graph that fusion, scheduling and placement decisions apply to.

This package only reads (it imports :mod:`hlo_go.hlo` and nothing above it). The
generators live in the ``hlo_corpus`` package; regenerating the stored files is
:mod:`hlo_go.corpus_build` (``hlo-go corpus build``), which needs JAX and :mod:`hlo_go.xla`.
"""

from hlo_go.corpus.sanitize import relative_path as relative_path
from hlo_go.corpus.sanitize import relocate as relocate
from hlo_go.corpus.store import (
    STAGES,
    UnknownGraphError,
    index,
    info,
    load,
    names,
    path,
    text,
)
from hlo_go.corpus.store import corpus_root as corpus_root
from hlo_go.corpus.store import total_size as total_size

__all__ = [
    "STAGES",
    "UnknownGraphError",
    "index",
    "info",
    "load",
    "names",
    "path",
    "text",
]
