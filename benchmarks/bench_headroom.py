"""Headroom on this host: how much a search that measures every candidate gains over the
best fusion heuristic, measured.

For each graph (:data:`GRAPHS`: eight corpus training steps from seven families;
``HLO_GO_HEADROOM_GRAPHS`` picks others; ``--quick``: :data:`QUICK_GRAPHS`), in a child
process pinned to a core of its own (:func:`hlo_go.xla.timing.in_pinned_process`) and
timed by CPU time:

1. :func:`hlo_go.baselines.measured_search` measures ``xla-cpu-like``,
   ``priority-fusion`` and ``fuse-all-legal`` (XLA's order) and starts from the fastest,
   then proposes moves of fusion groups and of the order, lowering each, checking its
   outputs against XLA's default and timing it against the incumbent in paired,
   interleaved rounds (:data:`CANDIDATES` measured candidates, env
   ``HLO_GO_HEADROOM_CANDIDATES``; :data:`SECONDS_PER_GRAPH` at most, env
   ``HLO_GO_HEADROOM_SECONDS``).
2. An independent re-measure: the best heuristic and the search's result are lowered
   afresh, checked against XLA's default (``jax.jit``) once more, and timed interleaved
   with XLA's default for :data:`REMEASURE_ROUNDS` rounds. ``gain`` is the heuristic's
   median over the found decisions' (> 1: the search found something faster); its
   spread is the quartiles (the table's ``p25–p75``) and extremes of the per-round paired
   ratios. ``per_graph`` holds every number: the heuristics' times, the search's history,
   the samples, XLA's default's time.

``headroom_geomean`` is the geometric mean of the gains. Graphs run on up to two cores at
once (env ``HLO_GO_HEADROOM_WORKERS``: 1 runs one at a time). Each graph's result is
cached in ``results/headroom.partial.json`` (``headroom.partial.quick.json``) with a
digest of its inputs, the candidate budget and :data:`RESULTS_VERSION`, so an interrupted
run resumes; a graph cached with other inputs, another budget or an older version is run
again.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import sys
import time
from typing import Any

from benchmarks import RESULTS_DIR, inputs_digest, paired_log_wilcoxon
from benchmarks._pinned import measure_pinned

GRAPHS = (
    "rnnlm_l2_scan",
    "gnmt_l2_scan",
    "wavenet_s2",
    "resnet_26",
    "bert_l2",
    "transformer_xl_l2",
    "rnnlm_l2_unrolled",
    "gpt2_l2",
)
"""Eight corpus training steps from seven families, the fastest of each to compile and
run on this host (``benchmarks/results/lowering.json``), cheapest first."""
QUICK_GRAPHS = ("rnnlm_l2_scan", "gnmt_l2_scan")
CANDIDATES = int(os.environ.get("HLO_GO_HEADROOM_CANDIDATES", 100))
QUICK_CANDIDATES = 10
SECONDS_PER_GRAPH = float(os.environ.get("HLO_GO_HEADROOM_SECONDS", 3600))
REMEASURE_ROUNDS = 12
QUICK_REMEASURE_ROUNDS = 10
SEARCH: dict[str, Any] = {"screen_rounds": 3, "confirm_rounds": 6, "start_rounds": 5}
"""Rounds of the search (:func:`hlo_go.baselines.measured_search`'s defaults)."""
QUICK_SEARCH: dict[str, Any] = {"screen_rounds": 2, "confirm_rounds": 2, "start_rounds": 2}
"""Fewer rounds under ``--quick``: a smoke test of the pipeline, not a measurement."""
SEED = 0
RESULTS_VERSION = 1
"""Bump when a change makes cached per-graph results incomparable."""


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def family(name: str) -> str:
    """A corpus graph's family (its index entry's, e.g. ``transformer_xl``)."""
    from hlo_go import corpus

    return str(corpus.info(name)["family"])


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def measure_graph(
    name: str, *, candidates: int, seconds: float, rounds: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """Searches one corpus graph and re-measures the result (run it in a pinned process).

    Args:
      name: the corpus graph.
      candidates: measured candidates of the search.
      seconds: the search's time limit.
      rounds: interleaved rounds of the final re-measure.
      settings: more keyword arguments of the search (its rounds).

    Returns:
      The graph's record (see the module docstring).
    """
    from hlo_corpus import get_workload
    from hlo_go.baselines.measured import check_outputs, measured_search
    from hlo_go.xla import program
    from hlo_go.xla.timing import time_interleaved

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="[%(asctime)s] %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("hlo_go.baselines.measured").setLevel(logging.INFO)
    began = time.perf_counter()
    step, abstract = get_workload(name).make()
    prog = program(step, abstract)
    digest = inputs_digest(prog.args)
    found = measured_search(
        prog, budget=candidates, time_limit=seconds, seed=SEED, clock="cpu", **settings
    )

    # the independent re-measure: fresh lowerings, checked, timed with XLA's default
    reference = prog.default()
    want = reference(*prog.args)
    heuristic = found.start_candidate.lower(prog)
    best = found.best.lower(prog)
    checks = {}
    for label, executable in (("heuristic", heuristic), ("found", best)):
        ok, message = check_outputs(prog, executable(*prog.args), want)
        checks[label] = {"correct": ok, "message": message[:300]}
    timings = time_interleaved(
        {
            "XLA default": lambda: reference(*prog.args),
            "heuristic": lambda: heuristic(*prog.args),
            "found": lambda: best(*prog.args),
        },
        repeats=rounds,
        warmup=1,
        clock="cpu",
    )
    h, f, x = timings["heuristic"], timings["found"], timings["XLA default"]
    paired = [a / b for a, b in zip(h.samples, f.samples, strict=True)]  # heuristic / found
    return {
        "graph": name,
        "family": family(name),
        "nodes": prog.graph.num_nodes,
        "inputs_sha256": digest,
        "version": RESULTS_VERSION,
        "candidates": candidates,
        "settings": settings,
        "best_heuristic": found.start,
        "search": found.summary(),
        "remeasure": {
            "rounds": rounds,
            "clock": "cpu (one pinned core)",
            "xla_default_s": x.median,
            "heuristic_s": h.median,
            "found_s": f.median,
            "heuristic_samples_s": list(h.samples),
            "found_samples_s": list(f.samples),
            "xla_default_samples_s": list(x.samples),
            "gain": h.median / f.median,
            "paired_gain_min": min(paired),
            "paired_gain_p25": _quantile(paired, 0.25),
            "paired_gain_median": statistics.median(paired),
            "paired_gain_p75": _quantile(paired, 0.75),
            "paired_gain_max": max(paired),
            "found_faster_rounds": sum(p > 1.0 for p in paired),
            "checks": checks,
        },
        "seconds": time.perf_counter() - began,
    }


def current_inputs_digest(name: str) -> str:
    """The digest of the inputs :func:`measure_graph` would draw for ``name`` today."""
    from hlo_corpus import get_workload
    from hlo_go.xla import program

    step, abstract = get_workload(name).make()
    return inputs_digest(program(step, abstract).args)


def graph_names(quick: bool) -> tuple[str, ...]:
    """The graphs to run: ``HLO_GO_HEADROOM_GRAPHS`` (comma-separated) if set, else
    :data:`QUICK_GRAPHS` or :data:`GRAPHS`.

    Raises:
      ValueError: a name that is not a corpus graph.
    """
    from hlo_go import corpus

    only = os.environ.get("HLO_GO_HEADROOM_GRAPHS", "")
    if not only:
        return QUICK_GRAPHS if quick else GRAPHS
    picked = tuple(n.strip() for n in only.split(",") if n.strip())
    unknown = [n for n in picked if n not in corpus.names()]
    if unknown:
        raise ValueError(f"HLO_GO_HEADROOM_GRAPHS: not corpus graphs: {unknown}")
    return picked


def _fresh(record: dict[str, Any], name: str, candidates: int, settings: dict[str, Any]) -> str:
    """Why a cached record must be run again ('' if it need not)."""
    if "error" in record:
        return f"failed last time ({record['error'][:60]})"
    if record.get("version") != RESULTS_VERSION:
        return "cached result is of an older version"
    if record.get("candidates") != candidates:
        return f"cached with {record.get('candidates')} candidates, not {candidates}"
    if record.get("settings") != settings:
        return "cached with other search settings"
    if record.get("inputs_sha256") != current_inputs_digest(name):
        return "inputs changed since its cached result"
    return ""


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs the benchmark (see the module docstring); resumes from the partial file."""
    graphs = graph_names(quick)
    candidates = QUICK_CANDIDATES if quick else CANDIDATES
    rounds = QUICK_REMEASURE_ROUNDS if quick else REMEASURE_ROUNDS
    settings = QUICK_SEARCH if quick else SEARCH
    cache = RESULTS_DIR / f"headroom.partial{'.quick' if quick else ''}.json"
    per_graph: dict[str, dict[str, Any]] = {}
    if cache.exists():
        per_graph = json.loads(cache.read_text())
    for name in [g for g in graphs if g in per_graph]:
        why = _fresh(per_graph[name], name, candidates, settings)
        if why:
            _log(f"{name}: {why}; running it again")
            del per_graph[name]
        else:
            _log(f"{name}: done earlier, kept from {cache.name}")
    todo = [g for g in graphs if g not in per_graph]
    measure_pinned(
        todo, measure_graph, per_graph=per_graph, cache=cache, version=RESULTS_VERSION,
        log=_log, workers=int(os.environ.get("HLO_GO_HEADROOM_WORKERS", 2)),
        candidates=candidates, seconds=SECONDS_PER_GRAPH, rounds=rounds, settings=settings,
    )  # fmt: skip
    record = result({g: per_graph[g] for g in graphs if g in per_graph}, graphs, candidates)
    record["search_settings"] = settings
    return record


SIGNIFICANCE = 0.05
"""A found decision's gain counts in ``headroom_geomean_supported`` only where the
re-measure's paired rounds show it faster at this level."""


def _p_found_faster(remeasure: dict[str, Any]) -> float | None:
    """One-sided Wilcoxon signed-rank p-value that the found decisions run faster than
    the heuristic's in the re-measure's paired rounds (None without per-round samples)."""
    h, f = remeasure.get("heuristic_samples_s"), remeasure.get("found_samples_s")
    return paired_log_wilcoxon(h or [], f or [], alternative="greater")


def result(
    per_graph: dict[str, dict[str, Any]], graphs: tuple[str, ...], candidates: int
) -> dict[str, Any]:
    """Rows and headline numbers from per-graph records."""
    rows, gains, supported = [], [], []
    for name in graphs:
        g = per_graph.get(name)
        if g is None:
            rows.append({"graph": name, "note": "not run"})
            continue
        if "error" in g:
            rows.append({"graph": name, "note": g["error"][:120]})
            continue
        s, m = g["search"], g["remeasure"]
        correct = all(c["correct"] for c in m["checks"].values()) and s["final_correct"]
        # a search that accepted nothing found the heuristic's own decisions: its gain is
        # 1 by construction, and the re-measure of the two identical lowerings is noise
        gain = m["gain"] if s["accepted"] else 1.0
        p_faster = _p_found_faster(m) if s["accepted"] else None
        if correct:
            gains.append(gain)
            significant = p_faster is not None and p_faster < SIGNIFICANCE and gain > 1.0
            supported.append(gain if significant else 1.0)
        rows.append(
            {
                "graph": name,
                "heuristic": g["best_heuristic"],
                "heuristic_s": round(m["heuristic_s"], 4),
                "found_s": round(m["found_s"], 4),
                "gain": round(gain, 4),
                "measured_ratio": round(m["gain"], 4),
                "p25–p75": f"{m['paired_gain_p25']:.3f}–{m['paired_gain_p75']:.3f}",
                "measured": s["measured"],
                "illegal": s["illegal"],
                "accepted": s["accepted"],
                "p_found_faster": None if p_faster is None else round(p_faster, 4),
                "correct": correct,
            }
        )

    def geometric_mean(values: list[float]) -> float | None:
        return round(math.exp(statistics.fmean(math.log(x) for x in values)), 4) if values else None

    measured = [g for g in per_graph.values() if "error" not in g]
    return {
        "title": "Headroom: measured search vs the best heuristic (CPU time, one pinned core)",
        "headroom_geomean": geometric_mean(gains),
        "headroom_geomean_supported": geometric_mean(supported),
        "wins_supported": sum(x > 1.0 for x in supported),
        "graphs": len(measured),
        "families": len({g["family"] for g in measured}),
        "candidates_per_graph": candidates,
        "remeasure_rounds": max((g["remeasure"]["rounds"] for g in measured), default=0),
        "clock": "cpu (one pinned core)",
        "gain": "best heuristic's median time / found decisions' median time (> 1: found "
        "faster); 1 where the search accepted no candidate (its result is the heuristic's "
        "decisions), with the re-measure of the two identical lowerings in measured_ratio. "
        "p_found_faster: one-sided Wilcoxon signed-rank test of the re-measure's paired "
        f"rounds; headroom_geomean_supported counts a gain only where p < {SIGNIFICANCE} "
        "(1 elsewhere)",
        "all_correct": all(r.get("correct", False) for r in rows),
        "graphs_failed": ", ".join(n for n, g in per_graph.items() if "error" in g) or "none",
        "rows": rows,
        "per_graph": per_graph,
    }
