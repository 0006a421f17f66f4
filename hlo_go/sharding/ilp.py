"""The Alpa / XLA auto-sharding ILP: optimal strategy selection with OR-Tools.

Formulation (Alpa, Zheng et al. 2022, §4.2): a one-hot boolean ``s[v, k]`` per node
and strategy (``Σ_k s[v, k] = 1``); per edge ``(u, v)`` a boolean ``e[k, l]`` per
allowed pair with ``Σ_l e[k, l] = s[u, k]`` for every ``k`` and
``Σ_k e[k, l] = s[v, l]`` for every ``l`` (the last column's equation follows from
the others and is left out); pairs of cost ``+inf`` get no variable. Minimize
``Σ node_cost · s + Σ edge_cost · e`` subject to, per live set,
``Σ node_memory · s ≤ memory_budget``. The linearization is the local marginal
polytope: its LP relaxation is exact on trees.

The model is built on the core of :func:`hlo_go.sharding.reduction.reduce_problem`
(separable edges folded, uncoupled nodes of degree ≤ 2 minimized out, dominated and
bound-exceeding strategies pruned), which has the same optimum; separable matrices
(constant ones included) never reach the model.

Integer scaling (CP-SAT needs integer coefficients): each node's costs and each
edge's finite costs are shifted by their minimum (moved to a constant), then scaled
by the power of two ``scale`` that brings the largest possible objective
``U = Σ_nodes (max - min) + Σ_edges (max - min)`` just under ``2**50`` and rounded
to the nearest integer. The objective of any solution is then off by at most
``0.5 · (R + F) / scale`` seconds for ``R`` core nodes and ``F`` core edges, i.e.
``≤ (R + F) · U · 2**-51``: about ``1e-10`` of ``U`` for 100k terms. With a feasible
starting choice of cost ``UB`` every coefficient above ``UB - LB`` is pruned first,
so ``U ≤ (R + F)(UB - LB)``. The reported cost is always recomputed exactly in
float64 (:func:`hlo_go.sharding.problem.total_cost`), and the reported lower bound
subtracts the rounding allowance. Memory coefficients (bytes, shifted by each
node's smallest memory) are used as they are when integral and small enough
(``< 2**53`` per constraint); otherwise they are scaled by a power of two to
``2**40`` per constraint, rounded up, with the capacity rounded down, so every
solution the solver returns fits the budget. Without a feasible starting choice
nothing caps the coefficients, so a few huge finite costs (penalties) coarsen the
resolution of all others: forbid with ``+inf`` instead.

CP-SAT runs silently with ``num_workers`` = the usable cores and the given seed.
Below 8 workers its default portfolio lacks the full-LP worker (``max_lp``), which
closes the gap fastest on these models (``docs/sharding.md``), so the workers are then
named explicitly, ``max_lp`` first. Models of 20k variables or more get a single
presolve pass without probing. The starting choice becomes a complete solution hint
(where the reductions pruned its strategy at a core node, the cheapest remaining one
given its hinted neighbours), which CP-SAT takes as its first solution right after
presolve. ``solver="scip"`` or ``"cbc"`` solve the same model with float coefficients
through ``pywraplp`` (single-threaded).
"""

from __future__ import annotations

import math
import os
import time
from typing import NamedTuple

import numpy as np

from hlo_go.sharding.greedy import solve_greedy
from hlo_go.sharding.problem import (
    ShardingProblem,
    is_memory_feasible,
    total_cost,
    validate_choice,
    validate_problem,
)
from hlo_go.sharding.reduction import CoreProblem, InfeasibleProblem, Reduction, reduce_problem

# The largest possible scaled objective of the CP-SAT model.
_OBJECTIVE_RANGE = 2.0**50
# Memory coefficients are used unscaled when integral and each constraint's total is below this.
_MEMORY_EXACT = 2.0**53
# Otherwise each constraint's total is scaled to about this.
_MEMORY_RANGE = 2.0**40
# CP-SAT's full-problem workers when fewer cores than its default portfolio: the full-LP worker
# first (the linearization is tight on tree-like parts, so its LP bound closes most gaps),
# then the default LP search and core-based lower bounding.
_CP_SAT_SUBSOLVERS = ("max_lp", "default_lp", "core", "reduced_costs", "quick_restart", "no_lp")
# From this many variables CP-SAT presolves once and without probing: its default presolve
# costs more time than it saves on large models (docs/sharding.md).
_LIGHT_PRESOLVE_VARS = 20_000
_MIP_SOLVERS = {"scip": "SCIP", "cbc": "CBC"}


