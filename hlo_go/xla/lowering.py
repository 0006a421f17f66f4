"""Fusion and scheduling decisions lowered into XLA's own compile.

A :class:`Program` is one thing to compile: a jax function with its arguments (or a
``jax.stages.Lowered``), or an HLO module (an :class:`~hlo_go.hlo.HloModule`, HLO
text, or a path to a ``.hlo``/``.hlo.gz`` file). :meth:`Program.lower` compiles it with
XLA's pipeline, fusion passes off, and

1. **fusion**: the pre-fusion module (:func:`hlo_go.xla.capture_prefusion`) fused by our
   groups (:func:`hlo_go.xla.apply_fusion`; what stays unfused wrapped alone as XLA's
   fusion-wrapper had it, :func:`hlo_go.xla.fusion.unwrap_fusions`) swapped in before scheduling.
   Dots and convolutions larger than XLA:CPU fuses stay kernels of their own whatever
   the decisions say (:func:`without_large_matrices`);
   The graph sees a ``while`` (or ``conditional``) as one node, so decisions never reach
   its body: bodies get XLA's own fusion, YNNPACK dots included
   (:func:`hlo_go.xla.fusion.adopt_control_flow`), except with ``fusion=None`` (nothing fused
   anywhere). Left unfused, a scanned model's loop body ran about twice as slow;
2. **schedule**: the entry list-scheduled by our priorities after XLA's scheduler
   (:func:`hlo_go.xla.schedule.list_schedule`), a fused kernel taking the largest priority of its
   members, as in the simulator.

Decisions come as a :class:`~hlo_go.decisions.Decisions` made for the program's
pre-fusion graph (:attr:`Program.graph`: decisions carry its fingerprint, and those made
for another graph are refused with :class:`DecisionsMismatchError`), or as explicit groups
/ priorities by instruction name, or :data:`MEMORY_ORDER` for the schedule. This module
never resolves a method name: :mod:`hlo_go.methods` turns names (baselines,
``"searched"``, policies) into decisions. :meth:`Program.default` is XLA's own compile,
the reference every lowering is checked and timed against (:func:`hlo_go.xla.measure`).
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from hlo_go.decisions import (
    DEFAULT_LIMITS,
    Decisions,
    FusionGroupError,
    FusionLimits,
    GraphMismatchError,
    check_gpu_fusion_groups,
    fusion_group_names,
    graph_fingerprint,
    module_output_dims,
    unfuse_large_matrices,
)
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import HloModule, load_hlo, parse_hlo
from hlo_go.xla._jaxlib import (
    compile_hlo_text,
    compiled_temp_bytes,
    executable_hlo_text,
)
from hlo_go.xla.arbiter import float64_once, lowered_source
from hlo_go.xla.fusion import (
    FusionError,
    adopt_control_flow,
    apply_fusion,
    control_flow_computations,
    gpu_fusion_kind,
    regenerate_shared,
    unwrap_fusions,
    wrap_named,
)
from hlo_go.xla.hooks import (
    GPU_PLATFORMS,
    XLA_FUSED_OPTIONS,
    capture_prefusion_with,
    lowering_stage,
    wrapped_compiler_options,
)
from hlo_go.xla.inputs import (
    has_abstract_leaves,
    leaf_index_bounds,
    random_arguments,
    random_inputs,
)
from hlo_go.xla.optimized import recover_prefusion
from hlo_go.xla.schedule import compile_hooked, memory_schedule
from hlo_go.xla.support import screen


class Order(enum.Enum):
    """An order of the entry that XLA's scheduler gives, not decisions."""

    MEMORY = "memory"
    """XLA's order, except that an instruction freeing more bytes than it writes runs as
    soon as it is ready (:func:`hlo_go.xla.schedule.memory_schedule`)."""


