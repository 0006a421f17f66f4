"""Decisions (placement, schedule priority, fusion priority), their validation, and the
fusion grouping they imply.

Public names::

    Decisions (.default, .validate, .fusion_groups)
    fusion_groups(graph, placement, fusion_priority, ...) -> int32[N]    FusionLimits, DEFAULT_LIMITS
    edge_priority, candidate_edges, fusion_group_names
    fusible_nodes, FUSIBLE_OPCODES, CPU_EMITTER_NOT_FUSIBLE, OUTPUT_ONLY_OPCODES,
    check_fusion_groups, FusionGroupError, check_gpu_fusion_groups (XLA:GPU's rules)
    graph_output_dims, module_output_dims, large_matrix_nodes, SMALL_MATRIX_BYTES
    Adjacency, adjacency, build_adjacency, graph_cached

Module by concept: :mod:`~hlo_go.decisions.decisions` (the action type),
:mod:`~hlo_go.decisions.fusion` (priority-based fusion grouping),
:mod:`~hlo_go.decisions.legality` (fusion rules and checks),
:mod:`~hlo_go.decisions.gpu_legality` (XLA:GPU's fusion rules),
:mod:`~hlo_go.decisions.adjacency` (CSR neighbour lists, per-graph caching).
"""

from hlo_go.decisions.adjacency import Adjacency, adjacency, build_adjacency, graph_cached
from hlo_go.decisions.decisions import Decisions
from hlo_go.decisions.fusion import (
    DEFAULT_LIMITS,
    FusionLimits,
    candidate_edges,
    edge_priority,
    fusion_group_names,
    fusion_groups,
)
from hlo_go.decisions.gpu_legality import check_gpu_fusion_groups
from hlo_go.decisions.legality import (
    CPU_EMITTER_NOT_FUSIBLE,
    FUSIBLE_OPCODES,
    OUTPUT_ONLY_OPCODES,
    SMALL_MATRIX_BYTES,
    FusionGroupError,
    check_fusion_groups,
    fusible_nodes,
    graph_output_dims,
    large_matrix_nodes,
    module_output_dims,
)

__all__ = [
    "CPU_EMITTER_NOT_FUSIBLE",
    "DEFAULT_LIMITS",
    "FUSIBLE_OPCODES",
    "OUTPUT_ONLY_OPCODES",
    "SMALL_MATRIX_BYTES",
    "Adjacency",
    "Decisions",
    "FusionGroupError",
    "FusionLimits",
    "adjacency",
    "build_adjacency",
    "candidate_edges",
    "check_fusion_groups",
    "check_gpu_fusion_groups",
    "edge_priority",
    "fusible_nodes",
    "fusion_group_names",
    "fusion_groups",
    "graph_cached",
    "graph_output_dims",
    "large_matrix_nodes",
    "module_output_dims",
]
