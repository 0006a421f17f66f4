"""The learned kernel cost model: featurizer, dataset files, thunk-to-kernel mapping,
training, the simulator's use of it and its fallback."""

from __future__ import annotations

import gzip
import warnings

import jax
import numpy as np
import pytest

from hlo_go.calibration import kernel_dataset as kd
from hlo_go.calibration import train_kernel_model as tk
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim import Cluster, simulate
from hlo_go.sim.learned import (
    EDGE_FEATURES,
    GLOBAL_FEATURES,
    NODE_FEATURES,
    KernelModel,
    KernelModelError,
    MissingKernelModelWarning,
    ModelConfig,
    featurize,
    pad_batch,
    read_kernel_model,
    save_kernel_model,
)
from hlo_go.sim.learned import features as kfeatures
from hlo_go.sim.learned import predict as kpredict
from hlo_go.sim.learned.model import KernelNet, init_params
from hlo_go.sim.presets import host_cpu

SMALL = """HloModule small

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[64,32], w: f32[32,16]) -> f32[] {
  %x = f32[64,32]{1,0} parameter(0)
  %w = f32[32,16]{1,0} parameter(1)
  %d = f32[64,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %t = f32[64,16]{1,0} tanh(%d)
  %m = f32[64,16]{1,0} multiply(%t, %t)
  %e = f32[64,16]{1,0} exponential(%m)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%e, %z), dimensions={0,1}, to_apply=%sum
}
"""


@pytest.fixture(scope="module")
def graph() -> OpGraph:
    return build_graph(parse_hlo(SMALL))


def _group(graph: OpGraph, fused: tuple[str, ...] = ("t", "m", "e")) -> np.ndarray:
    group = np.arange(graph.num_nodes, dtype=np.int32)
    ids = [graph.node_index[n] for n in fused]
    group[ids] = min(ids)
    return group


