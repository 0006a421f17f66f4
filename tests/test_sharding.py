"""hlo_go.sharding: strategies, specs, resharding costs, simulation, lowering through XLA's
SPMD partitioner on 8 CPU devices, methods and the ``hlo-go shard`` command."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.cli import main as cli_main
from hlo_go.hlo import HloInstruction, parse_hlo, parse_shape
from hlo_go.sharding import (
    AxisLinks,
    Mesh,
    annotate,
    build_sharding,
    enumerate_strategies,
    gap_to_bound,
    get,
    ilp_with_result,
    infer_batch_size,
    inline_calls,
    names,
    reshard_collectives,
    reshard_cost,
    simulate_sharding,
    spec_text,
    total_cost,
)
from hlo_go.sharding.greedy import fit_memory, solve_greedy
from hlo_go.sharding.strategies import reshape_dim_map
from hlo_go.sim import get_cluster
from hlo_go.xla.bridge import compile_hlo_text, run_executable
from hlo_go.xla.inputs import random_inputs
from hlo_go.xla.spmd import check_spmd, collective_bytes, count_collectives

MESH = Mesh((2, 4))
H100 = get_cluster("h100x8")


def _instr(text: str) -> HloInstruction:
    """One instruction from a tiny module's entry (the root)."""
    return parse_hlo(text).entry.root


def _mlp_text(batch: int = 32) -> str:
    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), loss(p, x, y)

    p = {"w1": jnp.zeros((64, 256)), "b1": jnp.zeros(256), "w2": jnp.zeros((256, 32))}
    args = (p, jnp.zeros((batch, 64)), jnp.zeros((batch, 32)))
    return jax.jit(step).lower(*args).as_text(dialect="hlo")


@pytest.fixture(scope="module")
def mlp():
    return build_sharding(parse_hlo(_mlp_text()), MESH, H100)


# --- meshes and specs ---------------------------------------------------------------


def test_mesh_parse_and_errors():
    assert Mesh.parse("2x4").shape == (2, 4) and Mesh.parse("8").size == 8
    with pytest.raises(ValueError, match="bad mesh"):
        Mesh.parse("2y4")
    with pytest.raises(ValueError, match="needs 16 devices"):
        AxisLinks.of(H100, Mesh((4, 4)))


def test_spec_text():
    assert spec_text(((), ()), MESH) == "{replicated}"
    assert spec_text(((0,), ()), MESH) == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert spec_text(((0, 1), ()), MESH) == "{devices=[8,1]<=[8]}"
    assert spec_text(((1,), (0,)), MESH) == "{devices=[4,2]<=[2,4]T(1,0)}"
    assert spec_text(((), (1,)), MESH) == "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"


# --- strategy enumeration -----------------------------------------------------------


def test_dot_strategies_alpa_space():
    dot = _instr(
        "HloModule m\nENTRY e {\n a = f32[8,16] parameter(0)\n b = f32[16,32] parameter(1)\n"
        " ROOT d = f32[8,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}"
    )
    shapes = [parse_shape("f32[8,16]"), parse_shape("f32[16,32]")]
    strategies = enumerate_strategies(dot, shapes, MESH)
    assert strategies[0].output == ((), ()) and strategies[0].work_axes == ()
    by_specs = {(s.output, s.operands): s for s in strategies}
    # i on axis 0, j on axis 1: lhs split rows, rhs split columns, no collective.
    s = by_specs[(((0,), (1,)), (((0,), ()), ((), (1,))))]
    assert s.collectives == () and s.work_axes == (0, 1)
    # Contracting dimension over both axes: output replicated, all-reduce of the output.
    s = by_specs[(((), ()), (((), (0, 1)), ((0, 1), ())))]
    assert s.collectives == (("all-reduce", 8 * 32 * 4, (0, 1)),)
    # Every axis used at most once; every split divides its dimension.
    for s in strategies:
        axes = [a for spec in s.operands for d in spec for a in d]
        assert len(set(axes)) <= 2
    assert len(strategies) == len({(s.output, s.operands) for s in strategies})


