"""Tests of hlo_go.graph: flattening, macro-node costs, features, colocation, padding."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import hlo_samples
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

import hlo_go.graph.features as features_module
from hlo_go.graph import (
    FEATURE_NAMES,
    MATRIX_KINDS,
    OPCODE_VOCAB,
    Bucket,
    OpGraph,
    build_graph,
    canonical_opcode,
    infer_trip_count,
    next_power_of_two,
    opcode_id,
    to_graphs_tuple,
    while_trip_count,
)
from hlo_go.hlo import (
    HloComputation,
    HloModule,
    computation_cost,
    instruction_cost,
    load_hlo,
    module_cost,
    parse_hlo,
)
from hlo_go.xla import capture_prefusion

_DATA = Path(__file__).parent / "data" / "xla_style"

# --------------------------------------------------------------------------- helpers


def _callee(module: HloModule, call_value: str) -> HloComputation:
    return module.computations[call_value.strip().lstrip("%")]


def flattened_count(module: HloModule, comp: HloComputation | None = None) -> int:
    """Instructions of the entry with every call inlined (callee parameters vanish)."""
    comp = module.entry if comp is None else comp
    total = 0
    for instr in comp.instructions:
        if instr.opcode == "call":
            callee = _callee(module, instr.attributes["to_apply"])
            total += flattened_count(module, callee) - len(callee.parameters)
        else:
            total += 1
    return total


def node_instruction(module: HloModule, name: str) -> Any:
    """The HLO instruction a node name stands for (``call/.../instr``)."""
    comp = module.entry
    *calls, last = name.split("/")
    for call in calls:
        comp = _callee(module, comp.instruction(call).attributes["to_apply"])
    return comp.instruction(last)


def leaf_bytes(shape: Any) -> int:
    return sum(leaf.byte_size() for leaf in shape.leaves() if leaf.is_array)


def assert_acyclic(graph: OpGraph) -> None:
    """Kahn's algorithm over data and control edges, independent of topo_order."""
    n = graph.num_nodes
    src = np.concatenate([graph.senders, graph.control_senders])
    dst = np.concatenate([graph.receivers, graph.control_receivers])
    indegree = np.bincount(dst, minlength=n)
    successors: dict[int, list[int]] = {}
    for s, r in zip(src.tolist(), dst.tolist(), strict=True):
        successors.setdefault(s, []).append(r)
    ready = [i for i in range(n) if indegree[i] == 0]
    seen = 0
    while ready:
        node = ready.pop()
        seen += 1
        for succ in successors.get(node, []):
            indegree[succ] -= 1
            if indegree[succ] == 0:
                ready.append(succ)
    assert seen == n, "graph has a cycle"


def check_graph(module: HloModule, graph: OpGraph) -> None:
    """Every invariant the issue asks for, checked independently of validate()."""
    graph.validate()
    n = graph.num_nodes
    assert n == flattened_count(module)
    assert "call" not in graph.opcode_names
    assert_acyclic(graph)
    position = np.empty(n, dtype=np.int64)
    position[graph.topo_order] = np.arange(n)
    assert sorted(graph.topo_order.tolist()) == list(range(n))
    assert (position[graph.senders] < position[graph.receivers]).all()
    instrs = [node_instruction(module, name) for name in graph.names]
    expected_out = np.array([leaf_bytes(i.shape) for i in instrs], dtype=np.int64)
    np.testing.assert_array_equal(graph.bytes_out, expected_out)
    np.testing.assert_array_equal(graph.edge_bytes, expected_out[graph.senders])
    assert graph.features.shape == (n, len(FEATURE_NAMES))
    assert graph.features.dtype == np.float32
    assert np.isfinite(graph.features).all()
    assert graph.feature("is_root").sum() == 1 and graph.feature("is_root")[graph.root] == 1
    assert graph.feature("is_parameter").sum() == len(module.entry.parameters)
    assert [OPCODE_VOCAB[i] for i in graph.opcode] == [canonical_opcode(i.opcode) for i in instrs]
    assert OPCODE_VOCAB.index("<unknown>") not in graph.opcode
    # Every distinct (operand, user) pair inside the flattened entry is one edge.
    pairs = set(zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True))
    assert len(pairs) == graph.num_edges
    operand_edges = sum(len(set(i.operands)) for i in instrs if i.opcode != "parameter")
    assert graph.num_edges <= operand_edges


