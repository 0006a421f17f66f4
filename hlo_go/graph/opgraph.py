"""``OpGraph``: an HLO module's entry computation as a featurized dataflow graph."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from hlo_go.graph.features import FEATURE_NAMES
from hlo_go.graph.layout import NUM_LAYOUT_FEATURES
from hlo_go.graph.vocab import OPCODE_VOCAB

# Values of ``OpGraph.matrix_kind``.
MATRIX_KINDS: tuple[str, ...] = ("none", "dot", "convolution", "grouped_convolution")


class OpGraph(NamedTuple):
    """A module's entry computation, flattened, as numpy arrays (built by ``build_graph``).

    Nodes are the instructions of the flattened entry computation (``call``\\ s
    inlined; see :func:`hlo_go.graph.build_graph`), numbered in the order the
    text defines them, which is a topological order. ``N`` is the node count,
    ``E`` the data-edge count, ``C`` the control-edge count, ``F`` the feature
    count. Every array is read-only.

    Attributes:
      names: ``N`` unique node names: the HLO instruction name for entry
        instructions, ``"call/callee_instr"`` (``/``-joined call-site names, outermost
        first) for instructions inlined from called computations.
      node_index: node name -> node id (the inverse of ``names``).
      opcode: ``int32[N]`` opcode ids in :data:`hlo_go.graph.OPCODE_VOCAB` (0: unknown).
      features: ``float32[N, F]`` node features; column ``j`` is
        :data:`hlo_go.graph.FEATURE_NAMES` ``[j]``, defined in :mod:`hlo_go.graph.features`.
      flops: ``float64[N]`` floating point operations of one run of the module,
        XLA's HloCostAnalysis counting, ``while`` bodies × trip count
        (:mod:`hlo_go.graph.costs`).
      transcendentals: ``float64[N]`` transcendental operations, counted alike.
      bytes_read: ``float64[N]`` bytes the node reads from memory, counted alike.
      bytes_written: ``float64[N]`` bytes the node writes to memory, counted alike.
      bytes_out: ``int64[N]`` bytes of the node's output value: the sum over the
        array leaves of its shape (a tuple counts its elements, a token 0).
      trip_count: ``int64[N]`` trip count of ``while`` nodes (the default where
        unknown; see the ``trip_count_unknown`` feature); 1 for other nodes.
      senders: ``int32[E]`` producer node of each data edge.
      receivers: ``int32[E]`` consumer node of each data edge. There is one edge per
        distinct (producer, consumer) pair: ``add(x, x)`` gives one edge from ``x``.
      edge_bytes: ``int64[E]`` bytes carried by each edge: ``bytes_out[senders]``.
      control_senders: ``int32[C]`` source of each control edge (``control-predecessors``:
        ordering only, no data).
      control_receivers: ``int32[C]`` target of each control edge.
      topo_order: ``int32[N]`` a permutation of the node ids in which every data and
        control edge goes from an earlier to a later node.
      colocation_group: ``int32[N]`` nodes with equal values must run on the same
        device; the value is the smallest node id of the group, so a node that is
        free to go anywhere has its own id (rules in :mod:`hlo_go.graph.colocation`).
      root: node id of the entry computation's root.
      module_name: the HLO module's name.
      op_names: ``N`` ``metadata={op_name=...}`` strings (the framework scope path of each
        node, e.g. ``"jit(f)/transpose(jvp(Model))/block_0/dot_general"``; ``""`` where
        the instruction has none), or ``()`` for a graph built without them. Used by
        placement heuristics that follow the model's layer structure.
      launches: ``int64[N]`` kernels the node launches in one run of the module: 0 for
        views and holders (``tuple``, ``get-tuple-element``, ``parameter``, ...), for a
        ``while`` 1 + trip count × the launches of its body and condition, for a
        ``conditional`` 1 + its largest branch's, 1 for anything else
        (:meth:`hlo_go.graph.costs.LoopCosting.launches`); ``None`` for a graph built
        without them (:attr:`kernel_launches` then gives 1 each).
      matrix_kind: ``int8[N]`` the matrix op a node is or holds (:data:`MATRIX_KINDS`):
        0 none, 1 ``dot``, 2 ``convolution``, 3 grouped or depthwise ``convolution``
        (``feature_group_count`` or ``batch_group_count`` above 1); a fusion takes the
        largest kind in its fused computation. ``None`` for a graph built without it.
      layout_features: ``float32[N, L]`` per-dimension shape and layout facts (minor-most
        dimensions, default layout or not, a matrix product's M, N, K and which operands
        contract over their contiguous dimension); column ``j`` is
        :data:`hlo_go.graph.layout.LAYOUT_FEATURE_NAMES` ``[j]``. Read by the learned
        kernel cost model, not by the policy. ``None`` for a graph built without them.
      window_reads: ``float64[N]`` how many times each node reads each element of its
        first operand where that exceeds once: a ``reduce-window``'s (window tap, output
        position) pairs over the operand's elements (:func:`hlo_go.hlo.cost.window_reads`,
        about 9 for a 3×3 window at stride 1); 1 for every other node. A producer fused
        into such a node is computed once per read. ``None`` for a graph built without
        them (every node reads once).
    """

    names: tuple[str, ...]
    node_index: Mapping[str, int]
    opcode: np.ndarray
    features: np.ndarray
    flops: np.ndarray
    transcendentals: np.ndarray
    bytes_read: np.ndarray
    bytes_written: np.ndarray
    bytes_out: np.ndarray
    trip_count: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    edge_bytes: np.ndarray
    control_senders: np.ndarray
    control_receivers: np.ndarray
    topo_order: np.ndarray
    colocation_group: np.ndarray
    root: int
    module_name: str = ""
    op_names: tuple[str, ...] = ()
    launches: np.ndarray | None = None
    matrix_kind: np.ndarray | None = None
    layout_features: np.ndarray | None = None
    window_reads: np.ndarray | None = None

    @property
    def kernel_launches(self) -> np.ndarray:
        """``int64[N]`` :attr:`launches`, or 1 per node for a graph built without them."""
        if self.launches is None:
            return np.ones(self.num_nodes, dtype=np.int64)
        return self.launches

    @property
    def operand_reads(self) -> np.ndarray:
        """``float64[N]`` :attr:`window_reads`, or 1 per node for a graph built without them."""
        if self.window_reads is None:
            return np.ones(self.num_nodes, dtype=np.float64)
        return self.window_reads

    @property
    def num_nodes(self) -> int:
        """N, the number of nodes."""
        return len(self.names)

    @property
    def num_edges(self) -> int:
        """E, the number of data edges."""
        return int(self.senders.shape[0])

    @property
    def num_features(self) -> int:
        """F, the number of feature columns."""
        return int(self.features.shape[1])

    @property
    def bytes_accessed(self) -> np.ndarray:
        """``float64[N]`` bytes read + bytes written (XLA's "bytes accessed")."""
        return self.bytes_read + self.bytes_written

    @property
    def opcode_names(self) -> tuple[str, ...]:
        """The opcode name of each node (``"<unknown>"`` where not in the vocabulary)."""
        return tuple(OPCODE_VOCAB[i] for i in self.opcode.tolist())

    @property
    def fingerprint(self) -> str:
        """A digest of the graph's structure: 16 hex digits.

        Derived from what decisions are positional over: the node count, each node's
        opcode and output bytes, the data and control edges, trip counts and the root.
        Node names and features are left out, so the same module text parsed again, or
        recompiled by XLA with instructions renamed, gives the same fingerprint.
        :class:`~hlo_go.decisions.Decisions` carry the fingerprint of the graph they were
        made for.
        """
        digest = hashlib.sha256(f"opgraph/{self.num_nodes}/{int(self.root)}".encode())
        for array in (
            self.opcode_names,
            self.bytes_out,
            self.trip_count,
            self.senders,
            self.receivers,
            self.control_senders,
            self.control_receivers,
        ):
            if isinstance(array, tuple):
                digest.update("\0".join(array).encode())
            else:
                digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
            digest.update(b"|")
        return digest.hexdigest()[:16]

    def feature(self, name: str) -> np.ndarray:
        """One feature column by its name in :data:`hlo_go.graph.FEATURE_NAMES`.

        Args:
          name: a feature name, e.g. ``"log_flops"``.

        Returns:
          ``float32[N]``.

        Raises:
          KeyError: unknown feature name.
        """
        try:
            return self.features[:, FEATURE_NAMES.index(name)]
        except ValueError:
            raise KeyError(f"unknown feature {name!r}; known: {FEATURE_NAMES}") from None

    def validate(self) -> OpGraph:
        """Checks the graph's invariants.

        Checked: array shapes and dtypes as documented; node names unique and
        ``node_index`` their inverse; edge ids in range, no self loops or
        repeated (producer, consumer) pairs; ``edge_bytes == bytes_out[senders]``;
        ``topo_order`` a permutation in which every data and control edge goes
        forward (so the graph is acyclic); colocation groups named by their
        smallest member; costs and features finite, costs non-negative.

        Returns:
          The graph itself, so that ``build_graph(m).validate()`` chains.

        Raises:
          ValueError: naming the first invariant that does not hold.
        """
        _validate(self)
        return self


def _fail(message: str) -> None:
    raise ValueError(f"invalid OpGraph: {message}")


def _check_array(graph: OpGraph, field: str, shape: tuple[int, ...], kind: str) -> np.ndarray:
    value = getattr(graph, field)
    if not isinstance(value, np.ndarray):
        _fail(f"{field} is a {type(value).__name__}, not a numpy array")
    if value.shape != shape:
        _fail(f"{field} has shape {value.shape}, expected {shape}")
    if value.dtype.kind != kind[0] or value.dtype.itemsize != int(kind[1:]):
        _fail(f"{field} has dtype {value.dtype}, expected kind {kind!r}")
    return value


def _validate(graph: OpGraph) -> None:
    n = len(graph.names)
    if len(set(graph.names)) != n:
        _fail("node names are not unique")
    if len(graph.node_index) != n or any(
        graph.node_index.get(name) != i for i, name in enumerate(graph.names)
    ):
        _fail("node_index is not the inverse of names")
    for field, kind in (
        ("opcode", "i4"),
        ("flops", "f8"),
        ("transcendentals", "f8"),
        ("bytes_read", "f8"),
        ("bytes_written", "f8"),
        ("bytes_out", "i8"),
        ("trip_count", "i8"),
        ("topo_order", "i4"),
        ("colocation_group", "i4"),
    ):
        _check_array(graph, field, (n,), kind)
    if graph.launches is not None and (_check_array(graph, "launches", (n,), "i8") < 0).any():
        _fail("launches are negative")
    if graph.matrix_kind is not None:
        kinds = _check_array(graph, "matrix_kind", (n,), "i1")
        if ((kinds < 0) | (kinds >= len(MATRIX_KINDS))).any():
            _fail("matrix_kind out of range")
    if graph.layout_features is not None:
        layout = _check_array(graph, "layout_features", (n, NUM_LAYOUT_FEATURES), "f4")
        if not np.isfinite(layout).all():
            _fail("layout_features are not finite")
    if graph.window_reads is not None:
        reads = _check_array(graph, "window_reads", (n,), "f8")
        if not (np.isfinite(reads) & (reads >= 0)).all():
            _fail("window_reads has negative or non-finite values")
    features = _check_array(graph, "features", (n, len(FEATURE_NAMES)), "f4")
    if not np.isfinite(features).all():
        bad = np.argwhere(~np.isfinite(features))[0]
        _fail(f"feature {FEATURE_NAMES[bad[1]]!r} of node {graph.names[bad[0]]!r} is not finite")
    if ((graph.opcode < 0) | (graph.opcode >= len(OPCODE_VOCAB))).any():
        _fail("opcode ids out of the vocabulary's range")
    for field in ("flops", "transcendentals", "bytes_read", "bytes_written"):
        values = getattr(graph, field)
        if not (np.isfinite(values) & (values >= 0)).all():
            _fail(f"{field} has negative or non-finite values")
    if (graph.bytes_out < 0).any() or (graph.trip_count < 0).any():
        _fail("bytes_out or trip_count has negative values")
    if not 0 <= graph.root < max(n, 1):
        _fail(f"root {graph.root} is not a node id")

    e = graph.senders.shape[0] if isinstance(graph.senders, np.ndarray) else -1
    senders = _check_array(graph, "senders", (e,), "i4")
    receivers = _check_array(graph, "receivers", (e,), "i4")
    edge_bytes = _check_array(graph, "edge_bytes", (e,), "i8")
    c = graph.control_senders.shape[0] if isinstance(graph.control_senders, np.ndarray) else -1
    control_senders = _check_array(graph, "control_senders", (c,), "i4")
    control_receivers = _check_array(graph, "control_receivers", (c,), "i4")
    for name, ids in (
        ("senders", senders),
        ("receivers", receivers),
        ("control_senders", control_senders),
        ("control_receivers", control_receivers),
    ):
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            _fail(f"{name} holds ids outside [0, {n})")
    if (senders == receivers).any() or (control_senders == control_receivers).any():
        _fail("an edge goes from a node to itself")
    pairs = senders.astype(np.int64) * max(n, 1) + receivers
    if np.unique(pairs).size != e:
        _fail("a (producer, consumer) pair has more than one data edge")
    if not np.array_equal(edge_bytes, graph.bytes_out[senders]):
        _fail("edge_bytes differ from the producers' bytes_out")

    order = graph.topo_order
    if not np.array_equal(np.sort(order), np.arange(n, dtype=order.dtype)):
        _fail("topo_order is not a permutation of the node ids")
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    for kind, src, dst in (
        ("data", senders, receivers),
        ("control", control_senders, control_receivers),
    ):
        backward = position[src] >= position[dst]
        if backward.any():
            i = int(np.argmax(backward))
            _fail(
                f"{kind} edge {graph.names[src[i]]!r} -> {graph.names[dst[i]]!r} goes backward "
                "in topo_order (the graph has a cycle, or topo_order is wrong)"
            )

    if len(graph.op_names) not in (0, n):
        _fail(f"op_names has {len(graph.op_names)} entries, expected 0 or {n}")

    group = graph.colocation_group
    if n and (group.min() < 0 or group.max() >= n):
        _fail("colocation_group holds ids outside [0, N)")
    if not (group[group] == group).all() or (group > np.arange(n)).any():
        _fail("a colocation group is not named by its smallest member")
