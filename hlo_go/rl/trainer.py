"""The GO trainers: GO-one, pre-training, fine-tuning and zero-shot inference.

* :func:`train_one` — GO-one: a fresh policy trained with PPO on one graph.
* :func:`pretrain` — one policy trained on many graphs: the steps of a batch of
  ``graphs_per_batch`` graphs visit its graphs in turn, and every ``switch_every``
  steps (the paper's N = 1000) the next batch takes over.
* :func:`finetune` — a (pre-trained) checkpoint trained further on one graph for at
  most 50 steps, with a fresh optimizer state.
* :func:`infer` — zero-shot: a checkpoint's greedy decisions for an unseen graph.

A training step on a graph: sample K decision sets (one batched policy call), score
them with :func:`hlo_go.sim.simulate_batch`, turn step times into rewards
(:mod:`hlo_go.rl.reward`), advantages ``A = r - V(graph)`` normalized over the K
samples, and run ``ppo.epochs`` passes of minibatch PPO updates
(:mod:`hlo_go.rl.ppo`). The best decisions seen (sampled or greedy) are kept per
graph: they are what the trainer returns as its result, as search-style methods do.

Each run writes into ``out_dir``: ``checkpoint.msgpack`` (every ``checkpoint_every``
steps and at the end), ``metrics.csv`` and TensorBoard event files under ``tb/``.
Passing an ``out_dir`` holding a checkpoint with ``resume=True`` continues that run
bit-for-bit (same parameters, same samples, same metrics).
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from hlo_go.decisions import Decisions
from hlo_go.errors import HloGoError
from hlo_go.gonet import GOPolicy, PolicyConfig
from hlo_go.graph import OpGraph
from hlo_go.rl.agent import GOAgent
from hlo_go.rl.checkpoint import (
    Checkpoint,
    check_devices,
    check_resume,
    checkpoint_path,
    load_checkpoint,
    restore_opt_state,
    restore_params,
    run_meta,
    save_checkpoint,
)
from hlo_go.rl.config import TrainConfig
from hlo_go.rl.cuts import fusion_cuts, placement_cuts
from hlo_go.rl.env import GraphEnv, Scores
from hlo_go.rl.metrics import MetricsLogger
from hlo_go.rl.moves import climb_moves, ranked_by_score
from hlo_go.rl.ppo import PPOBatch, PPOConfig, make_optimizer
from hlo_go.rl.prior import prior_decisions
from hlo_go.sim import Cluster, simulate

MAX_FINETUNE_STEPS = 50
"""Fine-tuning is the paper's few-step regime: at most this many steps."""

METRIC_COLUMNS = (
    "step",
    "graph",
    "wall_s",
    "reward_mean",
    "reward_max",
    "step_time_mean",
    "step_time_min",
    "best_step_time",
    "reference_time",
    "best_speedup",
    "greedy_step_time",
    "oom_fraction",
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "grad_norm",
)
"""Columns of ``metrics.csv``; times in seconds; ``best_speedup = reference / best``."""


class GraphResult(NamedTuple):
    """What training achieved on one graph.

    Attributes:
      name: the graph's label.
      best: the best decisions seen (sampled or greedy).
      best_time: their simulated step time, seconds.
      best_oom: whether even the best runs out of memory.
      greedy: the final policy's greedy decisions.
      greedy_time: their simulated step time.
      reference_time: ``t_ref`` of the reward (one device, FIFO, no fusion by default).
    """

    name: str
    best: Decisions
    best_time: float
    best_oom: bool
    greedy: Decisions
    greedy_time: float
    reference_time: float


class TrainResult(NamedTuple):
    """The outcome of a training run.

    Attributes:
      params: the final parameters.
      step: steps done in total (including those before a resume).
      graphs: graph name -> :class:`GraphResult`.
      out_dir: the run directory (checkpoint, metrics).
      history: the metric rows of this call's steps.
      elapsed: training wall-clock seconds (including those before a resume).
    """

    params: Any
    step: int
    graphs: dict[str, GraphResult]
    out_dir: Path
    history: list[dict[str, Any]]
    elapsed: float


