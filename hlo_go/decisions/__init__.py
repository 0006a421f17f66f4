"""Decisions (placement, schedule priority, fusion priority), their validation, and the
fusion grouping they imply.

Public names::

    Decisions (.default, .for_graph, .validate, .check_graph, .arrays, .fusion_groups)
    GraphMismatchError    graph_fingerprint(graph)    ARRAY_FIELDS    DecisionsError
    decisions_from_values(values, graph), load_decisions(path, graph)   (checked before any cast)
    fusion_groups(graph, placement, fusion_priority, ...) -> int32[N]    FusionLimits
    fusion_group_names(graph, group)      fusible_nodes(graph)
    check_fusion_groups(graph, group)     FusionGroupError
    check_gpu_fusion_groups(graph, group)   (XLA:GPU's fusion rules)

The rest (fusion rules and opcode sets, edge priorities, output dims, adjacency lists and
per-graph caching) stays importable from here and from its module but is not advertised.

Module by concept: :mod:`~hlo_go.decisions.decisions` (the action type),
:mod:`~hlo_go.decisions.files` (decisions from values and files, checked),
:mod:`~hlo_go.decisions.fusion` (priority-based fusion grouping),
:mod:`~hlo_go.decisions.legality` (fusion rules and checks),
:mod:`~hlo_go.decisions.gpu_legality` (XLA:GPU's fusion rules),
:mod:`~hlo_go.decisions.adjacency` (CSR neighbour lists, per-graph caching).
"""

from hlo_go.decisions.adjacency import Adjacency as Adjacency
from hlo_go.decisions.adjacency import adjacency as adjacency
from hlo_go.decisions.adjacency import build_adjacency as build_adjacency
from hlo_go.decisions.adjacency import graph_cached as graph_cached
from hlo_go.decisions.decisions import (
    ARRAY_FIELDS,
    Decisions,
    DecisionsError,
    GraphMismatchError,
    graph_fingerprint,
)
from hlo_go.decisions.files import decisions_from_values, load_decisions
from hlo_go.decisions.fusion import DEFAULT_LIMITS as DEFAULT_LIMITS
from hlo_go.decisions.fusion import FusionLimits, fusion_group_names, fusion_groups
from hlo_go.decisions.fusion import candidate_edges as candidate_edges
from hlo_go.decisions.fusion import edge_priority as edge_priority
from hlo_go.decisions.gpu_legality import check_gpu_fusion_groups
from hlo_go.decisions.legality import CPU_EMITTER_NOT_FUSIBLE as CPU_EMITTER_NOT_FUSIBLE
from hlo_go.decisions.legality import FUSIBLE_OPCODES as FUSIBLE_OPCODES
from hlo_go.decisions.legality import OUTPUT_ONLY_OPCODES as OUTPUT_ONLY_OPCODES
from hlo_go.decisions.legality import SMALL_MATRIX_BYTES as SMALL_MATRIX_BYTES
from hlo_go.decisions.legality import SMALL_MATRIX_FLOPS as SMALL_MATRIX_FLOPS
from hlo_go.decisions.legality import FusionGroupError, check_fusion_groups, fusible_nodes
from hlo_go.decisions.legality import graph_output_dims as graph_output_dims
from hlo_go.decisions.legality import large_matrix_nodes as large_matrix_nodes
from hlo_go.decisions.legality import module_output_dims as module_output_dims
from hlo_go.decisions.legality import unfuse_large_matrices as unfuse_large_matrices

__all__ = [
    "ARRAY_FIELDS",
    "Decisions",
    "DecisionsError",
    "FusionGroupError",
    "FusionLimits",
    "GraphMismatchError",
    "check_fusion_groups",
    "check_gpu_fusion_groups",
    "decisions_from_values",
    "fusible_nodes",
    "fusion_group_names",
    "fusion_groups",
    "graph_fingerprint",
    "load_decisions",
]
