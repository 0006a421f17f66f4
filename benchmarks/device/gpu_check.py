"""The prepared GPU check (issue 44): lowering, the decorator and a calibration of ``h100x8``
on a GPU backend, written to ``benchmarks/results/gpu.json``.

Run by ``benchmarks/device/gpu_check.sh`` (which installs missing wheels first). Four parts,
each on the backend chosen (``cuda`` when JAX has a GPU; ``cpu`` with ``--dry-run`` or
without one):

0. **probe**: what XLA's pipeline does on the backend, kept for the code that follows it
   there: every pass's module for one corpus step (``xla_dump_to``, as a ``.tar.gz``),
   whether the compile hooks of :mod:`hlo_go.xla.hooks` fire, and the profiler's planes
   and a sample of their events.
1. **lowering**: corpus training steps through :func:`hlo_go.xla.program` on the backend,
   their fusion decisions (``priority-fusion``; ``searched`` for one H100 of ``h100x8``)
   lowered, checked against XLA's default compile of the same program (``jax.jit``) and
   timed against it (:func:`hlo_go.xla.measure_many`); ``searched`` vs XLA's default as a
   geomean.
2. **decorator**: ``@hlo_go.jit`` on training steps, outputs compared with ``jax.jit``'s.
3. **calibration**: per-kernel times of XLA's compile of corpus steps
   (:func:`hlo_go.xla.profile_lowered`), the ``h100x8`` device fitted to them
   (:func:`hlo_go.sim.calibrate`), and the predicted vs measured step error per graph.

Each item (a part on one graph) runs in a process of its own with a time limit, so that an
abort inside XLA, or a hang, is that item's recorded failure and the others still run; the
items go round the parts in turn, so that every part has its first graph before any has its
second, and the run stops starting items at its deadline (``--deadline-s``).

A dry run (``--dry-run``, or no GPU) writes ``"gpu_run": false`` with the reason, and its
CPU figures under ``"cpu_dry_run"``, never as GPU results; it runs one graph per part so
that it fits on a small CPU host.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
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
PROBE_GRAPH = "rnnlm_l2_scan"
GPU_ITEMS = {
    "probe": (PROBE_GRAPH,),
    "lowering": LOWERING_GRAPHS,
    "decorator": DECORATOR_STEPS,
    "profile": PROFILE_GRAPHS,
}
DRY_RUN_ITEMS = {
    "probe": (PROBE_GRAPH,),
    "lowering": ("rnnlm_l2_scan",),
    "decorator": ("mlp",),
    "profile": ("rnnlm_l2_scan",),
}
# Parts run only when asked for (--parts / --items): the lowering probe, and a kernel
# dataset of the GPU for the learned cost model (hlo_go.calibration.kernel_dataset).
KERNEL_GRAPHS = (
    "gpt2_l2",
    "rnnlm_l2_scan",
    "bert_l2",
    "gnmt_l2_scan",
    "transformer_xl_l2",
    "resnet_26",
)
KERNEL_VARIANTS = 6
OPTIONAL_ITEMS = {"kernels": KERNEL_GRAPHS}
PARTS = (*GPU_ITEMS, "lowering_probe", *OPTIONAL_ITEMS)
# Seconds one item may take (its process is killed after).
ITEM_LIMIT_S = {
    "probe": 150,
    "lowering": 150,
    "decorator": 120,
    "profile": 120,
    "lowering_probe": 120,
    "kernels": 75,
}
# Where the probe leaves its files ($OUT on the device machine).
PROBE_DIR = Path(os.environ.get("OUT") or tempfile.gettempdir()) / "gpu_probe"
# Where the kernels part leaves its dataset ($OUT on the device machine).
KERNELS_DIR = Path(os.environ.get("OUT") or tempfile.gettempdir()) / "gpu_kernels"
# The probe's dump of XLA's passes is kept only up to this size (bytes, compressed).
DUMP_LIMIT_BYTES = 15 * 2**20
SEARCH_BUDGET = 200


def gpu_platform() -> str | None:
    """``"cuda"`` (or ``"rocm"``) when JAX has a GPU, else None."""
    import jax

    try:
        devices = jax.devices("gpu")
    except RuntimeError:
        return None
    return devices[0].platform if devices else None


def plan(items: dict[str, tuple[str, ...]], parts: tuple[str, ...]) -> list[tuple[str, str]]:
    """(part, graph) items, round the parts in turn: every part's first graph, then every
    part's second, and so on."""
    order: list[tuple[str, str]] = []
    depth = max((len(items.get(p, ())) for p in parts), default=0)
    for k in range(depth):
        order.extend((p, items[p][k]) for p in parts if k < len(items.get(p, ())))
    return order


