"""Tests of hlo_go.sim: hand-computed timelines on tiny graphs, invariants on corpus graphs,
clusters and their files, plotting and the command."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from hlo_go.decisions import Decisions, FusionLimits
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim import (
    Cluster,
    ClusterFileError,
    Device,
    Link,
    SimResult,
    cluster_from_dict,
    cluster_to_dict,
    get_cluster,
    load_cluster,
    names,
    plot_timeline,
    simulate,
    simulate_batch,
)
from hlo_go.sim.presets import HOST_KERNEL_MODEL

US = 1e-6
KB4 = 4096  # bytes of an f32[1024]

# Round numbers: 1024 FLOP (or transcendentals) take 1 us, 4096 bytes take 1 us, a launch
# takes 1 us; a transfer of an f32[1024] takes 1 us latency + 1 us of bandwidth.
TINY = Device(
    "tiny",
    peak_flops={"f32": 1.024e9},
    memory_bandwidth=4.096e9,
    memory_capacity=1e9,
    launch_overhead=1 * US,
    transcendentals_per_s=1.024e9,
)


def tiny_cluster(num_devices: int = 1, *, capacity: float = 1e9, channel: str = "") -> Cluster:
    device = TINY.replace(memory_capacity=capacity)
    links = [
        Link(i, j, 4.096e9, 1 * US, channel)
        for i, j in itertools.permutations(range(num_devices), 2)
    ]
    return Cluster("tiny", (device,) * num_devices, tuple(links))


def graph_of(body: str, extra: str = "") -> OpGraph:
    return build_graph(parse_hlo(f"HloModule m\n{extra}\nENTRY e {{\n{body}\n}}\n"), validate=True)


def decide(
    graph: OpGraph,
    placement: dict[str, int] | None = None,
    priority: dict[str, float] | None = None,
    fusion: dict[str, float] | float = 0.0,
) -> Decisions:
    n = graph.num_nodes
    place = np.zeros(n, np.int32)
    for name, device in (placement or {}).items():
        place[graph.node_index[name]] = device
    prio = np.zeros(n, np.float32)
    for name, value in (priority or {}).items():
        prio[graph.node_index[name]] = value
    if isinstance(fusion, dict):
        fuse = np.zeros(n, np.float32)
        for name, value in fusion.items():
            fuse[graph.node_index[name]] = value
    else:
        fuse = np.full(n, fusion, np.float32)
    return Decisions(place, prio, fuse)


def span(result: SimResult, graph: OpGraph, name: str) -> tuple[float, float]:
    """(start, end) in microseconds of the kernel holding node ``name``."""
    k = result.timeline.node_kernel[graph.node_index[name]]
    return (result.timeline.kernel_start[k] / US, result.timeline.kernel_end[k] / US)


CHAIN = """
  p = f32[1024] parameter(0)
  a = f32[1024] negate(p)
  b = f32[1024] exponential(a)
  ROOT c = f32[1024] add(b, a)
"""


def test_chain_timeline_by_hand():
    # negate: 1 us launch + max(1 us flops, 8 KiB = 2 us) = 3 us; exponential: 1 + max(1, 2)
    # = 3 us; add: 1 + max(1, 12 KiB = 3 us) = 4 us.
    g = graph_of(CHAIN)
    result = simulate(g, tiny_cluster(), decide(g))
    assert span(result, g, "a") == pytest.approx((0, 3))
    assert span(result, g, "b") == pytest.approx((3, 6))
    assert span(result, g, "c") == pytest.approx((6, 10))
    assert result.step_time == pytest.approx(10 * US)
    assert result.busy_time == pytest.approx([10 * US])
    assert result.num_kernels == 3
    # Live at 6 us: p (whole step), a (until c ends), b, c.
    assert result.peak_memory.tolist() == [4 * KB4]
    assert result.bytes_moved == 0 and not result.oom


def test_diamond_timeline_by_hand():
    g = graph_of(
        """
  p = f32[1024] parameter(0)
  a = f32[1024] negate(p)
  b = f32[1024] exponential(a)
  c = f32[1024] negate(a)
  ROOT d = f32[1024] add(b, c)
