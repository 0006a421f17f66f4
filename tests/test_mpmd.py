"""The MPMD placement runtime: partitioning, real multi-device runs, errors, freeing, donation.

Runs on the 8 virtual CPU devices that ``conftest.py`` configures.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go import corpus
from hlo_go.decisions import Decisions
from hlo_go.graph import build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.xla import measure_placed, outputs_match, run_placed
from hlo_go.xla._jaxlib import canonical_program_text
from hlo_go.xla.arbiter import as_accurate_as_reference
from hlo_go.xla.bridge import compile_hlo_text
from hlo_go.xla.inputs import random_inputs
from hlo_go.xla.mpmd import COMPUTE, check_partition
from hlo_go.xla.placed import (
    FUSION_OFF_REFERENCE,
    PlacementError,
    check_placed_outputs,
    compile_placed,
    partition,
    placed_module,
)
from hlo_go.xla.segments import expand_bitcasts, portable_module

DEVICES = jax.devices()


def _decisions(placement: np.ndarray, fusion: np.ndarray | None = None) -> Decisions:
    n = placement.shape[0]
    return Decisions(
        placement.astype(np.int32),
        np.zeros(n, np.float32),
        np.zeros(n, np.float32) if fusion is None else fusion.astype(np.float32),
    )


def _by_opcode(graph, placement_of_op: dict[str, int], default: int = 0) -> np.ndarray:
    placement = np.full(graph.num_nodes, default, np.int32)
    for i, op in enumerate(graph.opcode_names):
        placement[i] = placement_of_op.get(op, default)
    return placement[graph.colocation_group]


def _mlp_step(params, x, y):
    def loss(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        out = h @ p["w2"]
        return jnp.mean((out - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    new = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return value, new


RNG = np.random.default_rng(0)
MLP_ARGS = (
    {
        "w1": RNG.standard_normal((16, 32), dtype=np.float32),
        "b1": RNG.standard_normal((32,), dtype=np.float32),
        "w2": RNG.standard_normal((32, 4), dtype=np.float32),
    },
    RNG.standard_normal((8, 16), dtype=np.float32),
    RNG.standard_normal((8, 4), dtype=np.float32),
)


def _diamond(x):
    a = jnp.sin(x)
    b = jnp.cos(a) * 3.0
    c = jnp.exp(a)
    return b + c


def test_hand_placed_diamond_on_two_devices():
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    module, graph = placed_module(_diamond, args=(x,))
    # sine and the final add on device 0, the cosine branch on device 1.
    placement = _by_opcode(graph, {"cosine": 1, "multiply": 1, "broadcast": 1})
    program = compile_placed(module, _decisions(placement), DEVICES[:2])
    part = program.partition
    check_partition(part)
    assert [s.device for s in part.segments] == [0, 1, 0]
    assert part.edges == ((0, 1), (0, 2), (1, 2))
    got = program(x)
    assert list(got[0].devices()) == [DEVICES[0]]
    ok, message = outputs_match(got, [jax.jit(_diamond)(x)])
    assert ok, message
    assert program.stats.transfers == 2  # sine's result to device 1, the product back
    result = measure_placed(_diamond, _decisions(placement), DEVICES[:2], args=(x,), repeats=2)
    assert result.correct and result.time_s > 0 and result.baseline_time_s > 0
    assert result.message.startswith("3 segments, 2 transfers")


def test_cross_device_chain_and_a_cycle_naive_grouping_would_need():
    def chain(x):
        for k in range(6):
            x = jnp.sin(x) + k
        return x

    x = np.linspace(0, 1, 32, dtype=np.float32)
    module, graph = placed_module(chain, args=(x,))
    compute = [i for i, op in enumerate(graph.opcode_names) if op in ("sine", "add")]
    placement = np.zeros(graph.num_nodes, np.int32)
    # Alternate devices every two ops: 0 -> 1 -> 0 -> 1 ... One segment per device would
    # be a cycle (device 0 waits on device 1, which waits on device 0); the partition must
    # split each device's nodes instead.
    for k, node in enumerate(compute):
        placement[node] = (k // 2) % 2
    placement = placement[graph.colocation_group]
    part = partition(module, graph, placement)
    check_partition(part)
    devices = [s.device for s in part.segments]
    assert devices == [0, 1] * (len(devices) // 2)
    assert len(devices) == 6
    got = run_placed(chain, _decisions(placement), DEVICES[:2], args=(x,))
    ok, message = outputs_match(got, jax.jit(chain)(x))
    assert ok, message


@pytest.mark.parametrize(
    ("devices", "kind"), [(2, "round_robin"), (4, "contiguous"), (8, "round_robin")]
)
def test_training_step_placed_matches_jit(devices, kind):
    module, graph = placed_module(_mlp_step, args=MLP_ARGS)
    n = graph.num_nodes
    position = np.empty(n, np.int64)
    position[graph.topo_order] = np.arange(n)
    if kind == "round_robin":
        placement = (np.arange(n) % devices).astype(np.int32)
    else:
        placement = (position * devices // n).astype(np.int32)
    placement = placement[graph.colocation_group]
    program = compile_placed(module, _decisions(placement), DEVICES[:devices])
    check_partition(program.partition)
    used = {s.device for s in program.partition.segments}
    assert len(used) > 1
    got = jax.block_until_ready(program(*jax.tree.leaves(MLP_ARGS)))
    want = jax.jit(_mlp_step)(*MLP_ARGS)
    ok, message = outputs_match(got, jax.tree.leaves(want))
    assert ok, message
    # The same through the pytree front door.
    tree = run_placed(_mlp_step, _decisions(placement), DEVICES[:devices], args=MLP_ARGS)
    assert jax.tree.structure(tree) == jax.tree.structure(want)


def test_fused_groups_are_never_split():
    module, graph = placed_module(_mlp_step, args=MLP_ARGS)
    n = graph.num_nodes
    placement = ((np.arange(n) // 3) % 3).astype(np.int32)[graph.colocation_group]
    decisions = _decisions(placement, fusion=np.ones(n))
    groups = decisions.fusion_groups(graph)
    assert (np.bincount(groups) > 1).any(), "the test needs some multi-node groups"
    program = compile_placed(module, decisions, DEVICES[:3])
    check_partition(program.partition, groups)
    assert any(i.opcode == "fusion" for m in program.modules for i in m.entry.instructions), (
        "fused groups should reach XLA as fusions"
    )
    got = program(*jax.tree.leaves(MLP_ARGS))
    ok, message = outputs_match(got, jax.tree.leaves(jax.jit(_mlp_step)(*MLP_ARGS)))
    assert ok, message


def test_corpus_graph_with_loops_split_over_three_devices():
    module = corpus.load("rnnlm_l2_scan", "prefusion")
    graph = build_graph(module)
    n = graph.num_nodes
    position = np.empty(n, np.int64)
    position[graph.topo_order] = np.arange(n)
    placement = (position * 3 // n).astype(np.int32)[graph.colocation_group]
    program = compile_placed(module, _decisions(placement), DEVICES[:3], graph=graph)
    part = program.partition
    check_partition(part)
    whiles = [i for i, op in enumerate(graph.opcode_names) if op == "while"]
    assert whiles and all(part.kind[w] == COMPUTE and part.segment_of[w] >= 0 for w in whiles)
    args = random_inputs(module)
    got = jax.block_until_ready(program(*args))
    reference = compile_hlo_text(portable_module(module).to_text(), device=DEVICES[0])
    ok, message = outputs_match(got, reference.execute(jax.device_put(args, DEVICES[0])))
    assert ok, message
    assert program.stats.transfers > 0 and len({s.device for s in part.segments}) == 3


def test_round_robin_partition_of_a_large_corpus_graph_is_acyclic():
    module = corpus.load("resnet_26", "prefusion")
    graph = build_graph(module)
    placement = (np.arange(graph.num_nodes) % 8).astype(np.int32)[graph.colocation_group]
    merged = partition(module, graph, placement)
    unmerged = partition(module, graph, placement, merge=False)
    check_partition(merged)
    check_partition(unmerged)
    assert merged.num_segments < unmerged.num_segments


def test_invalid_decisions_are_rejected_with_the_node_named():
    x = np.ones(8, np.float32)
    module, graph = placed_module(_diamond, args=(x,))
    n = graph.num_nodes
    bad = np.zeros(n, np.int32)
    bad[-1] = 5
    with pytest.raises(ValueError, match="not a device of a 2-device cluster"):
        run_placed(_diamond, _decisions(bad), DEVICES[:2], args=(x,))
    with pytest.raises(ValueError, match=r"must be an array of shape"):
        run_placed(_diamond, _decisions(np.zeros(n + 1, np.int32)), DEVICES[:2], args=(x,))
    # A fused group across devices.
    groups = np.arange(n)
    sine = graph.opcode_names.index("sine")
    cosine = graph.opcode_names.index("cosine")
    groups[cosine] = sine
    placement = np.zeros(n, np.int32)
    placement[cosine] = 1
    with pytest.raises(PlacementError, match="spans devices"):
        partition(module, graph, placement, fusion_groups=groups)
    # Decisions for another graph.
    _, other_graph = placed_module(_mlp_step, args=MLP_ARGS)
    with pytest.raises(PlacementError, match="not built from this module"):
        partition(module, other_graph, np.zeros(other_graph.num_nodes, np.int32))


def test_stateful_rng_is_refused():
    text = """HloModule rng

