"""The ``hlo-go train``, ``hlo-go finetune`` and ``hlo-go infer`` commands.

::

    hlo-go train PATH_OR_NAME... --cluster NAME --steps N --out DIR
                 [--tasks placement,scheduling,fusion] [--samples K] [--seed S] [--lr LR]
                 [--switch-every N] [--graphs-per-batch G] [--config FILE.json]
                 [--no-resume] [--baselines a,b,... | --no-baselines] [--quiet]
    hlo-go finetune CHECKPOINT PATH_OR_NAME --cluster NAME --steps N(<=50) --out DIR
    hlo-go infer CHECKPOINT PATH_OR_NAME... --cluster NAME [--samples K] [--out DIR]

``PATH_OR_NAME`` is an HLO file (``.hlo`` / ``.hlo.gz``) or a corpus graph name (its
``--stage``, pre-fusion by default). ``train`` on one graph is GO-one
(:func:`hlo_go.rl.train_one`); on several it pre-trains one policy on all of them
(:func:`hlo_go.rl.pretrain`). ``--config`` is a JSON object of
:class:`~hlo_go.rl.TrainConfig` fields (nested ``ppo``, ``reward``, ``policy``
objects may be partial); flags override it. Every command ends with a table of the
GO result against the baselines (:func:`hlo_go.rl.compare.heuristic_names` by
default) and writes the decisions as ``decisions_<graph>.npz`` into the output
directory (readable by ``hlo-go simulate --decisions``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from hlo_go.decisions import Decisions
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph


def load_graph(source: str, stage: str = "prefusion") -> tuple[str, OpGraph]:
    """``(name, graph)`` of an HLO file or a corpus graph name.

    Raises:
      FileNotFoundError: neither a file nor a corpus graph.
    """
    from hlo_go.graph import build_graph
    from hlo_go.hlo import load_hlo

    path = Path(source)
    if path.is_file():
        name = path.name.removesuffix(".gz").removesuffix(".hlo").removesuffix(".txt")
        return name, build_graph(load_hlo(path))
    from hlo_go import corpus

    try:
        module = corpus.load(source, stage)
    except KeyError:
        raise FileNotFoundError(
            f"{source!r} is neither a file nor a corpus graph (see `hlo-go corpus list`)"
        ) from None
    return source, build_graph(module)


def _cluster(spec: str) -> Any:
    from hlo_go.sim import get_cluster, load_cluster

    if Path(spec).suffix in (".toml", ".json"):
        return load_cluster(spec)
    return get_cluster(spec)


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if key not in base:
            raise ValueError(f"unknown config field {key!r}; known: {', '.join(sorted(base))}")
        out[key] = _merge(base[key], value) if isinstance(base[key], dict) else value
    return out


def build_config(args: argparse.Namespace, base: Any = None) -> Any:
    """The :class:`~hlo_go.rl.TrainConfig` of parsed arguments (``--config`` then flags)."""
    import dataclasses

    from hlo_go.rl.config import TrainConfig

    data = (base or TrainConfig()).to_dict()
    if getattr(args, "config", None):
        data = _merge(data, json.loads(Path(args.config).read_text()))
    if getattr(args, "tasks", None):
        data["tasks"] = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for flag, field in (
        ("samples", "samples"),
        ("seed", "seed"),
        ("switch_every", "switch_every"),
        ("graphs_per_batch", "graphs_per_batch"),
        ("prior", "prior_method"),
        ("prior_bias", "prior_bias"),
    ):
        if getattr(args, flag, None) is not None:
            data[field] = getattr(args, flag)
    if getattr(args, "lr", None) is not None:
        data["ppo"]["learning_rate"] = args.lr
    if getattr(args, "ratio", None) is not None:
        data["ppo"]["ratio"] = args.ratio
    if getattr(args, "follow_best", False):
        data["prior_follows_best"] = True
    data["progress"] = not args.quiet
    config = TrainConfig.from_dict(data)
    return dataclasses.replace(config)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", required=True, help="preset name (e.g. v100x4) or cluster file")
    p.add_argument("--stage", default="prefusion", help="corpus stage for corpus names")
    p.add_argument(
        "--baselines",
        help="comma-separated baseline names for the final table (default: the heuristics)",
    )
    p.add_argument("--no-baselines", action="store_true", help="no baseline table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_training(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, required=True, help="training steps")
    p.add_argument("--out", required=True, help="run directory (checkpoint, metrics, tb/)")
    p.add_argument("--tasks", help="comma-separated subset of placement,scheduling,fusion")
    p.add_argument("--samples", type=int, help="K, samples per graph per step (default 16)")
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("--lr", type=float, help="learning rate (default 1e-4)")
    p.add_argument("--config", help="JSON file of TrainConfig fields")
    p.add_argument(
        "--prior",
        help="learn a residual over a heuristic: 'best' or a baseline name (hlo_go.rl.prior)",
    )
    p.add_argument("--prior-bias", type=float, help="the prior's logit bias (e.g. 6)")
    p.add_argument(
        "--follow-best",
        action="store_true",
        help="with --prior: move each graph's prior to the best decisions seen (incumbent)",
    )
    p.add_argument(
        "--ratio",
        choices=("sample", "decision"),
        help="PPO probability ratio per sample (default) or per decision",
    )


def add_train_commands(subparsers: Any) -> None:
    """Adds ``train``, ``finetune`` and ``infer`` to an ``argparse`` subparsers object.

    Each parser's ``func`` default is called as ``func(args, console)`` and returns the
    exit code (0, or 2 for bad input).
    """
    p = subparsers.add_parser(
        "train", help="train the GO policy with PPO (one graph: GO-one; several: pre-training)"
    )
    p.add_argument("graphs", nargs="+", metavar="PATH_OR_NAME", help="HLO files or corpus names")
    _add_training(p)
    p.add_argument("--switch-every", type=int, help="pre-training: steps per graph batch")
    p.add_argument("--graphs-per-batch", type=int, help="pre-training: graphs per batch")
    p.add_argument("--no-resume", action="store_true", help="start over even if --out has a run")
    _add_common(p)
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser("finetune", help="fine-tune a checkpoint on one graph (<= 50 steps)")
    p.add_argument("checkpoint", help="checkpoint file or run directory")
    p.add_argument("graph", metavar="PATH_OR_NAME")
    _add_training(p)
    _add_common(p)
    p.set_defaults(func=cmd_finetune)

    p = subparsers.add_parser("infer", help="zero-shot: a checkpoint's decisions for new graphs")
    p.add_argument("checkpoint", help="checkpoint file or run directory")
    p.add_argument("graphs", nargs="+", metavar="PATH_OR_NAME")
    p.add_argument("--samples", type=int, default=0, help="also try K samples, keep the best")
    p.add_argument("--seed", type=int, default=0, help="seed of those samples")
    p.add_argument("--out", help="directory for the decisions files")
    _add_common(p)
    p.set_defaults(func=cmd_infer)


def _save_decisions(out: Path, name: str, decisions: Decisions) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"decisions_{name}.npz"
    np.savez(path, **decisions.arrays())
    return path


def _report(
    console: Console,
    args: argparse.Namespace,
    name: str,
    graph: OpGraph,
    cluster: Any,
    go_rows: list[Any],
) -> None:
    from hlo_go.rl.compare import comparison_table, run_baselines

    if args.no_baselines:
        baselines = []
    else:
        methods = args.baselines.split(",") if args.baselines else None
        baselines = run_baselines(graph, cluster, methods)
    title = f"{name} ({graph.num_nodes:,} nodes) on {cluster.name}"
    console.print(comparison_table(title, baselines, go_rows))


def _error(console: Console, error: Exception) -> int:
    console.print("[red]error:[/red] ", end="")
    console.print(str(error), markup=False, highlight=False)
    return 1 if isinstance(error, HloGoError) else 2  # a named error: the input failed


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go train``."""
    from hlo_go.rl.compare import MethodTime
    from hlo_go.rl.trainer import pretrain, train_one

    try:
        cluster = _cluster(args.cluster)
        config = build_config(args)
        graphs = [load_graph(source, args.stage) for source in args.graphs]
        if args.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {args.steps}")
        if len(graphs) == 1:
            result = train_one(
                graphs[0], cluster, steps=args.steps, out_dir=args.out, config=config,
                resume=not args.no_resume,
            )  # fmt: skip
        else:
            result = pretrain(
                graphs, cluster, steps=args.steps, out_dir=args.out, config=config,
                resume=not args.no_resume,
            )  # fmt: skip
    except (KeyError, ValueError, HloGoError) as error:
        return _error(console, error)
    console.print(
        f"trained {result.step} steps in {result.elapsed:.1f} s; checkpoint and metrics in "
        f"{result.out_dir}"
    )
    for name, graph in graphs:
        r = result.graphs[name]
        _save_decisions(Path(args.out), name, r.best)
        go = [
            MethodTime("GO best seen", r.best_time, r.best_oom, result.elapsed),
            MethodTime("GO greedy", r.greedy_time, False, result.elapsed),
        ]
        _report(console, args, name, graph, cluster, go)
    return 0


