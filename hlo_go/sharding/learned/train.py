"""Training the sharding policy with PPO on the simulator's cost.

**Reward.** ``r = log(t_ref / total_cost(choice))`` with ``t_ref`` the cost of the
data-parallel choice (``reference="dp"``) or another reference method's
(:data:`REFERENCES`); a choice that breaks the memory budget or uses a forbidden pair
gets ``infeasible_reward``. The best feasible choice seen per graph (sampled, or the
greedy decode every ``eval_every`` steps) is kept and returned, as GO reports its best
sample.

**Credit** (:attr:`~hlo_go.sharding.learned.ShardingPolicyConfig.credit`). ``"local"``
(default): the cost is a sum of node and edge terms, and the nodes are drawn
independently given the logits, so the terms that do not involve node ``v`` have zero
expected effect on ``v``'s gradient: ``v``'s advantage is minus its own cost and that of
its incident edges (over ``t_ref``), against the mean of the other samples, and PPO clips
each node's own ratio — an unbiased, far lower-variance estimator than one reward for a
choice of thousands of nodes. ``"global"``: GO's, one reward ``r`` per sampled choice
with a value baseline, the log-probability summed over nodes.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from hlo_go.rl.checkpoint import restore_params
from hlo_go.rl.ppo import PPOBatch, PPOConfig
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.heuristics import HEURISTICS
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig, default_ppo
from hlo_go.sharding.learned.learner import learner_for
from hlo_go.sharding.learned.policy import INIT_STREAM, ShardingPolicy
from hlo_go.sharding.learned.prior import prior_choice
from hlo_go.sharding.problem import (
    edge_cost_layout,
    is_memory_feasible,
    live_set_layout,
    total_cost,
)


def _core_greedy(sg: ShardingGraph, **_: Any) -> np.ndarray:
    return prior_choice(sg)


REFERENCES: dict[str, Callable[..., np.ndarray]] = {**HEURISTICS, "core-greedy": _core_greedy}
"""The methods whose cost may be the reward's ``t_ref``
(:attr:`~hlo_go.sharding.learned.ShardingPolicyConfig.reference`), by name."""


def reference_method(name: str) -> Callable[..., np.ndarray]:
    """The reference method called ``name`` (see :data:`REFERENCES`).

    Raises:
      KeyError: no such reference (the message lists the known ones).
    """
    try:
        return REFERENCES[name]
    except KeyError:
        raise KeyError(f"unknown reference method {name!r}; known: {list(REFERENCES)}") from None


class _GraphState:
    """One graph being trained on: its input, reference and best choice so far."""

    def __init__(self, name: str, sg: ShardingGraph, policy: ShardingPolicy) -> None:
        self.name, self.sg = name, sg
        self.inputs = policy.prepare(sg)
        reference = np.asarray(reference_method(policy.config.reference)(sg), np.int64)
        self.reference_cost = float(total_cost(sg.problem, reference))
        if not math.isfinite(self.reference_cost) or self.reference_cost <= 0:
            raise ValueError(f"{name}: reference cost {self.reference_cost} is not usable")
        self.infeasible_reward = policy.config.infeasible_reward
        self.best: np.ndarray | None = None
        self.best_cost = math.inf

    def local_advantages(self, actions: np.ndarray) -> np.ndarray:
        """Per-node advantages ``float64[S, n]`` of actions ``[S, n]`` (local credit).

        Costs are those of the action problem (:class:`~hlo_go.sharding.learned.ActionProblem`: the reduced core,
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
    ppo = dataclasses.replace(ppo or default_ppo(), learning_rate=learning_rate)
    learner = learner_for(config, ppo)
    policy = learner.policy
    states = [_GraphState(name, sg, policy) for name, sg in _named(graphs)]
    began = time.perf_counter()
    root = jax.random.key(seed)
    template = policy.init(jax.random.fold_in(root, INIT_STREAM), states[0].inputs)
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
