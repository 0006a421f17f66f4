"""``hlo_go.graph.timeline_features``: an unbounded-device schedule, checked by hand."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from hlo_go.gonet import GOPolicy, PolicyConfig, prepare_input
from hlo_go.graph import (
    NUM_FEATURES,
    NUM_TIMELINE_FEATURES,
    TIMELINE_FEATURE_NAMES,
    OpGraph,
    build_graph,
    timeline_features,
)
from hlo_go.graph.timeline import asap_alap, mean_concurrency, node_durations
from hlo_go.hlo import parse_hlo
from hlo_go.rl import TrainConfig

# x feeds a large product (a) and a small negation (b), which run side by side; both
# feed c. d hangs off x alone, so it may run any time before the end.
DIAMOND = """HloModule diamond

ENTRY main {
  x = f32[256,256]{1,0} parameter(0)
  a = f32[256,256]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b = f32[256,256]{1,0} negate(x)
  c = f32[256,256]{1,0} add(a, b)
  d = f32[256,256]{1,0} exponential(x)
  ROOT t = (f32[256,256]{1,0}, f32[256,256]{1,0}) tuple(c, d)
}
"""


@pytest.fixture(scope="module")
def diamond() -> OpGraph:
    return build_graph(parse_hlo(DIAMOND), validate=True)


def _by_name(graph: OpGraph, values: np.ndarray) -> dict[str, float]:
    return {name: float(values[i]) for i, name in enumerate(graph.names)}


def test_durations_are_the_fixed_roofline(diamond: OpGraph):
    dur = _by_name(diamond, node_durations(diamond))
    a = diamond.node_index["a"]
    expected = max(
        float(diamond.flops[a]) / 1e12,
        (float(diamond.bytes_read[a]) + float(diamond.bytes_written[a])) / 1e11,
    )
    assert dur["a"] == pytest.approx(expected + 1e-6)
    assert dur["a"] > dur["b"] > 1e-6  # the product outweighs the negation


def test_asap_and_alap_starts_by_hand(diamond: OpGraph):
    dur = node_durations(diamond)
    start, late = asap_alap(diamond, dur)
    d, s, lt = _by_name(diamond, dur), _by_name(diamond, start), _by_name(diamond, late)
    assert s["x"] == 0.0
    assert s["a"] == s["b"] == s["d"] == pytest.approx(d["x"])
    assert s["c"] == pytest.approx(d["x"] + d["a"])
    assert s["t"] == pytest.approx(d["x"] + d["a"] + d["c"])
    end = s["t"] + d["t"]
    # On the critical path x -> a -> c -> t, latest equals earliest.
    for name in ("x", "a", "c", "t"):
        assert lt[name] == pytest.approx(s[name])
    assert lt["b"] == pytest.approx(s["c"] - d["b"])
    assert lt["d"] == pytest.approx(end - d["t"] - d["d"])


def test_concurrency_of_explicit_intervals():
    # [0, 4), [1, 3), [2, 6), [7, 8): the second overlaps the first for all its 2 units and
    # the third for 1; the last runs alone.
    start = np.array([0.0, 1.0, 2.0, 7.0])
    dur = np.array([4.0, 2.0, 4.0, 1.0])
    np.testing.assert_allclose(mean_concurrency(start, dur), [(2 + 2) / 4, (2 + 1) / 2, 3 / 4, 0])


def test_feature_columns(diamond: OpGraph):
    feats = timeline_features(diamond)
    assert feats.shape == (diamond.num_nodes, NUM_TIMELINE_FEATURES) == (6, 3)
    assert feats.dtype == np.float32
    col = {name: _by_name(diamond, feats[:, i]) for i, name in enumerate(TIMELINE_FEATURE_NAMES)}
    dur = _by_name(diamond, node_durations(diamond))
    length = sum(dur[n] for n in ("x", "a", "c", "t"))
    assert col["timeline_start"]["x"] == 0.0
    assert col["timeline_start"]["c"] == pytest.approx((dur["x"] + dur["a"]) / length, rel=1e-5)
    assert col["timeline_slack"]["a"] == pytest.approx(0.0, abs=1e-6)
    assert col["timeline_slack"]["b"] == pytest.approx((dur["a"] - dur["b"]) / length, rel=1e-5)
    # b and d run entirely beside a (d is shorter than a too): one or two others at a time.
    assert col["timeline_concurrency"]["b"] == pytest.approx(np.log1p(2.0), rel=1e-5)
    assert col["timeline_concurrency"]["x"] == 0.0
    overlap_a = dur["b"] + dur["d"]
    assert col["timeline_concurrency"]["a"] == pytest.approx(
        np.log1p(overlap_a / dur["a"]), rel=1e-5
    )


def test_policy_input_appends_the_columns(diamond: OpGraph):
    small = PolicyConfig(hidden_size=8, gnn_layers=1, num_heads=2, segment_length=8)
    plain = prepare_input(diamond, small)
    timed = prepare_input(diamond, dataclasses.replace(small, timeline_features=True))
    assert plain.graphs.nodes["features"].shape[1] == NUM_FEATURES
    features = timed.graphs.nodes["features"]
    assert features.shape[1] == NUM_FEATURES + NUM_TIMELINE_FEATURES
    np.testing.assert_array_equal(features[:, :NUM_FEATURES], plain.graphs.nodes["features"])
    np.testing.assert_array_equal(
        timed.to_nodes(features[:, NUM_FEATURES:]), timeline_features(diamond)
    )
    assert not features[diamond.num_nodes :, NUM_FEATURES:].any()  # padding rows stay 0


def test_a_policy_reads_them_eagerly_and_jitted(diamond: OpGraph):
    config = PolicyConfig(
        hidden_size=8, gnn_layers=1, num_heads=2, segment_length=8, timeline_features=True
    )
    policy = GOPolicy(config)
    params = policy.init(jax.random.PRNGKey(0), diamond, num_devices=2)
    decisions, _ = policy.sample(params, diamond, jax.random.PRNGKey(1), 2)
    decisions.validate(diamond, 2)
    jitted = policy.evaluate(params, diamond, decisions, 2)
    with jax.disable_jit():
        eager = policy.evaluate(params, diamond, decisions, 2)
    for x, y in zip(jax.tree.leaves(jitted), jax.tree.leaves(eager), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)
    # The switch survives a checkpoint's config round trip; older configs read as off.
    saved = TrainConfig(policy=config).to_dict()
    assert TrainConfig.from_dict(saved).policy.timeline_features
    del saved["policy"]["timeline_features"]
    assert not TrainConfig.from_dict(saved).policy.timeline_features
