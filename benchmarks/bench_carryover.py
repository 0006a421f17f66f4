"""Carryover between interleaved variants: does a run slow the variant timed after it?

:func:`hlo_go.xla.timing.time_interleaved`'s default order rotates the variants each
round (A B C, B C A, C A B, ...): every variant takes every position, but each is always
timed right after the same neighbour (round boundaries aside). The ``lowering`` benchmark times
``XLA default, no-fusion, xla-cpu-like, fuse-all-legal, priority-fusion, searched`` so,
and ``xla-cpu-like`` always runs right after ``no-fusion``, its slowest variant with the
largest temporaries. This benchmark measures what that costs, with four executables of
one graph timed in each of :data:`ORDERS` (``"rotated"``, then ``"balanced"``: each
variant after every other equally often, :func:`hlo_go.xla.timing.round_order`;
:data:`ROUNDS` rounds each, CPU time, one pinned core):

* ``A1``, ``A2``: the graph lowered with one fusion heuristic (:data:`HEURISTIC`), twice;
* ``no-fusion``: the graph lowered without fusion;
* ``A3``: the same heuristic's lowering a third time, timed right after ``no-fusion``.

Per graph and order: ``after_no_fusion`` (A3's median ÷ the median of A1's and A2's
medians; 1: no carryover), ``identical_spread`` (A1 ÷ A2), and a two-sided Wilcoxon
signed-rank test of A3 against A1 over the paired rounds. Headlines per order: the median
``after_no_fusion`` over graphs, and the graphs where A3 is slower beyond noise
(p < 0.05). In the rotated order A3 always follows ``no-fusion``; in the balanced one the
three copies follow it equally often, so their figures should agree. ``--quick``: one graph, 6 rounds. Results per
graph are kept in ``results/carryover.partial.json`` so an interrupted run resumes.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from benchmarks import RESULTS_DIR, paired_log_wilcoxon
from benchmarks._pinned import measure_pinned, reusable

GRAPHS = ("rnnlm_l2_scan", "bert_l2", "gpt2_l2", "resnet_26", "wavenet_s2")
QUICK_GRAPHS = ("rnnlm_l2_scan",)
HEURISTIC = "fuse-all-legal"
ROUNDS = 20
QUICK_ROUNDS = 6
SIGNIFICANCE = 0.05
# The variants, in the order time_interleaved starts from.
ORDER = ("A1", "A2", "no-fusion", "A3")
# The round orders compared (hlo_go.xla.timing.round_order).
ORDERS = ("rotated", "balanced")
# Bump when a change makes cached per-graph results incomparable. 2: both orders.
RESULTS_VERSION = 2


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure_graph(name: str, *, rounds: int) -> dict[str, Any]:
    """Lowers and times the four executables of one corpus graph (run it pinned)."""
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.xla import program
    from hlo_go.xla.timing import time_interleaved

    began = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    spec = {HEURISTIC: (HEURISTIC, None), "no-fusion": ("no-fusion", None)}
    variants = methods.variants(prog.graph, spec)
    source = {"A1": HEURISTIC, "A2": HEURISTIC, "no-fusion": "no-fusion", "A3": HEURISTIC}
    executables = {
        label: prog.lower(fusion=variants[m].fusion, schedule=variants[m].schedule)
        for label, m in source.items()
    }
    calls = {label: (lambda f=executables[label]: f(*prog.args)) for label in ORDER}
    samples = {}
    for order in ORDERS:
        timings = time_interleaved(calls, repeats=rounds, warmup=1, clock="cpu", order=order)
        samples[order] = {label: list(t.samples) for label, t in timings.items()}
    return {
        "graph": name,
        "version": RESULTS_VERSION,
        "heuristic": HEURISTIC,
        "rounds": rounds,
        "samples_s": samples,
        "seconds": time.perf_counter() - began,
    }


def graph_row(record: dict[str, Any], order: str) -> dict[str, Any]:
    """One graph's figures in one round order, from its record (:func:`measure_graph`)."""
    samples = record["samples_s"][order]
    median = {label: statistics.median(s) for label, s in samples.items()}
    identical = statistics.median([median["A1"], median["A2"]])
    return {
        "graph": record["graph"],
        "order": order,
        "after_no_fusion": median["A3"] / identical,
        "identical_spread": median["A1"] / median["A2"],
        "no_fusion": median["no-fusion"] / identical,
        "p (A3 vs A1)": paired_log_wilcoxon(samples["A3"], samples["A1"]),
        "rounds": record["rounds"],
    }


def result(per_graph: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Rows and headlines per round order over the measured graphs (failed ones listed,
    not counted)."""
    out: dict[str, Any] = {"rows": []}
    measured = [r for r in per_graph.values() if "error" not in r]
    for order in ORDERS:
        rows = [graph_row(r, order) for r in measured]
        out["rows"] += rows
        slower = [
            r["graph"]
            for r in rows
            if r["after_no_fusion"] > 1 and (r["p (A3 vs A1)"] or 1.0) < SIGNIFICANCE
        ]
        out[f"after_no_fusion_median_{order}"] = (
            statistics.median(r["after_no_fusion"] for r in rows) if rows else None
        )
        out[f"slower_after_no_fusion_{order}"] = ", ".join(slower) or "none"
    out["graphs"] = len(measured)
    out["graphs_failed"] = ", ".join(g for g, r in per_graph.items() if "error" in r) or "none"
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring); resumes from the partial file."""
    graphs = QUICK_GRAPHS if quick else GRAPHS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    cache = RESULTS_DIR / f"carryover.partial{'.quick' if quick else ''}.json"
    per_graph = json.loads(cache.read_text()) if cache.exists() else {}
    per_graph = reusable(per_graph, version=RESULTS_VERSION, rounds=rounds, heuristic=HEURISTIC)
    todo = [g for g in graphs if g not in per_graph]
    measure_pinned(todo, measure_graph, per_graph=per_graph, cache=cache,
                   version=RESULTS_VERSION, log=_log, rounds=rounds)  # fmt: skip
    return {
        "title": "carryover: an executable timed right after no-fusion, against identical "
        "copies, in time_interleaved's rotated and balanced round orders",
        **result({g: per_graph[g] for g in graphs if g in per_graph}),
        "heuristic": HEURISTIC,
        "variants": " ".join(ORDER),
        "significance": SIGNIFICANCE,
        "clock": "cpu (one pinned core per graph, two graphs at a time)",
        "test": "two-sided Wilcoxon signed-rank test of log(A3 / A1) over the paired rounds",
    }
