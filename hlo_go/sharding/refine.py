"""Window refinement: a choice improved by re-optimizing windows of nodes exactly.

A large-neighbourhood search. Each *window* is a run of consecutive decided nodes (in
node-id order, which is program order); every node outside it keeps its strategy, so
the window's problem is the original one with the outside edges folded into the node
costs (:func:`window_problem`). That problem is reduced (:mod:`~hlo_go.sharding.reduction`)
and its core minimized *exactly* by variable elimination (:func:`eliminate`), in
milliseconds where the core's elimination width is small, as it is on the windows of
the transformer and CNN graphs; a window whose core is too wide is split in two. A
window's optimum replaces the choice when it is cheaper (and, with ``accept``, when the
caller accepts it, e.g. when it fits the memory budget). Windows overlap by half and
sweep the graph until a sweep improves nothing or the time limit is reached.

The moves are what coordinate descent (:func:`~hlo_go.sharding.solve_greedy`) cannot
make: switching a whole block of nodes to another layout at once, where switching any
one of them alone pays resharding at its seams. The result is never costlier than the
start, and depends on it: from the learned policy's choice it may end in a different
local optimum than from greedy's (``docs/sharding.md``).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable

import numpy as np

from hlo_go.sharding.problem import ShardingProblem, total_cost
from hlo_go.sharding.reduction import CoreProblem, reduce_problem

# The largest table (entries) variable elimination may build: 32 MB of float64.
MAX_ELIMINATION_ENTRIES = 4_000_000
# Decided nodes per window (consecutive in id order); windows overlap by half.
DEFAULT_WINDOW = 100
# A too-wide window is halved down to this many nodes, then left as it is.
MIN_WINDOW = 16
# Seconds a refinement may take by default.
DEFAULT_REFINE_S = 5.0


def _elimination_order(
    num_strategies: np.ndarray, edges: list[tuple[int, int]], max_entries: int
) -> list[int] | None:
    """A greedy elimination order, each step eliminating the node whose table (its own
    and its remaining neighbours' strategies) is smallest; None when some step's
    smallest table exceeds ``max_entries``."""
    neighbours: dict[int, set[int]] = {v: set() for v in range(len(num_strategies))}
    for a, b in edges:
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    k = [int(x) for x in num_strategies]

    def table(v: int) -> float:
        return float(k[v]) * math.prod(k[u] for u in neighbours[v])

    size = {v: table(v) for v in neighbours}
    heap = [(s, v) for v, s in size.items()]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        s, v = heapq.heappop(heap)
        if v not in neighbours or s != size[v]:
            continue  # eliminated already, or a stale entry
        if s > max_entries:
            return None
        order.append(v)
        joined = neighbours.pop(v)
        for u in joined:
            neighbours[u].discard(v)
            neighbours[u].update(w for w in joined if w != u)
        for u in joined:
            size[u] = table(u)
            heapq.heappush(heap, (size[u], u))
    return order


def eliminate(
    core: CoreProblem, *, max_entries: int = MAX_ELIMINATION_ENTRIES
) -> np.ndarray | None:
    """The exact minimum of a core problem without memory constraints, by variable
    elimination (min-sum bucket elimination).

    Each node in turn (smallest resulting table first) is minimized out of the sum of
    the tables that mention it; the result, a table over its neighbours, replaces
    them, and the minimizing strategy per neighbour assignment is kept to read the
    optimum back in reverse order.

    Args:
      core: the problem; one with memory constraints is not solved (None).
      max_entries: the largest table allowed; a core that needs a larger one (an
        elimination width too large) is not solved (None).

    Returns:
      ``int64[R]``, the optimal *local* strategy index of each core node (an index
      into ``core.strategies[i]``), or None.
    """
    if len(core.live_members):
        return None
    n = len(core.nodes)
    k = np.array([len(c) for c in core.node_cost], np.int64)
    edges = [(int(a), int(b)) for a, b in np.asarray(core.edge_ends).reshape(-1, 2)]
    order = _elimination_order(k, edges, max_entries)
    if order is None:
        return None
    Factor = tuple[tuple[int, ...], np.ndarray]
    tables: dict[int, list[Factor]] = {v: [] for v in range(n)}

    def add(variables: tuple[int, ...], values: np.ndarray) -> None:
        for v in variables:
            tables[v].append((variables, values))

    for v in range(n):
        add((v,), np.asarray(core.node_cost[v], np.float64))
    for (a, b), matrix in zip(edges, core.edge_cost, strict=True):
        add((a, b), np.asarray(matrix, np.float64))
    steps: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    for x in order:
        factors = tables.pop(x)
        rest = tuple(sorted({u for variables, _ in factors for u in variables} - {x}))
        for u in rest:  # the factors summed here leave their other variables' lists
            tables[u] = [f for f in tables[u] if x not in f[0]]
        axes = (x, *rest)
        position = {u: i for i, u in enumerate(axes)}
        joint = np.zeros([k[u] for u in axes])
        for variables, values in factors:
            # The table's axes put in the joint's order, then broadcast over the rest.
            ranked = sorted(range(len(variables)), key=lambda i: position[variables[i]])
            shape = [1] * len(axes)
            for u in variables:
                shape[position[u]] = k[u]
            joint = joint + np.transpose(values, ranked).reshape(shape)
        best = np.argmin(joint, axis=0)
        steps.append((x, rest, best))
        if rest:
            add(rest, np.take_along_axis(joint, best[None], axis=0)[0])
    local = np.zeros(n, np.int64)
    for x, rest, best in reversed(steps):
        local[x] = best[tuple(local[u] for u in rest)] if rest else int(best)
    return local


def window_problem(
    problem: ShardingProblem, choice: np.ndarray, members: np.ndarray
) -> ShardingProblem:
    """The problem over ``members`` with every other node fixed at ``choice``.

    An edge from a member to a fixed node becomes that edge's column (or row) at the
    fixed node's strategy, added to the member's node cost; edges among fixed nodes
    are constant and dropped. So for any choice ``x`` that equals ``choice`` outside
    the window, ``total_cost(problem, x)`` is ``total_cost(window, x[members])`` plus a
    constant. No memory constraint is kept.

    Args:
      problem: the problem.
      choice: ``int[N]``, the strategies of the fixed nodes.
      members: ``int64[M]``, the window's node ids (sorted, distinct).

    Returns:
      A problem over ``M`` nodes, node ``i`` being ``members[i]``.
    """
    n = len(problem.num_strategies)
    local = np.full(n, -1, np.int64)
    local[members] = np.arange(len(members))
    node_cost = problem.node_cost[members].copy()
    src, dst, matrices = [], [], []
    inside = local >= 0
    touching = np.flatnonzero(inside[problem.edge_src] | inside[problem.edge_dst])
    for e in touching.tolist():
        a, b = int(problem.edge_src[e]), int(problem.edge_dst[e])
        matrix = problem.edge_cost[e]
        if inside[a] and inside[b]:
            src.append(local[a])
            dst.append(local[b])
            matrices.append(matrix)
        elif inside[a]:
            node_cost[local[a], : matrix.shape[0]] += matrix[:, choice[b]]
        else:
            node_cost[local[b], : matrix.shape[1]] += matrix[choice[a], :]
    return ShardingProblem(
        num_strategies=problem.num_strategies[members],
        node_cost=node_cost,
        node_memory=problem.node_memory[members],
        edge_src=np.asarray(src, np.int32),
        edge_dst=np.asarray(dst, np.int32),
        edge_cost=tuple(matrices),
        live_sets=(),
        memory_budget=math.inf,
    )


def solve_window(
    problem: ShardingProblem,
    choice: np.ndarray,
    members: np.ndarray,
    *,
    max_entries: int = MAX_ELIMINATION_ENTRIES,
) -> np.ndarray | None:
    """The optimal strategies of ``members`` with every other node fixed at ``choice``
    (``int64[M]``), or None when the window's reduced core is too wide to eliminate."""
    reduction = reduce_problem(window_problem(problem, choice, members))
    core = reduction.core
    local = eliminate(core, max_entries=max_entries)
    if local is None:
        return None
    strategies = [s[i] for s, i in zip(core.strategies, local.tolist(), strict=True)]
    return np.asarray(reduction.expand(np.asarray(strategies, np.int64)), np.int64)


def refine(
    problem: ShardingProblem,
    start: np.ndarray,
    *,
    window: int = DEFAULT_WINDOW,
    time_limit_s: float = DEFAULT_REFINE_S,
    accept: Callable[[np.ndarray], bool] | None = None,
    max_entries: int = MAX_ELIMINATION_ENTRIES,
) -> np.ndarray:
    """``start`` improved by exact re-optimization of overlapping windows (see the
    module docstring). Memory is not modelled here: pass ``accept`` to refuse moves.

    Args:
      problem: the problem (its memory constraint is ignored).
      start: ``int[N]``, the choice to improve; it must have a finite cost.
      window: decided nodes (those with more than one strategy) per window.
      time_limit_s: stop starting windows after this many seconds.
      accept: called with each cheaper choice found; a move is kept only if it returns
        True (e.g. the choice fits the memory budget). None: every cheaper one is kept.
      max_entries: the largest elimination table (:func:`eliminate`).

    Returns:
      ``int64[N]``, a choice no costlier than ``start``.

    Raises:
      ValueError: ``window < 1`` or ``start`` of infinite cost.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1 node, got {window}")
    began = time.perf_counter()
    current = np.asarray(start, np.int64).copy()
    cost = total_cost(problem, current)
    if not math.isfinite(cost):
        raise ValueError("refine needs a start of finite cost")
    decided = np.flatnonzero(np.asarray(problem.num_strategies) > 1)
    stride = max(window // 2, 1)
    improved = True
    while improved:
        improved = False
        pending = [decided[lo : lo + window] for lo in range(0, len(decided), stride)]
        while pending:
            if time.perf_counter() - began > time_limit_s:
                return current
            members = pending.pop(0)
            best = solve_window(problem, current, members, max_entries=max_entries)
            if best is None:
                if len(members) >= 2 * MIN_WINDOW:
                    half = len(members) // 2
                    pending[:0] = [members[:half], members[half:]]
                continue
            candidate = current.copy()
            candidate[members] = best
            candidate_cost = total_cost(problem, candidate)
            if candidate_cost < cost - 1e-12 * abs(cost) and (accept is None or accept(candidate)):
                current, cost, improved = candidate, candidate_cost, True
    return current
