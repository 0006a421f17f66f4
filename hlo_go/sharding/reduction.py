"""Exact size reductions of a :class:`ShardingProblem` before the ILP.

A problem is rewritten into a smaller *core* with the same optimum, plus a record of
eliminated nodes from which a core solution expands back to a full choice. The
reductions, applied until none applies:

* Forbidden strategies (``+inf`` node cost, or an edge row/column of ``+inf``) are
  pruned.
* Parallel edges between the same two nodes (either direction) are merged: their
  matrices add up. Self-loops fold their diagonal into the node cost.
* An edge whose matrix is separable, ``M[k, l] = a[k] + b[l]`` (constant matrices,
  and every edge of a node with one strategy, included), folds ``a`` and ``b`` into
  the two node costs and disappears.
* A node free of memory coupling (below) with at most two neighbours is eliminated
  by minimizing it out, as in variable elimination for pairwise models: with no
  neighbour it takes its cheapest strategy; with one neighbour ``u`` the cost
  ``min_l M[k, l] + c_v[l]`` moves onto ``u``'s strategy ``k``; with two neighbours
  ``u, w`` a new edge ``M'[k, m] = min_l A[k, l] + c_v[l] + B[l, m]`` joins them
  (merged with an existing ``u``–``w`` edge). The minimizing strategies are recorded
  for the expansion. Trees and series-parallel graphs without memory coupling reduce
  to nothing, which subsumes Alpa's "follow" merging.
* A strategy is pruned when another strategy of the same node is at least as good
  everywhere: node cost, every incident edge row, and memory when the node is
  coupled (ties keep the lowest strategy).
* Given the cost ``upper_bound`` of a known feasible choice, a strategy or edge
  pair whose cost alone lifts the problem's lower bound (Σ minimum node costs +
  Σ minimum edge costs) above ``upper_bound`` is pruned.

A node is *memory-coupled* when it belongs to a live set that can exceed the budget
(the sum of its members' largest memories is over it) and its memory differs
between its strategies; only coupled nodes keep their memory in the core, and only
live sets that can exceed the budget become core constraints (each over the members
whose memory varies, with the budget less every member's smallest memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from hlo_go.errors import HloGoError
from hlo_go.sharding.problem import ShardingProblem, live_set_layout

# Matrices within this relative tolerance of separable are folded.
_SEPARABLE_RTOL = 1e-12
# Pruning by an upper bound keeps what is within this relative margin of it.
_BOUND_RTOL = 1e-9


class InfeasibleProblem(ValueError, HloGoError):
    """No choice satisfies the problem: a node without usable strategy, or a live set
    that exceeds the memory budget even with every member's smallest memory."""


class CoreProblem(NamedTuple):
    """The reduced problem an ILP solves.

    Attributes:
      nodes: int64[R], the original ids of the core nodes.
      strategies: per core node, int64[K_i], the original strategy ids still allowed.
      node_cost: per core node, float64[K_i], cost of each allowed strategy, with the
        costs folded in from reduced edges and eliminated nodes.
      node_memory: per core node, float64[K_i], memory of each allowed strategy.
      edge_ends: int64[F, 2], core-node indices ``(a, b)`` of each core edge.
      edge_cost: per core edge, float64[K_a, K_b]; ``+inf`` forbids a pair. Each has a
        finite entry (and after the reductions, each row and column has one).
      live_members: per memory constraint, int64 core-node indices of the members
        whose memory varies.
      live_capacity: float64[S], per memory constraint, the memory budget less every
        member's smallest memory: ``Σ_i node_memory[i][s_i] - min(node_memory[i])``
        over ``live_members`` must not exceed it.
      constant: seconds of the reduced parts, added to every core solution's cost.
    """

    nodes: np.ndarray
    strategies: tuple[np.ndarray, ...]
    node_cost: tuple[np.ndarray, ...]
    node_memory: tuple[np.ndarray, ...]
    edge_ends: np.ndarray
    edge_cost: tuple[np.ndarray, ...]
    live_members: tuple[np.ndarray, ...]
    live_capacity: np.ndarray
    constant: float


class _Step(NamedTuple):
    """One eliminated node: its strategy as a table of its remaining neighbours'."""

    node: int
    first: int  # -1, or the neighbour indexing the table's first axis
    second: int  # -1, or the neighbour indexing the table's second axis
    table: np.ndarray  # original strategy of ``node`` (0-, 1- or 2-D)