def corpus_case(name: str, platform: str) -> tuple[Any, tuple[Any, ...]]:
    """A corpus training step and random arguments placed on ``platform``'s device."""
    import jax

    from hlo_corpus import get_workload
    from hlo_go.xla.inputs import random_arguments

    if name == "mlp":
        return mlp_step, tuple(jax.device_put(mlp_args(128), jax.devices(platform)[0]))
    step, abstract = get_workload(name).make()
    args = random_arguments(tuple(abstract), seed=0, scale=0.1, positive=True)
    return step, tuple(jax.device_put(args, jax.devices(platform)[0]))


def one_gpu_cluster() -> Any:
    """One device of ``h100x8`` (the lowering compiles for one GPU)."""
    from hlo_go.sim import Cluster, get_cluster

    base = get_cluster("h100x8")
    return Cluster("h100x1", base.devices[:1], (), f"one device of h100x8 ({base.devices[0].name})")


# --- the items, each run in a process of its own -------------------------------------------


def probe_item(name: str, platform: str) -> dict[str, Any]:
    """Part 0: XLA's passes on ``platform`` (dumped), its hooks, and its profiler's events.

    The process was started with ``XLA_FLAGS`` asking for a dump of every pass
    (:func:`run_item`); this compiles ``name`` once plainly, once under the hooks, and once
    profiled, then packs the dump.
    """
    import collections

    import jax
    import jax.extend
    from jax.profiler import ProfileData

    from hlo_go.xla._jaxlib import module_from_proto, xla_module_to_text

    PROBE_DIR.mkdir(parents=True, exist_ok=True)
    step, args = corpus_case(name, platform)
    lowered = jax.jit(step).lower(*args)
    out: dict[str, Any] = {}
    compiled = lowered.compile()
    fused_text = compiled.as_text()
    (PROBE_DIR / "xla_default_optimized.hlo.txt").write_text(fused_text)
    out["default_fusion_kinds"] = dict(
        collections.Counter(
            part.split("kind=")[1].split(",")[0].split(" ")[0]
            for part in fused_text.splitlines()
            if " fusion(" in part and "kind=" in part
        )
    )
    out["default_custom_calls"] = dict(
        collections.Counter(
            line.split('custom_call_target="')[1].split('"')[0]
            for line in fused_text.splitlines()
            if 'custom_call_target="' in line
        )
    )
    # The hooks: do they fire on this platform, at which stages, and with what module?
    fired: dict[str, list[str]] = {"pre_scheduler": [], "post_scheduler": []}
    for stage, pipeline_stage in (
        ("pre_scheduler", jax.extend.xla.PipelineStage.PRE_SCHEDULER),
        ("post_scheduler", jax.extend.xla.PipelineStage.POST_SCHEDULER),
    ):

        def keep(proto: bytes, stage: str = stage) -> None:
            module = module_from_proto(proto)
            fired[stage].append(module.name)
            if not (PROBE_DIR / f"hook_{stage}.hlo.txt").exists():
                (PROBE_DIR / f"hook_{stage}.hlo.txt").write_text(xla_module_to_text(module))

        try:
            jax.extend.xla.register_hlo_module_transformation(
                keep, name=f"probe_{stage}", stage=pipeline_stage, platforms=platform
            )
        except Exception as error:
            out[f"hook_{stage}_error"] = f"{type(error).__name__}: {error}"[:500]
    try:
        lowered.compile(compiler_options={"xla_debug_buffer_assignment_show_max": 12345})
    except Exception as error:
        out["hooked_compile_error"] = f"{type(error).__name__}: {error}"[:1000]
    out["hooks_fired"] = fired
    # The profiler's view of a run: planes, lines, events carrying hlo_op.
    with tempfile.TemporaryDirectory() as logdir:
        jax.block_until_ready(compiled(*args))
        with jax.profiler.trace(logdir):
            for _ in range(2):
                jax.block_until_ready(compiled(*args))
        files = list(Path(logdir).rglob("*.xplane.pb"))
        planes = []
        for plane in ProfileData.from_file(str(files[0])).planes:
            lines = []
            for line in plane.lines:
                events = list(line.events)
                with_op = [e for e in events if "hlo_op" in dict(e.stats)]
                lines.append(
                    {
                        "name": line.name,
                        "events": len(events),
                        "events_with_hlo_op": len(with_op),
                        "sample": [
                            {
                                "name": e.name,
                                "duration_ns": e.duration_ns,
                                "stats": {k: str(v)[:120] for k, v in dict(e.stats).items()},
                            }
                            for e in (with_op or events)[:4]
                        ],
                    }
                )
            planes.append({"name": plane.name, "lines": lines})
        out["profile_planes"] = planes
    return out