ENTRY %main (a: f32[], b: f32[]) -> f32[4] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[4]{0} rng(%a, %b), distribution=rng_uniform
}
"""
    module = parse_hlo(text)
    graph = build_graph(module)
    with pytest.raises(PlacementError, match="'r' \\(rng\\) cannot run"):
        compile_placed(module, Decisions.default(graph), DEVICES[:1])


def test_buffers_are_freed_after_their_last_reader_and_inputs_never_donated():
    def chain(x):
        for _ in range(8):
            x = jnp.tanh(x) * 1.5
        return x

    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    module, graph = placed_module(chain, args=(x,))
    tanh_nodes = [i for i, op in enumerate(graph.opcode_names) if op == "tanh"]
    placement = np.zeros(graph.num_nodes, np.int32)
    for k, node in enumerate(tanh_nodes):
        placement[node:] = k % 2
    placement = placement[graph.colocation_group]
    program = compile_placed(module, _decisions(placement), DEVICES[:2])
    segments = program.num_segments
    assert segments >= 6
    placed_args = program.place_arguments([x])
    before = len(jax.live_arrays())
    out = jax.block_until_ready(program(placed_args))
    stats = program.stats
    # Every intermediate but the output is released, and only the output is still held.
    assert stats.live_after == 1
    assert stats.freed >= stats.transfers + segments - 1
    # Only a few values are held at once, not all of them.
    everything = (stats.transfers + segments) * x.nbytes
    assert max(stats.peak_live_bytes) < everything / 2
    assert stats.donated > 0
    assert len(jax.live_arrays()) == before + 1  # the output; intermediates are gone
    assert not any(a.is_deleted() for a in placed_args.arrays)
    ok, message = outputs_match(out, [jax.jit(chain)(x)])
    assert ok, message
    again = program(placed_args)  # inputs survive the donating run
    assert np.array_equal(np.asarray(again[0]), np.asarray(out[0]))


def _alternating_steps(step, steps: int, x: np.ndarray):
    """``steps`` applications of ``step(x, k)``, each on the other of two devices."""

    def chain(x):
        for k in range(steps):
            x = step(x, k)
        return x

    module, graph = placed_module(chain, args=(x,))
    tanh_nodes = [i for i, op in enumerate(graph.opcode_names) if op == "tanh"]
    assert len(tanh_nodes) == steps
    placement = np.zeros(graph.num_nodes, np.int32)
    for k, node in enumerate(tanh_nodes):
        placement[node:] = k % 2
    program = compile_placed(module, _decisions(placement[graph.colocation_group]), DEVICES[:2])
    ok, message = outputs_match(program(x), [jax.jit(chain)(x)])
    assert ok, message
    return program


def test_segments_of_the_same_program_share_an_executable():
    x = np.linspace(-1, 1, 256, dtype=np.float32)
    same = _alternating_steps(lambda x, k: jnp.tanh(x) * 1.5, 8, x)
    assert same.num_segments == 8
    # The steps differ only in names, so they share executables: one per device, and
    # one more for the first step, which reads the program input (never donated, so
    # its module has no input_output_alias).
    assert same.num_executables == 3
    # A different power per step is a different program: nothing is shared.
    distinct = _alternating_steps(lambda x, k: jnp.tanh(x) ** (k + 1), 8, x)
    assert distinct.num_segments == 8 and distinct.num_executables == 8


def test_canonical_program_text_ignores_names_only():
    text = """HloModule m{suffix}, entry_computation_layout={{(f32[4]{{0}})->f32[]}}