# The schedule that keeps XLA's order but runs memory-freeing instructions first.
MEMORY_ORDER = Order.MEMORY
# Standard deviation of random float inputs (small, so deep training steps stay finite).
RANDOM_SCALE = 0.1

Source = Callable[..., Any] | jax.stages.Lowered | HloModule | str | os.PathLike
FusionSpec = Decisions | HloModule | Sequence[Sequence[str]] | None
ScheduleSpec = Decisions | Mapping[str, float] | Order | None


class LoweringError(ValueError, HloGoError):
    """Decisions that cannot be lowered: a method name instead of decisions, decisions for
    another graph, a source that cannot be compiled; the message names what and where."""


class DecisionsMismatchError(LoweringError, GraphMismatchError):
    """Decisions made for another graph than the program's pre-fusion graph
    (:attr:`Program.graph`); the message names both graphs and what to decide on."""


class Executable:
    """A compiled program: call it like the function it came from.

    Attributes:
      compiled: what XLA returned (a ``jax.stages.Compiled`` or a loaded executable).
      label: what was lowered (e.g. ``"fusion=xla-cpu-like, schedule=critical-path"``).
      module: the module swapped in before scheduling (None: XLA's own).
      groups: the fusion groups applied (pre-fusion instruction names).
      order: the entry order imposed after scheduling (None: XLA's).
    """

    def __init__(
        self,
        compiled: Any,
        call: Callable[..., Any],
        *,
        label: str,
        module: HloModule | None = None,
        groups: Sequence[Sequence[str]] = (),
        order: list[str] | None = None,
    ) -> None:
        self.compiled = compiled
        self._call = call
        self.label = label
        self.module = module
        self.groups = [list(g) for g in groups]
        self.order = order

    def __call__(self, *args: Any) -> Any:
        """Runs the executable and blocks until its outputs are ready."""
        return jax.block_until_ready(self._call(*args))

    def as_text(self) -> str:
        """The compiled (optimized, scheduled) HLO module's text."""
        if hasattr(self.compiled, "as_text"):
            return self.compiled.as_text()
        return executable_hlo_text(self.compiled)

    @functools.cached_property
    def optimized(self) -> HloModule:
        """The compiled module, parsed."""
        return parse_hlo(self.as_text(), filename=f"<compiled {self.label}>")

    @property
    def entry_order(self) -> list[str]:
        """Entry instruction names in the order the executable runs them."""
        return [i.name for i in self.optimized.entry.instructions]

    @functools.cached_property
    def temp_bytes(self) -> int | None:
        """Bytes of temporaries one call allocates (XLA's buffer assignment); None if
        the backend does not say."""
        return compiled_temp_bytes(self.compiled)

    @property
    def num_fusions(self) -> int:
        """Fusion instructions in the compiled entry computation."""
        return sum(1 for i in self.optimized.entry.instructions if i.opcode == "fusion")

    def __repr__(self) -> str:
        return f"Executable({self.label!r})"


def compile_hlo(
    text: str,
    devices: Sequence[Any] | None = None,
    *,
    compiler_options: Mapping[str, Any] | None = None,
) -> Executable:
    """Compiles HLO text with XLA's full pipeline: HLO → StableHLO → executable.

    Args:
      text: an HLO module (unoptimized, pre-fusion or optimized; one partition).
      devices: the device to compile for, as a one-element sequence (default: the
        first CPU device). Placement over several devices is
        :func:`hlo_go.xla.placed.compile_placed`'s job.
      compiler_options: XLA debug options, e.g. ``{"xla_disable_hlo_passes": "fusion"}``.

    Returns:
      An :class:`Executable` taking one array per entry parameter and returning the
      list of outputs (a tuple result flattened).

    Raises:
      ValueError: XLA rejected the text, or more than one device was given.
    """
    if devices is not None and len(devices) != 1:
        raise ValueError(
            f"compile_hlo compiles for one device, got {len(devices)}; run a placement "
            "over several with hlo_go.xla.placed.compile_placed"
        )
    device = devices[0] if devices else None
    loaded = compile_hlo_text(text, device=device, compiler_options=dict(compiler_options or {}))
    return Executable(loaded, _loaded_call(loaded), label="compile_hlo")


