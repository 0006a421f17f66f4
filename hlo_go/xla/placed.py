"""The MPMD runtime: a placed module run as per-device executables.

``compile_placed(module, decisions, devices)`` partitions the module
(:func:`hlo_go.xla.mpmd.partition`), compiles one executable per distinct segment for
its device (:func:`hlo_go.xla.segments.segment_module`, then
:func:`hlo_go.xla.bridge.compile_hlo_text`), and returns a :class:`PlacedProgram`. Calling
it runs one step:

* program inputs are put on every device that reads them (or passed pre-placed,
  :meth:`PlacedProgram.place_arguments`);
* segments are dispatched from one host thread in the partition's dispatch order,
  which orders each device's segments by schedule priority. Dispatch is
  asynchronous (PJRT): the host only enqueues work, devices run it as their inputs
  become ready, so segments on different devices overlap;
* a value needed on another device is copied there with one ``jax.device_put`` per
  (segment, source device), when the first segment on that device needs it;
* the runtime drops its reference to a buffer right after dispatching its last
  reader (the buffer is freed once that reader has run), and *donates* a buffer to
  its last reader where that is safe (an intermediate, not a program input or
  output, with no later transfer from it, and an output of the same shape to reuse
  it for): the executable then writes into it instead of allocating.

Only device-agnostic APIs are used (``jax.device_put``, PJRT executables compiled
for ``device.platform``), so the same code places work on virtual CPU devices, GPUs
or TPU cores.

This module is the placed (MPMD) face of :mod:`hlo_go.xla`: ``from hlo_go.xla.placed
import ...`` (its ``__all__``; the partitioning names come from
:mod:`hlo_go.xla.mpmd`). ``run_placed`` and ``measure_placed`` are the entry points for a
function or a module;
``measure_placed`` checks outputs against XLA's default compile of the same program
before it reports times (:func:`check_placed_outputs`: the dtype tolerances of
:func:`hlo_go.xla.outputs_match`, and for float32 outputs outside them the float64
arbiter of :mod:`hlo_go.xla.arbiter`: moving kernel boundaries changes roundings, and a
BatchNorm-heavy float32 step amplifies them past any fixed tolerance).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import HloModule, parse_hlo
from hlo_go.xla._jaxlib import canonical_program_text, compile_hlo_text, run_executable
from hlo_go.xla.arbiter import (
    as_accurate_as_reference,
    computed_once,
    float64_once,
    input_rounding_runs,
)
from hlo_go.xla.hooks import WRAPPED_COMPILER_OPTIONS, capture_prefusion_lowered
from hlo_go.xla.inputs import training_inputs
from hlo_go.xla.measure import Measurement, outputs_match
from hlo_go.xla.mpmd import (
    COMPUTE,
    PARAMETER,
    Leaf,
    Partition,
    PlacementError,
    Segment,
    partition,
)
from hlo_go.xla.optimized import recover_prefusion
from hlo_go.xla.segments import donated_aliases, portable_module, segment_module
from hlo_go.xla.support import screen
from hlo_go.xla.timing import time_interleaved

# The placed (MPMD) face of hlo_go.xla: this module's entry points and the partitioning
# names of hlo_go.xla.mpmd.
__all__ = [
    "Leaf",
    "Partition",
    "PlacedArguments",
    "PlacedProgram",
    "PlacementError",
    "RunStats",
    "Segment",
    "check_placed_outputs",
    "compile_placed",
    "float64_reference",
    "measure_placed",
    "partition",
    "placed_module",
    "run_placed",
    "unfused_reference",
]

FUSION_OFF_REFERENCE = "XLA's compile with fusion off"
"""How the arbiter's message names :func:`unfused_reference` when its error set the bar."""