{add} {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}

ENTRY {entry} {{
  {p} = f32[4]{{0}} parameter(0), metadata={{op_name="x"}}
  k = f32[4]{{0}} constant({{1, 2, 3, {last}}})
  s = f32[4]{{0}} multiply({p}, k)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(s, z), dimensions={{0}}, to_apply={add}
}}
"""
    base = {"suffix": "", "add": "add", "entry": "main", "p": "p", "last": "4"}
    key = canonical_program_text(text.format(**base))
    renamed = {"suffix": ".segment_7", "add": "region_0.3", "entry": "seg", "p": "x.1"}
    assert canonical_program_text(text.format(**{**base, **renamed})) == key
    assert canonical_program_text(text.format(**{**base, "last": "5"})) != key


def test_bitcasts_of_non_default_layouts_keep_their_meaning():
    # f32[2,3]{0,1} bitcast to f32[3,2]{1,0} is a transpose in logical terms.
    text = """HloModule bc

ENTRY %main (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  %c = f32[2,3]{0,1} copy(%p)
  ROOT %b = f32[3,2]{1,0} bitcast(%c)
}
"""
    module = parse_hlo(text)
    expanded = expand_bitcasts(module.entry, set())
    assert "bitcast" not in [i.opcode for i in expanded.instructions]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    graph = build_graph(module)
    got = run_placed(module, Decisions.default(graph), DEVICES[:1], args=[x])
    np.testing.assert_array_equal(np.asarray(got[0]), x.T)


def _control_flow(x, key):
    noise = jax.random.normal(key, x.shape)  # counter-based PRNG: plain ops, placeable

    def body(i, carry):
        a, b = carry
        return jnp.sin(a) + b * 0.5, b + jnp.cos(a) * i

    a, b = jax.lax.fori_loop(0, 5, body, (x + noise, x))
    branch = jax.lax.cond(a.sum() > 0, lambda v: v * 2.0, lambda v: jnp.tanh(v), b)
    return branch, a


def test_loops_conditionals_and_prng_run_as_whole_units_across_devices():
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    key = jax.random.key_data(jax.random.key(3))
    module, graph = placed_module(_control_flow, args=(x, key))
    ops = graph.opcode_names
    assert "while" in ops and "conditional" in ops
    placement = (np.arange(graph.num_nodes) % 2).astype(np.int32)[graph.colocation_group]
    program = compile_placed(module, _decisions(placement), DEVICES[:2])
    check_partition(program.partition)
    for node in (ops.index("while"), ops.index("conditional")):
        assert program.partition.segment_of[node] >= 0
    got = program(x, key)
    ok, message = outputs_match(got, jax.tree.leaves(jax.jit(_control_flow)(x, key)))
    assert ok, message


def _cancelling_rows() -> np.ndarray:
    """Rows of large terms that sum to nearly zero: float32 sums in different orders are
    all far (relative to the tiny result) from the exact sums and from each other."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 4096)).astype(np.float32) * np.float32(1e4)
    x[:, -1] = -x[:, :-1].astype(np.float64).sum(axis=1)
    return x


