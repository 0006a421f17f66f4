"""The sharding-strategy selection problem: arrays, validation and fast evaluation.

Every node ``v`` of a graph has ``K_v`` sharding strategies. Choosing one strategy
``s_v`` per node costs

    Σ_v node_cost[v, s_v] + Σ_e edge_cost[e][s_src(e), s_dst(e)]

seconds (the node's own compute and collectives, plus the resharding of every
producer's output into the layout its consumer's strategy needs), and is feasible
when every live set ``L`` (nodes whose outputs are alive at the same moment) fits
the per-device memory budget: ``Σ_{v∈L} node_memory[v, s_v] ≤ memory_budget``.
This is the problem Alpa and XLA's auto-sharding pass solve with an ILP
(:mod:`hlo_go.sharding.ilp`).

Evaluating a choice on graphs of tens of thousands of nodes is vectorized: the edge
matrices are packed once into one flat array (:func:`pack_edge_costs`), so all edge
costs of a choice are one gather. The packed layouts are cached per problem
(:func:`edge_cost_layout`, :func:`live_set_layout`); the arrays of a
:class:`ShardingProblem` are treated as immutable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class ShardingProblem(NamedTuple):
    """One strategy-selection problem as plain arrays.

    Attributes:
      num_strategies: int32[N], ``K_v ≥ 1`` strategies of node ``v``.
      node_cost: float64[N, K], seconds of compute and collectives inside node ``v``
        under strategy ``k``; ``+inf`` for ``k ≥ K_v`` (and for forbidden strategies).
      node_memory: float64[N, K], bytes per device of ``v``'s output under strategy
        ``k``; 0 for ``k ≥ K_v``.
      edge_src: int32[E], the producer node of each edge.
      edge_dst: int32[E], the consumer node of each edge.
      edge_cost: E matrices float64[K_src, K_dst]: seconds of resharding the
        producer's output from the producer's strategy to the layout the consumer's
        strategy needs (``+inf`` forbids a pair).
      live_sets: int32 arrays of node ids whose outputs are live at once (memory
        checkpoints); may be empty.
      memory_budget: bytes per device every live set must fit in; ``inf`` for no
        memory constraint.
    """

    num_strategies: np.ndarray
    node_cost: np.ndarray
    node_memory: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_cost: tuple[np.ndarray, ...]
    live_sets: tuple[np.ndarray, ...]
    memory_budget: float


class EdgeCostLayout(NamedTuple):
    """All edge matrices packed row-major into one flat array.

    Entry ``[k, l]`` of edge ``e``'s matrix is ``values[offset[e] + k * stride[e] + l]``.

    Attributes:
      values: float64[Σ_e K_src·K_dst], the matrices one after another.
      offset: int64[E], where each edge's matrix starts in ``values``.
      stride: int64[E], the row length of each matrix (``K_dst``).
    """

    values: np.ndarray
    offset: np.ndarray
    stride: np.ndarray


class LiveSetLayout(NamedTuple):
    """The live sets as flat membership lists, by set and by node.

    Attributes:
      members: int64[M], the node ids of all live sets, set after set.
      member_set: int64[M], the live set of each entry of ``members``.
      node_ptr: int64[N + 1], node ``v``'s live sets are
        ``node_sets[node_ptr[v]:node_ptr[v + 1]]``.
      node_sets: int64[M], live set ids grouped by node.
      num_sets: the number of live sets.
    """

    members: np.ndarray
    member_set: np.ndarray
    node_ptr: np.ndarray
    node_sets: np.ndarray
    num_sets: int


def pack_edge_costs(
    num_strategies: np.ndarray,
    edge_src: np.ndarray,
    edge_dst: np.ndarray,
    edge_cost: Sequence[np.ndarray],
) -> EdgeCostLayout:
    """Packs the edge matrices into one flat array.

    Args:
      num_strategies: int[N], strategies per node.
      edge_src: int[E], producers.
      edge_dst: int[E], consumers.
      edge_cost: E matrices, edge ``e``'s of shape ``[K_src, K_dst]``.

    Returns:
      The packed :class:`EdgeCostLayout`.

    Raises:
      ValueError: the number of matrices is not E, or a matrix's shape is not
        ``[K_src, K_dst]`` (the message names the edge).
    """
    k = np.asarray(num_strategies, np.int64)
    src = np.asarray(edge_src, np.int64)
    dst = np.asarray(edge_dst, np.int64)
    if len(edge_cost) != len(src):
        raise ValueError(f"{len(edge_cost)} edge matrices for {len(src)} edges")
    rows, cols = k[src], k[dst]
    shapes = [np.shape(m) for m in edge_cost]
    given = np.array([s if len(s) == 2 else (-1, -1) for s in shapes], np.int64).reshape(-1, 2)
    wrong = (given[:, 0] != rows) | (given[:, 1] != cols)
    if np.any(wrong):
        bad = int(np.flatnonzero(wrong)[0])
        raise ValueError(
            f"edge {bad} ({int(src[bad])} -> {int(dst[bad])}): matrix shape "
            f"{shapes[bad]}, expected ({int(rows[bad])}, {int(cols[bad])})"
        )
    sizes = rows * cols
    offset = np.zeros(len(src), np.int64)
    np.cumsum(sizes[:-1], out=offset[1:])
    values = (
        np.concatenate([np.asarray(m, np.float64).ravel() for m in edge_cost])
        if len(edge_cost)
        else np.zeros(0, np.float64)
    )
    return EdgeCostLayout(values, offset, cols)


def pack_live_sets(live_sets: Sequence[np.ndarray], num_nodes: int) -> LiveSetLayout:
    """Flattens the live sets into membership lists by set and by node.

    Args:
      live_sets: arrays of node ids.
      num_nodes: N.

    Returns:
      The :class:`LiveSetLayout`.

    Raises:
      ValueError: a live set names a node outside ``[0, N)``.
    """
    lengths = np.array([len(s) for s in live_sets], np.int64)
    members = (
        np.concatenate([np.asarray(s, np.int64).ravel() for s in live_sets])
        if len(live_sets)
        else np.zeros(0, np.int64)
    )
    if members.size and (members.min() < 0 or members.max() >= num_nodes):
        bad = int(np.flatnonzero((members < 0) | (members >= num_nodes))[0])
        raise ValueError(
            f"live set member {int(members[bad])} is not a node id in [0, {num_nodes})"
        )
    member_set = np.repeat(np.arange(len(live_sets), dtype=np.int64), lengths)
    by_node = np.argsort(members, kind="stable")
    node_ptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(np.bincount(members, minlength=num_nodes), out=node_ptr[1:])
    return LiveSetLayout(members, member_set, node_ptr, member_set[by_node], len(live_sets))


class _IdentityCache:
    """A small cache keyed by the identity of an object it keeps alive."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[int, tuple[Any, Any]] = {}

    def get(self, key_object: Any, make: Any) -> Any:
        entry = self._entries.get(id(key_object))
        if entry is not None and entry[0] is key_object:
            return entry[1]
        value = make()
        if len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[id(key_object)] = (key_object, value)
        return value