@functools.cache
def sample_module(name: str, stage: str) -> HloModule:
    if stage == "prefusion":
        fn, args = hlo_samples.SAMPLES[name]()
        return capture_prefusion(fn, *args)
    return parse_hlo(hlo_samples.hlo_text(name, stage))


# --------------------------------------------------------------------------- real modules

REAL = [
    ("cnn_train_step", "unoptimized"),
    ("cnn_train_step", "optimized"),
    ("cnn_train_step", "prefusion"),
    ("lstm_scan_train_step", "unoptimized"),
    ("lstm_scan_train_step", "optimized"),
    ("lstm_scan_train_step", "prefusion"),
    ("cond_switch", "unoptimized"),
    ("cond_switch", "optimized"),
    ("cond_switch", "prefusion"),
    ("custom_calls", "unoptimized"),
    ("custom_calls", "optimized"),
    ("custom_calls", "prefusion"),
    ("collectives", "unoptimized"),
    ("collectives", "optimized"),
    ("collectives", "prefusion"),
    ("misc", "unoptimized"),
    ("misc", "optimized"),
    ("rng", "optimized"),
    ("transformer_train_step", "optimized"),
]


@pytest.mark.parametrize(("name", "stage"), REAL, ids=[f"{n}-{s}" for n, s in REAL])
def test_real_module_invariants(name: str, stage: str) -> None:
    module = sample_module(name, stage)
    graph = build_graph(module, validate=True)
    check_graph(module, graph)
    total = graph.flops.sum()
    if "while" in graph.opcode_names:
        # XLA counts a loop body once; the graph multiplies by the trip count.
        assert total > module_cost(module).flops
    else:
        # Calls inlined and conditionals at their maximum: totals are conserved.
        assert total == pytest.approx(module_cost(module).flops)
        assert graph.transcendentals.sum() == pytest.approx(module_cost(module).transcendentals)


def _corpus_picks() -> list[str]:
    """The bundled corpus's largest graph and each family's smallest."""
    from hlo_go import corpus

    entries = {name: corpus.info(name) for name in corpus.names()}

    def size(entry: dict[str, Any]) -> int:
        stage = entry.get("stages", {}).get("prefusion", {})
        return int(stage.get("nodes") or stage.get("instructions") or 0)

    by_size = sorted(entries, key=lambda name: size(entries[name]))
    smallest: dict[str, str] = {}
    for name in by_size:
        smallest.setdefault(str(entries[name].get("family", name)), name)
    return sorted(set(smallest.values()) | set(by_size[-1:]))


@pytest.mark.slow
def test_corpus_graph_invariants() -> None:
    picks = _corpus_picks()
    assert len(picks) >= 2  # the bundled corpus has several families
    from hlo_go import corpus

    for name in picks:
        for stage in ("unoptimized", "prefusion"):
            module = corpus.load(name, stage)
            check_graph(module, build_graph(module))


@pytest.mark.parametrize("path", sorted(_DATA.glob("*.hlo")), ids=lambda p: p.stem)
def test_xla_style_files(path: Path) -> None:
    module = load_hlo(path)
    check_graph(module, build_graph(module))


def test_calls_are_inlined_in_real_modules() -> None:
    for stage in ("unoptimized", "optimized"):
        module = sample_module("misc", stage)
        assert any(i.opcode == "call" for _, i in module.instructions())
        graph = build_graph(module)
        assert any("/" in name for name in graph.names)
        assert "call" not in graph.opcode_names


def test_scan_trip_count_inferred_like_xla() -> None:
    """The unoptimized scan has no known_trip_count; inference matches XLA's."""
    unopt = build_graph(sample_module("lstm_scan_train_step", "unoptimized"))
    opt = build_graph(sample_module("lstm_scan_train_step", "optimized"))
    loops = unopt.feature("is_while") == 1
    assert loops.sum() == 2
    assert (unopt.trip_count[loops] == 5).all()
    assert (unopt.feature("trip_count_unknown") == 0).all()
    assert (opt.trip_count[opt.feature("is_while") == 1] == 5).all()
    # Counting the scan's body 5 times gives about the flops of the unrolled loop.
    unrolled = build_graph(sample_module("lstm_unrolled_train_step", "unoptimized"))
    assert unopt.flops.sum() == pytest.approx(unrolled.flops.sum(), rel=0.2)


