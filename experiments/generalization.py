"""Generalization to unseen graphs: leave-one-family-out pre-training, then zero-shot and
at most 50 fine-tuning steps on the held-out family's graph.

For each held-out graph, a GO policy is pre-trained (:func:`hlo_go.rl.pretrain`) on the
graphs of every *other* family, placement and scheduling and fusion jointly; then on the
held-out graph:

* ``zero-shot``: the pre-trained policy's greedy decisions (:func:`hlo_go.rl.infer`);
* ``fine-tuned``: the best decisions seen in ``FINETUNE_STEPS`` (≤ 50) PPO steps
  starting from the pre-trained parameters (:func:`hlo_go.rl.finetune`);
* ``GO-one``: a fresh policy trained on the held-out graph alone for ``GO_ONE_STEPS``
  steps (the paper's per-graph upper reference);
* ``scratch``: a fresh policy given only the fine-tuning's step count — what the
  pre-training buys;
* the best non-search heuristic (:func:`hlo_go.rl.compare.heuristic_names`).

``zero_shot_gap`` / ``finetune_gap``: mean over held-out graphs of (time / GO-one's - 1).
The paper: zero-shot nearly as good as fine-tuned, fine-tuned as good as GO-one.

Run: ``python experiments/generalization.py [--quick]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import _common as C

GRAPHS = ("rnnlm_l2_scan", "gnmt_l2_scan", "gpt2_l2", "transformer_xl_l2")
HELD_OUT = ("gpt2_l2",)
QUICK_GRAPHS = ("mlp", "cnn", "attention")
QUICK_HELD_OUT = ("attention",)
CLUSTER = "v100x4"
PRETRAIN_STEPS = 300
FINETUNE_STEPS = 50
GO_ONE_STEPS = 150
QUICK = {"PRETRAIN_STEPS": 4, "FINETUNE_STEPS": 2, "GO_ONE_STEPS": 3}


def held_out_run(
    name: str,
    graphs: dict[str, Any],
    families: dict[str, str],
    cluster_name: str,
    *,
    steps: dict[str, int],
    quick: bool,
    seed: int,
) -> dict[str, Any]:
    """Pre-train without ``name``'s family, then zero-shot / fine-tune / GO-one / scratch."""
    from hlo_go.rl import finetune, infer, pretrain, train_one
    from hlo_go.rl.compare import best, run_baselines
    from hlo_go.sim import get_cluster

    cluster = get_cluster(cluster_name)
    config = C.train_config(quick=quick, seed=seed, switch_every=20, graphs_per_batch=2)
    train_set = [(g, graphs[g]) for g in graphs if families[g] != families[name]]
    if not train_set:
        raise ValueError(
            f"no graphs of another family than {name!r} ({families[name]}) to pre-train on"
        )
    graph = graphs[name]
    with tempfile.TemporaryDirectory(prefix="hlo-go-generalization-") as work:
        work = Path(work)
        pre = pretrain(
            train_set, cluster, steps=steps["PRETRAIN_STEPS"], out_dir=work / "pre", config=config
        )
        zero = infer(work / "pre", graph, cluster)
        ft = finetune(
            work / "pre", (name, graph), cluster, steps=steps["FINETUNE_STEPS"], out_dir=work / "ft"
        )
        one = train_one(
            (name, graph), cluster, steps=steps["GO_ONE_STEPS"], out_dir=work / "one", config=config
        )
        scratch = train_one(
            (name, graph),
            cluster,
            steps=steps["FINETUNE_STEPS"],
            out_dir=work / "scratch",
            config=config,
        )
    top = best(run_baselines(graph, cluster))
    go_one = one.graphs[name].best_time
    fine = ft.graphs[name].best_time
    return {
        "graph": name,
        "family": families[name],
        "nodes": graph.num_nodes,
        "pretrain_graphs": [g for g, _ in train_set],
        "pretrain_s": pre.elapsed,
        "reference_time": one.graphs[name].reference_time,
        "zero_shot_time": zero.step_time,
        "zero_shot_s": zero.seconds,
        "finetune_time": fine,
        "finetune_s": ft.elapsed,
        "go_one_time": go_one,
        "go_one_s": one.elapsed,
        "scratch_time": scratch.graphs[name].best_time,
        "best_heuristic": top.method,
        "best_heuristic_time": top.step_time,
        "zero_shot_gap": zero.step_time / go_one - 1,
        "finetune_gap": fine / go_one - 1,
        "pretrain_curve": {
            "step": [r["step"] for r in pre.history],
            "graph": [r["graph"] for r in pre.history],
            "reward_mean": [r["reward_mean"] for r in pre.history],
        },
        "finetune_curve": C.curve_of(ft.history),
        "go_one_curve": C.curve_of(one.history),
        "scratch_curve": C.curve_of(scratch.history),
    }


