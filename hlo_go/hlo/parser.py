"""HLO text → :class:`~hlo_go.hlo.ir.HloModule`.

The grammar is XLA's (``xla/hlo/parser``)::

    module       ::= ['HloModule' name (',' attribute)*] tables? computation+
    tables       ::= ('FileNames' | 'FunctionNames') (int string)*
                   | ('FileLocations' | 'StackFrames') (int '{' (key '=' int)* '}')*
    computation  ::= ['ENTRY'] name [signature] '{' instruction+ '}' [',' 'execution_thread=' string]
    signature    ::= '(' (name ':' shape),* ')' '->' shape
    instruction  ::= ['ROOT'] name '=' shape opcode '(' operands ')' (',' attribute)*
    attribute    ::= key '=' value        value: balanced text up to the next top-level ','

Comments (``/* */`` and ``//``) and whitespace, newlines included, may appear
between tokens. Names may carry a leading '%'.

Speed: the parser walks the text with anchored regular expressions (one per
syntactic piece, run in C), so a 13 MB optimized module parses in about a
second. Attribute values nested deeper than the regexes handle, and all error
reporting, go through a slower character scanner.
"""

from __future__ import annotations

import codecs
import gzip
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path

from hlo_go.errors import HloGoError
from hlo_go.hlo.ir import (
    EMPTY,
    FrozenDict,
    HloComputation,
    HloInstruction,
    HloModule,
    MetadataValue,
    StackFrameTable,
    Unquoted,
    computation_names,
)
from hlo_go.hlo.opcodes import COMPUTATION_ATTRIBUTES, OPCODE_ARITY
from hlo_go.hlo.shape import ARRAY_DTYPES, SPECIAL_DTYPES, Shape, ShapeSyntaxError, parse_shape_at
from hlo_go.hlo.source import located_message, remember_source


class HloParseError(ValueError, HloGoError):
    """Malformed HLO text.

    Attributes:
      line: 1-based line of the offending text.
      column: 1-based column.
      filename: the file name given to the parser, if any.
      reason: the message without the location and excerpt.
    """

    def __init__(
        self, reason: str, *, line: int, column: int, source_line: str, filename: str | None
    ) -> None:
        self.line = line
        self.column = column
        self.filename = filename
        self.reason = reason
        super().__init__(
            located_message(
                reason, filename=filename, line=line, column=column, source_line=source_line
            )
        )


# ---------------------------------------------------------------------------
# Regular expressions for the pieces of the grammar.

