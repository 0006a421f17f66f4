"""Runs benchmarks: ``python -m benchmarks [NAME ...] [--quick]``.

With no names, every ``benchmarks/bench_NAME.py`` runs, in name order. Each one
prints a table and writes ``benchmarks/results/NAME.json`` (``NAME.quick.json``
under ``--quick``, so a smoke run never overwrites a full measurement).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from rich.console import Console

from benchmarks import RESULTS_DIR, available
from benchmarks._report import print_result, write_result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    known = available()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {known})"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller inputs and fewer repeats, for a smoke test"
    )
    args = parser.parse_args(argv)
    names = args.names or known
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {known}")

    console = Console()
    failed: list[str] = []
    for name in names:
        console.rule(f"[bold]{name}[/bold]{' (quick)' if args.quick else ''}")
        module = importlib.import_module(f"benchmarks.bench_{name}")
        start = time.perf_counter()
        try:
            result = module.run(quick=args.quick)
        except Exception:
            console.print(traceback.format_exc(), markup=False, highlight=False)
            failed.append(name)
            continue
        result = {**result, "wall_s": round(time.perf_counter() - start, 3)}
        path = RESULTS_DIR / f"{name}{'.quick' if args.quick else ''}.json"
        write_result(path, name, result, quick=args.quick)
        print_result(console, name, result)
        console.print(f"wrote {path}")
    if failed:
        console.print(f"[red]failed: {', '.join(failed)}[/red]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
