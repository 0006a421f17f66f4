"""``hlo-go summarize`` and ``hlo-go roundtrip``: read HLO modules.

::

    hlo-go summarize [HLO ...] [--json] [--limit N]
    hlo-go roundtrip HLO ...

``summarize`` prints a per-computation cost table of each input (default: the bundled
example module); ``roundtrip`` parses, prints and re-parses each input and checks that
XLA's parser accepts the printed text. An input that cannot be read is reported and the
others still run (exit code 1).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import EXIT_FAILED, EXIT_OK, add_inputs, bounded, print_error
from hlo_go.hlo import HloModule, module_cost, parse_hlo, summarize


def human(n: float, unit: str = "") -> str:
    """``1.23 G`` style: a number scaled by k / M / G / T, with an optional unit."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def add_commands(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``summarize`` and ``roundtrip``."""
    p = subparsers.add_parser(
        "summarize", parents=parents, help="parse HLO modules and summarize each computation"
    )
    add_inputs(
        p, nargs="*", help="HLO text files or corpus graph names (default: the bundled example)"
    )
    p.add_argument("--stage", default="prefusion", help="corpus stage of corpus graph names")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--limit", type=bounded(int, low=1), default=15, help="most rows to show (default 15)"
    )
    p.set_defaults(func=cmd_summarize)
    p = subparsers.add_parser(
        "roundtrip",
        parents=parents,
        help="parse, print and check that XLA's parser accepts the printed text",
    )
    add_inputs(p)
    p.add_argument("--stage", default="prefusion", help="corpus stage of corpus graph names")
    p.set_defaults(func=cmd_roundtrip)


def _load(source: str | None, stage: str) -> tuple[HloModule, str, float]:
    from hlo_go.examples import example_path
    from hlo_go.sources import load_module

    start = time.perf_counter()
    module, described = load_module(source or str(example_path()), stage)
    return module, described, time.perf_counter() - start


def _summary_json(module: HloModule, source: str) -> dict[str, Any]:
    total = module_cost(module)
    return {
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
            for r in summarize(module)
        ],
    }


def _print_summary(
    console: Console, module: HloModule, source: str, seconds: float, limit: int
) -> None:
    rows = summarize(module)
    total = module_cost(module)
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
    shown = sorted(rows, key=lambda r: (not r.is_entry, -r.cost.flops, r.name))[:limit]
    for r in shown:
        name = f"[bold]ENTRY {r.name}[/bold]" if r.is_entry else r.name
        top = ", ".join(f"{op}×{n}" for op, n in r.top_opcodes)
        c = r.cost
        table.add_row(
            name, str(r.instructions), top, human(c.flops), human(c.transcendentals),
            human(c.bytes_read, "B"), human(c.bytes_written, "B"),
        )  # fmt: skip
    console.print(table)
    if len(rows) > len(shown):
        console.print(f"({len(rows) - len(shown)} more computations; --limit N shows more)")
    console.print(
        f"Module totals (entry): {human(total.flops)}FLOP, "
        f"{human(total.transcendentals)} transcendentals, "
        f"{human(total.bytes_accessed, 'B')} accessed"
    )


def cmd_summarize(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go summarize``; 0, or 1 when an input could not be read."""
    failed = 0
    documents = []
    for source in args.inputs or [None]:
        try:
            module, described, seconds = _load(source, args.stage)
        except Exception as error:  # reported per input
            print_error(console, error)
            failed += 1
            continue
        if args.json:
            documents.append(_summary_json(module, described))
        else:
            _print_summary(console, module, described, seconds, args.limit)
    if args.json and documents:
        console.print_json(json.dumps(documents[0] if len(documents) == 1 else documents))
    return EXIT_FAILED if failed else EXIT_OK


def cmd_roundtrip(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go roundtrip``; 0, or 1 when an input failed any check."""
    from hlo_go.xla.bridge import xla_verifies

    failures = 0
    for source in args.inputs:
        try:
            module, _, _ = _load(source, args.stage)
        except Exception as error:  # reported per input
            print_error(console, error)
            failures += 1
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
            f"{source}: reparse equal={same}, XLA parses, its verifier: {verified} {message[:300]}",
            markup=False,
            highlight=False,
        )
    return EXIT_FAILED if failures else EXIT_OK