"""
    )
    result = simulate(g, tiny_cluster(), decide(g))
    # FIFO: b is defined before c.
    spans = np.array([span(result, g, x) for x in "abcd"])
    assert spans == pytest.approx(np.array([(0, 3), (3, 6), (6, 9), (9, 13)]))
    assert result.step_time == pytest.approx(13 * US)
    # At 6 us: p, a, b, c; at 9 us a is freed (c ended) and d allocated: p, b, c, d.
    assert result.peak_memory.tolist() == [4 * KB4]
    buffers = result.timeline
    a = np.flatnonzero(buffers.buffer_node == g.node_index["a"])[0]
    assert (buffers.buffer_alloc[a] / US, buffers.buffer_free[a] / US) == pytest.approx((0, 9))


TWO_DEVICES = """
  p = f32[1024] parameter(0)
  a = f32[1024] negate(p)
  b = f32[1024] exponential(a)
  c = f32[1024] negate(a)
  ROOT d = f32[1024] add(b, c)
"""


def test_transfer_overlaps_compute():
    # a on device 0 [0, 3]; a -> device 1 over [3, 5] (1 us latency + 1 us) while c runs on
    # device 0 [3, 6]; b on device 1 [5, 8]; b -> device 0 over [8, 10]; d [10, 14].
    g = graph_of(TWO_DEVICES)
    result = simulate(g, tiny_cluster(2), decide(g, placement={"b": 1}))
    assert span(result, g, "a") == pytest.approx((0, 3))
    assert span(result, g, "c") == pytest.approx((3, 6))
    assert span(result, g, "b") == pytest.approx((5, 8))
    assert span(result, g, "d") == pytest.approx((10, 14))
    timeline = result.timeline
    assert timeline.num_transfers == 2
    transfers = np.sort(np.stack([timeline.transfer_start, timeline.transfer_end], 1), 0) / US
    assert transfers == pytest.approx(np.array([(3, 5), (8, 10)]))
    assert result.bytes_moved == 2 * KB4
    assert result.step_time == pytest.approx(14 * US)
    assert result.busy_time == pytest.approx([10 * US, 3 * US])
    # Device 1 holds a's copy [3, 8] and b [5, 10]: both at once.
    assert result.peak_memory[1] == 2 * KB4


def test_link_contention_serializes_transfers():
    # Two values leave device 0 at the same time over one shared channel: the second waits.
    g = graph_of(
        """
  p = f32[1024] parameter(0)
  q = f32[1024] parameter(1)
  a = f32[1024] negate(p)
  b = f32[1024] negate(q)
  ROOT t = (f32[1024], f32[1024]) tuple(a, b)
"""
    )
    shared = simulate(g, tiny_cluster(3, channel="bus"), decide(g, placement={"a": 1, "b": 2}))
    starts = np.sort(shared.timeline.transfer_start) / US
    # p and q leave device 0 one by one; a [2, 5] and b [4, 7] come back one by one.
    assert starts == pytest.approx([0, 2, 5, 7])
    assert span(shared, g, "b") == pytest.approx((4, 7))
    assert shared.step_time == pytest.approx(9 * US)
    separate = simulate(g, tiny_cluster(3), decide(g, placement={"a": 1, "b": 2}))
    assert np.sort(separate.timeline.transfer_start) / US == pytest.approx([0, 0, 5, 5])
    assert separate.step_time == pytest.approx(7 * US)


PRIORITY = """
  p = f32[1024] parameter(0)
  a = f32[1024] negate(p)
  b = f32[1024] exponential(p)
  e = f32[1024] negate(b)
  ROOT t = (f32[1024], f32[1024]) tuple(a, e)