class RunStats(NamedTuple):
    """What one run of a :class:`PlacedProgram` did (host-side bookkeeping).

    Attributes:
      segments: executables dispatched.
      transfers: arrays copied between devices.
      transfer_bytes: bytes copied between devices.
      donated: buffers donated to their last reader.
      freed: intermediate buffers released after their last reader was dispatched.
      peak_live_bytes: per device, the most bytes of intermediates (segment outputs and
        transferred copies) the runtime held at once.
      live_after: intermediates still held when the run returned (its outputs).
    """

    segments: int
    transfers: int
    transfer_bytes: int
    donated: int
    freed: int
    peak_live_bytes: tuple[int, ...]
    live_after: int


class _Step(NamedTuple):
    """One segment's dispatch, precomputed as slot numbers."""

    executable: Any
    device: Any
    transfer_from: tuple[int, ...]  # slots copied to this device before dispatch
    transfer_to: tuple[int, ...]  # the slots they land in
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]  # slots dropped after dispatch
    donated: tuple[int, ...]  # slots donated (invalid after dispatch)


class PlacedArguments(NamedTuple):
    """Program inputs already put on the devices that read them.

    Attributes:
      arrays: one array per argument slot of the program's plan.
    """

    arrays: tuple[Any, ...]


class PlacedProgram:
    """A placed module compiled as per-device executables; call it to run one step.

    Attributes:
      module: the module that was placed.
      partition: its :class:`~hlo_go.xla.mpmd.Partition`.
      devices: the jax devices; ``Decisions.placement`` value ``i`` runs on ``devices[i]``.
      modules: each segment's HLO module, in dispatch order.
      stats: :class:`RunStats` of the last call (None before the first).
    """

    def __init__(
        self,
        module: HloModule,
        part: Partition,
        devices: Sequence[Any],
        modules: Sequence[HloModule],
        executables: Sequence[Any],
        donations: Sequence[Sequence[int]],
    ) -> None:
        self.module = module
        self.partition = part
        self.devices = tuple(devices)
        self.modules = tuple(modules)
        self.stats: RunStats | None = None
        self._build_plan(executables, donations)

    @property
    def num_segments(self) -> int:
        """Executables dispatched per run."""
        return len(self._steps)

    @property
    def num_executables(self) -> int:
        """Distinct executables compiled (segments of the same program share one)."""
        return len({id(step.executable) for step in self._steps})

    def _build_plan(self, executables: Sequence[Any], donations: Sequence[Sequence[int]]) -> None:
        part = self.partition
        slots: dict[tuple[Leaf, int], int] = {}
        slot_bytes: list[int] = []
        slot_device: list[int] = []

        def slot(leaf: Leaf, device: int) -> int:
            key = (leaf, device)
            if key not in slots:
                slots[key] = len(slot_bytes)
                slot_bytes.append(part.leaf_shape(leaf).byte_size())
                slot_device.append(device)
            return slots[key]

        # Argument slots: one per (parameter, device that reads it).
        parameters = [i for i in part.flat.instructions if i.opcode == "parameter"]
        self._num_parameters = len(parameters)
        param_number = {
            v: part.flat.instructions[v].parameter_number
            for v in np.flatnonzero(part.kind == PARAMETER).tolist()
        }
        arg_slots: list[tuple[int, int, int]] = []  # (slot, parameter number, device)
        for seg in part.segments:
            for leaf in seg.inputs:
                if part.kind[leaf.node] == PARAMETER and (leaf, seg.device) not in slots:
                    arg_slots.append((slot(leaf, seg.device), param_number[leaf.node], seg.device))
        for leaf in part.outputs:  # an input returned as an output: keep one copy
            if part.kind[leaf.node] == PARAMETER:
                device = int(part.placement[leaf.node])
                if (leaf, device) not in slots:
                    arg_slots.append((slot(leaf, device), param_number[leaf.node], device))
        self._arg_slots = tuple(arg_slots)
        num_arg_slots = len(slot_bytes)

        # Uses of each intermediate slot, by dispatch index (transfers count as a use of
        # their source at the dispatch that needs them).
        last_use: dict[int, int] = {}
        readers: list[list[int]] = []
        transfers: list[list[tuple[int, int]]] = []
        for seg in part.segments:
            ins, moves = [], []
            for leaf in seg.inputs:
                if part.kind[leaf.node] == COMPUTE:
                    src_device = int(part.placement[leaf.node])
                    src = slot(leaf, src_device)
                    if src_device != seg.device and (leaf, seg.device) not in slots:
                        moves.append((src, slot(leaf, seg.device)))
                        last_use[src] = seg.index
                    ins.append(slot(leaf, seg.device))
                else:
                    ins.append(slots[(leaf, seg.device)])
            for s in ins:
                if s >= num_arg_slots:
                    last_use[s] = seg.index
            for leaf in seg.outputs:
                slot(leaf, seg.device)
            readers.append(ins)
            transfers.append(moves)
        output_slots = []
        for leaf in part.outputs:
            device = int(part.placement[leaf.node])
            output_slots.append(slots[(leaf, device)])
        kept = set(output_slots)

        release: list[list[int]] = [[] for _ in part.segments]
        for s, index in last_use.items():
            if s not in kept:
                release[index].append(s)
        steps = []
        donated_total = 0
        for seg, exe, ins, moves, donate in zip(
            part.segments, executables, readers, transfers, donations, strict=True
        ):
            donated = tuple(ins[p] for p in donate)
            donated_total += len(donated)
            steps.append(
                _Step(
                    executable=exe,
                    device=self.devices[seg.device],
                    transfer_from=tuple(m[0] for m in moves),
                    transfer_to=tuple(m[1] for m in moves),
                    inputs=tuple(ins),
                    outputs=tuple(slots[(leaf, seg.device)] for leaf in seg.outputs),
                    release=tuple(release[seg.index]),
                    donated=donated,
                )
            )
        self._steps = tuple(steps)
        self._output_slots = tuple(output_slots)
        self._num_slots = len(slot_bytes)
        self._slot_bytes = tuple(slot_bytes)
        self._slot_device = tuple(slot_device)
        self._num_arg_slots = num_arg_slots
        self._donated_total = donated_total

    def place_arguments(self, args: Sequence[Any]) -> PlacedArguments:
        """Puts each program input on every device that reads it.

        Args:
          args: one array per entry parameter, in parameter order.

        Returns:
          :class:`PlacedArguments` to pass to the program instead of ``args``.

        Raises:
          ValueError: the wrong number of arguments.
        """
        if len(args) != self._num_parameters:
            raise ValueError(
                f"the placed module {self.module.name!r} takes {self._num_parameters} "
                f"arguments, got {len(args)}"
            )
        arrays = [None] * self._num_arg_slots
        by_device: dict[int, list[tuple[int, int]]] = {}
        for s, number, device in self._arg_slots:
            by_device.setdefault(device, []).append((s, number))
        for device, items in by_device.items():
            placed = jax.device_put([args[n] for _, n in items], self.devices[device])
            for (s, _), array in zip(items, placed, strict=True):
                arrays[s] = array
        return PlacedArguments(tuple(arrays))

    def __call__(self, *args: Any) -> list[Any]:
        """Runs one step.

        Args:
          *args: one array per entry parameter, or a single :class:`PlacedArguments`.

        Returns:
          The program's outputs (the flattened result), each on its producer's device;
          they may still be computing (use ``jax.block_until_ready``).
        """
        if len(args) == 1 and isinstance(args[0], PlacedArguments):
            placed = args[0]
        else:
            placed = self.place_arguments(args)
        live: list[Any] = [None] * self._num_slots
        live[: self._num_arg_slots] = placed.arrays
        slot_bytes, slot_device = self._slot_bytes, self._slot_device
        held = [0] * len(self.devices)
        peak = [0] * len(self.devices)
        transfers = transfer_bytes = freed = 0
        device_put = jax.device_put
        for step in self._steps:
            if step.transfer_from:
                copies = device_put([live[s] for s in step.transfer_from], step.device)
                for s, array in zip(step.transfer_to, copies, strict=True):
                    live[s] = array
                    held[slot_device[s]] += slot_bytes[s]
                    transfer_bytes += slot_bytes[s]
                transfers += len(copies)
            outs = step.executable.execute([live[s] for s in step.inputs])
            for s, array in zip(step.outputs, outs, strict=True):
                live[s] = array
                held[slot_device[s]] += slot_bytes[s]
            for d, h in enumerate(held):
                if h > peak[d]:
                    peak[d] = h
            for s in step.release:
                live[s] = None
                held[slot_device[s]] -= slot_bytes[s]
                freed += 1
        outputs = [live[s] for s in self._output_slots]
        live_after = sum(1 for a in live[self._num_arg_slots :] if a is not None)
        self.stats = RunStats(
            segments=len(self._steps),
            transfers=transfers,
            transfer_bytes=transfer_bytes,
            donated=self._donated_total,
            freed=freed,
            peak_live_bytes=tuple(peak),
            live_after=live_after,
        )
        return outputs


