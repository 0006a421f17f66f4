"""Which nodes may be fused, and whether a grouping of nodes is a legal set of fusions.

The rules are those :func:`hlo_go.xla.apply_fusion` enforces when it writes groups
into XLA's compile, so a grouping the simulator scores is one XLA can build:

* **Fusible kinds.** A node may join a group unless its opcode is in
  :data:`hlo_go.xla.fusion.NOT_FUSIBLE` (parameters, tuples and get-tuple-elements,
  control flow, calls and existing fusions, custom calls, collectives and other
  communication, async halves, random number generation, sort, LAPACK-like ops, side
  effects) or in :data:`CPU_EMITTER_NOT_FUSIBLE` (scatter), its opcode is unknown to
  the vocabulary, or its output is a tuple. Constants, elementwise ops, broadcasts,
  reshapes, slices, reductions, dots and convolutions are fusible.
* **Same device.** All members of a group are placed on one device.
* **Convex.** No path leaves a group and comes back into it (through other nodes
  or groups); otherwise the fused kernels would wait on each other (a cycle).
* **Reductions are outputs.** No member of a group reads a ``reduce`` of the same group
  (:data:`OUTPUT_ONLY_OPCODES`): XLA:CPU's loop emitter would recompute the reduction
  for every element that reads it.
* **Multi-output shapes.** A group's outputs are its members used outside it (or
  the entry root). XLA's CPU loop emitter runs a multi-output fusion in a single
  iteration space, so all outputs must have the same dimensions: it aborts
  otherwise (see :mod:`hlo_go.xla.fusion`).
* **Size.** At most ``max_nodes`` members (:class:`~hlo_go.decisions.FusionLimits`).

Output dimensions are not part of an OpGraph. :func:`module_output_dims` computes an
exact key from the module; without one, :func:`graph_output_dims` uses the graph's
(rank, element count) as a proxy: equal dimensions always give equal proxies, but two
shapes with the same rank and element count (``[4,8]`` and ``[8,4]``) do too, so
groups built from the proxy can hold a multi-output fusion that the exact key refuses.
Callers that lower groups to XLA should pass the exact key.
"""

from __future__ import annotations

import numpy as np

from hlo_go.decisions.adjacency import graph_cached
from hlo_go.errors import HloGoError
from hlo_go.graph import FEATURE_NAMES, OPCODE_VOCAB, OpGraph, flatten_entry
from hlo_go.graph.vocab import UNKNOWN_OPCODE
from hlo_go.hlo import HloModule
from hlo_go.hlo.opcodes import CPU_EMITTER_NOT_FUSIBLE, NOT_FUSIBLE, REGENERATED_OPCODES

# Opcodes whose value may not be read inside their own group: XLA:CPU's loop emitter
# computes a fused instruction once per element of each user, so a reduce feeding
# another member is recomputed for every element that reads it (measured on jaxlib
# 0.10.2: resnet_26's step goes from 0.5 s to 24 s when batch-norm reductions fuse into
# their users). A reduce may still fuse with its producers, as the group's output.
OUTPUT_ONLY_OPCODES: frozenset[str] = frozenset({"reduce"})
OUTPUT_ONLY: np.ndarray = np.array([name in OUTPUT_ONLY_OPCODES for name in OPCODE_VOCAB])
OUTPUT_ONLY.flags.writeable = False

# bool[NUM_OPCODES]: opcodes a fusion recomputes rather than reads from another fusion
# (:func:`hlo_go.xla.fusion.regenerate_shared` clones them into their reading groups).
REGENERATED: np.ndarray = np.array([name in REGENERATED_OPCODES for name in OPCODE_VOCAB])
REGENERATED.flags.writeable = False
# The most members one recomputed value may be cloned with (itself and its chain back to
# its group's inputs); longer chains stay outputs of their group.
MAX_REGENERATED_CHAIN = 8

# bool[NUM_OPCODES]: opcodes that may be members of a fusion group.
FUSIBLE_OPCODES: np.ndarray = np.array(
    [
        name not in NOT_FUSIBLE and name not in CPU_EMITTER_NOT_FUSIBLE and name != UNKNOWN_OPCODE
        for name in OPCODE_VOCAB
    ],
    dtype=bool,
)
FUSIBLE_OPCODES.flags.writeable = False

# XLA:CPU fuses a dot or convolution only when this small (bytes of its output; its
# operands may read twice as many). Larger ones run as library kernels (Eigen, YNNPACK).
SMALL_MATRIX_BYTES = 16 * 1024
# ...and costing at most this many flops: a fused one is computed by XLA's elemental
# emitter, one output element at a time, far slower a flop than the library kernel, so
# only one whose elemental cost is about a kernel launch's gains from fusing (XLA:CPU's
# own fusion takes matrix-vector products only).
SMALL_MATRIX_FLOPS = 16 * 1024
MATRIX_OPCODES: frozenset[str] = frozenset({"dot", "convolution"})
_MATRIX = np.array([name in MATRIX_OPCODES for name in OPCODE_VOCAB])
_MATRIX.flags.writeable = False

