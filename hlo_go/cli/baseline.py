"""The ``hlo-go baseline`` command (registered by :func:`add_baseline_command`).

::

    hlo-go baseline HLO ... [--cluster NAME] --method NAME [--method NAME ...]
    hlo-go baseline HLO ... [--cluster NAME] --all
    hlo-go baseline --all --corpus [--cluster NAME] [--graphs a,b,...]
        [--budget N] [--time-limit S] [--seed N] [--stage prefusion]
        [--csv PATH] [--json PATH|-] [--plot PATH] [--save-decisions PATH.npz]
    hlo-go baseline --list

``HLO`` is a corpus graph name or an HLO file (``.hlo``/``.hlo.gz``); ``--corpus`` runs
every corpus graph instead (or those in ``--graphs``). ``--method`` takes any name of
:func:`hlo_go.baselines.get` (``metis``, ``metis+critical-path+xla-cpu-like``,
``simulated-annealing``, ...) and may repeat; ``--all`` runs
:data:`hlo_go.baselines.report.STANDARD_METHODS`. ``--cluster`` takes a preset name or
a ``.toml``/``.json`` cluster file. The table shows simulated step times in ms with the
best method per graph marked ``*``; ``--csv``/``--json`` write the rows (JSON with the
searches' convergence curves; ``-`` prints JSON to stdout), ``--plot`` a bar chart, and
``--save-decisions`` (one graph, one method) the decisions as ``.npz`` for
``hlo-go simulate --decisions``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_cluster,
    add_inputs,
    bounded,
    check_out_file,
    print_error,
)
from hlo_go.cli._methods import method_type, names_help
from hlo_go.decisions import Decisions
from hlo_go.sources import load_graph


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``baseline`` (``func``: :func:`cmd_baseline`)."""
    p = subparsers.add_parser(
        "baseline",
        parents=parents,
        help="run placement/scheduling/fusion baselines and searches; table, CSV/JSON, chart",
    )
    add_inputs(p, nargs="*")
    add_cluster(p)
    p.add_argument(
        "--method",
        action="append",
        default=[],
        type=method_type("baseline"),
        metavar="NAME",
        help="a baseline name, or placement+scheduling+fusion names joined by '+' "
        f"(repeatable); names: {names_help('baseline')}",
    )
    p.add_argument("--all", action="store_true", help="run every standard method")
    p.add_argument("--corpus", action="store_true", help="run on every corpus graph")
    p.add_argument("--graphs", help="with --corpus: comma-separated corpus graph names")
    p.add_argument("--stage", default="prefusion", help="corpus stage (default prefusion)")
    p.add_argument("--budget", type=bounded(int, low=1), help="search evaluations (default 2000)")
    p.add_argument(
        "--time-limit",
        type=bounded(float, low=0.0),
        help="search wall-clock limit per graph, seconds",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (METIS, searches)")
    p.add_argument("--csv", metavar="PATH", type=check_out_file, help="write the rows as CSV")
    p.add_argument(
        "--json",
        metavar="PATH",
        type=check_out_file,
        help="write the rows as JSON ('-' for stdout)",
    )
    p.add_argument("--plot", metavar="PATH", type=check_out_file, help="save a bar chart")
    p.add_argument(
        "--save-decisions",
        metavar="PATH",
        type=check_out_file,
        help="one graph and method: save decisions (.npz)",
    )
    p.add_argument("--list", action="store_true", help="list the method names and exit")
    p.set_defaults(func=cmd_baseline)


def _methods(args: argparse.Namespace) -> list[str]:
    from hlo_go.baselines.report import STANDARD_METHODS

    methods = list(STANDARD_METHODS) if args.all else []
    methods += [m for m in args.method if m not in methods]
    if not methods:
        raise UsageError("choose methods with --method NAME (repeatable) or --all")
    return methods


def _graph_names(args: argparse.Namespace) -> list[str]:
    from hlo_go import corpus

    if args.inputs and args.corpus:
        raise UsageError("give either HLO inputs or --corpus, not both")
    if not args.inputs and not args.corpus:
        raise UsageError("give HLO inputs (files or corpus graph names) or --corpus")
    if args.inputs:
        return list(args.inputs)
    known = corpus.names()
    if not args.graphs:
        return known
    chosen = [g.strip() for g in args.graphs.split(",") if g.strip()]
    unknown = [g for g in chosen if g not in known]
    if unknown:
        raise UsageError(f"--graphs names unknown corpus graphs {unknown}; known: {known}")
    return chosen


def cmd_baseline(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go baseline``; 0, or 1 when an input could not be read."""
    from hlo_go.baselines.registry import KINDS, names
    from hlo_go.baselines.report import plot_bars, rich_table, run_method, to_csv

    if args.list:
        for kind in KINDS:
            console.print(f"[bold]{kind}[/bold]: {', '.join(names(kind))}")
        console.print("combine one of each kind with '+', e.g. metis+critical-path+xla-cpu-like")
        return 0
    methods = _methods(args)
    graphs = _graph_names(args)
    cluster = args.cluster
    if args.save_decisions and (len(graphs) != 1 or len(methods) != 1):
        raise UsageError("--save-decisions needs exactly one graph and one method")

    rows = []
    failed = 0
    quiet = args.json == "-"
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet or args.quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("baselines", total=len(graphs) * len(methods))
        for source in graphs:
            try:
                name, graph = load_graph(source, args.stage)
            except Exception as error:  # reported per input
                print_error(console, error)
                failed += 1
                progress.advance(task, len(methods))
                continue
            for method in methods:
                progress.update(task, description=f"{name}: {method}")
                found: list[Decisions] = []
                rows.append(
                    run_method(
                        graph,
                        cluster,
                        method,
                        graph_name=name,
                        seed=args.seed,
                        budget=args.budget,
                        time_limit=args.time_limit,
                        decisions_out=found,
                    )
                )
                progress.advance(task)
                if args.save_decisions:
                    np.savez(args.save_decisions, **found[0].arrays())

    if args.json:
        text = json.dumps([r.to_dict() for r in rows], indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    if args.csv:
        Path(args.csv).write_text(to_csv(rows))
    chart = plot_bars(rows, args.plot) if args.plot and rows else None
    if quiet or not rows:
        return EXIT_FAILED if failed else EXIT_OK
    console.print(
        rich_table(
            rows,
            title=f"simulated step time (ms) on {cluster.name} "
            f"({cluster.num_devices} x {cluster.devices[0].name}); * = best",
        )
    )
    detail = rows if len(graphs) == 1 else []
    for row in detail:
        extra = f", {row.evaluations} evaluations" if row.evaluations else ""
        console.print(
            f"  {row.method}: {row.step_time * 1e3:.4g} ms{' OOM' if row.oom else ''}, "
            f"{row.kernels:,} kernels, {row.bytes_moved / 2**20:.1f} MiB moved, "
            f"{row.devices_used} device(s), {row.seconds:.2f} s{extra}",
            highlight=False,
        )
    for label, path in (("csv", args.csv), ("json", args.json), ("chart", chart)):
        if path:
            console.print(f"{label}: {path}")
    if args.save_decisions:
        console.print(f"decisions: {args.save_decisions}")
    return EXIT_FAILED if failed else EXIT_OK
