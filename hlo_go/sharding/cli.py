"""The ``hlo-go shard`` command (registered by :func:`add_shard_command`).

::

    hlo-go shard FILE_OR_CORPUS_NAME --mesh 2x4 --method ilp|policy|dp|megatron|greedy|replicated
                 [--cluster h100x8] [--measure] [--out FILE.hlo] [--time-limit S] [--json]

``FILE_OR_CORPUS_NAME`` is an HLO file (``.hlo``, ``.txt``, ``.hlo.gz``) or a corpus graph
(its unoptimized stage: SPMD partitioning runs before XLA's optimizations). Several
``--method`` values compare methods. It prints, per method, the simulated step time on the
cluster, its compute and communication parts, per-device peak memory, the collectives
charged, the solve time and the largest nodes' strategies; ``--measure`` compiles each
choice through XLA's SPMD partitioner for the mesh's CPU devices, runs it, says whether the
outputs match the unsharded module, counts the collectives XLA emitted and times both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table


def add_shard_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``shard`` to an ``argparse`` subparsers object (``func``: :func:`cmd_shard`).

    Args:
      subparsers: the result of ``parser.add_subparsers(...)``.

    Returns:
      The ``shard`` parser.
    """
    from hlo_go.sharding.methods import names

    p = subparsers.add_parser(
        "shard", help="choose SPMD shardings over a device mesh; simulate and measure them"
    )
    p.add_argument("module", metavar="FILE_OR_CORPUS_NAME", help="HLO file or corpus graph name")
    p.add_argument("--mesh", default="2x4", help="logical mesh, e.g. 2x4 or 8 (default 2x4)")
    p.add_argument(
        "--method",
        action="append",
        choices=names(),
        help="sharding method; repeat to compare (default: dp and ilp)",
    )
    p.add_argument("--cluster", default="h100x8", help="cluster preset or file (default h100x8)")
    p.add_argument("--stage", default="unoptimized", help="corpus stage for a corpus graph")
    p.add_argument("--time-limit", type=float, default=60.0, help="ILP / policy-ft seconds")
    p.add_argument(
        "--measure", action="store_true", help="run on CPU devices: correctness and times"
    )
    p.add_argument("--out", metavar="FILE", help="write the (last) method's annotated HLO")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(func=cmd_shard)
    return p


def _want_devices(count: int) -> None:
    """Asks JAX for ``count`` CPU devices if it has not started yet."""
    import jax

    # Once JAX has started this raises; compile_spmd then says what is missing.
    with contextlib.suppress(Exception):
        jax.config.update("jax_num_cpu_devices", max(count, 1))