_NAME = r"[A-Za-z_][\w.\-]*+"
_STR = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"' + r"|'[^'\\]*+(?:\\.[^'\\]*+)*+'"
_PLAIN = r"[^(){}\[\]\"']++"


def _balanced(depth: int) -> str:
    """A regex for one (), {} or [] group nested at most ``depth`` deep, strings allowed."""
    group = ""
    for _ in range(depth):
        inner = f"(?:{_PLAIN}|{_STR}{'|' + group if group else ''})*+"
        group = rf"(?:\{{{inner}\}}|\({inner}\)|\[{inner}\])"
    return group


_GROUP = _balanced(6)
# An attribute value: atoms, strings and groups up to the next top-level ',' or line
# end. Spaces may separate parts (``mesh['x'=2] {'x'}``) but never end a value.
_VALUE = rf"(?:[^(){{}}\[\]\"',\s]++|{_STR}|{_GROUP}|[ \t]++(?=[^\s,)}}\]]))++"

_WS = re.compile(r"\s*")
_ATTR = re.compile(rf"\s*,\s*({_NAME})=\s*({_VALUE})")
_ATTR_START = re.compile(rf"\s*,\s*({_NAME})=\s*")
_INSTR_HEAD = re.compile(rf"\s*(ROOT\s+)?%?({_NAME})\s*=\s*")
_ARRAY_SHAPE = re.compile(r"[a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?")
_TUPLE_SHAPE = re.compile(r"\((?:[^()]++|\((?:[^()]++|\((?:[^()]++|\([^()]*+\))*+\))*+\))*+\)")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\s*\(")
_SIMPLE_OPERANDS = re.compile(rf"\s*((?:%?{_NAME}\s*,\s*)*%?{_NAME})?\s*\)")
_BALANCED_ARGS = re.compile(rf"((?:{_PLAIN}|{_STR}|{_GROUP})*+)\)")
_PARAM_NUMBER = re.compile(r"\s*(\d+)\s*\)")
_CLOSE_BRACE = re.compile(r"\s*\}")
_MODULE_HEAD = re.compile(rf"\s*HloModule\s+%?({_NAME})")
_TABLE_KEYWORD = re.compile(r"\s*(FileNames|FunctionNames|FileLocations|StackFrames)\b")
_TABLE_STRING_ROW = re.compile(rf"\s*(\d+)\s+({_STR})")
_TABLE_MAP_ROW = re.compile(r"\s*(\d+)\s+\{([^{}]*)\}")
_KEY_INT = re.compile(r"\s*([A-Za-z_]\w*)=(-?\d+)")
_COMP_HEAD = re.compile(rf"\s*(ENTRY\s+)?%?({_NAME})\s*")
_SIG_PARAM = re.compile(rf"\s*%?({_NAME})\s*:\s*")
_ARROW = re.compile(r"\s*->\s*")
_OPEN_BRACE = re.compile(r"\s*\{")
_EXEC_THREAD = re.compile(rf"\s*,\s*execution_thread=\s*({_STR})")
_INT = re.compile(r"-?\d+")
_NUMBER = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan(?:\(0x[0-9a-fA-F]+\))?)"
_LITERAL = re.compile(
    rf"\s*(?:[a-z][a-z0-9]*\[[^\]]*\](?:\{{[^{{}}]*\}})?\s*)?(?:[\s{{}}(),]|{_NUMBER}|true|false|\.\.\.)*"
)
# The common instruction form in one match: head, array or tuple shape, opcode and
# plain operand names; group 6 is the whole attribute tail.
_FAST_INSTR = re.compile(
    rf"\s*(ROOT\s+)?%?({_NAME})\s*=\s*({_ARRAY_SHAPE.pattern}|{_TUPLE_SHAPE.pattern})\s*"
    rf"([a-z][a-z0-9\-]*)\(\s*((?:%?{_NAME}\s*,\s*)*%?{_NAME}|[\w.+\-]++)?\s*\)"
    rf"((?:\s*,\s*{_NAME}=\s*{_VALUE})*+)(?!\s*,)"
)
_SHAPE_PATTERN = rf"(?:{_ARRAY_SHAPE.pattern}|{_TUPLE_SHAPE.pattern})"
_FAST_SIGNATURE = re.compile(
    rf"\(\s*(?:%?{_NAME}\s*:\s*{_SHAPE_PATTERN}\s*,\s*)*(?:%?{_NAME}\s*:\s*{_SHAPE_PATTERN}\s*)?\)"
    rf"\s*->\s*{_SHAPE_PATTERN}"
)
_NAMES = re.compile(_NAME)
_ELEMENT_INDEX = re.compile(r"#(\d+)")
_ATTR_ITEMS = re.compile(rf"\s*,\s*({_NAME})=\s*({_VALUE})")
# Metadata entries are separated by whitespace, or by commas (XLA's parser accepts both;
# hand-written and older TensorFlow modules use commas).
_META_VALUE = rf"{_STR}|\{{[^{{}}]*\}}|[^\s{{}},\"']+"
_META_ITEMS = re.compile(rf"\s*,?\s*({_NAME})=\s*({_META_VALUE})")
_META_ENTRY = rf"{_NAME}=\s*(?:{_META_VALUE})"
_META_BODY = re.compile(rf"\s*(?:{_META_ENTRY}(?:\s*,?\s*{_META_ENTRY})*)?\s*")
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n\r]*", re.DOTALL)
_COMMENTS_OR_STRINGS = re.compile(rf"({_STR})|/\*.*?\*/|//[^\n\r]*", re.DOTALL)

_COMPUTATION_ATTRIBUTE_SET = frozenset(COMPUTATION_ATTRIBUTES)
_LITERAL_OPCODES = frozenset({"constant", "parameter"})
# XLA's lexer reads these as element types, so they cannot name instructions.
_RESERVED_NAMES = ARRAY_DTYPES | SPECIAL_DTYPES
_SPECIAL_ATTRIBUTES = frozenset({"metadata", "sharding", "backend_config", "control-predecessors"})


def _blank(match: re.Match[str]) -> str:
    """Same-length whitespace for a comment, keeping its newlines (so columns stay right)."""
    return re.sub(r"[^\n\r]", " ", match.group())


def _blank_comments(text: str) -> str:
    """Replaces comments with spaces. Comment markers inside strings are left alone."""
    if "/*" not in text and "//" not in text:
        return text
    if not _opener_may_be_in_string(text):
        return _COMMENTS.sub(_blank, text)
    return _COMMENTS_OR_STRINGS.sub(lambda m: m.group() if m.group(1) else _blank(m), text)


def _opener_may_be_in_string(text: str) -> bool:
    """True if some '/*' or '//' has a quote before it on its line (then strings must be
    skipped while removing comments; HLO strings do not span lines)."""
    for opener in ("/*", "//"):
        i = text.find(opener)
        while i >= 0:
            line_start = text.rfind("\n", 0, i) + 1
            if text.find('"', line_start, i) >= 0 or text.find("'", line_start, i) >= 0:
                return True
            i = text.find(opener, text.find("\n", i) + 1 if text.find("\n", i) >= 0 else len(text))
    return False


def _arity(opcode: str) -> int | None:
    """Operand count of ``opcode``; None if variadic, -1 if unknown. Besides XLA's opcodes
    this accepts the async sugar ``X-start``/``X-update``/``X-done`` for any opcode X
    (e.g. ``custom-call-start``), as XLA prints async-wrapped instructions."""
    arity = OPCODE_ARITY.get(opcode, -1)
    if arity != -1:
        return arity
    for suffix, sugar_arity in (("-start", None), ("-update", 1), ("-done", 1)):
        if opcode.endswith(suffix) and opcode[: -len(suffix)] in OPCODE_ARITY:
            return sugar_arity
    return -1


_VALID_ESCAPES = re.compile(r"\\(?:[nrtabfv\\'\"?]|[0-7]{1,3}|x[0-9a-fA-F]{1,2})")


def unquote(literal: str) -> str:
    """The value of a quoted HLO string literal (C escapes decoded).

    Raises:
      ValueError: an escape C does not know, or bytes that are not UTF-8.
    """
    body = literal[1:-1]
    if "\\" not in body:
        return body
    if _VALID_ESCAPES.sub("", body).count("\\"):
        raise ValueError(f"invalid escape sequence in string {literal}")
    try:
        return codecs.escape_decode(body.encode("utf-8"))[0].decode("utf-8")
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"bad string {literal}: {e}") from None


