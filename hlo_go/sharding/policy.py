"""The learned sharding policy: the GO network with a pointer head over sharding strategies.

**Design choice.** Sharding is *not* added to :data:`hlo_go.gonet.TASKS`. The three GO
tasks share one action format (a fixed-width categorical per node, embedded and fed to
the next task), one decision type (:class:`~hlo_go.decisions.Decisions`: placement,
schedule and fusion priorities) and one environment (:mod:`hlo_go.rl.env`, scored by
the event simulator on a cluster); the trainer, agent, checkpoints and CLI all assume
those. A sharding decision differs in each: a node has ``K_v ≤ 32`` strategies whose
meaning changes from node to node, it needs per-strategy inputs, and it is scored by
:func:`hlo_go.sharding.problem.total_cost` on a :class:`~hlo_go.sharding.ShardingGraph`.
Widening TASKS would have changed every one of those interfaces, so this module is
self-contained and *reuses the GO modules by import*:

* encoder: :class:`~hlo_go.gonet.SageEncoder` (GraphSAGE) over the OpGraph's features
  plus a few per-node strategy summaries;
* graph embedding :class:`~hlo_go.gonet.GraphContext` (cluster size = mesh size) and
  :class:`~hlo_go.gonet.ValueHead`;
* one :class:`~hlo_go.gonet.FiLMGenerator` row modulating the
  :class:`~hlo_go.gonet.SegmentRecurrentStack` (Transformer-XL over the topological
  order), as for one GO task;
* a **pointer head**: strategy ``k`` of node ``v`` is described by features
  ``s_{v,k}`` (:func:`strategy_features`) and scored by a small MLP of the node's
  embedding and the strategy's, ``ℓ_{v,k} = w^⊤ relu(W_h relu(W_z LN(z_v) + W_s s_{v,k}))
  + b + ρ · prior_{v,k}``, so the same weights score strategies of any graph (a fixed
  32-way linear head would not: slot ``k`` means different things on different nodes);
  ``ℓ_{v,k}`` is masked to :data:`~hlo_go.gonet.MASKED_LOGIT` for ``k ≥ K_v`` and for
  forbidden (infinite-cost) strategies, and actions go through
  :func:`hlo_go.gonet.choose` (masked categorical, inverse-CDF sampling);
* PPO from :mod:`hlo_go.rl.ppo` (clipped surrogate, value loss, entropy bonus (off by
  default), Optax Adam with gradient clipping: :func:`~hlo_go.rl.ppo.ppo_update_step`,
  and :func:`~hlo_go.rl.ppo.minibatch_epochs` for global credit).

The head is not autoregressive (as in GO, every node's strategy is drawn independently
given the embeddings), so the network runs **once** per step: ``S`` samples are ``S``
draws from the same logits, and scoring ``B`` action sets in a PPO update is one
forward pass plus a gather.

**Action space** (``action_space``). ``"core"`` (default): the problem is first shrunk by
the exact reductions of :mod:`hlo_go.sharding.reduction` (the ILP's preprocessing:
variable elimination of chains and trees, dominated strategies pruned); the policy
decides the core nodes among their remaining strategies, every eliminated node then
takes its best strategy given them (:meth:`Reduction.expand`), and the reward sees the
full choice. Since independent per-node sampling cannot coordinate a whole chain of
nodes switching layout together, this is what lets a factorized policy reach such
moves. ``"full"``: every node over all its strategies.

**Credit** (``credit``). ``"local"`` (default): the cost is a sum of node and edge
terms, and the nodes are drawn independently given the logits, so the terms that do not
involve node ``v`` have zero expected effect on ``v``'s gradient: ``v``'s advantage is
minus its own cost and that of its incident edges (over ``t_ref``), against the mean of
the other samples, and PPO clips each node's own ratio — an unbiased, far lower-variance
estimator than one reward for a choice of thousands of nodes. ``"global"``: GO's, one
reward ``r`` per sampled choice with a value baseline, the log-probability summed over
nodes.

**Strategy features** (``s_{v,k}``, scale-free or in asinh of microseconds, so they mean
the same on every graph; costs are those of the problem the actions are scored on):
whether ``k`` is the replicated strategy; ``log(1 + excess)`` of its node cost over the
node's cheapest strategy, and the difference in time; the pieces the work is split into
(``log mesh.axes_size(work_axes) / log mesh.size``); whether it runs a collective
itself and its cost; the output-memory ratio to replicated; for each mesh axis whether
it splits the output's leading, last or a middle dimension and whether it divides the
work; the resharding costs with producers and consumers that stay replicated, and at
best; the cost of switching ``v`` alone to ``k`` while its neighbours stay replicated;
and, with ``greedy_features`` (default), whether ``k`` is the greedy choice (the cheaper
of :func:`hlo_go.sharding.solve_greedy` and replicated, milliseconds) and the cost of
switching ``v`` alone to ``k`` while every other node keeps it. With ``prior="greedy"``
(default) the learnable scalar ``ρ`` (initialized to ``prior_bias``) multiplies the
greedy indicator, so untrained samples explore around greedy's choice, as the GO
trainer's ``prior_bias`` starts near a baseline (``"replicated"``: around strategy 0;
``"none"``: the network's own initialization). Without a prior, training converged to
worse local optima (replicated-like) on gpt2/bert.

**Reward.** ``r = log(t_ref / total_cost(choice))`` with ``t_ref`` the cost of the
data-parallel choice (``reference="dp"``) or another method's; a choice that breaks the
memory budget or uses a forbidden pair gets ``infeasible_reward``. The best feasible
choice seen per graph (sampled, or the greedy decode every ``eval_every`` steps) is
kept and returned, as GO reports its best sample.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import optax
from flax import serialization
from tqdm.auto import tqdm

from hlo_go.gonet import (
    MASKED_LOGIT,
    FeedForwardStack,
    FiLMGenerator,
    GraphContext,
    PolicyConfig,
    SageEncoder,
    SegmentRecurrentStack,
    ValueHead,
    choose,
    prepare_input,
)
from hlo_go.rl.checkpoint import restore_params
from hlo_go.rl.ppo import (
    LossInfo,
    PPOBatch,
    PPOConfig,
    make_optimizer,
    minibatch_epochs,
    ppo_update_step,
)
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.greedy import fit_memory, solve_greedy
from hlo_go.sharding.problem import (
    ShardingProblem,
    edge_cost_layout,
    is_memory_feasible,
    live_set_layout,
    total_cost,
)
from hlo_go.sharding.reduction import Reduction, reduce_problem
from hlo_go.sharding.refine import DEFAULT_REFINE_S, DEFAULT_WINDOW, refine
from hlo_go.sharding.simulate import fits_memory
from hlo_go.sharding.strategies import MAX_STRATEGIES

Params = Any
"""A Flax variable dict: ``{"params": ...}``."""

MAX_MESH_AXES = 3
"""Mesh axes the strategy features describe (further axes are folded into the last)."""

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

DEFAULT_SAMPLES = 8
"""Samples :func:`policy_method` draws zero-shot besides the greedy decode."""

GUIDE_WEIGHTS: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
"""The weights ``λ`` of :func:`guided_choices` that the ``"policy"`` method tries."""

GUIDED_DESCENT_ROUNDS = 20
"""Rounds of coordinate descent on the true costs that end :func:`guided_choices`."""

DEFAULT_FINETUNE_STEPS = 20
"""Fine-tuning steps of the ``"policy-ft"`` method."""

MAX_FINETUNE_STEPS = 50
"""Fine-tuning is the paper's few-step regime: at most this many steps."""

