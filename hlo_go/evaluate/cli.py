"""The ``hlo-go eval`` command (registered by :func:`add_eval_command`).

::

    hlo-go eval PATH_OR_NAME... [--policy CKPT|NAME|none] [--baselines a,b,c]
                [--cluster NAME] [--samples K | --finetune N] [--measure [--repeats N] [--cpu K]]
                [--stage prefusion] [--seed S] [--out DIR] [--no-timelines] [--quiet]

``PATH_OR_NAME`` is an HLO text file (``.hlo``, ``.hlo.gz``, ``.txt``), a directory
(every such file in it, sorted) or a corpus graph name (its ``--stage``). Every input
gets a row: simulated step time per method on ``--cluster`` (default ``v100x4``) with
speedups over one device and over the best baseline, the best marked ``*``; an input
that cannot be evaluated gets its reason instead, and the run goes on. ``--policy``
takes a checkpoint file, a run directory or a shipped policy name (default: the shipped
default policy; ``none``: no policy). ``--measure`` also lowers each method's fusion and
schedule into XLA:CPU on this host and measures it against XLA's default compile, in a
child process pinned to core ``--cpu`` (CPU time; an XLA crash there is a reason too).
``--out`` receives ``eval.csv``, ``eval.json``, a bar chart ``eval.png`` and each
input's best timeline ``timeline_<input>.png``.

Exit status: 0 when the run completed (error rows included), 2 for bad command-line
input (unknown cluster or baseline, missing policy checkpoint, bad ``--finetune``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console


def add_eval_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``eval`` to an ``argparse`` subparsers object.

    The parser's ``func`` default is :func:`cmd_eval`, called as ``func(args, console)``
    and returning the exit code.

    Args:
      subparsers: the result of ``parser.add_subparsers(...)``.

    Returns:
      The ``eval`` parser.
    """
    from hlo_go.corpus import STAGES

    p = subparsers.add_parser(
        "eval",
        help="evaluate baselines and the GO policy on HLO files or corpus graphs; "
        "table, CSV/JSON, charts",
    )
    p.add_argument(
        "paths", nargs="+", metavar="PATH_OR_NAME", help="HLO files, directories, corpus names"
    )
    p.add_argument(
        "--policy",
        help="checkpoint file, run directory or shipped policy name "
        "(default: the shipped default policy; 'none': no policy)",
    )
    p.add_argument(
        "--baselines", help="comma-separated baseline names (default: the non-search heuristics)"
    )
    p.add_argument(
        "--cluster", default="v100x4", help="preset name or .toml/.json file (default v100x4)"
    )
    p.add_argument("--samples", type=int, default=0, help="zero-shot: also try K policy samples")
    p.add_argument(
        "--finetune",
        type=int,
        default=0,
        metavar="N",
        help="fine-tune the policy N (<= 50) steps per input instead of zero-shot",
    )
    p.add_argument(
        "--measure", action="store_true", help="also measure each method in XLA:CPU on this host"
    )
    p.add_argument("--repeats", type=int, default=5, help="timed rounds per measurement")
    p.add_argument(
        "--cpu", type=int, help="core of the pinned measuring process (default: the last one)"
    )
    p.add_argument(
        "--stage", default="prefusion", choices=STAGES, help="corpus stage of corpus names"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of methods, samples and inputs")
    p.add_argument("--out", metavar="DIR", help="write eval.csv, eval.json and PNGs here")
    p.add_argument("--no-timelines", action="store_true", help="no timeline PNGs in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_eval)
    return p


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


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go eval``; returns the exit code (0; 1 when any input failed; 2 for bad flags)."""
    from hlo_go.baselines.cli import load_cluster
    from hlo_go.evaluate.report import eval_table, measured_table, problems, write_outputs
    from hlo_go.evaluate.run import evaluate, policy_label

    try:
        cluster = load_cluster(args.cluster)
        if args.samples < 0 or args.repeats < 1:
            raise ValueError("--samples must be >= 0 and --repeats >= 1")
        checkpoint, note = resolve_policy(args.policy)
        if args.finetune and checkpoint is None and args.policy is not None:
            raise ValueError("--finetune needs a policy (not --policy none)")
        finetune = args.finetune if checkpoint is not None else 0
        baselines = args.baselines.split(",") if args.baselines else None
        # evaluate() checks baseline names and the fine-tuning range before any work, and
        # turns every failure of an input into that input's row.
        rows = evaluate(
            args.paths, cluster=cluster, baselines=baselines, policy=checkpoint,
            samples=args.samples, finetune_steps=finetune, measure=args.measure,
            repeats=args.repeats, stage=args.stage, seed=args.seed, cpu=args.cpu,
            work_dir=Path(args.out) / "finetune" if args.out and finetune else None,
            progress=not args.quiet,
        )  # fmt: skip
    except (KeyError, ValueError, OSError) as error:
        console.print("[red]error:[/red] ", end="")
        console.print(str(error).strip("'\""), markup=False, highlight=False)
        return 2
    errors = sum(r.status != "ok" for r in rows)
    title = (
        f"hlo-go eval on {cluster.name} ({cluster.num_devices} x {cluster.devices[0].name}): "
        f"{len(rows)} inputs, {errors} not evaluated"
    )
    console.print(eval_table(rows, title=title, note=note))
    _print_problems(console, "not evaluated", problems(rows))
    if args.measure:
        console.print(measured_table(rows, title="measured on this host vs XLA's default"))
        _print_problems(console, "not measured or not correct", problems(rows, measured=True))
    if args.out:
        meta = {
            "cluster": cluster.name,
            "policy": None if checkpoint is None else (args.policy or "default"),
            "policy_method": None if checkpoint is None else policy_label(
                samples=args.samples, finetune_steps=finetune
            ),
            "note": note,
            "baselines": baselines,
            "measure": args.measure,
            "stage": args.stage,
            "seed": args.seed,
        }  # fmt: skip
        written = write_outputs(rows, args.out, meta=meta, timelines=not args.no_timelines)
        for label in ("csv", "json", "chart"):
            if written[label]:
                console.print(f"{label}: {written[label]}", highlight=False)
        if written["timelines"]:
            console.print(f"timelines: {len(written['timelines'])} in {args.out}", highlight=False)
    return 1 if errors else 0
