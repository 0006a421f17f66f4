"""What a command line names: HLO files or corpus graphs, clusters and decision files.

* :func:`load_module`: an HLO file (``.hlo``, ``.hlo.gz``, ``.txt``) or a corpus graph
  name (a given stage), with a description of which;
* :func:`load_graph`: the same as ``(name, OpGraph)``;
* :func:`load_cluster`: a cluster preset name or a ``.toml`` / ``.json`` cluster file;
* :func:`load_decisions`: per-node decisions from a ``.npz`` or ``.json`` file.

The ``hlo-go`` command (:mod:`hlo_go.cli`), :mod:`hlo_go.evaluate` and the experiments
read their inputs through these functions, so every command names inputs alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.hlo import HloModule

__all__ = ["DECISION_FIELDS", "input_name", "load_cluster", "load_decisions", "load_graph"]
__all__ += ["load_module"]

DECISION_FIELDS: dict[str, type] = {
    "placement": np.int32,
    "schedule_priority": np.float32,
    "fusion_priority": np.float32,
}
"""The fields a decisions file may hold, with the dtype each is read as."""


def input_name(source: str) -> str:
    """The name an input is reported under: a file's name without its HLO suffixes, or
    the corpus graph name.

    Args:
      source: a file path or a corpus graph name.

    Returns:
      e.g. ``"model"`` for ``dir/model.hlo.gz``.
    """
    path = Path(source)
    if path.is_file():
        return path.name.removesuffix(".gz").removesuffix(".hlo").removesuffix(".txt")
    return source


def load_module(source: str, stage: str = "prefusion") -> tuple[HloModule, str]:
    """An HLO file, or the given stage of a corpus graph; with a description of which.

    Args:
      source: a file path or a corpus graph name.
      stage: the corpus stage of a corpus graph name.

    Returns:
      ``(module, description)``: the description is the path, or
      ``"corpus NAME (STAGE)"``.

    Raises:
      FileNotFoundError: ``source`` is neither a file nor a corpus graph name.
      HloParseError: malformed HLO text (``file:line:column``).
    """
    from hlo_go.hlo import load_hlo

    path = Path(source)
    if path.is_file():
        return load_hlo(path), str(path)
    from hlo_go import corpus

    try:
        return corpus.load(source, stage), f"corpus {source} ({stage})"
    except KeyError:
        raise FileNotFoundError(
            f"{source!r} is neither a file nor a corpus graph (see `hlo-go corpus list`)"
        ) from None


def load_graph(source: str, stage: str = "prefusion") -> tuple[str, OpGraph]:
    """``(name, graph)`` of an HLO file or a corpus graph name.

    Args:
      source: a file path or a corpus graph name.
      stage: the corpus stage of a corpus graph name.

    Returns:
      The name (:func:`input_name`) and the graph.

    Raises:
      FileNotFoundError: neither a file nor a corpus graph.
      HloParseError: malformed HLO text.
    """
    from hlo_go.graph import build_graph

    module, _ = load_module(source, stage)
    return input_name(source), build_graph(module)


def load_cluster(spec: str) -> Any:
    """A cluster from a preset name or a ``.toml`` / ``.json`` cluster file.

    Args:
      spec: the preset name (:func:`hlo_go.sim.names`) or the file.

    Returns:
      The :class:`~hlo_go.sim.Cluster`.

    Raises:
      KeyError: an unknown preset (the message lists them).
      ValueError, OSError: an unreadable cluster file.
    """
    from hlo_go.sim import get_cluster
    from hlo_go.sim import load_cluster as load_file

    if Path(spec).suffix in (".toml", ".json"):
        return load_file(spec)
    return get_cluster(spec)


def load_decisions(path: str | Path, graph: OpGraph) -> Decisions:
    """Reads decisions for a graph from a ``.npz`` or ``.json`` file, checked before any
    cast (:func:`hlo_go.decisions.load_decisions`).

    Args:
      path: the file; arrays or lists of N values, or single numbers, under the names of
        the decision fields. Missing fields take :meth:`Decisions.default`'s values.
      graph: the graph they are for.

    Returns:
      The decisions (not yet validated against a cluster).

    Raises:
      DecisionsError: an unreadable file, an unknown field, a wrong length, a value of
        the wrong type or out of range (a ``ValueError``).
    """
    from hlo_go.decisions import load_decisions as load

    return load(path, graph)
