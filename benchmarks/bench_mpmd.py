"""The MPMD placement runtime on corpus training steps: correctness, overhead, prediction.

For each corpus graph (``"prefusion"`` stage) that fits this host's memory (see below),
in the order of :func:`_graph_names`:

* ``1 device``: every node on device 0, one segment; measured interleaved (A B A B)
  against XLA's default compile of the whole module (``measure_placed``). Target: the
  median ratio placed / reference over graphs within 1.10.
* round-robin, METIS and expert placements (:mod:`hlo_go.baselines`) on 2, 4 and 8
  virtual CPU devices: partitioned, compiled per segment, run, and checked against the
  one-device outputs by :func:`hlo_go.xla.check_placed_outputs`: within the dtype
  tolerances of :func:`hlo_go.xla.outputs_match`, or, for a float32 output outside
  them, no less accurate than one of XLA's own float32 compiles of the module (the
  default one, or the one with fusion off, whose kernel boundaries a placement moves
  to) against the module evaluated in float64 (the float64 arbiter,
  :mod:`hlo_go.xla.arbiter`; each reference evaluated once per graph, when first
  needed). ``within_tolerance`` says which rows passed without the arbiter,
  ``tolerance_excess`` how far the rest are (max error / (atol + rtol |want|), 1 = the
  tolerance); the summary counts the rows the fusion-off compile's error admitted.
  Step time is the median of two runs after the checked one (not interleaved: these
  rows are about correctness and prediction, and the 8 virtual devices share this
  host's 1-2 cores, so no parallel speedup is expected).
* predicted step time: :func:`hlo_go.calibration.runtime.predict_placed` — the
  simulator on ``host-cpu-N-mpmd`` (``host-cpu-N`` with links calibrated for this
  runtime's ``jax.device_put``) with XLA:CPU-like fusion inside segments, plus the
  measured dispatch cost per segment. The runtime overheads are measured first
  (:func:`calibrate_runtime`) and reported.

Inputs are :func:`hlo_go.xla.training_inputs`: positive and fan-in scaled, as a training
step's state is. Under unit-scale normal draws the deep graphs (gpt2_l8,
transformer_xl_l8, inception_v3_base) compute NaN in up to a third of their outputs and
float32 values that XLA's own default and fusion-off compiles get wrong by 100% and more
against float64, so a comparison of two float32 runs decides nothing; 17 placed rows
failed that way at results version 2.

Nearly all the time goes to XLA compiling the segment executables: a segment costs tens
of ms plus a few ms per node, more per node than the whole module's compile (each
segment materializes its outputs, so XLA fuses less). Round-robin makes one segment per
few nodes (2,440 for inception_v3_small on 8 devices, about 10,000 for gnmt_l8_unrolled
on 2), but segments that are the same program up to names share one executable per
device (:func:`hlo_go.xla.compile_placed`), and on the unrolled RNNs and transformers
most of them are: ``executables`` in each row counts the compiles. Within a graph the
placements run cheapest first (expert, METIS, round-robin; 2, 4, 8 devices); a
configuration with more than ``MAX_SEGMENTS`` segments is recorded as skipped. The time
budget (``HLO_GO_MPMD_BUDGET_S``, default ``BUDGET_S``) is checked before each
configuration; what is left is listed as skipped ("time budget"). ``HLO_GO_MPMD_GRAPHS``
(comma-separated names) runs only those graphs, in that order (with resume, a way to
run chosen graphs first; the results then cover only them).

Every corpus graph that fits this host's memory is placed: one whose one-device step, as
the simulator lays it out on ``host-cpu-1``, needs more than ``MEMORY_FRACTION`` of the
host's memory is listed in ``graphs_excluded`` with its figure (placed runs also hold
transferred copies, and the float64 check doubles every value).

Resumable: each finished configuration (and the calibration) is appended to
``benchmarks/.cache/mpmd[.quick].partial.jsonl``; a rerun with ``HLO_GO_BENCH_RESUME=1``
reuses those rows (and that calibration) and runs only the rest, so the full run can be
done in pieces. Without it the file is started afresh. Each row records a digest of its
graph's inputs (``inputs_sha256``); a row whose digest differs from today's draw (the
draw changed, e.g. integer indices bounded by their tables since results version 3) is
measured again.

The measurements run in a child process so that JAX starts with 8 CPU devices
(``jax_num_cpu_devices``) whatever the harness process has already initialized.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from benchmarks import corpus_graph_order, corpus_graphs_too_large, inputs_digest
from benchmarks._child import child_main, run_in_child

MAX_SEGMENTS = 50_000
BUDGET_S = 240 * 60
QUICK_BUDGET_S = 4 * 60
# A graph whose simulated one-device peak memory is above this fraction of the host's
# memory is not placed.
MEMORY_FRACTION = 0.25
DEVICE_COUNTS = (2, 4, 8)
# Cheapest to compile first: fewest segments.
PLACEMENTS = ("expert", "metis", "round_robin")
TARGET_OVERHEAD = 1.10
TIMED_RUNS = 2
# One graph of each family that fits first (loops, CNN), then the rest by node count
# (compile time grows with it; inception_v3_small, 11k nodes, comes last).
FIRST = ("rnnlm_l2_scan", "gnmt_l2_scan", "resnet_26")
# Bump when a change makes earlier partial results incomparable.
RESULTS_VERSION = 3  # 3: training_inputs (positive, fan-in scaled)

_console = Console(stderr=True)


def _log(message: str) -> None:
    _console.log(message)


def _budget_s(quick: bool) -> float:
    """The time budget in seconds (``HLO_GO_MPMD_BUDGET_S`` overrides the default)."""
    default = QUICK_BUDGET_S if quick else BUDGET_S
    return float(os.environ.get("HLO_GO_MPMD_BUDGET_S", default))


def _too_large(quick: bool) -> dict[str, str]:
    """Corpus graphs that do not fit this host's memory, with the reason."""
    return {} if quick else corpus_graphs_too_large(MEMORY_FRACTION)


