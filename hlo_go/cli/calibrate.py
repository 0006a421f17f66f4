"""``hlo-go calibrate``: measure this host's kernels, train a kernel cost model on them,
and write a cluster file that prices kernels with it.

hlo-go calibrate [NAME[:VARIANTS] ...] [--out DIR] [--variants N] [--budget-s S]

hlo-go calibrate                                   the default graphs (a few hours)
hlo-go calibrate rnnlm_l2_scan:4 gnmt_l2_scan:4 --heldout gnmt --steps 500
hlo-go simulate gpt2_l2 --cluster ~/.cache/hlo-go/calibration/host-cpu-1.json

Three steps, each logged:

1. **measure** fusion variants of corpus training steps on pinned cores, per-kernel
   times from XLA's own trace events (:mod:`hlo_go.calibration.kernel_dataset`; stored
   under ``DIR/kernels``, resumable: a second run measures only what is missing);
2. **train** the learned kernel cost model on the training families and judge it on
   the held-out ones (:func:`hlo_go.calibration.train_kernel_model.fit`), written to
   ``DIR/host-cpu.msgpack`` (kept as it is when this run measured nothing new and it was
   trained on this folder with the same ``--heldout``, ``--steps`` and ``--seed``;
   ``--retrain`` trains it again);
3. **write** ``DIR/host-cpu-N.json``: the ``host-cpu-N`` preset with that model pricing
   its kernels, for ``--cluster`` of every other command, and ``DIR/report.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.cli._common import EXIT_FAILED, EXIT_OK, UsageError, bounded

_log = logging.getLogger("hlo_go.cli.calibrate")

DEFAULT_OUT = Path("~/.cache/hlo-go/calibration")
MODEL_FILE = "host-cpu.msgpack"


def _counts(items: list[str], variants: int) -> dict[str, int]:
    """Graph name -> variants, from ``NAME`` or ``NAME:VARIANTS`` (default graphs: the
    kernel dataset's training and held-out graphs, alternating)."""
    from hlo_go import corpus
    from hlo_go.calibration.kernel_dataset import default_counts

    if not items:
        return default_counts(variants, heldout_variants=variants)
    known = set(corpus.names())
    counts: dict[str, int] = {}
    for item in items:
        name, _, count = item.partition(":")
        if name not in known:
            raise UsageError(
                f"{name!r}: calibrate measures corpus training steps (it runs their JAX "
                "functions); see hlo-go corpus list"
            )
        if count and not (count.isdigit() and int(count) >= 1):
            raise UsageError(f"{item!r}: the count after ':' must be a positive number")
        counts[name] = int(count) if count else variants
    return counts


def _report_table(meta: dict[str, Any]) -> Table:
    table = Table(title="Kernel cost model: learned vs the analytic roofline")
    for column in ("graphs", "model", "kernel error", "step error", "variant Kendall τ"):
        table.add_column(column, justify="left" if column in ("graphs", "model") else "right")

    def cell(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for label, report in (("training", meta["in_sample"]), ("held out", meta["heldout"])):
        if not report:
            continue
        for method in ("learned", "analytic"):
            r = report[method]
            table.add_row(
                label,
                method,
                cell(r["kernel_median_abs_error"], ".1%"),
                cell(r["step_median_abs_error"], ".1%"),
                cell(r["variant_kendall_tau_median"], ".2f"),
            )
    return table


def _reusable_model(
    path: Path, data: Path, args: argparse.Namespace, results: list[dict[str, Any]]
) -> Any:
    """The model at ``path`` when this run measured nothing new and it was trained on
    ``data`` with the same held-out families, steps and seed (training again would give
    it back), else None."""
    from hlo_go.sim.learned import KernelModelError, read_kernel_model

    if any(r.get("measured") for r in results) or not path.is_file():
        return None
    try:
        model = read_kernel_model(path)
    except KernelModelError:
        return None
    meta = model.meta or {}
    same = (
        meta.get("dataset") == str(data)
        and meta.get("heldout_families") == sorted(args.heldout)
        and meta.get("steps") == args.steps
        and meta.get("seed") == args.seed
    )
    return model if same else None


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    """Runs ``calibrate``; 0, or 1 when a graph failed to measure or nothing trained."""
    from hlo_go.calibration.kernel_dataset import generate
    from hlo_go.calibration.train_kernel_model import FitError, fit
    from hlo_go.sim import host_cpu
    from hlo_go.sim.learned import save_kernel_model
    from hlo_go.sim.loading import cluster_to_dict

    counts = _counts(args.inputs, args.variants)
    out = args.out.expanduser()
    data = out / "kernels"
    _log.info("measuring %d graphs into %s", len(counts), data)
    results = generate(
        list(counts),
        data,
        variants=counts,
        jobs=args.jobs,
        repeats=args.repeats,
        seed=args.seed,
        budget_s=args.budget_s,
    )
    failed = [r for r in results if "error" in r or r.get("failed")]
    for r in failed:
        console.print(f"[red]{r['graph']}: {r.get('error') or r.get('failed')}[/red]")
    model = (
        None if args.retrain or failed else _reusable_model(out / MODEL_FILE, data, args, results)
    )
    if model is not None:
        _log.info("nothing new measured: keeping %s (--retrain trains it again)", out / MODEL_FILE)
        model_path = out / MODEL_FILE
    else:
        _log.info("training on %s (held out: %s)", data, ", ".join(args.heldout) or "none")
        try:
            model = fit(data, args.heldout, steps=args.steps, seed=args.seed)
        except FitError as error:
            console.print(f"[red]error:[/red] {error}")
            return EXIT_FAILED
        model_path = save_kernel_model(out / MODEL_FILE, model)
    cluster = host_cpu(args.cores, kernel_model=str(model_path.resolve()))
    cluster_path = out / f"{cluster.name}.json"
    cluster_path.write_text(json.dumps(cluster_to_dict(cluster), indent=1))
    report = {
        "model": str(model_path),
        "cluster": str(cluster_path),
        "measured": results,
        "meta": model.meta,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    console.print(_report_table(model.meta))
    console.print(
        f"model {model_path}; cluster {cluster_path} (use it as --cluster {cluster_path})",
        highlight=False,
    )
    return EXIT_FAILED if failed else EXIT_OK


def add_command(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Adds ``calibrate``."""
    from hlo_go.calibration.train_kernel_model import DEFAULT_STEPS, HELDOUT_FAMILIES

    p = subparsers.add_parser(
        "calibrate",
        parents=parents,
        help="measure this host's kernels, train a kernel cost model, write a cluster file",
    )
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="NAME[:VARIANTS]",
        help="corpus training steps to measure, with their number of variants (default: "
        "the kernel dataset's training and held-out graphs)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder of the dataset, the model, the cluster file and the report "
        f"(default {DEFAULT_OUT})",
    )
    p.add_argument(
        "--variants", type=bounded(int, low=1), default=8, help="variants per graph (default 8)"
    )
    p.add_argument(
        "--repeats",
        type=bounded(int, low=1),
        default=3,
        help="profiled runs per variant (default 3)",
    )
    p.add_argument(
        "--jobs", type=bounded(int, low=1), default=1, help="graphs measured at once (default 1)"
    )
    p.add_argument(
        "--budget-s",
        type=bounded(float, low=0.0),
        default=None,
        help="start no new variant after this many seconds (default: no limit)",
    )
    p.add_argument(
        "--heldout",
        nargs="*",
        default=list(HELDOUT_FAMILIES),
        metavar="FAMILY",
        help=f"families left out of training, to judge the model on "
        f"(default {' '.join(HELDOUT_FAMILIES)}; none: give the flag alone)",
    )
    p.add_argument(
        "--steps",
        type=bounded(int, low=1),
        default=DEFAULT_STEPS,
        help=f"training steps (default {DEFAULT_STEPS:,}, as the shipped model's; about half "
        "an hour on one core)",
    )
    p.add_argument(
        "--cores",
        type=bounded(int, low=1, high=8),
        default=1,
        help="cores of the host-cpu-N cluster file (default 1)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random variants and training")
    p.add_argument(
        "--retrain",
        action="store_true",
        help="train the model again even when this run measured nothing new",
    )
    p.set_defaults(func=cmd_calibrate)
