"""``hlo-go corpus build | list | show``: the workload corpus.

::

    hlo-go corpus build [NAME ...] [--index-only] [--out DIR]
    hlo-go corpus build --variants | --placement [--jobs N] [--force]
    hlo-go corpus list [--split S] [--family F] [--json]
    hlo-go corpus show NAME [--top K]

The ``variants`` and ``placement`` splits are built into their cache
(:func:`hlo_go.corpus.variants_root`), only the graphs missing there.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import EXIT_FAILED, UsageError, bounded, check_out_dir, print_error
from hlo_go.cli.summarize import human
from hlo_go.corpus.cache import variants_root


def add_commands(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``corpus`` with its ``build``, ``list`` and ``show`` subcommands."""
    corpus = subparsers.add_parser(
        "corpus", parents=parents, help="the workload corpus: build, list, show"
    )
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True, metavar="COMMAND")
    p = corpus_sub.add_parser(
        "build", parents=parents, help="regenerate stored graphs and index.json"
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="graphs to build (default: all)")
    p.add_argument("--index-only", action="store_true", help="recompute index.json only")
    p.add_argument("--variants", action="store_true", help="build the variants split (cached)")
    p.add_argument("--placement", action="store_true", help="build the placement split (cached)")
    p.add_argument(
        "--jobs", type=bounded(int, low=1), default=1, help="worker processes (cached splits)"
    )
    p.add_argument("--force", action="store_true", help="rebuild cached graphs too")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--out",
        type=check_out_dir,
        help="corpus directory to write (default: the hlo_corpus package)",
    )
    p.set_defaults(func=cmd_corpus_build)
    p = corpus_sub.add_parser("list", parents=parents, help="table of the stored graphs")
    p.add_argument(
        "--split",
        default="base",
        choices=("base", "variants", "placement", "all"),
        help="which graphs (default base; variants and placement: those built in the cache)",
    )
    p.add_argument("--family", help="only this family")
    p.add_argument("--json", action="store_true", help="print the index entries as JSON")
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_corpus_list)
    p = corpus_sub.add_parser("show", parents=parents, help="summary of one stored graph")
    p.add_argument("name", metavar="NAME", help="a corpus graph name (`hlo-go corpus list`)")
    p.add_argument(
        "--top", type=bounded(int, low=1), default=6, help="opcodes to list per stage (default 6)"
    )
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_corpus_show)


def _corpus_error(console: Console, error: Exception) -> int:
    print_error(console, error)
    return EXIT_FAILED


