"""The prepared GPU check (issue 44): lowering, the decorator and a calibration of ``h100x8``
on a GPU backend, written to ``benchmarks/results/gpu.json``.

Run by ``benchmarks/device/gpu_check.sh`` (which installs missing wheels first). Three parts,
each on the backend chosen (``cuda`` when JAX has a GPU; ``cpu`` with ``--dry-run`` or
without one), each recording its own failure rather than stopping the run:

1. **lowering**: corpus training steps through :func:`hlo_go.xla.program` on the backend,
   their fusion decisions (``priority-fusion``; ``searched`` on the GPU) lowered, checked
   against XLA's default compile of the same program (``jax.jit``) and timed against it
   (:func:`hlo_go.xla.measure_many`); ``searched`` vs XLA's default as a geomean.
2. **decorator**: ``@hlo_go.jit`` on training steps, outputs compared with ``jax.jit``'s.
3. **calibration**: per-kernel times of XLA's compile of corpus steps
   (:func:`hlo_go.xla.profile_lowered`), the ``h100x8`` device fitted to them
   (:func:`hlo_go.sim.calibrate`), and the predicted vs measured step error per graph.

A dry run (``--dry-run``, or no GPU) writes ``"gpu_run": false`` with the reason, and its
CPU figures under ``"cpu_dry_run"``, never as GPU results; it runs one graph per part so
that it fits on a small CPU host.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results" / "gpu.json"
NO_GPU_REASON = "no GPU lent to this task"

# Six families of the corpus, smallest first (the lowering part's graphs on a GPU).
LOWERING_GRAPHS = (
    "rnnlm_l2_scan",
    "gnmt_l2_scan",
    "resnet_26",
    "transformer_xl_l2",
    "bert_l2",
    "gpt2_l2",
)
DECORATOR_STEPS = ("mlp", "rnnlm_l2_scan", "resnet_26")
PROFILE_GRAPHS = ("rnnlm_l2_scan", "resnet_26", "bert_l2", "gpt2_l2")
DRY_RUN = {"lowering": ("rnnlm_l2_scan",), "decorator": ("mlp",), "profile": ("rnnlm_l2_scan",)}


def gpu_platform() -> str | None:
    """``"cuda"`` (or ``"rocm"``) when JAX has a GPU, else None."""
    import jax

    try:
        devices = jax.devices("gpu")
    except RuntimeError:
        return None
    return devices[0].platform if devices else None


def corpus_case(name: str, platform: str) -> tuple[Any, tuple[Any, ...]]:
    """A corpus training step and random arguments placed on ``platform``'s device."""
    import jax

    from hlo_corpus import get_workload
    from hlo_go.xla.inputs import random_arguments

    step, abstract = get_workload(name).make()
    args = random_arguments(tuple(abstract), seed=0, scale=0.1, positive=True)
    return step, tuple(jax.device_put(args, jax.devices(platform)[0]))


def lowering(names: tuple[str, ...], platform: str, *, repeats: int) -> dict[str, Any]:
    """Part 1: each graph's variants, correct or not, and their speedups."""
    from hlo_go import xla

    methods = ("priority-fusion", "searched") if platform != "cpu" else ("priority-fusion",)
    cluster = "h100x8" if platform != "cpu" else None
    graphs: dict[str, Any] = {}
    for name in names:
        began = time.perf_counter()
        try:
            step, args = corpus_case(name, platform)
            prog = xla.program(step, args, platform=platform)
            variants = {m: xla.Variant(fusion=m) for m in methods}
            results = xla.measure_many(
                prog, variants, repeats=repeats, warmup=1, cluster=cluster, budget=200
            )
            graphs[name] = {
                m: {"correct": r.correct, "speedup": r.speedup, "message": r.message[:300]}
                for m, r in results.items()
            }
        except Exception as error:  # one graph's failure is its row
            graphs[name] = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
        graphs[name]["seconds"] = round(time.perf_counter() - began, 1)
        print(f"lowering {name}: {graphs[name]}", flush=True)
    correct = [v for g in graphs.values() for k, v in g.items() if isinstance(v, dict)]
    searched = [
        g["searched"]["speedup"]
        for g in graphs.values()
        if isinstance(g.get("searched"), dict) and g["searched"]["speedup"]
    ]
    return {
        "graphs": graphs,
        "every_variant_correct": bool(correct) and all(v["correct"] for v in correct),
        "searched_vs_xla_default_geomean": (
            math.exp(statistics.fmean(math.log(s) for s in searched)) if searched else None
        ),
    }


