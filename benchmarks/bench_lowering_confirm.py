"""``searched`` against the best heuristic, confirmed in fresh processes.

The ``lowering`` benchmark names each graph's best fusion heuristic by the fastest of
three medians (:data:`benchmarks.FUSING_HEURISTICS`) and compares ``searched`` with it in
the same measurement. Taking the fastest of several noisy medians favours it: where the
heuristics run alike, the one picked is the one whose rounds ran luckiest, and
``searched`` (one median, never picked) is compared against that luck. This benchmark
measures the comparison again on its own:

1. the best heuristic of each graph is read from ``results/lowering.partial.json`` (the
   selection is not made again on these measurements);
2. in a fresh process pinned to one core (:func:`hlo_go.xla.timing.in_pinned_process`),
   ``searched`` is decided again (the same search, seed and budget; ``same search``
   says whether it gave as many fusions as in ``lowering``) and the best heuristic's
   decisions are made;
3. both are lowered, their outputs checked against XLA's default compile, and timed
   interleaved (:func:`hlo_go.xla.timing.time_interleaved`, rotating order) for
   :data:`ROUNDS` rounds by CPU time.

Per graph: the ratio of medians (best heuristic ÷ searched, > 1: ``searched`` faster),
the paired per-round ratios, and a two-sided Wilcoxon signed-rank test of their logs.
Headline: ``searched_vs_best_heuristic_confirmed_geomean`` and the graphs where the
difference is significant (p < 0.05) either way. Results per graph are kept in
``results/lowering_confirm.partial.json`` (with the ``lowering`` result they confirm) so
an interrupted run resumes; ``HLO_GO_LOWERING_GRAPHS`` picks graphs as in ``lowering``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from typing import Any

from benchmarks import FUSING_HEURISTICS, RESULTS_DIR
from benchmarks._pinned import measure_pinned, reusable

ROUNDS = 10
QUICK_ROUNDS = 3
SIGNIFICANCE = 0.05
PARTIAL = RESULTS_DIR / "lowering_confirm.partial.json"
LOWERING_PARTIAL = RESULTS_DIR / "lowering.partial.json"
# Bump when a change makes cached per-graph results incomparable.
RESULTS_VERSION = 1


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def best_heuristics(lowering: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per graph of a ``lowering`` partial file, its fastest correct fusion heuristic and
    what ``lowering`` measured of it and of ``searched``.

    Returns:
      graph -> ``{"best", "best_relative", "searched_relative", "searched_fusions",
      "ratio"}`` (``ratio``: best ÷ searched relative time); graphs without a correct,
      timed ``searched`` and heuristic are left out.
    """
    out = {}
    for name, g in lowering.items():
        by = {r["variant"]: r for r in g.get("rows", []) if r["correct"] and r["relative"]}
        timed = [h for h in FUSING_HEURISTICS if h in by]
        if not timed or "searched" not in by:
            continue
        best = min(timed, key=lambda h: by[h]["relative"])
        out[name] = {
            "best": best,
            "best_relative": by[best]["relative"],
            "searched_relative": by["searched"]["relative"],
            "searched_fusions": by["searched"]["fusions"],
            "ratio": by[best]["relative"] / by["searched"]["relative"],
        }
    return out


def measure_graph(name: str, *, best: str, rounds: int, budget: int) -> dict[str, Any]:
    """Decides, lowers, checks and times ``searched`` and the heuristic ``best`` on one
    corpus graph (run it in a pinned process).

    Returns:
      The graph's record: medians, per-round samples, kernels, checks.
    """
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.baselines.measured import check_outputs
    from hlo_go.xla import program
    from hlo_go.xla.timing import time_interleaved

    began = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    variants = methods.variants(
        prog.graph,
        {best: (best, None), methods.SEARCHED: (methods.SEARCHED, methods.SEARCHED)},
        budget=budget,
    )
    want = prog.default()(*prog.args)
    executables, checks, kernels = {}, {}, {}
    for label, variant in variants.items():
        executable = prog.lower(fusion=variant.fusion, schedule=variant.schedule)
        ok, message = check_outputs(prog, executable(*prog.args), want)
        checks[label] = {"correct": ok, "message": message[:300]}
        kernels[label] = executable.num_fusions
        executables[label] = executable
    del want
    timings = time_interleaved(
        {label: (lambda f=f: f(*prog.args)) for label, f in executables.items()},
        repeats=rounds,
        warmup=1,
        clock="cpu",
    )
    h, s = timings[best], timings[methods.SEARCHED]
    return {
        "graph": name,
        "version": RESULTS_VERSION,
        "best": best,
        "rounds": rounds,
        "clock": "cpu (one pinned core)",
        "best_s": h.median,
        "searched_s": s.median,
        "best_samples_s": list(h.samples),
        "searched_samples_s": list(s.samples),
        "fusions": kernels,
        "checks": checks,
        "seconds": time.perf_counter() - began,
    }


