"""Baselines by name, all behind one call signature.

Every method is called as ``method(graph, cluster, *, seed=0, budget=None) -> Decisions``.

Names: a placement, a scheduling and a fusion component joined by ``+`` in any order,
each kind at most once; a missing kind takes its default (``single-device``, ``fifo``,
``no-fusion``, i.e. :meth:`Decisions.default`'s). So ``"metis"`` is METIS placement with
FIFO order and no fusion, and ``"metis+critical-path+xla-cpu-like"`` sets all three.
:func:`combine` builds the same from keyword arguments. A search method
(``random-search``, ``simulated-annealing``, ``evolutionary``) searches all three at once
and stands alone; so does ``hdp``, the hierarchical placer trained by policy gradient
(:func:`hlo_go.baselines.hdp.run_hdp`), which searches placement only (FIFO, no
fusion). A search's ``budget`` is simulator evaluations (default 2,000). For
``priority-fusion`` the budget caps its refining simulations; other heuristics ignore it.

Components run in order placement → scheduling (given the placement) → fusion (given
both), so a critical-path schedule counts the transfers the placement implies, and
fusion only joins nodes on one device.

The registry knows every name but imports no search: :mod:`~hlo_go.baselines.search` and
:mod:`~hlo_go.baselines.hdp` import it and register their runners
(:func:`register_search`) when they load, which ``import hlo_go.baselines`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hlo_go.baselines import fusion as _fusion
from hlo_go.baselines import placement as _placement
from hlo_go.baselines import scheduling as _scheduling
from hlo_go.baselines.result import SearchResult
from hlo_go.decisions import Decisions
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster

KINDS = ("placement", "scheduling", "fusion", "search")
DEFAULTS = {"placement": "single-device", "scheduling": "fifo", "fusion": "no-fusion"}

PLACEMENT: dict[str, Callable[..., np.ndarray]] = {
    "single-device": _placement.single_device_placement,
    "round-robin": _placement.round_robin_placement,
    "expert": _placement.expert_placement,
    "metis": _placement.metis_placement,
    "heft": _placement.heft_placement,
    "m-etf": _placement.m_etf_placement,
    "m-sct": _placement.m_sct_placement,
}
SCHEDULING: dict[str, Callable[..., np.ndarray]] = {
    "fifo": _scheduling.fifo_priority,
    "critical-path": _scheduling.critical_path_priority,
}
FUSION: dict[str, Callable[..., np.ndarray]] = {
    "no-fusion": _fusion.no_fusion_priority,
    "xla-cpu-like": _fusion.xla_cpu_like_priority,
    "fuse-all-legal": _fusion.fuse_all_legal_priority,
    "priority-fusion": _fusion.priority_fusion_priority,
}
SEARCH: tuple[str, ...] = ("random-search", "simulated-annealing", "evolutionary", "hdp")
_TABLES = {"placement": PLACEMENT, "scheduling": SCHEDULING, "fusion": FUSION}


class SearchRunner(Protocol):
    """How a registered search runs: ``runner(graph, cluster, *, budget, time_limit, seed)``."""

    def __call__(
        self,
        graph: OpGraph,
        cluster: Cluster,
        *,
        budget: int | None,
        time_limit: float | None,
        seed: int,
    ) -> SearchResult: ...


_RUNNERS: dict[str, SearchRunner] = {}


def register_search(name: str, runner: SearchRunner) -> None:
    """Makes ``runner`` what the search method ``name`` runs.

    Args:
      name: one of :data:`SEARCH`.
      runner: called as ``runner(graph, cluster, budget=, time_limit=, seed=)``.

    Raises:
      ValueError: ``name`` is not a search name.
    """
    if name not in SEARCH:
        raise ValueError(f"{name!r} is not a search method; searches: {', '.join(SEARCH)}")
    _RUNNERS[name] = runner


class UnknownMethodError(KeyError, HloGoError):
    """A method name that names no baseline (the message lists the known names)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Method:
    """A named baseline: call it as ``method(graph, cluster, *, seed=0, budget=None)``.

    Attributes:
      name: the name it was asked for by (components in placement, scheduling, fusion
        order).
      kind: ``"heuristic"`` or ``"search"``.
      placement: the placement component (``""`` for a search).
      scheduling: the scheduling component (``""`` for a search).
      fusion: the fusion component (``""`` for a search).
    """

    name: str
    kind: str
    placement: str = ""
    scheduling: str = ""
    fusion: str = ""

    def __call__(
        self, graph: OpGraph, cluster: Cluster, *, seed: int = 0, budget: int | None = None
    ) -> Decisions:
        """Runs the method.

        Args:
          graph: an OpGraph.
          cluster: the cluster.
          seed: the random seed (METIS's, a search's).
          budget: simulator evaluations for a search; refining simulations for
            ``priority-fusion``; ignored otherwise.

        Returns:
          Decisions, validated against the graph and cluster.
        """
        if self.kind == "search":
            return self.search(graph, cluster, seed=seed, budget=budget).best
        placement = PLACEMENT[self.placement](graph, cluster, seed=seed)
        schedule = SCHEDULING[self.scheduling](graph, cluster, placement)
        if self.fusion == "priority-fusion":
            fusion = FUSION[self.fusion](graph, cluster, placement, schedule, budget=budget)
        else:
            fusion = FUSION[self.fusion](graph, cluster, placement, schedule)
        decisions = Decisions(
            np.asarray(placement, dtype=np.int32),
            np.asarray(schedule, dtype=np.float32),
            np.asarray(fusion, dtype=np.float32),
        )
        return decisions.validate(graph, cluster.num_devices)

    def search(
        self,
        graph: OpGraph,
        cluster: Cluster,
        *,
        seed: int = 0,
        budget: int | None = None,
        time_limit: float | None = None,
    ) -> SearchResult:
        """Runs a search method with its convergence record: ``hdp`` by
        :func:`~hlo_go.baselines.hdp.run_hdp`, the others by
        :func:`~hlo_go.baselines.search.run_search` (default starts), as registered
        (:func:`register_search`).

        Args:
          graph: an OpGraph.
          cluster: the cluster.
          seed: the random seed.
          budget: simulator evaluations (default 2,000).
          time_limit: wall-clock seconds, or None for no limit.

        Returns:
          The :class:`~hlo_go.baselines.search.SearchResult`.

        Raises:
          ValueError: the method is not a search, or a budget below 1.
          UnknownMethodError: no runner is registered for it (its module is not loaded).
        """
        if self.kind != "search":
            raise ValueError(f"{self.name!r} is a heuristic, not a search")
        runner = _RUNNERS.get(self.name)
        if runner is None:
            raise UnknownMethodError(
                f"search {self.name!r} has no registered runner; import hlo_go.baselines"
            )
        return runner(graph, cluster, budget=budget, time_limit=time_limit, seed=seed)


