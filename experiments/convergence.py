"""Convergence: placement quality against wall-clock for GO-one, the HDP-style
hierarchical placer and simulated annealing.

Placement only (FIFO, no fusion, as in ``placement.py``). GO-one trains for ``STEPS``
PPO steps; HDP (:func:`hlo_go.baselines.run_hdp`) and simulated annealing over
placement (:func:`hlo_go.baselines.run_search`) then get the same wall-clock time
(GO-one's, JIT compilation included) as their limit. Every method's best-so-far
simulated step time is recorded against seconds.

Per graph, ``go_vs_hdp_convergence_speedup`` = (HDP's seconds to first reach its own
final step time) / (GO-one's seconds to reach that same step time): how much faster GO
gets to HDP's answer (the paper's 15×). When GO-one never reaches it, the graph counts in
``go_vs_hdp_unreached`` and its ratio is an upper bound (HDP's seconds / GO-one's whole
training time). When HDP never improves on its first evaluation (one device) within the
time, it has no convergence time: the ratio is None and the graph counts in
``hdp_never_improved``. The same against simulated annealing.

Run: ``python experiments/convergence.py [--quick]``.
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

GRAPHS = ("rnnlm_l2_scan", "gnmt_l2_scan", "gpt2_l2")
QUICK_GRAPHS = ("cnn",)
CLUSTER = "v100x4"
STEPS = 200
QUICK_STEPS = 3
TASKS = ("placement",)
UNLIMITED_EVALUATIONS = 10**7


def _ratio(
    reference: dict[str, list[float]], go: dict[str, list[float]]
) -> tuple[float | None, bool, float]:
    """``(speedup, reached, target)``: reference's seconds to its final value over GO's
    seconds to that value (an upper bound when GO never reaches it; None when the
    reference never improved on its first evaluation, so it has no convergence time)."""
    values = reference["best_step_time"]
    target = values[-1]
    if not values or target >= values[0]:
        return None, False, target
    t_ref = C.time_to_reach(reference["seconds"], values, target) or 0.0
    t_go = C.time_to_reach(go["seconds"], go["best_step_time"], target)
    reached = t_go is not None
    return t_ref / max(t_go if reached else go["seconds"][-1], 1e-9), reached, target


def run_graph(
    name: str, graph: Any, cluster_name: str, *, steps: int, quick: bool, seed: int
) -> dict[str, Any]:
    """GO-one, then HDP and SA with GO-one's wall-clock; their best-so-far curves."""
    from hlo_go import baselines as B
    from hlo_go.decisions import Decisions
    from hlo_go.rl import train_one
    from hlo_go.sim import get_cluster

    cluster = get_cluster(cluster_name)
    config = C.train_config(quick=quick, seed=seed)
    fixed = Decisions.default(graph)
    with tempfile.TemporaryDirectory(prefix="hlo-go-convergence-") as work:
        trained = train_one((name, graph), cluster, TASKS, steps=steps, out_dir=work, config=config)
    go_rows = trained.history
    go = {
        "seconds": [float(r["wall_s"]) for r in go_rows],
        "best_step_time": [float(r["best_step_time"]) for r in go_rows],
        "evaluations": [(i + 1) * config.samples for i in range(len(go_rows))],
    }
    limit = trained.elapsed
    curves = {"GO-one": go}
    for label, run in (
        ("HDP", lambda: B.run_hdp(
            graph, cluster, budget=UNLIMITED_EVALUATIONS, time_limit=limit, seed=seed, fixed=fixed
        )),
        ("SA", lambda: B.run_search(
            graph, cluster, "simulated-annealing", budget=UNLIMITED_EVALUATIONS, time_limit=limit,
            seed=seed, tasks=TASKS, fixed=fixed, start=["single-device"],
        )),
    ):  # fmt: skip
        found = run()
        curves[label] = C.thin(
            {
                "seconds": found.curve.seconds.tolist(),
                "best_step_time": found.curve.best_step_time.tolist(),
                "evaluations": found.curve.evaluations.tolist(),
            }
        )
    hdp_ratio, hdp_reached, hdp_target = _ratio(curves["HDP"], go)
    sa_ratio, sa_reached, sa_target = _ratio(curves["SA"], go)
    return {
        "graph": name,
        "nodes": graph.num_nodes,
        "cluster": cluster_name,
        "wall_clock_s": limit,
        "final": {k: c["best_step_time"][-1] for k, c in curves.items()},
        "evaluations": {k: c["evaluations"][-1] for k, c in curves.items()},
        "go_vs_hdp": hdp_ratio,
        "go_reached_hdp": hdp_reached,
        "hdp_final": hdp_target,
        "go_vs_sa": sa_ratio,
        "go_reached_sa": sa_reached,
        "sa_final": sa_target,
        "curves": curves,
    }