def _loaded_call(loaded: Any) -> Callable[..., Any]:
    target = loaded.local_devices()[0]

    def call(*args: Any) -> list[Any]:
        buffers = [a if _on(a, target) else jax.device_put(a, target) for a in args]
        return list(loaded.execute(buffers))

    return call


def _on(value: Any, device: Any) -> bool:
    return isinstance(value, jax.Array) and value.devices() == {device}


# Lowering fusion and schedule decisions into XLA is built and checked on these platforms:
# XLA:CPU, and XLA:GPU with CUDA (a device says "gpu"; its PJRT plugin is "cuda").
LOWERING_PLATFORMS: tuple[str, ...] = ("cpu", "gpu", "cuda")


def lowering_unsupported(platform: str) -> str:
    """Why decisions cannot be lowered on ``platform`` ("" where they can).

    Args:
      platform: an XLA platform (``"cpu"``, ``"gpu"``, ``"cuda"``, ``"tpu"``, ...).
    """
    if platform in LOWERING_PLATFORMS:
        return ""
    return (
        f"lowering decisions into XLA:{platform.upper()} is not supported: it is built and "
        f"checked on {', '.join(LOWERING_PLATFORMS)} only (docs/lowering.md)"
    )


class Program:
    """One program to compile with XLA's default pipeline or with our decisions.

    Build it with :func:`program`. The pre-fusion module, its graph and the decisions of
    each method are computed once, on first use.

    Attributes:
      name: the HLO module's name (hooks into XLA's compile filter on it).
      args: the concrete arguments (on the device), as a tuple of positional arguments.
      source_kind: ``"function"`` or ``"hlo"``.
      stage: the hook stage where the pre-fusion module is captured and ours swapped in
        (:func:`hlo_go.xla.hooks.lowering_stage`: ``"pre_scheduler"`` on XLA:CPU,
        ``"post_scheduler"`` on XLA:GPU).
    """

    def __init__(
        self,
        name: str,
        compile_fn: Callable[[dict[str, Any]], Any],
        call_of: Callable[[Any], Callable[..., Any]],
        args: tuple[Any, ...],
        *,
        source_kind: str,
        platform: str = "cpu",
        source_text: Callable[[], tuple[str, list[Any]]] | None = None,
        source_module: HloModule | None = None,
        stage: str | None = None,
    ) -> None:
        if stage not in (None, "pre_scheduler", "post_scheduler"):
            raise ValueError(f"stage must be 'pre_scheduler' or 'post_scheduler', got {stage!r}")
        self.stage = lowering_stage(platform) if stage is None else stage
        self.name = name
        self._source_text = source_text
        self._source_module = source_module
        self._compile = compile_fn
        self._call_of = call_of
        self.args = args
        self.source_kind = source_kind
        self.platform = platform

    def default(self) -> Executable:
        """XLA's default compile (its own fusion and schedule): the reference.

        Raises:
          LoweringError: XLA refused to compile the program (its message, and what to
            pass instead where that is known).
        """
        try:
            compiled = self._compile({})
        except jax.errors.JaxRuntimeError as error:
            hint = ""
            if "must have backend config" in str(error):
                hint = (
                    "; the module holds fusions XLA made (library kCustom fusions of a "
                    "pre-fusion module, or an optimized module), which XLA does not compile "
                    "again: pass the unoptimized module "
                    '(jax.jit(f).lower(...).as_text(dialect="hlo"))'
                )
            raise LoweringError(f"XLA cannot compile {self.name!r}: {error}{hint}") from None
        return Executable(compiled, self._call_of(compiled), label="XLA default")

    def float64_outputs(self) -> list[np.ndarray]:
        """The program evaluated with float32 widened to float64: near-exact outputs for
        the float64 arbiter (:func:`hlo_go.xla.arbiter.as_accurate_as_reference`), computed once.

        Raises:
          LoweringError: the program's source text is not known.
          Exception: what XLA raised when the widened module did not compile or run (the
            failure is remembered, not retried).
        """
        if self._source_text is None:
            raise LoweringError(f"{self.name!r}: no source text to evaluate in float64")
        return self._float64()

    @functools.cached_property
    def _float64(self) -> Callable[[], list[np.ndarray]]:
        assert self._source_text is not None
        return float64_once(self._source_text)

    @functools.cached_property
    def _captured(self) -> tuple[HloModule, dict[str, str | None]]:
        wrapped = capture_prefusion_with(
            self._compile,
            self.name,
            platform=self.platform,
            compiler_options=wrapped_compiler_options(self.platform),
            stage=self.stage,
        )
        return unwrap_fusions(wrapped)

    @property
    def prefusion(self) -> HloModule:
        """The module XLA would fuse: optimized, fusion passes off, at :attr:`stage`.

        Captured after XLA's ``fusion-wrapper`` pass and unwrapped
        (:func:`hlo_go.xla.fusion.unwrap_fusions`), so its layouts are those the
        backend's emitters expect; what our fusion leaves unfused is re-wrapped as XLA had
        it. On XLA:GPU it is captured after scheduling (``is_scheduled=true``).
        """
        return self._captured[0]

    def _wrap_rest(self, module: HloModule) -> HloModule:
        """What our fusion leaves unfused wrapped as XLA had it; control-flow bodies (which
        the graph does not see) fused by XLA (:func:`hlo_go.xla.fusion.adopt_control_flow`)."""
        wrapped = wrap_named(module, self._captured[1])
        if not control_flow_computations(wrapped):  # nothing to adopt: skip XLA's compile
            return wrapped
        return adopt_control_flow(wrapped, self._xla_fused)[0]

    @functools.cached_property
    def _xla_fused(self) -> HloModule:
        """XLA's own fusion of the module (matmuls as YNNPACK fusions, as XLA's default
        compile has them), captured at the same stage as :attr:`prefusion`."""
        return capture_prefusion_with(
            self._compile,
            self.name,
            platform=self.platform,
            compiler_options=XLA_FUSED_OPTIONS,
            stage=self.stage,
        )

    @functools.cached_property
    def graph(self) -> OpGraph:
        """The pre-fusion graph to make decisions on (node names: entry instructions).

        Decisions made on it (or on any graph with its fingerprint, such as
        ``build_graph(parse_hlo(text))`` of this pre-fusion module's text) are lowered;
        others are refused (:class:`DecisionsMismatchError`).
        """
        return build_graph(self.prefusion)

    @functools.cached_property
    def output_dims(self) -> np.ndarray:
        """Exact output-dimension keys of the graph's nodes (fusion legality)."""
        return module_output_dims(self.prefusion)

    def fused_module(
        self,
        fusion: FusionSpec,
        *,
        limits: FusionLimits = DEFAULT_LIMITS,
    ) -> tuple[HloModule, list[list[str]]]:
        """The pre-fusion module fused as ``fusion`` says (see :meth:`lower`).

        Returns:
          ``(module, groups)``: the module to swap in and the groups applied.

        Raises:
          DecisionsMismatchError: decisions made for another graph.
          LoweringError: decisions that do not fit the graph, a method name.
          FusionError: an illegal group (named).
        """
        if isinstance(fusion, HloModule):
            return fusion, []
        if fusion is None:  # no fusion anywhere, control-flow bodies included
            return wrap_named(self.prefusion, self._captured[1]), []
        _refuse_name(fusion, "fusion")
        if isinstance(fusion, Decisions):
            decisions = self._resolve(fusion)
            label = "Decisions"
            decisions = without_large_matrices(self.graph, decisions)
            group = decisions.fusion_groups(self.graph, output_dims=self.output_dims, limits=limits)
            groups = fusion_group_names(self.graph, group)
            try:
                return self._fuse(groups)
            except FusionError as error:
                raise FusionError(f"fusion {label!r} of {self.name!r}: {error}") from None
        return self._fuse([list(g) for g in fusion])

    def _fuse(self, groups: list[list[str]]) -> tuple[HloModule, list[list[str]]]:
        """The pre-fusion module with ``groups`` fused, cheap shared values recomputed
        where they are read (:func:`hlo_go.xla.fusion.regenerate_shared`); on a GPU the
        groups are first checked against XLA:GPU's fusion rules
        (:func:`hlo_go.decisions.check_gpu_fusion_groups`) and get its fusion kinds."""
        on_gpu = self.platform in GPU_PLATFORMS
        if on_gpu:
            self._check_gpu_rules(groups)
        module, groups = regenerate_shared(self.prefusion, groups)
        kind = gpu_fusion_kind if on_gpu else "kLoop"
        return self._wrap_rest(apply_fusion(module, groups, kind=kind)), groups

    def _check_gpu_rules(self, groups: Sequence[Sequence[str]]) -> None:
        index = {n: i for i, n in enumerate(self.graph.names)}
        label = np.arange(self.graph.num_nodes)
        for k, members in enumerate(groups):
            for name in members:
                if name in index:  # unknown names are apply_fusion's to refuse
                    label[index[name]] = self.graph.num_nodes + k
        try:
            check_gpu_fusion_groups(
                self.graph,
                label,
                np.zeros(self.graph.num_nodes, np.int64),
                output_dims=self.output_dims,
            )
        except FusionGroupError as error:
            raise FusionError(
                f"{self.name!r}: XLA:GPU would not build this fusion: {error}"
            ) from None

    def priorities(
        self,
        schedule: ScheduleSpec,
        module: HloModule,
    ) -> dict[str, float] | None:
        """Schedule priorities per entry instruction name of ``module`` (a fused module).

        A fusion takes the largest priority of its members (the instructions of its fused
        computation named like pre-fusion nodes); instructions with no priority (tuples
        of multi-output fusions, copies XLA adds) run as soon as they are ready.

        Returns:
          Name -> priority, or None for an order of XLA's (None, :data:`MEMORY_ORDER`).

        Raises:
          DecisionsMismatchError: decisions made for another graph.
          LoweringError: decisions that do not fit the graph, a method name.
        """
        if schedule is None or isinstance(schedule, Order):
            return None
        _refuse_name(schedule, "schedule")
        if isinstance(schedule, Mapping):
            return {str(k): float(v) for k, v in schedule.items()}
        decisions = self._resolve(schedule)
        node = dict(zip(self.graph.names, decisions.schedule_priority.tolist(), strict=True))
        out: dict[str, float] = {}
        for instr in module.entry.instructions:
            if instr.name in node:
                out[instr.name] = node[instr.name]
            elif instr.opcode == "fusion":
                called = module.computations.get(instr.attributes.get("calls", "").lstrip("%"))
                members = (
                    [node[i.name] for i in called.instructions if i.name in node] if called else []
                )
                if members:
                    out[instr.name] = max(members)
        return out

    def lower(
        self,
        decisions: Decisions | None = None,
        *,
        fusion: FusionSpec = None,
        schedule: ScheduleSpec = None,
        limits: FusionLimits = DEFAULT_LIMITS,
        label: str | None = None,
    ) -> Executable:
        """Compiles the program with our fusion and schedule.

        Method names (``"xla-cpu-like"``, ``"searched"``, ...) are not taken here:
        :mod:`hlo_go.methods` turns them into decisions for :attr:`graph`.

        Args:
          decisions: a :class:`~hlo_go.decisions.Decisions` made for :attr:`graph`, giving
            both fusion and schedule (``fusion``/``schedule`` override its parts).
          fusion: a ``Decisions`` (its fusion priority), groups of pre-fusion entry
            instruction names, or an already fused module; None: no fusion.
          schedule: a ``Decisions`` (its schedule priority), priorities per entry
            instruction name of the fused module, or :data:`MEMORY_ORDER` (XLA's order,
            memory-freeing instructions first); None: XLA's own order.
          limits: fusion grouping limits.
          label: what the executable is labelled (default: the kinds of ``fusion`` and
            ``schedule``).

        Returns:
          The :class:`Executable`.

        Raises:
          DecisionsMismatchError: decisions made for another graph.
          LoweringError: decisions that do not fit the graph, a method name, a platform
            lowering does not support yet (:func:`lowering_unsupported`).
          FusionError: an illegal fusion group.
          ScheduleError: priorities that give an illegal order.
        """
        unsupported = lowering_unsupported(self.platform)
        if unsupported:
            raise LoweringError(f"cannot lower {self.name!r}: {unsupported}")
        if decisions is not None:
            _refuse_name(decisions, "decisions")
            fusion = decisions if fusion is None else fusion
            schedule = decisions if schedule is None else schedule
        module, groups = self.fused_module(fusion, limits=limits)
        priority = self.priorities(schedule, module)
        by_memory = schedule is MEMORY_ORDER
        compiled, order = compile_hooked(
            self._compile,
            self.name,
            module=module,
            priority=priority,
            reorder=memory_schedule if by_memory else None,
            platform=self.platform,
            stage=self.stage,
        )
        if label is None:
            ordered_by = "xla" if priority is None and not by_memory else _label(schedule)
            label = f"fusion={_label(fusion)}, schedule={ordered_by}"
        return Executable(
            compiled,
            self._call_of(compiled),
            label=label,
            module=module,
            groups=groups,
            order=order,
        )

    def check(self, spec: FusionSpec | ScheduleSpec, what: str = "decisions") -> None:
        """Refuses what :meth:`lower` would refuse before compiling: a method name, or
        decisions made for another graph than :attr:`graph`.

        Raises:
          DecisionsMismatchError: decisions with another graph's fingerprint.
          LoweringError: a method name.
        """
        _refuse_name(spec, what)
        if isinstance(spec, Decisions):
            self._check_fingerprint(spec)

    def _resolve(self, spec: Decisions) -> Decisions:
        """``spec`` checked against :attr:`graph`: its fingerprint, then its arrays."""
        self._check_fingerprint(spec)
        n = self.graph.num_nodes
        try:
            num_devices = int(spec.placement.max()) + 1 if n else 1
            return spec.validate(self.graph, num_devices)
        except ValueError as error:
            raise LoweringError(
                f"decisions do not fit {self.name!r}'s pre-fusion graph ({n} nodes): {error}"
            ) from None

    def _check_fingerprint(self, spec: Decisions) -> None:
        made_for = spec.graph_fingerprint
        given = graph_fingerprint(self.graph)
        if made_for is None or made_for == given:
            return
        nodes = int(np.shape(spec.placement)[0])
        why = ""
        if self._source_module is not None:
            source = build_graph(self._source_module, validate=False)
            if graph_fingerprint(source) == made_for:
                why = (
                    " They were made for the module as given, which XLA's passes change "
                    "before fusion (only a pre-fusion module, such as Program.prefusion's "
                    "text, is its own pre-fusion graph)."
                )
        raise DecisionsMismatchError(
            f"decisions made for graph {made_for} ({nodes} nodes) do not fit "
            f"{self.name!r}'s pre-fusion graph {given} ({self.graph.num_nodes} nodes).{why} "
            "Make them on hlo_go.xla.program(...).graph, the graph XLA fuses.",
            made_for=made_for,
            given=given,
        )


