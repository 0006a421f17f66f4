"""HDP: the hierarchical device placer of Mirhoseini et al. (ICLR 2018) as a baseline.

"A Hierarchical Model for Device Placement" places a graph in two stages, both learned
jointly with REINFORCE on measured (here: simulated) step times:

* the :class:`Grouper`, a feed-forward network over per-node features, puts every node
  into one of ``G`` groups (a categorical sample per node);
* the :class:`Placer`, a sequence-to-sequence model, reads the groups (each embedded as
  the mean of its members' features and its log total cost) with a bidirectional LSTM
  and emits one device per group with an attentional LSTM decoder, each step fed the
  previous group's device embedding.

A node runs on its group's device. The log-probability of a sample is the sum of the
Grouper's log-probabilities over nodes and the Placer's over (non-empty) groups; the
policy gradient uses reward ``-log(step_time / t_ref)`` (``t_ref``: everything on one
device) less an exponential moving average baseline, as in the paper.

Adaptations to this code base: colocated nodes (``OpGraph.colocation_group``) must share
a device, so the Grouper assigns whole colocation sets (a set's features are its
members' mean, its op type its first member's); the decoder also reads the current
group's encoder state next to the previous device's embedding (attention alone would
have to find the current group); the node features are :data:`hlo_go.graph.FEATURE_NAMES`
(log FLOPs, log output bytes, degrees, topological position, op kind one-hots, ...) plus
the node's log kernel time on the cluster, standardized per graph, and a learned op
type embedding. HDP only places: scheduling and fusion are held fixed (``fixed``).

:func:`run_hdp` trains on one graph and returns a
:class:`~hlo_go.baselines.search.SearchResult` like :func:`~hlo_go.baselines.run_search`,
its budget counted in simulator evaluations (``K`` per policy-gradient step).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from hlo_go.baselines.costs import compute_weights
from hlo_go.baselines.curve import Curve
from hlo_go.baselines.registry import register_search
from hlo_go.baselines.result import SearchResult
from hlo_go.baselines.search import DEFAULT_BUDGET, score
from hlo_go.decisions import Decisions
from hlo_go.graph import OPCODE_VOCAB, OpGraph
from hlo_go.sim import Cluster, simulate

_NEG = -1e9  # logit of a masked choice (finite, so 0 × log p stays 0)
_OPCODE_EMBEDDING = 16  # width of the Grouper's learned op type embedding


@dataclass(frozen=True)
class HDPConfig:
    """Sizes and optimizer settings of :func:`run_hdp`.

    Attributes:
      groups: G, the groups the Grouper sorts nodes into (capped at the graph's number of
        colocation sets).
      hidden: width of the Grouper's hidden layer and of every LSTM of the Placer.
      samples: K, placements sampled and simulated per policy-gradient step.
      learning_rate: Adam's step size.
      baseline_decay: decay of the reward's exponential moving average (the baseline).
      entropy_coef: weight of the entropy bonus, the entropy summed over all of a
        sample's decisions like its log-probability (0: none).
      max_grad_norm: gradients are clipped to this global norm.
    """

    groups: int = 64
    hidden: int = 64
    samples: int = 16
    learning_rate: float = 3e-3
    baseline_decay: float = 0.9
    entropy_coef: float = 1e-3
    max_grad_norm: float = 1.0


class HDPInputs(NamedTuple):
    """One graph as the HDP networks see it (built on the host by :func:`hdp_inputs`).

    ``S`` is the number of colocation sets (the units the Grouper assigns), ``F`` the
    feature width.

    Attributes:
      set_features: ``float32[S, F]`` mean standardized features of each set's nodes.
      set_opcode: ``int32[S]`` opcode id of each set's first node.
      set_feature_sum: ``float32[S, F]`` the sum of those features (for group means).
      set_size: ``float32[S]`` nodes per set.
      set_cost: ``float32[S]`` the set's kernel time in microseconds.
      set_topo_sum: ``float32[S]`` the sum of its nodes' topological positions in [0, 1].
      device_mask: ``bool[D]`` the devices the Placer may choose.
    """

    set_features: jnp.ndarray
    set_opcode: jnp.ndarray
    set_feature_sum: jnp.ndarray
    set_size: jnp.ndarray
    set_cost: jnp.ndarray
    set_topo_sum: jnp.ndarray
    device_mask: jnp.ndarray


class HDPSample(NamedTuple):
    """One sampled (or scored) placement.

    Attributes:
      set_group: ``int32[S]`` the group of every colocation set.
      group_device: ``int32[G]`` the device of every group (empty groups too).
      log_prob: the sample's log-probability: Grouper over sets plus Placer over the
        non-empty groups.
      entropy: the entropies of the Grouper's choices (all sets) plus the Placer's (the
        non-empty groups), summed like ``log_prob``.
    """

    set_group: jnp.ndarray
    group_device: jnp.ndarray
    log_prob: jnp.ndarray
    entropy: jnp.ndarray


def colocation_sets(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    """The colocation sets of a graph, numbered.

    Args:
      graph: an OpGraph.

    Returns:
      ``(node_set int64[N], first int64[S])``: every node's set, and each set's smallest
      node id (ascending).
    """
    first, node_set = np.unique(np.asarray(graph.colocation_group), return_inverse=True)
    return node_set.astype(np.int64), first.astype(np.int64)


def hdp_inputs(graph: OpGraph, cluster: Cluster, num_devices: int | None = None) -> HDPInputs:
    """The per-set arrays the HDP networks read (numpy work, outside jit).

    Node features: the graph's feature columns plus ``log1p`` of the node's kernel time
    in microseconds (:func:`hlo_go.baselines.costs.compute_weights`), each column
    standardized over the graph's nodes (constant columns become 0).

    Args:
      graph: an OpGraph with at least one node.
      cluster: the cluster whose kernel times count.
      num_devices: the Placer's output width (default the cluster's device count);
        devices from ``cluster.num_devices`` on are masked out.

    Returns:
      The :class:`HDPInputs`.

    Raises:
      ValueError: an empty graph, or fewer output slots than devices.
    """
    n = graph.num_nodes
    if n == 0:
        raise ValueError("HDP needs a graph with at least one node")
    width = cluster.num_devices if num_devices is None else int(num_devices)
    if width < cluster.num_devices:
        raise ValueError(f"num_devices={width} is below the cluster's {cluster.num_devices}")
    cost_us = compute_weights(graph, cluster) * 1e6
    raw = np.concatenate(
        [np.asarray(graph.features, np.float64), np.log1p(cost_us)[:, None]], axis=1
    )
    std = raw.std(axis=0)
    features = np.where(std > 1e-8, (raw - raw.mean(axis=0)) / np.maximum(std, 1e-8), 0.0)
    topo = np.empty(n, np.float64)
    topo[np.asarray(graph.topo_order)] = np.arange(n) / max(1, n - 1)
    node_set, first = colocation_sets(graph)
    s = first.size
    size = np.bincount(node_set, minlength=s).astype(np.float64)
    feature_sum = np.zeros((s, features.shape[1]))
    np.add.at(feature_sum, node_set, features)
    return HDPInputs(
        set_features=jnp.asarray(feature_sum / size[:, None], jnp.float32),
        set_opcode=jnp.asarray(np.asarray(graph.opcode)[first], jnp.int32),
        set_feature_sum=jnp.asarray(feature_sum, jnp.float32),
        set_size=jnp.asarray(size, jnp.float32),
        set_cost=jnp.asarray(np.bincount(node_set, cost_us, minlength=s), jnp.float32),
        set_topo_sum=jnp.asarray(np.bincount(node_set, topo, minlength=s), jnp.float32),
        device_mask=jnp.asarray(np.arange(width) < cluster.num_devices),
    )


def _categorical_entropy(logp: jnp.ndarray) -> jnp.ndarray:
    return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


class Grouper(nn.Module):
    """Logits over groups for every colocation set: a 2-layer MLP.

    Attributes:
      groups: G, the logit width.
      hidden: the hidden layer's width.
    """

    groups: int
    hidden: int = 64

    @nn.compact
    def __call__(self, features: jnp.ndarray, opcode: jnp.ndarray) -> jnp.ndarray:
        """Scores groups.

        Args:
          features: ``float32[S, F]`` per-set features.
          opcode: ``int32[S]`` per-set opcode ids (:data:`hlo_go.graph.OPCODE_VOCAB`).

        Returns:
          ``float32[S, G]`` logits.
        """
        embedded = nn.Embed(len(OPCODE_VOCAB), _OPCODE_EMBEDDING, name="opcode")(opcode)
        x = jnp.concatenate([features, embedded], axis=-1)
        x = nn.relu(nn.Dense(self.hidden, name="hidden")(x))
        return nn.Dense(self.groups, name="logits")(x)


class _DecoderStep(nn.Module):
    """One step of the Placer's decoder: LSTM, content-based attention, device choice."""

    num_devices: int
    hidden: int
    sample: bool

    @nn.compact
    def __call__(
        self,
        carry: tuple[tuple[jnp.ndarray, jnp.ndarray], jnp.ndarray],
        inputs: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray],
        encoded: jnp.ndarray,
        keys: jnp.ndarray,
        valid: jnp.ndarray,
        device_mask: jnp.ndarray,
    ) -> tuple[Any, tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]]:
        lstm, previous = carry
        key, forced, current = inputs
        embedded = nn.Embed(self.num_devices + 1, self.hidden, name="device")(previous)
        lstm, h = nn.OptimizedLSTMCell(self.hidden, name="lstm")(
            lstm, jnp.concatenate([embedded, current])
        )
        # Bahdanau attention: v · tanh(W_k enc_j + W_q h), over the non-empty groups.
        query = nn.Dense(self.hidden, use_bias=False, name="query")(h)
        energy = nn.Dense(1, use_bias=False, name="energy")(jnp.tanh(keys + query))[:, 0]
        weights = jax.nn.softmax(jnp.where(valid, energy, _NEG))
        context = weights @ encoded
        out = jnp.tanh(nn.Dense(self.hidden, name="out")(jnp.concatenate([h, context])))
        logits = jnp.where(device_mask, nn.Dense(self.num_devices, name="logits")(out), _NEG)
        logp = jax.nn.log_softmax(logits)
        device = jax.random.categorical(key, logits) if self.sample else forced
        device = device.astype(jnp.int32)
        return (lstm, device), (device, logp[device], _categorical_entropy(logp))


