"""XLA:GPU's fusion legality: the rules of priority fusion and Triton GEMM fusions that
can be read off an OpGraph, as a mode of :func:`hlo_go.decisions.check_fusion_groups`.

XLA:GPU fuses with ``PriorityFusion`` (``xla/service/gpu/transforms/priority_fusion.cc``,
producer into consumer, ordered by its GPU performance model) after ``GemmFusion`` has
made Triton GEMM fusions (``__triton_gemm``) of dots and the cheap ops feeding them, and
the GEMM rewriter has turned the other dots and convolutions into cuBLAS / cuDNN custom
calls. A grouping that XLA:GPU could build keeps these rules, read from that source:

* **Every rule of the CPU mode** (:func:`~hlo_go.decisions.check_fusion_groups`): fusible
  kinds, one device, convex groups, a reduction only as its group's output (XLA:GPU
  refuses an epilogue that would turn a reduce fusion into a loop fusion: "fusion into
  output of a reduce fusion would create a loop fusion"), outputs of one shape.
* **No convolutions.** cuDNN runs them (custom calls), never inside a fusion.
* **Dots only as Triton GEMMs.** A group holding a dot holds exactly one, as its only
  output, and otherwise only operand-side ops of :data:`TRITON_GEMM_PROLOGUE` (bitcasts,
  reshapes, transposes, broadcasts, converts, constants and cheap elementwise ops).
* **Scatter only as an output.** "Scatter must be the root of an input fusion"
  (``gpu_fusible.h``); ``CanEmitInputFusedScatter`` guards the producer side.
* **No reduce into reduce.** "both the producer and the consumer contain a reduce"
  (reductions of at least :data:`SIGNIFICANT_REDUCTION` elements per output): implied by
  the CPU mode's rule that nothing in a group reads its reduce.
* **Budget.** At most :data:`MAX_OPERANDS_AND_OUTPUTS` operands plus outputs per fusion
  (``MaxOperandsAndOutputsPerFusion()``).

Not modelled: the performance model's priorities (which legal fusion XLA prefers),
shared-memory budgets, code-duplication limits (``ProducerConsumerMergedTooLarge``),
in-place operand rules (``ShouldFuseInPlaceOp``), and Triton's tiling analysis
(``SymbolicTileAnalysis``) of softmax-like fusions. A lowering on a GPU checks its groups
against these rules before XLA (``hlo_go.xla.Program``); in the module it captures there
(after XLA:GPU's scheduler), dots and convolutions are already Triton GEMM fusions and
cuBLAS / cuDNN calls, so the budget, scatter and reduction rules are what bind.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hlo_go.decisions.legality import FusionGroupError, check_fusion_groups
from hlo_go.graph import FEATURE_NAMES, OPCODE_VOCAB, OpGraph

# ``MaxOperandsAndOutputsPerFusion()`` in xla/service/gpu/gpu_fusible.h.
MAX_OPERANDS_AND_OUTPUTS = 64
# Elements reduced into one output element from which XLA:GPU's priority fusion counts a
# reduce as "significant" (``reduction_size >= 16`` in priority_fusion.cc).
SIGNIFICANT_REDUCTION = 16
# Ops GemmFusion takes into a Triton GEMM on the dot's operand side.
TRITON_GEMM_PROLOGUE: frozenset[str] = frozenset({
    "bitcast", "reshape", "transpose", "broadcast", "convert", "constant", "copy",
    "negate", "abs", "add", "subtract", "multiply", "select", "compare", "slice",
})  # fmt: skip
NEVER_FUSED_ON_GPU: frozenset[str] = frozenset({"convolution"})

_LOG_ELEMENTS = FEATURE_NAMES.index("log_elements")


def _opcode_names(graph: OpGraph) -> list[str]:
    return [OPCODE_VOCAB[o] for o in graph.opcode.tolist()]


def check_gpu_fusion_groups(
    graph: OpGraph,
    group: np.ndarray,
    placement: np.ndarray,
    *,
    output_dims: np.ndarray | None = None,
    max_nodes: int | None = None,
) -> None:
    """Checks a grouping against XLA:GPU's fusion rules (this module's docstring).

    Args:
      graph: the graph the grouping is for.
      group: ``int[N]`` group label per node.
      placement: ``int[N]`` device per node.
      output_dims: as :func:`~hlo_go.decisions.check_fusion_groups`.
      max_nodes: as :func:`~hlo_go.decisions.check_fusion_groups`.

    Raises:
      FusionGroupError: naming the first group that breaks a rule and the rule.
    """
    check_fusion_groups(graph, group, placement, output_dims=output_dims, max_nodes=max_nodes)
    group = np.asarray(group)
    _, inverse, sizes = np.unique(group, return_inverse=True, return_counts=True)
    fused = sizes[inverse] > 1
    opcodes = _opcode_names(graph)
    names = graph.names
    inside = inverse[graph.senders] == inverse[graph.receivers]
    outside = ~inside
    is_output = np.zeros(graph.num_nodes, dtype=bool)
    is_output[graph.senders[outside]] = True
    is_output[graph.root] = True

    def where(i: int) -> str:
        return f"{names[i]!r} (group {group[i]})"

    for i in np.flatnonzero(fused).tolist():
        if opcodes[i] in NEVER_FUSED_ON_GPU:
            raise FusionGroupError(f"{where(i)} is a {opcodes[i]}: XLA:GPU runs it in cuDNN")
        if opcodes[i] == "scatter" and inside[graph.senders == i].any():
            raise FusionGroupError(f"{where(i)} is a scatter read inside its group; XLA:GPU "
                                   "fuses a scatter only as the root of its fusion")  # fmt: skip
    members: dict[int, list[int]] = {}
    for i in np.flatnonzero(fused).tolist():
        members.setdefault(int(inverse[i]), []).append(i)
    for nodes in members.values():
        _check_gemm(graph, nodes, opcodes, is_output, where)
        external = {
            int(s)
            for s, r in zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True)
            if inverse[r] == inverse[nodes[0]] and inverse[s] != inverse[nodes[0]]
        }
        count = len(external) + int(is_output[nodes].sum())
        if count > MAX_OPERANDS_AND_OUTPUTS:
            raise FusionGroupError(
                f"group {group[nodes[0]]} has {count} operands and outputs, more than "
                f"XLA:GPU's {MAX_OPERANDS_AND_OUTPUTS}"
            )


def _check_gemm(
    graph: OpGraph,
    nodes: list[int],
    opcodes: list[str],
    is_output: np.ndarray,
    where: Callable[[int], str],
) -> None:
    dots = [i for i in nodes if opcodes[i] == "dot"]
    if not dots:
        return
    if len(dots) > 1:
        raise FusionGroupError(f"{where(dots[1])} is a second dot in its group; a Triton GEMM "
                               "fusion holds one")  # fmt: skip
    dot = dots[0]
    outputs = [i for i in nodes if is_output[i]]
    if outputs != [dot]:
        raise FusionGroupError(f"{where(dot)}: a Triton GEMM fusion's only output is its dot")
    for i in nodes:
        if i != dot and opcodes[i] not in TRITON_GEMM_PROLOGUE:
            raise FusionGroupError(
                f"{where(i)} ({opcodes[i]}) is not an op GemmFusion takes into a Triton GEMM"
            )
