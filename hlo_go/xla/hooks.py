"""Hooks into XLA's own compile pipeline, and the pre-fusion capture built on them.

``jax.extend.xla.register_hlo_module_transformation`` hands a callback the
serialized HloModuleProto at a pipeline stage (PRE_SCHEDULER: optimized, fused;
POST_SCHEDULER: scheduled) and takes back a changed one. The hook is process
wide and fires for every module compiled while registered (JAX's helper jits
too), so :func:`hlo_hook` filters by module name and always unregisters.

The hook fires only when XLA really compiles: JAX answers a compile it has seen (same
module, same compiler options) from its caches. Every hooked compile here passes its
options through :func:`uncached_options`, which makes them unique, so it is never
answered from a cache and never answers another compile (:func:`compile_uncached`). Its
executable would still sit in JAX's in-memory cache for as long as the lowered module
lives, so :func:`compile_uncached` empties that cache after each such compile
(:func:`hlo_go.xla._jaxlib.forget_compiled_executables`): the user's jitted functions keep
their executables, and a module lowered before may be compiled once more.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import jax
import jax.extend

from hlo_go.hlo import HloModule, parse_hlo
from hlo_go.xla._jaxlib import (
    forget_compiled_executables,
    hook_platform,
    module_from_proto,
    xla_module_to_text,
)

# Compile options that give the module XLA would fuse: its optimizations, minus
# fusion, with matmuls left as plain dots (not YNNPACK custom fusions).
PREFUSION_COMPILER_OPTIONS: dict[str, Any] = {
    "xla_disable_hlo_passes": "fusion,fusion-wrapper",
    "xla_cpu_experimental_ynn_fusion_type": "",
}

# XLA's fusion off but its fusion-wrapper on: every instruction it would emit alone comes
# wrapped in a one-instruction fusion, with the layouts XLA:CPU's emitters expect. Its
# library kernels (YNNPACK matmuls, convolutions, reductions) stay on, as in XLA's default
# compile: turning them off changes the pipeline before fusion (e.g. large reductions
# become reduce-window trees) and runs slower, less accurate kernels.
WRAPPED_COMPILER_OPTIONS: dict[str, Any] = {
    "xla_disable_hlo_passes": "fusion",
}

# XLA:GPU's fusion passes, as its pipeline names them (priority fusion, the sibling and
# horizontal fusions after it, and the older instruction fusion and merger): XLA ignores a
# name in ``xla_disable_hlo_passes`` that no pass of its pipeline has, so names from other
# XLA versions do no harm. Its ``fusion-wrapper`` (every unfused instruction in a fusion of
# its own, as XLA:GPU's emitters expect) and its library fusions (cuBLAS, cuDNN and Triton
# GEMM fusions, like YNNPACK's on XLA:CPU) stay on.
GPU_FUSION_PASSES: tuple[str, ...] = (
    "priority-fusion",
    "fusion",
    "multi_output_fusion",
    "horizontal_loop_fusion",
    "gpu_horizontal_loop_fusion",
    "horizontal_input_fusion",
    "gpu_horizontal_input_fusion",
    "fusion_merger",
    "fusion-merger",
)


# Platform names a GPU goes by: what its devices say, and its PJRT plugins' names.
GPU_PLATFORMS: tuple[str, ...] = ("gpu", "cuda", "rocm")


def wrapped_compiler_options(platform: str = "cpu") -> dict[str, Any]:
    """:data:`WRAPPED_COMPILER_OPTIONS` for ``platform``: XLA's fusion passes off, its
    fusion wrapper on (on ``"cuda"``/``"rocm"``, the passes of :data:`GPU_FUSION_PASSES`)."""
    if platform in GPU_PLATFORMS:
        return {"xla_disable_hlo_passes": ",".join(GPU_FUSION_PASSES)}
    return dict(WRAPPED_COMPILER_OPTIONS)


# XLA's own fusion, matmuls as YNNPACK custom fusions included: its fusion of the
# control-flow bodies our graph does not model (hlo_go.xla.fusion.adopt_control_flow). The
# option is XLA's default value; giving it keeps JAX's compile cache from answering with
# the default compile (the hook fires only on a real compile).
XLA_FUSED_OPTIONS: dict[str, Any] = {"xla_embed_ir_in_executable": False}

_STAGES = {
    "pre_scheduler": jax.extend.xla.PipelineStage.PRE_SCHEDULER,
    "post_scheduler": jax.extend.xla.PipelineStage.POST_SCHEDULER,
}


def lowering_stage(platform: str) -> str:
    """The hook stage where ``platform``'s pipeline has laid out, wrapped and not yet fused
    or emitted the module: where the pre-fusion module is captured and ours swapped in.

    XLA:CPU runs its pre-scheduler hook after layout assignment and its fusion wrapper.
    XLA:GPU runs it at the end of its ``optimization`` pipeline, before layout assignment,
    its Triton/cuBLAS rewrites and fusion (a module fused there reaches layout assignment,
    which leaves fused computations without layouts); its post-scheduler hook comes after
    all of those, copy insertion and scheduling, so on a GPU both happen there and the
    module handed back carries its own schedule (``is_scheduled=true``).

    Args:
      platform: an XLA platform (``"cpu"``, ``"gpu"``, ``"cuda"``, ``"rocm"``).

    Returns:
      ``"pre_scheduler"`` or ``"post_scheduler"``.
    """
    return "post_scheduler" if platform in GPU_PLATFORMS else "pre_scheduler"


_counter = itertools.count()

# The XLA debug option :func:`uncached_options` sets to a value of its own for each
# compile. It only bounds how many buffers XLA's debug printout of a buffer assignment
# lists, so the executable is unchanged; and JAX's persistent-cache key keeps it (the key
# drops the options it knows to be harmless, the ``xla_dump_*`` ones among them, so a
# nonce there would let the persistent cache answer a compile whose hooks must fire).
NONCE_OPTION = "xla_debug_buffer_assignment_show_max"
_nonces = itertools.count(random.SystemRandom().randrange(1 << 24, 1 << 29) + os.getpid() % 1024)


def uncached_options(options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``options`` with :data:`NONCE_OPTION` set to a value no other compile had.

    JAX keys its compile caches (in memory, and the persistent one when it is on) by the
    module and the compiler options: a compile under these options really runs XLA's
    pipeline, so the hooks of :func:`hlo_hook` fire, and no later compile of the module
    is answered with its (changed) executable.

    Args:
      options: XLA debug options (None: none).

    Returns:
      A new dict.
    """
    return {**(options or {}), NONCE_OPTION: next(_nonces)}


