"""Checking the simulator against real runs on this host: measure, calibrate, compare.

``python -m hlo_go.calibration [NAME ...] [--variants NAME ...] [--out FILE]`` runs it all
(:mod:`hlo_go.calibration.__main__`):

1. **Measure** each corpus workload: lower its training step, compile it with XLA's
   default pipeline and per-thunk tracing, run it on random inputs and read every
   kernel's time (:func:`hlo_go.calibration.profiles.measure_workload`). Measurements run
   in a child process pinned to one core and timed by CPU time
   (:func:`hlo_go.xla.timing.in_pinned_process`): the calibrated device is one core of
   this host, and other processes sharing the host do not stretch the figures.
2. **Calibrate** :data:`hlo_go.sim.presets.HOST_CORE` on the profiles
   (:func:`hlo_go.sim.calibrate`), leaving each graph out of its own fit, and predict
   its single-device step time by simulating its compiled graph: the relative error
   table of step times (:func:`step_table`), and its median absolute error.
3. **Rank fusion variants** of a graph (:mod:`hlo_go.calibration.variants`) measured
   against the simulator's prediction on the pre-fusion graph with the same groups:
   Kendall's τ (:func:`variant_table`).

Tables and progress go to the ``hlo_go.calibration.validation`` logger.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from hlo_go.calibration.profiles import (
    load_profiles,
    measure_workload,
    save_profiles,
)
from hlo_go.calibration.variants import (
    Variant,
    load_variants,
    measure_variants,
    prefusion_graph,
    save_variants,
)
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sim.calibrate import (
    Calibration,
    FusedCase,
    ProfiledGraph,
    calibrate_fused_matrix,
    calibrate_subsets,
)
from hlo_go.sim.cluster import Cluster, Device
from hlo_go.sim.simulate import simulate
from hlo_go.xla.timing import in_pinned_process

logger = logging.getLogger(__name__)


def host_cluster(device: Device, name: str = "host-cpu-1-calibrated") -> Cluster:
    """A one-device cluster of ``device``."""
    return Cluster(name, (device,), (), f"this host's CPU, {device.name}")


def predict_step(graph: OpGraph, device: Device) -> float:
    """The simulated single-device step time of a graph (default decisions)."""
    return simulate(graph, host_cluster(device), Decisions.default(graph)).step_time


class StepRow(NamedTuple):
    """Predicted vs measured step time of one graph.

    Attributes:
      name: the corpus graph.
      kernels: kernels in its compiled module.
      measured_s: the measured step time.
      predicted_s: predicted by the device calibrated without this graph.
      predicted_in_sample_s: predicted by the device calibrated on all graphs.
    """

    name: str
    kernels: int
    measured_s: float
    predicted_s: float
    predicted_in_sample_s: float

    @property
    def error(self) -> float:
        """Relative error of the leave-one-out prediction."""
        return (self.predicted_s - self.measured_s) / self.measured_s


def step_table(
    profiles: Sequence[ProfiledGraph], base: Device
) -> tuple[list[StepRow], Calibration]:
    """Leave-one-out step-time predictions of profiled graphs, and the calibration on all."""
    count = len(profiles)
    subsets = np.ones((count + 1, count), dtype=bool)
    subsets[np.arange(count), np.arange(count)] = count == 1  # leave one out (if possible)
    fits = calibrate_subsets(profiles, base, subsets)
    full = fits[-1]
    rows = [
        StepRow(
            profile.name,
            int(np.count_nonzero(~np.isnan(profile.measured_s))),
            profile.step_s,
            predict_step(profile.graph, fits[i].device),
            predict_step(profile.graph, full.device),
        )
        for i, profile in enumerate(profiles)
    ]
    return rows, full


def rank_correlation(measured: Sequence[float], predicted: Sequence[float]) -> float:
    """Kendall's τ (τ-b, :func:`scipy.stats.kendalltau`) of predicted against measured
    times; NaN for fewer than two pairs."""
    if len(measured) < 2:
        return float("nan")
    return float(stats.kendalltau(measured, predicted).statistic)


def variant_table(
    graph: OpGraph, variants: Sequence[Variant], device: Device
) -> tuple[list[dict[str, Any]], float]:
    """Predicted vs measured step times of a graph's variants, and their Kendall τ."""
    cluster = host_cluster(device)
    rows = []
    for v in variants:
        result = simulate(graph, cluster, Decisions.default(graph), group=v.group)
        rows.append(
            {
                "variant": v.variant,
                "kernels": result.num_kernels,
                "measured_s": v.measured_s,
                "predicted_s": result.step_time,
            }
        )
    tau = rank_correlation([r["measured_s"] for r in rows], [r["predicted_s"] for r in rows])
    return rows, tau


