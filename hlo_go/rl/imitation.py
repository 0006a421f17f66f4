"""Imitation pre-training of the GO policy on teachers (:mod:`hlo_go.rl.teachers`).

The second step of the learning recipe (teachers → imitation → PPO, ``docs/rl.md``).
PPO from scratch rarely samples the coordinated changes a search finds, so the network
is first taught the teachers' decisions: on each (graph, cluster), the teacher's action
``a*`` of every learned decision (device of each colocation group, schedule bin and
fusion bin of each node: :func:`teacher_actions`) is the target, scored with teacher
forcing (each task conditioned on the teacher's actions of the earlier tasks, as PPO
scores its samples), by cross-entropy::

    L(θ) = − Σ_r w_r log π_θ(a*_r | G, D) / Σ_r w_r

over the learned tasks' rows ``r``, with ``w_r`` as :meth:`hlo_go.rl.GOAgent.weights`
gives them (0 for padding and for colocated nodes other than their group's leader); the
decisions the teacher changed from the best heuristic may be scaled up to carry a share
of the total (``changed_share``, :func:`changed_weights`; none by default).
One graph per Adam step; graphs of several clusters train one network (the device
count ``D`` is an input; the parameters are built for ``config.max_devices``).

A network with a move head (``PolicyConfig(move_head=True)``) also learns which single
moves pay: each example carries the simulated gains of moving its largest groups (and
some others) from the best heuristic's decisions (:func:`hlo_go.rl.moves.label_moves`),
and ``move_weight`` × :func:`move_loss`, a listwise cross-entropy of the head's scores
against ``softmax(gain / T)``, is added to ``L``.

:func:`refine_moves` continues training from a checkpoint with the move labels simulated
from the network's own decode (:func:`decode_bases`: its greedy decisions and confidence
cuts, where its climb starts) instead of the best heuristic's, as DAgger labels the states
the learner visits.

**Devices matched** (``match_devices``). On a cluster of alike devices a device's number is
a name: a teacher that starts from a graph partition (METIS) numbers its parts arbitrarily,
and no network can read from a node which of several interchangeable devices it got, so
imitation teaches it a near-uniform distribution and its greedy decode piles the graph on
one or two devices (``docs/rl.md``). With ``match_devices`` the placement target of each
step is the teacher's placement renumbered by the cluster's symmetry
(:func:`hlo_go.sim.symmetry.device_permutations`) under which the network's current
distribution scores it highest (:func:`matched_placement`): the loss asks which nodes share
a device, not which number it has, and the network keeps the numbering it drifts to. Every
renumbering taught is a symmetry, so it names decisions that simulate exactly as the
teacher's.

There is no heuristic-prior input: the network's own decisions are what is taught and
measured (the prior is an ablation of PPO training, :mod:`hlo_go.rl.prior`).

The result is a checkpoint (:mod:`hlo_go.rl.checkpoint`, kind ``"imitation"``) that
:func:`hlo_go.rl.finetune`, :func:`~hlo_go.rl.infer` and :func:`~hlo_go.rl.pretrain`
(``init=``) start from; the run resumes from it after a kill.
"""

from __future__ import annotations

import collections
import functools
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from hlo_go.decisions import Decisions
from hlo_go.gonet import MASKED_LOGIT, TASKS, GONetwork, PolicyConfig, colocated_log_probs
from hlo_go.gonet.network import with_prior
from hlo_go.graph import OpGraph
from hlo_go.rl.agent import GOAgent, decision_weights
from hlo_go.rl.checkpoint import (
    RESUMABLE_CHANGES,
    Checkpoint,
    ResumeMismatchError,
    checkpoint_path,
    graph_fingerprint,
    load_checkpoint,
    restore_opt_state,
    restore_params,
    save_checkpoint,
)
from hlo_go.rl.config import TrainConfig
from hlo_go.rl.env import GraphEnv
from hlo_go.rl.metrics import MetricsLogger
from hlo_go.rl.moves import label_moves, move_target_distribution
from hlo_go.rl.prior import prior_decisions
from hlo_go.rl.teachers import CHANGED_BITS, Teacher, check_teacher_graph, job_graph
from hlo_go.rl.trainer import NonFiniteTrainingError, agent_for, infer
from hlo_go.sim import Cluster, get_cluster, simulate
from hlo_go.sim.symmetry import MAX_PERMUTED_DEVICES, device_permutations

logger = logging.getLogger(__name__)

Params = Any

KIND = "imitation"
"""The ``kind`` of an imitation checkpoint's metadata."""

IMITATION_COLUMNS = ("step", "graph", "wall_s", "loss")
"""Columns of an imitation run's ``metrics.csv``."""


def teacher_actions(env: GraphEnv, decisions: Decisions) -> dict[str, np.ndarray]:
    """Per-position actions of decisions: the inverse of :meth:`GraphEnv.decisions`.

    Placement is each node's device; schedule and fusion priorities become their
    nearest bin (as :class:`GraphEnv` builds ``fixed_actions``). Tasks the environment
    does not learn take its ``fixed_actions``, as the agent's samples do.

    Args:
      env: the graph on its cluster.
      decisions: decisions for that graph (e.g. a :class:`~hlo_go.rl.teachers.Teacher`'s).

    Returns:
      Task name -> ``int32[P]``; ``env.decisions({t: a[None]})`` gives back the learned
      tasks' placement exactly and their priorities' bins exactly.

    Raises:
      hlo_go.decisions.DecisionsError: decisions invalid for the graph and cluster.
    """
    own = env.positions_of(decisions.validate(env.graph, env.num_devices))
    return {
        t: (own[t] if t in env.tasks else np.asarray(env.fixed_actions[t])).astype(np.int32)
        for t in TASKS
    }


