"""A cheap HLO verifier: the type errors parsing alone cannot see.

:func:`verify_module` checks what a parsed module's shapes and attributes must agree on
before it is costed, graphed or simulated, the way XLA's ``HloVerifier`` would refuse it:

* sizes: every array's element count and byte size fit in int64;
* operand counts of the variadic opcodes (reduce, concatenate, convolution, ...);
* elementwise ops: operands of one shape (a scalar or a size-1 dimension broadcasts, as
  XLA's shape inference allows) and one element type, and a result of that shape;
  ``select``'s predicate is ``pred``;
* ``get-tuple-element``: a tuple operand, an index in range, the element's shape;
  ``tuple``: the operands' shapes;
* ``dot``: contracting and batch dimensions in range, of equal sizes, and the result's rank;
  ``convolution``: ``dim_labels`` of the operands' and result's ranks;
* ``reduce``, ``broadcast``, ``transpose``, ``concatenate``: dimensions in range (and a
  permutation for transpose), result shapes that follow from them; ``reshape``: the same
  element count.

Everything XLA prints passes (the bundled corpus and ``tests/data`` are checked in the
tests); layouts are not compared. A failure raises :class:`HloVerifyError` located at
the instruction (``file:line:column`` and the line quoted) when the module came from
:func:`hlo_go.hlo.parse_hlo`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from hlo_go.errors import HloGoError
from hlo_go.hlo import attributes as attrs
from hlo_go.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.opcodes import ELEMENTWISE_OPCODES
from hlo_go.hlo.shape import DTYPE_BITS, UNBOUNDED_DIM, Shape
from hlo_go.hlo.source import locate_instruction, located_message, location_at, source_of

__all__ = ["INT64_MAX", "HloVerifyError", "verify_module"]

INT64_MAX = 2**63 - 1


class HloVerifyError(ValueError, HloGoError):
    """A parsed module that is not valid HLO (operand shapes, indices, dimensions, sizes).

    Attributes:
      reason: the message without the location and excerpt.
      computation: the computation holding the offending instruction.
      instruction: the instruction's name.
      line: 1-based line of the instruction in its text, or None when unknown.
      column: 1-based column, or None.
      filename: the file the module was parsed from, if known.
    """

    def __init__(
        self,
        reason: str,
        *,
        computation: str,
        instruction: str,
        line: int | None = None,
        column: int | None = None,
        source_line: str = "",
        filename: str | None = None,
    ) -> None:
        self.reason = reason
        self.computation = computation
        self.instruction = instruction
        self.line = line
        self.column = column
        self.filename = filename
        if line is not None and column is not None:
            message = located_message(
                reason, filename=filename, line=line, column=column, source_line=source_line
            )
        else:
            where = filename or "<hlo>"
            message = (
                f"{where}: in computation {computation!r}, instruction {instruction!r}: {reason}"
            )
        super().__init__(message)


class _Invalid(Exception):
    """Raised inside the checks; turned into a located HloVerifyError by verify_module."""

    def __init__(self, reason: str, attribute: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attribute = attribute


# Binary elementwise opcodes whose operands share one element type.
_BINARY_SAME_TYPE: frozenset[str] = frozenset({
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder",
    "and", "or", "xor", "atan2", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "compare", "complex", "mulhi",
})  # fmt: skip
# ... and whose result has that element type too.
_BINARY_RESULT_SAME_TYPE = _BINARY_SAME_TYPE - {"compare", "complex"}
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}
# Opcodes whose operand counts the parser leaves open: (minimum, must be even).
_MIN_OPERANDS: dict[str, tuple[int, bool]] = {
    "reduce": (2, True),
    "reduce-window": (2, True),
    "concatenate": (1, False),
    "sort": (1, False),
    "map": (1, False),
    "dynamic-slice": (1, False),
    "dynamic-update-slice": (2, False),
    "scatter": (3, False),
}
_EXACT_OPERANDS: dict[str, int] = {"convolution": 2}


def _text(shape: Shape) -> str:
    return shape.to_text(layout=False)


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Same rank and sizes (an unbounded '?' dimension matches any size)."""
    if a == b:
        return True
    return len(a) == len(b) and all(
        x in (y, UNBOUNDED_DIM) or y == UNBOUNDED_DIM for x, y in zip(a, b, strict=True)
    )