"""


def test_priority_changes_the_order_and_the_step_time():
    g = graph_of(PRIORITY)
    placement = {"e": 1}
    fifo = simulate(g, tiny_cluster(2), decide(g, placement))
    # FIFO: a [0, 3], b [3, 6], b -> dev 1 [6, 8], e [8, 11], e -> dev 0 [11, 13].
    assert span(fifo, g, "a") == pytest.approx((0, 3))
    assert span(fifo, g, "b") == pytest.approx((3, 6))
    assert fifo.step_time == pytest.approx(13 * US)
    first_b = simulate(g, tiny_cluster(2), decide(g, placement, priority={"b": 1.0}))
    # b first: b [0, 3], a [3, 6], transfer [3, 5], e [5, 8], back [8, 10].
    assert span(first_b, g, "b") == pytest.approx((0, 3))
    assert span(first_b, g, "a") == pytest.approx((3, 6))
    assert span(first_b, g, "e") == pytest.approx((5, 8))
    assert first_b.step_time == pytest.approx(10 * US)


def test_fusion_removes_the_memory_round_trip():
    g = graph_of(CHAIN)
    result = simulate(g, tiny_cluster(), decide(g, fusion=1.0))
    # One kernel: reads p (4 KiB), writes c (4 KiB) = 2 us; compute 1 + 1 + 1 = 3 us;
    # 1 us launch + max(3, 2) = 4 us instead of 10 us.
    assert result.num_kernels == 1
    assert len(set(result.fusion_group.tolist()[1:])) == 1
    assert span(result, g, "c") == pytest.approx((0, 4))
    assert result.step_time == pytest.approx(4 * US)
    assert result.timeline.kernel_bytes.max() == 2 * KB4
    # Intermediates are never allocated: only p and c.
    assert result.peak_memory.tolist() == [2 * KB4]


def test_partial_fusion_writes_values_used_outside():
    # Fusing a and b only: a is still read by c, so the group writes a and b.
    g = graph_of(CHAIN)
    result = simulate(g, tiny_cluster(), decide(g, fusion={"a": 1, "b": 1}))
    assert result.num_kernels == 2
    # Group {a, b}: reads p 4 KiB, writes a and b 8 KiB: 1 + max(2, 3) = 4 us; c 4 us.
    assert span(result, g, "b") == pytest.approx((0, 4))
    assert span(result, g, "c") == pytest.approx((4, 8))


SHARED_BROADCAST = """
  p = f32[1024] parameter(0)
  q = f32[1024] parameter(1)
  s = f32[] constant(2)
  bc = f32[1024] broadcast(s), dimensions={}
  a = f32[1024] multiply(p, bc)
  e = f32[1024] exponential(a)
  m = f32[1024] multiply(q, bc)
  x = f32[1024] exponential(m)
  ROOT r = f32[1024] add(e, x)
"""


def test_a_fused_reader_recomputes_a_shared_broadcast():
    # Groups {bc, a, e} and {m, x} (at most 3 members); the lowering clones bc into the
    # second group (hlo_go.xla.fusion.regenerate_shared), so the first never writes it
    # and the second reads only the scalar s.
    g = graph_of(SHARED_BROADCAST)
    fusion = {"bc": 2, "a": 2, "e": 2, "m": 1, "x": 1}
    result = simulate(g, tiny_cluster(), decide(g, fusion=fusion), limits=FusionLimits(max_nodes=3))
    assert result.num_kernels == 3
    # {bc, a, e}: reads p (4 KiB) and s, writes e (4 KiB): 1 + max(2, 2) = 3 us.
    assert span(result, g, "e") == pytest.approx((0, 3), rel=1e-3)
    # {m, x}: reads q and s, writes x: 1 + max(2, 2) = 3 us; then r: 1 + 3 = 4 us.
    assert span(result, g, "x") == pytest.approx((3, 6), rel=1e-3)
    assert result.step_time == pytest.approx(10 * US, rel=1e-3)
    # Unfused, its reader m reads the broadcast from memory: {bc, a, e} writes it too.
    alone = simulate(g, tiny_cluster(), decide(g, fusion={"bc": 1, "a": 1, "e": 1}))
    assert span(alone, g, "e") == pytest.approx((0, 4), rel=1e-3)


def test_a_value_computed_from_an_expensive_member_is_written():
    # y = -(exp(p) * 2) is cheap itself, but recomputing it means recomputing exp(p):
    # the lowering keeps it an output of {bc, t, w, y, e}, and so does the simulator.
    g = graph_of("""
  p = f32[1024] parameter(0)
  q = f32[1024] parameter(1)
  s = f32[] constant(2)
  bc = f32[1024] broadcast(s), dimensions={}
  t = f32[1024] exponential(p)
  w = f32[1024] multiply(t, bc)
  y = f32[1024] negate(w)
  e = f32[1024] exponential(y)
  m = f32[1024] multiply(q, y)
  x = f32[1024] exponential(m)
  ROOT r = f32[1024] add(e, x)
