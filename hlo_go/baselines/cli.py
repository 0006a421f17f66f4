"""Deprecated: the ``hlo-go baseline`` command moved to :mod:`hlo_go.cli.baseline`;
:func:`load_cluster` is :func:`hlo_go.sources.load_cluster`, and :func:`load_graph`
:func:`hlo_go.sources.load_graph` (which returns ``(name, graph)``).

Kept for one release: importing a name from here warns ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings
from typing import Any


def _load_graph(source: str, *, stage: str = "prefusion") -> tuple[Any, str]:
    """The old ``(graph, file name)`` order of :func:`hlo_go.sources.load_graph`."""
    from pathlib import Path

    from hlo_go.sources import load_graph

    _, graph = load_graph(source, stage)
    return graph, Path(source).name if Path(source).is_file() else source


def __getattr__(name: str) -> Any:
    if name == "load_cluster":
        from hlo_go.sources import load_cluster as moved
    elif name == "load_graph":
        moved = _load_graph
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"hlo_go.baselines.cli.{name} moved to hlo_go.sources.{name}; the old name goes in "
        "the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return moved