def _same_shape(a: Shape, b: Shape) -> bool:
    """Equal element types and dimensions, recursively through tuples; layouts ignored."""
    if a.dtype != b.dtype:
        return False
    if a.is_tuple:
        return len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            _same_shape(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes, strict=True)
        )
    return _dims_match(a.dims, b.dims)


def _array(shape: Shape, what: str) -> Shape:
    if not shape.is_array:
        raise _Invalid(f"{what} must be an array, got {_text(shape)}")
    return shape


def _broadcast_dims(shapes: list[Shape]) -> tuple[int, ...] | None:
    """The elementwise result dims of ``shapes`` (scalars and size-1 dims broadcast), or
    None when they do not agree."""
    ranked = [s.dims for s in shapes if s.rank]
    if not ranked:
        return ()
    out = list(ranked[0])
    for dims in ranked[1:]:
        if len(dims) != len(out):
            return None
        for i, d in enumerate(dims):
            if d == out[i] or d == UNBOUNDED_DIM:
                continue
            if out[i] == 1 or out[i] == UNBOUNDED_DIM:
                out[i] = d
            elif d != 1:
                return None
    return tuple(out)


def _in_range(dims: tuple[int, ...], rank: int, key: str, what: str) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise _Invalid(
                f"{key}={{{','.join(map(str, dims))}}}: {d} is not a dimension of {what}", key
            )
    if len(set(dims)) != len(dims):
        raise _Invalid(f"{key}={{{','.join(map(str, dims))}}} repeats a dimension", key)


def _int_list(instr: HloInstruction, key: str) -> tuple[int, ...]:
    try:
        return attrs.int_list(instr.attributes.get(key))
    except ValueError:
        raise _Invalid(
            f"{key}= must be a list of integers, got {instr.attributes[key]!r}", key
        ) from None


def _check_size(shape: Shape) -> None:
    for leaf in shape.leaves():
        if not leaf.is_array:
            continue
        if leaf.num_elements > INT64_MAX:
            raise _Invalid(f"shape {_text(leaf)} has more elements than int64 can count")
        bits = max(DTYPE_BITS[leaf.dtype], 8)
        if leaf.num_elements * bits // 8 > INT64_MAX:
            raise _Invalid(f"shape {_text(leaf)} has a byte size that overflows int64")


# -- per-opcode checks ----------------------------------------------------------------

_Check = Callable[[HloInstruction, list[Shape]], None]


def _elementwise(instr: HloInstruction, ops: list[Shape]) -> None:
    op = instr.opcode
    out = instr.shape
    if op == "select":
        pred, on_true, on_false = ops
        if pred.dtype != "pred":
            raise _Invalid(f"select's predicate must be pred, got {_text(pred)}")
        if not _same_shape(on_true, on_false):
            raise _Invalid(f"select's operands differ: {_text(on_true)} and {_text(on_false)}")
        if not on_true.is_array:
            return
        if pred.rank and not _dims_match(pred.dims, on_true.dims):
            raise _Invalid(f"select's predicate {_text(pred)} does not match {_text(on_true)}")
        if not _dims_match(out.dims, on_true.dims):
            raise _Invalid(f"result {_text(out)} does not match the operands' {_text(on_true)}")
        return
    for i, shape in enumerate(ops):
        _array(shape, f"operand {i} of {op}")
    _array(out, f"the result of {op}")
    if op == "clamp":
        low, x, high = ops
        for bound in (low, high):
            if bound.dtype != x.dtype or (bound.rank and not _dims_match(bound.dims, x.dims)):
                raise _Invalid(f"clamp bound {_text(bound)} does not fit operand {_text(x)}")
        dims: tuple[int, ...] | None = x.dims
    else:
        dims = _broadcast_dims(ops)
    if dims is None:
        shown = ", ".join(_text(s) for s in ops)
        raise _Invalid(f"{op} operands have incompatible shapes ({shown})")
    if not _dims_match(out.dims, dims):
        shown = ", ".join(_text(s) for s in ops)
        raise _Invalid(f"result {_text(out)} does not match the operands ({shown})")
    if op in _BINARY_SAME_TYPE:
        lhs, rhs = ops
        if lhs.dtype != rhs.dtype:
            raise _Invalid(
                f"{op} operands have different element types ({_text(lhs)}, {_text(rhs)})"
            )
        if op in _BINARY_RESULT_SAME_TYPE and out.dtype != lhs.dtype:
            raise _Invalid(f"{op} of {lhs.dtype} operands cannot give {out.dtype}")
        if op == "compare" and out.dtype != "pred":
            raise _Invalid(f"compare gives pred, not {out.dtype}")
        if op == "complex" and out.dtype != _COMPLEX_OF.get(lhs.dtype, "?"):
            raise _Invalid(f"complex of {lhs.dtype} operands cannot give {out.dtype}")


