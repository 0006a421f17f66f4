"""Per-instruction times of real runs, from XLA's own trace events.

Compiled with ``xla_cpu_enable_xprof_traceme=True``, XLA's CPU runtime records one
trace event per executed HLO instruction (thunk), tagged with ``hlo_op`` and
``hlo_module``. :func:`profile_lowered` runs the executable under
``jax.profiler.trace`` and reads those events back with ``jax.profiler.ProfileData``.
The simulator's calibration fits its cost model to these times.

On one core (a process pinned to one, :func:`hlo_go.xla.timing.pin_to_cpu`), XLA's
runtime may still interleave independent thunks on several threads; their events then
overlap in time. Each instruction is charged its processor share: over a stretch of
time when ``k`` events are open, each is charged ``1/k`` of it, so the charges of a run
add up to the time the core was busy with it (:func:`shared_durations`).

With ``clock="cpu"`` (for a process pinned to one core, :func:`hlo_go.xla.timing.pin_to_cpu`)
step times are CPU times, and each profiled run's event durations (wall clock) are
scaled by that run's CPU / wall ratio: other processes taking turns on the core
stretch a run's events, and the ratio undoes the stretch.
"""

from __future__ import annotations

import glob
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
from jax.profiler import ProfileData

from hlo_go.xla.timing import CLOCKS, Clock


class InstructionProfile(NamedTuple):
    """Measured times of one compiled module.

    Attributes:
      module_name: the HLO module's name.
      instruction_s: per entry-level instruction name, the median over runs of its
        total time in one run (seconds).
      step_s: median time of one call on the profile's clock, measured outside the
        profiler.
      runs: how many profiled runs the medians are over.
      hlo_text: the compiled module's text (instruction names match the keys).
      step_spread_s: the least and the most step time measured (None where not kept).
      run_instruction_s: per profiled run (in run order), its times per instruction name
        on the profile's clock (empty where not kept).
      run_stretch: per profiled run, its wall time / its time on the clock (1 for the
        wall clock): a run's event durations as measured are its times times this.
    """

    module_name: str
    instruction_s: dict[str, float]
    step_s: float
    runs: int
    hlo_text: str
    step_spread_s: tuple[float, float] | None = None
    run_instruction_s: tuple[dict[str, float], ...] = ()
    run_stretch: tuple[float, ...] = ()


TRACEME_OPTIONS: dict[str, Any] = {"xla_cpu_enable_xprof_traceme": True}

# XLA:GPU launches runs of kernels as CUDA graphs (command buffers), whose kernels the trace
# tags with the command buffer's name rather than their instructions'. A threshold no
# region reaches keeps every kernel launched, and traced, as its own instruction.
GPU_PROFILE_OPTIONS: dict[str, Any] = {"xla_gpu_graph_min_graph_size": 1_000_000}


def profile_options(platform: str = "cpu") -> dict[str, Any]:
    """The compile options that make ``platform``'s runs traced per instruction."""
    if platform == "cpu":
        return dict(TRACEME_OPTIONS)
    return {**TRACEME_OPTIONS, **GPU_PROFILE_OPTIONS}


def profile_lowered(
    lowered: Any,
    args: Sequence[Any],
    *,
    repeats: int = 5,
    compiler_options: dict[str, Any] | None = None,
    clock: Clock = "wall",
    share_overlaps: bool | None = None,
    platform: str = "cpu",
) -> InstructionProfile:
    """Compiles ``lowered`` with per-instruction tracing, runs it and reads the times.

    Args:
      lowered: a ``jax.stages.Lowered``.
      args: arguments to call the compiled function with.
      repeats: profiled runs (after one warm-up run).
      compiler_options: extra XLA options (e.g. fusion passes disabled).
      clock: ``"wall"`` or ``"cpu"`` (see the module docstring).
      share_overlaps: charge overlapping events by processor share (default: when this
        process may use a single core).
      platform: the platform ``lowered`` compiles for (:func:`profile_options`).

    Returns:
      An :class:`InstructionProfile`.
    """
    options = {**(compiler_options or {}), **profile_options(platform)}
    compiled = lowered.compile(compiler_options=options)
    module_name = lowered.compiler_ir("hlo").as_hlo_module().name
    return profile_compiled(
        compiled,
        args,
        module_name,
        repeats=repeats,
        clock=clock,
        share_overlaps=share_overlaps,
    )