def pack_dump(dump_dir: Path) -> dict[str, Any]:
    """The probe's ``xla_dump_to`` folder packed into one ``.tar.gz`` beside its files."""
    files = sorted(p for p in dump_dir.rglob("*") if p.is_file())
    (PROBE_DIR / "xla_dump_files.txt").write_text("\n".join(p.name for p in files) + "\n")
    archive = PROBE_DIR / "xla_dump.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=path.name)
    size = archive.stat().st_size
    if size > DUMP_LIMIT_BYTES:
        archive.unlink()
    return {"files": len(files), "archive_bytes": size, "kept": size <= DUMP_LIMIT_BYTES}


def lowering_probe_item(name: str, platform: str) -> dict[str, Any]:
    """Why a lowering fails on ``platform``: the module handed to XLA, as printed here and
    as XLA reads it back, then the lowering's compile (its passes dumped, :func:`run_item`)."""
    from hlo_go import methods, xla
    from hlo_go.xla._jaxlib import xla_module_to_text, xla_parse

    PROBE_DIR.mkdir(parents=True, exist_ok=True)
    folder = PROBE_DIR / f"lowering_{name}"
    folder.mkdir(exist_ok=True)
    step, args = corpus_case(name, platform)
    prog = xla.program(step, args, platform=platform)
    (folder / "prefusion.hlo.txt").write_text(prog.prefusion.to_text())
    spec = {"priority-fusion": ("priority-fusion", None)}
    variant = methods.variants(prog.graph, spec, cluster=one_gpu_cluster(), program=prog)
    module, _ = prog.fused_module(variant["priority-fusion"].fusion)
    text = module.to_text()
    (folder / "handed.hlo.txt").write_text(text)
    (folder / "handed_read_by_xla.hlo.txt").write_text(xla_module_to_text(xla_parse(text)))
    out: dict[str, Any] = {"module": prog.name}
    handed = xla_parse(text).as_serialized_hlo_module_proto()
    out["handed_layoutless"] = layoutless_shapes(handed)[:20]
    _save(folder / "probe.json", out)
    out["round_trips"] = round_trips(prog, folder, out)
    _save(folder / "probe.json", out)
    try:
        executable = prog.lower(fusion=variant["priority-fusion"].fusion)
        out["lowered"] = True
        out["kernels"] = executable.compiled.as_text().count(" fusion(")
    except Exception as error:
        out["lowered"] = False
        out["error"] = f"{type(error).__name__}: {error}"[:3000]
    _save(folder / "probe.json", out)
    return out


