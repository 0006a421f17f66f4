"""The ``hlo-go train``, ``hlo-go finetune`` and ``hlo-go infer`` commands.

::

    hlo-go train HLO ... [--cluster NAME | --clusters A,B,...] --steps N --out DIR
                 [--tasks placement,scheduling,fusion] [--samples K] [--seed S] [--lr LR]
                 [--switch-every N] [--graphs-per-batch G] [--config FILE.json]
                 [--init CHECKPOINT] [--no-resume] [--baselines a,b,... | --no-baselines]
                 [--quiet]
    hlo-go finetune CHECKPOINT HLO [--cluster NAME] --steps N(<=50) --out DIR
    hlo-go infer CHECKPOINT HLO ... [--cluster NAME] [--samples K] [--temperature T]
                 [--moves K] [--out DIR]

``HLO`` is an HLO file (``.hlo`` / ``.hlo.gz``) or a corpus graph name (its
``--stage``, pre-fusion by default). ``train`` on one graph is GO-one
(:func:`hlo_go.rl.train_one`); on several it pre-trains one policy on all of them
(:func:`hlo_go.rl.pretrain`), on one cluster or, with ``--clusters``, on every
(graph, cluster) pair at once (one policy; the cluster features tell them apart).
``--init`` starts pre-training from a checkpoint's parameters, e.g. ``hlo-go imitate``'s:
imitation first, then PPO. ``--config`` is a JSON object of
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

from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_cluster,
    add_inputs,
    add_moves,
    bounded,
    check_out_dir,
    clusters_type,
    print_error,
)
from hlo_go.cli._methods import method_list_type
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sources import load_graph


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
        try:
            data = _merge(data, json.loads(Path(args.config).read_text()))
        except (OSError, ValueError) as error:
            raise UsageError(f"--config {args.config}: {error}") from None
    if getattr(args, "tasks", None):
        data["tasks"] = list(args.tasks)
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
    try:
        config = TrainConfig.from_dict(data)
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(f"training configuration: {error}") from None
    return dataclasses.replace(config)


def _tasks(text: str) -> list[str]:
    """argparse type of ``--tasks``: a subset of :data:`hlo_go.gonet.TASKS`."""
    from hlo_go.gonet import TASKS

    tasks = [t.strip() for t in text.split(",") if t.strip()]
    if not tasks or not set(tasks) <= set(TASKS) or len(set(tasks)) < len(tasks):
        raise argparse.ArgumentTypeError(
            f"tasks must be a non-empty subset of {', '.join(TASKS)} without repeats, got {text!r}"
        )
    return tasks


def _add_common(p: argparse.ArgumentParser) -> None:
    add_cluster(p, what="the cluster to optimize for")
    p.add_argument("--stage", default="prefusion", help="corpus stage for corpus names")
    p.add_argument(
        "--baselines",
        type=method_list_type("baseline"),
        help="comma-separated baseline names for the final table (default: the heuristics)",
    )
    p.add_argument("--no-baselines", action="store_true", help="no baseline table")


def _add_training(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=bounded(int, low=1), required=True, help="training steps")
    p.add_argument(
        "--out",
        type=check_out_dir,
        required=True,
        help="run directory (checkpoint, metrics, tb/)",
    )
    p.add_argument(
        "--tasks",
        type=_tasks,
        help="comma-separated subset of placement,scheduling,fusion (default: all)",
    )
    p.add_argument(
        "--samples", type=bounded(int, low=1), help="K, samples per graph per step (default 16)"
    )
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument(
        "--lr", type=bounded(float, low=0.0, high=1e3), help="learning rate (default 1e-4)"
    )
    p.add_argument("--config", help="JSON file of TrainConfig fields")
    p.add_argument(
        "--prior",
        help="learn a residual over a heuristic: 'best' or a baseline name (hlo_go.rl.prior)",
    )
    p.add_argument(
        "--prior-bias",
        type=bounded(float, low=-1e3, high=1e3),
        help="the prior's logit bias (e.g. 6)",
    )
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


def add_commands(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``train``, ``finetune`` and ``infer``.

    Each parser's ``func`` default is called as ``func(args, console)`` and returns the
    exit code (0, or 1 when an input failed).
    """
    p = subparsers.add_parser(
        "train",
        parents=parents,
        help="train the GO policy with PPO (one graph: GO-one; several: pre-training)",
    )
    add_inputs(p)
    _add_training(p)
    p.add_argument(
        "--switch-every", type=bounded(int, low=1), help="pre-training: steps per graph batch"
    )
    p.add_argument(
        "--graphs-per-batch", type=bounded(int, low=1), help="pre-training: graphs per batch"
    )
    p.add_argument(
        "--clusters",
        type=clusters_type,
        metavar="NAME|FILE,...",
        help="pre-training: train on each of these clusters (instead of --cluster)",
    )
    p.add_argument(
        "--init",
        metavar="CHECKPOINT",
        help="pre-training: start from this checkpoint's parameters (e.g. hlo-go imitate's)",
    )
    p.add_argument("--no-resume", action="store_true", help="start over even if --out has a run")
    _add_common(p)
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser(
        "finetune", parents=parents, help="fine-tune a checkpoint on one graph (<= 50 steps)"
    )
    p.add_argument("checkpoint", help="checkpoint file or run directory")
    add_inputs(p, nargs=1, help="one HLO text file or corpus graph name")
    _add_training(p)
    _add_common(p)
    p.set_defaults(func=cmd_finetune)

    p = subparsers.add_parser(
        "infer", parents=parents, help="zero-shot: a checkpoint's decisions for new graphs"
    )
    p.add_argument("checkpoint", help="checkpoint file or run directory")
    add_inputs(p)
    p.add_argument(
        "--samples",
        type=bounded(int, low=0),
        default=0,
        help="also try K samples, keep the best",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of those samples")
    p.add_argument(
        "--temperature",
        type=bounded(float, low=1e-6, high=1e3),
        default=1.0,
        help="the samples' softmax temperature (below 1: closer to the greedy decisions)",
    )
    add_moves(p)
    p.add_argument("--out", type=check_out_dir, help="directory for the decisions files")
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

    baselines = [] if args.no_baselines else run_baselines(graph, cluster, args.baselines)
    title = f"{name} ({graph.num_nodes:,} nodes) on {cluster.name}"
    console.print(comparison_table(title, baselines, go_rows))


def _load_all(console: Console, sources: list[str], stage: str) -> list[tuple[str, OpGraph]]:
    """The inputs' graphs; those that cannot be read are reported (and left out)."""
    graphs = []
    for source in sources:
        try:
            graphs.append(load_graph(source, stage))
        except Exception as error:  # reported per input
            print_error(console, error)
    return graphs


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go train``; 1 (nothing trained) when an input cannot be read or the
    training fails; 2 for ``--clusters`` or ``--init`` with one input (GO-one)."""
    from hlo_go.rl.checkpoint import load_checkpoint
    from hlo_go.rl.compare import MethodTime
    from hlo_go.rl.trainer import pretrain, train_one

    clusters = args.clusters or [args.cluster]
    if len(args.inputs) == 1 and (args.clusters or args.init):
        raise UsageError("--clusters and --init are for pre-training (give several inputs)")
    init = None
    if args.init:  # its settings are the run's defaults, as fine-tuning's are
        try:
            init = load_checkpoint(args.init)
        except (OSError, ValueError) as error:
            print_error(console, error)
            return EXIT_FAILED
    config = build_config(args, init.config if init is not None else None)
    graphs = _load_all(console, args.inputs, args.stage)
    if len(graphs) < len(args.inputs):
        return EXIT_FAILED
    try:
        if len(graphs) == 1:
            result = train_one(
                graphs[0], clusters[0], steps=args.steps, out_dir=args.out, config=config,
                resume=not args.no_resume,
            )  # fmt: skip
        else:
            result = pretrain(
                graphs, clusters, steps=args.steps, out_dir=args.out, config=config,
                resume=not args.no_resume, init=init,
            )  # fmt: skip
    except (KeyError, ValueError, OSError) as error:
        print_error(console, error)
        return EXIT_FAILED
    console.print(
        f"trained {result.step} steps in {result.elapsed:.1f} s; checkpoint and metrics in "
        f"{result.out_dir}"
    )
    for name, graph in graphs:
        for cluster in clusters:
            label = name if len(clusters) == 1 else f"{name}@{cluster.name}"
            r = result.graphs[label]
            _save_decisions(Path(args.out), label, r.best)
            go = [
                MethodTime("GO best seen", r.best_time, r.best_oom, result.elapsed),
                MethodTime("GO greedy", r.greedy_time, False, result.elapsed),
            ]
            _report(console, args, name, graph, cluster, go)
    return EXIT_OK


def cmd_finetune(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go finetune``; 1 when the input, the checkpoint or the run fails."""
    from hlo_go.rl.checkpoint import load_checkpoint
    from hlo_go.rl.compare import MethodTime
    from hlo_go.rl.trainer import finetune

    cluster = args.cluster
    graphs = _load_all(console, args.inputs, args.stage)
    if not graphs:
        return EXIT_FAILED
    ((name, graph),) = graphs
    try:
        base = load_checkpoint(args.checkpoint).config
        config = build_config(args, base)
        result = finetune(
            args.checkpoint, (name, graph), cluster, steps=args.steps, out_dir=args.out,
            config=config,
        )  # fmt: skip
    except (KeyError, ValueError, OSError) as error:
        print_error(console, error)
        return EXIT_FAILED
    r = result.graphs[name]
    _save_decisions(Path(args.out), name, r.best)
    console.print(f"fine-tuned {result.step} steps in {result.elapsed:.1f} s into {args.out}")
    go = [
        MethodTime("GO fine-tuned, best seen", r.best_time, r.best_oom, result.elapsed),
        MethodTime("GO fine-tuned, greedy", r.greedy_time, False, result.elapsed),
    ]
    _report(console, args, name, graph, cluster, go)
    return EXIT_OK


def cmd_infer(args: argparse.Namespace, console: Console) -> int:
    """Runs ``hlo-go infer``; 1 when an input (or the checkpoint) fails, the others
    still reported."""
    from hlo_go.evaluate.run import policy_label
    from hlo_go.rl.checkpoint import load_checkpoint
    from hlo_go.rl.compare import MethodTime
    from hlo_go.rl.trainer import infer, policy_cuts, policy_moves

    cluster = args.cluster
    try:  # read once for every input
        checkpoint = load_checkpoint(args.checkpoint)
        moves = policy_moves(checkpoint, args.moves, num_devices=cluster.num_devices)
    except (KeyError, ValueError, OSError) as error:
        print_error(console, error)
        return EXIT_FAILED
    graphs = _load_all(console, args.inputs, args.stage)
    failed = len(args.inputs) - len(graphs)
    for name, graph in graphs:
        try:
            r = infer(
                checkpoint, graph, cluster, samples=args.samples, seed=args.seed,
                temperature=args.temperature, moves=moves,
            )  # fmt: skip
        except (KeyError, ValueError, OSError) as error:
            print_error(console, f"{name}: {error}")
            failed += 1
            continue
        if args.out:
            _save_decisions(Path(args.out), name, r.decisions)
        label = policy_label(samples=args.samples, moves=moves, cuts=policy_cuts(checkpoint))
        _report(
            console, args, name, graph, cluster, [MethodTime(label, r.step_time, r.oom, r.seconds)]
        )
    return EXIT_FAILED if failed else EXIT_OK