def profile_compiled(
    compiled: Any,
    args: Sequence[Any],
    module_name: str,
    *,
    repeats: int = 5,
    clock: Clock = "wall",
    share_overlaps: bool | None = None,
    warmup: bool = True,
    separate_steps: bool = True,
) -> InstructionProfile:
    """Runs an executable compiled with :data:`TRACEME_OPTIONS` and reads its times.

    Args:
      compiled: a ``jax.stages.Compiled`` (or anything callable on ``args`` with an
        ``as_text()``) compiled with :data:`TRACEME_OPTIONS`.
      args: arguments to call it with.
      module_name: its HLO module's name (the trace events carry it).
      repeats: profiled runs.
      clock: ``"wall"`` or ``"cpu"`` (see the module docstring).
      share_overlaps: charge overlapping events by processor share (default: when this
        process may use a single core).
      warmup: run once, unprofiled, first.
      separate_steps: time ``repeats`` more runs outside the profiler for the step
        time; otherwise the step time is the profiled runs' (on ``clock``).

    Returns:
      An :class:`InstructionProfile` (``step_spread_s``: the least and most step time).

    Raises:
      RuntimeError: the profiler wrote no trace.
    """
    if share_overlaps is None:
        share_overlaps = len(os.sched_getaffinity(0)) == 1
    if warmup:
        jax.block_until_ready(compiled(*args))
    now = CLOCKS[clock]
    steps = []
    if separate_steps:
        for _ in range(repeats):
            start = now()
            jax.block_until_ready(compiled(*args))
            steps.append(now() - start)
    stretch = []  # per profiled run: wall time / time on the clock
    profiled = []
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir):
            for _ in range(repeats):
                wall, start = time.perf_counter(), now()
                jax.block_until_ready(compiled(*args))
                elapsed = now() - start
                profiled.append(elapsed)
                stretch.append((time.perf_counter() - wall) / max(elapsed, 1e-12))
        files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError("jax.profiler.trace wrote no xplane file")
        per_run = _instruction_times(
            ProfileData.from_file(files[0]),
            module_name,
            share_overlaps=share_overlaps,
            runs_traced=repeats,
        )
    if not separate_steps:
        steps = profiled
    # Run ids increase with each execution; scale each run by its own stretch.
    factors = (
        stretch if len(stretch) == len(per_run) else [statistics.median(stretch)] * len(per_run)
    )
    if clock == "wall":
        factors = [1.0] * len(per_run)
    per_run = {
        run: {name: t / factor for name, t in per_run[run].items()}
        for run, factor in zip(sorted(per_run), factors, strict=True)
    }
    names = {name for run in per_run.values() for name in run}
    medians = {n: statistics.median(run.get(n, 0.0) for run in per_run.values()) for n in names}
    return InstructionProfile(
        module_name,
        medians,
        statistics.median(steps),
        len(per_run),
        compiled.as_text(),
        (min(steps), max(steps)),
        tuple(per_run[run] for run in sorted(per_run)),
        tuple(float(f) for f in factors),
    )


def shared_durations(intervals: Sequence[tuple[float, float]]) -> list[float]:
    """Each interval's processor share: over a stretch covered by ``k`` intervals, each
    gets ``1/k`` of it.

    Args:
      intervals: ``(start, end)`` pairs.

    Returns:
      One share per interval; they add up to the length of the intervals' union.
    """
    bounds = sorted({t for interval in intervals for t in interval})
    if not bounds:
        return []
    index = {t: i for i, t in enumerate(bounds)}
    # Open intervals per elementary stretch [bounds[i], bounds[i + 1]).
    delta = [0] * len(bounds)
    for start, end in intervals:
        delta[index[start]] += 1
        delta[index[end]] -= 1
    weight = [0.0] * len(bounds)  # length / open count, per stretch
    open_count = 0
    for i in range(len(bounds) - 1):
        open_count += delta[i]
        weight[i] = (bounds[i + 1] - bounds[i]) / open_count if open_count else 0.0
    prefix = [0.0]
    for w in weight:
        prefix.append(prefix[-1] + w)
    return [prefix[index[end]] - prefix[index[start]] for start, end in intervals]


def _instruction_times(
    profile: ProfileData,
    module_name: str,
    *,
    share_overlaps: bool = False,
    runs_traced: int = 1,
) -> dict[int, dict[str, float]]:
    """run id -> instruction name -> seconds, from the events tagged with the module's
    instructions: a GPU's kernels where a device plane (``/device:...``) has such events
    (the host's events there are kernel launches), else the host CPU's thunks.

    A GPU's kernel events carry no run id: their times are the ``runs_traced`` runs' mean,
    as one run (with an id below every other)."""
    events: dict[int | None, list[tuple[str, float, float]]] = defaultdict(list)
    planes = list(profile.planes)
    device_planes = [p for p in planes if p.name.startswith("/device:") and _tags(p, module_name)]
    for plane in device_planes or planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if stats.get("hlo_module") != module_name or "hlo_op" not in stats:
                    continue
                start = event.start_ns * 1e-9
                run_id = stats.get("run_id")
                events[None if run_id is None else int(run_id)].append(
                    (str(stats["hlo_op"]), start, start + event.duration_ns * 1e-9)
                )
    runs: dict[int, dict[str, float]] = {}
    for run, found in events.items():
        if share_overlaps:
            durations = shared_durations([(start, end) for _, start, end in found])
        else:
            durations = [end - start for _, start, end in found]
        times: dict[str, float] = defaultdict(float)
        share = 1.0 / runs_traced if run is None else 1.0  # no run id: the runs' mean
        for (name, _, _), seconds in zip(found, durations, strict=True):
            times[name] += seconds * share
        if run is None:  # run ids may be negative
            run = min((r for r in events if r is not None), default=0) - 1
        runs[run] = dict(times)
    return runs


def _tags(plane: Any, module_name: str) -> bool:
    """Whether any event of ``plane`` is tagged with an instruction of ``module_name``."""
    for line in plane.lines:
        for event in line.events:
            stats = dict(event.stats)
            if stats.get("hlo_module") == module_name and "hlo_op" in stats:
                return True
    return False
