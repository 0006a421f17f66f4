"""Schedules written into XLA's compile: list scheduling by priority, imposed after
XLA's own scheduler.

XLA's CPU runtime runs the entry computation's instructions in the order of the
module's schedule. :func:`apply_schedule` reorders the entry computation and marks
the module scheduled; :func:`compile_with` hands XLA our fused module before
scheduling and our order after it, so the executable runs exactly that order.
"""

from __future__ import annotations

import contextlib
import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hlo_go.errors import HloGoError
from hlo_go.hlo import FrozenDict, HloComputation, HloModule, parse_hlo


class ScheduleError(ValueError, HloGoError):
    """An order that is not a permutation of the computation or breaks a dependency."""


# Opcodes that define no buffer of their own: they alias an operand's (or, for
# parameters and constants, memory XLA does not count as temporaries).
_NO_BUFFER = frozenset({"bitcast", "get-tuple-element", "tuple", "parameter", "constant"})


class _Buffers:
    """The liveness model :func:`peak_bytes` and :func:`memory_schedule` share.

    Every instruction outside :data:`_NO_BUFFER` defines one buffer, the bytes of its
    array leaves. A read through bitcasts, tuples and get-tuple-elements is a read of
    the buffers underneath. A buffer dies when its last reader has run; buffers the
    root reaches (the outputs) never die. In-place reuse and XLA's buffer sharing are not
    modelled, so the figures approximate XLA's temporaries, mostly from above.
    """

    def __init__(self, computation: HloComputation) -> None:
        self.size: dict[str, int] = {}
        owners: dict[str, frozenset[str]] = {}
        for instr in computation.instructions:
            if instr.opcode in _NO_BUFFER:
                owners[instr.name] = frozenset().union(*(owners[o] for o in instr.operands))
            else:
                self.size[instr.name] = sum(leaf.byte_size() for leaf in instr.shape.leaves())
                owners[instr.name] = frozenset({instr.name})
        self.reads: dict[str, frozenset[str]] = {
            i.name: frozenset().union(*(owners[o] for o in i.operands))
            for i in computation.instructions
            if i.opcode not in _NO_BUFFER
        }
        self.outputs = owners[computation.root_name]
        self.readers: dict[str, int] = dict.fromkeys(self.size, 0)
        for buffers in self.reads.values():
            for b in buffers:
                self.readers[b] += 1


def _check_order(computation: HloComputation, order: Sequence[str]) -> None:
    """Raises :class:`ScheduleError` unless ``order`` lists each instruction once."""
    names = [i.name for i in computation.instructions]
    if len(order) != len(names) or set(order) != set(names):
        missing = sorted(set(names) - set(order))[:5]
        unknown = sorted(set(order) - set(names))[:5]
        raise ScheduleError(
            f"order of {computation.name!r} must list each instruction once; "
            f"missing {missing}, unknown {unknown}"
        )


def peak_bytes(computation: HloComputation, order: Sequence[str]) -> int:
    """The most bytes live at once when ``computation`` runs in ``order``, under the
    model of :class:`_Buffers` (an instruction's operands and result are live together
    while it runs).

    Raises:
      ScheduleError: ``order`` does not list each instruction once.
    """
    _check_order(computation, order)
    model = _Buffers(computation)
    left = dict(model.readers)
    live = peak = 0
    for name in order:
        if name not in model.size:
            continue
        live += model.size[name]
        peak = max(peak, live)
        for b in model.reads[name]:
            left[b] -= 1
        dead = [b for b in (*model.reads[name], name) if left[b] == 0]
        live -= sum(model.size[b] for b in dead if b not in model.outputs)
    return peak


def _dependencies(computation: HloComputation) -> tuple[dict[str, list[str]], dict[str, int]]:
    """``(users, waiting)``: who reads each instruction (operands and control edges), and
    how many instructions each one waits for."""
    deps = {i.name: set(i.operands) | set(i.control_predecessors) for i in computation.instructions}
    users: dict[str, list[str]] = {}
    for name, ds in deps.items():
        for d in ds:
            users.setdefault(d, []).append(name)
    return users, {n: len(ds) for n, ds in deps.items()}


