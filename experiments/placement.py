"""Device placement: GO-one against one device, expert, METIS, HEFT / m-ETF / m-SCT, the
searches and the HDP-style hierarchical placer, on 4- and 8-device presets (simulated).

Placement alone, as in the GO paper's placement table: every method decides only where
each node runs; the schedule is FIFO and nothing is fused (:meth:`Decisions.default`'s),
so the methods differ only in placement. Times are simulated step times
(:func:`hlo_go.baselines.score`: out-of-memory candidates are penalized).

* heuristics: ``single-device``, ``round-robin``, ``expert`` (layers from op metadata,
  contiguous, balanced), ``metis``, ``heft``, ``m-etf``, ``m-sct``;
* searches over placement only (:func:`hlo_go.baselines.run_search` with
  ``tasks=("placement",)``): random search, simulated annealing and BRKGA, each with
  as many simulator evaluations as GO-one's training takes (steps × samples); SA and
  BRKGA start from the placement heuristics;
* ``hdp``: the hierarchical grouper + placer trained with policy gradient
  (:func:`hlo_go.baselines.run_hdp`), the same evaluations;
* ``GO-one``: a fresh GO policy trained with PPO on the graph, placement task only
  (:func:`hlo_go.rl.train_one`); its result is the best placement seen in training.

Headline: ``go_one_vs_expert_mean_speedup`` and ``go_one_vs_hdp_mean_speedup`` (mean
over graph × cluster of the baseline's time / GO-one's), as the paper reports its 21 %
and 18 %.

Run: ``python experiments/placement.py [--quick]``.
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
QUICK_GRAPHS = ("mlp", "cnn")
CLUSTERS = ("v100x4", "v100x8")
GO_STEPS = 200
QUICK_GO_STEPS = 3
HEURISTICS = ("single-device", "round-robin", "expert", "metis", "heft", "m-etf", "m-sct")
SEARCHES = ("random-search", "simulated-annealing", "evolutionary")
SEARCH_STARTS = ("single-device", "expert", "metis", "heft")
TASKS = ("placement",)


def place_graph(
    name: str, graph: Any, cluster_name: str, *, steps: int, quick: bool, seed: int
) -> dict[str, Any]:
    """Every method's placement of one graph on one cluster, simulated.

    Returns:
      ``{"graph", "cluster", "nodes", "times": {method: s}, "oom": {...}, "seconds": {...},
      "go_one_curve": ...}``.
    """
    from hlo_go import baselines as B
    from hlo_go.decisions import Decisions
    from hlo_go.rl import train_one
    from hlo_go.sim import get_cluster, simulate

    cluster = get_cluster(cluster_name)
    config = C.train_config(quick=quick, seed=seed)
    budget = steps * config.samples
    fixed = Decisions.default(graph)
    times: dict[str, float] = {}
    oom: dict[str, bool] = {}
    seconds: dict[str, float] = {}

    def record(method: str, decisions: Decisions, began: float) -> None:
        result = simulate(graph, cluster, decisions)
        times[method] = B.score(result)
        oom[method] = bool(result.oom)
        seconds[method] = time.perf_counter() - began

    for method in HEURISTICS:
        began = time.perf_counter()
        record(method, B.get(method)(graph, cluster, seed=seed), began)
    for method in SEARCHES:
        began = time.perf_counter()
        found = B.run_search(
            graph, cluster, method, budget=budget, seed=seed, tasks=TASKS, fixed=fixed,
            start=list(SEARCH_STARTS),
        )  # fmt: skip
        record(method, found.best, began)
    began = time.perf_counter()
    hdp = B.run_hdp(graph, cluster, budget=budget, seed=seed, fixed=fixed)
    record("hdp", hdp.best, began)
    with tempfile.TemporaryDirectory(prefix="hlo-go-placement-") as work:
        began = time.perf_counter()
        trained = train_one((name, graph), cluster, TASKS, steps=steps, out_dir=work, config=config)
        record("GO-one", trained.graphs[name].best, began)
    return {
        "graph": name,
        "cluster": cluster_name,
        "nodes": graph.num_nodes,
        "evaluations": budget,
        "times": times,
        "oom": oom,
        "seconds": seconds,
        "go_one_curve": C.curve_of(trained.history),
        "hdp_curve": C.thin(
            {
                "seconds": hdp.curve.seconds.tolist(),
                "best_step_time": hdp.curve.best_step_time.tolist(),
            }
        ),
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Headline speedups and table rows from the per-(graph, cluster) runs."""

    def ratios(method: str) -> list[float]:
        return [r["times"][method] / r["times"]["GO-one"] for r in runs]

    best_heuristic = [min(r["times"][m] for m in HEURISTICS) / r["times"]["GO-one"] for r in runs]
    rows = []
    for r in runs:
        t = r["times"]
        top = min(HEURISTICS, key=lambda m: t[m])
        rows.append(
            {
                "graph": r["graph"],
                "cluster": r["cluster"],
                "nodes": r["nodes"],
                **{f"{m} ms": t[m] * 1e3 for m in (*HEURISTICS, *SEARCHES, "hdp", "GO-one")},
                "best heuristic": top,
                "GO-one vs expert": t["expert"] / t["GO-one"],
                "GO-one vs HDP": t["hdp"] / t["GO-one"],
                "GO-one s": r["seconds"]["GO-one"],
                "HDP s": r["seconds"]["hdp"],
            }
        )
    return {
        "go_one_vs_expert_mean_speedup": C.mean(ratios("expert")),
        "go_one_vs_hdp_mean_speedup": C.mean(ratios("hdp")),
        "go_one_vs_metis_mean_speedup": C.mean(ratios("metis")),
        "go_one_vs_single_device_mean_speedup": C.mean(ratios("single-device")),
        "go_one_vs_best_heuristic_mean_speedup": C.mean(best_heuristic),
        "go_one_vs_simulated_annealing_mean_speedup": C.mean(ratios("simulated-annealing")),
        "hdp_vs_expert_mean_speedup": C.mean(
            [r["times"]["expert"] / r["times"]["hdp"] for r in runs]
        ),
        "go_one_beats_expert_fraction": C.mean(
            [float(r["times"]["GO-one"] < r["times"]["expert"]) for r in runs]
        ),
        "go_one_beats_hdp_fraction": C.mean(
            [float(r["times"]["GO-one"] < r["times"]["hdp"]) for r in runs]
        ),
        "rows": rows,
    }


