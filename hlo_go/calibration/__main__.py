"""``python -m hlo_go.calibration``: measure this host, calibrate the simulator, compare.

Profiles corpus training steps on one pinned core, fits :data:`hlo_go.sim.presets.HOST_CORE`
to them (leaving each graph out of its own fit), ranks fusion variants, logs the tables
and writes a JSON report and its plot (:mod:`hlo_go.calibration.validation`).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from hlo_go.calibration.plot import plot_calibration
from hlo_go.calibration.profiles import profiled_graph
from hlo_go.calibration.validation import (
    fused_cases,
    log_lines,
    measure_all_variants,
    measure_profiles,
    step_lines,
    step_table,
    variant_report,
)
from hlo_go.sim.calibrate import calibrate_fused_matrix
from hlo_go.sim.presets import HOST_CORE
from hlo_go.xla.timing import default_cpu

logger = logging.getLogger("hlo_go.calibration")

DEFAULT_GRAPHS = ("rnnlm_l2_scan", "gnmt_l2_scan", "resnet_26", "inception_v3_small")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hlo_go.calibration")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Measures, calibrates and compares; logs the tables and writes a JSON report and
    its plot (``--out`` with suffix ``.png``)."""
    args = _parser().parse_args(argv)
    names = args.names or list(DEFAULT_GRAPHS)
    variant_names = args.variants if args.variants is not None else names[:1]
    cpu = default_cpu() if args.cpu is None else args.cpu

    raw = measure_profiles(
        names, repeats=args.repeats, cpu=cpu, cache=Path(args.cache) if args.cache else None
    )
    profiles = [profiled_graph(raw[name], name) for name in names if name in raw]
    rows, full = step_table(profiles, HOST_CORE)
    log_lines(step_lines(rows, full))
    errors = [abs(r.error) for r in rows]
    mae = statistics.median(errors) if errors else float("nan")
    logger.info("median |error| (leave-one-out): %.1f%%", 100 * mae)

    measured = measure_all_variants(
        variant_names,
        matrix=args.matrix_variants,
        rounds=args.repeats,
        cpu=cpu,
        cache=Path(args.variant_cache) if args.variant_cache else None,
    )
    variants = variant_report(measured, full.device)
    if measured:
        final_device, fused_error = calibrate_fused_matrix(fused_cases(measured), full.device)
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
        "variants": variants,
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    logger.info("wrote %s", args.out)
    plot = plot_calibration(report, Path(args.out).with_suffix(".png"))
    logger.info("wrote %s", plot)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")
    sys.exit(main())