# ---------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, filename: str | None) -> None:
        self.source = text
        self.filename = filename
        self.text = _blank_comments(text)
        self.computations: dict[str, HloComputation] = {}
        self.shape_cache: dict[str, Shape] = {}
        self.metadata_cache: dict[str, FrozenDict[str, MetadataValue]] = {}
        # The computation being parsed: its instructions' shapes so far, and the
        # get-tuple-element instructions made for ``%tuple#index`` operands (by tuple name
        # and index; ``pending``: those the instruction being parsed needs first).
        self.shapes: dict[str, Shape] = {}
        self.element_names: dict[tuple[str, int], str] = {}
        self.pending: list[HloInstruction] = []

    # -- errors -------------------------------------------------------------

    def error(self, pos: int, reason: str) -> HloParseError:
        src = self.source
        pos = max(0, min(pos, len(src)))
        line_start = src.rfind("\n", 0, pos) + 1
        line_end = src.find("\n", pos)
        line_end = len(src) if line_end < 0 else line_end
        if pos < len(src) and "near" not in reason:
            token = re.match(r"\S{1,40}", src[pos:line_end])
            if token:
                reason += f" (near {token.group()!r})"
        elif pos >= len(src):
            reason += " (at end of input)"
        return HloParseError(
            reason,
            line=src.count("\n", 0, pos) + 1,
            column=pos - line_start + 1,
            source_line=src[line_start:line_end],
            filename=self.filename,
        )

    def skip_ws(self, pos: int) -> int:
        return _WS.match(self.text, pos).end()

    # -- module -------------------------------------------------------------

    def parse_module(self) -> HloModule:
        text = self.text
        pos = 0
        name: str | None = None
        attributes: dict[str, str] = {}
        m = _MODULE_HEAD.match(text, pos)
        if m:
            name = m.group(1)
            pos = self.parse_attributes(m.end(), attributes, what="module")
        elif text.lstrip().startswith("HloModule"):
            raise self.error(
                self.skip_ws(0) + len("HloModule"), "expected a module name after 'HloModule'"
            )
        tables, pos = self.parse_tables(pos)
        entry_name: str | None = None
        last_name: str | None = None
        while True:
            pos = self.skip_ws(pos)
            if pos >= len(text):
                break
            start = pos
            comp, is_entry, pos = self.parse_computation(pos)
            if is_entry:
                if entry_name is not None:
                    raise self.error(
                        start, f"expects only one ENTRY computation (already have {entry_name!r})"
                    )
                entry_name = comp.name
            last_name = comp.name
        if last_name is None:
            raise self.error(pos, "expected a computation")
        entry_name = entry_name or last_name
        return HloModule(
            name=name or entry_name,
            computations=FrozenDict(self.computations),
            entry_name=entry_name,
            attributes=FrozenDict(attributes) if attributes else EMPTY,
            stack_frames=tables,
        )

    def parse_tables(self, pos: int) -> tuple[StackFrameTable, int]:
        text = self.text
        found: dict[str, tuple] = {}
        while True:
            m = _TABLE_KEYWORD.match(text, pos)
            if m is None:
                break
            keyword = m.group(1)
            if keyword in found:
                raise self.error(m.start(1), f"table {keyword} appears twice")
            pos = m.end()
            rows: list = []
            row_re = (
                _TABLE_STRING_ROW if keyword in ("FileNames", "FunctionNames") else _TABLE_MAP_ROW
            )
            while (r := row_re.match(text, pos)) is not None:
                if int(r.group(1)) != len(rows) + 1:
                    raise self.error(
                        r.start(1), f"{keyword} ids must count up from 1; expected {len(rows) + 1}"
                    )
                if row_re is _TABLE_STRING_ROW:
                    rows.append(self.unquote_at(r.group(2), r.start(2)))
                else:
                    rows.append(self.parse_int_map(r.group(2), r.start(2)))
                pos = r.end()
            found[keyword] = tuple(rows)
        table = StackFrameTable(
            file_names=found.get("FileNames", ()),
            function_names=found.get("FunctionNames", ()),
            file_locations=found.get("FileLocations", ()),
            stack_frames=found.get("StackFrames", ()),
        )
        return table, pos

    def parse_int_map(self, body: str, offset: int) -> FrozenDict[str, int]:
        items: dict[str, int] = {}
        pos = 0
        while (m := _KEY_INT.match(body, pos)) is not None:
            items[m.group(1)] = int(m.group(2))
            pos = m.end()
        if body[pos:].strip():
            raise self.error(offset + pos, "expected key=integer entries")
        return FrozenDict(items)

    # -- computations -------------------------------------------------------

    def parse_computation(self, pos: int) -> tuple[HloComputation, bool, int]:
        text = self.text
        m = _COMP_HEAD.match(text, pos)
        if m is None:
            raise self.error(pos, "expected a computation ('[ENTRY] name [(params) -> shape] {')")
        is_entry = m.group(1) is not None
        name = m.group(2)
        if name in self.computations:
            raise self.error(m.start(2), f"computation {name!r} is defined twice")
        pos = m.end()
        if text.startswith("(", pos):
            pos = self.parse_signature(pos)
        b = _OPEN_BRACE.match(text, pos)
        if b is None:
            raise self.error(self.skip_ws(pos), f"expected '{{' to open computation {name!r}")
        pos = b.end()

        instructions: list[HloInstruction] = []
        positions: dict[str, int] = {}
        root_name: str | None = None
        self.shapes, self.element_names, self.pending = {}, {}, []
        while True:
            head = _FAST_INSTR.match(text, pos)
            if head is not None:
                instr = self.build_fast(head, positions)
                pos = head.end()
            else:
                close = _CLOSE_BRACE.match(text, pos)
                if close is not None:
                    pos = close.end()
                    break
                head = _INSTR_HEAD.match(text, pos)
                if head is None:
                    at = self.skip_ws(pos)
                    if at >= len(text):
                        raise self.error(at, f"computation {name!r} is missing its closing '}}'")
                    raise self.error(
                        at, "expected an instruction ('name = shape opcode(operands)') or '}'"
                    )
                instr, pos = self.parse_instruction(head, positions)
            if head.group(1) is not None:
                if root_name is not None:
                    raise self.error(
                        head.start(1), f"computation {name!r} has two ROOT instructions"
                    )
                root_name = instr.name
            if self.pending:  # get-tuple-elements of its ``%tuple#index`` operands
                instructions.extend(self.pending)
                self.pending = []
            positions[instr.name] = head.start(2)
            self.shapes[instr.name] = instr.shape
            instructions.append(instr)
        if not instructions:
            raise self.error(pos - 1, f"computation {name!r} has no instructions")
        execution_thread = None
        t = _EXEC_THREAD.match(text, pos)
        if t is not None:
            execution_thread = self.unquote_at(t.group(1), t.start(1))
            pos = t.end()
        self.check_parameters(name, instructions, positions)
        self.check_control_predecessors(instructions, positions)
        comp = HloComputation(
            name=name,
            instructions=tuple(instructions),
            root_name=root_name or instructions[-1].name,
            execution_thread=execution_thread,
        )
        self.computations[name] = comp
        return comp, is_entry, pos

    def parse_signature(self, pos: int) -> int:
        """Checks the ``(a: f32[2], ...) -> shape`` header; XLA derives it, so it is not kept."""
        text = self.text
        fast = _FAST_SIGNATURE.match(text, pos)
        if fast is not None:
            return fast.end()
        pos += 1  # '('
        if (close := re.compile(r"\s*\)").match(text, pos)) is not None:
            pos = close.end()
        else:
            while True:
                p = _SIG_PARAM.match(text, pos)
                if p is None:
                    raise self.error(
                        self.skip_ws(pos), "expected 'name: shape' in computation signature"
                    )
                _, pos = self.parse_shape(p.end())
                pos = self.skip_ws(pos)
                if text.startswith(",", pos):
                    pos += 1
                    continue
                if text.startswith(")", pos):
                    pos += 1
                    break
                raise self.error(pos, "expected ',' or ')' in computation signature")
        a = _ARROW.match(text, pos)
        if a is None:
            raise self.error(
                self.skip_ws(pos), "expected '->' and the result shape in computation signature"
            )
        _, pos = self.parse_shape(a.end())
        return pos

    def check_parameters(
        self, comp: str, instructions: list[HloInstruction], positions: dict[str, int]
    ) -> None:
        params = [i for i in instructions if i.opcode == "parameter"]
        seen: set[int] = set()
        for p in params:
            number = p.parameter_number
            assert number is not None
            if number in seen or number >= len(params):
                reason = (
                    "is used twice"
                    if number in seen
                    else f"is out of range: {len(params)} parameters"
                )
                raise self.error(
                    positions[p.name], f"parameter number {number} in {comp!r} {reason}"
                )
            seen.add(number)

    def check_control_predecessors(
        self, instructions: list[HloInstruction], positions: dict[str, int]
    ) -> None:
        for instr in instructions:
            for pred in instr.control_predecessors:
                if pred not in positions:
                    raise self.error(
                        positions[instr.name],
                        f"control predecessor {pred!r} of {instr.name!r} is not defined",
                    )

    # -- instructions -------------------------------------------------------

    def parse_shape(self, pos: int) -> tuple[Shape, int]:
        text = self.text
        pos = self.skip_ws(pos)
        m = (_TUPLE_SHAPE if text.startswith("(", pos) else _ARRAY_SHAPE).match(text, pos)
        if m is not None:
            key = m.group()
            shape = self.shape_cache.get(key)
            if shape is None:
                try:
                    shape, end = parse_shape_at(key, 0)
                except ShapeSyntaxError as e:
                    raise self.error(pos + e.offset, str(e)) from None
                if end != len(key):
                    raise self.error(pos + end, "unexpected text in shape")
                self.shape_cache[key] = shape
            return shape, m.end()
        try:
            return parse_shape_at(text, pos)
        except ShapeSyntaxError as e:
            raise self.error(e.offset, str(e)) from None

    def parse_instruction(
        self, head: re.Match[str], defined: dict[str, int]
    ) -> tuple[HloInstruction, int]:
        text = self.text
        name = head.group(2)
        if name in defined:
            raise self.error(head.start(2), f"instruction {name!r} is defined twice")
        if name in _RESERVED_NAMES:
            raise self.error(
                head.start(2), f"{name!r} is an element type name and cannot name an instruction"
            )
        shape, pos = self.parse_shape(head.end())
        op = _OPCODE.match(text, pos)
        if op is None:
            raise self.error(self.skip_ws(pos), "expected an opcode followed by '('")
        opcode = op.group(1)
        arity = _arity(opcode)
        if arity == -1:
            raise self.error(op.start(1), f"unknown opcode {opcode!r}")
        pos = op.end()

        operands: tuple[str, ...] = ()
        literal: str | None = None
        parameter_number: int | None = None
        if opcode == "parameter":
            p = _PARAM_NUMBER.match(text, pos)
            if p is None:
                raise self.error(
                    self.skip_ws(pos), "expected a parameter number, e.g. parameter(0)"
                )
            parameter_number = int(p.group(1))
            pos = p.end()
        elif opcode == "constant":
            a = _BALANCED_ARGS.match(text, pos)
            end = a.end() - 1 if a is not None else self.scan_balanced(pos, ")")
            literal = text[pos:end].strip()
            lit = _LITERAL.fullmatch(literal)
            if not literal or lit is None:
                raise self.error(self.skip_ws(pos), "malformed constant literal")
            pos = end + 1
        else:
            s = _SIMPLE_OPERANDS.match(text, pos)
            if s is not None:
                group = s.group(1)
                operands = tuple(o.strip().lstrip("%") for o in group.split(",")) if group else ()
                start = s.start(1)
                pos = s.end()
            else:
                start = pos
                operands, pos = self.parse_general_operands(pos, defined)
            self.check_operands(name, opcode, arity, operands, defined, start, start)

        attributes: dict[str, str] = {}
        pos = self.parse_attributes(pos, attributes, what=name)
        return self.make_instruction(
            name, opcode, shape, operands, attributes, pos, literal, parameter_number
        ), pos

    def build_fast(self, m: re.Match[str], defined: dict[str, int]) -> HloInstruction:
        """An instruction from one ``_FAST_INSTR`` match (the hot path: keep it lean)."""
        _, name, shape_text, opcode, ops, tail = m.groups()
        shape = self.shape_cache.get(shape_text)
        if shape is None:
            shape, _ = self.parse_shape(m.start(3))
        arity = OPCODE_ARITY.get(opcode, -1)
        if name in defined or arity == -1 or opcode in _LITERAL_OPCODES or name in _RESERVED_NAMES:
            return self.build_fast_special(m, defined, shape)
        operands: tuple[str, ...] = tuple(_NAMES.findall(ops)) if ops else ()
        self.check_operands(name, opcode, arity, operands, defined, m.start(5), m.start(4))
        if not tail:
            return HloInstruction(name, opcode, shape, operands)
        return self.finish_fast(m, name, opcode, shape, operands, tail, None, None)

    def build_fast_special(
        self, m: re.Match[str], defined: dict[str, int], shape: Shape
    ) -> HloInstruction:
        """The fast path's rare cases: duplicate names, async sugar or unknown opcodes,
        constants and parameters."""
        _, name, _, opcode, ops, tail = m.groups()
        if name in defined:
            raise self.error(m.start(2), f"instruction {name!r} is defined twice")
        if name in _RESERVED_NAMES:
            raise self.error(
                m.start(2), f"{name!r} is an element type name and cannot name an instruction"
            )
        arity = _arity(opcode)
        if arity == -1:
            raise self.error(m.start(4), f"unknown opcode {opcode!r}")
        literal = parameter_number = None
        operands: tuple[str, ...] = ()
        if opcode == "parameter":
            if ops is None or not ops.isdigit():
                at = m.start(5) if ops else m.end(4) + 1
                raise self.error(at, "expected a parameter number, e.g. parameter(0)")
            parameter_number = int(ops)
        elif opcode == "constant":
            if ops is None or _LITERAL.fullmatch(ops) is None:
                raise self.error(m.start(5) if ops else m.end(4) + 1, "malformed constant literal")
            literal = ops
        elif ops:
            operands = tuple(_NAMES.findall(ops))
        self.check_operands(name, opcode, arity, operands, defined, m.start(5), m.start(4))
        if not tail:
            return HloInstruction(
                name, opcode, shape, operands, literal=literal, parameter_number=parameter_number
            )
        return self.finish_fast(m, name, opcode, shape, operands, tail, literal, parameter_number)

    def finish_fast(
        self,
        m: re.Match[str],
        name: str,
        opcode: str,
        shape: Shape,
        operands: tuple[str, ...],
        tail: str,
        literal: str | None,
        parameter_number: int | None,
    ) -> HloInstruction:
        """Adds the attribute tail (group 6 of ``m``) to a fast-path instruction."""
        if self.text is not self.source and self.source[m.start(6) : m.end(6)] != tail:
            found = _ATTR_ITEMS.finditer(self.text, m.start(6), m.end(6))  # keep comments verbatim
            pairs = [(a.group(1), self.source[a.start(2) : a.end(2)]) for a in found]
        else:
            pairs = _ATTR_ITEMS.findall(tail)
        attributes = dict(pairs)
        if len(attributes) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    at = self.text.find(key + "=", m.start(6))
                    raise self.error(at, f"attribute {key!r} of {name!r} is given twice")
                seen.add(key)
        if not _COMPUTATION_ATTRIBUTE_SET.isdisjoint(attributes):
            for key in _COMPUTATION_ATTRIBUTE_SET.intersection(attributes):
                self.check_callees(attributes[key], m.start(6))
        return self.make_instruction(
            name, opcode, shape, operands, attributes, m.end(), literal, parameter_number
        )

    def check_operands(
        self,
        name: str,
        opcode: str,
        arity: int | None,
        operands: tuple[str, ...],
        defined: dict[str, int],
        search_from: int,
        arity_pos: int,
    ) -> None:
        """Operands must be defined earlier in the computation, and as many as the opcode takes."""
        for operand in operands:
            if operand not in defined:
                at = self.text.find(operand, search_from)
                raise self.error(
                    at if at >= 0 else search_from,
                    f"operand {operand!r} of {name!r} is not defined before it",
                )
        if arity is not None and len(operands) != arity:
            raise self.error(arity_pos, f"{opcode} expects {arity} operands, got {len(operands)}")

    def check_callees(self, value: str, search_from: int) -> None:
        for callee in computation_names(value):
            if callee not in self.computations:
                at = self.text.find(callee, search_from)
                raise self.error(at, f"computation {callee!r} is not defined before its use")

    def make_instruction(
        self,
        name: str,
        opcode: str,
        shape: Shape,
        operands: tuple[str, ...],
        attributes: dict[str, str],
        pos: int,
        literal: str | None,
        parameter_number: int | None,
    ) -> HloInstruction:
        """Pulls the attributes with fields of their own out of ``attributes``."""
        metadata: FrozenDict[str, MetadataValue] = EMPTY
        sharding = backend_config = None
        control: tuple[str, ...] = ()
        if not _SPECIAL_ATTRIBUTES.isdisjoint(attributes):
            if "metadata" in attributes:
                metadata = self.parse_metadata(attributes.pop("metadata"), pos)
            sharding = attributes.pop("sharding", None)
            backend_config = attributes.pop("backend_config", None)
            if "control-predecessors" in attributes:
                control = tuple(computation_names(attributes.pop("control-predecessors")))
        return HloInstruction(
            name,
            opcode,
            shape,
            operands,
            FrozenDict(attributes) if attributes else EMPTY,
            metadata,
            sharding,
            backend_config,
            control,
            literal,
            parameter_number,
        )

    def parse_general_operands(
        self, pos: int, defined: dict[str, int]
    ) -> tuple[tuple[str, ...], int]:
        """Operands written with shapes (``f32[2]{0} %x``), or anything the fast path missed.

        ``%x#i`` (XLA's dumps write a tuple's element so, its get-tuple-element left out)
        names a get-tuple-element of ``x`` made here (:meth:`tuple_element`)."""
        text = self.text
        names: list[str] = []
        pos = self.skip_ws(pos)
        if text.startswith(")", pos):
            return (), pos + 1
        while True:
            pos = self.skip_ws(pos)
            m = re.compile(rf"%?({_NAME})").match(text, pos)
            if (m is not None and text.startswith("[", m.end())) or text.startswith("(", pos):
                _, pos = self.parse_shape(pos)
                pos = self.skip_ws(pos)
                m = re.compile(rf"%?({_NAME})").match(text, pos)
            if m is None:
                raise self.error(pos, "expected an operand name")
            name, pos = m.group(1), m.end()
            while (e := _ELEMENT_INDEX.match(text, pos)) is not None:
                name = self.tuple_element(name, int(e.group(1)), defined, m.start(1))
                pos = e.end()
            names.append(name)
            pos = self.skip_ws(pos)
            if text.startswith(",", pos):
                pos += 1
            elif text.startswith(")", pos):
                return tuple(names), pos + 1
            elif text.startswith("(", pos):
                raise self.error(pos, "nested instructions as operands are not supported")
            else:
                raise self.error(pos, "expected ',' or ')' after operand")

    def tuple_element(self, name: str, index: int, defined: dict[str, int], pos: int) -> str:
        """The name of a get-tuple-element of ``name``'s ``index``-th element, made (and
        queued in :attr:`pending`) the first time one is asked for."""
        key = (name, index)
        if key in self.element_names:
            return self.element_names[key]
        shape = self.shapes.get(name)
        if shape is None:
            raise self.error(pos, f"operand {name!r} is not defined before it")
        if shape.dtype != "tuple" or index >= len(shape.tuple_shapes):
            raise self.error(
                pos, f"{name}#{index}: {name!r} has no tuple element {index} ({shape.to_text()})"
            )
        element = f"{name}.element{index}"
        while element in defined or element in self.shapes:
            element += "_"
        self.pending.append(
            HloInstruction(
                element,
                "get-tuple-element",
                shape.tuple_shapes[index],
                (name,),
                FrozenDict({"index": str(index)}),
            )
        )
        defined[element] = pos
        self.shapes[element] = shape.tuple_shapes[index]
        self.element_names[key] = element
        return element

    def parse_attributes(self, pos: int, out: dict[str, str], *, what: str) -> int:
        """Parses ``, key=value`` pairs into ``out`` until none follows; returns the new offset."""
        text = self.text
        while True:
            m = _ATTR.match(text, pos)
            if m is not None:
                key, value_pos, pos = m.group(1), m.start(2), m.end()
                value = self.source[value_pos : m.end(2)]  # verbatim, comments included
            else:
                start = _ATTR_START.match(text, pos)
                if start is None:
                    if text.startswith(",", self.skip_ws(pos)):
                        raise self.error(self.skip_ws(pos) + 1, "expected 'key=value' after ','")
                    return pos
                key, value_pos = start.group(1), start.end()
                end = self.scan_balanced(value_pos, ",\n\r}")
                value = self.source[value_pos:end].rstrip()
                if not value:
                    raise self.error(value_pos, f"missing value for attribute {key!r}")
                pos = end
            if key in out:
                raise self.error(
                    value_pos - len(key) - 1, f"attribute {key!r} of {what!r} is given twice"
                )
            if key in _COMPUTATION_ATTRIBUTE_SET:
                self.check_callees(value, value_pos)
            out[key] = value

    def parse_metadata(self, value: str, pos: int) -> FrozenDict[str, MetadataValue]:
        cached = self.metadata_cache.get(value)
        if cached is None:
            cached = self.metadata_cache[value] = self._parse_metadata(value, pos)
        return cached

    def _parse_metadata(self, value: str, pos: int) -> FrozenDict[str, MetadataValue]:
        if not value.startswith("{") or not value.endswith("}"):
            raise self.error(self.locate(value, pos), "metadata must be {key=value ...}")
        body = value[1:-1]
        if _META_BODY.fullmatch(body) is None:
            i = 0
            while (m := _META_ITEMS.match(body, i)) is not None:
                i = m.end()
            raise self.error(self.locate(value, pos) + 1 + i, "malformed metadata entry")
        items: dict[str, MetadataValue] = {}
        for key, raw in _META_ITEMS.findall(body):
            if raw[0] in "\"'":
                items[key] = self.unquote_at(raw, self.locate(value, pos))
            elif _INT.fullmatch(raw):
                items[key] = int(raw)
            elif raw in ("true", "false"):
                items[key] = raw == "true"
            else:
                items[key] = Unquoted(raw)
        return FrozenDict(items)

    def unquote_at(self, literal: str, pos: int) -> str:
        try:
            return unquote(literal)
        except ValueError as e:
            raise self.error(pos, str(e)) from None

    def locate(self, value: str, before: int) -> int:
        """Offset of an attribute value that ends before ``before`` (for error messages)."""
        at = self.text.rfind(value, 0, before)
        return at if at >= 0 else before

    def scan_balanced(self, pos: int, stops: str) -> int:
        """Offset of the first top-level char in ``stops`` from ``pos``, skipping nested
        brackets and strings. Raises a located error on a mismatched bracket or an
        unterminated string."""
        text = self.text
        closers = {"(": ")", "[": "]", "{": "}"}
        stack: list[tuple[str, int]] = []
        i = pos
        n = len(text)
        while i < n:
            c = text[i]
            if not stack and c in stops:
                return i
            if c in "\"'":
                m = re.compile(_STR).match(text, i)
                if m is None:
                    raise self.error(i, "unterminated string")
                i = m.end()
                continue
            if c in closers:
                stack.append((closers[c], i))
            elif c in ")]}":
                if not stack:
                    return i if c in stops else self._raise_unbalanced(i, c)
                expected, _ = stack.pop()
                if c != expected:
                    raise self.error(i, f"mismatched {c!r}; expected {expected!r}")
            i += 1
        if stack:
            raise self.error(stack[-1][1], f"unclosed {text[stack[-1][1]]!r}")
        return n

    def _raise_unbalanced(self, pos: int, char: str) -> int:
        raise self.error(pos, f"unbalanced {char!r}")