def compile_uncached(
    compile_fn: Callable[[dict[str, Any]], Any], options: Mapping[str, Any] | None = None
) -> Any:
    """``compile_fn(uncached_options(options))``, then JAX's in-memory executable cache
    emptied (:func:`hlo_go.xla._jaxlib.forget_compiled_executables`), whether the compile
    succeeded or not: each hooked compile is new, and none stays cached.

    Args:
      compile_fn: compiles with the XLA options it is given (e.g.
        ``lambda o: lowered.compile(compiler_options=o)``).
      options: XLA debug options (None: none).

    Returns:
      What ``compile_fn`` returns.
    """
    try:
        return compile_fn(uncached_options(options))
    finally:
        forget_compiled_executables()


@contextmanager
def hlo_hook(
    callback: Callable[[Any], bytes | None],
    *,
    module_name: str | None = None,
    stage: str = "pre_scheduler",
    platform: str = "cpu",
) -> Iterator[None]:
    """Runs ``callback(module)`` inside XLA's compile while the ``with`` block runs.

    Args:
      callback: called with the ``jaxlib`` HloModule at ``stage``; returns new
        serialized proto bytes to replace the module, or None to leave it.
      module_name: only modules with this name reach the callback (None: all).
      stage: "pre_scheduler" or "post_scheduler".
      platform: XLA platform name ("cpu", "cuda", or a device's "gpu").

    The hook is always removed on exit, also when the block raises. A compile inside
    the block reaches it only when XLA really compiles: give that compile
    :func:`uncached_options` options (JAX's caches are not cleared, so the user's jitted
    functions keep their executables).
    """
    if stage not in _STAGES:
        raise ValueError(f"stage must be one of {sorted(_STAGES)}, got {stage!r}")
    pipeline_stage = _STAGES[stage]
    name = f"hlo_go_hook_{next(_counter)}"
    platform = hook_platform(platform)

    def wrapped(proto: bytes) -> bytes | None:
        module = module_from_proto(proto)
        if module_name is not None and module.name != module_name:
            return None
        return callback(module)

    jax.extend.xla.register_hlo_module_transformation(
        wrapped, name=name, stage=pipeline_stage, platforms=platform
    )
    try:
        yield
    finally:
        jax.extend.xla.clear_hlo_module_transformation(
            name=name, stage=pipeline_stage, platforms=platform
        )


