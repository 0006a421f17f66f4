"""``hlo-go measure``: lower fusion and schedule decisions into XLA, time them against
XLA's default compile.

::

    hlo-go measure HLO ... [--fusion METHOD] [--schedule METHOD] [--repeats N]
                   [--clock cpu|wall] [--cpu K] [--allocator system|retain]
                   [--timeout S] [--budget N] [--seed S] [--json]

``HLO`` is a corpus graph name (its training step as a jax function, on random inputs)
or an HLO file (``.hlo`` / ``.hlo.gz``; random inputs from its entry parameters).
``--fusion`` and ``--schedule`` take a method name (``--help`` lists them; ``searched`` is
simulated annealing over the simulator on ``host-cpu-1``, ``--schedule xla`` XLA's own
order). The lowering's outputs are checked against XLA's default compile, then both are
timed interleaved and printed with their spread.

Each input is measured in a child process pinned to core ``--cpu`` (default: the last
core), timed by CPU time (``--clock cpu``): on a shared host, other processes' turns on
that core do not count, so the ratio stays honest. The child runs under a limit
(``--timeout`` wall-clock seconds, or by default a CPU-time limit,
:func:`hlo_go.xla.timing.deadline_after`: in proportion to the compile and run time of
XLA's default compile, at least a minute); an input that
runs past it fails with that reason. With ``--allocator retain`` the child's malloc keeps
freed memory for the next call (:data:`hlo_go.xla.timing.RETAIN_MALLOC_ENV`).

Exit codes: 0 every input measured and correct, 1 an input failed (unreadable, not
lowered, outputs that differ, timed out), 2 a bad command line.
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
    add_inputs,
    bounded,
    print_error,
)
from hlo_go.cli._methods import XLA_ORDER, method_type, names_help

CLOCK_NOTES = {
    "cpu": "CPU time of a process pinned to core {cpu}",
    "wall": "wall-clock time of a process pinned to core {cpu} (other processes' turns count)",
}


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``measure``."""
    p = subparsers.add_parser(
        "measure",
        parents=parents,
        help="lower fusion and schedule decisions into XLA; step time vs XLA's default",
    )
    add_inputs(p)
    p.add_argument(
        "--fusion",
        default="xla-cpu-like",
        type=method_type("fusion"),
        metavar="METHOD",
        help=f"fusion method: {names_help('fusion')} (default xla-cpu-like)",
    )
    p.add_argument(
        "--schedule",
        default=XLA_ORDER,
        type=method_type("schedule"),
        metavar="METHOD",
        help=f"schedule method: {names_help('schedule')} (default {XLA_ORDER}: XLA's order)",
    )
    p.add_argument(
        "--repeats", type=bounded(int, low=1), default=10, help="timed rounds (default 10)"
    )
    p.add_argument(
        "--warmup", type=bounded(int, low=0), default=1, help="untimed rounds first (default 1)"
    )
    p.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: CPU time of the pinned process (default; honest on a busy host), "
        "wall: wall-clock time",
    )
    p.add_argument(
        "--cpu",
        type=bounded(int, low=0),
        default=None,
        help="core of the measuring process (default: the last one this process may use)",
    )
    p.add_argument(
        "--allocator",
        choices=("system", "retain"),
        default="system",
        help="malloc of the measuring process: system, or retain (freed memory kept for reuse)",
    )
    p.add_argument(
        "--timeout",
        type=bounded(float, low=1.0),
        default=None,
        metavar="SECONDS",
        help="wall-clock limit of each input's measuring process (default: a CPU-time "
        "limit of 20x XLA's compile time plus 50x its run time per run, at least 60 s)",
    )
    p.add_argument(
        "--budget",
        type=bounded(int, low=1),
        default=None,
        help="simulator evaluations of 'searched'; measured candidates of 'measured-search'",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of inputs and methods")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=cmd_measure)


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
    limit_self: bool = False,
) -> dict[str, Any]:
    """Measures one input (module-level: it runs in the measuring child process).

    Args:
      graph: an HLO file or a corpus graph name.
      fusion: the fusion method.
      schedule: the schedule method (None: XLA's order).
      repeats: timed rounds.
      warmup: untimed rounds first.
      clock: ``"cpu"`` or ``"wall"``.
      budget: simulator evaluations of ``searched``.
      seed: seed of inputs and methods.
      limit_self: arm this process's deadline from XLA's default compile
        (:func:`hlo_go.xla.timing.deadline_after`).

    Returns:
      The :class:`~hlo_go.xla.Measurement` as a dict, plus ``graph``, ``nodes`` and
      ``limit_s`` (the deadline armed, or None).
    """
    from pathlib import Path

    from hlo_go import methods
    from hlo_go.xla.lowering import LoweringError, program
    from hlo_go.xla.measure import measure_many
    from hlo_go.xla.timing import arm_deadline, deadline_after

    if Path(graph).is_file():
        prog = program(Path(graph), seed=seed)
    else:
        from hlo_corpus import get_workload

        try:
            workload = get_workload(graph)
        except KeyError:
            raise LoweringError(f"{graph!r} is neither an HLO file nor a corpus graph") from None
        step, abstract = workload.make()
        prog = program(step, abstract, seed=seed)
    limit = None
    # a measured search compiles and runs far more than the deadline allows for
    if limit_self and methods.MEASURED not in (fusion, schedule):
        start = time.process_time()
        reference = prog.default()
        compile_s = time.process_time() - start
        runs = 2 * (warmup + repeats + 2)
        limit = deadline_after(lambda: reference(*prog.args), runs=runs, compile_s=compile_s)
    variants = methods.variants(
        prog.graph, {"variant": (fusion, schedule)}, seed=seed, budget=budget, program=prog
    )
    result = measure_many(
        prog,
        variants,
        repeats=repeats,
        warmup=warmup,
        clock=clock,  # type: ignore[arg-type]
        seed=seed,
    )["variant"]
    arm_deadline(None)
    return {"graph": graph, "nodes": prog.graph.num_nodes, "limit_s": limit, **result._asdict()}


