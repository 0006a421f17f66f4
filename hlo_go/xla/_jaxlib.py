"""The one module that touches private jaxlib names.

Everything in hlo-go that needs XLA's C++ HLO machinery goes through here, so a
JAX upgrade that moves a private name touches this file only.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from jaxlib import _hlo as _xla_hlo
from jaxlib import _jax as _xla_jax

from hlo_go.errors import HloGoError


def xla_parse(text: str) -> Any:
    """Parses HLO text with XLA's own C++ parser.

    Args:
      text: HLO module text.

    Returns:
      A ``jaxlib._hlo.HloModule``.

    Raises:
      ValueError: XLA rejected the text (its message, with line:column).

    Note: XLA's parser aborts the whole process on a few malformed inputs (for
    example a parameter number out of range). Use :func:`xla_accepts` for text of
    unknown quality.
    """
    try:
        return _xla_hlo.hlo_module_from_text(text)
    except Exception as e:  # XlaRuntimeError and friends
        raise ValueError(str(e)) from None


def xla_module_to_text(module: Any) -> str:
    """Prints a ``jaxlib._hlo.HloModule`` as XLA prints it, large constants included.

    XLA's default print options elide constants of more than a few elements as
    ``{...}``, which XLA's parser reads back as a literal of unspecified values: text
    printed that way does not compute what the module did.
    """
    options = _xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    return module.to_string(options)


def canonical_program_text(text: str) -> str:
    """A key under which two HLO modules compile to the same program.

    XLA's canonical print (``HloPrintOptions.canonical``) numbers instructions in
    order and drops metadata; called computations are printed inline
    (``canonicalize_computations``), and large constants, backend configs and control
    dependencies in full, so only names and source locations are left out. The module
    name is dropped from the header; the header's layout and ``input_output_alias``
    are kept. Computations nothing in the entry calls are ignored.

    Args:
      text: HLO module text.

    Returns:
      The header without the module name, then the entry computation without its name.
    """
    options = _xla_hlo.HloPrintOptions.canonical()
    options.canonicalize_computations = True
    options.print_large_constants = True
    options.print_backend_config = True
    options.print_control_dependencies = True
    printed = xla_parse(text).to_string(options)
    header, _, rest = printed.partition("\n")
    entry = rest[rest.index("\nENTRY ") + 1 :] if not rest.startswith("ENTRY ") else rest
    return header.partition(",")[2] + "\n" + entry.partition("{")[2]


def xla_cost_analysis(text: str) -> dict[str, float]:
    """XLA's HloCostAnalysis totals for a module given as HLO text (CPU client)."""
    import jax.extend

    client = jax.extend.backend.get_backend("cpu")
    return dict(_xla_jax.hlo_module_cost_analysis(client, xla_parse(text)))


_ACCEPTS_SCRIPT = """
import sys
from jaxlib import _hlo
text = sys.stdin.read()
try:
    _hlo.hlo_module_from_text(text)
except Exception as e:
    sys.stdout.write("REJECT " + str(e))
    sys.exit(0)
sys.stdout.write("ACCEPT")
"""


def xla_accepts(text: str, *, timeout_s: float = 60.0) -> tuple[bool, str]:
    """Asks XLA's parser, in a child process, whether it accepts ``text``.

    XLA's parser can abort the process on some malformed inputs, so untrusted
    text is parsed in a subprocess.

    Returns:
      ``(accepted, message)``; ``message`` is XLA's error text, or a note that
      the parser crashed.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _ACCEPTS_SCRIPT],
        input=text,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.stdout.startswith("ACCEPT"):
        return True, ""
    if proc.stdout.startswith("REJECT"):
        return False, proc.stdout[len("REJECT ") :]
    return False, f"XLA's parser crashed (exit code {proc.returncode}): {proc.stderr[-500:]}"


_VERIFIES_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from hlo_go.xla._jaxlib import compile_hlo_text, xla_parse
text = sys.stdin.read()
try:
    xla_parse(text)
except ValueError as e:
    sys.stdout.write("REJECT XLA's parser: " + str(e))
    sys.exit(0)
try:
    compile_hlo_text(text)
except Exception as e:
    message = str(e)
    # Verification failures: XLA's shape checks (INVALID_ARGUMENT) and the StableHLO
    # verifier's located errors. Anything else (e.g. "Unsupported type: TUPLE" from the
    # HLO -> StableHLO importer) means this path cannot check the module, not that it is
    # invalid.
    refused = message.startswith(("INVALID_ARGUMENT", "FAILED_PRECONDITION")) or (
        ": error: " in message
    )
    stage = "REJECT XLA's verifier" if refused else "UNCHECKED compiling for CPU"
    sys.stdout.write(stage + ": " + message)
    sys.exit(0)
sys.stdout.write("ACCEPT")
"""