def capture_prefusion(
    fn: Callable[..., Any], *args: Any, platform: str = "cpu", **kwargs: Any
) -> HloModule:
    """The module XLA would fuse: ``fn`` optimized by XLA with fusion disabled,
    captured before scheduling.

    Args:
      fn: a jax-traceable function (or an already ``jax.jit``-ed one).
      *args: example arguments (arrays or ``jax.ShapeDtypeStruct``).
      platform: XLA platform to compile for.
      **kwargs: keyword arguments for ``fn``.

    Returns:
      The captured module, parsed.
    """
    lowered = jax.jit(fn).lower(*args, **kwargs)
    return capture_prefusion_lowered(lowered, platform=platform)


def capture_prefusion_lowered(lowered: Any, *, platform: str = "cpu") -> HloModule:
    """:func:`capture_prefusion` for a ``jax.stages.Lowered``."""
    module_name = lowered.compiler_ir("hlo").as_hlo_module().name
    return capture_prefusion_with(
        lambda options: lowered.compile(compiler_options=options), module_name, platform=platform
    )


def capture_prefusion_with(
    compile_fn: Callable[[dict[str, Any]], Any],
    module_name: str,
    *,
    platform: str = "cpu",
    compiler_options: dict[str, Any] | None = None,
    stage: str = "pre_scheduler",
) -> HloModule:
    """:func:`capture_prefusion` for any compile: ``compile_fn(compiler_options)`` must run
    XLA's pipeline on a module named ``module_name`` (e.g. a ``jax.stages.Lowered``'s
    ``compile``, or :func:`hlo_go.xla.compile_hlo` of HLO text).

    ``compiler_options`` replaces :data:`PREFUSION_COMPILER_OPTIONS` (e.g.
    :data:`WRAPPED_COMPILER_OPTIONS`, see :func:`hlo_go.xla.fusion.unwrap_fusions`);
    ``stage`` is the hook stage captured at (:func:`lowering_stage`).

    Raises:
      RuntimeError: the compile never reached the hook (e.g. the module is named
        otherwise).
    """
    captured: list[str] = []

    def keep(module: Any) -> None:
        captured.append(xla_module_to_text(module))  # large constants included
        # Stop the compile here: the rest of XLA's pipeline is not needed, and the CPU
        # backend cannot emit some unfused ops (e.g. scatter) anyway.
        raise _CaptureDone

    with hlo_hook(keep, module_name=module_name, platform=platform, stage=stage):
        try:
            compile_uncached(
                compile_fn,
                PREFUSION_COMPILER_OPTIONS if compiler_options is None else compiler_options,
            )
        except Exception:
            if not captured:
                raise
    if not captured:
        raise RuntimeError(f"XLA's compile of {module_name!r} never reached the {stage} hook")
    return parse_hlo(captured[-1], filename=f"<prefusion {module_name}>")


class _CaptureDone(Exception):
    """Raised inside XLA's compile once the pre-fusion module is captured."""


def compile_replacing(lowered: Any, module: HloModule, *, platform: str = "cpu") -> Any:
    """Compiles ``lowered`` with XLA's own pipeline (fusion passes off), swapping in
    ``module`` before scheduling: XLA then schedules and emits exactly ``module``.

    Args:
      lowered: a ``jax.stages.Lowered`` whose pre-fusion module ``module`` was derived from.
      module: the module to compile instead (same parameters and result shape).
      platform: XLA platform.

    Returns:
      A ``jax.stages.Compiled``, callable like the jitted function.
    """
    from hlo_go.xla._jaxlib import xla_parse

    proto = xla_parse(module.to_text()).as_serialized_hlo_module_proto()
    module_name = lowered.compiler_ir("hlo").as_hlo_module().name
    swapped: list[bool] = []

    def swap(_: Any) -> bytes:
        swapped.append(True)
        return proto

    with hlo_hook(swap, module_name=module_name, platform=platform):
        compiled = compile_uncached(
            lambda options: lowered.compile(compiler_options=options), PREFUSION_COMPILER_OPTIONS
        )
    if not swapped:
        raise RuntimeError(f"XLA's compile of {module_name!r} never reached the pre-scheduler hook")
    return compiled
