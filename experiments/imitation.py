"""Imitation from search teachers, zero-shot on a held-out family (issue 43's recipe, first
half): does a GO network taught to decide as simulated annealing did, on graphs of other
families, decide better than the best heuristic on a family it never saw?

For each held-out family:

1. **Teachers** (:func:`hlo_go.rl.teachers.make_teachers`): simulated annealing with
   ``--evaluations`` simulator evaluations per (graph, cluster), started from the best
   heuristic, on the training graphs (the ``--per-family`` smallest graphs of every other
   family with at most ``--max-nodes`` nodes, variants included) and on the held-out
   family's base graphs (there only as the reference SA result). Stored and resumable.
   ``--train-clusters A B``: training teachers on each of those clusters, one network for
   all of them (cluster features are inputs); held-out graphs are judged on ``--cluster``.
2. **Imitation** (:func:`hlo_go.rl.imitation.train_imitation`): ``--steps`` Adam steps of
   cross-entropy on the training teachers' decisions, **no heuristic prior input**;
   ``--changed-share S`` gives the decisions a teacher changed from the heuristic a share
   ``S`` of the loss (default 0: all alike).
3. **Zero-shot** on each held-out graph (:func:`hlo_go.rl.infer`): the network's greedy
   decisions, and the best of greedy + ``--samples`` samples (and, for each of
   ``--temperatures``, the best of greedy + as many samples at that softmax temperature).
   The greedy decisions with the network's confidence cuts (:mod:`hlo_go.rl.cuts`: the
   groups it is unsure of on the main device, its fusion cut at a few levels), the best
   kept.
   With ``--move-head``, the network also has a move head trained on simulated single
   moves of its training graphs (:mod:`hlo_go.rl.moves`), and for each ``K`` of
   ``--moves``: the best of greedy and its cuts, then its ``K`` top-scored groups moved in
   turn, each kept when it pays (and the same without the cuts, an ablation), against the
   same number of simulations spent without the network: the best heuristic + its largest
   groups (by flops) moved the same way, and simulated annealing from the best heuristic; and
   simulated annealing from the best heuristic for as long as the network's warm default
   decode (greedy, cuts, :data:`hlo_go.rl.DEFAULT_MOVES` moves) took (equal wall-clock).
   ``--refine-moves STEPS``: before that, ``STEPS`` more imitation steps whose move labels
   are simulated from the network's own decode on its training graphs
   (:func:`hlo_go.rl.refine_moves`), where its climb starts. ``--ppo-steps STEPS``: then
   PPO on the simulator from the network, on its training graphs of at most
   ``--ppo-max-nodes`` nodes on every training cluster at once (:func:`hlo_go.rl.pretrain`;
   issue 43's recipe, second half).
4. **Fine-tuned** (:func:`hlo_go.rl.finetune`): ``--finetune-steps`` (at most 50) PPO steps
   from the imitation checkpoint on each held-out graph; the best decisions its samples
   found, the final greedy ones, the fine-tuned network's own decode, and the outcome: the
   best of those and the zero-shot decode; against SA from the best heuristic with as
   many evaluations (PPO's samples and both decodes' simulations) and for as long.

Two more baselines on each held-out graph: the credible expert (the GO paper's per-layer
pipeline, or one device where that is faster) and, with ``--hdp-evaluations N``, HDP
(placement only, ``N`` evaluations, on the best heuristic's fusion and schedule).

Columns: simulated step times ÷ the best heuristic's (``> 1`` is faster than it), and the
fraction of SA's gain over the best heuristic that zero-shot captures.

Run: ``python experiments/imitation.py --held-out gpt2 [--cluster v100x4]``; ``--keep DIR``
stores each fold's network, ``--checkpoints DIR`` evaluates stored ones without training
(``--stand-in FAMILY``: DIR/FAMILY.msgpack for a held-out family DIR has no network of);
``--quick``: the gnmt fold, one small training graph per family, 30 evaluations, 3 steps
(:data:`QUICK`).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import _common as C

CLUSTER = "v100x4"
EVALUATIONS = 2000
STEPS = 400
SAMPLES = 16
FINETUNE_STEPS = 50
PER_FAMILY = 4
MAX_NODES = 3000
MAX_HELD_OUT_NODES = 6000
CHANGED_SHARE = 0.0  # hlo_go.rl.imitation.CHANGED_SHARE
# The credible expert: the per-layer pipeline, or one device where that is faster.
EXPERT = ("expert+critical-path+xla-cpu-like", "critical-path+xla-cpu-like")
# --quick: settings left at their defaults become these (a smoke run of a minute or so).
PPO_MAX_NODES = 2500
PPO_BATCH = 4  # --ppo-steps: graphs_per_batch = switch_every, one new pair each step
QUICK = {
    "held_out": ["gnmt"],
    "evaluations": 30,
    "steps": 3,
    "samples": 2,
    "per_family": 1,
    "max_nodes": 1000,
    "max_held_out_nodes": 1000,
    "finetune_steps": 2,
}


def _nodes(name: str) -> int:
    from hlo_go import corpus

    info = corpus.info(name)
    stages = info.get("stages", {})
    nodes = stages.get("prefusion", {}).get("nodes") or stages.get("unoptimized", {}).get("nodes")
    return int(nodes) if nodes else 10**9


def training_graphs(held_out: str, *, per_family: int, max_nodes: int) -> list[str]:
    """The ``per_family`` smallest built graphs (base and variants) of every family but
    ``held_out`` with at most ``max_nodes`` nodes."""
    from hlo_corpus.variants import FAMILIES
    from hlo_go import corpus

    chosen: list[str] = []
    for fam in FAMILIES:
        if fam == held_out:
            continue
        names = [
            n
            for n in corpus.names(split=("base", "variants"), family=fam)
            if corpus.is_built(n) and _nodes(n) <= max_nodes
        ]
        chosen += sorted(names, key=_nodes)[:per_family]
    return chosen


def held_out_graphs(family: str, *, max_nodes: int, smallest: bool = False) -> list[str]:
    """The held-out family's base graphs with at most ``max_nodes`` nodes (``smallest``:
    its smallest base graph where it has none that small)."""
    from hlo_go import corpus

    names = corpus.names(split="base", family=family)
    chosen = [n for n in names if _nodes(n) <= max_nodes]
    if not chosen and smallest and names:
        chosen = [min(names, key=_nodes)]
    return chosen


def run_fold(family: str, args: Any, store: Path) -> dict[str, Any]:
    """Teachers, imitation without the family, zero-shot on its graphs."""
    from hlo_go.baselines.search import run_search, search_tasks_for
    from hlo_go.gonet import PolicyConfig
    from hlo_go.rl import DEFAULT_MOVES, TrainConfig, infer, load_checkpoint
    from hlo_go.rl.imitation import train_imitation
    from hlo_go.rl.moves import climb_moves, largest_groups
    from hlo_go.rl.prior import BEST, prior_decisions
    from hlo_go.rl.teachers import TeacherJob, make_teachers
    from hlo_go.sim import get_cluster, simulate

    train = training_graphs(family, per_family=args.per_family, max_nodes=args.max_nodes)
    test = held_out_graphs(
        family, max_nodes=args.max_held_out_nodes, smallest=args.smallest_held_out
    )
    if not test:
        raise SystemExit(
            f"error: family {family!r} has no base graph <= {args.max_held_out_nodes} nodes"
        )
    C.log("imitation", f"{family}: {len(train)} training graphs, held out {test}")
    reused = _reused_checkpoint(family, args)
    if reused is not None:
        ckpt = load_checkpoint(reused)
        _check_held_out(ckpt, family, reused)
    pairs = [(g, args.cluster) for g in test]
    if reused is None:
        pairs += [(g, c) for c in args.train_clusters or [args.cluster] for g in train]
    jobs = [
        TeacherJob(g, c, evaluations=args.evaluations, seed=args.seed)
        for g, c in dict.fromkeys(pairs)
    ]
    teachers = make_teachers(jobs, store=store, workers=args.workers, progress=True)
    by_pair = {(t.job.graph, t.job.cluster): t for t in teachers}
    by_graph = {g: by_pair[g, args.cluster] for g in test}
    config = TrainConfig(
        seed=args.seed, progress=False, checkpoint_every=0,
        policy=PolicyConfig(move_head=args.move_head, timeline_features=args.timeline_features),
    )  # fmt: skip
    if args.quick:
        config = config.replace(
            policy=PolicyConfig(
                hidden_size=16, gnn_layers=1, num_heads=2, segments_per_step=2,
                move_head=args.move_head, timeline_features=args.timeline_features,
            )
        )  # fmt: skip
    cluster = get_cluster(args.cluster)
    with tempfile.TemporaryDirectory(prefix="hlo-go-imitation-") as work:
        if reused is None:
            result = train_imitation(
                [by_pair[p] for p in pairs if p[0] in train],
                config,
                steps=args.steps,
                seed=args.seed,
                progress=True,
                out_dir=Path(work),
                changed_share=args.changed_share,
                renumber_devices=args.renumber_devices,
                match_devices=args.match_devices,
            )
            ckpt = load_checkpoint(Path(work))
            record = {
                "imitation_steps": result.step,
                "imitation_s": result.seconds,
                "train_agreement_mean": C.mean(list(result.agreement.values())),
            }
        else:  # what the reused network was taught on, not what this run would teach
            train = sorted({g.split("@")[0] for g in _listed(ckpt.meta.get("graphs", []))})
            record = {"checkpoint": str(reused), "imitation_steps": ckpt.step}
            if ckpt.meta.get("imitation", {}).get("init_step") is not None:  # refined
                record["refined_from_step"] = ckpt.meta["imitation"]["init_step"]
        final = Path(work)
        if args.refine_moves:
            final = Path(work) / "refined"
            ckpt = _refined(ckpt, args, store, final)
            record["refine_moves_steps"] = args.refine_moves
        if args.ppo_steps:
            final = Path(work) / "ppo"
            ckpt, ppo = _ppo_trained(ckpt, train, args, final)
            record |= ppo
        graphs = C.load_graphs(test)
        rows = []
        for name in test:
            zero = infer(
                ckpt, graphs[name], cluster, samples=args.samples, seed=args.seed, moves=0,
                cuts=False,
            )  # fmt: skip
            teacher = by_graph[name]
            base, sa = teacher.best_heuristic_time, teacher.step_time
            gain = base - sa
            row = {
                "graph": name,
                "best heuristic": teacher.best_heuristic,
                "greedy vs best heuristic": base / zero.greedy_time,
                f"best of greedy+{args.samples} vs best heuristic": base / zero.step_time,
                "SA vs best heuristic": base / sa,
                "fraction of SA gain": (base - zero.step_time) / gain if gain > 0 else None,
                "decide_s": zero.seconds,
            }
            graph = graphs[name]
            cuts = infer(ckpt, graph, cluster, moves=0)
            row["greedy+cuts vs best heuristic"] = base / cuts.step_time
            # the best heuristic's decisions: where every search baseline starts
            _, start = prior_decisions(graph, cluster, BEST)
            start = start.validate(graph, cluster.num_devices)
            row |= _expert_and_hdp(graph, cluster, args, start, base)
            if args.move_head:
                for k in args.moves:
                    own = infer(ckpt, graph, cluster, moves=k)
                    budget = own.simulations
                    row[f"greedy+cuts+{k} moves vs best heuristic"] = base / own.step_time
                    row[f"greedy+cuts+{k} moves fraction of SA gain"] = (
                        (base - own.step_time) / gain if gain > 0 else None
                    )
                    row[f"greedy+cuts+{k} moves decide_s"] = own.seconds
                    row[f"greedy+cuts+{k} moves simulations"] = budget
                    plain = infer(ckpt, graph, cluster, moves=k, cuts=False)
                    row[f"greedy+{k} moves (no cuts) vs best heuristic"] = base / plain.step_time
                    _, flops_time, _ = climb_moves(
                        graph, cluster, start, largest_groups(graph, budget - 1)
                    )
                    sa = run_search(
                        graph, cluster, "simulated-annealing", budget=budget, seed=args.seed,
                        start=[start], tasks=search_tasks_for(cluster), fixed=start,
                    ).best  # fmt: skip
                    sa_time = min(base, float(simulate(graph, cluster, sa).step_time))
                    row |= {
                        f"largest moves at greedy+cuts+{k} moves' simulations vs best heuristic": (
                            base / flops_time
                        ),
                        f"SA at greedy+cuts+{k} moves' simulations vs best heuristic": (
                            base / sa_time
                        ),
                    }
                # SA given the wall-clock of the network's warm default decode.
                warm = infer(ckpt, graph, cluster, moves=DEFAULT_MOVES)
                timed = run_search(
                    graph, cluster, "simulated-annealing", budget=10**7, seed=args.seed,
                    time_limit=warm.seconds, start=[start], tasks=search_tasks_for(cluster),
                    fixed=start,
                )  # fmt: skip
                timed_time = min(base, float(simulate(graph, cluster, timed.best).step_time))
                row |= {
                    f"greedy+cuts+{DEFAULT_MOVES} moves warm decide_s": warm.seconds,
                    "SA equal wall-clock vs best heuristic": base / timed_time,
                    "SA equal wall-clock evaluations": int(timed.evaluations),
                }
            for temperature in args.temperatures:  # the same samples' count, sharper
                cooler = infer(
                    ckpt, graphs[name], cluster, samples=args.samples, seed=args.seed,
                    temperature=temperature, moves=0, cuts=False,
                )  # fmt: skip
                row[f"best of greedy+{args.samples} at T={temperature:g} vs best heuristic"] = (
                    base / cooler.step_time
                )
            if args.finetune_steps:
                row |= _finetuned(ckpt, name, graph, cluster, args, Path(work), start, base, gain)
            rows.append(row)
        if args.keep and (reused is None or args.refine_moves or args.ppo_steps):
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(final / "checkpoint.msgpack", args.keep / f"{family}.msgpack")
    return {"family": family, "training_graphs": train, **record, "rows": rows}


def _refined(ckpt: Any, args: Any, store: Path, out: Path) -> Any:
    """``ckpt`` after :func:`hlo_go.rl.refine_moves` on its own training teachers."""
    from hlo_go.rl import load_checkpoint, refine_moves
    from hlo_go.rl.teachers import TeacherJob, make_teachers

    jobs = [TeacherJob(**job) for job in ckpt.meta["teachers"].values()]
    teachers = make_teachers(jobs, store=store, workers=args.workers, progress=True)
    refine_moves(
        ckpt, teachers, steps=args.refine_moves, seed=args.seed, progress=True, out_dir=out
    )
    return load_checkpoint(out)


def _ppo_trained(
    ckpt: Any, train: Sequence[str], args: Any, out: Path
) -> tuple[Any, dict[str, Any]]:
    """``ckpt`` after ``--ppo-steps`` PPO steps on its training graphs of at most
    ``--ppo-max-nodes`` nodes, on each of the training clusters at once
    (:func:`hlo_go.rl.pretrain` from its parameters; one (graph, cluster) a step, each in
    turn in a shuffled order), and what that cost."""
    from hlo_go.rl import load_checkpoint, pretrain
    from hlo_go.sim import get_cluster

    names = [n for n in train if _nodes(n) <= args.ppo_max_nodes]
    clusters = [get_cluster(c) for c in args.train_clusters or [args.cluster]]
    pairs = len(names) * len(clusters)
    config = ckpt.config.replace(
        switch_every=PPO_BATCH, graphs_per_batch=PPO_BATCH, progress=True, eval_every=10**9,
        checkpoint_every=50,
    )  # fmt: skip
    C.log("imitation", f"PPO: {args.ppo_steps} steps over {pairs} (graph, cluster) pairs")
    began = time.perf_counter()
    result = pretrain(
        list(C.load_graphs(names).items()), clusters, steps=args.ppo_steps, out_dir=out,
        config=config, init=ckpt,
    )  # fmt: skip
    rewards = [row["reward_mean"] for row in result.history]
    tenth = max(1, len(rewards) // 10)
    return load_checkpoint(out), {
        "ppo_steps": args.ppo_steps,
        "ppo_pairs": pairs,
        "ppo_clusters": [c.name for c in clusters],
        "ppo_s": time.perf_counter() - began,
        "ppo_reward_mean_first_tenth": C.mean(rewards[:tenth]),
        "ppo_reward_mean_last_tenth": C.mean(rewards[-tenth:]),
    }


def _expert_and_hdp(graph: Any, cluster: Any, args: Any, start: Any, base: float) -> dict[str, Any]:
    """Two more baselines for one held-out graph: the credible expert (:data:`EXPERT`, the GO
    paper's per-layer pipeline, or one device where that is faster, as an expert would not
    ship a pipeline slower than one device) and, with ``--hdp-evaluations N``, HDP trained
    for ``N`` evaluations on the best heuristic's (``start``'s) fusion and schedule."""
    from hlo_go.baselines.hdp import run_hdp
    from hlo_go.rl.compare import run_baselines
    from hlo_go.sim import simulate

    expert = min(
        run_baselines(graph, cluster, EXPERT, seed=args.seed), key=lambda m: (m.oom, m.step_time)
    )
    row: dict[str, Any] = {
        "credible expert": expert.method,
        "credible expert vs best heuristic": base / expert.step_time,
    }
    if args.hdp_evaluations:
        found = run_hdp(graph, cluster, budget=args.hdp_evaluations, fixed=start, seed=args.seed)
        row["HDP vs best heuristic"] = base / float(simulate(graph, cluster, found.best).step_time)
    return row


def _finetuned(
    ckpt: Any,
    name: str,
    graph: Any,
    cluster: Any,
    args: Any,
    work: Path,
    start: Any,
    base: float,
    gain: float,
) -> dict[str, Any]:
    """Fine-tuning's columns for one held-out graph: PPO from the network for
    ``--finetune-steps`` steps (the best decisions its samples found, its final greedy
    ones), the fine-tuned network's own decode (greedy, cuts, moves), and the best of those
    and the zero-shot decode (the fine-tuning outcome); against SA from the best heuristic
    (``start``) with as many evaluations as PPO sampled, and for as long as the whole took."""
    from hlo_go.baselines.search import run_search, search_tasks_for
    from hlo_go.rl import finetune, infer
    from hlo_go.sim import simulate

    began = time.perf_counter()
    zero = infer(ckpt, graph, cluster)
    out = work / f"finetune-{name}"
    tuned = finetune(ckpt, (name, graph), cluster, steps=args.finetune_steps, out_dir=out)
    tuned = tuned.graphs[name]
    decoded = infer(out, graph, cluster)
    seconds = time.perf_counter() - began
    outcome = min(zero.step_time, tuned.best_time, decoded.step_time)
    sampled = args.finetune_steps * ckpt.config.samples

    def sa_time(**budget: Any) -> float:
        found = run_search(
            graph, cluster, "simulated-annealing", seed=args.seed, start=[start],
            tasks=search_tasks_for(cluster), fixed=start, **budget,
        ).best  # fmt: skip
        return min(base, float(simulate(graph, cluster, found).step_time))

    return {
        "fine-tuned best vs best heuristic": base / tuned.best_time,
        "fine-tuned greedy vs best heuristic": base / tuned.greedy_time,
        "fine-tuned decode vs best heuristic": base / decoded.step_time,
        "fine-tuned vs best heuristic": base / outcome,
        "fine-tuned fraction of SA gain": (base - outcome) / gain if gain > 0 else None,
        "finetune_s": seconds,
        "finetune_evaluations": sampled + zero.simulations + decoded.simulations,
        "SA at fine-tuning's evaluations vs best heuristic": base
        / sa_time(budget=sampled + zero.simulations + decoded.simulations),
        "SA at fine-tuning's wall-clock vs best heuristic": base
        / sa_time(budget=10**7, time_limit=seconds),
    }


def _reused_checkpoint(family: str, args: Any) -> Path | None:
    """The kept network ``--checkpoints DIR`` holds for ``family``'s fold: ``DIR/FAMILY.msgpack``,
    or, where that is missing and ``--stand-in NAME`` is given, ``DIR/NAME.msgpack`` (a
    network that never saw ``family`` either, which :func:`_check_held_out` checks)."""
    if not args.checkpoints:
        return None
    path = args.checkpoints / f"{family}.msgpack"
    if not path.is_file() and args.stand_in:
        path = args.checkpoints / f"{args.stand_in}.msgpack"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found (--keep DIR writes it)")
    return path


def _check_held_out(ckpt: Any, family: str, where: Path) -> None:
    """Refuses a reused checkpoint trained on a graph of the held-out family."""
    from hlo_go import corpus

    trained = [g.split("@")[0] for g in _listed(ckpt.meta.get("graphs", []))]
    seen = [g for g in trained if corpus.family(g) == family]
    if seen:
        raise SystemExit(f"error: {where} was trained on {family} graphs: {seen[:3]}")


def _listed(value: Any) -> list[str]:
    """A list the checkpoint's metadata holds, as a list or as its printed form."""
    import ast

    return list(ast.literal_eval(value) if isinstance(value, str) else value)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``imitation[.quick].json``."""
    from hlo_corpus.variants import FAMILIES

    began = time.perf_counter()
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--held-out", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    p.add_argument("--cluster", default=CLUSTER, help="the cluster held-out graphs are judged on")
    p.add_argument(
        "--train-clusters",
        nargs="+",
        help="clusters of the training teachers (default: --cluster); one network for all",
    )
    p.add_argument("--evaluations", type=int, default=EVALUATIONS, help="SA budget per teacher")
    p.add_argument("--steps", type=int, default=STEPS, help="imitation steps per fold")
    p.add_argument("--samples", type=int, default=SAMPLES, help="zero-shot samples")
    p.add_argument(
        "--finetune-steps",
        type=int,
        default=FINETUNE_STEPS,
        help="PPO steps on each held-out graph from the imitation checkpoint (0: none, <= 50)",
    )
    p.add_argument("--per-family", type=int, default=PER_FAMILY)
    p.add_argument("--max-nodes", type=int, default=MAX_NODES)
    p.add_argument("--max-held-out-nodes", type=int, default=MAX_HELD_OUT_NODES)
    p.add_argument(
        "--smallest-held-out",
        action="store_true",
        help="a family with no base graph <= --max-held-out-nodes is judged on its smallest",
    )
    p.add_argument("--workers", type=int, default=1, help="teacher processes")
    p.add_argument(
        "--changed-share",
        type=float,
        default=CHANGED_SHARE,
        help="loss weight share of the decisions a teacher changed from the heuristic",
    )
    p.add_argument(
        "--temperatures",
        type=float,
        nargs="*",
        default=[],
        help="also sample zero-shot at these softmax temperatures (a column each)",
    )
    p.add_argument(
        "--move-head",
        action="store_true",
        help="train a move head on simulated single moves and decode with --moves",
    )
    p.add_argument(
        "--moves",
        type=int,
        nargs="*",
        default=[4, 16],
        help="with --move-head: zero-shot with this many top-scored moves (a column each)",
    )
    p.add_argument(
        "--refine-moves",
        type=int,
        default=0,
        metavar="STEPS",
        help="with --move-head: then teach the move head from the network's own decode for "
        "STEPS more steps (hlo_go.rl.refine_moves; kept by --keep)",
    )
    p.add_argument(
        "--ppo-steps",
        type=int,
        default=0,
        metavar="STEPS",
        help="then PPO across the training clusters for STEPS steps on the training graphs "
        "(hlo_go.rl.pretrain from the network; kept by --keep)",
    )
    p.add_argument(
        "--ppo-max-nodes",
        type=int,
        default=PPO_MAX_NODES,
        help="with --ppo-steps: the training graphs of at most this many nodes",
    )
    p.add_argument(
        "--renumber-devices",
        action="store_true",
        help="teach the teachers' placements with devices numbered in graph order "
        "(hlo_go.rl.imitation.canonical_devices)",
    )
    p.add_argument(
        "--match-devices",
        action="store_true",
        help="teach the teachers' placements up to the cluster's device symmetries "
        "(hlo_go.rl.imitation.matched_placement)",
    )
    p.add_argument(
        "--timeline-features",
        action="store_true",
        help="the network also reads where each node falls in an unbounded-device schedule "
        "(hlo_go.graph.timeline_features)",
    )
    p.add_argument(
        "--keep", type=Path, help="copy each fold's imitation checkpoint here (FAMILY.msgpack)"
    )
    p.add_argument(
        "--checkpoints",
        type=Path,
        help="reuse DIR/FAMILY.msgpack (as --keep wrote it) instead of training each fold",
    )
    p.add_argument(
        "--stand-in",
        metavar="FAMILY",
        help="with --checkpoints: where DIR has no network for a held-out family, use "
        "DIR/FAMILY.msgpack (refused if it was trained on the held-out family)",
    )
    p.add_argument(
        "--hdp-evaluations",
        type=int,
        default=0,
        help="also run HDP (placement only, on the best heuristic's fusion and schedule) "
        "with this many evaluations on each held-out graph (0: not run)",
    )
    C.add_teacher_store(p)
    args = p.parse_args(argv)
    C.apply_quick(p, args, QUICK)
    folds = [run_fold(f, args, args.store) for f in args.held_out]
    rows = [{"family": f["family"], **r} for f in folds for r in f["rows"]]
    greedy = [r["greedy vs best heuristic"] for r in rows]
    best = [r[f"best of greedy+{args.samples} vs best heuristic"] for r in rows]
    fractions = [r["fraction of SA gain"] for r in rows if r["fraction of SA gain"] is not None]
    tuned = [r["fine-tuned vs best heuristic"] for r in rows if "finetune_s" in r]
    tuned_shares = [
        r["fine-tuned fraction of SA gain"]
        for r in rows
        if r.get("fine-tuned fraction of SA gain") is not None
    ]
    tuned_baselines = {
        f"{key}_vs_best_heuristic_geomean": C.geomean([r[column] for r in rows])
        for key, column in (
            ("sa_at_finetuning_evaluations", "SA at fine-tuning's evaluations vs best heuristic"),
            ("sa_at_finetuning_wall_clock", "SA at fine-tuning's wall-clock vs best heuristic"),
        )
        if tuned
    }
    cooled = {
        f"zero_shot_at_T{t:g}_vs_best_heuristic_geomean": C.geomean(
            [r[f"best of greedy+{args.samples} at T={t:g} vs best heuristic"] for r in rows]
        )
        for t in args.temperatures
    }
    moved: dict[str, Any] = {
        "zero_shot_cuts_vs_best_heuristic_geomean": C.geomean(
            [r["greedy+cuts vs best heuristic"] for r in rows]
        )
    }
    if args.move_head:
        for k in args.moves:
            for key, column in (
                (f"zero_shot_cuts_{k}_moves", f"greedy+cuts+{k} moves vs best heuristic"),
                (f"zero_shot_{k}_moves_no_cuts", f"greedy+{k} moves (no cuts) vs best heuristic"),
                (
                    f"largest_moves_at_{k}_moves_simulations",
                    f"largest moves at greedy+cuts+{k} moves' simulations vs best heuristic",
                ),
                (
                    f"sa_at_{k}_moves_simulations",
                    f"SA at greedy+cuts+{k} moves' simulations vs best heuristic",
                ),
            ):
                moved[f"{key}_vs_best_heuristic_geomean"] = C.geomean([r[column] for r in rows])
            shares = [r[f"greedy+cuts+{k} moves fraction of SA gain"] for r in rows]
            moved[f"zero_shot_cuts_{k}_moves_fraction_of_sa_gain_median"] = C.median(
                [f for f in shares if f is not None]
            )
            column = f"greedy+cuts+{k} moves vs best heuristic"
            moved[f"zero_shot_cuts_{k}_moves_beats_best_heuristic"] = sum(
                r[column] > 1.0 + 1e-9 for r in rows
            )
            moved[f"zero_shot_cuts_{k}_moves_vs_credible_expert_geomean"] = C.geomean(
                [r[column] / r["credible expert vs best heuristic"] for r in rows]
            )
            moved[f"zero_shot_cuts_{k}_moves_families_beaten"] = sorted(
                f["family"] for f in folds if C.geomean([r[column] for r in f["rows"]]) > 1.0 + 1e-9
            )
        moved["sa_equal_wall_clock_vs_best_heuristic_geomean"] = C.geomean(
            [r["SA equal wall-clock vs best heuristic"] for r in rows]
        )
    baselines = {
        "credible_expert_vs_best_heuristic_geomean": C.geomean(
            [r["credible expert vs best heuristic"] for r in rows]
        ),
        "sa_teacher_vs_best_heuristic_geomean": C.geomean(
            [r["SA vs best heuristic"] for r in rows]
        ),
    }
    if args.hdp_evaluations:
        baselines["hdp_vs_best_heuristic_geomean"] = C.geomean(
            [r["HDP vs best heuristic"] for r in rows]
        )
    result = {
        "title": "Imitation of SA teachers, zero-shot on held-out families (simulated)",
        "cluster": args.cluster,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "zero_shot_greedy_vs_best_heuristic_geomean": C.geomean(greedy),
        "zero_shot_vs_best_heuristic_geomean": C.geomean(best),
        "zero_shot_beats_best_heuristic": sum(b > 1.0 + 1e-9 for b in best),
        **cooled,
        **moved,
        **baselines,
        "held_out_graphs": len(rows),
        "zero_shot_fraction_of_sa_gain_median": C.median(fractions),
        "finetuned_vs_best_heuristic_geomean": C.geomean(tuned) if tuned else None,
        "finetuned_beats_best_heuristic": sum(t > 1.0 + 1e-9 for t in tuned),
        "finetuned_fraction_of_sa_gain_median": C.median(tuned_shares) if tuned_shares else None,
        **tuned_baselines,
        "folds": [{k: v for k, v in f.items() if k != "rows"} for f in folds],
        "rows": rows,
    }
    C.write_outputs("imitation", result, out=args.out, quick=args.quick, argv=argv, began=began)
    return result


if __name__ == "__main__":
    main()