_EDGE_LAYOUTS = _IdentityCache(8)
_LIVE_LAYOUTS = _IdentityCache(8)


def edge_cost_layout(problem: ShardingProblem) -> EdgeCostLayout:
    """The packed edge matrices of ``problem``, cached by the identity of its ``edge_cost``.

    Args:
      problem: the problem.

    Returns:
      ``pack_edge_costs`` of the problem's edges (computed once per ``edge_cost`` tuple).
    """
    return _EDGE_LAYOUTS.get(
        problem.edge_cost,
        lambda: pack_edge_costs(
            problem.num_strategies, problem.edge_src, problem.edge_dst, problem.edge_cost
        ),
    )


def live_set_layout(problem: ShardingProblem) -> LiveSetLayout:
    """The flattened live sets of ``problem``, cached by the identity of its ``live_sets``.

    Args:
      problem: the problem.

    Returns:
      ``pack_live_sets`` of the problem's live sets.
    """
    n = len(problem.num_strategies)
    return _LIVE_LAYOUTS.get(problem.live_sets, lambda: pack_live_sets(problem.live_sets, n))


def validate_problem(problem: ShardingProblem) -> None:
    """Checks the shapes and ids of a problem.

    Args:
      problem: the problem.

    Raises:
      ValueError: a node with no strategy, arrays of inconsistent shapes, an edge
        endpoint or live-set member that is not a node id, or an edge matrix of the
        wrong shape; the message names the node or edge.
    """
    k = np.asarray(problem.num_strategies)
    n = len(k)
    if k.ndim != 1:
        raise ValueError(f"num_strategies must be 1-D, got shape {k.shape}")
    if n and k.min() < 1:
        raise ValueError(f"node {int(np.argmin(k))} has {int(k.min())} strategies (needs ≥ 1)")
    kmax = int(k.max()) if n else 0
    for name in ("node_cost", "node_memory"):
        shape = np.shape(getattr(problem, name))
        if len(shape) != 2 or shape[0] != n or shape[1] < kmax:
            raise ValueError(f"{name} has shape {shape}, expected ({n}, ≥{kmax})")
    src, dst = np.asarray(problem.edge_src), np.asarray(problem.edge_dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise ValueError(f"edge_src {src.shape} and edge_dst {dst.shape} must be equal 1-D")
    ends = np.concatenate([src, dst])
    if ends.size and (ends.min() < 0 or ends.max() >= n):
        bad = int(np.flatnonzero((ends < 0) | (ends >= n))[0]) % len(src)
        raise ValueError(
            f"edge {bad} ({int(src[bad])} -> {int(dst[bad])}) names a node not in [0, {n})"
        )
    edge_cost_layout(problem)
    live_set_layout(problem)


def validate_choice(problem: ShardingProblem, choice: np.ndarray) -> None:
    """Checks that ``choice`` picks one valid strategy per node.

    Args:
      problem: the problem.
      choice: int[N], one strategy per node.

    Raises:
      ValueError: ``choice`` has the wrong shape or non-integer values, or a node's
        strategy is outside ``[0, K_v)`` (the message names the first such node).
    """
    k = np.asarray(problem.num_strategies)
    c = np.asarray(choice)
    if c.shape != k.shape:
        raise ValueError(f"choice has shape {c.shape}, expected ({len(k)},)")
    if c.size and not np.issubdtype(c.dtype, np.integer):
        not_integer = ~np.isfinite(c) | (c != np.round(c))
        if np.any(not_integer):
            bad = int(np.flatnonzero(not_integer)[0])
            raise ValueError(f"node {bad}: strategy {c[bad]} is not an integer")
    bad_mask = (c < 0) | (c >= k)
    if np.any(bad_mask):
        bad = int(np.flatnonzero(bad_mask)[0])
        raise ValueError(f"node {bad}: strategy {int(c[bad])} is not in [0, {int(k[bad])})")


def total_cost(problem: ShardingProblem, choice: np.ndarray) -> float:
    """The cost in seconds of a choice: node costs plus edge (resharding) costs.

    Args:
      problem: the problem.
      choice: int[N], one strategy per node.

    Returns:
      ``Σ_v node_cost[v, s_v] + Σ_e edge_cost[e][s_src, s_dst]`` (``inf`` when the
      choice uses a forbidden strategy or pair).

    Raises:
      ValueError: an invalid choice (:func:`validate_choice`).
    """
    validate_choice(problem, choice)
    c = np.asarray(choice, np.int64)
    nodes = float(np.asarray(problem.node_cost)[np.arange(len(c)), c].sum())
    layout = edge_cost_layout(problem)
    if not len(layout.offset):
        return nodes
    src, dst = np.asarray(problem.edge_src), np.asarray(problem.edge_dst)
    index = layout.offset + c[src] * layout.stride + c[dst]
    return nodes + float(layout.values[index].sum())


def live_set_memory(problem: ShardingProblem, choice: np.ndarray) -> np.ndarray:
    """The memory of every live set under a choice.

    Args:
      problem: the problem.
      choice: int[N], one strategy per node.

    Returns:
      float64[S], bytes per device of each live set.

    Raises:
      ValueError: an invalid choice (:func:`validate_choice`).
    """
    validate_choice(problem, choice)
    c = np.asarray(choice, np.int64)
    layout = live_set_layout(problem)
    per_node = np.asarray(problem.node_memory)[np.arange(len(c)), c]
    return np.bincount(
        layout.member_set, weights=per_node[layout.members], minlength=layout.num_sets
    ).astype(np.float64)


def peak_memory(problem: ShardingProblem, choice: np.ndarray) -> float:
    """The largest live-set memory of a choice.

    Args:
      problem: the problem.
      choice: int[N], one strategy per node.

    Returns:
      The maximum over live sets of their bytes per device; 0 without live sets.

    Raises:
      ValueError: an invalid choice (:func:`validate_choice`).
    """
    memory = live_set_memory(problem, choice)
    return float(memory.max()) if memory.size else 0.0


def is_memory_feasible(problem: ShardingProblem, choice: np.ndarray) -> bool:
    """Whether every live set fits the memory budget under a choice.

    Args:
      problem: the problem.
      choice: int[N], one strategy per node.

    Returns:
      ``peak_memory(problem, choice) ≤ problem.memory_budget``.
    """
    return peak_memory(problem, choice) <= problem.memory_budget
