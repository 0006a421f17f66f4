"""``hlo-go simulate``: simulated step time, memory and timeline of HLO modules.

::

    hlo-go simulate HLO ... [--cluster NAME|FILE] [--decisions FILE] [--stage prefusion]
                    [--plot PATH] [--json]

``HLO`` is an HLO file (``.hlo`` / ``.hlo.gz``) or the name of a corpus graph (its
pre-fusion stage by default). ``--cluster`` takes a preset name (:func:`hlo_go.sim.names`)
or a ``.toml``/``.json`` cluster file. ``--decisions`` (one input) is a ``.npz`` or
``.json`` file holding any of ``placement``, ``schedule_priority`` and ``fusion_priority``
(:func:`hlo_go.sources.load_decisions`); without it: one device, FIFO, no fusion.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_cluster,
    add_inputs,
    check_out_file,
    print_error,
)
from hlo_go.decisions import Decisions


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``simulate``."""
    p = subparsers.add_parser(
        "simulate",
        parents=parents,
        help="simulate modules on a cluster: step time, memory, timeline",
    )
    add_inputs(p)
    add_cluster(p)
    p.add_argument(
        "--decisions",
        metavar="FILE",
        help="one input: .npz or .json file with per-node decisions (default: one device, "
        "FIFO, no fusion)",
    )
    p.add_argument("--stage", default="prefusion", help="corpus stage of corpus graph names")
    p.add_argument(
        "--plot", metavar="PATH", type=check_out_file, help="one input: save its timeline chart"
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=cmd_simulate)


def _simulate_one(source: str, args: argparse.Namespace) -> dict[str, Any]:
    from hlo_go.graph import build_graph
    from hlo_go.sim.simulate import simulate
    from hlo_go.sources import load_decisions, load_module

    module, described = load_module(source, args.stage)
    graph = build_graph(module)
    decisions = (
        load_decisions(args.decisions, graph) if args.decisions else Decisions.default(graph)
    )
    start = time.perf_counter()
    result = simulate(graph, args.cluster, decisions)
    return {
        "source": described,
        "graph": graph,
        "result": result,
        "seconds": time.perf_counter() - start,
    }


def _print(console: Console, cluster: Any, done: dict[str, Any]) -> None:
    result, graph = done["result"], done["graph"]
    summary = result.summary()
    console.print(
        f"[bold]{done['source']}[/bold]: {graph.num_nodes:,} nodes on [bold]{cluster.name}"
        f"[/bold] ({cluster.num_devices} x {cluster.devices[0].name}); simulated in "
        f"{done['seconds'] * 1e3:.1f} ms"
    )
    console.print(
        f"simulated step time [bold]{result.step_time * 1e3:.4g} ms[/bold], "
        f"{summary['kernels']:,} kernels ({summary['fused_kernels']:,} fused), "
        f"{summary['transfers']:,} transfers moving {result.bytes_moved / 2**20:.1f} MiB"
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


def cmd_simulate(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go simulate``; 0, or 1 when an input could not be simulated."""
    from hlo_go.sim.plot import plot_timeline

    if len(args.inputs) > 1 and (args.decisions or args.plot):
        raise UsageError("--decisions and --plot take one input")
    cluster = args.cluster
    failed = 0
    documents = []
    for source in args.inputs:
        try:
            done = _simulate_one(source, args)
        except Exception as error:  # reported per input
            print_error(console, f"{source}: {error}" if source not in str(error) else error)
            failed += 1
            continue
        plot = str(plot_timeline(done["result"], args.plot)) if args.plot else None
        if args.json:
            documents.append(
                {
                    "module": done["source"],
                    "cluster": cluster.name,
                    "nodes": done["graph"].num_nodes,
                    "simulate_s": done["seconds"],
                    "result": done["result"].summary(),
                    **({"plot": plot} if plot else {}),
                }
            )
            continue
        _print(console, cluster, done)
        if plot:
            console.print(f"timeline plot: {plot}", highlight=False)
    if args.json and documents:
        print(json.dumps(documents[0] if len(documents) == 1 else documents))
    return EXIT_FAILED if failed else EXIT_OK
