"""Tests of the simulator's calibration (hlo_go.sim.calibrate, hlo_go.calibration) on
synthetic measurements: what a known device would have measured must be fitted back."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_go.calibration import Variant, profiled_graph, variant_table
from hlo_go.decisions import Decisions
from hlo_go.graph import build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim import KERNEL, Cluster, Device, node_kinds, simulate
from hlo_go.sim.calibrate import (
    FusedCase,
    ProfiledGraph,
    calibrate,
    calibrate_fused_matrix,
)
from hlo_go.xla.fusion import wrap_alone
from hlo_go.xla.profile import InstructionProfile

BASE = Device(
    "base",
    peak_flops={"f32": 1e10},
    memory_bandwidth=1e10,
    memory_capacity=1e12,
    launch_overhead=0.0,
    transcendentals_per_s=1e9,
)


def _module(size: int) -> str:
    return f"""HloModule m{size}
ENTRY e {{
  p = f32[{size},{size}] parameter(0)
  q = f32[{size},{size}] parameter(1)
  d = f32[{size},{size}] dot(p, q), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  a = f32[{size},{size}] add(d, p)
  t = f32[{size},{size}] tanh(a)
  c = f32[{size},{size}] copy(t)
  ROOT r = f32[{size},{size}] multiply(c, q)
}}
"""


def _synthetic(truth: Device, sizes: list[int]) -> list[ProfiledGraph]:
    """Profiles as ``truth`` would measure them: each kernel's simulated time."""
    return [
        profile
        for size in sizes
        for profile in _synthetic_graphs(truth, [build_graph(parse_hlo(_module(size)))], f"m{size}")
    ]


def _synthetic_graphs(truth: Device, graphs: list, name: str) -> list[ProfiledGraph]:
    """Profiles of graphs as ``truth`` would measure them: each kernel's simulated time."""
    profiles = []
    for graph in graphs:
        result = simulate(graph, Cluster("t", (truth,)), Decisions.default(graph))
        timeline = result.timeline
        measured = np.full(graph.num_nodes, np.nan)
        launched = ~timeline.kernel_free[timeline.node_kernel]
        kernel = timeline.node_kernel[launched]
        measured[launched] = timeline.kernel_end[kernel] - timeline.kernel_start[kernel]
        profiles.append(ProfiledGraph(name, graph, measured, result.step_time))
    return profiles


def test_calibration_recovers_a_known_device():
    truth = BASE.replace(
        launch_overhead=2e-6,
        compute_efficiency={"matrix": 0.5, "elementwise": 0.25},
        memory_efficiency={"elementwise": 0.5, "data_movement": 0.8},
    )
    profiles = _synthetic(truth, [16, 64, 128, 256, 512, 1024])
    fit = calibrate(profiles, BASE, steps=1500)
    assert fit.kernel_error < 0.05
    assert fit.device.launch_overhead == pytest.approx(2e-6, rel=0.2)
    assert fit.device.compute_efficiency["matrix"] == pytest.approx(0.5, rel=0.1)
    for profile in profiles:
        predicted = simulate(
            profile.graph, Cluster("fit", (fit.device,)), Decisions.default(profile.graph)
        ).step_time
        assert predicted == pytest.approx(profile.step_s, rel=0.05)
    # Classes never measured are left out (defaults apply).
    assert "reduction" not in fit.device.compute_efficiency


def test_calibration_recovers_the_runtime_gap_between_kernels():
    """Steps that take longer than their kernels by a fixed gap per launch: the gap is
    fitted, and the calibrated device's launch overhead (launch + gap) predicts the steps."""
    truth = BASE.replace(launch_overhead=1e-6, compute_efficiency={"matrix": 0.5})
    gap = 20e-6
    profiles = []
    for p in _synthetic(truth, [16, 64, 128, 256, 512, 1024]):
        launches = float(p.graph.kernel_launches[node_kinds(p.graph) == KERNEL].sum())
        profiles.append(p._replace(step_s=p.step_s + gap * launches))
    fit = calibrate(profiles, BASE, steps=1500)
    assert fit.gap_s == pytest.approx(gap, rel=0.2)
    assert fit.kernel_launch_s == pytest.approx(1e-6, rel=0.3)
    for profile in profiles:
        predicted = simulate(
            profile.graph, Cluster("fit", (fit.device,)), Decisions.default(profile.graph)
        ).step_time
        assert predicted == pytest.approx(profile.step_s, rel=0.05)