class Placer(nn.Module):
    """A device for every group: bidirectional LSTM encoder, attentional LSTM decoder.

    Attributes:
      num_devices: D, the decoder's output width (masked by ``device_mask``).
      hidden: the LSTMs' width.
    """

    num_devices: int
    hidden: int = 64

    @nn.compact
    def __call__(
        self,
        groups: jnp.ndarray,
        valid: jnp.ndarray,
        device_mask: jnp.ndarray,
        key: jnp.ndarray,
        devices: jnp.ndarray | None = None,
    ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
        """Samples (or scores) one device per group, in sequence order.

        Args:
          groups: ``float32[G, E]`` group embeddings in sequence order, the non-empty
            groups first.
          valid: ``bool[G]`` which are non-empty (a prefix).
          device_mask: ``bool[D]`` the devices that exist.
          key: the sampling key (unused when ``devices`` is given).
          devices: ``int32[G]`` devices to score instead of sampling (teacher forcing).

        Returns:
          ``(devices int32[G], log_prob float32[G], entropy float32[G])`` per step; the
          steps of empty groups are computed but mean nothing.
        """
        g = groups.shape[0]
        x = nn.Dense(self.hidden, name="embed")(groups)
        length = jnp.sum(valid).astype(jnp.int32)
        encoder = nn.Bidirectional(
            nn.RNN(nn.OptimizedLSTMCell(self.hidden), name="forward"),
            nn.RNN(nn.OptimizedLSTMCell(self.hidden), name="backward"),
            name="encoder",
        )
        encoded = encoder(x[None], seq_lengths=length[None])[0]  # [G, 2H]
        attention_keys = nn.Dense(self.hidden, use_bias=False, name="attention_keys")(encoded)
        scan = nn.scan(
            _DecoderStep,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=(0, nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast),
            out_axes=0,
        )
        decoder = scan(self.num_devices, self.hidden, devices is None, name="decoder")
        zeros = jnp.zeros((self.hidden,), x.dtype)
        start = jnp.asarray(self.num_devices, jnp.int32)  # the "no previous group" token
        forced = jnp.zeros((g,), jnp.int32) if devices is None else devices.astype(jnp.int32)
        _, out = decoder(
            ((zeros, zeros), start),
            (jax.random.split(key, g), forced, encoded),
            encoded,
            attention_keys,
            valid,
            device_mask,
        )
        return out


class HDPPolicy(nn.Module):
    """Grouper and Placer together: a whole placement per call.

    Attributes:
      groups: G.
      num_devices: the Placer's output width D.
      hidden: the networks' width.
    """

    groups: int
    num_devices: int
    hidden: int = 64

    @nn.compact
    def __call__(
        self,
        inputs: HDPInputs,
        key: jnp.ndarray,
        set_group: jnp.ndarray | None = None,
        group_device: jnp.ndarray | None = None,
    ) -> HDPSample:
        """Samples a placement, or scores a given one.

        Args:
          inputs: the graph (:func:`hdp_inputs`).
          key: the sampling key.
          set_group: ``int32[S]`` groups to score instead of sampling; with it,
            ``group_device`` must be given too.
          group_device: ``int32[G]`` devices per group (group id order) to score.

        Returns:
          The :class:`HDPSample`.
        """
        g = self.groups
        group_key, place_key = jax.random.split(key)
        logits = Grouper(g, self.hidden, name="grouper")(inputs.set_features, inputs.set_opcode)
        logp = jax.nn.log_softmax(logits)
        if set_group is None:
            set_group = jax.random.categorical(group_key, logits)
        set_group = set_group.astype(jnp.int32)
        group_logp = jnp.sum(jnp.take_along_axis(logp, set_group[:, None], axis=1))
        group_entropy = jnp.sum(_categorical_entropy(logp))

        def segment(values: jnp.ndarray) -> jnp.ndarray:
            return jax.ops.segment_sum(values, set_group, num_segments=g)

        size = segment(inputs.set_size)
        valid = size > 0
        count = jnp.maximum(size, 1.0)
        mean_features = segment(inputs.set_feature_sum) / count[:, None]
        position = segment(inputs.set_topo_sum) / count
        embedding = jnp.concatenate(
            [mean_features, jnp.log1p(segment(inputs.set_cost))[:, None], jnp.log1p(size)[:, None]],
            axis=1,
        )
        # Sequence order: non-empty groups by mean topological position, then the empty.
        order = jnp.argsort(jnp.where(valid, position, 2.0 + jnp.arange(g) / g), stable=True)
        forced = None if group_device is None else group_device.astype(jnp.int32)[order]
        placer = Placer(self.num_devices, self.hidden, name="placer")
        devices, place_logp, place_entropy = placer(
            embedding[order], valid[order], inputs.device_mask, place_key, forced
        )
        valid_sorted = valid[order]
        return HDPSample(
            set_group=set_group,
            group_device=jnp.zeros((g,), jnp.int32).at[order].set(devices),
            log_prob=group_logp + jnp.sum(jnp.where(valid_sorted, place_logp, 0.0)),
            entropy=group_entropy + jnp.sum(jnp.where(valid_sorted, place_entropy, 0.0)),
        )


class _Functions(NamedTuple):
    init: Any
    sample: Any
    update: Any


@functools.lru_cache(maxsize=16)
def _functions(groups: int, num_devices: int, config: HDPConfig) -> _Functions:
    """The jitted init, sample and update functions (cached: one compile per shape)."""
    model = HDPPolicy(groups, num_devices, config.hidden)
    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate)
    )

    def init(key: jnp.ndarray, inputs: HDPInputs) -> tuple[Any, Any]:
        params = model.init(key, inputs, key)
        return params, optimizer.init(params)

    def sample(params: Any, inputs: HDPInputs, keys: jnp.ndarray) -> HDPSample:
        return jax.vmap(lambda k: model.apply(params, inputs, k))(keys)

    def loss(
        params: Any, inputs: HDPInputs, keys: jnp.ndarray, taken: HDPSample, advantage: jnp.ndarray
    ) -> jnp.ndarray:
        scored = jax.vmap(lambda k, s, d: model.apply(params, inputs, k, s, d))(
            keys, taken.set_group, taken.group_device
        )
        return -jnp.mean(advantage * scored.log_prob) - config.entropy_coef * jnp.mean(
            scored.entropy
        )

    def update(
        params: Any,
        opt_state: Any,
        inputs: HDPInputs,
        keys: jnp.ndarray,
        taken: HDPSample,
        advantage: jnp.ndarray,
    ) -> tuple[Any, Any, jnp.ndarray]:
        value, grads = jax.value_and_grad(loss)(params, inputs, keys, taken, advantage)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return _Functions(jax.jit(init), jax.jit(sample), jax.jit(update))


