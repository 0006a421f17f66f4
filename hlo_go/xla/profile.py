"""Per-instruction times of real runs, from XLA's own trace events.

Compiled with ``xla_cpu_enable_xprof_traceme=True``, XLA's CPU runtime records one
trace event per executed HLO instruction (thunk), tagged with ``hlo_op`` and
``hlo_module``. :func:`profile_lowered` runs the executable under
``jax.profiler.trace`` and reads those events back with ``jax.profiler.ProfileData``.
The simulator's calibration fits its cost model to these times.
"""

from __future__ import annotations

import glob
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
from jax.profiler import ProfileData


class InstructionProfile(NamedTuple):
    """Measured times of one compiled module.

    Attributes:
      module_name: the HLO module's name.
      instruction_s: per entry-level instruction name, the median over runs of its
        total time in one run (seconds).
      step_s: median wall time of one call, measured outside the profiler.
      runs: how many profiled runs the medians are over.
      hlo_text: the compiled module's text (instruction names match the keys).
    """

    module_name: str
    instruction_s: dict[str, float]
    step_s: float
    runs: int
    hlo_text: str


TRACEME_OPTIONS: dict[str, Any] = {"xla_cpu_enable_xprof_traceme": True}


def profile_lowered(
    lowered: Any,
    args: Sequence[Any],
    *,
    repeats: int = 5,
    compiler_options: dict[str, Any] | None = None,
) -> InstructionProfile:
    """Compiles ``lowered`` with per-instruction tracing, runs it and reads the times.

    Args:
      lowered: a ``jax.stages.Lowered``.
      args: arguments to call the compiled function with.
      repeats: profiled runs (after one warm-up run).
      compiler_options: extra XLA options (e.g. fusion passes disabled).

    Returns:
      An :class:`InstructionProfile`.
    """
    options = {**(compiler_options or {}), **TRACEME_OPTIONS}
    compiled = lowered.compile(compiler_options=options)
    module_name = lowered.compiler_ir("hlo").as_hlo_module().name
    jax.block_until_ready(compiled(*args))  # warm-up
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        walls.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir):
            for _ in range(repeats):
                jax.block_until_ready(compiled(*args))
        files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError("jax.profiler.trace wrote no xplane file")
        per_run = _instruction_times(ProfileData.from_file(files[0]), module_name)
    names = {name for run in per_run.values() for name in run}
    medians = {n: statistics.median(run.get(n, 0.0) for run in per_run.values()) for n in names}
    return InstructionProfile(
        module_name, medians, statistics.median(walls), len(per_run), compiled.as_text()
    )


def _instruction_times(profile: ProfileData, module_name: str) -> dict[int, dict[str, float]]:
    """run id -> instruction name -> seconds, from the host CPU plane's events."""
    runs: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for plane in profile.planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if stats.get("hlo_module") != module_name or "hlo_op" not in stats:
                    continue
                runs[int(stats.get("run_id", 0))][str(stats["hlo_op"])] += event.duration_ns * 1e-9
    return {run: dict(times) for run, times in runs.items()}
