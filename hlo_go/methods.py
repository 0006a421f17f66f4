"""Method names resolved into decisions: the one place a name becomes :class:`Decisions`.

A method name says who decides for a graph:

* a baseline (:func:`hlo_go.baselines.get`): a component such as ``"xla-cpu-like"``,
  ``"priority-fusion"``, ``"fuse-all-legal"``, ``"no-fusion"``, ``"critical-path"``,
  ``"metis"``, a ``+`` combination of them (``"critical-path+xla-cpu-like"``), or a search
  (``"simulated-annealing"``, ...);
* :data:`SEARCHED`: simulated annealing over the simulator, deciding what
  :func:`searched_tasks` says for the cluster;
* :data:`MEASURED`: a search that lowers and times every candidate on this host
  (:func:`hlo_go.baselines.measured_search`), from the fastest measured heuristic; it
  needs the program itself (``program=``), and its ``budget`` is measured candidates;
* a GO policy: a shipped name (:func:`hlo_go.pretrained.shipped_names`) or a checkpoint
  path, zero-shot or fine-tuned (:func:`hlo_go.rl.policy_decisions`);
* for a schedule only, :data:`MEMORY_ORDER` (XLA's order, memory-freeing instructions
  first: :data:`hlo_go.xla.MEMORY_ORDER`) and :data:`XLA_ORDER` (XLA's own order).

:func:`decide` gives the :class:`~hlo_go.decisions.Decisions` of a name for a graph,
marked with the graph's fingerprint. :func:`fusion_spec`, :func:`schedule_spec` and
:func:`variants` give what :mod:`hlo_go.xla` lowers and measures, which takes decisions
and never a name. :func:`names` and :func:`check_name` list and validate the names of a
task (``fusion``, ``schedule``, ``placement``), e.g. for a command-line flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from hlo_go import baselines
from hlo_go.baselines.search import search_tasks_for
from hlo_go.decisions import Decisions
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph
from hlo_go.pretrained import policy_path, shipped_names
from hlo_go.sim import Cluster, get_cluster
from hlo_go.xla import MEMORY_ORDER as XLA_MEMORY_ORDER
from hlo_go.xla import Order, Program, Variant

# The cluster methods decide for when lowering into XLA here: one calibrated core of this host.
HOST_CLUSTER = "host-cpu-1"
# The method name of simulated annealing over the simulator.
SEARCHED = "searched"
# The method name of the search that measures every candidate on this host.
MEASURED = "measured-search"
# The schedule name of XLA's order with memory-freeing instructions run first
# (:func:`hlo_go.xla.schedule.memory_schedule`); :data:`SEARCHED`'s schedule on one device.
MEMORY_ORDER = "memory"
# The schedule name of XLA's own order (no priorities imposed).
XLA_ORDER = "xla"
# The tasks :func:`names` lists names for.
TASKS: tuple[str, ...] = ("fusion", "schedule", "placement")

_BASELINE_KIND = {"fusion": "fusion", "schedule": "scheduling", "placement": "placement"}


class UnknownMethodError(baselines.UnknownMethodError, HloGoError):
    """A name that names no method for a task (the message lists the known ones)."""


class ProgramRequiredError(ValueError, HloGoError):
    """:data:`MEASURED` asked to decide without the program it must compile and time, or
    with a program whose pre-fusion graph is not the graph given."""


def searched_tasks(cluster: Cluster) -> tuple[str, ...]:
    """The decisions :data:`SEARCHED` makes for ``cluster``.

    On one device the simulator runs one kernel at a time and moves nothing between
    devices, so the order of the entry changes no simulated step time (only memory):
    there the search decides fusion only, and the schedule is :data:`MEMORY_ORDER`.

    Returns:
      ``("fusion",)`` on one device, else placement, scheduling and fusion.
    """
    return search_tasks_for(cluster)


def is_policy(name: str) -> bool:
    """Whether ``name`` is a shipped GO policy or an existing checkpoint (else a baseline,
    :data:`SEARCHED`, or no method)."""
    if name in shipped_names():
        return True
    try:
        policy_path(name)
    except (FileNotFoundError, OSError, ValueError):
        return False
    return True


def names(task: str) -> tuple[str, ...]:
    """The method names valid for a task (a ``+`` combination of baseline components and
    a checkpoint path are valid too: :func:`check_name`).

    Args:
      task: ``"fusion"``, ``"schedule"`` or ``"placement"``.

    Returns:
      Baseline components of the task, the baseline searches, :data:`SEARCHED`,
      :data:`MEASURED` (fusion and schedule), the shipped policies, and for a schedule
      :data:`MEMORY_ORDER` and :data:`XLA_ORDER`.

    Raises:
      ValueError: an unknown task.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    searches = [s for s in baselines.names("search") if task == "placement" or s != "hdp"]
    out = [*baselines.names(_BASELINE_KIND[task]), *searches, SEARCHED]  # hdp: placement only
    if task != "placement":
        out.append(MEASURED)
    if task == "schedule":
        out += [MEMORY_ORDER, XLA_ORDER]
    return (*out, *shipped_names())