def cmd_shard(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go shard``; returns the exit code."""
    from hlo_go.sharding import (
        Mesh,
        build_sharding,
        gap_to_bound,
        get,
        ilp_with_result,
        simulate_sharding,
    )
    from hlo_go.sharding.lower import annotate, measure_sharding
    from hlo_go.sharding.problem import total_cost
    from hlo_go.sim.cli import load_cluster_arg, load_module

    try:
        mesh = Mesh.parse(args.mesh)
        if args.measure:
            _want_devices(mesh.size)
        cluster = load_cluster_arg(args.cluster)
        module, source = load_module(args.module, args.stage)
        started = time.perf_counter()
        sg = build_sharding(module, mesh, cluster)
    except (KeyError, ValueError) as error:
        console.print(f"[red]error:[/red] {error}", highlight=False)
        return 2
    build_s = time.perf_counter() - started
    methods = args.method or ["dp", "ilp"]
    rows: list[dict[str, Any]] = []
    for name in methods:
        started = time.perf_counter()
        solved = None
        if name == "ilp":
            choice, solved = ilp_with_result(sg, time_limit_s=args.time_limit)
        else:
            choice = get(name)(sg, time_limit_s=args.time_limit)
        solve_s = time.perf_counter() - started
        result = simulate_sharding(sg, choice)
        row: dict[str, Any] = {
            "method": name,
            "step_ms": result.step_time_s * 1e3,
            "compute_ms": result.compute_s * 1e3,
            "communication_ms": result.communication_s * 1e3,
            "peak_memory_mb": result.peak_memory / 1e6,
            "oom": result.oom,
            "collectives": result.collectives,
            "solve_s": solve_s,
            "strategies": _top_strategies(sg, choice),
        }
        if solved is not None:
            row.update(
                ilp_status=solved.status,
                ilp_lower_bound_ms=(
                    solved.lower_bound * 1e3 if math.isfinite(solved.lower_bound) else None
                ),
                ilp_gap_to_bound=gap_to_bound(total_cost(sg.problem, choice), solved.lower_bound),
            )
        if args.measure:
            m = measure_sharding(sg, choice)
            row.update(
                correct=m.correct,
                max_abs_error=m.max_abs_error,
                xla_collectives=m.collectives,
                measured_ms=None if m.sharded_s is None else m.sharded_s * 1e3,
                unsharded_ms=None if m.unsharded_s is None else m.unsharded_s * 1e3,
            )
        rows.append(row)
        if args.out and name == methods[-1]:
            Path(args.out).write_text(annotate(sg, choice).to_text())
    if args.json:
        print(json.dumps({"source": source, "mesh": str(mesh), "rows": rows}, indent=1))
        return 0 if all(r.get("correct", True) for r in rows) else 1
    _print(console, source, sg, cluster.name, build_s, rows, args)
    return 0 if all(r.get("correct", True) for r in rows) else 1


def _top_strategies(sg: Any, choice: np.ndarray, count: int = 5) -> list[str]:
    """The chosen strategies of the nodes that cost most replicated."""
    cost = sg.problem.node_cost[:, 0]
    order = np.argsort(-np.where(np.isfinite(cost), cost, 0.0))[:count]
    instructions = sg.module.entry.instructions
    return [
        f"{instructions[v].name} ({instructions[v].opcode}): "
        f"{sg.strategies[v][int(choice[v])].name}"
        for v in order.tolist()
    ]


def _print(
    console: Console,
    source: str,
    sg: Any,
    cluster: str,
    build_s: float,
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
) -> None:
    console.print(
        f"{source}: {sg.num_nodes:,} nodes, mesh {sg.mesh} on {cluster}, "
        f"{int(sg.problem.num_strategies.sum()):,} strategies (built in {build_s:.1f} s)"
    )
    table = Table(title="simulated per-device step (SPMD)")
    for column in (
        "method",
        "step ms",
        "compute ms",
        "comm ms",
        "peak MB",
        "collectives",
        "solve s",
    ):
        table.add_column(column, justify="left" if column in ("method", "collectives") else "right")
    if args.measure:
        for column in ("correct", "XLA collectives", "measured ms", "unsharded ms"):
            table.add_column(column, justify="right")
    best = min(r["step_ms"] for r in rows)
    for r in rows:
        cells = [
            r["method"],
            ("*" if r["step_ms"] == best else "") + f"{r['step_ms']:.3f}",
            f"{r['compute_ms']:.3f}",
            f"{r['communication_ms']:.3f}",
            f"{r['peak_memory_mb']:.0f}" + (" OOM" if r["oom"] else ""),
            ", ".join(f"{k} {v}" for k, v in r["collectives"].items()) or "-",
            f"{r['solve_s']:.2f}",
        ]
        if args.measure:
            cells += [
                "yes" if r["correct"] else f"NO ({r['max_abs_error']:.2e})",
                ", ".join(f"{k} {v}" for k, v in r["xla_collectives"].items()) or "-",
                "-" if r["measured_ms"] is None else f"{r['measured_ms']:.3f}",
                "-" if r["unsharded_ms"] is None else f"{r['unsharded_ms']:.3f}",
            ]
        table.add_row(*cells)
    console.print(table)
    for r in rows:
        if "ilp_status" not in r:
            continue
        parts = [f"ilp: {r['ilp_status']}"]
        if r["ilp_status"] != "optimal":
            parts.append(f" at the {args.time_limit:g} s limit")
        if r["ilp_lower_bound_ms"] is not None:
            parts.append(f"; proved lower bound {r['ilp_lower_bound_ms']:.3f} ms")
        if r["ilp_gap_to_bound"] is not None:
            parts.append(f" (choice at most {r['ilp_gap_to_bound']:.2%} above the optimum)")
        console.print("".join(parts), highlight=False)
    for r in rows:
        console.print(f"[bold]{r['method']}[/bold] on the costliest nodes:", highlight=False)
        for line in r["strategies"]:
            console.print(f"  {line}", highlight=False, markup=False)
    if args.out:
        console.print(f"annotated HLO ({rows[-1]['method']}): {args.out}")