def test_data_dependent_loop_is_flagged_unknown() -> None:
    module = sample_module("misc", "optimized")
    graph = build_graph(module)
    loops = np.flatnonzero(graph.feature("is_while") == 1)
    unknown = graph.feature("trip_count_unknown")[loops]
    assert sorted(unknown.tolist()) == [0.0, 1.0]  # while_loop(c < n) and fori_loop(0, 4)
    assert sorted(graph.trip_count[loops].tolist()) == [1, 4]
    graph3 = build_graph(module, default_trip_count=3)
    assert sorted(graph3.trip_count[loops].tolist()) == [3, 4]


# --------------------------------------------------------------------------- hand-built loops

LOOP = """
HloModule loop

body {{
  state = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  acc = f32[8] get-tuple-element(state), index=1
  step = s32[] constant({step})
  next = s32[] {update}(i, step)
  e = f32[8] exponential(acc)
  m = f32[8] multiply(e, acc)
  ROOT out = (s32[], f32[8]) tuple(next, m)
}}

cond {{
  state = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  bound = s32[] constant({bound})
  ROOT c = pred[] compare({lhs}, {rhs}), direction={direction}
}}

ENTRY main {{
  x = f32[8] parameter(0)
  start = s32[] constant({start})
  init = (s32[], f32[8]) tuple(start, x)
  loop = (s32[], f32[8]) while(init), condition=cond, body=body{config}
  ROOT r = f32[8] get-tuple-element(loop), index=1
}}
"""


def loop_module(
    *,
    start: int = 0,
    step: int = 1,
    bound: int = 7,
    direction: str = "LT",
    counter_left: bool = True,
    known: int | None = None,
) -> HloModule:
    update = "add" if step >= 0 else "subtract"
    config = f', backend_config={{"known_trip_count":{{"n":"{known}"}}}}' if known else ""
    return parse_hlo(
        LOOP.format(
            step=abs(step),
            update=update,
            bound=bound,
            lhs="i" if counter_left else "bound",
            rhs="bound" if counter_left else "i",
            direction=direction,
            start=start,
            config=config,
        )
    )


def simulate(start: int, step: int, bound: int, direction: str, counter_left: bool) -> int | None:
    ops = {
        "LT": lambda a, b: a < b,
        "LE": lambda a, b: a <= b,
        "GT": lambda a, b: a > b,
        "GE": lambda a, b: a >= b,
        "NE": lambda a, b: a != b,
    }
    value, trips = start, 0
    while ops[direction](*((value, bound) if counter_left else (bound, value))):
        value += step
        trips += 1
        if trips > 1000:
            return None
    return trips


def while_node_cost(module: HloModule) -> tuple[OpGraph, int]:
    graph = build_graph(module, validate=True)
    return graph, graph.node_index["loop"]


def test_known_trip_count_macro_cost() -> None:
    module = loop_module(known=7, bound=1000)  # the backend config wins over the condition
    graph, loop = while_node_cost(module)
    per_trip = computation_cost(module, "body") + computation_cost(module, "cond")
    assert graph.trip_count[loop] == 7
    assert graph.flops[loop] == 7 * per_trip.flops
    assert graph.transcendentals[loop] == 7 * 8
    assert graph.bytes_read[loop] == 7 * per_trip.bytes_read
    assert graph.bytes_written[loop] == 7 * per_trip.bytes_written
    assert graph.feature("log_trip_count")[loop] == pytest.approx(np.log1p(7))
    assert graph.feature("trip_count_unknown")[loop] == 0
    # XLA's own rule counts the body once.
    assert instruction_cost(module, module.entry.instruction("loop")).flops == per_trip.flops


@pytest.mark.parametrize(
    ("start", "step", "bound", "direction", "counter_left"),
    [
        (0, 1, 7, "LT", True),
        (2, 3, 20, "LT", True),
        (2, 3, 20, "LE", True),
        (0, 4, 20, "LE", True),
        (10, -2, 0, "GT", True),
        (10, -3, 0, "GE", True),
        (0, 5, 30, "NE", True),
        (0, 1, 7, "GT", False),  # 7 > i
        (3, 1, 2, "LT", True),  # never runs
    ],
)
def test_inferred_trip_count_macro_cost(
    start: int, step: int, bound: int, direction: str, counter_left: bool
) -> None:
    module = loop_module(
        start=start, step=step, bound=bound, direction=direction, counter_left=counter_left
    )
    expected = simulate(start, step, bound, direction, counter_left)
    loop = module.entry.instruction("loop")
    assert infer_trip_count(module, module.entry, loop) == expected
    assert while_trip_count(module, module.entry, loop).source == "condition"
    graph, node = while_node_cost(module)
    per_trip = computation_cost(module, "body") + computation_cost(module, "cond")
    assert graph.trip_count[node] == expected
    assert graph.flops[node] == expected * per_trip.flops
    assert graph.feature("trip_count_unknown")[node] == 0


