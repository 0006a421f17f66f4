"""Fusion and schedule decisions lowered into XLA's compile: measured step time vs XLA.

For each corpus training step that fits this host's memory (:func:`graph_names`: six
families first, then by size; ``HLO_GO_LOWERING_GRAPHS`` picks some; ``--quick``: one
graph), in a child process pinned to a core of its own
(:func:`hlo_go.xla.timing.in_pinned_process`) and timed by CPU time, so other processes
sharing the host do not stretch the figures:

* ``XLA default``: ``jax.jit``'s compile, the reference;
* ``no-fusion``, ``xla-cpu-like``, ``fuse-all-legal``, ``priority-fusion``: the fusion
  baselines of :mod:`hlo_go.baselines` on ``host-cpu-1``, lowered with XLA's own order;
* ``searched``: simulated annealing over the simulator on ``host-cpu-1``
  (:data:`SEARCH_BUDGET` evaluations), then lowered: its fusion, and XLA's order with
  memory-freeing instructions run first (on one device the order changes no simulated
  time, :func:`hlo_go.methods.searched_tasks`; :func:`hlo_go.xla.schedule.memory_schedule`).

Every variant is run once and checked against the reference's outputs (dtype
tolerances of :func:`hlo_go.xla.outputs_match`) before it is timed; correct variants are
then timed interleaved with the reference (:func:`hlo_go.xla.measure_many`). A variant
more than 3x slower than the reference on its checking run is timed separately for two
rounds; one more than 8x slower is not run again (its checking run is its one sample,
against the reference's). Times are relative to the reference's median in the same
interleaving.

Inputs are random (integers in [1, 4), or [0, rows) where they index a table of fewer
rows, :func:`hlo_go.xla.index_bounds.index_bounds`; floats |N(0, 0.1²)|). Results per graph are
cached in ``results/lowering.partial.json`` with a digest of their inputs
(``inputs_sha256``) and :data:`RESULTS_VERSION` so an interrupted run resumes, and a
graph whose inputs today differ from its cached result's, or measured by an older
version, is measured again; graphs not started within :data:`TIME_BUDGET_S` (env
``HLO_GO_LOWERING_BUDGET_S``) are skipped and listed.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import (
    RESULTS_DIR,
    corpus_graph_order,
    corpus_graphs_too_large,
    inputs_digest,
    versus_best,
)
from benchmarks._pinned import measure_pinned

if TYPE_CHECKING:
    from hlo_go.xla.timing import Allocator

# Six families (rnnlm, gnmt, gpt2, transformer_xl, bert, resnet) first, as in the
# benchmark's first tables; then every other corpus graph that fits, by node count: the
# larger ones (unrolled RNNs, Inception, AmoebaNet, WaveNet: 5k-58k entry instructions)
# take minutes to tens of minutes per lowering to compile on this host (XLA:CPU
# compiles each unfused kernel separately).
FIRST = (
    "rnnlm_l2_scan",
    "gpt2_l2",
    "transformer_xl_l2",
    "bert_l2",
    "resnet_26",
    "rnnlm_l4_scan",
    "gnmt_l2_scan",
    "gnmt_l4_scan",
)
# A graph whose simulated one-device peak memory is above this fraction of the host's
# memory is not lowered (two graphs run at once, each compiled six ways).
MEMORY_FRACTION = 0.25
QUICK_GRAPHS = ("rnnlm_l2_scan",)
FUSION_METHODS = ("no-fusion", "xla-cpu-like", "fuse-all-legal", "priority-fusion")
SEARCH_BUDGET = 2000
REPEATS = 5
QUICK_REPEATS = 2
PARTIAL = RESULTS_DIR / "lowering.partial.json"
# Bump when a change makes cached per-graph results incomparable. 2: searched leaves the
# order to XLA on one device; 3: regeneration repeats across groups (and clones broadcasts
# left alone), :func:`hlo_go.xla.fusion.regenerate_shared`; 4: timing rounds rotate the
# order of the variants (:func:`hlo_go.xla.timing.time_interleaved`); 5: searched orders the entry
# for memory on one device (:func:`hlo_go.xla.schedule.memory_schedule`), and fusions read values
# written out anyway rather than recompute them (:func:`hlo_go.xla.fusion.regenerate_shared`); 6:
# large dots and convolutions stay out of our fusions (:func:`hlo_go.decisions.large_matrix_nodes`);
# 7: the simulator the search runs on keeps them out too (Device.fuses_large_matrices).
RESULTS_VERSION = 7
# Graphs not started within this many seconds of the run are skipped (and listed).
TIME_BUDGET_S = float(os.environ.get("HLO_GO_LOWERING_BUDGET_S", 4 * 3600))


def graph_names(excluded: dict[str, str], only: str = "") -> tuple[str, ...]:
    """The graphs to lower, in run order: :data:`FIRST`, then the other corpus graphs
    not ``excluded`` by node count; ``only`` (comma-separated names, env
    ``HLO_GO_LOWERING_GRAPHS``) picks some, in its order."""
    return tuple(corpus_graph_order(FIRST, excluded, only, "HLO_GO_LOWERING_GRAPHS"))


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure_graph(name: str, *, repeats: int, budget: int) -> dict[str, Any]:
    """Lowers and times every variant of one corpus graph (run it in a pinned process).

    Args:
      name: the corpus graph.
      repeats: interleaved timing rounds.
      budget: simulator evaluations of the search.

    Returns:
      ``{"graph", "nodes", "rows": [...]}``, one row per variant.
    """
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.xla import program

    start = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    digest = inputs_digest(prog.args)
    nodes = prog.graph.num_nodes
    variants = methods.variants(prog.graph, {m: (m, None) for m in FUSION_METHODS})
    search_start = time.perf_counter()
    searched = methods.variants(
        prog.graph, {methods.SEARCHED: (methods.SEARCHED, methods.SEARCHED)}, budget=budget
    )
    search_s = time.perf_counter() - search_start
    variants.update(searched)
    rows = measured_rows(name, prog, variants, repeats=repeats)
    return {
        "graph": name,
        "nodes": nodes,
        "inputs_sha256": digest,
        "version": RESULTS_VERSION,
        "search_s": search_s,
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }


def measured_rows(name: str, prog: Any, variants: dict[str, Any], *, repeats: int) -> list[dict]:
    """``variants`` of ``prog`` lowered, checked and timed against XLA's default compile
    (:func:`hlo_go.xla.measure_many`, CPU time; a variant 3x slower on its checking run
    timed apart for 2 rounds, one 8x slower not run again): one row per variant."""
    from hlo_go.xla import measure_many

    results = measure_many(
        prog,
        variants,
        repeats=repeats,
        warmup=1,
        clock="cpu",
        slow_factor=3.0,
        slow_repeats=2,
        skip_factor=8.0,
        progress=lambda line: _log(f"{name}: {line}"),
    )
    return [
        {
            "graph": name,
            "variant": label,
            "correct": m.correct,
            "relative": m.relative,
            "relative_min": m.spread[0] / m.baseline_time_s if m.spread else None,
            "relative_max": m.spread[1] / m.baseline_time_s if m.spread else None,
            "time_s": m.time_s,
            "baseline_time_s": m.baseline_time_s,
            "baseline_min_s": m.baseline_spread[0] if m.baseline_spread else None,
            "baseline_max_s": m.baseline_spread[1] if m.baseline_spread else None,
            "fusions": m.kernels,
            "repeats": m.repeats,
            "compile_s": m.compile_s,
            "temp_bytes": m.temp_bytes,
            "baseline_temp_bytes": m.baseline_temp_bytes,
            "message": m.message[:300],
        }
        for label, m in results.items()
    ]


def current_inputs_digest(name: str) -> str:
    """The digest of the inputs :func:`measure_graph` would draw for ``name`` today."""
    from hlo_corpus import get_workload
    from hlo_go.xla import program

    step, abstract = get_workload(name).make()
    return inputs_digest(program(step, abstract).args)


def _noise(row: dict[str, Any]) -> float:
    """Relative spread of the reference in the row's interleaving."""
    return (row["baseline_max_s"] - row["baseline_min_s"]) / row["baseline_time_s"]