""")
    fusion = {"bc": 2, "t": 2, "w": 2, "y": 2, "e": 2, "m": 1, "x": 1}
    result = simulate(g, tiny_cluster(), decide(g, fusion=fusion), limits=FusionLimits(max_nodes=5))
    assert result.num_kernels == 3
    # Reads p and s, writes y and e.
    kernel = result.timeline.node_kernel[g.node_index["e"]]
    assert result.timeline.kernel_bytes[kernel] == pytest.approx(3 * KB4, rel=1e-3)


POOLED = """
  p = f32[32,32] parameter(0)
  a = f32[32,32] exponential(p)
  z = f32[] constant(0)
  ROOT r = f32[32,32] reduce-window(a, z), window={size=3x3 pad=1_1x1_1}, to_apply=add
"""
POOLED_ADD = (
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}"
)


def test_a_producer_fused_into_a_reduce_window_is_computed_at_every_read():
    # The 3x3 window (SAME padding) reads each of the 1024 elements of a 94 * 94 / 1024
    # times (31 + 32 + 31 taps per dimension hit the operand); XLA's loop emitter computes
    # a fused a at each read.
    g = graph_of(POOLED, POOLED_ADD)
    reads = 94 * 94 / 1024
    assert g.operand_reads[g.node_index["r"]] == pytest.approx(reads)
    assert g.operand_reads[g.node_index["a"]] == 1.0
    # Apart: a = 1 + max(1 us exp, 2 us) = 3 us; r = 1 + max(8 us of adds, ~2 us) = 9 us.
    apart = simulate(g, tiny_cluster(), decide(g))
    assert apart.step_time == pytest.approx(12 * US, rel=1e-3)
    # Fused: 1 us launch + 8 us of adds + 1 us of exponentials at every read.
    fused = simulate(g, tiny_cluster(), decide(g, fusion={"a": 1, "r": 1}))
    assert fused.num_kernels == 1
    assert fused.step_time == pytest.approx((1 + 8 + reads) * US, rel=1e-3)
    # Priority fusion's pairwise estimate prices the pair alike: fusing it loses.
    from hlo_go.baselines.fusion import edge_fusion_benefit

    benefit = edge_fusion_benefit(g, tiny_cluster(), np.zeros(g.num_nodes, np.int64))
    edge = np.flatnonzero((g.senders == g.node_index["a"]) & (g.receivers == g.node_index["r"]))
    assert benefit[edge] == pytest.approx((12 - (1 + 8 + reads)) * US, rel=1e-3)


def test_a_window_read_rate_prices_reduce_windows_by_their_reads():
    # At 1.024e8 window reads/s, r's 8192 reads take 80 us; a's exponentials are untouched.
    g = graph_of(POOLED, POOLED_ADD)
    slow = Cluster("slow", (TINY.replace(window_reads_per_s=1.024e8),), ())
    apart = simulate(g, slow, decide(g))
    assert span(apart, g, "r") == pytest.approx((3, 3 + 1 + 80), rel=1e-3)
    fused = simulate(g, slow, decide(g, fusion={"a": 1, "r": 1}))
    assert fused.step_time == pytest.approx((1 + 80 + 94 * 94 / 1024) * US, rel=1e-3)
    # The rate travels through cluster files; a negative one is refused.
    assert cluster_from_dict(cluster_to_dict(slow)) == slow
    assert cluster_to_dict(get_cluster("host-cpu-1"))["devices"][0]["window_reads_per_s"] > 0
    with pytest.raises(ValueError, match="window_reads_per_s"):
        TINY.replace(window_reads_per_s=-1.0)


def test_reads_compound_along_fused_windows_and_not_across_kernels():
    # Two 3x3 windows in a row: a fused into both is computed reads^2 times per element.
    g = graph_of(
        """
  p = f32[32,32] parameter(0)
  a = f32[32,32] exponential(p)
  z = f32[] constant(0)
  r = f32[32,32] reduce-window(a, z), window={size=3x3 pad=1_1x1_1}, to_apply=add
  ROOT t = f32[32,32] reduce-window(r, z), window={size=3x3 pad=1_1x1_1}, to_apply=add