def plot(runs: Sequence[dict[str, Any]], path: Path) -> str:
    """Per held-out graph: fine-tuning vs from-scratch best-so-far speedup per step, with
    zero-shot, GO-one and the best heuristic as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for ax, r in zip(axes.flat, runs, strict=True):
        ref = r["reference_time"]
        for key, label in (("finetune_curve", "fine-tuned"), ("go_one_curve", "GO-one (scratch)")):
            c = r[key]
            ax.plot(c["step"], [ref / t for t in c["best_step_time"]], label=label)
        ax.axhline(ref / r["zero_shot_time"], color="g", ls="--", label="zero-shot")
        ax.axhline(ref / r["best_heuristic_time"], color="k", ls=":", label="best heuristic")
        ax.set_title(f"held out: {r['graph']}")
        ax.set_xlabel("training steps on the held-out graph")
        ax.set_ylabel("speedup over one device")
        ax.legend(fontsize=7)
    return C.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``generalization[.quick].json``."""
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", help="corpus names or HLO files (the pool)")
    p.add_argument("--held-out", nargs="+", help="graphs of the pool to hold out, one at a time")
    p.add_argument("--cluster", default=CLUSTER)
    p.add_argument("--pretrain-steps", type=int, help=f"default {PRETRAIN_STEPS}")
    p.add_argument("--finetune-steps", type=int, help=f"at most 50; default {FINETUNE_STEPS}")
    p.add_argument("--go-one-steps", type=int, help=f"default {GO_ONE_STEPS}")
    args = p.parse_args(argv)
    began = time.perf_counter()
    steps = dict(
        PRETRAIN_STEPS=PRETRAIN_STEPS, FINETUNE_STEPS=FINETUNE_STEPS, GO_ONE_STEPS=GO_ONE_STEPS
    )
    if args.quick:
        steps.update(QUICK)
    for key in steps:
        given = getattr(args, key.lower())
        if given is not None:
            steps[key] = given
    if args.graphs:
        graphs = C.load_graphs(args.graphs)
        families = {g: C.family(g) for g in graphs}
    elif args.quick:
        graphs = {k: v for k, v in C.quick_graphs().items() if k in QUICK_GRAPHS}
        families = {g: g for g in graphs}
    else:
        graphs = C.load_graphs(GRAPHS)
        families = {g: C.family(g) for g in graphs}
    held = args.held_out or list(QUICK_HELD_OUT if args.quick and not args.graphs else HELD_OUT)
    missing = [g for g in held if g not in graphs]
    if missing:
        p.error(f"--held-out {missing} not among the graphs {list(graphs)}")
    runs = []
    for name in held:
        C.log("generalization", f"holding out {name} ({families[name]})")
        run = held_out_run(
            name, graphs, families, args.cluster, steps=steps, quick=args.quick, seed=args.seed
        )
        C.log(
            "generalization",
            f"  zero-shot {run['zero_shot_time'] * 1e3:.4g} ms, fine-tuned {run['finetune_time'] * 1e3:.4g} ms, "
            f"GO-one {run['go_one_time'] * 1e3:.4g} ms, best heuristic {run['best_heuristic_time'] * 1e3:.4g} ms",
        )
        runs.append(run)
    rows = [
        {
            "held out": r["graph"],
            "family": r["family"],
            "nodes": r["nodes"],
            "best heuristic ms": r["best_heuristic_time"] * 1e3,
            "zero-shot ms": r["zero_shot_time"] * 1e3,
            "fine-tuned ms": r["finetune_time"] * 1e3,
            "scratch (same steps) ms": r["scratch_time"] * 1e3,
            "GO-one ms": r["go_one_time"] * 1e3,
            "zero-shot gap": r["zero_shot_gap"],
            "fine-tune gap": r["finetune_gap"],
            "zero-shot s": r["zero_shot_s"],
            "fine-tune s": r["finetune_s"],
            "GO-one s": r["go_one_s"],
        }
        for r in runs
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "title": f"Leave-one-family-out: zero-shot and fine-tuned vs GO-one ({args.cluster}, simulated)",
        "setup": {
            "graphs": list(graphs),
            "families": families,
            "held_out": held,
            "cluster": args.cluster,
            **{k.lower(): v for k, v in steps.items()},
            "pretrain_switch_every": 20,
            "pretrain_graphs_per_batch": 2,
            "tasks": "placement+scheduling+fusion",
            "seed": args.seed,
        },
        "zero_shot_gap": C.mean([r["zero_shot_gap"] for r in runs]),
        "finetune_gap": C.mean([r["finetune_gap"] for r in runs]),
        "zero_shot_vs_best_heuristic_mean_speedup": C.mean(
            [r["best_heuristic_time"] / r["zero_shot_time"] for r in runs]
        ),
        "finetune_vs_scratch_mean_speedup": C.mean(
            [r["scratch_time"] / r["finetune_time"] for r in runs]
        ),
        "finetune_steps": steps["FINETUNE_STEPS"],
        "rows": rows,
        "plots": [plot(runs, C.plot_path(args.out, "generalization", args.quick))],
        "runs": runs,
    }
    C.write_outputs(
        "generalization", result, out=args.out, quick=args.quick, argv=argv, began=began
    )
    return result


if __name__ == "__main__":
    main()