def _halves(a):
    return jnp.sum(a[:, :2048], axis=1) + jnp.sum(a[:, 2048:], axis=1)


def _halves_on_two_devices(graph) -> np.ndarray:
    """The second half's slice and sum on device 1, the rest on device 0."""
    ops = graph.opcode_names
    placement = np.zeros(graph.num_nodes, np.int32)
    for op in ("slice", "reduce"):
        placement[[i for i, o in enumerate(ops) if o == op][1]] = 1
    return placement[graph.colocation_group]


def test_float64_arbiter_accepts_an_ill_conditioned_placed_sum():
    # Split over two devices, each half is summed by its own executable, which XLA
    # compiles differently from the whole: the placed sums differ from jax.jit's by far
    # more than float32's tolerance, yet are no less accurate against float64.
    x = _cancelling_rows()
    _, graph = placed_module(_halves, args=(x,))
    decisions = _decisions(_halves_on_two_devices(graph))
    got = run_placed(_halves, decisions, DEVICES[:2], args=(x,))
    want = jax.jit(_halves)(x)
    assert not outputs_match(got, want)[0]  # only the arbiter accepts it
    result = measure_placed(_halves, decisions, DEVICES[:2], args=(x,), repeats=1, warmup=0)
    assert result.correct, result.message
    assert "float64" in result.message
    exact = x.astype(np.float64).sum(axis=1)
    single = np.max(np.abs(np.asarray(want, np.float64) - exact))
    assert np.max(np.abs(np.asarray(got, np.float64) - exact)) <= 4 * single
    # The check itself, on the plain row sum: numpy's per-half pairwise sums (what a
    # split of the sum over two devices adds) are outside the tolerance of XLA's
    # one-device sum, and as accurate against float64.
    row_sum = lambda a: jnp.sum(a, axis=1)  # noqa: E731
    whole, _ = placed_module(row_sum, args=(x,))
    want = np.asarray(jax.jit(row_sum)(x))
    other = x[:, :2048].sum(axis=1, dtype=np.float32) + x[:, 2048:].sum(axis=1, dtype=np.float32)
    assert not outputs_match([other], [want])[0]
    ok, message = check_placed_outputs(whole, [x], [other], [want])
    assert ok and "float64" in message, message