""",
        POOLED_ADD,
    )
    reads = 94 * 94 / 1024
    all_fused = simulate(g, tiny_cluster(), decide(g, fusion=1.0))
    # Launch + t's adds + r's adds at each of t's reads + a at each of those reads of r.
    assert all_fused.step_time == pytest.approx((1 + 8 + 8 * reads + reads**2) * US, rel=1e-3)
    # {a, r} and {t} apart: r is written once, so t's reads recompute nothing.
    split = simulate(g, tiny_cluster(), decide(g, fusion={"a": 1, "r": 1}))
    assert split.step_time == pytest.approx((1 + 8 + reads + 9) * US, rel=1e-3)


def test_oom_flag():
    g = graph_of(CHAIN)
    unfused = simulate(g, tiny_cluster(capacity=3 * KB4), decide(g))
    assert unfused.oom and unfused.oom_devices.tolist() == [0]
    fused = simulate(g, tiny_cluster(capacity=3 * KB4), decide(g, fusion=1.0))
    assert not fused.oom


def test_views_are_free_and_keep_their_buffers_alive():
    g = graph_of(
        """
  p = f32[1024] parameter(0)
  a = f32[1024] negate(p)
  t = (f32[1024], f32[1024]) tuple(a, p)
  x = f32[1024] get-tuple-element(t), index=0
  ROOT y = f32[1024] exponential(x)
