"""The workload corpus as stored: HLO modules of the paper's models, and their index.

Public names::

    names(*, split="base", family=None) -> list[str]    info(name) -> dict (the index entry)
    load(name, stage) -> HloModule        text(name, stage) -> str
    path(name, stage) -> Path             index() -> dict (the whole index.json)
    family(name) -> str                   split_of(name) -> str     is_built(name) -> bool
    STAGES = ("unoptimized", "prefusion") SPLITS = ("base", "variants", "placement")
    UnknownGraphError (a KeyError)        VariantNotBuiltError (a FileNotFoundError)
    variants_root() -> Path (the cache of the variant and placement graphs)

Splits: ``"base"`` is the 30 committed graphs; ``"variants"`` (size and shape variants of
every family, for training) and ``"placement"`` (the GO paper's model sizes) are defined
by :mod:`hlo_corpus.variants` and built on demand into a per-jax-version cache
(``python -m hlo_go.corpus_build --variants --jobs N``); loading one that is not built
raises :class:`VariantNotBuiltError` naming that command.

Stages: ``"unoptimized"`` is JAX's lowering (``lowered.as_text(dialect="hlo")``);
``"prefusion"`` is XLA's optimized module with fusion disabled, captured before
scheduling — the graph that fusion, scheduling and placement decisions apply to.

This package only reads (it imports :mod:`hlo_go.hlo` and nothing above it). The
generators live in the ``hlo_corpus`` package; regenerating the stored files is
:mod:`hlo_go.corpus_build` (``hlo-go corpus build``), which needs JAX and :mod:`hlo_go.xla`.
"""

from hlo_corpus.variants import SPLITS
from hlo_go.corpus.cache import VariantNotBuiltError, variants_root
from hlo_go.corpus.sanitize import relative_path as relative_path
from hlo_go.corpus.sanitize import relocate as relocate
from hlo_go.corpus.store import (
    STAGES,
    UnknownGraphError,
    family,
    index,
    info,
    is_built,
    load,
    names,
    path,
    split_of,
    text,
)
from hlo_go.corpus.store import corpus_root as corpus_root
from hlo_go.corpus.store import total_size as total_size

__all__ = [
    "SPLITS",
    "STAGES",
    "UnknownGraphError",
    "VariantNotBuiltError",
    "family",
    "index",
    "info",
    "is_built",
    "load",
    "names",
    "path",
    "split_of",
    "text",
    "variants_root",
]