def xla_verifies(text: str, *, timeout_s: float = 600.0) -> tuple[bool | None, str]:
    """Runs XLA's parser and then its verifier on ``text``, in a child process.

    The verifier runs while the module is converted to StableHLO and compiled for this
    host's CPU (:func:`compile_hlo_text`): shape checks on the way in, the StableHLO
    verifier, then XLA's HloVerifier pass. Some valid modules cannot take that path (the
    importer refuses tuple-typed values, other backends' custom calls): those are
    reported as not checked (None), not as rejected. XLA can crash on invalid modules
    (e.g. a tuple index out of range), hence the child.

    Args:
      text: HLO module text.
      timeout_s: the most seconds the child may take.

    Returns:
      ``(verdict, message)``: True (parsed and verified), False (rejected or crashed;
      ``message`` says by which stage, with XLA's error text) or None (parsed, but the
      verifier could not run here; ``message`` says why).
    """
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _VERIFIES_SCRIPT, root],
            input=text,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return None, f"XLA did not finish verifying within {timeout_s:g} s"
    if proc.stdout.startswith("ACCEPT"):
        return True, ""
    if proc.stdout.startswith("REJECT"):
        return False, proc.stdout[len("REJECT ") :]
    if proc.stdout.startswith("UNCHECKED"):
        return None, "not verified: " + proc.stdout[len("UNCHECKED ") :]
    return False, f"XLA crashed (exit code {proc.returncode}): {proc.stderr[-500:]}"


def compile_hlo_text(
    text: str, *, device: Any = None, compiler_options: dict[str, Any] | None = None
) -> Any:
    """Compiles HLO text for one device: HLO → proto → StableHLO → executable.

    Args:
      text: HLO module text (single-device: ``num_partitions`` and replicas of 1).
      device: the jax device to compile for, of any platform (default: the first
        CPU device); the executable runs on that device only.
      compiler_options: XLA debug options, e.g. ``{"xla_disable_hlo_passes": "fusion"}``.

    Returns:
      A loaded executable; run it with :func:`run_executable`.
    """
    import jax.extend
    import numpy as np

    module = xla_parse(text)
    prepare_custom_calls(text)
    mlir = jax.extend.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend(device.platform if device is not None else "cpu")
    target = device if device is not None else backend.local_devices()[0]
    options = jax.extend.backend.get_compile_options(
        num_replicas=1,
        num_partitions=1,
        device_assignment=np.array([[target.id]]),
        backend=backend,
    )
    if compiler_options:
        options.env_option_overrides = list(compiler_options.items())
    return backend.compile_and_load(mlir, _xla_jax.DeviceList((target,)), options)


def run_executable(executable: Any, args: list[Any], *, x64: bool = False) -> list[Any]:
    """Runs a loaded single-device executable on host arrays; returns numpy outputs
    (tuple results flattened). ``x64=True`` keeps 64-bit arguments 64-bit (JAX would
    otherwise narrow them to 32 bits on the way to the device)."""
    import contextlib

    import jax
    import numpy as np

    device = executable.local_devices()[0]
    with jax.enable_x64(True) if x64 else contextlib.nullcontext():
        buffers = [jax.device_put(a, device) for a in args]
        return [np.asarray(out) for out in executable.execute(buffers)]


def module_from_proto(proto: bytes) -> Any:
    """A ``jaxlib`` HloModule from serialized HloModuleProto bytes."""
    return _xla_hlo.HloModule.from_serialized_hlo_module_proto(proto)


