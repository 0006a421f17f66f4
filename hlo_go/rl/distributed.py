"""Data-parallel PPO pre-training over many processes (``jax.distributed``).

:func:`data_parallel_pretrain` is :func:`~hlo_go.rl.pretrain` with ``W`` workers that
each train on their own share of the graphs and average their gradients every
minibatch step. It is the same algorithm whether the ``W`` workers are ``W``
processes (``jax.distributed``, any backend: CPU processes on one host, one process per
GPU, TPU pod hosts) or one process emulating them in turn (``workers=W``); the two
agree up to the order of floating-point reductions (in practice: exactly, on one
machine type).

Definition. Worker ``w`` of ``W`` owns ``graphs[w::W]``. At step ``s`` every worker

1. picks its graph by :func:`~hlo_go.rl.pretrain`'s batch schedule applied to its own
   graph list;
2. samples ``K`` decision sets with its own key (:func:`worker_keys`: the step key of
   :func:`~hlo_go.rl.pretrain` for worker 0, that key folded with ``w`` for the others;
   so ``W = 1`` *is* :func:`~hlo_go.rl.pretrain`), scores them on the simulator and
   builds its :class:`~hlo_go.rl.PPOBatch` (advantages ``returns - values``, normalized
   over its own ``K`` samples, as :func:`~hlo_go.rl.minibatch_epochs` does);
3. for every epoch and minibatch (its shuffle key derived from its own update key),
   computes the PPO gradient on its minibatch (:meth:`~hlo_go.rl.GOAgent.grads`);
   the ``W`` gradients and :class:`~hlo_go.rl.LossInfo` are averaged across workers
   (``LossInfo.grad_norm``: the norm of the averaged gradient) and every worker applies
   the same Optax step (:meth:`~hlo_go.rl.GOAgent.apply_grads`).

With several clusters, the items are (graph, cluster) pairs, as in
:func:`~hlo_go.rl.pretrain`: worker ``w`` owns ``pairs[w::W]``.

Parameters start from the same seed everywhere, so they stay identical on every
process (:func:`params_checksum` checks it at the end). A killed run resumes from its
last checkpoint (``config.checkpoint_every``) and continues as if it had not stopped. Only process 0 writes the
checkpoint and ``metrics.csv`` / TensorBoard files and shows a progress bar; every
process returns the same :class:`~hlo_go.rl.TrainResult` (history and all graphs'
results, gathered from the workers owning them).

The ``jax.distributed`` specifics are the small functions of this module:
:func:`initialize` (gloo collectives on CPU, then ``jax.distributed.initialize``),
:func:`allreduce_mean`, :func:`gather_workers`, :func:`allgather_objects`. Launch
recipes: ``experiments/distributed.py`` and ``experiments/DISTRIBUTED.md``.
"""

from __future__ import annotations

import hashlib
import pickle
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from hlo_go.gonet import prepare_input
from hlo_go.rl.checkpoint import (
    Checkpoint,
    ResumeMismatchError,
    check_resume,
    checkpoint_path,
    load_checkpoint,
    restore_opt_state,
    restore_params,
    run_meta,
    save_checkpoint,
)
from hlo_go.rl.config import TrainConfig
from hlo_go.rl.env import GraphEnv, Scores
from hlo_go.rl.metrics import MetricsLogger
from hlo_go.rl.ppo import LossInfo, PPOBatch, normalize_advantages
from hlo_go.rl.trainer import (
    METRIC_COLUMNS,
    GraphLike,
    GraphResult,
    TrainResult,
    _batch_schedule,
    _clusters,
    _graph_result,
    _greedy,
    _make_envs,
    _named,
    _pairs,
    agent_for,
    apply_prior,
    step_stats,
)
from hlo_go.sim import Cluster
from hlo_go.xla._jaxlib import gloo_available as _jaxlib_gloo_available

KIND = "data_parallel_pretrain"
"""The ``kind`` of the checkpoints :func:`data_parallel_pretrain` writes."""

# -- jax.distributed specifics ------------------------------------------------------------