def _refuse_name(spec: Any, what: str) -> None:
    """Raises for a method name where decisions are expected."""
    if isinstance(spec, str):
        raise LoweringError(
            f"{what}={spec!r} is a method name; hlo_go.xla lowers decisions, not names: "
            f"hlo_go.methods.decide(program.graph, {spec!r}) (or methods.fusion_spec / "
            "schedule_spec / variants) resolves it"
        )


def without_large_matrices(graph: OpGraph, decisions: Decisions) -> Decisions:
    """``decisions`` with the fusion priority of every large dot and convolution set to 0.

    Our fusions are loop fusions, where XLA's elemental emitter computes a dot or
    convolution one output element at a time: slower than its library kernel and less
    accurate (:func:`hlo_go.decisions.large_matrix_nodes`). Large ones therefore stay
    kernels of their own, as in XLA:CPU's own fusion; small ones may fuse.

    Args:
      graph: the program's pre-fusion graph.
      decisions: decisions for ``graph``.

    Returns:
      The decisions, fusion priority changed where a large matrix node had one.
    """
    priority = unfuse_large_matrices(graph, decisions.fusion_priority)
    if priority is decisions.fusion_priority:
        return decisions
    return decisions._replace(fusion_priority=priority)


def _label(spec: Any) -> str:
    if spec is None:
        return "none"
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Decisions):
        return "decisions"
    if isinstance(spec, Order):
        return spec.value
    if isinstance(spec, HloModule):
        return "module"
    if isinstance(spec, Mapping):
        return "priorities"
    return "groups"


