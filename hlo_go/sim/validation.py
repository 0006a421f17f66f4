"""Checking the simulator against real runs on this host: measure, calibrate, compare.

``python -m hlo_go.sim.validation [NAME ...] [--variants NAME ...] [--out FILE]``

1. **Measure** each corpus workload: lower its training step, compile it with XLA's
   default pipeline and per-thunk tracing, run it on random inputs and read every
   kernel's time (:func:`measure_workload`). Measurements run in a child process pinned
   to one core and timed by CPU time (:func:`in_pinned_process`): the calibrated device
   is one core of this host, and other processes sharing the host do not stretch the
   figures.
2. **Calibrate** :data:`hlo_go.sim.presets.HOST_CORE` on the profiles
   (:func:`hlo_go.sim.calibrate`), leaving each graph out of its own fit, and predict
   its single-device step time by simulating its compiled graph: the relative error
   table of step times, and its median absolute error.
3. **Rank fusion variants** of a graph (:func:`fusion_variants`): the pre-fusion module
   fused by :func:`hlo_go.decisions.fusion_groups` under several priorities and size
   limits, lowered through :func:`hlo_go.xla.apply_fusion` and timed interleaved, versus
   the simulator's prediction on the pre-fusion graph with the same groups: Kendall τ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hlo_go.decisions import (
    Decisions,
    FusionLimits,
    fusion_group_names,
    fusion_groups,
    module_output_dims,
)
from hlo_go.graph import OpGraph, build_graph
from hlo_go.sim.calibrate import (
    Calibration,
    FusedCase,
    ProfiledGraph,
    calibrate_fused_matrix,
    calibrate_subsets,
    profiled_graph,
)
from hlo_go.sim.cluster import OP_CLASSES, Cluster, Device
from hlo_go.sim.cost_model import MATRIX_CLASSES, op_classes
from hlo_go.sim.simulate import simulate
from hlo_go.xla.fusion import wrap_alone
from hlo_go.xla.timing import default_cpu, in_pinned_process


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def concrete_arguments(abstract: Any, *, seed: int = 0) -> Any:
    """Random arrays for a tree of ``jax.ShapeDtypeStruct`` (integers in [0, 4), floats
    N(0, 0.1), booleans fair: :func:`hlo_go.xla.random_arguments`)."""
    from hlo_go.xla.inputs import random_arguments

    return random_arguments(abstract, seed=seed, scale=0.1)


def measure_workload(name: str, *, repeats: int = 5, clock: str = "cpu") -> Any:
    """Profiles one corpus workload compiled by XLA's default pipeline on this host.

    Run it through :func:`in_pinned_process` for a one-core measurement.

    Args:
      name: a corpus graph name.
      repeats: timed and profiled runs (after one warm-up).
      clock: ``"cpu"`` (CPU time, for a pinned process) or ``"wall"``.

    Returns:
      The :class:`hlo_go.xla.InstructionProfile` (turn it into a graph with measured
      kernel times with :func:`hlo_go.sim.calibrate.profiled_graph`).
    """
    import jax

    from hlo_corpus import get_workload
    from hlo_go.xla import profile_lowered

    step, abstract = get_workload(name).make()
    lowered = jax.jit(step).lower(*abstract)
    return profile_lowered(
        lowered,
        concrete_arguments(abstract),
        repeats=repeats,
        clock=clock,  # type: ignore[arg-type]
    )


def save_profiles(profiles: dict[str, Any], path: str | Path) -> None:
    """Writes measured profiles (name -> InstructionProfile) to a JSON file."""
    Path(path).write_text(json.dumps({name: p._asdict() for name, p in profiles.items()}))


def load_profiles(path: str | Path) -> dict[str, Any]:
    """Reads profiles written by :func:`save_profiles`."""
    from hlo_go.xla.profile import InstructionProfile

    return {
        name: InstructionProfile(**fields)
        for name, fields in json.loads(Path(path).read_text()).items()
    }


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


def fusion_variants(
    graph: OpGraph, *, with_matrix: bool = False, seed: int = 0
) -> dict[str, tuple[np.ndarray, FusionLimits]]:
    """Fusion priorities and limits of the variants of one graph.

    Matrix ops (dot, convolution) keep priority 0 except in the ``with matrix`` variant:
    on XLA:CPU a dot fused into a loop fusion loses its library kernel and runs 10-100x
    slower, so those variants take long to time.

    Args:
      graph: the pre-fusion graph.
      with_matrix: add the ``with matrix, max 8`` variant (everything may fuse).
      seed: the random variant's seed.

    Returns:
      name -> (fusion priority ``float32[N]``, limits): all non-matrix nodes at sizes
      64, 8 and 2; elementwise and data-movement nodes only; a random half of the
      non-matrix nodes; no fusion; optionally everything at size 8.
    """
    n = graph.num_nodes
    rng = np.random.default_rng(seed)
    classes = op_classes(graph)
    not_matrix = (~np.isin(classes, MATRIX_CLASSES)).astype(np.float32)
    cheap = np.isin(
        classes, [OP_CLASSES.index("elementwise"), OP_CLASSES.index("data_movement")]
    ).astype(np.float32)
    variants = {
        "all, max 64": (not_matrix, FusionLimits(max_nodes=64)),
        "all, max 8": (not_matrix, FusionLimits(max_nodes=8)),
        "all, max 2": (not_matrix, FusionLimits(max_nodes=2)),
        "elementwise only": (cheap, FusionLimits(max_nodes=64)),
        "random half": (not_matrix * (rng.random(n) < 0.5), FusionLimits(max_nodes=64)),
        "none": (np.zeros(n, np.float32), FusionLimits()),
    }
    if with_matrix:
        variants["with matrix, max 8"] = (np.ones(n, np.float32), FusionLimits(max_nodes=8))
    return variants


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's τ-a between two rankings (pairs tied in either count as discordant-free 0)."""
    n = len(a)
    total = 0
    score = 0
    for i in range(n):
        for j in range(i + 1, n):
            total += 1
            score += int(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]))
    return score / total if total else float("nan")


