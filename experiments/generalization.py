"""Generalization to unseen families: the GO network's own decisions on graphs of a family
it never saw (issue 43's headline, ``results/generalization.json``).

For each held-out family, one GO network is taught by imitation of simulated-annealing
teachers on the graphs of every other family, on all of ``--clusters`` at once (cluster
features are inputs; no heuristic prior input), and judged on the family's base graphs of
at most ``--max-held-out-nodes`` nodes (or its smallest base graph where it has none that
small: inception_v3 and amoebanet, about 11,000 nodes), on each cluster:

* **zero-shot**: the network's default decode (:func:`hlo_go.rl.infer`: greedy, its
  confidence cuts, a climb of ``--moves`` moves along its move head; no heuristic is run),
  against the best heuristic (every figure is ÷ its simulated step time), the credible
  expert (the GO paper's per-layer pipeline, or one device where that is faster), SA and
  the best heuristic + a climb along its largest groups at the decode's simulations, SA at
  the decode's wall-clock, HDP (``--hdp-evaluations``) and SA with ``--evaluations``
  (the teacher; the fractions are of its gain over the best heuristic);
* **fine-tuned** (on ``--finetune-cluster``, graphs of at most ``--max-finetune-nodes``
  nodes): ``--finetune-steps`` (≤ 50) PPO steps from the fold's network on the graph;
  against SA at equal evaluations and at equal wall-clock.

It runs :mod:`experiments.imitation` once per cluster and once to fine-tune, and writes the
summary under issue 43's names, with the decision time of the shipped network's default
decode on graphs up to 60k nodes from the ``decide`` benchmark
(``benchmarks/results/decide.json``, ``python -m benchmarks decide``).

Each fold's network is taught on the first cluster's teachers (``--train-clusters``: on
several), then ``--refine-moves`` more steps teach its move head from its own decode
(:func:`hlo_go.rl.refine_moves`); with ``--match-devices``, placements are taught up to
the cluster's device symmetries (:func:`hlo_go.rl.matched_placement`); with
``--timeline-features`` the network also reads :func:`hlo_go.graph.timeline_features`.
``--checkpoints DIR`` reuses kept fold networks (``DIR/FAMILY.msgpack``, as
``experiments/imitation.py --keep DIR`` writes them). A family with no network in ``DIR``
is judged by the ``--stand-in`` family's network, which must never have seen it
(checked). Without ``--checkpoints`` every fold is trained (10-20 min a fold on a 2-core
host) and kept under ``--keep``. The training sets take each family's
graphs of at most ``MAX_NODES`` nodes: 6,400 rather than 6,000 adds inception_v3's
variants with (A, C, E) blocks (2, 1, 1) and (1, 2, 1) (6,001-6,357 nodes) and no other graph.

Run: ``python experiments/generalization.py --checkpoints DIR`` (``--quick``: the gnmt fold,
tiny settings, a few minutes).
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import _common as C
from experiments import imitation

CLUSTERS = ("v100x4", "h100x8")
MOVES = 16  # hlo_go.rl.DEFAULT_MOVES
STEPS = 4000
EVALUATIONS = 2000
PER_FAMILY = 30
MAX_NODES = 6400
MAX_HELD_OUT_NODES = 6000
FINETUNE_STEPS = 20
MAX_FINETUNE_NODES = MAX_HELD_OUT_NODES
HDP_EVALUATIONS = 200
REFINE_MOVES = 0
STAND_IN = "gpt2"
# Issue 43's targets: (key, at least (True) or at most (False), value).
TARGETS: tuple[tuple[str, bool, float], ...] = (
    ("zero_shot_vs_best_heuristic_geomean", True, 1.03),
    ("zero_shot_families_beaten_count", True, 7),
    ("zero_shot_fraction_of_sa_gain", True, 0.5),
    ("finetuned_fraction_of_sa_gain", True, 0.9),
    ("zero_shot_decide_s_max", False, 2.0),
)
DECIDE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "decide.json"
# --quick: the gnmt fold, tiny networks and budgets (imitation's own --quick settings).
QUICK = {
    "held_out": ["gnmt"],
    "moves": 2,
    "max_held_out_nodes": 1000,
    "max_finetune_nodes": 1000,
    "finetune_steps": 2,
    "hdp_evaluations": 4,
    "refine_moves": 2,
}


def evaluable(
    families: Sequence[str], max_nodes: int, *, smallest: bool = True
) -> tuple[list[str], dict[str, str]]:
    """The families fine-tuned: those with a base graph of at most ``max_nodes`` nodes, or
    (``smallest``, as the zero-shot runs judge them) any base graph; and why the others are
    not."""
    kept, skipped = [], {}
    for family in families:
        if imitation.held_out_graphs(family, max_nodes=max_nodes, smallest=smallest):
            kept.append(family)
        else:
            skipped[family] = f"no base graph of at most {max_nodes} nodes"
    return kept, skipped


def _imitation_argv(args: Any, cluster: str, families: Sequence[str], work: Path) -> list[str]:
    """The arguments of one :mod:`experiments.imitation` run (zero-shot on ``cluster``)."""
    argv = [
        "--held-out", *families, "--cluster", cluster, "--move-head", "--moves", str(args.moves),
        "--finetune-steps", "0", "--max-held-out-nodes", str(args.max_held_out_nodes),
        "--smallest-held-out",
        "--hdp-evaluations", str(args.hdp_evaluations), "--workers", str(args.workers),
        "--seed", str(args.seed), "--out", str(work), "--store", str(args.store),
    ]  # fmt: skip
    if args.quick:
        argv.append("--quick")
    else:
        argv += [
            "--steps", str(STEPS), "--evaluations", str(EVALUATIONS),
            "--per-family", str(PER_FAMILY), "--max-nodes", str(MAX_NODES),
        ]  # fmt: skip
    return argv


def run_imitation(argv: Sequence[str]) -> dict[str, Any]:
    """``experiments/imitation.py argv`` in a fresh process; returns its result. Each run's
    XLA executables (the network's buckets, every graph's searches) go with its process:
    one process running every cluster's folds in turn can run out of memory maps."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(imitation.main, list(argv)).result()