def test_convolution_strategies():
    conv = _instr(
        "HloModule m\nENTRY e {\n x = f32[8,10,10,4] parameter(0)\n k = f32[3,3,4,16] parameter(1)\n"
        " ROOT c = f32[8,10,10,16] convolution(x, k), window={size=3x3 pad=1_1x1_1},"
        " dim_labels=b01f_01io->b01f\n}"
    )
    shapes = [parse_shape("f32[8,10,10,4]"), parse_shape("f32[3,3,4,16]")]
    strategies = enumerate_strategies(conv, shapes, MESH)
    outputs = {s.output for s in strategies}
    assert ((0,), (), (), (1,)) in outputs  # batch on axis 0, output feature on axis 1
    # Spatial dimensions are never split.
    assert all(not s.output[1] and not s.output[2] for s in strategies)
    contract = [s for s in strategies if s.collectives]
    assert contract and all(s.operands[0][3] and s.operands[1][2] for s in contract)


def test_elementwise_reduce_and_views():
    add = _instr(
        "HloModule m\nENTRY e {\n a = f32[8,6] parameter(0)\n ROOT s = f32[8,6] add(a, a)\n}"
    )
    shapes = [parse_shape("f32[8,6]")] * 2
    for s in enumerate_strategies(add, shapes, MESH):
        assert s.operands == (s.output, s.output)
        assert all(8 % MESH.axes_size(d) == 0 if i == 0 else 6 % MESH.axes_size(d) == 0
                   for i, d in enumerate(s.output))  # fmt: skip
    reduce = parse_hlo(
        "HloModule m\nadd { x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
        " ROOT z = f32[] add(x, y) }\nENTRY e {\n a = f32[8,16] parameter(0)\n"
        " c = f32[] constant(0)\n ROOT r = f32[8] reduce(a, c), dimensions={1}, to_apply=add\n}"
    ).entry.root
    strategies = enumerate_strategies(
        reduce, [parse_shape("f32[8,16]"), parse_shape("f32[]")], MESH
    )
    summed = [s for s in strategies if s.operands[0][1]]
    assert summed and all(s.collectives[0][0] == "all-reduce" for s in summed)
    assert all(s.output == (s.operands[0][0],) for s in strategies)
    assert reshape_dim_map((8, 256, 512), (2048, 512)) == {0: 0, 1: 2}
    assert reshape_dim_map((2048, 512), (8, 256, 512)) == {0: 0, 2: 1}
    assert reshape_dim_map((8, 1, 6), (8, 6)) == {0: 0, 1: 2}


# --- costs --------------------------------------------------------------------------


def test_reshard_costs_hand_checked():
    links = AxisLinks.of(H100, MESH)
    alpha, beta = links.alpha[0], links.beta[0]
    assert links.alpha == (alpha, alpha) and links.beta == (beta, beta)  # NVSwitch: uniform
    nbytes = 8e6
    # Split in 8 -> replicated: one all-gather over 8 devices of the whole array.
    assert reshard_collectives(((0, 1),), ((),), nbytes, MESH) == [("all-gather", nbytes, (0, 1))]
    assert reshard_cost(((0, 1),), ((),), nbytes, links) == pytest.approx(
        3 * alpha + 7 / 8 * nbytes / beta
    )
    # Replicated -> split: a local slice, free.
    assert reshard_cost(((),), ((0, 1),), nbytes, links) == 0.0
    # Axis 1 moves from dimension 0 to dimension 1: one all-to-all over 4 devices.
    per_device = nbytes / 4
    assert reshard_collectives(((1,), ()), ((), (1,)), nbytes, MESH) == [
        ("all-to-all", per_device, (1,))
    ]
    assert links.cost("all-reduce", nbytes, (1,)) == pytest.approx(
        2 * (2 * alpha + 3 / 4 * nbytes / beta)
    )


def test_simulated_step_hand_computed(mlp):
    # Replicated: the sum of node costs (launch + one-device time), no communication.
    z = np.zeros(mlp.num_nodes, np.int64)
    r = simulate_sharding(mlp, z)
    assert r.communication_s == 0 and r.collectives == {}
    assert r.step_time_s == pytest.approx(float((mlp.launch_s + mlp.base_s).sum()))
    assert r.step_time_s == pytest.approx(total_cost(mlp.problem, z))
    # Data parallel: compute of split nodes divided by 8, plus one all-reduce per gradient
    # (w1, b1, w2) and the loss.
    dp = get("dp")(mlp)
    r = simulate_sharding(mlp, dp)
    assert r.collectives == {"all-reduce": 4}
    links = mlp.links
    expected = sum(
        links.cost("all-reduce", b, (0, 1)) for b in (64 * 256 * 4, 256 * 4, 256 * 32 * 4, 4)
    )
    assert r.communication_s == pytest.approx(expected)
    assert r.peak_memory < simulate_sharding(mlp, z).peak_memory