def test_unbounded_or_data_dependent_loops_are_unknown() -> None:
    module = loop_module(start=0, step=-1, bound=7, direction="LT")  # runs forever
    loop = module.entry.instruction("loop")
    assert infer_trip_count(module, module.entry, loop) is None
    trips = while_trip_count(module, module.entry, loop, default=4)
    assert (trips.count, trips.source, trips.known) == (4, "unknown", False)
    graph = build_graph(module, default_trip_count=4)
    node = graph.node_index["loop"]
    assert graph.trip_count[node] == 4
    assert graph.feature("trip_count_unknown")[node] == 1
    per_trip = computation_cost(module, "body") + computation_cost(module, "cond")
    assert graph.flops[node] == 4 * per_trip.flops


NESTED = """
HloModule nested

inner_body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  n = s32[] add(one, i)
  w = f32[4] multiply(v, v)
  ROOT t = (s32[], f32[4]) tuple(n, w)
}

wrapped_lt {
  p0 = s32[] parameter(0)
  p1 = s32[] parameter(1)
  ROOT lt = pred[] compare(p0, p1), direction=LT
}

inner_cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(3)
  ROOT c = pred[] fusion(i, k), kind=kLoop, calls=wrapped_lt
}

inner_loop_computation {
  p = (s32[], f32[4]) parameter(0)
  ROOT l = (s32[], f32[4]) while(p), condition=inner_cond, body=inner_body
}

outer_body {
  s = (s32[], f32[4]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  it = (s32[], f32[4]) tuple(zero, v)
  inner = (s32[], f32[4]) call(it), to_apply=inner_loop_computation
  r = f32[4] get-tuple-element(inner), index=1
  two = s32[] constant(2)
  jn = s32[] add(j, two)
  ROOT t = (s32[], f32[4]) tuple(jn, r)
}

outer_cond {
  s = (s32[], f32[4]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  k = s32[] constant(10)
  ROOT c = pred[] compare(j, k), direction=LT
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  loop = (s32[], f32[4]) while(init), condition=outer_cond, body=outer_body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
"""


def test_nested_loops_multiply_through_calls_and_fused_compares() -> None:
    module = parse_hlo(NESTED)
    graph = build_graph(module, validate=True)
    node = graph.node_index["loop"]
    assert graph.trip_count[node] == 5  # j = 0, 2, ..., 8
    inner = computation_cost(module, "inner_body") + computation_cost(module, "inner_cond")
    outer_own = (
        computation_cost(module, "outer_body").flops
        - computation_cost(module, "inner_loop_computation").flops
    )
    outer = outer_own + 3 * inner.flops + computation_cost(module, "outer_cond").flops
    assert graph.flops[node] == 5 * outer
    # The inner loop sits in a called computation: its init is found through the call.
    comp = module.computations["inner_loop_computation"]
    assert infer_trip_count(module, comp, comp.instruction("l")) == 3


# --------------------------------------------------------------------------- conditional, fusion

CONDITIONAL = """
HloModule conditional

cheap {
  x = f32[16] parameter(0)
  ROOT n = f32[16] negate(x)
}

costly {
  x = f32[16] parameter(0)
  a = f32[16] multiply(x, x)
  b = f32[16] add(a, x)
  ROOT c = f32[16] exponential(b)
}

copying {
  x = f32[16] parameter(0)
  b = f32[64,16] broadcast(x), dimensions={1}
  c = f32[64,16] copy(b)
  d = f32[1,16] slice(c), slice={[0:1], [0:16]}
  ROOT r = f32[16] reshape(d)
}

ENTRY main {
  index = s32[] parameter(0)
  x = f32[16] parameter(1)
  ROOT cond = f32[16] conditional(index, x, x, x), branch_computations={cheap, costly, copying}
}
"""


def test_conditional_costs_its_most_expensive_branch() -> None:
    module = parse_hlo(CONDITIONAL)
    graph = build_graph(module, validate=True)
    node = graph.node_index["cond"]
    branches = [computation_cost(module, b) for b in ("cheap", "costly", "copying")]
    assert graph.flops[node] == max(b.flops for b in branches) == 32
    assert graph.transcendentals[node] == 16
    most = max(branches, key=lambda b: b.bytes_accessed)
    assert (graph.bytes_read[node], graph.bytes_written[node]) == (
        most.bytes_read,
        most.bytes_written,
    )
    assert most is branches[2]  # the byte-heavy branch is not the flop-heavy one
    assert graph.feature("is_conditional")[node] == 1
    assert graph.feature("log_branches")[node] == pytest.approx(np.log1p(3))


