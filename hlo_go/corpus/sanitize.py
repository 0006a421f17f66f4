"""Make a module's source locations independent of where, and by whom, it was built.

JAX records the Python stack of every traced op: XLA's optimized modules carry
``FileNames``/``FunctionNames``/``FileLocations``/``StackFrames`` tables, and any
module may carry ``source_file=`` metadata. Both hold absolute paths, and the
stack includes the caller's frames (the CLI, pytest, a notebook) above the model.
:func:`relocate` rewrites paths relative to the repository root (or to the
``sys.path`` entry that holds them, or to a bare file name), and keeps only the
frames of the given source directories, re-rooting the stacks there.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from hlo_go.hlo import FrozenDict, HloModule, StackFrameTable


def relative_path(path: str, root: Path | str) -> str:
    """``path`` relative to ``root`` when inside it, else relative to the longest
    ``sys.path`` entry holding it (``"optax/_src/alias.py"``), else its file name.
    Always with forward slashes."""
    if not os.path.isabs(path):
        return PurePosixPath(*Path(path).parts).as_posix() if path else path
    resolved = Path(path)
    entries = sorted(
        (Path(p) for p in sys.path if p and os.path.isabs(p)),
        key=lambda p: len(str(p)),
        reverse=True,
    )
    bases = [Path(root), *entries]
    for base in bases:
        try:
            return resolved.relative_to(base).as_posix()
        except ValueError:
            continue
    return resolved.name


def relocate(
    module: HloModule,
    root: Path | str,
    *,
    keep_prefixes: Sequence[str] | None = None,
) -> HloModule:
    """``module`` with machine-independent source locations.

    Args:
      module: a parsed module.
      root: the repository root; paths inside it become relative to it.
      keep_prefixes: relative path prefixes (e.g. ``("hlo_corpus/",)``) whose
        stack frames are kept; frames elsewhere are dropped and their children
        re-parented to the nearest kept ancestor. None keeps every frame.

    Returns:
      A new module; instruction ``stack_frame_id`` metadata is renumbered (and
      removed where no frame is left) and ``source_file`` paths are rewritten.
    The new tables hold only rows that some instruction uses, numbered in order
    of first use, so the result does not depend on frames that were dropped.
    """

    def keep(path: str) -> bool:
        return keep_prefixes is None or path.startswith(tuple(keep_prefixes))

    renumber = _FrameRenumbering(module.stack_frames, lambda p: relative_path(p, root), keep)
    computations = {}
    for name, comp in module.computations.items():
        instructions = []
        changed = False
        for instr in comp.instructions:
            metadata = instr.metadata
            if "stack_frame_id" not in metadata and "source_file" not in metadata:
                instructions.append(instr)
                continue
            new = dict(metadata)
            if "stack_frame_id" in new:
                frame = renumber(int(new["stack_frame_id"]))
                if frame:
                    new["stack_frame_id"] = frame
                else:
                    del new["stack_frame_id"]
            if "source_file" in new:
                new["source_file"] = type(new["source_file"])(
                    relative_path(str(new["source_file"]), root)
                )
            instructions.append(instr.replace(metadata=FrozenDict(new)))
            changed = True
        computations[name] = (
            dataclasses.replace(comp, instructions=tuple(instructions)) if changed else comp
        )
    return dataclasses.replace(
        module, computations=FrozenDict(computations), stack_frames=renumber.table()
    )


class _FrameRenumbering:
    """Maps old stack frame ids to new ones, building the new tables on first use.

    XLA prints ``parent_frame_id`` as the parent's 1-based id plus one, 1 meaning
    "no parent" (observed on jaxlib 0.10.2; XLA reads it back the same way), and
    the new table is printed in that same convention.
    """

    def __init__(
        self,
        table: StackFrameTable,
        rename: Callable[[str], str],
        keep: Callable[[str], bool],
    ) -> None:
        self.old = table
        self.files = [rename(f) for f in table.file_names]
        self.memo: dict[int, int] = {0: 0}
        self.file_ids: dict[str, int] = {}
        self.function_ids: dict[str, int] = {}
        self.locations: dict[tuple, int] = {}
        self.frames: dict[tuple[int, int], int] = {}
        self.keep = keep

    def _intern(self, table: dict, key) -> int:
        if key not in table:
            table[key] = len(table) + 1
        return table[key]

    def __call__(self, frame_id: int) -> int:
        """The new id of old frame ``frame_id`` (0: none kept)."""
        chain: list[int] = []
        fid = frame_id
        while fid not in self.memo:
            if not 0 < fid <= len(self.old.stack_frames) or fid in chain:
                self.memo.setdefault(fid, 0)  # out of range, or a cycle: a root
                break
            chain.append(fid)
            fid = int(self.old.stack_frames[fid - 1].get("parent_frame_id", 1)) - 1
        for fid in reversed(chain):  # outermost first, so parents get smaller ids
            row = self.old.stack_frames[fid - 1]
            parent = self.memo.get(int(row.get("parent_frame_id", 1)) - 1, 0)
            location = self.old.file_locations[int(row["file_location_id"]) - 1]
            path = self.files[int(location["file_name_id"]) - 1]
            if not self.keep(path):
                self.memo[fid] = parent
                continue
            function = self.old.function_names[int(location["function_name_id"]) - 1]
            file_id = self._intern(self.file_ids, path)
            function_id = self._intern(self.function_ids, function)
            fields = tuple(
                (
                    k,
                    file_id
                    if k == "file_name_id"
                    else function_id
                    if k == "function_name_id"
                    else v,
                )
                for k, v in location.items()
            )
            location_id = self._intern(self.locations, fields)
            self.memo[fid] = self._intern(self.frames, (location_id, parent))
        return self.memo[frame_id]

    def table(self) -> StackFrameTable:
        if not self.frames:
            return StackFrameTable()
        return StackFrameTable(
            file_names=tuple(self.file_ids),
            function_names=tuple(self.function_ids),
            file_locations=tuple(FrozenDict(fields) for fields in self.locations),
            stack_frames=tuple(
                FrozenDict({"file_location_id": loc, "parent_frame_id": parent + 1})
                for loc, parent in self.frames
            ),
        )
