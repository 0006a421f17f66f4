"""The ``hlo-go`` command.

hlo-go summarize [FILE]       parse an HLO module and print a per-computation table
hlo-go roundtrip FILE...      parse, print, and check XLA parses and verifies the printed text
hlo-go corpus build [NAME...] regenerate the workload corpus (default: every graph)
hlo-go corpus list            table of the stored corpus graphs
hlo-go corpus show NAME       one corpus graph: stages, counts, costs, top opcodes
hlo-go baseline GRAPH --cluster NAME --method NAME   placement/scheduling/fusion baselines
hlo-go baseline --all --corpus --cluster NAME        every baseline on every corpus graph
hlo-go passes GRAPH|FILE      search an order of XLA's HLO passes vs XLA's default order
hlo-go measure GRAPH --fusion METHOD --schedule METHOD   lowered into XLA: step time vs XLA
hlo-go eval PATHS... [--policy CKPT] [--measure] [--out DIR]  baselines + GO policy per input
hlo-go shard FILE --mesh 2x4 --method ilp|policy|dp|megatron|replicated [--measure]  SPMD shardings
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hlo_go.baselines.cli import add_baseline_command
from hlo_go.errors import HloGoError
from hlo_go.evaluate.cli import add_eval_command
from hlo_go.hlo import HloModule, load_hlo, module_cost, parse_hlo, summarize
from hlo_go.passes.cli import add_passes_command
from hlo_go.rl.cli import add_train_commands
from hlo_go.sharding.cli import add_shard_command
from hlo_go.sim.cli import add_simulate_command
from hlo_go.xla.cli import add_measure_command


def _human(n: float, unit: str = "") -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def _load(path: str | None) -> tuple[HloModule, str, float]:
    from hlo_go.examples import example_path

    source = Path(path) if path else example_path()
    start = time.perf_counter()
    module = load_hlo(source)
    return module, str(source), time.perf_counter() - start


def cmd_summarize(args: argparse.Namespace, console: Console) -> int:
    module, source, seconds = _load(args.file)
    rows = summarize(module)
    total = module_cost(module)
    if args.json:
        out = {
            "module": module.name,
            "source": source,
            "instructions": module.instruction_count,
            "totals": total._asdict(),
            "computations": [
                {
                    "name": r.name,
                    "entry": r.is_entry,
                    "instructions": r.instructions,
                    **r.cost._asdict(),
                }
                for r in rows
            ],
        }
        console.print_json(json.dumps(out))
        return 0
    console.print(
        f"[bold]{module.name}[/bold] from {source}: {len(module.computations)} computations, "
        f"{module.instruction_count} instructions, parsed in {seconds * 1e3:.1f} ms"
    )
    table = Table(title="Per computation (costs by XLA's HloCostAnalysis rules, callees included)")
    for column in (
        "computation",
        "instructions",
        "top opcodes",
        "flops",
        "transcendentals",
        "bytes read",
        "bytes written",
    ):
        table.add_column(
            column, justify="left" if column in ("computation", "top opcodes") else "right"
        )
    shown = sorted(rows, key=lambda r: (not r.is_entry, -r.cost.flops, r.name))[: args.limit]
    for r in shown:
        name = f"[bold]ENTRY {r.name}[/bold]" if r.is_entry else r.name
        top = ", ".join(f"{op}×{n}" for op, n in r.top_opcodes)
        c = r.cost
        table.add_row(
            name, str(r.instructions), top, _human(c.flops), _human(c.transcendentals),
            _human(c.bytes_read, "B"), _human(c.bytes_written, "B"),
        )  # fmt: skip
    console.print(table)
    if len(rows) > len(shown):
        console.print(f"({len(rows) - len(shown)} more computations; --limit N shows more)")
    console.print(
        f"Module totals (entry): {_human(total.flops)}FLOP, {_human(total.transcendentals)} transcendentals, "
        f"{_human(total.bytes_accessed, 'B')} accessed"
    )
    return 0


def cmd_roundtrip(args: argparse.Namespace, console: Console) -> int:
    from hlo_go.xla.bridge import xla_verifies

    failures = 0
    for path in args.files:
        try:
            module = load_hlo(path)
        except (HloGoError, OSError) as error:
            failures += 1
            console.print("[red]FAIL[/red] ", end="")
            console.print(f"{type(error).__name__}: {error}", markup=False, highlight=False)
            continue
        text = module.to_text()
        same = parse_hlo(text) == module
        verdict, message = xla_verifies(text)
        ok = same and verdict is not False
        failures += not ok
        status = "[green]ok[/green]" if ok else "[red]FAIL[/red]"
        verified = {True: "yes", False: "no", None: "could not run here"}[verdict]
        console.print(status + " ", end="")
        console.print(
            f"{path}: reparse equal={same}, XLA parses, its verifier: {verified} {message[:300]}",
            markup=False,
            highlight=False,
        )
    return 1 if failures else 0


def _corpus_error(console: Console, error: Exception) -> int:
    console.print("[red]error:[/red] ", end="")
    console.print(str(error), markup=False, highlight=False)
    return 2


def cmd_corpus_build(args: argparse.Namespace, console: Console) -> int:
    from hlo_go.corpus import UnknownGraphError, total_size
    from hlo_go.corpus_build import build

    start = time.perf_counter()
    try:
        result = build(
            args.names or None,
            progress=not args.no_progress,
            out_dir=args.out,
            index_only=args.index_only,
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
            _human(result["bytes"][name], "B"),
        )
    console.print(table)
    console.print(
        f"{len(result['seconds'])} graphs in {elapsed:.1f} s; corpus now {len(graphs)} graphs, "
        f"{_human(total_size(args.out), 'B')} stored"
    )
    return 0


def cmd_corpus_list(args: argparse.Namespace, console: Console) -> int:
    from hlo_go.corpus import index, total_size

    root = Path(args.root) if args.root else None
    data = index(root)
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
            _human(e["flops"]), _human(e["bytes"], "B"),
        )  # fmt: skip
    console.print(table)
    console.print(
        f"{len(graphs)} graphs, {len({e['family'] for e in graphs.values()})} families; "
        f"{_human(total_size(root), 'B')} stored"
    )
    return 0


def cmd_corpus_show(args: argparse.Namespace, console: Console) -> int:
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
        f"pre-fusion cost: {_human(entry['flops'])}FLOP, "
        f"{_human(entry['transcendentals'])} transcendentals, "
        f"{_human(entry['bytes'], 'B')} accessed; {entry['arguments']} arguments "
        f"({_human(entry['argument_bytes'], 'B')})"
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
            stage, _human(path(args.name, stage, root).stat().st_size, "B"),
            str(s["instructions"]), str(s["entry_instructions"]), str(s["computations"]),
            str(s["while_loops"]), "-" if s["nodes"] is None else str(s["nodes"]),
            s["sha256"][:12], top,
        )  # fmt: skip
    console.print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hlo-go", description="Learned graph optimization for XLA HLO."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summarize", help="parse an HLO module and summarize each computation")
    p.add_argument(
        "file", nargs="?", help="HLO text file (.hlo or .hlo.gz); default: the bundled example"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--limit", type=int, default=15, help="most rows to show (default 15)")
    p.set_defaults(func=cmd_summarize)
    p = sub.add_parser(
        "roundtrip", help="parse, print and check that XLA's parser accepts the printed text"
    )
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_roundtrip)

    add_simulate_command(sub)
    add_shard_command(sub)
    add_baseline_command(sub)
    add_train_commands(sub)
    add_passes_command(sub)
    add_measure_command(sub)
    add_eval_command(sub)
    corpus = sub.add_parser("corpus", help="the workload corpus: build, list, show")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True)
    p = corpus_sub.add_parser("build", help="regenerate stored graphs and index.json")
    p.add_argument("names", nargs="*", help="graphs to build (default: all)")
    p.add_argument("--index-only", action="store_true", help="recompute index.json only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--out", help="corpus directory to write (default: the hlo_corpus package)")
    p.set_defaults(func=cmd_corpus_build)
    p = corpus_sub.add_parser("list", help="table of the stored graphs")
    p.add_argument("--family", help="only this family")
    p.add_argument("--json", action="store_true", help="print the index entries as JSON")
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_corpus_list)
    p = corpus_sub.add_parser("show", help="summary of one stored graph")
    p.add_argument("name")
    p.add_argument("--top", type=int, default=6, help="opcodes to list per stage (default 6)")
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_corpus_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        return args.func(args, console)
    except HloGoError as e:  # every named error: the message, no traceback
        console.print("[red]error:[/red] ", end="")
        console.print(str(e), markup=False, highlight=False)
        return 1
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