def hdp_functions(
    graph: OpGraph, cluster: Cluster, config: HDPConfig | None = None
) -> tuple[HDPInputs, Any, Any, Any]:
    """The inputs and jitted functions :func:`run_hdp` trains with.

    Args:
      graph: an OpGraph with at least one node.
      cluster: the cluster.
      config: sizes and optimizer settings (default :class:`HDPConfig`).

    Returns:
      ``(inputs, init, sample, update)``: ``init(key, inputs) -> (params, opt_state)``,
      ``sample(params, inputs, keys[K]) -> HDPSample`` (batched over keys), and
      ``update(params, opt_state, inputs, keys, taken, advantage) -> (params, opt_state,
      loss)``.
    """
    config = config or HDPConfig()
    inputs = hdp_inputs(graph, cluster)
    groups = max(1, min(config.groups, int(inputs.set_size.shape[0])))
    fns = _functions(groups, cluster.num_devices, config)
    return inputs, fns.init, fns.sample, fns.update


def hdp_placements(graph: OpGraph, taken: HDPSample) -> np.ndarray:
    """Node placements of a batch of samples: every node on its set's group's device.

    Args:
      graph: the graph the samples are for.
      taken: a batch of K samples (``set_group [K, S]``, ``group_device [K, G]``).

    Returns:
      ``int32[K, N]``; colocated nodes always share a device.
    """
    node_set, _ = colocation_sets(graph)
    set_group = np.asarray(taken.set_group)
    set_device = np.take_along_axis(np.asarray(taken.group_device), set_group, axis=1)
    return set_device[:, node_set].astype(np.int32)


