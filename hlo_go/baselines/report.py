"""Running many baselines on graphs and tabulating them (shared by the CLI and benchmark).

:data:`STANDARD_METHODS` is the line-up the ``hlo-go baseline --all`` command and the
``baselines`` benchmark run: the default (one device, FIFO, no fusion), each fusion
method, critical-path scheduling, each placement with critical path and XLA:CPU-like
fusion, and the three searches.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.stats import gmean

from hlo_go.baselines.registry import get
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster, simulate

STANDARD_METHODS: tuple[str, ...] = (
    "single-device",
    "xla-cpu-like",
    "fuse-all-legal",
    "priority-fusion",
    "critical-path+xla-cpu-like",
    "round-robin+critical-path+xla-cpu-like",
    "expert+critical-path+xla-cpu-like",
    "metis+critical-path+xla-cpu-like",
    "heft+critical-path+xla-cpu-like",
    "m-etf+critical-path+xla-cpu-like",
    "m-sct+critical-path+xla-cpu-like",
    "random-search",
    "simulated-annealing",
    "evolutionary",
)


class BaselineRow(NamedTuple):
    """One method on one graph and cluster.

    Attributes:
      graph: the graph's name.
      cluster: the cluster's name.
      method: the method's name.
      step_time: simulated step time (seconds) of the method's decisions.
      oom: whether they run out of memory.
      seconds: wall-clock seconds the method took (a search: its whole run).
      kernels: kernels launched.
      bytes_moved: bytes sent between devices.
      devices_used: how many devices got at least one node.
      evaluations: simulator evaluations (searches; 0 for heuristics).
      curve: the search's convergence curve as a dict (:meth:`Curve.to_dict`), or None.
    """

    graph: str
    cluster: str
    method: str
    step_time: float
    oom: bool
    seconds: float
    kernels: int
    bytes_moved: int
    devices_used: int
    evaluations: int = 0
    curve: dict[str, list[float]] | None = None

    def to_dict(self, *, with_curve: bool = True) -> dict[str, Any]:
        """The row as a dict.

        Args:
          with_curve: keep the ``curve`` field.

        Returns:
          JSON-able fields.
        """
        out = self._asdict()
        if not with_curve:
            out.pop("curve")
        return out


def run_method(
    graph: OpGraph,
    cluster: Cluster,
    method: str,
    *,
    graph_name: str = "",
    seed: int = 0,
    budget: int | None = None,
    time_limit: float | None = None,
    decisions_out: list[Decisions] | None = None,
) -> BaselineRow:
    """Runs one method and simulates its decisions.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      method: a method name (:func:`hlo_go.baselines.get`).
      graph_name: the name to report (default the module name).
      seed: the seed.
      budget: a search's evaluations (default 2,000).
      time_limit: a search's wall-clock limit in seconds.
      decisions_out: if given, the method's decisions are appended to it.

    Returns:
      The :class:`BaselineRow`.

    Raises:
      UnknownMethodError: unknown method.
    """
    spec = get(method)
    started = time.perf_counter()
    curve = None
    evaluations = 0
    if spec.kind == "search":
        found = spec.search(graph, cluster, seed=seed, budget=budget, time_limit=time_limit)
        decisions = found.best
        curve = found.curve.to_dict()
        evaluations = found.evaluations
    else:
        decisions = spec(graph, cluster, seed=seed, budget=budget)
    seconds = time.perf_counter() - started
    if decisions_out is not None:
        decisions_out.append(decisions)
    result = simulate(graph, cluster, decisions)
    return BaselineRow(
        graph=graph_name or graph.module_name,
        cluster=cluster.name,
        method=method,
        step_time=result.step_time,
        oom=result.oom,
        seconds=seconds,
        kernels=result.num_kernels,
        bytes_moved=result.bytes_moved,
        devices_used=int(np.unique(decisions.placement).size),
        evaluations=evaluations,
        curve=curve,
    )


def run_methods(
    graph: OpGraph,
    cluster: Cluster,
    methods: Sequence[str] = STANDARD_METHODS,
    *,
    graph_name: str = "",
    seed: int = 0,
    budget: int | None = None,
    time_limit: float | None = None,
    on_row: Callable[[BaselineRow], None] | None = None,
) -> list[BaselineRow]:
    """Runs several methods on one graph (:func:`run_method` each).

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      methods: method names.
      graph_name: the name to report.
      seed: the seed.
      budget: a search's evaluations.
      time_limit: a search's wall-clock limit in seconds.
      on_row: called with each row as it is done (progress).

    Returns:
      One row per method, in order.
    """
    rows = []
    for method in methods:
        row = run_method(
            graph,
            cluster,
            method,
            graph_name=graph_name,
            seed=seed,
            budget=budget,
            time_limit=time_limit,
        )
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def best_by_graph(rows: Iterable[BaselineRow]) -> dict[tuple[str, str], str]:
    """The best method per (graph, cluster).

    Args:
      rows: rows of any graphs and clusters.

    Returns:
      ``{(graph, cluster): method}``: the lowest step time among the methods that fit in
      memory (among all when none fits).
    """
    best: dict[tuple[str, str], tuple[bool, float, str]] = {}
    for row in rows:
        key = (row.graph, row.cluster)
        cand = (row.oom, row.step_time, row.method)
        if key not in best or cand[:2] < best[key][:2]:
            best[key] = cand
    return {key: value[2] for key, value in best.items()}


def rich_table(rows: Sequence[BaselineRow], *, title: str = "") -> Any:
    """A ``rich`` table: graphs down, methods across, step time in ms, best marked ``*``.

    Args:
      rows: rows of one cluster (or several: the graph column names the cluster too).
      title: the table title.

    Returns:
      A ``rich.table.Table``.
    """
    from rich.table import Table

    methods = list(dict.fromkeys(r.method for r in rows))
    keys = list(dict.fromkeys((r.graph, r.cluster) for r in rows))
    clusters = {k[1] for k in keys}
    cells = {(r.graph, r.cluster, r.method): r for r in rows}
    best = best_by_graph(rows)
    table = Table(title=title or None, title_justify="left")
    table.add_column("graph")
    for method in methods:
        table.add_column(method.replace("+", "+\n"), justify="right")
    for key in keys:
        label = key[0] if len(clusters) == 1 else f"{key[0]} ({key[1]})"
        cells_row = []
        for method in methods:
            row = cells.get((*key, method))
            if row is None:
                cells_row.append("")
                continue
            text = f"{row.step_time * 1e3:.4g}" + (" OOM" if row.oom else "")
            if best.get(key) == method:
                text = f"[bold green]*{text}[/bold green]"
            cells_row.append(text)
        table.add_row(label, *cells_row)
    return table


def speedups(rows: Sequence[BaselineRow], *, reference: str = "single-device") -> dict[str, float]:
    """Geometric-mean speedup of each method over ``reference`` across graphs.

    Args:
      rows: rows (one cluster).
      reference: the method every other is compared to.

    Returns:
      ``{method: geomean(reference step time / method step time)}`` over the graphs
      where both ran; methods in first-seen order.
    """
    base = {(r.graph, r.cluster): r.step_time for r in rows if r.method == reference}
    ratios: dict[str, list[float]] = {}
    for r in rows:
        ref = base.get((r.graph, r.cluster))
        if ref and r.step_time > 0:
            ratios.setdefault(r.method, []).append(ref / r.step_time)
    return {m: float(gmean(v)) for m, v in ratios.items()}


def to_csv(rows: Sequence[BaselineRow]) -> str:
    """Rows as CSV.

    Args:
      rows: the rows.

    Returns:
      CSV text with a header line (curves left out).
    """
    out = io.StringIO()
    fields = [f for f in BaselineRow._fields if f != "curve"]
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    for row in rows:
        writer.writerow(row.to_dict(with_curve=False))
    return out.getvalue()


def plot_bars(
    rows: Sequence[BaselineRow],
    path: str | Path,
    *,
    reference: str = "single-device",
    title: str = "",
) -> Path:
    """A bar chart of the rows, one panel per cluster.

    One graph per cluster: simulated step time per method. Several graphs:
    geometric-mean speedup over ``reference`` per method (log axis, plain tick labels).
    Every bar carries its value; the best bar is highlighted, and a legend says so.

    Args:
      rows: rows.
      path: where to save the figure (png, pdf, svg ...).
      reference: the method speedups are measured against.
      title: what the figure shows; it leads each panel's one title.

    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    by_cluster: dict[str, list[BaselineRow]] = {}
    for r in rows:
        by_cluster.setdefault(r.cluster, []).append(r)
    fig, axes = plt.subplots(len(by_cluster), 1, figsize=(11, 4.6 * len(by_cluster)), squeeze=False)
    for ax, (cluster, group) in zip(axes[:, 0], by_cluster.items(), strict=True):
        graphs = {r.graph for r in group}
        if len(graphs) == 1:
            methods = [r.method for r in group]
            values = [r.step_time * 1e3 for r in group]
            tied = {best_by_graph(group)[(group[0].graph, cluster)]}
            ax.set_ylabel("simulated step time (ms)")
            panel = f"{group[0].graph} on {cluster}: simulated step time"
            label = "best (fastest)"
        else:
            gains = speedups(group, reference=reference)
            methods = list(gains)
            values = [gains[m] for m in methods]
            top = max(gains.values())
            tied = {m for m in methods if gains[m] >= top * (1 - 1e-9)}  # ties are best too
            ax.axhline(1.0, color="gray", linewidth=0.8)
            ax.set_yscale("log")
            low, high = min([*values, 1.0]), max([*values, 1.0])
            ax.set_ylim(low / 1.25, high * 1.8)  # room for the legend above the bars
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
            ax.yaxis.set_minor_locator(NullLocator())
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel(f"geomean speedup vs {reference}")
            panel = f"{len(graphs)} graphs on {cluster}: geomean speedup over {reference}"
            label = "best (largest speedup)"
        colors = [_BEST if m in tied else _OTHER for m in methods]
        bars = ax.bar(range(len(methods)), values, color=colors)
        ax.bar_label(
            bars,
            labels=[f"{v:.3g}" + ("" if len(graphs) == 1 else "x") for v in values],
            fontsize=7,
            padding=2,
        )
        if len(graphs) == 1:
            ax.set_ylim(0, max(values) * 1.3)
        ax.legend(
            handles=[Patch(color=_BEST, label=label), Patch(color=_OTHER, label="other methods")],
            fontsize="small",
            loc="upper right",
        )
        ax.set_title(f"{title}: {panel}" if title else panel)
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels([m.replace("+", "+\n") for m in methods], rotation=60, fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


_BEST = "tab:green"
_OTHER = "tab:blue"