"""
    )
    result = simulate(g, tiny_cluster(), decide(g))
    assert result.num_kernels == 2
    assert span(result, g, "y") == pytest.approx((3, 6))
    timeline = result.timeline
    a = np.flatnonzero(timeline.buffer_node == g.node_index["a"])[0]
    assert timeline.buffer_free[a] == pytest.approx(6 * US)  # read by y through t and x


def test_batch_matches_single_runs():
    g = graph_of(PRIORITY)
    candidates = [
        decide(g, {"e": 1}),
        decide(g, {"e": 1}, priority={"b": 1.0}),
        decide(g, fusion=1.0),
    ]
    batch = simulate_batch(g, tiny_cluster(2), candidates)
    single = [simulate(g, tiny_cluster(2), d).step_time for d in candidates]
    assert [r.step_time for r in batch] == single


def test_invalid_decisions_are_refused():
    g = graph_of(CHAIN)
    with pytest.raises(ValueError, match="not a device"):
        simulate(g, tiny_cluster(1), decide(g, placement={"a": 1}))


# ---------------------------------------------------------------------------------------------
# Invariants on corpus graphs.


# Graphs of the bundled corpus: one missing is a failure, not a skip.
CORPUS_GRAPHS = ("bert_l2", "rnnlm_l2_scan", "resnet_26", "transformer_xl_l2", "wavenet_s2")


@pytest.fixture(scope="module", params=CORPUS_GRAPHS)
def corpus_graph(request: pytest.FixtureRequest) -> OpGraph:
    from hlo_go import corpus

    return build_graph(corpus.load(request.param, "prefusion"))


def _random_decisions(graph: OpGraph, devices: int, seed: int, fuse: float = 0.7) -> Decisions:
    rng = np.random.default_rng(seed)
    n = graph.num_nodes
    # Contiguous blocks of the topological order, like a pipeline split, with noise.
    position = np.empty(n, np.int64)
    position[graph.topo_order] = np.arange(n)
    placement = (position * devices // max(n, 1)).astype(np.int32)
    noise = rng.random(n) < 0.1
    placement[noise] = rng.integers(0, devices, noise.sum())
    placement = placement[graph.colocation_group]
    fusion = np.where(rng.random(n) < fuse, rng.random(n), 0).astype(np.float32)
    return Decisions(placement, rng.random(n).astype(np.float32), fusion)


def check_invariants(graph: OpGraph, cluster: Cluster, result: SimResult) -> None:
    t = result.timeline
    kid = t.node_kernel.astype(np.int64)
    eps = 1e-12
    # Every node is in exactly one kernel, on its device.
    assert np.array_equal(np.sort(t.kernel_nodes), np.arange(graph.num_nodes))
    # No kernel starts before its inputs arrive.
    transfer_of = {
        (int(node), int(dst)): i
        for i, (node, dst) in enumerate(zip(t.transfer_node, t.transfer_dst, strict=True))
    }
    for s, r in zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True):
        ks, kr = kid[s], kid[r]
        if ks == kr:
            continue
        if t.kernel_device[ks] == t.kernel_device[kr]:
            assert t.kernel_start[kr] >= t.kernel_end[ks] - eps
        else:
            i = transfer_of[(s, int(t.kernel_device[kr]))]
            assert t.transfer_start[i] >= t.kernel_end[ks] - eps
            assert t.kernel_start[kr] >= t.transfer_end[i] - eps
    for s, r in zip(graph.control_senders.tolist(), graph.control_receivers.tolist(), strict=True):
        if kid[s] != kid[r]:
            assert t.kernel_start[kid[r]] >= t.kernel_end[kid[s]] - eps
    # One kernel at a time per device, one transfer at a time per channel.
    launched = ~t.kernel_free
    for d in range(cluster.num_devices):
        mask = launched & (t.kernel_device == d)
        order = np.argsort(t.kernel_start[mask], kind="stable")
        starts, ends = t.kernel_start[mask][order], t.kernel_end[mask][order]
        assert (starts[1:] >= ends[:-1] - eps).all()
    for c in np.unique(t.transfer_channel):
        mask = t.transfer_channel == c
        order = np.argsort(t.transfer_start[mask], kind="stable")
        starts, ends = t.transfer_start[mask][order], t.transfer_end[mask][order]
        assert (starts[1:] >= ends[:-1] - eps).all()
    # Durations, busy time, step time.
    durations = t.kernel_end - t.kernel_start
    assert (durations[launched] >= cluster.devices[0].launch_overhead - eps).all()
    assert (durations[t.kernel_free] == 0).all()
    assert np.bincount(
        t.kernel_device[launched], weights=durations[launched], minlength=cluster.num_devices
    ) == pytest.approx(result.busy_time)
    ends = np.concatenate([t.kernel_end, t.transfer_end])
    assert result.step_time == pytest.approx(ends.max(initial=0.0))
    assert result.bytes_moved == int(t.transfer_bytes.sum())
    # Memory: lifetimes cover producers and consumers; the accounting balances to zero;
    # the peak is the peak of the curve.
    assert (t.buffer_free >= t.buffer_alloc).all()
    own = ~t.buffer_copy
    for b in np.flatnonzero(own).tolist():
        v = int(t.buffer_node[b])
        if not t.kernel_free[kid[v]]:
            assert t.buffer_alloc[b] == t.kernel_start[kid[v]]
        users = graph.receivers[graph.senders == v]
        same = users[t.kernel_device[kid[users]] == t.buffer_device[b]]
        same = same[(kid[same] != kid[v]) & ~t.kernel_free[kid[same]]]
        if same.size:
            assert t.buffer_free[b] >= t.kernel_end[kid[same]].max() - eps
    for d in range(cluster.num_devices):
        times, used = t.memory_curve(d)
        if times.size:
            assert used[-1] == 0
            assert used.min() >= 0
            assert used.max() == result.peak_memory[d]
        else:
            assert result.peak_memory[d] == 0
    assert result.oom == bool((result.peak_memory > result.memory_capacity).any())


@pytest.mark.parametrize("cluster_name", ["v100x8", "tpu-v4-8", "host-cpu-1"])
def test_invariants_on_corpus_graphs(corpus_graph: OpGraph, cluster_name: str):
    cluster = get_cluster(cluster_name)
    devices = cluster.num_devices
    for seed in range(2):
        decisions = _random_decisions(corpus_graph, devices, seed, fuse=0.0 if seed else 0.7)
        result = simulate(corpus_graph, cluster, decisions)
        check_invariants(corpus_graph, cluster, result)


def test_default_decisions_on_one_device(corpus_graph: OpGraph):
    cluster = get_cluster("v100x4")
    result = simulate(corpus_graph, cluster, Decisions.default(corpus_graph))
    assert result.bytes_moved == 0
    assert result.busy_time[1:].sum() == 0
    # One device, no fusion: the step is the sum of the kernels' times.
    assert result.step_time == pytest.approx(result.busy_time[0])
    check_invariants(corpus_graph, cluster, result)


def test_fusion_reduces_kernels_and_bytes(corpus_graph: OpGraph):
    cluster = get_cluster("a100x8")
    n = corpus_graph.num_nodes
    base = simulate(corpus_graph, cluster, Decisions.default(corpus_graph))
    fused = simulate(
        corpus_graph,
        cluster,
        Decisions(np.zeros(n, np.int32), np.zeros(n, np.float32), np.ones(n, np.float32)),
    )
    assert fused.num_kernels < base.num_kernels
    assert fused.timeline.kernel_bytes.sum() <= base.timeline.kernel_bytes.sum()
    assert fused.step_time < base.step_time


# ---------------------------------------------------------------------------------------------
# Clusters, files, plots, the command.


def test_presets():
    expected = {"p100x2": 2, "p100x4": 4, "v100x4": 4, "v100x8": 8, "a100x8": 8, "h100x8": 8}
    expected |= {"tpu-v4-8": 4, "tpu-v5e-8": 8, **{f"host-cpu-{n}": n for n in range(1, 9)}}
    expected |= {f"host-cpu-{n}-learned": n for n in range(1, 9)}
    assert set(names()) == set(expected)
    for name, devices in expected.items():
        cluster = get_cluster(name)
        assert cluster.num_devices == devices
        links = cluster.link_arrays
        assert (links.bandwidth > 0).all() and (links.latency >= 0).all()
        assert (np.diag(links.channel) == -1).all()
    # DGX-1: NVLink pairs are faster than the PCIe/QPI ones.
    v100 = get_cluster("v100x8").link_arrays
    assert v100.bandwidth[0, 3] == 2 * v100.bandwidth[0, 1] > v100.bandwidth[0, 5]
    with pytest.raises(KeyError, match="unknown cluster"):
        get_cluster("v100x3")
    # host-cpu-N-learned: host-cpu-N with the shipped learned kernel model, named apart.
    learned, roofline = get_cluster("host-cpu-2-learned"), get_cluster("host-cpu-2")
    assert {d.kernel_model for d in learned.devices} == {HOST_KERNEL_MODEL}
    assert {d.kernel_model for d in roofline.devices} == {""}
    assert learned.name == "host-cpu-2-learned" and learned.links == roofline.links


def test_cluster_files_round_trip(tmp_path):
    cluster = get_cluster("v100x8")
    path = tmp_path / "box.json"
    path.write_text(json.dumps(cluster_to_dict(cluster)))
    assert load_cluster(path) == cluster
    toml = tmp_path / "mine.toml"
    toml.write_text(
        """
