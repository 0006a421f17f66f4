"""Baselines for placement, scheduling and fusion, and searches over all three.

Every method has one signature, ``method(graph, cluster, *, seed=0, budget=None) ->
Decisions``, and a name (:func:`get`, :func:`names`; ``"a+b+c"`` combines a placement, a
scheduling and a fusion method, see :mod:`~hlo_go.baselines.registry`).

Public names::

    get(name) -> Method        names(kind=None)        combine(placement=, scheduling=, fusion=)
    Method, UnknownMethodError, KINDS, DEFAULTS
    run_search(graph, cluster, method, budget=, time_limit=, seed=, start=) -> SearchResult
    run_hdp(graph, cluster, budget=, time_limit=, seed=, fixed=, config=) -> SearchResult
    HDPConfig
    SearchResult (.curve, .best, ...), Curve, SearchSpace, score, FUSION_OFF, DEFAULT_STARTS
    upward_rank, critical_path_priority, fifo_priority
    single_device_placement, round_robin_placement, expert_placement, metis_placement,
    metis_parts, heft_placement, m_etf_placement, m_sct_placement, list_schedule_placement,
    contiguous_split, cut_bytes, favourite_children
    no_fusion_priority, fuse_all_legal_priority, xla_cpu_like_priority,
    priority_fusion_priority, xla_cpu_like_eligible, edge_fusion_benefit,
    expensive_nodes, reuses_operand
    scope_path, scope_ids, split_op_name     task_costs, TaskCosts
    STANDARD_METHODS, BaselineRow, run_method, run_methods, best_by_graph, speedups,
    rich_table, to_csv, plot_bars

Module by concept: :mod:`~hlo_go.baselines.costs` (node and transfer times the
heuristics use), :mod:`~hlo_go.baselines.scopes` (layers from op_name metadata),
:mod:`~hlo_go.baselines.placement` (single, round-robin, expert, METIS),
:mod:`~hlo_go.baselines.list_scheduling` (HEFT, m-ETF, m-SCT),
:mod:`~hlo_go.baselines.scheduling` (FIFO, critical path),
:mod:`~hlo_go.baselines.fusion` (no fusion, XLA:CPU-like, all legal, priority fusion),
:mod:`~hlo_go.baselines.search` (random search, simulated annealing, BRKGA),
:mod:`~hlo_go.baselines.hdp` (the hierarchical placer of Mirhoseini et al., trained by
policy gradient on the simulator),
:mod:`~hlo_go.baselines.curve` (convergence curves), :mod:`~hlo_go.baselines.registry`
(names), :mod:`~hlo_go.baselines.report` (running many and tabulating),
:mod:`~hlo_go.cli.baseline` (the ``hlo-go baseline`` command).
"""

from hlo_go.baselines.costs import TaskCosts, task_costs
from hlo_go.baselines.curve import Curve
from hlo_go.baselines.fusion import (
    edge_fusion_benefit,
    expensive_nodes,
    fuse_all_legal_priority,
    no_fusion_priority,
    priority_fusion_priority,
    reuses_operand,
    xla_cpu_like_eligible,
    xla_cpu_like_priority,
)
from hlo_go.baselines.hdp import HDPConfig, run_hdp
from hlo_go.baselines.list_scheduling import favourite_children, list_schedule_placement
from hlo_go.baselines.placement import (
    contiguous_split,
    cut_bytes,
    expert_placement,
    heft_placement,
    m_etf_placement,
    m_sct_placement,
    metis_parts,
    metis_placement,
    round_robin_placement,
    single_device_placement,
)
from hlo_go.baselines.registry import (
    DEFAULTS,
    KINDS,
    Method,
    UnknownMethodError,
    combine,
    get,
    names,
)
from hlo_go.baselines.report import (
    STANDARD_METHODS,
    BaselineRow,
    best_by_graph,
    plot_bars,
    rich_table,
    run_method,
    run_methods,
    speedups,
    to_csv,
)
from hlo_go.baselines.scheduling import critical_path_priority, fifo_priority, upward_rank
from hlo_go.baselines.scopes import scope_ids, scope_path, split_op_name
from hlo_go.baselines.search import (
    DEFAULT_STARTS,
    FUSION_OFF,
    SearchResult,
    SearchSpace,
    run_search,
    score,
)

__all__ = [
    "DEFAULTS",
    "DEFAULT_STARTS",
    "FUSION_OFF",
    "KINDS",
    "STANDARD_METHODS",
    "BaselineRow",
    "Curve",
    "HDPConfig",
    "Method",
    "SearchResult",
    "SearchSpace",
    "TaskCosts",
    "UnknownMethodError",
    "best_by_graph",
    "combine",
    "contiguous_split",
    "critical_path_priority",
    "cut_bytes",
    "edge_fusion_benefit",
    "expensive_nodes",
    "expert_placement",
    "favourite_children",
    "fifo_priority",
    "fuse_all_legal_priority",
    "get",
    "heft_placement",
    "list_schedule_placement",
    "m_etf_placement",
    "m_sct_placement",
    "metis_parts",
    "metis_placement",
    "names",
    "no_fusion_priority",
    "plot_bars",
    "priority_fusion_priority",
    "reuses_operand",
    "rich_table",
    "round_robin_placement",
    "run_hdp",
    "run_method",
    "run_methods",
    "run_search",
    "scope_ids",
    "scope_path",
    "score",
    "single_device_placement",
    "speedups",
    "split_op_name",
    "task_costs",
    "to_csv",
    "upward_rank",
    "xla_cpu_like_eligible",
    "xla_cpu_like_priority",
]
