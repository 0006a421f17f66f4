"""``searched`` and the ``host-cpu`` policy against the best heuristic, confirmed in
fresh processes.

The ``lowering`` and ``host_policy`` benchmarks name each graph's best fusion heuristic by
the fastest of three medians (:data:`benchmarks.FUSING_HEURISTICS`) and compare the
subject (``searched``; the shipped ``host-cpu`` policy) with it in the same measurement.
Taking the fastest of several noisy medians favours it: where the heuristics run alike,
the one picked is the one whose rounds ran luckiest, and the subject (one median, never
picked) is compared against that luck. This benchmark measures each comparison again on
its own:

1. the best heuristic of each graph is read from the subject's benchmark
   (``results/lowering.partial.json``, ``results/host_policy.partial.json``; the
   selection is not made again on these measurements);
2. in a fresh process pinned to one core (:func:`hlo_go.xla.timing.in_pinned_process`),
   the subject decides again (``searched``: the same search, seed and budget; the policy:
   its default decode on ``host-cpu-1``; ``same decisions`` says whether they gave as
   many fusions as first measured) and the best heuristic's decisions are made;
3. both are lowered, their outputs checked against XLA's default compile, and timed
   interleaved (:func:`hlo_go.xla.timing.time_interleaved`, rotating order) for
   :data:`ROUNDS` rounds by CPU time.

Per graph: the ratio of medians (best heuristic ÷ subject, > 1: the subject is faster),
the paired per-round ratios, and a two-sided Wilcoxon signed-rank test of their logs.
Headlines per subject: ``<subject>_vs_best_heuristic_confirmed_geomean``, the first
measurement's figure on the same graphs, and the graphs where the difference is
significant (p < 0.05) either way. Results per graph are kept in
``results/lowering_confirm.partial.json`` (``searched``) and
``results/lowering_confirm_policy.partial.json`` so an interrupted run resumes;
``HLO_GO_CONFIRM_SUBJECTS=searched,policy`` picks subjects and ``HLO_GO_LOWERING_GRAPHS``
graphs.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import RESULTS_DIR, best_heuristic, paired_log_wilcoxon
from benchmarks._pinned import measure_pinned, reusable

ROUNDS = 10
QUICK_ROUNDS = 3
SIGNIFICANCE = 0.05
SUBJECTS = {
    "searched": RESULTS_DIR / "lowering.partial.json",
    "policy": RESULTS_DIR / "host_policy.partial.json",
}
"""Each subject and the partial results of the benchmark that first measured it."""
# Bump when a change makes cached per-graph results incomparable.
RESULTS_VERSION = 1


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def partial_path(subject: str, *, quick: bool = False) -> Path:
    """Where the per-graph results of ``subject`` are kept."""
    stem = "lowering_confirm" if subject == "searched" else f"lowering_confirm_{subject}"
    return RESULTS_DIR / f"{stem}.partial{'.quick' if quick else ''}.json"


def best_heuristics(first: dict[str, dict[str, Any]], subject: str) -> dict[str, dict[str, Any]]:
    """Per graph of a first measurement's partial file, its fastest correct fusion
    heuristic and what was measured of it and of ``subject``.

    Returns:
      graph -> ``{"best", "best_relative", "subject_relative", "subject_fusions",
      "ratio"}`` (``ratio``: best ÷ subject relative time); graphs without a correct,
      timed subject and heuristic are left out.
    """
    out = {}
    for name, g in first.items():
        by = {r["variant"]: r for r in g.get("rows", []) if r["correct"] and r["relative"]}
        best = best_heuristic(g.get("rows", []))
        if best is None or subject not in by:
            continue
        out[name] = {
            "best": best,
            "best_relative": by[best]["relative"],
            "subject_relative": by[subject]["relative"],
            "subject_fusions": by[subject]["fusions"],
            "ratio": by[best]["relative"] / by[subject]["relative"],
        }
    return out


def kept_results(
    per_graph: dict[str, dict[str, Any]],
    first: dict[str, dict[str, Any]],
    subject: str,
    *,
    rounds: int,
) -> dict[str, dict[str, Any]]:
    """The cached graphs a resumed run keeps: those that still compare the same two
    decisions as the first measurement (:func:`best_heuristics`): its best heuristic,
    and the subject deciding as many fusions as it first did; measured at this version
    and number of rounds. A graph whose subject now decides otherwise is measured again."""
    return {
        g: v for g, v in reusable(per_graph, version=RESULTS_VERSION).items()
        if g in first and v.get("best") == first[g]["best"] and v.get("rounds") == rounds
        and v.get("fusions", {}).get(subject) == first[g]["subject_fusions"]
    }  # fmt: skip


def _subject_variant(subject: str, graph: Any, budget: int) -> Any:
    """The subject's :class:`hlo_go.xla.Variant` for ``graph``, decided as its first
    benchmark decides it."""
    from hlo_go import methods
    from hlo_go.xla import Variant

    if subject == "searched":
        spec = {methods.SEARCHED: (methods.SEARCHED, methods.SEARCHED)}
        return methods.variants(graph, spec, budget=budget)[methods.SEARCHED]
    from benchmarks.bench_host_policy import DECIDE_CLUSTER, POLICY

    decisions = methods.decide(graph, POLICY, cluster=DECIDE_CLUSTER)
    return Variant(decisions, None, label=methods.label(POLICY, None))


def measure_graph(
    name: str, *, subject: str, best: str, rounds: int, budget: int
) -> dict[str, Any]:
    """Decides, lowers, checks and times ``subject`` and the heuristic ``best`` on one
    corpus graph (run it in a pinned process).

    Returns:
      The graph's record: medians, per-round samples, fusions, checks.
    """
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.baselines.measured import check_outputs
    from hlo_go.xla import program
    from hlo_go.xla.timing import time_interleaved

    began = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    variants = {
        best: methods.variants(prog.graph, {best: (best, None)})[best],
        subject: _subject_variant(subject, prog.graph, budget),
    }
    want = prog.default()(*prog.args)
    executables, checks, fusions = {}, {}, {}
    for label, variant in variants.items():
        executable = prog.lower(fusion=variant.fusion, schedule=variant.schedule)
        ok, message = check_outputs(prog, executable(*prog.args), want)
        checks[label] = {"correct": ok, "message": message[:300]}
        fusions[label] = executable.num_fusions
        executables[label] = executable
    del want
    timings = time_interleaved(
        {label: (lambda f=f: f(*prog.args)) for label, f in executables.items()},
        repeats=rounds,
        warmup=1,
        clock="cpu",
    )
    h, s = timings[best], timings[subject]
    return {
        "graph": name,
        "version": RESULTS_VERSION,
        "subject": subject,
        "best": best,
        "rounds": rounds,
        "clock": "cpu (one pinned core)",
        "best_s": h.median,
        "subject_s": s.median,
        "best_samples_s": list(h.samples),
        "subject_samples_s": list(s.samples),
        "fusions": fusions,
        "checks": checks,
        "seconds": time.perf_counter() - began,
    }


def paired_test(best_s: list[float], subject_s: list[float]) -> dict[str, float | None]:
    """The paired rounds of one graph: median of best ÷ subject per round, and the
    two-sided Wilcoxon signed-rank p-value of their logs (None under 2 rounds)."""
    paired = [a / b for a, b in zip(best_s, subject_s, strict=True)]
    p = paired_log_wilcoxon(best_s, subject_s)
    return {"paired_ratio_median": statistics.median(paired), "p": p}


def result(
    confirmed: dict[str, dict[str, Any]], first: dict[str, dict[str, Any]], subject: str
) -> dict[str, Any]:
    """Rows and headline numbers of one subject from its per-graph records and its first
    measurement's figures (:func:`best_heuristics`)."""
    rows, ratios, firsts = [], [], []
    faster, slower = [], []
    for name, g in confirmed.items():
        if "error" in g:
            rows.append({"subject": subject, "graph": name, "best heuristic": first[name]["best"],
                         "error": g["error"][:80]})  # fmt: skip
            continue
        correct = all(c["correct"] for c in g["checks"].values())
        test = paired_test(g["best_samples_s"], g["subject_samples_s"])
        ratio = g["best_s"] / g["subject_s"]
        if correct:
            ratios.append(ratio)
            firsts.append(first[name]["ratio"])
            if test["p"] is not None and test["p"] < SIGNIFICANCE:
                (faster if ratio > 1 else slower).append(name)
        rows.append(
            {
                "subject": subject,
                "graph": name,
                "best heuristic": g["best"],
                "first: best / subject": round(first[name]["ratio"], 3),
                "confirmed: best / subject": round(ratio, 3),
                "paired median": round(test["paired_ratio_median"], 3),
                "p (two-sided)": None if test["p"] is None else round(test["p"], 4),
                "same decisions": g["fusions"][subject] == first[name]["subject_fusions"],
                "correct": correct,
            }
        )

    def geomean(values: list[float]) -> float | None:
        return statistics.geometric_mean(values) if values else None

    return {
        "rows": rows,
        f"{subject}_graphs_confirmed": len(ratios),
        f"{subject}_vs_best_heuristic_confirmed_geomean": geomean(ratios),
        f"{subject}_vs_best_heuristic_first_geomean_same_graphs": geomean(firsts),
        f"{subject}_faster_significant": ", ".join(faster) or "none",
        f"{subject}_slower_significant": ", ".join(slower) or "none",
    }


