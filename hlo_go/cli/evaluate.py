"""``hlo-go eval``: baselines and the GO policy on HLO inputs; a table, files, charts.

::

    hlo-go eval HLO ... [--policy CKPT|NAME|none] [--baselines a,b,c]
                [--cluster NAME] [--samples K] [--moves M | --finetune N]
                [--measure [--repeats N] [--cpu K] [--timeout S]]
                [--stage prefusion] [--seed S] [--out DIR] [--no-timelines]
                [--format table|csv|json|markdown] [--wide]

``HLO`` is an HLO text file (``.hlo``, ``.hlo.gz``, ``.txt``), a directory (every such
file in it, sorted) or a corpus graph name (its ``--stage``). Every input is simulated on
``--cluster`` (default ``host-cpu-1``) with every method; the table has a row per method
(the GO policy's always among them) and a column per input, each cell the simulated ms
and the speedup over one device, the best marked ``*``; inputs that do not fit the
terminal's width go to another page (``--wide``: inputs down, methods across). An input
that cannot be evaluated is listed with its reason, and the run goes on. ``--format``
prints CSV, JSON or Markdown instead of the table.

``--policy`` takes a checkpoint file, a run directory or a shipped policy name (default:
the shipped default policy; ``none``: no policy). ``--measure`` also lowers each method's
fusion and schedule into XLA:CPU on this host and measures it against XLA's default
compile, in a child process pinned to core ``--cpu`` (CPU time) under a limit
(``--timeout``, default in proportion to XLA's default run time). ``--out`` (checked
before any work) receives ``eval.csv``, ``eval.json``, a bar chart ``eval.png`` and each
input's best timeline ``timeline_<input>.png``.

Exit codes: 0 every input evaluated (and measured, with ``--measure``), 1 some input or
method failed (the others are still reported), 2 a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_cluster,
    add_inputs,
    add_moves,
    bounded,
    check_out_dir,
)
from hlo_go.cli._methods import method_list_type, names_help

FORMATS = ("table", "csv", "json", "markdown")


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``eval`` (``func``: :func:`cmd_eval`)."""
    from hlo_go.corpus import STAGES

    p = subparsers.add_parser(
        "eval",
        parents=parents,
        help="evaluate baselines and the GO policy on HLO files or corpus graphs; "
        "table, CSV/JSON, charts",
    )
    add_inputs(p, help="HLO text files, directories of them, or corpus graph names")
    p.add_argument(
        "--policy",
        help="checkpoint file, run directory or shipped policy name "
        "(default: the shipped default policy; 'none': no policy)",
    )
    p.add_argument(
        "--baselines",
        type=method_list_type("baseline"),
        help="comma-separated baseline names, or placement+scheduling+fusion combinations "
        f"(default: the non-search heuristics); names: {names_help('baseline')}",
    )
    add_cluster(p)
    p.add_argument(
        "--samples",
        type=bounded(int, low=0),
        default=0,
        help="zero-shot: also try K policy samples",
    )
    add_moves(p)
    p.add_argument(
        "--finetune",
        type=bounded(int, low=0),
        default=0,
        metavar="N",
        help="fine-tune the policy N (<= 50) steps per input instead of zero-shot",
    )
    p.add_argument(
        "--measure", action="store_true", help="also measure each method in XLA:CPU on this host"
    )
    p.add_argument(
        "--repeats",
        type=bounded(int, low=1),
        default=5,
        help="timed rounds per measurement (default 5)",
    )
    p.add_argument(
        "--cpu",
        type=bounded(int, low=0),
        help="core of the pinned measuring process (default: the last one)",
    )
    p.add_argument(
        "--timeout",
        type=bounded(float, low=1.0),
        metavar="SECONDS",
        help="limit of each input's measuring process (default: in proportion to XLA's "
        "default compile and run time, at least 60 s)",
    )
    p.add_argument(
        "--stage", default="prefusion", choices=STAGES, help="corpus stage of corpus names"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of methods, samples and inputs")
    p.add_argument(
        "--out",
        metavar="DIR",
        type=check_out_dir,
        help="write eval.csv, eval.json and PNGs here",
    )
    p.add_argument("--no-timelines", action="store_true", help="no timeline PNGs in --out")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="what to print: table (default), csv, json or markdown",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="the wide table: inputs down, methods across (may not fit the terminal)",
    )
    p.set_defaults(func=cmd_eval)


def resolve_policy(spec: str | None) -> tuple[Any, str]:
    """The checkpoint ``--policy`` names, and a note when no policy will run.

    Args:
      spec: the flag's value: None (the shipped default policy), ``"none"``, a shipped
        policy name, a checkpoint file or a run directory.

    Returns:
      ``(checkpoint or None, note)``: a missing shipped default is a note, not an error.

    Raises:
      FileNotFoundError: a named policy or checkpoint that does not exist.
      ValueError: a file that is not an hlo-go checkpoint.
    """
    from hlo_go.evaluate.run import one_line
    from hlo_go.pretrained import DEFAULT, SHIPPED, load_policy

    if spec is not None and spec.lower() == "none":
        return None, "GO policy: not run (--policy none)"
    if spec is not None:
        return load_policy(spec), ""
    try:
        return load_policy(None), ""
    except FileNotFoundError:
        why = "is not installed (yet)"
    except ValueError as error:
        why = f"is unreadable: {one_line(error)}"
    return None, (
        f"GO policy: not run; the shipped default policy {DEFAULT!r} "
        f"(hlo_go/pretrained/{SHIPPED[DEFAULT]}) {why}; give one with --policy"
    )