def _donations(part: Partition) -> list[list[int]]:
    """Per segment, the parameter numbers it may donate (see the module docstring)."""
    # Last use of every (leaf, device) copy by dispatch index, transfers included.
    last: dict[tuple[Leaf, int], int] = {}
    first_on: dict[tuple[Leaf, int], int] = {}
    for seg in part.segments:
        for leaf in seg.inputs:
            if part.kind[leaf.node] != COMPUTE:
                continue
            key = (leaf, seg.device)
            first_on.setdefault(key, seg.index)
            last[key] = seg.index
            src = (leaf, int(part.placement[leaf.node]))
            if src != key and first_on[key] == seg.index:
                last[src] = max(last.get(src, -1), seg.index)
    outputs = {(leaf, int(part.placement[leaf.node])) for leaf in part.outputs}
    donate: list[list[int]] = []
    for seg in part.segments:
        mine = []
        for k, leaf in enumerate(seg.inputs):
            key = (leaf, seg.device)
            if part.kind[leaf.node] == COMPUTE and key not in outputs and last[key] == seg.index:
                mine.append(k)
        aliases = donated_aliases(part, seg, mine)
        donate.append([p for p, _ in aliases])
    return donate


def _program_key(text: str) -> str:
    """:func:`canonical_program_text`, or the text itself where XLA's parser rejects it
    (the compile then reports the error with the segment named)."""
    try:
        return canonical_program_text(text)
    except ValueError:
        return text


