"""Tests of priority-based fusion grouping (hlo_go.decisions.fusion_groups)."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_go.decisions import (
    Decisions,
    FusionGroupError,
    FusionLimits,
    candidate_edges,
    check_fusion_groups,
    edge_priority,
    fusible_nodes,
    fusion_group_names,
    fusion_groups,
    graph_output_dims,
    module_output_dims,
)
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import parse_hlo


def graph_of(body: str, extra: str = "") -> OpGraph:
    return build_graph(parse_hlo(f"HloModule m\n{extra}\nENTRY e {{\n{body}\n}}\n"), validate=True)


def named_groups(graph: OpGraph, group: np.ndarray) -> list[list[str]]:
    return fusion_group_names(graph, group)


def ones(graph: OpGraph) -> np.ndarray:
    return np.ones(graph.num_nodes, np.float32)


def zeros(graph: OpGraph) -> np.ndarray:
    return np.zeros(graph.num_nodes, np.int32)


CHAIN = """
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] exponential(a)
  ROOT c = f32[8] add(b, a)
"""


def test_chain_fuses_into_one_group_without_the_parameter():
    g = graph_of(CHAIN)
    group = fusion_groups(g, zeros(g), ones(g))
    assert named_groups(g, group) == [["a", "b", "c"]]
    assert group.tolist() == [0, 1, 1, 1]  # labelled by the smallest member


def test_priority_zero_keeps_a_node_out():
    g = graph_of(CHAIN)
    priority = ones(g)
    priority[g.node_index["a"]] = 0
    assert named_groups(g, fusion_groups(g, zeros(g), priority)) == [["b", "c"]]
    # Without b, {a, c} would not be convex (a -> b -> c): nothing fuses.
    priority = ones(g)
    priority[g.node_index["b"]] = 0
    assert named_groups(g, fusion_groups(g, zeros(g), priority)) == []


def test_no_priority_no_fusion():
    g = graph_of(CHAIN)
    group = fusion_groups(g, zeros(g), np.zeros(g.num_nodes, np.float32))
    assert group.tolist() == list(range(g.num_nodes))


def test_devices_split_groups():
    g = graph_of(CHAIN)
    placement = zeros(g)
    placement[g.node_index["c"]] = 1
    assert named_groups(g, fusion_groups(g, placement, ones(g))) == [["a", "b"]]


def test_edges_are_visited_by_priority():
    # b's only operand is a; c reads b and a. Both edges into c compete with a -> b; the
    # highest-priority edge wins first, and with max_nodes = 2 nothing else joins.
    g = graph_of(CHAIN)
    priority = np.array([0, 1, 1, 3], np.float32)  # edge priority = min of the two ends
    edges = candidate_edges(g, zeros(g), priority)
    pairs = [(g.names[g.senders[e]], g.names[g.receivers[e]]) for e in edges]
    assert pairs == [("a", "b"), ("b", "c"), ("a", "c")]  # ties keep the graph's edge order
    priority = np.array([0, 1, 2, 3], np.float32)
    edges = candidate_edges(g, zeros(g), priority)
    assert (g.names[g.senders[edges[0]]], g.names[g.receivers[edges[0]]]) == ("b", "c")
    group = fusion_groups(g, zeros(g), priority, limits=FusionLimits(max_nodes=2))
    assert named_groups(g, group) == [["b", "c"]]
    assert edge_priority(g, priority).tolist() == [0, 1, 2, 1]


def test_merges_that_would_create_a_cycle_are_refused():
    # a -> b directly and a -> c -> b; c is not fusible (priority 0), so {a, b} would
    # need c's output while c needs a's: a cycle.
    g = graph_of(
        """
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  c = f32[8] exponential(a)
  ROOT b = f32[8] add(a, c)
"""
    )
    priority = ones(g)
    priority[g.node_index["c"]] = 0
    assert named_groups(g, fusion_groups(g, zeros(g), priority)) == []
    # With c fusible all three fuse.
    assert named_groups(g, fusion_groups(g, zeros(g), ones(g))) == [["a", "c", "b"]]


def test_cycles_through_other_groups_are_refused():
    # x1 -> x2, y1 -> y2, and cross edges x1 -> y2, y1 -> x2. Once {x1, y2} is a group,
    # {y1, x2} would need it (y1 -> y2) and feed it (x1 -> x2): a cycle through a group.
    g = graph_of(
        """
  p = f32[8] parameter(0)
  x1 = f32[8] negate(p)
  y1 = f32[8] exponential(p)
  x2 = f32[8] add(x1, y1)
  y2 = f32[8] multiply(y1, x1)
  ROOT t = (f32[8], f32[8]) tuple(x2, y2)
