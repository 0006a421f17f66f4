"""Per-dimension shape and layout facts of each node: ``OpGraph.layout_features``.

``OpGraph.features`` describes a node by totals (bytes, elements, rank, flops): enough to
place and fuse, not enough to price a kernel on a machine whose speed depends on which
dimension is contiguous and how a matrix product is shaped. These columns add that, for
the learned kernel cost model (:mod:`hlo_go.sim.learned`), from each instruction's output
shape and layout (its first array leaf) and, for matrix products, its operands':

====  ==========================  ===============================================================
  0   log_minor_dim               log1p(size of the minor-most dimension, by the layout)
  1   log_second_minor_dim        log1p(size of the second minor-most dimension; 0 for rank < 2)
  2   log_major_elements          log1p(elements / (minor × second minor))
  3   default_layout              1 if the layout is the default (major-to-minor) or absent
  4   minor_dim_multiple_of_8     1 if the minor-most dimension is a multiple of 8 (a vector)
  5   operands_minor_differ       fraction of the node's array producers whose minor-most
                                  dimension differs in size from the node's (a transpose,
                                  broadcast or reduction across the contiguous dimension)
  6   log_dot_m                   matrix products (``dot``, ``convolution``, XLA:GPU's GEMM
                                  library calls, a fusion holding a dot or convolution):
  7   log_dot_n                   log1p of the rows (M), columns (N), contraction (K)
  8   log_dot_k                   and batch of the product; a convolution's K is its flops per
  9   log_dot_batch               output element / 2, N its output's minor dimension
 10   lhs_contracts_minor         1 if the lhs contracts over its minor-most dimension
 11   rhs_contracts_minor         1 if the rhs contracts over its minor-most dimension
====  ==========================  ===============================================================

A shape without a layout is read with the default one (XLA's for unoptimized modules).
"""

from __future__ import annotations

import math

import numpy as np

from hlo_go.hlo import HloComputation, HloInstruction, HloModule, Shape
from hlo_go.hlo.attributes import DotDims, dot_dims

LAYOUT_FEATURE_NAMES: tuple[str, ...] = (
    "log_minor_dim",
    "log_second_minor_dim",
    "log_major_elements",
    "default_layout",
    "minor_dim_multiple_of_8",
    "operands_minor_differ",
    "log_dot_m",
    "log_dot_n",
    "log_dot_k",
    "log_dot_batch",
    "lhs_contracts_minor",
    "rhs_contracts_minor",
)
NUM_LAYOUT_FEATURES = len(LAYOUT_FEATURE_NAMES)
"""Columns of ``OpGraph.layout_features`` (:data:`LAYOUT_FEATURE_NAMES`)."""

_MATRIX_COLUMNS = slice(6, 12)


def minor_to_major(shape: Shape) -> tuple[int, ...]:
    """The dimensions of an array from fastest- to slowest-varying (the default layout,
    last dimension fastest, where the shape has none)."""
    if shape.layout is not None and len(shape.layout.minor_to_major) == shape.rank:
        return shape.layout.minor_to_major
    return tuple(range(shape.rank - 1, -1, -1))


def minor_dim(shape: Shape) -> int:
    """Size of an array's minor-most dimension (1 for a scalar or non-array)."""
    array = shape.first_array()
    if array is None or array.rank == 0:
        return 1
    return max(1, array.dims[minor_to_major(array)[0]])


def shape_row(shape: Shape) -> np.ndarray:
    """Columns 0-4 of a node's output shape (``float32[5]``)."""
    row = np.zeros(5, np.float32)
    array = shape.first_array()
    if array is None or array.rank == 0:
        row[3] = 1.0
        return row
    order = minor_to_major(array)
    dims = [max(0, d) for d in array.dims]
    minor = dims[order[0]]
    second = dims[order[1]] if array.rank > 1 else 1
    elements = math.prod(dims)
    row[0] = math.log1p(minor)
    row[1] = math.log1p(second) if array.rank > 1 else 0.0
    row[2] = math.log1p(elements / max(1, minor * second))
    row[3] = float(order == tuple(range(array.rank - 1, -1, -1)))
    row[4] = float(minor > 0 and minor % 8 == 0)
    return row


def _contracts_minor(shape: Shape, contracting: tuple[int, ...]) -> float:
    return float(shape.rank > 0 and minor_to_major(shape)[0] in contracting)


def dot_row(dims: DotDims, lhs: Shape, rhs: Shape) -> np.ndarray:
    """Columns 6-11 of a matrix product with these dimension numbers (``float32[6]``): M,
    N, K, batch and which operands contract over their minor-most dimension."""

    def size(shape: Shape, which: tuple[int, ...]) -> int:
        return math.prod(max(1, shape.dims[d]) for d in which if 0 <= d < shape.rank)

    k, batch = size(lhs, dims.lhs_contracting), size(lhs, dims.lhs_batch)
    m = max(1, lhs.num_elements) // max(1, k * batch)
    n = max(1, rhs.num_elements) // max(
        1, size(rhs, dims.rhs_contracting) * size(rhs, dims.rhs_batch)
    )
    return np.array(
        [
            math.log1p(m),
            math.log1p(n),
            math.log1p(k),
            math.log1p(batch),
            _contracts_minor(lhs, dims.lhs_contracting),
            _contracts_minor(rhs, dims.rhs_contracting),
        ],
        np.float32,
    )


