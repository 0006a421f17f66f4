"""Pre-training the sharding policy: ILP teacher, imitation, then PPO.

::

    python -m hlo_go.sharding.pretrain GRAPH... [--clusters h100x8:2x4,tpu-v4-8:2x2]
        [--teacher-time-limit 60] [--imitation-steps 400] [--ppo-steps 0]
        [--teachers FILE.npz] [--init FILE.msgpack] [--out FILE.msgpack] [--report FILE.json]

For each corpus graph (unoptimized stage) or HLO file and each ``cluster:mesh``, the
sharding graph is built, the ILP (:func:`hlo_go.sharding.methods.ilp`, CP-SAT, time
limit) solves it as the teacher (solutions cached in ``--teachers``, so a rerun reuses
them), the policy imitates the teachers (:func:`hlo_go.sharding.learned.train_imitation`)
and PPO may then train it on the simulator's cost
(:func:`hlo_go.sharding.learned.train_sharding_policy`). The result is written with
:func:`hlo_go.sharding.learned.save_policy`; the report gives each training graph's
teacher, prior and trained-decode costs.

The shipped policy (``hlo_go/pretrained/sharding.msgpack``) was trained in two
runs, the second continuing the first (``--init``)::

    python -m hlo_go.sharding.pretrain gpt2_l4 bert_l4 transformer_xl_l4 resnet_50 \\
        wavenet_s2 inception_v3_small rnnlm_l2_scan --teacher-time-limit 300 \\
        --teachers benchmarks/.cache/sharding_teachers_300s.npz --imitation-steps 420 \\
        --learning-rate 2e-3 --out stage1.msgpack
    python -m hlo_go.sharding.pretrain gpt2_l4 bert_l4 transformer_xl_l4 resnet_50 \\
        wavenet_s2 inception_v3_small rnnlm_l2_scan --teacher-time-limit 300 \\
        --teachers benchmarks/.cache/sharding_teachers_300s.npz --init stage1.msgpack \\
        --imitation-steps 1400 --learning-rate 1e-3 \\
        --out hlo_go/pretrained/sharding.msgpack --report benchmarks/results/sharding_pretrain.json

None of those graphs is one the ``shard`` benchmark evaluates on (``mlp``, ``gpt2_l2``,
``bert_l2``, ``transformer_xl_l2``, ``resnet_26``, ``gpt2_l8``). What the two runs gave
(teachers against the prior, the network's decode against the policy-guided greedy) is
in ``docs/sharding.md`` and ``benchmarks/results/sharding_pretrain.json``.

This module sits above :mod:`hlo_go.sharding.methods` (its teacher is the ``ilp``
method) and :mod:`hlo_go.sharding.learned` (what it trains); progress and the report
table go to the ``hlo_go.sharding.pretrain`` logger.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from hlo_go.sharding.build import ShardingGraph, build_sharding
from hlo_go.sharding.learned import (
    ImitationExample,
    ShardingPolicyConfig,
    guided_choices,
    load_policy,
    prior_choice,
    save_policy,
    shard_with_policy,
    train_imitation,
    train_sharding_policy,
)
from hlo_go.sharding.mesh import Mesh
from hlo_go.sharding.methods import ilp
from hlo_go.sharding.problem import total_cost
from hlo_go.sim import get_cluster

logger = logging.getLogger(__name__)

DEFAULT_CLUSTERS = "h100x8:2x4,tpu-v4-8:2x2"


def parse_clusters(text: str) -> list[tuple[str, str]]:
    """``"h100x8:2x4,tpu-v4-8:2x2"`` → ``[("h100x8", "2x4"), ("tpu-v4-8", "2x2")]``.

    Raises:
      ValueError: an entry is not ``CLUSTER:MESH``.
    """
    pairs = []
    for item in text.split(","):
        cluster, sep, mesh = item.strip().partition(":")
        if not sep or not cluster or not mesh:
            raise ValueError(f"--clusters entry {item!r} is not CLUSTER:MESH (e.g. h100x8:2x4)")
        pairs.append((cluster, mesh))
    return pairs


def training_graphs(
    sources: Sequence[str], clusters: Sequence[tuple[str, str]], *, stage: str = "unoptimized"
) -> list[tuple[str, ShardingGraph]]:
    """``("SOURCE@CLUSTER", sharding graph)`` for every source and ``(cluster, mesh)``."""
    from hlo_go.sources import load_module

    out = []
    for source in sources:
        module, _ = load_module(source, stage)
        for cluster, mesh in clusters:
            out.append(
                (
                    f"{source}@{cluster}",
                    build_sharding(module, Mesh.parse(mesh), get_cluster(cluster)),
                )
            )
    return out


def solve_teachers(
    graphs: Sequence[tuple[str, ShardingGraph]],
    *,
    time_limit_s: float,
    cache: Path | None = None,
) -> dict[str, np.ndarray]:
    """The teacher's choice for each graph, reusing and extending an ``.npz`` cache.

    The teacher is the ILP's choice, or the prior's (:func:`prior_choice`) where that is
    cheaper (the ILP is time-limited and starts from greedy's choice, so on large graphs
    it can end above the prior): the policy then learns to leave its prior only where
    that is better. The cache holds the ILP's choices; a cached one is reused only if it
    still fits its graph (same node count, each strategy within range).
    """
    stored: dict[str, np.ndarray] = {}
    if cache is not None and cache.exists():
        with np.load(cache) as data:
            stored = {k: data[k] for k in data.files}
    out = {}
    for name, sg in tqdm(graphs, desc="ILP teachers"):
        cached = stored.get(name)
        if (
            cached is not None
            and cached.shape == (sg.num_nodes,)
            and (cached < sg.problem.num_strategies).all()
        ):
            solved = cached
        else:
            solved = np.asarray(ilp(sg, time_limit_s=time_limit_s), np.int64)
            stored[name] = solved
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                np.savez(cache, **stored)
        prior = prior_choice(sg)
        cheaper = total_cost(sg.problem, prior) < total_cost(sg.problem, solved)
        out[name] = prior if cheaper else solved
    return out


def pretrain(
    graphs: Sequence[tuple[str, ShardingGraph]],
    teachers: dict[str, np.ndarray],
    *,
    imitation_steps: int,
    ppo_steps: int = 0,
    learning_rate: float = 1e-3,
    seed: int = 0,
    config: ShardingPolicyConfig | None = None,
    params: Any | None = None,
    progress: bool = True,
) -> tuple[Any, ShardingPolicyConfig, dict[str, Any]]:
    """Imitation of the teachers, then optional PPO; returns ``(params, config, report)``.

    The imitation starts from ``params`` (of ``config``) when given, else from fresh
    parameters.

    The report has the training histories and, per graph, the cost of the teacher, of
    the prior alone (:func:`prior_choice`), of the trained policy's greedy decode and of
    the best of its policy-guided greedy choices (:func:`guided_choices`).
    """
    examples = [ImitationExample(name, sg, teachers[name]) for name, sg in graphs]
    imitation = train_imitation(
        examples, steps=imitation_steps, learning_rate=learning_rate, seed=seed,
        config=config, params=params, progress=progress,
    )  # fmt: skip
    params, config = imitation.params, imitation.config
    ppo_history: list[dict[str, Any]] = []
    if ppo_steps > 0:
        trained = train_sharding_policy(
            list(graphs), steps=ppo_steps, seed=seed, params=params, config=config,
            progress=progress,
        )  # fmt: skip
        params, ppo_history = trained.params, trained.history
    per_graph = {}
    for name, sg in graphs:
        decode = shard_with_policy(sg, params, config=config)
        guided = guided_choices(sg, params, config=config)
        per_graph[name] = {
            "nodes": sg.num_nodes,
            "teacher_cost": total_cost(sg.problem, teachers[name]),
            "prior_cost": total_cost(sg.problem, prior_choice(sg, config)),
            "policy_cost": total_cost(sg.problem, decode),
            "guided_cost": min(total_cost(sg.problem, c) for c in guided),
        }
    report = {
        "imitation_history": imitation.history,
        "imitation_s": imitation.seconds,
        "ppo_history": ppo_history,
        "graphs": per_graph,
    }
    return params, config, report


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m hlo_go.sharding.pretrain")
    parser.add_argument("graphs", nargs="+", help="corpus graph names or HLO files")
    parser.add_argument("--clusters", default=DEFAULT_CLUSTERS, help="CLUSTER:MESH,...")
    parser.add_argument("--stage", default="unoptimized", help="corpus stage")
    parser.add_argument("--teacher-time-limit", type=float, default=60.0, help="ILP seconds")
    parser.add_argument("--teachers", type=Path, help=".npz cache of the ILP's choices")
    parser.add_argument("--imitation-steps", type=int, default=400)
    parser.add_argument("--ppo-steps", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init", type=Path, help="start from this policy (.msgpack)")
    parser.add_argument("--out", type=Path, default=Path("sharding_policy.msgpack"))
    parser.add_argument("--report", type=Path, help="JSON report of the training")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        clusters = parse_clusters(args.clusters)
        graphs = training_graphs(args.graphs, clusters, stage=args.stage)
    except (KeyError, ValueError, FileNotFoundError) as error:
        logger.error("error: %s", error)
        return 2
    init, init_config = None, None
    if args.init is not None:
        try:
            init, init_config = load_policy(args.init)
        except (OSError, ValueError) as error:
            logger.error("error: --init %s: %s", args.init, error)
            return 2
    teachers = solve_teachers(graphs, time_limit_s=args.teacher_time_limit, cache=args.teachers)
    params, config, report = pretrain(
        graphs, teachers, imitation_steps=args.imitation_steps, ppo_steps=args.ppo_steps,
        learning_rate=args.learning_rate, seed=args.seed, config=init_config, params=init,
    )  # fmt: skip
    save_policy(args.out, params, config)
    columns = ("teacher_cost", "prior_cost", "policy_cost", "guided_cost")
    logger.info(
        "%-34s %6s %9s %9s %9s %9s", "graph", "nodes", "teacher", "prior", "decode", "guided"
    )
    for name, row in report["graphs"].items():
        costs = " ".join(f"{row[k] * 1e3:9.3f}" for k in columns)
        logger.info("%-34s %6d %s", name, row["nodes"], costs)
    logger.info("wrote %s (%.0f s)", args.out, time.perf_counter() - started)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1, default=float))
        logger.info("wrote %s", args.report)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
