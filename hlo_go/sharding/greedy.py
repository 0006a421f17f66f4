"""A fast greedy strategy selection: one pass in topological order, then coordinate descent.

The pass visits nodes in order and gives each the strategy of least node cost plus
edge cost to the neighbours already decided (ties: the lowest strategy). Memory:
every live set starts from the memory it would need if each member took its
smallest-memory strategy, and a node may only take a strategy whose extra memory
fits the slack of all its live sets. The smallest-memory strategy always fits, so
the pass ends memory-feasible whenever the all-smallest-memory choice is; when even
that does not fit, a node with no fitting strategy takes its smallest-memory one.

Coordinate descent then revisits every node in order and moves it to the strategy
of least cost given all its neighbours, when that is strictly cheaper and either
needs no more memory or keeps each of the node's live sets within the budget.
Every move strictly lowers the total cost and never turns a feasible choice
infeasible. It stops after a round without a move, or after ``max_rounds`` rounds.

Both phases are sequential graph walks, compiled with numba
(:func:`hlo_go.decisions._jit.jit`).
"""

from __future__ import annotations

import numpy as np

from hlo_go.decisions._jit import jit
from hlo_go.sharding.build import ShardingGraph, live_bytes
from hlo_go.sharding.problem import (
    ShardingProblem,
    edge_cost_layout,
    is_memory_feasible,
    live_set_layout,
)


