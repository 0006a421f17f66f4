"""The shipped host-cpu GO policy zero-shot, measured on XLA:CPU, on families it never saw.

For each graph (default: the base graphs of the families the shipped ``host-cpu`` policy
was not trained on, :func:`heldout_graphs`, 17 min on this host's 2 cores for bert's and
gnmt's 9; ``HLO_GO_HOST_POLICY_GRAPHS`` picks some;
``--quick``: one small graph), in a child process pinned to a core of its own and timed by
CPU time, as ``bench_lowering`` does:

* ``xla-cpu-like``, ``fuse-all-legal``, ``priority-fusion``: the fusion heuristics on
  ``host-cpu-1``, lowered with XLA's order;
* ``policy``: the shipped ``host-cpu`` policy's own decisions, zero-shot (its default
  decode, :func:`hlo_go.methods.decide` on the cluster :func:`hlo_go.jit` decides for,
  ``host-cpu-1``), its fusion lowered with XLA's order, as :func:`hlo_go.jit` lowers them
  on one device (:func:`hlo_go.api.decide.decides_order`).

Each is checked against XLA's default compile and timed interleaved with it
(:func:`hlo_go.xla.measure_many`). Per graph: the best correct heuristic's relative time
over the policy's (> 1: the policy is faster), which share of nodes the policy groups
into kernels as each heuristic does (``agreement``: 1.0 is the same kernels), and the same
ratio in simulation (``simulated_vs_best_heuristic``, on :data:`SIMULATORS`), to see
whether what the simulators predict survives XLA.

Headline: ``policy_vs_best_heuristic_geomean`` over the graphs, against each graph's
fastest heuristic as measured (the fastest of three noisy measurements, which favours the
heuristics), ``policy_vs_heuristic_geomean`` against each heuristic alone, and a
one-sided Wilcoxon signed-rank test over graphs (``p_policy_slower``: the policy is
slower than the best heuristic). Per-graph results are cached in
``results/host_policy.partial.json`` (resumable; a graph measured with another policy file
is measured again).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import sys
import time
from typing import TYPE_CHECKING, Any

from benchmarks import FUSING_HEURISTICS as HEURISTICS
from benchmarks import RESULTS_DIR, inputs_digest, versus_best
from benchmarks._pinned import measure_pinned
from benchmarks._pinned import reusable as kept

if TYPE_CHECKING:
    from hlo_go.decisions import Decisions
    from hlo_go.graph import OpGraph

POLICY = "host-cpu"
DECIDE_CLUSTER = "host-cpu-1"
# The simulators the measured decisions are also scored on (the roofline jit decides with,
# and the learned kernel model the policy's teachers searched on).
SIMULATORS = ("host-cpu-1", "host-cpu-1-learned")
QUICK_GRAPHS = ("bert_l2",)
REPEATS = 7
QUICK_REPEATS = 2
PARTIAL = RESULTS_DIR / "host_policy.partial.json"
# 2: the host simulators keep large dots and convolutions out of fusions, as the lowering does.
RESULTS_VERSION = 2


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def policy_digest() -> str:
    """A short digest of the shipped policy's file (a resumed run keeps only graphs
    measured with it)."""
    from hlo_go.pretrained import policy_path

    return hashlib.sha256(policy_path(POLICY).read_bytes()).hexdigest()[:16]


def heldout_families(meta: dict[str, Any]) -> list[str]:
    """The corpus families none of a policy's training graphs belongs to (from its
    checkpoint ``meta``: its imitation teachers' graphs, or the graphs PPO trained it on)."""
    from hlo_go import corpus

    trained = [t["graph"] for t in meta.get("teachers", {}).values()]
    trained += [name.split("@", 1)[0] for name in meta.get("graphs", [])]
    seen = {corpus.family(g) for g in trained}
    return sorted({corpus.family(n) for n in corpus.names(split="base")} - seen)


def heldout_graphs(families: list[str]) -> tuple[str, ...]:
    """The base graphs of ``families``, the largest first (the unrolled ones take minutes
    per variant to compile, so the two cores finish together)."""
    from hlo_go import corpus
    from hlo_go.graph import build_graph

    names = [n for n in corpus.names(split="base") if corpus.family(n) in families]
    size = {n: build_graph(corpus.load(n, "prefusion")).num_nodes for n in names}
    return tuple(sorted(names, key=lambda n: -size[n]))


def group_agreement(graph: OpGraph, a: Decisions, b: Decisions) -> float:
    """The share of ``graph``'s nodes that decisions ``a`` and ``b`` put in the same kernel
    (each node's group named by its smallest member, :func:`hlo_go.decisions.fusion_groups`)."""
    import numpy as np

    from hlo_go.decisions import fusion_groups

    if graph.num_nodes == 0:
        return 1.0
    ga = fusion_groups(graph, np.asarray(a.placement), np.asarray(a.fusion_priority))
    gb = fusion_groups(graph, np.asarray(b.placement), np.asarray(b.fusion_priority))
    return float(np.mean(ga == gb))