def test_fused_matrix_efficiency_is_fitted_from_variants():
    truth = BASE.replace(compute_efficiency={"matrix": 1.0, "fused_matrix": 0.01})
    cases = []
    for size in (64, 256):
        graph = build_graph(parse_hlo(_module(size)))
        cluster = Cluster("t", (truth,))
        for group in (np.arange(graph.num_nodes), np.array([0, 1, 2, 2, 2, 2, 2])):
            result = simulate(graph, cluster, Decisions.default(graph), group=group)
            cases.append(FusedCase(graph, group, result.step_time))
    device, error = calibrate_fused_matrix(cases, BASE.replace(compute_efficiency={"matrix": 1.0}))
    assert device.compute_efficiency["fused_matrix"] == pytest.approx(0.01, rel=0.1)
    assert error < 0.05
    unfused = [c for c in cases if np.unique(c.group).size == c.graph.num_nodes]
    same, nan = calibrate_fused_matrix(unfused, BASE)
    assert same is BASE and np.isnan(nan)


def test_loop_bodies_count_toward_their_while_node():
    text = """HloModule loop
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[4] exponential(x)
  ROOT out = (s32[], f32[4]) tuple(j, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, p)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""
    profile = InstructionProfile(
        "loop", {"w": 1e-6, "y": 3e-6, "j": 1e-6, "lt": 2e-6}, 1e-5, 3, text
    )
    profiled = profiled_graph(profile)
    assert profiled.measured_s[profiled.graph.node_index["w"]] == pytest.approx(7e-6)
    assert np.isnan(profiled.measured_s[profiled.graph.node_index["p"]])


def test_variant_table_ranks_predictions_against_measurements():
    """Variants measured as the device itself predicts them rank perfectly (tau 1);
    measured in the opposite order, tau is -1; one swapped pair of four gives 4/6."""
    graph = build_graph(parse_hlo(_module(256)))
    n = graph.num_nodes
    groups = [np.arange(n), np.array([0, 1, 2, 2, 2, 2, 2]), np.array([0, 1, 2, 3, 3, 3, 3])]
    groups.append(np.array([0, 1, 2, 3, 4, 4, 4]))
    device = BASE.replace(launch_overhead=5e-6)
    cluster = Cluster("t", (device,))
    predicted = [
        simulate(graph, cluster, Decisions.default(graph), group=g).step_time for g in groups
    ]
    assert len(set(predicted)) == len(groups)

    def variants(times: list[float]) -> list[Variant]:
        return [
            Variant("m", f"v{i}", g, t) for i, (g, t) in enumerate(zip(groups, times, strict=True))
        ]

    rows, tau = variant_table(graph, variants(predicted), device)
    assert tau == pytest.approx(1.0)
    assert [r["predicted_s"] for r in rows] == pytest.approx(predicted)
    assert variant_table(graph, variants([-t for t in predicted]), device)[1] == pytest.approx(-1)
    order = np.argsort(predicted)
    swapped = np.array(predicted)
    swapped[order[[0, 1]]] = swapped[order[[1, 0]]]
    assert variant_table(graph, variants(list(swapped)), device)[1] == pytest.approx(4 / 6)


def test_wrap_alone_makes_scatter_its_own_fusion():
    from hlo_go.xla.bridge import xla_accepts

    text = """HloModule s
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  operand = f32[8,4] parameter(0)
  indices = s32[2,1] parameter(1)
  updates = f32[2,4] parameter(2)
  ROOT s = f32[8,4] scatter(operand, indices, updates), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
