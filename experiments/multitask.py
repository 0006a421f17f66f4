"""Placement, scheduling and fusion alone, one after another, and all three jointly.

On each graph, with the same total number of PPO steps per variant:

* ``placement`` / ``scheduling`` / ``fusion``: GO-one learns that task only; the other
  two keep :meth:`Decisions.default`'s (one device, FIFO, no fusion);
* ``sequential``: placement, then scheduling given the best placement, then fusion given
  both, a third of the steps each;
* ``joint``: all three tasks at once (the GO paper's multi-task policy).

References: ``default`` (one device, FIFO, no fusion), ``xla default`` (one device, FIFO,
XLA:CPU-like fusion: what the framework does on its own) and the best non-search
heuristic (:func:`hlo_go.rl.compare.heuristic_names`). The paper reports 33-60 %
speedup from joint placement + scheduling + fusion over the framework default.

Run: ``python experiments/multitask.py [--quick]``.
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

GRAPHS = ("rnnlm_l2_scan", "gpt2_l2")
QUICK_GRAPHS = ("attention",)
CLUSTER = "v100x4"
STEPS = 90
QUICK_STEPS = 3
SINGLE = ("placement", "scheduling", "fusion")
XLA_DEFAULT = "single-device+fifo+xla-cpu-like"


def run_graph(
    name: str, graph: Any, cluster_name: str, *, steps: int, quick: bool, seed: int
) -> dict[str, Any]:
    """Every variant on one graph: times (s), training seconds, references."""
    from hlo_go import baselines as B
    from hlo_go.rl import train_one
    from hlo_go.rl.compare import best, run_baselines
    from hlo_go.sim import get_cluster, simulate

    cluster = get_cluster(cluster_name)
    config = C.train_config(quick=quick, seed=seed)
    times: dict[str, float] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hlo-go-multitask-") as work:
        for task in SINGLE:
            res = train_one(
                (name, graph), cluster, [task], steps=steps, out_dir=Path(work) / task,
                config=config,
            )  # fmt: skip
            times[task] = res.graphs[name].best_time
            seconds[task] = res.elapsed
        fixed, stage_seconds, stage_times = None, 0.0, {}
        per_stage = max(1, steps // 3)
        for task in SINGLE:
            res = train_one(
                (name, graph), cluster, [task], steps=per_stage,
                out_dir=Path(work) / f"seq_{task}", config=config, fixed=fixed,
            )  # fmt: skip
            fixed = res.graphs[name].best
            stage_times[task] = res.graphs[name].best_time
            stage_seconds += res.elapsed
        times["sequential"] = stage_times["fusion"]
        seconds["sequential"] = stage_seconds
        res = train_one(
            (name, graph), cluster, steps=steps, out_dir=Path(work) / "joint", config=config
        )
        times["joint"] = res.graphs[name].best_time
        seconds["joint"] = res.elapsed
        reference = res.graphs[name].reference_time
    heuristics = run_baselines(graph, cluster)
    top = best(heuristics)
    xla_default = B.score(simulate(graph, cluster, B.get(XLA_DEFAULT)(graph, cluster)))
    return {
        "graph": name,
        "cluster": cluster_name,
        "nodes": graph.num_nodes,
        "steps": steps,
        "times": times,
        "seconds": seconds,
        "sequential_stage_times": stage_times,
        "default_time": reference,
        "xla_default_time": xla_default,
        "best_heuristic": top.method,
        "best_heuristic_time": top.step_time,
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Headline speedups (means over graphs) and rows."""
    rows = []
    for r in runs:
        t = r["times"]
        rows.append(
            {
                "graph": r["graph"],
                "nodes": r["nodes"],
                "default ms": r["default_time"] * 1e3,
                "xla default ms": r["xla_default_time"] * 1e3,
                **{f"{v} ms": t[v] * 1e3 for v in (*SINGLE, "sequential", "joint")},
                "best heuristic ms": r["best_heuristic_time"] * 1e3,
                "joint vs default": r["default_time"] / t["joint"],
                "joint vs xla default": r["xla_default_time"] / t["joint"],
                "joint vs sequential": t["sequential"] / t["joint"],
            }
        )
    return {
        "joint_vs_default_mean_speedup": C.mean(
            [r["default_time"] / r["times"]["joint"] for r in runs]
        ),
        "joint_vs_xla_default_mean_speedup": C.mean(
            [r["xla_default_time"] / r["times"]["joint"] for r in runs]
        ),
        "joint_vs_sequential_mean_speedup": C.mean(
            [r["times"]["sequential"] / r["times"]["joint"] for r in runs]
        ),
        "joint_vs_best_single_task_mean_speedup": C.mean(
            [min(r["times"][t] for t in SINGLE) / r["times"]["joint"] for r in runs]
        ),
        "joint_vs_best_heuristic_mean_speedup": C.mean(
            [r["best_heuristic_time"] / r["times"]["joint"] for r in runs]
        ),
        "rows": rows,
    }


def plot(runs: Sequence[dict[str, Any]], path: Path) -> str:
    """Bars: speedup over the XLA default per variant and graph."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    variants = (*SINGLE, "sequential", "joint")
    x = np.arange(len(runs))
    width = 0.8 / (len(variants) + 1)
    fig, ax = plt.subplots(figsize=(max(5, 2.2 * len(runs)), 3.8))
    for i, v in enumerate(variants):
        values = [r["xla_default_time"] / r["times"][v] for r in runs]
        ax.bar(x + (i - len(variants) / 2) * width, values, width, label=v)
    ax.bar(
        x + (len(variants) / 2) * width,
        [r["xla_default_time"] / r["best_heuristic_time"] for r in runs],
        width,
        label="best heuristic",
        color="grey",
    )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [r["graph"] for r in runs])
    ax.set_ylabel("speedup over XLA default (simulated)")
    ax.legend(fontsize=7, ncol=3)
    return C.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``multitask[.quick].json``."""
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", help="corpus names or HLO files")
    p.add_argument("--cluster", default=CLUSTER)
    p.add_argument("--steps", type=int, help=f"PPO steps per variant (default {STEPS})")
    args = p.parse_args(argv)
    began = time.perf_counter()
    steps = args.steps or (QUICK_STEPS if args.quick else STEPS)
    graphs = C.select_graphs(args.graphs, quick=args.quick, full=GRAPHS, quick_names=QUICK_GRAPHS)
    runs = []
    for name, graph in graphs.items():
        C.log("multitask", f"{name} ({graph.num_nodes} nodes) on {args.cluster}, {steps} steps")
        run = run_graph(name, graph, args.cluster, steps=steps, quick=args.quick, seed=args.seed)
        C.log(
            "multitask", "  " + ", ".join(f"{k} {v * 1e3:.4g} ms" for k, v in run["times"].items())
        )
        runs.append(run)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "title": f"Placement, scheduling, fusion: alone, sequential, joint ({args.cluster}, simulated)",
        "setup": {
            "graphs": list(graphs),
            "cluster": args.cluster,
            "steps_per_variant": steps,
            "xla_default": XLA_DEFAULT,
            "prior_bias": C.PRIOR_BIAS,
            "seed": args.seed,
        },
        **summarize(runs),
        "plots": [plot(runs, C.plot_path(args.out, "multitask", args.quick))],
        "runs": runs,
    }
    C.write_outputs("multitask", result, out=args.out, quick=args.quick, argv=argv, began=began)
    return result


if __name__ == "__main__":
    main()