def measure_graph(name: str, *, repeats: int) -> dict[str, Any]:
    """The heuristics and the policy on one graph, lowered and timed (run it pinned)."""
    from benchmarks.bench_lowering import measured_rows
    from hlo_corpus import get_workload
    from hlo_go import methods
    from hlo_go.xla import Variant, program

    start = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    graph = prog.graph
    decided = {h: methods.decide(graph, h) for h in HEURISTICS}
    began = time.perf_counter()
    decided["policy"] = methods.decide(graph, POLICY, cluster=DECIDE_CLUSTER)
    decide_s = time.perf_counter() - began
    variants = {  # each one's fusion, XLA's order
        v: Variant(d, None, label=methods.label(POLICY if v == "policy" else v, None))
        for v, d in decided.items()
    }
    agreement = {
        h: round(group_agreement(graph, decided["policy"], decided[h]), 4) for h in HEURISTICS
    }
    rows = measured_rows(name, prog, variants, repeats=repeats)
    return {
        "graph": name,
        "nodes": graph.num_nodes,
        "inputs_sha256": inputs_digest(prog.args),
        "policy_sha256": policy_digest(),
        "version": RESULTS_VERSION,
        "decide_s": round(decide_s, 2),
        "agreement": agreement,
        "simulated": simulated(graph, decided),
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }


def simulated(graph: OpGraph, decided: dict[str, Decisions]) -> dict[str, float]:
    """The measured decisions in simulation: per simulator (:data:`SIMULATORS`), the best
    heuristic's simulated step time over the policy's (> 1: the policy is faster)."""
    from hlo_go.sim import get_cluster, simulate

    out = {}
    for cluster in map(get_cluster, SIMULATORS):
        times = {v: simulate(graph, cluster, d).step_time for v, d in decided.items()}
        out[cluster.name] = round(min(times[h] for h in HEURISTICS) / times["policy"], 4)
    return out


def reusable(per_graph: dict[str, dict[str, Any]], policy: str) -> dict[str, dict[str, Any]]:
    """The cached graphs a resumed run keeps: this results version, measured with the
    policy file whose digest is ``policy``."""
    return kept(per_graph, version=RESULTS_VERSION, policy_sha256=policy)


def summarize(per_graph: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers: the policy against the best correct heuristic of each graph and
    against each heuristic, over the graphs where both were measured correct."""
    from scipy import stats

    best = versus_best(per_graph, "policy")
    versus: dict[str, list[float]] = {h: [] for h in HEURISTICS}
    for g in per_graph.values():
        rel = {r["variant"]: r["relative"] for r in g.get("rows", []) if r["correct"]}
        for h in HEURISTICS:
            if rel.get("policy") and rel.get(h):
                versus[h].append(rel[h] / rel["policy"])
    logs = [math.log(v) for v in best.values()]
    slower = (
        float(stats.wilcoxon(logs, alternative="less").pvalue)
        if len(logs) >= 2 and any(logs)
        else None
    )
    return {
        "policy_vs_best_heuristic_geomean": (
            statistics.geometric_mean(best.values()) if best else None
        ),
        "policy_vs_best_heuristic": {g: round(v, 4) for g, v in best.items()},
        "policy_faster_than_best_heuristic": sum(v > 1 for v in best.values()),
        "policy_graphs": len(best),
        "p_policy_slower": slower,
        "policy_vs_heuristic_geomean": {
            h: statistics.geometric_mean(v) if v else None for h, v in versus.items()
        },
        "policy_correct": sum(
            any(r["variant"] == "policy" and r["correct"] for r in g.get("rows", []))
            for g in per_graph.values()
        ),
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring)."""
    from hlo_go.pretrained import load_policy

    meta = load_policy(POLICY).meta
    families = heldout_families(meta)
    only = os.environ.get("HLO_GO_HOST_POLICY_GRAPHS", "")
    graphs = QUICK_GRAPHS if quick else tuple(only.split(",")) if only else heldout_graphs(families)
    repeats = QUICK_REPEATS if quick else REPEATS
    cache = PARTIAL.with_suffix(".quick.json") if quick else PARTIAL
    per_graph: dict[str, dict[str, Any]] = json.loads(cache.read_text()) if cache.exists() else {}
    digest = policy_digest()
    per_graph = reusable(per_graph, digest)
    todo = [g for g in graphs if g not in per_graph or "error" in per_graph[g]]
    measure_pinned(
        todo, measure_graph, per_graph=per_graph, cache=cache, version=RESULTS_VERSION,
        log=_log, repeats=repeats,
    )  # fmt: skip
    chosen = {g: per_graph[g] for g in graphs if g in per_graph}
    in_simulation = {g: v["simulated"] for g, v in chosen.items() if "simulated" in v}
    return {
        "title": "the shipped host-cpu policy zero-shot vs the fusion heuristics, measured on "
        "XLA:CPU, on families it was not trained on",
        "rows": [r for g in chosen.values() for r in g.get("rows", [])],
        **summarize(chosen),
        "nodes": {g: v.get("nodes") for g, v in chosen.items()},
        "agreement": {g: v.get("agreement") for g, v in chosen.items()},
        "decide_s": {g: v.get("decide_s") for g, v in chosen.items()},
        "simulated_vs_best_heuristic": in_simulation,
        "simulated_vs_best_heuristic_geomean": {
            c: statistics.geometric_mean(r[c] for r in in_simulation.values())
            for c in SIMULATORS
            if in_simulation
        },
        "heldout_families": ", ".join(families),
        "policy_trained_on": meta.get("cluster"),
        "policy_sha256": digest,
        "graphs_failed": {g: v["error"] for g, v in chosen.items() if "error" in v},
        "repeats": repeats,
        "clock": "CPU time, one process pinned to one core per graph (two graphs at once); "
        "relative: a variant's median over XLA's default compile's median in the same "
        "interleaving",
    }