def summarize(per_graph: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers over the measured graphs."""
    searched = [r for g in per_graph.values() for r in g["rows"] if r["variant"] == "searched"]
    timed = [r for r in searched if r["correct"] and r["relative"] is not None]
    slower = [r["graph"] for r in timed if r["relative"] > 1 + _noise(r)]
    faster5 = [r["graph"] for r in timed if r["relative"] <= 0.95]
    return {
        "graphs": len(per_graph),
        "searched_correct": f"{sum(r['correct'] for r in searched)}/{len(searched)}",
        "searched_slower_beyond_noise": ", ".join(slower) or "none",
        "searched_5pct_faster": f"{len(faster5)}/{len(timed)}",
        "all_variants_correct": all(r["correct"] for g in per_graph.values() for r in g["rows"]),
        **against_best_heuristic(per_graph),
    }


def against_best_heuristic(per_graph: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Speedups over XLA's default compile (geomeans over the graphs where every fusion
    heuristic and ``searched`` ran correctly and were timed), and ``searched`` against the
    per-graph fastest of :data:`FUSION_METHODS` (:func:`benchmarks.versus_best`)."""
    ratios = versus_best(per_graph, "searched", FUSION_METHODS)
    if not ratios:
        return {"graphs_compared": 0, "searched_vs_best_heuristic_geomean": None}
    variants = (*FUSION_METHODS, "searched")
    relative = [
        {r["variant"]: r["relative"] for r in per_graph[name]["rows"] if r["correct"]}
        for name in ratios
    ]
    timed = [t for t in relative if all(t.get(v) for v in variants)]
    speedups = {
        f"{v.replace('-', '_')}_speedup_geomean": statistics.geometric_mean(
            [1 / t[v] for t in timed]
        )
        for v in variants
    }
    best = [min(t[v] for v in FUSION_METHODS) for t in timed]
    return {
        "graphs_compared": len(ratios),
        **speedups,
        "best_heuristic_speedup_geomean": statistics.geometric_mean([1 / b for b in best]),
        "searched_vs_best_heuristic_geomean": statistics.geometric_mean(ratios.values()),
        "searched_faster_than_best_heuristic": (
            f"{sum(x > 1 for x in ratios.values())}/{len(ratios)}"
        ),
    }


def compare_allocators(
    retain: dict[str, dict[str, Any]], system: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """What page-faulting the temporaries in costs: graphs measured under both allocators.

    Under the system allocator a call's time is about its time under ``retain`` plus a
    cost per byte of its temporaries (each call faults them in afresh). Every compile
    measured under both (XLA's default and each correct variant, whose temporaries
    ``retain`` recorded) gives one estimate of that cost: the difference of its median
    times over its temporaries.

    Args:
      retain: per-graph results measured with the ``retain`` allocator.
      system: per-graph results measured with the system allocator.

    Returns:
      ``page_fault_ms_per_MB`` (median of the estimates, None without any),
      ``page_fault_estimates`` (how many), and ``searched_by_allocator``: per graph
      measured under both, searched's relative time under each and its and XLA's
      temporaries in MB.
    """
    estimates, searched = [], []
    for name, graph in retain.items():
        other = {r["variant"]: r for r in system.get(name, {}).get("rows", [])}
        for r in graph.get("rows", []):
            o = other.get(r["variant"])
            if o is None or not (r["correct"] and o["correct"]) or r["time_s"] is None:
                continue
            if o["time_s"] is None or r["repeats"] != o["repeats"]:
                continue  # a slow variant's one or two samples are no estimate
            for size, t_retain, t_system in (
                (r["temp_bytes"], r["time_s"], o["time_s"]),
                (r["baseline_temp_bytes"], r["baseline_time_s"], o["baseline_time_s"]),
            ):
                if size:
                    estimates.append((t_system - t_retain) * 1e3 / (size / 1e6))
            if r["variant"] == "searched":
                searched.append(
                    {
                        "graph": name,
                        "system": round(o["relative"], 3),
                        "retain": round(r["relative"], 3),
                        "temp_MB": _megabytes(r["temp_bytes"]),
                        "default_temp_MB": _megabytes(r["baseline_temp_bytes"]),
                    }
                )
    return {
        "page_fault_ms_per_MB": (
            round(float(statistics.median(estimates)), 3) if estimates else None
        ),
        "page_fault_estimates": len(estimates),
        "searched_by_allocator": searched,
    }


def plot_allocators(searched: list[dict[str, Any]], path: Path) -> None:
    """Bar chart of searched's time relative to XLA's default under each allocator, and of
    its temporaries relative to XLA's (rows of :func:`compare_allocators`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [r["graph"] for r in searched]
    x = np.arange(len(names))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(6.0, 0.6 * len(names) + 2), 6.5))
    top.bar(x - 0.2, [r["system"] for r in searched], 0.4, label="system malloc")
    top.bar(x + 0.2, [r["retain"] for r in searched], 0.4, label="retaining malloc")
    top.axhline(1.0, color="k", lw=0.8)
    top.set_ylabel("searched / XLA default (time)")
    values = [v for r in searched for v in (r["system"], r["retain"])]
    top.set_ylim(min(0.8, min(values) - 0.05), max(1.15, max(values) + 0.02))
    top.legend(fontsize=8)
    bottom.bar(x, [r["temp_MB"] / r["default_temp_MB"] for r in searched], 0.5, color="gray")
    bottom.axhline(1.0, color="k", lw=0.8)
    bottom.set_ylabel("searched / XLA default\n(temporaries)")
    for ax in (top, bottom):
        ax.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
    top.set_title("Measured on one pinned core: temporaries page-faulted in on every call")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def partial_path(allocator: Allocator, *, quick: bool = False) -> Path:
    """Where per-graph results measured with ``allocator`` are cached."""
    path = (
        PARTIAL
        if allocator == "system"
        else PARTIAL.with_name(f"lowering_{allocator}.partial.json")
    )
    return path.with_suffix(".quick.json") if quick else path


def run(*, quick: bool = False, allocator: Allocator = "system") -> dict[str, Any]:
    """Runs the benchmark (see the module docstring); returns rows and headline numbers.

    Args:
      quick: one graph, fewer repeats, a smaller search.
      allocator: the measuring processes' malloc (:func:`hlo_go.xla.timing.in_pinned_process`):
        ``"system"``, or ``"retain"`` (freed memory kept for the next call, so no call
        page-faults its temporaries in; ``benchmarks/bench_lowering_retain.py``).
    """

    excluded = {} if quick else corpus_graphs_too_large(MEMORY_FRACTION)
    only = os.environ.get("HLO_GO_LOWERING_GRAPHS", "")
    graphs = QUICK_GRAPHS if quick else graph_names(excluded, only)
    repeats = QUICK_REPEATS if quick else REPEATS
    budget = 200 if quick else SEARCH_BUDGET
    cache = partial_path(allocator, quick=quick)
    # Every cached graph stays in the partial file; only ``graphs`` are run and reported.
    per_graph: dict[str, dict[str, Any]] = {}
    if cache.exists():
        per_graph = json.loads(cache.read_text())
    # Results of an older version, or drawn on other inputs, are measured again.
    for name in [g for g in graphs if g in per_graph]:
        if "error" in per_graph[name]:
            _log(f"{name}: failed last time ({per_graph[name]['error'][:60]}); trying again")
            del per_graph[name]
        elif per_graph[name].get("version", 1) != RESULTS_VERSION:
            _log(f"{name}: cached result is of an older version; measuring it again")
            del per_graph[name]
        elif per_graph[name].get("inputs_sha256") != current_inputs_digest(name):
            _log(f"{name}: inputs changed since its cached result; measuring it again")
            del per_graph[name]
    todo = [g for g in graphs if g not in per_graph]
    measure_pinned(
        todo, measure_graph, per_graph=per_graph, cache=cache, version=RESULTS_VERSION,
        log=_log, deadline_s=TIME_BUDGET_S, repeats=repeats, budget=budget, allocator=allocator,
    )  # fmt: skip
    chosen = {k: v for k, v in per_graph.items() if k in graphs}
    record = result(chosen, graphs, repeats=repeats, budget=budget, excluded=excluded)
    record["allocator"] = allocator
    if allocator != "system" and not quick and PARTIAL.exists():
        record.update(_compared(record["per_graph"]))
    return record


def _compared(retain: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """:func:`compare_allocators` against the cached system-allocator results, plotted."""
    compared = compare_allocators(retain, json.loads(PARTIAL.read_text()))
    if compared["searched_by_allocator"]:
        path = RESULTS_DIR / "lowering_allocators.png"
        plot_allocators(compared["searched_by_allocator"], path)
        compared["plot"] = str(path.relative_to(RESULTS_DIR.parent))
    return compared


def result(
    per_graph: dict[str, dict[str, Any]],
    graphs: tuple[str, ...],
    *,
    repeats: int,
    budget: int,
    excluded: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The benchmark's result from per-graph measurements: rows and headline numbers."""
    rows = []
    for name in graphs:
        g = per_graph.get(name, {})
        base = next(
            (r for r in g.get("rows", []) if r["baseline_time_s"] and r["repeats"] == repeats),
            None,
        )
        if base is not None:
            rows.append(
                {
                    "graph": name,
                    "variant": "XLA default",
                    "correct": True,
                    "relative": 1.0,
                    "min–max": f"{base['baseline_min_s'] / base['baseline_time_s']:.2f}–"
                    f"{base['baseline_max_s'] / base['baseline_time_s']:.2f}",
                    "time_s": round(base["baseline_time_s"], 4),
                    "temp_MB": _megabytes(base.get("baseline_temp_bytes")),
                    "fusions": None,
                    "note": "",
                }
            )
        for r in g.get("rows", []):
            # A variant timed apart (slow) or once (far slower) is related to the
            # reference's median of the main interleaving, not to its own 1-2 samples.
            ref = base["baseline_time_s"] if base is not None else None
            own = r["relative"] is not None and r["repeats"] < repeats and ref
            relative = r["time_s"] / ref if own else r["relative"]
            lo, hi = (
                (r["relative_min"], r["relative_max"])
                if not own
                else (r["relative_min"] * r["baseline_time_s"] / ref,
                      r["relative_max"] * r["baseline_time_s"] / ref)
            )  # fmt: skip
            rows.append(
                {
                    "graph": name,
                    "variant": r["variant"],
                    "correct": r["correct"],
                    "relative": None if relative is None else round(relative, 3),
                    "min–max": f"{lo:.2f}–{hi:.2f}" if lo is not None else "",
                    "time_s": None if r["time_s"] is None else round(r["time_s"], 4),
                    "temp_MB": _megabytes(r.get("temp_bytes")),
                    "fusions": r["fusions"],
                    "note": r["message"][:80],
                }
            )
        if "error" in g:
            rows.append({"graph": name, "variant": "(failed)", "note": g["error"][:120]})
    return {
        **summarize({k: v for k, v in per_graph.items() if v.get("rows")}),
        "clock": "cpu (one pinned core)",
        "repeats": repeats,
        "search_budget": budget,
        "graphs_measured": ", ".join(g for g in graphs if per_graph.get(g, {}).get("rows")),
        "graphs_failed": ", ".join(g for g in graphs if "error" in per_graph.get(g, {})) or "none",
        "graphs_skipped": ", ".join(g for g in graphs if g not in per_graph) or "none",
        "graphs_excluded": excluded or {},
        "rows": rows,
        "per_graph": per_graph,
    }


def _megabytes(size: int | None) -> float | None:
    return None if size is None else round(size / 1e6, 1)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.bench_lowering --from-partial [--allocator retain] [--out FILE]``:
    writes the result (``results/lowering.json``, or ``results/lowering_retain.json``) from
    the graphs measured so far, e.g. after a run was stopped at a deadline."""
    import argparse

    from rich.console import Console

    from benchmarks._report import print_result, write_result

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_lowering")
    parser.add_argument("--from-partial", action="store_true", required=True)
    parser.add_argument("--allocator", choices=("system", "retain"), default="system")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    name = "lowering" if args.allocator == "system" else f"lowering_{args.allocator}"
    out = Path(args.out) if args.out else RESULTS_DIR / f"{name}.json"
    cached = json.loads(partial_path(args.allocator).read_text()).items()
    per_graph = {
        k: v
        for k, v in cached
        if (v.get("rows") or "error" in v) and v.get("version", 1) == RESULTS_VERSION
    }
    excluded = corpus_graphs_too_large(MEMORY_FRACTION)
    graphs = graph_names(excluded)
    record = result(per_graph, graphs, repeats=REPEATS, budget=SEARCH_BUDGET, excluded=excluded)
    record["allocator"] = args.allocator
    if args.allocator != "system":
        record.update(_compared(record["per_graph"]))
    written = write_result(out, name, record, quick=False)
    print_result(Console(), name, written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
