"""A kernel as a small graph: the learned cost model's input.

A *kernel* is one fused group of an :class:`~hlo_go.graph.OpGraph` under some decisions,
or a node on its own: what the simulator launches (:mod:`hlo_go.sim.simulate`). It is
given by its member nodes and by the roofline's time for it (the analytic cost model's
duration, :mod:`hlo_go.sim.cost_model`), which the model corrects.

Its graph has one node per member and, for every data edge between two members, two
directed edges (producer to consumer and back, told apart by an edge feature):

* **node features** (:data:`NODE_FEATURES` columns): the member's columns of
  ``OpGraph.features`` (opcode family, output element type, rank, log element count,
  log flops, transcendentals, bytes read and written, ...; its topological position
  zeroed, which says nothing about the kernel), its op class one-hot
  (:data:`hlo_go.sim.OP_CLASSES`), and what the group makes of it: whether its value
  leaves the kernel (used outside, or the graph's root), the log bytes and count of
  its operands from outside the kernel, whether it is alone; its per-dimension shape and
  layout facts (``OpGraph.layout_features``, :mod:`hlo_go.graph.layout`: minor-most
  dimensions, default layout or not, a matrix product's M, N, K and which operands
  contract over their contiguous dimension; zeros for a graph built without them); plus
  its opcode id, which the model embeds.
* **edge features** (:data:`EDGE_FEATURES`): log bytes carried, and 1 for the
  producer-to-consumer direction.
* **global features** (:data:`GLOBAL_FEATURES`): the log roofline seconds, log total
  flops and transcendentals, log bytes entering and leaving the kernel, log bytes its
  members would move unfused, log member count, log launches (a ``while`` launches its
  body's kernels on every trip), whether it holds a dot or convolution, control flow,
  or one node only.

A batch of kernels is one padded ``jraph.GraphsTuple`` (:func:`pad_batch`), whose sizes
come from one ladder (:func:`bucket_for`) so that a jitted forward pass compiles once per
bucket, and there are few buckets:

==================================  ==================================================
``nodes["features"]``               ``float32[n_node, NODE_FEATURES]``
``nodes["opcode"]``                 ``int32[n_node]``
``edges``                           ``float32[n_edge, EDGE_FEATURES]``
``senders``, ``receivers``          ``int32[n_edge]``
``globals["features"]``             ``float32[n_graph, GLOBAL_FEATURES]``
``globals["base"]``                 ``float32[n_graph]``: log roofline seconds
``n_node``, ``n_edge``              ``int32[n_graph]``
==================================  ==================================================

with ``(n_node, n_edge, n_graph)`` a :class:`~hlo_go.graph.batching.Bucket` and jraph's
padding convention (the last graph holds the padding nodes and edges).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import jraph
import numpy as np

from hlo_go.decisions import adjacency
from hlo_go.graph import FEATURE_NAMES, NUM_FEATURES, OpGraph
from hlo_go.graph.batching import Bucket, next_power_of_two
from hlo_go.graph.layout import NUM_LAYOUT_FEATURES
from hlo_go.sim.cluster import OP_CLASSES
from hlo_go.sim.cost_model import MATRIX_CLASSES, op_classes

FEATURES_VERSION = 2
"""Version of the features' definition; a model trained on another version is refused."""

MAX_KERNEL_NODES = 512
"""The most members a kernel may have to be featurized (larger ones get the roofline)."""

_TOPO = FEATURE_NAMES.index("topo_position")
_DYNAMIC = ("leaves_kernel", "log_outside_bytes", "log_outside_operands", "alone")
NODE_FEATURES = NUM_FEATURES + len(OP_CLASSES) + NUM_LAYOUT_FEATURES + len(_DYNAMIC)
"""Node feature columns: ``OpGraph.features``, the op class one-hot,
``OpGraph.layout_features``, then ``leaves_kernel``, ``log_outside_bytes``,
``log_outside_operands``, ``alone``."""
EDGE_FEATURES = 2
"""Edge feature columns: ``log_bytes``, ``forward``."""
GLOBAL_NAMES: tuple[str, ...] = (
    "log_roofline_s",
    "log_flops",
    "log_transcendentals",
    "log_bytes_in",
    "log_bytes_out",
    "log_bytes_unfused",
    "log_members",
    "log_launches",
    "has_matrix",
    "has_control_flow",
    "alone",
)
GLOBAL_FEATURES = len(GLOBAL_NAMES)
"""Global feature columns (:data:`GLOBAL_NAMES`)."""