def lowered_kept_arguments(lowered: Any, count: int) -> list[int]:
    """Indices of the flat arguments a ``jax.stages.Lowered`` kept as HLO parameters.

    ``jax.jit`` drops unused arguments from the module it lowers (``keep_unused=False``);
    the module's entry parameters are the kept ones, in order. ``count`` is the number of
    flat arguments (all kept when JAX does not say otherwise).
    """
    kept = getattr(lowered, "_lowering", None)
    kept = getattr(kept, "compile_args", {}).get("kept_var_idx") if kept is not None else None
    return sorted(kept) if kept is not None else list(range(count))


def executable_hlo_text(executable: Any) -> str:
    """The optimized HLO text of a loaded executable (its first module)."""
    return xla_module_to_text(executable.hlo_modules()[0])


# ---------------------------------------------------------------------------
# SPMD: one module partitioned over several devices (hlo_go.xla.spmd).


def compile_hlo_text_spmd(
    text: str, devices: Any, *, compiler_options: dict[str, Any] | None = None
) -> Any:
    """Compiles HLO text with ``sharding=`` annotations through XLA's SPMD partitioner.

    Same path as :func:`compile_hlo_text` (HLO → proto → StableHLO → executable): the
    annotations become ``mhlo.sharding`` attributes in the StableHLO and reach XLA's
    partitioner intact. The module's own ``num_partitions`` is not needed: the compile
    options carry it. GSPMD (not Shardy) partitions: the annotations are GSPMD's.

    Args:
      text: HLO module text.
      devices: the devices, one partition each; partition ``k`` of the shardings'
        tile assignments runs on ``devices[k]``.
      compiler_options: XLA debug options.

    Returns:
      A loaded executable over ``devices`` (``num_partitions=len(devices)``, one replica).
    """
    import jax.extend
    import numpy as np

    devices = tuple(devices)
    module = xla_parse(text)
    prepare_custom_calls(text)
    mlir = jax.extend.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend(devices[0].platform)
    options = jax.extend.backend.get_compile_options(
        num_replicas=1,
        num_partitions=len(devices),
        device_assignment=np.array([[d.id for d in devices]]),
        backend=backend,
    )
    build = options.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = False
    if compiler_options:
        options.env_option_overrides = list(compiler_options.items())
    return backend.compile_and_load(mlir, _xla_jax.DeviceList(devices), options)


def executable_shardings(executable: Any) -> tuple[list[str], list[str]]:
    """The HLO sharding text of a partitioned executable's parameters and outputs.

    Outputs of a tuple result are listed one per element. An unannotated parameter
    or output reads ``{replicated}``.
    """

    def text(op_sharding: Any) -> str:
        return (
            "{replicated}"
            if op_sharding is None
            else str(_xla_hlo.HloSharding.from_proto(op_sharding))
        )

    return (
        [text(s) for s in executable.get_parameter_shardings() or ()],
        [text(s) for s in executable.get_output_shardings() or ()],
    )


def sharding_tiles(sharding: str, rank: int) -> tuple[int, ...]:
    """How many tiles an HLO sharding cuts each of an array's ``rank`` dimensions into.

    Args:
      sharding: HLO sharding text of one array, e.g. ``"{devices=[2,1,4]<=[8]
        last_tile_dim_replicate}"``.
      rank: the array's rank.

    Returns:
      Tiles per dimension (all 1 for replicated and maximal shardings).

    Raises:
      ValueError: a tuple, manual, unreduced or unknown sharding, or one whose tile
        assignment does not match ``rank``.
    """
    try:
        hlo = _xla_hlo.HloSharding.from_string(sharding)
    except Exception as e:
        raise ValueError(f"XLA rejects the sharding {sharding!r}: {e}") from None
    if hlo.tuple_elements():
        raise ValueError(f"expected the sharding of one array, got a tuple sharding {sharding}")
    if hlo.is_manual() or hlo.is_unreduced() or hlo.is_unknown():
        raise ValueError(f"cannot split an array by the sharding {sharding}")
    if hlo.is_replicated() or hlo.is_maximal():
        return (1,) * rank
    subgroups = hlo.subgroup_types()
    if any(t != _xla_hlo.OpSharding_Type.REPLICATED for t in subgroups):
        raise ValueError(f"cannot split an array by the sharding {sharding} (manual subgroups)")
    dims = tuple(hlo.tile_assignment_dimensions())
    data_dims = len(dims) - (len(subgroups) or int(hlo.replicate_on_last_tile_dim()))
    if data_dims != rank:
        raise ValueError(
            f"the sharding {sharding} tiles {data_dims} dimensions, the array has {rank}"
        )
    return dims[:data_dims]