def confirm(subject: str, *, quick: bool) -> dict[str, Any]:
    """Measures (or reads back) one subject's graphs; its :func:`result`."""
    from benchmarks.bench_lowering import QUICK_GRAPHS, SEARCH_BUDGET

    source = SUBJECTS[subject]
    if not source.exists():
        raise FileNotFoundError(f"{source} is missing: run its benchmark first")
    first = best_heuristics(json.loads(source.read_text()), subject)
    only = [g.strip() for g in os.environ.get("HLO_GO_LOWERING_GRAPHS", "").split(",") if g.strip()]
    graphs = [g for g in (QUICK_GRAPHS if quick else only or list(first)) if g in first]
    rounds = QUICK_ROUNDS if quick else ROUNDS
    budget = 200 if quick else SEARCH_BUDGET
    cache = partial_path(subject, quick=quick)
    per_graph = json.loads(cache.read_text()) if cache.exists() else {}
    per_graph = kept_results(per_graph, first, subject, rounds=rounds)
    for name in [g for g in graphs if g not in per_graph]:
        measure_pinned(
            [name], measure_graph, per_graph=per_graph, cache=cache, version=RESULTS_VERSION,
            log=_log, workers=1, subject=subject, best=first[name]["best"], rounds=rounds,
            budget=budget,
        )  # fmt: skip
    return result({g: per_graph[g] for g in graphs if g in per_graph}, first, subject)


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring); resumes from the partial files."""
    chosen = os.environ.get("HLO_GO_CONFIRM_SUBJECTS", ",".join(SUBJECTS))
    subjects = [s.strip() for s in chosen.split(",") if s.strip()]
    unknown = [s for s in subjects if s not in SUBJECTS]
    if unknown:
        raise ValueError(f"HLO_GO_CONFIRM_SUBJECTS: unknown {unknown}; known: {list(SUBJECTS)}")
    record: dict[str, Any] = {"rows": []}
    for subject in subjects:
        part = confirm(subject, quick=quick)
        record["rows"] += part.pop("rows")
        record.update(part)
    record.update(
        quick=quick,
        significance=SIGNIFICANCE,
        clock="cpu (one pinned core)",
        test="two-sided Wilcoxon signed-rank test of log(best / subject) over the paired rounds",
        title="searched and the host-cpu policy vs the best heuristic first measured, re-timed",
    )
    return record