class IlpResult(NamedTuple):
    """The outcome of :func:`solve_ilp`.

    Attributes:
      choice: int32[N], one strategy per node.
      cost: seconds, :func:`~hlo_go.sharding.problem.total_cost` of ``choice``.
      status: ``'optimal'`` (proved), ``'feasible'`` (a solution, not proved optimal
        at the time limit), ``'infeasible'`` (proved: no choice fits the memory budget;
        ``choice`` is the fallback), or ``'timeout-no-solution'`` (no solution found in
        time; ``choice`` is the fallback).
      solve_s: wall seconds of the whole call (reductions, model building, solving).
      lower_bound: seconds, a proved lower bound on the optimal cost (``inf`` when
        infeasible); equals ``cost`` when optimal, up to the scaling allowance.
      variables: boolean variables of the model solved (0 when the reductions solved
        the problem).
      constraints: constraints of that model.
      reduced_nodes: nodes left in the reduced (core) problem the model is built on.
    """

    choice: np.ndarray
    cost: float
    status: str
    solve_s: float
    lower_bound: float
    variables: int
    constraints: int
    reduced_nodes: int


class _Model(NamedTuple):
    """The ILP of a core problem, independent of the solver.

    Attributes:
      num_vars: boolean variables: first the one-hot ``s`` of every core node, then
        the ``e`` of every core edge.
      node_start: int64[R + 1], node ``i``'s ``s`` variables are
        ``node_start[i]:node_start[i + 1]`` (one per allowed strategy).
      edge_start: int64[F + 1], edge ``f``'s ``e`` variables are
        ``edge_start[f]:edge_start[f + 1]`` (one per finite pair).
      eq_ptr: int64[Q + 1], equality ``q`` (``= 0``) has entries
        ``eq_ptr[q]:eq_ptr[q + 1]`` of ``eq_vars`` and ``eq_coeffs``.
      eq_vars: int64 variable ids.
      eq_coeffs: int64 coefficients (+1 for ``e``, -1 for ``s``).
      memory: per live-set constraint, (variable ids, bytes ≥ 0, capacity).
      objective: float64[num_vars] ≥ 0, seconds per variable.
      offset: seconds added to the objective (the core constant and the minima).
      terms: node and edge cost terms (R + F), for the rounding allowance.
      hint: int8[num_vars], a hinted value per variable or -1.
    """

    num_vars: int
    node_start: np.ndarray
    edge_start: np.ndarray
    eq_ptr: np.ndarray
    eq_vars: np.ndarray
    eq_coeffs: np.ndarray
    memory: tuple[tuple[np.ndarray, np.ndarray, float], ...]
    objective: np.ndarray
    offset: float
    terms: int
    hint: np.ndarray


class _Solved(NamedTuple):
    """A solver's answer: status, every variable's value (or None), a lower bound, and the
    number of constraints of the model it solved."""

    status: str
    values: np.ndarray | None
    lower_bound: float
    constraints: int


class _Deadline(NamedTuple):
    """When the whole call should end, and the least time a solver is given."""

    at: float  # time.perf_counter() seconds
    minimum_s: float

    def remaining(self) -> float:
        """Seconds left for the solver: to the deadline, but at least the minimum."""
        return max(self.at - time.perf_counter(), self.minimum_s)


def gap_to_bound(cost: float, lower_bound: float) -> float | None:
    """``cost / lower_bound - 1``: how far above the optimum a choice of ``cost`` can be,
    given a proved lower bound (in the same unit); None when the bound proves nothing
    (not positive) or there is no bound (infeasible: ``inf``) or no finite cost."""
    return cost / lower_bound - 1 if 0 < lower_bound < math.inf and cost < math.inf else None


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