def compile_placed(
    module: HloModule,
    decisions: Decisions,
    devices: Sequence[Any],
    *,
    graph: OpGraph | None = None,
    donate: bool = True,
    merge: bool = True,
    workers: int | None = None,
) -> PlacedProgram:
    """Partitions a placed module and compiles one executable per distinct segment.

    Segments whose modules are the same program (:func:`canonical_program_text`:
    equal up to instruction and computation names) on the same device share one
    executable.

    Args:
      module: the module the decisions are for (e.g. a corpus module's ``"prefusion"``
        stage, or :func:`hlo_go.xla.capture_prefusion` of a function).
      decisions: placement (``placement[i]`` runs on ``devices[placement[i]]``),
        schedule priority (orders each device's segments) and fusion priority (fused
        groups become ``kLoop`` fusions and never span segments; XLA may fuse further
        inside a segment).
      devices: jax devices of one platform, any kind.
      graph: ``build_graph(module)``, if already built.
      donate: donate intermediates to their last reader where safe.
      merge: merge same-device segments as far as acyclicity allows.
      workers: compile threads (default: the CPU count).

    Returns:
      The :class:`PlacedProgram`.

    Raises:
      ValueError: invalid decisions (shape, range, colocation), with the node named.
      PlacementError: a placement or an operation the runtime refuses.
    """
    graph = build_graph(module) if graph is None else graph
    if len(devices) == 0:
        raise ValueError("devices is empty")
    decisions.validate(graph, len(devices))
    groups = None
    if np.any(decisions.fusion_priority > 0):
        groups = decisions.fusion_groups(graph)
    part = partition(
        module,
        graph,
        decisions.placement,
        schedule_priority=decisions.schedule_priority,
        fusion_groups=groups,
        num_devices=len(devices),
        merge=merge,
    )
    donations = _donations(part) if donate else [[] for _ in part.segments]
    cache: dict = {}
    modules = [
        segment_module(module, part, seg, donate=d, fusion_groups=groups, callee_cache=cache)
        for seg, d in zip(part.segments, donations, strict=True)
    ]

    texts = [m.to_text() for m in modules]
    # Segments that print the same canonically (e.g. the time steps of an unrolled
    # RNN under round-robin) share one executable per device.
    first: dict[tuple[int, str], int] = {}
    source = [
        first.setdefault((seg.device, _program_key(text)), i)
        for i, (seg, text) in enumerate(zip(part.segments, texts, strict=True))
    ]
    distinct = sorted(set(source))

    def build(i: int) -> Any:
        device = devices[part.segments[i].device]
        try:
            return compile_hlo_text(texts[i], device=device)
        except Exception as e:
            seg = part.segments[i]
            first_node = part.flat.names[seg.nodes[0]]
            raise PlacementError(
                f"XLA could not compile segment {i} (device {seg.device}, {len(seg.nodes)} "
                f"nodes from {first_node!r}): {e}"
            ) from e

    count = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=count) as pool:
        built = dict(zip(distinct, pool.map(build, distinct), strict=True))
    executables = [built[i] for i in source]
    return PlacedProgram(module, part, devices, modules, executables, donations)


