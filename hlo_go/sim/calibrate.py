"""Calibration: fitting a device's efficiencies and launch overhead to measured kernel times.

A profile of a real run (XLA's own per-thunk trace events, aligned with the module's
graph by :func:`hlo_go.calibration.profiled_graph`) gives the time of every kernel of an
XLA-compiled module. The module's OpGraph
gives each kernel's flops, transcendentals and bytes (XLA's HloCostAnalysis; a fusion
counts its fused body). The simulator predicts a kernel's time as
(:mod:`hlo_go.sim.cost_model`)::

    launch × launches + max(compute / ce[class], memory / me[class])

with ``compute`` and ``memory`` the times at the device's peak rates. :func:`calibrate`
fits ``launch`` and the per-op-class efficiencies ``ce`` and ``me`` by minimizing the
squared log error of the predicted kernel times, each kernel weighted by its share of
the measured time plus :data:`KERNEL_EQUAL_WEIGHT` times an equal share for all (so the
typical kernel, most of them small, is fitted rather than a few large ones alone). The
max is smoothed (a log-sum-exp) for the fit, and the fit runs with Adam in log space
(JAX, Optax).

(``launches`` is 1 but for loops, which launch their body's kernels on every trip.)
A step is more than its kernels: the runtime spends time between thunks. The fit also
predicts each graph's step time as ``Σ kernels + gap × Σ launches`` and adds its squared
log error (weight :data:`STEP_WEIGHT`), so a per-launch ``gap`` is fitted with the rest;
the calibrated device's launch overhead is ``launch + gap``, so that simulated step times
on one device match measured ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.graph import DTYPE_CLASSES, OpGraph
from hlo_go.hlo import FrozenDict
from hlo_go.sim.cluster import OP_CLASSES, Cluster, Device
from hlo_go.sim.cost_model import KERNEL, MATRIX_CLASSES, dtype_classes, node_kinds, op_classes
from hlo_go.sim.simulate import simulate


class ProfiledGraph(NamedTuple):
    """One measured module: its graph and the measured time of each of its kernels.

    Attributes:
      name: a label (e.g. the corpus workload).
      graph: the OpGraph of the compiled module that ran (XLA's fusions as nodes).
      measured_s: ``float64[N]`` seconds per node in one step; NaN for nodes without a
        trace event (parameters, tuples, get-tuple-elements, ...).
      step_s: measured wall time of one step (outside the profiler).
    """

    name: str
    graph: OpGraph
    measured_s: np.ndarray
    step_s: float


# Weights in the fit's loss: of the equal share of every kernel against its share of the
# measured time, and of the step-time error against the kernel-time error. Chosen on the
# 18 profiled corpus steps (benchmarks/results/sim_calibration.json): against 1 and 4,
# 8 and 32 fit the median kernel to 53% instead of 63% at the same leave-one-out
# step-time error (median 2.8%); the step term keeps the large kernels' totals right.
KERNEL_EQUAL_WEIGHT = 8.0
STEP_WEIGHT = 32.0


class Calibration(NamedTuple):
    """A fitted device and how well it fits.

    Attributes:
      device: the base device with the fitted efficiencies and launch overhead.
      kernel_launch_s: the fitted per-kernel overhead inside the measured kernel times.
      gap_s: the runtime's time between kernels, per kernel (added to the launch).
      kernel_error: median absolute relative error of the fitted kernel times.
      kernels: kernels the fit used.
      graphs: names of the profiled graphs.
      class_errors: per op class with kernels in the fit, how well it fits
        (:class:`ClassError`).
    """

    device: Device
    kernel_launch_s: float
    gap_s: float
    kernel_error: float
    kernels: int
    graphs: tuple[str, ...]
    class_errors: Mapping[str, ClassError] = FrozenDict()


class ClassError(NamedTuple):
    """How well the fitted kernel times of one op class match the measured ones.

    Attributes:
      kernels: kernels of the class in the fit.
      measured_s: their measured time, summed.
      predicted_s: their fitted time, summed (the ratio to ``measured_s`` shows a
        class the fit under- or over-predicts as a whole).
      median_error: median absolute relative error of their fitted times.
    """

    kernels: int
    measured_s: float
    predicted_s: float
    median_error: float


class _Samples(NamedTuple):
    compute: np.ndarray  # seconds at peak rates
    memory: np.ndarray  # seconds at peak bandwidth
    op_class: np.ndarray
    launches: np.ndarray  # kernels the node launches per run (OpGraph.kernel_launches)
    measured: np.ndarray
    graph: np.ndarray  # index of the profiled graph


def _peak_times(graph: OpGraph, device: Device) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    classes = op_classes(graph)
    dtypes = dtype_classes(graph)
    matrix = np.isin(classes, MATRIX_CLASSES)
    rates = np.array(
        [[device.flops_rate(c, m) for c in DTYPE_CLASSES] for m in (False, True)], dtype=np.float64
    )
    compute = graph.flops / rates[matrix.astype(np.int64), dtypes]
    compute = compute + graph.transcendentals / device.transcendental_rate
    memory = (graph.bytes_read + graph.bytes_written) / device.memory_bandwidth
    return compute, memory, classes


def _samples(profiles: Sequence[ProfiledGraph], device: Device) -> _Samples:
    parts: list[tuple[np.ndarray, ...]] = []
    for index, profile in enumerate(profiles):
        compute, memory, classes = _peak_times(profile.graph, device)
        keep = (node_kinds(profile.graph) == KERNEL) & (profile.measured_s > 0)
        launches = np.maximum(profile.graph.kernel_launches, 1).astype(np.float64)
        parts.append(
            (
                compute[keep],
                memory[keep],
                classes[keep].astype(np.int64),
                launches[keep],
                profile.measured_s[keep],
                np.full(int(keep.sum()), index),
            )
        )
    return _Samples(*(np.concatenate(columns) for columns in zip(*parts, strict=True)))


def _predict(samples: _Samples, launch: float, ce: np.ndarray, me: np.ndarray) -> np.ndarray:
    return launch * samples.launches + np.maximum(
        samples.compute / ce[samples.op_class], samples.memory / me[samples.op_class]
    )


def _step_launches(profile: ProfiledGraph) -> float:
    """Kernels one step of a profiled graph launches."""
    kernels = node_kinds(profile.graph) == KERNEL
    return float(np.maximum(profile.graph.kernel_launches, 1)[kernels].sum())


def _fit(
    samples: _Samples,
    masks: np.ndarray,
    step_s: np.ndarray,
    step_launches: np.ndarray,
    subsets: np.ndarray,
    steps: int,
    initial_launch: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fits ``F`` calibrations at once, fit ``f`` on the samples where ``masks[f]`` and the
    step times of the graphs where ``subsets[f]``.

    Returns:
      ``(launch[F], gap[F], ce[F, C], me[F, C])`` minimizing each fit's loss: the
      weighted squared log error of its kernels plus :data:`STEP_WEIGHT` times the mean
      squared log error of its graphs' step times (the sum of their predicted kernels
      plus ``gap`` per launch).
    """
    import jax
    import jax.numpy as jnp
    import optax

    tiny = 1e-12
    masks = np.asarray(masks, dtype=np.float64)
    measured = samples.measured
    share = masks * measured / np.maximum((masks * measured).sum(axis=1, keepdims=True), tiny)
    weights = share + KERNEL_EQUAL_WEIGHT * masks / np.maximum(
        masks.sum(axis=1, keepdims=True), 1.0
    )
    log_compute = jnp.log(jnp.asarray(np.maximum(samples.compute, tiny)))
    log_memory = jnp.log(jnp.asarray(np.maximum(samples.memory, tiny)))
    cls = jnp.asarray(samples.op_class)
    target = jnp.log(jnp.asarray(measured))
    w = jnp.asarray(weights)
    c = len(OP_CLASSES)
    f = masks.shape[0]
    graphs = int(step_s.shape[0])
    graph_of = jnp.asarray(samples.graph)
    log_steps = jnp.log(jnp.asarray(step_s))
    log_launches = jnp.log(jnp.asarray(samples.launches))
    launches_per_graph = jnp.asarray(step_launches)
    graph_weights = jnp.asarray(subsets / np.maximum(subsets.sum(axis=1, keepdims=True), 1))

    def loss(theta: Any, sharpness: Any) -> Any:
        a = log_compute[None, :] - jnp.take_along_axis(theta["ce"], cls[None, :].repeat(f, 0), 1)
        b = log_memory[None, :] - jnp.take_along_axis(theta["me"], cls[None, :].repeat(f, 0), 1)
        # Smooth max of the two times, in log space; sharper as the fit goes on.
        top = jnp.logaddexp(sharpness * a, sharpness * b) / sharpness
        # log(launch × launches + max)
        predicted = jnp.logaddexp(theta["launch"][:, None] + log_launches[None, :], top)
        kernel_loss = jnp.sum(w * (predicted - target[None, :]) ** 2)
        per_graph = jax.vmap(lambda row: jax.ops.segment_sum(row, graph_of, graphs))(
            jnp.exp(predicted)
        )
        per_graph = per_graph + jnp.exp(theta["gap"])[:, None] * launches_per_graph[None, :]
        step_error = (jnp.log(jnp.maximum(per_graph, tiny)) - log_steps[None, :]) ** 2
        return kernel_loss + STEP_WEIGHT * jnp.sum(graph_weights * step_error)

    theta = {
        "launch": jnp.full(f, np.log(initial_launch)),
        "gap": jnp.full(f, np.log(initial_launch)),
        "ce": jnp.zeros((f, c)),
        "me": jnp.zeros((f, c)),
    }
    optimizer = optax.adam(0.05)
    state = optimizer.init(theta)

    @jax.jit
    def run(theta: Any, state: Any) -> Any:
        def body(step: Any, carry: Any) -> Any:
            theta, state = carry
            sharpness = 1.0 + 19.0 * step / max(steps - 1, 1)
            grads = jax.grad(loss)(theta, sharpness)
            updates, state = optimizer.update(grads, state)
            return optax.apply_updates(theta, updates), state

        return jax.lax.fori_loop(0, steps, body, (theta, state))

    theta, _ = run(theta, state)
    # Classes without samples in a fit come back as NaN (not fitted).
    present = np.stack(
        [np.bincount(samples.op_class[m > 0], minlength=c) > 0 for m in masks]
    ).reshape(f, c)
    ce = np.where(present, np.exp(np.asarray(theta["ce"])), np.nan)
    me = np.where(present, np.exp(np.asarray(theta["me"])), np.nan)
    return np.exp(np.asarray(theta["launch"])), np.exp(np.asarray(theta["gap"])), ce, me


def _calibration(
    profiles: Sequence[ProfiledGraph],
    samples: _Samples,
    chosen: np.ndarray,
    launch: float,
    gap: float,
    ce: np.ndarray,
    me: np.ndarray,
    base: Device,
    name: str | None,
) -> Calibration:
    """The calibration of fitted parameters on the chosen profiles."""
    mask = chosen[samples.graph]
    predicted = _predict(samples, launch, np.nan_to_num(ce, nan=1.0), np.nan_to_num(me, nan=1.0))
    relative = np.abs(predicted - samples.measured) / samples.measured
    error = float(np.median(relative[mask]))
    device = base.replace(
        name=name or f"{base.name} (calibrated)",
        launch_overhead=float(launch) + float(gap),
        compute_efficiency={
            c: float(v) for c, v in zip(OP_CLASSES, ce, strict=True) if np.isfinite(v)
        },
        memory_efficiency={
            c: float(v) for c, v in zip(OP_CLASSES, me, strict=True) if np.isfinite(v)
        },
    )
    return Calibration(
        device,
        float(launch),
        float(gap),
        error,
        int(mask.sum()),
        tuple(p.name for i, p in enumerate(profiles) if chosen[i]),
        _class_errors(samples, predicted, relative, mask),
    )


def _class_errors(
    samples: _Samples, predicted: np.ndarray, relative: np.ndarray, mask: np.ndarray
) -> FrozenDict:
    """Per op class of the masked kernels: their count, times and median error."""
    errors = {}
    for index, name in enumerate(OP_CLASSES):
        members = mask & (samples.op_class == index)
        if members.any():
            errors[name] = ClassError(
                int(members.sum()),
                float(samples.measured[members].sum()),
                float(predicted[members].sum()),
                float(np.median(relative[members])),
            )
    return FrozenDict(errors)


def calibrate(
    profiles: Sequence[ProfiledGraph],
    base: Device,
    *,
    steps: int = 2000,
    name: str | None = None,
) -> Calibration:
    """Fits a device's per-op-class efficiencies and launch overhead to measured kernels.

    Args:
      profiles: profiled graphs (:func:`hlo_go.calibration.profiled_graph`) measured on
        the device.
      base: the device's datasheet figures (peak rates, bandwidth, capacity); the
        calibrated device keeps them and gets fitted efficiencies and launch overhead.
      steps: Adam steps of the fit.
      name: the calibrated device's name (default ``base.name + " (calibrated)"``).

    Returns:
      The :class:`Calibration`.

    Raises:
      ValueError: no measured kernels.
    """
    return calibrate_subsets(
        profiles, base, np.ones((1, len(profiles)), bool), steps=steps, name=name
    )[0]


def calibrate_subsets(
    profiles: Sequence[ProfiledGraph],
    base: Device,
    subsets: np.ndarray,
    *,
    steps: int = 2000,
    name: str | None = None,
) -> list[Calibration]:
    """Several calibrations at once, each on a subset of the profiles (e.g. leave-one-out).

    Args:
      profiles: profiled graphs.
      base: the device's datasheet figures.
      subsets: ``bool[F, P]``: calibration ``f`` uses the profiles where ``subsets[f]``.
      steps: Adam steps of the fits (run together).
      name: the calibrated devices' name.

    Returns:
      F calibrations.

    Raises:
      ValueError: a subset without measured kernels.
    """
    samples = _samples(profiles, base)
    subsets = np.asarray(subsets, dtype=bool)
    masks = subsets[:, samples.graph]
    if samples.measured.size == 0 or not masks.any(axis=1).all():
        raise ValueError("a calibration has no measured kernels")
    initial = max(float(np.percentile(samples.measured, 5)), 1e-7)
    step_s = np.array([p.step_s for p in profiles], dtype=np.float64)
    step_launches = np.array([_step_launches(p) for p in profiles], dtype=np.float64)
    launch, gap, ce, me = _fit(
        samples, masks, step_s, step_launches, subsets.astype(np.float64), steps, initial
    )
    return [
        _calibration(profiles, samples, subsets[f], launch[f], gap[f], ce[f], me[f], base, name)
        for f in range(subsets.shape[0])
    ]


class FusedCase(NamedTuple):
    """One measured fusion variant of a graph, for :func:`calibrate_fused_matrix`.

    Attributes:
      graph: the pre-fusion graph.
      group: ``int[N]`` the fusion grouping that was compiled.
      measured_s: its measured step time.
    """

    graph: OpGraph
    group: np.ndarray
    measured_s: float


def calibrate_fused_matrix(
    cases: Sequence[FusedCase], device: Device, *, grid: np.ndarray | None = None
) -> tuple[Device, float]:
    """Fits the ``fused_matrix`` compute efficiency to measured step times of fusion variants.

    Matrix ops fused with other nodes never occur in XLA's own CPU compiles (its dots
    stay library calls), so the per-kernel fit cannot see them; variants compiled from
    :func:`hlo_go.decisions.fusion_groups` can. A one-parameter search on a log grid
    minimizes the squared log error of the simulated single-device step times.

    Args:
      cases: measured variants (with and without fused matrix ops).
      device: the calibrated device (its other figures are kept).
      grid: candidate efficiencies (default 1e-4 .. 10, 81 points).

    Returns:
      ``(device with the fitted efficiency, the median absolute relative error)``;
      ``(device, nan)`` unchanged when no case fuses a matrix op.
    """

    def fuses_matrix(case: FusedCase) -> bool:
        sizes = np.bincount(case.group, minlength=case.graph.num_nodes)[case.group]
        return bool((np.isin(op_classes(case.graph), MATRIX_CLASSES) & (sizes > 1)).any())

    if not any(fuses_matrix(case) for case in cases):
        return device, float("nan")  # nothing to fit: the matrix efficiency stands in
    grid = np.logspace(-4, 1, 81) if grid is None else np.asarray(grid)
    best: tuple[float, float, Device] | None = None
    for value in grid.tolist():
        candidate = device.replace(
            compute_efficiency={**device.compute_efficiency, "fused_matrix": value},
            memory_efficiency={
                **device.memory_efficiency,
                "fused_matrix": device.memory_efficiency.get("matrix", 1.0),
            },
        )
        cluster = Cluster("fit", (candidate,))
        errors = []
        for case in cases:
            decisions = Decisions.default(case.graph)
            predicted = simulate(case.graph, cluster, decisions, group=case.group).step_time
            errors.append(np.log(predicted / case.measured_s))
        loss = float(np.mean(np.square(errors)))
        if best is None or loss < best[0]:
            median = float(np.median(np.abs(np.expm1(errors))))
            best = (loss, median, candidate)
    assert best is not None
    return best[2], best[1]