def canonical_devices(graph: OpGraph, cluster: Cluster, decisions: Decisions) -> Decisions:
    """``decisions`` with its devices renumbered in graph order: the device whose
    computations start earliest becomes device 0, and so on; unused devices last.

    A device starts where the first tenth of its computing nodes (flops > 0; all its
    nodes if none compute) lies in topological order: a part of a training step holds its
    layers' forward ops early and their gradients late, so its mean position says little,
    while its first tenth follows the forward pass.

    Search teachers that start from a graph partition (METIS) number their parts
    arbitrarily, so two graphs of one family can put their first layers on different
    devices, and a network imitating them sees alike nodes labelled with any device. On a
    cluster whose devices and links are alike, renumbering changes nothing simulated;
    where it would change the simulated step time or memory, the decisions come back
    unchanged.
    """
    placement = np.asarray(decisions.placement)
    rank = np.empty(graph.num_nodes, np.int64)
    rank[np.asarray(graph.topo_order)] = np.arange(graph.num_nodes)
    computes = np.asarray(graph.flops) > 0
    start = {}
    for device in np.unique(placement):
        mine = placement == device
        chosen = mine & computes
        if not chosen.any():
            chosen = mine
        start[int(device)] = float(np.percentile(rank[chosen], 10))
    order = sorted(range(cluster.num_devices), key=lambda d: (d not in start, start.get(d, 0), d))
    new_id = np.empty(cluster.num_devices, np.int64)
    new_id[order] = np.arange(cluster.num_devices)
    if np.array_equal(new_id, np.arange(cluster.num_devices)):
        return decisions
    renumbered = decisions._replace(placement=new_id[placement].astype(placement.dtype))
    before, after = simulate(graph, cluster, decisions), simulate(graph, cluster, renumbered)
    same = after.oom == before.oom and np.isclose(after.step_time, before.step_time, rtol=1e-9)
    return renumbered if same else decisions


