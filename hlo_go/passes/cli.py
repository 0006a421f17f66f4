"""``hlo-go passes``: search a pass order for a module and compare with XLA's default order.

hlo-go passes gpt2_l2 --agent greedy --budget 200
hlo-go passes gpt2_l2 --agent beam --width 4 --budget 600
hlo-go passes model.hlo --agent ppo --budget 300 --episode-out best.json
hlo-go passes --list
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

AGENTS = ("ppo", "random", "greedy", "beam")


def _load_text(source: str) -> tuple[str, str]:
    """(HLO text, description) of a corpus graph name (its unoptimized stage) or a file."""
    from hlo_go import corpus

    path = Path(source)
    if path.exists():
        from hlo_go.hlo import load_hlo

        return load_hlo(path).to_text(), str(path)
    if source in corpus.names():
        return corpus.text(source, "unoptimized"), f"corpus {source} (unoptimized)"
    raise FileNotFoundError(f"{source!r} is neither a file nor a corpus graph name")


def cmd_passes(args: argparse.Namespace, console: Console) -> int:
    """Runs the ``passes`` command."""
    from hlo_go.passes import (
        PassEnvConfig,
        UnknownPassError,
        actions,
        beam_search,
        check_outputs,
        default_order,
        greedy_search,
        ppo_search,
        random_search,
        reset,
    )
    from hlo_go.passes.ppo import PassPPOConfig

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
        return 0
    if args.source is None:
        console.print("[red]error:[/red] give a module file or corpus graph name (or --list)")
        return 2
    if args.width < 1 or args.budget < 1:
        console.print("[red]error:[/red] --width and --budget must be at least 1")
        return 2
    try:
        config = PassEnvConfig(
            max_steps=args.max_steps,
            actions=tuple(args.actions.split(",")) if args.actions else None,
        )
    except UnknownPassError as e:
        console.print("[red]error:[/red] ", end="")
        console.print(str(e), markup=False, highlight=False)
        return 2
    text, described = _load_text(args.source)

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
    if any(not c.ok for c in checks.values()):
        return 1
    return 0


def add_passes_command(sub: argparse._SubParsersAction) -> None:
    """Registers ``hlo-go passes`` on the top-level subparsers."""
    p = sub.add_parser(
        "passes", help="search an order of XLA's HLO passes; compare op counts with XLA's default"
    )
    p.add_argument("source", nargs="?", help="HLO file (.hlo/.hlo.gz) or corpus graph name")
    p.add_argument(
        "--agent", choices=AGENTS, default="greedy", help="search agent (default greedy)"
    )
    p.add_argument("--budget", type=int, default=200, help="environment steps (default 200)")
    p.add_argument("--max-steps", type=int, default=16, help="actions per episode (default 16)")
    p.add_argument("--width", type=int, default=4, help="beam width of --agent beam (default 4)")
    p.add_argument("--actions", help="comma-separated action names (default: all; see --list)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-check", action="store_true", help="skip the compile-and-run output check")
    p.add_argument("--episode-out", help="write the best episode (JSON) here")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--list", action="store_true", help="list the actions and exit")
    p.add_argument(
        "--pipeline", action="store_true", help="list every pass of XLA's CPU pipeline and exit"
    )
    p.set_defaults(func=cmd_passes)