def program(
    source: Source | Program,
    args: Sequence[Any] | None = None,
    *,
    seed: int = 0,
    scale: float = RANDOM_SCALE,
    platform: str = "cpu",
    compiler_options: Mapping[str, Any] | None = None,
    stage: str | None = None,
) -> Program:
    """A :class:`Program` from a function, a ``jax.stages.Lowered``, or an HLO module.

    Args:
      source: a jax-traceable function (with ``args``), a ``jax.stages.Lowered``, an
        :class:`~hlo_go.hlo.HloModule`, HLO text, or a path to an HLO file.
      args: the positional arguments. For a function they may hold
        ``jax.ShapeDtypeStruct`` leaves, drawn at random; for a ``Lowered`` or a module,
        None draws every entry parameter at random from its shape and dtype (integers in
        ``[1, 4)``, or ``[0, rows)`` when they index a table of fewer rows; floats
        the absolute values of N(0, ``scale``²); booleans fair).
      seed: the random inputs' seed.
      scale: standard deviation of random floats.
      platform: XLA platform (``"cpu"``).
      compiler_options: XLA options added to every compile of the program (e.g.
        :data:`hlo_go.xla.profile.TRACEME_OPTIONS` for per-thunk trace events).
      stage: the hook stage where decisions are swapped in (None: the platform's,
        :func:`hlo_go.xla.hooks.lowering_stage`).

    Returns:
      The program, its arguments placed on the device.

    Raises:
      LoweringError: a function without arguments, a file that does not exist.
    """
    if isinstance(source, Program):
        return source
    if isinstance(source, HloModule | str | os.PathLike):
        return _hlo_program(
            source,
            args,
            seed=seed,
            scale=scale,
            platform=platform,
            compiler_options=compiler_options,
            stage=stage,
        )
    if isinstance(source, jax.stages.Lowered):
        lowered = source
        if args is None:
            # in_avals is the ((positional...), {keyword...}) tree of ShapedArrays.
            abstract = jax.tree.map(
                lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), lowered.in_avals
            )
            args = random_arguments(
                abstract,
                seed=seed,
                scale=scale,
                positive=True,
                leaf_bounds=leaf_index_bounds(lowered, abstract),
            )
            args = _as_positional(args)
    elif callable(source):
        if args is None:
            raise LoweringError(
                f"{getattr(source, '__name__', source)!r} is a function: give its args "
                "(arrays, or jax.ShapeDtypeStruct leaves to draw at random)"
            )
        args = tuple(args)
        lowered = jax.jit(source).lower(*args)
    else:
        raise LoweringError(f"cannot lower a {type(source).__name__}")
    if has_abstract_leaves(args):
        args = random_arguments(
            tuple(args),
            seed=seed,
            scale=scale,
            positive=True,
            leaf_bounds=leaf_index_bounds(lowered, tuple(args)),
        )
    device = jax.devices(platform)[0]
    placed = tuple(jax.device_put(tuple(args), device))
    name = lowered.compiler_ir("hlo").as_hlo_module().name
    extra = dict(compiler_options or {})

    def source_text() -> tuple[str, list[Any]]:  # the lowered module and its parameters
        return lowered_source(lowered, jax.tree.leaves(placed))

    return Program(
        name,
        lambda options: lowered.compile(compiler_options={**extra, **options} or None),
        lambda compiled: compiled,
        placed,
        source_kind="function",
        platform=platform,
        source_text=source_text,
        stage=stage,
    )