def convolution_row(instr: HloInstruction, flops: float) -> np.ndarray:
    """Columns 6-11 of a ``convolution`` (``float32[6]``): N is its output's minor
    dimension, K its flops per output element / 2, M the other output elements."""
    out = instr.shape.first_array()
    elements = max(1, out.num_elements) if out is not None else 1
    n = minor_dim(instr.shape)
    k = max(1.0, flops / (2.0 * elements))
    return np.array(
        [math.log1p(elements / n), math.log1p(n), math.log1p(k), 0.0, 0.0, 0.0], np.float32
    )


def _operand_shape(comp: HloComputation, instr: HloInstruction, i: int) -> Shape | None:
    if i >= len(instr.operands):
        return None
    op = comp.instruction(instr.operands[i]) if instr.operands[i] in comp else None
    return op.shape.first_array() if op is not None else None


def matrix_row(
    module: HloModule, comp: HloComputation, instr: HloInstruction, flops: float
) -> np.ndarray:
    """Columns 6-11 of a node: its own ``dot``, ``convolution`` or GEMM library call
    (XLA:GPU's ``__cublas$...`` custom-calls), or the first ``dot`` or ``convolution`` in a
    fusion's fused computation; zeros for anything else or operands it cannot read."""
    target, where = instr, comp
    if instr.opcode == "fusion":
        called = instr.called_computations
        fused = module.computations.get(called[0]) if called else None
        if fused is None:
            return np.zeros(6, np.float32)
        for inner in fused.instructions:
            if inner.opcode in ("dot", "convolution"):
                target, where = inner, fused
                break
        else:
            return np.zeros(6, np.float32)
    if target.opcode == "convolution":
        return convolution_row(target, flops)
    dims = dot_dims(target)
    if dims is None:
        return np.zeros(6, np.float32)
    lhs, rhs = _operand_shape(where, target, 0), _operand_shape(where, target, 1)
    if lhs is None or rhs is None:
        return np.zeros(6, np.float32)
    return dot_row(dims, lhs, rhs)


def operands_minor_differ(
    minor: np.ndarray, is_array: np.ndarray, senders: np.ndarray, receivers: np.ndarray
) -> np.ndarray:
    """Column 5: per node, the fraction of its array producers (data edges) whose
    minor-most dimension differs in size from the node's own (``float32[N]``)."""
    n = minor.shape[0]
    both = is_array[senders] & is_array[receivers]
    s, r = senders[both], receivers[both]
    differ = np.bincount(r, weights=(minor[s] != minor[r]).astype(np.float64), minlength=n)
    count = np.bincount(r, minlength=n)
    return (differ / np.maximum(count, 1)).astype(np.float32)


def layout_features(
    module: HloModule,
    instructions: list[HloInstruction],
    computations: list[HloComputation],
    flops: np.ndarray,
    senders: np.ndarray,
    receivers: np.ndarray,
) -> np.ndarray:
    """The ``float32[N, NUM_LAYOUT_FEATURES]`` columns of a flattened entry's nodes.

    Args:
      module: the module (a fusion's fused computation is read from it).
      instructions: each node's instruction (``FlatEntry.instructions``).
      computations: the computation each belongs to (``FlatEntry.computations``).
      flops: ``float[N]`` each node's flops (a convolution's K comes from them).
      senders: ``int[E]`` producer of each data edge.
      receivers: ``int[E]`` consumer of each data edge.

    Returns:
      The feature matrix, every value finite.
    """
    n = len(instructions)
    out = np.zeros((n, NUM_LAYOUT_FEATURES), np.float32)
    minor = np.zeros(n, np.int64)  # 0: no array of rank > 0
    rows: dict[int, tuple[np.ndarray, int]] = {}  # by shape object: its row and minor dim
    for i, instr in enumerate(instructions):
        shape = instr.shape
        cached = rows.get(id(shape))
        if cached is None:
            array = shape.first_array()
            ranked = array is not None and array.rank > 0
            cached = rows[id(shape)] = (shape_row(shape), minor_dim(shape) if ranked else 0)
        out[i, :5], minor[i] = cached
        if instr.opcode in ("dot", "convolution", "fusion", "custom-call"):
            out[i, _MATRIX_COLUMNS] = matrix_row(module, computations[i], instr, float(flops[i]))
    out[:, 5] = operands_minor_differ(
        minor, minor > 0, np.asarray(senders, np.int64), np.asarray(receivers, np.int64)
    )
    return out
