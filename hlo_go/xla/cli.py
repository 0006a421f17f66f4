"""The ``hlo-go measure`` command (registered by :func:`add_measure_command`).

::

    hlo-go measure GRAPH [--fusion METHOD] [--schedule METHOD] [--repeats N]
                   [--clock wall|cpu] [--cpu K [--allocator system|retain]] [--budget N] [--json]

``GRAPH`` is a corpus graph name (its training step as a jax function, on random
inputs) or an HLO file (``.hlo`` / ``.hlo.gz``; random inputs from its entry
parameters). ``--fusion`` and ``--schedule`` take a method name: a fusion baseline
(``no-fusion``, ``xla-cpu-like``, ``fuse-all-legal``, ``priority-fusion``), a schedule
baseline (``fifo``, ``critical-path``), ``searched`` (simulated annealing over the
simulator on ``host-cpu-1``), or ``xla`` for XLA's own order (schedule only). The
lowering's outputs are checked against XLA's default compile, then both are timed
interleaved and printed with their spread. ``--cpu K`` measures in a child process
pinned to core K, timed by CPU time; with ``--allocator retain`` that child's malloc keeps
freed memory for the next call (:data:`hlo_go.xla.timing.RETAIN_MALLOC_ENV`), so no call
page-faults its temporaries in. The table shows each compile's temporaries (XLA's buffer
assignment), which XLA:CPU allocates on every call.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table


def add_measure_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``measure`` to an ``argparse`` subparsers object.

    The parser's ``func`` default is :func:`cmd_measure`, called as
    ``func(args, console)`` and returning the exit code.

    Args:
      subparsers: the result of ``parser.add_subparsers(...)``.

    Returns:
      The ``measure`` parser.
    """
    p = subparsers.add_parser(
        "measure", help="lower fusion and schedule decisions into XLA; step time vs XLA default"
    )
    p.add_argument("graph", metavar="GRAPH", help="corpus graph name or HLO file")
    p.add_argument("--fusion", default="xla-cpu-like", help="fusion method (default xla-cpu-like)")
    p.add_argument(
        "--schedule", default="xla", help="schedule method, or 'xla' for XLA's order (default)"
    )
    p.add_argument("--repeats", type=int, default=10, help="timed rounds (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    p.add_argument(
        "--clock", choices=("wall", "cpu"), default=None, help="default: wall; cpu with --cpu"
    )
    p.add_argument("--cpu", type=int, default=None, help="measure in a process pinned to this core")
    p.add_argument(
        "--allocator",
        choices=("system", "retain"),
        default="system",
        help="malloc of the --cpu child: system, or retain (freed memory kept for reuse)",
    )
    p.add_argument("--budget", type=int, default=None, help="simulator evaluations of 'searched'")
    p.add_argument("--seed", type=int, default=0, help="seed of inputs and methods")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_measure)
    return p


def measure_graph(
    graph: str,
    *,
    fusion: str,
    schedule: str | None,
    repeats: int,
    warmup: int,
    clock: str,
    budget: int | None,
    seed: int,
) -> dict[str, Any]:
    """Measures one graph (module-level, so it can run in a pinned child process).

    Returns:
      The :class:`~hlo_go.xla.Measurement` as a dict, plus ``graph`` and ``nodes``.
    """
    from pathlib import Path

    from hlo_go import methods
    from hlo_go.xla.lowering import LoweringError, program
    from hlo_go.xla.measure import measure_many

    if Path(graph).exists():
        prog = program(Path(graph), seed=seed)
    else:
        from hlo_corpus import get_workload

        try:
            workload = get_workload(graph)
        except KeyError:
            raise LoweringError(f"{graph!r} is neither an HLO file nor a corpus graph") from None
        step, abstract = workload.make()
        prog = program(step, abstract, seed=seed)
    variants = methods.variants(
        prog.graph, {"variant": (fusion, schedule)}, seed=seed, budget=budget
    )
    result = measure_many(
        prog,
        variants,
        repeats=repeats,
        warmup=warmup,
        clock=clock,  # type: ignore[arg-type]
        seed=seed,
    )["variant"]
    return {"graph": graph, "nodes": prog.graph.num_nodes, **result._asdict()}


def cmd_measure(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go measure``; prints a table (or JSON). Returns 0, or 1 when the lowering
    is incorrect or fails."""
    clock = args.clock or ("cpu" if args.cpu is not None else "wall")
    if args.allocator != "system" and args.cpu is None:
        console.print(
            "[red]error:[/red] --allocator needs --cpu K (malloc is set up when the measuring "
            "process starts)",
            markup=True,
            highlight=False,
        )
        return 2
    from hlo_go import methods

    try:
        methods.check_name("fusion", args.fusion)
        methods.check_name("schedule", args.schedule)
    except KeyError as error:  # methods.UnknownMethodError
        console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
        return 2
    kwargs = {
        "fusion": args.fusion,
        "schedule": None if args.schedule == "xla" else args.schedule,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "clock": clock,
        "budget": args.budget,
        "seed": args.seed,
    }
    try:
        if args.cpu is not None:
            from hlo_go.xla.timing import in_pinned_process

            out = in_pinned_process(
                measure_graph, args.graph, cpu=args.cpu, allocator=args.allocator, **kwargs
            )
        else:
            out = measure_graph(args.graph, **kwargs)
    except (ValueError, KeyError, RuntimeError) as error:  # LoweringError, FusionError, ...
        console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
        return 1
    if args.json:
        console.print_json(json.dumps(out, default=str))
        return 0 if out["correct"] else 1
    console.print(
        f"[bold]{args.graph}[/bold] ({out['nodes']} pre-fusion nodes): {out['label']}, "
        f"{out['kernels']} fusions, {clock} clock, {out['repeats']} rounds"
    )
    if not out["correct"]:
        console.print(f"[red]not correct:[/red] {out['message']}", highlight=False)
        return 1
    table = Table(title="Measured step time (median, min–max), interleaved with XLA's default")
    for column in ("variant", "median s", "min–max s", "relative", "temporaries MB"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    base, base_spread = out["baseline_time_s"], out["baseline_spread"]
    table.add_row(
        "XLA default",
        f"{base:.4f}",
        f"{base_spread[0]:.4f}–{base_spread[1]:.4f}",
        "1.000",
        _megabytes(out["baseline_temp_bytes"]),
    )
    spread = out["spread"]
    table.add_row(
        f"fusion={args.fusion}, schedule={args.schedule}",
        f"{out['time_s']:.4f}",
        f"{spread[0]:.4f}–{spread[1]:.4f}",
        f"{out['time_s'] / base:.3f}",
        _megabytes(out["temp_bytes"]),
    )
    console.print(table)
    return 0


def _megabytes(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f}"