def _save(path: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON at ``path`` (written as it grows: an abort later keeps it)."""
    path.write_text(json.dumps(data, default=str, indent=1))


def round_trips(prog: Any, folder: Path, out: dict[str, Any]) -> dict[str, str]:
    """Which hand-back of XLA's own module (compiled with its fusion passes off,
    :func:`hlo_go.xla.hooks.wrapped_compiler_options`) at the program's hook stage XLA
    accepts: its proto
    unchanged (``raw``), read and written by jaxlib (``jaxlib``), through XLA's text
    (``xla_text``), and through our parser and printer (``ours_text``); "ok" or XLA's error.
    The instruction shapes without a layout in what XLA hands the hook are kept too."""
    import jax.extend

    from hlo_go.hlo import parse_hlo
    from hlo_go.xla._jaxlib import hook_platform, module_from_proto, xla_module_to_text, xla_parse
    from hlo_go.xla.hooks import uncached_options, wrapped_compiler_options

    def raw(proto: bytes) -> bytes:
        return proto

    def via_jaxlib(proto: bytes) -> bytes:
        return module_from_proto(proto).as_serialized_hlo_module_proto()

    def via_xla_text(proto: bytes) -> bytes:
        return xla_parse(
            xla_module_to_text(module_from_proto(proto))
        ).as_serialized_hlo_module_proto()

    def via_ours(proto: bytes) -> bytes:
        text = parse_hlo(xla_module_to_text(module_from_proto(proto))).to_text()
        return xla_parse(text).as_serialized_hlo_module_proto()

    results: dict[str, str] = {}
    out["round_trips"] = results
    for label, hand_back in (("raw", raw), ("jaxlib", via_jaxlib), ("xla_text", via_xla_text),
                             ("ours_text", via_ours)):  # fmt: skip
        name = f"probe_round_trip_{label}"

        def hook(proto: bytes, hand_back: Any = hand_back, label: str = label) -> bytes | None:
            if module_from_proto(proto).name != prog.name:
                return None
            if label == "raw":
                out["hook_layoutless"] = layoutless_shapes(proto)[:20]
                (folder / "at_hook.hlo.txt").write_text(
                    xla_module_to_text(module_from_proto(proto))
                )
            back = hand_back(proto)
            out[f"{label}_layoutless"] = layoutless_shapes(back)[:20]
            return back

        stage = (
            jax.extend.xla.PipelineStage.POST_SCHEDULER
            if prog.stage == "post_scheduler"
            else jax.extend.xla.PipelineStage.PRE_SCHEDULER
        )
        platform = hook_platform(prog.platform)
        jax.extend.xla.register_hlo_module_transformation(
            hook, name=name, stage=stage, platforms=platform
        )
        try:
            prog._compile(uncached_options(wrapped_compiler_options(prog.platform)))
            results[label] = "ok"
        except Exception as error:
            results[label] = f"{type(error).__name__}: {error}"[:800]
        finally:
            jax.extend.xla.clear_hlo_module_transformation(
                name=name, stage=stage, platforms=platform
            )
        _save(folder / "probe.json", out)
    return results


def layoutless_shapes(proto: bytes) -> list[str]:
    """``computation/instruction (opcode) index`` of every array shape in a serialized
    HloModuleProto with no layout (read from protobuf's wire format: HloModuleProto.
    computations = 3, HloComputationProto.instructions = 2, HloInstructionProto.name,
    opcode, shape = 1, 2, 3; ShapeProto.element_type, tuple_shapes, layout = 2, 4, 5)."""
    found: list[str] = []
    for field, _, computation in _wire_fields(proto):
        if field != 3:
            continue
        parts = _wire_fields(computation)
        computation_name = next((v.decode() for f, w, v in parts if f == 1 and w == 2), "?")
        for f, w, instruction in parts:
            if f != 2 or w != 2:
                continue
            inner = _wire_fields(instruction)
            name = next((v.decode() for a, b, v in inner if a == 1 and b == 2), "?")
            opcode = next((v.decode() for a, b, v in inner if a == 2 and b == 2), "?")
            shape = next((v for a, b, v in inner if a == 3 and b == 2), None)
            if shape is not None:
                found += [f"{computation_name}/{name} ({opcode}) {p}" for p in _no_layout(shape)]
    return found


def _no_layout(shape: bytes, path: str = "") -> list[str]:
    parts = _wire_fields(shape)
    element_type = next((v for f, w, v in parts if f == 2 and w == 0), 0)
    if element_type == 13:  # TUPLE
        tuple_shapes = [v for f, w, v in parts if f == 4 and w == 2]
        return [p for j, s in enumerate(tuple_shapes) for p in _no_layout(s, f"{path}{{{j}}}")]
    if element_type in (14, 17):  # OPAQUE_TYPE, TOKEN
        return []
    return [] if any(f == 5 for f, _, _ in parts) else [path or "."]


def _wire_fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message's top-level fields."""
    out: list[tuple[int, int, Any]] = []
    i = 0

    def varint(i: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            byte = buf[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, i

    while i < len(buf):
        key, i = varint(i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(i)
        elif wire == 2:
            length, i = varint(i)
            value, i = buf[i : i + length], i + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i : i + size], i + size
        else:
            raise ValueError(f"protobuf wire type {wire} at byte {i}")
        out.append((field, wire, value))
    return out


def pack_folder(folder: Path, dump_dir: Path) -> dict[str, Any]:
    """A lowering probe's files and its XLA dump packed into ``folder``.tar.gz (the folder
    removed), the dump's files after the fusion passes only when the whole is too large."""
    archive = folder.with_suffix(".tar.gz")
    dumped = sorted(p for p in dump_dir.rglob("*") if p.is_file()) if dump_dir.exists() else []
    for keep_all in (True, False):
        with tarfile.open(archive, "w:gz") as tar:
            for path in sorted(folder.glob("*")):
                tar.add(path, arcname=path.name)
            for path in dumped:
                late = any(
                    k in path.name for k in ("xla-transforms", "scheduling", "fusion-wrapper")
                )
                if keep_all or late:
                    tar.add(path, arcname=f"xla_dump/{path.name}")
        if archive.stat().st_size <= DUMP_LIMIT_BYTES:
            break
    for path in folder.glob("*"):
        path.unlink()
    folder.rmdir()
    return {"archive": archive.name, "bytes": archive.stat().st_size, "dump_files": len(dumped)}


def lowering_item(name: str, platform: str) -> dict[str, Any]:
    """Part 1: one graph's variants, correct or not, and their speedups."""
    from hlo_go import methods, xla

    dry = platform == "cpu"
    began = time.perf_counter()
    step, args = corpus_case(name, platform)
    prog = xla.program(step, args, platform=platform)
    specs = {"priority-fusion": ("priority-fusion", None)}
    if not dry:
        specs["searched"] = (methods.SEARCHED, None)
    cluster = methods.HOST_CLUSTER if dry else one_gpu_cluster()
    variants = methods.variants(
        prog.graph, specs, cluster=cluster, budget=SEARCH_BUDGET, program=prog
    )
    decided_s = time.perf_counter() - began
    results = xla.measure_many(prog, variants, repeats=2 if dry else 10, warmup=1)
    out: dict[str, Any] = {
        "nodes": prog.graph.num_nodes,
        "prefusion_instructions": len(prog.prefusion.entry.instructions),
        "decide_s": round(decided_s, 1),
    }
    for method, r in results.items():
        out[method] = {
            "correct": r.correct,
            "speedup": r.speedup,
            "time_s": r.time_s,
            "xla_default_s": r.baseline_time_s,
            "spread_s": r.spread,
            "xla_default_spread_s": r.baseline_spread,
            "kernels": r.kernels,
            "clock": r.clock,
            "message": r.message[:300],
        }
    return out


def mlp_step(params: Any, x: Any, y: Any) -> Any:
    """One SGD step of a two-layer MLP on a squared error (the decorator's small case)."""
    import jax
    import jax.numpy as jnp

    def loss(p: Any) -> Any:
        hidden = jax.nn.gelu(x @ p["w1"] + p["b1"])
        return jnp.mean((hidden @ p["w2"] + p["b2"] - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda w, g: w - 0.01 * g, params, grads), value


def mlp_args(batch: int, width: int = 1024, features: int = 512) -> tuple[Any, Any, Any]:
    """Random parameters and a batch for :func:`mlp_step` (NumPy, seeded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    params = {
        "w1": rng.normal(0, 0.02, (features, width)).astype(np.float32),
        "b1": np.zeros(width, np.float32),
        "w2": rng.normal(0, 0.02, (width, features)).astype(np.float32),
        "b2": np.zeros(features, np.float32),
    }
    x = rng.normal(0, 1, (batch, features)).astype(np.float32)
    return params, x, rng.normal(0, 1, (batch, features)).astype(np.float32)


def decorator_item(name: str, platform: str) -> dict[str, Any]:
    """Part 2: ``@hlo_go.jit`` on one training step, against ``jax.jit`` on the backend."""
    import jax

    import hlo_go
    from hlo_go.xla import outputs_match

    fn, args = corpus_case(name, platform)
    decorated = hlo_go.jit(fn, options=hlo_go.Options(cache_dir=None, repeats=3))
    got = decorated(*args)
    equal, message = outputs_match(got, jax.jit(fn)(*args))
    record = decorated.records[0]
    return {
        "outputs_equal_jax_jit": equal,
        "mismatch": message,
        "kept": record.kept,
        "speedup": record.speedup,
        "reason": record.reason[:300],
        "output_devices": sorted(
            {str(d) for x in jax.tree.leaves(got) for d in getattr(x, "devices", list)()}
        ),
    }


def profile_item(name: str, platform: str, pickle_path: Path) -> dict[str, Any]:
    """Part 3, one graph: XLA's default compile profiled per kernel (pickled for the fit)."""
    import jax

    from hlo_go.xla import profile_lowered

    step, args = corpus_case(name, platform)
    lowered = jax.jit(step).lower(*args)
    raw = profile_lowered(lowered, args, repeats=2 if platform == "cpu" else 5, platform=platform)
    pickle_path.write_bytes(pickle.dumps(raw))
    kernel_sum = sum(raw.instruction_s.values())
    return {
        "step_s": raw.step_s,
        "instructions_timed": len(raw.instruction_s),
        "kernel_sum_s": kernel_sum,
        "kernel_sum_over_step": kernel_sum / raw.step_s if raw.step_s else None,
        "runs": raw.runs,
    }


def pack_kernels(root: Path) -> dict[str, Any]:
    """The kernel dataset under ``root`` packed into one ``<root>.tar.gz`` beside it (the
    device machine hands back at most 8 files), packed again after every graph so that a
    run stopped later keeps what was measured."""
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
    archive = root.with_suffix(".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=str(path.relative_to(root.parent)))
    return {"archive": archive.name, "files": len(files), "bytes": archive.stat().st_size}


def kernels_item(name: str, platform: str) -> dict[str, Any]:
    """Optional part: fusion variants of one corpus graph lowered on ``platform``, their
    kernels timed from the trace, stored as a kernel dataset under ``$OUT/gpu_kernels``
    (:func:`hlo_go.calibration.kernel_dataset.measure_graph`) and packed into
    ``$OUT/gpu_kernels.tar.gz`` (:func:`pack_kernels`)."""
    from hlo_go.calibration.kernel_dataset import measure_graph

    dry = platform == "cpu"
    return measure_graph(
        name,
        str(KERNELS_DIR),
        variants=2 if dry else KERNEL_VARIANTS,
        repeats=3,
        interleaved_rounds=2,
        platform=platform,
        deadline_s=time.time() + ITEM_LIMIT_S["kernels"] - 30,
    )


def calibration(profiles: dict[str, Path]) -> dict[str, Any]:
    """Part 3, all graphs: ``h100x8``'s device fitted to the profiles, step errors."""
    from hlo_go.calibration import profiled_graph
    from hlo_go.calibration.validation import predict_step
    from hlo_go.sim import calibrate, get_cluster

    graphs = [
        profiled_graph(pickle.loads(path.read_bytes()), name) for name, path in profiles.items()
    ]
    base = get_cluster("h100x8").devices[0]
    fit = calibrate(graphs, base, steps=500)
    steps = {}
    for p in graphs:
        predicted = predict_step(p.graph, fit.device)
        steps[p.name] = {
            "measured_s": p.step_s,
            "predicted_s": predicted,
            "datasheet_predicted_s": predict_step(p.graph, base),
            "error": abs(predicted - p.step_s) / p.step_s,
            "datasheet_error": abs(predict_step(p.graph, base) - p.step_s) / p.step_s,
            "kernels_timed": int(sum(1 for t in p.measured_s if t == t)),
        }
    return {
        "preset": "h100x8",
        "kernel_error": fit.kernel_error,
        "launch_s": fit.kernel_launch_s + fit.gap_s,
        "steps": steps,
        "median_step_error": statistics.median(s["error"] for s in steps.values()),
        "median_datasheet_step_error": statistics.median(
            s["datasheet_error"] for s in steps.values()
        ),
    }


def child_main(part: str, name: str, platform: str, out_path: Path) -> int:
    """Runs one item in this process and writes its result (JSON) to ``out_path``."""
    if part == "probe":
        result = probe_item(name, platform)
    elif part == "lowering":
        result = lowering_item(name, platform)
    elif part == "lowering_probe":
        result = lowering_probe_item(name, platform)
    elif part == "decorator":
        result = decorator_item(name, platform)
    elif part == "profile":
        result = profile_item(name, platform, out_path.with_suffix(".pkl"))
    elif part == "kernels":
        result = kernels_item(name, platform)
    else:
        raise ValueError(f"unknown part {part!r}; parts: {', '.join(PARTS)}")
    out_path.write_text(json.dumps(result, default=str))
    return 0


# --- the run: items in processes of their own -----------------------------------------------


def run_item(part: str, name: str, platform: str, work: Path, limit_s: float) -> dict[str, Any]:
    """One item in a process of its own, killed after ``limit_s``; its result or failure."""
    out_path = work / f"{part}-{name}.json"
    env = dict(os.environ)
    dump_dir = work / "xla_dump"
    if part in ("probe", "lowering_probe"):
        dump_dir = work / f"xla_dump_{part}_{name}"
        flags = f"--xla_dump_to={dump_dir} --xla_dump_hlo_pass_re=.*"
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    command = [sys.executable, str(Path(__file__).resolve()), "--child", part, name,
               "--platform", platform, "--child-out", str(out_path)]  # fmt: skip
    began = time.perf_counter()
    try:
        done = subprocess.run(
            command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=limit_s
        )
        log, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        log = (expired.stdout or "") + (expired.stderr or "")
        log = log if isinstance(log, str) else log.decode(errors="replace")
        code = None
    seconds = round(time.perf_counter() - began, 1)
    print(f"--- {part} {name}: {seconds} s, exit {code}\n{log[-4000:]}", flush=True)
    if code == 0 and out_path.exists():
        result = json.loads(out_path.read_text())
    elif code is None:
        result = {"error": f"timed out after {limit_s:.0f} s", "log_tail": log[-1500:]}
    else:
        result = {"error": f"process exited with {code}", "fatal": fatal_lines(log),
                  "log_tail": log[-1500:]}  # fmt: skip
    if part == "probe" and dump_dir.exists():
        result["xla_dump"] = pack_dump(dump_dir)
    if part == "lowering_probe":
        result["archive"] = pack_folder(PROBE_DIR / f"lowering_{name}", dump_dir)
    if part == "kernels":
        result["archive"] = pack_kernels(KERNELS_DIR)
    result["seconds"] = seconds
    return result


def fatal_lines(log: str) -> list[str]:
    """XLA's fatal messages (``Check failed: ...``) and Python's last error in a log."""
    found = [
        re.sub(r"^[FE]\d{4} [\d:.]+\s+\d+ [^\]]*\] ", "", line.strip())
        for line in log.splitlines()
        if re.match(r"[FE]\d{4} ", line) or "Check failed" in line
        or re.match(r"\w+(Error|Exception): ", line)
    ]  # fmt: skip
    return list(dict.fromkeys(found))[:5]


def summarize_lowering(graphs: dict[str, Any]) -> dict[str, Any]:
    """The lowering part's figures over its graphs."""
    variants = [
        v for g in graphs.values() for v in g.values() if isinstance(v, dict) and "correct" in v
    ]
    searched = [
        g["searched"]["speedup"]
        for g in graphs.values()
        if isinstance(g.get("searched"), dict) and g["searched"].get("speedup")
    ]
    return {
        "graphs": graphs,
        "variants_lowered": len(variants),
        "every_variant_correct": bool(variants) and all(v["correct"] for v in variants),
        "searched_vs_xla_default_geomean": (
            statistics.geometric_mean(searched) if searched else None
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="run on CPU, as no GPU is lent")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--parts", default=",".join(GPU_ITEMS), help="comma-separated parts")
    parser.add_argument(
        "--graphs", default="", help="comma-separated graphs (default: each part's)"
    )
    parser.add_argument("--deadline-s", type=float, default=float(os.environ.get("GPU_CHECK_DEADLINE_S", 400)),
                        help="start no item after this many seconds")  # fmt: skip
    parser.add_argument(
        "--items",
        default="",
        help="comma-separated PART:GRAPH items to run (default: every part's graphs)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="an earlier gpu.json whose items this run does not run are kept",
    )
    parser.add_argument("--child", nargs=2, metavar=("PART", "GRAPH"), help=argparse.SUPPRESS)
    parser.add_argument("--platform", default="", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        return child_main(*options.child, options.platform, options.child_out)
    parts = tuple(p for p in options.parts.split(",") if p)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; parts: {', '.join(PARTS)}")
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
        "device_kind": jax.devices(platform)[0].device_kind,
    }
    if dry:
        report["reason"] = NO_GPU_REASON if options.dry_run else "JAX found no GPU"
    items = dict(DRY_RUN_ITEMS if dry else GPU_ITEMS)
    items |= {p: g[:1] if dry else g for p, g in OPTIONAL_ITEMS.items()}
    if options.graphs:
        chosen = tuple(options.graphs.split(","))
        items = {p: chosen for p in PARTS}
    key = "cpu_dry_run" if dry else "gpu"
    order = plan(items, parts)
    if options.items:
        order = [tuple(item.split(":", 1)) for item in options.items.split(",")]  # type: ignore[misc]
        bad = [item for item in order if len(item) != 2 or item[0] not in PARTS]
        if bad:
            parser.error(f"--items takes PART:GRAPH items, parts {', '.join(PARTS)}: {bad}")
        parts = tuple(dict.fromkeys(part for part, _ in order))
    previous = earlier_items(options.merge, key) if options.merge else {}
    figures: dict[str, Any] = {p: {} for p in parts}
    profiles: dict[str, Path] = {}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for part, name in order:
            elapsed = time.perf_counter() - began
            if elapsed > options.deadline_s:
                figures[part][name] = {
                    "error": f"not run: the deadline ({options.deadline_s:.0f} s) passed"
                }
                continue
            limit = min(ITEM_LIMIT_S[part], max(30.0, options.deadline_s + 40 - elapsed))
            figures[part][name] = run_item(part, name, platform, work, limit)
            pickled = work / f"{part}-{name}.pkl"
            if part == "profile" and pickled.exists():
                profiles[name] = pickled
            # So far, in case the run is stopped before its end.
            write_report(options.out, {**report, "partial": True, key: figures})
        for part, kept in previous.get("items", {}).items():
            figures[part] = {**kept, **figures.get(part, {})}
        if "lowering" in figures:
            figures["lowering"] = summarize_lowering(figures["lowering"])
        if "profile" in figures:
            runs = figures.pop("profile")
            try:
                if profiles:
                    fit = calibration(profiles)
                else:
                    fit = previous.get("calibration") or {"error": "no profile"}
            except Exception as error:
                traceback.print_exc()
                fit = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
            figures["calibration"] = {**fit, "profiles": runs}
    figures["seconds"] = round(time.perf_counter() - began, 1)
    figures["runs"] = [*previous.get("runs", []), {"items": [f"{p}:{n}" for p, n in order],
                                                   "seconds": figures["seconds"]}]  # fmt: skip
    write_report(options.out, {**report, key: figures})
    print(f"wrote {options.out}", flush=True)
    return 0


def earlier_items(path: Path, key: str) -> dict[str, Any]:
    """An earlier report's items by part, its calibration and its runs (for ``--merge``)."""
    figures = json.loads(path.read_text()).get(key, {})
    calibration_ = dict(figures.get("calibration", {}))
    profiles = calibration_.pop("profiles", {})
    items = {
        "probe": figures.get("probe", {}),
        "lowering": figures.get("lowering", {}).get("graphs", {}),
        "decorator": figures.get("decorator", {}),
        "profile": profiles,
    }
    return {
        "items": {part: found for part, found in items.items() if found},
        "calibration": calibration_ if "steps" in calibration_ else None,
        "runs": figures.get("runs", []),
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    """``report`` as JSON at ``path`` (written whole, then renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(report, indent=1, default=str) + "\n")
    partial.replace(path)


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
