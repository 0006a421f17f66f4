"""``hlo-go passes``: search a pass order for a module and compare with XLA's default order.

hlo-go passes HLO ... [--agent ppo|random|greedy|beam] [--budget N] [--json]

hlo-go passes gpt2_l2 --agent greedy --budget 200
hlo-go passes gpt2_l2 --agent beam --width 4 --budget 600
hlo-go passes model.hlo --agent ppo --budget 300 --episode-out best.json
hlo-go passes --list
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    INPUTS_HELP,
    UsageError,
    add_inputs,
    bounded,
    check_out_file,
    print_error,
)

AGENTS = ("ppo", "random", "greedy", "beam")


def _load_text(source: str) -> tuple[str, str]:
    """(HLO text, description) of a corpus graph name (its unoptimized stage) or a file."""
    from hlo_go.sources import load_module

    module, described = load_module(source, "unoptimized")
    return module.to_text(), described


def cmd_passes(args: argparse.Namespace, console: Console) -> int:
    """Runs the ``passes`` command; 0, or 1 when an input failed (unreadable, or outputs
    that differ from the original module's)."""
    from hlo_go.passes import PassEnvConfig, UnknownPassError, actions, unavailable_actions

    if args.pipeline:
        from hlo_go.xla.passes import discover_pipeline

        table = Table(title="XLA's CPU pass pipeline in this jaxlib (read from XLA's pass log)")
        for column in ("#", "pipeline", "pass"):
            table.add_column(column, justify="right" if column == "#" else "left")
        for entry in discover_pipeline():
            table.add_row(str(entry.position), " / ".join(entry.pipelines), entry.name)
        console.print(table)
        return 0
    if args.list:
        table = Table(title="Pass actions (XLA's own passes, as its CPU pipeline runs them)")
        for column in ("action", "kept XLA names", "runs at (pipeline:pass)", "what"):
            table.add_column(column)
        for action in actions():
            where = sorted({"/".join(e.pipelines) for e in action.entries})
            table.add_row(
                action.name, ",".join(action.enabled), "; ".join(where), action.description
            )
        console.print(table)
        for name, reason in unavailable_actions().items():
            console.print(f"not offered: {name}: {reason}")
        return 0
    if not args.inputs:
        raise UsageError("give HLO inputs (files or corpus graph names), --list or --pipeline")
    try:
        config = PassEnvConfig(
            max_steps=args.max_steps,
            actions=tuple(args.actions.split(",")) if args.actions else None,
        )
    except UnknownPassError as e:
        raise UsageError(str(e)) from None
    failed = 0
    for source in args.inputs:
        try:
            failed += _search_one(source, args, config, console)
        except Exception as error:  # reported per input
            print_error(console, error)
            failed += 1
    return EXIT_FAILED if failed else EXIT_OK


def _search_one(source: str, args: argparse.Namespace, config: Any, console: Console) -> int:
    """Searches one input; 1 when the found order's outputs differ, else 0."""
    from hlo_go.passes import (
        beam_search,
        check_outputs,
        default_order,
        greedy_search,
        ppo_search,
        random_search,
        reset,
    )
    from hlo_go.passes.ppo import PassPPOConfig

    text, described = _load_text(source)

    def progress(message: str) -> None:
        if not args.quiet:
            console.print(f"[dim]{message}[/dim]", highlight=False)

    start = reset(text)
    default = default_order(start, config)
    if args.agent == "random":
        found = random_search(start, args.budget, config, seed=args.seed, progress=progress)
    elif args.agent == "greedy":
        found = greedy_search(start, args.budget, config, progress=progress)
    elif args.agent == "beam":
        found = beam_search(start, args.budget, config, width=args.width, progress=progress)
    else:
        found = ppo_search(
            start, args.budget, config, PassPPOConfig(seed=args.seed), progress=progress
        )
    checks = {}
    if not args.no_check:
        checks = {r.agent: check_outputs(text, r.text, seed=args.seed) for r in (default, found)}
    reduction = (default.op_count - found.op_count) / max(default.op_count, 1)
    if args.json:
        out: dict[str, Any] = {
            "source": described,
            "agent": args.agent,
            "budget": args.budget,
            "prepared_op_count": start.op_count,
            "default_op_count": default.op_count,
            "agent_op_count": found.op_count,
            "op_count_reduction_vs_default": reduction,
            "default_sequence": list(default.episode.actions),
            "agent_episode": found.episode.to_dict(),
            "steps": found.steps,
            "seconds": found.seconds,
            "outputs_match": {k: v.ok for k, v in checks.items()},
        }
        console.print_json(json.dumps(out))
    else:
        table = Table(title=f"Op counts: {described}")
        for column in ("order", "op count", "vs prepared", "vs default", "outputs", "actions"):
            table.add_column(column, justify="left" if column in ("order", "actions") else "right")
        table.add_row("prepared module", str(start.op_count), "-", "-", "-", "")
        for result in (default, found):
            check = checks.get(result.agent)
            table.add_row(
                "XLA default order" if result.agent == "default" else f"{result.agent} (best)",
                str(result.op_count),
                f"{(result.op_count - start.op_count) / start.op_count:+.1%}",
                f"{(result.op_count - default.op_count) / default.op_count:+.1%}",
                "-" if check is None else ("match" if check.ok else f"DIFFER: {check.message}"),
                " ".join(result.episode.actions),
            )
        console.print(table)
        console.print(
            f"{args.agent}: {found.steps} environment steps in {found.seconds:.1f} s; "
            f"op-count reduction vs XLA's default order: {reduction:.2%}"
        )
    if args.episode_out:
        found.episode.save(args.episode_out)
    return int(any(not c.ok for c in checks.values()))


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``passes``."""
    p = subparsers.add_parser(
        "passes",
        parents=parents,
        help="search an order of XLA's HLO passes; compare op counts with XLA's default",
    )
    add_inputs(p, nargs="*", help=INPUTS_HELP + " (corpus graphs: their unoptimized stage)")
    p.add_argument(
        "--agent", choices=AGENTS, default="greedy", help="search agent (default greedy)"
    )
    p.add_argument(
        "--budget", type=bounded(int, low=1), default=200, help="environment steps (default 200)"
    )
    p.add_argument(
        "--max-steps",
        type=bounded(int, low=1),
        default=16,
        help="actions per episode (default 16)",
    )
    p.add_argument(
        "--width",
        type=bounded(int, low=1),
        default=4,
        help="beam width of --agent beam (default 4)",
    )
    p.add_argument("--actions", help="comma-separated action names (default: all; see --list)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random and PPO agents")
    p.add_argument("--no-check", action="store_true", help="skip the compile-and-run output check")
    p.add_argument("--episode-out", type=check_out_file, help="write the best episode (JSON) here")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--list", action="store_true", help="list the actions and exit")
    p.add_argument(
        "--pipeline", action="store_true", help="list every pass of XLA's CPU pipeline and exit"
    )
    p.set_defaults(func=cmd_passes)