def float64_reference(module: HloModule, args: Sequence[Any]) -> Callable[[], list[np.ndarray]]:
    """A function returning ``module``'s outputs evaluated in float64 (the arbiter's
    near-exact values, :func:`hlo_go.xla.arbiter.float64_outputs`), computed on the
    first call only; a failure is remembered and raised again."""
    return float64_once(lambda: (portable_module(module).to_text(), args))


def unfused_reference(module: HloModule, args: Sequence[Any]) -> Callable[[], list[np.ndarray]]:
    """A function returning ``module``'s outputs from XLA's one-device compile with its
    fusion passes off (:data:`hlo_go.xla.hooks.WRAPPED_COMPILER_OPTIONS`), computed on the first
    call only.

    A placement puts kernel boundaries where XLA's fusion would not, as this compile
    does everywhere; its float32 error is one the arbiter accepts."""

    def compute() -> list[np.ndarray]:
        text = portable_module(module).to_text()
        executable = compile_hlo_text(text, compiler_options=WRAPPED_COMPILER_OPTIONS)
        return run_executable(executable, list(args), x64=True)

    return computed_once(compute)


def one_device_runner(module: HloModule) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """A function running XLA's default one-device compile of ``module`` on given
    arguments, compiled on the first call only (for
    :func:`hlo_go.xla.arbiter.input_rounding_runs`)."""
    executable = functools.cache(lambda: compile_hlo_text(portable_module(module).to_text()))

    def run(args: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(x) for x in run_executable(executable(), args, x64=True)]

    return run


