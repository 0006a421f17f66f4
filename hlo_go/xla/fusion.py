"""Fusion decisions written into an HLO module, for XLA to compile as given.

``apply_fusion(module, groups)`` replaces each group of entry instructions by one
``fusion`` instruction calling a new fused computation. Compiled through
:func:`hlo_go.xla.compile_with_fusion` (XLA's own pipeline with its fusion passes
off and this module swapped in before scheduling), XLA emits one kernel per group
instead of choosing fusions itself.

A group is legal when its members are entry instructions of fusible opcodes and
it is convex: no path leaves the group and comes back, so fusing creates no cycle.
A group's outputs are the members used outside it (or the entry root); one output
gives a plain fusion, several a multi-output fusion whose users read
``get-tuple-element``s. XLA's CPU loop emitter handles any single-output group of
these opcodes (reductions and dots included, measured on jaxlib 0.10.2), but a
multi-output group only when all outputs have the same dimensions: it aborts the
process otherwise, so such groups are refused here.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence

from hlo_go.hlo import (
    FrozenDict,
    HloComputation,
    HloInstruction,
    HloModule,
    tuple_shape,
)

# Opcodes that may not go inside a fusion: control flow, calls, side effects,
# communication, and values without data (tuples, tokens).
NOT_FUSIBLE: frozenset[str] = frozenset({
    "parameter", "tuple", "get-tuple-element", "while", "conditional", "call", "fusion",
    "custom-call", "after-all", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "all-to-all", "reduce-scatter", "collective-permute",
    "collective-permute-start", "collective-permute-done", "collective-broadcast",
    "async-start", "async-update", "async-done", "copy-start", "copy-done", "rng",
    "rng-get-and-update-state", "rng-bit-generator", "sort", "opt-barrier", "domain",
    "add-dependency", "partition-id", "replica-id", "cholesky", "triangular-solve", "fft",
    "batch-norm-training", "batch-norm-inference", "batch-norm-grad", "topk",
})  # fmt: skip


class FusionError(ValueError):
    """A fusion group that cannot be applied; the message names the group and why."""


def apply_fusion(
    module: HloModule, groups: Iterable[Sequence[str]], *, kind: str = "kLoop"
) -> HloModule:
    """Fuses each group of entry instructions into one fusion instruction.

    Args:
      module: an unfused module (e.g. from :func:`hlo_go.xla.capture_prefusion`).
      groups: disjoint groups of entry instruction names; groups of one are skipped.
      kind: the fusion kind written on every fusion (XLA CPU emits ``kLoop``).

    Returns:
      A new module with fused computations added before the entry.

    Raises:
      FusionError: an unknown or non-fusible instruction, overlapping groups, or a
        group whose fusion would create a cycle.
    """
    entry = module.entry
    groups = [list(dict.fromkeys(g)) for g in groups]
    groups = [g for g in groups if len(g) > 1]
    owner: dict[str, int] = {}
    for gi, group in enumerate(groups):
        for name in group:
            if name not in entry:
                raise FusionError(
                    f"group {gi}: {name!r} is not an instruction of the entry computation"
                )
            opcode = entry.instruction(name).opcode
            if opcode in NOT_FUSIBLE or entry.instruction(name).shape.is_tuple:
                raise FusionError(f"group {gi}: {name!r} ({opcode}) cannot be fused")
            if name in owner:
                raise FusionError(f"{name!r} is in groups {owner[name]} and {gi}")
            owner[name] = gi
    if not groups:
        return module
    _check_convex(entry, groups, owner)

    users: dict[str, list[str]] = {}
    for instr in entry.instructions:
        for operand in instr.operands:
            users.setdefault(operand, []).append(instr.name)
    taken = {c for c in module.computations} | {i.name for i in entry.instructions}
    counter = itertools.count()

    def fresh(stem: str) -> str:
        while (name := f"{stem}.{next(counter)}") in taken:
            pass
        taken.add(name)
        return name

    new_computations: dict[str, HloComputation] = {}
    replacement: dict[str, tuple[str, int | None]] = {}  # member -> (fusion name, tuple index)
    fusion_instrs: dict[int, HloInstruction] = {}
    gte_instrs: dict[int, list[HloInstruction]] = {}
    for gi, group in enumerate(groups):
        members = set(group)
        ordered = [i for i in entry.instructions if i.name in members]
        inputs = list(dict.fromkeys(o for i in ordered for o in i.operands if o not in members))
        outputs = [
            i.name
            for i in ordered
            if i.name == entry.root_name or any(u not in members for u in users.get(i.name, ()))
        ]
        comp_name, fusion_name = fresh("hlo_go_fused_computation"), fresh("hlo_go_fusion")
        params = [
            HloInstruction(
                f"param_{k}.{gi}", "parameter", entry.instruction(n).shape, parameter_number=k
            )
            for k, n in enumerate(inputs)
        ]
        rename = {n: p.name for n, p in zip(inputs, params, strict=True)}
        body = [*params]
        for instr in ordered:
            body.append(
                instr.replace(
                    operands=tuple(rename.get(o, o) for o in instr.operands),
                    control_predecessors=(),
                )
            )
        if len(outputs) == 1:
            root_name, shape = outputs[0], entry.instruction(outputs[0]).shape
        else:
            dims = {entry.instruction(o).shape.dims for o in outputs}
            if len(dims) > 1:  # XLA's loop emitter needs one iteration space (it crashes otherwise)
                raise FusionError(
                    f"group {gi}: a multi-output fusion needs outputs of one shape; "
                    f"{', '.join(f'{o}: {entry.instruction(o).shape}' for o in outputs)}"
                )
            shape = tuple_shape([entry.instruction(o).shape for o in outputs])
            root_name = fresh("hlo_go_outputs")
            body.append(HloInstruction(root_name, "tuple", shape, tuple(outputs)))
        new_computations[comp_name] = HloComputation(comp_name, tuple(body), root_name)
        fusion_instrs[gi] = HloInstruction(
            fusion_name,
            "fusion",
            shape,
            tuple(inputs),
            FrozenDict({"kind": kind, "calls": f"%{comp_name}"}),
        )
        if len(outputs) == 1:
            replacement[outputs[0]] = (fusion_name, None)
        else:
            gte_instrs[gi] = []
            for index, out in enumerate(outputs):
                gte = HloInstruction(
                    fresh(f"{fusion_name}.out"),
                    "get-tuple-element",
                    entry.instruction(out).shape,
                    (fusion_name,),
                    FrozenDict({"index": str(index)}),
                )
                gte_instrs[gi].append(gte)
                replacement[out] = (gte.name, index)

    def renamed(name: str) -> str:
        return replacement[name][0] if name in replacement else name

    position = {i.name: float(k) for k, i in enumerate(entry.instructions)}
    kept = [
        i.replace(
            operands=tuple(renamed(o) for o in i.operands),
            control_predecessors=tuple(
                dict.fromkeys(renamed(c) for c in i.control_predecessors if c not in owner)
            ),
        )
        for i in entry.instructions
        if i.name not in owner
    ]
    for gi, group in enumerate(groups):
        last = max(position[n] for n in group)  # a fusion runs where its last member ran
        fusion = fusion_instrs[gi]
        kept.append(fusion.replace(operands=tuple(renamed(o) for o in fusion.operands)))
        position[fusion_instrs[gi].name] = last
        for k, gte in enumerate(gte_instrs.get(gi, ())):
            kept.append(gte)
            position[gte.name] = last + (k + 1) / (len(gte_instrs[gi]) + 1)
    root = renamed(entry.root_name)
    new_entry = HloComputation(
        entry.name, tuple(_topological(kept, position)), root, entry.execution_thread
    )
    computations = {n: c for n, c in module.computations.items() if n != entry.name}
    computations.update(new_computations)
    computations[entry.name] = new_entry
    attributes = {k: v for k, v in module.attributes.items() if k != "is_scheduled"}
    return HloModule(
        module.name,
        FrozenDict(computations),
        entry.name,
        FrozenDict(attributes),
        module.stack_frames,
    )


def _check_convex(entry: HloComputation, groups: list[list[str]], owner: dict[str, int]) -> None:
    """Raises FusionError if some path leaves a group and re-enters it (fusing would
    create a cycle), including paths through other groups."""

    # Reachability on the graph where every group is contracted to one node.
    def node(name: str) -> str:
        return f"group {owner[name]}" if name in owner else name

    succ: dict[str, set[str]] = {}
    for instr in entry.instructions:
        for operand in instr.operands:
            a, b = node(operand), node(instr.name)
            if a != b:
                succ.setdefault(a, set()).add(b)
    # Kahn's algorithm on the contracted graph: a cycle means a non-convex group.
    nodes = {node(i.name) for i in entry.instructions}
    indegree = dict.fromkeys(nodes, 0)
    for bs in succ.values():
        for b in bs:
            indegree[b] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for b in succ.get(n, ()):
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)
    if seen != len(nodes):
        stuck = sorted(n for n, d in indegree.items() if d > 0 and n.startswith("group "))
        raise FusionError(
            f"fusing would create a cycle: {', '.join(stuck) or 'groups'} are not convex"
        )


def _topological(
    instructions: list[HloInstruction], priority: dict[str, float]
) -> list[HloInstruction]:
    """Orders instructions so operands come first, lowest ``priority`` first among the ready."""
    by_name = {i.name: i for i in instructions}
    indegree = {n: sum(1 for o in set(by_name[n].operands) if o in by_name) for n in by_name}
    users: dict[str, list[str]] = {}
    for n, instr in by_name.items():
        for o in set(instr.operands):
            if o in by_name:
                users.setdefault(o, []).append(n)
    heap = [(priority[n], n) for n, d in indegree.items() if d == 0]
    heapq.heapify(heap)
    out: list[HloInstruction] = []
    while heap:
        _, n = heapq.heappop(heap)
        out.append(by_name[n])
        for u in users.get(n, ()):
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(heap, (priority[u], u))
    if len(out) != len(by_name):
        raise FusionError("fused module has a cycle")
    return out
