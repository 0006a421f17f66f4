"""Automatic SPMD sharding: the fourth decision (a strategy per instruction over a mesh).

Public names::

    Mesh, AxisLinks, COLLECTIVES                       the mesh and collective costs
    ShardSpec, spec_text, spec_name, reshard_collectives, reshard_cost
    Strategy, enumerate_strategies, MAX_STRATEGIES     what one instruction can do
    build_sharding(module, mesh, cluster) -> ShardingGraph    inline_calls
    ShardingProblem, total_cost, validate_choice       the problem every method solves
    simulate_sharding(sg, choice) -> ShardingResult    peak_memory, fits_memory, charged_collectives
    fit_memory(sg, choice): a choice made to fit the memory budget
    annotate(sg, choice) -> HloModule                  measure_sharding -> ShardingMeasurement
    methods: get(name), names(), infer_batch_size      solve_ilp, IlpResult, solve_greedy
    ilp_with_result(sg) -> (choice, IlpResult)         the ILP method with its status and bound
    gap_to_bound(cost, lower_bound)                    how far above the optimum a cost can be

Module by concept: :mod:`~hlo_go.sharding.mesh`, :mod:`~hlo_go.sharding.spec`,
:mod:`~hlo_go.sharding.strategies`, :mod:`~hlo_go.sharding.build`,
:mod:`~hlo_go.sharding.problem`, :mod:`~hlo_go.sharding.simulate`,
:mod:`~hlo_go.sharding.lower`, :mod:`~hlo_go.sharding.greedy`,
:mod:`~hlo_go.sharding.ilp`, :mod:`~hlo_go.sharding.refine` (window refinement),
:mod:`~hlo_go.sharding.methods`,
:mod:`~hlo_go.cli.shard` (``hlo-go shard``); the learned policy:
:mod:`~hlo_go.sharding.policy` (network, PPO, shipped pre-trained policy),
:mod:`~hlo_go.sharding.imitation` (learning the ILP's choices),
:mod:`~hlo_go.sharding.pretrain` (``python -m hlo_go.sharding.pretrain``).
"""

from hlo_go.sharding.build import ShardingGraph, build_sharding, inline_calls
from hlo_go.sharding.greedy import fit_memory, solve_greedy
from hlo_go.sharding.ilp import IlpResult, gap_to_bound, solve_ilp
from hlo_go.sharding.lower import (
    ShardingMeasurement,
    annotate,
    measure_sharding,
    measure_shardings,
)
from hlo_go.sharding.mesh import COLLECTIVES, AxisLinks, Mesh
from hlo_go.sharding.methods import get, ilp_with_result, infer_batch_size, names
from hlo_go.sharding.problem import ShardingProblem, total_cost, validate_choice
from hlo_go.sharding.simulate import (
    ShardingResult,
    charged_collectives,
    fits_memory,
    peak_memory,
    simulate_sharding,
)
from hlo_go.sharding.spec import ShardSpec, reshard_collectives, reshard_cost, spec_name, spec_text
from hlo_go.sharding.strategies import MAX_STRATEGIES, Strategy, enumerate_strategies

__all__ = [
    "COLLECTIVES",
    "MAX_STRATEGIES",
    "AxisLinks",
    "IlpResult",
    "Mesh",
    "ShardSpec",
    "ShardingGraph",
    "ShardingMeasurement",
    "ShardingProblem",
    "ShardingResult",
    "Strategy",
    "annotate",
    "build_sharding",
    "charged_collectives",
    "enumerate_strategies",
    "fit_memory",
    "fits_memory",
    "gap_to_bound",
    "get",
    "ilp_with_result",
    "infer_batch_size",
    "inline_calls",
    "measure_sharding",
    "measure_shardings",
    "names",
    "peak_memory",
    "reshard_collectives",
    "reshard_cost",
    "simulate_sharding",
    "solve_greedy",
    "solve_ilp",
    "spec_name",
    "spec_text",
    "total_cost",
    "validate_choice",
]