GraphLike = OpGraph | tuple[str, OpGraph]


class NonFiniteTrainingError(FloatingPointError, HloGoError):
    """Training met NaN or infinite logits, values, rewards or losses (a NaN learning
    rate or weights, or a diverged update); the message names the step and graph."""


def _check_finite(step: int, graph: str, **values: Any) -> None:
    """Raises NonFiniteTrainingError naming the first of ``values`` that is not finite."""
    for what, value in values.items():
        array = np.asarray(jax.device_get(value), dtype=np.float64)
        if not np.isfinite(array).all():
            bad = "NaN" if np.isnan(array).any() else "infinite values"
            raise NonFiniteTrainingError(
                f"training stopped at step {step} on graph {graph!r}: the {what} has {bad} "
                "(NaN parameters or a diverged update; check the learning rate and the "
                "checkpoint the run started from)"
            )


def _named(graphs: Sequence[GraphLike]) -> list[tuple[str, OpGraph]]:
    out: list[tuple[str, OpGraph]] = []
    for i, item in enumerate(graphs):
        if isinstance(item, OpGraph):
            out.append((f"graph{i}" if len(graphs) > 1 else "graph", item))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], OpGraph):
            out.append((str(item[0]), item[1]))
        else:
            raise TypeError(f"graphs must be OpGraphs or (name, OpGraph) pairs, got {item!r}")
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ValueError(f"graph names must be unique, got {names}")
    if not out:
        raise ValueError("no graphs to train on")
    return out


@functools.lru_cache(maxsize=8)
def _agent(
    policy: PolicyConfig, max_devices: int, tasks: tuple[str, ...], ppo: PPOConfig
) -> GOAgent:
    return GOAgent(GOPolicy(policy), max_devices, tasks, ppo, make_optimizer(ppo))


def agent_for(config: TrainConfig) -> GOAgent:
    """The :class:`GOAgent` of a configuration, shared by every run with the same policy,
    device count, tasks and PPO settings (so its jitted functions compile once per bucket
    per process)."""
    return _agent(config.policy, config.max_devices, config.tasks, config.ppo)


def apply_prior(params: Any, config: TrainConfig) -> Any:
    """Fresh parameters with ``config.prior_bias`` added to the placement head's device-0
    logit and the fusion head's highest-bin logit (bin 0 with ``prior_fusion="none"``; see
    :class:`TrainConfig`)."""
    if config.prior_bias == 0 or config.prior_method:
        return params
    bias = config.prior_bias
    heads = params["params"]
    placement = heads["heads_placement"]["logits"]["bias"]
    fusion = heads["heads_fusion"]["logits"]["bias"]
    fusion_bin = -1 if config.prior_fusion == "all" else 0
    new_heads = {
        **heads,
        "heads_placement": {
            **heads["heads_placement"],
            "logits": {
                **heads["heads_placement"]["logits"],
                "bias": placement.at[0].add(bias),
            },
        },
        "heads_fusion": {
            **heads["heads_fusion"],
            "logits": {**heads["heads_fusion"]["logits"], "bias": fusion.at[fusion_bin].add(bias)},
        },
    }
    return {**params, "params": new_heads}


def _step_keys(seed: int, step: int) -> tuple[jax.Array, jax.Array]:
    key = jax.random.fold_in(jax.random.key(seed), step)
    sample_key, update_key = jax.random.split(key)
    return sample_key, update_key


def _batch_schedule(count: int, config: TrainConfig) -> Callable[[int], int]:
    """Step -> index of the graph it trains on (deterministic in seed and step)."""
    order = np.random.default_rng(config.seed).permutation(count)
    per_batch = min(config.graphs_per_batch, count)

    def index(step: int) -> int:
        batch = step // config.switch_every
        return int(order[(batch * per_batch + step % per_batch) % count])

    return index


def _greedy(agent: GOAgent, params: Any, env: GraphEnv) -> tuple[Decisions, float]:
    decisions = env.decisions(agent.greedy(params, env))
    scores = env.score(decisions)
    return decisions[0], float(scores.step_times[0])


