"""``OpGraph.layout_features``: per-dimension shape and layout facts, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_go.graph import build_graph
from hlo_go.graph.layout import LAYOUT_FEATURE_NAMES, NUM_LAYOUT_FEATURES, minor_to_major
from hlo_go.hlo import parse_hlo, parse_shape

MODULE = """HloModule layouts

%fused_dot (p0: f32[4,8,16], p1: f32[4,32,16]) -> f32[4,8,32] {
  %p0 = f32[4,8,16]{2,1,0} parameter(0)
  %p1 = f32[4,32,16]{2,1,0} parameter(1)
  ROOT %dd = f32[4,8,32]{2,1,0} dot(%p0, %p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
}

ENTRY %main (x: f32[64,32], w: f32[32,16], a: f32[4,8,16], b: f32[4,32,16], i: f32[2,10,10,3], k: f32[3,3,3,5]) -> (f32[16,64], f32[4,8,32], f32[2,8,8,5]) {
  %x = f32[64,32]{0,1} parameter(0)
  %w = f32[32,16]{1,0} parameter(1)
  %a = f32[4,8,16]{2,1,0} parameter(2)
  %b = f32[4,32,16]{2,1,0} parameter(3)
  %i = f32[2,10,10,3]{3,2,1,0} parameter(4)
  %k = f32[3,3,3,5]{3,2,1,0} parameter(5)
  %d = f32[64,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %t = f32[16,64]{1,0} transpose(%d), dimensions={1,0}
  %f = f32[4,8,32]{2,1,0} fusion(%a, %b), kind=kOutput, calls=%fused_dot
  %c = f32[2,8,8,5]{3,2,1,0} convolution(%i, %k), window={size=3x3}, dim_labels=b01f_01io->b01f
  ROOT %r = (f32[16,64]{1,0}, f32[4,8,32]{2,1,0}, f32[2,8,8,5]{3,2,1,0}) tuple(%t, %f, %c)
}
"""


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, float]]:
    graph = build_graph(parse_hlo(MODULE), validate=True)
    assert graph.layout_features is not None
    assert graph.layout_features.shape == (graph.num_nodes, NUM_LAYOUT_FEATURES)
    return {
        name: dict(zip(LAYOUT_FEATURE_NAMES, graph.layout_features[i].tolist(), strict=True))
        for i, name in enumerate(graph.names)
    }


def _sizes(row: dict[str, float], *names: str) -> list[float]:
    return np.round(np.expm1([row[n] for n in names]), 3).tolist()


def test_minor_dimensions_follow_the_layout(rows: dict[str, dict[str, float]]):
    # x is f32[64,32]{0,1}: dimension 0 (64) is the contiguous one.
    x = rows["x"]
    assert _sizes(x, "log_minor_dim", "log_second_minor_dim", "log_major_elements") == [64, 32, 1]
    assert x["default_layout"] == 0.0 and x["minor_dim_multiple_of_8"] == 1.0
    w = rows["w"]
    assert _sizes(w, "log_minor_dim", "log_second_minor_dim") == [16, 32]
    assert w["default_layout"] == 1.0
    i = rows["i"]  # f32[2,10,10,3]: minor 3 (not a multiple of 8), then 10, then 2 x 10
    assert _sizes(i, "log_minor_dim", "log_second_minor_dim", "log_major_elements") == [3, 10, 20]
    assert i["minor_dim_multiple_of_8"] == 0.0


def test_dot_dimensions_and_contiguous_contraction(rows: dict[str, dict[str, float]]):
    d = rows["d"]
    assert _sizes(d, "log_dot_m", "log_dot_n", "log_dot_k", "log_dot_batch") == [64, 16, 32, 1]
    # x's contracting dimension 1 is its major one ({0,1}); w's 0 is its major one ({1,0}).
    assert (d["lhs_contracts_minor"], d["rhs_contracts_minor"]) == (0.0, 0.0)
    # x has minor 64 against d's 16; w's minor is 16 like d's: one of two producers differs.
    assert d["operands_minor_differ"] == pytest.approx(0.5)
    # Not a matrix product: zeros.
    assert _sizes(rows["t"], "log_dot_m", "log_dot_n", "log_dot_k") == [0, 0, 0]
    assert rows["t"]["operands_minor_differ"] == 1.0  # the transpose changes the minor dim


def test_fusion_takes_its_dot(rows: dict[str, dict[str, float]]):
    f = rows["f"]
    assert _sizes(f, "log_dot_m", "log_dot_n", "log_dot_k", "log_dot_batch") == [8, 32, 16, 4]
    assert (f["lhs_contracts_minor"], f["rhs_contracts_minor"]) == (1.0, 1.0)


def test_convolution_k_from_flops(rows: dict[str, dict[str, float]]):
    c = rows["c"]
    # Output 2x8x8x5: N = 5 output features, M = 128 positions, K = 3 x 3 x 3 taps.
    assert _sizes(c, "log_dot_m", "log_dot_n", "log_dot_k") == [128, 5, 27]


def test_tuples_and_scalars():
    assert minor_to_major(parse_shape("f32[2,3]")) == (1, 0)
    assert minor_to_major(parse_shape("f32[2,3]{0,1}")) == (0, 1)
    graph = build_graph(
        parse_hlo(
            """HloModule s
ENTRY %e (p: f32[]) -> (f32[], f32[]) {
  %p = f32[] parameter(0)
  ROOT %t = (f32[], f32[]) tuple(%p, %p)
}
"""
        )
    )
    assert graph.layout_features is not None
    assert np.isfinite(graph.layout_features).all()
    assert (graph.layout_features[:, LAYOUT_FEATURE_NAMES.index("default_layout")] == 1.0).all()


GEMM = """HloModule gemm

ENTRY %main (x: f32[64,32], w: f32[16,32]) -> f32[64,16] {
  %x = f32[64,32]{1,0} parameter(0)
  %w = f32[16,32]{1,0} parameter(1)
  %g = (f32[64,16]{1,0}, s8[1024]{0}) custom-call(%x, %w), custom_call_target="__cublas$gemm", backend_config={"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}
  ROOT %r = f32[64,16]{1,0} get-tuple-element(%g), index=0
}
"""


def test_gpu_gemm_library_call_is_a_dot():
    """XLA:GPU's cuBLAS calls (after its GEMM rewrite) count as the dot they compute."""
    module = parse_hlo(GEMM)
    graph = build_graph(module, validate=True)
    g = graph.node_index["g"]
    assert graph.flops[g] == 2 * 64 * 16 * 32
    assert graph.matrix_kind[g] == 1
    row = dict(zip(LAYOUT_FEATURE_NAMES, graph.layout_features[g].tolist(), strict=True))
    assert _sizes(row, "log_dot_m", "log_dot_n", "log_dot_k") == [64, 16, 32]
    assert (row["lhs_contracts_minor"], row["rhs_contracts_minor"]) == (1.0, 1.0)
    # Another library call, or a GEMM whose config gives no dimension numbers: no flops.
    other = parse_hlo(GEMM.replace("__cublas$gemm", "__cudnn$conv"))
    assert build_graph(other).flops[g] == 0
    bare = parse_hlo(GEMM.replace('"dot_dimension_numbers"', '"other_numbers"'))
    assert build_graph(bare).matrix_kind[g] == 0
