"""SPMD: one HLO module partitioned over several devices by XLA's SPMD partitioner.

A module whose instructions carry tiled ``sharding=`` annotations (V2 iota shardings
such as ``{devices=[2,1,4]<=[8] last_tile_dim_replicate}``, transposed iotas
``<=[2,4]T(1,0)``, explicit device lists, ``{replicated}``, and tuple shardings on a
tuple ROOT) is compiled once for ``N`` devices: XLA propagates the shardings, splits
every array into per-device shards, and inserts the collectives (all-reduce,
all-gather, ...) the shardings imply. Every device runs the same partitioned program.

* :func:`compile_spmd` compiles HLO text for the first ``N`` CPU devices (or given
  devices) and returns an :class:`SpmdExecutable`, which knows how each parameter and
  output is split (:class:`ArraySharding`) and holds the partitioned HLO.
* :func:`run_spmd` splits global host arrays into per-device shards, runs, and
  assembles the global outputs.
* :func:`count_collectives` / :func:`collective_bytes` read the partitioned HLO.
* :func:`check_spmd` compares the partitioned run with the same module compiled
  unsharded for one device; :func:`time_spmd` times steady-state runs.

Partition ``k`` of a sharding's tile assignment runs on ``devices[k]``. An array
dimension that its tiles do not divide is padded by XLA (each shard gets
``ceil(size / tiles)`` elements, the last ones padding); :class:`ArraySharding`
pads arguments and trims outputs accordingly.

Only GSPMD-style HLO shardings are read: ``maximal`` shardings are not placement
(every device computes everything, see the design notes), and ``manual`` shardings
cannot be split from the outside (:func:`compile_spmd` rejects them on parameters
and outputs).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_go.hlo import FrozenDict, HloModule, Shape, parse_hlo
from hlo_go.xla._jaxlib import (
    compile_hlo_text,
    compile_hlo_text_spmd,
    executable_hlo_text,
    executable_shardings,
    execute_sharded,
    gspmd_sharding,
    run_executable,
    sharding_tiles,
)
from hlo_go.xla.arbiter import (  # WIDENING_FACTOR: re-exported, as before
    TOLERANCES,
    WIDENING_FACTOR,  # noqa: F401
    as_accurate_as_reference,
    float64_outputs,
    input_rounding_runs,
)
from hlo_go.xla.inputs import NUMPY_DTYPES, training_inputs, warn_elided_constants
from hlo_go.xla.measure import outputs_match
from hlo_go.xla.timing import Clock, Timing, time_interleaved

# The SPMD face of hlo_go.xla.
__all__ = [
    "COLLECTIVE_KINDS",
    "ArraySharding",
    "SpmdCheck",
    "SpmdExecutable",
    "check_spmd",
    "collective_bytes",
    "compile_spmd",
    "count_collectives",
    "run_spmd",
    "spmd_devices",
    "strip_shardings",
    "time_spmd",
]

# The collective kinds counted, in a fixed order. Async pairs (``all-reduce-start`` /
# ``all-reduce-done``, ...) count once, at their ``-done``; ``ragged-all-to-all``
# counts as ``all-to-all``.
COLLECTIVE_KINDS: tuple[str, ...] = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)
_ALIASES = {"ragged-all-to-all": "all-to-all"}

_DEVICE_HINT = (
    "give JAX more CPU devices before it initializes its backends: "
    'jax.config.update("jax_num_cpu_devices", {n}) before the first use of JAX, or '
    "XLA_FLAGS=--xla_force_host_platform_device_count={n} in the environment"
)


@dataclass(frozen=True)
class ArraySharding:
    """How one global array (a parameter or an output) is split over the devices.

    Attributes:
      hlo: the HLO sharding text, e.g. ``"{devices=[8,1]<=[8]}"``.
      shape: the array's global (unpartitioned) shape.
      tiles: tiles per dimension (all 1 when replicated).
      sharding: the same as a ``jax.sharding.Sharding`` over the executable's devices;
        its ``devices_indices_map(padded_shape)`` gives each device's slice.
      devices: the executable's devices, in partition order.
    """

    hlo: str
    shape: Shape
    tiles: tuple[int, ...]
    sharding: jax.sharding.Sharding
    devices: tuple[Any, ...]

    @classmethod
    def of(cls, hlo: str, shape: Shape, devices: Sequence[Any]) -> ArraySharding:
        """The sharding ``hlo`` of an array of ``shape`` over ``devices``.

        Raises:
          ValueError: a tuple shape, or a sharding that cannot split it (manual,
            unknown, or tiling another number of dimensions).
        """
        if not shape.is_array:
            raise ValueError(f"cannot split a value of shape {shape} (arrays only)")
        tiles = sharding_tiles(hlo, shape.rank)
        devices = tuple(devices)
        return cls(hlo, shape, tiles, gspmd_sharding(devices, hlo), devices)

    @property
    def shard_shape(self) -> tuple[int, ...]:
        """Each device's buffer shape (padding included)."""
        return tuple(-(-d // t) for d, t in zip(self.shape.dims, self.tiles, strict=True))

    @property
    def padded_shape(self) -> tuple[int, ...]:
        """The global shape rounded up to whole tiles."""
        return tuple(s * t for s, t in zip(self.shard_shape, self.tiles, strict=True))

    @property
    def padded(self) -> bool:
        """Whether XLA pads this array (some dimension not divided by its tiles)."""
        return self.padded_shape != tuple(self.shape.dims)

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy element type (None for element types numpy lacks)."""
        return NUMPY_DTYPES.get(self.shape.dtype)

    def split(self, array: Any) -> list[np.ndarray]:
        """The per-device shards of a global array, in device order, zero-padded to
        :attr:`shard_shape` where XLA pads.

        Raises:
          ValueError: ``array`` does not have the global shape.
        """
        array = np.asarray(array, dtype=self.dtype)
        if array.shape != tuple(self.shape.dims):
            expected = self.shape.to_text(layout=False)
            raise ValueError(f"argument of shape {list(array.shape)}, the parameter is {expected}")
        indices = self.sharding.devices_indices_map(self.padded_shape)
        shards = []
        for device in self.devices:
            piece = array[indices[device]]
            if piece.shape != self.shard_shape:
                pad = [(0, s - p) for s, p in zip(self.shard_shape, piece.shape, strict=True)]
                piece = np.pad(piece, pad)
            shards.append(np.array(piece, order="C"))  # (ascontiguousarray makes 0-d 1-d)
        return shards

    def put(self, array: Any) -> jax.Array:
        """A global array placed on the devices as this sharding splits it (a
        ``jax.Array`` of :attr:`padded_shape`)."""
        shards = [
            jax.device_put(piece, device)
            for piece, device in zip(self.split(array), self.devices, strict=True)
        ]
        return jax.make_array_from_single_device_arrays(self.padded_shape, self.sharding, shards)

    def gather(self, shards: Sequence[jax.Array]) -> np.ndarray:
        """The global array from its per-device shards (device order).

        Each distinct tile is copied once (from the first device holding it). A shard
        may come padded (:attr:`shard_shape`) or trimmed to the part inside the array
        (how PJRT reports the outputs of a padded array); padding is dropped.

        Raises:
          ValueError: a shard's shape is neither.
        """
        dims = tuple(self.shape.dims)
        out = np.empty(dims, dtype=self.dtype or (shards[0].dtype if shards else None))
        indices = self.sharding.devices_indices_map(self.padded_shape)
        done: set[tuple[tuple[int, int], ...]] = set()
        for k, (device, shard) in enumerate(zip(self.devices, shards, strict=True)):
            bounds = tuple(
                (min(s.start or 0, d), min(d if s.stop is None else s.stop, d))
                for s, d in zip(indices[device], dims, strict=True)
            )
            inside = tuple(stop - start for start, stop in bounds)
            if tuple(shard.shape) not in (self.shard_shape, inside):
                raise ValueError(
                    f"device {k} holds a shard of shape {list(shard.shape)}, expected "
                    f"{list(self.shard_shape)} for {self.shape.to_text(layout=False)} "
                    f"sharded {self.hlo}"
                )
            if bounds in done:
                continue
            done.add(bounds)
            window = tuple(slice(start, stop) for start, stop in bounds)
            out[window] = np.asarray(shard)[tuple(slice(0, n) for n in inside)]
        return out


@dataclass(frozen=True)
class SpmdExecutable:
    """A module compiled by XLA's SPMD partitioner for several devices.

    Attributes:
      executable: the loaded XLA executable (one program, run on every device).
      devices: the devices, in partition order.
      parameter_shardings: how each entry parameter is split, in parameter order.
      output_shardings: how each output is split (a tuple result flattened).
      optimized_text: the compiled, partitioned HLO (per-device shapes, collectives).
      compile_s: seconds spent compiling.
    """

    executable: Any
    devices: tuple[Any, ...]
    parameter_shardings: tuple[ArraySharding, ...]
    output_shardings: tuple[ArraySharding, ...]
    optimized_text: str
    compile_s: float

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def put(self, args: Sequence[Any]) -> list[jax.Array]:
        """Global host arrays split and placed on the devices, ready for :meth:`execute`.

        Raises:
          ValueError: a wrong number of arguments or a wrong shape.
        """
        if len(args) != len(self.parameter_shardings):
            raise ValueError(
                f"{len(args)} arguments, the module has {len(self.parameter_shardings)} parameters"
            )
        return [s.put(a) for s, a in zip(self.parameter_shardings, args, strict=True)]

    def execute(self, placed: Sequence[jax.Array]) -> list[list[jax.Array]]:
        """Runs once on arguments from :meth:`put` (asynchronously).

        Returns:
          Per output, its per-device buffers in device order.
        """
        return execute_sharded(self.executable, list(placed))

    def gather(self, outputs: Sequence[Sequence[jax.Array]]) -> list[np.ndarray]:
        """Global host arrays from :meth:`execute`'s per-device buffers."""
        return [s.gather(o) for s, o in zip(self.output_shardings, outputs, strict=True)]


def spmd_devices(num_devices: int, platform: str = "cpu") -> tuple[Any, ...]:
    """The first ``num_devices`` devices of a platform.

    Raises:
      ValueError: fewer devices exist (the message says how to get more CPU devices).
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    available = jax.devices(platform)
    if len(available) < num_devices:
        hint = _DEVICE_HINT.format(n=num_devices) if platform == "cpu" else ""
        raise ValueError(
            f"{num_devices} {platform} devices needed, JAX has {len(available)}"
            + (f": {hint}" if hint else "")
        )
    return tuple(available[:num_devices])


def _as_text(module: str | HloModule) -> str:
    return module.to_text() if isinstance(module, HloModule) else module


def compile_spmd(
    text: str | HloModule,
    num_devices: int,
    *,
    compiler_options: dict[str, Any] | None = None,
    devices: Sequence[Any] | None = None,
) -> SpmdExecutable:
    """Compiles a module with ``sharding=`` annotations for ``num_devices`` devices.

    ``num_partitions=num_devices``, one replica, SPMD partitioning (GSPMD) on; the
    device assignment is the first ``num_devices`` CPU devices unless ``devices``
    says otherwise. Unannotated parameters and outputs are replicated.

    Args:
      text: HLO text (or a parsed module).
      num_devices: partitions; the shardings' tile assignments must use this many.
      compiler_options: XLA debug options, e.g. ``{"xla_disable_hlo_passes": "fusion"}``.
      devices: the devices to run on (``num_devices`` of them), partition ``k`` on
        ``devices[k]``.

    Returns:
      The :class:`SpmdExecutable`.

    Raises:
      ValueError: fewer devices than ``num_devices`` (with how to get more), XLA
        rejects the module or its shardings, or a parameter or output cannot be split
        from the outside (a tuple parameter, a manual sharding).
    """
    text = _as_text(text)
    if devices is None:
        devices = spmd_devices(num_devices)
    else:
        devices = tuple(devices)
        if len(devices) != num_devices:
            raise ValueError(f"{len(devices)} devices given for num_devices={num_devices}")
    module = parse_hlo(text)
    start = time.perf_counter()
    try:
        executable = compile_hlo_text_spmd(text, devices, compiler_options=compiler_options)
    except ValueError:
        raise
    except Exception as e:  # XlaRuntimeError: a sharding that does not fit, ...
        raise ValueError(f"XLA could not compile the module for {num_devices} devices: {e}") from e
    compile_s = time.perf_counter() - start

    parameter_hlo, output_hlo = executable_shardings(executable)
    parameters = module.entry.parameters
    outputs = module.entry.root.shape.leaves()
    if len(parameter_hlo) != len(parameters) or len(output_hlo) != len(outputs):
        raise ValueError(
            f"the executable has {len(parameter_hlo)} parameters and {len(output_hlo)} outputs, "
            f"the module {len(parameters)} and {len(outputs)} (nested tuples are not supported)"
        )
    return SpmdExecutable(
        executable=executable,
        devices=devices,
        parameter_shardings=tuple(
            ArraySharding.of(s, p.shape, devices)
            for s, p in zip(parameter_hlo, parameters, strict=True)
        ),
        output_shardings=tuple(
            ArraySharding.of(s, shape, devices)
            for s, shape in zip(output_hlo, outputs, strict=True)
        ),
        optimized_text=executable_hlo_text(executable),
        compile_s=compile_s,
    )


def run_spmd(exe: SpmdExecutable, args: Sequence[Any]) -> list[np.ndarray]:
    """Runs a partitioned module on global host arrays.

    Each argument is split into per-device shards by its parameter's sharding
    (replicated, tiled, partially replicated; any tile assignment; padded where XLA
    pads), the program runs on every device, and the outputs are assembled.

    Args:
      exe: from :func:`compile_spmd`.
      args: one global array per entry parameter.

    Returns:
      The global outputs as numpy arrays (a tuple result flattened).
    """
    return exe.gather(exe.execute(exe.put(args)))


# ---------------------------------------------------------------------------
# Collectives in partitioned HLO.


def _collective_kind(opcode: str) -> str | None:
    """The collective kind an instruction counts as (None: not one, or an async
    ``-start`` whose ``-done`` counts)."""
    if opcode.endswith("-start"):
        return None
    opcode = opcode.removesuffix("-done")
    opcode = _ALIASES.get(opcode, opcode)
    return opcode if opcode in COLLECTIVE_KINDS else None


def _collectives(optimized: str | HloModule) -> list[tuple[str, Shape]]:
    module = parse_hlo(optimized) if isinstance(optimized, str) else optimized
    found = []
    for _, instruction in module.instructions():
        kind = _collective_kind(instruction.opcode)
        if kind is not None:
            found.append((kind, instruction.shape))
    return found


def count_collectives(optimized: str | HloModule, *, per_array: bool = False) -> dict[str, int]:
    """Collective instructions in (partitioned) HLO, by kind.

    Counts all-reduce, all-gather, reduce-scatter, all-to-all and collective-permute
    in every computation (fused and called ones included); an async pair
    (``-start``/``-done``) counts once. Instructions are counted where they are
    written: one inside a loop body counts once however often the loop runs.

    Args:
      optimized: HLO text, e.g. :attr:`SpmdExecutable.optimized_text`, or a parsed module.
      per_array: count each array of a combined (tuple-shaped) collective, so that XLA's
        combining of independent collectives into one does not change the count.

    Returns:
      Kind -> count, every kind of :data:`COLLECTIVE_KINDS` present (0 if none).
    """
    counts = dict.fromkeys(COLLECTIVE_KINDS, 0)
    for kind, shape in _collectives(optimized):
        counts[kind] += len(shape.leaves()) if per_array and shape.is_tuple else 1
    return counts


def collective_bytes(optimized: str | HloModule) -> dict[str, int]:
    """Bytes of the collectives' results in (partitioned) HLO, by kind.

    The result shape's array bytes (all elements of a tuple result) per device, as
    written (per-device shapes in partitioned HLO); async pairs count at ``-done``,
    whose shape is the result. Same instructions as :func:`count_collectives`.

    Returns:
      Kind -> bytes, every kind of :data:`COLLECTIVE_KINDS` present.
    """
    total = dict.fromkeys(COLLECTIVE_KINDS, 0)
    for kind, shape in _collectives(optimized):
        total[kind] += shape.total_byte_size()
    return total


# ---------------------------------------------------------------------------
# Checking and timing.


def strip_shardings(text: str | HloModule) -> str:
    """The module with every ``sharding=`` annotation (and a ``num_partitions``
    header attribute) removed: the single-device program the shardings partition."""
    module = parse_hlo(text) if isinstance(text, str) else text
    computations = {}
    for name, comp in module.computations.items():
        instructions = tuple(
            i.replace(sharding=None) if i.sharding is not None else i for i in comp.instructions
        )
        computations[name] = dataclasses.replace(comp, instructions=instructions)
    attributes = {k: v for k, v in module.attributes.items() if k != "num_partitions"}
    return dataclasses.replace(
        module, computations=FrozenDict(computations), attributes=FrozenDict(attributes)
    ).to_text()


class SpmdCheck(NamedTuple):
    """A partitioned run compared with a reference.

    Attributes:
      correct: every output matched the reference within tolerance, elementwise or to
        its own scale (a partitioned reduction sums in another order; see
        :func:`_match_to_scale`).
      message: why not, or "".
      max_abs_error: per output, max |got - want|.
      max_rel_error: per output, max |got - want| / max |want| (0 when both are 0).
      collectives: :func:`count_collectives` of the partitioned HLO.
      collective_bytes: :func:`collective_bytes` of the partitioned HLO.
      compile_s: seconds to compile the partitioned module.
      executable: the :class:`SpmdExecutable` (reuse it to time it).
      outputs: the partitioned run's global outputs.
    """

    correct: bool
    message: str
    max_abs_error: tuple[float, ...]
    max_rel_error: tuple[float, ...]
    collectives: dict[str, int]
    collective_bytes: dict[str, int]
    compile_s: float
    executable: SpmdExecutable
    outputs: list[np.ndarray]


def _errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    if got.shape != want.shape or got.size == 0:
        return (math.nan, math.nan) if got.shape != want.shape else (0.0, 0.0)
    wide = np.complex128 if np.iscomplexobj(want) or np.iscomplexobj(got) else np.float64
    g, w = got.astype(wide), want.astype(wide)
    abs_error = float(np.nanmax(np.abs(g - w)))
    scale = float(np.nanmax(np.abs(w)))
    if scale == 0.0:
        return abs_error, 0.0 if abs_error == 0.0 else math.inf
    return abs_error, abs_error / scale


def _match(
    got: list[np.ndarray], want: list[np.ndarray], rtol: float | None, atol: float | None
) -> tuple[bool, str]:
    if rtol is None and atol is None:
        return outputs_match(got, want)
    if len(got) != len(want):
        return False, f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return (
                False,
                f"output {k}: {g.dtype}{list(g.shape)} vs expected {w.dtype}{list(w.shape)}",
            )
        default_rtol, default_atol = TOLERANCES.get(w.dtype.name, (1e-4, 1e-5))
        r = default_rtol if rtol is None else rtol
        a = default_atol if atol is None else atol
        wide = np.complex128 if np.iscomplexobj(w) else np.float64
        if not np.allclose(g.astype(wide), w.astype(wide), rtol=r, atol=a, equal_nan=True):
            return False, f"output {k}: outside rtol={r}, atol={a}"
    return True, ""


def _match_to_scale(
    got: list[np.ndarray],
    want: list[np.ndarray],
    errors: list[tuple[float, float]],
    rtol: float | None,
    message: str,
) -> tuple[bool, str]:
    """Accepts outputs that match elementwise or to their own scale.

    A partitioned reduction adds partial sums in another order than one device does, so
    an element near zero that is a sum of large terms can differ by more than ``rtol``
    times itself while the output as a whole is as accurate: such an output passes when
    ``max |got - want| <= rtol * max |want|`` (the normwise test).
    """
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return False, message
        if not np.issubdtype(w.dtype, np.inexact):
            if not np.array_equal(g, w):
                return False, message
            continue
        r = TOLERANCES.get(w.dtype.name, (1e-4, 1e-5))[0] if rtol is None else rtol
        if _match([g], [w], rtol, None)[0]:
            continue
        if not errors[k][1] <= r:
            return (
                False,
                f"output {k}: max abs error {errors[k][0]:.3g} is {errors[k][1]:.3g} of the output's largest magnitude (rtol {r})",
            )
    return True, "matches to each output's scale (normwise), not elementwise"


def _as_accurate_as_one_device(
    text: str,
    args: Sequence[Any],
    single: Any,
    got: list[np.ndarray],
    want: list[np.ndarray],
    rtol: float | None,
    atol: float | None,
    message: str,
) -> tuple[bool, str]:
    """The float64 arbiter (:mod:`hlo_go.xla.arbiter`): is the partitioned result as
    accurate as one device's?

    A sum of large terms that cancel is ill-conditioned: two float32 evaluations in
    different orders (one device, partial sums per device) can both be far from the
    exact value and from each other, though neither is wrong. The unsharded module
    evaluated in float64 gives a near-exact value; each float32 output that fails the
    elementwise test passes when its error against it is at most
    :data:`~hlo_go.xla.arbiter.WIDENING_FACTOR` times the float32 error of the one-device
    compile ``single`` (or ``rtol`` of the output's scale); or, element by element, that
    of ``single`` run at inputs one ulp away (:func:`~hlo_go.xla.arbiter.input_rounding_runs`:
    where an output is discontinuous, rounding alone moves it).
    """
    return as_accurate_as_reference(
        got,
        want,
        lambda: float64_outputs(strip_shardings(text), args),
        moved=input_rounding_runs(lambda inputs: run_executable(single, inputs), args),
        rtol=rtol,
        atol=atol,
        message=message,
    )


def check_spmd(
    text: str | HloModule,
    num_devices: int,
    args: Sequence[Any] | None = None,
    *,
    reference: Sequence[Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    compiler_options: dict[str, Any] | None = None,
    devices: Sequence[Any] | None = None,
) -> SpmdCheck:
    """Compiles a sharded module, runs it, and compares its outputs with a reference.

    Args:
      text: HLO text with ``sharding=`` annotations (or a parsed module).
      num_devices: partitions (see :func:`compile_spmd`).
      args: one global array per entry parameter (None:
        :func:`~hlo_go.xla.inputs.training_inputs`, seed 0).
      reference: the expected outputs; None runs the same module with every sharding
        stripped (:func:`strip_shardings`), compiled for one device. Float32 outputs
        that fail both the elementwise and the normwise test against that one-device
        run are then judged against a float64 evaluation of the module: they pass when
        no less accurate than the one-device run, at these inputs or at inputs one ulp
        away (``WIDENING_FACTOR``; :func:`_as_accurate_as_one_device`).
      rtol: relative tolerance; None: by element type, as
        :func:`hlo_go.xla.outputs_match` (float32: 1e-4).
      atol: absolute tolerance; None: by element type (float32: 1e-5).
      compiler_options: XLA debug options for the partitioned compile.
      devices: the devices (see :func:`compile_spmd`).

    Returns:
      The :class:`SpmdCheck`.
    """
    text = _as_text(text)
    module = parse_hlo(text)
    warn_elided_constants(module, stacklevel=3)
    if args is None:
        args = training_inputs(module)
    exe = compile_spmd(text, num_devices, compiler_options=compiler_options, devices=devices)
    got = run_spmd(exe, args)
    single = None
    if reference is None:
        single = compile_hlo_text(strip_shardings(text))
        reference = run_executable(single, [np.asarray(a) for a in args])
    want = [np.asarray(r) for r in reference]
    correct, message = _match(got, want, rtol, atol)
    errors = [_errors(g, w) for g, w in zip(got, want, strict=False)]
    if not correct and len(got) == len(want):
        correct, message = _match_to_scale(got, want, errors, rtol, message)
    if not correct and len(got) == len(want) and single is not None:
        correct, message = _as_accurate_as_one_device(
            text, args, single, got, want, rtol, atol, message
        )
    return SpmdCheck(
        correct=correct,
        message=message,
        max_abs_error=tuple(e[0] for e in errors),
        max_rel_error=tuple(e[1] for e in errors),
        collectives=count_collectives(exe.optimized_text),
        collective_bytes=collective_bytes(exe.optimized_text),
        compile_s=exe.compile_s,
        executable=exe,
        outputs=got,
    )


def time_spmd(
    exe: SpmdExecutable,
    args: Sequence[Any],
    *,
    repeats: int = 20,
    warmup: int = 2,
    clock: Clock = "wall",
) -> Timing:
    """Times steady-state runs of a partitioned module, inputs already on the devices.

    Each timed call dispatches the program and waits for every device's outputs;
    arguments are split and placed once, before timing.

    Args:
      exe: from :func:`compile_spmd`.
      args: one global array per entry parameter.
      repeats: timed runs.
      warmup: untimed runs first.
      clock: ``"wall"`` or ``"cpu"`` (:mod:`hlo_go.xla.timing`).

    Returns:
      The :class:`~hlo_go.xla.timing.Timing` (``.median`` is the median seconds per run).
    """
    placed = exe.put(args)

    def step() -> Any:
        return jax.block_until_ready(exe.execute(placed))

    return time_interleaved({"spmd": step}, repeats=repeats, warmup=warmup, clock=clock)["spmd"]
