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

import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from hlo_go.decisions.legality import MAX_REGENERATED_CHAIN
from hlo_go.errors import HloGoError
from hlo_go.hlo import (
    FrozenDict,
    HloComputation,
    HloInstruction,
    HloModule,
    tuple_shape,
)
from hlo_go.hlo.ir import computation_names
from hlo_go.hlo.opcodes import (
    COMPUTATION_ATTRIBUTES,
    CPU_EMITTER_NOT_FUSIBLE,
    NOT_FUSIBLE,
    REGENERATED_OPCODES,
)

# Passes of :func:`regenerate_shared`: a clone may read a cheap value of a third group,
# which the next pass clones in turn (a read chain of at most this many hops).
REGENERATION_PASSES = 4


class FusionError(ValueError, HloGoError):
    """A fusion group that cannot be applied; the message names the group and why."""


def _checked_groups(
    entry: HloComputation, groups: Iterable[Sequence[str]]
) -> tuple[list[list[str]], dict[str, int]]:
    """The groups of two or more (duplicates dropped) and the group of each named
    instruction, after checking that each is a fusible instruction of ``entry`` in one
    group only.

    Raises:
      FusionError: an unknown or non-fusible instruction, or overlapping groups.
    """
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
    return groups, owner


# Opcodes that make a fusion an input fusion on XLA:GPU (its ``IsInputFusible``: a
# reduction, scatter or transpose hero); XLA:GPU's fusion passes mark such fusions kInput.
GPU_INPUT_FUSION_OPCODES = frozenset({"reduce", "scatter", "transpose"})


def gpu_fusion_kind(members: Sequence[HloInstruction]) -> str:
    """The kind XLA:GPU gives a fusion of ``members``: ``kInput`` when one of them is a
    reduction, scatter or transpose (:data:`GPU_INPUT_FUSION_OPCODES`), else ``kLoop``."""
    return "kInput" if any(m.opcode in GPU_INPUT_FUSION_OPCODES for m in members) else "kLoop"


def apply_fusion(
    module: HloModule,
    groups: Iterable[Sequence[str]],
    *,
    kind: str | Callable[[Sequence[HloInstruction]], str] = "kLoop",
) -> HloModule:
    """Fuses each group of entry instructions into one fusion instruction.

    Args:
      module: an unfused module (e.g. from :func:`hlo_go.xla.capture_prefusion`).
      groups: disjoint groups of entry instruction names; groups of one are skipped.
      kind: the fusion kind written on every fusion (XLA CPU emits ``kLoop``), or a
        function of a group's instructions that gives it (e.g. :func:`gpu_fusion_kind`).

    Returns:
      A new module with fused computations added before the entry.

    Raises:
      FusionError: an unknown or non-fusible instruction, overlapping groups, or a
        group whose fusion would create a cycle.
    """
    entry = module.entry
    groups, owner = _checked_groups(entry, groups)
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
    entry_index = {i.name: k for k, i in enumerate(entry.instructions)}
    for gi, group in enumerate(groups):
        members = set(group)
        ordered = [entry.instructions[k] for k in sorted(entry_index[n] for n in members)]
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
            FrozenDict(
                {"kind": kind if isinstance(kind, str) else kind(ordered), "calls": f"%{comp_name}"}
            ),
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