def gloo_available() -> bool:
    """Whether this jaxlib has gloo CPU collectives (what CPU processes need to talk)."""
    return _jaxlib_gloo_available()


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Joins this process to a ``jax.distributed`` job; call before any other JAX use.

    Selects gloo for CPU collectives (without it, CPU processes cannot exchange
    gradients; GPU and TPU backends use their own), then calls
    ``jax.distributed.initialize``. With no arguments JAX detects the job itself (TPU
    pods, SLURM, Open MPI); on a plain host give all three.

    Args:
      coordinator: ``HOST:PORT`` of process 0's coordinator service.
      num_processes: P, processes in the job.
      process_id: this process's index, ``0 <= process_id < P``.
    """
    explicit = (coordinator, num_processes, process_id)
    if any(v is not None for v in explicit) and any(v is None for v in explicit):
        raise ValueError(
            "give coordinator, num_processes and process_id together, or none (auto-detect)"
        )
    if gloo_available():
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, num_processes, process_id)


def shutdown() -> None:
    """Leaves the ``jax.distributed`` job (a no-op when not in one)."""
    if jax.process_count() > 1:
        jax.distributed.shutdown()


def is_multiprocess() -> bool:
    """True inside a ``jax.distributed`` job of more than one process."""
    return jax.process_count() > 1


def gather_workers(tree: Any) -> Any:
    """This process's workers' trees, stacked (leaves ``[L, ...]``) → every worker's,
    in worker order (leaves ``[W, ...]``, numpy). One process: the input, as numpy."""
    if not is_multiprocess():
        return jax.tree.map(np.asarray, jax.device_get(tree))
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


@jax.jit
def _mean0(stacked: Any) -> Any:
    return jax.tree.map(lambda x: jnp.mean(x, axis=0), stacked)


def allreduce_mean(tree: Any) -> Any:
    """The mean over processes of one tree per process (the tree itself on one process)."""
    return _mean0(gather_workers(jax.tree.map(lambda x: np.asarray(x)[None], tree)))


def allgather_objects(obj: Any) -> list[Any]:
    """Every process's ``obj`` (any picklable value), in process order."""
    if not is_multiprocess():
        return [obj]
    from jax.experimental import multihost_utils

    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = np.asarray(
        multihost_utils.process_allgather(np.asarray([data.size], np.int32), tiled=True)
    )
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: data.size] = data
    gathered = np.asarray(multihost_utils.process_allgather(padded))
    return [pickle.loads(gathered[i, : int(n)].tobytes()) for i, n in enumerate(sizes)]