@functools.lru_cache(maxsize=16)
def device_table(cluster: Cluster, max_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """A cluster's device symmetries as :func:`imitation_loss` takes them, one shape for every
    cluster of a network (so its step compiles once).

    Args:
      cluster: at most ``max_devices`` devices.
      max_devices: ``D_max``, at most :data:`~hlo_go.sim.symmetry.MAX_PERMUTED_DEVICES`.

    Returns:
      ``(perms int32[D_max!, D_max], valid bool[D_max!])``: the rows of
      :func:`~hlo_go.sim.symmetry.device_permutations`, each extended by the identity on
      devices ``D .. D_max - 1``, then rows of the identity marked invalid.

    Raises:
      ValueError: ``max_devices`` above the limit, or a cluster larger than it.
    """
    if not cluster.num_devices <= max_devices <= MAX_PERMUTED_DEVICES:
        raise ValueError(
            f"matching devices needs max_devices <= {MAX_PERMUTED_DEVICES} and a cluster of at "
            f"most max_devices devices; got max_devices={max_devices} and cluster "
            f"{cluster.name!r} of {cluster.num_devices}"
        )
    found = device_permutations(cluster)
    rows = math.factorial(max_devices)
    perms = np.tile(np.arange(max_devices, dtype=np.int32), (rows, 1))
    perms[: len(found), : cluster.num_devices] = found
    valid = np.arange(rows) < len(found)
    perms.setflags(write=False)
    valid.setflags(write=False)
    return perms, valid


def matched_placement(
    log_probs: jax.Array,
    teacher: jax.Array,
    weights: jax.Array,
    perms: jax.Array,
    valid: jax.Array,
) -> jax.Array:
    """The teacher's placement renumbered by the symmetry under which ``log_probs`` scores it
    highest: ``perms[q][teacher]`` for the valid ``q`` maximizing
    ``Σ_r w_r log p_r(perms[q][teacher_r])``, ``int32[N]``.

    Args:
      log_probs: ``float32[N, D_max]`` each row's placement log-probabilities (row ``r`` of
        a group's leader: the group's, :func:`hlo_go.gonet.colocated_log_probs`).
      teacher: ``int32[N]`` the teacher's device per row.
      weights: ``float32[N]`` which rows count (0: padding, colocated non-leaders).
      perms: ``int32[Q, D_max]`` candidate renumberings (:func:`device_table`).
      valid: ``bool[Q]`` the rows of ``perms`` that may be taken.
    """
    d = log_probs.shape[1]
    cost = jnp.zeros((d, d), log_probs.dtype).at[teacher].add(log_probs * weights[:, None])
    score = cost[jnp.arange(d)[None, :], perms].sum(-1)  # cost[a, p[a]] summed over a
    best = jnp.argmax(jnp.where(valid, score, -jnp.inf))
    return perms[best][teacher].astype(jnp.int32)


def imitation_loss(
    network: GONetwork,
    params: Params,
    graphs: Any,
    devices: jax.Array,
    actions: Mapping[str, jax.Array],
    weights: jax.Array,
    tasks: Sequence[str],
    move_target: jax.Array | None = None,
    move_mask: jax.Array | None = None,
    move_weight: float | jax.Array = 0.0,
    device_perms: jax.Array | None = None,
    perm_valid: jax.Array | None = None,
) -> jax.Array:
    """The cross-entropy of the teacher's actions (module docstring), ``float32[]``, plus
    ``move_weight`` × the move head's listwise loss where the network has one.

    The log-probabilities come from the path :class:`~hlo_go.rl.GOAgent` scores PPO's
    samples on: :meth:`GONetwork.shared`, then :meth:`GONetwork.decide` given the actions
    (per decision, :attr:`~hlo_go.gonet.network.NetworkOutput.row_log_prob`).

    Args:
      network: the Flax module (``GOPolicy.network(max_devices)``).
      params: its variables.
      graphs: the policy input (``env.inputs.graphs``).
      devices: ``int32[]``, ``D``.
      actions: task name -> ``int32[P]`` (:func:`teacher_actions`).
      weights: ``float32[len(tasks) * P]`` (:func:`hlo_go.rl.agent.decision_weights`).
      tasks: the learned tasks, in canonical order.
      move_target: ``float32[P]`` the move head's target distribution over the labeled
        groups' rows (:func:`hlo_go.rl.moves.move_target_distribution`, by position).
      move_mask: ``float32[P]`` 1 at those rows; all 0: no move loss.
      move_weight: the move loss's weight.
      device_perms: ``int32[Q, D_max]`` the cluster's device symmetries
        (:func:`device_table`): the teacher's placement is first renumbered by the one the
        network scores highest (:func:`matched_placement`); None: taught as it is.
      perm_valid: ``bool[Q]`` the valid rows of ``device_perms``.

    Raises:
      ValueError: ``device_perms`` for a network that does not decide placement first.
    """
    shared = network.apply(params, graphs, devices, method=GONetwork.shared)
    if device_perms is not None and "placement" in tasks:
        if network.config.task_order[0] != "placement":
            raise ValueError("matching devices needs a network that decides placement first")
        logits = with_prior(shared.first_logits, graphs, "placement")
        valid = jnp.arange(network.max_devices) < devices
        log_probs = colocated_log_probs(logits, valid, graphs.nodes["colocation_group"])
        size = log_probs.shape[0]
        start = list(tasks).index("placement") * size
        placement = matched_placement(
            jax.lax.stop_gradient(log_probs), actions["placement"],
            weights[start : start + size], device_perms, perm_valid,
        )  # fmt: skip
        actions = {**actions, "placement": placement}
    out = network.apply(
        params, shared, graphs, devices, method=GONetwork.decide, actions=dict(actions)
    )
    rows = jnp.concatenate([out.row_log_prob[t] for t in tasks])
    loss = -(rows * weights).sum() / jnp.maximum(weights.sum(), 1.0)
    if shared.move_score is None or move_target is None or move_mask is None:
        return loss
    return loss + move_weight * move_loss(shared.move_score, move_target, move_mask)


def move_loss(score: jax.Array, target: jax.Array, mask: jax.Array) -> jax.Array:
    """The move head's listwise cross-entropy ``−Σ_g q_g log softmax(score)_g`` over the
    labeled rows (``mask``), ``float32[]``; 0 when none is labeled.

    Args:
      score: ``float32[P]`` the head's scores (:attr:`SharedPass.move_score`).
      target: ``float32[P]`` ``q``, summing to 1 over the labeled rows.
      mask: ``float32[P]`` 1 at the labeled rows.
    """
    logits = jnp.where(mask > 0, score, MASKED_LOGIT)
    log_p = jax.nn.log_softmax(logits)
    return jnp.where(mask.sum() > 0, -(target * jnp.where(mask > 0, log_p, 0.0)).sum(), 0.0)


class Example(NamedTuple):
    """One (graph, cluster) to imitate.

    Attributes:
      label: ``graph@cluster``.
      teacher: its teacher.
      env: the graph on its cluster (no prior).
      actions: the teacher's per-position actions (:func:`teacher_actions`).
      weights: which decisions count (:func:`hlo_go.rl.agent.decision_weights`); the
        teacher agreement weighs decisions by them.
      loss_weights: the loss's weights (:func:`changed_weights`): ``weights`` with the
        decisions the teacher changed from the heuristic weighing more.
      move_target: ``float32[P]`` the move head's target distribution by position
        (:func:`hlo_go.rl.moves.move_target_distribution`; zeros without a move head).
      move_mask: ``float32[P]`` 1 at the labeled groups' rows (zeros: no move loss).
      device_perms: the cluster's device symmetries to match the placement over
        (:func:`device_table`: ``int32[Q, D_max]``), or None: taught as numbered.
      perm_valid: ``bool[Q]``, the valid rows of ``device_perms`` (None with it).
    """

    label: str
    teacher: Teacher
    env: GraphEnv
    actions: dict[str, np.ndarray]
    weights: np.ndarray
    loss_weights: np.ndarray
    move_target: np.ndarray
    move_mask: np.ndarray
    device_perms: np.ndarray | None = None
    perm_valid: np.ndarray | None = None


class Imitator:
    """The jitted loss and Adam step of one configuration (one compile
    per padding bucket each; :attr:`trace_counts` counts them).

    Args:
      config: the policy's settings (``policy``, ``max_devices``, ``tasks``).
      optimizer: the Optax optimizer the step applies.
      move_weight: the move loss's weight.
      match_devices: teach each example's placement up to its cluster's device symmetries
        (its ``device_perms``; module docstring).
    """

    def __init__(
        self,
        config: TrainConfig,
        optimizer: optax.GradientTransformation,
        move_weight: float = 0.0,
        match_devices: bool = False,
    ) -> None:
        self.config = config
        self.move_weight = float(move_weight)
        self.match_devices = bool(match_devices)
        self.tasks = config.tasks
        self.optimizer = optimizer
        self.network = GONetwork(config.policy, config.max_devices)
        self._traces: collections.Counter[str] = collections.Counter()
        self._loss_jit = jax.jit(self._loss_fn)
        self._step_jit = jax.jit(self._step_fn)

    @property
    def trace_counts(self) -> dict[str, int]:
        """Function name -> times it was traced (= compiled)."""
        return dict(self._traces)

    def _loss_fn(self, params, graphs, devices, actions, weights, move_target, move_mask, perms):
        self._traces["loss"] += 1
        return imitation_loss(
            self.network, params, graphs, devices, actions, weights, self.tasks,
            move_target, move_mask, self.move_weight, *perms,
        )  # fmt: skip

    def _step_fn(
        self, params, opt_state, graphs, devices, actions, weights, move_target, move_mask, perms
    ):
        self._traces["step"] += 1

        def loss(p):
            return imitation_loss(
                self.network, p, graphs, devices, actions, weights, self.tasks,
                move_target, move_mask, self.move_weight, *perms,
            )  # fmt: skip

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    def devices(self, env: GraphEnv) -> jax.Array:
        """``D`` of ``env``'s cluster as the network's input."""
        if env.num_devices > self.config.max_devices:
            raise ValueError(
                f"cluster {env.cluster.name!r} has {env.num_devices} devices, but the policy "
                f"is built for at most {self.config.max_devices} (config.max_devices)"
            )
        return jnp.asarray(env.num_devices, jnp.int32)

    def perms(self, example: Example) -> tuple[Any, Any]:
        """``(device_perms, perm_valid)`` the loss takes: the example's, or ``(None, None)``
        when not matching devices.

        Raises:
          ValueError: matching devices, and the example carries no device table.
        """
        if not self.match_devices:
            return None, None
        if example.device_perms is None:
            raise ValueError(
                f"example {example.label!r} has no device table; make it with "
                "make_examples(..., match_devices=True)"
            )
        return example.device_perms, example.perm_valid

    def loss(self, params: Params, example: Example) -> float:
        """The example's loss under ``params`` (jitted)."""
        env = example.env
        return float(
            self._loss_jit(
                params,
                env.inputs.graphs,
                self.devices(env),
                example.actions,
                example.loss_weights,
                example.move_target,
                example.move_mask,
                self.perms(example),
            )
        )

    def step(
        self, params: Params, opt_state: optax.OptState, example: Example
    ) -> tuple[Params, optax.OptState, jax.Array]:
        """One Adam step on the example's loss: ``(params, opt_state, loss)``."""
        env = example.env
        return self._step_jit(
            params, opt_state, env.inputs.graphs, self.devices(env), example.actions,
            example.loss_weights, example.move_target, example.move_mask, self.perms(example),
        )  # fmt: skip


def teacher_agreement(agent: GOAgent, params: Params, example: Example) -> dict[str, float]:
    """Shares of the teacher's decisions the policy's greedy decode takes, by learned task
    and over all (``"all"``), each weighted as the loss is.

    Args:
      agent: the policy's agent (:func:`hlo_go.rl.agent_for`): its greedy decode is the
        one PPO, :func:`~hlo_go.rl.infer` and fine-tuning use.
      params: the parameters.
      example: the (graph, cluster) and its teacher's actions.
    """
    return _agreement(agent.greedy(params, example.env), example, agent.tasks)


def _agreement(
    greedy: Mapping[str, np.ndarray], example: Example, tasks: Sequence[str]
) -> dict[str, float]:
    """:func:`teacher_agreement` of given greedy actions (``[1, P]`` per task); with the
    example's device table, placement agrees up to the symmetry that matches best."""
    greedy = {t: a[0] for t, a in greedy.items()}
    size = example.env.inputs.bucket[0]
    out: dict[str, float] = {}
    hits = total = 0.0
    for i, task in enumerate(tasks):
        w = example.weights[i * size : (i + 1) * size]
        taught = example.actions[task]
        if task == "placement" and example.device_perms is not None:
            chosen = np.eye(example.device_perms.shape[1], dtype=np.float32)[greedy[task]]
            taught = np.asarray(
                matched_placement(chosen, taught, w, example.device_perms, example.perm_valid)
            )  # the numbering under which the most weight agrees
        same = (greedy[task] == taught).astype(np.float32)
        out[task] = float((same * w).sum() / max(w.sum(), 1.0))
        hits += float((same * w).sum())
        total += float(w.sum())
    out["all"] = hits / max(total, 1.0)
    return out


@functools.lru_cache(maxsize=8)
def _imitator(
    policy: PolicyConfig,
    max_devices: int,
    tasks: tuple[str, ...],
    learning_rate: float,
    max_grad_norm: float,
    move_weight: float,
    match_devices: bool,
) -> Imitator:
    clip = [optax.clip_by_global_norm(max_grad_norm)] if max_grad_norm > 0 else []
    optimizer = optax.chain(*clip, optax.adam(learning_rate))
    config = TrainConfig(policy=policy, max_devices=max_devices, tasks=tasks)
    return Imitator(config, optimizer, move_weight, match_devices)


def imitator_for(
    config: TrainConfig,
    learning_rate: float = 1e-3,
    max_grad_norm: float = 1.0,
    move_weight: float = 0.0,
    *,
    match_devices: bool = False,
) -> Imitator:
    """The :class:`Imitator` of a configuration, Adam settings, move-loss weight and device
    matching, shared by every run with the same (so it compiles once per bucket per
    process)."""
    return _imitator(
        config.policy, config.max_devices, config.tasks, float(learning_rate),
        float(max_grad_norm), float(move_weight), bool(match_devices),
    )  # fmt: skip


class ImitationResult(NamedTuple):
    """The outcome of :func:`train_imitation`.

    Attributes:
      params: the trained parameters.
      config: the settings they belong to (the checkpoint's).
      step: steps done in total (including those before a resume).
      history: this call's rows: ``step``, ``graph``, ``loss``, ``wall_s``.
      agreement_before: label -> share of the teacher's learned decisions the greedy
        decode of the parameters this call started from (fresh, or resumed) takes (``"all"`` of :func:`teacher_agreement`).
      agreement: label -> the same after training.
      agreement_by_task: label -> task -> the same after training, by task.
      step_times: label -> simulated step time of the final greedy decisions.
      out_dir: the run directory (checkpoint, ``metrics.csv``), or None.
      seconds: training wall-clock seconds (including those before a resume).
    """

    params: Params
    config: TrainConfig
    step: int
    history: list[dict[str, Any]]
    agreement_before: dict[str, float]
    agreement: dict[str, float]
    agreement_by_task: dict[str, dict[str, float]]
    step_times: dict[str, float]
    out_dir: Path | None
    seconds: float


def _fastest_per_pair(teachers: Sequence[Teacher]) -> list[Teacher]:
    """One teacher per (graph, cluster): the fastest (fits in memory first), in order."""
    chosen: dict[str, Teacher] = {}
    for teacher in teachers:
        label = teacher.job.label
        old = chosen.get(label)
        if old is None or (teacher.oom, teacher.step_time) < (old.oom, old.step_time):
            chosen[label] = teacher
    return list(chosen.values())


MOVE_WEIGHT = 1.0
"""The move head's loss weight (:func:`move_loss`), for a network with one."""

CHANGED_SHARE = 0.0
"""The share of an example's loss weight that the decisions its teacher changed from the
best heuristic carry (:func:`changed_weights`); 0: every decision weighs alike (on the
gpt2 and bert folds of ``experiments/imitation.py``, 0.5 gave a zero-shot geomean of
0.82x the best heuristic where 0 gave 1.00x: ``docs/rl.md``)."""


def changed_weights(
    env: GraphEnv, teacher: Teacher, weights: np.ndarray, tasks: Sequence[str], share: float
) -> np.ndarray:
    """The loss's weights: ``weights``, with the decisions the teacher changed from the
    best heuristic (:attr:`~hlo_go.rl.teachers.Teacher.changed`) scaled up alike so they
    carry ``share`` of the total (a teacher is mostly the heuristic: unweighted, its few
    changes, what makes it faster, are lost in the average).

    ``weights`` as they are when the teacher changed nothing, its changes are not known,
    or ``share`` is 0.

    Args:
      env: the example's environment.
      teacher: its teacher.
      weights: ``float32[len(tasks) * P]`` (:func:`hlo_go.rl.agent.decision_weights`).
      tasks: the learned tasks, in canonical order.
      share: in ``[0, 1)``.
    """
    if not 0.0 <= share < 1.0:
        raise ValueError(f"the changed decisions' share must be in [0, 1), got {share}")
    if teacher.changed is None or share == 0.0:
        return weights
    changed = np.concatenate(
        [
            env.inputs.to_positions((teacher.changed & CHANGED_BITS[t]) > 0).astype(np.float32)
            for t in tasks
        ]
    )
    on, off = float((weights * changed).sum()), float((weights * (1 - changed)).sum())
    if on == 0.0 or off == 0.0:
        return weights
    boost = share / (1.0 - share) * off / on
    return (weights * np.where(changed > 0, boost, 1.0)).astype(np.float32)


def make_examples(
    teachers: Sequence[Teacher],
    config: TrainConfig,
    *,
    graphs: Mapping[str, OpGraph] | None = None,
    changed_share: float = CHANGED_SHARE,
    progress: bool = False,
    move_bases: Mapping[str, Decisions] | None = None,
    renumber_devices: bool = False,
    match_devices: bool = False,
) -> list[Example]:
    """The (graph, cluster) examples of teachers: environments without a prior, the
    teachers' actions and the decisions' weights (:func:`changed_weights` with
    ``changed_share`` for the loss).

    Several teachers of one (graph, cluster) give one example, the fastest's. For a
    network with a move head (``config.policy.move_head``), each example's move labels
    are simulated here (:func:`hlo_go.rl.moves.label_moves` from the best heuristic's
    decisions, the teacher's start, rerun by name: a few hundred simulations per example),
    or, where ``move_bases`` maps the example's label (``graph@cluster``) to decisions, from
    those (:func:`decode_bases`: the network's own decode, where its climb starts).
    ``renumber_devices``: the teachers' placements renumbered by :func:`canonical_devices`.
    ``match_devices``: each example carries its cluster's device table (:func:`device_table`).

    Raises:
      ValueError: no teachers, or a cluster with more devices than ``config.max_devices``
        (with ``match_devices``: or than :data:`~hlo_go.sim.symmetry.MAX_PERMUTED_DEVICES`).
      TeacherStoreError: a teacher made for another graph than the one given or loaded.
    """
    if not teachers:
        raise ValueError("imitation needs at least one teacher")
    loaded: dict[str, OpGraph] = dict(graphs or {})
    examples = []
    chosen = _fastest_per_pair(teachers)
    moves = config.policy.move_head
    bar = tqdm(chosen, desc="move labels" if moves else "examples", disable=not progress)
    for teacher in bar:
        job = teacher.job
        if job.graph not in loaded:
            loaded[job.graph] = job_graph(job)
        graph = loaded[job.graph]
        check_teacher_graph(teacher, graph)
        cluster = get_cluster(job.cluster)
        if cluster.num_devices > config.max_devices:
            raise ValueError(
                f"teacher {job.label}: cluster {cluster.name!r} has {cluster.num_devices} "
                f"devices, config.max_devices is {config.max_devices} (build the parameters "
                "for the largest cluster)"
            )
        env = GraphEnv(
            graph, cluster, config.policy, config.tasks, name=job.label,
            reward_config=config.reward,
        )  # fmt: skip
        taught = teacher.decisions
        if renumber_devices:
            taught = canonical_devices(graph, cluster, taught.validate(graph, cluster.num_devices))
        actions = teacher_actions(env, taught)
        weights = decision_weights(env.inputs, config.tasks)
        loss_weights = changed_weights(env, teacher, weights, config.tasks, changed_share)
        size = env.inputs.bucket[0]
        move_target = move_mask = np.zeros(size, np.float32)
        if moves:
            if move_bases is not None and job.label in move_bases:
                base = move_bases[job.label]
            else:
                _, base = prior_decisions(graph, cluster, teacher.best_heuristic)
            labels = label_moves(graph, cluster, base.validate(graph, cluster.num_devices))
            target, mask = move_target_distribution(labels, graph)
            move_target, move_mask = env.inputs.to_positions(target), env.inputs.to_positions(mask)
        perms, valid = device_table(cluster, config.max_devices) if match_devices else (None, None)
        example = Example(
            job.label, teacher, env, actions, weights, loss_weights, move_target, move_mask,
            perms, valid,
        )  # fmt: skip
        examples.append(example)
    return examples


def decode_bases(
    checkpoint: Checkpoint,
    teachers: Sequence[Teacher],
    *,
    graphs: Mapping[str, OpGraph] | None = None,
    progress: bool = False,
) -> dict[str, Decisions]:
    """Where the network's climb starts on each teacher's (graph, cluster): the best of its
    greedy decisions and confidence cuts (:func:`hlo_go.rl.infer` without moves), by
    example label (``graph@cluster``)."""
    loaded: dict[str, OpGraph] = dict(graphs or {})
    bases = {}
    for teacher in tqdm(_fastest_per_pair(teachers), desc="own decodes", disable=not progress):
        job = teacher.job
        if job.graph not in loaded:
            loaded[job.graph] = job_graph(job)
        cluster = get_cluster(job.cluster)
        bases[job.label] = infer(checkpoint, loaded[job.graph], cluster, moves=0).decisions
    return bases


def refine_moves(
    checkpoint: Checkpoint,
    teachers: Sequence[Teacher],
    *,
    steps: int,
    graphs: Mapping[str, OpGraph] | None = None,
    seed: int = 0,
    progress: bool = False,
    out_dir: str | Path | None = None,
    learning_rate: float = 1e-3,
) -> ImitationResult:
    """Teaches a network's move head the moves that pay from its own decode.

    The head is first taught single moves from the best heuristic's decisions, but the
    decode climbs from the network's own (greedy and cuts), which differ most where the
    network is weakest. As in DAgger, the states the decode visits are labeled: ``steps``
    more imitation steps from ``checkpoint`` on the same teachers' decisions, with move
    labels simulated from :func:`decode_bases`.

    Args:
      checkpoint: an imitation checkpoint of a network with a move head.
      teachers: its teachers (or any others).
      steps: imitation steps (from the checkpoint's parameters, with a fresh optimizer).
      graphs: graph name -> OpGraph for teachers whose graph is not a corpus name.
      seed: the order of the examples.
      progress: progress bars.
      out_dir: run directory (:func:`train_imitation`).
      learning_rate: Adam's learning rate.

    Raises:
      ValueError: the network has no move head.
    """
    if not checkpoint.config.policy.move_head:
        raise ValueError("refine_moves needs a network with a move head")
    loaded = dict(graphs or {})  # each graph built once, for the decodes and the examples
    for teacher in teachers:
        if teacher.job.graph not in loaded:
            loaded[teacher.job.graph] = job_graph(teacher.job)
    bases = decode_bases(checkpoint, teachers, graphs=loaded, progress=progress)
    taught = checkpoint.meta.get("imitation", {})
    return train_imitation(
        teachers, checkpoint.config, steps=steps, graphs=loaded, seed=seed, progress=progress,
        out_dir=out_dir, learning_rate=learning_rate,
        changed_share=float(taught.get("changed_share", CHANGED_SHARE)),
        init=checkpoint, move_bases=bases,
        renumber_devices=bool(taught.get("renumber_devices", False)),
        match_devices=bool(taught.get("match_devices", False)),
    )  # fmt: skip


def _check_config(config: TrainConfig) -> None:
    if config.prior_method or config.prior_follows_best:
        raise ValueError(
            "imitation trains the network's own decisions, without a heuristic-prior input: "
            f"config.prior_method must be empty, got {config.prior_method!r}"
        )


def _meta(
    examples: Sequence[Example],
    *,
    seed: int,
    learning_rate: float,
    max_grad_norm: float,
    changed_share: float,
    move_weight: float,
    init: Checkpoint | None = None,
    move_bases: Mapping[str, Decisions] | None = None,
    renumber_devices: bool = False,
    match_devices: bool = False,
) -> dict[str, Any]:
    clusters = sorted({e.env.cluster.name for e in examples})
    return {
        "kind": KIND,
        "cluster": clusters[0] if len(clusters) == 1 else ",".join(clusters),
        "clusters": clusters,
        "graphs": [e.label for e in examples],
        "graph_fingerprints": {e.label: graph_fingerprint(e.env.graph) for e in examples},
        "teachers": {e.label: e.teacher.job.to_dict() for e in examples},
        "imitation": {
            "seed": int(seed),
            "learning_rate": float(learning_rate),
            "max_grad_norm": float(max_grad_norm),
            "changed_share": float(changed_share),
            "move_weight": float(move_weight),
            "init_step": None if init is None else int(init.step),
            "move_labels_from": "best heuristic" if move_bases is None else "given decisions",
            "renumber_devices": bool(renumber_devices),
            "match_devices": bool(match_devices),
        },
    }


def _check_resume(ckpt: Any, meta: dict[str, Any], config: TrainConfig, where: Path) -> None:
    def refuse(what: str) -> ResumeMismatchError:
        return ResumeMismatchError(
            f"{where}: cannot resume: {what}; use another out_dir (or resume=False)"
        )

    if ckpt.meta.get("kind") != KIND:
        raise refuse(f"it holds a {ckpt.meta.get('kind')!r} run, not {KIND!r}")
    saved = dict(ckpt.meta)
    if isinstance(saved.get("imitation"), dict):  # runs from before device matching
        saved["imitation"] = {"match_devices": False, **saved["imitation"]}
    for field in ("graphs", "graph_fingerprints", "teachers", "imitation"):
        if saved.get(field) != meta[field]:
            raise refuse(f"its {field} differ from this run's")
    old, new = ckpt.config.to_dict(), config.to_dict()
    changed = sorted(
        k
        for k in old.keys() | new.keys()
        if k not in RESUMABLE_CHANGES and old.get(k) != new.get(k)
    )
    if changed:
        raise refuse(f"settings differ from the checkpoint's ({', '.join(changed)})")


def _example_index(seed: int, step: int, count: int) -> int:
    """The example step ``step`` trains on: each pass over the examples (an epoch) in its
    own seeded order, so a resumed run visits them as the uninterrupted one would."""
    epoch, position = divmod(step, count)
    return int(np.random.default_rng([seed, epoch]).permutation(count)[position])


def train_imitation(
    teachers: Sequence[Teacher],
    config: TrainConfig,
    *,
    steps: int,
    graphs: Mapping[str, OpGraph] | None = None,
    seed: int = 0,
    progress: bool = False,
    out_dir: str | Path | None = None,
    resume: bool = True,
    learning_rate: float = 1e-3,
    max_grad_norm: float = 1.0,
    changed_share: float = CHANGED_SHARE,
    move_weight: float = MOVE_WEIGHT,
    init: Checkpoint | None = None,
    move_bases: Mapping[str, Decisions] | None = None,
    renumber_devices: bool = False,
    match_devices: bool = False,
) -> ImitationResult:
    """Trains the GO network to decide as the teachers did (module docstring).

    One (graph, cluster) example per step; each epoch visits them all, in a seeded order.

    Args:
      teachers: finished teachers (:func:`hlo_go.rl.teachers.make_teachers`), of any
        graphs and clusters (at most ``config.max_devices`` devices).
      config: the policy's settings (``policy``, ``max_devices``, ``tasks``; no
        ``prior_method``); saved in the checkpoint, so PPO fine-tuning from it uses them.
      steps: total Adam steps.
      graphs: graph name -> OpGraph for teachers whose graph is not a corpus name.
      seed: seed of the fresh parameters and of the order of the examples.
      progress: show a tqdm progress bar.
      out_dir: run directory: ``checkpoint.msgpack`` (every ``config.checkpoint_every``
        steps and at the end) and ``metrics.csv``; None: nothing written.
      resume: continue from ``out_dir``'s checkpoint when there is one (of this run:
        ResumeMismatchError otherwise).
      learning_rate: Adam's learning rate.
      max_grad_norm: global gradient-norm clip (0: none).
      changed_share: the share of each example's loss weight on the decisions its
        teacher changed from the best heuristic (:func:`changed_weights`; 0: all alike).
      move_weight: with a move head (``config.policy.move_head``), the weight of its
        listwise loss on simulated single moves (:func:`move_loss`).
      init: a checkpoint whose parameters training starts from (its network's settings,
        ``config.policy``, must be ``config``'s); None: fresh parameters.
      move_bases: example label (``graph@cluster``) -> the decisions its move labels are
        simulated from (default: the best heuristic's); see :func:`refine_moves`.
      renumber_devices: teach the teachers' placements with their devices renumbered in
        graph order (:func:`canonical_devices`).
      match_devices: teach each placement up to its cluster's device symmetries, in the
        numbering the network scores highest (module docstring; :func:`matched_placement`).

    Returns:
      The :class:`ImitationResult`.

    Raises:
      ValueError: ``steps < 1``, a prior in ``config``, or a cluster too large for it.
      hlo_go.rl.teachers.TeacherStoreError: a teacher made for another graph.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    _check_config(config)
    if init is not None and init.config.policy != config.policy:
        raise ValueError("init's network settings (config.policy) differ from config's")
    examples = make_examples(
        teachers, config, graphs=graphs, changed_share=changed_share, progress=progress,
        move_bases=move_bases, renumber_devices=renumber_devices, match_devices=match_devices,
    )  # fmt: skip
    move_weight = float(move_weight) if config.policy.move_head else 0.0
    imitator = imitator_for(
        config, learning_rate, max_grad_norm, move_weight, match_devices=match_devices
    )
    optimizer = imitator.optimizer
    agent = agent_for(config)  # its greedy decode and init are PPO's (compiled once)
    params = agent.policy.init(jax.random.key(seed), examples[0].env.inputs, config.max_devices)
    if init is not None:
        params = restore_params(params, init.params)
    opt_state = optimizer.init(params)
    meta = _meta(
        examples, seed=seed, learning_rate=learning_rate, max_grad_norm=max_grad_norm,
        changed_share=changed_share, move_weight=move_weight, init=init, move_bases=move_bases,
        renumber_devices=renumber_devices, match_devices=match_devices,
    )  # fmt: skip
    out = Path(out_dir) if out_dir is not None else None
    start, elapsed = 0, 0.0
    if out is not None and resume and checkpoint_path(out).exists():
        ckpt = load_checkpoint(out)
        _check_resume(ckpt, meta, config, out)
        params = restore_params(params, ckpt.params)
        opt_state = restore_opt_state(opt_state, ckpt.opt_state)
        start, elapsed = ckpt.step, ckpt.elapsed
    if steps < start:
        raise ValueError(f"steps={steps} but the checkpoint has already done {start} steps")
    before = {e.label: teacher_agreement(agent, params, e)["all"] for e in examples}
    log = MetricsLogger(out, IMITATION_COLUMNS, resume_step=start) if out is not None else None
    history: list[dict[str, Any]] = []

    def save(done: int) -> None:
        if out is not None:
            save_checkpoint(
                out, params=params, opt_state=opt_state, step=done, elapsed=elapsed, best={},
                config=config, meta=meta,
            )  # fmt: skip

    bar = tqdm(total=steps, initial=start, desc="imitation", disable=not progress)
    try:
        for step in range(start, steps):
            began = time.perf_counter()
            example = examples[_example_index(seed, step, len(examples))]
            params, opt_state, loss = imitator.step(params, opt_state, example)
            loss = float(loss)
            if not np.isfinite(loss):
                raise NonFiniteTrainingError(
                    f"imitation stopped at step {step} on {example.label!r}: the loss is {loss} "
                    "(check the learning rate and the starting parameters)"
                )
            elapsed += time.perf_counter() - began
            row = {"step": step, "graph": example.label, "wall_s": elapsed, "loss": loss}
            history.append(row)
            if log is not None:
                log.log(step, row)
            bar.update(1)
            bar.set_postfix(graph=example.label, loss=f"{loss:.3f}")
            done = step + 1
            if done == steps or (config.checkpoint_every and done % config.checkpoint_every == 0):
                save(done)
        if start == steps and out is not None and not checkpoint_path(out).exists():
            save(steps)
    finally:
        bar.close()
        if log is not None:
            log.close()
    greedy = {e.label: agent.greedy(params, e.env) for e in examples}  # one decode each
    by_task = {e.label: _agreement(greedy[e.label], e, agent.tasks) for e in examples}
    step_times = {
        e.label: float(e.env.score(e.env.decisions(greedy[e.label])).step_times[0])
        for e in examples
    }
    for e in examples:
        logger.info(
            "imitation %s: greedy agrees with the teacher on %.1f%% of decisions (%.1f%% "
            "before); %.4g s vs teacher %.4g s",
            e.label, 100 * by_task[e.label]["all"], 100 * before[e.label],
            step_times[e.label], e.teacher.step_time,
        )  # fmt: skip
    return ImitationResult(
        params,
        config,
        steps,
        history,
        before,
        {label: a["all"] for label, a in by_task.items()},
        by_task,
        step_times,
        out,
        elapsed,
    )
