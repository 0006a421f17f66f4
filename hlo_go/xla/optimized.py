"""A pre-fusion module recovered from one XLA printed after optimizing it.

``jax.jit(f).lower(x).compile().as_text()`` and XLA's ``*after_optimizations*`` dumps
print the module XLA code-generated: fusions (with backend configs XLA:CPU's emitter
insists on), async pairs (``all-reduce-start``/``-done``, ``async-start``/``-done``,
``copy-start``/``-done``), layouts, bitcasts and ``is_scheduled=true``. Compiled again
through :func:`hlo_go.xla.compile_hlo_text` (HLO → StableHLO → executable), such a module
aborts the process inside XLA (``RET_CHECK ... Fusion must have backend config``).

:func:`recover_prefusion` undoes what can be undone without changing what the module
computes: every fusion's computation is inlined into its caller (recursively; the
computation's root takes the fusion's place), every async pair becomes its synchronous
instruction (``<op>-start``/``-update``/``-done`` the ``<op>`` of the start's operands and
attributes; ``async-start``/``-done`` the wrapped computation inlined), every computation
runs on the main thread, and bitcasts are expanded (:func:`hlo_go.xla.segments.portable_module`),
since layouts do not survive the conversion to StableHLO. What stays is a module XLA
compiles from the start, its fusion passes included. What cannot be undone
(host transfers, ``send``/``recv``) raises :class:`OptimizedModuleError` before XLA
sees the module, naming what to pass instead.
"""

from __future__ import annotations

from collections.abc import Callable

from hlo_go.errors import HloGoError
from hlo_go.hlo import HloComputation, HloInstruction, HloModule
from hlo_go.hlo.ir import FrozenDict, reachable_computations
from hlo_go.xla.segments import portable_module

# What to pass instead of a module that cannot be recovered.
PASS_INSTEAD = (
    "pass the module before optimization (jax.jit(f).lower(...).as_text(dialect='hlo'), "
    "or XLA's *before_optimizations* dump) or the function itself"
)

# Instructions of an optimized module with no synchronous form to recover.
UNRECOVERABLE = frozenset({"send", "send-done", "recv", "recv-done"})

# Attributes of an async start that its synchronous form does not take.
_ASYNC_ONLY = frozenset({"async_execution_thread"})

# Header attributes XLA sets on the module it scheduled.
_SCHEDULE_HEADER = frozenset({"is_scheduled"})


class OptimizedModuleError(ValueError, HloGoError):
    """A module XLA printed after optimizing it, which hlo-go cannot turn back into one
    XLA compiles from the start; the message names the instruction and what to pass."""


def is_optimized(module: HloModule) -> bool:
    """Whether ``module`` holds anything only XLA's optimizing pipeline makes: fusions,
    async pairs, or ``is_scheduled=true``."""
    if module.attributes.get("is_scheduled") == "true":
        return True
    return any(_is_post_optimization(instr.opcode) for _, instr in module.instructions())


def _is_post_optimization(opcode: str) -> bool:
    return (
        opcode == "fusion"
        or opcode.startswith("async-")
        or opcode.endswith(("-start", "-done"))
        or opcode in UNRECOVERABLE
    )


def recover_prefusion(module: HloModule) -> HloModule:
    """The module with its fusions inlined and async pairs made synchronous.

    Returns ``module`` itself when it holds neither fusions nor async pairs; otherwise a
    module whose bitcasts are expanded and whose ``is_scheduled`` header is dropped too
    (:func:`hlo_go.xla.segments.portable_module`), computing what ``module`` computes.

    Args:
      module: any module, e.g. one printed by ``jax.jit(f).lower(x).compile().as_text()``.

    Returns:
      A module without ``fusion``, ``*-start``/``*-done`` or ``async-*`` instructions.

    Raises:
      OptimizedModuleError: an instruction with no synchronous, unfused form
        (``send``/``recv`` and their dones, an async pair whose start has other users
        than its done, a fusion or async-start calling no computation of the module).
    """
    if not any(_is_post_optimization(i.opcode) for _, i in module.instructions()):
        return module
    inlined = {
        c
        for _, i in module.instructions()
        if i.opcode in ("fusion", "async-start")
        for c in i.called_computations
    }
    taken = {
        i.name for comp in module.computations.values() if comp.name not in inlined for i in comp
    } | set(module.computations)
    fresh = _fresh_names(taken)
    done: dict[str, HloComputation] = {}
    for name, comp in module.computations.items():  # callees come before their callers
        done[name] = _recover_computation(module, comp, done, fresh)
    used = reachable_computations(done, module.entry_name)
    computations = FrozenDict((k, v) for k, v in done.items() if k in used)
    attributes = FrozenDict(
        (k, v) for k, v in module.attributes.items() if k not in _SCHEDULE_HEADER
    )
    recovered = HloModule(
        module.name, computations, module.entry_name, attributes, module.stack_frames
    )
    return portable_module(recovered)