def params_checksum(params: Any) -> str:
    """SHA-256 (hex) of every parameter's bytes, in tree order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(params)):
        leaf = np.ascontiguousarray(leaf)
        digest.update(str((leaf.dtype, leaf.shape)).encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()


# -- the algorithm --------------------------------------------------------------------------


def _resumed(out_dir: Path, resume: bool, is_main: bool) -> Checkpoint | None:
    """``out_dir``'s checkpoint when resuming, read by process 0 and sent to every process
    (None: a fresh run). A checkpoint process 0 cannot read fails on every process."""
    found: Checkpoint | Exception | None = None
    if resume and is_main and checkpoint_path(out_dir).exists():
        try:
            found = load_checkpoint(out_dir)
        except Exception as error:  # every process must learn of it, not wait forever
            found = error
    found = allgather_objects(found)[0]
    if isinstance(found, Exception):
        raise found
    return found


def worker_keys(seed: int, step: int, worker: int) -> tuple[jax.Array, jax.Array]:
    """``(sample_key, update_key)`` of a worker at a step.

    Worker 0 gets exactly :func:`~hlo_go.rl.pretrain`'s keys (so one worker is
    :func:`~hlo_go.rl.pretrain`); worker ``w > 0`` splits
    ``fold_in(fold_in(key(seed), step), w)`` instead.
    """
    key = jax.random.fold_in(jax.random.key(seed), step)
    if worker:
        key = jax.random.fold_in(key, worker)
    sample_key, update_key = jax.random.split(key)
    return sample_key, update_key


def resolve_workers(workers: int | None) -> int:
    """W: ``jax.process_count()`` in a multi-process job (where ``workers`` must be None
    or equal to it), else ``workers`` (default 1)."""
    processes = jax.process_count()
    if processes > 1:
        if workers not in (None, processes):
            raise ValueError(
                f"workers={workers} but this jax.distributed job has {processes} processes; "
                "each process is one worker (pass workers=None)"
            )
        return processes
    workers = 1 if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return workers


def data_parallel_pretrain(
    graphs: Sequence[GraphLike],
    cluster: Cluster | Sequence[Cluster],
    tasks: Sequence[str] | None = None,
    *,
    steps: int,
    out_dir: str | Path,
    config: TrainConfig | None = None,
    workers: int | None = None,
    resume: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Pre-trains one policy on many graphs with ``W`` data-parallel workers.

    See the module docstring for the algorithm. Call it on every process of a
    ``jax.distributed`` job (after :func:`initialize`) with the same arguments, or in one
    process with ``workers=W`` to emulate ``W`` workers (the reference a multi-process
    run matches).

    Args:
      graphs: OpGraphs, or ``(name, OpGraph)`` pairs (the same list on every process).
      cluster: the cluster to optimize for, or several: then, as in
        :func:`~hlo_go.rl.pretrain`, every (graph, cluster) pair is trained on, named
        ``graph@cluster``, told apart by the cluster features. Worker ``w`` trains on
        ``pairs[w::W]`` (with one cluster, ``graphs[w::W]``).
      tasks: tasks learned jointly (default ``config.tasks``).
      steps: total steps; each step trains every worker on one of its graphs.
      out_dir: run directory (process 0 writes the checkpoint, ``metrics.csv``, ``tb/``).
      config: settings (``switch_every`` and ``graphs_per_batch`` apply per worker).
      workers: W in one process (None: 1); in a multi-process job None or the number
        of processes.
      resume: continue from ``out_dir``'s checkpoint when there is one (process 0 reads
        it and sends it to the others, so only process 0 needs the directory). It must
        be this run's: kind, clusters, graphs, tasks, settings and ``W``
        (:class:`~hlo_go.rl.checkpoint.ResumeMismatchError` otherwise). A resumed run
        continues exactly as the uninterrupted one would have.
      callback: called on every process with each step's metric row.

    Returns:
      The :class:`~hlo_go.rl.TrainResult`, the same on every process. Its history rows
      (the steps this call ran) are over all workers: ``graph`` the workers' graphs
      joined by ``+``, ``loss`` and the other loss columns the average over workers of
      the first minibatch step, ``reward_max`` / ``step_time_min`` the max / min and the
      other columns the mean over workers, ``wall_s`` the slowest process's;
      ``reward_mean_per_worker`` lists each worker's mean reward.

    Raises:
      ValueError: fewer (graph, cluster) pairs than workers, ``workers`` disagreeing with
        the process count, ``steps < 1`` or fewer than a resumed checkpoint has done, no
        cluster or two named alike, or a cluster larger than ``config.max_devices``.
      ResumeMismatchError: ``out_dir`` holds another run's checkpoint.
    """
    config = config or TrainConfig()
    if tasks is not None:
        config = config.replace(tasks=tuple(tasks))
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    count = resolve_workers(workers)
    clusters = _clusters(cluster)
    pairs = _pairs(_named(graphs), clusters)
    if len(pairs) < count:
        raise ValueError(
            f"{count} workers but only {len(pairs)} graphs: worker w trains on "
            f"graphs[w::{count}], so every worker needs at least one graph"
        )
    owned = [pairs[w::count] for w in range(count)]
    local = [jax.process_index()] if is_multiprocess() else list(range(count))
    is_main = jax.process_index() == 0
    out_dir = Path(out_dir)

    envs = {
        w: [_make_envs([(name, graph)], c, config, None)[0] for name, graph, c in owned[w]]
        for w in local
    }
    schedules = [_batch_schedule(len(owned[w]), config) for w in range(count)]
    agent = agent_for(config)
    optimizer = agent.optimizer
    # Same parameters on every process: initialized from the first graph (as pretrain does).
    template = agent.policy.init(
        jax.random.key(config.seed), prepare_input(pairs[0][1], config.policy), config.max_devices
    )
    meta = {
        **run_meta(KIND, clusters, {name: graph for name, graph, _ in pairs}),
        "workers": count,
        "processes": jax.process_count(),
    }
    ckpt = _resumed(out_dir, resume, is_main)
    start, elapsed = 0, 0.0
    if ckpt is not None:
        check_resume(
            ckpt,
            kind=KIND,
            cluster=clusters,
            graphs={name: graph for name, graph, _ in pairs},
            config=config,
            where=out_dir,
        )
        if ckpt.meta.get("workers") != count:
            raise ResumeMismatchError(
                f"{out_dir}: cannot resume: the checkpoint was trained by "
                f"{ckpt.meta.get('workers')} workers, not {count} (worker w's graphs and "
                "keys depend on W); use another --out directory"
            )
        if steps < ckpt.step:
            raise ValueError(f"steps={steps} but the checkpoint has already done {ckpt.step} steps")
        params = restore_params(template, ckpt.params)
        opt_state = restore_opt_state(optimizer.init(params), ckpt.opt_state)
        start, elapsed = ckpt.step, ckpt.elapsed
        for w in local:
            for env in envs[w]:
                env.restore_best(ckpt.best.get(env.name, {}))
                if config.prior_follows_best:
                    env.follow_best()  # where the run's prior stood when it was saved
    else:
        params = apply_prior(template, config)
        opt_state = optimizer.init(params)
    logger = (
        MetricsLogger(out_dir, METRIC_COLUMNS, resume_step=start if ckpt else None)
        if is_main
        else None
    )
    history: list[dict[str, Any]] = []
    size = config.samples
    mb = config.ppo.minibatch_size or size

    def best_states() -> dict[str, Any]:
        mine = {env.name: env.best_state() for w in local for env in envs[w]}
        merged: dict[str, Any] = {}
        for part in allgather_objects(mine):
            merged.update(part)
        return {name: merged[name] for name, _, _ in pairs}

    def save(step: int) -> None:
        best = best_states()  # a collective: every process takes part
        if is_main:
            save_checkpoint(
                out_dir,
                params=params,
                opt_state=opt_state,
                step=step,
                elapsed=elapsed,
                best=best,
                config=config,
                meta=meta,
            )

    bar = tqdm(
        total=steps,
        initial=start,
        desc=f"data-parallel pretrain ({count} workers) on {meta['cluster']}",
        disable=not (config.progress and is_main),
    )
    try:
        for step in range(start, steps):
            began = time.perf_counter()
            step_envs: dict[int, GraphEnv] = {}
            step_scores: dict[int, Scores] = {}
            batches: dict[int, PPOBatch] = {}
            update_keys: dict[int, jax.Array] = {}
            for w in local:
                env = step_envs[w] = envs[w][schedules[w](step)]
                sample_key, update_keys[w] = worker_keys(config.seed, step, w)
                actions, old_log_prob, values = agent.sample(
                    params, env, sample_key, config.samples
                )
                scores = step_scores[w] = env.score(env.decisions(actions))
                returns = jnp.asarray(scores.rewards, jnp.float32)
                advantages = returns - jnp.asarray(values, jnp.float32)
                if config.ppo.normalize_advantages:
                    advantages = normalize_advantages(advantages)
                batches[w] = PPOBatch(
                    actions,
                    jnp.asarray(old_log_prob, jnp.float32),
                    advantages,
                    returns,
                    agent.weights(env, config.samples),
                )
            infos: list[LossInfo] = []
            for epoch in range(config.ppo.epochs):
                orders = {
                    w: jax.random.permutation(jax.random.fold_in(update_keys[w], epoch), size)
                    if mb < size
                    else jnp.arange(size)
                    for w in local
                }
                for start in range(0, size, mb):
                    parts = []
                    for w in local:
                        index = orders[w][start : start + mb]
                        minibatch = jax.tree.map(lambda x, i=index: jnp.asarray(x)[i], batches[w])
                        parts.append(agent.grads(params, step_envs[w], minibatch))
                    stacked = jax.tree.map(lambda *xs: np.stack(xs), *jax.device_get(parts))
                    grads, info = _mean0(gather_workers(stacked))
                    params, opt_state = agent.apply_grads(params, opt_state, grads)
                    infos.append(info._replace(grad_norm=optax.tree.norm(grads)))
            evaluate = (step + 1) % config.eval_every == 0 or step + 1 == steps
            greedy_times = {
                w: _greedy(agent, params, step_envs[w])[1] if evaluate else float("nan")
                for w in local
            }
            if config.prior_follows_best:
                for w in local:
                    step_envs[w].follow_best()
            elapsed += time.perf_counter() - began
            local_stats = [
                step_stats(step_envs[w], step_scores[w], greedy_times[w], elapsed) for w in local
            ]
            names = list(local_stats[0])
            # [W, stats], exactly (gather_workers would pass through float32)
            every = np.asarray(
                [list(row.values()) for part in allgather_objects(local_stats) for row in part],
                np.float64,
            )
            column = {name: every[:, i] for i, name in enumerate(names)}
            first, last = jax.device_get((infos[0], infos[-1]))
            row = {
                "step": step,
                "graph": "+".join(owned[w][schedules[w](step)][0] for w in range(count)),
                **{name: float(values.mean()) for name, values in column.items()},
                "wall_s": float(column["wall_s"].max()),
                "reward_max": float(column["reward_max"].max()),
                "step_time_min": float(column["step_time_min"].min()),
                "loss": float(first.total),
                "policy_loss": float(first.policy),
                "value_loss": float(first.value),
                "entropy": float(first.entropy),
                "approx_kl": float(last.approx_kl),
                "clip_fraction": float(last.clip_fraction),
                "grad_norm": float(first.grad_norm),
                "workers": count,
                "reward_mean_per_worker": column["reward_mean"].tolist(),
            }
            if logger is not None:
                logger.log(step, row)
            history.append(row)
            if callback is not None:
                callback(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", r=f"{row['reward_mean']:.3f}")
            done = step + 1
            if done == steps or (config.checkpoint_every and done % config.checkpoint_every == 0):
                save(done)
    finally:
        bar.close()
        if logger is not None:
            logger.close()
    mine = {env.name: _graph_result(agent, params, env) for w in local for env in envs[w]}
    gathered: dict[str, GraphResult] = {}
    checksums = []
    for part, checksum in allgather_objects((mine, params_checksum(params))):
        gathered.update(part)
        checksums.append(checksum)
    if len(set(checksums)) > 1:
        warnings.warn(
            f"parameters differ across processes at the end (checksums {checksums})",
            RuntimeWarning,
            stacklevel=2,
        )
    results = {name: gathered[name] for name, _, _ in pairs}
    return TrainResult(params, steps, results, out_dir, history, elapsed)