def _build_model(core: CoreProblem, hint_local: np.ndarray | None) -> _Model:
    """The Alpa ILP of ``core``; ``hint_local`` is a local strategy index per node or -1."""
    sizes = np.array([len(s) for s in core.strategies], np.int64)
    node_start = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=node_start[1:])
    offset = core.constant
    node_objective: list[np.ndarray] = []
    for c in core.node_cost:
        low = float(c.min())
        offset += low
        node_objective.append(c - low)
    next_var = int(node_start[-1])
    edge_start = [next_var]
    eq_ids: list[np.ndarray] = []
    eq_var_parts: list[np.ndarray] = []
    eq_coef_parts: list[np.ndarray] = []
    edge_objective: list[np.ndarray] = []
    hint_parts: list[np.ndarray] = []
    next_eq = 0
    for (a, b), m in zip(core.edge_ends, core.edge_cost, strict=True):
        finite = np.isfinite(m)
        rows, cols = np.nonzero(finite)
        count = len(rows)
        ka, kb = m.shape
        values = m[finite]
        low = float(values.min())
        offset += low
        edge_objective.append(values - low)
        ids = np.arange(next_var, next_var + count, dtype=np.int64)
        next_var += count
        edge_start.append(next_var)
        # Σ_l e[k, l] - s[a, k] = 0 for every k; Σ_k e[k, l] - s[b, l] = 0 for l < kb - 1.
        not_last = cols < kb - 1
        eq_ids.extend(
            (
                next_eq + rows,
                next_eq + np.arange(ka),
                next_eq + ka + cols[not_last],
                next_eq + ka + np.arange(kb - 1),
            )
        )
        eq_var_parts.extend(
            (ids, node_start[a] + np.arange(ka), ids[not_last], node_start[b] + np.arange(kb - 1))
        )
        eq_coef_parts.extend(
            (
                np.ones(count, np.int64),
                -np.ones(ka, np.int64),
                np.ones(int(not_last.sum()), np.int64),
                -np.ones(kb - 1, np.int64),
            )
        )
        next_eq += ka + kb - 1
        if hint_local is not None:
            edge_hint = np.full(count, -1, np.int8)
            ha, hb = hint_local[a], hint_local[b]
            if ha >= 0 and hb >= 0 and finite[ha, hb]:
                edge_hint[:] = 0
                edge_hint[(rows == ha) & (cols == hb)] = 1
            hint_parts.append(edge_hint)
    objective = np.concatenate([*node_objective, *edge_objective]) if next_var else np.zeros(0)
    if eq_ids:
        eq = np.concatenate(eq_ids)
        order = np.argsort(eq, kind="stable")
        eq_vars = np.concatenate(eq_var_parts)[order]
        eq_coeffs = np.concatenate(eq_coef_parts)[order]
        eq_ptr = np.zeros(next_eq + 1, np.int64)
        np.cumsum(np.bincount(eq, minlength=next_eq), out=eq_ptr[1:])
    else:
        eq_vars = eq_coeffs = np.zeros(0, np.int64)
        eq_ptr = np.zeros(1, np.int64)
    memory = []
    for members, capacity in zip(core.live_members, core.live_capacity, strict=True):
        var_ids = np.concatenate([node_start[i] + np.arange(sizes[i]) for i in members])
        mem = np.concatenate([core.node_memory[i] - core.node_memory[i].min() for i in members])
        used = mem > 0
        memory.append((var_ids[used], mem[used], float(capacity)))
    hint = np.full(next_var, -1, np.int8)
    if hint_local is not None:
        node_hint = np.full(int(node_start[-1]), -1, np.int8)
        known = np.flatnonzero(hint_local >= 0)
        for i in known:
            node_hint[node_start[i] : node_start[i + 1]] = 0
        node_hint[node_start[known] + hint_local[known]] = 1
        hint = np.concatenate([node_hint, *hint_parts]) if hint_parts else node_hint
    return _Model(
        num_vars=next_var,
        node_start=node_start,
        edge_start=np.array(edge_start, np.int64),
        eq_ptr=eq_ptr,
        eq_vars=eq_vars,
        eq_coeffs=eq_coeffs,
        memory=tuple(memory),
        objective=objective,
        offset=offset,
        terms=len(sizes) + len(core.edge_cost),
        hint=hint,
    )