def _overlap(a: Any, b: Any) -> bool:
    return a is not None and b is not None and max(a[0], b[0]) <= min(a[1], b[1])


def _measure_one(source: str, args: argparse.Namespace) -> dict[str, Any]:
    from hlo_go.xla.timing import default_cpu, in_pinned_process

    cpu = default_cpu() if args.cpu is None else args.cpu
    out = in_pinned_process(
        measure_graph,
        source,
        cpu=cpu,
        allocator=args.allocator,
        timeout=args.timeout,
        fusion=args.fusion,
        schedule=None if args.schedule == XLA_ORDER else args.schedule,
        repeats=args.repeats,
        warmup=args.warmup,
        clock=args.clock,
        budget=args.budget,
        seed=args.seed,
        limit_self=args.timeout is None,
    )
    out["cpu"] = cpu
    out["spreads_overlap"] = bool(out["correct"]) and _overlap(
        out["spread"], out["baseline_spread"]
    )
    return out


def _print(console: Console, source: str, out: dict[str, Any], args: argparse.Namespace) -> None:
    clock = CLOCK_NOTES[out["clock"]].format(cpu=out["cpu"])
    console.print(
        f"[bold]{source}[/bold] ({out['nodes']} pre-fusion nodes): {out['label']}, "
        f"{out['kernels']} fusions; {clock}, {out['repeats']} interleaved rounds",
        highlight=False,
    )
    if not out["correct"]:
        print_error(console, out["message"], heading="not correct")
        return
    checked = "match" + (f" ({out['message']})" if out["message"] else "")
    console.print(
        f"outputs checked against XLA's default compile (jax.jit): {checked}", highlight=False
    )
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
    if out["spreads_overlap"]:
        console.print(
            "[yellow]warning:[/yellow] the two min–max ranges overlap: the difference is "
            "within this host's noise (more --repeats, or a quieter host)",
            highlight=False,
        )


def cmd_measure(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go measure``; 0, or 1 when an input failed (including outputs that
    differ from XLA's default and a measurement past its limit)."""
    failed = 0
    documents = []
    for source in args.inputs:
        try:
            out = _measure_one(source, args)
        except Exception as error:  # reported per input: unreadable, crashed, timed out
            print_error(console, f"{source}: {type(error).__name__}: {error}")
            failed += 1
            documents.append({"graph": source, "correct": False, "error": str(error)})
            continue
        failed += not out["correct"]
        documents.append(out)
        if not args.json:
            _print(console, source, out, args)
    if args.json:
        console.print_json(
            json.dumps(documents[0] if len(documents) == 1 else documents, default=str)
        )
    return EXIT_FAILED if failed else EXIT_OK


def _megabytes(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f}"