def _graph_names(quick: bool, excluded: dict[str, str], only: str = "") -> list[str]:
    """The graphs to place, in run order; ``only`` (comma-separated names) picks some,
    in its order."""
    if quick:
        return ["gnmt_l2_scan"]
    return corpus_graph_order(FIRST, excluded, only, "HLO_GO_MPMD_GRAPHS")


class _Partial:
    """Per-configuration results appended to a JSON-lines file, reused on resume."""

    def __init__(self, quick: bool) -> None:
        from benchmarks import CACHE_DIR

        self.path = Path(CACHE_DIR) / f"mpmd{'.quick' if quick else ''}.partial.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[tuple[str, int, str], dict[str, Any]] = {}
        self.calibration: dict[str, Any] | None = None
        if os.environ.get("HLO_GO_BENCH_RESUME") and self.path.exists():
            self._load()
            _log(f"resuming: {len(self.rows)} configurations already in {self.path}")
        elif self.path.exists():
            self.path.unlink()

    def _load(self) -> None:
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by an interrupted run
                continue
            if record.get("version") != RESULTS_VERSION:
                continue
            if record["record"] == "calibration":
                self.calibration = record["calibration"]
            elif record["record"] == "row":
                row = record["row"]
                self.rows[(row["graph"], row["devices"], row["placement"])] = row

    def _append(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({**record, "version": RESULTS_VERSION}) + "\n")

    def get(self, graph: str, devices: int, placement: str) -> dict[str, Any] | None:
        return self.rows.get((graph, devices, placement))

    def add(self, row: dict[str, Any]) -> None:
        self.rows[(row["graph"], row["devices"], row["placement"])] = row
        self._append({"record": "row", "row": row})

    def set_calibration(self, calibration: dict[str, Any]) -> None:
        self.calibration = calibration
        self._append({"record": "calibration", "calibration": calibration})


def _calibration(partial: _Partial, devices: Any, quick: bool) -> Any:
    """The runtime calibration: the resumed run's, or measured now."""
    from hlo_go.calibration.runtime import RuntimeCalibration, calibrate_runtime

    if partial.calibration is not None:
        return RuntimeCalibration(**partial.calibration)
    calibration = calibrate_runtime(devices, repeats=5 if quick else 15)
    partial.set_calibration(calibration.as_dict())
    return calibration


def _placement(kind: str, graph: Any, cluster: Any) -> Any:
    from hlo_go import baselines

    method = {
        "round_robin": baselines.round_robin_placement,
        "metis": baselines.metis_placement,
        "expert": baselines.expert_placement,
    }[kind]
    return method(graph, cluster)