def check_name(task: str, name: str) -> str:
    """Checks that ``name`` is a method for ``task``.

    Returns:
      ``name``.

    Raises:
      UnknownMethodError: it names no method (the message lists the known names).
      ValueError: an unknown task.
    """
    known = names(task)
    if name in known or is_policy(name):
        return name
    # A ``+`` combination of baseline components: valid for a task when one component
    # decides that task (``"critical-path+xla-cpu-like"`` for a fusion, not ``"metis"``).
    parts = name.split("+")
    own = set(baselines.names(_BASELINE_KIND[task]))
    try:
        baselines.get(name)
        if len(parts) < 2 or not own.intersection(parts):
            raise baselines.UnknownMethodError(name)
    except baselines.UnknownMethodError:
        raise UnknownMethodError(
            f"unknown {task} method {name!r}; choose from: {', '.join(known)} "
            "(or a checkpoint path)"
        ) from None
    return name


def decide(
    graph: OpGraph,
    method: str,
    *,
    cluster: str | Cluster = HOST_CLUSTER,
    seed: int = 0,
    budget: int | None = None,
    samples: int = 0,
    finetune_steps: int = 0,
    work_dir: str | Path | None = None,
    program: Program | None = None,
    time_limit: float | None = None,
) -> Decisions:
    """The decisions a named method takes for ``graph``.

    Args:
      graph: the graph to decide for (for lowering: :attr:`hlo_go.xla.Program.graph`).
      method: a baseline name (:func:`hlo_go.baselines.get`), :data:`SEARCHED`,
        :data:`MEASURED`, or a GO policy (shipped name or checkpoint path).
      cluster: the cluster (or preset name) the method decides for.
      seed: the method's random seed.
      budget: simulator evaluations (search, ``priority-fusion``); for :data:`MEASURED`,
        measured candidates; None: the default.
      samples: a policy's zero-shot samples (best of greedy and these).
      finetune_steps: fine-tune a policy this many PPO steps first (0: zero-shot).
      work_dir: a fine-tuning run's directory (default: a temporary one).
      program: the program whose pre-fusion graph ``graph`` is; :data:`MEASURED` compiles
        and times its candidates with it (other methods ignore it).
      time_limit: wall-clock seconds a search (:data:`SEARCHED`, :data:`MEASURED`) may
        take, or None.

    Returns:
      The decisions, marked as made for ``graph``.

    Raises:
      UnknownMethodError: an unknown name (the message lists the known ones).
      ProgramRequiredError: :data:`MEASURED` without ``program``, or with another
        graph's.
    """
    target = get_cluster(cluster) if isinstance(cluster, str) else cluster
    if method == MEASURED:
        return _measured(graph, program, cluster=target, seed=seed, budget=budget,
                         time_limit=time_limit)  # fmt: skip
    if method == SEARCHED:
        result = baselines.run_search(
            graph,
            target,
            "simulated-annealing",
            budget=budget,
            time_limit=time_limit,
            seed=seed,
            tasks=searched_tasks(target),
        )
        return result.best.for_graph(graph)
    if method not in (MEMORY_ORDER, XLA_ORDER) and is_policy(method):
        from hlo_go.pretrained import load_policy
        from hlo_go.rl import policy_decisions

        decisions, _ = policy_decisions(
            load_policy(method), graph.module_name or "graph", graph, target,
            samples=samples, finetune_steps=finetune_steps, seed=seed, out_dir=work_dir,
        )  # fmt: skip
        return decisions.for_graph(graph)
    try:
        chosen = baselines.get(method)
    except baselines.UnknownMethodError as error:
        raise UnknownMethodError(
            f"unknown method {method!r}: {error}; or {SEARCHED!r} (simulated annealing over "
            "the simulator), a shipped policy or a checkpoint path"
        ) from None
    return chosen(graph, target, seed=seed, budget=budget).for_graph(graph)


def _measured(
    graph: OpGraph,
    program: Program | None,
    *,
    cluster: Cluster,
    seed: int,
    budget: int | None,
    time_limit: float | None,
) -> Decisions:
    """:data:`MEASURED`'s decisions: :func:`hlo_go.baselines.measured_search` on ``program``.

    Where the search kept XLA's order, the schedule priority is uniform (list scheduling
    then keeps XLA's order; :func:`schedule_spec` gives XLA's order itself).
    """
    if program is None:
        raise ProgramRequiredError(
            f"{MEASURED!r} compiles and times its candidates: pass the program, e.g. "
            f"decide(prog.graph, {MEASURED!r}, program=prog) with prog = hlo_go.xla.program(...)"
        )
    if program.graph.fingerprint != graph.fingerprint:
        raise ProgramRequiredError(
            f"{MEASURED!r}: the program's pre-fusion graph ({program.graph.fingerprint}) is not "
            f"the graph given ({graph.fingerprint}); decide on program.graph"
        )
    result = baselines.measured_search(
        program, budget=budget, time_limit=time_limit, seed=seed, cluster=cluster
    )
    return result.decisions.for_graph(graph)


