"""Tests of hlo_go.baselines: each heuristic's defining behaviour on hand-built graphs,
validity of every method on corpus graphs, searches, the registry and the CLI."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from hlo_go import baselines as B
from hlo_go import corpus
from hlo_go.decisions import Decisions, fusion_groups
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim import Cluster, Device, Link, get_cluster, simulate

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


def tiny_cluster(num_devices: int, *, capacity: float = 1e9) -> Cluster:
    device = TINY.replace(memory_capacity=capacity)
    links = [Link(i, j, 4.096e9, 1 * US) for i, j in itertools.permutations(range(num_devices), 2)]
    return Cluster(f"tiny{num_devices}", (device,) * num_devices, tuple(links))


def graph_of(body: str) -> OpGraph:
    return build_graph(parse_hlo(f"HloModule m\nENTRY e {{\n{body}\n}}\n"), validate=True)


def node(graph: OpGraph, name: str) -> int:
    return graph.node_index[name]


@pytest.fixture(scope="module")
def gpt2() -> OpGraph:
    return build_graph(corpus.load("gpt2_l2", "prefusion"))


# ---------------------------------------------------------------- placement


def two_towers(ops: int = 6) -> OpGraph:
    """Two chains over 1 MiB arrays, joined only through a scalar."""
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
    lines.append(f"%s = f32[] reduce(%a{ops - 1}, %zero), dimensions={{0}}, to_apply=%sum")
    lines.append("%sb = f32[262144] broadcast(%s), dimensions={}")
    lines.append(f"ROOT %out = f32[262144] add(%b{ops - 1}, %sb)")
    text = (
        "HloModule m\n%sum { %x = f32[] parameter(0)\n %y = f32[] parameter(1)\n"
        " ROOT %r = f32[] add(%x, %y) }\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
    )
    return build_graph(parse_hlo(text), validate=True)


def test_metis_cuts_few_bytes_and_balances():
    graph = two_towers()
    cluster = tiny_cluster(2)
    placement = B.metis_placement(graph, cluster)
    Decisions(placement, *Decisions.default(graph)[1:]).validate(graph, 2)
    assert set(placement.tolist()) == {0, 1}
    rng = np.random.default_rng(0)
    random_cuts = [
        B.cut_bytes(graph, rng.integers(2, size=graph.num_nodes)[graph.colocation_group])
        for _ in range(20)
    ]
    metis_cut = B.cut_bytes(graph, placement)
    # The towers go to different devices: at most the scalar and one big edge are cut.
    assert metis_cut <= 262144 * 4 + 4
    assert metis_cut < min(random_cuts)
    assert B.cut_bytes(graph, B.round_robin_placement(graph, cluster)) > 4 * metis_cut
    weights = B.task_costs(graph, cluster).mean_time
    per_device = np.bincount(placement, weights=weights, minlength=2)
    assert per_device.min() > 0.3 * per_device.sum()


def chain_and_branches() -> OpGraph:
    """A long chain of heavy ops and three short independent branches."""
    lines = ["%p = f32[65536] parameter(0)"]
    prev = "%p"
    for i in range(8):
        lines.append(f"%c{i} = f32[65536] exponential({prev})")
        prev = f"%c{i}"
    outs = [prev]
    for j in range(3):
        lines.append(f"%q{j} = f32[16384] parameter({j + 1})")
        lines.append(f"%s{j}a = f32[16384] exponential(%q{j})")
        lines.append(f"%s{j}b = f32[16384] exponential(%s{j}a)")
        outs.append(f"%s{j}b")
    shapes = ", ".join(["f32[65536]"] + ["f32[16384]"] * 3)
    lines.append(f"ROOT %t = ({shapes}) tuple({', '.join(outs)})")
    return graph_of("\n".join(lines))


def test_heft_keeps_the_critical_path_together_and_beats_one_device():
    graph = chain_and_branches()
    cluster = tiny_cluster(4)
    placement = B.heft_placement(graph, cluster)
    chain = [node(graph, f"c{i}") for i in range(8)]
    assert len(set(placement[chain].tolist())) == 1, "the chain must not pay transfers"
    branches = [node(graph, f"s{j}a") for j in range(3)]
    assert set(placement[branches].tolist()) != set(placement[chain].tolist())
    heft = B.get("heft+critical-path")(graph, cluster)
    single = B.get("single-device+critical-path")(graph, cluster)
    rr = B.get("round-robin+critical-path")(graph, cluster)
    t_heft = simulate(graph, cluster, heft).step_time
    assert t_heft < simulate(graph, cluster, single).step_time
    assert t_heft < simulate(graph, cluster, rr).step_time
    # The chain alone is a lower bound, and HEFT gets within 5% of it.
    costs = B.task_costs(graph, cluster)
    assert t_heft <= 1.05 * costs.time[0, chain].sum()


@pytest.mark.parametrize("algorithm", ["m-etf", "m-sct"])
def test_baechi_placers_respect_memory(algorithm: str):
    # Four independent towers of 1 MiB values; a device holds about two towers.
    lines = []
    outs = []
    for t in range(4):
        lines.append(f"%p{t} = f32[262144] parameter({t})")
        prev = f"%p{t}"
        for i in range(3):
            lines.append(f"%t{t}_{i} = f32[262144] tanh({prev})")
            prev = f"%t{t}_{i}"
        outs.append(prev)
    lines.append(f"ROOT %r = ({', '.join(['f32[262144]'] * 4)}) tuple({', '.join(outs)})")
    graph = graph_of("\n".join(lines))
    cluster = tiny_cluster(4, capacity=2.5 * 2**20 * 2)
    single = simulate(graph, cluster, Decisions.default(graph))
    assert single.oom
    placement, _ = B.list_schedule_placement(graph, cluster, algorithm)
    result = simulate(graph, cluster, Decisions(placement, *Decisions.default(graph)[1:]))
    assert not result.oom
    assert len(set(placement.tolist())) >= 2


def test_m_sct_favourite_children_form_a_matching():
    graph = chain_and_branches()
    child = B.favourite_children(graph)
    kids = child[child >= 0]
    assert kids.size == np.unique(kids).size  # one favourite parent per child
    for i in range(7):  # along the chain each node's heaviest edge goes to the next one
        assert child[node(graph, f"c{i}")] == node(graph, f"c{i + 1}")


def layered_text(layers: int = 8) -> str:
    """Forward layers, then their backward ops in reverse, with JAX-style op_names."""
    lines = ["%x = f32[4096] parameter(0)"]
    prev = "%x"
    for i in range(layers):
        name = f'metadata={{op_name="jit(step)/Model/layer_{i}/tanh"}}'
        lines.append(f"%f{i} = f32[4096] tanh({prev}), {name}")
        prev = f"%f{i}"
    for i in reversed(range(layers)):
        name = f'metadata={{op_name="jit(step)/transpose(jvp(Model))/layer_{i}/mul"}}'
        lines.append(f"%g{i} = f32[4096] multiply({prev}, %f{i}), {name}")
        prev = f"%g{i}"
    lines.append(f"ROOT %out = f32[4096] negate({prev})")
    return "HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


LAYERED_TEXT = layered_text()


def layered_model() -> OpGraph:
    return build_graph(parse_hlo(LAYERED_TEXT), validate=True)


def test_expert_keeps_scopes_contiguous_and_balanced():
    graph = layered_model()
    cluster = tiny_cluster(4)
    placement = B.expert_placement(graph, cluster)
    layer_device = []
    for i in range(8):
        devices = {int(placement[node(graph, f"f{i}")]), int(placement[node(graph, f"g{i}")])}
        assert len(devices) == 1, f"layer {i}'s forward and backward ops are split: {devices}"
        layer_device.append(devices.pop())
    assert layer_device == sorted(layer_device), "stages must follow the forward order"
    assert layer_device == [0, 0, 1, 1, 2, 2, 3, 3]
    assert B.scope_path("jit(f)/transpose(jvp(Model))/layer_3/dot_general") == (
        "f",
        "Model",
        "layer_3",
    )


# ---------------------------------------------------------------- scheduling


def test_critical_path_ranks_by_hand():
    graph = graph_of(
        "\n".join(
            [
                "%p = f32[1024] parameter(0)",
                "%a1 = f32[1024] exponential(%p)",
                "%a2 = f32[1024] exponential(%a1)",
                "%a3 = f32[1024] exponential(%a2)",
                "%b1 = f32[1024] negate(%p)",
                "ROOT %t = (f32[1024], f32[1024]) tuple(%a3, %b1)",
            ]
        )
    )
    cluster = tiny_cluster(1)
    time = B.task_costs(graph, cluster).time[0]
    rank = B.upward_rank(graph, cluster, np.zeros(graph.num_nodes, np.int32))
    a1, a2, a3, b1 = (node(graph, n) for n in ("a1", "a2", "a3", "b1"))
    assert rank[a3] == pytest.approx(time[a3])
    assert rank[a1] == pytest.approx(time[a1] + time[a2] + time[a3])
    assert rank[b1] == pytest.approx(time[b1])
    priority = B.critical_path_priority(graph, cluster, np.zeros(graph.num_nodes, np.int32))
    assert priority[a1] > priority[b1]  # the long branch goes first


def test_upward_rank_matches_a_reference_with_transfers(gpt2: OpGraph):
    cluster = get_cluster("v100x4")
    placement = B.metis_placement(gpt2, cluster)
    rank = B.upward_rank(gpt2, cluster, placement)
    costs = B.task_costs(gpt2, cluster)
    succ: dict[int, list[tuple[int, float]]] = {i: [] for i in range(gpt2.num_nodes)}
    for s, r, b in zip(gpt2.senders, gpt2.receivers, gpt2.edge_bytes, strict=True):
        a, d = placement[s], placement[r]
        comm = costs.latency[a, d] + b * costs.inv_bandwidth[a, d] if a != d and b else 0.0
        succ[int(s)].append((int(r), comm))
    for s, r in zip(gpt2.control_senders, gpt2.control_receivers, strict=True):
        succ[int(s)].append((int(r), 0.0))
    ref = np.zeros(gpt2.num_nodes)
    for u in gpt2.topo_order[::-1]:
        ref[u] = costs.time[placement[u], u] + max(
            (c + ref[v] for v, c in succ[int(u)]), default=0.0
        )
    np.testing.assert_allclose(rank, ref, rtol=1e-9, atol=1e-15)


# ---------------------------------------------------------------- fusion


def test_xla_cpu_like_never_fuses_expensive_producer_into_reusing_consumer():
    graph = graph_of(
        "\n".join(
            [
                "%p = f32[128] parameter(0)",
                "%q = f32[128,128] parameter(1)",
                "%e = f32[128] exponential(%p)",
                "%eb = f32[128,128] broadcast(%e), dimensions={0}",
                "%m = f32[128,128] multiply(%eb, %q)",
                "%n = f32[128] negate(%p)",
                "%nb = f32[128,128] broadcast(%n), dimensions={0}",
                "%big = f32[128,128] constant({...})",
                "%s = f32[128,128] add(%nb, %m)",
                "ROOT %r = f32[128,128] add(%s, %big)",
            ]
        )
    )
    cluster = tiny_cluster(1)
    d = B.get("xla-cpu-like")(graph, cluster)
    group = fusion_groups(graph, d.placement, d.fusion_priority)
    g = {name: group[node(graph, name)] for name in ("e", "eb", "m", "n", "nb", "s", "big")}
    assert g["e"] != g["eb"], "exp must not be recomputed for each broadcast element"
    assert g["n"] == g["nb"] == g["s"], "a cheap producer fuses into the broadcast"
    assert g["big"] != g["s"], "non-scalar constants stay out"
    # fuse-all-legal does fuse the expensive producer: the rule is what keeps it out.
    d_all = B.get("fuse-all-legal")(graph, cluster)
    group_all = fusion_groups(graph, d_all.placement, d_all.fusion_priority)
    assert group_all[node(graph, "e")] == group_all[node(graph, "eb")]


def test_xla_cpu_like_rule_holds_on_a_corpus_graph(gpt2: OpGraph):
    cluster = get_cluster("v100x4")
    d = B.get("xla-cpu-like")(gpt2, cluster)
    group = fusion_groups(gpt2, d.placement, d.fusion_priority)
    inside = group[gpt2.senders] == group[gpt2.receivers]
    bad = inside & B.expensive_nodes(gpt2)[gpt2.senders] & B.reuses_operand(gpt2)
    assert not bad.any()
    assert np.unique(group).size < gpt2.num_nodes * 0.6  # it does fuse


def test_priority_fusion_beats_no_fusion(gpt2: OpGraph):
    cluster = get_cluster("h100x8")
    none = simulate(gpt2, cluster, Decisions.default(gpt2)).step_time
    d = B.get("priority-fusion")(gpt2, cluster)
    assert simulate(gpt2, cluster, d).step_time < 0.5 * none


# ---------------------------------------------------------------- every method is valid


@pytest.mark.parametrize("graph_name", ["rnnlm_l2_scan", "gpt2_l2", "resnet_26"])
def test_every_method_is_valid_on_corpus_graphs(graph_name: str):
    graph = build_graph(corpus.load(graph_name, "prefusion"))
    methods = [
        *B.names("placement"),
        *(f"single-device+{s}" for s in B.names("scheduling")),
        *B.names("fusion"),
        *B.STANDARD_METHODS,
    ]
    for cluster_name in ("v100x4", "h100x8"):
        cluster = get_cluster(cluster_name)
        for method in dict.fromkeys(methods):
            d = B.get(method)(graph, cluster, seed=1, budget=6)
            assert isinstance(d, Decisions)
            d.validate(graph, cluster.num_devices)
            result = simulate(graph, cluster, d)
            assert result.step_time > 0, method


# ---------------------------------------------------------------- search


def test_search_improves_on_its_start_and_records_a_curve(gpt2: OpGraph):
    cluster = get_cluster("v100x4")
    found = B.run_search(gpt2, cluster, "simulated-annealing", budget=40, seed=0)
    curve = found.curve
    assert found.evaluations == len(curve) == 40
    assert found.best_step_time < found.start_step_time
    assert np.all(np.diff(curve.best_step_time) <= 0)
    assert np.all(np.diff(curve.seconds) >= 0)
    assert list(curve)[-1][2] == found.best_step_time == curve.at_evaluations(10**6)
    assert simulate(gpt2, cluster, found.best).step_time == pytest.approx(found.best_step_time)
    again = B.run_search(gpt2, cluster, "simulated-annealing", budget=40, seed=0)
    assert again.best_step_time == found.best_step_time  # deterministic per seed
    assert B.Curve.from_dict(curve.to_dict()).at_evaluations(5) == curve.at_evaluations(5)


def test_search_starts_exactly_at_its_heuristic_starts(gpt2: OpGraph):
    cluster = get_cluster("h100x8")
    starts = ["expert+critical-path+xla-cpu-like", "metis+critical-path+fuse-all-legal"]
    found = B.run_search(gpt2, cluster, "simulated-annealing", budget=4, start=starts)
    expected = [simulate(gpt2, cluster, B.get(s)(gpt2, cluster)).step_time for s in starts]
    assert found.curve.best_step_time[0] == pytest.approx(expected[0])
    assert found.curve.best_step_time[1] == pytest.approx(min(expected))
    assert found.best_step_time <= min(expected)


@pytest.mark.parametrize("method", ["random-search", "evolutionary"])
def test_other_searches_improve(gpt2: OpGraph, method: str):
    cluster = get_cluster("h100x8")
    found = B.run_search(gpt2, cluster, method, budget=30, seed=3)
    assert found.best_step_time < found.start_step_time
    assert found.stopped_by == "budget"


def test_search_time_limit_and_encoding(gpt2: OpGraph):
    cluster = get_cluster("v100x4")
    found = B.run_search(gpt2, cluster, "random-search", budget=1000, time_limit=0.0)
    assert found.evaluations == 1 and found.stopped_by == "time"
    space = B.SearchSpace(gpt2, cluster)
    start = B.get("critical-path+xla-cpu-like")(gpt2, cluster)
    decoded = space.decode(space.encode(start))
    assert np.array_equal(decoded.placement, start.placement)
    a = simulate(gpt2, cluster, start).step_time
    assert simulate(gpt2, cluster, decoded).step_time == pytest.approx(a)
    with pytest.raises(KeyError, match="unknown search method 'anneal'"):
        B.run_search(gpt2, cluster, "anneal")


@pytest.mark.parametrize("method", ["simulated-annealing", "evolutionary", "random-search"])
def test_placement_only_search_keeps_the_fixed_schedule_and_fusion(gpt2: OpGraph, method: str):
    cluster = get_cluster("v100x4")
    fixed = B.get("critical-path+xla-cpu-like")(gpt2, cluster)
    found = B.run_search(
        gpt2, cluster, method, budget=25, seed=1, tasks=("placement",), fixed=fixed,
        start=["single-device", "metis"],
    )  # fmt: skip
    assert np.array_equal(found.best.schedule_priority, fixed.schedule_priority)
    assert np.array_equal(found.best.fusion_priority, fixed.fusion_priority)
    assert simulate(gpt2, cluster, found.best).step_time == pytest.approx(found.best_step_time)
    if method != "random-search":  # starts at one device with fixed's schedule and fusion
        one_device = simulate(gpt2, cluster, fixed).step_time
        assert found.curve.best_step_time[0] == pytest.approx(one_device)
        assert found.best_step_time <= one_device
    with pytest.raises(ValueError, match="non-empty subset"):
        B.SearchSpace(gpt2, cluster, tasks=("placement", "sharding"))


# ---------------------------------------------------------------- registry and CLI


def test_registry_names_and_errors():
    assert B.names("placement") == [
        "single-device", "round-robin", "expert", "metis", "heft", "m-etf", "m-sct",
    ]  # fmt: skip
    assert B.get("critical-path+metis+xla-cpu-like").name == "metis+critical-path+xla-cpu-like"
    assert B.combine(placement="heft").name == "heft+fifo+no-fusion"
    with pytest.raises(B.UnknownMethodError, match="unknown baseline 'metiss' in 'metiss\\+fifo'"):
        B.get("metiss+fifo")
    with pytest.raises(
        B.UnknownMethodError, match="two placement methods \\('metis' and 'heft'\\)"
    ):
        B.get("metis+heft")
    with pytest.raises(B.UnknownMethodError, match="cannot be combined"):
        B.get("simulated-annealing+metis")
    with pytest.raises(B.UnknownMethodError, match="unknown fusion method 'fast'"):
        B.combine(fusion="fast")
    with pytest.raises(ValueError, match="unknown method kind"):
        B.names("placements")


def test_baseline_command(tmp_path, capsys):
    from hlo_go.cli import main

    out_csv = tmp_path / "rows.csv"
    code = main([
        "baseline", "gpt2_l2", "--cluster", "v100x4", "--method", "metis",
        "--method", "random-search", "--budget", "3", "--json", "-", "--csv", str(out_csv),
    ])  # fmt: skip
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["metis", "random-search"]
    assert rows[1]["evaluations"] == 3 and len(rows[1]["curve"]["evaluations"]) == 3
    assert out_csv.read_text().splitlines()[0].startswith("graph,cluster,method,step_time")
    code = main([
        "baseline", "--corpus", "--graphs", "rnnlm_l2_scan,gpt2_l2", "--cluster", "h100x8",
        "--method", "xla-cpu-like", "--method", "single-device",
        "--plot", str(tmp_path / "bars.png"),
    ])  # fmt: skip
    assert code == 0
    assert "*" in capsys.readouterr().out
    assert (tmp_path / "bars.png").stat().st_size > 1000
    hlo = tmp_path / "layers.hlo"
    hlo.write_text(LAYERED_TEXT)
    assert main(["baseline", str(hlo), "--cluster", "v100x4", "--method", "expert"]) == 0
    assert "layers" in capsys.readouterr().out
    # an unknown method is a bad command line (2), found when the flags are parsed
    assert main(["baseline", "gpt2_l2", "--cluster", "v100x4", "--method", "nope"]) == 2
    assert "unknown baseline 'nope'" in capsys.readouterr().err
    # an input that cannot be read fails (1); the others still run
    code = main(["baseline", "no_such_graph", str(hlo), "--cluster", "v100x4", "--method", "metis"])
    assert code == 1
    out = capsys.readouterr().out
    assert "neither a file nor a corpus graph" in out and "layers" in out


def test_speedups_are_geometric_means_over_the_graphs_both_ran_on():
    from hlo_go.baselines.report import BaselineRow, speedups

    def row(graph: str, method: str, step_time: float) -> BaselineRow:
        return BaselineRow(graph, "c", method, step_time, False, 0.0, 1, 0, 1, 0, None)

    rows = [
        row("a", "single-device", 4.0),
        row("b", "single-device", 9.0),
        row("a", "m", 1.0),  # 4x
        row("b", "m", 9.0),  # 1x
        row("b", "n", 3.0),  # 3x, only on b
        row("z", "n", 1.0),  # no reference on z: left out
    ]
    got = speedups(rows)
    assert list(got) == ["single-device", "m", "n"]
    assert got == pytest.approx({"single-device": 1.0, "m": 2.0, "n": 3.0})