# --- lowering through XLA's SPMD partitioner ------------------------------------------


@pytest.mark.parametrize("method", ["replicated", "dp", "megatron", "greedy", "ilp"])
def test_methods_compile_and_match_unsharded(mlp, method):
    choice = get(method)(mlp, time_limit_s=5.0)
    text = annotate(mlp, choice).to_text()
    check = check_spmd(text, 8, None)
    assert check.correct, check.message
    charged = simulate_sharding(mlp, choice)
    optimized = check.executable.optimized_text
    emitted = count_collectives(optimized, per_array=True)
    emitted_bytes = collective_bytes(optimized)
    # The all-reduces are exactly the ones the simulator charged; the per-device bytes
    # XLA moves in all collectives are within 15 % of the charged bytes (XLA may do a
    # reshard with other collectives: all-to-all, collective-permute, partial gathers).
    assert emitted["all-reduce"] == charged.collectives.get("all-reduce", 0)
    assert emitted_bytes["all-reduce"] == pytest.approx(
        charged.collective_bytes.get("all-reduce", 0.0)
    )
    assert sum(emitted_bytes.values()) == pytest.approx(
        sum(charged.collective_bytes.values()), rel=0.15
    )


@pytest.mark.slow  # about 30-60 s; the Python 3.12 CI run leaves it out
def test_corpus_graph_dp_and_greedy_match_unsharded():
    from hlo_go import corpus

    sg = build_sharding(corpus.load("rnnlm_l2_scan", "unoptimized"), MESH, H100)
    for method in ("dp", "greedy"):
        check = check_spmd(annotate(sg, get(method)(sg)).to_text(), 8, None)
        assert check.correct, (method, check.message)