def _get_tuple_element(instr: HloInstruction, ops: list[Shape]) -> None:
    (operand,) = ops
    if not operand.is_tuple:
        raise _Invalid(f"get-tuple-element of a non-tuple operand {_text(operand)}")
    raw = instr.attributes.get("index")
    try:
        index = int(raw) if raw is not None else -1
    except ValueError:
        index = -1
    n = len(operand.tuple_shapes)
    if not 0 <= index < n:
        raise _Invalid(f"tuple index {raw} is out of range for a {n}-element tuple", "index")
    if not _same_shape(operand.tuple_shapes[index], instr.shape):
        raise _Invalid(
            f"element {index} is {_text(operand.tuple_shapes[index])}, not {_text(instr.shape)}"
        )


def _tuple(instr: HloInstruction, ops: list[Shape]) -> None:
    out = instr.shape
    if not out.is_tuple or len(out.tuple_shapes) != len(ops):
        raise _Invalid(f"a tuple of {len(ops)} operands cannot have shape {_text(out)}")
    for i, (element, shape) in enumerate(zip(out.tuple_shapes, ops, strict=True)):
        if not _same_shape(element, shape):
            raise _Invalid(
                f"tuple element {i} is {_text(element)} but operand {i} is {_text(shape)}"
            )


def _dot(instr: HloInstruction, ops: list[Shape]) -> None:
    lhs = _array(ops[0], "dot's lhs")
    rhs = _array(ops[1], "dot's rhs")
    lc = _int_list(instr, "lhs_contracting_dims")
    rc = _int_list(instr, "rhs_contracting_dims")
    lb = _int_list(instr, "lhs_batch_dims")
    rb = _int_list(instr, "rhs_batch_dims")
    _in_range(
        lc + lb, lhs.rank, "lhs_contracting_dims" if lc else "lhs_batch_dims", f"lhs {_text(lhs)}"
    )
    _in_range(
        rc + rb, rhs.rank, "rhs_contracting_dims" if rc else "rhs_batch_dims", f"rhs {_text(rhs)}"
    )
    for kind, left, right in (("contracting", lc, rc), ("batch", lb, rb)):
        if len(left) != len(right):
            raise _Invalid(f"dot has {len(left)} lhs and {len(right)} rhs {kind} dimensions")
        for a, b in zip(left, right, strict=True):
            x, y = lhs.dims[a], rhs.dims[b]
            if x != y and UNBOUNDED_DIM not in (x, y):
                raise _Invalid(
                    f"dot {kind} dimensions differ: lhs dimension {a} is {x}, rhs dimension {b} is {y}"
                )
    out = _array(instr.shape, "dot's result")
    rank = lhs.rank + rhs.rank - len(lc) - len(rc) - len(lb)
    if out.rank != rank:
        raise _Invalid(f"dot of {_text(lhs)} and {_text(rhs)} gives rank {rank}, not {_text(out)}")


