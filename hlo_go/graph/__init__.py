"""HloModule → OpGraph (flattened, featurized dataflow graph) → padded jraph.GraphsTuple.

Public names::

    build_graph(module) -> OpGraph        OpGraph (.validate(), .num_nodes, .num_edges, ...)
    to_graphs_tuple(graphs, bucket=...)    Bucket, power_of_two_bucket
    FEATURE_NAMES, NUM_FEATURES            OPCODE_VOCAB, NUM_OPCODES, opcode_id
    vocabulary_signature()                 (what a trained network's inputs mean)
    while_trip_count -> TripCount          colocation_groups(graph)
    timeline_features(graph)               TIMELINE_FEATURE_NAMES (optional policy inputs)

The building blocks (feature and opcode tables, flattening, loop costing) stay importable
from here and from their modules but are not advertised.

Module by concept: :mod:`~hlo_go.graph.flatten` (inlining calls),
:mod:`~hlo_go.graph.trip_count` (loop trip counts), :mod:`~hlo_go.graph.costs`
(node costs, trip counts applied), :mod:`~hlo_go.graph.features` (every feature
column), :mod:`~hlo_go.graph.layout` (per-dimension shape and layout facts, for the
learned kernel cost model), :mod:`~hlo_go.graph.colocation` (device-sharing rules),
:mod:`~hlo_go.graph.timeline` (where each node falls in an unbounded-device schedule),
:mod:`~hlo_go.graph.vocab` (opcode ids), :mod:`~hlo_go.graph.opgraph` (the type and
its invariants), :mod:`~hlo_go.graph.build` (putting it together),
:mod:`~hlo_go.graph.batching` (padding into jraph buckets).
"""

from hlo_go.graph.batching import Bucket, power_of_two_bucket, to_graphs_tuple
from hlo_go.graph.batching import next_power_of_two as next_power_of_two
from hlo_go.graph.build import build_graph
from hlo_go.graph.colocation import COLOCATED_WITH_OPERAND as COLOCATED_WITH_OPERAND
from hlo_go.graph.colocation import colocation_groups
from hlo_go.graph.costs import LoopCosting as LoopCosting
from hlo_go.graph.costs import max_branch_cost as max_branch_cost
from hlo_go.graph.features import ASYNC_OPCODES as ASYNC_OPCODES
from hlo_go.graph.features import COLLECTIVE_OPCODES as COLLECTIVE_OPCODES
from hlo_go.graph.features import DATA_MOVEMENT_OPCODES as DATA_MOVEMENT_OPCODES
from hlo_go.graph.features import DTYPE_CLASSES as DTYPE_CLASSES
from hlo_go.graph.features import FEATURE_NAMES, NUM_FEATURES, vocabulary_signature
from hlo_go.graph.features import FUSION_KINDS as FUSION_KINDS
from hlo_go.graph.features import NodeFacts as NodeFacts
from hlo_go.graph.features import node_features as node_features
from hlo_go.graph.flatten import FlatEntry as FlatEntry
from hlo_go.graph.flatten import flatten_entry as flatten_entry
from hlo_go.graph.layout import LAYOUT_FEATURE_NAMES as LAYOUT_FEATURE_NAMES
from hlo_go.graph.layout import NUM_LAYOUT_FEATURES as NUM_LAYOUT_FEATURES
from hlo_go.graph.opgraph import MATRIX_KINDS as MATRIX_KINDS
from hlo_go.graph.opgraph import OpGraph
from hlo_go.graph.timeline import NUM_TIMELINE_FEATURES, TIMELINE_FEATURE_NAMES, timeline_features
from hlo_go.graph.trip_count import DEFAULT_TRIP_COUNT as DEFAULT_TRIP_COUNT
from hlo_go.graph.trip_count import TripCount, while_trip_count
from hlo_go.graph.trip_count import infer_trip_count as infer_trip_count
from hlo_go.graph.vocab import NUM_OPCODES, OPCODE_VOCAB, opcode_id
from hlo_go.graph.vocab import UNKNOWN_OPCODE as UNKNOWN_OPCODE
from hlo_go.graph.vocab import canonical_opcode as canonical_opcode
from hlo_go.graph.vocab import opcode_ids as opcode_ids

__all__ = [
    "FEATURE_NAMES",
    "NUM_FEATURES",
    "NUM_OPCODES",
    "NUM_TIMELINE_FEATURES",
    "OPCODE_VOCAB",
    "TIMELINE_FEATURE_NAMES",
    "Bucket",
    "OpGraph",
    "TripCount",
    "build_graph",
    "colocation_groups",
    "opcode_id",
    "power_of_two_bucket",
    "timeline_features",
    "to_graphs_tuple",
    "vocabulary_signature",
    "while_trip_count",
]