_IS_TUPLE = FEATURE_NAMES.index("is_tuple")
_RANK = FEATURE_NAMES.index("rank")
_LOG_ELEMENTS = FEATURE_NAMES.index("log_elements")


class FusionGroupError(ValueError, HloGoError):
    """A grouping that breaks a fusion rule; the message names the group and the rule."""


def fusible_nodes(graph: OpGraph) -> np.ndarray:
    """Which nodes may be members of a fusion group.

    Args:
      graph: an OpGraph.

    Returns:
      ``bool[N]`` (read-only, cached per graph): the opcode is fusible
      (:data:`FUSIBLE_OPCODES`) and the output is not a tuple.
    """
    return graph_cached(graph, "fusible_nodes", _fusible_nodes)


def _fusible_nodes(graph: OpGraph) -> np.ndarray:
    return _readonly(FUSIBLE_OPCODES[graph.opcode] & (graph.features[:, _IS_TUPLE] == 0))


def large_matrix_nodes(graph: OpGraph) -> np.ndarray:
    """Which nodes are dots or convolutions larger than XLA:CPU ever fuses.

    A dot or convolution is small when it writes at most :data:`SMALL_MATRIX_BYTES`,
    reads at most twice that and costs at most :data:`SMALL_MATRIX_FLOPS`; XLA:CPU's own
    fusion takes only small ones. Inside a loop fusion, XLA's elemental emitter computes
    one output element at a time and sums its products in sequence, so a large one is
    slower than the library kernel and less accurate: :meth:`hlo_go.xla.Program.lower`
    keeps large ones out of our fusions.

    Args:
      graph: an OpGraph.

    Returns:
      ``bool[N]`` (read-only, cached per graph).
    """
    return graph_cached(graph, "large_matrix_nodes", _large_matrix_nodes)


def unfuse_large_matrices(
    graph: OpGraph, fusion_priority: np.ndarray, where: np.ndarray | None = None
) -> np.ndarray:
    """``fusion_priority`` with every large dot and convolution's priority set to 0, so
    that it fuses with nothing (:func:`large_matrix_nodes`).

    Args:
      graph: an OpGraph.
      fusion_priority: ``float[N]``.
      where: ``bool[N]``, the nodes the rule applies to (default: all).

    Returns:
      ``fusion_priority`` itself when no such node has a positive priority, else a new
      ``float32[N]``.
    """
    priority = np.asarray(fusion_priority)
    blocked = large_matrix_nodes(graph) if where is None else large_matrix_nodes(graph) & where
    if not np.any(priority[blocked] > 0):
        return fusion_priority
    return np.where(blocked, 0, priority).astype(np.float32)


def _large_matrix_nodes(graph: OpGraph) -> np.ndarray:
    small = (graph.bytes_read <= 2 * SMALL_MATRIX_BYTES) & (graph.bytes_out <= SMALL_MATRIX_BYTES)
    small &= graph.flops <= SMALL_MATRIX_FLOPS
    return _readonly(_MATRIX[graph.opcode] & ~small)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def graph_output_dims(graph: OpGraph) -> np.ndarray:
    """A proxy for each node's output dimensions from the graph alone.

    Args:
      graph: an OpGraph.

    Returns:
      ``int64[N]`` keys (read-only, cached per graph), equal for equal (rank, element
      count); see the module docstring for what the proxy cannot tell apart.
    """
    return graph_cached(graph, "graph_output_dims", _graph_output_dims)


def _graph_output_dims(graph: OpGraph) -> np.ndarray:
    rank = graph.features[:, _RANK].astype(np.int64)
    elements = np.ascontiguousarray(graph.features[:, _LOG_ELEMENTS]).view(np.int32)
    return _readonly((rank << 32) | (elements.astype(np.int64) & 0xFFFFFFFF))


def module_output_dims(module: HloModule) -> np.ndarray:
    """An exact key of each node's output dimensions, from the module the graph was built from.

    Args:
      module: the module :func:`hlo_go.graph.build_graph` was given.

    Returns:
      ``int64[N]`` (node order of the graph): equal keys iff equal dimension tuples;
      -1 for tuple-shaped outputs.
    """
    flat = flatten_entry(module)
    ids: dict[tuple[int, ...], int] = {}
    keys = np.empty(len(flat.instructions), dtype=np.int64)
    for i, instr in enumerate(flat.instructions):
        shape = instr.shape
        keys[i] = -1 if shape.is_tuple else ids.setdefault(tuple(shape.dims), len(ids))
    return keys