def test_fusion_node_costs_its_fused_body() -> None:
    module = load_hlo(str(_DATA / "fusions_scheduled.hlo"))
    graph = build_graph(module, validate=True)
    for name, fused in (
        ("relu", "fused_relu"),
        ("mm", "fused_matmul_bias"),
        ("rowmax", "fused_rowmax"),
    ):
        node = graph.node_index[name]
        instr = module.entry.instruction(name)
        cost = instruction_cost(module, instr)
        body = computation_cost(module, fused)
        assert graph.flops[node] == cost.flops == body.flops > 0
        assert graph.transcendentals[node] == body.transcendentals
        assert (graph.bytes_read[node], graph.bytes_written[node]) == cost[2:]
        assert graph.feature("is_fusion")[node] == 1
        assert graph.feature("log_fused_instructions")[node] == pytest.approx(
            np.log1p(len(module.computations[fused].instructions))
        )
    kinds = {name: graph.features[graph.node_index[name]] for name in ("relu", "mm", "rowmax")}
    col = FEATURE_NAMES.index
    assert kinds["relu"][col("fusion_kloop")] == 1
    assert kinds["mm"][col("fusion_koutput")] == 1
    assert kinds["rowmax"][col("fusion_kinput")] == 1
    # control-predecessors={rowmax, relu} on `out` become control edges.
    control = set(
        zip(graph.control_senders.tolist(), graph.control_receivers.tolist(), strict=True)
    )
    out = graph.node_index["out"]
    assert control == {(graph.node_index["rowmax"], out), (graph.node_index["relu"], out)}


# --------------------------------------------------------------------------- calls, control, colocation

CALLS = """
HloModule calls

scale {
  v = f32[4] parameter(0)
  k = f32[] parameter(1)
  kb = f32[4] broadcast(k), dimensions={}
  ROOT s = f32[4] multiply(v, kb)
}

twice {
  a = f32[4] parameter(0)
  two = f32[] constant(2)
  first = f32[4] call(a, two), to_apply=scale
  ROOT second = f32[4] call(first, two), to_apply=scale
}

identity {
  ROOT p = f32[4] parameter(0)
}

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] call(x), to_apply=twice
  same = f32[4] call(y), to_apply=identity
  t = (f32[4], f32[4]) tuple(same, x)
  g = f32[4] get-tuple-element(t), index=0
  b = f32[2,2] bitcast(g)
  ROOT out = f32[2,2] negate(b), control-predecessors={late}
  late = f32[4] abs(x)
}
"""
_LATE_OUT = """  ROOT out = f32[2,2] negate(b), control-predecessors={late}
  late = f32[4] abs(x)
"""
_OUT_LATE = """  late = f32[4] abs(x)
  ROOT out = f32[2,2] negate(b), control-predecessors={late}
"""


def test_calls_are_inlined_recursively() -> None:
    module = parse_hlo(CALLS.replace(_LATE_OUT, _OUT_LATE))
    graph = build_graph(module, validate=True)
    assert graph.num_nodes == flattened_count(module) == 11
    assert set(graph.names) == {
        "x", "y/two", "y/first/kb", "y/first/s", "y/second/kb", "y/second/s",
        "t", "g", "b", "late", "out",
    }  # fmt: skip
    idx = graph.node_index
    edges = set(zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True))
    # Callee parameters became the call's operands; identity's root is its argument.
    assert (idx["x"], idx["y/first/s"]) in edges
    assert (idx["y/two"], idx["y/first/kb"]) in edges
    assert (idx["y/first/s"], idx["y/second/s"]) in edges
    assert (idx["y/second/s"], idx["t"]) in edges
    assert graph.root == idx["out"]
    control = list(
        zip(graph.control_senders.tolist(), graph.control_receivers.tolist(), strict=True)
    )
    assert control == [(idx["late"], idx["out"])]
    assert graph.flops.sum() == module_cost(module).flops == 16
    check_graph(module, graph)