def fusion_spec(
    graph: OpGraph,
    method: str | None,
    *,
    cluster: str | Cluster = HOST_CLUSTER,
    seed: int = 0,
    budget: int | None = None,
    program: Program | None = None,
) -> Decisions | None:
    """What :meth:`hlo_go.xla.Program.lower` takes as ``fusion`` for a method name.

    ``program`` is :func:`decide`'s (:data:`MEASURED` needs it).

    Returns:
      The method's decisions (their fusion priority is lowered), or None for None (no
      fusion anywhere, control-flow bodies included).
    """
    if method is None:
        return None
    return decide(graph, method, cluster=cluster, seed=seed, budget=budget, program=program)


def schedule_spec(
    graph: OpGraph,
    method: str | None,
    *,
    cluster: str | Cluster = HOST_CLUSTER,
    seed: int = 0,
    budget: int | None = None,
    program: Program | None = None,
) -> Decisions | Order | None:
    """What :meth:`hlo_go.xla.Program.lower` takes as ``schedule`` for a method name.

    ``program`` is :func:`decide`'s (:data:`MEASURED` needs it).

    Returns:
      None for None or :data:`XLA_ORDER` (XLA's order), and for :data:`MEASURED` where
      its search kept XLA's order; :data:`hlo_go.xla.MEMORY_ORDER` for
      :data:`MEMORY_ORDER`, and for :data:`SEARCHED` on a cluster where the search does
      not decide the order (:func:`searched_tasks`); else the method's decisions (their
      schedule priority is lowered).
    """
    target = get_cluster(cluster) if isinstance(cluster, str) else cluster
    if method is None or _orders_without_deciding(method, target):
        return _order(method)
    decided = decide(graph, method, cluster=target, seed=seed, budget=budget, program=program)
    return _imposed(method, decided)


def _imposed(method: str, decisions: Decisions) -> Decisions | None:
    """The schedule to lower for a method's decisions: None (XLA's order) for
    :data:`MEASURED` decisions whose schedule priority is uniform (its search kept XLA's
    order), else the decisions."""
    priority = np.asarray(decisions.schedule_priority)
    if method == MEASURED and (priority.size == 0 or np.all(priority == priority[0])):
        return None
    return decisions


def _orders_without_deciding(method: str | None, cluster: Cluster) -> bool:
    """Whether a schedule name means an order of XLA's rather than decisions."""
    if method is None or method in (XLA_ORDER, MEMORY_ORDER):
        return True
    return method == SEARCHED and "scheduling" not in searched_tasks(cluster)


def _order(method: str | None) -> Order | None:
    """The XLA order of a schedule name that :func:`_orders_without_deciding`."""
    return None if method is None or method == XLA_ORDER else XLA_MEMORY_ORDER


def label(fusion: str | None, schedule: str | None) -> str:
    """The label of a lowering by method names (``"fusion=..., schedule=..."``)."""
    return f"fusion={fusion or 'none'}, schedule={schedule or XLA_ORDER}"


def variants(
    graph: OpGraph,
    specs: Mapping[str, tuple[str | None, str | None]],
    *,
    cluster: str | Cluster = HOST_CLUSTER,
    seed: int = 0,
    budget: int | None = None,
    program: Program | None = None,
) -> dict[str, Variant]:
    """The :class:`hlo_go.xla.Variant` of each (fusion, schedule) pair of method names.

    Each method decides once, whatever the number of pairs naming it.

    Args:
      graph: the program's graph (:attr:`hlo_go.xla.Program.graph`).
      specs: variant name -> (fusion method, schedule method); None as in
        :func:`fusion_spec` and :func:`schedule_spec`.
      cluster: the cluster the methods decide for.
      seed: the methods' seed.
      budget: simulator evaluations for a search; measured candidates for
        :data:`MEASURED`.
      program: the program, for :data:`MEASURED` (:func:`decide`).

    Returns:
      Variant name -> variant, labelled by its method names (:func:`label`).

    Raises:
      UnknownMethodError: an unknown name.
      ProgramRequiredError: :data:`MEASURED` without the program.
    """
    target = get_cluster(cluster) if isinstance(cluster, str) else cluster
    decided: dict[str, Decisions] = {}

    def decisions_of(method: str) -> Decisions:
        if method not in decided:
            decided[method] = decide(
                graph, method, cluster=target, seed=seed, budget=budget, program=program
            )
        return decided[method]

    out: dict[str, Variant] = {}
    for name, (fusion, schedule) in specs.items():
        fused = None if fusion is None else decisions_of(fusion)
        ordered: Decisions | Order | None
        if schedule is None or _orders_without_deciding(schedule, target):
            ordered = _order(schedule)
        else:
            ordered = _imposed(schedule, decisions_of(schedule))
        out[name] = Variant(fused, ordered, label=label(fusion, schedule))
    return out
