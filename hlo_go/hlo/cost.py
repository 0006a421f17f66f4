"""Per-instruction cost following XLA's HloCostAnalysis conventions.

``instruction_cost(module, instr)`` gives flops, transcendentals, bytes read and
bytes written for one instruction, counted the way XLA's ``HloCostAnalysis``
(``xla/service/hlo_cost_analysis.cc``) counts them on CPU, so that
``module_cost(module)`` matches ``compiled.cost_analysis()``. The rules, verified
against jaxlib 0.10.2 opcode by opcode:

* S(shape): array bytes (sub-byte types one byte per element unless ``E(n)``;
  +4 bytes per dimension for dynamic shapes); a tuple is its 8-byte pointer table.
* Default: bytes read = Σ S(operand); bytes written = sum over the output's array leaves.
* Elementwise: one flop per output element, or one transcendental for exp, log,
  tanh, ... (``TRANSCENDENTAL_OPCODES``).
* dot: 2 × N(out) × Π contracting sizes. convolution: 2 × Cin/groups × Cout ×
  batch/batch_groups × Π (kernel tap, output position) pairs that hit real input.
* reduce / reduce-window / map / scatter / select-and-scatter: the called
  computation's per-call cost × the number of calls. sort: n⌈log2 n⌉.
* Free: parameter, constant, get-tuple-element, bitcast, after-all, add-dependency,
  domain, and a transpose that only changes layout. tuple writes its pointer table.
* slice / dynamic-slice / dynamic-update-slice / gather / scatter read and write
  only the part they touch.
* fusion: flops of all fused instructions; bytes from how each fused parameter
  is used (a slice reads only its slice, ...), plus non-scalar fused constants.
* while: body + condition once (XLA ignores the trip count; hlo_go.graph
  multiplies by it). conditional: the most expensive branch. call: the callee.

Where hlo-go differs from XLA, on purpose:

* custom-call: XLA reports -1 flops and -1 bytes (unknown). We report 0 flops
  and the default bytes (operands read, output written), so a module's totals
  stay meaningful; modules with custom-calls differ from XLA by those bytes.
* A fused parameter used by a nested fusion is counted as one full read (XLA
  recurses; nested fusions do not occur in CPU or GPU output we have seen).
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

from hlo_go.hlo import attributes as attrs
from hlo_go.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.opcodes import ELEMENTWISE_OPCODES, TRANSCENDENTAL_OPCODES
from hlo_go.hlo.shape import Shape


class Cost(NamedTuple):
    """Work done by an instruction (or a sum of instructions)."""

    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0

    @property
    def bytes_accessed(self) -> float:
        """bytes_read + bytes_written (XLA's "bytes accessed")."""
        return self.bytes_read + self.bytes_written

    def __add__(self, other: object) -> Cost:  # type: ignore[override]
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(*(a + b for a, b in zip(self, other, strict=True)))

    def scaled(self, factor: float) -> Cost:
        return Cost(*(a * factor for a in self))

    def compute_only(self) -> Cost:
        """Just flops and transcendentals (bytes dropped), as called computations count."""
        return Cost(self.flops, self.transcendentals, 0.0, 0.0)


ZERO = Cost()

_FREE = frozenset({"parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency", "domain"})
_ALL_REDUCE = frozenset({"all-reduce", "all-reduce-start"})


def _size(shape: Shape) -> int:
    return shape.byte_size()


def _leaf_bytes(shape: Shape) -> int:
    return sum(s.byte_size() for s in shape.leaves())


def _elements(shape: Shape) -> int:
    return shape.num_elements


class _Costing:
    """Cost of instructions of one module; computation costs are memoized."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.shapes: dict[tuple[str, str], Shape] = {}
        self.computation_costs: dict[str, Cost] = {}

    def operand_shapes(self, comp: HloComputation, instr: HloInstruction) -> list[Shape]:
        return [comp.instruction(o).shape for o in instr.operands]

    def computation(self, name: str) -> Cost:
        """Sum of the instruction costs of a called computation."""
        cost = self.computation_costs.get(name)
        if cost is None:
            comp = self.module.computations[name]
            cost = ZERO
            for instr in comp.instructions:
                cost = cost + self.instruction(comp, instr)
            self.computation_costs[name] = cost
        return cost

    def per_call(self, instr: HloInstruction, key: str = "to_apply") -> Cost:
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
        if op in ELEMENTWISE_OPCODES:
            n = float(_elements(instr.shape))
            if op in TRANSCENDENTAL_OPCODES:
                return base._replace(transcendentals=n)
            return base._replace(flops=n)
        return base


def attrs_computation(value: str) -> str:
    return value.strip().lstrip("%")


# -- handlers ---------------------------------------------------------------


def _dot(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    lhs = comp.instruction(instr.operands[0]).shape
    contracting = attrs.int_list(instr.attributes.get("lhs_contracting_dims"))
    k = math.prod(lhs.dims[d] for d in contracting)
    return c.default_bytes(comp, instr)._replace(flops=2.0 * _elements(instr.shape) * k)


def _valid_pairs(dim: attrs.WindowDim, in_size: int, out_size: int) -> int:
    """Kernel-tap × output-position pairs that read a real input element."""
    if dim.lhs_dilate == 1:
        total = 0
        for k in range(dim.size):
            offset = k * dim.rhs_dilate - dim.pad_low  # input index = o * stride + offset
            lo = max(0, -(offset // dim.stride))  # first o with o * stride + offset >= 0
            if in_size - 1 - offset < 0:
                continue
            hi = min(out_size - 1, (in_size - 1 - offset) // dim.stride)
            total += max(0, hi - lo + 1)
        return total
    limit = (in_size - 1) * dim.lhs_dilate
    total = 0
    for k in range(dim.size):
        offset = k * dim.rhs_dilate - dim.pad_low
        for o in range(out_size):
            u = o * dim.stride + offset
            if 0 <= u <= limit and u % dim.lhs_dilate == 0:
                total += 1
    return total


def _convolution(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    lhs = comp.instruction(instr.operands[0]).shape
    out = instr.shape.leaves()[0]
    labels = instr.attributes.get("dim_labels")
    if labels is None:
        return c.default_bytes(comp, instr)
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


def _reduce(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    operand = comp.instruction(instr.operands[0]).shape
    out = instr.shape.leaves()[0]
    calls = _elements(operand) - _elements(out)
    return c.default_bytes(comp, instr) + c.per_call(instr).scaled(calls)


def _reduce_window(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = instr.shape.leaves()[0]
    window = attrs.window(instr.attributes.get("window"))
    window_size = math.prod(w.size for w in window)
    calls = (window_size - 1) * _elements(out)
    non_trivial = [i for i, w in enumerate(window) if w.size != 1]
    padded = [i for i, w in enumerate(window) if w.pad_low or w.pad_high]
    if len(non_trivial) == 1 and padded == non_trivial:
        w = window[non_trivial[0]]
        out_dim = out.dims[non_trivial[0]]
        if w.pad_low == w.pad_high == out_dim - 1 and w.size == 2 * w.pad_low + 1:
            calls = _elements(out) // out_dim + out_dim - 1
    return c.default_bytes(comp, instr) + c.per_call(instr).scaled(calls)


def _map(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return c.default_bytes(comp, instr) + c.per_call(instr).scaled(_elements(instr.shape))


def _scatter(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    shapes = c.operand_shapes(comp, instr)
    n = (len(shapes) - 1) // 2
    updates = shapes[n + 1 :]
    update_bytes = sum(_size(s) for s in updates)
    cost = Cost(0.0, 0.0, float(2 * update_bytes + _size(shapes[n])), float(update_bytes))
    return cost + c.per_call(instr).scaled(_elements(updates[0]))


def _gather(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    indices = comp.instruction(instr.operands[1]).shape
    out = _size(instr.shape)
    return Cost(0.0, 0.0, float(out + _size(indices)), float(out))


def _select_and_scatter(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    source = comp.instruction(instr.operands[1]).shape
    window = attrs.window(instr.attributes.get("window"))
    n = _elements(source)
    select = c.per_call(instr, "select").scaled(n * (math.prod(w.size for w in window) - 1))
    return c.default_bytes(comp, instr) + select + c.per_call(instr, "scatter").scaled(n)


def _sort(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = _elements(comp.instruction(instr.operands[0]).shape)
    flops = n * math.ceil(math.log2(n)) if n > 1 else 0
    return c.default_bytes(comp, instr)._replace(flops=float(flops))


def _slice(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = float(_size(instr.shape))
    return Cost(0.0, 0.0, out, out)


def _dynamic_slice(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    out = _size(instr.shape)
    index = _size(comp.instruction(instr.operands[1]).shape) if len(instr.operands) > 1 else 0
    return Cost(0.0, 0.0, float(out + index), float(out))


def _dynamic_update_slice(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    update = _size(comp.instruction(instr.operands[1]).shape)
    index = _size(comp.instruction(instr.operands[2]).shape) if len(instr.operands) > 2 else 0
    return Cost(0.0, 0.0, float(update + index), float(update))


def _transpose(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    operand = comp.instruction(instr.operands[0]).shape
    perm = attrs.int_list(instr.attributes.get("dimensions"))
    if _is_layout_bitcast(operand, instr.shape, perm):
        return ZERO
    return c.default_bytes(comp, instr)


def _default_minor_to_major(shape: Shape) -> tuple[int, ...]:
    if shape.layout is not None:
        return shape.layout.minor_to_major
    return tuple(range(shape.rank - 1, -1, -1))


def _is_layout_bitcast(operand: Shape, out: Shape, perm: tuple[int, ...]) -> bool:
    if len(perm) != operand.rank:
        return False
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    in_mtm, out_mtm = _default_minor_to_major(operand), _default_minor_to_major(out)
    return all(out_mtm[j] == inverse[in_mtm[j]] for j in range(len(perm)))


def _tuple(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return Cost(0.0, 0.0, 0.0, float(8 * len(instr.operands)))


def _rng(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return c.default_bytes(comp, instr)._replace(transcendentals=float(_elements(instr.shape)))


def _rng_bit_generator(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = sum(_elements(s) for s in instr.shape.leaves())
    return c.default_bytes(comp, instr)._replace(transcendentals=float(n))


def _all_reduce(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    n = sum(_elements(s) for s in instr.shape.leaves())
    return c.default_bytes(comp, instr)._replace(flops=float(n))


def _cholesky(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    a = comp.instruction(instr.operands[0]).shape
    half = _size(a) / 2
    return Cost(float(a.dims[-1] * _elements(a) // 3), 0.0, half, half)


def _triangular_solve(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    a, b = c.operand_shapes(comp, instr)
    return Cost(float(2 * a.dims[-1] * _elements(b)), 0.0, _size(a) / 2 + _size(b), float(_size(instr.shape)))


def _fft(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    lengths = attrs.int_list(instr.attributes.get("fft_length"))
    operand = comp.instruction(instr.operands[0]).shape
    log_product = math.prod(int(math.floor(math.log2(n))) if n > 0 else 0 for n in lengths)
    return c.default_bytes(comp, instr)._replace(flops=8.0 * log_product * _elements(operand))


def _custom_call(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return c.default_bytes(comp, instr)


def _infeed(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return Cost(0.0, 0.0, 0.0, float(_leaf_bytes(instr.shape)))


def _outfeed(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    read = sum(_leaf_bytes(s) for s in c.operand_shapes(comp, instr))
    return Cost(0.0, 0.0, float(read), 0.0)


def _while(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return c.computation(attrs_computation(instr.attributes["body"])) + c.computation(
        attrs_computation(instr.attributes["condition"])
    )


def _conditional(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    branches = instr.called_computations
    costs = [c.computation(b) for b in branches]
    if not costs:
        return ZERO
    return Cost(*(max(values) for values in zip(*costs, strict=True)))


def _call(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return sum((c.computation(name) for name in instr.called_computations), ZERO)


def _async_start(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    return _call(c, comp, instr)


def _fusion(c: _Costing, comp: HloComputation, instr: HloInstruction) -> Cost:
    fused = c.module.computations[attrs_computation(instr.attributes["calls"])]
    if instr.attributes.get("kind") == "kCustom":
        for inner in fused.instructions:
            if inner.opcode in ("gather", "scatter"):
                return c.instruction(fused, inner)
    compute = c.computation(fused.name).compute_only()
    users: dict[str, list[HloInstruction]] = {}
    for inner in fused.instructions:
        for operand in inner.operands:
            users.setdefault(operand, []).append(inner)
    read = 0.0
    constants = 0.0
    for inner in fused.instructions:
        if inner.opcode == "parameter":
            read += _fused_read(fused, inner, users)
        elif inner.opcode == "constant" and _elements(inner.shape) > 1:
            constants += _size(inner.shape)
    return compute + Cost(0.0, 0.0, read + constants, float(_fused_written(fused)))


def _fused_read(fused: HloComputation, value: HloInstruction, users: dict[str, list[HloInstruction]]) -> float:
    """Bytes a fusion reads of one fused parameter (or a tuple element of one)."""
    full = float(_size(value.shape))
    total = 0.0
    shared = False
    for user in users.get(value.name, ()):
        op = user.opcode
        if op == "get-tuple-element" and value.shape.is_tuple:
            total += _fused_read(fused, user, users)
        elif op == "slice" or (op == "dynamic-slice" and user.operands[0] == value.name):
            total += _size(user.shape)
        elif op in ("broadcast", "reshape"):
            total += full
        elif op == "dynamic-update-slice" and user.operands[0] == value.name:
            continue
        else:
            shared = True
    return total + (full if shared else 0.0)


def _fused_written(fused: HloComputation) -> int:
    root = fused.root
    outputs = [fused.instruction(o) for o in root.operands] if root.opcode == "tuple" else [root]
    total = 0
    for out in outputs:
        if out.opcode == "dynamic-update-slice":
            total += _size(fused.instruction(out.operands[1]).shape)
        else:
            total += _leaf_bytes(out.shape)
    return total


_HANDLERS = {
    "dot": _dot,
    "convolution": _convolution,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "map": _map,
    "scatter": _scatter,
    "gather": _gather,
    "select-and-scatter": _select_and_scatter,
    "sort": _sort,
    "slice": _slice,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "transpose": _transpose,
    "tuple": _tuple,
    "rng": _rng,
    "rng-bit-generator": _rng_bit_generator,
    "all-reduce": _all_reduce,
    "all-reduce-start": _all_reduce,
    "cholesky": _cholesky,
    "triangular-solve": _triangular_solve,
    "fft": _fft,
    "custom-call": _custom_call,
    "infeed": _infeed,
    "outfeed": _outfeed,
    "while": _while,
    "conditional": _conditional,
    "call": _call,
    "async-start": _async_start,
    "fusion": _fusion,
}


_COSTINGS: dict[int, tuple[weakref.ref[HloModule], _Costing]] = {}


def _costing(module: HloModule) -> _Costing:
    """The memoizing costing of ``module`` (kept while the module lives)."""
    entry = _COSTINGS.get(id(module))
    if entry is not None and entry[0]() is module:
        return entry[1]
    costing = _Costing(module)
    key = id(module)
    _COSTINGS[key] = (weakref.ref(module, lambda _: _COSTINGS.pop(key, None)), costing)
    return costing


def _find_computation(module: HloModule, instr: HloInstruction) -> HloComputation:
    for comp in module.computations.values():
        if instr.name in comp and comp.instruction(instr.name) is instr:
            return comp
    for comp in module.computations.values():
        if instr.name in comp and comp.instruction(instr.name) == instr:
            return comp
    raise ValueError(f"instruction {instr.name!r} is not in module {module.name!r}")


def instruction_cost(module: HloModule, instr: HloInstruction, computation: HloComputation | None = None) -> Cost:
    """Cost of one instruction of ``module``, by XLA's HloCostAnalysis rules.

    Args:
      module: the module holding ``instr`` (called computations are looked up in it).
      instr: the instruction.
      computation: the computation holding ``instr``, if known (saves a search).

    Returns:
      A :class:`Cost`. Instructions that call computations (fusion, while, ...)
      include their callees' cost as described in this module's docstring.
    """
    comp = computation if computation is not None else _find_computation(module, instr)
    return _costing(module).instruction(comp, instr)


def computation_cost(module: HloModule, computation: HloComputation | str) -> Cost:
    """Sum of the costs of a computation's instructions."""
    name = computation if isinstance(computation, str) else computation.name
    return _costing(module).computation(name)


def module_cost(module: HloModule) -> Cost:
    """Module totals as XLA counts them: the entry computation's instructions,
    called computations through their callers."""
    return computation_cost(module, module.entry_name)