def check_fusion_groups(
    graph: OpGraph,
    group: np.ndarray,
    placement: np.ndarray,
    *,
    output_dims: np.ndarray | None = None,
    max_nodes: int | None = None,
) -> None:
    """Checks a grouping against every rule of this module.

    Args:
      graph: the graph the grouping is for.
      group: ``int[N]`` group label per node (nodes with equal labels form one group).
      placement: ``int[N]`` device per node.
      output_dims: ``int64[N]`` output-dimension keys (default :func:`graph_output_dims`).
      max_nodes: the largest allowed group, or None for no limit.

    Raises:
      FusionGroupError: naming the first group that breaks a rule and the rule.
    """
    n = graph.num_nodes
    group = np.asarray(group)
    if group.shape != (n,):
        raise FusionGroupError(f"group must have shape ({n},), got {group.shape}")
    labels, first, inverse, sizes = np.unique(
        group, return_index=True, return_inverse=True, return_counts=True
    )
    fused = sizes[inverse] > 1
    names = graph.names

    def name(i: int) -> str:
        return f"{names[i]!r} (group {group[i]})"

    bad = np.flatnonzero(fused & ~fusible_nodes(graph))
    if bad.size:
        i = int(bad[0])
        raise FusionGroupError(
            f"{name(i)} is a {OPCODE_VOCAB[graph.opcode[i]]} node, which cannot be fused"
        )
    split = np.flatnonzero(placement != placement[first[inverse]])
    if split.size:
        i = int(split[0])
        raise FusionGroupError(f"{name(i)} is on another device than the rest of its group")
    if max_nodes is not None and sizes.max(initial=0) > max_nodes:
        label = int(np.argmax(sizes))
        raise FusionGroupError(
            f"group {labels[label]} has {sizes[label]} members, more than {max_nodes}"
        )
    inside = inverse[graph.senders] == inverse[graph.receivers]
    read = np.flatnonzero(inside & OUTPUT_ONLY[graph.opcode[graph.senders]])
    if read.size:
        e = int(read[0])
        s, r = int(graph.senders[e]), int(graph.receivers[e])
        raise FusionGroupError(
            f"{name(r)} reads {names[s]!r} ({OPCODE_VOCAB[graph.opcode[s]]}) inside their group; "
            "a reduction may only be an output of its group"
        )
    # Outputs: members with a data user outside the group, or the root.
    outside = inverse[graph.senders] != inverse[graph.receivers]
    is_output = np.zeros(n, dtype=bool)
    is_output[graph.senders[outside]] = True
    is_output[graph.root] = True
    dims = graph_output_dims(graph) if output_dims is None else np.asarray(output_dims)
    out = np.flatnonzero(is_output & fused)
    if out.size:
        by_group = np.lexsort((dims[out], inverse[out]))
        g, d = inverse[out][by_group], dims[out][by_group]
        clash = np.flatnonzero((g[1:] == g[:-1]) & (d[1:] != d[:-1]))
        if clash.size:
            i, j = out[by_group][clash[0]], out[by_group][clash[0] + 1]
            raise FusionGroupError(
                f"group {group[i]} has outputs of different dimensions ({names[i]!r} and "
                f"{names[j]!r}); XLA's CPU loop emitter needs one iteration space"
            )
    _check_acyclic(graph, inverse, labels.size)


def _check_acyclic(graph: OpGraph, inverse: np.ndarray, k: int) -> None:
    """Raises FusionGroupError if contracting each group to one node leaves a cycle."""
    src = inverse[np.concatenate([graph.senders, graph.control_senders])]
    dst = inverse[np.concatenate([graph.receivers, graph.control_receivers])]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    pairs = np.unique(src.astype(np.int64) * k + dst)
    src, dst = pairs // k, pairs % k
    indegree = np.bincount(dst, minlength=k)
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=k), out=ptr[1:])
    targets = dst[order].tolist()
    ptr_list = ptr.tolist()
    remaining = indegree.tolist()
    ready = [g for g in range(k) if remaining[g] == 0]
    seen = 0
    while ready:
        g = ready.pop()
        seen += 1
        for t in targets[ptr_list[g] : ptr_list[g + 1]]:
            remaining[t] -= 1
            if remaining[t] == 0:
                ready.append(t)
    if seen != k:
        stuck = [g for g in range(k) if remaining[g] > 0]
        raise FusionGroupError(
            f"the grouping is not convex: contracting the groups leaves a cycle through "
            f"{len(stuck)} groups (e.g. the one holding node "
            f"{graph.names[int(np.flatnonzero(inverse == stuck[0])[0])]!r})"
        )