def check_placed_outputs(
    module: HloModule,
    args: Sequence[Any],
    got: Sequence[Any],
    want: Sequence[Any],
    *,
    exact: Callable[[], Sequence[Any]] | Sequence[Any] | None = None,
    unfused: Callable[[], Sequence[Any]] | Sequence[Any] | None = None,
) -> tuple[bool, str]:
    """Compares a placed run's outputs with XLA's one-device compile of the same module.

    Outputs pass within the dtype tolerances of :func:`hlo_go.xla.outputs_match`. A
    float32 output outside them is judged by the float64 arbiter
    (:func:`hlo_go.xla.arbiter.as_accurate_as_reference`): it passes when its error
    against the module evaluated in float64 is at most ``WIDENING_FACTOR`` times the
    float32 error of one of XLA's own compiles of the module: the default one, the
    one with fusion off (:func:`unfused_reference`: segments move kernel boundaries as
    that compile does), or, element by element, the default one at inputs one ulp away
    (:func:`hlo_go.xla.arbiter.input_rounding_runs`: where an output is discontinuous,
    rounding alone moves it); a wrong result is far from the float64 value and fails.

    Args:
      module: the placed module (what ``want`` is XLA's default compile of).
      args: its arguments, one array per entry parameter.
      got: the placed run's outputs (the flattened result).
      want: the one-device reference outputs.
      exact: the float64 outputs, or a function computing them (e.g.
        :func:`float64_reference`, to evaluate once for several placements); default:
        evaluated here if needed.
      unfused: XLA's fusion-off outputs, or a function computing them (e.g.
        :func:`unfused_reference`); default: evaluated here if needed.

    Returns:
      ``(correct, message)``: "" when within tolerance, else why it failed or how the
      arbiter accepted it.
    """
    got = [np.asarray(g) for g in jax.tree.leaves(list(got))]
    want = [np.asarray(w) for w in jax.tree.leaves(list(want))]
    ok, message = outputs_match(got, want)
    if ok or len(got) != len(want):
        return ok, message
    exact = float64_reference(module, args) if exact is None else exact
    unfused = unfused_reference(module, args) if unfused is None else unfused
    others = [(FUSION_OFF_REFERENCE, unfused)]
    moved = input_rounding_runs(one_device_runner(module), args)
    return as_accurate_as_reference(got, want, exact, others=others, moved=moved, message=message)


class _Program(NamedTuple):
    module: HloModule
    args: list[Any]
    reference: Callable[[], Any]  # runs XLA's default compile of the same program
    unflatten: Callable[[list[Any]], Any]


def _resolve(
    module_or_fn: HloModule | str | Callable[..., Any],
    args: Sequence[Any] | None,
    reference_device: Any,
) -> _Program:
    if isinstance(module_or_fn, HloModule | str):
        module = parse_hlo(module_or_fn) if isinstance(module_or_fn, str) else module_or_fn
        platform = reference_device.platform if reference_device is not None else "cpu"
        module = recover_prefusion(module)  # an optimized module: fusions inlined, or refused
        problem = screen(module, platform, stacklevel=5)
        if problem:
            raise PlacementError(f"cannot run {module.name} on {platform}: {problem}")
        flat_args = list(training_inputs(module) if args is None else args)
        cache: dict[str, Any] = {}

        def reference() -> Any:  # XLA's default compile of the whole module, on first use
            if not cache:
                text = portable_module(module).to_text()
                cache["exe"] = compile_hlo_text(text, device=reference_device)
                cache["args"] = jax.device_put(flat_args, reference_device)
            return cache["exe"].execute(cache["args"])

        return _Program(module, flat_args, reference, lambda outs: outs)
    if not callable(module_or_fn):
        raise TypeError(
            f"module_or_fn must be an HloModule, HLO text or a function, got "
            f"{type(module_or_fn).__name__}"
        )
    if args is None:
        raise ValueError("args are required to place a function (they fix its shapes)")
    jitted = jax.jit(module_or_fn, keep_unused=True)
    lowered = jitted.lower(*args)
    module = capture_prefusion_lowered(lowered)
    flat_args = jax.tree.leaves(tuple(args))
    out_tree = lowered.out_tree
    state: dict[str, Any] = {}

    def reference() -> Any:  # compiled on first use: run_placed never needs it
        if not state:
            state["compiled"] = lowered.compile()
            state["args"] = jax.device_put(list(args), reference_device)
        return state["compiled"](*state["args"])

    return _Program(module, flat_args, reference, lambda outs: jax.tree.unflatten(out_tree, outs))


def placed_module(
    module_or_fn: HloModule | str | Callable[..., Any], *, args: Sequence[Any] | None = None
) -> tuple[HloModule, OpGraph]:
    """The module (and its graph) that decisions for ``module_or_fn`` must be made for.

    For a function this is its pre-fusion module (XLA's optimizations, fusion left to
    the decisions), lowered with every argument kept.
    """
    program = _resolve(module_or_fn, args, jax.devices()[0])
    return program.module, build_graph(program.module)