"""
    )
    priority = np.zeros(g.num_nodes, np.float32)
    for name, value in (("x1", 3), ("y2", 3), ("y1", 2), ("x2", 2)):
        priority[g.node_index[name]] = value
    group = fusion_groups(g, zeros(g), priority, limits=FusionLimits(max_nodes=2))
    assert named_groups(g, group) == [["x1", "y2"]]
    check_fusion_groups(g, group, zeros(g), max_nodes=2)
    both = group.copy()
    both[g.node_index["x2"]] = g.node_index["y1"]
    with pytest.raises(FusionGroupError, match="not convex"):
        check_fusion_groups(g, both, zeros(g))


REDUCE = """
  p = f32[8] parameter(0)
  z = f32[] constant(0)
  a = f32[8] negate(p)
  r = f32[] reduce(a, z), dimensions={0}, to_apply=add_f
  ROOT t = (f32[8], f32[]) tuple(a, r)
"""
ADD_F = """
add_f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""


def test_multi_output_groups_need_outputs_of_one_shape():
    g = graph_of(REDUCE, ADD_F)
    module = parse_hlo(f"HloModule m\n{ADD_F}\nENTRY e {{\n{REDUCE}\n}}\n")
    for dims in (None, module_output_dims(module)):
        group = fusion_groups(g, zeros(g), ones(g), output_dims=dims)
        # a and r are both used by the tuple: outputs f32[8] and f32[] cannot share a group.
        assert named_groups(g, group) == [["z", "r"]]
        check_fusion_groups(g, group, zeros(g), output_dims=dims)
    bad = np.arange(g.num_nodes)
    bad[g.node_index["r"]] = g.node_index["a"]
    with pytest.raises(FusionGroupError, match="outputs of different dimensions"):
        check_fusion_groups(g, bad, zeros(g))


def test_output_dims_keys():
    text = "HloModule m\nENTRY e {\n p = f32[4,8] parameter(0)\n ROOT t = f32[8,4] transpose(p), dimensions={1,0}\n}\n"
    module = parse_hlo(text)
    g = build_graph(module)
    exact = module_output_dims(module)
    proxy = graph_output_dims(g)
    assert exact[0] != exact[1]
    assert proxy[0] == proxy[1]  # the documented blind spot of the proxy


def test_check_fusion_groups_rejects_illegal_groupings():
    g = graph_of(CHAIN)
    with pytest.raises(FusionGroupError, match="parameter"):
        check_fusion_groups(g, np.zeros(g.num_nodes, np.int64), zeros(g))
    placement = zeros(g)
    placement[g.node_index["c"]] = 1
    with pytest.raises(FusionGroupError, match="another device"):
        check_fusion_groups(g, np.array([0, 1, 1, 1]), placement)
    with pytest.raises(FusionGroupError, match="members"):
        check_fusion_groups(g, np.array([0, 1, 1, 1]), zeros(g), max_nodes=2)
    # {a, c} without b is not convex: a -> b -> c leaves and re-enters it.
    with pytest.raises(FusionGroupError, match="not convex"):
        check_fusion_groups(g, np.array([0, 1, 2, 1]), zeros(g))


def test_decisions_method():
    g = graph_of(CHAIN)
    decisions = Decisions(zeros(g), np.zeros(g.num_nodes, np.float32), ones(g))
    assert decisions.fusion_groups(g).tolist() == fusion_groups(g, zeros(g), ones(g)).tolist()


# ---------------------------------------------------------------------------------------------
# Against a slow reference, and legality on real graphs.


def _reference(graph: OpGraph, placement: np.ndarray, priority: np.ndarray, max_nodes: int):
    """The grouping rule with an explicit cycle check on the contracted graph."""
    n = graph.num_nodes
    label = list(range(n))
    members = {i: {i} for i in range(n)}
    src = np.concatenate([graph.senders, graph.control_senders]).tolist()
    dst = np.concatenate([graph.receivers, graph.control_receivers]).tolist()
    dims = graph_output_dims(graph)
    data_users: dict[int, list[int]] = {}
    for s, r in zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True):
        data_users.setdefault(s, []).append(r)

    def creates_cycle(a: int, b: int) -> bool:
        succ: dict[int, set[int]] = {}
        for s, r in zip(src, dst, strict=True):
            if label[s] != label[r]:
                succ.setdefault(label[s], set()).add(label[r])
        stack = [g for g in succ.get(a, ()) if g != b]
        seen = set(stack)
        while stack:
            g = stack.pop()
            for h in succ.get(g, ()):
                if h == b:
                    return True
                if h not in seen:
                    seen.add(h)
                    stack.append(h)
        return False

    for e in candidate_edges(graph, placement, priority).tolist():
        a, b = label[int(graph.senders[e])], label[int(graph.receivers[e])]
        if a == b or len(members[a]) + len(members[b]) > max_nodes:
            continue
        union = members[a] | members[b]
        outputs = {
            m
            for m in union
            if m == graph.root or any(label[u] not in (a, b) for u in data_users.get(m, ()))
        }
        if len({int(dims[m]) for m in outputs}) > 1 or creates_cycle(a, b):
            continue
        for m in members.pop(b):
            label[m] = a
        members[a] = union
    smallest = {g: min(ms) for g, ms in members.items()}
    return np.array([smallest[label[v]] for v in range(n)])


