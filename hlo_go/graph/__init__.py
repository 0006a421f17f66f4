"""HloModule → OpGraph (flattened, featurized dataflow graph) → padded jraph.GraphsTuple.

Public names::

    build_graph(module) -> OpGraph        OpGraph (.validate(), .num_nodes, .num_edges, ...)
    to_graphs_tuple(graphs, bucket=...)    Bucket, power_of_two_bucket, next_power_of_two
    FEATURE_NAMES, NUM_FEATURES            OPCODE_VOCAB, NUM_OPCODES, opcode_id
    while_trip_count, infer_trip_count     TripCount, DEFAULT_TRIP_COUNT
    LoopCosting, flatten_entry, FlatEntry  colocation_groups, COLOCATED_WITH_OPERAND

Module by concept: :mod:`~hlo_go.graph.flatten` (inlining calls),
:mod:`~hlo_go.graph.trip_count` (loop trip counts), :mod:`~hlo_go.graph.costs`
(node costs, trip counts applied), :mod:`~hlo_go.graph.features` (every feature
column), :mod:`~hlo_go.graph.colocation` (device-sharing rules),
:mod:`~hlo_go.graph.vocab` (opcode ids), :mod:`~hlo_go.graph.opgraph` (the type and
its invariants), :mod:`~hlo_go.graph.build` (putting it together),
:mod:`~hlo_go.graph.batching` (padding into jraph buckets).
"""

from hlo_go.graph.batching import Bucket, next_power_of_two, power_of_two_bucket, to_graphs_tuple
from hlo_go.graph.build import build_graph
from hlo_go.graph.colocation import COLOCATED_WITH_OPERAND, colocation_groups
from hlo_go.graph.costs import LoopCosting, max_branch_cost
from hlo_go.graph.features import (
    ASYNC_OPCODES,
    COLLECTIVE_OPCODES,
    DATA_MOVEMENT_OPCODES,
    DTYPE_CLASSES,
    FEATURE_NAMES,
    FUSION_KINDS,
    NUM_FEATURES,
    NodeFacts,
    node_features,
)
from hlo_go.graph.flatten import FlatEntry, flatten_entry
from hlo_go.graph.opgraph import MATRIX_KINDS, OpGraph
from hlo_go.graph.trip_count import (
    DEFAULT_TRIP_COUNT,
    TripCount,
    infer_trip_count,
    while_trip_count,
)
from hlo_go.graph.vocab import (
    NUM_OPCODES,
    OPCODE_VOCAB,
    UNKNOWN_OPCODE,
    canonical_opcode,
    opcode_id,
    opcode_ids,
)

__all__ = [
    "ASYNC_OPCODES",
    "COLLECTIVE_OPCODES",
    "COLOCATED_WITH_OPERAND",
    "DATA_MOVEMENT_OPCODES",
    "DEFAULT_TRIP_COUNT",
    "DTYPE_CLASSES",
    "FEATURE_NAMES",
    "FUSION_KINDS",
    "MATRIX_KINDS",
    "NUM_FEATURES",
    "NUM_OPCODES",
    "OPCODE_VOCAB",
    "UNKNOWN_OPCODE",
    "Bucket",
    "FlatEntry",
    "LoopCosting",
    "NodeFacts",
    "OpGraph",
    "TripCount",
    "build_graph",
    "canonical_opcode",
    "colocation_groups",
    "flatten_entry",
    "infer_trip_count",
    "max_branch_cost",
    "next_power_of_two",
    "node_features",
    "opcode_id",
    "opcode_ids",
    "power_of_two_bucket",
    "to_graphs_tuple",
    "while_trip_count",
]