def _graph_result(agent: GOAgent, params: Any, env: GraphEnv) -> GraphResult:
    """A graph's outcome after training: its best sample (or else the greedy decode)."""
    greedy, greedy_time = _greedy(agent, params, env)
    return GraphResult(
        env.name,
        env.best if env.best is not None else greedy,
        env.best_time,
        env.best_oom,
        greedy,
        greedy_time,
        env.reference_time,
    )


def step_stats(
    env: GraphEnv, scores: Scores, greedy_time: float, elapsed: float
) -> dict[str, float]:
    """The metric columns of one training step on one graph that do not come from the loss.

    Args:
      env: the graph's environment (its best and reference times).
      scores: the step's scored samples.
      greedy_time: the greedy decisions' step time (nan when not evaluated this step).
      elapsed: training wall-clock seconds so far.
    """
    return {
        "wall_s": elapsed,
        "reward_mean": float(np.mean(scores.rewards)),
        "reward_max": float(np.max(scores.rewards)),
        "step_time_mean": float(np.mean(scores.step_times)),
        "step_time_min": float(np.min(scores.step_times)),
        "best_step_time": env.best_time,
        "reference_time": env.reference_time,
        "best_speedup": env.reference_time / env.best_time,
        "greedy_step_time": greedy_time,
        "oom_fraction": float(np.mean(scores.oom)),
    }


