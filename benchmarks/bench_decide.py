"""Zero-shot decision time: a shipped GO policy deciding for each corpus graph.

Issue 43's zero-shot is the greedy decode plus 16 samples, each scored by the simulator,
in at most 2 s a graph up to 60,000 nodes. This times exactly that call,
:func:`hlo_go.rl.infer` (``samples=16``; the policy's confidence cuts and, as the shipped
policy has a move head, a climb of its default :data:`hlo_go.rl.DEFAULT_MOVES` moves are
tried too) of the shipped ``v100x4``
policy (all three tasks, 4 devices), on every corpus graph, smallest first, in one process
as ``hlo-go eval`` runs them:

* ``first_s``: the first call for the graph. Graphs share the policy's executables by
  padding bucket, so this includes compiling them when the graph's bucket is new to the
  process (``compiled`` says so), and never otherwise.
* ``warm_s``: the median of 3 further calls (the executables compiled).
* ``greedy_s`` / ``samples_s`` / ``score_s``: the warm call split into the greedy decode
  (with the move head's scores), the 16 samples, and the simulator's evaluations (one
  profiled call's shares of ``warm_s``).
* ``moves_first_s`` / ``moves_warm_s``: the same for the policy's default decode,
  ``infer`` without samples: greedy, its cuts, a climb of its move head's top moves (what
  ``hlo-go eval`` runs); ``moves_simulations`` its simulations, ``moves_vs_greedy`` its
  simulated speedup over the greedy decisions.

Wall clock, not pinned: the policy uses XLA:CPU's thread pool, as a user's process would.
``--quick`` takes the 4 smallest graphs.
"""

from __future__ import annotations

import cProfile
import functools
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

TARGET_S = 2.0
TARGET_NODES = 60_000
SAMPLES = 16
POLICY = "v100x4"
WARM_CALLS = 3

_console = Console(stderr=True)


def _split(profile: cProfile.Profile) -> dict[str, float]:
    """Seconds of one profiled ``infer`` call in the greedy decode, the samples and the
    simulator (cumulative times of their functions)."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    cumulative: dict[str, float] = {}
    for (filename, _, function), (_, _, _, total, _) in stats.items():
        if filename.endswith(("rl/trainer.py", "rl/agent.py", "rl/env.py")):
            key = f"{filename.rsplit('/', 1)[-1]}:{function}"
            cumulative[key] = max(cumulative.get(key, 0.0), total)
    return {
        "greedy_s": cumulative.get("agent.py:greedy", 0.0)
        + cumulative.get("agent.py:greedy_pass", 0.0),
        "samples_s": cumulative.get("agent.py:sample", 0.0),
        "score_s": cumulative.get("env.py:score", 0.0),
    }


def _timed(call: Callable[[], Any]) -> tuple[float, list[float], Any]:
    """``(seconds of a first call, seconds of WARM_CALLS more, the last result)``."""
    times, result = [], None
    for _ in range(1 + WARM_CALLS):
        began = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - began)
    return times[0], times[1:], result


def run(*, quick: bool = False) -> dict[str, Any]:
    from hlo_go import corpus, load_policy
    from hlo_go.rl import DEFAULT_MOVES, agent_for, infer
    from hlo_go.sim import get_cluster
    from hlo_go.sources import load_graph

    names = sorted(corpus.names(), key=lambda n: corpus.info(n)["stages"]["prefusion"]["nodes"])
    if quick:
        names = names[:4]
    policy = load_policy(POLICY)
    cluster = get_cluster(POLICY)
    agent = agent_for(policy.config)  # the agent infer uses (one per configuration)

    def executables() -> int:  # the policy's compiled decode and sampling executables
        return sum(
            f._cache_size() for f in (agent._greedy_jit, agent._sample_jit, agent._greedy_pass_jit)
        )

    rows: list[dict[str, Any]] = []
    for k, name in enumerate(names):
        _, graph = load_graph(name)
        before = executables()
        first_s, warm, result = _timed(
            functools.partial(infer, policy, graph, cluster, samples=SAMPLES)
        )
        compiled = executables() > before
        profile = cProfile.Profile()
        profile.enable()
        infer(policy, graph, cluster, samples=SAMPLES)
        profile.disable()
        warm_s = statistics.median(warm)
        # The default decode: greedy, cuts, the head's moves.
        moves_first_s, moves_warm, decoded = _timed(
            functools.partial(infer, policy, graph, cluster)
        )
        row = {
            "graph": name,
            "nodes": graph.num_nodes,
            "first_s": round(first_s, 3),
            "compiled": compiled,
            "warm_s": round(warm_s, 3),
            **{k: round(v, 3) for k, v in _split(profile).items()},
            "vs_greedy": round(result.greedy_time / result.step_time, 4),
            "warm_runs_s": [round(t, 3) for t in warm],
            "moves_first_s": round(moves_first_s, 3),
            "moves_warm_s": round(statistics.median(moves_warm), 3),
            "moves_simulations": decoded.simulations,
            "moves_vs_greedy": round(decoded.greedy_time / decoded.step_time, 4),
        }
        rows.append(row)
        _console.log(
            f"[{k + 1}/{len(names)}] {name} ({graph.num_nodes} nodes): first "
            f"{first_s:.2f} s, warm {warm_s:.2f} s; greedy + moves warm "
            f"{row['moves_warm_s']:.2f} s"
        )
    within = [r for r in rows if r["nodes"] <= TARGET_NODES]
    fast = [r for r in within if r["warm_s"] <= TARGET_S]
    slow = sorted((r for r in within if r["warm_s"] > TARGET_S), key=lambda r: r["nodes"])
    return {
        "title": f"zero-shot decision time: greedy + {SAMPLES} samples (+ moves) of the shipped "
        f"{POLICY} policy, simulated (wall clock)",
        "policy": POLICY,
        "samples": SAMPLES,
        "graphs": len(rows),
        "decide_s_max_warm": max(r["warm_s"] for r in within),
        "decide_s_max_first": max(r["first_s"] for r in within),
        "graphs_within_target_warm": f"{len(fast)}/{len(within)}",
        "smallest_graph_over_target": f"{slow[0]['graph']} ({slow[0]['nodes']} nodes)"
        if slow
        else "none",
        "target_s": TARGET_S,
        "target_nodes": TARGET_NODES,
        "meets_target": not slow,
        "moves": DEFAULT_MOVES if policy.config.policy.move_head else 0,
        "moves_decide_s_max_warm": max(r["moves_warm_s"] for r in within),
        "moves_graphs_within_target_warm": (
            f"{sum(r['moves_warm_s'] <= TARGET_S for r in within)}/{len(within)}"
        ),
        "executables": executables(),
        "clock": "wall, not pinned (XLA:CPU's thread pool on this host's cores)",
        "rows": rows,
    }