def _check(budget: int, config: HDPConfig) -> None:
    if budget < 1:
        raise ValueError(f"budget must be at least 1 evaluation, got {budget}")
    if config.groups < 1 or config.hidden < 1 or config.samples < 1:
        raise ValueError(
            f"HDPConfig groups, hidden and samples must be at least 1, got {config.groups}, "
            f"{config.hidden} and {config.samples}"
        )
    if not 0.0 <= config.baseline_decay < 1.0:
        raise ValueError(f"baseline_decay must be in [0, 1), got {config.baseline_decay}")


class _Recorder:
    """Simulates placements (schedule and fusion fixed), keeps the best, the curve and
    the limits."""

    def __init__(
        self,
        graph: OpGraph,
        cluster: Cluster,
        fixed: Decisions,
        budget: int,
        time_limit: float | None,
        started: float,
        bar: Any,
    ) -> None:
        self.graph = graph
        self.cluster = cluster
        self.schedule = np.asarray(fixed.schedule_priority, np.float32)
        self.fusion = np.asarray(fixed.fusion_priority, np.float32)
        self.budget = budget
        self.time_limit = time_limit
        self.started = started
        self.bar = bar
        self.best = math.inf
        self.best_placement = np.zeros(graph.num_nodes, np.int32)
        self.best_oom = False
        self.seconds: list[float] = []
        self.values: list[float] = []
        self.stopped_by = "budget"

    def decisions(self, placement: np.ndarray) -> Decisions:
        return Decisions(placement, self.schedule, self.fusion)

    def more(self) -> bool:
        if len(self.values) >= self.budget:
            self.stopped_by = "budget"
            return False
        if self.time_limit is not None and time.perf_counter() - self.started >= self.time_limit:
            self.stopped_by = "time"
            return False
        return True

    def __call__(self, placement: np.ndarray) -> float:
        result = simulate(self.graph, self.cluster, self.decisions(placement), validate=False)
        value = score(result)
        if value < self.best:
            self.best, self.best_placement, self.best_oom = value, placement, result.oom
        self.seconds.append(time.perf_counter() - self.started)
        self.values.append(self.best)
        if self.bar is not None:
            self.bar.update(1)
            if len(self.values) % 50 == 0:
                self.bar.set_postfix(best_ms=f"{self.best * 1e3:.4g}")
        return value