def _objective_scale(model: _Model) -> float:
    """The power of two that maps the largest possible objective just under 2**50."""
    starts = np.concatenate([model.node_start[:-1], model.edge_start[:-1]])
    spread = float(np.maximum.reduceat(model.objective, starts).sum()) if starts.size else 0.0
    if spread <= 0 or not math.isfinite(spread):
        return 1.0
    return 2.0 ** math.floor(math.log2(_OBJECTIVE_RANGE / spread))


def _memory_rows(
    memory: tuple[tuple[np.ndarray, np.ndarray, float], ...],
) -> list[tuple[list[int], list[int], int]]:
    """Integer memory constraints: (variables, coefficients, capacity), never looser."""
    rows = []
    for var_ids, mem, capacity in memory:
        total = float(mem.sum())
        if np.all(mem == np.round(mem)) and total < _MEMORY_EXACT:
            coeffs, cap = np.round(mem), math.floor(capacity)
        else:
            scale = 2.0 ** math.floor(math.log2(_MEMORY_RANGE / total))
            coeffs, cap = np.ceil(mem * scale), math.floor(capacity * scale)
        rows.append((var_ids.tolist(), coeffs.astype(np.int64).tolist(), int(cap)))
    return rows


def _solve_cp_sat(model: _Model, deadline: _Deadline, seed: int) -> tuple[_Solved, int]:
    """Solves ``model`` with CP-SAT; returns the answer and the number of variables."""
    from ortools.sat.python import cp_model

    scale = _objective_scale(model)
    cp = cp_model.CpModel()
    proto = cp.proto
    variables = proto.variables
    for _ in range(model.num_vars):
        variables.add().domain.extend((0, 1))
    constraints = proto.constraints
    start = model.node_start.tolist()
    for i in range(len(start) - 1):
        constraints.add().exactly_one.literals.extend(range(start[i], start[i + 1]))
    ptr = model.eq_ptr.tolist()
    eq_vars, eq_coeffs = model.eq_vars.tolist(), model.eq_coeffs.tolist()
    for q in range(len(ptr) - 1):
        linear = constraints.add().linear
        linear.vars.extend(eq_vars[ptr[q] : ptr[q + 1]])
        linear.coeffs.extend(eq_coeffs[ptr[q] : ptr[q + 1]])
        linear.domain.extend((0, 0))
    for var_ids, coeffs, cap in _memory_rows(model.memory):
        linear = constraints.add().linear
        linear.vars.extend(var_ids)
        linear.coeffs.extend(coeffs)
        linear.domain.extend((0, cap))
    scaled = np.rint(model.objective * scale).astype(np.int64)
    used = np.flatnonzero(scaled)
    proto.objective.vars.extend(used.tolist())
    proto.objective.coeffs.extend(scaled[used].tolist())
    hinted = np.flatnonzero(model.hint >= 0)
    if hinted.size:
        proto.solution_hint.vars.extend(hinted.tolist())
        proto.solution_hint.values.extend(model.hint[hinted].astype(np.int64).tolist())
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = deadline.remaining()
    workers = usable_cores()
    params.num_workers = workers
    if model.num_vars >= _LIGHT_PRESOLVE_VARS:
        params.max_presolve_iterations = 1
        params.cp_model_probing_level = 0
    if workers == 1:
        params.linearization_level = 2
    elif workers < len(_CP_SAT_SUBSOLVERS):
        params.subsolvers.extend(_CP_SAT_SUBSOLVERS[:workers])
    params.random_seed = int(seed)
    params.log_search_progress = False
    code = solver.solve(cp)
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the model: {cp.validate()}")
    status = {
        cp_model.OPTIMAL: "optimal",
        cp_model.FEASIBLE: "feasible",
        cp_model.INFEASIBLE: "infeasible",
    }.get(code, "timeout-no-solution")
    values = None
    if status in ("optimal", "feasible"):
        values = np.asarray(solver.response_proto.solution, np.int64)
    allowance = 0.5 * model.terms / scale
    if status == "infeasible":
        bound = math.inf
    else:
        # Every coefficient is ≥ 0, so the offset is a bound too (CP-SAT's can be weaker).
        bound = max(
            model.offset + float(solver.best_objective_bound) / scale - allowance, model.offset
        )
    return _Solved(status, values, bound, len(constraints)), model.num_vars


