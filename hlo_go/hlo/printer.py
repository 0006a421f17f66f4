"""HLO IR → HLO text, in the form XLA's parser reads back."""

from __future__ import annotations

import re

from hlo_go.hlo.ir import HloComputation, HloInstruction, HloModule, MetadataValue, Unquoted
from hlo_go.hlo.shape import join_indexed

_ESCAPES = {"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What XLA's printer (absl::CEscape) escapes: quotes, backslash, control and non-ASCII bytes.
_NEEDS_ESCAPE = re.compile(r"[\\\"'\x00-\x1f\x7f-\U0010ffff]")


def _escape(char: str) -> str:
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    return "".join(f"\\{byte:03o}" for byte in char.encode("utf-8"))


def quote(text: str) -> str:
    """``text`` as a double-quoted HLO string literal, escaped as XLA escapes it."""
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _escape(m.group()), text) + '"'


def metadata_value_to_text(value: MetadataValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Unquoted):
        return str(value)
    return quote(value)


def instruction_to_text(instr: HloInstruction, *, is_root: bool = False) -> str:
    """One instruction line (without indentation), e.g. ``%a = f32[2]{0} add(%x, %y)``."""
    if instr.literal is not None:
        args = instr.literal
    elif instr.parameter_number is not None:
        args = str(instr.parameter_number)
    else:
        args = join_indexed(["%" + o for o in instr.operands])
    parts = [
        f"{'ROOT ' if is_root else ''}%{instr.name} = {instr.shape.to_text()} {instr.opcode}({args})"
    ]
    parts.extend(f"{k}={v}" for k, v in instr.attributes.items())
    if instr.sharding is not None:
        parts.append(f"sharding={instr.sharding}")
    if instr.control_predecessors:
        parts.append(
            "control-predecessors={" + ", ".join("%" + c for c in instr.control_predecessors) + "}"
        )
    if instr.metadata:
        items = " ".join(f"{k}={metadata_value_to_text(v)}" for k, v in instr.metadata.items())
        parts.append("metadata={" + items + "}")
    if instr.backend_config is not None:
        parts.append(f"backend_config={instr.backend_config}")
    return ", ".join(parts)


def computation_to_text(comp: HloComputation, *, is_entry: bool = False) -> str:
    """A computation with its signature header and indented instructions."""
    params = ", ".join(f"{p.name}: {p.shape.to_text(layout=False)}" for p in comp.parameters)
    result = comp.root.shape.to_text(layout=False)
    lines = [f"{'ENTRY ' if is_entry else ''}%{comp.name} ({params}) -> {result} {{"]
    root = comp.root_name
    lines.extend("  " + instruction_to_text(i, is_root=i.name == root) for i in comp.instructions)
    close = "}"
    if comp.execution_thread is not None:
        close += f", execution_thread={quote(comp.execution_thread)}"
    lines.append(close)
    return "\n".join(lines)


def _table_text(module: HloModule) -> list[str]:
    table = module.stack_frames
    if not table:
        return []
    blocks: list[str] = []
    if table.file_names:
        blocks.append(
            "FileNames\n" + "\n".join(f"{i} {quote(n)}" for i, n in enumerate(table.file_names, 1))
        )
    if table.function_names:
        blocks.append(
            "FunctionNames\n"
            + "\n".join(f"{i} {quote(n)}" for i, n in enumerate(table.function_names, 1))
        )
    for title, rows in (
        ("FileLocations", table.file_locations),
        ("StackFrames", table.stack_frames),
    ):
        if rows:
            body = "\n".join(
                f"{i} {{" + " ".join(f"{k}={v}" for k, v in row.items()) + "}"
                for i, row in enumerate(rows, 1)
            )
            blocks.append(f"{title}\n{body}")
    return blocks


def module_to_text(module: HloModule) -> str:
    """The whole module: header, source-location tables, computations (entry marked),
    laid out as XLA lays it out."""
    header = f"HloModule {module.name}"
    if module.attributes:
        header += ", " + ", ".join(f"{k}={v}" for k, v in module.attributes.items())
    parts = [header + "\n\n"]
    tables = _table_text(module)
    if tables:
        parts.extend(block + "\n\n" for block in tables)
        parts.append("\n")
    parts.extend(
        c.to_text(is_entry=c.name == module.entry_name) + "\n\n"
        for c in module.computations.values()
    )
    return "".join(parts)