def _convolution(instr: HloInstruction, ops: list[Shape]) -> None:
    labels = instr.attributes.get("dim_labels")
    if labels is None:
        return
    try:
        attrs.dim_labels(labels)
    except ValueError as error:
        raise _Invalid(str(error), "dim_labels") from None
    lhs, rhs, out = labels.strip().replace("->", "_").split("_")
    result = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    for part, shape, what in (
        (lhs, ops[0], "input"),
        (rhs, ops[1], "kernel"),
        (out, result, "result"),
    ):
        if len(part) != shape.rank:
            raise _Invalid(
                f"dim_labels {labels} give the {what} {len(part)} dimensions, but it is {_text(shape)}",
                "dim_labels",
            )
    window = instr.attributes.get("window")
    spatial = sum(c.isdigit() for c in lhs)
    if window is not None and len(attrs.window(window)) not in (0, spatial):
        raise _Invalid(f"window {window} does not have {spatial} spatial dimensions", "window")


def _reduce(instr: HloInstruction, ops: list[Shape]) -> None:
    n = len(ops) // 2
    operand = _array(ops[0], "reduce's operand")
    dims = _int_list(instr, "dimensions")
    _in_range(dims, operand.rank, "dimensions", f"operand {_text(operand)}")
    kept = tuple(d for i, d in enumerate(operand.dims) if i not in dims)
    results = instr.shape.tuple_shapes if n > 1 else (instr.shape,)
    if len(results) != n:
        raise _Invalid(f"a reduce of {n} operands gives {n} results, not {_text(instr.shape)}")
    for i, result in enumerate(results):
        if not ops[i].is_array or not _dims_match(ops[i].dims, operand.dims):
            raise _Invalid(f"reduce operands {_text(operand)} and {_text(ops[i])} differ")
        if not result.is_array or not _dims_match(result.dims, kept):
            raise _Invalid(
                f"reducing {_text(operand)} over {{{','.join(map(str, dims))}}} gives "
                f"[{','.join(map(str, kept))}], not {_text(result)}"
            )


def _broadcast(instr: HloInstruction, ops: list[Shape]) -> None:
    operand = _array(ops[0], "broadcast's operand")
    out = _array(instr.shape, "broadcast's result")
    dims = _int_list(instr, "dimensions")
    if len(dims) != operand.rank:
        raise _Invalid(
            f"broadcast of {_text(operand)} needs {operand.rank} dimensions, got {len(dims)}",
            "dimensions",
        )
    _in_range(dims, out.rank, "dimensions", f"result {_text(out)}")
    for i, d in enumerate(dims):
        x, y = operand.dims[i], out.dims[d]
        if x != y and UNBOUNDED_DIM not in (x, y):
            raise _Invalid(
                f"broadcast maps operand dimension {i} (size {x}) to result dimension {d} (size {y})",
                "dimensions",
            )


def _transpose(instr: HloInstruction, ops: list[Shape]) -> None:
    operand = _array(ops[0], "transpose's operand")
    perm = _int_list(instr, "dimensions")
    if sorted(perm) != list(range(operand.rank)):
        raise _Invalid(f"dimensions={{{','.join(map(str, perm))}}} is not a permutation of "
                       f"{operand.rank} dimensions", "dimensions")  # fmt: skip
    expected = tuple(operand.dims[p] for p in perm)
    if not _dims_match(instr.shape.dims, expected):
        raise _Invalid(f"transposing {_text(operand)} gives [{','.join(map(str, expected))}], "
                       f"not {_text(instr.shape)}")  # fmt: skip


def _concatenate(instr: HloInstruction, ops: list[Shape]) -> None:
    dims = _int_list(instr, "dimensions")
    first = _array(ops[0], "concatenate's operand")
    if len(dims) != 1:
        raise _Invalid("concatenate needs one dimension", "dimensions")
    _in_range(dims, first.rank, "dimensions", f"operand {_text(first)}")
    for shape in ops[1:]:
        if not shape.is_array or shape.rank != first.rank:
            raise _Invalid(f"concatenate operands {_text(first)} and {_text(shape)} differ in rank")