def _predict(graph: Any, decisions: Any, segments: int, calibration: Any) -> float | None:
    from hlo_go.calibration.runtime import mpmd_host_cluster, predict_placed

    cluster = mpmd_host_cluster(int(decisions.placement.max()) + 1, calibration)
    try:
        from hlo_go.baselines import xla_cpu_like_priority

        fusion = xla_cpu_like_priority(
            graph, cluster, decisions.placement, decisions.schedule_priority
        )
        decisions = decisions._replace(fusion_priority=fusion)
    except ImportError:
        pass
    return predict_placed(graph, decisions, segments, cluster=cluster, calibration=calibration)


def _tolerance_excess(got: Any, want: Any) -> float:
    """max |got - want| / (atol + rtol |want|) over all outputs, with the dtype tolerances of
    :func:`hlo_go.xla.outputs_match` (<= 1: within tolerance)."""
    import numpy as np

    from hlo_go.xla.measure import TOLERANCES

    worst = 0.0
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if not np.issubdtype(w.dtype, np.floating) and w.dtype.name != "bfloat16":
            worst = max(worst, 0.0 if np.array_equal(g, w) else float("inf"))
            continue
        rtol, atol = TOLERANCES.get(w.dtype.name, (1e-4, 1e-5))
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        with np.errstate(invalid="ignore"):
            ratio = np.abs(g64 - w64) / (atol + rtol * np.abs(w64))
        ratio = ratio[~(np.isnan(g64) & np.isnan(w64))]
        if ratio.size:
            worst = max(worst, float(np.nanmax(ratio)))
    return worst


def _timed_runs(program: Any, placed_args: Any, repeats: int) -> list[float]:
    import jax

    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(program(placed_args))
        samples.append(time.perf_counter() - start)
    return samples


class _Graph:
    """One corpus graph and what its configurations share: the module, the graph, the
    arguments, the one-device reference outputs and (lazily) the float64 ones."""

    def __init__(self, name: str, module: Any, args: list[Any]) -> None:
        import numpy as np

        from hlo_go.graph import build_graph
        from hlo_go.xla.placed import float64_reference, unfused_reference

        self.name = name
        self.module = module
        self.graph = build_graph(self.module)
        self.nodes = self.graph.num_nodes
        self.zeros = np.zeros(self.nodes, np.float32)
        self.args = args
        self.want: list[Any] | None = None
        self.exact = float64_reference(self.module, self.args)
        self.unfused = unfused_reference(self.module, self.args)

    def decisions(self, placement: Any) -> Any:
        import numpy as np

        from hlo_go.decisions import Decisions

        return Decisions(np.asarray(placement, np.int32), self.zeros, self.zeros)

    def reference_outputs(self, devices: Any) -> list[Any]:
        """The one-device outputs (XLA's compile of the whole module as one segment)."""
        import numpy as np

        from hlo_go.xla.placed import compile_placed

        if self.want is None:
            single = self.decisions(np.zeros(self.nodes, np.int32))
            program = compile_placed(self.module, single, devices[:1], graph=self.graph)
            self.want = [np.asarray(a) for a in program(program.place_arguments(self.args))]
        return self.want


def _single_row(g: _Graph, quick: bool, calibration: Any, devices: Any) -> dict[str, Any]:
    """The 1-device placement, measured interleaved against XLA's default compile."""
    import numpy as np

    from hlo_go.xla import measure_placed
    from hlo_go.xla.placed import compile_placed

    single = g.decisions(np.zeros(g.nodes, np.int32))
    start = time.perf_counter()
    program = compile_placed(g.module, single, devices[:1], graph=g.graph)
    compile_s = time.perf_counter() - start
    g.want = [np.asarray(a) for a in program(program.place_arguments(g.args))]
    measurement = measure_placed(
        g.module,
        single,
        devices[:1],
        args=g.args,
        program=program,
        repeats=3 if quick else 7,
        warmup=1,
        exact=g.exact,
    )
    overhead = measurement.time_s / measurement.baseline_time_s if measurement.correct else None
    predicted = _predict(g.graph, single, program.num_segments, calibration)
    return {
        "graph": g.name,
        "nodes": g.nodes,
        "devices": 1,
        "placement": "single",
        "segments": program.num_segments,
        "transfers": 0,
        "transfer_mb": 0.0,
        "correct": measurement.correct,
        "time_s": measurement.time_s,
        "reference_s": measurement.baseline_time_s,
        "ratio": overhead,
        "predicted_s": predicted,
        "predicted_over_measured": predicted / measurement.time_s if measurement.time_s else None,
        "compile_s": compile_s,
        "message": measurement.message,
    }


