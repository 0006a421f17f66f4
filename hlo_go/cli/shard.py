"""``hlo-go shard``: choose SPMD shardings over a device mesh; simulate and measure them.

::

    hlo-go shard HLO ... [--mesh 2x4] [--method ilp|policy|dp|megatron|greedy|replicated ...]
                 [--cluster NAME] [--measure] [--out FILE.hlo] [--time-limit S] [--json]

``HLO`` is an HLO file (``.hlo``, ``.txt``, ``.hlo.gz``) or a corpus graph (its
unoptimized stage: SPMD partitioning runs before XLA's optimizations). Several
``--method`` values compare methods. It prints, per method, the step time simulated on
``--cluster`` (default ``host-cpu-N``, this host's CPU as the mesh's N devices), its
compute and communication parts, per-device peak memory, the collectives charged, the
solve time and the largest nodes' strategies; ``--measure`` compiles each choice through
XLA's SPMD partitioner for the mesh's CPU devices, runs it, says whether the outputs
match the unsharded module, counts the collectives XLA emitted, and times every choice
and the unsharded module interleaved (one unsharded time per input; CPU milliseconds on
this host, beside the simulated ones).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_inputs,
    bounded,
    check_out_file,
    cluster_type,
    print_error,
)
from hlo_go.cli._methods import method_type, names_help


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``shard`` (``func``: :func:`cmd_shard`)."""
    p = subparsers.add_parser(
        "shard",
        parents=parents,
        help="choose SPMD shardings over a device mesh; simulate and measure them",
    )
    add_inputs(p, help="HLO text files or corpus graph names (their unoptimized stage)")
    p.add_argument("--mesh", default="2x4", help="logical mesh, e.g. 2x4 or 8 (default 2x4)")
    p.add_argument(
        "--method",
        action="append",
        type=method_type("sharding"),
        metavar="METHOD",
        help=f"sharding method, repeat to compare: {names_help('sharding')} (default: dp and ilp)",
    )
    p.add_argument(
        "--cluster",
        type=cluster_type,
        default=None,
        metavar="NAME|FILE",
        help="the cluster to simulate: a preset or a .toml/.json file with at least the "
        "mesh's devices (default host-cpu-N: this host's CPU as the mesh's N devices)",
    )
    p.add_argument("--stage", default="unoptimized", help="corpus stage for a corpus graph")
    p.add_argument(
        "--time-limit",
        type=bounded(float, low=0.0),
        default=60.0,
        help="seconds of the ILP / policy fine-tuning (default 60)",
    )
    p.add_argument(
        "--measure", action="store_true", help="run on CPU devices: correctness and times"
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        type=check_out_file,
        help="one input: write the (last) method's annotated HLO",
    )
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(func=cmd_shard)


def _want_devices(count: int) -> None:
    """Asks JAX for ``count`` CPU devices if it has not started yet."""
    import jax

    # Once JAX has started this raises; compile_spmd then says what is missing.
    with contextlib.suppress(Exception):
        jax.config.update("jax_num_cpu_devices", max(count, 1))


_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]*\] ")


