"""Where an instruction of a parsed module stands in its HLO text (for located errors).

:func:`hlo_go.hlo.parse_hlo` remembers the text of each module it returns (weakly, for
as long as the module lives), so that a check made later on the module, e.g.
:func:`hlo_go.hlo.verify_module`, can still say ``file:line:column`` and quote the line.
"""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from hlo_go.hlo.ir import HloModule


class Source(NamedTuple):
    """The text a module was parsed from, and its file name (None when not given)."""

    text: str
    filename: str | None


_SOURCES: dict[int, tuple[weakref.ref[HloModule], Source]] = {}


def remember_source(module: HloModule, text: str, filename: str | None) -> None:
    """Keeps ``text`` as the source of ``module`` while the module lives."""
    key = id(module)
    table = _SOURCES  # bound here: module globals may be gone when the callback runs at exit

    def forget(ref: weakref.ref[HloModule]) -> None:
        current = table.get(key)
        if current is not None and current[0] is ref:
            del table[key]

    table[key] = (weakref.ref(module, forget), Source(text, filename))


def source_of(module: HloModule) -> Source | None:
    """The source :func:`remember_source` kept for ``module``, if any."""
    entry = _SOURCES.get(id(module))
    if entry is None or entry[0]() is not module:
        return None
    return entry[1]


class Location(NamedTuple):
    """A 1-based line and column, and the text of that line."""

    line: int
    column: int
    source_line: str


def location_at(text: str, pos: int) -> Location:
    """The :class:`Location` of offset ``pos`` of ``text``."""
    pos = max(0, min(pos, len(text)))
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    line_end = len(text) if line_end < 0 else line_end
    return Location(text.count("\n", 0, pos) + 1, pos - line_start + 1, text[line_start:line_end])


def locate_instruction(
    text: str, computation: str, instruction: str | None, attribute: str | None = None
) -> int | None:
    """Offset of an instruction's definition (or of one of its ``key=`` attributes).

    Args:
      text: the module text.
      computation: the computation's name.
      instruction: the instruction's name; None: the computation's header.
      attribute: an attribute key to point at on the instruction's line, if present.

    Returns:
      The offset, or None when the text does not show it plainly.
    """
    name = re.escape(computation)
    header = re.compile(rf"(?m)^[ \t]*(?:ENTRY[ \t]+)?%?{name}(?![\w.\-])[ \t]*[({{]")
    m = header.search(text)
    start = m.start() if m else 0
    if instruction is None:
        return m.start() if m else None
    defn = re.compile(rf"(?m)^[ \t]*(?:ROOT[ \t]+)?%?({re.escape(instruction)})(?![\w.\-])[ \t]*=")
    d = defn.search(text, start)
    if d is None:
        return None
    if attribute is not None:
        line_end = text.find("\n", d.end())
        line_end = len(text) if line_end < 0 else line_end
        a = re.compile(rf"[\s,]({re.escape(attribute)})=").search(text, d.end(), line_end)
        if a is not None:
            return a.start(1)
    return d.start(1)


def located_message(
    reason: str, *, filename: str | None, line: int, column: int, source_line: str
) -> str:
    """``file:line:column: reason``, the line, and a caret under the column."""
    shown = source_line.rstrip("\n")
    caret_col = column - 1
    if len(shown) > 160:  # keep long lines readable: show a window around the column
        start = max(0, caret_col - 80)
        shown = ("..." if start else "") + shown[start : start + 160] + "..."
        caret_col = caret_col - start + (3 if start else 0)
    where = f"{filename or '<hlo>'}:{line}:{column}"
    return f"{where}: {reason}\n    {shown}\n    {' ' * caret_col}^"
