"""Baselines for placement, scheduling and fusion, and searches over all three.

Every method has one signature, ``method(graph, cluster, *, seed=0, budget=None) ->
Decisions``, and a name (:func:`get`, :func:`names`; ``"a+b+c"`` combines a placement, a
scheduling and a fusion method, see :mod:`~hlo_go.baselines.registry`).

Public names::

    get(name) -> Method        names(kind=None)        combine(placement=, scheduling=, fusion=)
    Method, UnknownMethodError
    run_search(graph, cluster, method, budget=, time_limit=, seed=, start=) -> SearchResult
    run_hdp(graph, cluster, budget=, time_limit=, seed=, fixed=, config=) -> SearchResult
    HDPConfig, SearchResult (.curve, .best, ...), Curve
    run_methods(graph, cluster, methods) -> [BaselineRow]     STANDARD_METHODS
    measured_search(program, budget=, time_limit=, seed=) -> MeasuredSearchResult

Each heuristic is reached by its name through :func:`get`; the component functions, the
search space and the report helpers stay importable from here and from their modules but
are not advertised.

Module by concept: :mod:`~hlo_go.baselines.costs` (node and transfer times the
heuristics use), :mod:`~hlo_go.baselines.scopes` (layers from op_name metadata),
:mod:`~hlo_go.baselines.placement` (single, round-robin, expert, METIS),
:mod:`~hlo_go.baselines.list_scheduling` (HEFT, m-ETF, m-SCT),
:mod:`~hlo_go.baselines.scheduling` (FIFO, critical path),
:mod:`~hlo_go.baselines.fusion` (no fusion, XLA:CPU-like, all legal, priority fusion),
:mod:`~hlo_go.baselines.search` (random search, simulated annealing, BRKGA),
:mod:`~hlo_go.baselines.measured` (a search that times every candidate on this host),
:mod:`~hlo_go.baselines.hdp` (the hierarchical placer of Mirhoseini et al., trained by
policy gradient on the simulator),
:mod:`~hlo_go.baselines.curve` (convergence curves), :mod:`~hlo_go.baselines.result`
(what a search returns), :mod:`~hlo_go.baselines.registry`
(names), :mod:`~hlo_go.baselines.report` (running many and tabulating),
:mod:`~hlo_go.cli.baseline` (the ``hlo-go baseline`` command).
"""

from hlo_go.baselines.costs import TaskCosts as TaskCosts
from hlo_go.baselines.costs import task_costs as task_costs
from hlo_go.baselines.curve import Curve
from hlo_go.baselines.fusion import edge_fusion_benefit as edge_fusion_benefit
from hlo_go.baselines.fusion import expensive_nodes as expensive_nodes
from hlo_go.baselines.fusion import fuse_all_legal_priority as fuse_all_legal_priority
from hlo_go.baselines.fusion import no_fusion_priority as no_fusion_priority
from hlo_go.baselines.fusion import priority_fusion_priority as priority_fusion_priority
from hlo_go.baselines.fusion import reuses_operand as reuses_operand
from hlo_go.baselines.fusion import xla_cpu_like_eligible as xla_cpu_like_eligible
from hlo_go.baselines.fusion import xla_cpu_like_priority as xla_cpu_like_priority
from hlo_go.baselines.hdp import HDPConfig, run_hdp
from hlo_go.baselines.list_scheduling import favourite_children as favourite_children
from hlo_go.baselines.list_scheduling import list_schedule_placement as list_schedule_placement
from hlo_go.baselines.measured import MeasuredSearchError, MeasuredSearchResult, measured_search
from hlo_go.baselines.placement import contiguous_split as contiguous_split
from hlo_go.baselines.placement import cut_bytes as cut_bytes
from hlo_go.baselines.placement import expert_placement as expert_placement
from hlo_go.baselines.placement import heft_placement as heft_placement
from hlo_go.baselines.placement import m_etf_placement as m_etf_placement
from hlo_go.baselines.placement import m_sct_placement as m_sct_placement
from hlo_go.baselines.placement import metis_parts as metis_parts
from hlo_go.baselines.placement import metis_placement as metis_placement
from hlo_go.baselines.placement import round_robin_placement as round_robin_placement
from hlo_go.baselines.placement import single_device_placement as single_device_placement
from hlo_go.baselines.registry import DEFAULTS as DEFAULTS
from hlo_go.baselines.registry import KINDS as KINDS
from hlo_go.baselines.registry import Method, UnknownMethodError, combine, get, names
from hlo_go.baselines.report import STANDARD_METHODS, BaselineRow, run_methods
from hlo_go.baselines.report import best_by_graph as best_by_graph
from hlo_go.baselines.report import plot_bars as plot_bars
from hlo_go.baselines.report import rich_table as rich_table
from hlo_go.baselines.report import run_method as run_method
from hlo_go.baselines.report import speedups as speedups
from hlo_go.baselines.report import to_csv as to_csv
from hlo_go.baselines.scheduling import critical_path_priority as critical_path_priority
from hlo_go.baselines.scheduling import fifo_priority as fifo_priority
from hlo_go.baselines.scheduling import upward_rank as upward_rank
from hlo_go.baselines.scopes import scope_ids as scope_ids
from hlo_go.baselines.scopes import scope_path as scope_path
from hlo_go.baselines.scopes import split_op_name as split_op_name
from hlo_go.baselines.search import DEFAULT_STARTS as DEFAULT_STARTS
from hlo_go.baselines.search import FUSION_OFF as FUSION_OFF
from hlo_go.baselines.search import SearchResult, run_search
from hlo_go.baselines.search import SearchSpace as SearchSpace
from hlo_go.baselines.search import score as score

__all__ = [
    "STANDARD_METHODS",
    "BaselineRow",
    "Curve",
    "HDPConfig",
    "MeasuredSearchError",
    "MeasuredSearchResult",
    "Method",
    "SearchResult",
    "UnknownMethodError",
    "combine",
    "get",
    "measured_search",
    "names",
    "run_hdp",
    "run_methods",
    "run_search",
]