def cmd_finetune(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go finetune``."""
    from hlo_go.rl.checkpoint import load_checkpoint
    from hlo_go.rl.compare import MethodTime
    from hlo_go.rl.trainer import finetune

    try:
        cluster = _cluster(args.cluster)
        base = load_checkpoint(args.checkpoint).config
        config = build_config(args, base)
        name, graph = load_graph(args.graph, args.stage)
        result = finetune(
            args.checkpoint, (name, graph), cluster, steps=args.steps, out_dir=args.out,
            config=config,
        )  # fmt: skip
    except (KeyError, ValueError) as error:
        return _error(console, error)
    r = result.graphs[name]
    _save_decisions(Path(args.out), name, r.best)
    console.print(f"fine-tuned {result.step} steps in {result.elapsed:.1f} s into {args.out}")
    go = [
        MethodTime("GO fine-tuned, best seen", r.best_time, r.best_oom, result.elapsed),
        MethodTime("GO fine-tuned, greedy", r.greedy_time, False, result.elapsed),
    ]
    _report(console, args, name, graph, cluster, go)
    return 0


def cmd_infer(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go infer``."""
    from hlo_go.rl.compare import MethodTime
    from hlo_go.rl.trainer import infer

    try:
        cluster = _cluster(args.cluster)
        graphs = [load_graph(source, args.stage) for source in args.graphs]
        results = [
            infer(args.checkpoint, graph, cluster, samples=args.samples, seed=args.seed)
            for _, graph in graphs
        ]
    except (KeyError, ValueError) as error:
        return _error(console, error)
    for (name, graph), r in zip(graphs, results, strict=True):
        if args.out:
            _save_decisions(Path(args.out), name, r.decisions)
        label = "GO zero-shot" + (f", best of greedy + {args.samples}" if args.samples else "")
        _report(
            console, args, name, graph, cluster, [MethodTime(label, r.step_time, r.oom, r.seconds)]
        )
    return 0