def _csr(keys: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by key: (ptr int64[num_keys + 1], row ids int64)."""
    ptr = np.zeros(num_keys + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=num_keys), out=ptr[1:])
    return ptr, np.argsort(keys, kind="stable").astype(np.int64)


@jit
def _strategy_costs(
    v: int,
    choice: np.ndarray,
    decided: np.ndarray,
    num_strategies: np.ndarray,
    node_cost: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    values: np.ndarray,
    offset: np.ndarray,
    in_ptr: np.ndarray,
    in_edges: np.ndarray,
    out_ptr: np.ndarray,
    out_edges: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[k]`` = node cost of ``v`` under ``k`` + edge costs to decided neighbours."""
    kv = num_strategies[v]
    for k in range(kv):
        out[k] = node_cost[v, k]
    for i in range(in_ptr[v], in_ptr[v + 1]):
        e = in_edges[i]
        u = src[e]
        if decided[u] and u != v:
            base = offset[e] + choice[u] * kv
            for k in range(kv):
                out[k] += values[base + k]
    for i in range(out_ptr[v], out_ptr[v + 1]):
        e = out_edges[i]
        w = dst[e]
        if decided[w] and w != v:
            kw = num_strategies[w]
            base = offset[e] + choice[w]
            for k in range(kv):
                out[k] += values[base + k * kw]
        elif w == v:  # a self-loop: the diagonal
            for k in range(kv):
                out[k] += values[offset[e] + k * kv + k]


@jit
def _greedy_kernel(
    order: np.ndarray,
    num_strategies: np.ndarray,
    node_cost: np.ndarray,
    node_memory: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    values: np.ndarray,
    offset: np.ndarray,
    in_ptr: np.ndarray,
    in_edges: np.ndarray,
    out_ptr: np.ndarray,
    out_edges: np.ndarray,
    live_ptr: np.ndarray,
    live_sets: np.ndarray,
    slack: np.ndarray,
    budget: float,
    max_rounds: int,
    prefer: np.ndarray,
) -> np.ndarray:
    """The greedy pass then coordinate descent; returns int32[N] strategies.

    ``prefer[v] >= 0``: the pass gives ``v`` that strategy whenever it fits the slack
    (else the cheapest that fits); ``-1``: the cheapest that fits.
    """
    n = num_strategies.shape[0]
    kmax = node_cost.shape[1]
    choice = np.zeros(n, np.int32)
    decided = np.zeros(n, np.bool_)
    costs = np.empty(kmax, np.float64)
    constrained = budget < np.inf
    for i in range(n):
        v = order[i]
        kv = num_strategies[v]
        _strategy_costs(
            v,
            choice,
            decided,
            num_strategies,
            node_cost,
            src,
            dst,
            values,
            offset,
            in_ptr,
            in_edges,
            out_ptr,
            out_edges,
            costs,
        )
        low = node_memory[v, 0]
        low_k = 0
        for k in range(1, kv):
            m = node_memory[v, k]
            if m < low or (m == low and costs[k] < costs[low_k]):
                low = m
                low_k = k
        best = -1
        best_cost = np.inf
        first_fit = -1
        for k in range(kv):
            extra = node_memory[v, k] - low
            fits = True
            if constrained and extra > 0:
                for j in range(live_ptr[v], live_ptr[v + 1]):
                    if extra > slack[live_sets[j]]:
                        fits = False
                        break
            if not fits:
                continue
            if first_fit < 0:
                first_fit = k
            if k == prefer[v]:
                best = k
                break
            if costs[k] < best_cost:
                best_cost = costs[k]
                best = k
        if best < 0:
            best = first_fit if first_fit >= 0 else low_k
        choice[v] = best
        decided[v] = True
        if constrained:
            extra = node_memory[v, best] - low
            for j in range(live_ptr[v], live_ptr[v + 1]):
                slack[live_sets[j]] -= extra

    usage = np.zeros(slack.shape[0], np.float64)
    if constrained:
        for v in range(n):
            for j in range(live_ptr[v], live_ptr[v + 1]):
                usage[live_sets[j]] += node_memory[v, choice[v]]
    for _ in range(max_rounds):
        moved = False
        for i in range(n):
            v = order[i]
            kv = num_strategies[v]
            if kv == 1:
                continue
            _strategy_costs(
                v,
                choice,
                decided,
                num_strategies,
                node_cost,
                src,
                dst,
                values,
                offset,
                in_ptr,
                in_edges,
                out_ptr,
                out_edges,
                costs,
            )
            current = choice[v]
            best = current
            best_cost = costs[current]
            for k in range(kv):
                if not costs[k] < best_cost:
                    continue
                extra = node_memory[v, k] - node_memory[v, current]
                fits = True
                if constrained and extra > 0:
                    for j in range(live_ptr[v], live_ptr[v + 1]):
                        if usage[live_sets[j]] + extra > budget:
                            fits = False
                            break
                if fits:
                    best = k
                    best_cost = costs[k]
            if best != current:
                if constrained:
                    extra = node_memory[v, best] - node_memory[v, current]
                    for j in range(live_ptr[v], live_ptr[v + 1]):
                        usage[live_sets[j]] += extra
                choice[v] = best
                moved = True
        if not moved:
            break
    return choice


def solve_greedy(
    problem: ShardingProblem,
    order: np.ndarray | None = None,
    *,
    max_rounds: int = 3,
    prefer: np.ndarray | None = None,
) -> np.ndarray:
    """A good, fast choice of strategies (see the module docstring for the method).

    Args:
      problem: the problem.
      order: int[N], the order to visit nodes in, a permutation of ``0..N-1``
        (default ``0..N-1``, topological when edges go from lower to higher ids).
      max_rounds: at most this many rounds of coordinate descent (0: none).
      prefer: int[N], a strategy per node that the greedy pass takes wherever it
        fits the memory slack (instead of the cheapest): with it the result is
        ``prefer`` made memory-feasible (:func:`fit_memory`).

    Returns:
      int32[N], one strategy per node, each in ``[0, K_v)``. It fits the memory
      budget whenever the choice of every node's smallest-memory strategy does, and
      coordinate descent only ever lowers its cost.

    Raises:
      ValueError: ``order`` is not a permutation of the nodes.
    """
    k = np.ascontiguousarray(problem.num_strategies, np.int32)
    n = len(k)
    if order is None:
        visit = np.arange(n, dtype=np.int64)
    else:
        visit = np.ascontiguousarray(order, np.int64)
        if visit.shape != (n,) or not np.array_equal(np.sort(visit), np.arange(n)):
            raise ValueError(f"order must be a permutation of 0..{n - 1}")
    if n == 0:
        return np.zeros(0, np.int32)
    if prefer is None:
        preferred = np.full(n, -1, np.int32)
    else:
        preferred = np.ascontiguousarray(prefer, np.int32)
        if preferred.shape != (n,) or (preferred >= k).any():
            raise ValueError(f"prefer must be {n} strategies, each below its node's count")
    layout = edge_cost_layout(problem)
    src = np.ascontiguousarray(problem.edge_src, np.int64)
    dst = np.ascontiguousarray(problem.edge_dst, np.int64)
    in_ptr, in_edges = _csr(dst, n)
    out_ptr, out_edges = _csr(src, n)
    node_memory = np.ascontiguousarray(problem.node_memory, np.float64)
    budget = float(problem.memory_budget)
    live = live_set_layout(problem)
    if budget < np.inf and live.num_sets:
        kmax = int(k.max())
        valid = np.arange(kmax)[None, :] < k[:, None]
        lowest = np.where(valid, node_memory[:, :kmax], np.inf)
        slack = budget - np.bincount(
            live.member_set, weights=lowest.min(axis=1)[live.members], minlength=live.num_sets
        )
    else:
        budget = np.inf
        slack = np.zeros(live.num_sets, np.float64)
    return _greedy_kernel(
        visit,
        k,
        np.ascontiguousarray(problem.node_cost, np.float64),
        node_memory,
        src,
        dst,
        layout.values,
        layout.offset,
        in_ptr,
        in_edges,
        out_ptr,
        out_edges,
        live.node_ptr,
        live.node_sets,
        np.ascontiguousarray(slack, np.float64),
        budget,
        int(max_rounds),
        preferred,
    )


def fit_memory(
    sg: ShardingGraph, choice: np.ndarray, *, max_rounds: int = 3, max_cuts: int = 64
) -> np.ndarray:
    """``choice`` itself if it fits the memory budget, else a feasible choice close to it.

    The greedy pass keeps each node's strategy from ``choice`` wherever it fits the
    slack left by the nodes before it (``solve_greedy(prefer=choice)``), gives the
    others the cheapest strategy that fits, and coordinate descent then lowers the
    cost without leaving the budget. This is what makes a memory-unaware choice (a
    policy's decode) usable under a tight budget.

    The problem checks memory at sampled program positions (its live sets), and the
    peak of a choice may fall between them. So the peak is taken over EVERY position
    (as :func:`hlo_go.sharding.simulate_sharding` does), and while it is over the
    budget, the live set at that position joins the problem's and the choice is
    fitted again (at most ``max_cuts`` times).

    Args:
      sg: the prepared module (its ``problem.memory_budget`` is the budget).
      choice: int[N], one strategy per node.
      max_rounds: rounds of coordinate descent after each pass.
      max_cuts: live sets added at most.

    Returns:
      int64[N] strategies; they fit whenever every node's smallest-memory strategy
      fits every live set added.
    """
    problem = sg.problem
    preferred = np.asarray(choice, np.int64)
    current = preferred
    rows = np.arange(len(preferred))
    for cut in range(max_cuts + 1):
        live = live_bytes(sg.live_first, sg.live_last, problem.node_memory[rows, current])
        peak = int(np.argmax(live)) if len(live) else 0
        if not len(live) or live[peak] <= problem.memory_budget or cut == max_cuts:
            return current
        if cut > 0 or is_memory_feasible(problem, current):
            members = (sg.live_first <= peak) & (sg.live_last >= peak)
            members &= problem.node_memory.max(axis=1) > 0
            extra = np.flatnonzero(members).astype(np.int32)
            problem = problem._replace(live_sets=(*problem.live_sets, extra))
        fitted = solve_greedy(problem, max_rounds=max_rounds, prefer=preferred)
        current = np.asarray(fitted, np.int64)
    return current