def test_control_predecessor_defined_later_reorders_topologically() -> None:
    module = parse_hlo(CALLS)
    graph = build_graph(module, validate=True)
    order = graph.topo_order.tolist()
    assert order.index(graph.node_index["late"]) < order.index(graph.node_index["out"])
    assert order != list(range(graph.num_nodes))


def test_control_cycle_is_rejected() -> None:
    text = """
HloModule cyclic

ENTRY main {
  x = f32[4] parameter(0)
  a = f32[4] negate(x), control-predecessors={b}
  ROOT b = f32[4] abs(a)
}
"""
    with pytest.raises(ValueError, match="cycle"):
        build_graph(parse_hlo(text))


def test_colocation_groups() -> None:
    module = load_hlo(str(_DATA / "control_flow.hlo"))
    graph = build_graph(module, validate=True)
    group, idx = graph.colocation_group, graph.node_index
    assert group[idx["result"]] == group[idx["loop"]] == idx["loop"]  # gte with its while
    assert group[idx["init"]] == idx["init"]  # a tuple does not pin its operands
    assert group[idx["x"]] == idx["x"]
    generic = build_graph(load_hlo(str(_DATA / "async_generic.hlo")), validate=True)
    g, i = generic.colocation_group, generic.node_index
    assert g[i["start"]] == g[i["update"]] == g[i["done"]] == i["start"]
    assert g[i["rs-start"]] == g[i["rs-done"]]
    assert g[i["t"]] == i["t"]
    module = parse_hlo(CALLS.replace(", control-predecessors={late}", ""))
    graph = build_graph(module, validate=True)
    group, idx = graph.colocation_group, graph.node_index
    assert group[idx["b"]] == group[idx["g"]] == idx["t"]  # bitcast of gte of tuple


# --------------------------------------------------------------------------- features, validate


def test_feature_names_documented() -> None:
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES))
    doc = features_module.__doc__ or ""
    for j, name in enumerate(FEATURE_NAMES):
        assert re.search(rf"^\s*{j}\s+{re.escape(name)}\s", doc, re.M), f"column {j} {name}"
    assert OPCODE_VOCAB[0] == "<unknown>" and opcode_id("no-such-op") == 0
    assert OPCODE_VOCAB[opcode_id("add")] == "add"


def test_feature_values() -> None:
    module = load_hlo(str(_DATA / "control_flow.hlo"))
    graph = build_graph(module)
    f = {name: graph.feature(name) for name in FEATURE_NAMES}
    idx = graph.node_index
    loop = idx["loop"]
    assert f["is_while"][loop] == 1 and f["log_trip_count"][loop] == pytest.approx(np.log1p(10))
    assert f["log_flops"][loop] == pytest.approx(np.log1p(graph.flops[loop]))
    assert f["is_tuple"][idx["init"]] == 1 and f["log_tuple_size"][idx["init"]] == pytest.approx(
        np.log1p(2)
    )
    assert f["dtype_f32"][idx["x"]] == 1 and f["dtype_int"][idx["index"]] == 1
    assert f["dtype_pred"][idx["is-positive"]] == 1
    assert f["rank"][idx["x"]] == 1 and f["rank"][idx["index"]] == 0
    assert f["log_in_degree"][idx["switch"]] == pytest.approx(np.log1p(3))  # index, result, x
    assert f["topo_position"].min() == 0 and f["topo_position"].max() == 1
    for name in FEATURE_NAMES:
        if name.startswith(("is_", "dtype_", "fusion_k", "trip_count_unknown")):
            assert set(np.unique(f[name]).tolist()) <= {0.0, 1.0}, name
    one_hot = graph.features[
        :,
        [
            FEATURE_NAMES.index(f"dtype_{c}")
            for c in ("f32", "bf16", "f16", "f64", "int", "pred", "other")
        ],
    ]
    assert (one_hot.sum(axis=1) == 1).all()


def test_arrays_are_read_only() -> None:
    graph = build_graph(load_hlo(str(_DATA / "control_flow.hlo")))
    with pytest.raises(ValueError):
        graph.flops[0] = 1.0
    with pytest.raises(TypeError):
        graph.node_index["x"] = 3  # type: ignore[index]