_CONTROL = frozenset({"while", "conditional", "call"})


class KernelBatch(NamedTuple):
    """Featurized kernels before padding (arrays concatenated over kernels).

    Attributes:
      node_features: ``float32[Nt, NODE_FEATURES]``.
      opcode: ``int32[Nt]``.
      edge_features: ``float32[Et, EDGE_FEATURES]``.
      senders: ``int32[Et]`` (indices into the batch's nodes).
      receivers: ``int32[Et]``.
      global_features: ``float32[G, GLOBAL_FEATURES]``.
      base: ``float32[G]`` log roofline seconds.
      n_node: ``int32[G]``.
      n_edge: ``int32[G]``.
    """

    node_features: np.ndarray
    opcode: np.ndarray
    edge_features: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    global_features: np.ndarray
    base: np.ndarray
    n_node: np.ndarray
    n_edge: np.ndarray

    @property
    def num_graphs(self) -> int:
        """G, the number of kernels."""
        return int(self.n_node.shape[0])


class _Static(NamedTuple):
    graph: OpGraph
    node_features: np.ndarray  # float32[N, NUM_FEATURES + len(OP_CLASSES) + NUM_LAYOUT_FEATURES]
    opcode: np.ndarray
    matrix: np.ndarray
    control: np.ndarray
    pred_ptr: np.ndarray
    pred: np.ndarray
    pred_bytes: np.ndarray
    succ_ptr: np.ndarray
    succ: np.ndarray


_STATIC: OrderedDict[int, _Static] = OrderedDict()
_STATIC_SIZE = 8


def _static(graph: OpGraph) -> _Static:
    """The decision-independent per-node arrays of a graph (cached for the last few)."""
    hit = _STATIC.get(id(graph))
    if hit is not None and hit.graph is graph:
        _STATIC.move_to_end(id(graph))
        return hit
    classes = op_classes(graph)
    features = np.array(graph.features, dtype=np.float32, copy=True)
    features[:, _TOPO] = 0.0
    onehot = np.zeros((graph.num_nodes, len(OP_CLASSES)), np.float32)
    onehot[np.arange(graph.num_nodes), classes] = 1.0
    layout = (
        np.zeros((graph.num_nodes, NUM_LAYOUT_FEATURES), np.float32)
        if graph.layout_features is None
        else graph.layout_features.astype(np.float32)
    )
    adj = adjacency(graph)
    names = graph.opcode_names
    value = _Static(
        graph,
        np.concatenate([features, onehot, layout], axis=1),
        graph.opcode.astype(np.int32),
        np.isin(classes, MATRIX_CLASSES),
        np.array([n in _CONTROL for n in names], dtype=bool),
        adj.data_pred_ptr.astype(np.int64),
        adj.data_pred.astype(np.int64),
        adj.data_pred_bytes.astype(np.float64),
        adj.data_succ_ptr.astype(np.int64),
        adj.data_succ.astype(np.int64),
    )
    _STATIC[id(graph)] = value
    while len(_STATIC) > _STATIC_SIZE:
        _STATIC.popitem(last=False)
    return value


