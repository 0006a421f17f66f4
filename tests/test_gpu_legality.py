"""XLA:GPU's fusion rules (priority fusion, Triton GEMM fusions) as a legality mode,
checked on graphs of small JAX functions (no GPU needed)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.decisions import FusionGroupError, check_fusion_groups
from hlo_go.decisions.gpu_legality import MAX_OPERANDS_AND_OUTPUTS, check_gpu_fusion_groups
from hlo_go.graph import OPCODE_VOCAB, build_graph
from hlo_go.hlo import parse_hlo


def graph_of(fn, *args):
    return build_graph(parse_hlo(jax.jit(fn).lower(*args).as_text(dialect="hlo")))


def node(graph, opcode: str, k: int = 0) -> int:
    found = [i for i, o in enumerate(graph.opcode.tolist()) if OPCODE_VOCAB[o] == opcode]
    return found[k]


def grouped(graph, *members: int) -> np.ndarray:
    group = np.arange(graph.num_nodes)
    group[list(members)] = members[0]
    return group


def test_elementwise_chain_is_legal_in_both_modes():
    g = graph_of(lambda x: jnp.exp(jnp.sin(x) * 2.0), jnp.ones((8, 8)))
    group = grouped(g, node(g, "sine"), node(g, "multiply"), node(g, "exponential"))
    check_fusion_groups(g, group, np.zeros(g.num_nodes, int))
    check_gpu_fusion_groups(g, group, np.zeros(g.num_nodes, int))


def test_dot_with_its_operand_convert_is_a_triton_gemm():
    g = graph_of(lambda a, b: a.astype(jnp.float32) @ b, jnp.ones((32, 32), jnp.bfloat16),
                 jnp.ones((32, 32)))  # fmt: skip
    group = grouped(g, node(g, "convert"), node(g, "dot"))
    check_gpu_fusion_groups(g, group, np.zeros(g.num_nodes, int))


def test_dot_epilogue_is_refused_on_gpu_only():
    g = graph_of(lambda a, b: jnp.tanh(a @ b), jnp.ones((4, 4)), jnp.ones((4, 4)))
    group = grouped(g, node(g, "dot"), node(g, "tanh"))
    check_fusion_groups(g, group, np.zeros(g.num_nodes, int))  # legal on CPU
    with pytest.raises(FusionGroupError, match="Triton GEMM fusion's only output"):
        check_gpu_fusion_groups(g, group, np.zeros(g.num_nodes, int))


def test_two_dots_in_one_group_are_refused():
    g = graph_of(lambda a, b: (a @ b) @ b, jnp.ones((4, 4)), jnp.ones((4, 4)))
    group = grouped(g, node(g, "dot", 0), node(g, "dot", 1))
    with pytest.raises(FusionGroupError, match="second dot"):
        check_gpu_fusion_groups(g, group, np.zeros(g.num_nodes, int))


def test_convolution_is_never_fused_on_gpu():
    def conv(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")
        return y * 2.0

    g = graph_of(conv, jnp.ones((1, 2, 8, 8)), jnp.ones((3, 2, 3, 3)))
    group = grouped(g, node(g, "convolution"), node(g, "multiply"))
    with pytest.raises(FusionGroupError, match="cuDNN"):
        check_gpu_fusion_groups(g, group, np.zeros(g.num_nodes, int))


def test_budget_of_operands_and_outputs():
    n = MAX_OPERANDS_AND_OUTPUTS + 2

    def many(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total

    g = graph_of(many, *[jnp.ones(4)] * n)
    adds = [i for i, o in enumerate(g.opcode.tolist()) if OPCODE_VOCAB[o] == "add"]
    group = grouped(g, *adds)
    check_fusion_groups(g, group, np.zeros(g.num_nodes, int))
    with pytest.raises(FusionGroupError, match="operands and outputs"):
        check_gpu_fusion_groups(g, group, np.zeros(g.num_nodes, int))