def names(kind: str | None = None) -> list[str]:
    """The component and search names.

    Args:
      kind: ``"placement"``, ``"scheduling"``, ``"fusion"`` or ``"search"``; None for all.

    Returns:
      Names in registry order.

    Raises:
      ValueError: unknown kind.
    """
    if kind is None:
        return [*PLACEMENT, *SCHEDULING, *FUSION, *SEARCH]
    if kind == "search":
        return list(SEARCH)
    if kind not in _TABLES:
        raise ValueError(f"unknown method kind {kind!r}; kinds: {', '.join(KINDS)}")
    return list(_TABLES[kind])


def _kind_of(part: str) -> str | None:
    for kind, table in _TABLES.items():
        if part in table:
            return kind
    return "search" if part in SEARCH else None


def _known() -> str:
    return "; ".join(f"{kind}: {', '.join(names(kind))}" for kind in KINDS)


def get(name: str) -> Method:
    """The method a name stands for (module docstring for the ``a+b+c`` form).

    Args:
      name: e.g. ``"heft"``, ``"metis+critical-path+xla-cpu-like"``, ``"evolutionary"``.

    Returns:
      The :class:`Method`.

    Raises:
      UnknownMethodError: a part names no method, a kind appears twice, or a search is
        combined with something else; the message says which part and lists the names.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownMethodError(f"method name must be a non-empty string, got {name!r}")
    parts = [p.strip() for p in name.split("+")]
    chosen: dict[str, str] = {}
    for part in parts:
        kind = _kind_of(part)
        if kind is None:
            raise UnknownMethodError(
                f"unknown baseline {part!r}" + (f" in {name!r}" if len(parts) > 1 else "")
                + f"; known: {_known()}"
            )  # fmt: skip
        if kind in chosen:
            raise UnknownMethodError(
                f"{name!r} names two {kind} methods ({chosen[kind]!r} and {part!r}); "
                "combine at most one placement, one scheduling and one fusion method"
            )
        chosen[kind] = part
    if "search" in chosen:
        if len(parts) > 1:
            raise UnknownMethodError(
                f"{chosen['search']!r} searches placement, scheduling and fusion together "
                f"and cannot be combined with other methods (got {name!r})"
            )
        return Method(chosen["search"], "search")
    return combine(**chosen, name_parts=[chosen[k] for k in DEFAULTS if k in chosen])


def combine(
    *,
    placement: str = DEFAULTS["placement"],
    scheduling: str = DEFAULTS["scheduling"],
    fusion: str = DEFAULTS["fusion"],
    name_parts: list[str] | None = None,
) -> Method:
    """A heuristic made of one placement, one scheduling and one fusion component.

    Args:
      placement: a name from ``names("placement")``.
      scheduling: a name from ``names("scheduling")``.
      fusion: a name from ``names("fusion")``.
      name_parts: the parts to name the method by (default all three).

    Returns:
      The :class:`Method`, named ``"placement+scheduling+fusion"``.

    Raises:
      UnknownMethodError: a component is unknown for its kind.
    """
    for kind, value in (("placement", placement), ("scheduling", scheduling), ("fusion", fusion)):
        if value not in _TABLES[kind]:
            raise UnknownMethodError(
                f"unknown {kind} method {value!r}; known {kind} methods: {', '.join(_TABLES[kind])}"
            )
    parts = name_parts if name_parts else [placement, scheduling, fusion]
    return Method("+".join(parts), "heuristic", placement, scheduling, fusion)
