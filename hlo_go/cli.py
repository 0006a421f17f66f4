"""The ``hlo-go`` command.

hlo-go summarize [FILE]       parse an HLO module and print a per-computation table
hlo-go roundtrip FILE...      parse, print, and check XLA accepts the printed text
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

from hlo_go.hlo import HloModule, HloParseError, load_hlo, module_cost, parse_hlo, summarize


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
    from hlo_go.xla import xla_accepts

    failures = 0
    for path in args.files:
        module = load_hlo(path)
        text = module.to_text()
        same = parse_hlo(text) == module
        accepted, message = xla_accepts(text)
        ok = same and accepted
        failures += not ok
        status = "[green]ok[/green]" if ok else "[red]FAIL[/red]"
        console.print(
            f"{status} {path}: reparse equal={same}, XLA accepts={accepted} {message[:200]}"
        )
    return 1 if failures else 0


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        return args.func(args, console)
    except HloParseError as e:
        console.print("[red]error:[/red] ", end="")
        console.print(str(e), markup=False, highlight=False)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