def decorator(names: tuple[str, ...], platform: str) -> dict[str, Any]:
    """Part 2: ``@hlo_go.jit`` on training steps, against ``jax.jit`` on the same backend."""
    import jax

    import hlo_go
    from benchmarks.bench_jit import mlp_args, mlp_step
    from hlo_go.xla import outputs_match

    out: dict[str, Any] = {}
    for name in names:
        try:
            if name == "mlp":
                fn = mlp_step
                args = tuple(jax.device_put(mlp_args(128), jax.devices(platform)[0]))
            else:
                fn, args = corpus_case(name, platform)
            decorated = hlo_go.jit(fn, options=hlo_go.Options(cache_dir=None, repeats=3))
            got = decorated(*args)
            equal, message = outputs_match(got, jax.jit(fn)(*args))
            record = decorated.records[0]
            out[name] = {
                "outputs_equal_jax_jit": equal,
                "mismatch": message,
                "kept": record.kept,
                "speedup": record.speedup,
                "reason": record.reason[:300],
                "output_devices": sorted({str(d) for x in jax.tree.leaves(got)
                                          for d in getattr(x, "devices", lambda: [])()}),
            }  # fmt: skip
        except Exception as error:
            out[name] = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
        print(f"decorator {name}: {out[name]}", flush=True)
    return out


def profile(names: tuple[str, ...], platform: str, *, repeats: int) -> dict[str, Any]:
    """Part 3: per-kernel profiles, ``h100x8``'s device fitted to them, step errors."""
    import jax

    from hlo_go.calibration import profiled_graph
    from hlo_go.calibration.validation import predict_step
    from hlo_go.sim import calibrate, get_cluster
    from hlo_go.xla import profile_lowered

    options = {} if platform != "cpu" else None  # XLA:CPU's traceme option comes with it
    profiles, failures = [], {}
    for name in names:
        try:
            step, args = corpus_case(name, platform)
            lowered = jax.jit(step).lower(*args)
            raw = profile_lowered(lowered, args, repeats=repeats, compiler_options=options)
            profiles.append(profiled_graph(raw, name))
        except Exception as error:
            failures[name] = f"{type(error).__name__}: {str(error)[:500]}"
            traceback.print_exc()
    if not profiles:
        return {"error": "no profile", "failures": failures}
    base = get_cluster("h100x8").devices[0]
    fit = calibrate(profiles, base, steps=500)
    steps = {}
    for p in profiles:
        predicted = predict_step(p.graph, fit.device)
        steps[p.name] = {
            "measured_s": p.step_s,
            "predicted_s": predicted,
            "datasheet_predicted_s": predict_step(p.graph, base),
            "error": abs(predicted - p.step_s) / p.step_s,
            "kernels_timed": int(sum(1 for t in p.measured_s if t == t)),
        }
    errors = [s["error"] for s in steps.values()]
    return {
        "preset": "h100x8",
        "kernel_error": fit.kernel_error,
        "launch_s": fit.kernel_launch_s + fit.gap_s,
        "steps": steps,
        "median_step_error": statistics.median(errors),
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="run on CPU, as no GPU is lent")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--parts", default="lowering,decorator,profile")
    options = parser.parse_args(argv)
    found = None if options.dry_run else gpu_platform()
    platform = found or "cpu"
    dry = found is None
    import jax
    import jaxlib

    report: dict[str, Any] = {
        "gpu_run": not dry,
        "platform": platform,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "python": sys.version.split()[0],
        "devices": [str(d) for d in jax.devices(platform)],
    }
    if dry:
        report["reason"] = NO_GPU_REASON if options.dry_run else "JAX found no GPU"
    parts = options.parts.split(",")
    figures: dict[str, Any] = {}
    began = time.perf_counter()
    if "lowering" in parts:
        names = DRY_RUN["lowering"] if dry else LOWERING_GRAPHS
        figures["lowering"] = lowering(names, platform, repeats=1 if dry else 5)
    if "decorator" in parts:
        figures["decorator"] = decorator(DRY_RUN["decorator"] if dry else DECORATOR_STEPS, platform)
    if "profile" in parts:
        names = DRY_RUN["profile"] if dry else PROFILE_GRAPHS
        figures["calibration"] = profile(names, platform, repeats=2 if dry else 5)
    figures["seconds"] = round(time.perf_counter() - began, 1)
    report["cpu_dry_run" if dry else "gpu"] = figures
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"wrote {options.out}", flush=True)
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