def by_family(rows: Sequence[dict[str, Any]], column: str) -> dict[str, float]:
    """Family -> the geomean of ``column`` over its rows, families in name order."""
    families = sorted({r["family"] for r in rows})
    return {f: C.geomean([r[column] for r in rows if r["family"] == f]) for f in families}


def _cluster_summary(result: dict[str, Any], moves: int) -> dict[str, Any]:
    """One cluster's zero-shot figures, under issue 43's names, from an imitation result."""
    rows = result["rows"]
    per_family = by_family(rows, f"greedy+cuts+{moves} moves vs best heuristic")
    beaten = sorted(f for f, g in per_family.items() if g > 1.0 + 1e-9)
    pick = {
        "zero_shot_vs_best_heuristic_geomean": f"zero_shot_cuts_{moves}_moves_vs_best_heuristic_geomean",
        "zero_shot_vs_credible_expert_geomean": f"zero_shot_cuts_{moves}_moves_vs_credible_expert_geomean",
        "zero_shot_fraction_of_sa_gain": f"zero_shot_cuts_{moves}_moves_fraction_of_sa_gain_median",
        "zero_shot_beats_best_heuristic_graphs": f"zero_shot_cuts_{moves}_moves_beats_best_heuristic",
        "sa_equal_evaluations_vs_best_heuristic_geomean": f"sa_at_{moves}_moves_simulations_vs_best_heuristic_geomean",
        "largest_moves_equal_evaluations_vs_best_heuristic_geomean": f"largest_moves_at_{moves}_moves_simulations_vs_best_heuristic_geomean",
        "sa_equal_wall_clock_vs_best_heuristic_geomean": "sa_equal_wall_clock_vs_best_heuristic_geomean",
        "credible_expert_vs_best_heuristic_geomean": "credible_expert_vs_best_heuristic_geomean",
        "hdp_vs_best_heuristic_geomean": "hdp_vs_best_heuristic_geomean",
        "sa_teacher_vs_best_heuristic_geomean": "sa_teacher_vs_best_heuristic_geomean",
        "ablation_greedy_vs_best_heuristic_geomean": "zero_shot_greedy_vs_best_heuristic_geomean",
        "ablation_greedy_cuts_vs_best_heuristic_geomean": "zero_shot_cuts_vs_best_heuristic_geomean",
        "ablation_no_cuts_vs_best_heuristic_geomean": f"zero_shot_{moves}_moves_no_cuts_vs_best_heuristic_geomean",
    }  # fmt: skip
    return {
        **{key: result.get(source) for key, source in pick.items()},
        "held_out_graphs": len(rows),
        "families_evaluated": list(per_family),
        "zero_shot_families_beaten": beaten,
        "zero_shot_families_beaten_count": len(beaten),
        "zero_shot_by_family": per_family,
        "simulations_per_graph": [r[f"greedy+cuts+{moves} moves simulations"] for r in rows],
        "folds": result["folds"],
        "rows": rows,
    }


