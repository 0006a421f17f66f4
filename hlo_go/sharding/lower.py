"""Writing a sharding choice into HLO, and checking it through XLA's SPMD partitioner.

:func:`annotate` gives every array instruction of the (inlined) entry computation the
tiled ``sharding=`` of its chosen strategy, and, where a consumer reads an operand in
another spec than its producer writes, inserts one ``copy`` carrying the needed spec per
producer and spec: XLA's partitioner turns that copy into exactly the reshard the
simulator charged (and removes the copy itself). The ROOT tuple takes each output as its
producer wrote it; other tuple-shaped instructions (loop states) are left unannotated.

:func:`measure_sharding` compiles the annotated module for ``mesh.size`` CPU devices,
runs it on random inputs, compares every output with the unsharded module, counts the
collectives XLA emitted and times it against the unsharded module on one device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from hlo_go.hlo import HloComputation, HloInstruction, HloModule, Shape
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.simulate import reshards, validate
from hlo_go.sharding.spec import ShardSpec, spec_name, spec_text


def _replicated_text(shape: Shape) -> str:
    if not shape.is_tuple:
        return "{replicated}"
    return "{" + ", ".join("{replicated}" for _ in shape.leaves()) + "}"


def annotate(sg: ShardingGraph, choice: np.ndarray) -> HloModule:
    """The module with ``choice`` written as shardings (see the module docstring).

    Args:
      sg: the prepared module.
      choice: ``int[N]`` a strategy index per node.

    Returns:
      A new module; print it with ``.to_text()``.
    """
    choice = validate(sg, choice)
    mesh = sg.mesh
    entry = sg.module.entry
    instructions = entry.instructions
    copies = reshards(sg, choice)
    # Consumer (node, slot) -> name of the resharding copy it reads instead.
    reads: dict[tuple[int, int], str] = {}
    inserted: dict[int, list[HloInstruction]] = {}
    taken = {x.name for x in instructions}
    for (u, dst), users in copies.items():
        name = _fresh(f"{instructions[u].name}.reshard.{_slug(dst)}", taken)
        inserted.setdefault(u, []).append(
            HloInstruction(
                name=name,
                opcode="copy",
                shape=instructions[u].shape,
                operands=(instructions[u].name,),
                sharding=spec_text(dst, mesh),
            )
        )
        for user in users:
            reads[user] = name
    out: list[HloInstruction] = []
    root = entry.root_name
    for v, instr in enumerate(instructions):
        strategy = sg.strategies[v][int(choice[v])]
        if strategy.output is not None:
            sharding = spec_text(strategy.output, mesh)
        elif instr.name == root and instr.opcode == "tuple":
            sharding = _root_tuple_sharding(sg, choice, v)
        else:
            # Tuple-shaped values inside the program (loop states, calls' results) are
            # left to XLA's sharding propagation: annotating them trips XLA on loops
            # whose bodies still hold calls.
            sharding = None
        operands = tuple(reads.get((v, j), name) for j, name in enumerate(instr.operands))
        out.append(instr.replace(operands=operands, sharding=sharding))
        out.extend(inserted.get(v, ()))
    new_entry = HloComputation(entry.name, tuple(out), root, entry.execution_thread)
    computations = dict(sg.module.computations)
    computations[sg.module.entry_name] = new_entry
    return HloModule(
        sg.module.name,
        computations,
        sg.module.entry_name,
        sg.module.attributes,
        sg.module.stack_frames,
    )


def _root_tuple_sharding(sg: ShardingGraph, choice: np.ndarray, root: int) -> str:
    """The tuple sharding of the ROOT tuple: each output as its producer wrote it."""
    parts = []
    for u in sg.operands[root]:
        spec = sg.strategies[u][int(choice[u])].output
        shape = sg.module.entry.instructions[u].shape
        parts.append(spec_text(spec, sg.mesh) if spec is not None else _replicated_text(shape))
    # A tuple-shaped output's leaves join the outer tuple's list.
    return "{" + ", ".join(p[1:-1] if p.startswith("{{") else p for p in parts) + "}"


def _slug(spec: ShardSpec) -> str:
    return spec_name(spec).replace(",", "_") or "scalar"


def _fresh(name: str, taken: set[str]) -> str:
    new, k = name, 1
    while new in taken:
        new, k = f"{name}.{k}", k + 1
    taken.add(new)
    return new


class ShardingMeasurement(NamedTuple):
    """A sharding choice compiled and run through XLA's SPMD partitioner.

    Attributes:
      correct: every output matches the unsharded module within dtype tolerances.
      max_abs_error: the largest absolute difference over outputs.
      collectives: collectives in the partitioned, optimized module, by kind.
      sharded_s: median seconds per run on ``mesh.size`` CPU devices.
      unsharded_s: median seconds per run of the unsharded module on one CPU device.
      compile_s: seconds to compile the annotated module.
    """

    correct: bool
    max_abs_error: float
    collectives: dict[str, int]
    sharded_s: float | None
    unsharded_s: float | None
    compile_s: float


def measure_shardings(
    sg: ShardingGraph,
    choices: Mapping[str, np.ndarray],
    *,
    time_runs: bool = True,
    repeats: int = 10,
) -> dict[str, ShardingMeasurement]:
    """:func:`measure_sharding` for several choices: the unsharded module is compiled
    once and timed once, interleaved with every correct choice, so all of them share
    one ``unsharded_s``.

    Args:
      sg: the prepared module.
      choices: name -> a strategy index per node.
      time_runs: also time the sharded modules and the unsharded one, interleaved.
      repeats: timed runs of each.

    Returns:
      name -> its :class:`ShardingMeasurement`, in the order of ``choices``.
    """
    import jax

    from hlo_go.xla.bridge import compile_hlo_text, run_executable
    from hlo_go.xla.inputs import training_inputs
    from hlo_go.xla.spmd import check_spmd
    from hlo_go.xla.timing import time_interleaved

    args = training_inputs(sg.module)
    # The unsharded module, compiled once: the reference outputs and the timing baseline.
    plain = compile_hlo_text(sg.module.to_text())
    reference = run_executable(plain, args)
    checks = {
        name: check_spmd(annotate(sg, choice).to_text(), sg.mesh.size, args, reference=reference)
        for name, choice in choices.items()
    }
    timing: dict[str, Any] = {}
    correct = [name for name, check in checks.items() if check.correct]
    if time_runs and correct:
        device = plain.local_devices()[0]
        buffers = [jax.device_put(a, device) for a in args]
        fns: dict[str, Callable[[], Any]] = {
            _UNSHARDED: lambda: jax.block_until_ready(plain.execute(buffers))
        }
        for name in correct:
            exe = checks[name].executable
            placed = exe.put(args)
            fns[name] = lambda exe=exe, placed=placed: jax.block_until_ready(exe.execute(placed))
        timing = time_interleaved(fns, repeats=repeats)
    unsharded_s = timing[_UNSHARDED].median if timing else None
    return {
        name: ShardingMeasurement(
            correct=check.correct,
            max_abs_error=max(check.max_abs_error, default=0.0),
            collectives={k: v for k, v in check.collectives.items() if v},
            sharded_s=timing[name].median if name in timing else None,
            unsharded_s=unsharded_s if name in timing else None,
            compile_s=check.compile_s,
        )
        for name, check in checks.items()
    }


_UNSHARDED = " unsharded"  # a timing key no choice name can take (names have no space)


def measure_sharding(
    sg: ShardingGraph, choice: np.ndarray, *, time_runs: bool = True, repeats: int = 10
) -> ShardingMeasurement:
    """Compiles ``choice`` for the mesh's CPU devices, checks and times it.

    Needs ``mesh.size`` CPU devices (``jax.config.update("jax_num_cpu_devices", 8)``
    before JAX starts). CPU devices share this host's cores: the times check overheads,
    not parallel speedup.

    Args:
      sg: the prepared module.
      choice: a strategy index per node.
      time_runs: also time the sharded and the unsharded module, interleaved.
      repeats: timed runs of each.

    Returns:
      The :class:`ShardingMeasurement`.
    """
    import jax

    from hlo_go.xla.bridge import compile_hlo_text, run_executable
    from hlo_go.xla.inputs import training_inputs
    from hlo_go.xla.spmd import check_spmd
    from hlo_go.xla.timing import time_interleaved

    text = annotate(sg, choice).to_text()
    args = training_inputs(sg.module)
    # The unsharded module, compiled once: the reference outputs and the timing baseline.
    plain = compile_hlo_text(sg.module.to_text())
    check = check_spmd(text, sg.mesh.size, args, reference=run_executable(plain, args))
    sharded_s = unsharded_s = None
    if time_runs and check.correct:
        exe = check.executable
        placed = exe.put(args)
        device = plain.local_devices()[0]
        buffers = [jax.device_put(a, device) for a in args]
        timing = time_interleaved(
            {
                "sharded": lambda: jax.block_until_ready(exe.execute(placed)),
                "unsharded": lambda: jax.block_until_ready(plain.execute(buffers)),
            },
            repeats=repeats,
        )
        sharded_s, unsharded_s = timing["sharded"].median, timing["unsharded"].median
    return ShardingMeasurement(
        correct=check.correct,
        max_abs_error=max(check.max_abs_error, default=0.0),
        collectives={k: v for k, v in check.collectives.items() if v},
        sharded_s=sharded_s,
        unsharded_s=unsharded_s,
        compile_s=check.compile_s,
    )
