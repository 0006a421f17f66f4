"""Does the host-cpu simulator pick the fusion heuristic that XLA:CPU runs fastest?

For every graph of ``benchmarks/results/lowering.json`` whose fusion heuristics were all
measured there (``xla-cpu-like``, ``fuse-all-legal``, ``priority-fusion``, and
``no-fusion``; each lowered with XLA's order and timed against XLA's default compile: CPU
time, one pinned core, interleaved rounds, medians), each simulator predicts the four
step times of the same decisions (the graph traced as ``bench_lowering`` traces it), and:

* ``<sim>_picks_measured_best``: graphs where the heuristic it predicts fastest is the
  one measured fastest (the three fusing heuristics often lie within the measurement's
  noise of each other, so this count is noisy; the regret is the figure that matters);
* ``<sim>_regret_geomean``: the measured time of its pick over the measured fastest's
  (1: its choice never costs anything; the worst graph is ``<sim>_regret_max``);
* ``<sim>_kendall_tau_median``: Kendall's τ of its four predicted times against the four
  measured ones, the median over graphs.

Simulators: ``host-cpu-1`` (the calibrated roofline), ``host-cpu-1-learned`` (the learned
kernel cost model), and, as the ablation of the 2026-11-29 fix, ``host-cpu-1`` with large
dots and convolutions fusing (``Device.fuses_large_matrices`` true: what the simulator
priced before it applied the lowering's rule that keeps them out of fusions).

The measured times are ``lowering.json``'s (its timestamp is reported); re-run
``python -m benchmarks lowering`` to renew them. ``--quick``: the first 4 graphs.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from typing import Any

import numpy as np

from benchmarks import RESULTS_DIR

HEURISTICS = ("xla-cpu-like", "fuse-all-legal", "priority-fusion")
VARIANTS = (*HEURISTICS, "no-fusion")
BEFORE_FIX = "host-cpu-1-fusing-large-matrices"
"""The ablation: the roofline as it priced large matrices before 2026-11-29."""
QUICK_GRAPHS = 4


def measured(lowering: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Graph -> variant -> measured relative time (over XLA's default compile), for the
    graphs whose every :data:`VARIANTS` entry was measured correct."""
    out: dict[str, dict[str, float]] = {}
    for row in lowering.get("rows", []):
        if row.get("variant") in VARIANTS and row.get("correct"):
            out.setdefault(row["graph"], {})[row["variant"]] = float(row["relative"])
    return {g: v for g, v in out.items() if set(v) == set(VARIANTS)}


def simulators() -> dict[str, Any]:
    """Name -> cluster of every simulator compared."""
    from hlo_go.sim import get_cluster

    roofline = get_cluster("host-cpu-1")
    before = dataclasses.replace(
        roofline,
        name=BEFORE_FIX,
        devices=tuple(d.replace(fuses_large_matrices=True) for d in roofline.devices),
    )
    return {
        "host-cpu-1": roofline,
        "host-cpu-1-learned": get_cluster("host-cpu-1-learned"),
        BEFORE_FIX: before,
    }


def choice(predicted: dict[str, float], times: dict[str, float]) -> dict[str, Any]:
    """One simulator on one graph: its pick among :data:`HEURISTICS`, whether that is the
    measured fastest, the pick's measured regret, and τ over :data:`VARIANTS`."""
    from hlo_go.calibration.validation import rank_correlation

    pick = min(HEURISTICS, key=lambda h: predicted[h])
    best = min(HEURISTICS, key=lambda h: times[h])
    return {
        "pick": pick,
        "measured_best": best,
        "picks_measured_best": pick == best,
        "regret": times[pick] / times[best],
        "tau": rank_correlation([times[v] for v in VARIANTS], [predicted[v] for v in VARIANTS]),
    }


def summarize(per_graph: dict[str, dict[str, dict[str, Any]]], names: list[str]) -> dict[str, Any]:
    """Per simulator: picks of the measured best, regret geomean and max, τ median."""
    out: dict[str, Any] = {}
    for name in names:
        rows = [g[name] for g in per_graph.values()]
        out[f"{name}_picks_measured_best"] = sum(r["picks_measured_best"] for r in rows)
        out[f"{name}_regret_geomean"] = statistics.geometric_mean(r["regret"] for r in rows)
        out[f"{name}_regret_max"] = max(r["regret"] for r in rows)
        taus = [r["tau"] for r in rows if np.isfinite(r["tau"])]
        out[f"{name}_kendall_tau_median"] = statistics.median(taus) if taus else None
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring)."""
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.sim import simulate
    from hlo_go.xla import program

    lowering = json.loads((RESULTS_DIR / "lowering.json").read_text())
    times = measured(lowering)
    nodes = {}
    graphs = list(times)
    sims = simulators()
    per_graph: dict[str, dict[str, dict[str, Any]]] = {}
    began = time.perf_counter()
    for name in graphs[:QUICK_GRAPHS] if quick else graphs:
        step, abstract = get_workload(name).make()
        graph = program(step, abstract).graph
        nodes[name] = graph.num_nodes
        decided = {v: methods.decide(graph, v) for v in VARIANTS}
        per_graph[name] = {
            sim: choice(
                {v: simulate(graph, cluster, d).step_time for v, d in decided.items()},
                times[name],
            )
            for sim, cluster in sims.items()
        }
    rows = [
        {
            "graph": g,
            "nodes": nodes[g],
            "measured_best": r["host-cpu-1"]["measured_best"],
            **{f"{sim} pick": r[sim]["pick"] for sim in sims},
            **{f"{sim} regret": round(r[sim]["regret"], 4) for sim in sims},
        }
        for g, r in per_graph.items()
    ]
    return {
        "title": "the fusion heuristic each host-cpu simulator picks vs the one XLA:CPU "
        "runs fastest (lowering.json's measurements)",
        "rows": rows,
        "graphs": len(per_graph),
        **summarize(per_graph, list(sims)),
        "measured_in": "benchmarks/results/lowering.json",
        "measured_timestamp": lowering.get("timestamp"),
        "clock": lowering.get("clock"),
        "per_graph": per_graph,
        "simulate_s": round(time.perf_counter() - began, 1),
    }
