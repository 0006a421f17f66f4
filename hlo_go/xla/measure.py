"""Measured step time of a program compiled with our fusion and schedule, against
XLA's default compile, after checking that both compute the same outputs.

``measure`` ALWAYS checks outputs first (tolerance by dtype; a float32 output outside it
is judged by the float64 arbiter of :mod:`hlo_go.xla.arbiter`) and only then times the
executables interleaved in one process (A B A B ...), reporting medians and their
ratio. ``measure_many`` does the same for several variants of one program in one
interleaving.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_go.decisions import DEFAULT_LIMITS, FusionLimits
from hlo_go.xla.arbiter import TOLERANCES, as_accurate_as_reference
from hlo_go.xla.lowering import FusionSpec, Program, ScheduleSpec, Source, program
from hlo_go.xla.timing import CLOCKS, Clock, time_interleaved

__all__ = [  # TOLERANCES is arbiter's (re-exported here for old imports)
    "TOLERANCES",
    "Measurement",
    "Variant",
    "measure",
    "measure_many",
    "outputs_match",
]


class Measurement(NamedTuple):
    """A measured variant against XLA's default compile of the same function.

    Attributes:
      correct: outputs matched XLA's default within tolerance (time is None otherwise).
      time_s: median time of one call of the variant (on ``clock``).
      baseline_time_s: median time of XLA's default compile, timed interleaved.
      spread: (min, max) of the variant's samples, seconds.
      speedup: baseline_time_s / time_s (> 1: the variant is faster).
      repeats: timed calls per configuration.
      message: why ``correct`` is False, or notes.
      order: the entry instruction order imposed, if a schedule was given.
      baseline_spread: (min, max) of the baseline's samples, seconds.
      clock: ``"wall"`` or ``"cpu"`` (:mod:`hlo_go.xla.timing`).
      label: what was measured (fusion and schedule).
      kernels: fusion instructions in the variant's compiled entry (None if unknown).
      compile_s: seconds to lower and compile the variant (decisions included).
      temp_bytes: bytes of temporaries one call of the variant allocates (XLA's buffer
        assignment; None if unknown). XLA:CPU allocates them on every call, and each
        page of a fresh allocation faults in (see :data:`hlo_go.xla.timing.RETAIN_MALLOC_ENV`).
      baseline_temp_bytes: the same for XLA's default compile.
    """

    correct: bool
    time_s: float | None
    baseline_time_s: float | None
    spread: tuple[float, float] | None
    speedup: float | None
    repeats: int
    message: str = ""
    order: list[str] | None = None
    baseline_spread: tuple[float, float] | None = None
    clock: str = "wall"
    label: str = ""
    kernels: int | None = None
    compile_s: float | None = None
    temp_bytes: int | None = None
    baseline_temp_bytes: int | None = None

    @property
    def relative(self) -> float | None:
        """time_s / baseline_time_s (< 1: the variant is faster)."""
        if self.time_s is None or not self.baseline_time_s:
            return None
        return self.time_s / self.baseline_time_s


def outputs_match(got: Any, want: Any) -> tuple[bool, str]:
    """Compares two pytrees of arrays with dtype-dependent tolerances."""
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    if len(got_leaves) != len(want_leaves):
        return False, f"{len(got_leaves)} outputs, expected {len(want_leaves)}"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return (
                False,
                f"output {k}: {g.dtype}{list(g.shape)} vs expected {w.dtype}{list(w.shape)}",
            )
        if np.issubdtype(w.dtype, np.inexact) or w.dtype.name == "bfloat16":
            rtol, atol = TOLERANCES.get(w.dtype.name, (1e-4, 1e-5))
            g64, w64 = (
                g.astype(np.complex128 if np.iscomplexobj(w) else np.float64),
                w.astype(np.complex128 if np.iscomplexobj(w) else np.float64),
            )
            if not np.allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True):
                error = float(np.nanmax(np.abs(g64 - w64)))
                return (
                    False,
                    f"output {k}: max abs error {error:.3g} above rtol={rtol}, atol={atol}",
                )
        elif not np.array_equal(g, w):
            return False, f"output {k}: integer/boolean values differ"
    return True, ""


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _as_accurate(prog: Program, got: Any, want: Any, message: str) -> tuple[bool, str]:
    """The float64 arbiter's verdict on outputs that failed :func:`outputs_match`.

    Moving kernel boundaries changes roundings: XLA's own compile with fusion off fails
    the elementwise tolerance on ill-conditioned training steps. A float32 output passes
    when it is as accurate as XLA's default compile against the program evaluated in
    float64 (:func:`hlo_go.xla.arbiter.as_accurate_as_reference`); a wrong result does not.
    """
    return as_accurate_as_reference(
        jax.tree.leaves(got), jax.tree.leaves(want), prog.float64_outputs, message=message
    )


class Variant(NamedTuple):
    """One variant to measure: its fusion and schedule (see :meth:`hlo_go.xla.Program.lower`).

    Attributes:
      fusion: decisions for the program's graph, groups, a fused module, or None.
      schedule: decisions, priorities by name, :data:`hlo_go.xla.MEMORY_ORDER`, or None.
      label: what the measurement is labelled (None: the kinds of fusion and schedule).
        :func:`hlo_go.methods.variants` builds variants from method names.
    """

    fusion: FusionSpec = None
    schedule: ScheduleSpec = None
    label: str | None = None


def measure(
    module_or_fn: Source | Program,
    args: Sequence[Any] | None = None,
    *,
    fusion: FusionSpec = None,
    schedule: ScheduleSpec = None,
    repeats: int = 20,
    warmup: int = 2,
    clock: Clock = "wall",
    seed: int = 0,
    limits: FusionLimits = DEFAULT_LIMITS,
    label: str | None = None,
) -> Measurement:
    """Compiles a program with our fusion and schedule, checks its outputs against XLA's
    default compile (``jax.jit`` of the original), then times both interleaved.

    Args:
      module_or_fn: a jax function (with ``args``), a ``jax.stages.Lowered``, an
        :class:`~hlo_go.hlo.HloModule`, HLO text, a path to an HLO file, or a
        :class:`~hlo_go.xla.Program`.
      args: positional arguments; None draws them at random from the entry
        parameters' shapes and dtypes (:func:`hlo_go.xla.program`); a function's
        ``jax.ShapeDtypeStruct`` leaves are drawn at random too.
      fusion: a :class:`~hlo_go.decisions.Decisions` made for the program's pre-fusion
        graph (``program(module_or_fn).graph``, or ``build_graph(parse_hlo(text))`` of a
        pre-fusion module's text: decisions carry their graph's fingerprint, and others
        are refused), groups of pre-fusion entry instruction names, or an already fused
        module; None leaves every instruction unfused. Method names are resolved by
        :mod:`hlo_go.methods` (e.g. :func:`hlo_go.methods.fusion_spec`).
      schedule: a ``Decisions``, priorities per entry instruction name of the fused
        module, or :data:`hlo_go.xla.MEMORY_ORDER`; None keeps XLA's order.
      repeats: timed calls per configuration.
      warmup: untimed rounds first.
      clock: ``"wall"``, or ``"cpu"`` (CPU time: for a process pinned to one core,
        :func:`hlo_go.xla.timing.in_pinned_process`).
      seed: seed of random inputs.
      limits: fusion grouping limits.
      label: what the measurement is labelled (None: the kinds of fusion and schedule).

    Returns:
      A :class:`Measurement`; ``correct`` False (and no times) when outputs differ or
      XLA refuses the lowering (the message says why).

    Raises:
      DecisionsMismatchError: ``fusion`` or ``schedule`` made for another graph.
      LoweringError: a method name, or a source that cannot be compiled.
    """
    return measure_many(
        module_or_fn,
        {"variant": Variant(fusion, schedule, label)},
        args=args,
        repeats=repeats,
        warmup=warmup,
        clock=clock,
        seed=seed,
        limits=limits,
    )["variant"]


def _looks_slow(
    seconds: float, baseline_s: float, slow_factor: float | None, skip_factor: float | None
) -> bool:
    """Whether a run of ``seconds`` crosses either factor of ``baseline_s``."""
    factors = [f for f in (slow_factor, skip_factor) if f is not None]
    return bool(factors) and seconds > min(factors) * baseline_s


def measure_many(
    module_or_fn: Source | Program,
    variants: Mapping[str, Variant],
    *,
    args: Sequence[Any] | None = None,
    repeats: int = 20,
    warmup: int = 2,
    clock: Clock = "wall",
    seed: int = 0,
    limits: FusionLimits = DEFAULT_LIMITS,
    slow_factor: float | None = None,
    slow_repeats: int = 2,
    skip_factor: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Measurement]:
    """:func:`measure` for several variants of one program, timed in one interleaving.

    Each variant is lowered, run once and checked against XLA's default; the correct ones
    are then timed interleaved with the default (A B C ... A B C ...).

    Args:
      module_or_fn: as :func:`measure`.
      variants: name -> :class:`Variant`.
      args: as :func:`measure`.
      repeats: timed calls per configuration.
      warmup: untimed rounds first.
      clock: ``"wall"`` or ``"cpu"``.
      seed: seed of random inputs.
      limits: fusion grouping limits.
      slow_factor: a variant whose check time took more than this many times the
        default's is timed separately, interleaved with the default for only
        ``slow_repeats`` rounds (None: no such split). The default's check time is a
        run after a warm-up; a variant's is its checking (first) run, or, where that
        crosses ``slow_factor`` or ``skip_factor``, the run after it, so that a first
        run's one-off costs do not make a variant slow.
      slow_repeats: timed rounds of a slow variant (no warm-up: its checking run was one).
      skip_factor: a variant whose check time took more than this many times the
        default's is not timed again: that run is its one sample, against the default's
        check time (None: no such skip).
      progress: called with a line per lowered variant and per timing round.

    Returns:
      name -> :class:`Measurement`. A variant that fails to lower is not correct, and
      its message says why.

    Raises:
      DecisionsMismatchError: a variant's decisions were made for another graph.
      LoweringError: a variant gives a method name (:mod:`hlo_go.methods` resolves them),
        or the program cannot be built.
    """
    say = progress or (lambda _: None)
    now = CLOCKS[clock]
    prog = program(module_or_fn, args, seed=seed)
    for variant in variants.values():  # refused before anything compiles
        prog.check(variant.fusion, "fusion")
        prog.check(variant.schedule, "schedule")
    baseline = prog.default()
    baseline(*prog.args)  # warm
    start = now()
    want = baseline(*prog.args)
    baseline_check_s = now() - start
    results: dict[str, Measurement] = {}
    executables: dict[str, Any] = {}
    check_s: dict[str, float] = {}
    for name, variant in variants.items():
        start = time.perf_counter()
        try:
            executable = prog.lower(
                fusion=variant.fusion,
                schedule=variant.schedule,
                limits=limits,
                label=variant.label,
            )
            compile_s = time.perf_counter() - start
            start = now()
            got = executable(*prog.args)
            check_s[name] = now() - start
            if _looks_slow(check_s[name], baseline_check_s, slow_factor, skip_factor):
                # A first run pays one-off costs the default's (warmed) check did not:
                # judge slowness on a second run.
                start = now()
                executable(*prog.args)
                check_s[name] = now() - start
        except Exception as error:  # a lowering XLA or our checks refuse: reported, not raised
            message = f"not lowered: {type(error).__name__}: {error}"
            results[name] = Measurement(False, None, None, None, None, 0, message, clock=clock)
            say(f"{name}: {message[:200]}")
            continue
        ok, message = outputs_match(got, want)
        if not ok:  # another fusion rounds differently: judge it against float64
            ok, message = _as_accurate(prog, got, want, message)
        kernels = executable.num_fusions
        say(f"{name}: lowered in {compile_s:.1f} s, {kernels} fusions, correct={ok} {message}")
        if not ok:
            results[name] = Measurement(
                False, None, None, None, None, 0, message, executable.order,
                clock=clock, label=executable.label, kernels=kernels, compile_s=compile_s,
                temp_bytes=executable.temp_bytes, baseline_temp_bytes=baseline.temp_bytes,
            )  # fmt: skip
            continue
        executables[name] = executable
        results[name] = Measurement(
            True, None, None, None, None, 0, message, executable.order,
            clock=clock, label=executable.label, kernels=kernels, compile_s=compile_s,
            temp_bytes=executable.temp_bytes, baseline_temp_bytes=baseline.temp_bytes,
        )  # fmt: skip
    skipped = {
        n
        for n in executables
        if skip_factor is not None and check_s[n] > skip_factor * baseline_check_s
    }
    for n in skipped:
        results[n] = results[n]._replace(
            time_s=check_s[n],
            baseline_time_s=baseline_check_s,
            spread=(check_s[n], check_s[n]),
            baseline_spread=(baseline_check_s, baseline_check_s),
            speedup=baseline_check_s / check_s[n],
            repeats=1,
            message=_joined(
                f"too slow to time again: one (second) run vs one of XLA's ({clock} clock)",
                results[n].message,
            ),
        )
        say(f"{n}: {check_s[n] / baseline_check_s:.1f}x XLA's default on one run; not timed again")
    executables = {n: e for n, e in executables.items() if n not in skipped}
    slow = {
        n
        for n in executables
        if slow_factor is not None and check_s[n] > slow_factor * baseline_check_s
    }
    batches = [[n for n in executables if n not in slow]] + [[n] for n in sorted(slow)]
    for batch in batches:
        if not batch:
            continue
        rounds = slow_repeats if batch and batch[0] in slow else repeats
        fns = {"XLA default": lambda: baseline(*prog.args)}
        fns.update({n: (lambda e=executables[n]: e(*prog.args)) for n in batch})
        timings = time_interleaved(
            fns,
            repeats=rounds,
            warmup=warmup if rounds == repeats else 0,
            clock=clock,
            progress=say,
        )
        b = timings["XLA default"]
        for n in batch:
            v = timings[n]
            timed = v.median > 0 and b.median > 0
            results[n] = results[n]._replace(
                time_s=v.median,
                baseline_time_s=b.median,
                spread=(v.min, v.max),
                baseline_spread=(b.min, b.max),
                speedup=b.median / v.median if timed else None,
                repeats=rounds,
                message=_joined(
                    "timed separately (slow)" if n in slow else "",
                    "" if timed else f"a median of 0 s on the {clock} clock: too fast to time",
                    results[n].message,
                ),
            )
    return results