def _as_positional(tree: Any) -> tuple[Any, ...]:
    # Lowered.in_tree is ((positional...), {keyword...}); keywords are not supported here.
    positional, keywords = tree
    if keywords:
        raise LoweringError(f"keyword arguments are not supported: {sorted(keywords)}")
    return tuple(positional)


def _hlo_program(
    source: HloModule | str | os.PathLike,
    args: Sequence[Any] | None,
    *,
    seed: int,
    scale: float,
    platform: str,
    compiler_options: Mapping[str, Any] | None = None,
    stage: str | None = None,
) -> Program:
    if isinstance(source, HloModule):
        module = source
    elif isinstance(source, os.PathLike) or (
        isinstance(source, str)
        and "\n" not in source
        and not source.lstrip().startswith("HloModule")
    ):
        path = Path(source)
        if not path.exists():
            raise LoweringError(f"no HLO file {str(path)!r}")
        module = load_hlo(path)
    else:
        module = parse_hlo(source, filename="<hlo text>")
    module = recover_prefusion(module)  # an optimized module: fusions inlined, or refused
    problem = screen(module, platform, stacklevel=5)
    if problem:
        raise LoweringError(f"cannot compile {module.name} for {platform}: {problem}")
    text = module.to_text()
    if args is None:
        try:
            args = random_inputs(module, seed=seed, scale=scale, positive=True)
        except ValueError as error:
            raise LoweringError(f"cannot draw random inputs: {error}") from None
    device = jax.devices(platform)[0]

    def compile_fn(options: dict[str, Any]) -> Any:
        return compile_hlo_text(
            text, device=device, compiler_options={**(compiler_options or {}), **options}
        )

    placed = tuple(jax.device_put(a, device) for a in args)
    return Program(
        module.name,
        compile_fn,
        _loaded_call,
        placed,
        source_kind="hlo",
        platform=platform,
        source_text=lambda: (text, list(placed)),
        source_module=module,
        stage=stage,
    )


def lower(
    source: Source | Program,
    decisions: Decisions | None = None,
    *,
    args: Sequence[Any] | None = None,
    fusion: FusionSpec = None,
    schedule: ScheduleSpec = None,
    limits: FusionLimits = DEFAULT_LIMITS,
    seed: int = 0,
) -> Executable:
    """Compiles a function or an HLO module with our fusion and schedule decisions.

    ``lower(fn, decisions, args=...)`` is ``program(fn, args).lower(decisions, ...)``
    (:meth:`Program.lower` documents ``fusion``, ``schedule`` and the rest). Decisions
    are for the pre-fusion graph, ``program(fn, args).graph``.

    Returns:
      The :class:`Executable`; call it with the program's arguments.
    """
    return program(source, args, seed=seed).lower(
        decisions, fusion=fusion, schedule=schedule, limits=limits
    )
