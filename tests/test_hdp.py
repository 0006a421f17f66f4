"""Tests of hlo_go.baselines.hdp: the hierarchical placer (Mirhoseini et al., 2018) trained
by REINFORCE on the simulator, on a hand-built two-tower graph (one compile shared)."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from hlo_go import baselines as B
from hlo_go.baselines.hdp import HDPConfig, hdp_functions, hdp_placements, run_hdp
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim import Cluster, Device, Link, simulate

US = 1e-6
# 1024 FLOP or transcendentals take 1 us, 4096 bytes take 1 us, a launch 1 us.
TINY = Device(
    "tiny",
    peak_flops={"f32": 1.024e9},
    memory_bandwidth=4.096e9,
    memory_capacity=1e9,
    launch_overhead=1 * US,
    transcendentals_per_s=1.024e9,
)


def tiny_cluster(num_devices: int) -> Cluster:
    links = [Link(i, j, 4.096e9, 1 * US) for i, j in itertools.permutations(range(num_devices), 2)]
    return Cluster(f"tiny{num_devices}", (TINY,) * num_devices, tuple(links))


def two_towers(ops: int = 6) -> OpGraph:
    """Two chains of tanh over 1 MiB arrays, joined only through a scalar; each tower has
    a bitcast, colocated with its operand."""
    lines = [
        "%p = f32[262144] parameter(0)",
        "%q = f32[262144] parameter(1)",
        "%zero = f32[] constant(0)",
    ]
    for tower, src in (("a", "%p"), ("b", "%q")):
        prev = src
        for i in range(ops):
            lines.append(f"%{tower}{i} = f32[262144] tanh({prev})")
            prev = f"%{tower}{i}"
            if i == 2:
                lines.append(f"%{tower}cast = f32[262144] bitcast({prev})")
                prev = f"%{tower}cast"
    lines.append(f"%s = f32[] reduce(%a{ops - 1}, %zero), dimensions={{0}}, to_apply=%sum")
    lines.append("%sb = f32[262144] broadcast(%s), dimensions={}")
    lines.append(f"ROOT %out = f32[262144] add(%b{ops - 1}, %sb)")
    text = (
        "HloModule towers\n%sum { %x = f32[] parameter(0)\n %y = f32[] parameter(1)\n"
        " ROOT %r = f32[] add(%x, %y) }\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
    )
    return build_graph(parse_hlo(text), validate=True)


@pytest.fixture(scope="module")
def towers() -> OpGraph:
    graph = two_towers()
    assert np.unique(graph.colocation_group).size < graph.num_nodes  # has colocation
    return graph


def test_result_is_valid_and_keeps_fixed_schedule_and_fusion(towers: OpGraph):
    cluster = tiny_cluster(2)
    rng = np.random.default_rng(0)
    n = towers.num_nodes
    fixed = Decisions(
        np.zeros(n, np.int32),
        rng.random(n).astype(np.float32),
        rng.random(n).astype(np.float32),
    )
    found = run_hdp(towers, cluster, budget=40, seed=1, fixed=fixed)
    assert found.method == "hdp" and found.stopped_by == "budget"
    best = found.best.validate(towers, cluster.num_devices)
    np.testing.assert_array_equal(best.schedule_priority, fixed.schedule_priority)
    np.testing.assert_array_equal(best.fusion_priority, fixed.fusion_priority)
    curve = found.curve
    assert found.evaluations == len(curve) == 40
    assert np.all(np.diff(curve.best_step_time) <= 0)
    assert np.all(np.diff(curve.seconds) >= 0)
    assert curve.best_step_time[-1] == found.best_step_time
    single = simulate(towers, cluster, fixed).step_time
    assert found.start_step_time == pytest.approx(single)
    assert found.best_step_time <= single
    assert B.score(simulate(towers, cluster, best)) == pytest.approx(found.best_step_time)


def test_finds_a_split_of_the_towers_and_is_deterministic(towers: OpGraph):
    cluster = tiny_cluster(2)
    found = run_hdp(towers, cluster, budget=300, seed=0)
    single = simulate(towers, cluster, Decisions.default(towers)).step_time
    assert found.best_step_time < 0.9 * single
    assert set(found.best.placement.tolist()) == {0, 1}
    again = run_hdp(towers, cluster, budget=300, seed=0)
    assert again.best_step_time == found.best_step_time
    np.testing.assert_array_equal(again.best.placement, found.best.placement)
    np.testing.assert_array_equal(again.curve.best_step_time, found.curve.best_step_time)


def test_registry_dispatches_hdp(towers: OpGraph):
    cluster = tiny_cluster(2)
    method = B.get("hdp")
    assert method.kind == "search" and "hdp" in B.names("search")
    decisions = method(towers, cluster, budget=32)
    decisions.validate(towers, cluster.num_devices)
    assert np.all(decisions.fusion_priority == 0)  # default fixed: no fusion
    row = B.run_method(towers, cluster, "hdp", budget=20)
    assert row.evaluations == 20 and row.curve is not None
    with pytest.raises(KeyError, match="run_hdp"):
        B.run_search(towers, cluster, "hdp")


def test_sampling_eager_equals_jit_and_respects_colocation(towers: OpGraph):
    cluster = tiny_cluster(2)
    inputs, init, sample, _ = hdp_functions(towers, cluster, HDPConfig())
    params, _ = init(jax.random.key(3), inputs)
    keys = jax.random.split(jax.random.key(4), 3)
    jitted = sample(params, inputs, keys)
    with jax.disable_jit():
        eager = sample(params, inputs, keys)
    np.testing.assert_array_equal(np.asarray(eager.set_group), np.asarray(jitted.set_group))
    np.testing.assert_array_equal(np.asarray(eager.group_device), np.asarray(jitted.group_device))
    np.testing.assert_allclose(np.asarray(eager.log_prob), np.asarray(jitted.log_prob), rtol=1e-5)
    assert np.all(np.asarray(jitted.log_prob) < 0)
    placements = hdp_placements(towers, jitted)
    assert placements.shape == (3, towers.num_nodes)
    group = towers.colocation_group
    assert np.all(placements == placements[:, group])


def test_bad_input(towers: OpGraph):
    cluster = tiny_cluster(2)
    with pytest.raises(ValueError, match="budget must be at least 1 evaluation, got 0"):
        run_hdp(towers, cluster, budget=0)
    with pytest.raises(ValueError, match="samples must be at least 1"):
        run_hdp(towers, cluster, budget=4, config=HDPConfig(samples=0))
    one = run_hdp(towers, tiny_cluster(1), budget=50)
    assert one.evaluations == 1 and np.all(one.best.placement == 0)
    limited = run_hdp(towers, cluster, budget=1000, time_limit=0.0)
    assert limited.evaluations == 1 and limited.stopped_by == "time"
