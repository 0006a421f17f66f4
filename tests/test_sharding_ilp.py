"""The strategy-selection problem, its reductions, the ILP and the greedy baseline."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_go.sharding.greedy import solve_greedy
from hlo_go.sharding.ilp import solve_ilp
from hlo_go.sharding.problem import (
    ShardingProblem,
    is_memory_feasible,
    peak_memory,
    total_cost,
    validate_choice,
)
from hlo_go.sharding.reduction import InfeasibleProblem, reduce_problem

INF = np.inf


def make_problem(
    costs: list[list[float]],
    edges: list[tuple[int, int, list[list[float]]]],
    memory: list[list[float]] | None = None,
    live_sets: tuple[tuple[int, ...], ...] = (),
    budget: float = INF,
) -> ShardingProblem:
    """A problem from ragged per-node lists (padded with inf cost and 0 memory)."""
    k = np.array([len(c) for c in costs], np.int32)
    width = int(k.max())
    node_cost = np.full((len(k), width), INF)
    node_memory = np.zeros((len(k), width))
    for v, c in enumerate(costs):
        node_cost[v, : len(c)] = c
        if memory is not None:
            node_memory[v, : len(c)] = memory[v]
    return ShardingProblem(
        num_strategies=k,
        node_cost=node_cost,
        node_memory=node_memory,
        edge_src=np.array([e[0] for e in edges], np.int32),
        edge_dst=np.array([e[1] for e in edges], np.int32),
        edge_cost=tuple(np.array(e[2], np.float64) for e in edges),
        live_sets=tuple(np.array(s, np.int32) for s in live_sets),
        memory_budget=budget,
    )


def random_problem(
    n: int,
    kmax: int,
    seed: int,
    *,
    kmin: int = 1,
    extra: float = 0.3,
    window: int = 10,
    live: int = 0,
    budget: float = INF,
) -> ShardingProblem:
    """A random DAG: a tree edge into every node from one of the ``window`` before it, plus
    with probability ``extra`` a second in-edge; sparse random matrices; random live sets."""
    rng = np.random.default_rng(seed)
    k = rng.integers(kmin, kmax + 1, n).astype(np.int32)
    cost = rng.random((n, kmax))
    memory = rng.integers(1, 100, (n, kmax)).astype(np.float64)
    padding = np.arange(kmax)[None, :] >= k[:, None]
    cost[padding], memory[padding] = INF, 0.0
    src, dst = [], []
    for v in range(1, n):
        for _ in range(1 + int(rng.random() < extra)):
            src.append(int(rng.integers(max(0, v - window), v)))
            dst.append(v)
    matrices = tuple(
        rng.random((k[u], k[v])) * (rng.random((k[u], k[v])) < 0.7)
        for u, v in zip(src, dst, strict=True)
    )
    sets = []
    for _ in range(live):
        lo = int(rng.integers(0, max(1, n - 4)))
        sets.append(np.arange(lo, min(n, lo + int(rng.integers(2, 6))), dtype=np.int32))
    return ShardingProblem(
        k,
        cost,
        memory,
        np.array(src, np.int32),
        np.array(dst, np.int32),
        matrices,
        tuple(sets),
        float(budget),
    )


def brute_force(problem: ShardingProblem) -> tuple[float, np.ndarray | None]:
    """The optimal feasible cost and choice by enumerating every choice (inf, None if none)."""
    choices = np.array(
        list(itertools.product(*[range(int(k)) for k in problem.num_strategies])), np.int64
    )
    n = len(problem.num_strategies)
    cost = problem.node_cost[np.arange(n)[None, :], choices].sum(axis=1)
    for u, v, m in zip(problem.edge_src, problem.edge_dst, problem.edge_cost, strict=True):
        cost = cost + m[choices[:, u], choices[:, v]]
    memory = problem.node_memory[np.arange(n)[None, :], choices]
    for members in problem.live_sets:
        cost = np.where(memory[:, members].sum(axis=1) > problem.memory_budget, INF, cost)
    best = int(np.argmin(cost))
    return (float(cost[best]), choices[best]) if np.isfinite(cost[best]) else (INF, None)


# ------------------------------------------------------------------ problem


def test_total_cost_and_peak_memory_match_plain_loops():
    problem = random_problem(300, 6, seed=1, live=40, budget=1e9)
    rng = np.random.default_rng(0)
    for _ in range(3):
        choice = rng.integers(0, problem.num_strategies)
        expected = sum(problem.node_cost[v, choice[v]] for v in range(300))
        for e in range(len(problem.edge_src)):
            u, v = problem.edge_src[e], problem.edge_dst[e]
            expected += problem.edge_cost[e][choice[u], choice[v]]
        assert total_cost(problem, choice) == pytest.approx(expected, rel=1e-12)
        peak = max(sum(problem.node_memory[v, choice[v]] for v in s) for s in problem.live_sets)
        assert peak_memory(problem, choice) == peak
    assert peak_memory(problem._replace(live_sets=()), np.zeros(300, np.int64)) == 0.0


def test_validate_choice_names_the_node():
    problem = make_problem([[1, 2], [1, 2, 3], [1]], [(0, 1, [[0, 1, 2], [1, 0, 2]])])
    validate_choice(problem, np.array([1, 2, 0]))
    with pytest.raises(ValueError, match="node 2"):
        validate_choice(problem, np.array([0, 0, 1]))
    with pytest.raises(ValueError, match="node 0"):
        total_cost(problem, np.array([-1, 0, 0]))
    with pytest.raises(ValueError, match="shape"):
        validate_choice(problem, np.array([0, 0]))


def test_edge_matrix_of_wrong_shape_is_named():
    problem = make_problem([[1, 2], [1, 2]], [(0, 1, [[0, 1, 2], [1, 0, 2]])])
    with pytest.raises(ValueError, match="edge 0"):
        solve_ilp(problem)


# --------------------------------------------------------------------- ILP


@pytest.mark.parametrize("seed", range(12))
def test_ilp_finds_the_brute_force_optimum(seed):
    budget = [INF, 180.0, 230.0][seed % 3]
    problem = random_problem(8, 3, seed, kmin=2, extra=1.0, window=8, live=4, budget=budget)
    best, _ = brute_force(problem)
    result = solve_ilp(problem, time_limit_s=10)
    if np.isinf(best):
        assert result.status == "infeasible"
        return
    assert result.status == "optimal"
    assert result.cost == pytest.approx(best, rel=1e-9)
    assert total_cost(problem, result.choice) == result.cost
    assert result.lower_bound <= result.cost
    assert result.lower_bound == pytest.approx(best, rel=1e-6)
    assert is_memory_feasible(problem, result.choice)


def test_memory_budget_rules_out_the_unconstrained_optimum():
    # Strategy 0 is fast and replicated (large), strategy 1 slow and sharded (small).
    costs = [[1.0, 3.0], [1.0, 2.5], [1.0, 4.0], [1.0, 2.0]]
    memory = [[100, 25], [100, 25], [100, 25], [100, 25]]
    reshard = [[0.0, 0.5], [0.5, 0.0]]
    edges = [(0, 1, reshard), (1, 2, reshard), (2, 3, reshard), (0, 3, reshard)]
    free = make_problem(costs, edges, memory, live_sets=((0, 1, 2), (1, 2, 3)))
    tight = free._replace(memory_budget=160.0)
    free_result = solve_ilp(free)
    assert free_result.choice.tolist() == [0, 0, 0, 0]
    assert peak_memory(tight, free_result.choice) > tight.memory_budget
    best, best_choice = brute_force(tight)
    result = solve_ilp(tight)
    assert result.status == "optimal"
    assert result.cost == pytest.approx(best)
    assert result.cost > free_result.cost
    assert peak_memory(tight, result.choice) <= 160.0
    assert result.choice.tolist() == best_choice.tolist()


def test_infeasible_budget_returns_the_fallback():
    problem = make_problem(
        [[1.0, 2.0], [1.0, 2.0]],
        [(0, 1, [[0.0, 1.0], [1.0, 0.0]])],
        memory=[[10, 8], [10, 8]],
        live_sets=((0, 1),),
        budget=15.0,
    )
    initial = np.array([1, 0])
    result = solve_ilp(problem, initial=initial)
    assert result.status == "infeasible"
    assert result.choice.tolist() == [1, 0]
    assert result.lower_bound == INF
    with pytest.raises(InfeasibleProblem):
        reduce_problem(problem)


@pytest.mark.parametrize("seed", range(8))
def test_reductions_preserve_the_optimum(seed):
    budget = [INF, 200.0][seed % 2]
    problem = random_problem(8, 3, 50 + seed, kmin=1, extra=0.8, window=5, live=3, budget=budget)
    best, _ = brute_force(problem)
    reduced = solve_ilp(problem, reduce=True)
    plain = solve_ilp(problem, reduce=False)
    if np.isinf(best):
        assert reduced.status == plain.status == "infeasible"
        return
    assert reduced.status == plain.status == "optimal"
    assert reduced.cost == pytest.approx(best, rel=1e-9)
    assert plain.cost == pytest.approx(best, rel=1e-9)
    assert plain.reduced_nodes == 8
    assert reduced.variables <= plain.variables


def test_reduction_expands_to_the_same_cost():
    problem = random_problem(200, 5, seed=3, kmin=2, extra=1.0, window=6)
    reduction = reduce_problem(problem)
    core = reduction.core
    assert 0 < len(core.nodes) < 200
    rng = np.random.default_rng(0)
    for _ in range(3):
        local = [int(rng.integers(len(s))) for s in core.strategies]
        core_cost = core.constant + sum(c[k] for c, k in zip(core.node_cost, local, strict=True))
        for (a, b), m in zip(core.edge_ends, core.edge_cost, strict=True):
            core_cost += m[local[a], local[b]]
        full = reduction.expand(
            np.array([s[k] for s, k in zip(core.strategies, local, strict=True)])
        )
        assert total_cost(problem, full) == pytest.approx(core_cost, rel=1e-9)


def test_trees_separable_and_parallel_edges_reduce_to_nothing():
    tree = random_problem(8, 3, seed=7, extra=0.0, window=3)
    best, _ = brute_force(tree)
    result = solve_ilp(tree)
    assert (result.status, result.reduced_nodes, result.variables) == ("optimal", 0, 0)
    assert result.cost == pytest.approx(best)
    # Parallel edges (both directions) merge; a separable matrix a[k] + b[l] and a
    # constant one fold into node costs; a 1-strategy node folds into its neighbours.
    a = np.array([0.0, 2.0, 1.0])
    edges = [
        (0, 1, [[0.0, 4.0], [4.0, 0.0], [2.0, 2.0]]),
        (1, 0, [[1.0, 0.0, 3.0], [0.0, 1.0, 3.0]]),
        (1, 2, (np.array([[3.0], [0.0]]) + a[None, :]).tolist()),
        (2, 3, np.full((3, 1), 5.0).tolist()),
        (3, 0, [[1.0, 2.0, 0.0]]),
        (2, 0, (a[:, None] + a[None, :]).tolist()),
    ]
    problem = make_problem([[1.0, 1.0, 2.0], [0.0, 1.0], [2.0, 0.0, 1.0], [0.5]], edges)
    best, _ = brute_force(problem)
    result = solve_ilp(problem)
    assert result.status == "optimal"
    assert result.cost == pytest.approx(best)
    assert result.reduced_nodes == 0


def test_forbidden_pairs_and_mixed_magnitudes():
    rng = np.random.default_rng(5)
    problem = random_problem(8, 3, seed=11, kmin=2, extra=1.0, window=8)
    scales = 10.0 ** rng.integers(-9, 3, len(problem.edge_cost))
    matrices = [m * s for m, s in zip(problem.edge_cost, scales, strict=True)]
    matrices[0] = matrices[0].copy()
    matrices[0][0, 0] = INF
    matrices[3] = matrices[3].copy()
    matrices[3][1, :] = INF  # forbids strategy 1 of the producer
    problem = problem._replace(edge_cost=tuple(matrices), node_cost=problem.node_cost * 1e-6)
    best, _ = brute_force(problem)
    result = solve_ilp(problem)
    assert result.status == "optimal"
    assert result.cost == pytest.approx(best, rel=1e-6)
    assert result.choice[problem.edge_src[3]] != 1


@pytest.mark.parametrize("solver", ["scip", "cbc"])
def test_mip_solvers_agree_with_brute_force(solver):
    problem = random_problem(7, 3, seed=21, kmin=2, extra=1.0, window=7, live=3, budget=180.0)
    best, _ = brute_force(problem)
    result = solve_ilp(problem, solver=solver, reduce=False)
    assert result.status == "optimal"
    assert result.cost == pytest.approx(best, rel=1e-9)


def test_unknown_solver_is_rejected():
    with pytest.raises(ValueError, match="unknown solver"):
        solve_ilp(make_problem([[1.0]], []), solver="gurobi")


def test_ilp_never_returns_worse_than_a_feasible_initial_choice():
    problem = random_problem(400, 6, seed=4, extra=0.5, window=8, live=60, budget=250.0)
    initial = solve_greedy(problem)
    assert is_memory_feasible(problem, initial)
    result = solve_ilp(problem, initial=initial, time_limit_s=20)
    assert result.status in ("optimal", "feasible")
    assert result.cost <= total_cost(problem, initial)
    assert is_memory_feasible(problem, result.choice)
    assert result.lower_bound <= result.cost


def test_cp_sat_and_scip_agree_on_a_random_dag():
    problem = random_problem(300, 8, seed=8, extra=0.3, window=10)
    cp_sat = solve_ilp(problem, time_limit_s=30)
    scip = solve_ilp(problem, time_limit_s=30, solver="scip")
    assert cp_sat.status == scip.status == "optimal"
    assert cp_sat.cost == pytest.approx(scip.cost, rel=1e-6)
    assert 0 < cp_sat.reduced_nodes < 300


def test_random_tree_of_2000_nodes_solves_to_optimality():
    # Solve times of graphs of this size are benchmarks/bench_shard.py's (LARGE_NODES).
    problem = random_problem(2000, 8, seed=2, extra=0.0, window=20)
    result = solve_ilp(problem, time_limit_s=30)
    assert result.status == "optimal"
    assert result.reduced_nodes == 0
    assert result.cost <= total_cost(problem, solve_greedy(problem)) + 1e-9


# ------------------------------------------------------------------ greedy


def test_greedy_is_valid_and_locally_optimal():
    problem = random_problem(500, 6, seed=6, extra=0.5, window=8)
    choice = solve_greedy(problem, max_rounds=1000)
    validate_choice(problem, choice)
    assert choice.dtype == np.int32
    cost = total_cost(problem, choice)
    rng = np.random.default_rng(0)
    for v in rng.choice(500, 60, replace=False):
        for k in range(problem.num_strategies[v]):
            moved = choice.copy()
            moved[v] = k
            assert total_cost(problem, moved) >= cost - 1e-9
    assert total_cost(problem, solve_greedy(problem, max_rounds=0)) >= cost - 1e-9


def test_greedy_order_and_forbidden_strategies():
    problem = random_problem(200, 5, seed=9, extra=0.3, window=5)
    node_cost = problem.node_cost.copy()
    node_cost[:, 0] = INF  # price strategy 0 out wherever there is another
    node_cost[problem.num_strategies == 1, 0] = 1.0
    masked = problem._replace(node_cost=node_cost)
    choice = solve_greedy(masked, order=np.arange(200)[::-1])
    assert np.all((choice > 0) | (problem.num_strategies == 1))
    assert np.isfinite(total_cost(masked, choice))
    with pytest.raises(ValueError, match="permutation"):
        solve_greedy(problem, order=np.zeros(200, np.int64))


def test_greedy_fits_the_budget_when_smallest_memories_do():
    problem = random_problem(600, 6, seed=10, extra=0.3, window=8, live=150)
    smallest = np.where(
        np.arange(6)[None, :] < problem.num_strategies[:, None], problem.node_memory, INF
    ).argmin(axis=1)
    floor = peak_memory(problem, smallest)
    for budget in (floor, floor + 40.0):
        tight = problem._replace(memory_budget=float(budget))
        choice = solve_greedy(tight)
        assert peak_memory(tight, choice) <= budget
    free = solve_greedy(problem)
    assert peak_memory(problem, free) > floor  # the budget mattered