"""
    wrapped = wrap_alone(parse_hlo(text))
    root = wrapped.entry.root
    assert root.opcode == "fusion" and root.name == "s"
    assert wrapped.computations[root.attributes["calls"].lstrip("%")].root.opcode == "scatter"
    accepted, message = xla_accepts(wrapped.to_text())
    assert accepted, message


def _conv_module(size: int) -> str:
    return f"""HloModule c{size}
ENTRY e {{
  a = f32[4,{size},{size},16] parameter(0)
  k = f32[3,3,16,16] parameter(1)
  c = f32[4,{size},{size},16] convolution(a, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  p = f32[64,{size}] parameter(2)
  q = f32[{size},{size}] parameter(3)
  d = f32[64,{size}] dot(p, q), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = (f32[4,{size},{size},16], f32[64,{size}]) tuple(c, d)
}}
"""


def test_convolutions_and_dots_are_priced_and_fitted_as_separate_classes():
    from hlo_go.sim import node_costs, op_classes
    from hlo_go.sim.cluster import OP_CLASSES

    truth = BASE.replace(
        launch_overhead=1e-6,
        compute_efficiency={"matrix": 0.8, "convolution": 0.2},
        memory_efficiency={"matrix": 1.0, "convolution": 1.0},
    )
    graph = build_graph(parse_hlo(_conv_module(32)))
    classes = op_classes(graph)
    conv, dot = graph.node_index["c"], graph.node_index["d"]
    assert OP_CLASSES[classes[conv]] == "convolution"
    assert OP_CLASSES[classes[dot]] == "matrix"
    # Hand-computed compute times: flops / (peak × efficiency of the class).
    # 2 × batch × in × out features × valid taps (3 per output pixel and dimension, but
    # 2 at the padded borders: 32 × 3 - 2 per dimension).
    conv_flops = 2 * 4 * 16 * 16 * (32 * 3 - 2) ** 2
    dot_flops = 2 * 64 * 32 * 32
    costs = node_costs(graph, Cluster("t", (truth,)))
    assert graph.flops[conv] == conv_flops and graph.flops[dot] == dot_flops
    assert costs.compute_s[0, conv] == pytest.approx(conv_flops / (1e10 * 0.2))
    assert costs.compute_s[0, dot] == pytest.approx(dot_flops / (1e10 * 0.8))

    profiles = []
    for size in (16, 32, 64, 128, 256):
        graph = build_graph(parse_hlo(_conv_module(size)))
        (profile,) = _synthetic_graphs(truth, [graph], f"c{size}")
        profiles.append(profile)
    fit = calibrate(profiles, BASE, steps=1500)
    assert fit.device.compute_efficiency["convolution"] == pytest.approx(0.2, rel=0.1)
    assert fit.device.compute_efficiency["matrix"] == pytest.approx(0.8, rel=0.1)
    # Each fitted class reports how well its kernels fit.
    assert set(fit.class_errors) == {"matrix", "convolution"}
    for error in fit.class_errors.values():
        assert error.median_error < 0.05
        assert error.predicted_s == pytest.approx(error.measured_s, rel=0.05)


def test_host_core_preset_is_the_committed_calibration():
    """HOST_CORE_CALIBRATED carries the fitted figures of
    benchmarks/results/sim_calibration.json (rounded), dots and convolutions apart."""
    import json
    from pathlib import Path

    from hlo_go.sim.presets import HOST_CORE_CALIBRATED

    path = Path(__file__).parents[1] / "benchmarks" / "results" / "sim_calibration.json"
    fitted = json.loads(path.read_text())["device"]
    preset = HOST_CORE_CALIBRATED
    assert preset.launch_overhead == pytest.approx(fitted["launch_overhead"], rel=0.02)
    assert {"matrix", "convolution"} <= set(preset.compute_efficiency)
    for table, key in (
        (preset.compute_efficiency, "compute_efficiency"),
        (preset.memory_efficiency, "memory_efficiency"),
    ):
        for op_class, value in table.items():
            assert value == pytest.approx(fitted[key][op_class], rel=0.03), (key, op_class)
