"""The ``hlo-go teachers`` and ``hlo-go imitate`` commands: search teachers, then imitation.

::

    hlo-go teachers HLO ... --store DIR [--clusters v100x4,h100x8] [--method M]
                    [--evaluations N] [--seed S] [--workers W]
    hlo-go imitate HLO ... --store DIR --out DIR --steps N [--clusters ...] [--method M]
                   [--evaluations N] [--seed S] [--workers W] [--config FILE.json]
                   [--changed-share S] [--move-head] [--no-resume]

``teachers`` runs one search per (input, cluster preset) that is not in the store yet
(:func:`hlo_go.rl.make_teachers`: resumable, ``--workers`` processes) and prints each
teacher against the best heuristic it started from. ``imitate`` makes the same teachers
(running the missing ones), then trains the GO network on them
(:func:`hlo_go.rl.train_imitation`, no heuristic-prior input) into ``--out``, whose
checkpoint ``hlo-go finetune`` / ``infer`` / ``eval --policy`` take; with ``--move-head``
the network also learns to score single moves (simulated on each input,
:mod:`hlo_go.rl.moves`), which ``hlo-go infer --moves K`` decodes with. Inputs are HLO
files or corpus graph names (pre-fusion).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_inputs,
    bounded,
    check_out_dir,
    print_error,
)
from hlo_go.graph import OpGraph
from hlo_go.sources import load_graph

if TYPE_CHECKING:
    from hlo_go.rl.teachers import Teacher


def _presets(value: str) -> list[str]:
    """argparse type of ``--clusters``: comma-separated cluster preset names."""
    from hlo_go.sim import get_cluster, names

    presets = [v.strip() for v in value.split(",") if v.strip()]
    if not presets:
        raise argparse.ArgumentTypeError("give at least one cluster preset")
    for preset in presets:
        try:
            get_cluster(preset)
        except KeyError:
            raise argparse.ArgumentTypeError(
                f"unknown cluster preset {preset!r}; presets: {', '.join(names())}"
            ) from None
    return presets


def _add_teacher_flags(p: argparse.ArgumentParser) -> None:
    from hlo_go.rl.teachers import TEACHER_METHODS

    add_inputs(p)
    p.add_argument(
        "--store", type=check_out_dir, required=True, help="teacher store directory (resumable)"
    )
    p.add_argument(
        "--clusters",
        type=_presets,
        default=["v100x4"],
        help="comma-separated cluster presets, a teacher each (default v100x4)",
    )
    p.add_argument(
        "--method",
        choices=TEACHER_METHODS,
        default=TEACHER_METHODS[0],
        help=f"the teachers' search (default {TEACHER_METHODS[0]})",
    )
    p.add_argument(
        "--evaluations",
        type=bounded(int, low=1),
        default=2000,
        help="simulator evaluations per search (default 2000)",
    )
    p.add_argument("--seed", type=int, default=0, help="the searches' seed (default 0)")
    p.add_argument(
        "--workers", type=bounded(int, low=1), default=1, help="search processes (default 1)"
    )


def add_commands(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``teachers`` and ``imitate``."""
    p = subparsers.add_parser(
        "teachers",
        parents=parents,
        help="search teachers per input and cluster (resumable store)",
    )
    _add_teacher_flags(p)
    p.set_defaults(func=cmd_teachers)

    p = subparsers.add_parser(
        "imitate",
        parents=parents,
        help="train the GO network to decide as its teachers did",
    )
    _add_teacher_flags(p)
    p.add_argument("--steps", type=bounded(int, low=1), required=True, help="imitation steps")
    p.add_argument(
        "--out", type=check_out_dir, required=True, help="run directory (checkpoint, metrics)"
    )
    p.add_argument("--config", help="JSON file of TrainConfig fields (policy, max_devices, ...)")
    p.add_argument(
        "--changed-share",
        type=bounded(float, low=0.0, high=1.0),
        default=0.0,
        help="loss share of the decisions a teacher changed from the heuristic (default 0)",
    )
    p.add_argument(
        "--move-head",
        action="store_true",
        help="also train a move head on simulated single moves (for infer --moves K)",
    )
    p.add_argument("--no-resume", action="store_true", help="start over even if --out has a run")
    p.set_defaults(func=cmd_imitate)