def _reshape(instr: HloInstruction, ops: list[Shape]) -> None:
    operand, out = ops[0], instr.shape
    if operand.dynamic or out.dynamic or not operand.is_array or not out.is_array:
        return
    if operand.num_elements != out.num_elements:
        raise _Invalid(f"reshape of {_text(operand)} to {_text(out)} changes the element count")


_CHECKS: dict[str, _Check] = {
    "get-tuple-element": _get_tuple_element,
    "tuple": _tuple,
    "dot": _dot,
    "convolution": _convolution,
    "reduce": _reduce,
    "broadcast": _broadcast,
    "transpose": _transpose,
    "concatenate": _concatenate,
    "reshape": _reshape,
}
for _op in ELEMENTWISE_OPCODES - {"stochastic-convert"}:
    _CHECKS[_op] = _elementwise


def _check_instruction(comp: HloComputation, instr: HloInstruction, checked: set[object]) -> None:
    """Raises _Invalid for an invalid instruction; ``checked`` memoizes by shape identity
    (the shapes live as long as the module, so their ids stay valid during a pass)."""
    if id(instr.shape) not in checked:
        _check_size(instr.shape)
        checked.add(id(instr.shape))
    op = instr.opcode
    n = len(instr.operands)
    if op in _EXACT_OPERANDS and n != _EXACT_OPERANDS[op]:
        raise _Invalid(f"{op} expects {_EXACT_OPERANDS[op]} operands, got {n}")
    if op in _MIN_OPERANDS:
        least, even = _MIN_OPERANDS[op]
        if n < least or (even and n % 2):
            parity = "an even number of " if even else ""
            raise _Invalid(f"{op} expects {parity}at least {least} operands, got {n}")
    check = _CHECKS.get(op)
    if check is None:
        return
    shapes = [comp.instruction(o).shape for o in instr.operands]
    if check is _elementwise:  # no attributes matter: check each combination of shapes once
        key = (op, id(instr.shape), *map(id, shapes))
        if key in checked:
            return
        check(instr, shapes)
        checked.add(key)
        return
    check(instr, shapes)


_VERIFIED: dict[int, weakref.ref[HloModule]] = {}


def verify_module(module: HloModule) -> HloModule:
    """Checks that ``module`` is valid HLO; returns it.

    Cheap (one pass over the instructions, no cost analysis) and done once per module
    object: later calls on the same module return at once.

    Args:
      module: a parsed module.

    Returns:
      ``module`` itself.

    Raises:
      HloVerifyError: the first invalid instruction, located in the module's text when it
        came from :func:`hlo_go.hlo.parse_hlo` (``file:line:column``, the line quoted).
    """
    key = id(module)
    ref = _VERIFIED.get(key)
    if ref is not None and ref() is module:
        return module
    checked: set[object] = set()
    for comp in module.computations.values():
        for instr in comp.instructions:
            try:
                _check_instruction(comp, instr, checked)
            except _Invalid as invalid:
                raise _located(module, comp, instr, invalid) from None
    table = _VERIFIED

    def forget(dead: weakref.ref[HloModule]) -> None:
        if table.get(key) is dead:
            del table[key]

    table[key] = weakref.ref(module, forget)
    return module


def _located(
    module: HloModule, comp: HloComputation, instr: HloInstruction, invalid: _Invalid
) -> HloVerifyError:
    source = source_of(module)
    kwargs: dict[str, object] = {}
    if source is not None:
        kwargs["filename"] = source.filename
        pos = locate_instruction(source.text, comp.name, instr.name, invalid.attribute)
        if pos is not None:
            where = location_at(source.text, pos)
            kwargs.update(line=where.line, column=where.column, source_line=where.source_line)
    return HloVerifyError(
        f"{instr.name!r}: {invalid.reason}",
        computation=comp.name,
        instruction=instr.name,
        **kwargs,  # type: ignore[arg-type]
    )
