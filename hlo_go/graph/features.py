"""Node features of an OpGraph: every column of ``OpGraph.features``, defined here.

:func:`node_features` turns the per-node facts :func:`hlo_go.graph.build_graph`
gathers (a :class:`NodeFacts`) into a ``float32[N, F]`` matrix, vectorized with
numpy. ``log`` below is ``log1p`` (natural log of 1 + x), which keeps zero at zero
and squeezes byte and flop counts spanning 20 orders of magnitude into 0..~50.
Costs are those of :mod:`hlo_go.graph.costs` (``while`` loops × trip count).

Columns, in order (:data:`FEATURE_NAMES`):

====  ==========================  ===============================================================
  0   log_flops                   log(flops)
  1   log_transcendentals         log(transcendentals)
  2   log_bytes_read              log(bytes read from memory)
  3   log_bytes_written           log(bytes written to memory)
  4   log_flops_per_byte          log(flops / max(1, bytes read + bytes written)): arithmetic
                                  intensity, high for compute-bound nodes
  5   log_bytes_out               log(bytes of the output value; a tuple's array leaves summed)
  6   log_elements                log(elements of the output; a tuple's array leaves summed)
  7   rank                        rank of the output (a tuple's first array leaf; 0 if none)
  8   is_tuple                    1 if the output is a tuple
  9   log_tuple_size              log(number of top-level tuple elements; 0 for arrays)
 10   dtype_f32                   one-hot element type of the output (a tuple's first array
 11   dtype_bf16                  leaf): f32, bf16, f16, f64, any integer (s*/u*), pred, or
 12   dtype_f16                   other (complex, fp8, token, a tuple without array leaves)
 13   dtype_f64
 14   dtype_int
 15   dtype_pred
 16   dtype_other
 17   log_num_operands            log(number of operands, repeats included)
 18   log_bytes_in                log(Σ bytes over incoming data edges, one per distinct producer)
 19   log_in_degree               log(number of distinct producers)
 20   log_out_degree              log(number of distinct consumers)
 21   topo_position               position in ``topo_order`` / max(1, N - 1), in [0, 1]
 22   is_root                     1 for the entry computation's root
 23   is_parameter                1 for parameters (all are the entry's: calls are inlined)
 24   is_constant                 1 for constants
 25   is_elementwise              1 for elementwise opcodes (:data:`hlo_go.hlo.ELEMENTWISE_OPCODES`)
 26   is_data_movement            1 for opcodes that only move or view data (:data:`DATA_MOVEMENT_OPCODES`)
 27   is_collective               1 for cross-device communication (:data:`COLLECTIVE_OPCODES`)
 28   is_async                    1 for asynchronous start/update/done halves (:data:`ASYNC_OPCODES`)
 29   is_custom_call              1 for custom-call (library calls such as LAPACK, callbacks)
 30   is_fusion                   1 for fusion
 31   fusion_kloop                one-hot fusion kind (``kind=`` attribute); all 0 for
 32   fusion_kinput               non-fusions and unknown kinds
 33   fusion_koutput
 34   fusion_kcustom
 35   log_fused_instructions      log(instructions in a fusion's fused computation; 0 otherwise)
 36   is_while                    1 for while (a macro node: body × trip count)
 37   log_trip_count              log(trip count) of while nodes (the default where unknown); 0 otherwise
 38   trip_count_unknown          1 for while nodes whose trip count is neither in the backend
                                  config nor inferable from the loop (the default was used)
 39   is_conditional              1 for conditional (a macro node: the most expensive branch)
 40   log_branches                log(number of branches) of conditionals; 0 otherwise
====  ==========================  ===============================================================
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np

from hlo_go.graph.vocab import OPCODE_VOCAB
from hlo_go.hlo import ELEMENTWISE_OPCODES

FEATURE_NAMES: tuple[str, ...] = (
    "log_flops",
    "log_transcendentals",
    "log_bytes_read",
    "log_bytes_written",
    "log_flops_per_byte",
    "log_bytes_out",
    "log_elements",
    "rank",
    "is_tuple",
    "log_tuple_size",
    "dtype_f32",
    "dtype_bf16",
    "dtype_f16",
    "dtype_f64",
    "dtype_int",
    "dtype_pred",
    "dtype_other",
    "log_num_operands",
    "log_bytes_in",
    "log_in_degree",
    "log_out_degree",
    "topo_position",
    "is_root",
    "is_parameter",
    "is_constant",
    "is_elementwise",
    "is_data_movement",
    "is_collective",
    "is_async",
    "is_custom_call",
    "is_fusion",
    "fusion_kloop",
    "fusion_kinput",
    "fusion_koutput",
    "fusion_kcustom",
    "log_fused_instructions",
    "is_while",
    "log_trip_count",
    "trip_count_unknown",
    "is_conditional",
    "log_branches",
)
NUM_FEATURES = len(FEATURE_NAMES)


def vocabulary_signature() -> dict[str, int | str]:
    """What a trained network's inputs mean: the opcode vocabulary and the node features.

    A network's opcode embedding rows and input feature columns are indexed by
    :data:`~hlo_go.graph.OPCODE_VOCAB` and :data:`FEATURE_NAMES`: parameters trained under
    another vocabulary read other opcodes and features, even where the sizes agree.

    Returns:
      ``{"opcodes": hash, "num_opcodes": n, "features": hash, "num_features": f}``, each
      hash the first 16 hex digits of SHA-256 over the names in order.
    """

    def digest(names: tuple[str, ...]) -> str:
        return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]

    return {
        "opcodes": digest(OPCODE_VOCAB),
        "num_opcodes": len(OPCODE_VOCAB),
        "features": digest(FEATURE_NAMES),
        "num_features": NUM_FEATURES,
    }


# Element-type classes of the dtype one-hot, in column order; "other" last.
DTYPE_CLASSES: tuple[str, ...] = ("f32", "bf16", "f16", "f64", "int", "pred", "other")
# Fusion kinds of the fusion one-hot, in column order (code 0 means "not a known kind").
FUSION_KINDS: tuple[str, ...] = ("kLoop", "kInput", "kOutput", "kCustom")

# Opcodes that only move, copy or reinterpret data.
DATA_MOVEMENT_OPCODES: frozenset[str] = frozenset({
    "bitcast", "broadcast", "concatenate", "copy", "copy-done", "copy-start", "dynamic-slice",
    "dynamic-update-slice", "gather", "get-tuple-element", "pad", "reshape", "reverse", "slice",
    "transpose", "tuple",
})  # fmt: skip
# Opcodes that communicate between devices.
COLLECTIVE_OPCODES: frozenset[str] = frozenset({
    "all-gather", "all-gather-done", "all-gather-start", "all-reduce", "all-reduce-done",
    "all-reduce-start", "all-to-all", "collective-broadcast", "collective-permute",
    "collective-permute-done", "collective-permute-start", "collective-reduce",
    "ragged-all-to-all", "recv", "recv-done", "reduce-scatter", "send", "send-done",
})  # fmt: skip
# Halves of asynchronous operations.
ASYNC_OPCODES: frozenset[str] = frozenset({
    "all-gather-done", "all-gather-start", "all-reduce-done", "all-reduce-start", "async-done",
    "async-start", "async-update", "collective-permute-done", "collective-permute-start",
    "copy-done", "copy-start", "recv", "recv-done", "send", "send-done",
})  # fmt: skip


def _table(opcodes: frozenset[str] | set[str]) -> np.ndarray:
    """bool[len(OPCODE_VOCAB)]: which vocabulary ids are in ``opcodes``."""
    return np.array([name in opcodes for name in OPCODE_VOCAB], dtype=bool)


_IS_PARAMETER = _table({"parameter"})
_IS_CONSTANT = _table({"constant"})
_IS_ELEMENTWISE = _table(ELEMENTWISE_OPCODES)
_IS_DATA_MOVEMENT = _table(DATA_MOVEMENT_OPCODES)
_IS_COLLECTIVE = _table(COLLECTIVE_OPCODES)
_IS_ASYNC = _table(ASYNC_OPCODES)
_IS_CUSTOM_CALL = _table({"custom-call"})
_IS_FUSION = _table({"fusion"})
_IS_WHILE = _table({"while"})
_IS_CONDITIONAL = _table({"conditional"})


class NodeFacts(NamedTuple):
    """Per-node facts the features are computed from (``N`` nodes, ``E`` data edges).

    Attributes:
      opcode: ``int32[N]`` vocabulary ids.
      flops: ``float64[N]`` flops (trip counts applied).
      transcendentals: ``float64[N]``.
      bytes_read: ``float64[N]``.
      bytes_written: ``float64[N]``.
      bytes_out: ``int64[N]`` output bytes (array leaves summed).
      elements: ``int64[N]`` output elements (array leaves summed).
      rank: ``int32[N]`` rank of the output's first array leaf.
      tuple_size: ``int32[N]`` top-level tuple elements (0 for non-tuples).
      is_tuple: ``bool[N]``.
      dtype_class: ``int8[N]`` index into :data:`DTYPE_CLASSES`.
      num_operands: ``int32[N]`` operands, repeats included.
      fusion_kind: ``int8[N]`` 1 + index into :data:`FUSION_KINDS`; 0 for none or unknown.
      fused_instructions: ``int32[N]`` size of a fusion's fused computation (0 otherwise).
      trip_count: ``int64[N]`` while trip counts (1 for other nodes).
      trip_count_unknown: ``bool[N]`` while nodes whose count is the default.
      branches: ``int32[N]`` branch computations of conditionals (0 otherwise).
      root: the root's node id.
      senders: ``int32[E]`` data-edge producers.
      receivers: ``int32[E]`` data-edge consumers.
      edge_bytes: ``int64[E]`` bytes per data edge.
      topo_order: ``int32[N]`` a topological order.
    """

    opcode: np.ndarray
    flops: np.ndarray
    transcendentals: np.ndarray
    bytes_read: np.ndarray
    bytes_written: np.ndarray
    bytes_out: np.ndarray
    elements: np.ndarray
    rank: np.ndarray
    tuple_size: np.ndarray
    is_tuple: np.ndarray
    dtype_class: np.ndarray
    num_operands: np.ndarray
    fusion_kind: np.ndarray
    fused_instructions: np.ndarray
    trip_count: np.ndarray
    trip_count_unknown: np.ndarray
    branches: np.ndarray
    root: int
    senders: np.ndarray
    receivers: np.ndarray
    edge_bytes: np.ndarray
    topo_order: np.ndarray


def dtype_class(dtype: str) -> int:
    """Index into :data:`DTYPE_CLASSES` of an HLO element type name.

    Args:
      dtype: e.g. ``"f32"``, ``"s8"``, ``"pred"``, ``"c64"``, ``"token"``.

    Returns:
      0..6: f32, bf16, f16, f64, int (any ``s*``/``u*``), pred, other.
    """
    if dtype in ("f32", "bf16", "f16", "f64", "pred"):
        return DTYPE_CLASSES.index(dtype)
    if dtype[0] in "su" and dtype[1:].isdigit():
        return DTYPE_CLASSES.index("int")
    return len(DTYPE_CLASSES) - 1


def node_features(facts: NodeFacts) -> np.ndarray:
    """The feature matrix: one row per node, one column per :data:`FEATURE_NAMES` entry.

    Args:
      facts: the per-node facts.

    Returns:
      ``float32[N, F]``, every value finite; columns as this module's docstring lists.
    """
    n = facts.opcode.shape[0]
    op = facts.opcode
    log = np.log1p
    in_degree = np.bincount(facts.receivers, minlength=n)
    out_degree = np.bincount(facts.senders, minlength=n)
    bytes_in = np.bincount(
        facts.receivers, weights=facts.edge_bytes.astype(np.float64), minlength=n
    )
    position = np.empty(n, dtype=np.float64)
    position[facts.topo_order] = np.arange(n, dtype=np.float64) / max(1, n - 1)
    is_root = np.zeros(n, dtype=bool)
    if n:
        is_root[facts.root] = True
    accessed = np.maximum(1.0, facts.bytes_read + facts.bytes_written)
    dtype_onehot = facts.dtype_class[:, None] == np.arange(len(DTYPE_CLASSES))[None, :]
    fusion_onehot = facts.fusion_kind[:, None] == np.arange(1, len(FUSION_KINDS) + 1)[None, :]
    is_while = _IS_WHILE[op]
    is_conditional = _IS_CONDITIONAL[op]

    columns: list[np.ndarray] = [
        log(facts.flops),
        log(facts.transcendentals),
        log(facts.bytes_read),
        log(facts.bytes_written),
        log(facts.flops / accessed),
        log(facts.bytes_out.astype(np.float64)),
        log(facts.elements.astype(np.float64)),
        facts.rank,
        facts.is_tuple,
        log(facts.tuple_size.astype(np.float64)),
        *dtype_onehot.T,
        log(facts.num_operands.astype(np.float64)),
        log(bytes_in),
        log(in_degree.astype(np.float64)),
        log(out_degree.astype(np.float64)),
        position,
        is_root,
        _IS_PARAMETER[op],
        _IS_CONSTANT[op],
        _IS_ELEMENTWISE[op],
        _IS_DATA_MOVEMENT[op],
        _IS_COLLECTIVE[op],
        _IS_ASYNC[op],
        _IS_CUSTOM_CALL[op],
        _IS_FUSION[op],
        *fusion_onehot.T,
        log(facts.fused_instructions.astype(np.float64)),
        is_while,
        np.where(is_while, log(facts.trip_count.astype(np.float64)), 0.0),
        is_while & facts.trip_count_unknown,
        is_conditional,
        np.where(is_conditional, log(facts.branches.astype(np.float64)), 0.0),
    ]
    if len(columns) != NUM_FEATURES:  # pragma: no cover - guards edits of this function
        raise AssertionError(f"{len(columns)} feature columns for {NUM_FEATURES} names")
    out = np.empty((n, NUM_FEATURES), dtype=np.float32)
    for j, column in enumerate(columns):
        out[:, j] = column
    return out
