"""What the sharding policy sees: per-node and per-strategy features, the padded input.

Strategy features (``s_{v,k}``, scale-free or in asinh of microseconds, so they mean the
same on every graph; costs are those of the problem the actions are scored on, see
:mod:`~hlo_go.sharding.learned.action`): whether ``k`` is the replicated strategy;
``log(1 + excess)`` of its node cost over the node's cheapest strategy, and the
difference in time; the pieces the work is split into (``log mesh.axes_size(work_axes) /
log mesh.size``); whether it runs a collective itself and its cost; the output-memory
ratio to replicated; for each mesh axis whether it splits the output's leading, last or a
middle dimension and whether it divides the work; the resharding costs with producers and
consumers that stay replicated, and at best; the cost of switching ``v`` alone to ``k``
while its neighbours stay replicated; and, with ``greedy_features`` (default), whether
``k`` is the greedy choice (the cheaper of :func:`hlo_go.sharding.solve_greedy` and
replicated) and the cost of switching ``v`` alone to ``k`` while every other node keeps
it.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jraph
import numpy as np

from hlo_go.gonet import prepare_input
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.learned.action import ActionProblem, action_problem
from hlo_go.sharding.learned.config import MAX_MESH_AXES, ShardingPolicyConfig
from hlo_go.sharding.learned.prior import greedy_hint
from hlo_go.sharding.problem import ShardingProblem
from hlo_go.sharding.strategies import MAX_STRATEGIES

TIME_SCALE_S = 1e-6
"""Times enter the features as ``asinh(t / TIME_SCALE_S) / 5``."""


# Per-strategy feature columns (see strategy_features).
_STRATEGY_BASE = (
    "is_replicated",
    "log_cost_excess",
    "cost_delta",
    "pieces",
    "has_collective",
    "collective_cost",
    "memory_ratio",
    "reshard_in_from_replicated",
    "reshard_in_best",
    "reshard_out_to_replicated",
    "reshard_out_best",
    "is_greedy",
    "switch_regret_greedy",
    "switch_regret_replicated",
)
_AXIS_COLUMNS = ("out_dim0", "out_last", "out_middle", "work")
STRATEGY_FEATURE_NAMES: tuple[str, ...] = _STRATEGY_BASE + tuple(
    f"axis{a}_{c}" for a in range(MAX_MESH_AXES) for c in _AXIS_COLUMNS
)
"""Names of the per-strategy feature columns, in order."""

NODE_FEATURE_NAMES: tuple[str, ...] = (
    "log_num_strategies",
    "replicated_cost",
    "max_log_cost_excess",
    "greedy_pieces",
    *(f"mesh_axis{a}" for a in range(MAX_MESH_AXES)),
)
"""Names of the per-node columns appended to the OpGraph features, in order."""


def _scaled_time(seconds: np.ndarray) -> np.ndarray:
    return np.arcsinh(np.asarray(seconds, np.float64) / TIME_SCALE_S) / 5.0


class StrategyFeatures(NamedTuple):
    """What the policy sees of a graph's strategies, in node-id order.

    Attributes:
      node: ``float32[N, len(NODE_FEATURE_NAMES)]`` per-node summaries.
      strategy: ``float32[N, MAX_STRATEGIES, len(STRATEGY_FEATURE_NAMES)]``; zero
        beyond ``K_v``.
      valid: ``bool[N, MAX_STRATEGIES]`` strategies that may be chosen (finite cost).
      prior: ``float32[N, MAX_STRATEGIES]`` the prior's indicator (see the config).
      hint: ``int64[N]`` greedy's choice on the problem described (what ``is_greedy``
        marks), or None without ``greedy_features``.
    """

    node: np.ndarray
    strategy: np.ndarray
    valid: np.ndarray
    prior: np.ndarray
    hint: np.ndarray | None = None


def strategy_features(
    sg: ShardingGraph, config: ShardingPolicyConfig, problem: ShardingProblem | None = None
) -> StrategyFeatures:
    """Describes every strategy of every node (see the module docstring).

    Args:
      sg: the prepared module (strategy structure: pieces, axes, collectives, memory).
      config: ``greedy_features`` and ``prior``.
      problem: the problem the actions are scored on (default ``sg.problem``; the
        policy passes its :func:`action_problem`): costs, edges and validity.

    Returns:
      The :class:`StrategyFeatures`.
    """
    problem = sg.problem if problem is None else problem
    mesh = sg.mesh
    n, kk = sg.num_nodes, MAX_STRATEGIES
    counts = np.asarray(problem.num_strategies, np.int64)
    width = problem.node_cost.shape[1]
    if width > kk:
        raise ValueError(f"graph has {width} strategy slots; the policy handles {kk}")
    cost = np.full((n, kk), np.inf)
    cost[:, :width] = problem.node_cost
    valid = np.isfinite(cost) & (np.arange(kk) < counts[:, None])
    none_valid = ~valid.any(1)
    valid[none_valid, 0] = True
    cost_f = np.where(valid, cost, 0.0)
    memory = np.zeros((n, kk))
    memory[:, : sg.problem.node_memory.shape[1]] = sg.problem.node_memory

    # Node costs against the node's cheapest strategy.
    base = np.where(valid, cost_f, np.inf).min(1, keepdims=True)
    log_ratio = np.minimum(np.log1p((cost_f - base) / (np.abs(base) + 1e-7)), 8.0) / 4.0
    log_ratio = np.where(valid, log_ratio, 0.0)
    delta = _scaled_time(cost_f - base)
    mem_ratio = np.where(memory[:, :1] > 0, memory / np.maximum(memory[:, :1], 1e-30), 1.0)

    # Structure of each strategy: pieces, collectives, which axes split which dimension.
    log_size = math.log(max(mesh.size, 2))
    pieces = np.zeros((n, kk))
    has_coll = np.zeros((n, kk))
    coll_cost = np.zeros((n, kk))
    axes_cols = np.zeros((n, kk, MAX_MESH_AXES, len(_AXIS_COLUMNS)))
    for v, options in enumerate(sg.strategies):
        for k, s in enumerate(options[:kk]):
            pieces[v, k] = math.log(mesh.axes_size(s.work_axes)) / log_size
            if s.collectives:
                has_coll[v, k] = 1.0
                coll_cost[v, k] = sum(sg.links.cost(c, b, a) for c, b, a in s.collectives)
            for a in s.work_axes:
                axes_cols[v, k, min(a, MAX_MESH_AXES - 1), 3] = 1.0
            if s.output is None:
                continue
            rank = len(s.output)
            for d, dim_axes in enumerate(s.output):
                column = 0 if d == 0 else (1 if d == rank - 1 else 2)
                for a in dim_axes:
                    axes_cols[v, k, min(a, MAX_MESH_AXES - 1), column] = 1.0

    # Resharding with neighbours: replicated ones, the best case, and greedy's choice.
    greedy = greedy_hint(problem, valid) if config.greedy_features else None
    cap = 1.0  # seconds: forbidden pairs (inf) count as this much
    in_rep, in_best, out_rep, out_best = (np.zeros((n, kk)) for _ in range(4))
    in_greedy, out_greedy = np.zeros((n, kk)), np.zeros((n, kk))
    src_all, dst_all = np.asarray(problem.edge_src), np.asarray(problem.edge_dst)
    for e, matrix in enumerate(problem.edge_cost):
        m = np.minimum(np.asarray(matrix, np.float64), cap)
        u, v = int(src_all[e]), int(dst_all[e])
        ku, kv = m.shape
        in_rep[v, :kv] += m[0]
        in_best[v, :kv] += m.min(0)
        out_rep[u, :ku] += m[:, 0]
        out_best[u, :ku] += m.min(1)
        if greedy is not None:
            in_greedy[v, :kv] += m[greedy[u]]
            out_greedy[u, :ku] += m[:, greedy[v]]
    local_rep = cost_f + in_rep + out_rep
    regret_rep = _scaled_time(local_rep - np.where(valid, local_rep, np.inf).min(1, keepdims=True))
    is_greedy = np.zeros((n, kk))
    regret_greedy = np.zeros((n, kk))
    if greedy is not None:
        is_greedy[np.arange(n), greedy] = 1.0
        local_greedy = cost_f + in_greedy + out_greedy
        regret_greedy = _scaled_time(local_greedy - local_greedy[np.arange(n), greedy][:, None])

    columns = [
        np.broadcast_to((np.arange(kk) == 0).astype(np.float64), (n, kk)),
        log_ratio,
        delta,
        pieces,
        has_coll,
        _scaled_time(coll_cost),
        np.clip(mem_ratio, 0.0, 2.0),
        _scaled_time(in_rep),
        _scaled_time(in_best),
        _scaled_time(out_rep),
        _scaled_time(out_best),
        is_greedy,
        regret_greedy,
        regret_rep,
    ]
    strategy = np.concatenate(
        [np.stack(columns, -1), axes_cols.reshape(n, kk, -1)], axis=-1
    ).astype(np.float32)
    strategy[~valid] = 0.0

    mesh_axes = np.zeros(MAX_MESH_AXES)
    for a, size in enumerate(mesh.shape[:MAX_MESH_AXES]):
        mesh_axes[a] = math.log2(size) / 3.0
    spread = np.where(valid, log_ratio, 0.0).max(1)
    greedy_pieces = pieces[np.arange(n), greedy] if greedy is not None else np.zeros(n)
    node = np.concatenate(
        [
            np.stack(
                [
                    np.log2(np.maximum(counts, 1)) / 5.0,
                    _scaled_time(cost_f[:, 0]),
                    spread,
                    greedy_pieces,
                ],
                -1,
            ),
            np.broadcast_to(mesh_axes, (n, MAX_MESH_AXES)),
        ],
        axis=-1,
    ).astype(np.float32)
    if config.prior == "greedy":
        prior = is_greedy
    elif config.prior == "replicated":
        prior = np.broadcast_to((np.arange(kk) == 0).astype(np.float64), (n, kk))
    else:
        prior = np.zeros((n, kk))
    return StrategyFeatures(node, strategy, valid, prior.astype(np.float32), greedy)


class ShardingInput(NamedTuple):
    """One sharding graph, padded to its bucket and relabeled into topological positions.

    Attributes:
      graphs: the ``jraph.GraphsTuple`` of :func:`hlo_go.gonet.prepare_input` with node
        features widened by :data:`NODE_FEATURE_NAMES` and extra node arrays
        ``strategy`` (``float32[P, K, F_s]``), ``valid`` (``bool[P, K]``) and ``prior``
        (``float32[P, K]``). The only part that goes to the device.
      order: ``int32[n]``, the node id at each real position.
      num_nodes: ``n``, the real nodes.
      num_devices: the mesh's device count (the graph embedding's ``D``).
      action: the problem the actions are scored on, and the way from actions to full
        choices (:class:`ActionProblem`).
      hint: ``int64[n]`` greedy's per-node actions on ``action.problem`` (node ids), or
        None without ``greedy_features``.
    """

    graphs: jraph.GraphsTuple
    order: np.ndarray
    num_nodes: int
    num_devices: int
    action: ActionProblem
    hint: np.ndarray | None = None

    @property
    def bucket(self) -> tuple[int, int]:
        """(padded nodes, padded edges): the shapes a jitted function compiles for."""
        return int(self.graphs.nodes["features"].shape[0]), int(self.graphs.senders.shape[0])

    def choices(self, actions: np.ndarray) -> np.ndarray:
        """Per-position actions ``[..., P]`` → full choices ``int64[..., n]`` (node ids)."""
        return self.action.expand(self.to_nodes(actions))

    def to_nodes(self, actions: np.ndarray) -> np.ndarray:
        """Per-position actions ``[..., P]`` → per-node actions ``int64[..., n]``."""
        actions = np.asarray(actions)
        out = np.empty((*actions.shape[:-1], self.num_nodes), np.int64)
        out[..., self.order] = actions[..., : self.num_nodes]
        return out

    def to_positions(self, values: np.ndarray, dtype: Any = np.int32) -> np.ndarray:
        """Per-node values ``[..., n]`` → per-position ``dtype[..., P]`` (padding 0)."""
        values = np.asarray(values)
        out = np.zeros((*values.shape[:-1], self.bucket[0]), dtype)
        out[..., : self.num_nodes] = values[..., self.order]
        return out


def prepare_sharding_input(sg: ShardingGraph, config: ShardingPolicyConfig) -> ShardingInput:
    """Features, padding and relabeling of one sharding graph (host side).

    Args:
      sg: the prepared module.
      config: the policy configuration.

    Returns:
      The :class:`ShardingInput`.

    Raises:
      ValueError: the mesh has more devices than ``config.max_devices``.
    """
    if sg.mesh.size > config.max_devices:
        raise ValueError(
            f"mesh {sg.mesh} has {sg.mesh.size} devices; config.max_devices is {config.max_devices}"
        )
    base = prepare_input(sg.graph, config.network)
    action = action_problem(sg, config)
    feats = strategy_features(sg, config, action.problem)
    n = sg.num_nodes
    size = base.graphs.nodes["features"].shape[0]
    order = base.order

    def positions(values: np.ndarray, fill: Any = 0) -> np.ndarray:
        out = np.full((size, *values.shape[1:]), fill, dtype=values.dtype)
        out[:n] = values[order]
        return out

    valid = positions(feats.valid, False)
    valid[n:, 0] = True  # padding rows: one (meaningless, uncounted) choice
    nodes = dict(base.graphs.nodes)
    nodes["features"] = np.concatenate([nodes["features"], positions(feats.node)], axis=-1).astype(
        np.float32
    )
    nodes["strategy"] = positions(feats.strategy)
    nodes["valid"] = valid
    nodes["prior"] = positions(feats.prior)
    return ShardingInput(
        base.graphs._replace(nodes=nodes), order, n, sg.mesh.size, action, feats.hint
    )