def _recover_computation(
    module: HloModule,
    comp: HloComputation,
    done: dict[str, HloComputation],
    fresh: Callable[[str], str],
) -> HloComputation:
    """``comp`` with its fusions inlined from the already recovered ``done`` callees and
    its async pairs made synchronous."""
    users: dict[str, list[str]] = {}
    for instr in comp.instructions:
        for operand in instr.operands:
            users.setdefault(operand, []).append(instr.name)
    alias: dict[str, str] = {}  # a removed instruction -> the one that takes its place
    starts: dict[str, HloInstruction] = {}
    out: list[HloInstruction] = []

    def renamed(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(alias.get(n, n) for n in names)

    for instr in comp.instructions:
        instr = instr.replace(
            operands=renamed(instr.operands),
            control_predecessors=renamed(instr.control_predecessors),
        )
        where = f"%{instr.name} in {comp.name}"
        opcode = instr.opcode
        if opcode in UNRECOVERABLE:
            raise OptimizedModuleError(
                f"{module.name}: {where} is a {opcode}, a transfer XLA's optimized module "
                f"has no synchronous form of here; {PASS_INSTEAD}"
            )
        if opcode == "fusion":
            callee = _callee(module, instr, done, where)
            root = _inline(instr, callee, out, fresh)
            alias[instr.name] = root
            continue
        if opcode.endswith("-start"):
            others = [u for u in users.get(instr.name, []) if not _is_async_follow(comp, u)]
            if others:
                raise OptimizedModuleError(
                    f"{module.name}: {where} ({opcode}) is used by %{others[0]}, not only by "
                    f"its done; {PASS_INSTEAD}"
                )
            starts[instr.name] = instr
            continue
        if opcode.endswith("-update"):
            starts[instr.name] = starts[_start_name(instr, starts, module, where)]
            continue
        if opcode == "async-done":
            start = starts[_start_name(instr, starts, module, where)]
            callee = _callee(module, start, done, where)
            root = _inline(start.replace(name=instr.name, shape=instr.shape), callee, out, fresh)
            alias[instr.name] = root
            continue
        if opcode.endswith("-done"):
            start = starts[_start_name(instr, starts, module, where)]
            out.append(
                start.replace(
                    name=instr.name,
                    opcode=opcode.removesuffix("-done"),
                    shape=instr.shape,
                    attributes=FrozenDict(
                        (k, v) for k, v in start.attributes.items() if k not in _ASYNC_ONLY
                    ),
                    control_predecessors=start.control_predecessors + instr.control_predecessors,
                    metadata=instr.metadata or start.metadata,
                )
            )
            continue
        out.append(instr)
    root = alias.get(comp.root_name, comp.root_name)
    return HloComputation(comp.name, tuple(out), root)  # every thread is the main one now


def _is_async_follow(comp: HloComputation, name: str) -> bool:
    opcode = comp.instruction(name).opcode
    return opcode.endswith(("-update", "-done"))


def _start_name(
    instr: HloInstruction, starts: dict[str, HloInstruction], module: HloModule, where: str
) -> str:
    if not instr.operands or instr.operands[0] not in starts:
        raise OptimizedModuleError(
            f"{module.name}: {where} ({instr.opcode}) does not follow its start; {PASS_INSTEAD}"
        )
    return instr.operands[0]


def _callee(
    module: HloModule, instr: HloInstruction, done: dict[str, HloComputation], where: str
) -> HloComputation:
    called = instr.called_computations
    if len(called) != 1 or called[0] not in done:
        raise OptimizedModuleError(
            f"{module.name}: {where} ({instr.opcode}) calls {list(called)}, not one "
            f"computation defined before it; {PASS_INSTEAD}"
        )
    return done[called[0]]


def _inline(
    site: HloInstruction,
    callee: HloComputation,
    out: list[HloInstruction],
    fresh: Callable[[str], str],
) -> str:
    """Appends ``callee``'s instructions to ``out`` with its parameters read as ``site``'s
    operands; returns the name that takes ``site``'s place (the callee's root).

    Inlined instructions keep their names where free (else a numbered one); a dependency
    of the site's own becomes a dependency of every inlined instruction.
    """
    names: dict[str, str] = {}
    for instr in callee.instructions:
        if instr.opcode == "parameter":
            number = instr.parameter_number or 0
            names[instr.name] = site.operands[number]
            continue
        new = fresh(instr.name)
        names[instr.name] = new
        out.append(
            instr.replace(
                name=new,
                operands=tuple(names[o] for o in instr.operands),
                control_predecessors=tuple(names[o] for o in instr.control_predecessors)
                + site.control_predecessors,
            )
        )
    return names[callee.root_name]


def _fresh_names(taken: set[str]) -> Callable[[str], str]:
    """Names not in ``taken``: the stem itself the first time, then ``stem.N``."""
    own: set[str] = set()

    def fresh(stem: str) -> str:
        if stem not in own and stem not in taken:
            own.add(stem)
            return stem
        k = 1
        while f"{stem}.{k}" in taken or f"{stem}.{k}" in own:
            k += 1
        own.add(f"{stem}.{k}")
        return f"{stem}.{k}"

    return fresh