def _finetune_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The fine-tuning figures from an imitation result with ``--finetune-steps``."""
    keep = (
        "finetuned_vs_best_heuristic_geomean",
        "finetuned_beats_best_heuristic",
        "sa_at_finetuning_evaluations_vs_best_heuristic_geomean",
        "sa_at_finetuning_wall_clock_vs_best_heuristic_geomean",
    )
    per_family = by_family(result["rows"], "fine-tuned vs best heuristic")
    return {
        **{key: result.get(key) for key in keep},
        "finetuned_fraction_of_sa_gain": result.get("finetuned_fraction_of_sa_gain_median"),
        "finetuned_by_family": per_family,
        "finetuned_families_beaten_count": sum(g > 1.0 + 1e-9 for g in per_family.values()),
        "held_out_graphs": len(result["rows"]),
        "rows": result["rows"],
    }


def family_rows(clusters: dict[str, dict[str, Any]], moves: int) -> list[dict[str, Any]]:
    """The summary table: per cluster and held-out family, geomeans ÷ the best heuristic."""
    columns = {
        "GO zero-shot": f"greedy+cuts+{moves} moves vs best heuristic",
        "credible expert": "credible expert vs best heuristic",
        "SA, equal simulations": f"SA at greedy+cuts+{moves} moves' simulations vs best heuristic",
        "largest-groups climb, equal simulations": (
            f"largest moves at greedy+cuts+{moves} moves' simulations vs best heuristic"
        ),
        "SA, equal wall-clock": "SA equal wall-clock vs best heuristic",
        "HDP": "HDP vs best heuristic",
        "SA, teacher budget": "SA vs best heuristic",
    }
    table = []
    for cluster, summary in clusters.items():
        for family in summary["families_evaluated"]:
            rows = [r for r in summary["rows"] if r["family"] == family]
            table.append(
                {
                    "cluster": cluster,
                    "family": family,
                    "graphs": len(rows),
                    **{
                        name: C.geomean([r[col] for r in rows]) if col in rows[0] else None
                        for name, col in columns.items()
                    },
                }
            )
    return table


def decide_time(path: Path = DECIDE) -> dict[str, Any]:
    """The shipped network's default-decode time from the ``decide`` benchmark's results."""
    if not path.is_file():
        return {"zero_shot_decide_s_max": None, "source": f"{path.name} not found"}
    data = json.loads(path.read_text())
    nodes = max((r["nodes"] for r in data.get("rows", [])), default=None)
    return {
        "zero_shot_decide_s_max": data.get("moves_decide_s_max_warm"),
        "graphs_within_target": data.get("moves_graphs_within_target_warm"),
        "largest_graph_nodes": nodes,
        "greedy_16_samples_decide_s_max": data.get("decide_s_max_warm"),
        "clock": data.get("clock"),
        "source": f"benchmarks/results/{path.name} ({data.get('timestamp')})",
    }


def targets(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each of issue 43's targets: the value, the target and whether it is met."""
    out = {}
    for key, at_least, bound in TARGETS:
        value = summary.get(key)
        met = value is not None and (value >= bound if at_least else value <= bound)
        out[key] = {"value": value, "target": f"{'>=' if at_least else '<='} {bound:g}", "met": met}
    return out