def _placed_row(
    g: _Graph, kind: str, d: int, calibration: Any, devices: Any, reference_s: float | None
) -> dict[str, Any]:
    """One placement on ``d`` devices: compiled, checked, timed, predicted."""
    import jax
    import numpy as np

    from hlo_go.calibration.runtime import mpmd_host_cluster
    from hlo_go.xla import outputs_match
    from hlo_go.xla.placed import check_placed_outputs, compile_placed, partition

    row: dict[str, Any] = {"graph": g.name, "nodes": g.nodes, "devices": d, "placement": kind}
    decisions = g.decisions(_placement(kind, g.graph, mpmd_host_cluster(d, calibration)))
    segments = partition(g.module, g.graph, decisions.placement, num_devices=d).num_segments
    if segments > MAX_SEGMENTS:
        return {**row, "segments": segments, "skipped": f"{segments} segments > {MAX_SEGMENTS}"}
    want = g.reference_outputs(devices)
    start = time.perf_counter()
    try:
        program = compile_placed(g.module, decisions, devices[:d], graph=g.graph)
    except Exception as e:  # reported, not hidden
        return {**row, "correct": False, "message": f"compile failed: {e}"[:400]}
    compile_s = time.perf_counter() - start
    placed_args = program.place_arguments(g.args)
    got = [np.asarray(a) for a in jax.block_until_ready(program(placed_args))]
    within, _ = outputs_match(got, want)
    ok, message = check_placed_outputs(
        g.module, g.args, got, want, exact=g.exact, unfused=g.unfused
    )
    excess = _tolerance_excess(got, want)
    stats = program.stats
    del got
    samples = _timed_runs(program, placed_args, TIMED_RUNS) if ok else []
    time_s = statistics.median(samples) if samples else None
    predicted = _predict(g.graph, decisions, program.num_segments, calibration)
    return {
        **row,
        "segments": program.num_segments,
        "executables": program.num_executables,
        "transfers": stats.transfers,
        "transfer_mb": stats.transfer_bytes / 1e6,
        "donated": stats.donated,
        "peak_live_mb": max(stats.peak_live_bytes) / 1e6,
        "correct": ok,
        "within_tolerance": within,
        "tolerance_excess": excess,
        "time_s": time_s,
        "reference_s": reference_s,
        "ratio": time_s / reference_s if time_s and reference_s else None,
        "predicted_s": predicted,
        "predicted_over_measured": predicted / time_s if time_s else None,
        "compile_s": compile_s,
        "message": message,
    }


def _configurations(quick: bool) -> list[tuple[int, str]]:
    """(devices, placement) pairs in run order: cheapest compile first."""
    counts = (2,) if quick else DEVICE_COUNTS
    first = [(d, k) for k in PLACEMENTS if k != "round_robin" for d in counts]
    return first + [(d, "round_robin") for d in counts]


def _short(row: dict[str, Any]) -> str:
    keys = (
        "segments",
        "executables",
        "correct",
        "within_tolerance",
        "compile_s",
        "time_s",
        "ratio",
        "predicted_over_measured",
        "skipped",
    )
    return ", ".join(
        f"{k}={row[k]:.3g}" if isinstance(row.get(k), float) else f"{k}={row[k]}"
        for k in keys
        if k in row
    )