def _teachers(args: argparse.Namespace) -> tuple[list[Teacher], dict[str, OpGraph]]:
    """The inputs' teachers (the missing ones searched) and their graphs by name.

    Raises:
      ValueError, KeyError, OSError: an input that cannot be read, a store or job problem
        (the caller reports it).
    """
    from hlo_go.rl.teachers import TeacherJob, make_teachers

    graphs = dict(load_graph(source) for source in args.inputs)
    jobs = [
        TeacherJob(name, cluster, args.method, args.evaluations, args.seed)
        for name in graphs
        for cluster in args.clusters
    ]
    teachers = make_teachers(
        jobs, store=args.store, workers=args.workers, graphs=graphs, progress=not args.quiet
    )
    return teachers, graphs


def teacher_table(teachers: list[Teacher]) -> Table:
    """One row per teacher: its graph, cluster, the heuristic it started from, both
    simulated step times, the speedup and its changes."""
    table = Table(title="teachers (simulated step time, ms)", title_justify="left")
    for column in ("graph", "cluster", "best heuristic", "heuristic", "teacher", "speedup"):
        table.add_column(column, justify="left" if column in ("graph", "cluster") else "right")
    table.add_column("changes kept / taken back", justify="right")
    table.add_column("search s", justify="right")
    for t in teachers:
        table.add_row(
            t.job.graph,
            t.job.cluster,
            t.best_heuristic,
            f"{t.best_heuristic_time * 1e3:.3f}",
            f"{t.step_time * 1e3:.3f}" + (" OOM" if t.oom else ""),
            f"{t.speedup:.3f}x",
            f"{t.changes} / {t.reverted}",
            f"{t.seconds:.1f}",
        )
    return table


def cmd_teachers(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go teachers``; 1 when an input cannot be read or a search fails (the
    finished ones stay stored)."""
    try:
        teachers, _ = _teachers(args)
    except (KeyError, ValueError, OSError, RuntimeError) as error:
        print_error(console, error)
        return EXIT_FAILED
    console.print(teacher_table(teachers))
    console.print(f"{len(teachers)} teachers in {args.store}")
    return EXIT_OK


def cmd_imitate(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go imitate``; 1 when an input, a teacher or the training fails."""
    from hlo_go.cli.train import build_config
    from hlo_go.rl import TrainConfig, train_imitation

    # A bad --config is a bad command line (UsageError: exit 2), found before any search.
    config = build_config(argparse.Namespace(config=args.config, quiet=args.quiet), TrainConfig())
    if args.move_head:
        config = config.replace(policy=dataclasses.replace(config.policy, move_head=True))
    try:
        teachers, graphs = _teachers(args)
        result = train_imitation(
            teachers, config, steps=args.steps, graphs=graphs, seed=args.seed,
            progress=not args.quiet, out_dir=Path(args.out), resume=not args.no_resume,
            changed_share=args.changed_share,
        )  # fmt: skip
    except (KeyError, ValueError, OSError, RuntimeError) as error:
        print_error(console, error)
        return EXIT_FAILED
    table = Table(title="imitation: the greedy decode against each teacher", title_justify="left")
    for column in ("teacher", "agreement before", "agreement after", "greedy ms", "teacher ms"):
        table.add_column(column, justify="left" if column == "teacher" else "right")
    for t in teachers:
        label = t.job.label
        if label not in result.agreement:
            continue  # a slower teacher of the same (graph, cluster): not trained on
        table.add_row(
            label,
            f"{result.agreement_before[label]:.1%}",
            f"{result.agreement[label]:.1%}",
            f"{result.step_times[label] * 1e3:.3f}",
            f"{t.step_time * 1e3:.3f}",
        )
    console.print(teacher_table(teachers))
    console.print(table)
    console.print(
        f"imitated {result.step} steps in {result.seconds:.1f} s; checkpoint in {args.out} "
        "(hlo-go finetune / infer / eval --policy take it)"
    )
    return EXIT_OK