def regenerate_shared(
    module: HloModule, groups: Iterable[Sequence[str]]
) -> tuple[HloModule, list[list[str]]]:
    """Gives every fusion that reads a cheap value of another fusion its own copy of it.

    XLA's instruction fusion duplicates cheap producers into every consumer fusion; a
    grouping (a partition) instead makes a group write out whatever other groups read,
    scalar broadcasts included, for the backward pass to read back. Here a member of a
    group whose opcode is in :data:`~hlo_go.hlo.opcodes.REGENERATED_OPCODES`, whose
    operands lie outside the group or are such members themselves (at most
    :data:`~hlo_go.decisions.legality.MAX_REGENERATED_CHAIN` in all), and which other
    groups read, is cloned (with those operands) into each group reading it; those
    groups read the clone instead. The value stays an output of its group only for the
    entry root and users left unfused. A member written out anyway (for the root, a user
    left unfused, or another group when it is not cheap) is read where it is, neither
    cloned nor recomputed inside a clone's chain: XLA's fusion of a BatchNorm writes out
    ``x - mean`` once and recomputes the normalized value from it in the backward pass.
    A broadcast or iota left out of every group is cloned into each group reading it
    the same way. Members no longer read (a group left with no outputs, say) are
    removed. A clone reads only values of the groups its reader already read, so no
    cycle appears.

    A clone may itself read a cheap value of a third group; the pass repeats, up to
    :data:`REGENERATION_PASSES` times, so that value is recomputed too.

    Args:
      module: an unfused module (e.g. from :func:`hlo_go.xla.capture_prefusion`).
      groups: disjoint groups of entry instruction names, as for :func:`apply_fusion`.

    Returns:
      ``(module, groups)``: the module with the clones (named ``<original>.regen.<k>``)
      right after their originals, and the groups with the clones added; apply them
      with :func:`apply_fusion`.

    Raises:
      FusionError: an unknown or non-fusible instruction, or overlapping groups.
    """
    groups = [list(g) for g in groups]
    for _ in range(REGENERATION_PASSES):
        module, groups, changed = _regenerate_pass(module, groups)
        if not changed:
            break
    return module, groups


def _regenerate_pass(
    module: HloModule, groups: list[list[str]]
) -> tuple[HloModule, list[list[str]], bool]:
    """One pass of :func:`regenerate_shared`; the flag says whether it cloned anything."""
    entry = module.entry
    groups, owner = _checked_groups(entry, groups)
    users: dict[str, list[str]] = {}
    for instr in entry.instructions:
        for operand in dict.fromkeys(instr.operands):
            users.setdefault(operand, []).append(instr.name)

    def written_anyway(name: str, gi: int) -> bool:
        """Whether member ``name`` of group ``gi`` stays an output whatever is cloned: the
        root or an instruction left unfused reads it, or another group does and it is
        not cheap to recompute."""
        outside = [u for u in users.get(name, ()) if owner.get(u) != gi]
        return (
            name == entry.root_name
            or any(u not in owner for u in outside)
            or (bool(outside) and entry.instruction(name).opcode not in REGENERATED_OPCODES)
        )

    def chain(name: str, gi: int) -> list[str] | None:
        """``name`` and the members of group ``gi`` it is computed from, operands first
        (a member written out anyway is read, not recomputed); None when one of them is
        not cheap to recompute."""
        instr = entry.instruction(name)
        if instr.opcode not in REGENERATED_OPCODES or instr.control_predecessors:
            return None
        out: list[str] = []
        for operand in instr.operands:
            if owner.get(operand) == gi and not written_anyway(operand, gi):
                inner = chain(operand, gi)
                if inner is None:
                    return None
                out.extend(n for n in inner if n not in out)
                if len(out) >= MAX_REGENERATED_CHAIN:
                    return None
        return [*out, name]

    # clones[name] = [(target group, {member: clone name})]; redirect[user][member] = clone.
    clones: dict[str, list[tuple[int, dict[str, str]]]] = {}
    redirect: dict[str, dict[str, str]] = {}
    taken = {i.name for i in entry.instructions}
    counter = itertools.count()
    # Members of groups, then values left out of every group that a group reads.
    candidates: list[tuple[str, int | None]] = [(n, gi) for gi, g in enumerate(groups) for n in g]
    candidates += [(i.name, None) for i in entry.instructions if _lone_regenerated(i, owner)]
    lone: set[str] = set()
    for name, gi in candidates:
        if name not in entry:
            continue  # apply_fusion names it
        outside = [u for u in users.get(name, ()) if owner.get(u) != gi]
        targets = list(dict.fromkeys(owner[u] for u in outside if u in owner))
        if name == entry.root_name or not targets or (gi is not None and written_anyway(name, gi)):
            continue  # a value written out anyway is read, not recomputed
        members = [name] if gi is None else chain(name, gi)
        if members is None:
            continue
        if gi is None:
            lone.add(name)
        for target in targets:
            copy: dict[str, str] = {}
            for member in members:
                while (fresh := f"{member}.regen.{next(counter)}") in taken:
                    pass
                taken.add(fresh)
                copy[member] = fresh
            clones.setdefault(name, []).append((target, copy))
            groups[target].extend(copy.values())
            for user in outside:
                if owner.get(user) == target:
                    redirect.setdefault(user, {})[name] = copy[name]
    if not clones:
        return module, groups, False

    instructions: list[HloInstruction] = []
    for instr in entry.instructions:
        mapping = redirect.get(instr.name)
        instructions.append(
            instr.replace(operands=tuple(mapping.get(o, o) for o in instr.operands))
            if mapping
            else instr
        )
        for _, copy in clones.get(instr.name, ()):
            for member, fresh in copy.items():
                original = entry.instruction(member)
                instructions.append(
                    original.replace(
                        name=fresh,
                        operands=tuple(copy.get(o, o) for o in original.operands),
                        control_predecessors=(),
                    )
                )
    # Members nothing reads any more (their readers now read clones) are dead, and so,
    # in turn, may be the members they read.
    readers: dict[str, int] = {}
    for instr in instructions:
        for operand in dict.fromkeys(instr.operands):
            readers[operand] = readers.get(operand, 0) + 1
    by_name = {i.name: i for i in instructions}
    fused = (
        set(owner)
        | lone
        | {c for copies in clones.values() for _, copy in copies for c in copy.values()}
    )
    pending = [n for n in fused if n != entry.root_name and not readers.get(n)]
    dead: set[str] = set()
    while pending:
        name = pending.pop()
        if name in dead:
            continue
        dead.add(name)
        for operand in dict.fromkeys(by_name[name].operands):
            readers[operand] -= 1
            if not readers[operand] and operand in fused and operand != entry.root_name:
                pending.append(operand)
    instructions = [
        i.replace(control_predecessors=tuple(c for c in i.control_predecessors if c not in dead))
        for i in instructions
        if i.name not in dead
    ]
    new_groups = [[n for n in g if n not in dead] for g in groups]
    new_entry = HloComputation(
        entry.name, tuple(instructions), entry.root_name, entry.execution_thread
    )
    computations = dict(module.computations)
    computations[entry.name] = new_entry
    return (
        HloModule(
            module.name,
            FrozenDict(computations),
            module.entry_name,
            module.attributes,
            module.stack_frames,
        ),
        [g for g in new_groups if len(g) > 1],
        True,
    )


