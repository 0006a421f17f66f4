"""Per-instruction cost following XLA's HloCostAnalysis conventions.

``instruction_cost(module, instr)`` gives flops, transcendentals, bytes read and
bytes written for one instruction, counted the way XLA's ``HloCostAnalysis``
(``xla/service/hlo_cost_analysis.cc``) counts them on CPU, so that
``module_cost(module)`` matches ``compiled.cost_analysis()`` (and
``lowered.cost_analysis()`` for unoptimized text). The rules, verified against
jaxlib 0.10.2 opcode by opcode (``tests/test_cost.py``):

* S(shape): array bytes (sub-byte types one byte per element unless ``E(n)``;
  tiling ignored; +4 bytes per dimension for dynamic shapes); a tuple is its
  8-byte pointer table, a token 0. N(shape): elements.
* Default: bytes read = Σ S(operand) (a tuple operand counts its pointer table
  only); bytes written = Σ S over the output's array leaves (no pointer table).
* Elementwise (including compare, select, clamp, convert, bitcast-convert):
  N(out) flops, or N(out) transcendentals for exp, expm1, log, log1p, logistic,
  sqrt, rsqrt, cbrt, tanh, sin, cos, tan, erf, power, atan2. Complex types count
  one flop per element too.
* dot: 2 × N(out) × Π lhs contracting sizes (any dtype). ragged-dot: the same
  with the first ``len(rhs_group_dims)`` result dimensions deleted, as XLA does.
  convolution: 2 × Cin/groups × Cout × batch/batch_groups × Π over spatial
  dimensions of the (kernel tap, output position) pairs that hit a real input
  element (padding and lhs-dilation holes excluded).
* reduce / reduce-window / map / scatter / select-and-scatter: the called
  computation's flops and transcendentals per call × the number of calls (its
  bytes are dropped). reduce: N(operand 0) - N(output 0) calls. reduce-window:
  (window size - 1) × N(out) calls, padding ignored, except XLA's
  "reduce + broadcast of one dimension" special case. sort: n⌈log2 n⌉ flops,
  n = N(operand 0), comparator not counted. rng, rng-bit-generator: one
  transcendental per generated element.
* Free (0 bytes): parameter, constant, get-tuple-element, bitcast, after-all,
  add-dependency, domain, and a transpose that only changes layout. reshape,
  copy and broadcast are never free. tuple writes its pointer table, reads 0.
* slice: 2 × S(out). dynamic-slice: 2 × S(out) + S(first index).
  dynamic-update-slice: 2 × S(update) + S(first index). gather:
  2 × S(out) + S(indices). scatter: 3 × Σ S(updates) + S(indices).
  cholesky, triangular-solve, fft, all-reduce, infeed, outfeed: XLA's formulas.
* fusion: flops and transcendentals of all fused instructions; bytes written
  per output leaf (a dynamic-update-slice at the root writes only its update);
  bytes read per fused parameter from its users (a slice or dynamic-slice reads
  its result, each broadcast or reshape reads the whole parameter, a
  dynamic-update-slice's in-place operand reads nothing, all other users share
  one full read; tuple parameters per leaf through get-tuple-element; nested
  fusions as XLA recurses into them), plus fused constants with more than one
  element. A kCustom fusion holding a gather or scatter costs that instruction.
* while: body + condition, each once, with their bytes (XLA ignores the trip
  count; ``hlo_go.graph`` multiplies by it). conditional: per-quantity maximum
  over branches (bytes: the branch that accesses the most). call: the callee.
  async-start: the wrapped computation. The caller's own bytes are not counted.
* A module's cost is the sum over its entry computation's instructions (dead
  ones included); called computations count only through their callers.

Where hlo-go differs from XLA, on purpose:

* custom-call: XLA reports -1 flops and -1 bytes accessed (unknown), which
  leaks into every total that contains one. We report 0 flops and the default
  bytes (operands read, output leaves written), so totals stay meaningful, except
  for XLA:GPU's GEMM library calls (``__cublas$...``), which count the flops of the
  dot their backend_config describes, as XLA's GPU cost analysis does; a
  module's totals therefore exceed XLA's by 1 flop and (default bytes + 1)
  bytes per custom-call in the entry computation (or reached through call,
  while or async-start).
* XLA accumulates in float32; we sum exact integers in float64, so totals of
  very large modules can differ in the last float32 digits.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from hlo_go.hlo import attributes as attrs
from hlo_go.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.opcodes import ELEMENTWISE_OPCODES
from hlo_go.hlo.shape import Shape
from hlo_go.hlo.verify import verify_module


class Cost(NamedTuple):
    """Work done by an instruction (or a sum of instructions).

    Attributes:
      flops: floating point (and integer) operations, XLA's "flops".
      transcendentals: transcendental operations, XLA's "transcendentals".
      bytes_read: bytes read from memory.
      bytes_written: bytes written to memory.
    """

    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0

    @property
    def bytes_accessed(self) -> float:
        """bytes_read + bytes_written (XLA's "bytes accessed")."""
        return self.bytes_read + self.bytes_written

    def __add__(self, other: object) -> Cost:
        """Quantity-by-quantity sum (not tuple concatenation)."""
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(*(a + b for a, b in zip(self, other, strict=True)))

    def scaled(self, factor: float) -> Cost:
        """Every quantity multiplied by ``factor``."""
        return Cost(*(a * factor for a in self))

    def compute_only(self) -> Cost:
        """Just flops and transcendentals (bytes dropped), as called computations count."""
        return Cost(self.flops, self.transcendentals, 0.0, 0.0)


ZERO = Cost()

# Instructions XLA gives no cost at all.
_FREE: frozenset[str] = frozenset({
    "parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency",
    "domain",
})  # fmt: skip

# XLA's HandleElementwiseOp counts these as transcendentals, everything else as flops.
XLA_TRANSCENDENTAL_OPCODES: frozenset[str] = frozenset({
    "atan2", "cbrt", "cosine", "erf", "exponential", "exponential-minus-one", "log",
    "log-plus-one", "logistic", "power", "rsqrt", "sine", "sqrt", "tan", "tanh",
})  # fmt: skip

# Opcodes XLA costs with HandleElementwiseOp (one op per output element).
XLA_ELEMENTWISE_OPCODES: frozenset[str] = ELEMENTWISE_OPCODES | {"bitcast-convert"}


def _size(shape: Shape) -> int:
    """S(shape): XLA's CPU shape size (a tuple is its pointer table)."""
    return shape.byte_size()


def _leaf_bytes(shape: Shape) -> int:
    """Σ S over the array leaves of a (possibly nested) tuple."""
    return sum(s.byte_size() for s in shape.leaves())


def _elements(shape: Shape) -> int:
    return shape.num_elements


def _first_array(shape: Shape) -> Shape:
    """The shape itself, or a tuple's first element (XLA's ``tuple_shapes(0)``)."""
    return shape.tuple_shapes[0] if shape.is_tuple and shape.tuple_shapes else shape


def attrs_computation(value: str) -> str:
    """The computation name in an attribute value such as ``%add``."""
    return value.strip().lstrip("%")


class _Costing:
    """Cost of the instructions of one module; computation costs are memoized."""

    def __init__(self, module: HloModule) -> None:
        # Not the module itself: the cache entry must not keep its module alive.
        self.computations: Mapping[str, HloComputation] = module.computations
        self.computation_costs: dict[str, Cost] = {}
        self.users_by_computation: dict[str, dict[str, list[HloInstruction]]] = {}

    def operand_shapes(self, comp: HloComputation, instr: HloInstruction) -> list[Shape]:
        return [comp.instruction(o).shape for o in instr.operands]

    def operand_shape(self, comp: HloComputation, instr: HloInstruction, index: int) -> Shape:
        return comp.instruction(instr.operands[index]).shape

    def users(self, comp: HloComputation, name: str) -> list[HloInstruction]:
        """Users of ``name`` in ``comp``, each once, in text order (as XLA's ``users()``)."""
        table = self.users_by_computation.get(comp.name)
        if table is None:
            table = {}
            for instr in comp.instructions:
                for operand in dict.fromkeys(instr.operands):
                    table.setdefault(operand, []).append(instr)
            self.users_by_computation[comp.name] = table
        return table.get(name, [])

    def computation(self, name: str) -> Cost:
        """Sum of the instruction costs of a computation (bytes included)."""
        cost = self.computation_costs.get(name)
        if cost is None:
            comp = self.computations[name]
            cost = ZERO
            for instr in comp.instructions:
                cost = cost + self.instruction(comp, instr)
            self.computation_costs[name] = cost
        return cost

    def per_call(self, instr: HloInstruction, key: str = "to_apply") -> Cost:
        """Flops and transcendentals of one call of the computation named by ``key``."""
        value = instr.attributes.get(key)
        if value is None:
            return ZERO
        return self.computation(attrs_computation(value)).compute_only()

    def default_bytes(self, comp: HloComputation, instr: HloInstruction) -> Cost:
        read = sum(_size(s) for s in self.operand_shapes(comp, instr))
        return Cost(0.0, 0.0, float(read), float(_leaf_bytes(instr.shape)))

    def instruction(self, comp: HloComputation, instr: HloInstruction) -> Cost:
        op = instr.opcode
        if op in _FREE:
            return ZERO
        handler = _HANDLERS.get(op)
        if handler is not None:
            return handler(self, comp, instr)
        base = self.default_bytes(comp, instr)
        if op in XLA_ELEMENTWISE_OPCODES:
            n = float(_elements(instr.shape))
            if op in XLA_TRANSCENDENTAL_OPCODES:
                return base._replace(transcendentals=n)
            return base._replace(flops=n)
        return base


_Handler = Callable[[_Costing, HloComputation, HloInstruction], Cost]


# -- dense math ---------------------------------------------------------------


def _dot_flops(lhs: Shape, result_elements: int, contracting: Iterable[int]) -> float:
    k = math.prod(lhs.dims[d] for d in contracting)
    return 2.0 * result_elements * k


def _dot(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    lhs = c.operand_shape(comp, instr, 0)
    contracting = attrs.int_list(instr.attributes.get("lhs_contracting_dims"))
    flops = _dot_flops(lhs, _elements(instr.shape), contracting)
    return c.default_bytes(comp, instr)._replace(flops=flops)


def _ragged_dot(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    lhs = c.operand_shape(comp, instr, 0)
    contracting = attrs.int_list(instr.attributes.get("lhs_contracting_dims"))
    dims = list(instr.shape.dims)
    # XLA deletes dimension i of the shrinking result for i in range(#group dims).
    for i in range(len(attrs.int_list(instr.attributes.get("rhs_group_dims")))):
        del dims[i]
    flops = _dot_flops(lhs, math.prod(dims), contracting)
    return c.default_bytes(comp, instr)._replace(flops=flops)


def _valid_pairs(dim: attrs.WindowDim, in_size: int, out_size: int) -> int:
    """Kernel-tap × output-position pairs of one conv dimension that read a real input."""
    total = 0
    if dim.lhs_dilate == 1:
        for k in range(dim.size):
            offset = k * dim.rhs_dilate - dim.pad_low  # input index = o * stride + offset
            if in_size - 1 - offset < 0:
                continue
            lo = max(0, -(offset // dim.stride))  # first o with o * stride + offset >= 0
            hi = min(out_size - 1, (in_size - 1 - offset) // dim.stride)
            total += max(0, hi - lo + 1)
        return total
    limit = (in_size - 1) * dim.lhs_dilate
    for k in range(dim.size):
        offset = k * dim.rhs_dilate - dim.pad_low
        for o in range(out_size):
            u = o * dim.stride + offset
            if 0 <= u <= limit and u % dim.lhs_dilate == 0:
                total += 1
    return total


def _convolution(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    labels = instr.attributes.get("dim_labels")
    if labels is None:
        return c.default_bytes(comp, instr)
    lhs = c.operand_shape(comp, instr, 0)
    out = _first_array(instr.shape)
    dims = attrs.dim_labels(labels)
    window = attrs.window(instr.attributes.get("window"))
    groups = attrs.int_attr(instr.attributes.get("feature_group_count"), 1)
    batch_groups = attrs.int_attr(instr.attributes.get("batch_group_count"), 1)
    valid = 1
    for i, w in enumerate(window):
        valid *= _valid_pairs(w, lhs.dims[dims.lhs_spatial[i]], out.dims[dims.out_spatial[i]])
    flops = (
        2.0
        * (lhs.dims[dims.lhs_feature] // groups)
        * out.dims[dims.out_feature]
        * (lhs.dims[dims.lhs_batch] // batch_groups)
        * valid
    )
    return c.default_bytes(comp, instr)._replace(flops=flops)


def _fft(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    lengths = attrs.int_list(instr.attributes.get("fft_length"))
    operand = _first_array(c.operand_shape(comp, instr, 0))
    log_product = math.prod(n.bit_length() - 1 for n in lengths)  # floor(log2 n)
    return c.default_bytes(comp, instr)._replace(flops=8.0 * log_product * _elements(operand))


def _cholesky(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    a = c.operand_shape(comp, instr, 0)
    half = _size(a) / 2
    return Cost(float(a.dims[-1] * _elements(a) // 3), 0.0, half, half)


def _triangular_solve(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    a, b = c.operand_shapes(comp, instr)
    read = _size(a) / 2 + _size(b)
    return Cost(float(2 * a.dims[-1] * _elements(b)), 0.0, read, float(_size(instr.shape)))


# -- ops with a called scalar computation --------------------------------------


def _reduce(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    operand = c.operand_shape(comp, instr, 0)
    calls = _elements(operand) - _elements(_first_array(instr.shape))
    return c.default_bytes(comp, instr) + c.per_call(instr).scaled(calls)


def _reduce_window(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = _first_array(instr.shape)
    window = attrs.window(instr.attributes.get("window"))
    calls = (math.prod(w.size for w in window) - 1) * _elements(out)
    reducing = [i for i, w in enumerate(window) if w.size != 1]
    padded = [i for i, w in enumerate(window) if w.pad_low or w.pad_high]
    # XLA's special case: a reduce of one dimension broadcast back over it.
    if len(reducing) == 1 and padded == reducing and not instr.shape.is_tuple:
        w = window[reducing[0]]
        out_dim = out.dims[reducing[0]]
        if w.pad_low == w.pad_high == out_dim - 1 and w.size == 2 * w.pad_low + 1:
            calls = _elements(out) // out_dim + out_dim - 1
    return c.default_bytes(comp, instr) + c.per_call(instr).scaled(calls)


def window_reads(instr: HloInstruction, operand: Shape) -> float:
    """How many times a ``reduce-window`` reads each element of its first operand.

    The (window tap, output position) pairs that hit a real input element (padding and
    base-dilation holes read nothing), divided by the operand's elements: about
    ``Π size / Π stride`` away from the edges, 9 for a 3×3 window at stride 1. A
    producer fused into the reduce-window is computed once per read by XLA's loop
    emitter.

    Args:
      instr: a ``reduce-window`` (of one or more operands; the first is counted).
      operand: the shape of its first operand.

    Returns:
      The reads per operand element; 1.0 for an empty operand or a missing window.
    """
    out = _first_array(instr.shape)
    window = attrs.window(instr.attributes.get("window"))
    n = _elements(operand)
    if n == 0 or len(window) != len(operand.dims) or len(out.dims) != len(window):
        return 1.0
    pairs = 1
    for w, in_size, out_size in zip(window, operand.dims, out.dims, strict=True):
        pairs *= _valid_pairs(w, in_size, out_size)
    return pairs / n


def _map(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return c.default_bytes(comp, instr) + c.per_call(instr).scaled(_elements(instr.shape))


def _select_and_scatter(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = _elements(c.operand_shape(comp, instr, 1))
    window = attrs.window(instr.attributes.get("window"))
    selects = n * (math.prod(w.size for w in window) - 1)
    select = c.per_call(instr, "select").scaled(selects)
    return c.default_bytes(comp, instr) + select + c.per_call(instr, "scatter").scaled(n)


def _scatter(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    shapes = c.operand_shapes(comp, instr)
    n = (len(shapes) - 1) // 2
    updates = shapes[n + 1 :]
    update_bytes = sum(_size(s) for s in updates)
    cost = Cost(0.0, 0.0, float(2 * update_bytes + _size(shapes[n])), float(update_bytes))
    return cost + c.per_call(instr).scaled(_elements(updates[0]))


def _sort(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = _elements(c.operand_shape(comp, instr, 0))
    flops = n * (n - 1).bit_length() if n > 1 else 0  # n * ceil(log2 n)
    return c.default_bytes(comp, instr)._replace(flops=float(flops))


# -- data movement -----------------------------------------------------------


def _gather(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = _size(instr.shape)
    indices = _size(c.operand_shape(comp, instr, 1))
    return Cost(0.0, 0.0, float(out + indices), float(out))


def _slice(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = float(_size(instr.shape))
    return Cost(0.0, 0.0, out, out)


def _dynamic_slice(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = _size(instr.shape)
    index = _size(c.operand_shape(comp, instr, 1)) if len(instr.operands) > 1 else 0
    return Cost(0.0, 0.0, float(out + index), float(out))


def _dynamic_update_slice(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    update = _size(c.operand_shape(comp, instr, 1))
    index = _size(c.operand_shape(comp, instr, 2)) if len(instr.operands) > 2 else 0
    return Cost(0.0, 0.0, float(update + index), float(update))


def _minor_to_major(shape: Shape) -> tuple[int, ...]:
    if shape.layout is not None:
        return shape.layout.minor_to_major
    return tuple(range(shape.rank - 1, -1, -1))


def _is_layout_bitcast(operand: Shape, out: Shape, perm: tuple[int, ...]) -> bool:
    """Whether a transpose by ``perm`` leaves the bytes in memory unchanged."""
    if len(perm) != operand.rank:
        return False
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    in_mtm, out_mtm = _minor_to_major(operand), _minor_to_major(out)
    if len(in_mtm) != len(perm) or len(out_mtm) != len(perm):
        return False
    return all(out_mtm[j] == inverse[in_mtm[j]] for j in range(len(perm)))


def _transpose(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    operand = c.operand_shape(comp, instr, 0)
    perm = attrs.int_list(instr.attributes.get("dimensions"))
    if _is_layout_bitcast(operand, instr.shape, perm):
        return ZERO
    return c.default_bytes(comp, instr)


def _tuple(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return Cost(0.0, 0.0, 0.0, float(8 * len(instr.operands)))


def _infeed(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return Cost(0.0, 0.0, 0.0, float(_leaf_bytes(instr.shape)))


def _outfeed(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    read = sum(_leaf_bytes(s) for s in c.operand_shapes(comp, instr))
    return Cost(0.0, 0.0, float(read), 0.0)


# -- other opcodes with their own rule ----------------------------------------


def _rng(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = sum(_elements(s) for s in instr.shape.leaves())
    return c.default_bytes(comp, instr)._replace(transcendentals=float(n))


def _all_reduce(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = sum(_elements(s) for s in instr.shape.leaves())
    return c.default_bytes(comp, instr)._replace(flops=float(n))


def _custom_call(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    # Deliberate difference: XLA says -1 flops and -1 bytes (unknown).
    cost = c.default_bytes(comp, instr)
    dims = attrs.dot_dims(instr)  # an XLA:GPU GEMM library call: the dot it computes
    if dims is None or not instr.operands:
        return cost
    lhs = c.operand_shape(comp, instr, 0)
    result = instr.shape.first_array()
    if result is None or any(d >= lhs.rank for d in dims.lhs_contracting):
        return cost
    return cost._replace(flops=_dot_flops(lhs, _elements(result), dims.lhs_contracting))


# -- control flow ----------------------------------------------------------------


def _while(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    body = c.computation(attrs_computation(instr.attributes["body"]))
    return body + c.computation(attrs_computation(instr.attributes["condition"]))


def _conditional(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    costs = [c.computation(b) for b in instr.called_computations]
    if not costs:
        return ZERO
    # XLA takes the maximum of each property; "bytes accessed" is one property.
    most_bytes = max(costs, key=lambda cost: cost.bytes_accessed)
    return Cost(
        max(cost.flops for cost in costs),
        max(cost.transcendentals for cost in costs),
        most_bytes.bytes_read,
        most_bytes.bytes_written,
    )


def _call(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    value = instr.attributes.get("to_apply")
    if value is None:
        return sum((c.computation(name) for name in instr.called_computations), ZERO)
    return c.computation(attrs_computation(value))


def _async_start(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    called = instr.called_computations
    return c.computation(called[0]) if called else c.default_bytes(comp, instr)


# -- fusion ----------------------------------------------------------------------


def _fusion(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    fused = c.computations[attrs_computation(instr.attributes["calls"])]
    if instr.attributes.get("kind") == "kCustom":
        for inner in fused.instructions:
            if inner.opcode in ("gather", "scatter"):
                return c.instruction(fused, inner)
    compute = c.computation(fused.name).compute_only()
    read = 0.0
    for param in fused.parameters:
        read += _fused_parameter_read(c, fused, param)
    constants = sum(
        _size(inner.shape)
        for inner in fused.instructions
        if inner.opcode == "constant" and _elements(inner.shape) > 1
    )
    written = _fused_written(fused, instr.shape)
    return compute + Cost(0.0, 0.0, read + constants, float(written))


def _fused_parameter_read(c: _Costing, fused: HloComputation, param: HloInstruction) -> float:
    """Bytes a fusion reads of one fused parameter (XLA: FusionProcessOperandBytesRead)."""
    if not param.shape.is_tuple:
        return _fused_read(c, fused, param)
    total = 0.0
    for path in _leaf_paths(param.shape):
        value = param
        for index in path:
            for user in c.users(fused, value.name):
                if (
                    user.opcode == "get-tuple-element"
                    and attrs.int_attr(user.attributes.get("index"), -1) == index
                ):
                    value = user
                    break
        total += _fused_read(c, fused, value)
    return total


def _leaf_paths(shape: Shape, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Shape indices of the array leaves of a tuple shape."""
    if not shape.is_tuple:
        return [prefix]
    paths: list[tuple[int, ...]] = []
    for i, element in enumerate(shape.tuple_shapes):
        paths.extend(_leaf_paths(element, (*prefix, i)))
    return paths


def _fused_read(c: _Costing, fused: HloComputation, value: HloInstruction) -> float:
    """Bytes read of a fused parameter or tuple element (XLA: FusionParameterReadBytes)."""
    full = float(_size(value.shape))
    total = 0.0
    seen_shared = False  # users that can share one read of the whole value

    def shared(size: float) -> float:
        nonlocal seen_shared
        if seen_shared:
            return 0.0
        seen_shared = True
        return size

    for user in c.users(fused, value.name):
        op = user.opcode
        if op == "fusion":
            total += _nested_fusion_read(c, fused, value, user)
        elif op == "slice":
            total += _size(user.shape)
        elif op == "dynamic-slice":
            total += _size(user.shape) if user.operands[0] == value.name else shared(full)
        elif op == "dynamic-update-slice":
            total += 0.0 if user.operands[0] == value.name else shared(full)
        elif op in ("broadcast", "reshape"):
            total += full
        else:
            total += shared(full)
    return total


def _nested_fusion_read(
    c: _Costing, fused: HloComputation, value: HloInstruction, nested: HloInstruction
) -> float:
    """Bytes read of ``value`` through a fusion nested in ``fused``, as XLA recurses."""
    inner = c.computations[attrs_computation(nested.attributes["calls"])]
    params = inner.parameters
    root = inner.root
    total = 0.0
    for idx, operand in enumerate(nested.operands):
        if operand != value.name or idx >= len(params):
            continue
        param = params[idx]
        simple = not root.operands or root.operands[0] == param.name
        seen_shared = False
        for user in c.users(fused, nested.name):
            op = user.opcode
            reads_operand = bool(user.operands) and user.operands[0] == nested.name
            if simple and (op == "slice" or (op == "dynamic-slice" and reads_operand)):
                total += _size(user.shape)
            elif seen_shared or (simple and op == "dynamic-update-slice" and reads_operand):
                continue
            else:
                seen_shared = True
                simple_index = simple and op in ("dynamic-slice", "dynamic-update-slice")
                total += _size(nested.shape) if simple_index else _fused_read(c, inner, param)
    return total


def _fused_written(fused: HloComputation, shape: Shape) -> int:
    """Bytes a fusion writes: its output leaves (XLA: FusionProcessOutputBytesAccessed)."""
    root = fused.root
    total = 0
    for path in _leaf_paths(shape):
        leaf = shape
        for i in path:
            leaf = leaf.tuple_shapes[i]
        if not leaf.is_array:
            continue
        producer = root
        if len(path) == 1 and root.opcode == "tuple":
            producer = fused.instruction(root.operands[path[0]])
        if producer.opcode == "dynamic-update-slice":
            total += _size(fused.instruction(producer.operands[1]).shape)
        else:
            total += _size(leaf)
    return total


_HANDLERS: dict[str, _Handler] = {
    "dot": _dot,
    "ragged-dot": _ragged_dot,
    "convolution": _convolution,
    "fft": _fft,
    "cholesky": _cholesky,
    "triangular-solve": _triangular_solve,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "map": _map,
    "select-and-scatter": _select_and_scatter,
    "scatter": _scatter,
    "sort": _sort,
    "gather": _gather,
    "slice": _slice,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "transpose": _transpose,
    "tuple": _tuple,
    "infeed": _infeed,
    "outfeed": _outfeed,
    "rng": _rng,
    "rng-bit-generator": _rng,
    "all-reduce": _all_reduce,
    "all-reduce-start": _all_reduce,
    "custom-call": _custom_call,
    "while": _while,
    "conditional": _conditional,
    "call": _call,
    "async-start": _async_start,
    "fusion": _fusion,
}


_COSTINGS: dict[int, tuple[weakref.ref[HloModule], _Costing]] = {}


def _costing(module: HloModule) -> _Costing:
    """The memoizing costing of ``module`` (kept while the module lives)."""
    key = id(module)
    entry = _COSTINGS.get(key)
    if entry is not None and entry[0]() is module:
        return entry[1]
    verify_module(module)  # malformed shapes or dimension numbers: a named error, not IndexError
    costing = _Costing(module)
    table = _COSTINGS  # bound here: module globals may be gone when this runs at exit

    def forget(ref: weakref.ref[HloModule]) -> None:
        current = table.get(key)
        if current is not None and current[0] is ref:
            del table[key]

    table[key] = (weakref.ref(module, forget), costing)
    return costing


def _find_computation(module: HloModule, instr: HloInstruction) -> HloComputation:
    for comp in module.computations.values():
        if instr.name in comp and comp.instruction(instr.name) is instr:
            return comp
    for comp in module.computations.values():
        if instr.name in comp and comp.instruction(instr.name) == instr:
            return comp
    raise ValueError(f"instruction {instr.name!r} is not in module {module.name!r}")


def instruction_cost(
    module: HloModule, instr: HloInstruction, computation: HloComputation | None = None
) -> Cost:
    """Cost of one instruction of ``module``, by XLA's HloCostAnalysis rules.

    Args:
      module: the module holding ``instr`` (called computations are looked up in it).
      instr: the instruction.
      computation: the computation holding ``instr``, if known (saves a search).

    Returns:
      A :class:`Cost`. Instructions that call computations (fusion, while, ...)
      include their callees' cost as described in this module's docstring.

    Raises:
      ValueError: ``instr`` is not in ``module`` (only when ``computation`` is None).
      HloVerifyError: ``module`` is not valid HLO (:func:`hlo_go.hlo.verify_module`).
    """
    comp = computation if computation is not None else _find_computation(module, instr)
    return _costing(module).instruction(comp, instr)


def computation_cost(module: HloModule, computation: HloComputation | str) -> Cost:
    """Sum of the costs of a computation's instructions.

    Args:
      module: the module holding the computation.
      computation: the computation, or its name.

    Returns:
      The :class:`Cost` of running the computation once (its callees through their callers).
    """
    name = computation if isinstance(computation, str) else computation.name
    return _costing(module).computation(name)


def module_cost(module: HloModule) -> Cost:
    """Module totals as XLA counts them.

    Args:
      module: a parsed module.

    Returns:
      The sum over the entry computation's instructions; called computations
      count through their callers (``while`` bodies once).
    """
    return computation_cost(module, module.entry_name)