PRIORS = ("greedy", "replicated", "none")
"""What fresh parameters may lean towards (:attr:`ShardingPolicyConfig.prior`)."""

ACTION_SPACES = ("core", "full")
"""What the policy decides (:attr:`ShardingPolicyConfig.action_space`)."""

CREDITS = ("local", "global")
"""Credit assignment schemes (:attr:`ShardingPolicyConfig.credit`)."""

_INIT_STREAM = 2**31 - 1  # fold_in stream of the parameter key (steps use 0, 1, ...)


@dataclasses.dataclass(frozen=True)
class ShardingPolicyConfig:
    """Sizes of the sharding network and the settings of its reward."""

    # The GO network's sizes and switches (hidden size, GNN depth, attention, FiLM,
    # buckets); the task fields (task_order, priority_bins, task_recurrence) are unused.
    network: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    # D_max of the graph embedding's device-count one-hot; meshes of up to this many devices.
    max_devices: int = 64
    # Describe strategies relative to the greedy solver's choice too (is_greedy, regret).
    greedy_features: bool = True
    # What fresh parameters lean towards: "greedy" (greedy's choice), "replicated"
    # (strategy 0) or "none" (the network's initialization alone).
    prior: str = "greedy"
    # Initial value of the learnable scale of the prior indicator in the logits.
    prior_bias: float = 4.0
    # Sharding method whose cost is the reward's t_ref ("dp", "greedy", "replicated", ...).
    reference: str = "dp"
    # Reward of a choice that breaks the memory budget or has infinite cost.
    infeasible_reward: float = -3.0
    # Score the greedy decode (and keep it if best) every this many steps of a graph.
    eval_every: int = 10
    # Action space: "core" (the nodes and strategies left by the exact reductions of
    # hlo_go.sharding.reduction; eliminated nodes follow their neighbours optimally) or
    # "full" (every node, every strategy).
    action_space: str = "core"
    # Credit assignment: "local" (each node's advantage from its own cost and its edges',
    # per-node PPO ratios) or "global" (GO's: one reward per sampled choice).
    credit: str = "local"

    def __post_init__(self) -> None:
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        if self.prior == "greedy" and not self.greedy_features:
            raise ValueError("prior='greedy' needs greedy_features=True")
        if self.action_space not in ACTION_SPACES:
            raise ValueError(
                f"action_space must be one of {ACTION_SPACES}, got {self.action_space!r}"
            )
        if self.credit not in CREDITS:
            raise ValueError(f"credit must be one of {CREDITS}, got {self.credit!r}")
        if self.max_devices < 1 or self.eval_every < 1:
            raise ValueError("max_devices and eval_every must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly nested dict (see :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ShardingPolicyConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        network = dict(data.pop("network"))
        network["task_order"] = tuple(network["task_order"])
        return ShardingPolicyConfig(network=PolicyConfig(**network), **data)


def _ppo_default() -> PPOConfig:
    # No entropy bonus: it sums over every node, so it would swamp the surrogate.
    return PPOConfig(epochs=4, minibatch_size=0, learning_rate=1e-3, entropy_coef=0.0)


# -- features -----------------------------------------------------------------------------


def _scaled_time(seconds: np.ndarray) -> np.ndarray:
    return np.arcsinh(np.asarray(seconds, np.float64) / TIME_SCALE_S) / 5.0


class ActionProblem(NamedTuple):
    """The problem the policy's actions are scored on, over the graph's node ids.

    Attributes:
      problem: a :class:`~hlo_go.sharding.ShardingProblem` on the same nodes and
        strategy ids as ``sg.problem``. For the ``"core"`` action space, core nodes keep
        the strategies the reductions left, priced with the costs folded into them, and
        the core's edges; every other node has strategy 0 alone at cost 0 and no edge
        (its strategy is decided by :meth:`expand`); no memory constraint (the budget is
        checked on expanded choices).
      reduction: the :class:`~hlo_go.sharding.reduction.Reduction`, or None (``"full"``).
      constant: cost of the reduced parts: ``total_cost(sg.problem, expand(c)) ==
        total_cost(problem, c) + constant``.
    """

    problem: ShardingProblem
    reduction: Reduction | None
    constant: float

    def expand(self, actions: np.ndarray) -> np.ndarray:
        """Per-node actions ``int[..., n]`` → full choices ``int64[..., n]``."""
        actions = np.asarray(actions, np.int64)
        if self.reduction is None:
            return actions
        nodes = self.reduction.core.nodes
        flat = actions.reshape(-1, actions.shape[-1])
        out = np.stack([self.reduction.expand(a[nodes]) for a in flat]).astype(np.int64)
        return out.reshape(actions.shape)

    def restrict(self, choices: np.ndarray) -> np.ndarray:
        """Full choices ``int[..., n]`` → the actions that expand to them at core nodes
        (0 at every other node)."""
        choices = np.asarray(choices, np.int64)
        if self.reduction is None:
            return choices
        out = np.zeros_like(choices)
        nodes = self.reduction.core.nodes
        out[..., nodes] = choices[..., nodes]
        return out


def action_problem(sg: ShardingGraph, config: ShardingPolicyConfig) -> ActionProblem:
    """The problem the policy decides (see :class:`ActionProblem`).

    Args:
      sg: the prepared module.
      config: ``action_space``.

    Returns:
      The :class:`ActionProblem`.
    """
    problem = sg.problem
    if config.action_space == "full":
        return ActionProblem(problem, None, 0.0)
    reduction = reduce_problem(problem)
    core = reduction.core
    n = sg.num_nodes
    width = problem.node_cost.shape[1]
    counts = np.ones(n, np.int32)
    node_cost = np.full((n, width), np.inf)
    node_cost[:, 0] = 0.0
    for i, v in enumerate(core.nodes.tolist()):
        counts[v] = problem.num_strategies[v]
        node_cost[v] = np.inf
        node_cost[v, core.strategies[i]] = core.node_cost[i]
    matrices = []
    for (a, b), matrix in zip(core.edge_ends.tolist(), core.edge_cost, strict=True):
        u, v = int(core.nodes[a]), int(core.nodes[b])
        full = np.full((counts[u], counts[v]), np.inf)
        full[np.ix_(core.strategies[a], core.strategies[b])] = matrix
        matrices.append(full)
    ends = np.asarray(core.edge_ends, np.int64).reshape(-1, 2)
    embedded = ShardingProblem(
        num_strategies=counts,
        node_cost=node_cost,
        node_memory=np.where(counts[:, None] > np.arange(width), problem.node_memory, 0.0),
        edge_src=core.nodes[ends[:, 0]].astype(np.int32),
        edge_dst=core.nodes[ends[:, 1]].astype(np.int32),
        edge_cost=tuple(matrices),
        live_sets=(),
        memory_budget=math.inf,
    )
    return ActionProblem(embedded, reduction, float(core.constant))


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


def _greedy_hint(problem: ShardingProblem, valid: np.ndarray) -> np.ndarray:
    """The cheaper of :func:`~hlo_go.sharding.solve_greedy`'s choice and the replicated
    one (as the ``greedy`` method), ``int64[N]``."""
    found = np.asarray(solve_greedy(problem), np.int64)
    if not valid[:, 0].all():
        return found
    zeros = np.zeros_like(found)
    return zeros if total_cost(problem, zeros) < total_cost(problem, found) else found


def prior_choice(sg: ShardingGraph, config: ShardingPolicyConfig | None = None) -> np.ndarray:
    """The choice the greedy prior alone leads to: :func:`~hlo_go.sharding.solve_greedy`
    (or replicated, if cheaper) on the policy's action problem, expanded to every node.

    With the default ``"core"`` action space that is greedy on the exact reductions'
    core, every eliminated node following it optimally. An untrained policy's greedy
    decode is this choice (the prior's logit bonus outweighs fresh weights), so it is the
    baseline that measures what training adds (the ``core-greedy`` method).

    Args:
      sg: the graph.
      config: ``action_space`` (default :class:`ShardingPolicyConfig`).

    Returns:
      ``int64[n]``, a strategy per node.
    """
    action = action_problem(sg, config or ShardingPolicyConfig())
    return action.expand(_greedy_hint(action.problem, _valid(action.problem)))


def _valid(problem: ShardingProblem) -> np.ndarray:
    """``bool[N, K]``: the finite-cost strategies of each node (strategy 0 if none)."""
    cost = np.asarray(problem.node_cost)
    counts = np.asarray(problem.num_strategies)
    valid = np.isfinite(cost) & (np.arange(cost.shape[1]) < counts[:, None])
    valid[~valid.any(1), 0] = True
    return valid


def _prior_actions(inputs: ShardingInput) -> np.ndarray:
    """The prior's per-node actions on ``inputs``' action problem (see :func:`prior_choice`):
    the hint its features were computed with, or else computed now."""
    if inputs.hint is not None:
        return inputs.hint
    problem = inputs.action.problem
    return _greedy_hint(problem, _valid(problem))


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
    greedy = _greedy_hint(problem, valid) if config.greedy_features else None
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


# -- network ------------------------------------------------------------------------------


class ShardingNetwork(nn.Module):
    """GraphSAGE, FiLM-modulated segment-recurrent attention, pointer head, value head.

    Attributes:
      config: the policy configuration.
    """

    config: ShardingPolicyConfig

    @nn.compact
    def __call__(
        self, graphs: jraph.GraphsTuple, num_devices: jnp.ndarray
    ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Strategy logits of every node, and the graph's value.

        Args:
          graphs: :attr:`ShardingInput.graphs`.
          num_devices: ``int32[]``, the mesh's device count.

        Returns:
          ``(logits, value)``: ``float32[P, K]`` with invalid strategies at
          :data:`~hlo_go.gonet.MASKED_LOGIT`, and ``float32[]``.
        """
        cfg = self.config.network
        d = cfg.hidden_size
        mask = graphs.nodes["mask"]
        h = SageEncoder(cfg, name="encoder")(graphs)
        context = GraphContext(d, self.config.max_devices, name="context")(h, mask, num_devices)
        value = ValueHead(d, name="value_head")(context)
        layers = max(cfg.attention_layers, 1)
        if cfg.modulation:
            modulation = FiLMGenerator(d, 1, cfg.attention_layers, name="film")(context)[0]
        else:
            modulation = jnp.zeros((layers, 4, d), h.dtype)
        stack = SegmentRecurrentStack if cfg.attention else FeedForwardStack
        z = stack(cfg, name="stack")(h, mask, modulation)
        query = nn.Dense(d, name="node_query")(nn.LayerNorm(name="head_norm")(z))
        keys = nn.Dense(d, name="strategy_embed")(graphs.nodes["strategy"])
        u = nn.relu(query[:, None, :] + keys)
        u = nn.relu(nn.Dense(d, name="head_hidden")(u))
        logits = nn.Dense(1, name="head_logit")(u)[..., 0]
        scale = self.param(
            "prior_scale", nn.initializers.constant(self.config.prior_bias), (), jnp.float32
        )
        logits = logits + scale * graphs.nodes["prior"]
        return jnp.where(graphs.nodes["valid"], logits, MASKED_LOGIT), value


# -- policy -------------------------------------------------------------------------------


class ShardingPolicy:
    """The sharding network behind jitted sample / greedy / log-prob / value functions.

    Each jitted function compiles once per bucket (:func:`hlo_go.gonet.policy_bucket`)
    and per sample count; :attr:`trace_counts` counts the traces. PPO updates are
    :class:`ShardingLearner`'s.

    Args:
      config: network sizes and reward settings.
    """

    def __init__(self, config: ShardingPolicyConfig | None = None) -> None:
        self.config = config or ShardingPolicyConfig()
        self.network = ShardingNetwork(self.config)
        self.traces: dict[str, int] = {}
        self._init_jit = jax.jit(self._init_fn)
        self._sample_jit = jax.jit(self._sample_fn, static_argnums=4)
        self._greedy_jit = jax.jit(self._greedy_fn)
        self._evaluate_jit = jax.jit(self._evaluate_fn)
        self._log_probs_jit = jax.jit(self._log_probs_fn)

    @property
    def trace_counts(self) -> dict[str, int]:
        """Function name -> times it was traced (= compiled) so far."""
        return dict(self.traces)

    def prepare(self, sg: ShardingGraph | ShardingInput) -> ShardingInput:
        """``sg``'s :class:`ShardingInput` (passed through if it already is one)."""
        return sg if isinstance(sg, ShardingInput) else prepare_sharding_input(sg, self.config)

    # -- jitted bodies --------------------------------------------------------------------

    def _count(self, name: str) -> None:
        self.traces[name] = self.traces.get(name, 0) + 1

    def _init_fn(self, key: jax.Array, graphs: Any, devices: jax.Array) -> Params:
        self._count("init")
        return self.network.init(key, graphs, devices)

    def _sample_fn(
        self, params: Params, graphs: Any, devices: jax.Array, key: jax.Array, count: int
    ):
        self._count("sample")
        logits, value = self.network.apply(params, graphs, devices)
        valid, mask = graphs.nodes["valid"], graphs.nodes["mask"]
        uniforms = jax.random.uniform(key, (count, logits.shape[0]), logits.dtype)
        choice = jax.vmap(lambda u: choose(logits, valid, mask, uniform=u))(uniforms)
        log_p = jax.nn.log_softmax(logits, axis=-1)
        rows = jnp.take_along_axis(log_p[None], choice.action[..., None], -1)[..., 0]
        return choice.action, choice.log_prob, rows * mask.astype(rows.dtype), value

    def _greedy_fn(self, params: Params, graphs: Any, devices: jax.Array):
        self._count("greedy")
        logits, _ = self.network.apply(params, graphs, devices)
        return choose(logits, graphs.nodes["valid"], graphs.nodes["mask"]).action

    def _log_probs_fn(self, params: Params, graphs: Any, devices: jax.Array):
        self._count("log_probs")
        logits, _ = self.network.apply(params, graphs, devices)
        return jax.nn.log_softmax(jnp.where(graphs.nodes["valid"], logits, MASKED_LOGIT), -1)

    def _scores(self, params: Params, graphs: Any, devices: jax.Array, actions: jax.Array):
        """``(log_prob[B], entropy[B], value[B])`` of per-position actions ``[B, P]``."""
        logits, value = self.network.apply(params, graphs, devices)
        valid, mask = graphs.nodes["valid"], graphs.nodes["mask"]
        choice = jax.vmap(lambda a: choose(logits, valid, mask, given=a))(actions)
        count = actions.shape[0]
        return choice.log_prob, choice.entropy, jnp.broadcast_to(value, (count,))

    def _row_scores(self, params: Params, graphs: Any, devices: jax.Array, actions: jax.Array):
        """Per-node ``(log_prob, entropy, value)``, ``float32[B, P]`` each (0 on padding)."""
        logits, value = self.network.apply(params, graphs, devices)
        log_p = jax.nn.log_softmax(logits, axis=-1)
        chosen = jnp.take_along_axis(log_p[None], actions[..., None].astype(jnp.int32), -1)
        entropy = -(jnp.exp(log_p) * log_p).sum(-1)
        counted = graphs.nodes["mask"].astype(log_p.dtype)
        shape = actions.shape
        return (
            chosen[..., 0] * counted,
            jnp.broadcast_to(entropy * counted, shape),
            jnp.broadcast_to(value, shape),
        )

    def _evaluate_fn(self, params: Params, graphs: Any, devices: jax.Array, actions: jax.Array):
        self._count("evaluate")
        return self._scores(params, graphs, devices, actions)

    # -- public ---------------------------------------------------------------------------

    @staticmethod
    def _devices(inputs: ShardingInput) -> jax.Array:
        return jnp.asarray(inputs.num_devices, jnp.int32)

    def init(self, key: jax.Array, sg: ShardingGraph | ShardingInput) -> Params:
        """Fresh parameters (their shapes do not depend on the graph).

        Args:
          key: PRNG key.
          sg: any sharding graph (fixes the input widths only).

        Returns:
          The variable dict ``{"params": ...}``.
        """
        inputs = self.prepare(sg)
        return self._init_jit(key, inputs.graphs, self._devices(inputs))

    def sample(
        self, params: Params, sg: ShardingGraph | ShardingInput, key: jax.Array, count: int
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """``count`` choices drawn from the policy.

        Args:
          params: from :meth:`init`.
          sg: the graph.
          key: PRNG key.
          count: samples ``S``.

        Returns:
          ``(choices, log_prob, value)``: ``int64[S, n]`` strategy per node (node-id
          order; with the core action space, eliminated nodes expanded), ``float32[S]``
          their log-probabilities, and the value estimate.
        """
        inputs = self.prepare(sg)
        actions, log_prob, _, value = self._sample_positions(params, inputs, key, count)
        return inputs.choices(actions), np.asarray(log_prob), float(value)

    def _sample_positions(
        self, params: Params, inputs: ShardingInput, key: jax.Array, count: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """``(actions int32[S, P], log_prob [S], per-position log_prob [S, P], value)``."""
        actions, log_prob, rows, value = jax.device_get(
            self._sample_jit(params, inputs.graphs, self._devices(inputs), key, int(count))
        )
        return actions, log_prob, rows, float(value)

    def greedy(self, params: Params, sg: ShardingGraph | ShardingInput) -> np.ndarray:
        """The most likely action of every node, as a full choice (``int64[n]``)."""
        inputs = self.prepare(sg)
        actions = self._greedy_jit(params, inputs.graphs, self._devices(inputs))
        return inputs.choices(jax.device_get(actions))

    def log_probs(self, params: Params, sg: ShardingGraph | ShardingInput) -> np.ndarray:
        """``log π(k | v)`` of every node and strategy, ``float32[n, K]`` (node ids; a
        strategy the node cannot take has a log-probability near ``MASKED_LOGIT``)."""
        inputs = self.prepare(sg)
        per_position = jax.device_get(
            self._log_probs_jit(params, inputs.graphs, self._devices(inputs))
        )
        out = np.empty((inputs.num_nodes, per_position.shape[1]), np.float32)
        out[inputs.order] = per_position[: inputs.num_nodes]
        return out

    def evaluate(
        self, params: Params, sg: ShardingGraph | ShardingInput, choices: np.ndarray
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(log_prob, entropy, value)``, ``float32[S]`` each, of choices ``int[S, n]``.

        With the core action space only core nodes' strategies are scored (the others
        follow from them); a strategy the reductions pruned has probability ~0.
        """
        inputs = self.prepare(sg)
        actions = inputs.to_positions(inputs.action.restrict(np.atleast_2d(choices)))
        return self._evaluate_jit(params, inputs.graphs, self._devices(inputs), actions)

    def log_prob(
        self, params: Params, sg: ShardingGraph | ShardingInput, choices: np.ndarray
    ) -> jax.Array:
        """``log π(choice)`` of each of choices ``int[S, n]`` (``float32[S]``)."""
        return self.evaluate(params, sg, choices)[0]

    def value(self, params: Params, sg: ShardingGraph | ShardingInput) -> float:
        """The value head's estimate for ``sg``."""
        inputs = self.prepare(sg)
        zero = np.zeros((1, inputs.num_nodes), np.int64)
        return float(self.evaluate(params, inputs, zero)[2][0])


class ShardingLearner:
    """PPO updates of a :class:`ShardingPolicy` (one jitted step per bucket).

    Args:
      policy: the policy.
      ppo: PPO loss and optimizer settings.
    """

    def __init__(self, policy: ShardingPolicy, ppo: PPOConfig) -> None:
        self.policy, self.ppo = policy, ppo
        self.optimizer = make_optimizer(ppo)
        self._update_jit = jax.jit(self._update_fn)

    def _update_fn(
        self,
        params: Params,
        opt_state: optax.OptState,
        graphs: Any,
        devices: jax.Array,
        batch: PPOBatch,
    ):
        self.policy._count("update")

        scores = (
            self.policy._row_scores if self.policy.config.credit == "local" else self.policy._scores
        )

        def evaluate(p: Params, data: jax.Array):
            return scores(p, graphs, devices, data)

        return ppo_update_step(params, opt_state, batch, evaluate, self.optimizer, self.ppo)

    def update(
        self,
        params: Params,
        opt_state: optax.OptState,
        inputs: ShardingInput,
        batch: PPOBatch,
        key: jax.Array,
    ) -> tuple[Params, optax.OptState, list[LossInfo]]:
        """``ppo.epochs`` passes of PPO steps on ``batch``.

        ``batch.data`` holds actions ``int32[B, P]`` by position. With global credit the
        other fields are ``float32[B]`` (one reward per choice) and the epochs run through
        :func:`hlo_go.rl.ppo.minibatch_epochs`; with local credit they are
        ``float32[B, P]`` per-node advantages (already normalized), and each epoch is one
        whole-batch step of the same PPO loss over the ``B × P`` per-node ratios.
        """
        graphs, devices = inputs.graphs, self.policy._devices(inputs)
        if self.policy.config.credit == "local":
            infos = []
            for _ in range(self.ppo.epochs):
                params, opt_state, info = self._update_jit(
                    params, opt_state, graphs, devices, batch
                )
                infos.append(info)
            return params, opt_state, infos

        def step(p: Params, s: optax.OptState, mb: PPOBatch):
            return self._update_jit(p, s, graphs, devices, mb)

        return minibatch_epochs(params, opt_state, batch, step, key, self.ppo)


_POLICIES: dict[ShardingPolicyConfig, ShardingPolicy] = {}
_LEARNERS: dict[tuple[ShardingPolicyConfig, PPOConfig], ShardingLearner] = {}


def policy_for(config: ShardingPolicyConfig | None = None) -> ShardingPolicy:
    """The :class:`ShardingPolicy` of a configuration, shared per process (so its jitted
    functions compile once per bucket)."""
    config = config or ShardingPolicyConfig()
    if config not in _POLICIES:
        _POLICIES[config] = ShardingPolicy(config)
    return _POLICIES[config]


def learner_for(
    config: ShardingPolicyConfig | None = None, ppo: PPOConfig | None = None
) -> ShardingLearner:
    """The :class:`ShardingLearner` of a configuration and PPO settings, shared per process."""
    key = (config or ShardingPolicyConfig(), ppo or _ppo_default())
    if key not in _LEARNERS:
        _LEARNERS[key] = ShardingLearner(policy_for(key[0]), key[1])
    return _LEARNERS[key]


# -- training -----------------------------------------------------------------------------


class _GraphState:
    """One graph being trained on: its input, reference and best choice so far."""

    def __init__(self, name: str, sg: ShardingGraph, policy: ShardingPolicy) -> None:
        from hlo_go.sharding.methods import get

        self.name, self.sg = name, sg
        self.inputs = policy.prepare(sg)
        reference = np.asarray(get(policy.config.reference)(sg), np.int64)
        self.reference_cost = float(total_cost(sg.problem, reference))
        if not math.isfinite(self.reference_cost) or self.reference_cost <= 0:
            raise ValueError(f"{name}: reference cost {self.reference_cost} is not usable")
        self.infeasible_reward = policy.config.infeasible_reward
        self.best: np.ndarray | None = None
        self.best_cost = math.inf

    def local_advantages(self, actions: np.ndarray) -> np.ndarray:
        """Per-node advantages ``float64[S, n]`` of actions ``[S, n]`` (local credit).

        Costs are those of the action problem (:class:`ActionProblem`: the reduced core,
        or the full problem), whose total differs from the full choice's by a constant.

        Node ``v``'s cost in sample ``s`` is its node cost plus the cost of every edge it
        is an end of (forbidden pairs capped at ``t_ref``), plus, in a sample over the
        memory budget, ``t_ref × bytes / budget`` for each over-budget live set it is in.
        Everything else in the total cost does not depend on ``v``'s action given the
        logits (nodes are drawn independently), so ``-cost_v / t_ref`` is an unbiased
        per-node reward of much lower variance than the total. Baseline: the mean over
        the other samples of the same node. Normalized to unit std over nodes with a
        choice.
        """
        problem = self.inputs.action.problem
        c = np.asarray(actions, np.int64)
        count, n = c.shape
        rows = np.arange(n)
        local = np.asarray(problem.node_cost)[rows, c]
        local = np.minimum(local, self.reference_cost)
        layout = edge_cost_layout(problem)
        if len(layout.offset):
            src = np.asarray(problem.edge_src, np.int64)
            dst = np.asarray(problem.edge_dst, np.int64)
            edge = layout.values[layout.offset + c[:, src] * layout.stride + c[:, dst]]
            edge = np.minimum(edge, self.reference_cost)
            shift = (np.arange(count) * n)[:, None]
            flat = np.bincount((src + shift).ravel(), edge.ravel(), count * n)
            flat += np.bincount((dst + shift).ravel(), edge.ravel(), count * n)
            local = local + flat.reshape(count, n)
        budget = problem.memory_budget
        if math.isfinite(budget) and problem.live_sets:
            sets = live_set_layout(problem)
            for s in range(count):
                memory = np.asarray(problem.node_memory)[rows, c[s]]
                per_set = np.bincount(
                    sets.member_set, memory[sets.members], minlength=sets.num_sets
                )
                over = per_set[sets.member_set] > budget
                if over.any():
                    members = sets.members[over]
                    np.add.at(local[s], members, self.reference_cost * memory[members] / budget)
        reward = -local / self.reference_cost
        baseline = (reward.sum(0, keepdims=True) - reward) / max(count - 1, 1)
        advantage = reward - baseline
        choosable = np.asarray(problem.num_strategies) > 1
        spread = advantage[:, choosable].std() if choosable.any() else 0.0
        return np.where(choosable, advantage / (spread + 1e-8), 0.0)

    def score(self, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(costs, rewards)`` of choices ``[S, n]``; keeps the best feasible one."""
        costs = np.empty(len(choices))
        rewards = np.empty(len(choices))
        for i, choice in enumerate(choices):
            cost = total_cost(self.sg.problem, choice)
            feasible = math.isfinite(cost) and is_memory_feasible(self.sg.problem, choice)
            costs[i] = cost if feasible else math.inf
            rewards[i] = (
                math.log(self.reference_cost / cost) if feasible else self.infeasible_reward
            )
            rewards[i] = max(rewards[i], self.infeasible_reward)
            if feasible and cost < self.best_cost:
                self.best_cost, self.best = cost, np.array(choice, np.int64)
        return costs, rewards


class ShardingTrainResult(NamedTuple):
    """The outcome of :func:`train_sharding_policy`.

    Attributes:
      params: the final parameters.
      config: the policy configuration they belong to.
      history: one row per step: ``step``, ``graph``, ``reward_mean``, ``reward_max``,
        ``cost_mean``, ``cost_min``, ``best_cost``, ``reference_cost``, ``best_speedup``
        (reference / best), ``greedy_cost`` (NaN on steps without a greedy decode),
        ``loss``, ``approx_kl``, ``wall_s``.
      best: graph name -> the best feasible choice seen (``int64[n]``).
      best_cost: graph name -> its ``total_cost``.
      reference_cost: graph name -> ``t_ref``, the reference method's cost.
      seconds: training wall-clock seconds.
    """

    params: Params
    config: ShardingPolicyConfig
    history: list[dict[str, Any]]
    best: dict[str, np.ndarray]
    best_cost: dict[str, float]
    reference_cost: dict[str, float]
    seconds: float

    def curve(self, graph: str | None = None) -> dict[str, np.ndarray]:
        """``{"step", "reward_mean", "reward_max", "best_cost"}`` arrays (one graph's rows,
        or all)."""
        rows = [r for r in self.history if graph is None or r["graph"] == graph]
        keys = ("step", "reward_mean", "reward_max", "best_cost")
        return {k: np.array([r[k] for r in rows]) for k in keys}


def _named(
    graphs: Sequence[ShardingGraph | tuple[str, ShardingGraph]],
) -> list[tuple[str, ShardingGraph]]:
    out = []
    for i, item in enumerate(graphs):
        if isinstance(item, ShardingGraph):
            out.append((f"graph{i}" if len(graphs) > 1 else "graph", item))
        else:
            name, sg = item
            out.append((str(name), sg))
    names = [n for n, _ in out]
    if not out or len(set(names)) != len(names):
        raise ValueError(f"need graphs with unique names, got {names}")
    return out


def train_sharding_policy(
    graphs: Sequence[ShardingGraph | tuple[str, ShardingGraph]],
    *,
    steps: int,
    samples: int = 16,
    seed: int = 0,
    learning_rate: float = 1e-3,
    progress: bool = True,
    params: Params | None = None,
    config: ShardingPolicyConfig | None = None,
    ppo: PPOConfig | None = None,
    time_limit_s: float | None = None,
) -> ShardingTrainResult:
    """Trains the sharding policy with PPO, visiting the graphs in turn.

    A step on a graph samples ``samples`` choices (one network pass), scores them with
    :func:`~hlo_go.sharding.problem.total_cost`, turns costs into rewards
    ``log(t_ref / cost)``, takes advantages ``r - V`` (normalized over the samples) and
    runs ``ppo.epochs`` PPO updates.

    Args:
      graphs: sharding graphs, or ``(name, sharding graph)`` pairs.
      steps: total training steps (one graph each, round robin).
      samples: choices sampled per step (≥ 2).
      seed: seed of the parameters and samples (step ``s`` uses ``fold_in(seed, s)``).
      learning_rate: Adam's learning rate (overrides ``ppo.learning_rate``).
      progress: show a tqdm bar.
      params: start from these parameters (default: fresh ones).
      config: the policy configuration (default :class:`ShardingPolicyConfig`).
      ppo: PPO settings (default: 4 epochs, whole-batch steps, no entropy bonus).
      time_limit_s: stop after this many seconds (at a step boundary).

    Returns:
      The :class:`ShardingTrainResult`.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if samples < 2:
        raise ValueError(f"samples must be >= 2 (advantages need a spread), got {samples}")
    ppo = dataclasses.replace(ppo or _ppo_default(), learning_rate=learning_rate)
    learner = learner_for(config, ppo)
    policy = learner.policy
    states = [_GraphState(name, sg, policy) for name, sg in _named(graphs)]
    began = time.perf_counter()
    root = jax.random.key(seed)
    template = policy.init(jax.random.fold_in(root, _INIT_STREAM), states[0].inputs)
    params = template if params is None else restore_params(template, params)
    opt_state = learner.optimizer.init(params)
    history: list[dict[str, Any]] = []
    eval_every = policy.config.eval_every
    bar = tqdm(total=steps, desc="sharding policy", disable=not progress)
    try:
        for step in range(steps):
            state = states[step % len(states)]
            sample_key, update_key = jax.random.split(jax.random.fold_in(root, step))
            positions, old_log_prob, old_rows, value = policy._sample_positions(
                params, state.inputs, sample_key, samples
            )
            node_actions = state.inputs.to_nodes(positions)
            costs, rewards = state.score(state.inputs.action.expand(node_actions))
            actions = jnp.asarray(positions)
            if policy.config.credit == "local":
                advantages = state.inputs.to_positions(
                    state.local_advantages(node_actions), np.float32
                )
                returns = jnp.broadcast_to(
                    jnp.asarray(rewards, jnp.float32)[:, None], actions.shape
                )
                batch = PPOBatch(actions, jnp.asarray(old_rows), jnp.asarray(advantages), returns)
            else:
                returns = jnp.asarray(rewards, jnp.float32)
                batch = PPOBatch(
                    actions, jnp.asarray(old_log_prob, jnp.float32), returns - value, returns
                )
            params, opt_state, infos = learner.update(
                params, opt_state, state.inputs, batch, update_key
            )
            visit = step // len(states) + 1
            greedy_cost = math.nan
            if visit % eval_every == 0 or step + 1 == steps:
                greedy_cost = float(state.score(policy.greedy(params, state.inputs)[None])[0][0])
            finite = costs[np.isfinite(costs)]
            row = {
                "step": step,
                "graph": state.name,
                "reward_mean": float(np.mean(rewards)),
                "reward_max": float(np.max(rewards)),
                "cost_mean": float(finite.mean()) if finite.size else math.inf,
                "cost_min": float(finite.min()) if finite.size else math.inf,
                "best_cost": state.best_cost,
                "reference_cost": state.reference_cost,
                "best_speedup": state.reference_cost / state.best_cost,
                "greedy_cost": greedy_cost,
                "loss": float(infos[0].total),
                "approx_kl": float(infos[-1].approx_kl),
                "wall_s": time.perf_counter() - began,
            }
            history.append(row)
            bar.update(1)
            bar.set_postfix(
                graph=state.name, best=f"{row['best_speedup']:.3f}x", r=f"{row['reward_mean']:.3f}"
            )
            if time_limit_s is not None and row["wall_s"] >= time_limit_s:
                break
    finally:
        bar.close()
    for state in states:
        if state.best is None:  # nothing feasible sampled: fall back to the greedy decode
            state.score(policy.greedy(params, state.inputs)[None])
    return ShardingTrainResult(
        params,
        policy.config,
        history,
        {s.name: s.best for s in states if s.best is not None},
        {s.name: s.best_cost for s in states},
        {s.name: s.reference_cost for s in states},
        time.perf_counter() - began,
    )


def finetune(
    sg: ShardingGraph,
    params: Params,
    *,
    steps: int = 20,
    samples: int = 16,
    seed: int = 0,
    learning_rate: float = 1e-3,
    progress: bool = False,
    config: ShardingPolicyConfig | None = None,
) -> ShardingTrainResult:
    """Trains given (e.g. pre-trained) parameters further on one graph, at most 50 steps.

    Args:
      sg: the graph.
      params: the starting parameters.
      steps: 1..50.
      samples: choices per step.
      seed: seed of the samples.
      learning_rate: Adam's learning rate (fresh optimizer state).
      progress: show a tqdm bar.
      config: the configuration ``params`` belong to (default :class:`ShardingPolicyConfig`).

    Returns:
      The :class:`ShardingTrainResult` (graph name ``"graph"``).
    """
    if not 1 <= steps <= MAX_FINETUNE_STEPS:
        raise ValueError(f"fine-tuning takes 1..{MAX_FINETUNE_STEPS} steps, got {steps}")
    return train_sharding_policy(
        [("graph", sg)], steps=steps, samples=samples, seed=seed,
        learning_rate=learning_rate, progress=progress, params=params, config=config,
    )  # fmt: skip


# -- inference ----------------------------------------------------------------------------


def guided_choices(
    sg: ShardingGraph | ShardingInput,
    params: Params,
    *,
    weights: Sequence[float] = GUIDE_WEIGHTS,
    config: ShardingPolicyConfig | None = None,
) -> np.ndarray:
    """Policy-guided greedy: the greedy pass and coordinate descent of
    :func:`~hlo_go.sharding.solve_greedy` on the action problem with node costs biased
    towards the network's preferences, then coordinate descent on the true costs.

    The network draws each node's strategy independently. Where it has learned that a
    block should switch layout together (a teacher's channel split, say) but is unsure
    on a few of its nodes, its decode mixes layouts and pays resharding at each seam.
    Here the node cost of strategy ``k`` of node ``v`` becomes
    ``c_v(k) - λ · s · log π(k | v)``, with ``s`` the prior's cost per decided node (a
    time scale of the graph), and the greedy pass decides each node given the
    neighbours already decided: it follows the network where that is coherent and
    cheap, and its neighbours' layouts where not. Coordinate descent on the true costs
    then only lowers the cost. ``λ → 0`` is greedy's own choice (the prior, when cheaper
    than replicated), large ``λ`` the network's decode made coherent.

    Args:
      sg: the graph (or its prepared input).
      params: the network's parameters.
      weights: the ``λ`` values, one choice each.
      config: the configuration ``params`` belong to (default :class:`ShardingPolicyConfig`).

    Returns:
      ``int64[len(weights), n]``, a full choice per weight.
    """
    policy = policy_for(config)
    inputs = policy.prepare(sg)
    problem = inputs.action.problem
    log_p = np.zeros(problem.node_cost.shape, np.float64)
    width = min(problem.node_cost.shape[1], MAX_STRATEGIES)
    log_p[:, :width] = policy.log_probs(params, inputs)[:, :width]
    decided = int((np.asarray(problem.num_strategies) > 1).sum())
    scale = total_cost(problem, _prior_actions(inputs)) / max(decided, 1)
    finite = np.isfinite(problem.node_cost)
    out = []
    for weight in weights:
        biased = np.where(finite, problem.node_cost - weight * scale * log_p, np.inf)
        leaning = solve_greedy(problem._replace(node_cost=biased))
        settled = solve_greedy(problem, prefer=leaning, max_rounds=GUIDED_DESCENT_ROUNDS)
        out.append(inputs.action.expand(np.asarray(settled, np.int64)))
    return np.stack(out) if out else np.zeros((0, inputs.num_nodes), np.int64)


def shard_with_policy(
    sg: ShardingGraph,
    params: Params,
    *,
    samples: int = 0,
    seed: int = 0,
    config: ShardingPolicyConfig | None = None,
    with_prior: bool = False,
    guide_weights: Sequence[float] = (),
    inputs: ShardingInput | None = None,
) -> np.ndarray:
    """The policy's choice for a graph, without training (zero-shot).

    Args:
      sg: the graph.
      params: trained parameters.
      samples: 0 for the greedy decode; else the best (lowest ``total_cost``, feasible
        first) of the greedy decode and ``samples`` samples.
      seed: PRNG seed of the samples.
      config: the configuration ``params`` belong to (default :class:`ShardingPolicyConfig`).
      with_prior: also consider the prior's choice (:func:`prior_choice`), so that the
        result is never costlier than it (a trained policy that leaves its prior where
        that does not pay on an unseen graph falls back to it).
      guide_weights: also consider :func:`guided_choices` with these weights.
      inputs: ``sg``'s prepared input, when the caller has it already
        (``policy_for(config).prepare(sg)``; None: prepared here).

    When no candidate fits the memory budget, each is made feasible by
    :func:`hlo_go.sharding.greedy.fit_memory` (its strategies kept wherever they fit)
    and the cheapest result is returned.

    Returns:
      ``int64[n]``, a strategy per node.
    """
    policy = policy_for(config)
    inputs = policy.prepare(sg) if inputs is None else inputs
    candidates = [policy.greedy(params, inputs)[None]]
    if samples > 0:
        candidates.append(policy.sample(params, inputs, jax.random.key(seed), samples)[0])
    if with_prior:
        candidates.append(inputs.action.expand(_prior_actions(inputs))[None])
    if guide_weights:
        candidates.append(guided_choices(inputs, params, weights=guide_weights, config=config))
    best = min(np.concatenate(candidates), key=lambda c: _infeasible_then_cost(sg, c))
    if fits_memory(sg, best):
        return best
    # Nothing fits the budget (the network does not see memory): each candidate made
    # memory-feasible, keeping its strategies wherever they fit (fit_memory).
    fitted = [fit_memory(sg, c) for c in np.concatenate(candidates)]
    return min(fitted, key=lambda c: _infeasible_then_cost(sg, c))


def policy_method(
    sg: ShardingGraph,
    *,
    seed: int = 0,
    time_limit_s: float | None = None,
    params: Params | None = None,
    config: ShardingPolicyConfig | None = None,
    samples: int = DEFAULT_SAMPLES,
    finetune_steps: int = 0,
    with_prior: bool = True,
    guide_weights: Sequence[float] = GUIDE_WEIGHTS,
    refine_s: float = DEFAULT_REFINE_S,
    refine_window: int = DEFAULT_WINDOW,
) -> np.ndarray:
    """The ``"policy"`` (and ``"policy-ft"``) sharding method.

    Args:
      sg: the graph.
      seed: seed of sampling and fine-tuning.
      time_limit_s: stop fine-tuning after this many seconds (fine-tuning only).
      params: trained parameters; None: the shipped pre-trained policy
        (:func:`shipped_policy`).
      config: the configuration ``params`` belong to (with ``params`` only).
      samples: zero-shot, the best of the greedy decode and this many samples
        (:func:`shard_with_policy`).
      with_prior: the prior's choice is a candidate too (:func:`shard_with_policy`).
      guide_weights: so are the policy-guided greedy's choices with these weights
        (:func:`guided_choices`).
      finetune_steps: 0 decodes zero-shot; else PPO fine-tunes the parameters on ``sg``
        for this many steps (≤ :data:`MAX_FINETUNE_STEPS`) first, and the best of the
        fine-tuning's choices and the fine-tuned parameters' decode (as zero-shot:
        samples, prior and guided greedy), refined, or the zero-shot choice refined when
        cheaper, is returned.
      refine_s: then the choice is refined by exact re-optimization of windows of
        ``refine_window`` decided nodes for at most this many seconds
        (:func:`refined`; 0: not refined).
      refine_window: see ``refine_s``.

    Returns:
      ``int64[n]``, a strategy per node.
    """
    if params is None:
        params, config = shipped_policy()
    inputs = policy_for(config).prepare(sg)  # depends on the config only, not on params
    choice = shard_with_policy(
        sg, params, samples=samples, seed=seed, config=config, with_prior=with_prior,
        guide_weights=guide_weights, inputs=inputs,
    )  # fmt: skip
    zero_shot = refined(
        sg, choice, action=inputs.action, time_limit_s=refine_s, window=refine_window
    )
    if finetune_steps <= 0:
        return zero_shot
    result = train_sharding_policy(
        [("graph", sg)], steps=finetune_steps, seed=seed, progress=False, params=params,
        config=config, time_limit_s=time_limit_s,
    )  # fmt: skip
    tuned = result.best.get("graph", choice)
    decoded = shard_with_policy(
        sg, result.params, samples=samples, seed=seed, config=config, with_prior=with_prior,
        guide_weights=guide_weights, inputs=inputs,
    )  # fmt: skip
    best = min((tuned, decoded), key=lambda c: _infeasible_then_cost(sg, c))
    # Refinement ends in a local optimum that depends on its start: the fine-tuned
    # choice refined is not always cheaper than the zero-shot one refined, so both count.
    best = refined(sg, best, action=inputs.action, time_limit_s=refine_s, window=refine_window)
    return min((zero_shot, best), key=lambda c: _infeasible_then_cost(sg, c))


def refined(
    sg: ShardingGraph,
    choice: np.ndarray,
    *,
    config: ShardingPolicyConfig | None = None,
    action: ActionProblem | None = None,
    time_limit_s: float = DEFAULT_REFINE_S,
    window: int = DEFAULT_WINDOW,
) -> np.ndarray:
    """``choice`` improved by :func:`hlo_go.sharding.refine.refine` on the policy's
    action problem (the reductions' core, the other nodes following it optimally).

    Moves that break the memory budget are refused; a choice that does not fit the
    budget to begin with is returned as it is, and so is one that refinement does not
    make cheaper.

    Args:
      sg: the graph.
      choice: ``int[n]``, a full choice.
      config: whose ``action_space`` the refinement works in (default
        :class:`ShardingPolicyConfig`).
      action: ``action_problem(sg, config)`` when the caller has it already.
      time_limit_s: the refinement's time limit (0 or less: ``choice`` unchanged).
      window: decided nodes per window.

    Returns:
      ``int64[n]``, a full choice no costlier than ``choice``.
    """
    choice = np.asarray(choice, np.int64)
    if time_limit_s <= 0 or _infeasible_then_cost(sg, choice)[0]:
        return choice
    if action is None:
        action = action_problem(sg, policy_for(config).config)
    if not math.isfinite(total_cost(action.problem, action.restrict(choice))):
        # A core strategy the reductions pruned (e.g. one fit_memory chose): windows of
        # the whole problem instead.
        action = ActionProblem(sg.problem, None, 0.0)
    bounded = math.isfinite(sg.problem.memory_budget)

    def fits(actions: np.ndarray) -> bool:
        return not bounded or fits_memory(sg, action.expand(actions))

    actions = refine(
        action.problem, action.restrict(choice), window=window, time_limit_s=time_limit_s,
        accept=fits,
    )  # fmt: skip
    return min((choice, action.expand(actions)), key=lambda c: _infeasible_then_cost(sg, c))


def _infeasible_then_cost(sg: ShardingGraph, choice: np.ndarray) -> tuple[bool, float]:
    """Sort key of choices: feasible ones first (peak over every program position),
    then by ``total_cost``."""
    cost = total_cost(sg.problem, choice)
    return (not (math.isfinite(cost) and fits_memory(sg, choice)), cost)


def shipped_policy() -> tuple[Params, ShardingPolicyConfig]:
    """The pre-trained sharding policy shipped in the package (loaded once per process).

    It was trained by :mod:`hlo_go.sharding.pretrain` (imitation of the ILP on corpus
    training steps, then PPO); its docstring has the command.

    Returns:
      ``(params, config)``.

    Raises:
      FileNotFoundError: the package was installed without it.
    """
    if _SHIPPED_CACHE:
        return _SHIPPED_CACHE[0]
    from hlo_go.pretrained import sharding_policy_path

    loaded = load_policy(sharding_policy_path())
    _SHIPPED_CACHE.append(loaded)
    return loaded


_SHIPPED_CACHE: list[tuple[Params, ShardingPolicyConfig]] = []


# -- persistence --------------------------------------------------------------------------


def save_policy(
    path: str | Path, params: Params, config: ShardingPolicyConfig | None = None
) -> Path:
    """Writes parameters and their configuration as one msgpack file (atomically).

    Args:
      path: the file to write.
      params: the parameters.
      config: their configuration (default :class:`ShardingPolicyConfig`).

    Returns:
      The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "params": serialization.to_state_dict(jax.device_get(params)),
        "meta": json.dumps(
            {"kind": "sharding_policy", "config": (config or ShardingPolicyConfig()).to_dict()}
        ),
    }
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(serialization.msgpack_serialize(state))
    os.replace(tmp, target)
    return target


def load_policy(path: str | Path) -> tuple[Params, ShardingPolicyConfig]:
    """Reads a file written by :func:`save_policy`.

    Args:
      path: the file.

    Returns:
      ``(params, config)``.

    Raises:
      FileNotFoundError: no such file.
      ValueError: the file is not a saved sharding policy.
    """
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"no sharding policy at {target}")
    try:
        state = serialization.msgpack_restore(target.read_bytes())
        meta = json.loads(state["meta"])
        if meta.get("kind") != "sharding_policy":
            raise ValueError(f"kind is {meta.get('kind')!r}")
        config = ShardingPolicyConfig.from_dict(meta["config"])
    except (KeyError, ValueError, TypeError) as error:
        raise ValueError(f"{target} is not a saved sharding policy: {error}") from error
    params = jax.tree.map(jnp.asarray, state["params"])
    return params, config