description = "two GPUs"
[[devices]]
name = "gpu"
count = 2
peak_flops = { f32 = 1e13 }
memory_bandwidth = 9e11
memory_capacity = 1.6e10
launch_overhead = 5e-6
[default_link]
bandwidth = 1e10
latency = 1e-5
channel = "pcie-{src}"
"""
    )
    mine = load_cluster(toml)
    assert mine.name == "mine" and mine.num_devices == 2
    assert mine.links[0].channel == "pcie-0"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[devices]]\nname = 'x'\n", "missing"),
        (
            "[[devices]]\ncount = 2\npeak_flops = {f32 = 1.0}\nmemory_bandwidth = 1.0\n"
            "memory_capacity = 1.0\nlaunch_overhead = 0.0\n",
            "no link for device pairs",
        ),
        (
            "[[devices]]\npeak_flops = {f33 = 1.0}\nmemory_bandwidth = 1.0\n"
            "memory_capacity = 1.0\nlaunch_overhead = 0.0\n",
            "unknown keys",
        ),
        (
            "[[devices]]\npeak_flops = {f32 = -1.0}\nmemory_bandwidth = 1.0\n"
            "memory_capacity = 1.0\nlaunch_overhead = 0.0\n",
            "positive",
        ),
        ("devices = [", "bad.toml"),
    ],
)
def test_cluster_file_errors(tmp_path, content: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(ClusterFileError, match=message):
        load_cluster(path)


def test_cluster_from_dict_links_both_ways():
    cluster = cluster_from_dict(
        {
            "devices": [
                {
                    "count": 2,
                    "peak_flops": {"f32": 1.0},
                    "memory_bandwidth": 1.0,
                    "memory_capacity": 1.0,
                    "launch_overhead": 0.0,
                }
            ],
            "links": [{"src": 0, "dst": 1, "bandwidth": 2.0, "latency": 0.0, "both_ways": True}],
        }
    )
    assert cluster.link_arrays.bandwidth[1, 0] == 2.0


def test_plot_timeline(tmp_path):
    g = graph_of(TWO_DEVICES)
    result = simulate(g, tiny_cluster(2), decide(g, placement={"b": 1}))
    path = plot_timeline(result, tmp_path / "t.png")
    assert path.stat().st_size > 1000


def test_simulate_command(tmp_path, capsys):
    from hlo_go.cli import main

    hlo = tmp_path / "m.hlo"
    hlo.write_text(f"HloModule m\nENTRY e {{\n{TWO_DEVICES}\n}}\n")
    decisions = tmp_path / "d.json"
    decisions.write_text(json.dumps({"placement": [0, 0, 1, 0, 0], "fusion_priority": 0}))
    argv = ["simulate", str(hlo), "--cluster", "v100x4", "--decisions", str(decisions)]
    assert main([*argv, "--plot", str(tmp_path / "p.png"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["result"]["transfers"] == 2
    assert (tmp_path / "p.png").exists()


def test_loop_pays_a_launch_per_kernel_per_trip():
    """A while's kernel time includes the launch overhead of every kernel it runs."""
    g = graph_of(
        """
  x = f32[1024] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[1024]) tuple(zero, x)
  loop = (s32[], f32[1024]) while(init), condition=cond, body=body, backend_config={"known_trip_count":{"n":"5"}}
  ROOT r = f32[1024] get-tuple-element(loop), index=1
""",
        extra="""
body {
  s = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[1024] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  b = f32[1024] negate(a)
  ROOT t = (s32[], f32[1024]) tuple(j, b)
}
cond {
  s = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
""",
    )
    loop = g.node_index["loop"]
    assert g.launches[loop] == 1 + 5 * 3  # itself; per trip j, b, c
    with_launches = simulate(g, tiny_cluster(), decide(g))
    without = simulate(g._replace(launches=None), tiny_cluster(), decide(g))
    # 16 launches of 1 us instead of 1; the roofline part is the same.
    assert span(with_launches, g, "loop")[1] - span(without, g, "loop")[1] == pytest.approx(15)