def test_float64_arbiter_still_rejects_a_wrong_placed_result():
    x = _cancelling_rows()
    module, graph = placed_module(_halves, args=(x,))
    want = np.asarray(jax.jit(_halves)(x))
    ok, message = check_placed_outputs(module, [x], [want + 0.5], [want])
    assert not ok and "against float64" in message, message
    # End to end: a program that computes something else (off by 1%) run as the
    # placement of _halves is rejected by measure_placed, with no times.
    wrong_module, wrong_graph = placed_module(lambda a: _halves(a) * 1.01 + 1.0, args=(x,))
    wrong = compile_placed(
        wrong_module, _decisions(_halves_on_two_devices(wrong_graph)), DEVICES[:2]
    )
    result = measure_placed(
        _halves, Decisions.default(graph), DEVICES[:2], args=(x,), program=wrong, repeats=1
    )
    assert not result.correct and result.time_s is None
    assert "against float64" in result.message, result.message


def test_fusion_off_compile_can_set_the_arbiters_bar():
    exact = np.linspace(1.0, 2.0, 16)
    want = (exact + 1e-7).astype(np.float32)  # the one-device compile: accurate
    got = (exact + 1e-3).astype(np.float32)  # outside float32's tolerance of want

    def never() -> list[np.ndarray]:
        raise AssertionError("evaluated although the first bar was enough")

    fusion_off = FUSION_OFF_REFERENCE
    # As inaccurate as XLA's fusion-off compile of the module: accepted, and said so.
    ok, message = as_accurate_as_reference(
        [got], [want], [exact], others=[(fusion_off, lambda: [exact + 5e-4])]
    )
    assert ok and fusion_off in message, message
    # Four times less accurate than every one of XLA's compiles: rejected.
    ok, message = as_accurate_as_reference(
        [got], [want], [exact], others=[(fusion_off, [exact + 1e-4])]
    )
    assert not ok and fusion_off in message, message
    # The fusion-off outputs are only computed when the one-device bar fails.
    ok, _ = as_accurate_as_reference([want + 2e-7], [want], [exact], others=[("x", never)])
    assert ok
    # check_placed_outputs passes its fusion-off outputs on (here given, not compiled).
    x = _cancelling_rows()
    row_sum = lambda a: jnp.sum(a, axis=1)  # noqa: E731
    whole, _ = placed_module(row_sum, args=(x,))
    want = np.asarray(jax.jit(row_sum)(x))
    exact = x.astype(np.float64).sum(axis=1)
    off = np.abs(want - exact).max() * 10 + 1e-3
    bad = (exact + off).astype(np.float32)
    assert not check_placed_outputs(whole, [x], [bad], [want], exact=[exact])[0]
    ok, message = check_placed_outputs(
        whole, [x], [bad], [want], exact=[exact], unfused=[exact + off / 2]
    )
    assert ok and fusion_off in message, message
