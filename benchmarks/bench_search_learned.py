"""Search over the learned-cost-model simulator, measured: does a better cost model make
the search win on XLA:CPU?

For each graph (:data:`GRAPHS`: the learned model's training families and its held-out
ones), in a child process pinned to a core of its own and timed by CPU time, the fusion
heuristics (``xla-cpu-like``, ``fuse-all-legal``, ``priority-fusion``) and two searches of
equal budget (:data:`hlo_go.methods.SEARCHED`, simulated annealing with
:data:`benchmarks.bench_lowering.SEARCH_BUDGET` evaluations, XLA's order with
memory-freeing instructions first) are lowered, checked against XLA's default compile and
timed interleaved with it (:func:`hlo_go.xla.measure_many`, as ``bench_lowering``):

* ``searched``: over ``host-cpu-1`` priced by the calibrated roofline;
* ``searched-learned``: over ``host_cpu(1, kernel_model=HOST_KERNEL_MODEL)``, priced by
  the shipped learned kernel cost model (:mod:`hlo_go.sim.learned`).

Headline: per search, the geomean over graphs of the best heuristic's time over the
search's (> 1: the search is faster), ``searched_vs_best_heuristic_geomean`` and
``searched_learned_vs_best_heuristic_geomean``, also over the held-out families alone.
Per-graph results are cached in ``results/search_learned.partial.json`` (resumable; a graph
searched over another model file is measured again);
``HLO_GO_SEARCH_LEARNED_GRAPHS`` picks graphs; ``--quick``: one graph, a smaller search.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

from benchmarks import FUSING_HEURISTICS, RESULTS_DIR, inputs_digest, versus_best
from benchmarks._pinned import measure_pinned
from benchmarks._pinned import reusable as kept

GRAPHS = (
    "rnnlm_l2_scan",
    "gnmt_l2_scan",
    "gpt2_l2",
    "bert_l2",
    "transformer_xl_l2",
    "gnmt_l4_scan",
    "resnet_26",
    "rnnlm_l4_scan",
)
QUICK_GRAPHS = ("rnnlm_l2_scan",)
HEURISTICS = FUSING_HEURISTICS
SEARCHES = ("searched", "searched-learned")
REPEATS = 5
QUICK_REPEATS = 2
PARTIAL = RESULTS_DIR / "search_learned.partial.json"
# 2: rows as bench_lowering's (benchmarks.bench_lowering.measured_rows), search_s added; 3: the
# host simulators keep large dots and convolutions out of fusions, as the lowering does.
RESULTS_VERSION = 3


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure_graph(name: str, *, repeats: int, budget: int) -> dict[str, Any]:
    """The heuristics and both searches of one graph, lowered and timed (run it pinned)."""
    from benchmarks.bench_lowering import measured_rows
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.sim.presets import HOST_KERNEL_MODEL, host_cpu
    from hlo_go.xla import program

    start = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    variants = methods.variants(prog.graph, {m: (m, None) for m in HEURISTICS})
    spec = {methods.SEARCHED: (methods.SEARCHED, methods.SEARCHED)}
    search_s = {}
    for label, cluster in (
        ("searched", methods.HOST_CLUSTER),
        ("searched-learned", host_cpu(1, kernel_model=HOST_KERNEL_MODEL)),
    ):
        began = time.perf_counter()
        decided = methods.variants(prog.graph, spec, cluster=cluster, budget=budget)
        search_s[label] = time.perf_counter() - began
        variants[label] = decided[methods.SEARCHED]._replace(label=label)
    rows = measured_rows(name, prog, variants, repeats=repeats)
    for row in rows:
        row["search_s"] = round(search_s.get(row["variant"], 0.0), 1)
    return {
        "graph": name,
        "nodes": prog.graph.num_nodes,
        "inputs_sha256": inputs_digest(prog.args),
        "model_sha256": model_digest(),
        "version": RESULTS_VERSION,
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }


def model_digest() -> str:
    """A short digest of the shipped learned model's file, so that a resumed run does not
    keep graphs searched over another model."""
    import hashlib

    from hlo_go.sim.learned.predict import model_path
    from hlo_go.sim.presets import HOST_KERNEL_MODEL

    return hashlib.sha256(model_path(HOST_KERNEL_MODEL).read_bytes()).hexdigest()[:16]


def reusable(per_graph: dict[str, dict[str, Any]], model: str) -> dict[str, dict[str, Any]]:
    """The cached graphs a resumed run keeps: this results version, searched over the
    model file whose digest is ``model``."""
    return kept(per_graph, version=RESULTS_VERSION, model_sha256=model)


def summarize(per_graph: dict[str, dict[str, Any]], heldout: set[str]) -> dict[str, Any]:
    """Headline numbers: each search against the best heuristic, over all graphs and over
    the ``heldout`` graphs (those of the model's held-out families)."""
    out: dict[str, Any] = {}
    for search in SEARCHES:
        key = search.replace("-", "_")
        ratios = versus_best(per_graph, search)
        held = [v for g, v in ratios.items() if g in heldout]
        out[f"{key}_vs_best_heuristic_geomean"] = (
            statistics.geometric_mean(ratios.values()) if ratios else None
        )
        out[f"{key}_vs_best_heuristic_heldout_geomean"] = (
            statistics.geometric_mean(held) if held else None
        )
        out[f"{key}_faster_than_best_heuristic"] = sum(v > 1 for v in ratios.values())
        out[f"{key}_graphs"] = len(ratios)
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring)."""
    from benchmarks.bench_lowering import SEARCH_BUDGET
    from hlo_go import corpus
    from hlo_go.sim.learned.predict import load_kernel_model

    only = os.environ.get("HLO_GO_SEARCH_LEARNED_GRAPHS", "")
    graphs = QUICK_GRAPHS if quick else tuple(only.split(",")) if only else GRAPHS
    repeats = QUICK_REPEATS if quick else REPEATS
    budget = 200 if quick else SEARCH_BUDGET
    cache = PARTIAL.with_suffix(".quick.json") if quick else PARTIAL
    per_graph: dict[str, dict[str, Any]] = json.loads(cache.read_text()) if cache.exists() else {}
    model = model_digest()
    per_graph = reusable(per_graph, model)
    todo = [g for g in graphs if g not in per_graph or "error" in per_graph[g]]
    measure_pinned(
        todo, measure_graph, per_graph=per_graph, cache=cache, version=RESULTS_VERSION,
        log=_log, repeats=repeats, budget=budget,
    )  # fmt: skip
    chosen = {g: per_graph[g] for g in graphs if g in per_graph}
    shipped = load_kernel_model("host-cpu")
    heldout = set(shipped.meta.get("heldout_families", ())) if shipped is not None else set()
    families = {g: corpus.family(g) for g in chosen}
    rows = [r for g in chosen.values() for r in g.get("rows", [])]
    return {
        "title": "search over the roofline vs over the learned cost model, measured on XLA:CPU",
        "rows": rows,
        **summarize(chosen, {g for g, f in families.items() if f in heldout}),
        "heldout_families": ", ".join(sorted(heldout)),
        "model_sha256": model,
        "graphs_failed": {g: v["error"] for g, v in chosen.items() if "error" in v},
        "search_budget": budget,
        "repeats": repeats,
        "clock": "CPU time, one process pinned to one core per graph (two graphs at once); "
        "relative: a variant's median over XLA's default compile's median in the same "
        "interleaving",
    }