def gspmd_sharding(devices: Any, sharding: str) -> Any:
    """A ``jax.sharding.Sharding`` for HLO sharding text over ``devices`` (partition
    ``k`` on ``devices[k]``): JAX's GSPMDSharding, which computes every device's slice
    (``devices_indices_map``) for any tile assignment, transposed iotas included."""
    from jax._src.sharding_impls import GSPMDSharding

    return GSPMDSharding(tuple(devices), _xla_hlo.HloSharding.from_string(sharding))


def execute_sharded(executable: Any, arrays: list[Any]) -> list[list[Any]]:
    """Runs a partitioned executable on global ``jax.Array`` arguments.

    Args:
      executable: from :func:`compile_hlo_text_spmd`.
      arrays: one ``jax.Array`` per parameter, its shards on the executable's devices.

    Returns:
      Per output (tuple results flattened), its per-device buffers as single-device
      ``jax.Array``s, in the executable's device order. Dispatch is asynchronous.
    """
    return executable.execute_sharded(arrays).disassemble_into_single_device_arrays()


def compiled_temp_bytes(compiled: Any) -> int | None:
    """Bytes of the temporary buffer XLA's buffer assignment gives one call of a compiled
    executable (a ``jax.stages.Compiled`` or a loaded executable); None when unknown."""
    try:
        if hasattr(compiled, "memory_analysis"):
            stats = compiled.memory_analysis()
        else:
            stats = compiled.get_compiled_memory_stats()
    except (AttributeError, NotImplementedError, RuntimeError):  # no memory statistics
        return None
    size = getattr(stats, "temp_size_in_bytes", None)
    return None if size is None else int(size)


# -- For hlo_go.xla.passes and hlo_go.rl.distributed (their private jaxlib uses, moved here) --

# A child process's script (imports no hlo_go module): HLO text on stdin, compiled by XLA's
# CPU compiler with YNNPACK fusion off (hlo_go.xla.passes.discover_pipeline logs its passes).
CPU_COMPILE_SCRIPT = """
import sys
import jax.extend
from jaxlib import _hlo, _jax
proto = _hlo.hlo_module_from_text(sys.stdin.read()).as_serialized_hlo_module_proto()
mlir = jax.extend.mlir.hlo_to_stablehlo(proto)
backend = jax.extend.backend.get_backend("cpu")
options = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=1)
options.env_option_overrides = [("xla_cpu_experimental_ynn_fusion_type", "")]
backend.compile_and_load(mlir, _jax.DeviceList((backend.local_devices()[0],)), options)
"""


def hlo_module_from_text(text: str) -> Any:
    """XLA's parse of HLO text, its own exceptions unchanged (:func:`xla_parse` turns them
    into ``ValueError``)."""
    return _xla_hlo.hlo_module_from_text(text)


def hlo_text_to_proto(text: str) -> bytes:
    """HLO text parsed by XLA, as serialized HloModuleProto bytes."""
    return _xla_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def stablehlo_round_trip(proto: bytes) -> str:
    """A serialized HloModuleProto → StableHLO → HLO text: the conversion every compile of
    HLO text starts with, applied on its own (no passes)."""
    mlir = _xla_jax.mlir.hlo_to_stablehlo(proto)
    computation = _xla_jax.mlir.mlir_module_to_xla_computation(
        mlir, use_tuple_args=False, return_tuple=False
    )
    return module_from_proto(computation.as_serialized_hlo_module_proto()).to_string()


def canonical_print(module: Any) -> str:
    """A ``jaxlib`` HloModule printed with ``HloPrintOptions.canonical()`` (instruction
    names canonicalized, no metadata)."""
    return module.to_string(_xla_hlo.HloPrintOptions.canonical())


def gloo_available() -> bool:
    """Whether this jaxlib has gloo CPU collectives (what CPU processes need to talk)."""
    return hasattr(_xla_jax, "make_gloo_tcp_collectives")


