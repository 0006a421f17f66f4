"""Reading the stored corpus: the index and the gzip-compressed HLO texts."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from hlo_go.errors import HloGoError
from hlo_go.hlo import HloModule, parse_hlo

# "unoptimized": `lowered.as_text(dialect="hlo")`; "prefusion": XLA's optimized module
# with fusion disabled, captured before scheduling.
STAGES = ("unoptimized", "prefusion")


class UnknownGraphError(KeyError, HloGoError):
    """No corpus graph has this name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def corpus_root() -> Path:
    """The ``hlo_corpus`` package directory (holds ``index.json`` and ``data/``).

    Found through the import system rather than ``hlo_corpus.ROOT``, so that it also
    works where an (old) editable install exposes ``hlo_corpus`` as a namespace package.
    """
    import hlo_corpus

    return Path(next(iter(hlo_corpus.__path__))).resolve()


def file_name(name: str, stage: str) -> str:
    """Stored file of ``name`` at ``stage``, relative to the corpus root."""
    return f"data/{name}.{stage}.hlo.gz"


@lru_cache(maxsize=4)
def _read_index(path: Path, mtime_ns: int) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def index(root: Path | None = None) -> dict[str, Any]:
    """The whole ``index.json`` (``{"format", "jax_version", ..., "graphs": {name: entry}}``)."""
    path = (root or corpus_root()) / "index.json"
    if not path.exists():
        return {"graphs": {}}
    return _read_index(path, path.stat().st_mtime_ns)


def names(root: Path | None = None) -> list[str]:
    """Names of the stored graphs, in corpus order."""
    return list(index(root)["graphs"])


def info(name: str, root: Path | None = None) -> dict[str, Any]:
    """The index entry of graph ``name``: family, variant, form, config, per-stage
    counts and sha256, flops and bytes of the pre-fusion module, jax version.

    Raises:
      UnknownGraphError: no stored graph has that name.
    """
    graphs = index(root)["graphs"]
    if name not in graphs:
        known = ", ".join(graphs) or "none: run `hlo-go corpus build`"
        raise UnknownGraphError(f"unknown corpus graph {name!r}; known graphs: {known}")
    return graphs[name]


def _check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")


def path(name: str, stage: str = "unoptimized", root: Path | None = None) -> Path:
    """The stored ``.hlo.gz`` file of graph ``name`` at ``stage``."""
    _check_stage(stage)
    info(name, root)
    return (root or corpus_root()) / file_name(name, stage)


def text(name: str, stage: str = "unoptimized", root: Path | None = None) -> str:
    """The stored HLO text of graph ``name`` at ``stage`` ("unoptimized" or "prefusion")."""
    with gzip.open(path(name, stage, root), "rb") as f:
        return f.read().decode("utf-8")


def load(name: str, stage: str = "unoptimized", root: Path | None = None) -> HloModule:
    """The stored graph ``name`` at ``stage``, parsed.

    Args:
      name: a corpus graph name (see :func:`names`).
      stage: ``"unoptimized"`` (JAX's lowering) or ``"prefusion"`` (XLA-optimized,
        unfused, unscheduled).
      root: corpus directory (default: the installed ``hlo_corpus`` package).

    Raises:
      UnknownGraphError: no stored graph has that name.
      ValueError: unknown stage.
    """
    return parse_hlo(text(name, stage, root), filename=f"<corpus {name} {stage}>")


def total_size(out_dir: Path | str | None = None) -> int:
    """Bytes of the stored corpus (data files and index)."""
    out = Path(out_dir) if out_dir is not None else corpus_root()
    files = [out / "index.json", *sorted((out / "data").glob("*.hlo.gz"))]
    return sum(f.stat().st_size for f in files if f.exists())