def class_error_lines(fit: Calibration) -> list[str]:
    """How well each op class's kernels fit, as table lines: count, summed measured and
    fitted time, and the median absolute relative error."""
    header = f"  {'op class':16s} {'kernels':>8s} {'measured':>10s} {'fitted':>10s}"
    lines = [f"{header} {'median |error|':>15s}"]
    for name, e in fit.class_errors.items():
        lines.append(
            f"  {name:16s} {e.kernels:8d} {e.measured_s:10.3f} {e.predicted_s:10.3f} "
            f"{e.median_error:15.1%}"
        )
    return lines


def step_lines(rows: Sequence[StepRow], full: Calibration) -> list[str]:
    """The step-time table of :func:`step_table`'s rows, as lines."""
    lines = [
        f"calibrated on {len(rows)} graphs, {full.kernels} kernels; kernel fit median "
        f"|error| {full.kernel_error:.1%}; launch {full.kernel_launch_s * 1e6:.2f} us + gap "
        f"{full.gap_s * 1e6:.2f} us",
        *class_error_lines(full),
        f"{'graph':24s} {'kernels':>8s} {'measured':>10s} {'predicted':>10s} {'error':>8s}",
    ]
    for r in rows:
        lines.append(
            f"{r.name:24s} {r.kernels:8d} {r.measured_s:10.4f} {r.predicted_s:10.4f} "
            f"{r.error:+8.1%}"
        )
    return lines


def log_lines(lines: Sequence[str]) -> None:
    """Logs each line at level INFO."""
    for line in lines:
        logger.info("%s", line)


def measure_profiles(
    names: Sequence[str], *, repeats: int, cpu: int, cache: Path | None
) -> dict[str, Any]:
    """Profiles of the named workloads: the cache's, the rest measured (and cached)."""
    raw = load_profiles(cache) if cache and cache.exists() else {}
    for name in names:
        if name in raw:
            continue
        start = time.perf_counter()
        try:
            raw[name] = in_pinned_process(measure_workload, name, repeats=repeats, cpu=cpu)
        except Exception as error:  # a workload that fails to compile or run here
            logger.warning(
                "%s: not measured (%s: %s)", name, type(error).__name__, str(error)[:200]
            )
            continue
        logger.info("%s: step %.3f s (%.0f s)", name, raw[name].step_s, time.perf_counter() - start)
        if cache:
            save_profiles(raw, cache)
    return raw


def measure_all_variants(
    names: Sequence[str],
    *,
    matrix: Sequence[str],
    rounds: int,
    cpu: int,
    cache: Path | None,
) -> dict[str, tuple[OpGraph, list[Variant]]]:
    """Measured fusion variants of the named graphs: the cache's, the rest measured."""
    out: dict[str, tuple[OpGraph, list[Variant]]] = {}
    stored = load_variants(cache) if cache and cache.exists() else {}
    for name in names:
        start = time.perf_counter()
        if name in stored:
            out[name] = (prefusion_graph(name), stored[name])
            continue
        graph, measured = in_pinned_process(
            measure_variants, name, rounds=rounds, with_matrix=name in matrix, cpu=cpu
        )
        out[name] = (graph, measured)
        if cache:
            stored[name] = measured
            save_variants(stored, cache)
        logger.info(
            "%s: %d variants (%.0f s): %s",
            name,
            len(measured),
            time.perf_counter() - start,
            ", ".join(f"{v.variant} {v.measured_s:.3f} s" for v in measured),
        )
    return out


def fused_cases(
    measured: dict[str, tuple[OpGraph, list[Variant]]], *, but: str = ""
) -> list[FusedCase]:
    """The measured variants of every graph but ``but``, as cases for
    :func:`hlo_go.sim.calibrate.calibrate_fused_matrix`."""
    return [
        FusedCase(g, v.group, v.measured_s)
        for name, (g, vs) in measured.items()
        if name != but
        for v in vs
    ]


def variant_report(
    measured: dict[str, tuple[OpGraph, list[Variant]]], device: Device
) -> dict[str, dict[str, Any]]:
    """Per graph, its variants' table and Kendall τ.

    ``fused_matrix`` is fitted on the other graphs' variants; when none of them fuses a
    matrix op (so they cannot inform it), on all variants, this graph's included
    (``fused_matrix_in_sample``).
    """
    report = {}
    for name, (graph, variants) in measured.items():
        fitted, _ = calibrate_fused_matrix(fused_cases(measured, but=name), device)
        in_sample = "fused_matrix" not in fitted.compute_efficiency
        if in_sample:
            fitted, _ = calibrate_fused_matrix(fused_cases(measured), device)
        table, tau = variant_table(graph, variants, fitted)
        report[name] = {"rows": table, "kendall_tau": tau, "fused_matrix_in_sample": in_sample}
        logger.info("fusion variants of %s: Kendall tau %.2f", name, tau)
        for r in table:
            logger.info(
                "  %-18s %6d kernels  measured %.4f  predicted %.4f",
                r["variant"],
                r["kernels"],
                r["measured_s"],
                r["predicted_s"],
            )
    return report
