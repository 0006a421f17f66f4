"""``GraphEnv``: one graph on one cluster, as the trainer sees it.

It holds the policy input (the graph padded to its bucket), the reference time of the
reward, the decisions of the tasks that are *not* being learned (``fixed``), and the
best decisions seen so far; it turns the policy's per-position actions into
:class:`~hlo_go.decisions.Decisions` and scores them with
:func:`hlo_go.sim.simulate_batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.gonet import TASKS, PolicyConfig, PolicyInput, bin_values, prepare_input
from hlo_go.gonet.actions import fusion_bins, priorities_to_bins
from hlo_go.graph import OpGraph
from hlo_go.rl.prior import with_prior_input
from hlo_go.rl.reward import RewardConfig, rewards
from hlo_go.sim import Cluster, simulate, simulate_batch

_DEFAULT_REWARD = RewardConfig()


class Scores(NamedTuple):
    """What K decision sets achieved.

    Attributes:
      rewards: ``float32[K]``.
      step_times: ``float64[K]`` simulated step times, seconds.
      oom: ``bool[K]``.
    """

    rewards: np.ndarray
    step_times: np.ndarray
    oom: np.ndarray


def check_tasks(tasks: Sequence[str]) -> tuple[str, ...]:
    """``tasks`` as a tuple in the canonical order, checked.

    Raises:
      ValueError: empty, repeated or unknown task names.
    """
    tasks = tuple(tasks)
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks or len(set(tasks)) != len(tasks):
        raise ValueError(
            f"tasks must be a non-empty subset of {', '.join(TASKS)} without repeats, got {tasks}"
        )
    return tuple(t for t in TASKS if t in tasks)


class GraphEnv:
    """One graph on one cluster: policy input, reward reference, fixed decisions, best seen.

    Args:
      graph: the graph.
      cluster: the cluster the decisions are for.
      policy_config: pads the graph to the policy's bucket.
      tasks: the tasks being learned; the others take ``fixed``'s values.
      name: a label for metrics and tables.
      fixed: decisions for the tasks not learned (default: one device, FIFO, no fusion).
      reward_config: the OOM penalty.
      reference_time: ``t_ref`` of the reward (default: the step time of
        :meth:`Decisions.default`, one device, FIFO, no fusion).
      prior: a heuristic's decisions the policy's logits lean to (:mod:`hlo_go.rl.prior`);
        :meth:`follow_best` may later move it to the best decisions seen.
      prior_bias: the logit added to each node's prior action.

    Raises:
      ValueError: bad tasks, or ``fixed`` invalid for the graph and cluster.
    """

    def __init__(
        self,
        graph: OpGraph,
        cluster: Cluster,
        policy_config: PolicyConfig,
        tasks: Sequence[str],
        *,
        name: str = "graph",
        fixed: Decisions | None = None,
        reward_config: RewardConfig = _DEFAULT_REWARD,
        reference_time: float | None = None,
        prior: Decisions | None = None,
        prior_bias: float = 0.0,
    ) -> None:
        self.graph = graph
        self.cluster = cluster
        self.name = name
        self.tasks = check_tasks(tasks)
        self.reward_config = reward_config
        self.fixed = (fixed or Decisions.default(graph)).validate(graph, cluster.num_devices)
        self._plain_inputs = prepare_input(graph, policy_config)
        self.inputs: PolicyInput = self._plain_inputs
        bins = policy_config.priority_bins
        self._bins = bins
        self._prior_bias = float(prior_bias)
        self.prior: Decisions | None = None
        self.prior_time = float("inf")
        if prior is not None:
            self.set_prior(prior.validate(graph, cluster.num_devices))
            self.prior_time = float(simulate(graph, cluster, self.prior).step_time)
        self._bin_values = bin_values(bins)
        self.fixed_actions: dict[str, np.ndarray] = self.positions_of(self.fixed)
        if reference_time is None:
            reference_time = simulate(graph, cluster, Decisions.default(graph)).step_time
        if not reference_time > 0:
            raise ValueError(f"reference_time must be > 0, got {reference_time}")
        self.reference_time = float(reference_time)
        self.best: Decisions | None = None
        self.best_time = float("inf")
        self.best_oom = True

    def set_prior(self, prior: Decisions) -> None:
        """Makes ``prior`` the decisions the policy's logits lean to (same input shapes,
        so nothing recompiles)."""
        self.prior = prior
        self.inputs = with_prior_input(
            self._plain_inputs, prior, bins=self._bins, weight=self._prior_bias
        )
        self._prior_priorities = {
            "scheduling": np.asarray(prior.schedule_priority, np.float32),
            "fusion": np.asarray(prior.fusion_priority, np.float32),
        }
        self._prior_bins = {
            "scheduling": priorities_to_bins(self._prior_priorities["scheduling"], self._bins),
            "fusion": fusion_bins(self._prior_priorities["fusion"], self._bins),
        }

    def follow_best(self) -> bool:
        """Moves the prior to the best decisions seen, if they fit in memory and are
        faster than it (an incumbent prior: samples then explore around the best so far).

        Returns:
          Whether the prior moved (never without a prior).
        """
        if self.prior is None or self.best is None or self.best_oom:
            return False
        if not self.best_time < self.prior_time:
            return False
        self.set_prior(self.best)
        self.prior_time = self.best_time
        return True

    def positions_of(self, decisions: Decisions) -> dict[str, np.ndarray]:
        """Per-position actions of every task for ``decisions``: each node's device, and its
        priorities' nearest bins (the inverse of :meth:`decisions` up to the bins)."""
        to_positions, bins = self.inputs.to_positions, self._bins
        return {
            "placement": to_positions(np.asarray(decisions.placement, np.int32)),
            "scheduling": to_positions(priorities_to_bins(decisions.schedule_priority, bins)),
            "fusion": to_positions(fusion_bins(decisions.fusion_priority, bins)),
        }

    @property
    def priority_bins(self) -> int:
        """B, the bins of the policy's schedule and fusion priorities."""
        return self._bins

    @property
    def num_devices(self) -> int:
        """D, the cluster's device count."""
        return self.cluster.num_devices

    def decisions(self, actions: dict[str, np.ndarray]) -> list[Decisions]:
        """Per-position actions (``[K, P]`` per task) → K decision sets.

        Tasks not learned take ``fixed``'s values exactly (not their bins).
        """
        count = int(np.shape(actions["placement"])[0])
        out = []
        for k in range(count):
            placement = (
                self.inputs.to_nodes(np.asarray(actions["placement"][k])).astype(np.int32)
                if "placement" in self.tasks
                else self.fixed.placement
            )
            schedule = (
                self._priorities(actions["scheduling"][k], "scheduling")
                if "scheduling" in self.tasks
                else self.fixed.schedule_priority
            )
            fusion = (
                self._priorities(actions["fusion"][k], "fusion")
                if "fusion" in self.tasks
                else self.fixed.fusion_priority
            )
            out.append(Decisions(placement, schedule, fusion))
        return out

    def _priorities(self, actions: np.ndarray, task: str) -> np.ndarray:
        """Per-position bins → per-node priorities. With a prior, a node whose bin is
        its prior bin keeps the prior's exact priority (bins would lose the order of
        the heuristic's schedule and fusion), so the all-prior action is the
        heuristic's decisions exactly."""
        bins = self.inputs.to_nodes(np.asarray(actions))
        values = self._bin_values[bins]
        if self.prior is None:
            return values
        exact = self._prior_priorities[task]
        return np.where(bins == self._prior_bins[task], exact, values).astype(np.float32)

    def score(self, decisions: Sequence[Decisions]) -> Scores:
        """Simulates the decisions (:func:`hlo_go.sim.simulate_batch`) and rewards them.

        Also remembers the best decisions seen (fastest that fit in memory, else
        fastest).
        """
        results = simulate_batch(self.graph, self.cluster, list(decisions))
        scores = Scores(
            rewards(results, self.reference_time, self.reward_config),
            np.asarray([r.step_time for r in results], np.float64),
            np.asarray([r.oom for r in results], bool),
        )
        for d, t, oom in zip(decisions, scores.step_times, scores.oom, strict=True):
            if (self.best_oom, self.best_time) > (bool(oom), float(t)):
                self.best, self.best_time, self.best_oom = d, float(t), bool(oom)
        return scores

    def best_state(self) -> dict[str, np.ndarray]:
        """The best decisions seen and their time, as arrays (for checkpoints)."""
        if self.best is None:
            return {}
        return {
            "placement": np.asarray(self.best.placement),
            "schedule_priority": np.asarray(self.best.schedule_priority),
            "fusion_priority": np.asarray(self.best.fusion_priority),
            "time": np.asarray(self.best_time, np.float64),
            "oom": np.asarray(self.best_oom),
        }

    def restore_best(self, state: dict[str, np.ndarray]) -> None:
        """Inverse of :meth:`best_state`."""
        if not state:
            return
        self.best = Decisions(
            np.asarray(state["placement"], np.int32),
            np.asarray(state["schedule_priority"], np.float32),
            np.asarray(state["fusion_priority"], np.float32),
        )
        self.best_time = float(state["time"])
        self.best_oom = bool(state["oom"])