def memory_schedule(computation: HloComputation, order: Sequence[str]) -> list[str]:
    """``order`` (e.g. XLA's own schedule) with instructions that free memory run early.

    A list schedule: among the ready instructions, one whose run frees more bytes than
    it defines (it is the last reader of a large operand) runs first, the one freeing
    the most; when none does, the ready instruction earliest in ``order``. Each such
    move lowers the bytes live between the instruction's new and old places, e.g. a loss
    that is the last reader of the logits runs before the softmax gradient that writes a
    tensor of the same size.

    Args:
      computation: the computation (usually a scheduled entry).
      order: its instruction names in a valid order, the tie-break.

    Returns:
      The new order, or ``order`` itself where the new one's :func:`peak_bytes` is not
      lower.

    Raises:
      ScheduleError: ``order`` does not list each instruction once.
    """
    _check_order(computation, order)
    model = _Buffers(computation)
    position = {n: k for k, n in enumerate(order)}
    users, waiting = _dependencies(computation)
    left = dict(model.readers)
    ready = {n for n, w in waiting.items() if w == 0}
    new: list[str] = []
    while ready:
        best, best_net = min(ready, key=position.__getitem__), 0
        for name in ready:
            if name not in model.size:
                continue
            freed = sum(
                model.size[b] for b in model.reads[name] if left[b] == 1 and b not in model.outputs
            )
            net = model.size[name] - freed
            if net < best_net or (net == best_net < 0 and position[name] < position[best]):
                best, best_net = name, net
        ready.remove(best)
        new.append(best)
        for b in model.reads.get(best, ()):
            left[b] -= 1
        for user in users.get(best, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.add(user)
    if len(new) != len(order):
        raise ScheduleError(f"computation {computation.name!r} has a dependency cycle")
    return new if peak_bytes(computation, new) < peak_bytes(computation, order) else list(order)


def list_schedule(computation: HloComputation, priority: Mapping[str, float]) -> list[str]:
    """A dependency-respecting order: whenever several instructions are ready, the one
    with the highest priority runs first (ties: text order, i.e. FIFO).

    Args:
      computation: the computation to order.
      priority: per instruction name; instructions without one (e.g. copies XLA
        inserted) get +inf, so they run as soon as they are ready.

    Returns:
      Instruction names in execution order.
    """
    names = [i.name for i in computation.instructions]
    position = {n: k for k, n in enumerate(names)}
    users, waiting = _dependencies(computation)
    heap = [(-priority.get(n, math.inf), position[n], n) for n in names if waiting[n] == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        _, _, name = heapq.heappop(heap)
        order.append(name)
        for user in users.get(name, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(heap, (-priority.get(user, math.inf), position[user], user))
    if len(order) != len(names):
        raise ScheduleError(f"computation {computation.name!r} has a dependency cycle")
    return order


# Ops XLA inserts between the module it is given before scheduling and the one it
# schedules that only copy or re-view a value: transparent when matching the two.
_TRANSPARENT = frozenset({"copy", "bitcast"})


def _structure(module: HloModule, name: str) -> tuple[str, tuple[str, ...], str | None]:
    """``(opcode, dims and dtype, literal)`` of an entry instruction; a fusion of a
    single op (XLA:CPU wraps each unfused op so on jaxlib >= 0.12) counts as that op."""
    inst = module.entry.instruction(name)
    opcode = inst.opcode
    called = inst.called_computations if opcode == "fusion" else ()
    if len(called) == 1 and called[0] in module.computations:
        body = [i for i in module.computations[called[0]].instructions if i.opcode != "parameter"]
        if len(body) == 1:
            opcode = body[0].opcode
    shape = inst.shape
    return opcode, (shape.dtype, *map(str, shape.dims)), inst.literal


def names_by_structure(scheduled: HloModule, reference: HloModule) -> dict[str, str]:
    """Which instruction of ``reference``'s entry each of ``scheduled``'s entry computes.

    XLA renames instructions between the module it is handed before scheduling and the
    one it schedules (XLA:CPU on jaxlib >= 0.12 wraps each unfused op in a fusion named
    ``wrapped_<op>``), so names do not carry over. Two instructions match when they
    have the same opcode (a single-op fusion counts as its op), dtype, dimensions and
    literal, and their operands match in order; parameters match by number; copies and
    bitcasts XLA inserted are seen through. Instructions with no counterpart (XLA's
    own additions) are left out.

    Args:
      scheduled: the module at XLA's post-scheduler hook.
      reference: the module the names to translate to come from (the one swapped in
        before scheduling, or XLA's at the pre-scheduler hook).

    Returns:
      ``scheduled`` name -> ``reference`` name.
    """
    candidates: dict[tuple[Any, ...], list[str]] = {}
    for inst in reference.entry.instructions:
        key: tuple[Any, ...]
        if inst.opcode == "parameter":
            key = ("parameter", inst.parameter_number)
        else:
            key = (*_structure(reference, inst.name), inst.operands)
        candidates.setdefault(key, []).append(inst.name)
    matched: dict[str, str] = {}
    seen_as: dict[str, str] = {}  # scheduled name -> the reference name it carries
    for inst in scheduled.entry.instructions:
        operands = tuple(seen_as.get(o, "") for o in inst.operands)
        if inst.opcode == "parameter":
            key = ("parameter", inst.parameter_number)
        else:
            key = (*_structure(scheduled, inst.name), operands)
        names = candidates.get(key)
        if names:
            matched[inst.name] = seen_as[inst.name] = names.pop(0)
        elif inst.opcode in _TRANSPARENT and len(operands) == 1 and operands[0]:
            seen_as[inst.name] = operands[0]
    return matched


def apply_schedule(module: HloModule, order: Sequence[str]) -> HloModule:
    """The module with its entry computation in ``order`` and marked ``is_scheduled``.

    Raises:
      ScheduleError: ``order`` is not a permutation of the entry's instructions, or
        runs an instruction before one of its operands or control predecessors.
    """
    entry = module.entry
    if sorted(order) != sorted(i.name for i in entry.instructions):
        missing = {i.name for i in entry.instructions} - set(order)
        extra = set(order) - {i.name for i in entry.instructions}
        raise ScheduleError(
            f"order must list each entry instruction once; missing {sorted(missing)[:5]}, "
            f"unknown {sorted(extra)[:5]}"
        )
    done: set[str] = set()
    for name in order:
        instr = entry.instruction(name)
        for dep in (*instr.operands, *instr.control_predecessors):
            if dep not in done:
                raise ScheduleError(f"{name!r} is scheduled before its dependency {dep!r}")
        done.add(name)
    new_entry = HloComputation(
        entry.name,
        tuple(entry.instruction(n) for n in order),
        entry.root_name,
        entry.execution_thread,
    )
    computations = dict(module.computations)
    computations[entry.name] = new_entry
    attributes = {
        "is_scheduled": "true",
        **{k: v for k, v in module.attributes.items() if k != "is_scheduled"},
    }
    return HloModule(
        module.name,
        FrozenDict(computations),
        entry.name,
        FrozenDict(attributes),
        module.stack_frames,
    )


def compile_with(
    lowered: Any,
    *,
    module: HloModule | None = None,
    priority: Mapping[str, float] | None = None,
    reorder: Callable[[HloComputation, list[str]], list[str]] | None = None,
    platform: str = "cpu",
) -> tuple[Any, list[str] | None]:
    """Compiles ``lowered`` through XLA's pipeline (fusion passes off), with
    ``module`` (e.g. from :func:`hlo_go.xla.apply_fusion`) swapped in before
    scheduling and, if ``priority`` is given, the entry list-scheduled by it after
    XLA's scheduler (or, if ``reorder`` is, put in the order it gives; see
    :func:`compile_hooked`).

    Returns:
      ``(compiled, order)``: the ``jax.stages.Compiled`` and the entry order imposed
      (None when no priority was given).
    """
    module_name = lowered.compiler_ir("hlo").as_hlo_module().name
    return compile_hooked(
        lambda options: lowered.compile(compiler_options=options),
        module_name,
        module=module,
        priority=priority,
        reorder=reorder,
        platform=platform,
    )


def compile_hooked(
    compile_fn: Callable[[dict[str, Any]], Any],
    module_name: str,
    *,
    module: HloModule | None = None,
    priority: Mapping[str, float] | None = None,
    reorder: Callable[[HloComputation, list[str]], list[str]] | None = None,
    platform: str = "cpu",
    stage: str | None = None,
) -> tuple[Any, list[str] | None]:
    """:func:`compile_with` for any compile: ``compile_fn(compiler_options)`` runs XLA's
    pipeline on the module named ``module_name`` (a ``jax.stages.Lowered``'s ``compile``,
    or :func:`hlo_go.xla.compile_hlo` of HLO text) while the hooks are registered.

    Args:
      compile_fn: compiles with the given XLA compiler options and returns the result.
      module_name: the HLO module's name (the hooks ignore every other module).
      module: swapped in before scheduling; None keeps XLA's (unfused) module.
      priority: list-schedule the entry by these priorities after XLA's scheduler (per
        instruction name of ``module``, or of XLA's module before scheduling when
        ``module`` is None, carried over to the scheduled module's renamed instructions
        by :func:`names_by_structure`; instructions with none run as soon as ready);
        None keeps XLA's order.
      reorder: with no ``priority``, the entry's order after XLA's scheduler from the
        entry and XLA's order (e.g. :func:`memory_schedule`); None keeps XLA's.
      platform: XLA platform.
      stage: where ``module`` is swapped in (:func:`hlo_go.xla.hooks.lowering_stage`; None:
        ``platform``'s). At ``"post_scheduler"`` (XLA:GPU) the swap and the order are one
        hook: the module handed back is ``module`` (or XLA's scheduled module) in the
        imposed order, or in its own order when none is imposed, marked scheduled.

    Returns:
      ``(compiled, order)`` as :func:`compile_with` (the order is None when neither
      ``priority`` nor ``reorder`` was given).

    Raises:
      ScheduleError: the imposed order breaks a dependency.
      RuntimeError: XLA's compile never reached a hook (a module of another name).
    """
    from hlo_go.xla._jaxlib import xla_module_to_text, xla_parse
    from hlo_go.xla.hooks import (
        PREFUSION_COMPILER_OPTIONS,
        compile_uncached,
        hlo_hook,
        lowering_stage,
        wrapped_compiler_options,
    )

    stage = lowering_stage(platform) if stage is None else stage
    if stage == "post_scheduler":
        return _compile_swapped_scheduled(
            compile_fn, module_name, module=module, priority=priority, reorder=reorder,
            platform=platform, options=wrapped_compiler_options(platform),
        )  # fmt: skip
    fired = {"pre": False, "post": priority is None and reorder is None}
    imposed: list[str] = []
    errors: list[Exception] = []
    handed: list[HloModule] = [module] if module is not None else []

    def swap(before: Any) -> bytes | None:
        fired["pre"] = True
        if module is None:  # XLA's own module: the names priorities refer to
            handed.append(parse_hlo(xla_module_to_text(before)))
            return None
        return xla_parse(module.to_text()).as_serialized_hlo_module_proto()

    def order(scheduled: Any) -> bytes | None:
        fired["post"] = True
        current = parse_hlo(xla_module_to_text(scheduled))
        try:
            if priority is not None:
                imposed[:] = list_schedule(current.entry, _translated(priority, current))
            else:
                assert reorder is not None
                imposed[:] = reorder(current.entry, [i.name for i in current.entry.instructions])
            reordered = apply_schedule(current, imposed)
        except ScheduleError as error:  # XLA would only say "callback failed"
            errors.append(error)
            raise
        return xla_parse(reordered.to_text()).as_serialized_hlo_module_proto()

    def _translated(by_name: Mapping[str, float], current: HloModule) -> dict[str, float]:
        # Priorities by the handed module's names, for the scheduled module's instructions.
        names = names_by_structure(current, handed[0]) if handed else {}
        out = {n: by_name[r] for n, r in names.items() if r in by_name}
        return out | {i.name: by_name[i.name] for i in current.entry.instructions
                      if i.name in by_name}  # fmt: skip

    with contextlib.ExitStack() as stack:
        if module is not None or priority is not None:
            stack.enter_context(hlo_hook(swap, module_name=module_name, platform=platform))
        else:
            fired["pre"] = True
        if priority is not None or reorder is not None:
            stack.enter_context(
                hlo_hook(order, module_name=module_name, stage="post_scheduler", platform=platform)
            )
        try:
            compiled = compile_uncached(compile_fn, PREFUSION_COMPILER_OPTIONS)  # hooks fire
        except Exception:
            if errors:
                raise errors[0] from None
            raise
    if not all(fired.values()):
        raise RuntimeError(f"XLA's compile of {module_name!r} did not reach every hook: {fired}")
    return compiled, (imposed if priority is not None or reorder is not None else None)


def _compile_swapped_scheduled(
    compile_fn: Callable[[dict[str, Any]], Any],
    module_name: str,
    *,
    module: HloModule | None,
    priority: Mapping[str, float] | None,
    reorder: Callable[[HloComputation, list[str]], list[str]] | None,
    platform: str,
    options: Mapping[str, Any],
) -> tuple[Any, list[str] | None]:
    """:func:`compile_hooked` at the post-scheduler hook alone: ``module`` (or XLA's own
    scheduled module) handed back in the imposed order, marked scheduled."""
    from hlo_go.xla._jaxlib import xla_module_to_text, xla_parse
    from hlo_go.xla.hooks import compile_uncached, hlo_hook

    imposed: list[str] = []
    errors: list[Exception] = []
    fired: list[bool] = []

    def swap(scheduled: Any) -> bytes | None:
        fired.append(True)
        if module is None and priority is None and reorder is None:
            return None
        current = module if module is not None else parse_hlo(xla_module_to_text(scheduled))
        order = [i.name for i in current.entry.instructions]
        try:
            if priority is not None:
                known = {i.name for i in current.entry.instructions}
                order = list_schedule(
                    current.entry, {n: p for n, p in priority.items() if n in known}
                )
            elif reorder is not None:
                order = reorder(current.entry, order)
            imposed[:] = order
            handed = apply_schedule(current, order)
        except ScheduleError as error:  # XLA would only say "callback failed"
            errors.append(error)
            raise
        return xla_parse(handed.to_text()).as_serialized_hlo_module_proto()

    with hlo_hook(swap, module_name=module_name, stage="post_scheduler", platform=platform):
        try:
            compiled = compile_uncached(compile_fn, options)
        except Exception:
            if errors:
                raise errors[0] from None
            raise
    if not fired:
        raise RuntimeError(
            f"XLA's compile of {module_name!r} did not reach the post-scheduler hook"
        )
    return compiled, (imposed if priority is not None or reorder is not None else None)
