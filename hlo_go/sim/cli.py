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

import numpy as np
from rich.console import Console
from rich.table import Table

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.hlo import HloModule

_FIELDS = {"placement": np.int32, "schedule_priority": np.float32, "fusion_priority": np.float32}


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
    """Reads decisions for a graph from a ``.npz`` or ``.json`` file.

    Args:
      path: the file; arrays or lists of N values, or single numbers, under the names of
        the :class:`~hlo_go.decisions.Decisions` fields.
      graph: the graph they are for.

    Returns:
      The decisions (not yet validated against a cluster).

    Raises:
      ValueError: an unknown field or a wrong length.
    """
    path = Path(path)
    if path.suffix == ".npz":
        with np.load(path) as data:
            raw: dict[str, Any] = {k: data[k] for k in data.files}
    else:
        raw = json.loads(path.read_text())
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise ValueError(f"{path}: unknown fields {unknown}; known: {sorted(_FIELDS)}")
    default = Decisions.default(graph)
    values = {}
    for field, dtype in _FIELDS.items():
        if field not in raw:
            values[field] = getattr(default, field)
            continue
        array = np.asarray(raw[field], dtype=dtype)
        if array.ndim == 0:
            array = np.full(graph.num_nodes, array, dtype=dtype)
        if array.shape != (graph.num_nodes,):
            raise ValueError(
                f"{path}: {field} has shape {array.shape}; the graph has {graph.num_nodes} nodes"
            )
        values[field] = array
    return Decisions(**values)


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
    """Runs ``hlo-go simulate``; returns the exit code (0, or 2 for bad input)."""
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
        console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
        return 2
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