def _lone_regenerated(instr: HloInstruction, owner: Mapping[str, int]) -> bool:
    """Whether ``instr``, in no group, is cloned into the groups that read it: a
    broadcast or iota, values that read (next to) nothing and that XLA fuses into each
    consumer rather than writing out; a grouping leaving one alone would otherwise
    write it at full size for its readers."""
    return (
        instr.name not in owner
        and instr.opcode in ("broadcast", "iota")
        and not instr.control_predecessors
    )


# Kinds XLA:CPU runs as kernels of their own without a fusion around them (library calls,
# in-place updates, copies, views). Every other fusible instruction left out of a fusion
# is wrapped in a one-instruction kLoop fusion by :func:`wrap_unfused`, as XLA's own
# ``fusion-wrapper`` pass does (observed on jaxlib 0.10.2 with its fusion pass off).
# Unwrapped, XLA:CPU emits them through other code paths whose results differ: a
# training step's updated parameters were off by up to 6% (rnnlm_l2_scan).
CPU_UNWRAPPED_OPCODES: frozenset[str] = frozenset({
    "constant", "bitcast", "dot", "convolution", "concatenate", "dynamic-update-slice", "copy",
})  # fmt: skip
# Attributes naming computations that run as control flow (not per element).
_CONTROL_ATTRIBUTES = ("body", "condition", "true_computation", "false_computation",
                       "branch_computations")  # fmt: skip


