"""Measured rows: GO's decisions lowered through XLA and timed on real devices, checked
numerically against ``jax.jit``.

* ``fusion_schedule`` (this host's CPU, one device): per training step, XLA's default
  compile (the reference) against our lowering of the ``xla-cpu-like`` and
  ``priority-fusion`` baselines, the shipped GO policy zero-shot
  (``hlo_go.load_policy("host-cpu")``) and GO-one (a fresh policy trained with PPO on
  the graph, fusion + scheduling, on the ``host-cpu-1`` preset). Every variant is run
  once and checked against the reference, then timed interleaved with it by CPU time
  (:func:`hlo_go.xla.measure_many`); ``relative`` = variant / reference (below 1:
  faster). ``simulated_relative`` is the simulator's view of the same comparison
  (variant / ``xla-cpu-like`` on ``host-cpu-1``).
* ``placement`` (virtual CPU devices, ``--xla_force_host_platform_device_count`` style,
  in a child process with 8 devices): ``expert``, ``metis`` and GO-one placements on
  ``host-cpu-D`` partitioned, compiled per segment, run and checked against
  ``jax.jit`` on one device (:func:`hlo_go.xla.measure_placed`). The virtual devices
  share this host's cores, so these rows show that placements lower *correctly* and
  what they cost; a speedup needs real devices.
* ``gpu``: the fusion/schedule rows on a GPU when JAX sees one (``--gpu``); otherwise
  recorded as not run.

Run: ``python experiments/measured.py [--quick]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import _common as C

GRAPHS = ("rnnlm_l2_scan", "gpt2_l2")
PLACEMENT_GRAPHS = ("rnnlm_l2_scan",)
QUICK_GRAPHS = ("mlp",)
DEVICES = (2, 4)
QUICK_DEVICES = (2,)
GO_STEPS = 20
QUICK_GO_STEPS = 2
REPEATS = 7
QUICK_REPEATS = 2
FUSION_BASELINES = ("xla-cpu-like", "priority-fusion")


def _source(name: str) -> tuple[Any, Any]:
    """``(function, arguments)`` of a corpus training step or a CI-sized one."""
    quick = C.quick_programs()
    if name in quick:
        return quick[name]
    from hlo_corpus import get_workload

    return get_workload(name).make()


def fusion_schedule_rows(
    name: str, *, steps: int, repeats: int, quick: bool, seed: int, platform: str = "cpu"
) -> list[dict[str, Any]]:
    """Lowers and times the variants of one training step (module docstring)."""
    from hlo_go import baselines as B
    from hlo_go import load_policy
    from hlo_go.decisions import Decisions
    from hlo_go.rl import infer, train_one
    from hlo_go.sim import get_cluster, simulate
    from hlo_go.xla import Variant, measure_many, program

    fn, args = _source(name)
    prog = program(fn, args, platform=platform)
    graph = prog.graph
    cluster = get_cluster("host-cpu-1")
    decided: dict[str, Decisions] = {
        m: B.get(m)(graph, cluster, seed=seed) for m in FUSION_BASELINES
    }
    zero = infer(load_policy("host-cpu"), graph, cluster)
    decided["GO zero-shot"] = zero.decisions
    with tempfile.TemporaryDirectory(prefix="hlo-go-measured-") as work:
        trained = train_one(
            (name, graph), cluster, ["scheduling", "fusion"], steps=steps, out_dir=work,
            config=C.train_config(quick=quick, seed=seed),
        )  # fmt: skip
    decided["GO-one"] = trained.graphs[name].best
    variants = {
        label: Variant(d, None if label in FUSION_BASELINES else d) for label, d in decided.items()
    }
    measured = measure_many(
        prog, variants, repeats=repeats, warmup=1, clock="cpu", seed=seed,
        progress=lambda line: C.log("measured", f"{name}: {line}"),
    )  # fmt: skip
    simulated = {label: simulate(graph, cluster, d).step_time for label, d in decided.items()}
    rows = []
    for label, m in measured.items():
        rows.append(
            {
                "part": f"fusion+schedule ({platform})",
                "graph": name,
                "nodes": graph.num_nodes,
                "variant": label,
                "correct": m.correct,
                "relative": m.relative,
                "simulated_relative": simulated[label] / simulated["xla-cpu-like"],
                "time_ms": m.time_s * 1e3 if m.time_s else None,
                "reference_ms": m.baseline_time_s * 1e3 if m.baseline_time_s else None,
                "kernels": m.kernels,
                "message": (m.message or "")[:200],
            }
        )
    return rows


def placement_rows(
    names: Sequence[str],
    devices: Sequence[int],
    *,
    steps: int,
    repeats: int,
    quick: bool,
    seed: int,
) -> list[dict[str, Any]]:
    """Placements lowered onto virtual CPU devices (run in a process with 8 devices)."""
    import jax
    import numpy as np

    from hlo_go import baselines as B
    from hlo_go.decisions import Decisions
    from hlo_go.graph import build_graph
    from hlo_go.rl import train_one
    from hlo_go.sim import get_cluster, simulate
    from hlo_go.xla import measure_placed
    from hlo_go.xla.hooks import capture_prefusion_lowered
    from hlo_go.xla.inputs import random_arguments

    rows = []
    for name in names:
        fn, args = _source(name)
        abstract = any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(args))
        if abstract:
            args = random_arguments(tuple(args), seed=seed, positive=True)
        module = capture_prefusion_lowered(jax.jit(fn).lower(*args))
        graph = build_graph(module)
        n = graph.num_nodes
        zeros = np.zeros(n, np.float32)
        for d in devices:
            cluster = get_cluster(f"host-cpu-{d}")
            placements = {
                "expert": B.expert_placement(graph, cluster),
                "metis": B.metis_placement(graph, cluster, seed=seed),
            }
            with tempfile.TemporaryDirectory(prefix="hlo-go-measured-") as work:
                trained = train_one(
                    (name, graph), cluster, ["placement"], steps=steps, out_dir=work,
                    config=C.train_config(quick=quick, seed=seed),
                )  # fmt: skip
            placements["GO-one"] = trained.graphs[name].best.placement
            for label, placement in placements.items():
                decisions = Decisions(np.asarray(placement, np.int32), zeros, zeros)
                row: dict[str, Any] = {
                    "part": "placement (virtual CPU devices)",
                    "graph": name,
                    "nodes": n,
                    "devices": d,
                    "variant": label,
                    "devices_used": len(np.unique(placement)),
                    "simulated_ms": simulate(graph, cluster, decisions).step_time * 1e3,
                }
                try:
                    m = measure_placed(
                        module, decisions, jax.devices()[:d], repeats=repeats, warmup=1
                    )
                except Exception as error:  # reported in the row, never hidden
                    rows.append(
                        {
                            **row,
                            "correct": False,
                            "message": f"{type(error).__name__}: {error}"[:300],
                        }
                    )
                    continue
                rows.append(
                    {
                        **row,
                        "correct": m.correct,
                        "relative": m.time_s / m.baseline_time_s
                        if m.correct and m.time_s
                        else None,
                        "time_ms": m.time_s * 1e3 if m.time_s else None,
                        "reference_ms": m.baseline_time_s * 1e3 if m.baseline_time_s else None,
                        "message": (m.message or "")[:200],
                    }
                )
                C.log("measured", f"{name} on {d} devices, {label}: {rows[-1].get('relative')}")
    return rows


def _placement_child(out: Path, names: Sequence[str], devices: Sequence[int], **kw: Any) -> None:
    """Runs :func:`placement_rows` in a fresh interpreter with 8 CPU devices."""
    payload = json.dumps({"names": list(names), "devices": list(devices), **kw})
    code = (
        "import jax, json, sys; jax.config.update('jax_num_cpu_devices', 8); "
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
        "from experiments.measured import placement_rows; "
        f"kw = json.loads({payload!r}); names = kw.pop('names'); devices = kw.pop('devices'); "
        f"rows = placement_rows(names, devices, **kw); "
        f"open({str(out)!r}, 'w').write(json.dumps(rows, default=float))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the experiment; returns the result written to ``measured[.quick].json``."""
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", help="corpus training steps (fusion/schedule rows)")
    p.add_argument("--placement-graphs", nargs="+", help="corpus training steps (placement rows)")
    p.add_argument("--gpu", action="store_true", help="also lower and time on the GPU JAX sees")
    args = p.parse_args(argv)
    began = time.perf_counter()
    steps = QUICK_GO_STEPS if args.quick else GO_STEPS
    repeats = QUICK_REPEATS if args.quick else REPEATS
    graphs = args.graphs or list(QUICK_GRAPHS if args.quick else GRAPHS)
    placement_graphs = args.placement_graphs or list(
        QUICK_GRAPHS if args.quick else PLACEMENT_GRAPHS
    )
    devices = QUICK_DEVICES if args.quick else DEVICES
    rows: list[dict[str, Any]] = []
    for name in graphs:
        C.log("measured", f"fusion+schedule: {name}")
        rows += fusion_schedule_rows(
            name, steps=steps, repeats=repeats, quick=args.quick, seed=args.seed
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "placement.json"
        C.log("measured", f"placement on virtual devices {list(devices)}: {placement_graphs}")
        _placement_child(
            out,
            placement_graphs,
            devices,
            steps=steps,
            repeats=repeats,
            quick=args.quick,
            seed=args.seed,
        )
        rows += json.loads(out.read_text())
    gpu_note = "not requested (--gpu)"
    if args.gpu:
        import jax

        if any(d.platform == "gpu" for d in jax.devices()):
            for name in graphs:
                rows += fusion_schedule_rows(
                    name,
                    steps=steps,
                    repeats=repeats,
                    quick=args.quick,
                    seed=args.seed,
                    platform="gpu",
                )
            gpu_note = str(jax.devices("gpu")[0].device_kind)
        else:
            gpu_note = "no GPU visible to JAX on this machine: not run"
    fusion = [r for r in rows if r["part"].startswith("fusion") and r["variant"].startswith("GO")]
    placed = [r for r in rows if r["part"].startswith("placement")]
    result = {
        "title": "Measured: GO decisions lowered through XLA, checked against jax.jit",
        "setup": {
            "graphs": graphs,
            "placement_graphs": placement_graphs,
            "devices": list(devices),
            "go_one_steps": steps,
            "repeats": repeats,
            "clock": "cpu time, interleaved with the reference",
            "gpu": gpu_note,
            "seed": args.seed,
        },
        "all_correct": all(r["correct"] for r in rows),
        "correct": f"{sum(r['correct'] for r in rows)}/{len(rows)}",
        "go_fusion_relative_geomean": C.geomean(
            [r["relative"] for r in fusion if r.get("relative")]
        ),
        "go_one_fusion_relative_geomean": C.geomean(
            [r["relative"] for r in fusion if r["variant"] == "GO-one" and r.get("relative")]
        ),
        "placements_correct": f"{sum(r['correct'] for r in placed)}/{len(placed)}",
        "gpu": gpu_note,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    C.write_outputs("measured", result, out=args.out, quick=args.quick, argv=argv, began=began)
    return result


if __name__ == "__main__":
    main()