def distinct_messages(text: str) -> list[str]:
    """The lines of captured standard error, each message once (XLA's log prefix of
    level, time, thread and source line dropped, so repeats of one warning compare
    equal), in first-seen order."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        message = _LOG_PREFIX.sub("", line).strip()
        if message:
            seen.setdefault(message, None)
    return list(seen)


@contextlib.contextmanager
def _stderr_once() -> Any:
    """Captures standard error (file descriptor 2: XLA's C++ log, Python warnings) while
    every method compiles, then prints each distinct message once: XLA warns that GSPMD
    is deprecated on every SPMD compile."""
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("once")
                yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for message in distinct_messages(capture.read().decode(errors="replace")):
                print(message, file=sys.stderr)


def _cluster(args: argparse.Namespace, mesh: Any) -> Any:
    if args.cluster is not None:
        cluster = args.cluster
    elif mesh.size <= 8:
        cluster = cluster_type(f"host-cpu-{mesh.size}")
    else:
        raise UsageError(f"a {mesh.size}-device mesh needs --cluster (host-cpu-N has N <= 8)")
    if cluster.num_devices < mesh.size:
        raise UsageError(
            f"--cluster {cluster.name} has {cluster.num_devices} devices; "
            f"mesh {args.mesh} needs {mesh.size}"
        )
    return cluster


def cmd_shard(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go shard``; 0, or 1 when an input failed or a choice was not correct."""
    from hlo_go.sharding import Mesh

    try:
        mesh = Mesh.parse(args.mesh)
    except (KeyError, ValueError) as error:
        raise UsageError(f"--mesh {args.mesh}: {error}") from None
    cluster = _cluster(args, mesh)
    if args.out and len(args.inputs) > 1:
        raise UsageError("--out takes one input")
    if args.measure:
        _want_devices(mesh.size)
    failed = 0
    documents = []
    for source in args.inputs:
        try:
            done = _shard_one(source, mesh, cluster, args)
        except Exception as error:  # reported per input
            print_error(console, error)
            failed += 1
            continue
        failed += not all(r.get("correct", True) for r in done["rows"])
        if args.json:
            documents.append(
                {"source": done["source"], "mesh": str(mesh), "cluster": cluster.name,
                 "unsharded_ms": done["unsharded_ms"], "rows": done["rows"]}
            )  # fmt: skip
        else:
            _print(console, done, cluster.name, args)
    if args.json and documents:
        print(json.dumps(documents[0] if len(documents) == 1 else documents, indent=1))
    return EXIT_FAILED if failed else EXIT_OK


def _shard_one(source: str, mesh: Any, cluster: Any, args: argparse.Namespace) -> dict[str, Any]:
    from hlo_go.sharding import (
        build_sharding,
        gap_to_bound,
        get,
        ilp_with_result,
        simulate_sharding,
    )
    from hlo_go.sharding.lower import annotate, measure_shardings
    from hlo_go.sharding.problem import total_cost
    from hlo_go.sources import load_module

    module, described = load_module(source, args.stage)
    started = time.perf_counter()
    sg = build_sharding(module, mesh, cluster)
    build_s = time.perf_counter() - started
    methods = args.method or ["dp", "ilp"]
    rows: list[dict[str, Any]] = []
    choices: dict[str, np.ndarray] = {}
    for name in methods:
        started = time.perf_counter()
        solved = None
        if name == "ilp":
            choice, solved = ilp_with_result(sg, time_limit_s=args.time_limit)
        else:
            choice = get(name)(sg, time_limit_s=args.time_limit)
        solve_s = time.perf_counter() - started
        choices[name] = choice
        result = simulate_sharding(sg, choice)
        row: dict[str, Any] = {
            "method": name,
            "simulated_step_ms": result.step_time_s * 1e3,
            "simulated_compute_ms": result.compute_s * 1e3,
            "simulated_communication_ms": result.communication_s * 1e3,
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
        rows.append(row)
    unsharded_ms = None
    if args.measure:
        with _stderr_once():
            measured = measure_shardings(sg, choices)
        for row in rows:
            m = measured[row["method"]]
            row.update(
                correct=m.correct,
                max_abs_error=m.max_abs_error,
                xla_collectives=m.collectives,
                measured_cpu_ms=None if m.sharded_s is None else m.sharded_s * 1e3,
            )
            if m.unsharded_s is not None:
                unsharded_ms = m.unsharded_s * 1e3
    if args.out:
        Path(args.out).write_text(annotate(sg, choices[methods[-1]]).to_text())
    return {"source": described, "sg": sg, "build_s": build_s, "rows": rows,
            "unsharded_ms": unsharded_ms}  # fmt: skip


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


def _print(console: Console, done: dict[str, Any], cluster: str, args: argparse.Namespace) -> None:
    sg, rows = done["sg"], done["rows"]
    console.print(
        f"{done['source']}: {sg.num_nodes:,} nodes, mesh {sg.mesh} on {cluster}, "
        f"{int(sg.problem.num_strategies.sum()):,} strategies (built in {done['build_s']:.1f} s)",
        highlight=False,
    )
    table = Table(
        title=f"per-device SPMD step: simulated on {cluster}"
        + ("; measured on this host's CPU devices" if args.measure else ""),
        title_justify="left",
    )
    columns = ["method", f"simulated ms ({cluster})", "compute ms", "comm ms", "peak MB"]
    columns += ["collectives", "solve s"]
    if args.measure:
        columns += ["correct", "XLA collectives", "measured CPU ms"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("method", "collectives") else "right")
    best = min(r["simulated_step_ms"] for r in rows)
    for r in rows:
        cells = [
            r["method"],
            ("*" if r["simulated_step_ms"] == best else "") + f"{r['simulated_step_ms']:.3f}",
            f"{r['simulated_compute_ms']:.3f}",
            f"{r['simulated_communication_ms']:.3f}",
            f"{r['peak_memory_mb']:.0f}" + (" OOM" if r["oom"] else ""),
            ", ".join(f"{k} {v}" for k, v in r["collectives"].items()) or "-",
            f"{r['solve_s']:.2f}",
        ]
        if args.measure:
            cells += [
                "yes" if r["correct"] else f"NO ({r['max_abs_error']:.2e})",
                ", ".join(f"{k} {v}" for k, v in r["xla_collectives"].items()) or "-",
                "-" if r["measured_cpu_ms"] is None else f"{r['measured_cpu_ms']:.3f}",
            ]
        table.add_row(*cells)
    console.print(table)
    if args.measure:
        unsharded = done["unsharded_ms"]
        console.print(
            "unsharded module on one CPU device, timed interleaved with every method: "
            + ("-" if unsharded is None else f"{unsharded:.3f} ms"),
            highlight=False,
        )
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
        console.print(f"annotated HLO ({rows[-1]['method']}): {args.out}", highlight=False)
