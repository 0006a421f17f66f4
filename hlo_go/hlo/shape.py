"""HLO shapes: arrays (element type, dimensions, layout), tuples and tokens.

Text forms (as XLA prints and parses them)::

    f32[]                      scalar, no layout
    f32[8,128]{1,0}            array with minor-to-major layout
    bf16[8,128]{1,0:T(8,128)(2,1)S(1)}   layout with tiles and memory space
    f32[<=16,8]{1,0}           bounded dynamic first dimension
    f32[?,8]                   unbounded dynamic first dimension
    (f32[2]{0}, (s32[], pred[]))   nested tuple
    token[]                    token
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hlo_go.errors import HloGoError

# Element type -> size in bits. Sub-byte types are stored one element per byte
# unless a layout says otherwise (``E(n)``), matching XLA's ``ByteSizeOf``.
DTYPE_BITS: dict[str, int] = {
    "pred": 8, "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "f4e2m1fn": 4, "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3fnuz": 8,
    "f8e4m3b11fnuz": 8, "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0fnu": 8,
}  # fmt: skip
# Element types that are not arrays of numbers.
SPECIAL_DTYPES = frozenset({"token", "opaque"})
ARRAY_DTYPES = frozenset(DTYPE_BITS)

# Size of an unbounded dynamic dimension ('?' in text).
UNBOUNDED_DIM = -1
# Tile dimension printed as '*' (XLA's kCombineDimension).
COMBINE_DIM = -(2**63)


@dataclass(frozen=True, slots=True)
class Layout:
    """An array layout: ``{minor_to_major:items}``.

    Attributes:
      minor_to_major: dimension numbers from fastest- to slowest-varying.
      items: the layout attributes after ':' exactly as written, one string each,
        e.g. ``("T(8,128)(2,1)", "S(1)")``. :attr:`tiles` and
        :attr:`memory_space` decode the common ones.
    """

    minor_to_major: tuple[int, ...]
    items: tuple[str, ...] = ()

    @property
    def tiles(self) -> tuple[tuple[int, ...], ...]:
        """Tiles of a ``T(..)(..)`` item, e.g. ``((8, 128), (2, 1))``; '*' is COMBINE_DIM."""
        for item in self.items:
            if item.startswith("T("):
                return tuple(
                    tuple(COMBINE_DIM if d.strip() == "*" else int(d) for d in t.split(","))
                    for t in re.findall(r"\(([^()]*)\)", item)
                )
        return ()

    @property
    def memory_space(self) -> int:
        """The ``S(n)`` memory space, 0 (device memory) when absent."""
        for item in self.items:
            if item.startswith("S("):
                return int(item[2:-1])
        return 0

    @property
    def element_size_bits(self) -> int | None:
        """The ``E(n)`` element size in bits, if the layout sets one."""
        for item in self.items:
            if item.startswith("E("):
                return int(item[2:-1])
        return None

    def to_text(self) -> str:
        mtm = ",".join(map(str, self.minor_to_major))
        return "{" + mtm + (":" + "".join(self.items) if self.items else "") + "}"


@dataclass(frozen=True, slots=True)
class Shape:
    """An HLO shape.

    Attributes:
      dtype: element type name ('f32', 'bf16', 'pred', ...), or 'tuple', 'token', 'opaque'.
      dims: dimension sizes (the bound for a ``<=`` dynamic dimension,
        UNBOUNDED_DIM for '?'); empty for scalars, tuples and tokens.
      dynamic: per dimension, True where the size is dynamic (``<=N`` or ``?``);
        empty when no dimension is dynamic.
      layout: the layout if the text gave one.
      tuple_shapes: element shapes of a tuple.
    """

    dtype: str
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()
    # Derived once at construction (cost analysis asks for them very often).
    _num_elements: int = field(init=False, repr=False, compare=False, default=0)
    _byte_size: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        elements = math.prod(max(d, 0) for d in self.dims) if self.dtype in ARRAY_DTYPES else 0
        object.__setattr__(self, "_num_elements", elements)
        object.__setattr__(self, "_byte_size", self._compute_byte_size())

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def is_array(self) -> bool:
        return self.dtype in ARRAY_DTYPES

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def num_elements(self) -> int:
        """Elements of an array shape (dynamic dimensions at their bound); 0 otherwise."""
        return self._num_elements

    def byte_size(self, *, pointer_size: int = 8) -> int:
        """Bytes of this shape's buffer, as XLA's ``ShapeUtil::ByteSizeOf`` counts them.

        Arrays: elements × element bytes (sub-byte elements take one byte each
        unless the layout sets ``E(n)``), plus 4 bytes per dimension for dynamic
        shapes. Tuples: one pointer per element (the index table), not the
        elements themselves. Tokens: 0.
        """
        if pointer_size == 8:
            return self._byte_size
        return self._compute_byte_size(pointer_size)

    def _compute_byte_size(self, pointer_size: int = 8) -> int:
        if self.is_tuple:
            return pointer_size * len(self.tuple_shapes)
        if not self.is_array:
            return 0
        bits = max(DTYPE_BITS[self.dtype], 8)
        if self.layout is not None and self.layout.element_size_bits:
            bits = self.layout.element_size_bits
        size = (self._num_elements * bits + 7) // 8
        if self.dynamic:  # XLA stores the runtime sizes after the data: 4 bytes per dimension
            size += 4 * self.rank
        return size

    def first_array(self) -> Shape | None:
        """The first array leaf, depth first (itself for an array), or None."""
        if self.is_array:
            return self
        return next((leaf for leaf in self.leaves() if leaf.is_array), None)

    def leaves(self) -> tuple[Shape, ...]:
        """The non-tuple shapes inside this shape, depth first (itself if not a tuple)."""
        if not self.is_tuple:
            return (self,)
        return tuple(leaf for s in self.tuple_shapes for leaf in s.leaves())

    def total_byte_size(self) -> int:
        """Bytes of all array leaves (what a tuple's elements occupy)."""
        return sum(s.byte_size() for s in self.leaves())

    def without_layout(self) -> Shape:
        if self.is_tuple:
            return Shape("tuple", tuple_shapes=tuple(s.without_layout() for s in self.tuple_shapes))
        if self.layout is None:
            return self
        return Shape(self.dtype, self.dims, self.dynamic, None)

    def to_text(self, *, layout: bool = True) -> str:
        """The shape as XLA writes it (``layout=False`` drops layouts)."""
        if self.is_tuple:
            return "(" + join_indexed([s.to_text(layout=layout) for s in self.tuple_shapes]) + ")"
        dims = ",".join(
            _dim_text(d, dyn)
            for d, dyn in zip(self.dims, self.dynamic or (False,) * len(self.dims), strict=True)
        )
        text = f"{self.dtype}[{dims}]"
        if layout and self.layout is not None:
            text += self.layout.to_text()
        return text

    def __str__(self) -> str:
        return self.to_text()


def join_indexed(items: list[str]) -> str:
    """Comma-joins list items the way XLA prints long lists: ``/*index=5*/`` before every fifth."""
    return ", ".join(
        f"/*index={i}*/{item}" if i and i % 5 == 0 else item for i, item in enumerate(items)
    )


def _dim_text(size: int, dynamic: bool) -> str:
    if size == UNBOUNDED_DIM:
        return "?"
    return f"<={size}" if dynamic else str(size)


def tuple_shape(shapes: tuple[Shape, ...] | list[Shape]) -> Shape:
    """A tuple of the given shapes."""
    return Shape("tuple", tuple_shapes=tuple(shapes))


class ShapeSyntaxError(ValueError, HloGoError):
    """Malformed shape text; ``offset`` is where in the shape text it went wrong."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_LAYOUT_RE = re.compile(r"\{([^{}:]*)(?::([^{}]*))?\}")
_LAYOUT_ITEM_RE = re.compile(r"[A-Z#*]+(?:\([^()]*\))+")
_WS_RE = re.compile(r"\s*")


MAX_TUPLE_DEPTH = 64


def parse_shape_at(text: str, pos: int, *, _depth: int = 0) -> tuple[Shape, int]:
    """Parses one shape starting at ``text[pos]`` (after optional whitespace).

    Returns:
      ``(shape, end)`` where ``end`` is the offset just past the shape.

    Raises:
      ShapeSyntaxError: with ``offset`` pointing into ``text``.
    """
    pos = _WS_RE.match(text, pos).end()
    if text.startswith("(", pos):
        if _depth >= MAX_TUPLE_DEPTH:
            raise ShapeSyntaxError(f"tuple shapes nested deeper than {MAX_TUPLE_DEPTH}", pos)
        pos += 1
        elements: list[Shape] = []
        pos = _WS_RE.match(text, pos).end()
        if text.startswith(")", pos):
            return Shape("tuple"), pos + 1
        while True:
            element, pos = parse_shape_at(text, pos, _depth=_depth + 1)
            elements.append(element)
            pos = _WS_RE.match(text, pos).end()
            if text.startswith(",", pos):
                pos += 1
                continue
            if text.startswith(")", pos):
                return Shape("tuple", tuple_shapes=tuple(elements)), pos + 1
            raise ShapeSyntaxError("expected ',' or ')' in tuple shape", pos)
    m = _ARRAY_RE.match(text, pos)
    if m is None:
        raise ShapeSyntaxError("expected a shape such as f32[2,3]{1,0} or (s32[], f32[])", pos)
    dtype = m.group(1)
    if dtype not in ARRAY_DTYPES and dtype not in SPECIAL_DTYPES:
        raise ShapeSyntaxError(f"unknown element type {dtype!r}", pos)
    dims, dynamic = _parse_dims(m.group(2), m.start(2))
    if dtype in SPECIAL_DTYPES and dims:
        raise ShapeSyntaxError(f"{dtype} shapes have no dimensions", m.start(2))
    end = m.end()
    layout = None
    if text.startswith("{", end):
        lm = _LAYOUT_RE.match(text, end)
        if lm is None:
            raise ShapeSyntaxError("malformed layout; expected {minor_to_major[:attributes]}", end)
        layout = _parse_layout(lm, len(dims))
        end = lm.end()
    return Shape(dtype, dims, dynamic, layout), end


def _parse_dims(text: str, offset: int) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    if not text.strip():
        return (), ()
    dims: list[int] = []
    dynamic: list[bool] = []
    for part in text.split(","):
        p = part.strip()
        is_dynamic = p.startswith("<=") or p == "?"
        if p == "?":
            dims.append(UNBOUNDED_DIM)
        else:
            digits = p[2:].strip() if p.startswith("<=") else p
            if not digits.isdigit() or int(digits) >= 2**63:
                raise ShapeSyntaxError(f"bad dimension size {p!r}", offset)
            dims.append(int(digits))
        dynamic.append(is_dynamic)
        offset += len(part) + 1
    return tuple(dims), (tuple(dynamic) if any(dynamic) else ())


def _parse_layout(m: re.Match[str], rank: int) -> Layout:
    mtm_text = m.group(1).strip()
    try:
        mtm = tuple(int(x) for x in mtm_text.split(",")) if mtm_text else ()
    except ValueError:
        raise ShapeSyntaxError(f"bad minor_to_major {mtm_text!r}", m.start(1)) from None
    if len(mtm) != rank:
        raise ShapeSyntaxError(
            f"layout {{{mtm_text}}} has {len(mtm)} entries for a rank-{rank} shape", m.start(1)
        )
    if any(d < 0 or d >= rank for d in mtm):
        raise ShapeSyntaxError(f"layout {{{mtm_text}}} names a dimension out of range", m.start(1))
    items: tuple[str, ...] = ()
    if m.group(2) is not None:
        raw = m.group(2).replace(" ", "")
        found = _LAYOUT_ITEM_RE.findall(raw)
        if "".join(found) != raw:
            raise ShapeSyntaxError(f"bad layout attributes {m.group(2)!r}", m.start(2))
        items = tuple(found)
    return Layout(mtm, items)


_SHAPE_CACHE: dict[str, Shape] = {}


def parse_shape(text: str) -> Shape:
    """Parses a whole shape string, e.g. ``"f32[2,3]{1,0}"``.

    Raises:
      ShapeSyntaxError: if ``text`` is not exactly one shape.
    """
    cached = _SHAPE_CACHE.get(text)
    if cached is not None:
        return cached
    shape, end = parse_shape_at(text, 0)
    if text[end:].strip():
        raise ShapeSyntaxError(f"unexpected text after shape: {text[end:]!r}", end)
    if len(_SHAPE_CACHE) < 200_000:
        _SHAPE_CACHE[text] = shape
    return shape