class Variant(NamedTuple):
    """One compiled and timed fusion variant of a corpus graph.

    Attributes:
      graph_name: the corpus graph.
      variant: the variant's name (:func:`fusion_variants`).
      group: ``int32[N]`` the grouping compiled (labels of the pre-fusion graph's nodes).
      measured_s: median step time over the interleaved rounds.
    """

    graph_name: str
    variant: str
    group: np.ndarray
    measured_s: float


def measure_variants(
    name: str, *, rounds: int = 3, with_matrix: bool = False, clock: str = "cpu"
) -> tuple[OpGraph, list[Variant]]:
    """Compiles the fusion variants of a corpus graph and times them interleaved.

    Run it through :func:`in_pinned_process` for a one-core measurement.

    Args:
      name: a corpus graph.
      rounds: interleaved timing rounds (after one warm-up round).
      with_matrix: include the variant that fuses matrix ops (slow on CPU).
      clock: ``"cpu"`` (CPU time, for a pinned process) or ``"wall"``.

    Returns:
      ``(pre-fusion graph, one Variant per variant that compiled)``.
    """
    import jax

    from hlo_corpus import get_workload
    from hlo_go import corpus
    from hlo_go.xla import apply_fusion
    from hlo_go.xla.hooks import compile_replacing
    from hlo_go.xla.timing import time_interleaved

    module = corpus.load(name, "prefusion")
    graph = build_graph(module)
    dims = module_output_dims(module)
    step, abstract = get_workload(name).make()
    lowered = jax.jit(step).lower(*abstract)
    args = concrete_arguments(abstract)
    compiled: dict[str, Any] = {}
    groups: dict[str, np.ndarray] = {}
    zeros = np.zeros(graph.num_nodes, np.int32)
    for label, (priority, limits) in fusion_variants(graph, with_matrix=with_matrix).items():
        group = fusion_groups(graph, zeros, priority, output_dims=dims, limits=limits)
        try:
            fused = wrap_alone(apply_fusion(module, fusion_group_names(graph, group)))
            executable = compile_replacing(lowered, fused)
            jax.block_until_ready(executable(*args))
        except Exception as error:  # a lowering the CPU backend refuses
            _log(f"{name} / {label}: skipped ({type(error).__name__}: {str(error)[:120]})")
            continue
        compiled[label] = executable
        groups[label] = group
    timings = time_interleaved(
        {k: (lambda f=f: jax.block_until_ready(f(*args))) for k, f in compiled.items()},
        repeats=rounds,
        warmup=1,
        clock=clock,  # type: ignore[arg-type]
    )
    return graph, [Variant(name, k, groups[k], timings[k].median) for k in compiled]


def _prefusion_graph(name: str) -> OpGraph:
    from hlo_go import corpus

    return build_graph(corpus.load(name, "prefusion"))


