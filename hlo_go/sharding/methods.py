"""Sharding methods, by name: the hand-written ones, the ILP and the learned policy.

Every method is ``method(sg: ShardingGraph, *, seed=0, time_limit_s=None) -> np.ndarray``
(a strategy index per node), registered in :data:`METHODS`; :func:`get` looks one up.

* ``replicated``, ``dp``, ``megatron``, ``greedy``: the hand-written methods of
  :mod:`hlo_go.sharding.heuristics`.
* ``ilp``: the Alpa / XLA auto-sharding ILP over all strategies with the memory
  constraint (:func:`hlo_go.sharding.ilp.solve_ilp`, OR-Tools CP-SAT), started from the
  cheapest of the greedy, core-greedy and data-parallel choices.
* ``policy``: the learned sharding policy (:mod:`hlo_go.sharding.learned`), shipped
  pre-trained and decoded zero-shot; ``policy-ft`` fine-tunes it on the graph first;
  ``core-greedy`` is its prior alone, ``core-greedy-refined`` that prior refined as the
  policy's choice is.
"""

from __future__ import annotations

import numpy as np

from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.greedy import fit_memory
from hlo_go.sharding.heuristics import (
    HEURISTICS,
    Method,
    cheapest,
    data_parallel,
    greedy,
    infer_batch_size,
    megatron,
    replicated,
)
from hlo_go.sharding.ilp import IlpResult, solve_ilp
from hlo_go.sharding.learned import (
    DEFAULT_FINETUNE_STEPS,
    policy_method,
    prior_choice,
    refined,
)

ILP_TIME_LIMIT_S = 60.0
"""Time limit of the ILP solver when the caller gives none."""


def ilp(sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None) -> np.ndarray:
    """The ILP's best choice within the time limit, started from the cheapest of the
    greedy, core-greedy, data-parallel and replicated choices (and never worse than it)."""
    return ilp_with_result(sg, seed=seed, time_limit_s=time_limit_s)[0]


def ilp_with_result(
    sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None
) -> tuple[np.ndarray, IlpResult]:
    """:func:`ilp`'s choice, with the solver's :class:`~hlo_go.sharding.ilp.IlpResult`
    (status, proved lower bound), which says how far from optimal the choice can be."""
    start = cheapest(sg, [greedy(sg), core_greedy(sg), data_parallel(sg)])
    result = solve_ilp(
        sg.problem,
        time_limit_s=ILP_TIME_LIMIT_S if time_limit_s is None else time_limit_s,
        initial=start,
        seed=seed,
    )
    best = cheapest(sg, [np.asarray(result.choice, dtype=np.int64), start])
    # The ILP checks memory at sampled program positions (the problem's live sets); a
    # choice whose peak falls between them is made to fit (fit_memory).
    return fit_memory(sg, best), result


def policy(sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None) -> np.ndarray:
    """The shipped pre-trained sharding policy, zero-shot: the best of its decode, a few
    samples, its prior and its guided greedy, refined by exact window re-optimization
    (:func:`hlo_go.sharding.learned.policy_method`)."""
    del time_limit_s
    return policy_method(sg, seed=seed)


def policy_finetuned(
    sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None
) -> np.ndarray:
    """The shipped policy fine-tuned with PPO on this graph
    (:data:`~hlo_go.sharding.learned.DEFAULT_FINETUNE_STEPS` steps, within the time limit)."""
    return policy_method(
        sg, seed=seed, time_limit_s=time_limit_s, finetune_steps=DEFAULT_FINETUNE_STEPS
    )


def core_greedy(
    sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None
) -> np.ndarray:
    """Greedy on the exact reductions' core, the rest following optimally: the policy's
    prior alone (:func:`hlo_go.sharding.learned.prior_choice`), what an untrained policy
    decodes; the baseline that shows what the policy's training adds."""
    del seed, time_limit_s
    return prior_choice(sg)


def core_greedy_refined(
    sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None
) -> np.ndarray:
    """``core-greedy`` refined as the policy's choice is
    (:func:`hlo_go.sharding.learned.refined`): the ablation that shows what the network
    adds to the refinement."""
    del seed, time_limit_s
    return refined(sg, prior_choice(sg))


METHODS: dict[str, Method] = {
    **HEURISTICS,
    "ilp": ilp,
    "core-greedy": core_greedy,
    "core-greedy-refined": core_greedy_refined,
    "policy": policy,
    "policy-ft": policy_finetuned,
}


def names() -> list[str]:
    """Registered method names."""
    return list(METHODS)


def get(name: str) -> Method:
    """The method registered under ``name``.

    Raises:
      KeyError: no such method (the message lists the known ones).
    """
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown sharding method {name!r}; known: {names()}") from None


__all__ = [
    "ILP_TIME_LIMIT_S",
    "METHODS",
    "Method",
    "core_greedy",
    "core_greedy_refined",
    "data_parallel",
    "get",
    "greedy",
    "ilp",
    "ilp_with_result",
    "infer_batch_size",
    "megatron",
    "names",
    "policy",
    "policy_finetuned",
    "replicated",
]
