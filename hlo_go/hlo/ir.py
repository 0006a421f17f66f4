"""The HLO IR: modules, computations and instructions as plain immutable values.

Everything the HLO text says is kept, so printing a parsed module gives text that
XLA's own parser accepts and that computes the same results. Attribute values
that hlo-go does not interpret are kept verbatim as text (e.g. ``window``,
``dim_labels``, ``frontend_attributes``); :mod:`hlo_go.hlo.attributes` decodes the
common ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

from hlo_go.hlo.opcodes import COMPUTATION_ATTRIBUTES
from hlo_go.hlo.shape import Shape

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V]):
    """An insertion-ordered dict that refuses changes and can be hashed."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("FrozenDict is immutable; build a new one instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle by value (the default dict protocol would call the refused __setitem__),
        # so modules and graphs can cross process boundaries (multiprocessing, caches).
        return (FrozenDict, (dict(self),))


EMPTY: FrozenDict[Any, Any] = FrozenDict()


class Unquoted(str):
    """A metadata value that the text wrote without quotes (and is not a number or bool)."""

    __slots__ = ()


# Metadata values: quoted strings (str), integers, booleans, or other unquoted text.
MetadataValue = str | int | bool | Unquoted


class HloInstruction(NamedTuple):
    """One HLO instruction (an immutable NamedTuple: cheap to build by the hundred thousand).

    Attributes:
      name: instruction name, without '%'.
      opcode: XLA opcode text name ('add', 'fusion', 'custom-call', ...).
      shape: result shape.
      operands: operand instruction names, in order.
      attributes: every ``key=value`` attribute not given its own field below,
        values verbatim as text (e.g. ``{"dimensions": "{0,1}", "to_apply": "%add"}``).
      metadata: the ``metadata={...}`` entries, e.g. ``op_name``, ``source_line``.
      sharding: ``sharding=`` text, e.g. ``"{devices=[2,1]<=[2]}"``, or None.
      backend_config: ``backend_config=`` text as written (a JSON object or a quoted string), or None.
      control_predecessors: names from ``control-predecessors={...}``.
      literal: a constant's literal text, e.g. ``"{1, 2}"`` (constants only).
      parameter_number: a parameter's number (parameters only).
    """

    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...] = ()
    attributes: Mapping[str, str] = EMPTY
    metadata: Mapping[str, MetadataValue] = EMPTY
    sharding: str | None = None
    backend_config: str | None = None
    control_predecessors: tuple[str, ...] = ()
    literal: str | None = None
    parameter_number: int | None = None

    @property
    def called_computations(self) -> tuple[str, ...]:
        """Names of the computations this instruction calls (to_apply, calls, body, ...)."""
        names: list[str] = []
        for key in COMPUTATION_ATTRIBUTES:
            value = self.attributes.get(key)
            if value is not None:
                names.extend(computation_names(value))
        return tuple(names)

    def replace(self, **changes: Any) -> HloInstruction:
        """A copy with some fields changed."""
        return self._replace(**changes)

    def to_text(self, *, is_root: bool = False) -> str:
        from hlo_go.hlo.printer import instruction_to_text

        return instruction_to_text(self, is_root=is_root)


def computation_names(value: str) -> list[str]:
    """Computation names in an attribute value like ``%add`` or ``{%b0, %b1}``."""
    value = value.strip()
    if value.startswith("{"):
        value = value[1:-1]
    return [v.strip().lstrip("%") for v in value.split(",") if v.strip()]