@dataclass(frozen=True)
class Reduction:
    """A problem reduced to a core, and the way back to a full choice.

    Attributes:
      core: the :class:`CoreProblem`.
      num_nodes: N of the original problem.
      steps: the eliminated nodes, in elimination order.
    """

    core: CoreProblem
    num_nodes: int
    steps: tuple[_Step, ...]

    def expand(self, core_choice: np.ndarray) -> np.ndarray:
        """The full choice of a core solution.

        Args:
          core_choice: int[R], the original strategy id of every core node (in the
            order of ``core.nodes``).

        Returns:
          int32[N], a strategy for every node: the core's, and for eliminated nodes the
          best strategy given the nodes they were eliminated into (the choice's cost
          equals the core solution's cost plus ``core.constant``).
        """
        choice = np.full(self.num_nodes, -1, np.int64)
        choice[self.core.nodes] = np.asarray(core_choice, np.int64)
        for step in reversed(self.steps):
            if step.first < 0:
                choice[step.node] = step.table
            elif step.second < 0:
                choice[step.node] = step.table[choice[step.first]]
            else:
                choice[step.node] = step.table[choice[step.first], choice[step.second]]
        return choice.astype(np.int32)


class _Reducer:
    """The mutable graph the reductions work on (see the module docstring)."""

    def __init__(self, problem: ShardingProblem) -> None:
        k = np.asarray(problem.num_strategies, np.int64)
        self.n = len(k)
        self.num_strategies = k
        self.budget = float(problem.memory_budget)
        self.live = live_set_layout(problem)
        costs = np.asarray(problem.node_cost, np.float64)
        memory = np.asarray(problem.node_memory, np.float64)
        self.cost: list[np.ndarray] = []
        self.strat: list[np.ndarray] = []
        self.mem: list[np.ndarray] = []
        for v in range(self.n):
            row = costs[v, : k[v]]
            allowed = np.flatnonzero(np.isfinite(row))
            if not allowed.size:
                raise InfeasibleProblem(f"node {v}: every strategy has infinite cost")
            self.strat.append(allowed)
            self.cost.append(row[allowed].copy())
            self.mem.append(memory[v, allowed].copy())
        self.min_mem = np.array([m.min() for m in self.mem]) if self.n else np.zeros(0)
        self.max_mem = np.array([m.max() for m in self.mem]) if self.n else np.zeros(0)
        self.adj: list[dict[int, int]] = [{} for _ in range(self.n)]
        self.ends: dict[int, tuple[int, int]] = {}
        self.mat: dict[int, np.ndarray] = {}
        self.next_edge = 0
        self.alive = np.ones(self.n, bool)
        self.coupled = np.zeros(self.n, bool)
        self.constant = 0.0
        self.steps: list[_Step] = []
        self.node_queue: list[int] = []
        self.queued = np.zeros(self.n, bool)
        self.touched = np.ones(self.n, bool)
        self.edge_queue: list[int] = []
        self.changed = False

    # ----------------------------------------------------------------- edits

    def oriented(self, e: int, v: int) -> np.ndarray:
        """Edge ``e``'s matrix with ``v``'s strategies as rows."""
        return self.mat[e] if self.ends[e][0] == v else self.mat[e].T

    def restrict(self, u: int, v: int, matrix: np.ndarray) -> np.ndarray:
        """An input edge matrix ``u`` → ``v`` restricted to the allowed strategies."""
        m = np.asarray(matrix, np.float64)
        rows, cols = self.strat[u], self.strat[v]
        if len(rows) < m.shape[0]:
            m = m[rows, :]
        if len(cols) < m.shape[1]:
            m = m[:, cols]
        return m

    def push(self, v: int) -> None:
        self.touched[v] = True
        if self.alive[v] and not self.queued[v]:
            self.queued[v] = True
            self.node_queue.append(v)

    def add_edge(self, a: int, b: int, matrix: np.ndarray) -> None:
        """Adds ``matrix`` (rows: ``a``'s strategies) to the edge ``a``–``b``."""
        if a == b:
            self.add_cost(a, np.diagonal(matrix).copy())
            return
        e = self.adj[a].get(b)
        if e is None:
            e = self.next_edge
            self.next_edge += 1
            self.ends[e] = (a, b)
            self.mat[e] = np.array(matrix, np.float64)
            self.adj[a][b] = e
            self.adj[b][a] = e
        else:
            self.mat[e] = self.mat[e] + (matrix if self.ends[e][0] == a else matrix.T)
        self.edge_queue.append(e)
        self.push(a)
        self.push(b)

    def remove_edge(self, e: int) -> None:
        a, b = self.ends.pop(e)
        del self.mat[e]
        del self.adj[a][b]
        del self.adj[b][a]
        self.push(a)
        self.push(b)

    def add_cost(self, v: int, delta: np.ndarray) -> None:
        self.cost[v] = self.cost[v] + delta
        finite = np.isfinite(self.cost[v])
        if not finite.all():
            self.prune(v, finite)
        self.push(v)

    def prune(self, v: int, keep: np.ndarray) -> None:
        """Keeps only the strategies ``keep`` of node ``v``."""
        if keep.all():
            return
        if not keep.any():
            raise InfeasibleProblem(f"node {v}: no strategy is feasible")
        self.changed = True
        self.cost[v] = self.cost[v][keep]
        self.strat[v] = self.strat[v][keep]
        self.mem[v] = self.mem[v][keep]
        self.min_mem[v] = self.mem[v].min()
        self.max_mem[v] = self.mem[v].max()
        for w, e in self.adj[v].items():
            self.mat[e] = self.mat[e][keep, :] if self.ends[e][0] == v else self.mat[e][:, keep]
            self.edge_queue.append(e)
            self.push(w)
        self.push(v)

    # ------------------------------------------------------------ reductions

    def simplify_edge(self, e: int) -> None:
        """Prunes all-forbidden rows and columns; folds a separable matrix."""
        a, b = self.ends[e]
        m = self.mat[e]
        high = m.max()
        if high == np.inf:
            finite = np.isfinite(m)
            rows, cols = finite.any(axis=1), finite.any(axis=0)
            if not rows.all():
                self.prune(a, rows)
            elif not cols.all():
                self.prune(b, cols)
            return
        if m.shape[0] > 1 and m.shape[1] > 1:
            shifted = m - m[:, :1]
            residual = np.abs(shifted - shifted[:1, :]).max()
            if residual > _SEPARABLE_RTOL * max(high, -m.min()):
                return
        self.remove_edge(e)
        self.add_cost(a, m[:, 0].copy())
        self.add_cost(b, m[0, :] - m[0, 0])

    def eliminate(self, v: int) -> None:
        """Minimizes out an uncoupled node with at most two neighbours."""
        neighbours = list(self.adj[v].items())
        cost_v, strat_v = self.cost[v], self.strat[v]
        if not neighbours:
            k = int(np.argmin(cost_v))
            self.constant += float(cost_v[k])
            self.steps.append(_Step(v, -1, -1, np.int64(strat_v[k])))
        elif len(neighbours) == 1:
            (u, e) = neighbours[0]
            through = self.oriented(e, u) + cost_v[None, :]
            best = np.argmin(through, axis=1)
            table = np.full(self.num_strategies[u], -1, np.int64)
            table[self.strat[u]] = strat_v[best]
            self.steps.append(_Step(v, u, -1, table))
            self.remove_edge(e)
            self.add_cost(u, through.min(axis=1))
        else:
            (u, e1), (w, e2) = neighbours
            through = (
                self.oriented(e1, u)[:, :, None]
                + cost_v[None, :, None]
                + self.oriented(e2, v)[None, :, :]
            )
            best = np.argmin(through, axis=1)
            table = np.full((self.num_strategies[u], self.num_strategies[w]), -1, np.int64)
            table[np.ix_(self.strat[u], self.strat[w])] = strat_v[best]
            self.steps.append(_Step(v, u, w, table))
            self.remove_edge(e1)
            self.remove_edge(e2)
            self.add_edge(u, w, through.min(axis=1))
        self.alive[v] = False

    def run(self, eliminate: bool) -> None:
        """Applies edge simplification and node elimination until neither applies."""
        while self.node_queue or self.edge_queue:
            if self.edge_queue:
                e = self.edge_queue.pop()
                if e in self.mat:
                    self.simplify_edge(e)
                continue
            v = self.node_queue.pop()
            self.queued[v] = False
            if eliminate and self.alive[v] and not self.coupled[v] and len(self.adj[v]) <= 2:
                self.eliminate(v)

    def update_coupling(self) -> None:
        """Recomputes which nodes are memory-coupled; queues the newly free ones."""
        live = self.live
        coupled = np.zeros(self.n, bool)
        if self.budget < np.inf and live.num_sets:
            low = np.bincount(live.member_set, self.min_mem[live.members], live.num_sets)
            high = np.bincount(live.member_set, self.max_mem[live.members], live.num_sets)
            if np.any(low > self.budget):
                s = int(np.flatnonzero(low > self.budget)[0])
                raise InfeasibleProblem(
                    f"live set {s} needs {low[s]:.6g} bytes with every member's smallest "
                    f"memory, over the budget of {self.budget:.6g}"
                )
            active = high > self.budget
            coupled[live.members[active[live.member_set]]] = True
            coupled &= self.max_mem > self.min_mem
        for v in np.flatnonzero(self.coupled & ~coupled):
            self.push(int(v))
        self.coupled = coupled

    def prune_dominated(self) -> None:
        """Prunes strategies another strategy of the same node dominates (nodes touched
        since the last call only)."""
        candidates = np.flatnonzero(self.alive & self.touched)
        self.touched[:] = False
        for v in candidates:
            size = len(self.strat[v])
            if size < 2:
                continue
            columns = [self.cost[v][:, None]]
            if self.coupled[v]:
                columns.append(self.mem[v][:, None])
            columns.extend(self.oriented(e, v) for e in self.adj[v].values())
            rows = np.hstack(columns)
            le = (rows[:, None, :] <= rows[None, :, :]).all(axis=2)  # le[i, j]: i ≤ j
            index = np.arange(size)
            dominates = le & (~le.T | (index[:, None] < index[None, :]))
            np.fill_diagonal(dominates, False)
            dominated = dominates.any(axis=0)
            if dominated.any():
                self.prune(int(v), ~dominated)

    def prune_by_bound(self, upper_bound: float) -> None:
        """Prunes strategies and edge pairs that alone push the lower bound past it.

        All tests use one snapshot, padded to ``[nodes, K]`` and ``[edges, K, K]``: the
        lower bound is Σ node minima + Σ edge minima; strategy ``k`` of ``v`` adds its
        excess over its node's minimum and, per incident edge, its row's minimum excess.
        """
        alive = np.flatnonzero(self.alive)
        if not alive.size:
            return
        width = max(len(self.strat[v]) for v in alive)
        position = np.full(self.n, -1, np.int64)
        position[alive] = np.arange(len(alive))
        costs = np.full((len(alive), width), np.inf)
        for i, v in enumerate(alive):
            costs[i, : len(self.cost[v])] = self.cost[v]
        edges = list(self.mat)
        ends = np.array([self.ends[e] for e in edges], np.int64).reshape(-1, 2)
        mats = np.full((len(edges), width, width), np.inf)
        for f, e in enumerate(edges):
            m = self.mat[e]
            mats[f, : m.shape[0], : m.shape[1]] = m
        edge_min = mats.min(axis=(1, 2)) if edges else np.zeros(0)
        if not np.all(np.isfinite(edge_min)):  # every pair forbidden: simplify_edge reports it
            self.edge_queue.extend(edges[f] for f in np.flatnonzero(~np.isfinite(edge_min)))
            return
        node_min = costs.min(axis=1)
        lower = self.constant + float(node_min.sum()) + float(edge_min.sum())
        limit = upper_bound + _BOUND_RTOL * max(abs(upper_bound), abs(lower), 1e-300)
        if lower > limit:
            return  # an inconsistent bound: keep everything
        extra = costs - node_min[:, None]
        if edges:
            np.add.at(extra, position[ends[:, 0]], mats.min(axis=2) - edge_min[:, None])
            np.add.at(extra, position[ends[:, 1]], mats.min(axis=1) - edge_min[:, None])
            over = lower + (mats - edge_min[:, None, None]) > limit
            for f in np.flatnonzero((over & np.isfinite(mats)).any(axis=(1, 2))):
                e = edges[f]
                m = self.mat[e]
                self.mat[e] = np.where(over[f, : m.shape[0], : m.shape[1]], np.inf, m)
                self.edge_queue.append(e)
                self.changed = True
        keep = lower + extra <= limit
        sizes = np.array([len(self.strat[v]) for v in alive])
        real = np.arange(width)[None, :] < sizes[:, None]
        for i in np.flatnonzero((real & ~keep).any(axis=1)):
            v = int(alive[i])
            self.prune(v, keep[i, : len(self.strat[v])])

    # ------------------------------------------------------------------ core

    def core(self) -> CoreProblem:
        nodes = np.flatnonzero(self.alive)
        index = np.full(self.n, -1, np.int64)
        index[nodes] = np.arange(len(nodes))
        edges = list(self.mat)
        ends = np.array([self.ends[e] for e in edges], np.int64).reshape(-1, 2)
        members, capacity = self.live_constraints(index)
        return CoreProblem(
            nodes=nodes.astype(np.int64),
            strategies=tuple(self.strat[v] for v in nodes),
            node_cost=tuple(self.cost[v] for v in nodes),
            node_memory=tuple(self.mem[v] for v in nodes),
            edge_ends=index[ends],
            edge_cost=tuple(self.mat[e] for e in edges),
            live_members=members,
            live_capacity=capacity,
            constant=float(self.constant),
        )

    def live_constraints(self, index: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The memory constraints of the live sets that can exceed the budget."""
        live = self.live
        if not (self.budget < np.inf and live.num_sets):
            return (), np.zeros(0)
        low = np.bincount(live.member_set, self.min_mem[live.members], live.num_sets)
        spread = self.max_mem - self.min_mem
        extra = np.bincount(live.member_set, spread[live.members], live.num_sets)
        capacity = self.budget - low
        if np.any(capacity < 0):
            s = int(np.flatnonzero(capacity < 0)[0])
            raise InfeasibleProblem(f"live set {s} exceeds the budget with smallest memories")
        active = np.flatnonzero(extra > capacity)
        keep = (spread[live.members] > 0) & np.isin(live.member_set, active)
        kept_members, kept_sets = live.members[keep], live.member_set[keep]
        if np.any(index[kept_members] < 0):  # an eliminated coupled node: a reducer bug
            raise AssertionError("a memory-coupled node was eliminated")
        starts = np.searchsorted(kept_sets, active)
        stops = np.searchsorted(kept_sets, active, side="right")
        unique: dict[bytes, int] = {}
        groups: list[np.ndarray] = []
        caps: list[float] = []
        for s, lo, hi in zip(active, starts, stops, strict=True):
            group = np.unique(index[kept_members[lo:hi]])
            key = group.tobytes()
            at = unique.get(key)
            if at is None:
                unique[key] = len(groups)
                groups.append(group)
                caps.append(float(capacity[s]))
            else:
                caps[at] = min(caps[at], float(capacity[s]))
        return tuple(groups), np.array(caps, np.float64)


def reduce_problem(
    problem: ShardingProblem,
    *,
    upper_bound: float = np.inf,
    eliminate: bool = True,
    max_passes: int = 8,
) -> Reduction:
    """Reduces a problem to a core with the same optimum (see the module docstring).

    Args:
      problem: the problem.
      upper_bound: the cost of a choice known to fit the memory budget, for pruning
        by bound (``inf``: no such pruning). A larger value than the optimum's is
        safe; a value below the optimum would prune the optimum away.
      eliminate: apply all reductions (False: only prune forbidden strategies and
        put every node and edge in the core, for comparison).
      max_passes: at most this many passes of dominance and bound pruning.

    Returns:
      The :class:`Reduction`.

    Raises:
      InfeasibleProblem: the reductions prove that no choice is feasible.
    """
    reducer = _Reducer(problem)
    if not eliminate:
        return _unreduced(problem, reducer)
    src = np.asarray(problem.edge_src, np.int64)
    dst = np.asarray(problem.edge_dst, np.int64)
    for e, matrix in enumerate(problem.edge_cost):
        u, v = int(src[e]), int(dst[e])
        reducer.add_edge(u, v, reducer.restrict(u, v, matrix))
    reducer.update_coupling()
    for v in range(reducer.n - 1, -1, -1):
        reducer.push(v)
    reducer.run(eliminate=True)
    for _ in range(max_passes):
        reducer.changed = False
        reducer.prune_dominated()
        if upper_bound < np.inf:
            reducer.prune_by_bound(upper_bound)
        reducer.update_coupling()
        reducer.run(eliminate=True)
        if not reducer.changed:
            break
    return Reduction(reducer.core(), reducer.n, tuple(reducer.steps))


def _unreduced(problem: ShardingProblem, reducer: _Reducer) -> Reduction:
    """Every node and edge in the core, only forbidden strategies removed."""
    src = np.asarray(problem.edge_src, np.int64)
    dst = np.asarray(problem.edge_dst, np.int64)
    matrices: list[np.ndarray] = []
    for e, matrix in enumerate(problem.edge_cost):
        u, v = int(src[e]), int(dst[e])
        m = reducer.restrict(u, v, matrix)
        if not np.isfinite(m).any():
            raise InfeasibleProblem(f"edge {e} ({u} -> {v}): every pair is forbidden")
        matrices.append(m)
    index = np.arange(reducer.n, dtype=np.int64)
    members, capacity = reducer.live_constraints(index)
    core = CoreProblem(
        nodes=index,
        strategies=tuple(reducer.strat),
        node_cost=tuple(reducer.cost),
        node_memory=tuple(reducer.mem),
        edge_ends=np.stack([src, dst], axis=1).reshape(-1, 2),
        edge_cost=tuple(matrices),
        live_members=members,
        live_capacity=capacity,
        constant=0.0,
    )
    return Reduction(core, reducer.n, ())
