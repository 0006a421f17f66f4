"""The workload corpus: stored HLO modules of the paper's models, and their index.

Public names::

    names() -> list[str]                  info(name) -> dict (the index entry)
    load(name, stage) -> HloModule        text(name, stage) -> str
    build(names=None, *, progress=True)   regenerate files and index.json
    STAGES = ("unoptimized", "prefusion") UnknownGraphError (a KeyError)

Stages: ``"unoptimized"`` is JAX's lowering (``lowered.as_text(dialect="hlo")``);
``"prefusion"`` is XLA's optimized module with fusion disabled, captured before
scheduling — the graph that fusion, scheduling and placement decisions apply to.
The generators live in the ``hlo_corpus`` package.
"""

from hlo_go.corpus.build import BuiltGraph, build, build_one, gzip_bytes, total_size
from hlo_go.corpus.sanitize import relative_path, relocate
from hlo_go.corpus.store import (
    STAGES,
    UnknownGraphError,
    corpus_root,
    index,
    info,
    load,
    names,
    path,
    text,
)

__all__ = [
    "STAGES",
    "BuiltGraph",
    "UnknownGraphError",
    "build",
    "build_one",
    "corpus_root",
    "gzip_bytes",
    "index",
    "info",
    "load",
    "names",
    "path",
    "relative_path",
    "relocate",
    "text",
    "total_size",
]
