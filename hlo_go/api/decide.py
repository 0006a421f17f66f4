"""The decisions :func:`hlo_go.jit` lowers: from a GO policy, a baseline or a search.

:func:`candidates` makes every candidate of :attr:`Options.candidates` for a program's
pre-fusion graph (:attr:`hlo_go.xla.Program.graph`): each baseline heuristic named there
(its fusion, lowered with XLA's own order), and ``"policy"``: :func:`decide` on
:attr:`Options.policy`. :func:`decide` turns that into
:class:`~hlo_go.decisions.Decisions`:

* a shipped policy name or a checkpoint path: the policy zero-shot
  (:func:`hlo_go.rl.infer`, best of greedy and ``samples`` samples) or fine-tuned
  ``budget`` PPO steps first (:func:`hlo_go.rl.finetune`);
* ``"searched"``: simulated annealing over the simulator (``budget`` evaluations);
* any :func:`hlo_go.baselines.get` name: that heuristic.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from hlo_go import methods
from hlo_go.api.options import POLICY, Options
from hlo_go.decisions import Decisions
from hlo_go.methods import SEARCHED
from hlo_go.xla import Program

logger = logging.getLogger(__name__)

# Warm state kept for the process: loaded checkpoints by name, and the (policy, input
# bucket) pairs whose jitted forward pass has compiled (the first forward of a bucket
# compiles it; later graphs of that bucket reuse it).
_CHECKPOINTS: dict[str, Any] = {}
_COMPILED_BUCKETS: set[tuple[str, Any]] = set()
# Seconds each of those one-time compiles took.
_COMPILE_SECONDS: list[float] = []
# Seconds a policy's one-time compile is expected to take before one was seen here.
POLICY_COMPILE_GUESS_S = 10.0


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
    policy_compile_s: float = 0.0


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


def _checkpoint(policy: str) -> Any:
    if policy not in _CHECKPOINTS:
        from hlo_go.pretrained import load_policy

        _CHECKPOINTS[policy] = load_policy(policy)
    return _CHECKPOINTS[policy]


def _bucket(checkpoint: Any, graph: Any) -> Any:
    from hlo_go.gonet import policy_bucket

    return policy_bucket(graph.num_nodes, graph.num_edges, checkpoint.config.policy)


def method_decisions(program: Program, method: str, options: Options) -> Decisions:
    """The decisions a named method (a :func:`hlo_go.baselines.get` name, or
    ``"searched"``) takes for ``program``'s graph, resolved by :func:`hlo_go.methods.decide`.

    Raises:
      hlo_go.methods.UnknownMethodError: an unknown method name (the message lists the
        known ones).
    """
    return methods.decide(
        program.graph, method, cluster=options.cluster, seed=options.seed,
        budget=options.budget or None, program=program,
    )  # fmt: skip


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
    compile_s = 0.0
    if is_policy(options.policy):
        from hlo_go.pretrained import policy_path
        from hlo_go.rl import policy_decisions

        checkpoint = _checkpoint(options.policy)
        seen = (options.policy, _bucket(checkpoint, graph))
        forward = time.perf_counter()
        decisions, _ = policy_decisions(
            checkpoint, program.name, graph, cluster,
            samples=options.samples, finetune_steps=options.budget, seed=options.seed,
        )  # fmt: skip
        if seen not in _COMPILED_BUCKETS and not options.budget:
            # the first forward of this input bucket compiled the policy (once per process)
            compile_s = time.perf_counter() - forward
            _COMPILED_BUCKETS.add(seen)
            _COMPILE_SECONDS.append(compile_s)
            logger.info("policy %s compiled for bucket %s in %.1f s", *seen, compile_s)
        method = f"policy {policy_path(options.policy).name}"
        if options.budget:
            method += f", fine-tuned {options.budget} steps"
        elif options.samples:
            method += f", zero-shot, best of {options.samples} samples"
        else:
            method += ", zero-shot"
    else:
        decisions = method_decisions(program, options.policy, options)
        method = options.policy if options.policy != SEARCHED else "searched (simulated annealing)"
    simulated = float(simulate(graph, cluster, decisions).step_time)
    seconds = time.perf_counter() - began - compile_s
    return Decided(decisions, method, simulated, seconds, compile_s)


class Candidate(NamedTuple):
    """One candidate of :func:`candidates`.

    Attributes:
      name: its name in :attr:`Options.candidates` (``"policy"`` for the policy).
      decided: its decisions and how they were reached.
      schedule: whether its order is imposed (else XLA keeps its own).
    """

    name: str
    decided: Decided
    schedule: bool


def candidate_names(options: Options) -> tuple[str, ...]:
    """The candidates :func:`decide_candidate` makes under ``options``, in order (the
    policy alone when ``options.tasks`` leaves fusion to the XLA:CPU-like heuristic)."""
    return options.candidates if "fusion" in options.tasks else (POLICY,)


def decide_candidate(program: Program, name: str, options: Options) -> Candidate | tuple[str, str]:
    """One candidate of ``options.candidates`` for ``program``: the policy (``"policy"``,
    :func:`decide`) or a baseline heuristic (its fusion, lowered with XLA's own order).

    Returns:
      A :class:`Candidate`, or ``(name, why it failed to decide)``.
    """
    from hlo_go.sim import get_cluster, simulate

    try:
        if name == POLICY:
            return Candidate(POLICY, decide(program, options), decides_order(options))
        began = time.perf_counter()
        decisions = method_decisions(program, name, options)
        simulated = float(
            simulate(program.graph, get_cluster(options.cluster), decisions).step_time
        )
        decided = Decided(decisions, name, simulated, time.perf_counter() - began)
        return Candidate(name, decided, False)
    except Exception as error:  # a candidate that cannot decide is left out
        why = f"{type(error).__name__}: {str(error).strip()[:300]}"
        logger.info("candidate %s failed to decide: %s", name, why)
        return name, why


def candidates(program: Program, options: Options) -> Iterator[Candidate | tuple[str, str]]:
    """The candidates of ``options.candidates`` for ``program``, in order, each decided
    only when the caller asks for the next (so a caller that stops early pays nothing
    for the rest, e.g. the policy's one-time compile).

    Yields:
      A :class:`Candidate`, or ``(name, why it failed to decide)``.
    """
    for name in candidate_names(options):
        yield decide_candidate(program, name, options)


# A tiny module the heuristics decide once per process (:func:`warm_up`).
_WARM_UP_HLO = """HloModule hlo_go_warm_up

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8,8], y: f32[8,8]) -> f32[8] {
  %x = f32[8,8]{1,0} parameter(0)
  %y = f32[8,8]{1,0} parameter(1)
  %d = f32[8,8]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %t = f32[8,8]{1,0} tanh(%d)
  %m = f32[8,8]{1,0} multiply(%t, %x)
  %z = f32[] constant(0)
  ROOT %r = f32[8]{0} reduce(%m, %z), dimensions={1}, to_apply=%add_f32
}
"""
_WARMED: set[tuple[str, str]] = set()


def warm_up(options: Options) -> float:
    """Decides and simulates, once per process, each heuristic of ``options.candidates``
    on a tiny module, so that their compiled kernels (numba's, loaded from its cache or
    compiled) are loaded before deciding a real graph is timed.

    Returns:
      Seconds it took (0 when every one was warm; a heuristic that fails here is left
      to fail when it decides the real graph).
    """
    from hlo_go.graph import build_graph
    from hlo_go.hlo import parse_hlo
    from hlo_go.sim import get_cluster, simulate

    names = [(n, options.cluster) for n in candidate_names(options) if n != POLICY]
    cold = [key for key in names if key not in _WARMED]
    if not cold:
        return 0.0
    began = time.perf_counter()
    graph = build_graph(parse_hlo(_WARM_UP_HLO, filename="<hlo-go warm-up>"))
    for name, cluster in cold:
        _WARMED.add((name, cluster))
        try:
            decisions = methods.decide(graph, name, cluster=cluster, seed=options.seed)
            simulate(graph, get_cluster(cluster), decisions)
        except Exception as error:
            logger.debug("warm-up of %s failed: %s", name, error)
    return time.perf_counter() - began


def policy_compile_estimate(program: Program, options: Options) -> float:
    """Seconds deciding the ``"policy"`` candidate would first spend compiling the policy
    for ``program``'s input bucket: 0 when that is done in this process already (or
    :attr:`Options.policy` is no policy, or is fine-tuned: the caller asked for that
    cost), else the longest such compile seen in this process, or
    :data:`POLICY_COMPILE_GUESS_S` before any."""
    if options.budget or not is_policy(options.policy):
        return 0.0
    try:
        seen = (options.policy, _bucket(_checkpoint(options.policy), program.graph))
    except Exception:  # a policy that fails to load fails to decide, at no cost
        return 0.0
    if seen in _COMPILED_BUCKETS:
        return 0.0
    return max(_COMPILE_SECONDS, default=POLICY_COMPILE_GUESS_S)


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
