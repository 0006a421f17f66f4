"""Reading the stored corpus: the index and the gzip-compressed HLO texts, of the
committed base graphs and of the cached variant and placement graphs."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from hlo_corpus.variants import FAMILIES, SPLITS, GraphSpec, get_spec, specs
from hlo_go.corpus.cache import VariantNotBuiltError, build_command, variants_root
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


def _splits(split: str | Iterable[str]) -> tuple[str, ...]:
    wanted = (*SPLITS,) if split == "all" else (split,) if isinstance(split, str) else (*split,)
    unknown = [s for s in wanted if s not in SPLITS]
    if unknown:
        raise ValueError(f"unknown split(s) {unknown}; splits are {', '.join(SPLITS)} or 'all'")
    return wanted


def names(
    root: Path | None = None,
    *,
    split: str | Iterable[str] = "base",
    family: str | None = None,
) -> list[str]:
    """Names of the corpus graphs, in corpus order.

    Args:
      root: corpus directory of the base graphs (default: the ``hlo_corpus`` package).
      split: ``"base"`` (the committed graphs, the default), ``"variants"`` (size and
        shape variants for training), ``"placement"`` (paper-scale placement settings),
        ``"all"``, or several of them. Variant and placement graphs are listed whether
        or not they are built (see :func:`is_built`).
      family: only this family (e.g. ``"gnmt"``).

    Raises:
      ValueError: unknown split or family.
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families are {', '.join(FAMILIES)}")
    out = []
    for part in _splits(split):
        if part == "base":
            graphs = index(root)["graphs"]
            out += [n for n, e in graphs.items() if family in (None, e["family"])]
        else:
            out += [s.name for s in specs(part) if family in (None, s.family)]
    return out


def _unknown(name: str, root: Path | None) -> UnknownGraphError:
    known = ", ".join(index(root)["graphs"]) or "none: run `hlo-go corpus build`"
    return UnknownGraphError(
        f"unknown corpus graph {name!r}; known graphs: {known}; and the variant and "
        "placement graphs of `hlo_go.corpus.names(split='all')`"
    )


def family(name: str, root: Path | None = None) -> str:
    """The model family of graph ``name`` (any split; nothing is built or read but the
    base index).

    Raises:
      UnknownGraphError: no graph has that name.
    """
    spec = get_spec(name)
    if spec is not None:
        return spec.family
    graphs = index(root)["graphs"]
    if name not in graphs:
        raise _unknown(name, root)
    return graphs[name]["family"]


def split_of(name: str, root: Path | None = None) -> str:
    """The split of graph ``name``: ``"base"``, ``"variants"`` or ``"placement"``.

    Raises:
      UnknownGraphError: no graph has that name.
    """
    spec = get_spec(name)
    if spec is not None:
        return spec.split
    if name not in index(root)["graphs"]:
        raise _unknown(name, root)
    return "base"


def entry_matches_spec(spec: GraphSpec, entry: dict[str, Any]) -> bool:
    """Whether a cached index entry was built from ``spec`` (its config and form)."""
    config = entry.get("config", {})
    return entry.get("form") == spec.form and all(
        config.get(k) == (list(v) if isinstance(v, tuple) else v) for k, v in spec.config.items()
    )


def _cached_info(spec: GraphSpec, root: Path | None) -> dict[str, Any]:
    where = root or variants_root()
    graphs = index(where)["graphs"]
    entry = graphs.get(spec.name)
    if entry is None:
        raise VariantNotBuiltError(
            f"{spec.split} graph {spec.name!r} is not built in {where}; build it with "
            f"`{build_command(spec.split, spec.name)}` or the whole split with "
            f"`{build_command(spec.split)}`"
        )
    if not entry_matches_spec(spec, entry):
        raise VariantNotBuiltError(
            f"{spec.split} graph {spec.name!r} in {where} was built from another config "
            f"than hlo_corpus.variants gives it now; rebuild it with "
            f"`{build_command(spec.split, spec.name)}`"
        )
    return entry


def info(name: str, root: Path | None = None) -> dict[str, Any]:
    """The index entry of graph ``name``: family, variant, form, config, per-stage
    counts and sha256, flops and bytes of the pre-fusion module, jax version.

    Args:
      name: a graph name of any split.
      root: the directory holding it: the corpus directory for a base graph (default
        the ``hlo_corpus`` package), the cache for a variant or placement graph
        (default :func:`~hlo_go.corpus.cache.variants_root`).

    Raises:
      UnknownGraphError: no graph has that name.
      VariantNotBuiltError: a variant or placement graph that is not built (or was
        built from another config); the message says how to build it.
    """
    spec = get_spec(name)
    if spec is not None:
        return _cached_info(spec, root)
    graphs = index(root)["graphs"]
    if name not in graphs:
        raise _unknown(name, root)
    return graphs[name]


def is_built(name: str, root: Path | None = None) -> bool:
    """Whether graph ``name`` can be loaded (always True for a base graph in the index).

    Raises:
      UnknownGraphError: no graph has that name.
    """
    try:
        path(name, "prefusion", root)
        path(name, "unoptimized", root)
    except VariantNotBuiltError:
        return False
    return True


def _check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")


def path(name: str, stage: str = "unoptimized", root: Path | None = None) -> Path:
    """The stored ``.hlo.gz`` file of graph ``name`` at ``stage`` (``root`` as in :func:`info`).

    Raises:
      UnknownGraphError, VariantNotBuiltError: as :func:`info`.
      ValueError: unknown stage.
    """
    _check_stage(stage)
    info(name, root)
    spec = get_spec(name)
    if spec is None:
        return (root or corpus_root()) / file_name(name, stage)
    where = (root or variants_root()) / file_name(name, stage)
    if not where.exists():
        raise VariantNotBuiltError(
            f"{where} is missing; rebuild it with `{build_command(spec.split, name)}`"
        )
    return where


def text(name: str, stage: str = "unoptimized", root: Path | None = None) -> str:
    """The stored HLO text of graph ``name`` at ``stage`` ("unoptimized" or "prefusion")."""
    with gzip.open(path(name, stage, root), "rb") as f:
        return f.read().decode("utf-8")


def load(name: str, stage: str = "unoptimized", root: Path | None = None) -> HloModule:
    """The stored graph ``name`` at ``stage``, parsed.

    Args:
      name: a corpus graph name of any split (see :func:`names`).
      stage: ``"unoptimized"`` (JAX's lowering) or ``"prefusion"`` (XLA-optimized,
        unfused, unscheduled).
      root: the directory holding it, as in :func:`info`.

    Raises:
      UnknownGraphError: no graph has that name.
      VariantNotBuiltError: a variant or placement graph that is not built; the
        message names the command that builds it.
      ValueError: unknown stage.
    """
    return parse_hlo(text(name, stage, root), filename=f"<corpus {name} {stage}>")


def total_size(out_dir: Path | str | None = None) -> int:
    """Bytes of the stored corpus (data files and index)."""
    out = Path(out_dir) if out_dir is not None else corpus_root()
    files = [out / "index.json", *sorted((out / "data").glob("*.hlo.gz"))]
    return sum(f.stat().st_size for f in files if f.exists())