def _measure_graph(
    name: str, quick: bool, calibration: Any, deadline: float, partial: _Partial
) -> list[dict[str, Any]]:
    """Every configuration of one graph: resumed, measured, or skipped (time budget)."""
    import jax

    from hlo_go import corpus
    from hlo_go.xla.inputs import training_inputs

    devices = jax.devices()
    g: _Graph | None = None
    rows: list[dict[str, Any]] = []
    todo = [(1, "single"), *_configurations(quick)]
    module = corpus.load(name, "prefusion")
    args = training_inputs(module)
    digest = inputs_digest(args)
    for d, kind in todo:
        done = partial.get(name, d, kind)
        if done is not None and done.get("inputs_sha256") == digest:
            rows.append(done)
            continue
        if time.perf_counter() > deadline:
            rows.append({"graph": name, "devices": d, "placement": kind, "skipped": "time budget"})
            continue
        g = g or _Graph(name, module, args)
        started = time.perf_counter()
        if kind == "single":
            row = _single_row(g, quick, calibration, devices)
        else:
            reference = partial.get(name, 1, "single") or {}
            row = _placed_row(g, kind, d, calibration, devices, reference.get("reference_s"))
        row["wall_s"] = time.perf_counter() - started
        row["inputs_sha256"] = digest
        partial.add(row)
        rows.append(row)
        _log(f"{name}: {d} device(s) {kind}: {_short(row)}")
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers over the rows."""
    from hlo_go.xla.placed import FUSION_OFF_REFERENCE

    ran = [r for r in rows if "skipped" not in r and r["placement"] != "single"]
    overheads = {
        r["graph"]: r["ratio"] for r in rows if r["placement"] == "single" and r.get("ratio")
    }
    ratios = [
        r["predicted_over_measured"]
        for r in rows
        if "skipped" not in r and r.get("predicted_over_measured")
    ]
    skipped = [r for r in rows if "skipped" in r]
    reasons: dict[str, int] = {}
    for r in skipped:
        reason = "time budget" if r["skipped"] == "time budget" else f"> {MAX_SEGMENTS} segments"
        reasons[reason] = reasons.get(reason, 0) + 1
    median_overhead = statistics.median(overheads.values()) if overheads else None
    return {
        "configurations_run": len(ran),
        "configurations_correct": sum(1 for r in ran if r.get("correct")),
        "configurations_correct_within_tolerance": sum(
            1 for r in ran if r.get("correct") and r.get("within_tolerance")
        ),
        "configurations_correct_by_float64_arbiter": sum(
            1 for r in ran if r.get("correct") and not r.get("within_tolerance")
        ),
        "configurations_correct_by_fusion_off_error": sum(
            1 for r in ran if r.get("correct") and FUSION_OFF_REFERENCE in (r.get("message") or "")
        ),
        "configurations_incorrect": [
            f"{r['graph']} {r['placement']}/{r['devices']}" for r in ran if not r.get("correct")
        ],
        "configurations_skipped": len(skipped),
        "configurations_skipped_by_reason": reasons,
        "one_device_configurations_run": sum(
            1 for r in rows if r["placement"] == "single" and "skipped" not in r
        ),
        "one_device_overhead_median": median_overhead,
        "one_device_overhead_by_graph": overheads,
        "target_one_device_overhead": TARGET_OVERHEAD,
        "meets_overhead_target": (
            median_overhead is not None and median_overhead <= TARGET_OVERHEAD
        ),
        "predicted_over_measured_median": statistics.median(ratios) if ratios else None,
        "predicted_over_measured_range": [min(ratios), max(ratios)] if ratios else None,
    }


def measure(quick: bool) -> dict[str, Any]:
    """The whole measurement (run in a process with 8 CPU devices)."""
    import jax

    from hlo_go.calibration.runtime import HOST_MPMD

    budget = _budget_s(quick)
    deadline = time.perf_counter() + budget
    devices = jax.devices()
    partial = _Partial(quick)
    calibration = _calibration(partial, devices, quick)
    _log(f"calibration: {calibration.as_dict()}")
    rows: list[dict[str, Any]] = []
    excluded = _too_large(quick)
    names = _graph_names(quick, excluded, os.environ.get("HLO_GO_MPMD_GRAPHS", ""))
    for name in names:
        rows.extend(_measure_graph(name, quick, calibration, deadline, partial))
    graphs_cut = sorted({r["graph"] for r in rows if r.get("skipped") == "time budget"})
    return {
        **_summary(rows),
        "graphs": names,
        "graphs_with_configurations_left_by_time_budget": graphs_cut,
        "graphs_excluded": excluded,
        "budget_s": budget,
        "max_segments": MAX_SEGMENTS,
        "compile_s_total": sum(r.get("compile_s") or 0.0 for r in rows),
        # The work in the rows, however many resumed pieces it took (wall_s is the last's).
        "configurations_wall_s_total": sum(r.get("wall_s") or 0.0 for r in rows),
        "rows": rows,
        "calibration": calibration.as_dict(),
        "calibration_committed_preset": HOST_MPMD._replace(samples=None).as_dict(),
        "devices": [str(d) for d in devices],
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs :func:`measure` in a child process with 8 virtual CPU devices."""
    return run_in_child("benchmarks.bench_mpmd", quick=quick)


if __name__ == "__main__":
    child_main(measure, sys.argv[1:])