def _train(
    envs: list[GraphEnv],
    config: TrainConfig,
    *,
    steps: int,
    out_dir: str | Path,
    kind: str,
    params: Any | None = None,
    opt_state_raw: Any | None = None,
    resume_from: Checkpoint | None = None,
    schedule: Callable[[int], int] | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    out_dir = Path(out_dir)
    clusters = _distinct_clusters(envs)
    agent = agent_for(config)
    policy, optimizer = agent.policy, agent.optimizer
    template = policy.init(jax.random.key(config.seed), envs[0].inputs, config.max_devices)
    start, elapsed = 0, 0.0
    if resume_from is not None:
        params = restore_params(template, resume_from.params)
        opt_state = restore_opt_state(optimizer.init(params), resume_from.opt_state)
        start, elapsed = resume_from.step, resume_from.elapsed
        for env in envs:
            env.restore_best(resume_from.best.get(env.name, {}))
            if config.prior_follows_best:
                env.follow_best()  # where the run's prior stood when it was saved
    else:
        params = (
            apply_prior(template, config) if params is None else restore_params(template, params)
        )
        opt_state = optimizer.init(params)
        if opt_state_raw is not None:
            opt_state = restore_opt_state(opt_state, opt_state_raw)
    if steps < start:
        raise ValueError(f"steps={steps} but the checkpoint has already done {start} steps")
    schedule = schedule or (lambda step: step % len(envs))
    meta = run_meta(kind, clusters, {env.name: env.graph for env in envs})
    logger = MetricsLogger(out_dir, METRIC_COLUMNS, resume_step=start if resume_from else None)
    history: list[dict[str, Any]] = []

    def save(step: int) -> None:
        save_checkpoint(
            out_dir,
            params=params,
            opt_state=opt_state,
            step=step,
            elapsed=elapsed,
            best={env.name: env.best_state() for env in envs},
            config=config,
            meta=meta,
        )

    bar = tqdm(
        total=steps, initial=start, desc=f"{kind} on {meta['cluster']}", disable=not config.progress
    )
    try:
        for step in range(start, steps):
            began = time.perf_counter()
            env = envs[schedule(step)]
            sample_key, update_key = _step_keys(config.seed, step)
            actions, old_log_prob, values = agent.sample(params, env, sample_key, config.samples)
            _check_finite(step, env.name, policy_log_probability=old_log_prob, value=values)
            scores = env.score(env.decisions(actions))
            _check_finite(step, env.name, reward=scores.rewards)
            returns = jnp.asarray(scores.rewards, jnp.float32)
            batch = PPOBatch(
                actions,
                jnp.asarray(old_log_prob, jnp.float32),
                returns - jnp.asarray(values, jnp.float32),
                returns,
                agent.weights(env, config.samples),
            )
            params, opt_state, infos = agent.update(params, opt_state, env, batch, update_key)
            greedy_time = float("nan")
            if (step + 1) % config.eval_every == 0 or step + 1 == steps:
                _, greedy_time = _greedy(agent, params, env)
            if config.prior_follows_best:
                env.follow_best()
            first = jax.device_get(infos[0])
            _check_finite(step, env.name, loss=first.total, gradient_norm=first.grad_norm)
            elapsed += time.perf_counter() - began
            row = {
                "step": step,
                "graph": env.name,
                **step_stats(env, scores, greedy_time, elapsed),
                "loss": float(first.total),
                "policy_loss": float(first.policy),
                "value_loss": float(first.value),
                "entropy": float(first.entropy),
                "approx_kl": float(jax.device_get(infos[-1].approx_kl)),
                "clip_fraction": float(jax.device_get(infos[-1].clip_fraction)),
                "grad_norm": float(first.grad_norm),
            }
            logger.log(step, row)
            history.append(row)
            if callback is not None:
                callback(row)
            bar.update(1)
            bar.set_postfix(
                graph=env.name, best=f"{row['best_speedup']:.3f}x", r=f"{row['reward_mean']:.3f}"
            )
            done = step + 1
            if done == steps or (config.checkpoint_every and done % config.checkpoint_every == 0):
                save(done)
        if start == steps and not checkpoint_path(out_dir).exists():
            save(steps)
    finally:
        bar.close()
        logger.close()
    results = {env.name: _graph_result(agent, params, env) for env in envs}
    return TrainResult(params, steps, results, out_dir, history, elapsed)


def _make_envs(
    graphs: Sequence[GraphLike],
    cluster: Cluster,
    config: TrainConfig,
    fixed: Decisions | dict[str, Decisions] | None,
) -> list[GraphEnv]:
    if cluster.num_devices > config.max_devices:
        raise ValueError(
            f"cluster {cluster.name!r} has {cluster.num_devices} devices; "
            f"config.max_devices is {config.max_devices}"
        )
    envs = []
    for name, graph in _named(graphs):
        fixed_one = fixed.get(name) if isinstance(fixed, dict) else fixed
        prior = None
        if config.prior_method:
            _, prior = prior_decisions(graph, cluster, config.prior_method)
        envs.append(
            GraphEnv(
                graph,
                cluster,
                config.policy,
                config.tasks,
                name=name,
                fixed=fixed_one,
                reward_config=config.reward,
                prior=prior,
                prior_bias=config.prior_bias,
            )
        )
    return envs


def _distinct_clusters(envs: Sequence[GraphEnv]) -> list[Cluster]:
    """The clusters of ``envs``, each once, in order of first appearance."""
    return list({env.cluster.name: env.cluster for env in envs}.values())


def _clusters(cluster: Cluster | Sequence[Cluster]) -> list[Cluster]:
    """``cluster`` as a non-empty list of differently named clusters.

    Raises:
      ValueError: no cluster, or two named alike.
    """
    clusters = [cluster] if isinstance(cluster, Cluster) else list(cluster)
    names = [c.name for c in clusters]
    if not clusters or len(set(names)) < len(names):
        raise ValueError(f"pretrain needs one or more differently named clusters, got {names}")
    return clusters


def _pairs(
    named: Sequence[tuple[str, OpGraph]], clusters: Sequence[Cluster]
) -> list[tuple[str, OpGraph, Cluster]]:
    """``(name, graph, cluster)`` of every graph on every cluster, graph by graph (each
    graph's clusters side by side in the batches); with several clusters a pair is named
    ``graph@cluster``."""
    if len(clusters) == 1:
        return [(name, graph, clusters[0]) for name, graph in named]
    return [(f"{name}@{c.name}", graph, c) for name, graph in named for c in clusters]


def _resume_checkpoint(
    out_dir: str | Path, resume: bool, kind: str, envs: list[GraphEnv], config: TrainConfig
) -> Checkpoint | None:
    """``out_dir``'s checkpoint when resuming, after checking it is this run's
    (:func:`hlo_go.rl.checkpoint.check_resume`: ResumeMismatchError otherwise)."""
    if not resume or not checkpoint_path(out_dir).exists():
        return None
    ckpt = load_checkpoint(out_dir)
    graphs = {env.name: env.graph for env in envs}
    check_resume(
        ckpt,
        kind=kind,
        cluster=_distinct_clusters(envs),
        graphs=graphs,
        config=config,
        where=out_dir,
    )
    return ckpt


def train_one(
    graph: GraphLike,
    cluster: Cluster,
    tasks: Sequence[str] | None = None,
    *,
    steps: int = 100,
    out_dir: str | Path,
    config: TrainConfig | None = None,
    fixed: Decisions | None = None,
    resume: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """GO-one: trains a fresh policy with PPO on one graph.

    Args:
      graph: an OpGraph, or ``(name, OpGraph)``.
      cluster: the cluster to optimize for.
      tasks: tasks learned jointly (default ``config.tasks``: all three).
      steps: total training steps (K samples and one PPO update each).
      out_dir: run directory (checkpoint, ``metrics.csv``, ``tb/``).
      config: settings (default :class:`TrainConfig`).
      fixed: decisions for the tasks not learned (default one device, FIFO, no fusion).
      resume: continue from ``out_dir``'s checkpoint when there is one (made for the
        same cluster, graphs, tasks and settings: ResumeMismatchError otherwise).
      callback: called with each step's metric row.

    Returns:
      The :class:`TrainResult` (its ``graphs`` has the one graph).
    """
    config = config or TrainConfig()
    if tasks is not None:
        config = config.replace(tasks=tuple(tasks))
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    envs = _make_envs([graph], cluster, config, fixed)
    ckpt = _resume_checkpoint(out_dir, resume, "train_one", envs, config)
    return _train(
        envs,
        config,
        steps=steps,
        out_dir=out_dir,
        kind="train_one",
        resume_from=ckpt,
        callback=callback,
    )


def pretrain(
    graphs: Sequence[GraphLike],
    cluster: Cluster | Sequence[Cluster],
    tasks: Sequence[str] | None = None,
    *,
    steps: int = 1000,
    out_dir: str | Path,
    config: TrainConfig | None = None,
    resume: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
    init: str | Path | Checkpoint | None = None,
) -> TrainResult:
    """Trains one policy on many graphs, switching graph batches every ``switch_every`` steps.

    With several clusters, PPO trains on every (graph, cluster) pair: one policy for all
    of them, told apart by their cluster features (the network's inputs), each pair's
    reward relative to its own cluster's reference.

    Args:
      graphs: OpGraphs, or ``(name, OpGraph)`` pairs.
      cluster: the cluster to optimize for, or several (each with at most
        ``config.max_devices`` devices); with several, each pair is named
        ``graph@cluster`` in the result and the checkpoint.
      tasks: tasks learned jointly (default ``config.tasks``).
      steps: total steps; each step trains on one (graph, cluster) of the current batch.
      out_dir: run directory.
      config: settings (``switch_every``, ``graphs_per_batch``, ...).
      resume: continue from ``out_dir``'s checkpoint when there is one (made for the
        same clusters, graphs, tasks and settings: ResumeMismatchError otherwise).
      callback: called with each step's metric row.
      init: start from this checkpoint's parameters (e.g. of
        :func:`hlo_go.rl.imitation.train_imitation`; a fresh optimizer state) instead of
        fresh ones; its policy sizes and ``max_devices`` must be ``config``'s. A
        checkpoint of this run in ``out_dir`` takes precedence (resume).

    Returns:
      The :class:`TrainResult`.

    Raises:
      ValueError: ``steps < 1``, no cluster or two named alike, a cluster with more than
        ``config.max_devices`` devices, or an ``init`` checkpoint of another policy shape.
    """
    config = config or TrainConfig()
    if tasks is not None:
        config = config.replace(tasks=tuple(tasks))
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    clusters = _clusters(cluster)
    start = None
    if init is not None:
        start = _loaded(init)
        if start.config.policy != config.policy or start.config.max_devices != config.max_devices:
            raise ValueError("config.policy / max_devices differ from the init checkpoint's")
    envs = [
        _make_envs([(name, graph)], c, config, None)[0]
        for name, graph, c in _pairs(_named(graphs), clusters)
    ]
    ckpt = _resume_checkpoint(out_dir, resume, "pretrain", envs, config)
    return _train(
        envs,
        config,
        steps=steps,
        out_dir=out_dir,
        kind="pretrain",
        params=start.params if start is not None and ckpt is None else None,
        resume_from=ckpt,
        schedule=_batch_schedule(len(envs), config),
        callback=callback,
    )


def finetune(
    checkpoint: str | Path | Checkpoint,
    graph: GraphLike,
    cluster: Cluster,
    *,
    steps: int = MAX_FINETUNE_STEPS,
    out_dir: str | Path,
    config: TrainConfig | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Fine-tunes a checkpoint's policy on one graph for at most 50 steps.

    The parameters come from the checkpoint, the optimizer state is fresh, and the
    settings are the checkpoint's unless ``config`` is given (its policy sizes must match).

    Args:
      checkpoint: a checkpoint file or run directory (e.g. of :func:`pretrain`), or a
        loaded :class:`Checkpoint` (e.g. :func:`hlo_go.load_policy`).
      graph: an OpGraph, or ``(name, OpGraph)``.
      cluster: the cluster to optimize for.
      steps: 1..50.
      out_dir: run directory of the fine-tuning (must differ from the checkpoint's).
      config: settings (default: the checkpoint's).
      callback: called with each step's metric row.

    Returns:
      The :class:`TrainResult`.

    Raises:
      ValueError: ``steps`` outside 1..50, or a config whose policy differs.
      CheckpointMismatchError: a cluster with more devices than the checkpoint places on,
        parameters that do not fit the network.
    """
    if not 1 <= steps <= MAX_FINETUNE_STEPS:
        raise ValueError(f"fine-tuning takes 1..{MAX_FINETUNE_STEPS} steps, got {steps}")
    ckpt = _loaded(checkpoint)
    if not isinstance(checkpoint, Checkpoint) and (
        checkpoint_path(checkpoint).resolve() == checkpoint_path(out_dir).resolve()
    ):
        raise ValueError("finetune's out_dir must differ from the checkpoint's directory")
    check_devices(ckpt, cluster)
    config = config or ckpt.config
    if config.policy != ckpt.config.policy or config.max_devices != ckpt.config.max_devices:
        raise ValueError("config.policy / max_devices differ from the checkpoint's")
    envs = _make_envs([graph], cluster, config, None)
    return _train(
        envs,
        config,
        steps=steps,
        out_dir=out_dir,
        kind="finetune",
        params=ckpt.params,
        callback=callback,
    )


def _loaded(checkpoint: str | Path | Checkpoint) -> Checkpoint:
    return checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)


DEFAULT_MOVES = 16
"""Moves :func:`infer` tries by default with a policy that has a move head: its 16
top-scored groups, each moved in turn and kept when it pays (one simulation each)."""


def policy_moves(
    checkpoint: str | Path | Checkpoint,
    moves: int | None = None,
    *,
    num_devices: int | None = None,
) -> int:
    """The moves a zero-shot decode of ``checkpoint`` tries: ``moves`` if given, else
    :data:`DEFAULT_MOVES` for a policy with a move head and 0 for one without; 0 on a
    cluster of ``num_devices < 2`` (nothing to move), after the same checks.

    Raises:
      ValueError: ``moves > 0`` for a policy without a move head, or ``moves < 0``.
    """
    head = _loaded(checkpoint).config.policy.move_head
    if moves is None:
        moves = DEFAULT_MOVES if head else 0
    elif moves < 0:
        raise ValueError(f"moves must be >= 0, got {moves}")
    elif moves and not head:
        raise ValueError(
            f"moves={moves} needs a policy with a move head (PolicyConfig(move_head=True); "
            "hlo-go imitate --move-head trains one)"
        )
    return int(moves) if num_devices is None or num_devices > 1 else 0


def policy_cuts(checkpoint: str | Path | Checkpoint, cuts: bool = True) -> bool:
    """Whether a zero-shot decode of ``checkpoint`` tries confidence cuts
    (:mod:`hlo_go.rl.cuts`): ``cuts``, for a policy that learns placement or fusion."""
    tasks = _loaded(checkpoint).config.tasks
    return bool(cuts) and ("placement" in tasks or "fusion" in tasks)


class InferResult(NamedTuple):
    """Zero-shot decisions for one graph.

    Attributes:
      decisions: the greedy decisions, or the best of the cuts, samples and moves
        if better.
      step_time: their simulated step time, seconds.
      oom: whether they run out of memory.
      greedy_time: step time of the greedy decisions alone.
      reference_time: one device, FIFO, no fusion.
      seconds: wall-clock seconds of inference (policy calls and simulation).
      simulations: decision sets simulated (greedy, cuts, samples, moves): the
        budget a search compared at equal evaluations gets.
    """

    decisions: Decisions
    step_time: float
    oom: bool
    greedy_time: float
    reference_time: float
    seconds: float
    simulations: int


def infer(
    checkpoint: str | Path | Checkpoint,
    graph: OpGraph,
    cluster: Cluster,
    *,
    samples: int = 0,
    seed: int = 0,
    temperature: float = 1.0,
    moves: int | None = None,
    cuts: bool = True,
) -> InferResult:
    """Zero-shot: a checkpoint's policy decides for a graph, without any training.

    Args:
      checkpoint: a checkpoint file or run directory, or a loaded :class:`Checkpoint`
        (e.g. :func:`hlo_go.load_policy`).
      graph: the graph.
      cluster: the cluster (at most the checkpoint's ``max_devices`` devices).
      samples: additionally draw this many samples and keep the best (0: greedy only).
      seed: PRNG seed of those samples.
      temperature: the samples' softmax temperature (below 1: closer to the greedy
        decisions; :meth:`hlo_go.rl.GOAgent.sample`).
      moves: then move each of the ``moves`` colocation groups the move head scores
        highest to another device, in turn, keeping each move that pays
        (:func:`hlo_go.rl.moves.climb_moves`), from the best of the greedy decisions and
        their cuts (0: none; > 0 needs a move head; None: :func:`policy_moves`'
        default, :data:`DEFAULT_MOVES` with a move head).
      cuts: first try the network's confidence cuts (:mod:`hlo_go.rl.cuts`): its placement
        with the groups it is unsure of on the main device, at each of
        :data:`~hlo_go.rl.cuts.PLACEMENT_THRESHOLDS`, the best of those; then its fusion
        cut at each of :data:`~hlo_go.rl.cuts.FUSION_THRESHOLDS`; the best kept.

    Returns:
      The :class:`InferResult`.

    Raises:
      CheckpointMismatchError: a cluster with more devices than the checkpoint places on,
        parameters that do not fit the network (another vocabulary or config).
      ValueError: ``moves`` with a policy that has no move head.
    """
    began = time.perf_counter()
    ckpt = _loaded(checkpoint)
    check_devices(ckpt, cluster)
    config = ckpt.config
    env = _make_envs([("graph", graph)], cluster, config, None)[0]
    agent = agent_for(config)
    template = agent.policy.param_shapes(env.inputs, config.max_devices)
    params = restore_params(template, ckpt.params)
    moves = policy_moves(ckpt, moves, num_devices=cluster.num_devices)
    cuts = policy_cuts(ckpt, cuts)
    if moves > 0 or cuts:  # greedy, move scores and logits in one pass
        passed = agent.greedy_pass(params, env)
        greedy = env.decisions(passed.actions)[0]
    else:
        greedy = env.decisions(agent.greedy(params, env))[0]

    def objective(decisions: list[Decisions]) -> np.ndarray:  # lower is better
        return -env.score(decisions).rewards

    first = env.score([greedy])
    greedy_time, base_value = float(first.step_times[0]), -float(first.rewards[0])
    base, simulations = greedy, 1
    if cuts and passed.placement_logits is not None:  # the best placement cut...
        logits = env.inputs.to_nodes(passed.placement_logits)
        candidates = placement_cuts(base, graph, logits, cluster.num_devices)
        base, base_value = _best_of(base, base_value, candidates, objective)
        simulations += len(candidates)
    if cuts and passed.fusion_logits is not None:  # ...then the best fusion cut of it
        candidates = fusion_cuts(base, env.inputs.to_nodes(passed.fusion_logits))
        base, base_value = _best_of(base, base_value, candidates, objective)
        simulations += len(candidates)
    if samples > 0:
        actions, _, _ = agent.sample(
            params, env, jax.random.key(seed), samples, temperature=temperature
        )
        env.score(env.decisions(actions))
        simulations += samples
    if moves > 0:  # climb along the head's ranking, from the best of greedy and the cuts
        groups = ranked_by_score(graph, env.inputs.to_nodes(passed.move_score), moves)
        _, _, runs = climb_moves(
            graph, cluster, base, groups,
            evaluate=lambda d: float(objective([d])[0]), base_value=base_value,
        )  # fmt: skip
        simulations += runs
    best = env.best if env.best is not None else greedy
    return InferResult(
        best,
        env.best_time,
        env.best_oom,
        greedy_time,
        env.reference_time,
        time.perf_counter() - began,
        simulations,
    )


def _best_of(
    base: Decisions,
    base_value: float,
    candidates: list[Decisions],
    objective: Callable[[list[Decisions]], np.ndarray],
) -> tuple[Decisions, float]:
    """The best of ``base`` and ``candidates`` by ``objective`` (lower is better; the base on
    ties), and its value."""
    if not candidates:
        return base, base_value
    values = objective(candidates)
    best = int(np.argmin(values))
    return (
        (candidates[best], float(values[best])) if values[best] < base_value else (base, base_value)
    )


def policy_decisions(
    checkpoint: str | Path | Checkpoint,
    name: str,
    graph: OpGraph,
    cluster: Cluster,
    *,
    samples: int = 0,
    finetune_steps: int = 0,
    seed: int = 0,
    out_dir: str | Path | None = None,
    moves: int | None = None,
) -> tuple[Decisions, float]:
    """A policy's decisions for a graph: zero-shot (:func:`infer`), or the best seen while
    fine-tuning ``finetune_steps`` steps (:func:`finetune`).

    Args:
      checkpoint: the policy (a path, or a loaded :class:`Checkpoint`).
      name: the graph's name (fine-tuning labels its results by it).
      graph: the graph.
      cluster: the cluster to decide for.
      samples: zero-shot: also draw this many samples and keep the best.
      finetune_steps: 1..50 to fine-tune first (0: zero-shot).
      seed: seed of the samples, or of fine-tuning.
      out_dir: the fine-tuning run directory (default: a temporary one, removed after).
      moves: zero-shot: also try this many of the move head's moves (:func:`infer`;
        None: the policy's default, :func:`policy_moves`).

    Returns:
      ``(decisions, seconds they took)``.
    """
    ckpt = _loaded(checkpoint)
    if not finetune_steps:
        found = infer(ckpt, graph, cluster, samples=samples, seed=seed, moves=moves)
        return found.decisions, found.seconds
    with contextlib.ExitStack() as stack:
        if out_dir is None:
            out_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="hlo-go-finetune-"))
        result = finetune(
            ckpt, (name, graph), cluster, steps=finetune_steps, out_dir=out_dir,
            config=ckpt.config.replace(progress=False, seed=seed),
        )  # fmt: skip
    return result.graphs[name].best, result.elapsed


def simulate_time(graph: OpGraph, cluster: Cluster, decisions: Decisions) -> float:
    """Simulated step time of decisions (a convenience for tables)."""
    return float(simulate(graph, cluster, decisions).step_time)