def test_validate_rejects_broken_graphs() -> None:
    graph = build_graph(load_hlo(str(_DATA / "control_flow.hlo")), validate=True)
    n = graph.num_nodes
    broken = {
        "topo_order": dict(topo_order=graph.topo_order[::-1].copy()),
        "permutation": dict(topo_order=np.zeros(n, dtype=np.int32)),
        "edge_bytes": dict(edge_bytes=graph.edge_bytes + 1),
        "cycle": dict(
            senders=np.append(graph.senders, np.int32(graph.root)),
            receivers=np.append(graph.receivers, np.int32(0)),
            edge_bytes=np.append(graph.edge_bytes, graph.bytes_out[graph.root]),
        ),
        "range": dict(receivers=np.where(graph.receivers == graph.root, n, graph.receivers)),
        "features": dict(features=np.full_like(graph.features, np.nan)),
        "shape": dict(flops=graph.flops[:-1]),
        "dtype": dict(opcode=graph.opcode.astype(np.int64)),
        "colocation": dict(colocation_group=np.full(n, n - 1, dtype=np.int32)),
        "window_reads": dict(window_reads=np.full(n, -1.0)),
    }
    for label, changes in broken.items():
        with pytest.raises(ValueError, match="invalid OpGraph"):
            graph._replace(**changes).validate()
            pytest.fail(f"validate() accepted a graph with a broken {label}")


# --------------------------------------------------------------------------- padding


def _two_graphs() -> tuple[OpGraph, OpGraph]:
    a = build_graph(load_hlo(str(_DATA / "control_flow.hlo")))
    b = build_graph(load_hlo(str(_DATA / "fusions_scheduled.hlo")))
    return a, b


def test_to_graphs_tuple_single_graph_power_of_two() -> None:
    graph = build_graph(sample_module("lstm_scan_train_step", "unoptimized"))
    gt = to_graphs_tuple(graph)
    n_node, n_edge = next_power_of_two(graph.num_nodes + 1), next_power_of_two(graph.num_edges)
    assert gt.nodes["features"].shape == (n_node, len(FEATURE_NAMES))
    assert gt.nodes["opcode"].shape == gt.nodes["mask"].shape == (n_node,)
    assert gt.senders.shape == gt.receivers.shape == gt.edges["mask"].shape == (n_edge,)
    assert gt.n_node.tolist() == [graph.num_nodes, n_node - graph.num_nodes]
    assert gt.n_edge.tolist() == [graph.num_edges, n_edge - graph.num_edges]
    assert gt.nodes["mask"].sum() == graph.num_nodes and gt.nodes["mask"][: graph.num_nodes].all()
    assert gt.edges["mask"].sum() == graph.num_edges
    assert gt.globals["mask"].tolist() == [True, False]
    np.testing.assert_array_equal(gt.nodes["features"][: graph.num_nodes], graph.features)
    assert not gt.nodes["features"][graph.num_nodes :].any()
    assert (gt.senders[graph.num_edges :] == graph.num_nodes).all()
    np.testing.assert_array_equal(np.asarray(jraph.get_node_padding_mask(gt)), gt.nodes["mask"])
    np.testing.assert_array_equal(np.asarray(jraph.get_edge_padding_mask(gt)), gt.edges["mask"])


def test_to_graphs_tuple_batches_like_jraph() -> None:
    a, b = _two_graphs()
    bucket = Bucket(64, 64, 4)
    gt = to_graphs_tuple([a, b], bucket=bucket)
    assert gt.n_node.tolist() == [a.num_nodes, b.num_nodes, 64 - a.num_nodes - b.num_nodes, 0]
    assert gt.globals["mask"].tolist() == [True, True, False, False]
    np.testing.assert_array_equal(
        gt.senders[a.num_edges : a.num_edges + b.num_edges], b.senders + a.num_nodes
    )
    np.testing.assert_array_equal(
        gt.nodes["colocation_group"][a.num_nodes : a.num_nodes + b.num_nodes],
        b.colocation_group + a.num_nodes,
    )
    # jraph's own batching and padding give the same arrays.
    plain = [
        jraph.GraphsTuple(
            nodes=g.features, edges=np.log1p(g.edge_bytes).astype(np.float32),
            senders=g.senders, receivers=g.receivers,
            n_node=np.array([g.num_nodes]), n_edge=np.array([g.num_edges]), globals=None,
        )
        for g in (a, b)
    ]  # fmt: skip
    ref = jraph.pad_with_graphs(jraph.batch_np(plain), *bucket)
    np.testing.assert_array_equal(ref.nodes, gt.nodes["features"])
    np.testing.assert_allclose(ref.edges, gt.edges["log_bytes"])
    np.testing.assert_array_equal(ref.senders, gt.senders)
    np.testing.assert_array_equal(ref.receivers, gt.receivers)
    np.testing.assert_array_equal(ref.n_node, gt.n_node)
    np.testing.assert_array_equal(ref.n_edge, gt.n_edge)
    unpadded = jraph.unpad_with_graphs(gt)
    assert unpadded.n_node.tolist() == [a.num_nodes, b.num_nodes]