def cmd_corpus_build(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go corpus build``; 1 when a name is no corpus graph."""
    from hlo_go.corpus import UnknownGraphError, split_of, total_size
    from hlo_go.corpus_build import build, build_cached

    start = time.perf_counter()
    progress = not (args.no_progress or args.quiet)
    splits = [s for s in ("variants", "placement") if getattr(args, s)]
    try:
        cached = [n for n in args.names if split_of(n) != "base"]
        if splits or cached:
            if args.index_only or len(cached) != len(args.names):
                raise UsageError("--variants/--placement and their names build on their own")
            result = build_cached(
                cached or None, splits=splits, jobs=args.jobs, out_dir=args.out,
                force=args.force, progress=progress,
            )  # fmt: skip
        else:
            result = build(
                args.names or None, progress=progress, out_dir=args.out, index_only=args.index_only
            )
    except UnknownGraphError as e:
        return _corpus_error(console, e)
    elapsed = time.perf_counter() - start
    graphs = result["index"]["graphs"]
    table = Table(title="Rebuilt" if not args.index_only else "Reindexed")
    for column in ("graph", "instructions (unopt / prefusion)", "nodes", "seconds", "stored"):
        table.add_column(column, justify="left" if column == "graph" else "right")
    for name, seconds in result["seconds"].items():
        stages = graphs[name]["stages"]
        table.add_row(
            name,
            f"{stages['unoptimized']['instructions']} / {stages['prefusion']['instructions']}",
            str(stages["prefusion"]["nodes"]),
            f"{seconds:.1f}",
            human(result["bytes"][name], "B"),
        )
    console.print(table)
    out = args.out if not (splits or cached) else (args.out or variants_root())
    console.print(
        f"{len(result['seconds'])} graphs in {elapsed:.1f} s; {out or 'corpus'} now holds "
        f"{len(graphs)} graphs, {human(total_size(out), 'B')} stored"
    )
    for name, error in result.get("failed", {}).items():
        print_error(console, f"{name}: {error}")
    return EXIT_FAILED if result.get("failed") else 0


def cmd_corpus_list(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go corpus list``."""
    from hlo_go.corpus import index, names, total_size

    root = Path(args.root) if args.root else None
    parts = ("base", "variants", "placement") if args.split == "all" else (args.split,)
    data = {"graphs": {}}
    registered = 0
    for part in parts:
        where = root if part == "base" else variants_root()
        stored = index(where)
        data.setdefault("jax_version", stored.get("jax_version"))
        try:
            wanted = names(root, split=part, family=args.family)
        except ValueError as e:
            raise UsageError(str(e)) from e
        registered += len(wanted)
        data["graphs"].update({n: stored["graphs"][n] for n in wanted if n in stored["graphs"]})
    graphs = {
        name: entry
        for name, entry in data["graphs"].items()
        if args.family is None or entry["family"] == args.family
    }
    if args.json:
        console.print_json(json.dumps(graphs))
        return 0
    table = Table(title=f"hlo-go corpus (jax {data.get('jax_version', '?')})")
    columns = ("graph", "family", "variant", "form", "instr unopt", "instr prefusion")
    for column in (*columns, "nodes", "while", "flops", "bytes"):
        table.add_column(column, justify="left" if column in columns[:4] else "right")
    for name, e in graphs.items():
        unopt, pre = e["stages"]["unoptimized"], e["stages"]["prefusion"]
        nodes = pre.get("nodes")
        table.add_row(
            name, e["family"], e["variant"], e["form"],
            str(unopt["instructions"]), str(pre["instructions"]),
            "-" if nodes is None else str(nodes), str(pre["while_loops"]),
            human(e["flops"]), human(e["bytes"], "B"),
        )  # fmt: skip
    console.print(table)
    size = sum(total_size(r) for r in {root if p == "base" else variants_root() for p in parts})
    console.print(
        f"{len(graphs)} graphs, {len({e['family'] for e in graphs.values()})} families; "
        f"{human(size, 'B')} stored"
    )
    if len(data["graphs"]) < registered:
        console.print(
            f"{registered - len(data['graphs'])} more registered but not built: "
            "`python -m hlo_go.corpus_build --variants --placement --jobs N` builds them"
        )
    return 0


def cmd_corpus_show(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go corpus show``; 1 when the name is no corpus graph."""
    from collections import Counter

    from hlo_go.corpus import STAGES, UnknownGraphError, info, load, path

    root = Path(args.root) if args.root else None
    try:
        entry = info(args.name, root)
    except UnknownGraphError as e:
        return _corpus_error(console, e)
    console.print(
        f"[bold]{args.name}[/bold]: {entry['family']} {entry['variant']}, form {entry['form']}, "
        f"module {entry['module']}, jax {entry['jax_version']}"
    )
    console.print("config: " + ", ".join(f"{k}={v}" for k, v in entry["config"].items()))
    console.print(
        f"pre-fusion cost: {human(entry['flops'])}FLOP, "
        f"{human(entry['transcendentals'])} transcendentals, "
        f"{human(entry['bytes'], 'B')} accessed; {entry['arguments']} arguments "
        f"({human(entry['argument_bytes'], 'B')})"
    )
    table = Table(title="Stages")
    columns = ("stage", "stored", "instructions", "entry", "computations", "while", "nodes")
    for column in (*columns, "sha256", f"top {args.top} opcodes"):
        table.add_column(column, justify="right" if column in columns[1:] else "left")
    for stage in STAGES:
        s = entry["stages"][stage]
        counts = Counter(i.opcode for _, i in load(args.name, stage, root).instructions())
        top = ", ".join(f"{op}×{n}" for op, n in counts.most_common(args.top))
        table.add_row(
            stage, human(path(args.name, stage, root).stat().st_size, "B"),
            str(s["instructions"]), str(s["entry_instructions"]), str(s["computations"]),
            str(s["while_loops"]), "-" if s["nodes"] is None else str(s["nodes"]),
            s["sha256"][:12], top,
        )  # fmt: skip
    console.print(table)
    return 0
