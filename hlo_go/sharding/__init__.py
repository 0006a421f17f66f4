"""Automatic SPMD sharding: the fourth decision (a strategy per instruction over a mesh).

What a user calls::

    sg = build_sharding(module, Mesh.parse("2x4"), get_cluster("h100x8"))  # ShardingGraph
    choice = get("ilp")(sg)            # names(): replicated, dp, megatron, greedy, ilp,
                                       # core-greedy, core-greedy-refined, policy, policy-ft
    choice, result = ilp_with_result(sg)        # IlpResult: status, proved lower bound
    gap_to_bound(total_cost(sg.problem, choice), result.lower_bound)
    simulate_sharding(sg, choice)      # -> ShardingResult (step time, collectives, memory)
    fits_memory(sg, choice), fit_memory(sg, choice)
    annotate(sg, choice)               # -> HloModule with sharding attributes
    measure_sharding(sg, choice)       # -> ShardingMeasurement (XLA SPMD, checked)

The building blocks (``ShardSpec``, ``Strategy``, ``enumerate_strategies``,
``ShardingProblem``, ``solve_ilp``, ``solve_greedy``, ...) are importable from here too,
and from their modules: :mod:`~hlo_go.sharding.mesh`, :mod:`~hlo_go.sharding.spec`,
:mod:`~hlo_go.sharding.strategies`, :mod:`~hlo_go.sharding.build`,
:mod:`~hlo_go.sharding.problem`, :mod:`~hlo_go.sharding.simulate`,
:mod:`~hlo_go.sharding.lower`, :mod:`~hlo_go.sharding.greedy`,
:mod:`~hlo_go.sharding.ilp`, :mod:`~hlo_go.sharding.reduction`,
:mod:`~hlo_go.sharding.refine` (window refinement), :mod:`~hlo_go.sharding.heuristics`
(replicated, data parallel, Megatron, greedy), :mod:`~hlo_go.sharding.methods` (every
method by name), :mod:`~hlo_go.cli.shard` (``hlo-go shard``). The learned policy is
the package :mod:`~hlo_go.sharding.learned`; ``python -m hlo_go.sharding.pretrain``
trains it. See ``docs/sharding.md``.
"""

from hlo_go.sharding.build import ShardingGraph, build_sharding
from hlo_go.sharding.build import inline_calls as inline_calls
from hlo_go.sharding.greedy import fit_memory
from hlo_go.sharding.greedy import solve_greedy as solve_greedy
from hlo_go.sharding.ilp import IlpResult, gap_to_bound
from hlo_go.sharding.ilp import solve_ilp as solve_ilp
from hlo_go.sharding.lower import ShardingMeasurement, annotate, measure_sharding
from hlo_go.sharding.lower import measure_shardings as measure_shardings
from hlo_go.sharding.mesh import COLLECTIVES as COLLECTIVES
from hlo_go.sharding.mesh import AxisLinks as AxisLinks
from hlo_go.sharding.mesh import Mesh
from hlo_go.sharding.methods import get, ilp_with_result, names
from hlo_go.sharding.methods import infer_batch_size as infer_batch_size
from hlo_go.sharding.problem import ShardingProblem as ShardingProblem
from hlo_go.sharding.problem import total_cost
from hlo_go.sharding.problem import validate_choice as validate_choice
from hlo_go.sharding.simulate import ShardingResult, fits_memory, simulate_sharding
from hlo_go.sharding.simulate import charged_collectives as charged_collectives
from hlo_go.sharding.simulate import peak_memory as peak_memory
from hlo_go.sharding.spec import ShardSpec as ShardSpec
from hlo_go.sharding.spec import reshard_collectives as reshard_collectives
from hlo_go.sharding.spec import reshard_cost as reshard_cost
from hlo_go.sharding.spec import spec_name as spec_name
from hlo_go.sharding.spec import spec_text as spec_text
from hlo_go.sharding.strategies import MAX_STRATEGIES as MAX_STRATEGIES
from hlo_go.sharding.strategies import Strategy as Strategy
from hlo_go.sharding.strategies import enumerate_strategies as enumerate_strategies

__all__ = [
    "IlpResult",
    "Mesh",
    "ShardingGraph",
    "ShardingMeasurement",
    "ShardingResult",
    "annotate",
    "build_sharding",
    "fit_memory",
    "fits_memory",
    "gap_to_bound",
    "get",
    "ilp_with_result",
    "measure_sharding",
    "measure_shardings",
    "names",
    "simulate_sharding",
    "total_cost",
]