def test_to_graphs_tuple_rejects_small_buckets() -> None:
    a, b = _two_graphs()
    total = a.num_nodes + b.num_nodes
    with pytest.raises(ValueError, match="too small"):
        to_graphs_tuple([a, b], bucket=(total, 1024))  # no room for a padding node
    with pytest.raises(ValueError, match="too small"):
        to_graphs_tuple([a, b], bucket=(1024, 1024, 2))  # no padding graph
    with pytest.raises(ValueError, match="at least one"):
        to_graphs_tuple([])
    assert to_graphs_tuple([a, b], bucket=(total + 1, a.num_edges + b.num_edges)).n_node.shape == (
        3,
    )


def test_jitted_consumer_compiles_once_per_bucket() -> None:
    a, b = _two_graphs()
    traces: list[int] = []

    @jax.jit
    def consume(graph: jraph.GraphsTuple) -> jax.Array:
        traces.append(1)
        x = graph.nodes["features"] * graph.nodes["mask"][:, None]
        messages = x[graph.senders] * graph.edges["mask"][:, None]
        summed = jax.ops.segment_sum(messages, graph.receivers, num_segments=x.shape[0])
        per_graph = jraph.segment_sum(
            (x + summed).sum(axis=1),
            jnp.repeat(
                jnp.arange(graph.n_node.shape[0]), graph.n_node, total_repeat_length=x.shape[0]
            ),
            num_segments=graph.n_node.shape[0],
        )
        return per_graph

    bucket = (64, 64)
    out_a = consume(to_graphs_tuple(a, bucket=bucket))
    out_b = consume(to_graphs_tuple(b, bucket=bucket))
    assert len(traces) == 1
    assert out_a.shape == out_b.shape == (2,)
    assert float(out_b[1]) == 0.0  # the padding graph contributes nothing
    consume(to_graphs_tuple([a, b], bucket=(128, 128, 3)))
    assert len(traces) == 2


def test_kernel_launches_of_loops_conditionals_and_views() -> None:
    """A while launches its own kernel plus, on every trip, its body's and condition's."""
    module = loop_module(known=7, bound=1000)
    graph, loop = while_node_cost(module)
    # Body: next, e, m (3 kernels; parameter, get-tuple-element, constant, tuple are not);
    # condition: c (1).
    assert graph.launches[loop] == 1 + 7 * (3 + 1)
    for instr in module.entry.instructions:
        expected = (
            0 if instr.opcode in {"parameter", "constant", "tuple", "get-tuple-element"} else None
        )
        if expected is not None:
            assert graph.launches[graph.node_index[instr.name]] == 0
    # A conditional: itself plus its largest branch (copying: broadcast, copy, slice, reshape).
    cond_graph = build_graph(parse_hlo(CONDITIONAL), validate=True)
    assert cond_graph.launches[cond_graph.node_index["cond"]] == 1 + 4
    # A graph built without launch counts reads as one launch per node.
    assert (graph._replace(launches=None).kernel_launches == 1).all()


def test_matrix_kind_of_dots_convolutions_and_fusions() -> None:
    graph = build_graph(
        parse_hlo(
            """HloModule m
fused {
  a = f32[1,8,8,4] parameter(0)
  k = f32[3,3,4,4] parameter(1)
  c = f32[1,8,8,4] convolution(a, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT r = f32[1,8,8,4] negate(c)
}
ENTRY e {
  x = f32[1,8,8,4] parameter(0)
  k = f32[3,3,4,4] parameter(1)
  dk = f32[3,3,1,4] parameter(2)
  m = f32[8,8] parameter(3)
  d = f32[8,8] dot(m, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  f = f32[1,8,8,4] fusion(x, k), kind=kOutput, calls=fused
  g = f32[1,8,8,4] convolution(f, dk), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4
  ROOT t = (f32[8,8], f32[1,8,8,4]) tuple(d, g)
}
"""
        ),
        validate=True,
    )
    kinds = {name: int(graph.matrix_kind[graph.node_index[name]]) for name in "xdfgt"}
    assert kinds == {"x": 0, "d": 1, "f": 2, "g": 3, "t": 0}
    assert MATRIX_KINDS[kinds["g"]] == "grouped_convolution"