def wrap_alone(module: HloModule, opcodes: frozenset[str] = CPU_EMITTER_NOT_FUSIBLE) -> HloModule:
    """Wraps every entry instruction of the given opcodes in a fusion of its own.

    XLA's CPU thunk emitter cannot emit an unfused ``scatter``; XLA's own pipeline wraps
    it (``wrapped_scatter``, fusion kind kLoop), as this does for modules whose fusion
    passes were replaced by ours. The fusion keeps the instruction's name, so schedules
    and profiles by name still find it.

    Args:
      module: a module (e.g. after :func:`apply_fusion`).
      opcodes: the opcodes to wrap.

    Returns:
      The module with those instructions replaced by one-instruction fusions.
    """
    return _wrap(module, lambda i: i.opcode in opcodes, [module.entry_name])


def wrap_unfused(module: HloModule) -> HloModule:
    r"""Wraps every fusible instruction outside a fusion in a fusion of its own, as XLA's
    ``fusion-wrapper`` pass does, in the entry and in the computations it runs as control
    flow (``while`` bodies and conditions, ``conditional`` branches, ``call``\ s).

    Compile a module fused by :func:`apply_fusion` through this: with XLA's fusion
    passes off, instructions left bare are emitted by other code paths of XLA:CPU that
    compute different results (see :data:`CPU_UNWRAPPED_OPCODES`).

    Args:
      module: a module.

    Returns:
      The module with every bare fusible instruction (not of
      :data:`CPU_UNWRAPPED_OPCODES`) replaced by a one-instruction kLoop fusion of the
      same name.
    """
    control = _control(module)

    def bare(instr: HloInstruction) -> bool:
        return not (
            instr.opcode in NOT_FUSIBLE
            or instr.opcode in CPU_UNWRAPPED_OPCODES
            or instr.shape.is_tuple
        )

    return _wrap(module, bare, control)


def wrap_named(module: HloModule, names: Mapping[str, str | None] | Iterable[str]) -> HloModule:
    """Wraps the named bare instructions of the entry and its control-flow computations in
    one-instruction kLoop fusions of the same name (names not found are skipped).

    Args:
      module: a module.
      names: the names, or a mapping name -> backend config of its fusion (as
        :func:`unwrap_fusions` returns it).
    """
    configs = dict(names) if isinstance(names, Mapping) else dict.fromkeys(names)
    return _wrap(
        module,
        lambda i: i.name in configs and i.opcode != "fusion",
        _control(module),
        config=lambda i: configs[i.name],
    )


def unwrap_fusions(module: HloModule) -> tuple[HloModule, dict[str, str | None]]:
    """Inlines every one-instruction loop fusion of the entry and its control-flow
    computations (XLA's ``fusion-wrapper`` output): the inverse of :func:`wrap_unfused`.

    Custom fusions (``kind=kCustom``: XLA:CPU's library kernels, YNNPACK matmuls,
    convolutions and reductions) stay: XLA's library rewrite made them, not its fusion
    pass, and XLA's default compile runs them so.

    XLA:CPU assigns layouts knowing which instructions are wrapped; capturing the module
    after its ``fusion-wrapper`` pass and unwrapping it gives a pre-fusion module whose
    layouts XLA's emitters handle, unlike one captured with ``fusion-wrapper`` off (whose
    bare instructions can read operands in layouts that compile to wrong results).

    Args:
      module: a module with single-instruction fusions.

    Returns:
      ``(module, wrapped)``: the unwrapped module (each inlined instruction takes its
      fusion's name and shape) and, per name of an instruction that was wrapped, its
      fusion's backend config (re-wrap what stays unfused with :func:`wrap_named`).
    """
    computations = dict(module.computations)
    unwrapped: dict[str, str | None] = {}
    inlined: set[str] = set()
    for comp_name in _control(module):
        comp = module.computations[comp_name]
        new_instructions = []
        for instr in comp.instructions:
            called = (
                module.computations.get(instr.attributes.get("calls", "").lstrip("%"))
                if instr.opcode == "fusion"
                else None
            )
            body = [i for i in called.instructions if i.opcode != "parameter"] if called else []
            if (
                called is None
                or len(body) != 1
                or body[0].name != called.root_name
                or instr.attributes.get("kind") == "kCustom"
            ):
                new_instructions.append(instr)
                continue
            inner = body[0]
            params = {
                i.name: i.parameter_number for i in called.instructions if i.opcode == "parameter"
            }
            operands = tuple(instr.operands[params[o]] for o in inner.operands)
            new_instructions.append(
                inner.replace(
                    name=instr.name,
                    shape=instr.shape,
                    operands=operands,
                    control_predecessors=instr.control_predecessors,
                    metadata=instr.metadata or inner.metadata,
                )
            )
            unwrapped[instr.name] = instr.backend_config
            inlined.add(called.name)
        computations[comp_name] = HloComputation(
            comp.name, tuple(new_instructions), comp.root_name, comp.execution_thread
        )
    if not unwrapped:
        return module, {}
    kept = {n: c for n, c in computations.items() if n not in inlined}
    return (
        HloModule(
            module.name, FrozenDict(kept), module.entry_name, module.attributes, module.stack_frames
        ),
        unwrapped,
    )