def _solve_mip(model: _Model, name: str, deadline: _Deadline, seed: int) -> tuple[_Solved, int]:
    """Solves ``model`` with SCIP or CBC through ``pywraplp`` (float coefficients, one thread)."""
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver(_MIP_SOLVERS[name])
    if solver is None:
        raise ValueError(f"OR-Tools was built without the {name} solver")
    x = [solver.BoolVar("") for _ in range(model.num_vars)]
    start = model.node_start.tolist()
    for i in range(len(start) - 1):
        row = solver.Constraint(1, 1)
        for j in range(start[i], start[i + 1]):
            row.SetCoefficient(x[j], 1)
    ptr = model.eq_ptr.tolist()
    eq_vars, eq_coeffs = model.eq_vars.tolist(), model.eq_coeffs.tolist()
    for q in range(len(ptr) - 1):
        row = solver.Constraint(0, 0)
        for j in range(ptr[q], ptr[q + 1]):
            row.SetCoefficient(x[eq_vars[j]], eq_coeffs[j])
    for var_ids, mem, capacity in model.memory:
        row = solver.Constraint(-solver.infinity(), capacity)
        for j, c in zip(var_ids.tolist(), mem.tolist(), strict=True):
            row.SetCoefficient(x[j], c)
    objective = solver.Objective()
    for j in np.flatnonzero(model.objective).tolist():
        objective.SetCoefficient(x[j], float(model.objective[j]))
    objective.SetMinimization()
    hinted = np.flatnonzero(model.hint >= 0).tolist()
    if hinted:
        solver.SetHint([x[j] for j in hinted], [float(model.hint[j]) for j in hinted])
    solver.SetTimeLimit(max(1, int(deadline.remaining() * 1000)))
    if name == "scip":  # CBC through pywraplp takes neither a seed nor threads
        solver.SetSolverSpecificParametersAsString(f"randomization/randomseedshift = {int(seed)}\n")
    code = solver.Solve()
    status = {
        pywraplp.Solver.OPTIMAL: "optimal",
        pywraplp.Solver.FEASIBLE: "feasible",
        pywraplp.Solver.INFEASIBLE: "infeasible",
    }.get(code, "timeout-no-solution")
    values = None
    if status in ("optimal", "feasible"):
        values = np.array([round(v.solution_value()) for v in x], np.int64)
    if status == "infeasible":
        bound = math.inf
    else:
        best = objective.BestBound()
        bound = max(model.offset + best, model.offset) if math.isfinite(best) else model.offset
    return _Solved(status, values, bound, solver.NumConstraints()), model.num_vars


def _hint_local(reduction: Reduction, choice: np.ndarray) -> np.ndarray:
    """A complete hint for the core: the local strategy index of ``choice`` at every core
    node; where the reductions pruned that strategy, the cheapest allowed one given the
    node's cost and its edges to nodes already hinted (a complete hint lets CP-SAT take it
    as a first solution without search)."""
    core = reduction.core
    local = np.full(len(core.nodes), -1, np.int64)
    for i, (v, strategies) in enumerate(zip(core.nodes, core.strategies, strict=True)):
        at = np.flatnonzero(strategies == choice[v])
        if at.size:
            local[i] = at[0]
    missing = np.flatnonzero(local < 0)
    if missing.size:
        incident: dict[int, list[int]] = {int(i): [] for i in missing}
        for f, (a, b) in enumerate(core.edge_ends.tolist()):
            for end in (a, b):
                if end in incident:
                    incident[end].append(f)
        for i in incident:
            cost = core.node_cost[i].copy()
            for f in incident[i]:
                a, b = core.edge_ends[f]
                m = core.edge_cost[f]
                other = local[b] if a == i else local[a]
                if other >= 0:
                    cost += m[:, other] if a == i else m[other, :]
            local[i] = int(np.argmin(cost))
    return local


def _core_choice(reduction: Reduction, model: _Model, values: np.ndarray) -> np.ndarray:
    """The original strategy of every core node from the solver's variable values."""
    start = model.node_start
    chosen = np.flatnonzero(values[: start[-1]] > 0)
    node = np.searchsorted(start, chosen, side="right") - 1
    local = np.zeros(len(start) - 1, np.int64)
    local[node] = chosen - start[node]
    return np.array([s[k] for s, k in zip(reduction.core.strategies, local, strict=True)], np.int64)