DOT_ADD = """
  p = f32[128,128] parameter(0)
  q = f32[128,128] parameter(1)
  d = f32[128,128] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[128,128] negate(p)
  ROOT a = f32[128,128] add(d, n)
"""


def test_large_matrices_never_fuse_on_a_device_that_runs_them_alone():
    # XLA:CPU (host-cpu presets): our lowering keeps a dot larger than XLA fuses out of
    # every fusion, so the simulator prices it alone whatever its fusion priority;
    # other devices fuse it as the decisions say.
    from hlo_go.decisions import large_matrix_nodes, unfuse_large_matrices

    graph = graph_of(DOT_ADD)
    d, n, a = (graph.node_index[x] for x in "dna")
    assert large_matrix_nodes(graph)[d] and large_matrix_nodes(graph).sum() == 1
    every = decide(graph, fusion=1.0)
    library = TINY.replace(fuses_large_matrices=False)
    alone = Cluster("library", (library,), ())
    fusing = Cluster("fusing", (TINY,), ())

    fused = simulate(graph, fusing, every).fusion_group
    assert fused[d] == fused[n] == fused[a]
    kept = simulate(graph, alone, every)
    assert kept.fusion_group[d] != kept.fusion_group[a] == kept.fusion_group[n]
    # exactly the decisions with the dot's priority taken away
    unfused_dot = every._replace(
        fusion_priority=unfuse_large_matrices(graph, every.fusion_priority)
    )
    assert unfused_dot.fusion_priority[d] == 0 and unfused_dot.fusion_priority[n] == 1
    assert kept.step_time == simulate(graph, fusing, unfused_dot).step_time
    assert unfuse_large_matrices(graph, unfused_dot.fusion_priority) is unfused_dot.fusion_priority
    # per device: the rule follows the dot's placement
    mixed = Cluster(
        "mixed", (TINY, library), (Link(0, 1, 4.096e9, 1 * US), Link(1, 0, 4.096e9, 1 * US))
    )
    on = {1: decide(graph, placement={"d": 1, "n": 1, "a": 1}, fusion=1.0), 0: every}
    groups = {dev: simulate(graph, mixed, dec).fusion_group for dev, dec in on.items()}
    assert groups[0][d] == groups[0][a] and groups[1][d] != groups[1][a]
    # the host presets run large matrices alone; the GPU and TPU presets fuse them
    assert not any(dev.fuses_large_matrices for dev in get_cluster("host-cpu-2").devices)
    assert all(dev.fuses_large_matrices for dev in get_cluster("v100x4").devices)
    # a cluster file keeps the flag, and a bad value is refused by name
    assert not cluster_from_dict(cluster_to_dict(alone)).devices[0].fuses_large_matrices
    with pytest.raises(ValueError, match="fuses_large_matrices must be true or false"):
        TINY.replace(fuses_large_matrices="no")