# ---------------------------------------------------------------------------
# jax/jaxlib version differences (issue 44: Python 3.11 with jax 0.10.2, Python 3.12+
# with the newest jax). Every feature that one supported jaxlib lacks is reached through
# here and, where missing, raises MissingJaxlibFeatureError naming the installed version.


class MissingJaxlibFeatureError(RuntimeError, HloGoError):
    """The installed jaxlib lacks a feature hlo-go needs; the message names the jaxlib
    version and the feature."""


def jaxlib_version() -> str:
    """The installed jaxlib's version, e.g. ``"0.10.2"``."""
    import jaxlib

    return str(getattr(jaxlib, "__version__", None) or jaxlib.version.__version__)


def missing_feature(feature: str, *, needed_for: str) -> MissingJaxlibFeatureError:
    """The error for a ``feature`` the installed jaxlib lacks (to raise)."""
    return MissingJaxlibFeatureError(
        f"jaxlib {jaxlib_version()} has no {feature}, which hlo-go needs for {needed_for}; "
        "install a jaxlib the README lists (0.10.2 on Python 3.11, the newest on 3.12+)"
    )


_cache_warned: list[bool] = []


def forget_compiled_executables() -> None:
    """Drops the executables JAX keeps in memory by lowered module
    (``jax._src.interpreters.pxla._cached_compilation``, an LRU of 2,048 entries).

    A hooked compile's options are its own (:func:`hlo_go.xla.hooks.uncached_options`), so
    its entry is never reused, yet it keeps the executable, and the memory XLA:CPU mapped
    for its code, alive as long as the lowered module lives. A process that compiles one
    program many ways runs out of memory mappings (``vm.max_map_count``); XLA:CPU's JIT
    then fails to allocate and the process dies. Executables referenced elsewhere (a
    jitted function's own cache, an :class:`~hlo_go.xla.Executable`) live on; a later
    compile of a module lowered earlier may compile again.

    Where the installed jax has no such cache, this logs a warning once and does nothing.
    """
    try:
        from jax._src.interpreters import pxla

        pxla._cached_compilation.cache_clear()
    except (ImportError, AttributeError):
        if not _cache_warned:
            _cache_warned.append(True)
            import logging

            logging.getLogger(__name__).warning(
                "jaxlib %s: no pxla._cached_compilation to clear; executables of hooked "
                "compiles stay cached while their lowered module lives",
                jaxlib_version(),
            )


def _lapack_initializer() -> Any:
    """jaxlib's LAPACK kernel initializer (binds its FFI targets to scipy's LAPACK)."""
    try:
        from jaxlib import lapack
    except ImportError:
        raise missing_feature("jaxlib.lapack", needed_for="LAPACK custom calls") from None
    initialize = getattr(getattr(lapack, "_lapack", None), "initialize", None)
    if initialize is None:
        raise missing_feature("jaxlib.lapack._lapack.initialize", needed_for="LAPACK custom calls")
    return initialize


def prepare_custom_calls(text: str) -> None:
    """Makes the custom-call targets ``text`` names callable before it is compiled.

    jaxlib binds its CPU LAPACK kernels (``lapack_*_ffi`` targets: LU, Cholesky,
    triangular solves, eigensolvers) to their LAPACK functions only when JAX lowers a
    linear-algebra primitive. A module given as text, compiled before any such lowering
    in the process, would call an unbound function and crash the process.
    """
    if 'custom_call_target="lapack_' in text:
        _lapack_initializer()()


def hook_platform(platform: str) -> str:
    """The name ``jax.extend.xla``'s compile hooks know ``platform`` by.

    A GPU's devices say ``"gpu"``, but the hooks look its PJRT plugin up by the plugin's
    own name (``"cuda"`` or ``"rocm"``): the first of those that is loaded.

    Args:
      platform: a device's platform (``"cpu"``, ``"gpu"``, ``"cuda"``, ...).

    Returns:
      ``platform``, or for ``"gpu"`` the loaded GPU plugin's name (``"gpu"`` if none is).
    """
    if platform != "gpu":
        return platform
    for name in ("cuda", "rocm"):
        try:
            _xla_jax.get_pjrt_plugin(name)
        except Exception:  # not loaded: jaxlib raises its own runtime error
            continue
        return name
    return platform