def plot(runs: Sequence[dict[str, Any]], path: Path) -> str:
    """Best-so-far step time against wall-clock (log), one panel per graph."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for ax, r in zip(axes.flat, runs, strict=True):
        for label, c in r["curves"].items():
            ax.step(c["seconds"], [t * 1e3 for t in c["best_step_time"]], where="post", label=label)
        ax.set_xscale("log")
        ax.set_title(f"{r['graph']} ({r['nodes']} nodes, {r['cluster']})")
        ax.set_xlabel("wall-clock s (log)")
        ax.set_ylabel("best step time so far (ms)")
        ax.legend(fontsize=7)
    return C.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``convergence[.quick].json``."""
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", help="corpus names or HLO files")
    p.add_argument("--cluster", default=CLUSTER)
    p.add_argument("--steps", type=int, help=f"GO-one steps (default {STEPS})")
    args = p.parse_args(argv)
    began = time.perf_counter()
    steps = args.steps or (QUICK_STEPS if args.quick else STEPS)
    graphs = C.select_graphs(args.graphs, quick=args.quick, full=GRAPHS, quick_names=QUICK_GRAPHS)
    runs = []
    for name, graph in graphs.items():
        C.log("convergence", f"{name} ({graph.num_nodes} nodes) on {args.cluster}")
        run = run_graph(name, graph, args.cluster, steps=steps, quick=args.quick, seed=args.seed)
        C.log(
            "convergence",
            "  final "
            + ", ".join(f"{k} {v * 1e3:.4g} ms" for k, v in run["final"].items())
            + f"; GO vs HDP {run['go_vs_hdp']}x, vs SA {run['go_vs_sa']}x",
        )
        runs.append(run)
    rows = [
        {
            "graph": r["graph"],
            "nodes": r["nodes"],
            "wall-clock s": r["wall_clock_s"],
            **{f"{k} final ms": v * 1e3 for k, v in r["final"].items()},
            **{f"{k} evaluations": v for k, v in r["evaluations"].items()},
            "GO vs HDP (time to HDP's final)": r["go_vs_hdp"],
            "reached HDP": r["go_reached_hdp"],
            "GO vs SA (time to SA's final)": r["go_vs_sa"],
            "reached SA": r["go_reached_sa"],
        }
        for r in runs
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    reached_hdp = [r["go_vs_hdp"] for r in runs if r["go_reached_hdp"]]
    improved = [r for r in runs if r["go_vs_hdp"] is not None]
    result = {
        "title": f"Convergence: placement quality vs wall-clock ({args.cluster}, simulated)",
        "setup": {
            "graphs": list(graphs),
            "cluster": args.cluster,
            "go_one_steps": steps,
            "tasks": list(TASKS),
            "equal_wall_clock": "HDP and SA are given GO-one's training time (JIT included)",
            "seed": args.seed,
        },
        "go_vs_hdp_convergence_speedup_median": C.median(reached_hdp),
        "go_vs_hdp_unreached": sum(not r["go_reached_hdp"] for r in improved),
        "hdp_never_improved": sum(r["go_vs_hdp"] is None for r in runs),
        "go_vs_sa_convergence_speedup_median": C.median(
            [r["go_vs_sa"] for r in runs if r["go_reached_sa"]]
        ),
        "go_vs_sa_unreached": sum(
            not r["go_reached_sa"] for r in runs if r["go_vs_sa"] is not None
        ),
        "go_final_vs_hdp_final_mean_speedup": C.mean(
            [r["final"]["HDP"] / r["final"]["GO-one"] for r in runs]
        ),
        "go_final_vs_sa_final_mean_speedup": C.mean(
            [r["final"]["SA"] / r["final"]["GO-one"] for r in runs]
        ),
        "rows": rows,
        "plots": [plot(runs, C.plot_path(args.out, "convergence", args.quick))],
        "runs": runs,
    }
    C.write_outputs("convergence", result, out=args.out, quick=args.quick, argv=argv, began=began)
    return result


if __name__ == "__main__":
    main()