def run_placed(
    module_or_fn: HloModule | str | Callable[..., Any],
    decisions: Decisions,
    devices: Sequence[Any],
    *,
    args: Sequence[Any] | None = None,
) -> Any:
    """Runs a function or module with each node on its placed device.

    Args:
      module_or_fn: an HloModule, HLO text, or a jax function. Decisions refer to the
        nodes of ``build_graph`` of the module, or of :func:`placed_module` for a function.
      decisions: the placement, schedule and fusion decisions.
      devices: the jax devices (``decisions.placement`` indexes them).
      args: the arguments (positional, for a function; one array per entry parameter
        for a module, default :func:`~hlo_go.xla.inputs.training_inputs`).

    Returns:
      The outputs, computed: the function's output pytree, or a list of arrays (the
      module's flattened result).
    """
    program = _resolve(module_or_fn, args, devices[0])
    placed = compile_placed(program.module, decisions, devices)
    return program.unflatten(jax.block_until_ready(placed(*program.args)))


def measure_placed(
    module_or_fn: HloModule | str | Callable[..., Any],
    decisions: Decisions,
    devices: Sequence[Any],
    *,
    args: Sequence[Any] | None = None,
    repeats: int = 10,
    warmup: int = 2,
    program: PlacedProgram | None = None,
    exact: Callable[[], Sequence[Any]] | Sequence[Any] | None = None,
) -> Measurement:
    """Checks a placed run against XLA's default compile, then times both interleaved.

    The reference is ``jax.jit`` of the function, or XLA's default compile of the whole
    module on ``devices[0]``. Program inputs are put on their devices before timing
    (as a training loop keeps its state where it is used), so a timed step is the
    dispatch of every segment, the transfers between devices and the compute.

    Args:
      module_or_fn: as for :func:`run_placed`.
      decisions: as for :func:`run_placed`.
      devices: as for :func:`run_placed`.
      args: as for :func:`run_placed`.
      repeats: timed calls per configuration.
      warmup: untimed rounds first.
      program: an already compiled program for this module and these decisions.
      exact: the module's float64 outputs for the arbiter (see
        :func:`check_placed_outputs`), or a function computing them.

    Returns:
      A :class:`~hlo_go.xla.Measurement`: ``time_s`` the placed step, ``baseline_time_s``
      the reference, ``speedup`` their ratio; ``correct`` False (no times) when outputs
      differ (:func:`check_placed_outputs`). ``message`` gives the segment and transfer
      counts, and how the arbiter decided where it did.
    """
    resolved = _resolve(module_or_fn, args, devices[0])
    placed = program or compile_placed(resolved.module, decisions, devices)
    placed_args = placed.place_arguments(resolved.args)
    want = jax.block_until_ready(resolved.reference())
    got = jax.block_until_ready(placed(placed_args))
    ok, verdict = check_placed_outputs(
        resolved.module, resolved.args, got, jax.tree.leaves(want), exact=exact
    )
    if not ok:
        return Measurement(
            correct=False,
            time_s=None,
            baseline_time_s=None,
            spread=None,
            speedup=None,
            repeats=0,
            message=verdict,
        )
    stats = placed.stats
    timings = time_interleaved(
        {
            "placed": lambda: jax.block_until_ready(placed(placed_args)),
            "baseline": lambda: jax.block_until_ready(resolved.reference()),
        },
        repeats=repeats,
        warmup=warmup,
    )
    p, b = timings["placed"], timings["baseline"]
    note = (
        f"{stats.segments} segments, {stats.transfers} transfers "
        f"({stats.transfer_bytes} bytes), {stats.donated} donated"
        + (f"; {verdict}" if verdict else "")
    )
    return Measurement(
        correct=True,
        time_s=p.median,
        baseline_time_s=b.median,
        spread=(p.min, p.max),
        speedup=b.median / p.median,
        repeats=repeats,
        message=note,
    )
