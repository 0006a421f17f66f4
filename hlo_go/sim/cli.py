"""The ``hlo-go simulate`` command (registered by :func:`add_simulate_command`).

::

    hlo-go simulate FILE_OR_CORPUS_NAME --cluster NAME_OR_FILE [--decisions FILE]
                    [--stage prefusion] [--plot PATH] [--json]

``FILE_OR_CORPUS_NAME`` is an HLO file (``.hlo`` / ``.hlo.gz``) or the name of a corpus
graph (its pre-fusion stage by default). ``--cluster`` takes a preset name
(:func:`hlo_go.sim.names`) or a ``.toml``/``.json`` cluster file. ``--decisions`` is
a ``.npz`` or ``.json`` file holding any of ``placement``, ``schedule_priority`` and
``fusion_priority`` (a list with one value per node, or one number for all); missing
arrays take :meth:`Decisions.default`'s values. Without it: one device, FIFO, no fusion.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.hlo import HloModule


def add_simulate_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``simulate`` to an ``argparse`` subparsers object.

    The parser's ``func`` default is :func:`cmd_simulate`, called as
    ``func(args, console)`` and returning the exit code.

    Args:
      subparsers: the result of ``parser.add_subparsers(...)``.

    Returns:
      The ``simulate`` parser.
    """
    p = subparsers.add_parser(
        "simulate", help="simulate a module on a cluster: step time, memory, timeline"
    )
    p.add_argument("module", metavar="FILE_OR_CORPUS_NAME", help="HLO file or corpus graph name")
    p.add_argument(
        "--cluster", required=True, help="preset name (e.g. v100x8) or a .toml/.json file"
    )
    p.add_argument("--decisions", help=".npz or .json file with per-node decisions")
    p.add_argument("--stage", default="prefusion", help="corpus stage when naming a corpus graph")
    p.add_argument("--plot", metavar="PATH", help="save a Gantt chart of the timeline")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_simulate)
    return p


def load_decisions(path: str | Path, graph: OpGraph) -> Decisions:
    """Reads decisions for a graph from a ``.npz`` or ``.json`` file
    (:func:`hlo_go.decisions.load_decisions`: checked before any cast)."""
    from hlo_go.decisions import load_decisions as load

    return load(path, graph)


def load_module(source: str, stage: str) -> tuple[HloModule, str]:
    """An HLO file, or the given stage of a corpus graph; with a description of which.

    Raises:
      FileNotFoundError: ``source`` is neither a file nor a corpus graph name.
    """
    from hlo_go.hlo import load_hlo

    path = Path(source)
    if path.exists():
        return load_hlo(path), str(path)
    from hlo_go import corpus

    try:
        return corpus.load(source, stage), f"corpus {source} ({stage})"
    except KeyError:
        raise FileNotFoundError(f"{source!r} is neither a file nor a corpus graph") from None


def _load_graph(source: str, stage: str) -> tuple[OpGraph, str]:
    from hlo_go.graph import build_graph

    module, described = load_module(source, stage)
    return build_graph(module), described


def load_cluster_arg(spec: str) -> Any:
    """A cluster from a preset name or a ``.toml``/``.json`` cluster file."""
    from hlo_go.sim.loading import load_cluster
    from hlo_go.sim.presets import get_cluster

    if Path(spec).suffix in (".toml", ".json"):
        return load_cluster(spec)
    return get_cluster(spec)


def cmd_simulate(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go simulate``; returns the exit code (0, or 1 for bad input)."""
    from hlo_go.sim.plot import plot_timeline
    from hlo_go.sim.simulate import simulate

    try:
        cluster = load_cluster_arg(args.cluster)
        graph, source = _load_graph(args.module, args.stage)
        decisions = (
            load_decisions(args.decisions, graph) if args.decisions else Decisions.default(graph)
        )
        start = time.perf_counter()
        result = simulate(graph, cluster, decisions)
        seconds = time.perf_counter() - start
    except (KeyError, ValueError) as error:
        console.print("[red]error:[/red] ", end="")
        console.print(str(error).strip("'\""), markup=False, highlight=False)
        return 1
    plot = str(plot_timeline(result, args.plot)) if args.plot else None
    summary = result.summary()
    if args.json:
        print(
            json.dumps(
                {
                    "module": source,
                    "cluster": cluster.name,
                    "nodes": graph.num_nodes,
                    "simulate_s": seconds,
                    "result": summary,
                    **({"plot": plot} if plot else {}),
                }
            )
        )
        return 0
    console.print(
        f"[bold]{source}[/bold]: {graph.num_nodes:,} nodes on [bold]{cluster.name}[/bold] "
        f"({cluster.num_devices} x {cluster.devices[0].name}); simulated in "
        f"{seconds * 1e3:.1f} ms"
    )
    console.print(
        f"step time [bold]{result.step_time * 1e3:.4g} ms[/bold], {summary['kernels']:,} kernels "
        f"({summary['fused_kernels']:,} fused), {summary['transfers']:,} transfers moving "
        f"{result.bytes_moved / 2**20:.1f} MiB"
        + ("  [red]OUT OF MEMORY[/red]" if result.oom else "")
    )
    table = Table()
    for column in ("device", "busy (ms)", "utilization", "peak memory (MiB)", "capacity (MiB)"):
        table.add_column(column, justify="right")
    for d in range(cluster.num_devices):
        busy = result.busy_time[d]
        table.add_row(
            str(d),
            f"{busy * 1e3:.4g}",
            f"{busy / result.step_time:.0%}" if result.step_time else "-",
            f"{result.peak_memory[d] / 2**20:.1f}",
            f"{result.memory_capacity[d] / 2**20:.0f}",
            style="red" if result.peak_memory[d] > result.memory_capacity[d] else None,
        )
    console.print(table)
    if plot:
        console.print(f"timeline plot: {plot}")
    return 0
