"""Baselines: every method of ``hlo_go.baselines`` on the corpus, on two clusters.

The table the learned optimizer must beat: simulated step time (``hlo_go.sim``) of each
method's decisions on every corpus graph (pre-fusion stage) on ``v100x4`` (4 × V100 on
PCIe, the paper's kind of box) and ``h100x8`` (8 × H100 on NVSwitch). Methods:
:data:`hlo_go.baselines.report.STANDARD_METHODS` (the default, each fusion method,
critical-path scheduling, each placement with critical path and XLA:CPU-like fusion,
and random search, simulated annealing and BRKGA). Searches get a fixed budget: 2,000
simulator evaluations or 10 minutes per graph and method, whichever comes first
(``--quick``: 3 small graphs, 60 evaluations or 30 s).

``HLO_GO_BASELINES_BUDGET`` and ``HLO_GO_BASELINES_TIME_LIMIT`` (seconds) override the
search budget and time limit; the results file records the values used.

Graph × cluster tasks run in parallel worker processes (``HLO_GO_BENCH_WORKERS``,
default 2), largest graphs first; each finished task is appended to
``benchmarks/.cache/baselines[.quick].partial.jsonl`` and a rerun with
``HLO_GO_BENCH_RESUME=1`` skips the tasks found there.

Writes (through the harness) ``results/baselines.json``: ``rows`` (one per graph and
cluster: step time in ms per method, the best method), ``results`` (one per graph,
cluster and method: step time, OOM, wall seconds, kernels, bytes moved, evaluations and,
for searches, the convergence curve at up to 100 log-spaced evaluation counts),
``speedup`` (per cluster, geometric-mean speedup of each method over the default), and
``wins`` (per cluster, how many graphs each method is best on); and a bar chart of the
speedups, ``results/baselines.png``.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np
from rich.console import Console

from benchmarks import CACHE_DIR, RESULTS_DIR

CLUSTERS = ("v100x4", "h100x8")
QUICK_GRAPHS = ("rnnlm_l2_scan", "gpt2_l2", "transformer_xl_l2")
BUDGET, TIME_LIMIT = 2000, 600.0
QUICK_BUDGET, QUICK_TIME_LIMIT = 60, 30.0
CURVE_POINTS = 100

_console = Console(stderr=True, width=260)


def _thin_curve(curve: dict[str, list[float]] | None) -> dict[str, list[float]] | None:
    """The curve at up to CURVE_POINTS log-spaced evaluation counts (the last included)."""
    if not curve:
        return curve
    k = len(curve["evaluations"])
    keep = np.unique(np.geomspace(1, k, num=min(k, CURVE_POINTS)).astype(np.int64) - 1)
    keep = np.union1d(keep, [k - 1])
    return {name: [values[i] for i in keep.tolist()] for name, values in curve.items()}


def _task(graph_name: str, cluster_name: str, budget: int, time_limit: float) -> dict[str, Any]:
    """Runs every standard method on one graph and cluster (in a worker process)."""
    from hlo_go import corpus
    from hlo_go.baselines.report import STANDARD_METHODS, run_methods
    from hlo_go.graph import build_graph
    from hlo_go.sim import get_cluster

    started = time.perf_counter()
    graph = build_graph(corpus.load(graph_name, "prefusion"))
    cluster = get_cluster(cluster_name)
    rows = run_methods(
        graph,
        cluster,
        STANDARD_METHODS,
        graph_name=graph_name,
        budget=budget,
        time_limit=time_limit,
    )
    return {
        "graph": graph_name,
        "cluster": cluster_name,
        "nodes": graph.num_nodes,
        "seconds": time.perf_counter() - started,
        "rows": [r._replace(curve=_thin_curve(r.curve)).to_dict() for r in rows],
    }


def _node_count(name: str) -> int:
    from hlo_go import corpus

    return int(corpus.info(name)["stages"]["prefusion"]["nodes"])


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (module docstring); returns the harness's result dict."""
    from hlo_go import corpus
    from hlo_go.baselines.report import (
        STANDARD_METHODS,
        BaselineRow,
        best_by_graph,
        plot_bars,
        rich_table,
        speedups,
    )

    graphs = list(QUICK_GRAPHS) if quick else corpus.names()
    budget, time_limit = (QUICK_BUDGET, QUICK_TIME_LIMIT) if quick else (BUDGET, TIME_LIMIT)
    budget = int(os.environ.get("HLO_GO_BASELINES_BUDGET", budget))
    time_limit = float(os.environ.get("HLO_GO_BASELINES_TIME_LIMIT", time_limit))
    tasks = sorted(
        ((g, c) for g in graphs for c in CLUSTERS), key=lambda t: (-_node_count(t[0]), t[1])
    )
    partial = CACHE_DIR / f"baselines{'.quick' if quick else ''}.partial.jsonl"
    partial.parent.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if os.environ.get("HLO_GO_BENCH_RESUME") and partial.exists():
        for line in partial.read_text().splitlines():
            record = json.loads(line)
            if record.get("budget") == budget:
                done[(record["graph"], record["cluster"])] = record
        _console.log(f"resuming: {len(done)} of {len(tasks)} tasks already in {partial}")
    elif partial.exists():
        partial.unlink()
    todo = [t for t in tasks if t not in done]
    workers = max(1, int(os.environ.get("HLO_GO_BENCH_WORKERS", "2")))
    _console.log(
        f"{len(todo)} tasks ({len(graphs)} graphs x {len(CLUSTERS)} clusters) x "
        f"{len(STANDARD_METHODS)} methods; searches: {budget} evaluations or "
        f"{time_limit:.0f} s; {workers} workers"
    )
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_task, g, c, budget, time_limit): (g, c) for g, c in todo}
        for k, future in enumerate(as_completed(futures), 1):
            record = {**future.result(), "budget": budget}
            done[futures[future]] = record
            with partial.open("a") as f:
                f.write(json.dumps(record) + "\n")
            best = min(record["rows"], key=lambda r: (r["oom"], r["step_time"]))
            _console.log(
                f"[{k}/{len(todo)}] {record['graph']} ({record['nodes']:,} nodes) on "
                f"{record['cluster']}: {record['seconds']:.0f} s; best {best['method']} "
                f"{best['step_time'] * 1e3:.4g} ms; elapsed {time.perf_counter() - started:.0f} s"
            )

    results = [row for t in tasks for row in done[t]["rows"]]
    rows_obj = [BaselineRow(**r) for r in results]
    best = best_by_graph(rows_obj)
    rows = []
    for g, c in tasks:
        record = done[(g, c)]
        row: dict[str, Any] = {"graph": g, "cluster": c, "nodes": record["nodes"]}
        for r in record["rows"]:
            row[r["method"]] = round(r["step_time"] * 1e3, 6)
        row["best"] = best[(g, c)]
        rows.append(row)
    rows.sort(key=lambda r: (r["cluster"], graphs.index(r["graph"])))
    speedup: dict[str, dict[str, float]] = {}
    wins: dict[str, dict[str, int]] = {}
    for c in CLUSTERS:
        mine = [r for r in rows_obj if r.cluster == c]
        speedup[c] = {m: round(v, 4) for m, v in speedups(mine).items()}
        counts = {m: 0 for m in STANDARD_METHODS}
        for (_, cluster), method in best.items():
            if cluster == c:
                counts[method] += 1
        wins[c] = counts
        _console.print(rich_table(mine, title=f"simulated step time (ms) on {c}; * = best"))
        _console.print(
            "geomean speedup over single-device: "
            + ", ".join(f"{m} {v:.2f}x" for m, v in speedup[c].items())
        )
    chart = plot_bars(
        rows_obj,
        RESULTS_DIR / f"baselines{'.quick' if quick else ''}.png",
        title="hlo-go baselines: geomean speedup over one device, no fusion, FIFO",
    )
    largest = max(graphs, key=_node_count)
    heuristic_s = {
        f"{r.cluster}:{r.method}": round(r.seconds, 3)
        for r in rows_obj
        if r.graph == largest and r.evaluations == 0
    }
    headline: dict[str, Any] = {
        "title": "simulated step time (ms) per graph and method; best per graph in 'best'",
        "graphs": len(graphs),
        "clusters": ", ".join(CLUSTERS),
        "search_budget_evaluations": budget,
        "search_time_limit_s": time_limit,
        "largest_graph": largest,
        "largest_graph_nodes": _node_count(largest),
        "largest_graph_slowest_heuristic_s": max(heuristic_s.values()),
        "chart": str(chart.relative_to(RESULTS_DIR.parent)),
    }
    for c in CLUSTERS:
        top = max(wins[c], key=wins[c].get)
        headline[f"{c}_most_wins"] = f"{top} ({wins[c][top]} of {len(graphs)})"
        if "simulated-annealing" in speedup[c]:
            headline[f"{c}_sa_geomean_speedup"] = speedup[c]["simulated-annealing"]
    return {
        **headline,
        "rows": rows,
        "speedup": speedup,
        "wins": wins,
        "largest_graph_heuristic_seconds": heuristic_s,
        "results": results,
    }