def _random_module(rng: np.random.Generator, size: int) -> str:
    lines = [
        "  p0 = f32[4] parameter(0)",
        "  p1 = f32[4] parameter(1)",
        "  q = f32[2] parameter(2)",
    ]
    values = ["p0", "p1"]
    small = ["q"]
    for i in range(size):
        roll = rng.random()
        if roll < 0.15 and values:
            x = values[rng.integers(len(values))]
            lines.append(f"  sl{i} = f32[2] slice({x}), slice={{[0:2]}}")
            small.append(f"sl{i}")
        elif roll < 0.25:
            x, y = small[rng.integers(len(small))], small[rng.integers(len(small))]
            lines.append(f"  v{i} = f32[4] concatenate({x}, {y}), dimensions={{0}}")
            values.append(f"v{i}")
        else:
            op = ["add", "multiply", "subtract", "maximum"][rng.integers(4)]
            x = values[rng.integers(max(1, len(values) - 6), len(values))]
            y = values[rng.integers(len(values))]
            lines.append(f"  v{i} = f32[4] {op}({x}, {y})")
            values.append(f"v{i}")
    tail = values[-3:] + small[-2:]
    shapes = ", ".join("f32[2]" if t in small else "f32[4]" for t in tail)
    lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(tail)})")
    return "HloModule r\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


@pytest.mark.parametrize("seed", range(12))
def test_matches_the_reference_on_random_graphs(seed: int):
    rng = np.random.default_rng(seed)
    g = build_graph(parse_hlo(_random_module(rng, 40)), validate=True)
    n = g.num_nodes
    placement = (rng.random(n) < 0.2).astype(np.int32)[g.colocation_group]
    priority = np.where(rng.random(n) < 0.8, rng.integers(1, 4, n), 0).astype(np.float32)
    for max_nodes in (3, 8, 64):
        limits = FusionLimits(max_nodes=max_nodes, search_budget=10**9)
        group = fusion_groups(g, placement, priority, limits=limits)
        assert group.tolist() == _reference(g, placement, priority, max_nodes).tolist()
        check_fusion_groups(g, group, placement, max_nodes=max_nodes)


# The bundled corpus ships these graphs: one missing is a failure, not a skip.
CORPUS_NAMES = ("gnmt_l2_unrolled", "resnet_26", "rnnlm_l2_scan", "bert_l2")


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_groupings_on_corpus_graphs_are_legal(name: str):
    from hlo_go import corpus

    module = corpus.load(name, "prefusion")
    g = build_graph(module)
    n = g.num_nodes
    dims = module_output_dims(module)
    rng = np.random.default_rng(0)
    for devices, budget in ((1, 256), (4, 256), (1, 8)):
        placement = rng.integers(0, devices, n).astype(np.int32)[g.colocation_group]
        priority = rng.random(n).astype(np.float32)
        limits = FusionLimits(max_nodes=32, search_budget=budget)
        group = fusion_groups(g, placement, priority, output_dims=dims, limits=limits)
        check_fusion_groups(g, group, placement, output_dims=dims, max_nodes=32)
        assert (~fusible_nodes(g) <= (np.bincount(group, minlength=n)[group] == 1)).all()
        again = fusion_groups(g, placement, priority, output_dims=dims, limits=limits)
        assert np.array_equal(group, again)


def test_groups_are_accepted_by_xla_lowering():
    from hlo_go.xla import apply_fusion
    from hlo_go.xla.bridge import xla_accepts

    g_text = f"HloModule m\n{ADD_F}\nENTRY e {{\n{REDUCE}\n}}\n"
    module = parse_hlo(g_text)
    g = build_graph(module)
    group = fusion_groups(g, zeros(g), ones(g), output_dims=module_output_dims(module))
    fused = apply_fusion(module, fusion_group_names(g, group))
    accepted, message = xla_accepts(fused.to_text())
    assert accepted, message