def paired_test(best_s: list[float], searched_s: list[float]) -> dict[str, float | None]:
    """The paired rounds of one graph: median of best ÷ searched per round, and the
    two-sided Wilcoxon signed-rank p-value of their logs (None under 2 rounds)."""
    from scipy import stats

    paired = [a / b for a, b in zip(best_s, searched_s, strict=True)]
    logs = [math.log(x) for x in paired]
    if len(logs) < 2:
        p = None
    elif all(x == 0 for x in logs):
        p = 1.0
    else:
        p = float(stats.wilcoxon(logs, alternative="two-sided").pvalue)
    return {"paired_ratio_median": statistics.median(paired), "p": p}


def result(
    confirmed: dict[str, dict[str, Any]], first: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Rows and headline numbers from the per-graph records and ``lowering``'s figures."""
    rows, ratios, firsts = [], [], []
    faster, slower = [], []
    for name, g in confirmed.items():
        if "error" in g:
            rows.append(
                {"graph": name, "best heuristic": first[name]["best"], "error": g["error"][:80]}
            )
            continue
        correct = all(c["correct"] for c in g["checks"].values())
        test = paired_test(g["best_samples_s"], g["searched_samples_s"])
        ratio = g["best_s"] / g["searched_s"]
        if correct:
            ratios.append(ratio)
            firsts.append(first[name]["ratio"])
            if test["p"] is not None and test["p"] < SIGNIFICANCE:
                (faster if ratio > 1 else slower).append(name)
        rows.append(
            {
                "graph": name,
                "best heuristic": g["best"],
                "lowering: best / searched": round(first[name]["ratio"], 3),
                "confirmed: best / searched": round(ratio, 3),
                "paired median": round(test["paired_ratio_median"], 3),
                "p (two-sided)": None if test["p"] is None else round(test["p"], 4),
                "same search": g["fusions"]["searched"] == first[name]["searched_fusions"],
                "correct": correct,
            }
        )

    def geomean(values: list[float]) -> float | None:
        return statistics.geometric_mean(values) if values else None

    return {
        "rows": rows,
        "graphs_confirmed": len(ratios),
        "searched_vs_best_heuristic_confirmed_geomean": geomean(ratios),
        "searched_vs_best_heuristic_lowering_geomean_same_graphs": geomean(firsts),
        "searched_faster_significant": ", ".join(faster) or "none",
        "searched_slower_significant": ", ".join(slower) or "none",
        "significance": SIGNIFICANCE,
        "clock": "cpu (one pinned core)",
        "test": "two-sided Wilcoxon signed-rank test of log(best / searched) over the paired rounds",
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring); resumes from the partial file."""
    from benchmarks.bench_lowering import QUICK_GRAPHS, SEARCH_BUDGET

    if not LOWERING_PARTIAL.exists():
        raise FileNotFoundError(
            f"{LOWERING_PARTIAL} is missing: run `python -m benchmarks lowering` first"
        )
    first = best_heuristics(json.loads(LOWERING_PARTIAL.read_text()))
    only = [g.strip() for g in os.environ.get("HLO_GO_LOWERING_GRAPHS", "").split(",") if g.strip()]
    graphs = [g for g in (QUICK_GRAPHS if quick else only or list(first)) if g in first]
    rounds = QUICK_ROUNDS if quick else ROUNDS
    budget = 200 if quick else SEARCH_BUDGET
    cache = PARTIAL.with_suffix(".quick.json") if quick else PARTIAL
    per_graph = json.loads(cache.read_text()) if cache.exists() else {}
    per_graph = reusable(per_graph, version=RESULTS_VERSION)
    per_graph = {
        g: v for g, v in per_graph.items()
        if g in first and v.get("best") == first[g]["best"] and v.get("rounds") == rounds
        and "error" not in v
    }  # fmt: skip
    todo = [g for g in graphs if g not in per_graph]
    for name in todo:
        measure_pinned(
            [name], measure_graph, per_graph=per_graph, cache=cache, version=RESULTS_VERSION,
            log=_log, workers=1, best=first[name]["best"], rounds=rounds, budget=budget,
        )  # fmt: skip
    chosen = {g: per_graph[g] for g in graphs if g in per_graph}
    record = result(chosen, first)
    record["quick"] = quick
    record["title"] = "searched vs the best heuristic of lowering.json, re-timed in fresh processes"
    return record