def control_flow_computations(module: HloModule) -> list[str]:
    """The computations the entry runs as control flow (``while`` bodies and conditions,
    ``conditional`` branches, ``call`` targets), transitively; the entry not included."""
    return _control(module)[1:]


def _control(module: HloModule) -> list[str]:
    """The entry and the computations it runs as control flow, transitively."""
    control: list[str] = []
    pending = [module.entry_name]
    while pending:
        name = pending.pop()
        if name in control or name not in module.computations:
            continue
        control.append(name)
        for instr in module.computations[name].instructions:
            keys = _CONTROL_ATTRIBUTES + (("to_apply",) if instr.opcode == "call" else ())
            for key in keys:
                if key in instr.attributes:
                    pending.extend(computation_names(instr.attributes[key]))
    return control


def _wrap(
    module: HloModule,
    select: Callable[[HloInstruction], bool],
    scope: Sequence[str],
    *,
    config: Callable[[HloInstruction], str | None] = lambda _: None,
) -> HloModule:
    """Replaces the selected instructions of the ``scope`` computations by one-instruction
    kLoop fusions of the same name; ``config`` gives each one's backend config (e.g. the
    ``outer_dimension_partitions`` XLA's parallel task assignment wrote)."""
    computations = dict(module.computations)
    created: dict[str, list[str]] = {}  # scope computation -> fused computations it calls
    for comp_name in scope:
        comp = module.computations[comp_name]
        new_instructions = []
        for instr in comp.instructions:
            if not select(instr):
                new_instructions.append(instr)
                continue
            fused_name = f"hlo_go_wrapped_{instr.name}"
            created.setdefault(comp_name, []).append(fused_name)
            operands = list(dict.fromkeys(instr.operands))
            params = [
                HloInstruction(
                    f"{instr.name}.param_{k}", "parameter", comp.instruction(o).shape,
                    parameter_number=k,
                )
                for k, o in enumerate(operands)
            ]  # fmt: skip
            rename = {o: p.name for o, p in zip(operands, params, strict=True)}
            inner = instr.replace(
                operands=tuple(rename[o] for o in instr.operands), control_predecessors=()
            )
            computations[fused_name] = HloComputation(fused_name, (*params, inner), inner.name)
            new_instructions.append(
                HloInstruction(
                    instr.name,
                    "fusion",
                    instr.shape,
                    tuple(operands),
                    FrozenDict({"kind": "kLoop", "calls": f"%{fused_name}"}),
                    backend_config=config(instr),
                    control_predecessors=instr.control_predecessors,
                )
            )
        computations[comp_name] = HloComputation(
            comp.name, tuple(new_instructions), comp.root_name, comp.execution_thread
        )
    if not created:
        return module
    # XLA's parser wants a computation defined before its callers: each new fused
    # computation goes right before the one calling it (after the reducers it calls).
    ordered: dict[str, HloComputation] = {}
    for name in module.computations:
        ordered.update({f: computations[f] for f in created.get(name, ())})
        ordered[name] = computations[name]
    return HloModule(
        module.name, FrozenDict(ordered), module.entry_name, module.attributes, module.stack_frames
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


def adopt_control_flow(module: HloModule, fused: HloModule) -> tuple[HloModule, list[str]]:
    """``module`` with the computations its entry runs as control flow (``while`` bodies
    and conditions, ``conditional`` branches, transitively) taken from ``fused``: XLA's
    own fusion of the same pre-fusion module.

    Our graph (:func:`hlo_go.graph.build_graph`) models the entry computation: a
    ``while`` is one node, so fusion decisions never reach its body. Left unfused (one
    wrapped kernel per instruction), a scanned model's loop body — where nearly all its
    time goes — runs about twice as slow as XLA's fused one. Adopting XLA's fusion there
    makes a lowering differ from XLA's default only in what the decisions decide.

    A computation is adopted only when ``fused`` has one of the same name with the same
    parameter and result shapes (else ours stays). The computations an adopted one calls
    (fused computations, reducers) come along, renamed ``xla.NAME`` where ``module``
    already has a different computation of that name.

    Args:
      module: a module fused by :func:`apply_fusion` (and wrapped).
      fused: XLA's fused module, captured at the same stage (same instruction names).

    Returns:
      ``(module, adopted)``: the new module and the names of the adopted computations.
    """
    ours = dict(module.computations)
    adopted = [
        name
        for name in control_flow_computations(module)
        if name in fused.computations
        and _signature(fused.computations[name]) == _signature(ours[name])
    ]
    if not adopted:
        return module, []
    computations = dict(ours)
    renames: dict[str, str] = {}
    brought: list[str] = []
    pending = list(adopted)
    seen = set(adopted)
    while pending:
        comp = fused.computations[pending.pop()]
        for instr in comp.instructions:
            for callee in instr.called_computations:
                if callee in seen:
                    continue
                seen.add(callee)
                pending.append(callee)
                brought.append(callee)
                if callee in ours and ours[callee] != fused.computations[callee]:
                    new = f"xla.{callee}"
                    while new in ours or new in fused.computations:
                        new = f"xla.{new}"
                    renames[callee] = new
    for name in adopted + brought:
        comp = fused.computations[name]
        if renames:
            comp = _renamed_callees(comp, renames)
        computations[renames.get(name, name)] = dataclasses.replace(
            comp, name=renames.get(name, name)
        )
    return (
        HloModule(
            module.name,
            FrozenDict(_callees_first(computations, module.entry_name)),
            module.entry_name,
            module.attributes,
            module.stack_frames,
        ),
        adopted,
    )


def _signature(comp: HloComputation) -> tuple[object, ...]:
    """Parameter shapes in order, then the root's shape."""
    by_name = {i.name: i for i in comp.instructions}
    params = sorted(
        (i.parameter_number, str(i.shape)) for i in comp.instructions if i.opcode == "parameter"
    )
    return (*params, str(by_name[comp.root_name].shape))


def _renamed_callees(comp: HloComputation, renames: dict[str, str]) -> HloComputation:
    """``comp`` with every attribute naming a computation in ``renames`` rewritten."""
    instructions = []
    for instr in comp.instructions:
        changed = {}
        for key, value in instr.attributes.items():
            names = computation_names(value) if key in COMPUTATION_ATTRIBUTES else []
            if any(n in renames for n in names):
                new = [f"%{renames.get(n, n)}" for n in names]
                changed[key] = (
                    "{" + ", ".join(new) + "}" if value.strip().startswith("{") else new[0]
                )
        if changed:
            instr = instr.replace(attributes=FrozenDict({**instr.attributes, **changed}))
        instructions.append(instr)
    return dataclasses.replace(comp, instructions=tuple(instructions))


def _callees_first(
    computations: dict[str, HloComputation], entry: str
) -> dict[str, HloComputation]:
    """The computations ordered callees before callers, the entry last; computations no
    longer called from the entry are dropped."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order or name in visiting or name not in computations:
            return
        visiting.add(name)
        for instr in computations[name].instructions:
            for callee in instr.called_computations:
                visit(callee)
        order.append(name)

    visit(entry)
    return {name: computations[name] for name in order}