def _expand(ptr: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For CSR ``ptr`` and ``nodes``: the entry index of every neighbour of every node, and
    which position in ``nodes`` it belongs to."""
    starts, ends = ptr[nodes], ptr[nodes + 1]
    counts = ends - starts
    owner = np.repeat(np.arange(nodes.size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return starts[owner] + offsets, owner


def featurizable(mptr: np.ndarray, roofline_s: np.ndarray) -> np.ndarray:
    """``bool[K]``: kernels the model can price (at most :data:`MAX_KERNEL_NODES`
    members, a finite positive roofline time)."""
    sizes = np.diff(mptr)
    return (sizes >= 1) & (sizes <= MAX_KERNEL_NODES) & np.isfinite(roofline_s) & (roofline_s > 0)


def featurize(
    graph: OpGraph,
    mptr: np.ndarray,
    members: np.ndarray,
    roofline_s: np.ndarray,
    launches: np.ndarray,
) -> KernelBatch:
    """Features of disjoint kernels of one graph.

    Args:
      graph: the graph.
      mptr: ``int[K+1]`` offsets into ``members`` (CSR).
      members: the member node ids of each kernel (disjoint kernels).
      roofline_s: ``float[K]`` the analytic model's seconds for each kernel (> 0).
      launches: ``float[K]`` kernels each launches (``OpGraph.kernel_launches``, the
        largest over its members; at least 1).

    Returns:
      The :class:`KernelBatch` (kernels in the given order).
    """
    st = _static(graph)
    mptr = np.asarray(mptr, np.int64)
    members = np.asarray(members, np.int64)
    k = mptr.size - 1
    sizes = np.diff(mptr)
    kernel_of = np.repeat(np.arange(k), sizes)  # per batch node
    owner = np.full(graph.num_nodes, -1, np.int64)
    owner[members] = kernel_of
    position = np.full(graph.num_nodes, -1, np.int64)
    position[members] = np.arange(members.size)

    # Operands: inside the kernel (edges) or from outside (boundary bytes).
    entry, at = _expand(st.pred_ptr, members)
    producer = st.pred[entry]
    nbytes = st.pred_bytes[entry]
    inside = owner[producer] == kernel_of[at]
    outside_bytes = np.bincount(at[~inside], weights=nbytes[~inside], minlength=members.size)
    outside_count = np.bincount(at[~inside], minlength=members.size).astype(np.float64)
    # Bytes entering a kernel: each outside producer once per kernel.
    pairs = np.unique(
        np.stack([kernel_of[at[~inside]], producer[~inside]], axis=1).reshape(-1, 2), axis=0
    )
    bytes_in = np.bincount(
        pairs[:, 0], weights=graph.bytes_out[pairs[:, 1]].astype(np.float64), minlength=k
    )
    # Values leaving: a member with a user outside, or the root.
    entry_s, at_s = _expand(st.succ_ptr, members)
    escapes = owner[st.succ[entry_s]] != kernel_of[at_s]
    leaves = np.zeros(members.size, bool)
    leaves[at_s[escapes]] = True
    leaves |= members == int(graph.root)
    bytes_out = np.bincount(
        kernel_of[leaves], weights=graph.bytes_out[members[leaves]].astype(np.float64), minlength=k
    )

    alone = (sizes == 1)[kernel_of].astype(np.float32)
    node_features = np.concatenate(
        [
            st.node_features[members],
            np.stack(
                [
                    leaves.astype(np.float32),
                    np.log1p(outside_bytes).astype(np.float32),
                    np.log1p(outside_count).astype(np.float32),
                    alone,
                ],
                axis=1,
            ),
        ],
        axis=1,
    )

    src, dst = position[producer[inside]], position[members[at[inside]]]
    log_b = np.log1p(nbytes[inside]).astype(np.float32)
    senders = np.concatenate([src, dst]).astype(np.int32)
    receivers = np.concatenate([dst, src]).astype(np.int32)
    edge_features = np.stack(
        [np.concatenate([log_b, log_b]), np.repeat(np.array([1.0, 0.0], np.float32), src.size)],
        axis=1,
    ).astype(np.float32)
    edge_kernel = kernel_of[senders] if senders.size else np.zeros(0, np.int64)
    # jraph wants each graph's edges together, in graph order.
    order = np.argsort(edge_kernel, kind="stable")
    senders, receivers, edge_features = senders[order], receivers[order], edge_features[order]
    n_edge = np.bincount(edge_kernel, minlength=k).astype(np.int32)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(kernel_of, weights=values[members].astype(np.float64), minlength=k)

    roofline = np.asarray(roofline_s, np.float64)
    globals_ = np.stack(
        [
            np.log(roofline),
            np.log1p(total(graph.flops)),
            np.log1p(total(graph.transcendentals)),
            np.log1p(bytes_in),
            np.log1p(bytes_out),
            np.log1p(total(graph.bytes_read + graph.bytes_written)),
            np.log(np.maximum(sizes, 1)),
            np.log(np.maximum(np.asarray(launches, np.float64), 1.0)),
            total(st.matrix.astype(np.float64)) > 0,
            total(st.control.astype(np.float64)) > 0,
            sizes == 1,
        ],
        axis=1,
    ).astype(np.float32)
    return KernelBatch(
        node_features.astype(np.float32),
        st.opcode[members],
        edge_features,
        senders,
        receivers,
        globals_,
        np.log(roofline).astype(np.float32),
        sizes.astype(np.int32),
        n_edge,
    )


def concat_batches(batches: list[KernelBatch]) -> KernelBatch:
    """Several batches as one (node indices of edges shifted)."""
    offsets = np.cumsum([0, *[int(b.n_node.sum()) for b in batches]])[:-1]
    return KernelBatch(
        np.concatenate([b.node_features for b in batches]),
        np.concatenate([b.opcode for b in batches]),
        np.concatenate([b.edge_features for b in batches]),
        np.concatenate([b.senders + o for b, o in zip(batches, offsets, strict=True)]),
        np.concatenate([b.receivers + o for b, o in zip(batches, offsets, strict=True)]),
        np.concatenate([b.global_features for b in batches]),
        np.concatenate([b.base for b in batches]),
        np.concatenate([b.n_node for b in batches]),
        np.concatenate([b.n_edge for b in batches]),
    )


def select(batch: KernelBatch, kernels: np.ndarray) -> KernelBatch:
    """The given kernels of a batch (by index), as a batch of their own."""
    kernels = np.asarray(kernels, np.int64)
    node_start = np.concatenate([[0], np.cumsum(batch.n_node)])
    edge_start = np.concatenate([[0], np.cumsum(batch.n_edge)])
    node_idx = np.concatenate(
        [np.arange(node_start[i], node_start[i + 1]) for i in kernels] or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    edge_idx = np.concatenate(
        [np.arange(edge_start[i], edge_start[i + 1]) for i in kernels] or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    remap = np.full(int(node_start[-1]), -1, np.int64)
    remap[node_idx] = np.arange(node_idx.size)
    return KernelBatch(
        batch.node_features[node_idx],
        batch.opcode[node_idx],
        batch.edge_features[edge_idx],
        remap[batch.senders[edge_idx]].astype(np.int32),
        remap[batch.receivers[edge_idx]].astype(np.int32),
        batch.global_features[kernels],
        batch.base[kernels],
        batch.n_node[kernels],
        batch.n_edge[kernels],
    )


def bucket_for(num_nodes: int, num_edges: int, num_graphs: int) -> Bucket:
    """The padded sizes of a batch: one ladder ``(64 L, 128 L, 8 L)`` nodes, edges and
    graphs for the smallest power of two ``L`` that holds the batch and jraph's padding
    graph, so that all batches share a handful of buckets (and compiles)."""
    level = max(
        1,
        next_power_of_two(num_nodes + 1) // 64,
        next_power_of_two(num_edges) // 128,
        next_power_of_two(num_graphs + 1) // 8,
    )
    return Bucket(64 * level, 128 * level, 8 * level)


def pad_batch(batch: KernelBatch, bucket: Bucket | None = None) -> jraph.GraphsTuple:
    """A batch as a padded ``jraph.GraphsTuple`` (the module docstring gives its shapes).

    Args:
      batch: the featurized kernels.
      bucket: the padded sizes (default :func:`bucket_for` the batch).

    Returns:
      The graphs tuple; the real kernels are its first ``batch.num_graphs`` graphs.

    Raises:
      ValueError: a bucket too small for the batch.
    """
    n, e, g = int(batch.n_node.sum()), int(batch.n_edge.sum()), batch.num_graphs
    if bucket is None:
        bucket = bucket_for(n, e, g)
    if bucket.n_node < n + 1 or bucket.n_edge < e or bucket.n_graph < g + 1:
        raise ValueError(f"bucket {bucket} is too small for {n} nodes, {e} edges, {g} graphs")
    pad_n, pad_e, pad_g = bucket.n_node - n, bucket.n_edge - e, bucket.n_graph - g

    def rows(a: np.ndarray, count: int) -> np.ndarray:
        return np.concatenate([a, np.zeros((count, *a.shape[1:]), a.dtype)])

    # jraph's convention: padding nodes and edges go to the first padding graph, padding
    # edges connect the first padding node to itself.
    n_node = np.concatenate([batch.n_node, [pad_n], np.zeros(pad_g - 1, np.int32)])
    n_edge = np.concatenate([batch.n_edge, [pad_e], np.zeros(pad_g - 1, np.int32)])
    return jraph.GraphsTuple(
        nodes={"features": rows(batch.node_features, pad_n), "opcode": rows(batch.opcode, pad_n)},
        edges=rows(batch.edge_features, pad_e),
        senders=np.concatenate([batch.senders, np.full(pad_e, n, np.int32)]).astype(np.int32),
        receivers=np.concatenate([batch.receivers, np.full(pad_e, n, np.int32)]).astype(np.int32),
        globals={"features": rows(batch.global_features, pad_g), "base": rows(batch.base, pad_g)},
        n_node=n_node.astype(np.int32),
        n_edge=n_edge.astype(np.int32),
    )