def _print_problems(console: Console, heading: str, lines: list[str]) -> None:
    if lines:
        console.print(f"[red]{heading}:[/red]")
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False)


def _meta(args: argparse.Namespace, checkpoint: Any, note: str, finetune: int, moves: int) -> dict:
    from hlo_go.evaluate.run import policy_label
    from hlo_go.rl.trainer import policy_cuts

    method = None
    if checkpoint is not None:
        cuts = policy_cuts(checkpoint)
        method = policy_label(samples=args.samples, finetune_steps=finetune, moves=moves, cuts=cuts)
    return {
        "cluster": args.cluster.name,
        "policy": None if checkpoint is None else (args.policy or "default"),
        "policy_method": method,
        "note": note,
        "baselines": args.baselines,
        "measure": args.measure,
        "stage": args.stage,
        "seed": args.seed,
    }


def _print_tables(console: Console, rows: list[Any], args: argparse.Namespace, note: str) -> None:
    from hlo_go.evaluate.report import (
        eval_table,
        eval_tables,
        measured_table,
        measured_tables,
        problems,
    )

    cluster = args.cluster
    errors = sum(r.status != "ok" for r in rows)
    title = (
        f"hlo-go eval on {cluster.name} ({cluster.num_devices} x {cluster.devices[0].name}): "
        f"{len(rows)} inputs, {errors} not evaluated"
    )
    measured_title = "measured on this host vs XLA's default"
    if args.wide:
        console.print(eval_table(rows, title=title, note=note))
    else:
        for table in eval_tables(rows, title=title, note=note, width=min(console.width, 100)):
            console.print(table)
    _print_problems(console, "not evaluated", problems(rows))
    if args.measure:
        if args.wide:
            console.print(measured_table(rows, title=measured_title))
        else:
            for table in measured_tables(rows, title=measured_title, width=min(console.width, 100)):
                console.print(table)
        _print_problems(console, "not measured or not correct", problems(rows, measured=True))


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go eval``; 0, or 1 when an input or a method failed."""
    from hlo_go.evaluate.report import markdown, problems, rows_csv, rows_json, write_outputs
    from hlo_go.evaluate.run import evaluate
    from hlo_go.rl.trainer import policy_moves

    try:
        checkpoint, note = resolve_policy(args.policy)
    except (OSError, ValueError) as error:
        raise UsageError(f"--policy: {error}") from None
    if args.finetune and checkpoint is None and args.policy is not None:
        raise UsageError("--finetune needs a policy (not --policy none)")
    finetune = args.finetune if checkpoint is not None else 0
    if args.moves and finetune:
        raise UsageError("--moves is for zero-shot decisions, not with --finetune")
    try:
        moves = (
            policy_moves(checkpoint, args.moves, num_devices=args.cluster.num_devices)
            if checkpoint and not finetune
            else 0
        )
    except ValueError as error:
        raise UsageError(f"--moves: {error}") from None
    try:
        # evaluate() turns every failure of an input into that input's row.
        rows = evaluate(
            args.inputs, cluster=args.cluster, baselines=args.baselines, policy=checkpoint,
            samples=args.samples, moves=moves, finetune_steps=finetune, measure=args.measure,
            repeats=args.repeats, stage=args.stage, seed=args.seed, cpu=args.cpu,
            work_dir=Path(args.out) / "finetune" if args.out and finetune else None,
            progress=not args.quiet, timeout=args.timeout,
        )  # fmt: skip
    except (KeyError, ValueError) as error:  # settings evaluate() refuses before any work
        raise UsageError(str(error).strip("'\"")) from None
    meta = _meta(args, checkpoint, note, finetune, moves)
    if args.format == "table":
        _print_tables(console, rows, args, note)
    else:
        text = {
            "csv": lambda: rows_csv(rows),
            "json": lambda: rows_json(rows, meta=meta) + "\n",
            "markdown": lambda: (
                markdown(rows) + ("\n" + markdown(rows, measured=True) if args.measure else "")
            ),
        }[args.format]()
        sys.stdout.write(text)
        errors = Console(stderr=True)
        _print_problems(errors, "not evaluated", problems(rows))
        if args.measure:
            _print_problems(errors, "not measured or not correct", problems(rows, measured=True))
    if args.out:
        written = write_outputs(rows, args.out, meta=meta, timelines=not args.no_timelines)
        say = console if args.format == "table" else Console(stderr=True)
        for label in ("csv", "json", "chart"):
            if written[label]:
                say.print(f"{label}: {written[label]}", highlight=False)
        if written["timelines"]:
            say.print(f"timelines: {len(written['timelines'])} in {args.out}", highlight=False)
    failed = problems(rows) or (args.measure and problems(rows, measured=True))
    return EXIT_FAILED if failed else EXIT_OK