def _kernels(
    graph: OpGraph, group: np.ndarray, cluster: Cluster | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR of the launched kernels and their roofline durations (on ``host-cpu-1``)."""
    cluster = cluster or host_cpu(1, kernel_model="")
    result = simulate(graph, cluster, Decisions.default(graph), group=group)
    t = result.timeline
    kernels = np.flatnonzero(~t.kernel_free)
    ptr, members = kpredict.kernel_subset(t.kernel_ptr, t.kernel_nodes, kernels)
    return ptr, members, (t.kernel_end - t.kernel_start)[kernels]


def _model(graph: OpGraph, *, seed: int = 0) -> KernelModel:
    ptr, members, roofline = _kernels(graph, _group(graph))
    example = pad_batch(featurize(graph, ptr, members, roofline, np.ones(roofline.size)))
    config = ModelConfig(hidden=16, layers=2, opcode_embedding=4, mlp=16)
    return KernelModel("test", config, init_params(config, example, seed=seed), gap_s=1e-6)


# ---------------------------------------------------------------------------------------------
# Features.


def test_featurizer_shapes(graph: OpGraph):
    ptr, members, roofline = _kernels(graph, _group(graph))
    names = [graph.names[v] for v in members.tolist()]
    assert sorted(names) == ["d", "e", "m", "r", "t"]  # x, w, z are holders (free)
    batch = featurize(graph, ptr, members, roofline, np.ones(roofline.size))
    k = ptr.size - 1
    assert batch.num_graphs == k
    assert batch.node_features.shape == (members.size, NODE_FEATURES)
    assert batch.opcode.shape == (members.size,)
    assert batch.global_features.shape == (k, GLOBAL_FEATURES)
    np.testing.assert_allclose(batch.base, np.log(roofline), rtol=1e-6)
    np.testing.assert_array_equal(batch.n_node, np.diff(ptr))
    # The fused kernel t -> m -> e has two data edges, each passed both ways.
    fused = int(np.flatnonzero(np.diff(ptr) == 3)[0])
    assert batch.n_edge[fused] == 4 and batch.n_edge.sum() == 4
    assert batch.edge_features.shape == (4, EDGE_FEATURES)
    assert sorted(batch.edge_features[:, 1].tolist()) == [0.0, 0.0, 1.0, 1.0]
    # Only e's value leaves the fused kernel; t reads d from outside (64 x 16 f32).
    start = int(ptr[fused])
    rows = {graph.names[v]: start + i for i, v in enumerate(members[ptr[fused] : ptr[fused + 1]])}
    layout = kfeatures.NUM_FEATURES + len(kfeatures.OP_CLASSES)
    leaves = layout + kfeatures.NUM_LAYOUT_FEATURES
    assert batch.node_features[rows["e"], leaves] == 1.0
    assert batch.node_features[rows["t"], leaves] == 0.0
    assert batch.node_features[rows["t"], leaves + 1] == pytest.approx(np.log1p(64 * 16 * 4))
    assert batch.node_features[rows["m"], leaves + 1] == 0.0
    # The dot's row carries its shape: M 64, N 16, K 32, the lhs contracting its minor dim.
    dot_row = int(np.flatnonzero(members == graph.node_index["d"])[0])
    m, n, kk, _, lhs_minor, rhs_minor = batch.node_features[dot_row, layout + 6 : layout + 12]
    np.testing.assert_allclose(np.expm1([m, n, kk]), [64, 16, 32], rtol=1e-5)
    assert (lhs_minor, rhs_minor) == (1.0, 0.0)
    # Edges stay inside their kernel.
    owner = np.repeat(np.arange(k), batch.n_node)
    assert (owner[batch.senders] == owner[batch.receivers]).all()


def test_padding_to_buckets(graph: OpGraph):
    ptr, members, roofline = _kernels(graph, _group(graph))
    batch = featurize(graph, ptr, members, roofline, np.ones(roofline.size))
    padded = pad_batch(batch)
    bucket = kfeatures.bucket_for(members.size, int(batch.n_edge.sum()), batch.num_graphs)
    assert padded.nodes["features"].shape == (bucket.n_node, NODE_FEATURES)
    assert padded.nodes["opcode"].shape == (bucket.n_node,)
    assert padded.edges.shape == (bucket.n_edge, EDGE_FEATURES)
    assert padded.senders.shape == padded.receivers.shape == (bucket.n_edge,)
    assert padded.n_node.shape == padded.n_edge.shape == (bucket.n_graph,)
    assert padded.globals["features"].shape == (bucket.n_graph, GLOBAL_FEATURES)
    assert padded.n_node.sum() == bucket.n_node and padded.n_edge.sum() == bucket.n_edge
    real = int(batch.n_edge.sum())
    assert (padded.senders[real:] == members.size).all()  # padding edges: first padding node
    # Two batches of similar size share a bucket (one compile).
    smaller = pad_batch(kfeatures.select(batch, np.arange(batch.num_graphs - 1)))
    assert smaller.nodes["features"].shape == padded.nodes["features"].shape
    with pytest.raises(ValueError, match="too small"):
        pad_batch(batch, kfeatures.Bucket(2, 1, 2))


def test_forward_eager_equals_jit(graph: OpGraph):
    model = _model(graph, seed=3)
    ptr, members, roofline = _kernels(graph, _group(graph))
    padded = pad_batch(featurize(graph, ptr, members, roofline, np.ones(roofline.size)))
    # Perturb the zero-initialized output layer so the network's output is not just the base.
    params = jax.tree.map(lambda a: a + 0.01, model.params)
    net = KernelNet(model.config)
    eager = net.apply({"params": params}, padded)
    jitted = jax.jit(net.apply)({"params": params}, padded)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.asarray(eager)[: ptr.size - 1], np.log(roofline))


# ---------------------------------------------------------------------------------------------
# Dataset files and the thunk-to-kernel mapping.


def _sample(graph: OpGraph, seconds: float = 1e-3, reference: float = 0.5) -> kd.KernelSample:
    group = _group(graph)
    labels = np.unique(group[[graph.node_index[n] for n in ("d", "t", "r")]]).astype(np.int32)
    return kd.KernelSample(
        "small",
        "fused t, m, e",
        group,
        labels,
        np.full(labels.size, seconds),
        0.01,
        (0.009, 0.012),
        1e-4,
        {"clock": "cpu", "cpu": 1, "reference_s": [reference, reference]},
        np.tile(np.array([[seconds, 2 * seconds, seconds / 2]]), (labels.size, 1)),
        np.array([1.0, 1.5, 1.2]),
    )


def test_dataset_round_trip(tmp_path, graph: OpGraph):
    sample = _sample(graph)
    path = kd.save_sample(tmp_path, sample)
    assert path == tmp_path / "small" / "fused_t_m_e.npz"
    back = kd.load_sample(path)
    assert (back.graph_name, back.variant) == (sample.graph_name, sample.variant)
    np.testing.assert_array_equal(back.group, sample.group)
    np.testing.assert_array_equal(back.kernel_label, sample.kernel_label)
    np.testing.assert_array_equal(back.kernel_s, sample.kernel_s)
    assert back.step_s == sample.step_s and back.step_spread_s == sample.step_spread_s
    assert back.unmapped_s == sample.unmapped_s
    np.testing.assert_array_equal(back.kernel_runs_s, sample.kernel_runs_s)
    np.testing.assert_array_equal(back.run_stretch, sample.run_stretch)
    assert back.meta["reference_s"] == [0.5, 0.5] and back.meta["format"] == kd.DATASET_FORMAT
    # A format 1 sample (no per-run times) written back, e.g. re-timed, stays format 1.
    old = sample._replace(kernel_runs_s=None, run_stretch=None, meta={**sample.meta, "format": 1})
    assert kd.load_sample(kd.save_sample(tmp_path, old)).meta["format"] == 1
    kd.save_graph(tmp_path, "small", parse_hlo(SMALL), graph)
    loaded = kd.load_dataset(tmp_path)
    assert list(loaded) == ["small"]
    again, samples = loaded["small"]
    assert again.fingerprint == graph.fingerprint and len(samples) == 1


def test_dataset_refuses_other_versions_and_graphs(tmp_path, graph: OpGraph):
    path = kd.save_sample(tmp_path, _sample(graph))
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    current = f'"format": {kd.DATASET_FORMAT}'
    arrays["meta"] = np.array(str(arrays["meta"]).replace(current, '"format": 99'))
    np.savez_compressed(path, **arrays)
    with pytest.raises(kd.DatasetError, match="format 99"):
        kd.load_sample(path)
    stored = kd.save_graph(tmp_path, "small", parse_hlo(SMALL), graph)
    body = gzip.decompress(stored.read_bytes()).decode()
    stored.write_bytes(gzip.compress(body.replace(graph.fingerprint, "0" * 16).encode()))
    with pytest.raises(kd.DatasetError, match="fingerprint"):
        kd.load_graph(tmp_path, "small")


def test_contention_factors(graph: OpGraph):
    samples = [_sample(graph, reference=r) for r in (1.0, 2.0, 4.0)]
    np.testing.assert_allclose(kd.contention_factors(samples), [2.0, 1.0, 0.5])
    bare = _sample(graph)._replace(meta={})
    np.testing.assert_allclose(kd.contention_factors([bare]), [1.0])
    # Steps in the graph's frame: interleaved timings where a sample has them, and the
    # frame is the interleaved (quiet) reference where there is one.
    inter = {"step_s": 0.03, "reference_s": 0.5, "rounds": 3}
    mixed = [*samples, samples[0]._replace(meta={**samples[0].meta, "interleaved": inter})]
    # the quiet reference 0.5: steps scaled by 0.5 / their own reference
    np.testing.assert_allclose(kd.corrected_steps(mixed), [0.005, 0.0025, 0.00125, 0.03])
    np.testing.assert_allclose(kd.corrected_steps([bare]), [bare.step_s])
    # kernels scaled to the quiet frame too: the profiled references 1, 2, 4 and 1
    np.testing.assert_allclose(kd.contention_factors(mixed), [0.5, 0.25, 0.125, 0.5])


def _interleaved(sample: kd.KernelSample, steps: list[float]) -> kd.KernelSample:
    inter = {
        "rounds": len(steps),
        "step_s": float(np.median(steps)),
        "step_samples_s": steps,
        "reference_s": 1.0,
        "reference_samples_s": [1.0] * len(steps),
    }
    return sample._replace(meta={**sample.meta, "interleaved": inter})


def test_split_half_tau_is_the_measurement_against_itself(graph: OpGraph):
    base = _sample(graph)
    # Four variants whose rounds agree: even rounds and odd rounds rank them alike.
    agree = [_interleaved(base, [t, t * 1.01, t * 0.99, t]) for t in (1.0, 2.0, 3.0, 4.0)]
    ratios = kd.round_ratios(agree)
    assert ratios is not None and ratios.shape == (4, 4)
    assert kd.split_half_tau(agree) == pytest.approx(1.0)
    # Odd rounds rank them in reverse: the measurement contradicts itself.
    flip = [_interleaved(base, [t, 5.0 - t]) for t in (1.0, 2.0, 3.0, 4.0)]
    assert kd.split_half_tau(flip) == pytest.approx(-1.0)
    # Per-round ratios pair each step with XLA's default in the same round.
    loaded = _interleaved(base, [2.0, 4.0])
    loaded.meta["interleaved"]["reference_samples_s"] = [1.0, 2.0]
    np.testing.assert_allclose(kd.round_ratios([loaded]), [[2.0, 2.0]])
    # ... and the step at the typical load is the median of those ratios times it.
    loaded.meta["interleaved"].update(step_s=3.0, reference_s=1.5)
    np.testing.assert_allclose(kd.corrected_steps([loaded]), [3.0])
    loaded.meta["interleaved"]["step_samples_s"] = [2.0, 8.0]  # ratios 2 and 4: median 3
    np.testing.assert_allclose(kd.corrected_steps([loaded]), [4.5])
    # Without per-round timings of one interleaving of them all: no figure.
    assert kd.split_half_tau([*agree[:3], base]) is None
    assert kd.split_half_tau([*agree[:3], _interleaved(base, [1.0, 2.0])]) is None
    assert kd.split_half_tau(agree[:2]) is None


def test_repeated_kernel_errors_compare_each_measurement_with_the_others(graph: OpGraph):
    d, t = graph.node_index["d"], graph.node_index["t"]
    alone = np.arange(graph.num_nodes, dtype=np.int32)  # every node its own kernel

    def sample(name: str, group: np.ndarray, labels: list[int], seconds: list[float]):
        return kd.KernelSample(
            "small", name, group, np.array(labels, np.int32), np.array(seconds), 1.0,
            (1.0, 1.0), 0.0, {},
        )  # fmt: skip

    fused = _group(graph, ("t", "m", "e"))  # t with others: another kernel than t alone
    samples = [
        sample("a", alone, [d, t], [1.0, 2.0]),
        sample("b", alone, [d, t], [1.2, 2.0]),
        sample("c", alone, [d], [0.8]),
        sample("f", fused, [d, int(fused[t])], [1.0, 5.0]),
    ]
    # d ran alone in 4 variants (1.0, 1.2, 0.8, 1.0): each time against the others' median
    errors = kd.repeated_kernel_errors(samples)
    want = [abs(1.0 / 1.0 - 1), abs(1.0 / 1.2 - 1), abs(1.0 / 0.8 - 1), abs(1.0 / 1.0 - 1)]
    np.testing.assert_allclose(np.sort(errors), np.sort(want))
    # t alone ran twice (the same time both): counted only when 2 repeats are enough
    assert kd.repeated_kernel_errors(samples, min_repeats=2).size == 6
    assert kd.repeated_kernel_errors(samples, min_repeats=5).size == 0
    with pytest.raises(ValueError, match="at least 2"):
        kd.repeated_kernel_errors(samples, min_repeats=1)


def test_kernel_seconds_undo_preemption_by_length(graph: OpGraph):
    base = _sample(graph)
    runs = np.array([[1e-6, 1e-6, 1e-6], [1.0, 1.0, 1.0]])  # CPU-scaled times per run
    quiet = base._replace(kernel_label=base.kernel_label[:2], kernel_runs_s=runs)
    quiet = quiet._replace(run_stretch=np.ones(3))
    np.testing.assert_allclose(kd.kernel_seconds(quiet), [1e-6, 1.0])
    loaded = quiet._replace(run_stretch=np.full(3, 3.0))
    short, long_ = kd.kernel_seconds(loaded)
    # A microsecond event was hardly ever preempted: its wall time (3 us) stands; a
    # one-second event lost two thirds of its wall time (3 s) to other processes.
    assert short == pytest.approx(3e-6, rel=1e-2)
    assert long_ == pytest.approx(1.0, rel=1e-3)
    old = base._replace(kernel_runs_s=None, run_stretch=None)
    np.testing.assert_array_equal(kd.kernel_seconds(old), base.kernel_s)


COMPILED = """HloModule small

%fused (p0: f32[64,16]) -> f32[64,16] {
  %p0 = f32[64,16]{1,0} parameter(0)
  %t = f32[64,16]{1,0} tanh(%p0)
  %t.clone = f32[64,16]{1,0} tanh(%p0)
  %m = f32[64,16]{1,0} multiply(%t, %t.clone)
  ROOT %e = f32[64,16]{1,0} exponential(%m)
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[64,32], w: f32[32,16]) -> f32[] {
  %x = f32[64,32]{1,0} parameter(0)
  %w = f32[32,16]{1,0} parameter(1)
  %d = f32[64,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %hlo_go_fusion.0 = f32[64,16]{1,0} fusion(%d), kind=kLoop, calls=%fused
  %copy.7 = f32[64,16]{1,0} copy(%hlo_go_fusion.0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%copy.7, %z), dimensions={0,1}, to_apply=%sum
}
"""


def test_thunks_charged_to_kernels(graph: OpGraph):
    group = _group(graph)
    times = {"d": 3.0, "hlo_go_fusion.0": 2.0, "copy.7": 0.5, "r": 1.0, "s": 0.25}
    owners = kd.thunk_owners(graph, group, COMPILED)
    assert owners["copy.7"] == -1 and owners["m"] == owners["hlo_go_fusion.0"]
    labels, seconds, unmapped = kd.kernel_times(graph, group, COMPILED, times)
    by_label = dict(zip(labels.tolist(), seconds.tolist(), strict=True))
    idx = graph.node_index
    assert by_label[group[idx["d"]]] == 3.0
    assert by_label[group[idx["t"]]] == 2.0  # the fusion, found by its members' names
    assert by_label[group[idx["r"]]] == 1.25  # with the thunks of what it calls
    assert unmapped == 0.5  # the copy XLA added belongs to no group


# ---------------------------------------------------------------------------------------------
# Training.


def _examples(
    graph: OpGraph, factor: float, cluster: Cluster = tk.ROOFLINE_CLUSTER
) -> tk.GraphExamples:
    """Examples whose measured kernels take ``factor`` times ``cluster``'s roofline time
    (matrix ops three times more)."""
    samples = []
    for fused in (("t", "m", "e"), ("t", "m"), ("m", "e"), ()):
        group = _group(graph, fused) if fused else np.arange(graph.num_nodes, dtype=np.int32)
        ptr, members, roofline = _kernels(graph, group, cluster)
        labels = group[members[ptr[:-1]]]
        is_dot = np.array([graph.names[members[p]] == "d" for p in ptr[:-1].tolist()])
        seconds = roofline * factor * np.where(is_dot, 3.0, 1.0)
        samples.append(
            kd.KernelSample(
                "small", f"v{len(samples)}", group, labels.astype(np.int32), seconds,
                float(seconds.sum()) + 1e-5, (0.0, 0.0), 0.0, {},
            )
        )  # fmt: skip
    return tk.examples("small", graph, samples, cluster=cluster)


def test_training_decreases_loss(graph: OpGraph):
    ex = _examples(graph, factor=4.0)
    config = ModelConfig(hidden=16, layers=1, opcode_embedding=4, mlp=16)
    result = tk.train([ex], config=config, steps=60, batch_size=8, log_every=10, seed=1)
    assert len(result.losses) == 6
    assert result.losses[-1] < 0.5 * result.losses[0]
    assert result.kernels == int(np.isfinite(ex.measured_s).sum())
    assert result.model.gap_s >= 0.0
    report = tk.evaluate([ex], result.model, min_variants=2)
    assert (
        report["learned"]["kernel_median_abs_error"] < report["analytic"]["kernel_median_abs_error"]
    )


def test_a_gpu_dataset_trains_against_the_gpus_roofline(tmp_path, graph: OpGraph):
    """A GPU's kernels are priced against a GPU preset's roofline, less its whole launch
    overhead (a GPU kernel event holds none of it), and the model trained on them beats
    that roofline; fit(device=...) reads such a dataset without contention correction."""
    from hlo_go.sim.presets import H100_SXM5

    gpu = tk.roofline_cluster(H100_SXM5)
    assert gpu.devices[0].name == H100_SXM5.name and len(gpu.devices) == 1
    assert tk.roofline_gap_s(gpu) == H100_SXM5.launch_overhead
    assert tk.roofline_gap_s(tk.ROOFLINE_CLUSTER) == tk.ROOFLINE_GAP_S
    ex = _examples(graph, factor=4.0, cluster=gpu)
    host = _examples(graph, factor=4.0)
    assert not np.allclose(ex.roofline_s, host.roofline_s)  # priced on the H100, not the host
    config = ModelConfig(hidden=16, layers=1, opcode_embedding=4, mlp=16)
    result = tk.train([ex], config=config, steps=60, batch_size=8, log_every=10, seed=1)
    report = tk.evaluate([ex], result.model, min_variants=2)
    assert (
        report["learned"]["kernel_median_abs_error"] < report["analytic"]["kernel_median_abs_error"]
    )
    kd.save_graph(tmp_path, "small", parse_hlo(SMALL), graph)
    for sample in ex.samples:
        kd.save_sample(tmp_path, sample._replace(meta={"clock": "wall", "platform": "gpu"}))
    model = tk.fit(tmp_path, (), steps=20, hidden=16, layers=1, device="h100")
    assert model.meta["roofline_device"] == H100_SXM5.name
    assert model.meta["contention_corrected"] is False
    with pytest.raises(tk.FitError, match="device must be one of"):
        tk.fit(tmp_path, (), steps=1, device="tpu")


# ---------------------------------------------------------------------------------------------
# The simulator with a learned model.


def test_simulator_prices_kernels_with_the_model(tmp_path, graph: OpGraph):
    model = _model(graph)
    path = save_kernel_model(tmp_path / "m.msgpack", model)
    learned = host_cpu(1, kernel_model=str(path))
    analytic = host_cpu(1, kernel_model="")
    group = _group(graph)
    a = simulate(graph, analytic, Decisions.default(graph), group=group)
    b = simulate(graph, learned, Decisions.default(graph), group=group)
    again = simulate(graph, learned, Decisions.default(graph), group=group)  # cached
    assert b.fallback_kernels == 0 and b.summary()["fallback_kernels"] == 0
    assert again.step_time == b.step_time
    # An untrained model (zero output layer) predicts the roofline; the gap is added.
    da = a.timeline.kernel_end - a.timeline.kernel_start
    db = b.timeline.kernel_end - b.timeline.kernel_start
    launched = ~a.timeline.kernel_free
    np.testing.assert_allclose(db[launched], da[launched] + model.gap_s, rtol=1e-5)
    assert (db[~launched] == 0).all()
    back = read_kernel_model(path)
    assert back.config == model.config and back.gap_s == model.gap_s


def test_fallback_is_counted(tmp_path, graph: OpGraph, monkeypatch):
    path = save_kernel_model(tmp_path / "m.msgpack", _model(graph))
    monkeypatch.setattr(kfeatures, "MAX_KERNEL_NODES", 2)
    cluster = host_cpu(1, kernel_model=str(path))
    analytic = host_cpu(1, kernel_model="")
    group = _group(graph)
    result = simulate(graph, cluster, Decisions.default(graph), group=group)
    assert result.fallback_kernels == 1  # t, m, e: three members
    base = simulate(graph, analytic, Decisions.default(graph), group=group)
    t, u = result.timeline, base.timeline
    fused = int(np.flatnonzero(np.diff(t.kernel_ptr) == 3)[0])
    assert t.kernel_end[fused] - t.kernel_start[fused] == pytest.approx(
        u.kernel_end[fused] - u.kernel_start[fused]
    )
    assert simulate(graph, analytic, Decisions.default(graph), group=group).fallback_kernels == 0


def test_missing_and_bad_models(tmp_path, monkeypatch):
    monkeypatch.setitem(kpredict.SHIPPED, "not-installed", "no_such_model.msgpack")
    kpredict.load_kernel_model.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kpredict.load_kernel_model("not-installed") is None
    assert any(issubclass(w.category, MissingKernelModelWarning) for w in caught)
    with pytest.raises(KernelModelError, match="neither a shipped model"):
        kpredict.load_kernel_model(str(tmp_path / "absent.msgpack"))
    bad = tmp_path / "bad.msgpack"
    bad.write_bytes(b"\x00not msgpack")
    with pytest.raises(KernelModelError, match=r"bad\.msgpack"):
        read_kernel_model(bad)


def test_shipped_host_model_prices_host_cpu(graph: OpGraph):
    from hlo_go.sim import get_cluster
    from hlo_go.sim.presets import HOST_KERNEL_MODEL

    if HOST_KERNEL_MODEL not in kpredict.shipped_models():
        pytest.skip("the host-cpu kernel model is not installed")
    cluster = host_cpu(1, kernel_model=HOST_KERNEL_MODEL)
    result = simulate(graph, cluster, Decisions.default(graph), group=_group(graph))
    assert np.isfinite(result.step_time) and result.step_time > 0
    assert result.fallback_kernels == 0
    # Opt-in: the preset by name keeps the roofline.
    assert all(d.kernel_model == "" for d in get_cluster("host-cpu-1").devices)


def test_dataset_command_starts_without_runpy_warnings() -> None:
    """``python -m hlo_go.calibration.kernel_dataset`` runs the module fresh: the package
    does not import it first (runpy would warn that it may behave unpredictably)."""
    import subprocess
    import sys

    module = "hlo_go.calibration.kernel_dataset"
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", module, "--help"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"usage: python -m {module}" in done.stdout


def test_generate_never_puts_two_graphs_on_one_core(tmp_path, monkeypatch):
    import threading
    import time

    from hlo_go.xla import timing

    busy: set[int] = set()
    clashes: list[int] = []
    lock = threading.Lock()

    def fake_pinned(fn, name, root, *, cpu, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            if cpu in busy:
                clashes.append(cpu)
            busy.add(cpu)
        time.sleep(0.05 if name == "slow" else 0.01)
        with lock:
            busy.discard(cpu)
        return {"graph": name, "measured": [], "skipped": [], "failed": {}}

    monkeypatch.setattr(timing, "in_pinned_process", fake_pinned)
    names = ["slow", "a", "b", "c", "d", "e"]
    results = kd.generate(names, tmp_path, variants=1, jobs=2, cpus=[0, 1])
    assert [r["graph"] for r in results] == names and clashes == []
