"""GO results next to the baselines (:mod:`hlo_go.baselines`): the CLI's and benchmark's tables.

The comparison is against the non-search baselines by default (the heuristics of
:data:`hlo_go.baselines.report.STANDARD_METHODS`: one device, XLA-like and priority
fusion, critical-path scheduling, round-robin / expert / METIS / HEFT / m-ETF / m-SCT
placement); searches can be added by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rich.table import Table

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster


class MethodTime(NamedTuple):
    """One method's simulated result on one graph.

    Attributes:
      method: its name (``GO ...`` for the learned policy).
      step_time: seconds.
      oom: out of memory.
      seconds: wall-clock seconds the method took to decide.
    """

    method: str
    step_time: float
    oom: bool
    seconds: float


def heuristic_names() -> list[str]:
    """The non-search methods of the standard baseline line-up."""
    from hlo_go.baselines import get
    from hlo_go.baselines.report import STANDARD_METHODS

    return [m for m in STANDARD_METHODS if get(m).kind != "search"]


def run_baselines(
    graph: OpGraph,
    cluster: Cluster,
    methods: Sequence[str] | None = None,
    *,
    seed: int = 0,
    budget: int | None = None,
    time_limit: float | None = None,
    decisions_out: list[Decisions] | None = None,
) -> list[MethodTime]:
    """Runs baselines on a graph and simulates their decisions.

    Args:
      graph: the graph.
      cluster: the cluster.
      methods: baseline names (default :func:`heuristic_names`).
      seed: their seed.
      budget: a search's evaluations.
      time_limit: a search's wall-clock limit, seconds.
      decisions_out: if given, each method's decisions are appended to it, in order.

    Returns:
      One :class:`MethodTime` per method, in order.
    """
    from hlo_go.baselines.report import run_method

    rows = []
    for method in heuristic_names() if methods is None else methods:
        row = run_method(
            graph, cluster, method, seed=seed, budget=budget, time_limit=time_limit,
            decisions_out=decisions_out,
        )  # fmt: skip
        rows.append(MethodTime(method, float(row.step_time), bool(row.oom), float(row.seconds)))
    return rows


def best(rows: Sequence[MethodTime]) -> MethodTime:
    """The fastest row that fits in memory (the fastest overall if none fits).

    Raises:
      ValueError: no rows.
    """
    if not rows:
        raise ValueError("no results to choose from")
    return min(rows, key=lambda r: (r.oom, r.step_time))


def comparison_table(
    title: str, baselines: Sequence[MethodTime], go_rows: Sequence[MethodTime]
) -> Table:
    """A rich table: every baseline and GO row, with speedups over one device and over the
    best baseline.

    Args:
      title: the table's title (graph and cluster).
      baselines: baseline rows (the first named ``single-device`` is the 1-device reference
        when present).
      go_rows: the learned policy's rows.
    """
    reference = next((r for r in baselines if r.method == "single-device"), None)
    top = best(baselines) if baselines else None
    table = Table(title=title)
    for column in ("method", "step time (ms)", "vs 1 device", "vs best baseline", "decide (s)"):
        table.add_column(column, justify="left" if column == "method" else "right")
    for row in [*sorted(baselines, key=lambda r: (r.oom, r.step_time)), *go_rows]:
        is_go = row in go_rows
        table.add_row(
            row.method + (" [OOM]" if row.oom else ""),
            f"{row.step_time * 1e3:.4g}",
            f"{reference.step_time / row.step_time:.3f}x" if reference else "-",
            f"{top.step_time / row.step_time:.3f}x" if top else "-",
            f"{row.seconds:.1f}",
            style="bold" if is_go else ("green" if row is top else None),
        )
    return table