def plot(runs: Sequence[dict[str, Any]], path: Path) -> str:
    """Grouped bars: speedup over one device per (graph, cluster) and method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    methods = ("expert", "metis", "heft", "simulated-annealing", "hdp", "GO-one")
    labels = [f"{r['graph']}\n{r['cluster']}" for r in runs]
    x = np.arange(len(runs))
    width = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs)), 4))
    for i, method in enumerate(methods):
        values = [r["times"]["single-device"] / r["times"][method] for r in runs]
        ax.bar(x + (i - len(methods) / 2 + 0.5) * width, values, width, label=method)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("speedup over one device (simulated)")
    ax.set_title("Placement only (FIFO, no fusion)")
    ax.legend(fontsize=7, ncol=3)
    return C.save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``placement[.quick].json``."""
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", help="corpus names or HLO files (default: four families)")
    p.add_argument("--clusters", nargs="+", default=list(CLUSTERS))
    p.add_argument(
        "--steps", type=int, help=f"GO-one steps (default {GO_STEPS}; quick {QUICK_GO_STEPS})"
    )
    args = p.parse_args(argv)
    began = time.perf_counter()
    steps = args.steps or (QUICK_GO_STEPS if args.quick else GO_STEPS)
    graphs = C.select_graphs(args.graphs, quick=args.quick, full=GRAPHS, quick_names=QUICK_GRAPHS)
    runs = []
    for name, graph in graphs.items():
        for cluster in args.clusters:
            C.log("placement", f"{name} ({graph.num_nodes} nodes) on {cluster}")
            run = place_graph(name, graph, cluster, steps=steps, quick=args.quick, seed=args.seed)
            t = run["times"]
            C.log(
                "placement",
                f"  expert {t['expert'] * 1e3:.4g} ms, hdp {t['hdp'] * 1e3:.4g} ms, "
                f"GO-one {t['GO-one'] * 1e3:.4g} ms ({run['seconds']['GO-one']:.0f} s)",
            )
            runs.append(run)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "title": "Placement only: GO-one vs heuristics, searches and HDP (simulated)",
        "setup": {
            "graphs": list(graphs),
            "clusters": list(args.clusters),
            "go_one_steps": steps,
            "evaluations_per_search": runs[0]["evaluations"] if runs else None,
            "tasks": list(TASKS),
            "prior_bias": C.PRIOR_BIAS,
            "seed": args.seed,
        },
        **summarize(runs),
        "plots": [plot(runs, C.plot_path(args.out, "placement", args.quick))],
        "runs": runs,
    }
    C.write_outputs("placement", result, out=args.out, quick=args.quick, argv=argv, began=began)
    return result


if __name__ == "__main__":
    main()