def save_variants(variants: dict[str, list[Variant]], path: str | Path) -> None:
    """Writes measured fusion variants (graph name -> variants) to a JSON file."""
    out = {
        name: [v._replace(group=v.group.tolist())._asdict() for v in measured]
        for name, measured in variants.items()
    }
    Path(path).write_text(json.dumps(out))


def load_variants(path: str | Path) -> dict[str, list[Variant]]:
    """Reads variants written by :func:`save_variants`."""
    return {
        name: [Variant(**{**v, "group": np.asarray(v["group"], np.int32)}) for v in measured]
        for name, measured in json.loads(Path(path).read_text()).items()
    }


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
    tau = kendall_tau([r["measured_s"] for r in rows], [r["predicted_s"] for r in rows])
    return rows, tau


def print_class_errors(fit: Calibration) -> None:
    """Prints how well each op class's kernels fit: count, summed measured and fitted
    time, and the median absolute relative error."""
    header = f"  {'op class':16s} {'kernels':>8s} {'measured':>10s} {'fitted':>10s}"
    print(f"{header} {'median |error|':>15s}")
    for name, e in fit.class_errors.items():
        print(
            f"  {name:16s} {e.kernels:8d} {e.measured_s:10.3f} {e.predicted_s:10.3f} "
            f"{e.median_error:15.1%}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Measures, calibrates and compares; prints the tables and writes a JSON report."""
    from hlo_go.sim.presets import HOST_CORE

    parser = argparse.ArgumentParser(prog="python -m hlo_go.sim.validation")
    parser.add_argument("names", nargs="*", help="corpus graphs to profile (default: small ones)")
    parser.add_argument("--variants", nargs="*", default=None, help="graphs to rank variants of")
    parser.add_argument(
        "--matrix-variants",
        nargs="*",
        default=[],
        help="of those, graphs that also get the (slow) variant fusing matrix ops",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--cpu", type=int, default=None, help="core to measure on (default: the last one)"
    )
    parser.add_argument("--out", default="sim_calibration.json")
    parser.add_argument("--cache", help="JSON file of measured profiles, reused and extended")
    parser.add_argument(
        "--variant-cache", help="JSON file of measured fusion variants, reused and extended"
    )
    args = parser.parse_args(argv)
    names = args.names or ["rnnlm_l2_scan", "gnmt_l2_scan", "resnet_26", "inception_v3_small"]
    variants = args.variants if args.variants is not None else names[:1]

    cpu = default_cpu() if args.cpu is None else args.cpu
    cache = Path(args.cache) if args.cache else None
    raw = load_profiles(cache) if cache and cache.exists() else {}
    for name in names:
        if name in raw:
            continue
        start = time.perf_counter()
        try:
            raw[name] = in_pinned_process(measure_workload, name, repeats=args.repeats, cpu=cpu)
        except Exception as error:
            _log(f"{name}: not measured ({type(error).__name__}: {str(error)[:200]})")
            continue
        _log(f"{name}: step {raw[name].step_s:.3f} s ({time.perf_counter() - start:.0f} s)")
        if cache:
            save_profiles(raw, cache)
    profiles = [profiled_graph(raw[name], name) for name in names if name in raw]
    rows, full = step_table(profiles, HOST_CORE)
    errors = [abs(r.error) for r in rows]
    print(f"calibrated on {len(profiles)} graphs, {full.kernels} kernels; kernel fit median "
          f"|error| {full.kernel_error:.1%}; launch {full.kernel_launch_s * 1e6:.2f} us + gap "
          f"{full.gap_s * 1e6:.2f} us")  # fmt: skip
    print_class_errors(full)
    print(f"{'graph':24s} {'kernels':>8s} {'measured':>10s} {'predicted':>10s} {'error':>8s}")
    for r in rows:
        print(
            f"{r.name:24s} {r.kernels:8d} {r.measured_s:10.4f} {r.predicted_s:10.4f} "
            f"{r.error:+8.1%}"
        )
    mae = statistics.median(errors) if errors else float("nan")
    print(f"median |error| (leave-one-out): {mae:.1%}")
    measured_variants: dict[str, tuple[OpGraph, list[Variant]]] = {}
    variant_cache = Path(args.variant_cache) if args.variant_cache else None
    stored = load_variants(variant_cache) if variant_cache and variant_cache.exists() else {}
    for name in variants:
        start = time.perf_counter()
        if name in stored:
            measured_variants[name] = (_prefusion_graph(name), stored[name])
            continue
        graph, measured = in_pinned_process(
            measure_variants,
            name,
            rounds=args.repeats,
            with_matrix=name in args.matrix_variants,
            cpu=cpu,
        )
        measured_variants[name] = (graph, measured)
        if variant_cache:
            stored[name] = measured
            save_variants(stored, variant_cache)
        _log(
            f"{name}: {len(measured)} variants ({time.perf_counter() - start:.0f} s): "
            + ", ".join(f"{v.variant} {v.measured_s:.3f} s" for v in measured)
        )
    variant_report = {}
    for name, (graph, measured) in measured_variants.items():
        # fused_matrix is fitted on the other graphs' variants; when none of them fuses a
        # matrix op (so they cannot inform it), on all variants, this graph's included.
        others = [
            FusedCase(g, v.group, v.measured_s)
            for other, (g, vs) in measured_variants.items()
            if other != name
            for v in vs
        ]
        device, _ = calibrate_fused_matrix(others, full.device)
        in_sample = "fused_matrix" not in device.compute_efficiency
        if in_sample:
            everything = [
                FusedCase(g, v.group, v.measured_s)
                for g, vs in measured_variants.values()
                for v in vs
            ]
            device, _ = calibrate_fused_matrix(everything, full.device)
        table, tau = variant_table(graph, measured, device)
        variant_report[name] = {
            "rows": table,
            "kendall_tau": tau,
            "fused_matrix_in_sample": in_sample,
        }
        print(f"\nfusion variants of {name}: Kendall tau {tau:.2f}")
        for r in table:
            print(
                f"  {r['variant']:18s} {r['kernels']:6d} kernels  measured {r['measured_s']:.4f}"
                f"  predicted {r['predicted_s']:.4f}"
            )
    if measured_variants:
        all_cases = [
            FusedCase(g, v.group, v.measured_s) for g, vs in measured_variants.values() for v in vs
        ]
        final_device, fused_error = calibrate_fused_matrix(all_cases, full.device)
    else:
        final_device, fused_error = full.device, float("nan")
    report = {
        "device": {
            "launch_overhead": final_device.launch_overhead,
            "kernel_launch_s": full.kernel_launch_s,
            "gap_s": full.gap_s,
            "compute_efficiency": dict(final_device.compute_efficiency),
            "memory_efficiency": dict(final_device.memory_efficiency),
            "fused_matrix_step_error": fused_error,
            "kernel_error": full.kernel_error,
            "kernels": full.kernels,
            "class_errors": {c: e._asdict() for c, e in full.class_errors.items()},
        },
        "steps": [r._asdict() | {"error": r.error} for r in rows],
        "median_abs_error": mae,
        "variants": variant_report,
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")
    plot = plot_calibration(report, Path(args.out).with_suffix(".png"))
    print(f"wrote {plot}")
    return 0


def plot_calibration(report: dict[str, Any], path: str | Path) -> Path:
    """Predicted vs measured step times (left) and each graph's fusion variants (right).

    Args:
      report: the JSON report :func:`main` writes.
      path: the image file.

    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (steps, variants) = plt.subplots(1, 2, figsize=(12, 5.5))
    measured = np.array([r["measured_s"] for r in report["steps"]])
    predicted = np.array([r["predicted_s"] for r in report["steps"]])
    if measured.size:
        lo, hi = (
            min(measured.min(), predicted.min()) / 1.5,
            max(measured.max(), predicted.max()) * 1.5,
        )
        line = np.array([lo, hi])
        steps.fill_between(line, line / 1.15, line * 1.15, color="0.9", label="±15%")
        steps.plot(line, line, color="0.5", lw=1)
        steps.scatter(measured, predicted, s=18, zorder=3)
        for row, x, y in zip(report["steps"], measured, predicted, strict=True):
            steps.annotate(
                row["name"], (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points"
            )
        steps.set(xscale="log", yscale="log", xlim=line, ylim=line)
    steps.set(
        xlabel="measured step (s, one core)",
        ylabel="predicted step (s, leave-one-out)",
        title=f"step times: median |error| {report['median_abs_error']:.1%}",
    )
    steps.legend(loc="upper left")
    for name, entry in report["variants"].items():
        rows = entry["rows"]
        x = [r["measured_s"] for r in rows]
        y = [r["predicted_s"] for r in rows]
        variants.scatter(x, y, s=18, label=f"{name} (tau {entry['kendall_tau']:.2f})")
    if report["variants"]:
        variants.set(xscale="log", yscale="log")
        variants.legend(fontsize=7)
    variants.set(
        xlabel="measured step (s)", ylabel="predicted step (s)", title="fusion variants per graph"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


if __name__ == "__main__":
    sys.exit(main())