@dataclass(frozen=True)
class HloComputation:
    """A named list of instructions with one root.

    Attributes:
      name: computation name, without '%'.
      instructions: in text order (operands always come before their users).
      root_name: name of the root instruction.
      execution_thread: the ``execution_thread="..."`` the text gave, if any.
    """

    name: str
    instructions: tuple[HloInstruction, ...]
    root_name: str
    execution_thread: str | None = None

    @cached_property
    def _by_name(self) -> dict[str, HloInstruction]:
        return {i.name: i for i in self.instructions}

    @property
    def root(self) -> HloInstruction:
        return self._by_name[self.root_name]

    @property
    def parameters(self) -> tuple[HloInstruction, ...]:
        """Parameter instructions ordered by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return tuple(sorted(params, key=lambda i: i.parameter_number or 0))

    def instruction(self, name: str) -> HloInstruction:
        """The instruction called ``name`` (KeyError if absent)."""
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[HloInstruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def to_text(self, *, is_entry: bool = False) -> str:
        from hlo_go.hlo.printer import computation_to_text

        return computation_to_text(self, is_entry=is_entry)


def reachable_computations(computations: Mapping[str, HloComputation], entry: str) -> set[str]:
    """Names of the computations ``entry`` reaches through called computations (itself
    included), among ``computations``."""
    seen, stack = {entry}, [entry]
    while stack:
        for instr in computations[stack.pop()]:
            for callee in instr.called_computations:
                if callee in computations and callee not in seen:
                    seen.add(callee)
                    stack.append(callee)
    return seen


@dataclass(frozen=True)
class StackFrameTable:
    """The ``FileNames``/``FunctionNames``/``FileLocations``/``StackFrames`` tables.

    Optimized modules refer to them from ``metadata={stack_frame_id=N}``. Ids in
    the text are 1-based positions in these tuples; a frame's ``parent_frame_id`` is
    its parent's id plus one (1: no parent), as XLA writes it.

    Attributes:
      file_names: source file paths.
      function_names: function names.
      file_locations: one mapping per location (``file_name_id``, ``function_name_id``,
        ``line``, ``end_line``, ``column``, ``end_column``).
      stack_frames: one mapping per frame (``file_location_id``, ``parent_frame_id``).
    """

    file_names: tuple[str, ...] = ()
    function_names: tuple[str, ...] = ()
    file_locations: tuple[Mapping[str, int], ...] = ()
    stack_frames: tuple[Mapping[str, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.file_names or self.function_names or self.file_locations or self.stack_frames
        )

    def frames(self, stack_frame_id: int) -> list[tuple[str, str, int]]:
        """(file, function, line) from innermost to outermost for a stack frame id."""
        out: list[tuple[str, str, int]] = []
        seen: set[int] = set()
        frame_id = stack_frame_id
        while 0 < frame_id <= len(self.stack_frames) and frame_id not in seen:
            seen.add(frame_id)
            frame = self.stack_frames[frame_id - 1]
            loc = self.file_locations[frame["file_location_id"] - 1]
            out.append(
                (
                    self.file_names[loc["file_name_id"] - 1],
                    self.function_names[loc["function_name_id"] - 1],
                    loc.get("line", 0),
                )
            )
            # XLA writes the parent's id plus one; 1 (i.e. parent 0) means "no parent".
            frame_id = frame.get("parent_frame_id", 1) - 1
        return out


@dataclass(frozen=True)
class HloModule:
    """An HLO module.

    Attributes:
      name: module name.
      computations: computations by name, in text order (callees before callers).
      entry_name: name of the entry computation.
      attributes: header attributes verbatim, e.g. ``{"is_scheduled": "true",
        "entry_computation_layout": "{(f32[2]{0})->f32[2]{0}}"}``.
      stack_frames: source-location tables of optimized modules (may be empty).
    """

    name: str
    computations: Mapping[str, HloComputation]
    entry_name: str
    attributes: Mapping[str, str] = EMPTY
    stack_frames: StackFrameTable = field(default_factory=StackFrameTable)

    @property
    def entry(self) -> HloComputation:
        return self.computations[self.entry_name]

    def computation(self, name: str) -> HloComputation:
        return self.computations[name]

    @property
    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations.values())

    def instructions(self) -> Iterator[tuple[HloComputation, HloInstruction]]:
        """All (computation, instruction) pairs in text order."""
        for comp in self.computations.values():
            for instr in comp.instructions:
                yield comp, instr

    def to_text(self) -> str:
        """HLO text that XLA's parser accepts and that re-parses to an equal module."""
        from hlo_go.hlo.printer import module_to_text

        return module_to_text(self)

    def __str__(self) -> str:
        return self.to_text()