def test_inline_calls_keeps_results():
    def f(x, y):
        inner = jax.jit(lambda a, b: (jnp.sin(a) * b, a + b))
        u, v = inner(x, y)
        return inner(u, v)[0].sum()

    text = jax.jit(f).lower(jnp.ones((4, 8)), jnp.ones((4, 8))).as_text(dialect="hlo")
    module = parse_hlo(text)
    assert any(x.opcode == "call" for x in module.entry)
    inlined = inline_calls(module)
    assert not any(x.opcode in ("call", "get-tuple-element") for x in inlined.entry)
    args = random_inputs(module)
    want = run_executable(compile_hlo_text(text), args)
    got = run_executable(compile_hlo_text(inlined.to_text()), args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


# --- methods ----------------------------------------------------------------------------


def test_methods_registry_and_batch_inference(mlp):
    assert {"replicated", "dp", "megatron", "greedy", "ilp"} <= set(names())
    with pytest.raises(KeyError, match="unknown sharding method"):
        get("nope")
    assert infer_batch_size(mlp.module) == 32
    z = total_cost(mlp.problem, np.zeros(mlp.num_nodes, np.int64))
    best = total_cost(mlp.problem, get("ilp")(mlp, time_limit_s=5.0))
    assert best <= z + 1e-12
    assert best <= total_cost(mlp.problem, get("greedy")(mlp)) + 1e-12
    assert best <= total_cost(mlp.problem, get("core-greedy")(mlp)) + 1e-12


def test_ilp_reports_its_status_and_a_bound_below_its_cost(mlp):
    choice, solved = ilp_with_result(mlp, time_limit_s=5.0)
    np.testing.assert_array_equal(choice, get("ilp")(mlp, time_limit_s=5.0))
    cost = total_cost(mlp.problem, choice)
    assert solved.status == "optimal"  # 153 nodes: proved well within the limit
    assert solved.lower_bound <= cost * (1 + 1e-9)
    assert cost <= solved.lower_bound * (1 + 1e-6)  # optimal: the bound is tight
    assert gap_to_bound(3.0, 2.0) == pytest.approx(0.5)
    assert gap_to_bound(3.0, math.inf) is None and gap_to_bound(3.0, 0.0) is None


def test_memory_budget_makes_ilp_shard():
    sg = build_sharding(parse_hlo(_mlp_text(batch=4096)), MESH, H100)
    replicated = simulate_sharding(sg, np.zeros(sg.num_nodes, np.int64)).peak_memory
    tight = build_sharding(parse_hlo(_mlp_text(batch=4096)), MESH, H100,
                           memory_budget=replicated * 0.5)  # fmt: skip
    choice = get("ilp")(tight, time_limit_s=10.0)
    result = simulate_sharding(tight, choice)
    assert result.peak_memory <= replicated * 0.5 and not result.oom
    assert simulate_sharding(tight, np.zeros(tight.num_nodes, np.int64)).oom


def test_fit_memory_keeps_the_choice_where_it_fits():
    """A choice over the budget is made feasible, keeping its strategies where they fit;
    one that fits is returned as it is; ``prefer`` is what the greedy pass follows."""
    sg = build_sharding(parse_hlo(_mlp_text(batch=4096)), MESH, H100)
    replicated = np.zeros(sg.num_nodes, np.int64)
    np.testing.assert_array_equal(fit_memory(sg, replicated), replicated)  # no budget
    # Without a budget, the pass alone (no descent) follows ``prefer`` exactly.
    other = np.asarray(get("dp")(sg), np.int64)
    np.testing.assert_array_equal(solve_greedy(sg.problem, max_rounds=0, prefer=other), other)
    with pytest.raises(ValueError, match="prefer"):
        solve_greedy(sg.problem, prefer=np.full(sg.num_nodes, 99))
    budget = simulate_sharding(sg, replicated).peak_memory * 0.5
    tight = sg._replace(problem=sg.problem._replace(memory_budget=budget))
    assert simulate_sharding(tight, replicated).oom
    fitted = fit_memory(tight, replicated)
    result = simulate_sharding(tight, fitted)
    assert not result.oom and result.peak_memory <= budget
    kept = (fitted == 0).mean()
    assert 0.2 < kept < 1.0  # many nodes keep the preferred (replicated) strategy


def test_bad_choice_is_named(mlp):
    bad = np.zeros(mlp.num_nodes, np.int64)
    bad[3] = 99
    with pytest.raises(ValueError, match="node 3"):
        simulate_sharding(mlp, bad)


# --- the command --------------------------------------------------------------------


@pytest.mark.slow  # about 30-60 s; the Python 3.12 CI run leaves it out
def test_cli_shard_json(tmp_path, capsys):
    path = tmp_path / "mlp.hlo"
    path.write_text(_mlp_text())
    out = tmp_path / "sharded.hlo"
    code = cli_main(
        [
            "shard", str(path), "--mesh", "2x4", "--method", "dp", "--method", "ilp",
            "--time-limit", "5", "--measure", "--json", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    rows = {r["method"]: r for r in payload["rows"]}
    assert set(rows) == {"dp", "ilp"} and all(r["correct"] for r in rows.values())
    step = {name: r["simulated_step_ms"] for name, r in rows.items()}
    assert step["ilp"] <= step["dp"] + 1e-9
    assert rows["ilp"]["ilp_status"] == "optimal" and "ilp_status" not in rows["dp"]
    assert rows["ilp"]["ilp_lower_bound_ms"] <= step["ilp"] * (1 + 1e-9)
    assert 0 <= rows["ilp"]["ilp_gap_to_bound"] < 1e-6
    assert "sharding={" in out.read_text()
    assert math.isfinite(rows["dp"]["measured_cpu_ms"])
    assert payload["cluster"] == "host-cpu-8"  # the default: this host, as the mesh's devices


def test_cli_shard_bad_mesh(tmp_path, capsys):
    path = tmp_path / "mlp.hlo"
    path.write_text(_mlp_text())
    assert cli_main(["shard", str(path), "--mesh", "4x4", "--cluster", "h100x8"]) == 2
    assert "needs 16" in capsys.readouterr().err


def test_normwise_match_accepts_reordered_sums_only():
    from hlo_go.xla.spmd import _errors, _match_to_scale

    want = np.array([1000.0, -1000.0, 1e-3], dtype=np.float32)
    reordered = want + np.array([0, 0, 2e-3], dtype=np.float32)  # a sum near zero moved
    wrong = want * np.float32(1.01)
    ok, message = _match_to_scale([reordered], [want], [_errors(reordered, want)], None, "")
    assert ok and "normwise" in message
    ok, message = _match_to_scale([wrong], [want], [_errors(wrong, want)], None, "")
    assert not ok and "output 0" in message