def solve_ilp(
    problem: ShardingProblem,
    *,
    time_limit_s: float = 60.0,
    solver: str = "cp-sat",
    initial: np.ndarray | None = None,
    seed: int = 0,
    reduce: bool = True,
) -> IlpResult:
    """Solves the strategy-selection ILP (see the module docstring).

    The *fallback* choice is ``initial`` when given, else
    :func:`~hlo_go.sharding.greedy.solve_greedy`'s. It hints the solver (CP-SAT
    ``solution_hint``, MIP ``SetHint``), and when it fits the memory budget its cost
    bounds the reductions' pruning. What is returned:

    * a solver solution (``'optimal'``/``'feasible'``), or the fallback instead when
      the fallback fits the budget and costs less (possible only at a time-out);
    * the fallback when the solver finds nothing in time (``'timeout-no-solution'``)
      or the problem is proved infeasible (``'infeasible'``); then it may exceed the
      memory budget — check with :func:`~hlo_go.sharding.problem.peak_memory`.

    Args:
      problem: the problem.
      time_limit_s: wall-clock seconds for the whole call; the solver gets what the
        fallback, the reductions and model building leave, and at least a tenth of it.
      solver: ``'cp-sat'`` (default), or ``'scip'`` or ``'cbc'``
        through ``pywraplp``.
      initial: int[N], a starting choice (e.g. the greedy one).
      seed: the solver's random seed.
      reduce: apply the size reductions (False: the plain ILP over every node and
        edge, for comparison).

    Returns:
      The :class:`IlpResult`.

    Raises:
      ValueError: an invalid problem or ``initial``, or an unknown solver.
    """
    began = time.perf_counter()
    if solver != "cp-sat" and solver not in _MIP_SOLVERS:
        raise ValueError(f"unknown solver {solver!r}: 'cp-sat', 'scip' or 'cbc'")
    validate_problem(problem)
    if initial is not None:
        validate_choice(problem, initial)
        fallback = np.asarray(initial, np.int32)
    else:
        fallback = solve_greedy(problem)
    fallback_cost = total_cost(problem, fallback)
    fallback_fits = bool(is_memory_feasible(problem, fallback)) and math.isfinite(fallback_cost)
    upper_bound = fallback_cost if fallback_fits else math.inf

    def result(
        choice: np.ndarray,
        status: str,
        bound: float,
        variables: int,
        constraints: int,
        reduced: int,
    ) -> IlpResult:
        cost = total_cost(problem, choice)
        if status in ("optimal", "feasible") and fallback_fits and fallback_cost < cost:
            choice, cost = fallback, fallback_cost
        if status in ("optimal", "feasible", "timeout-no-solution"):
            bound = min(bound, cost)
        return IlpResult(
            np.asarray(choice, np.int32),
            float(cost),
            status,
            time.perf_counter() - began,
            float(bound),
            variables,
            constraints,
            reduced,
        )

    try:
        reduction = reduce_problem(problem, upper_bound=upper_bound, eliminate=reduce)
    except InfeasibleProblem:
        return result(fallback, "infeasible", math.inf, 0, 0, 0)
    core = reduction.core
    if not len(core.nodes):
        choice = reduction.expand(np.zeros(0, np.int64))
        return result(choice, "optimal", total_cost(problem, choice), 0, 0, 0)
    model = _build_model(core, _hint_local(reduction, fallback))
    deadline = _Deadline(began + time_limit_s, 0.1 * time_limit_s)
    if solver == "cp-sat":
        solved, variables = _solve_cp_sat(model, deadline, seed)
    else:
        solved, variables = _solve_mip(model, solver, deadline, seed)
    if solved.values is None:
        return result(
            fallback,
            solved.status,
            solved.lower_bound,
            variables,
            solved.constraints,
            len(core.nodes),
        )
    choice = reduction.expand(_core_choice(reduction, model, solved.values))
    return result(
        choice, solved.status, solved.lower_bound, variables, solved.constraints, len(core.nodes)
    )