def parse_hlo(text: str, *, filename: str | None = None) -> HloModule:
    """Parses HLO module text as XLA prints it (``as_text()``, ``compile().as_text()``,
    XLA's test files).

    Args:
      text: the module text.
      filename: used in error messages only.

    Returns:
      The parsed :class:`HloModule`.

    Raises:
      HloParseError: malformed text, with ``line``/``column`` and the offending text quoted.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_hlo expects str, got {type(text).__name__}")
    if "\x00" in text:
        raise _Parser(text, filename).error(text.index("\x00"), "NUL character in HLO text")
    module = _Parser(text, filename).parse_module()
    remember_source(module, text, filename)
    return module


class HloFileError(ValueError, HloGoError):
    """An HLO file that cannot be read as text: a bad or truncated ``.gz``, a directory.

    Attributes:
      path: the file.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {reason}")


def load_hlo(path: str | os.PathLike[str], *, verify: bool = True) -> HloModule:
    """Reads and parses an HLO text file (``.gz`` files are decompressed).

    Args:
      path: the file.
      verify: also check the module is valid HLO (:func:`hlo_go.hlo.verify_module`).

    Returns:
      The parsed module.

    Raises:
      FileNotFoundError: no such file.
      HloFileError: a bad or truncated gzip file, or something that is not a file.
      HloParseError: malformed text (not UTF-8 included), located.
      HloVerifyError: text that parses but is not valid HLO, located.
    """
    p = Path(path)
    opener: Callable[..., object] = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as f:  # type: ignore[operator]
            text = f.read()  # type: ignore[attr-defined]
    except UnicodeDecodeError as e:
        raise HloParseError(
            f"not UTF-8 text: {e}", line=1, column=1, source_line="", filename=str(p)
        ) from None
    except gzip.BadGzipFile as e:
        raise HloFileError(p, f"not a gzip file ({e})") from None
    except (EOFError, zlib.error) as e:
        raise HloFileError(p, f"truncated or corrupt gzip data ({e})") from None
    except IsADirectoryError:
        raise HloFileError(p, "is a directory, not an HLO file") from None
    module = parse_hlo(text, filename=str(p))
    if verify:
        from hlo_go.hlo.verify import verify_module

        verify_module(module)
    return module
