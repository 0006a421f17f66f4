"""The decisions :func:`hlo_go.jit` lowers: from a GO policy, a baseline or a search.

:func:`decide` turns :attr:`Options.policy` into :class:`~hlo_go.decisions.Decisions`
for a program's pre-fusion graph (:attr:`hlo_go.xla.Program.graph`):

* a shipped policy name or a checkpoint path: the policy zero-shot
  (:func:`hlo_go.rl.infer`, best of greedy and ``samples`` samples) or fine-tuned
  ``budget`` PPO steps first (:func:`hlo_go.rl.finetune`);
* ``"searched"``: simulated annealing over the simulator (``budget`` evaluations);
* any :func:`hlo_go.baselines.get` name: that heuristic.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from hlo_go import methods
from hlo_go.api.options import Options
from hlo_go.decisions import Decisions
from hlo_go.methods import SEARCHED
from hlo_go.xla import Program


class Decided(NamedTuple):
    """Decisions and how they were reached.

    Attributes:
      decisions: for the program's pre-fusion graph.
      method: ``"policy <path>"``, ``"searched"`` or the baseline's name.
      simulated_s: their simulated step time on the options' cluster, seconds.
      seconds: wall-clock seconds deciding took.
    """

    decisions: Decisions
    method: str
    simulated_s: float
    seconds: float


def is_policy(policy: str) -> bool:
    """Whether ``policy`` names a shipped policy or an existing checkpoint (else a
    baseline method or ``"searched"``)."""
    from hlo_go.pretrained import policy_path, shipped_names

    if policy in shipped_names():
        return True
    try:
        policy_path(policy)
    except FileNotFoundError:
        return False
    return True


def decide(program: Program, options: Options) -> Decided:
    """Decisions for ``program``'s pre-fusion graph, as ``options.policy`` says.

    Raises:
      FileNotFoundError: a shipped policy whose file is missing.
      hlo_go.methods.UnknownMethodError: an unknown method name.
      ValueError: decisions the graph or cluster refuse.
    """
    from hlo_go.sim import get_cluster, simulate

    began = time.perf_counter()
    cluster = get_cluster(options.cluster)
    graph = program.graph
    if is_policy(options.policy):
        from hlo_go.pretrained import load_policy, policy_path
        from hlo_go.rl import policy_decisions

        decisions, _ = policy_decisions(
            load_policy(options.policy), program.name, graph, cluster,
            samples=options.samples, finetune_steps=options.budget, seed=options.seed,
        )  # fmt: skip
        method = f"policy {policy_path(options.policy).name}"
        if options.budget:
            method += f", fine-tuned {options.budget} steps"
        elif options.samples:
            method += f", zero-shot, best of {options.samples} samples"
        else:
            method += ", zero-shot"
    else:
        budget = options.budget or None
        decisions = methods.decide(
            graph, options.policy, cluster=cluster, seed=options.seed, budget=budget
        )
        method = options.policy if options.policy != SEARCHED else "searched (simulated annealing)"
    simulated = float(simulate(graph, cluster, decisions).step_time)
    return Decided(decisions, method, simulated, time.perf_counter() - began)


def decides_order(options: Options) -> bool:
    """Whether the decisions :func:`decide` makes under ``options`` choose the entry's
    order for step time, so that :func:`hlo_go.jit` imposes it.

    A search or a policy is scored by the simulator, and on a one-device cluster the
    simulator is indifferent to the order (one kernel at a time, nothing moved): their
    order there is arbitrary, and XLA keeps its own (:func:`hlo_go.methods.searched_tasks`).
    A baseline heuristic's order is its method's own choice and is imposed.

    Returns:
      False when ``options.tasks`` leaves out scheduling, or the order would be arbitrary.
    """
    from hlo_go.methods import searched_tasks
    from hlo_go.sim import get_cluster

    if "scheduling" not in options.tasks:
        return False
    if options.policy == SEARCHED or is_policy(options.policy):
        return "scheduling" in searched_tasks(get_cluster(options.cluster))
    return True