def run_hdp(
    graph: OpGraph,
    cluster: Cluster,
    *,
    budget: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
    fixed: Decisions | None = None,
    config: HDPConfig | None = None,
    progress: bool = False,
) -> SearchResult:
    """Trains HDP's Grouper and Placer on one graph by REINFORCE; keeps the best placement.

    The first evaluation puts every node on device 0 (with ``fixed``'s schedule and
    fusion); its objective is ``t_ref``. Each step then samples ``K`` placements,
    simulates them (reward ``-log(objective / t_ref)``, objective :func:`score`) and
    takes one Adam step on the REINFORCE loss with a moving-average baseline. The last
    step may simulate fewer than ``K`` to end exactly at the budget. A one-device
    cluster has a single placement, evaluated once.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      budget: simulator evaluations (default :data:`hlo_go.baselines.search.DEFAULT_BUDGET`).
      time_limit: wall-clock seconds (setup and compilation included), or None for no
        limit; training stops at whichever limit comes first (after the first
        evaluation, which always runs).
      seed: the random seed (initialization and sampling).
      fixed: the schedule and fusion priorities to keep (default
        :meth:`Decisions.default`: FIFO, no fusion); its placement is ignored.
      config: sizes and optimizer settings (default :class:`HDPConfig`).
      progress: show a tqdm progress bar.

    Returns:
      A :class:`~hlo_go.baselines.search.SearchResult` (method ``"hdp"``); its ``best``
      keeps ``fixed``'s schedule and fusion and is validated.

    Raises:
      ValueError: a budget below 1, a bad config, or ``fixed`` invalid for the graph.
    """
    started = time.perf_counter()
    config = config or HDPConfig()
    budget = DEFAULT_BUDGET if budget is None else int(budget)
    _check(budget, config)
    fixed = Decisions.default(graph) if fixed is None else fixed
    fixed.validate(graph, cluster.num_devices)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=budget, desc="hdp", unit="eval", leave=False)
    rec = _Recorder(graph, cluster, fixed, budget, time_limit, started, bar)
    try:
        t_ref = rec(rec.best_placement)
        if graph.num_nodes and cluster.num_devices > 1:
            _train(graph, cluster, config, seed, t_ref, rec)
    finally:
        if bar is not None:
            bar.close()
    best = rec.decisions(rec.best_placement).validate(graph, cluster.num_devices)
    count = len(rec.values)
    return SearchResult(
        method="hdp",
        graph=graph.module_name,
        cluster=cluster.name,
        best=best,
        best_step_time=rec.best,
        best_oom=rec.best_oom,
        start_step_time=t_ref,
        curve=Curve(
            np.arange(1, count + 1, dtype=np.int64),
            np.asarray(rec.seconds, np.float64),
            np.asarray(rec.values, np.float64),
        ),
        evaluations=count,
        seconds=time.perf_counter() - started,
        seed=seed,
        stopped_by=rec.stopped_by,
    )


def _train(
    graph: OpGraph, cluster: Cluster, config: HDPConfig, seed: int, t_ref: float, rec: _Recorder
) -> None:
    """The REINFORCE loop of :func:`run_hdp`, until ``rec`` says stop."""
    inputs, init, sample, update = hdp_functions(graph, cluster, config)
    key, init_key = jax.random.split(jax.random.key(seed))
    params, opt_state = init(init_key, inputs)
    baseline: float | None = None
    while rec.more():
        key, step_key = jax.random.split(key)
        keys = jax.random.split(step_key, config.samples)
        taken = sample(params, inputs, keys)
        rewards = []
        for placement in hdp_placements(graph, taken):
            if not rec.more():
                return
            rewards.append(-math.log(max(rec(placement), 1e-30) / max(t_ref, 1e-30)))
        reward = np.asarray(rewards, np.float32)
        if baseline is None:
            baseline = float(reward.mean())
        advantage = reward - baseline
        decay = config.baseline_decay
        baseline = decay * baseline + (1.0 - decay) * float(reward.mean())
        if not rec.more():
            return  # the budget is spent: no one would sample from the update
        params, opt_state, _ = update(params, opt_state, inputs, keys, taken, advantage)


register_search("hdp", run_hdp)