def plot(clusters: dict[str, dict[str, Any]], path: Path) -> str:
    """Per held-out family, zero-shot ÷ the best heuristic on each cluster, beside SA's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(clusters), figsize=(6 * len(clusters), 3.8), squeeze=False)
    for ax, (name, summary) in zip(axes[0], clusters.items(), strict=True):
        families = summary["families_evaluated"]
        rows = summary["rows"]
        sa = [
            C.geomean([r["SA vs best heuristic"] for r in rows if r["family"] == f])
            for f in families
        ]
        x = np.arange(len(families))
        go = [summary["zero_shot_by_family"][f] for f in families]  # bars from 1 (no gain)
        ax.bar(x - 0.2, [g - 1 for g in go], 0.4, bottom=1, label="GO zero-shot")
        ax.bar(x + 0.2, [v - 1 for v in sa], 0.4, bottom=1, label="SA (teacher)", alpha=0.6)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, families, rotation=30, ha="right")
        ax.set_ylabel("speedup over the best heuristic")
        ax.set_title(f"{name}: held-out families")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return C.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``generalization[.quick].json``."""
    from hlo_corpus.variants import FAMILIES

    began = time.perf_counter()
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--held-out", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    p.add_argument("--clusters", nargs="+", default=list(CLUSTERS))
    p.add_argument("--moves", type=int, default=MOVES, help="the decode's climb length")
    p.add_argument("--max-held-out-nodes", type=int, default=MAX_HELD_OUT_NODES)
    p.add_argument("--finetune-cluster", help="default: the first of --clusters")
    p.add_argument("--finetune-steps", type=int, default=FINETUNE_STEPS, help="(<= 50; 0: none)")
    p.add_argument("--max-finetune-nodes", type=int, default=MAX_FINETUNE_NODES)
    p.add_argument("--hdp-evaluations", type=int, default=HDP_EVALUATIONS)
    p.add_argument("--checkpoints", type=Path, help="kept fold networks (DIR/FAMILY.msgpack)")
    p.add_argument("--stand-in", default=STAND_IN, help="fold network for families without one")
    p.add_argument("--keep", type=Path, help="where trained fold networks are kept")
    p.add_argument(
        "--train-clusters", nargs="+", help="training: the teachers' clusters (default: the first)"
    )
    p.add_argument(
        "--refine-moves",
        type=int,
        default=REFINE_MOVES,
        help="training: steps teaching the move head from the network's own decode",
    )
    p.add_argument(
        "--match-devices",
        action="store_true",
        help="training: teach placements up to the cluster's device symmetries",
    )
    p.add_argument(
        "--timeline-features",
        action="store_true",
        help="training: the network also reads each node's place in an unbounded-device schedule",
    )
    p.add_argument("--workers", type=int, default=2, help="teacher processes")
    C.add_teacher_store(p)
    args = p.parse_args(argv)
    C.apply_quick(p, args, QUICK)
    if not 0 <= args.finetune_steps <= 50:
        p.error("--finetune-steps must be between 0 and 50")
    families = list(args.held_out)
    finetune_cluster = args.finetune_cluster or args.clusters[0]
    train_clusters = args.train_clusters or args.clusters[:1]
    clusters: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="hlo-go-generalization-") as tmp:
        work = Path(tmp)
        nets = args.checkpoints or args.keep or work / "nets"
        for i, cluster in enumerate(args.clusters):
            C.log("generalization", f"zero-shot on {cluster}: {', '.join(families)}")
            run = _imitation_argv(args, cluster, families, work / cluster)
            if args.checkpoints or i > 0:
                run += ["--checkpoints", str(nets), "--stand-in", args.stand_in]
            else:
                run += ["--keep", str(nets), "--train-clusters", *train_clusters]
                run += ["--refine-moves", str(args.refine_moves)]
                run += ["--match-devices"] if args.match_devices else []
                run += ["--timeline-features"] if args.timeline_features else []
            clusters[cluster] = _cluster_summary(run_imitation(run), args.moves)
        finetuned = None
        tunable, _ = evaluable(families, args.max_finetune_nodes)
        if args.finetune_steps and tunable:
            C.log("generalization", f"fine-tuning on {finetune_cluster}: {', '.join(tunable)}")
            run = _imitation_argv(args, finetune_cluster, tunable, work / "finetune")
            run[run.index("--finetune-steps") + 1] = str(args.finetune_steps)
            run[run.index("--max-held-out-nodes") + 1] = str(args.max_finetune_nodes)
            run += ["--hdp-evaluations", "0", "--checkpoints", str(nets)]
            run += ["--stand-in", args.stand_in]
            finetuned = _finetune_summary(run_imitation(run))
    primary = clusters[args.clusters[0]]
    decide = decide_time()
    headline = {
        "cluster": args.clusters[0],
        **{k: primary[k] for k in primary if k not in ("rows", "folds", "simulations_per_graph")},
        "finetuned_vs_best_heuristic_geomean": finetuned and finetuned["finetuned_vs_best_heuristic_geomean"],
        "finetuned_fraction_of_sa_gain": finetuned and finetuned["finetuned_fraction_of_sa_gain"],
        "zero_shot_decide_s_max": decide["zero_shot_decide_s_max"],
    }  # fmt: skip
    result = {
        "title": "GO zero-shot and fine-tuned on held-out families (simulated)",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **headline,
        "targets": targets(headline),
        "clusters": clusters,
        "finetuned": {"cluster": finetune_cluster, **(finetuned or {})},
        "decide": decide,
        "rows": family_rows(clusters, args.moves),
        "plots": [plot(clusters, C.plot_path(args.out, "generalization", args.quick))],
    }
    C.write_outputs(
        "generalization", result, out=args.out, quick=args.quick, argv=argv, began=began
    )
    return result


if __name__ == "__main__":
    main()
