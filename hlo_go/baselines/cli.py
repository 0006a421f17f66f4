"""The ``hlo-go baseline`` command (registered by :func:`add_baseline_command`).

::

    hlo-go baseline GRAPH --cluster NAME --method NAME [--method NAME ...]
    hlo-go baseline GRAPH --cluster NAME --all
    hlo-go baseline --all --corpus --cluster NAME [--graphs a,b,...]
        [--budget N] [--time-limit S] [--seed N] [--stage prefusion]
        [--csv PATH] [--json PATH|-] [--plot PATH] [--save-decisions PATH.npz]
    hlo-go baseline --list

``GRAPH`` is a corpus graph name or an HLO file (``.hlo``/``.hlo.gz``); ``--corpus`` runs
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

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph


def add_baseline_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``baseline`` to an ``argparse`` subparsers object.

    The parser's ``func`` default is :func:`cmd_baseline`, called as
    ``func(args, console)`` and returning the exit code.

    Args:
      subparsers: the result of ``parser.add_subparsers(...)``.

    Returns:
      The ``baseline`` parser.
    """
    p = subparsers.add_parser(
        "baseline",
        help="run placement/scheduling/fusion baselines and searches; table, CSV/JSON, chart",
    )
    p.add_argument("graph", nargs="?", metavar="GRAPH", help="corpus graph name or HLO file")
    p.add_argument("--cluster", help="preset name (e.g. v100x4, h100x8) or a .toml/.json file")
    p.add_argument(
        "--method",
        action="append",
        default=[],
        metavar="NAME",
        help="a baseline name, e.g. metis+critical-path+xla-cpu-like (repeatable)",
    )
    p.add_argument("--all", action="store_true", help="run every standard method")
    p.add_argument("--corpus", action="store_true", help="run on every corpus graph")
    p.add_argument("--graphs", help="with --corpus: comma-separated corpus graph names")
    p.add_argument("--stage", default="prefusion", help="corpus stage (default prefusion)")
    p.add_argument("--budget", type=int, help="search evaluations (default 2000)")
    p.add_argument("--time-limit", type=float, help="search wall-clock limit per graph, seconds")
    p.add_argument("--seed", type=int, default=0, help="random seed (METIS, searches)")
    p.add_argument("--csv", metavar="PATH", help="write the rows as CSV")
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON ('-' for stdout)")
    p.add_argument("--plot", metavar="PATH", help="save a bar chart")
    p.add_argument(
        "--save-decisions", metavar="PATH", help="one graph and method: save decisions (.npz)"
    )
    p.add_argument("--list", action="store_true", help="list the method names and exit")
    p.set_defaults(func=cmd_baseline)
    return p


def load_graph(source: str, *, stage: str = "prefusion") -> tuple[OpGraph, str]:
    """A graph from an HLO file or a corpus name.

    Args:
      source: a path to an HLO file, or a corpus graph name.
      stage: the corpus stage when ``source`` names a corpus graph.

    Returns:
      ``(graph, name)``: the OpGraph and the name to report (the corpus name or the
      file's name).

    Raises:
      FileNotFoundError: ``source`` is neither a file nor a corpus graph.
    """
    from hlo_go.graph import build_graph
    from hlo_go.hlo import load_hlo

    path = Path(source)
    if path.is_file():
        return build_graph(load_hlo(path)), path.name
    from hlo_go import corpus

    try:
        module = corpus.load(source, stage)
    except KeyError:
        raise FileNotFoundError(
            f"{source!r} is neither an HLO file nor a corpus graph "
            f"(corpus graphs: {', '.join(corpus.names())})"
        ) from None
    return build_graph(module), source


def load_cluster(spec: str) -> Any:
    """A cluster from a preset name or a ``.toml``/``.json`` file.

    Args:
      spec: the name or path.

    Returns:
      The :class:`~hlo_go.sim.Cluster`.

    Raises:
      KeyError: unknown preset (the message lists them).
      ValueError, OSError: an unreadable cluster file.
    """
    from hlo_go.sim import get_cluster
    from hlo_go.sim import load_cluster as load_file

    if Path(spec).suffix in (".toml", ".json"):
        return load_file(spec)
    return get_cluster(spec)


def _methods(args: argparse.Namespace) -> list[str]:
    from hlo_go.baselines.registry import get
    from hlo_go.baselines.report import STANDARD_METHODS

    methods = list(STANDARD_METHODS) if args.all else []
    methods += [m for m in args.method if m not in methods]
    if not methods:
        raise ValueError("choose methods with --method NAME (repeatable) or --all")
    for method in methods:
        get(method)  # raises UnknownMethodError naming the bad part
    return methods


def _graph_names(args: argparse.Namespace) -> list[str]:
    from hlo_go import corpus

    if args.graph and args.corpus:
        raise ValueError("give either GRAPH or --corpus, not both")
    if not args.graph and not args.corpus:
        raise ValueError("give a GRAPH (corpus name or HLO file) or --corpus")
    if args.graph:
        return [args.graph]
    known = corpus.names()
    if not args.graphs:
        return known
    chosen = [g.strip() for g in args.graphs.split(",") if g.strip()]
    unknown = [g for g in chosen if g not in known]
    if unknown:
        raise ValueError(f"--graphs names unknown corpus graphs {unknown}; known: {known}")
    return chosen


def cmd_baseline(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go baseline``; returns the exit code (0, or 2 for bad input)."""
    from hlo_go.baselines.registry import KINDS, names
    from hlo_go.baselines.report import plot_bars, rich_table, run_method, to_csv

    if args.list:
        for kind in KINDS:
            console.print(f"[bold]{kind}[/bold]: {', '.join(names(kind))}")
        console.print("combine one of each kind with '+', e.g. metis+critical-path+xla-cpu-like")
        return 0
    try:
        if not args.cluster:
            raise ValueError("--cluster is required (a preset such as v100x4, or a file)")
        methods = _methods(args)
        graphs = _graph_names(args)
        cluster = load_cluster(args.cluster)
        if args.save_decisions and (len(graphs) != 1 or len(methods) != 1):
            raise ValueError("--save-decisions needs exactly one graph and one method")
        if args.budget is not None and args.budget < 1:
            raise ValueError(f"--budget must be at least 1, got {args.budget}")
    except (KeyError, ValueError, OSError) as error:
        console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
        return 2

    rows = []
    quiet = args.json == "-"
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("baselines", total=len(graphs) * len(methods))
        for source in graphs:
            try:
                graph, name = load_graph(source, stage=args.stage)
            except (FileNotFoundError, ValueError) as error:
                console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
                return 2
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
    chart = plot_bars(rows, args.plot) if args.plot else None
    if quiet:
        return 0
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
    return 0
